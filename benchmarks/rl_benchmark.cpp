// Benchmarks of tensordict::rl: the collector on CartPole-v1 with the PPO
// actor of examples/torchrl (TorchRL's MLP 4 -> 64 -> 64 -> 2 with Tanh, as
// rl::MLP, then a OneHotCategorical head sampling the action and writing
// its log-prob), one batch per iteration:
//   collector_cartpole_1env     1 env, frames_per_batch 256
//   collector_cartpole_16envs   16 envs, frames_per_batch 1024
// <op>/cpp is rl::Collector::next(); <op>/raw the cheapest loop doing the
// same work without dicts: the same MLP call, then the categorical head as
// plain loops around torch's one exponential_ call (the draw of
// torch.multinomial), the CartPole step on doubles, the results written by
// pointer into [N, T] tensors made for each batch (the batch's thirteen
// leaves, trajectory ids and the root's done flags among them), finished
// envs reset. The Python side, TorchRL 0.14.1's Collector with the same
// actor on GymEnv("CartPole-v1") and on the 16-env vectorized GymEnv, is
// python_torchrl.py. Without grad, on one intra-op thread (main.cpp).
// <op>/paired runs a batch of each side back to back (paired.h): its
// counter cpp_over_raw, the median of the per-pair CPU-time ratios, is the
// ratio to read on a noisy machine.
//   collector_cartpole_16envs/mlp_split
//                               the 16-env /paired work with a thread CPU
//                               clock around every MLP call on both sides
//                               (the same clock, the same call): its
//                               counters inner_ratio and rest_ratio split
//                               C++/raw into the MLP's and the rest's, so
//                               that a change to the step reads apart from
//                               the MLP it shares (docs/performance.md,
//                               "The MLP runs slower inside the
//                               collector"). Its cpp_over_raw includes the
//                               clock's cost: read /paired for the row.
//
//   collector_out_of_tree_env_16envs
//                               the collector_cartpole_16envs work over
//                               "CartPoleKit-v0", gymnasium's CartPole
//                               written below as a user writes an env
//                               outside the library (one sub-env at a time,
//                               rl::BatchedEnv, TENSORDICT_REGISTER_ENV,
//                               made by name); its /raw side is the same
//                               collector over the built-in "CartPole-v1",
//                               so C++/raw is what the out-of-tree env
//                               costs over the built-in one.
//   env_step_cartpole_16envs    one step of CartPole-v1's 16 sub-envs
//                               (step_range into a preallocated "next",
//                               then reset_range of the done ones, as
//                               EnvPool resets them in its step); the
//                               Python side, EnvPool 1.2.5's own step loop
//                               on 16 envs and 1 thread, is python_envs.py.

#include <benchmark/benchmark.h>
#include <tensordict/nn.h>
#include <tensordict/probabilistic.h>
#include <tensordict/rl.h>
#include <tensordict/rl/env_kit.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "paired.h"

namespace {

using tensordict::TensorDict;
namespace nn = tensordict::nn;
namespace rl = tensordict::rl;

rl::MLP make_mlp() {
  return rl::MLP(rl::MLPOptions(4, 2).num_cells({64, 64}));
}

// The actor's head: a OneHotCategorical on "logits", its log-prob kept.
nn::ProbabilisticTensorDictModule make_head() {
  return nn::ProbabilisticTensorDictModule(
      std::vector<std::string>{"logits"},
      "action",
      nn::ProbabilisticTensorDictModuleOptions("OneHotCategorical")
          .return_log_prob(true)
          .default_interaction_type(nn::InteractionType::kRandom));
}

nn::AnyTensorDictModule make_actor(const rl::MLP& mlp) {
  return nn::ProbabilisticTensorDictSequential(
      {nn::TensorDictModule(mlp, {"observation"}, {"logits"}), make_head()});
}

// The MLP call of both sides of mlp_split, with its CPU time added to
// `seconds` (the thread's clock, as paired.h times the sides).
at::Tensor timed_forward(rl::MLP& mlp, const at::Tensor& x, double& seconds) {
  const double start = tensordict_bench::thread_cpu_seconds();
  at::Tensor out = mlp->forward(x);
  seconds += tensordict_bench::thread_cpu_seconds() - start;
  return out;
}

// One step of gymnasium's CartPole-v1 physics on the state `s` (x,
// x_dot, theta, theta_dot) under `force`; returns whether it terminated.
// The raw loop and the kit's CartPole both step with it.
inline bool cartpole_physics(double* s, double force) {
  const double cos = std::cos(s[2]);
  const double sin = std::sin(s[2]);
  const double temp = (force + 0.05 * s[3] * s[3] * sin) / 1.1;
  const double theta_acc =
      (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos * cos / 1.1));
  const double x_acc = temp - 0.05 * theta_acc * cos / 1.1;
  s[0] += 0.02 * s[1];
  s[1] += 0.02 * x_acc;
  s[2] += 0.02 * s[3];
  s[3] += 0.02 * theta_acc;
  return s[0] < -2.4 || s[0] > 2.4 || s[2] < -12 * 2 * M_PI / 360 ||
         s[2] > 12 * 2 * M_PI / 360;
}

// gymnasium's CartPole-v1 on doubles: the baseline's env step.
struct RawCartPole {
  explicit RawCartPole(int64_t n) : state(n * 4), steps(n) {
    for (int64_t i = 0; i < n; ++i) {
      reset(i);
    }
  }
  void reset(int64_t i) {
    std::uniform_real_distribution<double> u(-0.05, 0.05);
    for (int k = 0; k < 4; ++k) {
      state[i * 4 + k] = u(rng);
    }
    steps[i] = 0;
  }
  // Returns {terminated, truncated}.
  std::pair<bool, bool> step(int64_t i, bool push_right) {
    double* s = &state[i * 4];
    const bool terminated = cartpole_physics(s, push_right ? 10.0 : -10.0);
    return {terminated, ++steps[i] >= 500};
  }
  std::vector<double> state;
  std::vector<int64_t> steps;
  std::mt19937_64 rng{0};
};

// gymnasium's CartPole-v1 as a user's env of one sub-env (the built-in's
// arithmetic; resets draw from the kit's per-sub-env stream).
struct CartPoleKit {
  explicit CartPoleKit(const tensordict::Json& kwargs) {
    rl::EnvKwargs args("CartPoleKit-v0", kwargs);
    args.check_all_read();
  }
  std::string name() const {
    return "CartPoleKit-v0";
  }
  rl::Composite observation_spec() const {
    return rl::Composite().set("observation", rl::TensorSpec::unbounded({4}));
  }
  rl::TensorSpec action_spec() const {
    return rl::TensorSpec::one_hot(2);
  }
  void reset(const rl::SubEnvRows& rows, rl::SubEnvRng& rng) {
    std::uniform_real_distribution<double> u(-0.05, 0.05);
    for (double& x : s) {
      x = u(rng);
    }
    steps = 0;
    write(rows);
  }
  rl::StepResult step(const rl::SubEnvRows& rows, rl::SubEnvRng& /*rng*/) {
    rl::StepResult result;
    result.terminated =
        cartpole_physics(s, rows.action_index() == 1 ? 10.0 : -10.0);
    write(rows);
    result.reward = 1.0F;
    result.truncated = ++steps >= 500;
    return result;
  }
  void write(const rl::SubEnvRows& rows) const {
    float* obs = rows.observation<float>();
    for (int k = 0; k < 4; ++k) {
      obs[k] = static_cast<float>(s[k]);
    }
  }
  double s[4] = {0, 0, 0, 0};
  int64_t steps = 0;
};

// The same work as Collector::next() on plain tensors: the same leaves
// (the batch's thirteen: the root's observation, action, logits, log-prob,
// done flags and trajectory ids, and "next"'s observation, reward and done
// flags), in tensors of their own for every batch, as the collector returns
// a batch the caller may keep.
struct RawLoop {
  RawLoop(int64_t envs, int64_t steps_per_batch)
      : n(envs),
        t(steps_per_batch),
        mlp(make_mlp()),
        env(envs),
        obs(torch::empty({envs, 4})),
        root_flags(new bool[static_cast<size_t>(3 * envs)]()),
        traj_ids(static_cast<size_t>(envs)) {
    write_obs(obs.data_ptr<float>(), 4);
    for (int64_t i = 0; i < n; ++i) {
      traj_ids[i] = next_traj_id++;
    }
  }
  // Writes every env's observation at `out`, rows `stride` floats apart.
  void write_obs(float* out, int64_t stride) {
    for (int64_t i = 0; i < n; ++i) {
      for (int k = 0; k < 4; ++k) {
        out[i * stride + k] = static_cast<float>(env.state[i * 4 + k]);
      }
    }
  }
  // Not inlined, so that callgrind can count one batch alone
  // (--toggle-collect='*RawLoop::batch*').
  [[gnu::noinline]] void batch() {
    const auto flags = torch::TensorOptions(torch::kBool);
    const auto ints = torch::TensorOptions(torch::kLong);
    out_obs = torch::empty({n, t, 4});
    out_next_obs = torch::empty({n, t, 4});
    out_action = torch::empty({n, t, 2}, ints);
    out_log_prob = torch::empty({n, t});
    out_logits = torch::empty({n, t, 2});
    out_reward = torch::empty({n, t, 1});
    out_done = torch::empty({n, t, 1}, flags);
    out_terminated = torch::empty({n, t, 1}, flags);
    out_truncated = torch::empty({n, t, 1}, flags);
    out_root_done = torch::empty({n, t, 1}, flags);
    out_root_terminated = torch::empty({n, t, 1}, flags);
    out_root_truncated = torch::empty({n, t, 1}, flags);
    out_traj_ids = torch::empty({n, t}, ints);
    float* o_obs = out_obs.data_ptr<float>();
    float* o_next = out_next_obs.data_ptr<float>();
    int64_t* o_action = out_action.data_ptr<int64_t>();
    float* o_log_prob = out_log_prob.data_ptr<float>();
    float* o_logits = out_logits.data_ptr<float>();
    float* o_reward = out_reward.data_ptr<float>();
    bool* o_done = out_done.data_ptr<bool>();
    bool* o_term = out_terminated.data_ptr<bool>();
    bool* o_trunc = out_truncated.data_ptr<bool>();
    bool* o_root_done = out_root_done.data_ptr<bool>();
    bool* o_root_term = out_root_terminated.data_ptr<bool>();
    bool* o_root_trunc = out_root_truncated.data_ptr<bool>();
    int64_t* o_traj = out_traj_ids.data_ptr<int64_t>();
    bool* root_done = root_flags.get();
    bool* root_term = root_done + n;
    bool* root_trunc = root_term + n;
    for (int64_t step = 0; step < t; ++step) {
      const at::Tensor logits_t = mlp_seconds == nullptr
                                      ? mlp->forward(obs)
                                      : timed_forward(mlp, obs, *mlp_seconds);
      // Allocated as the collector's loops allocate: without the dispatcher.
      const at::Tensor noise_t =
          at::Tensor(
              at::detail::empty_cpu({n, 2}, at::kFloat, false, std::nullopt))
              .exponential_(1);
      const float* logits = logits_t.const_data_ptr<float>();
      const float* noise = noise_t.const_data_ptr<float>();
      const float* ob = obs.const_data_ptr<float>();
      for (int64_t i = 0; i < n; ++i) {
        const int64_t at = i * t + step;
        const float* l = logits + i * 2;
        // log-softmax and softmax of two logits; argmax p / q.
        const float max = std::max(l[0], l[1]);
        const float lse =
            std::log(std::exp(l[0] - max) + std::exp(l[1] - max)) + max;
        const float n0 = l[0] - lse;
        const float n1 = l[1] - lse;
        const float nmax = std::max(n0, n1);
        const float e0 = std::exp(n0 - nmax);
        const float e1 = std::exp(n1 - nmax);
        const float inv = 1.0F / (e0 + e1);
        const int64_t index =
            (e1 * inv) / noise[i * 2 + 1] > (e0 * inv) / noise[i * 2] ? 1 : 0;
        for (int k = 0; k < 4; ++k) {
          o_obs[at * 4 + k] = ob[i * 4 + k];
        }
        o_root_done[at] = root_done[i];
        o_root_term[at] = root_term[i];
        o_root_trunc[at] = root_trunc[i];
        o_traj[at] = traj_ids[i];
        o_logits[at * 2] = l[0];
        o_logits[at * 2 + 1] = l[1];
        o_action[at * 2] = index == 0 ? 1 : 0;
        o_action[at * 2 + 1] = index;
        o_log_prob[at] = index == 0 ? n0 : n1;
        auto [term, trunc] = env.step(i, index == 1);
        o_reward[at] = 1.0F;
        o_term[at] = term;
        o_trunc[at] = trunc;
        o_done[at] = term || trunc;
        // The root's flags of the next step: "next"'s, cleared below for
        // the envs that reset.
        root_done[i] = term || trunc;
        root_term[i] = term;
        root_trunc[i] = trunc;
      }
      write_obs(o_next + step * 4, t * 4);
      for (int64_t i = 0; i < n; ++i) {
        if (o_done[i * t + step]) {
          env.reset(i);
          root_done[i] = root_term[i] = root_trunc[i] = false;
          traj_ids[i] = next_traj_id++;
        }
      }
      write_obs(obs.data_ptr<float>(), 4);
    }
  }
  // Where mlp_split adds the time of each MLP call, when set.
  double* mlp_seconds = nullptr;
  int64_t n;
  int64_t t;
  rl::MLP mlp;
  RawCartPole env;
  at::Tensor obs, out_obs, out_next_obs, out_action, out_log_prob, out_logits,
      out_reward, out_done, out_terminated, out_truncated, out_root_done,
      out_root_terminated, out_root_truncated, out_traj_ids;
  // The root's done flags ([3, N]: done, terminated, truncated) and
  // trajectory ids, carried from step to step as the collector's root.
  std::unique_ptr<bool[]> root_flags;
  std::vector<int64_t> traj_ids;
  int64_t next_traj_id = 0;
};

void collector_cpp(
    benchmark::State& state,
    int64_t envs,
    int64_t frames,
    const char* env = "CartPole-v1") {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  rl::Collector collector(
      rl::make_env(env, envs),
      make_actor(make_mlp()),
      rl::CollectorOptions(frames).seed(0));
  benchmark::DoNotOptimize(collector.next());  // the first reset
  for (auto _ : state) {
    benchmark::DoNotOptimize(collector.next());
  }
  state.SetItemsProcessed(state.iterations() * frames);
}

void collector_raw(benchmark::State& state, int64_t envs, int64_t frames) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  RawLoop loop(envs, frames / envs);
  for (auto _ : state) {
    loop.batch();
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * frames);
}

// Both sides in pairs (paired.h): the collector's batch and the raw
// loop's, back to back on the same thread.
void collector_paired(benchmark::State& state, int64_t envs, int64_t frames) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  rl::Collector collector(
      rl::make_env("CartPole-v1", envs),
      make_actor(make_mlp()),
      rl::CollectorOptions(frames).seed(0));
  RawLoop loop(envs, frames / envs);
  tensordict_bench::run_paired_batches(state, collector, loop, frames);
}

// The /paired work with both sides' MLP calls timed (mlp_split).
void collector_mlp_split(
    benchmark::State& state, int64_t envs, int64_t frames) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  double mlp_seconds = 0;
  rl::MLP mlp = make_mlp();
  rl::Collector collector(
      rl::make_env("CartPole-v1", envs),
      nn::ProbabilisticTensorDictSequential(
          {nn::TensorDictModule(
               [mlp, &mlp_seconds](const at::Tensor& x) mutable {
                 return timed_forward(mlp, x, mlp_seconds);
               },
               {"observation"},
               {"logits"}),
           make_head()}),
      rl::CollectorOptions(frames).seed(0));
  RawLoop loop(envs, frames / envs);
  loop.mlp_seconds = &mlp_seconds;
  tensordict_bench::run_paired_batches_split(
      state,
      collector,
      loop,
      frames,
      [&] { return mlp_seconds; },
      /*split=*/true);
}

void env_step_cpp(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  const int64_t n = 16;
  const auto env = rl::make_env("CartPole-v1", n);
  env->set_seed(0);
  TensorDict root = env->reset();
  // Alternating pushes: episodes end (terminated) and reset as they go.
  root.set("action", torch::one_hot(torch::arange(n) % 2, 2));
  TensorDict next = env->make_next();
  const at::Tensor done = next.get("done");
  int64_t episodes = 0;
  for (auto _ : state) {
    env->step_range(0, n, root, next);
    const bool* flags = done.const_data_ptr<bool>();
    bool any = false;
    for (int64_t i = 0; i < n; ++i) {
      any = any || flags[i];
    }
    if (any) {
      env->reset_range(0, n, flags, next);
      ++episodes;
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["steps_with_resets"] = static_cast<double>(episodes);
}

void register_all() {
  benchmark::RegisterBenchmark("env_step_cartpole_16envs/cpp", env_step_cpp)
      ->Unit(benchmark::kMicrosecond);
  for (auto [name, envs, frames] :
       {std::tuple<const char*, int64_t, int64_t>{
            "collector_cartpole_1env", 1, 256},
        {"collector_cartpole_16envs", 16, 1024}}) {
    const int64_t n = envs;
    const int64_t f = frames;
    benchmark::RegisterBenchmark(
        (std::string(name) + "/cpp").c_str(),
        [n, f](benchmark::State& s) { collector_cpp(s, n, f); })
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(
        (std::string(name) + "/raw").c_str(),
        [n, f](benchmark::State& s) { collector_raw(s, n, f); })
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(
        (std::string(name) + "/paired").c_str(),
        [n, f](benchmark::State& s) { collector_paired(s, n, f); })
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(2.0);
  }
  benchmark::RegisterBenchmark(
      "collector_cartpole_16envs/mlp_split",
      [](benchmark::State& s) { collector_mlp_split(s, 16, 1024); })
      ->Unit(benchmark::kMicrosecond)
      ->MinTime(2.0);
  // Median of 5: the two sides are a few percent apart at most.
  benchmark::RegisterBenchmark(
      "collector_out_of_tree_env_16envs/cpp",
      [](benchmark::State& s) { collector_cpp(s, 16, 1024, "CartPoleKit-v0"); })
      ->Unit(benchmark::kMicrosecond)
      ->Repetitions(5)
      ->ReportAggregatesOnly(true);
  benchmark::RegisterBenchmark(
      "collector_out_of_tree_env_16envs/raw",
      [](benchmark::State& s) { collector_cpp(s, 16, 1024, "CartPole-v1"); })
      ->Unit(benchmark::kMicrosecond)
      ->Repetitions(5)
      ->ReportAggregatesOnly(true);
}

[[maybe_unused]] const bool registered = (register_all(), true);

}  // namespace

TENSORDICT_REGISTER_ENV(
    "CartPoleKit-v0", tensordict::rl::BatchedEnv<CartPoleKit>);
