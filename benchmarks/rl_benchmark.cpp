// Benchmarks of tensordict::rl: the collector on CartPole-v1 with the PPO
// actor of examples/torchrl (an MLP 4 -> 64 -> 64 -> 2 with Tanh, then a
// OneHotCategorical head sampling the action and writing its log-prob), one
// batch per iteration:
//   collector_cartpole_1env     1 env, frames_per_batch 256
//   collector_cartpole_16envs   16 envs, frames_per_batch 1024
// <op>/cpp is rl::Collector::next(); <op>/raw the cheapest loop doing the
// same work on plain tensors: the same MLP and the same sampling ops, the
// CartPole step on doubles, the results copied into preallocated [N, T]
// tensors, finished envs reset. The Python side, TorchRL 0.14.1's Collector
// with the same actor on GymEnv("CartPole-v1") and on the 16-env vectorized
// GymEnv, is python_torchrl.py. Without grad, on one intra-op thread
// (main.cpp).

#include <benchmark/benchmark.h>
#include <tensordict/nn.h>
#include <tensordict/probabilistic.h>
#include <tensordict/rl.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using tensordict::TensorDict;
namespace nn = tensordict::nn;
namespace rl = tensordict::rl;

torch::nn::Sequential make_mlp() {
  return torch::nn::Sequential(
      torch::nn::Linear(4, 64),
      torch::nn::Tanh(),
      torch::nn::Linear(64, 64),
      torch::nn::Tanh(),
      torch::nn::Linear(64, 2));
}

nn::AnyTensorDictModule make_actor(const torch::nn::Sequential& mlp) {
  return nn::ProbabilisticTensorDictSequential(
      {nn::TensorDictModule(mlp, {"observation"}, {"logits"}),
       nn::ProbabilisticTensorDictModule(
           std::vector<std::string>{"logits"},
           "action",
           nn::ProbabilisticTensorDictModuleOptions("OneHotCategorical")
               .return_log_prob(true)
               .default_interaction_type(nn::InteractionType::kRandom))});
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
    const double force = push_right ? 10.0 : -10.0;
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
    const bool terminated = s[0] < -2.4 || s[0] > 2.4 ||
                            s[2] < -12 * 2 * M_PI / 360 ||
                            s[2] > 12 * 2 * M_PI / 360;
    return {terminated, ++steps[i] >= 500};
  }
  std::vector<double> state;
  std::vector<int64_t> steps;
  std::mt19937_64 rng{0};
};

// The same work as Collector::next() on plain tensors.
struct RawLoop {
  RawLoop(int64_t envs, int64_t steps_per_batch)
      : n(envs),
        t(steps_per_batch),
        mlp(make_mlp()),
        env(envs),
        obs(torch::empty({envs, 4})),
        out_obs(torch::empty({envs, t, 4})),
        out_next_obs(torch::empty({envs, t, 4})),
        out_action(torch::empty({envs, t, 2}, torch::kLong)),
        out_log_prob(torch::empty({envs, t})),
        out_logits(torch::empty({envs, t, 2})),
        out_reward(torch::empty({envs, t, 1})),
        out_done(torch::empty({envs, t, 1}, torch::kBool)),
        out_terminated(torch::empty({envs, t, 1}, torch::kBool)),
        out_truncated(torch::empty({envs, t, 1}, torch::kBool)) {
    write_obs();
  }
  void write_obs() {
    auto o = obs.accessor<float, 2>();
    for (int64_t i = 0; i < n; ++i) {
      for (int k = 0; k < 4; ++k) {
        o[i][k] = static_cast<float>(env.state[i * 4 + k]);
      }
    }
  }
  void batch() {
    for (int64_t step = 0; step < t; ++step) {
      const at::Tensor logits = mlp->forward(obs);
      const at::Tensor log_probs = logits.log_softmax(-1);
      const at::Tensor index = torch::multinomial(log_probs.exp(), 1);
      const at::Tensor action =
          torch::nn::functional::one_hot(index.squeeze(-1), 2);
      out_obs.select(1, step).copy_(obs);
      out_logits.select(1, step).copy_(logits);
      out_action.select(1, step).copy_(action);
      out_log_prob.select(1, step).copy_(
          log_probs.gather(-1, index).squeeze(-1));
      auto a = index.accessor<int64_t, 2>();
      at::Tensor reward_t = out_reward.select(1, step);
      auto reward = reward_t.accessor<float, 2>();
      at::Tensor done_t = out_done.select(1, step);
      auto done = done_t.accessor<bool, 2>();
      at::Tensor terminated_t = out_terminated.select(1, step);
      auto terminated = terminated_t.accessor<bool, 2>();
      at::Tensor truncated_t = out_truncated.select(1, step);
      auto truncated = truncated_t.accessor<bool, 2>();
      std::vector<int64_t> finished;
      for (int64_t i = 0; i < n; ++i) {
        auto [term, trunc] = env.step(i, a[i][0] == 1);
        reward[i][0] = 1.0F;
        terminated[i][0] = term;
        truncated[i][0] = trunc;
        done[i][0] = term || trunc;
        if (term || trunc) {
          finished.push_back(i);
        }
      }
      write_obs();
      out_next_obs.select(1, step).copy_(obs);
      for (int64_t i : finished) {
        env.reset(i);
      }
      if (!finished.empty()) {
        write_obs();
      }
    }
  }
  int64_t n;
  int64_t t;
  torch::nn::Sequential mlp;
  RawCartPole env;
  at::Tensor obs, out_obs, out_next_obs, out_action, out_log_prob, out_logits,
      out_reward, out_done, out_terminated, out_truncated;
};

void collector_cpp(benchmark::State& state, int64_t envs, int64_t frames) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  rl::Collector collector(
      rl::make_env("CartPole-v1", envs),
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

void register_all() {
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
  }
}

[[maybe_unused]] const bool registered = (register_all(), true);

}  // namespace
