// Runs a MuJoCo env of tensordict_mujoco on given actions and writes what
// it returns, for mujoco_vs_gymnasium.py to compare with gymnasium step by
// step. Usage:
//   mujoco_rollout ENV NUM_ENVS SEED STEPS NU ACTIONS OUT [KWARGS_JSON]
// ACTIONS holds float32 [STEPS, NUM_ENVS, NU]. The env is seeded with
// SEED and reset; each step writes the action, steps, and resets the
// sub-envs that are done (a "_reset" mask, as TorchRL's
// step_and_maybe_reset does). OUT receives, as raw little-endian arrays:
// the first reset's observation float64 [N, D] and x_velocity float64 [N],
// then per step: ("next", "observation") [N, D], ("next", "x_velocity")
// [N], reward float32 [N], the float64 reward gymnasium returns [N],
// terminated and truncated uint8 [N], and the
// observation after the partial reset [N, D].

#include <tensordict/json.h>
#include <tensordict/rl.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "locomotion.h"

namespace rl = tensordict::rl;
using tensordict::TensorDict;

namespace {

void write(std::ofstream& out, const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  out.write(
      static_cast<const char*>(c.const_data_ptr()),
      static_cast<std::streamsize>(c.nbytes()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 8) {
    std::cerr << "usage: mujoco_rollout ENV NUM_ENVS SEED STEPS NU ACTIONS OUT "
                 "[KWARGS_JSON]\n";
    return 2;
  }
  try {
    const std::string name = argv[1];
    const int64_t n = std::stoll(argv[2]);
    const uint64_t seed = std::stoull(argv[3]);
    const int64_t steps = std::stoll(argv[4]);
    const int64_t nu = std::stoll(argv[5]);
    const tensordict::Json kwargs = argc > 8 ? tensordict::Json::parse(argv[8])
                                             : tensordict::Json::object();
    at::Tensor actions = torch::empty({steps, n, nu}, torch::kFloat);
    {
      std::ifstream in(argv[6], std::ios::binary);
      in.read(
          static_cast<char*>(actions.data_ptr()),
          static_cast<std::streamsize>(actions.nbytes()));
      if (!in) {
        std::cerr << "mujoco_rollout: " << argv[6] << " is too short\n";
        return 2;
      }
    }
    auto env = rl::make_env(name, n, kwargs);
    const auto* locomotion =
        dynamic_cast<const tensordict_mujoco::LocomotionEnv*>(env.get());
    if (locomotion == nullptr) {
      std::cerr << "mujoco_rollout: " << name << " is not a LocomotionEnv\n";
      return 2;
    }
    env->set_seed(seed);
    TensorDict td = env->reset();
    std::ofstream out(argv[7], std::ios::binary);
    write(out, td.get("observation"));
    write(out, td.get("x_velocity"));
    for (int64_t t = 0; t < steps; ++t) {
      td.set("action", actions[t]);
      td = env->step(td);
      const TensorDict next = td.get_tensordict("next");
      write(out, next.get("observation"));
      write(out, next.get("x_velocity"));
      write(out, next.get("reward").reshape({n}));
      write(out, locomotion->last_rewards());
      write(out, next.get("terminated").reshape({n}).to(torch::kUInt8));
      write(out, next.get("truncated").reshape({n}).to(torch::kUInt8));
      TensorDict root = rl::step_mdp(td);
      const at::Tensor done = root.get("done").reshape({n});
      if (done.any().item<bool>()) {
        root.set("_reset", done.clone());
        root = env->reset(root);
      }
      write(out, root.get("observation"));
      td = root;
    }
  } catch (const std::exception& e) {
    std::cerr << "mujoco_rollout: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
