#pragma once

/// @file
/// Batched environments in TorchRL's layout: `EnvBase`, the built-in
/// envs, the env registry (`make_env`) and `step_mdp`. Part of
/// <tensordict/rl.h>.
//
// NOTE [TorchRL layout]
// An env has batch size [num_envs]. `reset()` returns the root of a step:
// the observation keys and "done", "terminated", "truncated" ([N, 1]
// bool). `step(td)` reads "action" and writes ("next", ...): the
// observation keys, "reward" ([N, 1] float32) and the three flags, with
// done = terminated | truncated, as TorchRL's EnvBase does. `step_mdp`
// moves "next" to the root. A collector batch of T steps has batch size
// [N, T] (TorchRL's layout for a batched env), holds the root keys, the
// policy's outputs, the "next" sub-dict and ("collector", "traj_ids")
// (int64 [N, T]), and optionally "policy_version" at the root and in
// "next" (int64, the value of TorchRL's `track_policy_version=True`).
//
// NOTE [Sub-env ranges]
// Environments implement `reset_range_` and `step_range_`, which touch
// only the sub-envs [begin, end): a collector steps disjoint ranges on
// several threads at once. Every sub-env draws its random numbers from a
// stream of its own (the env's seed, the sub-env's index and its episode
// count), so the data do not depend on how the sub-envs are split among
// threads.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tensordict/export.h"
#include "tensordict/fwd.h"
#include "tensordict/nested_key.h"
#include "tensordict/options.h"
#include "tensordict/rl/spec.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

/// Options of `EnvBase::rollout` (TorchRL's keyword arguments).
struct TENSORDICT_API RolloutOptions {
  /// Stops after the first step at which any sub-env is done; otherwise
  /// done sub-envs are reset (partially) and the rollout goes on.
  TENSORDICT_ARG(bool, break_when_any_done) = true;
  /// Stops after the first step at which all sub-envs are done.
  TENSORDICT_ARG(bool, break_when_all_done) = false;
  /// Resets the env first; otherwise `tensordict` is the starting root.
  TENSORDICT_ARG(bool, auto_reset) = true;
  /// The starting root when `auto_reset` is false.
  TENSORDICT_ARG(std::optional<TensorDict>, tensordict);
};

/// The leaves of a "next" dict that `EnvBase::step_range` writes, found
/// and checked once (`EnvBase::step_leaves`) for a caller that steps into
/// the same leaves many times: the collector moves its views of the batch
/// from column to column and steps into them (NOTE [One step path] in
/// rl/collector.cpp). The handles share the dict's leaves, so a view whose
/// storage offset moves is seen here; they stay valid while no leaf of
/// `next` is replaced and none changes shape or dtype.
struct TENSORDICT_API StepLeaves {
  /// The dict the leaves are in.
  TensorDict next;
  /// The observation leaves, in the observation spec's order.
  std::vector<at::Tensor> observations;
  /// "reward" [N, 1].
  at::Tensor reward;
  /// "terminated" [N, 1].
  at::Tensor terminated;
  /// "truncated" [N, 1].
  at::Tensor truncated;
  /// "done" [N, 1], which the base class writes.
  at::Tensor done;
};

/// A batched environment of `num_envs()` sub-envs in TorchRL's layout (see
/// NOTE [TorchRL layout]). Subclasses set the specs in their constructor
/// and implement `reset_range_`, `step_range_` and `set_seed_`.
///
/// Thread safety: `reset_range` and `step_range` may run concurrently on
/// disjoint ranges (see NOTE [Sub-env ranges]); everything else needs
/// external synchronization.
///
/// Example:
/// ```
///   rl::CartPoleEnv env(8);
///   env.set_seed(0);
///   TensorDict td = env.reset();
///   td.set("action", env.action_spec().rand({8}));
///   td = rl::step_mdp(env.step(td));
/// ```
class TENSORDICT_API EnvBase {
 public:
  /// Makes an env of `num_envs` sub-envs; throws ValueError if it is < 1.
  explicit EnvBase(int64_t num_envs);
  virtual ~EnvBase();
  EnvBase(const EnvBase&) = delete;
  EnvBase& operator=(const EnvBase&) = delete;

  /// Returns the env's name ("CartPole-v1").
  virtual std::string name() const = 0;
  /// Returns the number of sub-envs.
  int64_t num_envs() const noexcept {
    return num_envs_;
  }
  /// Returns the batch size, [num_envs].
  const std::vector<int64_t>& batch_size() const noexcept {
    return batch_size_;
  }
  /// Returns the specs of the observation keys (per sub-env).
  const Composite& observation_spec() const noexcept {
    return observation_spec_;
  }
  /// Returns the spec of "action".
  const TensorSpec& action_spec() const {
    return *action_spec_;
  }
  /// Returns the spec of "reward": float32 [1].
  const TensorSpec& reward_spec() const noexcept {
    return reward_spec_;
  }
  /// Returns the specs of "done", "terminated" and "truncated": bool [1].
  const Composite& done_spec() const noexcept {
    return done_spec_;
  }

  /// Reseeds the env: the same seed gives the same resets (TorchRL's
  /// `set_seed`). Takes effect at the next reset of each sub-env.
  void set_seed(uint64_t seed);
  /// Returns the seed last set (0 by default).
  uint64_t seed() const noexcept {
    return seed_;
  }

  /// Resets every sub-env, or, if `td` holds a "_reset" mask ([N] or
  /// [N, 1] bool), only those it marks; returns `td` without "_reset" (a
  /// new dict) with the observation keys and the flags, which are false for
  /// the sub-envs reset and taken from `td` (or false) for the others.
  /// Throws ValueError for a mask of the wrong shape or dtype.
  TensorDict reset(const std::optional<TensorDict>& td = std::nullopt);
  /// Steps every sub-env with td["action"], writes the ("next", ...) entries
  /// into `td` and returns it (TorchRL's `step`). Throws KeyError if
  /// "action" is missing and ValueError if it is not in `action_spec()`;
  /// the env is then unchanged.
  TensorDict step(TensorDict td);
  /// Returns a random action in `action_spec()` for every sub-env, drawn
  /// from `generator` (or torch's default).
  [[nodiscard]] at::Tensor rand_action(
      std::optional<at::Generator> generator = std::nullopt) const;
  /// Runs up to `max_steps` steps, the action from `policy` (or random if
  /// it is empty), and returns the steps stacked along dim 1: batch size
  /// [N, T] as TorchRL's `rollout` for a batched env.
  [[nodiscard]] TensorDict rollout(
      int64_t max_steps,
      const nn::AnyTensorDictModule& policy,
      const RolloutOptions& options = {});
  /// `rollout` with random actions (TorchRL's `policy=None`). An overload,
  /// not a default argument, so that this header (and the env author's kit
  /// over it) needs no complete module type and does not include nn.h:
  /// an env's source compiles in about a quarter of the time.
  [[nodiscard]] TensorDict rollout(
      int64_t max_steps, const RolloutOptions& options = {});

  /// Resets the sub-envs [begin, end) that `mask` marks (all if null) and
  /// writes the observations of every sub-env of the range into rows
  /// [begin, end) of `out`'s observation keys, which must have batch size
  /// [num_envs]. Does not touch the flags. See NOTE [Sub-env ranges].
  void reset_range(
      int64_t begin, int64_t end, const bool* mask, const TensorDict& out);
  /// Steps the sub-envs [begin, end) with rows [begin, end) of
  /// td["action"] (checked by the caller) and writes rows [begin, end) of
  /// `next`'s observation keys, "reward", "terminated", "truncated" and
  /// "done", which must exist with batch size [num_envs] (see
  /// `make_next`). See NOTE [Sub-env ranges].
  void step_range(
      int64_t begin, int64_t end, const TensorDict& td, const TensorDict& next);
  /// Finds the leaves of `next` that `step_range` writes and checks them
  /// as `step_range` does at every call; throws as it does.
  [[nodiscard]] StepLeaves step_leaves(const TensorDict& next) const;
  /// Steps as `step_range` does, into `leaves`, without finding or
  /// checking them again; td["action"] is checked by the caller
  /// (`check_action`). For a caller that steps many times into the same
  /// leaves (see `StepLeaves`).
  void step_range(
      int64_t begin,
      int64_t end,
      const TensorDict& td,
      const StepLeaves& leaves);
  /// Returns a new "next" dict: zeros of every key `step_range` writes.
  [[nodiscard]] TensorDict make_next() const;
  /// Throws KeyError if `td` has no "action", ValueError if it is not in
  /// `action_spec()` (naming the key and what was expected and found).
  void check_action(const TensorDict& td) const;

 protected:
  /// Sets the specs; call from the subclass constructor.
  void set_specs(Composite observation_spec, TensorSpec action_spec);
  /// Resets the masked sub-envs of [begin, end) and writes the range's
  /// observations into `out` (see `reset_range`).
  virtual void reset_range_(
      int64_t begin, int64_t end, const bool* mask, const TensorDict& out) = 0;
  /// Steps [begin, end): writes observations, "reward", "terminated" and
  /// "truncated" of the range into `next`; the base class writes "done".
  virtual void step_range_(
      int64_t begin,
      int64_t end,
      const TensorDict& td,
      const TensorDict& next) = 0;
  /// Steps [begin, end) into `leaves` (see `step_range_`). The default
  /// calls `step_range_` with `leaves.next`, whose keys the env looks up;
  /// an env overrides it to take the leaves as found.
  virtual void step_leaves_(
      int64_t begin,
      int64_t end,
      const TensorDict& td,
      const StepLeaves& leaves);
  /// Reseeds the sub-envs (called by `set_seed`).
  virtual void set_seed_(uint64_t seed) = 0;

 private:
  int64_t num_envs_;
  // Kept, not made per call: the collector checks every step's action
  // against it.
  std::vector<int64_t> batch_size_;
  uint64_t seed_ = 0;
  Composite observation_spec_;
  std::optional<TensorSpec> action_spec_;
  TensorSpec reward_spec_;
  Composite done_spec_;
};

/// Options of `CartPoleEnv`: the keyword arguments of TorchRL's
/// `GymEnv("CartPole-v1", ...)` that change the env.
///
/// Example: `CartPoleOptions().categorical_action_encoding(true)`
struct TENSORDICT_API CartPoleOptions {
  /// An index action: int64 [N] in a `Categorical(2)` spec, as TorchRL's
  /// `GymEnv(..., categorical_action_encoding=True)` gives it; otherwise a
  /// `OneHot(2)` action [N, 2].
  TENSORDICT_ARG(bool, categorical_action_encoding) = false;
  /// Steps after which an episode is truncated (gymnasium's TimeLimit,
  /// `max_episode_steps`; 500 for CartPole-v1). Must be >= 1.
  TENSORDICT_ARG(int64_t, max_episode_steps) = 500;
};

/// gymnasium 1.4.0's CartPole-v1 as TorchRL's `GymEnv("CartPole-v1")`
/// gives it, batched: observation float32 [4] (Bounded, gymnasium's
/// bounds), action OneHot(2) (index 1 pushes right; or Categorical(2) with
/// `categorical_action_encoding`), reward 1.0 per step (also on the
/// terminating one), terminated when |x| > 2.4 or |theta| > 12 degrees,
/// truncated at `max_episode_steps` (500). The state is float64, as
/// gymnasium's numpy state, and stepped with gymnasium's Euler formulas in
/// its operation order; a reset draws it uniform in [-0.05, 0.05) from the
/// sub-env's own stream (see NOTE [Sub-env ranges]), so resets, not steps,
/// differ from gymnasium's numpy RNG. A one-hot action of any integer, bool
/// or floating dtype is taken; one that is not exactly one-hot is refused,
/// naming the row (TorchRL would take its argmax silently).
///
/// Registered as "CartPole-v1" with the keyword arguments of
/// `CartPoleOptions`.
///
/// Example: `auto env = std::make_shared<rl::CartPoleEnv>(16);`
class TENSORDICT_API CartPoleEnv : public EnvBase {
 public:
  /// Makes `num_envs` cart-poles; throws ValueError if max_episode_steps
  /// < 1.
  explicit CartPoleEnv(int64_t num_envs, CartPoleOptions options = {});
  /// Returns "CartPole-v1".
  std::string name() const override;
  /// Returns the float64 state [N, 4] (x, x_dot, theta, theta_dot): a copy.
  [[nodiscard]] at::Tensor state() const;
  /// Sets the float64 state [N, 4] of every sub-env (tests drive gymnasium
  /// from the same states); the step counts are kept. Throws ValueError
  /// for another shape.
  void set_state(const at::Tensor& state);
  /// Returns each sub-env's steps in its episode, int64 [N]: a copy.
  [[nodiscard]] at::Tensor elapsed_steps() const;

 protected:
  void reset_range_(
      int64_t begin,
      int64_t end,
      const bool* mask,
      const TensorDict& out) override;
  void step_range_(
      int64_t begin,
      int64_t end,
      const TensorDict& td,
      const TensorDict& next) override;
  void step_leaves_(
      int64_t begin,
      int64_t end,
      const TensorDict& td,
      const StepLeaves& leaves) override;
  void set_seed_(uint64_t seed) override;

 private:
  // The step of [begin, end), once the leaves are found.
  void step_rows(
      int64_t begin,
      int64_t end,
      const TensorDict& td,
      const at::Tensor& observation,
      const at::Tensor& reward,
      const at::Tensor& terminated,
      const at::Tensor& truncated);

  CartPoleOptions options_;
  std::vector<double> state_;
  std::vector<int64_t> steps_;
  std::vector<uint64_t> episodes_;
};

/// N point masses on a plane pushed by a force (the env of
/// examples/python_env; its reference.py holds the rules): observation
/// float32 [4] (position, velocity), action float32 [2] Unbounded (the env
/// clamps it to [-1, 1], as the example always did, so its spec does not
/// bound it), reward -|p|, terminated when |p| > 1.5 or |p| < 0.05,
/// truncated after `max_steps`. Resets draw from splitmix64(seed, sub-env,
/// episode). Registered as "PointMass" with the keyword arguments `seed`
/// (a non-negative integer) and `max_steps`.
///
/// Example: `rl::PointMassEnv env(16, /*seed=*/42, /*max_steps=*/50);`
class TENSORDICT_API PointMassEnv : public EnvBase {
 public:
  /// Makes `num_envs` point masses; throws ValueError if max_steps < 1.
  PointMassEnv(int64_t num_envs, uint64_t seed = 0, int64_t max_steps = 50);
  /// Returns "PointMass".
  std::string name() const override;

 protected:
  void reset_range_(
      int64_t begin,
      int64_t end,
      const bool* mask,
      const TensorDict& out) override;
  void step_range_(
      int64_t begin,
      int64_t end,
      const TensorDict& td,
      const TensorDict& next) override;
  void set_seed_(uint64_t seed) override;

 private:
  int64_t max_steps_;
  at::Tensor position_;
  at::Tensor velocity_;
  at::Tensor steps_;
  std::vector<int64_t> episodes_;
};

// NOTE [The env registry]
// `make_env(name, num_envs, kwargs)` looks `name` up in one registry per
// process: the registry is a function-local static of libtensordict, so
// every user of one loaded libtensordict (a program, the worker, the Python
// module tensordict_cpp._C and a user's extension linked to the same
// shared library) sees the same envs, and it exists before any
// registration runs, whatever the order of static initializers. Built-in
// envs are registered by the registry itself when it is first used (not by
// static objects of their own, which a static link would drop when nothing
// references their object file). A user's env registers with
// `register_env` or, at namespace scope, `TENSORDICT_REGISTER_ENV`, whose
// static object runs when its program starts or its shared library is
// loaded (`load_env_library`). Registration never throws from a static
// initializer: a name registered twice is recorded, and `make_env` of that
// name then throws ValueError naming both, instead of silently making one.

/// Makes an env of `num_envs` sub-envs from keyword arguments (a JSON
/// object, `{}` when none are given). Read them with `EnvKwargs`, which
/// refuses unknown and mistyped ones.
using EnvFactory = std::function<std::shared_ptr<EnvBase>(
    int64_t num_envs, const Json& kwargs)>;

/// Registers `factory` under `name` (see NOTE [The env registry]). Throws
/// ValueError for an empty name or one already registered (naming it and
/// the known envs), or an empty factory.
TENSORDICT_API void register_env(const std::string& name, EnvFactory factory);

/// Returns the registered env names, sorted (the built-ins included).
TENSORDICT_API std::vector<std::string> registered_envs();

/// Makes the registered env `name` with `num_envs` sub-envs and no keyword
/// arguments. Throws ValueError naming the known envs for an unknown name.
TENSORDICT_API std::shared_ptr<EnvBase> make_env(
    const std::string& name, int64_t num_envs);

/// Makes the registered env `name` with `num_envs` sub-envs and keyword
/// arguments `kwargs` (a JSON object, as TorchRL's env keyword arguments:
/// `{"categorical_action_encoding": true}`). Throws ValueError naming the
/// env, the argument and the known names for an unknown env, an unknown
/// argument or one of the wrong type.
TENSORDICT_API std::shared_ptr<EnvBase> make_env(
    const std::string& name, int64_t num_envs, const Json& kwargs);

/// Loads the shared library at `path` (dlopen), whose registrations then
/// apply, and returns the env names it registered. Loading the same
/// library again returns the same names. Throws ValueError naming the path
/// when it does not load (with the loader's message), when it registers no
/// env, or when one of its registrations failed (a duplicate name). The
/// library stays loaded for the life of the process.
TENSORDICT_API std::vector<std::string> load_env_library(
    const std::string& path);

/// An env's keyword arguments, read by type with defaults, as a Python
/// signature reads them: each `get` marks its argument known, and
/// `check_all_read` refuses the ones no `get` asked for. Errors name the
/// env, the argument and the known arguments.
///
/// Example:
/// ```
///   rl::EnvKwargs args("CartPole-v1", kwargs);
///   const bool index = args.get("categorical_action_encoding", false);
///   const int64_t limit = args.get<int64_t>("max_episode_steps", 500);
///   args.check_all_read();
/// ```
class TENSORDICT_API EnvKwargs {
 public:
  /// Reads `kwargs` of the env `env`; throws ValueError unless it is a JSON
  /// object (or null, read as no arguments). `kwargs` must outlive this.
  EnvKwargs(std::string env, const Json& kwargs);
  /// Returns argument `name`, or `default_value` when it is absent. T is
  /// bool, int64_t, uint64_t, double or std::string; an integer is not a
  /// bool, a float is not an integer, a negative is not a uint64_t.
  /// Throws ValueError for another JSON type, naming the env and argument.
  template <typename T>
  T get(const std::string& name, T default_value);
  /// The same, for a string default given as a literal.
  std::string get(const std::string& name, const char* default_value) {
    return get<std::string>(name, std::string(default_value));
  }
  /// Returns true if argument `name` was given (and marks it known).
  bool contains(const std::string& name);
  /// Throws ValueError naming the env, every argument given that no `get`
  /// or `contains` asked for, and the known arguments.
  void check_all_read() const;

 private:
  std::string env_;
  const Json* kwargs_;
  std::vector<std::string> known_;
};

// The argument types `EnvKwargs::get` reads (defined in the library).
/// @cond
extern template bool EnvKwargs::get<bool>(const std::string&, bool);
extern template int64_t EnvKwargs::get<int64_t>(const std::string&, int64_t);
extern template uint64_t EnvKwargs::get<uint64_t>(const std::string&, uint64_t);
extern template double EnvKwargs::get<double>(const std::string&, double);
extern template std::string EnvKwargs::get<std::string>(
    const std::string&, std::string);
/// @endcond

}  // namespace rl

namespace detail {

/// Registers from a static initializer: never throws (a failure is
/// recorded, see NOTE [The env registry]). Returns true.
TENSORDICT_API bool register_env_at_load(
    const char* name, rl::EnvFactory factory) noexcept;

/// The factory of `TENSORDICT_REGISTER_ENV(name, Type)`: `Type(num_envs,
/// kwargs)`, or `Type(num_envs)` after refusing every keyword argument.
template <typename Type>
rl::EnvFactory env_factory(const char* name) {
  static_assert(
      std::is_base_of_v<rl::EnvBase, Type>,
      "TENSORDICT_REGISTER_ENV: the type must derive from rl::EnvBase");
  static_assert(
      std::is_constructible_v<Type, int64_t, const Json&> ||
          std::is_constructible_v<Type, int64_t>,
      "TENSORDICT_REGISTER_ENV: the type must be constructible from "
      "(int64_t num_envs, const Json& kwargs) or (int64_t num_envs)");
  std::string env(name);
  return [env](int64_t num_envs, const Json& kwargs) {
    if constexpr (std::is_constructible_v<Type, int64_t, const Json&>) {
      return std::shared_ptr<rl::EnvBase>(
          std::make_shared<Type>(num_envs, kwargs));
    } else {
      rl::EnvKwargs(env, kwargs).check_all_read();
      return std::shared_ptr<rl::EnvBase>(std::make_shared<Type>(num_envs));
    }
  };
}

}  // namespace detail

namespace rl {

/// Options of `step_mdp` (TorchRL's keyword arguments).
struct TENSORDICT_API StepMdpOptions {
  /// Keeps the root keys that are not "next", the action, reward or done
  /// keys (those excluded below).
  TENSORDICT_ARG(bool, keep_other) = true;
  /// Leaves the reward keys out.
  TENSORDICT_ARG(bool, exclude_reward) = true;
  /// Leaves the done keys ("done", "terminated", "truncated") out.
  TENSORDICT_ARG(bool, exclude_done) = false;
  /// Leaves the action keys out.
  TENSORDICT_ARG(bool, exclude_action) = true;
  /// The reward keys.
  TENSORDICT_ARG(std::vector<NestedKey>, reward_keys) = {"reward"};
  /// The done keys.
  TENSORDICT_ARG(std::vector<NestedKey>, done_keys) = {
      "done", "terminated", "truncated"};
  /// The action keys.
  TENSORDICT_ARG(std::vector<NestedKey>, action_keys) = {"action"};
};

/// Returns the root of the next step (TorchRL's `step_mdp`): a new dict
/// whose leaves alias those of td["next"] (and of the root's other keys
/// with `keep_other`); its nested dicts are new, non-tensor entries are
/// kept and a lazy stack is kept whole. Throws KeyError if `td` has no
/// "next".
[[nodiscard]] TENSORDICT_API TensorDict
step_mdp(const TensorDict& td, const StepMdpOptions& options = {});

}  // namespace rl
TENSORDICT_END_NAMESPACE

/// Pastes two tokens (for a unique name per registration).
#define TENSORDICT_ENV_CONCAT_INNER(a, b) a##b
/// Pastes two tokens after expanding them (`__COUNTER__`).
#define TENSORDICT_ENV_CONCAT(a, b) TENSORDICT_ENV_CONCAT_INNER(a, b)

/// Registers the env type `Type` (derived from `rl::EnvBase`, constructible
/// from `(int64_t num_envs, const Json& kwargs)`, or from `(int64_t
/// num_envs)` when it takes no keyword arguments) under `name`, at
/// namespace scope of one source file. It runs when the program starts or
/// its shared library is loaded; see NOTE [The env registry].
///
/// Example: `TENSORDICT_REGISTER_ENV("Pendulum-v0", PendulumEnv);`
#define TENSORDICT_REGISTER_ENV(name, Type)                 \
  [[maybe_unused]] static const bool TENSORDICT_ENV_CONCAT( \
      tensordict_registered_env_, __COUNTER__) =            \
      ::tensordict::detail::register_env_at_load(           \
          name, ::tensordict::detail::env_factory<Type>(name))
