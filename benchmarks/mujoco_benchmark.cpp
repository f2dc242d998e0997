// Benchmarks of the MuJoCo locomotion envs (envs/mujoco, the
// tensordict_mujoco env library) under the collector, with a TanhNormal
// actor of TorchRL's PPO MuJoCo shape: the float64 observation cast to
// float32, an MLP obs -> 64 -> 64 -> 2 * act with Tanh (rl::MLP), TorchRL's
// NormalParamExtractor (loc, softplus-biased scale), then a TanhNormal head
// sampling the action and writing its log-prob. One batch of 1024 frames
// (64 steps of 16 sub-envs) per iteration:
//   mujoco_halfcheetah_16envs           HalfCheetah-v5, 16 sub-envs
//   mujoco_hopper_16envs                Hopper-v5, 16 sub-envs
// <op>/cpp is rl::Collector::next() on one thread; <op>/raw the same work
// on plain buffers: the same libmujoco calls (ctrl, frame_skip mj_step,
// mj_rnePostConstraint, mj_resetData + noise + mj_forward at a reset), the
// same MLP call, the TanhNormal sample and log-prob as loops around one
// normal_ draw, the results written by pointer into preallocated [N, T]
// tensors.
//   mujoco_actor_16rows                 the actor alone (HalfCheetah's
//                                       sizes, 16 rows, sampling) against
//                                       the raw loop's policy step
//   mujoco_halfcheetah_16envs_2threads  the collector on 2 threads (each a
//   mujoco_hopper_16envs_2threads       range of 8 sub-envs; the policy
//                                       still runs once per step)
// The Python side (TorchRL's Collector on GymEnv with the same actor, and
// EnvPool's own step loop without a policy) is python_mujoco.py.
// Compiled only when the tensordict_mujoco target exists (the
// TENSORDICT_MUJOCO option and a mujoco wheel; see CMakeLists.txt).
// Each row is the median of 5 repetitions, but <op>/paired: a batch of
// each side back to back for at least 4 s (paired.h); its counter
// cpp_over_raw, the median of the per-pair CPU-time ratios, is the ratio to
// read on a noisy machine.

#include <benchmark/benchmark.h>
#include <mujoco/mujoco.h>
#include <tensordict/json.h>
#include <tensordict/nn.h>
#include <tensordict/probabilistic.h>
#include <tensordict/rl.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "locomotion.h"
#include "paired.h"

namespace {

using tensordict::TensorDict;
namespace nn = tensordict::nn;
namespace rl = tensordict::rl;
namespace tdm = tensordict_mujoco;

constexpr int64_t kEnvs = 16;
constexpr int64_t kFrames = 1024;
constexpr int kRepetitions = 5;

// TorchRL's NormalParamExtractor (biased_softplus_1.0): scale =
// softplus(x + bias) + 1e-4, bias = log(expm1(1 - 1e-4)), so that x = 0
// gives a scale of 1.
const double kScaleBias = std::log(std::expm1(1.0 - 1e-4));
constexpr double kMinScale = 1e-4;

// The actor's deterministic part: observation -> (loc, scale).
struct GaussianNetImpl : torch::nn::Module {
  GaussianNetImpl(int64_t obs_dim, int64_t act_dim)
      : mlp(register_module(
            "mlp",
            rl::MLP(
                rl::MLPOptions(obs_dim, 2 * act_dim).num_cells({64, 64})))) {}
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& observation) {
    const at::Tensor out = mlp->forward(observation.to(at::kFloat));
    auto halves = out.chunk(2, -1);
    return {halves[0], at::softplus(halves[1] + kScaleBias) + kMinScale};
  }
  rl::MLP mlp;
};
TORCH_MODULE(GaussianNet);

nn::AnyTensorDictModule make_actor(const GaussianNet& net) {
  return nn::ProbabilisticTensorDictSequential(
      {nn::TensorDictModule(net, {"observation"}, {"loc", "scale"}),
       nn::ProbabilisticTensorDictModule(
           std::vector<std::string>{"loc", "scale"},
           "action",
           nn::ProbabilisticTensorDictModuleOptions("TanhNormal")
               .return_log_prob(true)
               .default_interaction_type(nn::InteractionType::kRandom))});
}

std::string env_name(tdm::Task task) {
  return task == tdm::Task::kHopper ? "Hopper-v5" : "HalfCheetah-v5";
}

// Gymnasium's HalfCheetah-v5 or Hopper-v5 on plain buffers, with the
// default keyword arguments: the baseline's env. Resets draw their noise
// from std::mt19937_64 (the env's NumPy streams are the env's business).
struct RawLocomotion {
  RawLocomotion(tdm::Task task, int64_t n) : task(task), n(n) {
    const std::string xml =
        tdm::LocomotionEnv(task, 1, tensordict::Json::object()).xml_file();
    // MuJoCo's default handler would print the model's warnings and write
    // MUJOCO_LOG.TXT; the env passes them on as a c10 warning instead.
    void (*previous)(const char*) = mju_user_warning;
    mju_user_warning = [](const char*) {};
    char error[1000] = "";
    model = mj_loadXML(xml.c_str(), nullptr, error, sizeof(error));
    mju_user_warning = previous;
    TORCH_CHECK(model != nullptr, "could not load ", xml, ": ", error);
    hopper = task == tdm::Task::kHopper;
    frame_skip = hopper ? 4 : 5;
    ctrl_cost_weight = hopper ? 1e-3 : 0.1;
    noise_scale = hopper ? 5e-3 : 0.1;
    dt = model->opt.timestep * frame_skip;
    obs_dim = model->nq - 1 + model->nv;
    act_dim = model->nu;
    for (int64_t i = 0; i < n; ++i) {
      data.push_back(mj_makeData(model));
      steps.push_back(0);
      reset(i);
    }
  }
  ~RawLocomotion() {
    for (mjData* d : data) {
      mj_deleteData(d);
    }
    mj_deleteModel(model);
  }
  RawLocomotion(const RawLocomotion&) = delete;
  RawLocomotion& operator=(const RawLocomotion&) = delete;

  void reset(int64_t i) {
    mjData* d = data[static_cast<size_t>(i)];
    mj_resetData(model, d);
    std::uniform_real_distribution<double> uniform(-noise_scale, noise_scale);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (int k = 0; k < model->nq; ++k) {
      d->qpos[k] = model->qpos0[k] + uniform(rng);
    }
    for (int k = 0; k < model->nv; ++k) {
      d->qvel[k] = hopper ? uniform(rng) : noise_scale * normal(rng);
    }
    mj_forward(model, d);
    steps[static_cast<size_t>(i)] = 0;
  }
  // Writes sub-env i's observation (qpos[1:], qvel, clipped for Hopper).
  void write_obs(int64_t i, double* out) const {
    const mjData* d = data[static_cast<size_t>(i)];
    int64_t k = 0;
    for (int j = 1; j < model->nq; ++j) {
      out[k++] = d->qpos[j];
    }
    for (int j = 0; j < model->nv; ++j) {
      out[k++] =
          hopper ? std::min(std::max(d->qvel[j], -10.0), 10.0) : d->qvel[j];
    }
  }
  bool healthy(const mjData* d) const {
    for (int j = 2; j < model->nq; ++j) {
      if (!(-100.0 < d->qpos[j] && d->qpos[j] < 100.0)) {
        return false;
      }
    }
    for (int j = 0; j < model->nv; ++j) {
      if (!(-100.0 < d->qvel[j] && d->qvel[j] < 100.0)) {
        return false;
      }
    }
    return 0.7 < d->qpos[1] && -0.2 < d->qpos[2] && d->qpos[2] < 0.2;
  }
  // Steps sub-env i; returns {reward, terminated, truncated, x_velocity}.
  std::tuple<float, bool, bool, double> step(int64_t i, const float* action) {
    mjData* d = data[static_cast<size_t>(i)];
    const double before = d->qpos[0];
    float squares = 0.0F;
    for (int j = 0; j < act_dim; ++j) {
      d->ctrl[j] = static_cast<double>(action[j]);
      squares += action[j] * action[j];
    }
    for (int k = 0; k < frame_skip; ++k) {
      mj_step(model, d);
    }
    mj_rnePostConstraint(model, d);
    const double x_velocity = (d->qpos[0] - before) / dt;
    const double ctrl_cost =
        static_cast<double>(static_cast<float>(ctrl_cost_weight) * squares);
    bool terminated = false;
    double reward = x_velocity - ctrl_cost;
    if (hopper) {
      const bool ok = healthy(d);
      reward += ok ? 1.0 : 0.0;
      terminated = !ok;
    }
    const bool truncated = ++steps[static_cast<size_t>(i)] >= 1000;
    return {static_cast<float>(reward), terminated, truncated, x_velocity};
  }

  tdm::Task task;
  int64_t n;
  mjModel* model = nullptr;
  std::vector<mjData*> data;
  std::vector<int64_t> steps;
  bool hopper = false;
  int frame_skip = 5;
  double ctrl_cost_weight = 0.1;
  double noise_scale = 0.1;
  double dt = 0.0;
  int64_t obs_dim = 0;
  int64_t act_dim = 0;
  std::mt19937_64 rng{0};
};

// The actor's head on one row, as loops: the extractor's scale from the
// MLP's `out` (2 * a floats), the TanhNormal sample from the standard
// normal draws `eps`, written to `loc`, `scale` and `action`; returns the
// sample's log-prob, as TanhNormal computes it (atanh back, the Normal's
// log-density minus tanh's log-Jacobian, summed over the action).
float tanh_normal_row(
    const float* out,
    const float* eps,
    int64_t a,
    float* loc,
    float* scale,
    float* action) {
  const float log_sqrt_2pi =
      std::log(std::sqrt(2.0F * static_cast<float>(M_PI)));
  const float log2 = std::log(2.0F);
  const float lim = 1.0F - 1e-6F;
  float log_prob = 0.0F;
  for (int64_t j = 0; j < a; ++j) {
    const float l = out[j];
    const float pre = out[a + j] + static_cast<float>(kScaleBias);
    const float sc = (pre > 20.0F ? pre : std::log1p(std::exp(pre))) +
                     static_cast<float>(kMinScale);
    const float y = std::min(std::max(std::tanh(l + eps[j] * sc), -lim), lim);
    const float x = std::atanh(y);
    const float z = (x - l) / sc;
    const float softplus = std::log1p(std::exp(-2.0F * x));
    log_prob += -0.5F * z * z - std::log(sc) - log_sqrt_2pi -
                2.0F * (log2 - x - softplus);
    loc[j] = l;
    scale[j] = sc;
    action[j] = y;
  }
  return log_prob;
}

// The same work as Collector::next() on plain buffers.
struct RawLoop {
  RawLoop(tdm::Task task, int64_t envs, int64_t steps_per_batch)
      : env(task, envs),
        n(envs),
        t(steps_per_batch),
        o(env.obs_dim),
        a(env.act_dim),
        net(o, a),
        obs(torch::empty({envs, o}, torch::kDouble)),
        out_obs(torch::empty({envs, t, o}, torch::kDouble)),
        out_next_obs(torch::empty({envs, t, o}, torch::kDouble)),
        out_loc(torch::empty({envs, t, a})),
        out_scale(torch::empty({envs, t, a})),
        out_action(torch::empty({envs, t, a})),
        out_log_prob(torch::empty({envs, t})),
        out_reward(torch::empty({envs, t, 1})),
        out_x_velocity(torch::empty({envs, t}, torch::kDouble)),
        out_done(torch::empty({envs, t, 1}, torch::kBool)),
        out_terminated(torch::empty({envs, t, 1}, torch::kBool)),
        out_truncated(torch::empty({envs, t, 1}, torch::kBool)) {
    for (int64_t i = 0; i < n; ++i) {
      env.write_obs(i, obs.data_ptr<double>() + i * o);
    }
  }
  // Not inlined, so that a profiler can count one batch alone.
  [[gnu::noinline]] void batch() {
    double* o_obs = out_obs.data_ptr<double>();
    double* o_next = out_next_obs.data_ptr<double>();
    float* o_loc = out_loc.data_ptr<float>();
    float* o_scale = out_scale.data_ptr<float>();
    float* o_action = out_action.data_ptr<float>();
    float* o_log_prob = out_log_prob.data_ptr<float>();
    float* o_reward = out_reward.data_ptr<float>();
    double* o_xv = out_x_velocity.data_ptr<double>();
    bool* o_done = out_done.data_ptr<bool>();
    bool* o_term = out_terminated.data_ptr<bool>();
    bool* o_trunc = out_truncated.data_ptr<bool>();
    std::vector<float> act(static_cast<size_t>(a));
    for (int64_t step = 0; step < t; ++step) {
      // The same MLP call as the actor's.
      const at::Tensor out_t = net->mlp->forward(obs.to(at::kFloat));
      const at::Tensor eps_t =
          at::Tensor(
              at::detail::empty_cpu({n, a}, at::kFloat, false, std::nullopt))
              .normal_();
      const float* out = out_t.const_data_ptr<float>();
      const float* eps = eps_t.const_data_ptr<float>();
      const double* ob = obs.const_data_ptr<double>();
      for (int64_t i = 0; i < n; ++i) {
        const int64_t at = i * t + step;
        o_log_prob[at] = tanh_normal_row(
            out + i * 2 * a,
            eps + i * a,
            a,
            o_loc + at * a,
            o_scale + at * a,
            o_action + at * a);
        for (int64_t j = 0; j < a; ++j) {
          act[static_cast<size_t>(j)] = o_action[at * a + j];
        }
        for (int64_t k = 0; k < o; ++k) {
          o_obs[at * o + k] = ob[i * o + k];
        }
        auto [reward, term, trunc, xv] = env.step(i, act.data());
        o_reward[at] = reward;
        o_xv[at] = xv;
        o_term[at] = term;
        o_trunc[at] = trunc;
        o_done[at] = term || trunc;
        env.write_obs(i, o_next + at * o);
      }
      double* root = obs.data_ptr<double>();
      for (int64_t i = 0; i < n; ++i) {
        if (o_done[i * t + step]) {
          env.reset(i);
        }
        env.write_obs(i, root + i * o);
      }
    }
  }
  RawLocomotion env;
  int64_t n;
  int64_t t;
  int64_t o;
  int64_t a;
  GaussianNet net;
  at::Tensor obs, out_obs, out_next_obs, out_loc, out_scale, out_action,
      out_log_prob, out_reward, out_x_velocity, out_done, out_terminated,
      out_truncated;
};

// The collector of the rows: the task's env, 16 sub-envs, the actor sized
// to it.
std::unique_ptr<rl::Collector> make_collector(tdm::Task task, int64_t threads) {
  auto env = rl::make_env(env_name(task), kEnvs);
  const int64_t obs_dim =
      env->observation_spec().get("observation").shape().at(0);
  const int64_t act_dim = env->action_spec().shape().at(0);
  return std::make_unique<rl::Collector>(
      std::move(env),
      make_actor(GaussianNet(obs_dim, act_dim)),
      rl::CollectorOptions(kFrames).num_threads(threads).seed(0));
}

void mujoco_cpp(benchmark::State& state, tdm::Task task, int64_t threads) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  const std::unique_ptr<rl::Collector> collector =
      make_collector(task, threads);
  benchmark::DoNotOptimize(collector->next());  // the first reset
  for (auto _ : state) {
    benchmark::DoNotOptimize(collector->next());
  }
  state.SetItemsProcessed(state.iterations() * kFrames);
}

void mujoco_raw(benchmark::State& state, tdm::Task task) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  RawLoop loop(task, kEnvs, kFrames / kEnvs);
  loop.batch();
  for (auto _ : state) {
    loop.batch();
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kFrames);
}

// Both sides in pairs (paired.h): the collector's batch and the raw
// loop's, back to back on the same thread.
void mujoco_paired(benchmark::State& state, tdm::Task task) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  const std::unique_ptr<rl::Collector> collector = make_collector(task, 1);
  RawLoop loop(task, kEnvs, kFrames / kEnvs);
  tensordict_bench::run_paired_batches(state, *collector, loop, kFrames);
}

// The actor alone, one call on 16 observations, sampling.
void actor_cpp(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  nn::AnyTensorDictModule actor = make_actor(GaussianNet(17, 6));
  TensorDict td(
      {{"observation", torch::randn({kEnvs, 17}, torch::kDouble)}}, {kEnvs});
  nn::SetInteractionType random(nn::InteractionType::kRandom);
  for (auto _ : state) {
    benchmark::DoNotOptimize(actor(td));
  }
  state.SetItemsProcessed(state.iterations() * kEnvs);
}

// The raw loop's policy step alone: the MLP call, one normal_ draw, the
// head as loops into preallocated outputs.
void actor_raw(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  GaussianNet net(17, 6);
  const at::Tensor obs = torch::randn({kEnvs, 17}, torch::kDouble);
  at::Tensor loc = torch::empty({kEnvs, 6});
  at::Tensor scale = torch::empty({kEnvs, 6});
  at::Tensor action = torch::empty({kEnvs, 6});
  at::Tensor log_prob = torch::empty({kEnvs});
  for (auto _ : state) {
    const at::Tensor out = net->mlp->forward(obs.to(at::kFloat));
    const at::Tensor eps =
        at::Tensor(
            at::detail::empty_cpu({kEnvs, 6}, at::kFloat, false, std::nullopt))
            .normal_();
    for (int64_t i = 0; i < kEnvs; ++i) {
      log_prob.data_ptr<float>()[i] = tanh_normal_row(
          out.const_data_ptr<float>() + i * 12,
          eps.const_data_ptr<float>() + i * 6,
          6,
          loc.data_ptr<float>() + i * 6,
          scale.data_ptr<float>() + i * 6,
          action.data_ptr<float>() + i * 6);
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kEnvs);
}

void register_all() {
  benchmark::RegisterBenchmark("mujoco_actor_16rows/cpp", actor_cpp)
      ->Unit(benchmark::kMicrosecond)
      ->Repetitions(kRepetitions)
      ->ReportAggregatesOnly(true);
  benchmark::RegisterBenchmark("mujoco_actor_16rows/raw", actor_raw)
      ->Unit(benchmark::kMicrosecond)
      ->Repetitions(kRepetitions)
      ->ReportAggregatesOnly(true);
  for (auto [name, task] :
       {std::pair<const char*, tdm::Task>{
            "mujoco_halfcheetah_16envs", tdm::Task::kHalfCheetah},
        {"mujoco_hopper_16envs", tdm::Task::kHopper}}) {
    const tdm::Task k = task;
    const std::string op = name;
    benchmark::RegisterBenchmark(
        (op + "/cpp").c_str(),
        [k](benchmark::State& s) { mujoco_cpp(s, k, 1); })
        ->Unit(benchmark::kMillisecond)
        ->Repetitions(kRepetitions)
        ->ReportAggregatesOnly(true);
    benchmark::RegisterBenchmark(
        (op + "/raw").c_str(), [k](benchmark::State& s) { mujoco_raw(s, k); })
        ->Unit(benchmark::kMillisecond)
        ->Repetitions(kRepetitions)
        ->ReportAggregatesOnly(true);
    benchmark::RegisterBenchmark(
        (op + "/paired").c_str(),
        [k](benchmark::State& s) { mujoco_paired(s, k); })
        ->Unit(benchmark::kMillisecond)
        ->MinTime(4.0);
    benchmark::RegisterBenchmark(
        (op + "_2threads/cpp").c_str(),
        [k](benchmark::State& s) { mujoco_cpp(s, k, 2); })
        ->Unit(benchmark::kMillisecond)
        ->Repetitions(kRepetitions)
        ->ReportAggregatesOnly(true)
        ->UseRealTime();
  }
}

[[maybe_unused]] const bool registered = (register_all(), true);

}  // namespace
