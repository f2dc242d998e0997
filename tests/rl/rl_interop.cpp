// Writes what tests/rl's Python scripts compare with gymnasium and TorchRL
// 0.14.1, as memmapped TensorDicts:
//   rl_interop cartpole OUT   a CartPole trace: per step and sub-env the
//                             float64 state before, the action, what the
//                             step gave, and the state after
//   rl_interop collector OUT  collector batches (4 sub-envs, 40 frames a
//                             batch, policy_version tracked, the weights
//                             updated after the second batch) and the
//                             policy's weights before and after
//   rl_interop aoti DIR       collector batches with DIR/policy.pt2 (an
//                             AOTInductor package of an argmax policy) as
//                             the policy: weights DIR/weights_a, then
//                             DIR/weights_b through update_policy_weights_

#include <ATen/ops/one_hot.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <tensordict/aoti.h>
#include <tensordict/memmap.h>
#include <tensordict/nn.h>
#include <tensordict/rl.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace {

using tensordict::MemmapOptions;
using tensordict::TensorDict;
namespace rl = tensordict::rl;

constexpr int64_t kTraceEnvs = 6;
constexpr int64_t kTraceSteps = 3000;

// Sub-envs 0 and 1 balance the pole (so episodes reach the 500-step time
// limit); the others act at random (so they terminate).
at::Tensor trace_actions(const at::Tensor& state) {
  const at::Tensor x = state.select(1, 0);
  const at::Tensor x_dot = state.select(1, 1);
  const at::Tensor theta = state.select(1, 2);
  const at::Tensor theta_dot = state.select(1, 3);
  at::Tensor index =
      (theta * 10 + theta_dot + x * 0.1 + x_dot * 0.5).gt(0).to(at::kLong);
  index.narrow(0, 2, kTraceEnvs - 2)
      .copy_(at::randint(2, {kTraceEnvs - 2}, at::kLong));
  return at::one_hot(index, 2);
}

void cartpole(const std::string& out) {
  torch::manual_seed(7);
  rl::CartPoleEnv env(kTraceEnvs);
  env.set_seed(123);
  TensorDict td = env.reset();
  std::vector<at::Tensor> before, actions, after, obs, reward, terminated,
      truncated, done;
  for (int64_t t = 0; t < kTraceSteps; ++t) {
    before.push_back(env.state());
    td.set("action", trace_actions(before.back()));
    env.step(td);
    after.push_back(env.state());
    actions.push_back(td.get("action"));
    obs.push_back(td.get({"next", "observation"}));
    reward.push_back(td.get({"next", "reward"}));
    terminated.push_back(td.get({"next", "terminated"}));
    truncated.push_back(td.get({"next", "truncated"}));
    done.push_back(td.get({"next", "done"}));
    td = rl::step_mdp(td);
    if (td.get("done").any().item<bool>()) {
      td.set("_reset", td.get("done").clone());
      td = env.reset(td);
    }
  }
  TensorDict trace({kTraceSteps, kTraceEnvs});
  trace.set("state_before", at::stack(before));
  trace.set("action", at::stack(actions));
  trace.set("state_after", at::stack(after));
  trace.set("observation", at::stack(obs));
  trace.set("reward", at::stack(reward));
  trace.set("terminated", at::stack(terminated));
  trace.set("truncated", at::stack(truncated));
  trace.set("done", at::stack(done));
  trace.memmap_(MemmapOptions(out + "/cartpole"));
}

struct ArgmaxPolicyImpl : torch::nn::Module {
  ArgmaxPolicyImpl()
      : linear(register_module("linear", torch::nn::Linear(4, 2))) {}
  at::Tensor forward(const at::Tensor& observation) {
    return at::one_hot(linear(observation).argmax(-1), 2);
  }
  torch::nn::Linear linear;
};
TORCH_MODULE(ArgmaxPolicy);

void collector(const std::string& out) {
  torch::manual_seed(0);
  tensordict::nn::TensorDictModule policy(
      ArgmaxPolicy(), {"observation"}, {"action"});
  TensorDict::from_module(*policy.ptr())
      .clone()
      .memmap_(MemmapOptions(out + "/weights_0"));
  torch::manual_seed(1);
  ArgmaxPolicy other;
  const TensorDict new_weights =
      TensorDict::from_module(
          *tensordict::nn::TensorDictModule(other, {"observation"}, {"action"})
               .ptr())
          .clone();
  new_weights.clone().memmap_(MemmapOptions(out + "/weights_1"));
  rl::Collector collector(
      rl::make_env("CartPole-v1", 4),
      policy,
      rl::CollectorOptions(40)
          .total_frames(200)
          .track_policy_version(true)
          .seed(5));
  int index = 0;
  for (TensorDict& batch : collector) {
    batch.clone().memmap_(
        MemmapOptions(out + "/batch_" + std::to_string(index)));
    if (++index == 2) {
      collector.update_policy_weights_(new_weights);
    }
  }
}

void aoti(const std::string& dir) {
  tensordict::nn::AOTIModule policy(dir + "/policy.pt2");
  policy->load_weights(TensorDict::load_memmap(dir + "/weights_a"));
  rl::Collector collector(
      rl::make_env("CartPole-v1", 4),
      policy,
      rl::CollectorOptions(16).track_policy_version(true).seed(0));
  collector.next()->clone().memmap_(MemmapOptions(dir + "/batch_0"));
  // Weights that are not the package's are refused, naming the key.
  TensorDict wrong = TensorDict::load_memmap(dir + "/weights_b").clone();
  wrong.set({"module", "extra"}, at::zeros({1}));
  try {
    collector.update_policy_weights_(wrong);
    std::cout << "refused: nothing\n";
  } catch (const c10::Error& e) {
    std::cout << "refused: " << e.msg() << "\n";
  }
  collector.update_policy_weights_(
      TensorDict::load_memmap(dir + "/weights_b").clone());
  collector.next()->clone().memmap_(MemmapOptions(dir + "/batch_1"));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: rl_interop cartpole|collector|aoti OUT\n";
    return 2;
  }
  const std::string mode = argv[1];
  try {
    if (mode == "cartpole") {
      cartpole(argv[2]);
    } else if (mode == "collector") {
      collector(argv[2]);
    } else if (mode == "aoti") {
      aoti(argv[2]);
    } else {
      std::cerr << "unknown mode " << mode << "\n";
      return 2;
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
