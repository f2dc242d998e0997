// Compiled, never run (with header_cost_check.cpp): proves that the env
// author's kit, <tensordict/rl/env_kit.h>, stays free of tensordict/nn.h
// and the torch::nn headers under it while an env written one sub-env at a
// time is batched, made and rolled out with random actions. An env's
// source (examples/custom_env/corridor_env.cpp) took 14 s to compile with
// them and takes 3.4 s without (gcc 12, -O3).
// torch/nn/pimpl.h, which nn.h includes, defines TORCH_MODULE.

#include <tensordict/rl/env_kit.h>

#include <cstdint>
#include <memory>
#include <string>

#ifdef TORCH_MODULE
#error \
    "rl/env_kit.h pulls in torch::nn: an env's source should not pay for modules"
#endif

namespace header_cost_env_kit {

namespace rl = tensordict::rl;

struct Counter {
  explicit Counter(const tensordict::Json& kwargs) {
    rl::EnvKwargs args("Counter-v0", kwargs);
    limit = args.get<int64_t>("limit", 3);
    args.check_all_read();
  }
  std::string name() const {
    return "Counter-v0";
  }
  rl::Composite observation_spec() const {
    return rl::Composite().set("observation", rl::TensorSpec::unbounded({1}));
  }
  rl::TensorSpec action_spec() const {
    return rl::TensorSpec::one_hot(2);
  }
  void reset(const rl::SubEnvRows& rows, rl::SubEnvRng& /*rng*/) {
    count = 0;
    rows.observation<float>()[0] = 0.0F;
  }
  rl::StepResult step(const rl::SubEnvRows& rows, rl::SubEnvRng& /*rng*/) {
    count += rows.action_index();
    rows.observation<float>()[0] = static_cast<float>(count);
    rl::StepResult result;
    result.reward = 1.0F;
    result.truncated = count >= limit;
    return result;
  }
  int64_t limit = 3;
  int64_t count = 0;
};

int64_t roll_out_random_actions() {
  const std::shared_ptr<rl::EnvBase> env = rl::make_env("Counter-v0", 2);
  const tensordict::TensorDict steps =
      env->rollout(4, rl::RolloutOptions().break_when_any_done(false));
  return steps.batch_size().back() + env->rollout(2).numel();
}

}  // namespace header_cost_env_kit

TENSORDICT_REGISTER_ENV(
    "Counter-v0", tensordict::rl::BatchedEnv<header_cost_env_kit::Counter>);
