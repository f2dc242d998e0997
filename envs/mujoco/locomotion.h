#pragma once

// Gymnasium 1.4.0's MuJoCo locomotion envs (HalfCheetah-v5, Hopper-v5,
// Walker2d-v5, Ant-v5) as an env library of this project, built as a user
// builds one: only the public headers of <tensordict/...>, registered by
// name (see README.md here). Loading the library (rl::load_env_library) or
// linking it registers the four envs; this header is for programs that
// link it and want the class or the version check.
//
// NOTE [Stepping as Gymnasium does]
// Each sub-env owns an mjData over one shared mjModel, and does what
// gymnasium's MujocoEnv does with numpy, operation for operation:
// - reset: mj_resetData, then qpos = qpos0 + uniform(-s, s, nq) and qvel =
//   0 + s * standard_normal(nv) (HalfCheetah, Ant) or + uniform(-s, s, nv)
//   (Hopper, Walker2d), drawn from the sub-env's own NumPy generator
//   (rl::NumpyGenerator), then mj_forward. Sub-env i of an env seeded s is
//   reseeded with s + i at its first reset after `set_seed` (Gymnasium's
//   vector convention, `reset(seed=s + i)`); later resets continue its
//   stream, as `reset()` without a seed does.
// - step: ctrl = the float32 action widened to double, frame_skip times
//   mj_step, then mj_rnePostConstraint (which fills cfrc_ext).
// - reward: the control cost is float32 arithmetic, as NumPy 2 computes
//   `weight * np.sum(np.square(action))` on a float32 action (NEP 50: the
//   Python float weight is weak), summed in NumPy's order; every other
//   term is float64, and the reward is rounded to float32 once, as
//   TorchRL's GymEnv stores it.
// This file is compiled without floating-point contraction (no FMA), so
// each operation rounds as numpy's does.

#include <tensordict/json.h>
#include <tensordict/rl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tensordict_mujoco {

/// The four tasks.
enum class Task { kHalfCheetah, kHopper, kWalker2d, kAnt };

/// Returns an empty string if a libmujoco of version `runtime` (as
/// `mj_version()`, with `runtime_string` as `mj_versionString()`) may
/// serve a library built against the headers of version `header`
/// (`mjVERSION_HEADER`); otherwise the refusal, naming both versions.
std::string mujoco_version_mismatch(
    int header, int runtime, const std::string& runtime_string);

/// Throws ValueError (`mujoco_version_mismatch`'s message) unless the
/// libmujoco loaded is the version this library was built against.
void check_mujoco_version();

/// One of the four envs, batched: `num_envs` sub-envs over one model. See
/// NOTE [Stepping as Gymnasium does]. Keys: "observation" float64
/// [obs_dim], "x_velocity" float64 [] (gymnasium's info["x_velocity"]),
/// action float32 Bounded by the model's ctrlrange.
class LocomotionEnv : public tensordict::rl::EnvBase {
 public:
  /// Makes the env; reads gymnasium's v5 keyword arguments of `task`
  /// (and TimeLimit's `max_episode_steps`). Throws ValueError for an
  /// unknown or mistyped argument, a model that does not load (naming the
  /// file and MuJoCo's message) or a libmujoco of another version.
  LocomotionEnv(Task task, int64_t num_envs, const tensordict::Json& kwargs);
  ~LocomotionEnv() override;

  /// Returns the registered name ("Hopper-v5").
  std::string name() const override;
  /// Returns the model's file.
  const std::string& xml_file() const noexcept;
  /// Returns each sub-env's reward of its last step as gymnasium computes
  /// it, float64 [num_envs] (a copy): the "reward" key holds it rounded to
  /// float32, as TorchRL's GymEnv stores it. 0 after a reset.
  at::Tensor last_rewards() const;

 protected:
  void reset_range_(
      int64_t begin,
      int64_t end,
      const bool* mask,
      const tensordict::TensorDict& out) override;
  void step_range_(
      int64_t begin,
      int64_t end,
      const tensordict::TensorDict& td,
      const tensordict::TensorDict& next) override;
  void set_seed_(uint64_t seed) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// HalfCheetah-v5 (registered under that name).
class HalfCheetahEnv : public LocomotionEnv {
 public:
  /// See `LocomotionEnv`.
  HalfCheetahEnv(int64_t num_envs, const tensordict::Json& kwargs)
      : LocomotionEnv(Task::kHalfCheetah, num_envs, kwargs) {}
};

/// Hopper-v5.
class HopperEnv : public LocomotionEnv {
 public:
  /// See `LocomotionEnv`.
  HopperEnv(int64_t num_envs, const tensordict::Json& kwargs)
      : LocomotionEnv(Task::kHopper, num_envs, kwargs) {}
};

/// Walker2d-v5.
class Walker2dEnv : public LocomotionEnv {
 public:
  /// See `LocomotionEnv`.
  Walker2dEnv(int64_t num_envs, const tensordict::Json& kwargs)
      : LocomotionEnv(Task::kWalker2d, num_envs, kwargs) {}
};

/// Ant-v5.
class AntEnv : public LocomotionEnv {
 public:
  /// See `LocomotionEnv`.
  AntEnv(int64_t num_envs, const tensordict::Json& kwargs)
      : LocomotionEnv(Task::kAnt, num_envs, kwargs) {}
};

}  // namespace tensordict_mujoco
