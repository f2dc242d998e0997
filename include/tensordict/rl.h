#pragma once

/// @file
/// C++ actors for TorchRL learners: batched environments and a collector
/// whose batches have exactly the layout TorchRL 0.14.1's `Collector` gives,
/// so that a stock Python TorchRL learner trains on them. Opt-in, not
/// included by <tensordict/tensordict.h>.
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
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensordict/export.h"
#include "tensordict/nested_key.h"
#include "tensordict/nn.h"
#include "tensordict/options.h"
#include "tensordict/probabilistic.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
/// C++ actors for TorchRL: specs, batched environments, the collector.
namespace rl {

// --- specs ------------------------------------------------------------------

/// The kinds of TorchRL's leaf specs (torchrl.data's class names).
enum class SpecKind {
  /// `Unbounded`: any value of the dtype.
  kUnbounded,
  /// `Bounded`: low <= value <= high, element-wise.
  kBounded,
  /// `Categorical`: an index in [0, n) (or a bool flag, n = 2).
  kCategorical,
  /// `OneHot`: the last dim has n entries, exactly one of them set.
  kOneHot,
};

/// A leaf spec: what one entry of an env's dicts holds, without the env's
/// batch dims (TorchRL's specs of a batched env include them; these do
/// not, and `shape()` is the per-sub-env shape).
///
/// Example: `TensorSpec::one_hot(2)` is CartPole's action spec.
class TENSORDICT_API TensorSpec {
 public:
  /// Returns an `Unbounded` spec.
  static TensorSpec unbounded(
      std::vector<int64_t> shape, c10::ScalarType dtype = c10::kFloat);
  /// Returns a `Bounded` spec with element-wise bounds `low` and `high`
  /// (of `shape`, broadcast if scalar). Throws ValueError if low > high.
  static TensorSpec bounded(
      std::vector<int64_t> shape,
      c10::ScalarType dtype,
      at::Tensor low,
      at::Tensor high);
  /// Returns a `Categorical` spec of `n` values.
  static TensorSpec categorical(
      int64_t n,
      std::vector<int64_t> shape = {},
      c10::ScalarType dtype = c10::kLong);
  /// Returns a `OneHot` spec of `n` values: shape [n].
  static TensorSpec one_hot(int64_t n, c10::ScalarType dtype = c10::kLong);

  /// Returns the kind of spec.
  SpecKind kind() const noexcept {
    return kind_;
  }
  /// Returns the shape of one sub-env's value.
  const std::vector<int64_t>& shape() const noexcept {
    return shape_;
  }
  /// Returns the dtype.
  c10::ScalarType dtype() const noexcept {
    return dtype_;
  }
  /// Returns the lower bound (a `Bounded` spec's), or an undefined tensor.
  const at::Tensor& low() const noexcept {
    return low_;
  }
  /// Returns the upper bound (a `Bounded` spec's), or an undefined tensor.
  const at::Tensor& high() const noexcept {
    return high_;
  }
  /// Returns the number of values of a categorical or one-hot spec, or 0.
  int64_t n() const noexcept {
    return n_;
  }

  /// Returns zeros of shape `batch + shape()` (TorchRL's `spec.zero()`).
  at::Tensor zero(const std::vector<int64_t>& batch) const;
  /// Returns a uniform random value of shape `batch + shape()` (TorchRL's
  /// `spec.rand()`); unbounded float specs draw from a standard normal.
  at::Tensor rand(
      const std::vector<int64_t>& batch,
      std::optional<at::Generator> generator = std::nullopt) const;
  /// Returns true if `value` has shape `batch + shape()`, the dtype, and
  /// values the spec allows (TorchRL's `spec.is_in`).
  bool is_in(const at::Tensor& value, const std::vector<int64_t>& batch) const;
  /// Throws ValueError if `value` is not in the spec, saying what was
  /// expected, what was found and naming `key`.
  void check(
      const at::Tensor& value,
      const std::vector<int64_t>& batch,
      const NestedKey& key) const;

 private:
  TensorSpec() = default;
  SpecKind kind_ = SpecKind::kUnbounded;
  std::vector<int64_t> shape_;
  c10::ScalarType dtype_ = c10::kFloat;
  at::Tensor low_;
  at::Tensor high_;
  int64_t n_ = 0;
};

/// A composite spec (TorchRL's `Composite`): leaf specs by key, in order.
///
/// Example: `Composite().set("observation", TensorSpec::unbounded({4}))`
class TENSORDICT_API Composite {
 public:
  /// Makes an empty composite.
  Composite() = default;
  /// Adds or replaces the spec of `key`; returns this composite.
  Composite& set(const NestedKey& key, TensorSpec spec);
  /// Returns the spec of `key`, or throws KeyError naming it.
  const TensorSpec& get(const NestedKey& key) const;
  /// Returns the spec of `key`, or null.
  const TensorSpec* find(const NestedKey& key) const noexcept;
  /// Returns true if `key` has a spec.
  bool contains(const NestedKey& key) const noexcept;
  /// Returns the keys, in the order they were set.
  std::vector<NestedKey> keys() const;
  /// Returns the (key, spec) entries, in the order they were set: what
  /// per-step checks iterate without copying the keys.
  const std::vector<std::pair<NestedKey, TensorSpec>>& entries()
      const noexcept {
    return entries_;
  }
  /// Returns the number of leaf specs.
  size_t size() const noexcept {
    return entries_.size();
  }
  /// Returns a dict of batch size `batch` with every leaf's `zero(batch)`.
  [[nodiscard]] TensorDict zero(const std::vector<int64_t>& batch) const;
  /// Throws ValueError (KeyError for a missing key) unless every leaf of
  /// the spec is in `td` and in its spec, for batch size `batch`.
  void check(const TensorDict& td, const std::vector<int64_t>& batch) const;

 private:
  std::vector<std::pair<NestedKey, TensorSpec>> entries_;
};

// --- environments ----------------------------------------------------------

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
  std::vector<int64_t> batch_size() const {
    return {num_envs_};
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
      const nn::AnyTensorDictModule& policy = nullptr,
      const RolloutOptions& options = {});

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
  /// Reseeds the sub-envs (called by `set_seed`).
  virtual void set_seed_(uint64_t seed) = 0;

 private:
  int64_t num_envs_;
  uint64_t seed_ = 0;
  Composite observation_spec_;
  std::optional<TensorSpec> action_spec_;
  TensorSpec reward_spec_;
  Composite done_spec_;
};

/// gymnasium 1.4.0's CartPole-v1 as TorchRL's `GymEnv("CartPole-v1")`
/// gives it, batched: observation float32 [4] (Bounded, gymnasium's
/// bounds), action OneHot(2) int64 (index 1 pushes right), reward 1.0 per
/// step (also on the terminating one), terminated when |x| > 2.4 or
/// |theta| > 12 degrees, truncated at 500 steps. The state is float64, as
/// gymnasium's numpy state, and stepped with gymnasium's Euler formulas in
/// its operation order; a reset draws it uniform in [-0.05, 0.05) from the
/// sub-env's own stream (see NOTE [Sub-env ranges]), so resets, not steps,
/// differ from gymnasium's numpy RNG. An action that is not one-hot is
/// refused (TorchRL would map it to an index silently).
///
/// Example: `auto env = std::make_shared<rl::CartPoleEnv>(16);`
class TENSORDICT_API CartPoleEnv : public EnvBase {
 public:
  /// Makes `num_envs` cart-poles.
  explicit CartPoleEnv(int64_t num_envs);
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
  void set_seed_(uint64_t seed) override;

 private:
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
/// episode).
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

/// Makes the env `name` ("CartPole-v1" or "PointMass") with `num_envs`
/// sub-envs. Throws ValueError naming the known envs for another name.
TENSORDICT_API std::shared_ptr<EnvBase> make_env(
    const std::string& name, int64_t num_envs);

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

// --- models ------------------------------------------------------------------

/// Options of `MLP` (TorchRL's `torchrl.modules.MLP` keyword arguments).
///
/// Example: `MLPOptions(4, 2).num_cells({64, 64}).activation("ReLU")`
struct TENSORDICT_API MLPOptions {
  /// Sets the input and output sizes.
  MLPOptions(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  /// Size of the input's last dim.
  TENSORDICT_ARG(int64_t, in_features);
  /// Size of the output's last dim.
  TENSORDICT_ARG(int64_t, out_features);
  /// Width of each hidden layer; empty gives one linear layer. Unlike
  /// Python, the depth is its length (no `depth` argument, no default of 32
  /// cells).
  TENSORDICT_ARG(std::vector<int64_t>, num_cells);
  /// The activation's torch.nn class name: "Tanh" (TorchRL's default),
  /// "ReLU" or "ELU".
  TENSORDICT_ARG(std::string, activation) = "Tanh";
  /// Applies the activation after the last layer too.
  TENSORDICT_ARG(bool, activate_last_layer) = false;
  /// Gives the last layer a bias.
  TENSORDICT_ARG(bool, bias_last_layer) = true;
};

/// TorchRL's `MLP`: Linear layers with an activation between them, named
/// as Python's nn.Sequential names them ("0.weight", "0.bias", "2.weight",
/// ...), so a TorchRL MLP's state_dict loads into it.
///
/// NOTE [Small-batch MLP] An actor stepping a few envs calls its MLP on a
/// few rows, where each at:: op costs more than its arithmetic. Without an
/// autograd graph to record, a float32 CPU input of at most
/// `kLoopRows` rows is evaluated by plain loops (one pass, no
/// allocation but the output); otherwise, and whenever gradients are
/// recorded, by torch's `linear` and activation ops, as Python's MLP. The
/// loops sum in another order than BLAS and take tanh within a few ulps:
/// the two agree to 1e-5 relative, not to the bit.
///
/// Example: `rl::MLP actor(rl::MLPOptions(4, 2).num_cells({64, 64}));`
class TENSORDICT_API MLPImpl : public torch::nn::Module {
 public:
  /// The most rows the loops of NOTE [Small-batch MLP] take.
  static constexpr int64_t kLoopRows = 4;
  /// Builds the layers, initialized as torch.nn.Linear does. Throws
  /// ValueError for a size < 1 or an unknown activation.
  explicit MLPImpl(MLPOptions options);
  /// Returns the output, [..., out_features], for an input
  /// [..., in_features].
  at::Tensor forward(const at::Tensor& input);
  /// Returns the options.
  const MLPOptions& options() const noexcept {
    return options_;
  }
  /// Prints as Python's MLP repr.
  void pretty_print(std::ostream& stream) const override;

 private:
  at::Tensor forward_loops(const at::Tensor& input) const;
  MLPOptions options_;
  int activation_;
  // The registered layers' parameters (the same tensors).
  std::vector<at::Tensor> weights_;
  std::vector<at::Tensor> biases_;
};

/// A holder of `MLPImpl`, as TORCH_MODULE makes.
class MLP : public torch::nn::ModuleHolder<MLPImpl> {
 public:
  using torch::nn::ModuleHolder<MLPImpl>::ModuleHolder;
};

// --- collector -------------------------------------------------------------

/// Options of `Collector`.
///
/// Example: `CollectorOptions(1000).total_frames(100000).num_threads(4)`
struct TENSORDICT_API CollectorOptions {
  /// Sets frames_per_batch, which is rounded up to a multiple of the number
  /// of sub-envs, as TorchRL does.
  explicit CollectorOptions(int64_t frames_per_batch = 0)
      : frames_per_batch_(frames_per_batch) {}
  /// Frames (sub-env steps) per batch: the batch holds
  /// ceil(frames_per_batch / N) steps of every sub-env.
  TENSORDICT_ARG(int64_t, frames_per_batch);
  /// Frames after which iteration ends, rounded up to a whole batch; -1
  /// never ends.
  TENSORDICT_ARG(int64_t, total_frames) = -1;
  /// Threads that step the sub-envs, each a contiguous range of them (the
  /// calling thread is one of them); the policy is called once per step
  /// over all sub-envs.
  TENSORDICT_ARG(int64_t, num_threads) = 1;
  /// Yields the same dict, overwritten by every batch (TorchRL's
  /// `return_same_td`). Defaults to true, unlike TorchRL, since a C++
  /// actor usually sends or copies the batch before asking for the next;
  /// set it false for a fresh dict per batch.
  TENSORDICT_ARG(bool, return_same_td) = true;
  /// Stamps "policy_version" (int64 [N, T], at the root and in "next")
  /// with the number of weight updates applied, as TorchRL's
  /// `track_policy_version=True`: "next" holds the version the step ran
  /// with, the root the version of the step or reset that made it (so the
  /// first root after an update still holds the old one).
  TENSORDICT_ARG(bool, track_policy_version) = false;
  /// Applies weights that `update_policy_weights_` staged before the next
  /// step, even mid-batch; by default they wait for the next batch.
  TENSORDICT_ARG(bool, update_weights_mid_batch) = false;
  /// Resets every sub-env at the start of each batch (TorchRL's
  /// `reset_at_each_iter`).
  TENSORDICT_ARG(bool, reset_at_each_iter) = false;
  /// Seeds the env before the first reset, if set.
  TENSORDICT_ARG(std::optional<uint64_t>, seed);
  /// The interaction type the policy runs under (TorchRL's
  /// `exploration_type`, random by default as there): a probabilistic
  /// policy samples its action. Unset: the policy's own default.
  TENSORDICT_ARG(std::optional<nn::InteractionType>, exploration_type) =
      nn::InteractionType::kRandom;
};

/// Runs a policy in a batched env and yields batches in exactly the layout
/// of TorchRL 0.14.1's `Collector(env, policy, frames_per_batch=...)` on a
/// batched env (see NOTE [TorchRL layout]): batch size [N, T], T =
/// frames_per_batch / N; ("collector", "traj_ids") starts at 0..N-1 and a
/// sub-env reset after a done step gets the next unused id (in sub-env
/// order); done sub-envs are reset (partially) right after their done step,
/// so the root of the next step is a reset one. split_trajs is not
/// offered (TorchRL's default is off). An env of one sub-env still gives
/// [1, T], as TorchRL's `SerialEnv(1, ...)` does (a bare `GymEnv` has no
/// batch dim and gives [T]: `batch.squeeze(0)` is that layout).
///
/// The policy (a TensorDictModule, a TensorDictSequential, an AOTIModule
/// or any TensorDictModuleBase) is called once per step on the [N] root
/// and must write "action" in the env's action spec; a missing or
/// malformed action is an error naming the key. It runs under
/// `torch::NoGradGuard`.
///
/// Thread safety: `next()`, `set_seed` and `shutdown` from one thread;
/// `update_policy_weights_` and `policy_version` from any thread.
///
/// Example:
/// ```
///   rl::Collector collector(rl::make_env("CartPole-v1", 8), policy,
///                           rl::CollectorOptions(256).total_frames(10240));
///   while (auto batch = collector.next()) { learn(*batch); }
/// ```
class TENSORDICT_API Collector {
 public:
  /// Makes a collector; resets the env at the first batch. Throws
  /// ValueError if frames_per_batch < 1, num_threads < 1 or the policy is
  /// empty.
  Collector(
      std::shared_ptr<EnvBase> env,
      nn::AnyTensorDictModule policy,
      const CollectorOptions& options);
  /// Stops the stepping threads.
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  /// Collects and returns the next batch, or nullopt once total_frames were
  /// collected (or after `shutdown`). With `return_same_td` every call
  /// returns the same dict, overwritten. Errors from the policy or the env
  /// propagate; the collector can go on after an error in the policy
  /// (that step is retried) but not after one in the env.
  std::optional<TensorDict> next();
  /// Checks `weights` against the policy's (every key, shape and dtype;
  /// for an AOTIModule the names `load_weights` expects) and stages a copy;
  /// they are applied before the next batch (or the next step with
  /// `update_weights_mid_batch`): copied into the module's parameters and
  /// buffers, or `load_weights` for an AOTIModule. Throws ValueError or
  /// KeyError naming the key that does not fit; the staged and the current
  /// weights are then unchanged. The keys are those of
  /// `TensorDict::from_module(*policy)`; the weights of an AOTIModule
  /// inside a TensorDictSequential are not module parameters, so such a
  /// policy's package weights cannot be swapped here (give the AOTIModule
  /// itself as the policy, or call its `load_weights`).
  void update_policy_weights_(const TensorDict& weights);
  /// Returns how many weight updates were applied (what "policy_version"
  /// holds in the batches collected since).
  int64_t policy_version() const noexcept;
  /// Reseeds the env and resets every sub-env at the next batch.
  void set_seed(uint64_t seed);
  /// Returns total_frames (-1: unbounded).
  int64_t total_frames() const noexcept {
    return options_.total_frames();
  }
  /// Returns the frames collected so far.
  int64_t frames() const noexcept {
    return frames_;
  }
  /// Returns the frames per batch after rounding (N * T).
  int64_t frames_per_batch() const noexcept;
  /// Stops the threads; `next()` then returns nullopt. Idempotent.
  void shutdown();
  /// Returns the env.
  const std::shared_ptr<EnvBase>& env() const noexcept {
    return env_;
  }
  /// Returns the policy.
  const nn::AnyTensorDictModule& policy() const noexcept {
    return policy_;
  }

  /// An input iterator over the batches (`for (TensorDict& b : collector)`).
  class Iterator {
   public:
    /// Returns the current batch.
    TensorDict& operator*() {
      return *batch_;
    }
    /// Collects the next batch.
    Iterator& operator++() {
      batch_ = collector_->next();
      return *this;
    }
    /// True when both are past the end (or are the same position).
    bool operator!=(const Iterator& other) const {
      return batch_.has_value() != other.batch_.has_value();
    }

   private:
    friend class Collector;
    Iterator(Collector* collector, std::optional<TensorDict> batch)
        : collector_(collector), batch_(std::move(batch)) {}
    Collector* collector_;
    std::optional<TensorDict> batch_;
  };
  /// Collects the first batch and returns an iterator on it.
  Iterator begin() {
    return Iterator(this, next());
  }
  /// Returns the end iterator.
  Iterator end() {
    return Iterator(this, std::nullopt);
  }

 private:
  struct State;
  std::shared_ptr<EnvBase> env_;
  nn::AnyTensorDictModule policy_;
  CollectorOptions options_;
  int64_t frames_ = 0;
  std::unique_ptr<State> state_;
};

}  // namespace rl
TENSORDICT_END_NAMESPACE

// --- TorchRL DistributedCollector worker -------------------------------------
//
// NOTE [TorchRL worker protocol]
// A C++ process serves as worker rank R of TorchRL 0.14.1's
// `DistributedCollector(..., launcher="submitit_delayed")`; the Python
// learner (rank 0) is stock. Start-up, in the learner's order:
// 1. join the Gloo group (TCPStore at the collector's tcp_port, as Python's
//    `init_process_group(init_method="tcp://...")`);
// 2. receive the collector store's port (an int64 broadcast from rank 0)
//    and connect to it (the learner retries ports, so it is not always
//    tcp_port + 1);
// 3. receive the learner's `scatter_object_list` payload (a pickle holding
//    the env factory, the policy and the collector class): its size is
//    bounded and its bytes are dropped, never unpickled nor executed. The
//    values it would give come from the options instead (frames per batch,
//    sync);
// 4. connect to the DistributedWeightSyncScheme's own TCPStore (by default
//    tcp_port + 2), read "STATELESS_MODEL" ("0"/"1") and, for "0", receive
//    the initial weights (no instruction precedes them).
// Then the worker serves instructions, polling two keys "NODE_R_in": the
// collector store's ("continue", "seeding_N", "shutdown", and
// "update_weights" of the older DistributedWeightUpdater) and the weight
// store's ("update_weights" of the scheme). "continue": status "busy",
// collect, and if "TRAINER_status" is "alive" send the batch (td.isend to
// rank 0, tensordict 0.14.3's wire: leaves in sorted-key order, tags from
// 0), then status "done" (async only). "update_weights": receive the
// weights, apply them, ack "updated" in "NODE_R_out" of that store.
// "seeding_N": apply the seed, write "NODE_R_seed" and ack "NODE_R_out".
// "shutdown": ack "down" and return.
//
// Differences from TorchRL's Python worker, each chosen so that a stock
// learner neither deadlocks nor trains on wrong data:
// - Weights that do not fit (a non-finite value, or whatever
//   `apply_weights` refuses) are received in full (so the learner's send
//   completes), not applied (the old weights stay), and acked with
//   "refused: <reason naming the key>" instead of "updated": the learner's
//   `update_policy_weights_` raises RuntimeError with that text, and the
//   worker goes on serving. The wire itself carries no keys or shapes, so a
//   learner whose weights differ in byte size cannot be detected before
//   the bytes arrive (see NOTE [The wire] in distributed.h): the weights
//   layout must be the learner's `TensorDict.from_module(policy)`.
// - The seed ack is "updated", what the 0.14.1 learner's `set_seed` checks
//   for (its own Python worker writes "seeded", which that learner refuses).
// - An unknown instruction, a batch of the wrong size or a lost learner end
//   the worker with an error (written to "NODE_R_out" as "error: ..." when
//   the store is still there) instead of a hang.
// - After a refusal the learner leaves its "refused" ack in the store; the
//   worker deletes it when the next "update_weights" arrives, before it
//   posts the receives, so the learner (which reads the ack after its send
//   completes) reads the new ack, not the stale one.
// - The weight store's port is not announced: the scheme tries tcp_port + 2
//   and, if that port is taken, a random one that only the start-up pickle
//   names. Give `weights_store_port` then, or free tcp_port + 2.

// The worker section includes what it alone needs, so that it merges
// cleanly with the rest of this header.
#include <chrono>
#include <functional>

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

/// How `run_torchrl_worker` joins a TorchRL learner.
///
/// Example:
/// `TorchRLWorkerOptions("127.0.0.1", 10003, 1, 2).frames_per_batch(64)`
struct TENSORDICT_API TorchRLWorkerOptions {
  /// Sets the learner's address, its `tcp_port`, this rank and the world
  /// size (the learner's number of workers + 1).
  TorchRLWorkerOptions(
      std::string master_addr, int master_port, int rank, int world_size)
      : master_addr_(std::move(master_addr)),
        master_port_(master_port),
        rank_(rank),
        world_size_(world_size) {}
  /// The learner's host (TorchRL uses the address of its hostname).
  TENSORDICT_ARG(std::string, master_addr);
  /// The DistributedCollector's `tcp_port` (the process group's store).
  TENSORDICT_ARG(int, master_port);
  /// This worker's rank, 1 to world_size - 1.
  TENSORDICT_ARG(int, rank);
  /// The learner's number of workers + 1.
  TENSORDICT_ARG(int, world_size);
  /// The c10d backend; only "gloo" is offered (TorchRL's default).
  TENSORDICT_ARG(std::string, backend) = "gloo";
  /// The weight sync scheme's store port; tcp_port + 2 when unset (what
  /// the scheme tries first).
  TENSORDICT_ARG(std::optional<int>, weights_store_port);
  /// The learner's `sync` flag (not read from the start-up pickle).
  TENSORDICT_ARG(bool, sync) = false;
  /// The frames each batch must hold (the learner's frames_per_batch, over
  /// the number of workers when sync); 0 skips the check.
  TENSORDICT_ARG(int64_t, frames_per_batch) = 0;
  /// The longest wait for one store or process-group operation, and for
  /// joining the group.
  TENSORDICT_ARG(std::chrono::milliseconds, timeout) = std::chrono::seconds(60);
  /// The longest wait for the learner's next instruction (or for its
  /// initial weights); the worker then ends with an error.
  TENSORDICT_ARG(std::chrono::milliseconds, idle_timeout) =
      std::chrono::seconds(600);
  /// The largest start-up payload accepted, in bytes.
  TENSORDICT_ARG(int64_t, max_payload_bytes) = int64_t{1} << 30;
  /// Refuses weights holding NaN or infinity.
  TENSORDICT_ARG(bool, refuse_non_finite) = true;
  /// Logs every instruction to stderr.
  TENSORDICT_ARG(bool, verbose) = false;
};

/// What the worker serves, as callbacks, so that any batch source fits.
struct TENSORDICT_API TorchRLWorkerHooks {
  /// Returns the next batch (the learner's layout; see NOTE [TorchRL worker
  /// protocol]). Required.
  std::function<TensorDict()> next_batch;
  /// The weights layout: the leaves the learner sends, with its keys (those
  /// of `TensorDict.from_module(policy)` on the learner), shapes and
  /// dtypes. Received weights arrive in a copy of it. Empty: a stateless
  /// policy.
  TensorDict weights;
  /// Applies received weights; throws (a c10::Error) to refuse them, in
  /// which case the policy must be unchanged.
  std::function<void(const TensorDict&)> apply_weights;
  /// Applies a seed and returns the seed to report to the learner; when
  /// unset, seeding is acked and the seed reported unchanged.
  std::function<int64_t(int64_t)> set_seed;
};

/// What a worker did, returned when the learner shut it down.
struct TENSORDICT_API TorchRLWorkerStats {
  /// Batches collected (each sent, unless the learner was shutting down).
  int64_t batches = 0;
  /// Frames in those batches.
  int64_t frames = 0;
  /// Weight messages applied (the initial weights included).
  int64_t weight_updates = 0;
  /// Weight messages refused.
  int64_t weights_refused = 0;
  /// Seeding instructions served.
  int64_t seeds = 0;
};

/// Serves as worker `options.rank()` of a TorchRL 0.14.1 DistributedCollector
/// learner until it says "shutdown" (see NOTE [TorchRL worker protocol]).
/// Throws c10::Error when the learner goes away or does not answer within
/// the timeouts, when it sends an unknown instruction, or when a batch does
/// not fit; the message names the step and the learner's address.
TENSORDICT_API TorchRLWorkerStats run_torchrl_worker(
    const TorchRLWorkerHooks& hooks, const TorchRLWorkerOptions& options);

/// Serves `collector` as the worker: its batches (one sub-env's [1, T]
/// batch is sent as [T], the layout of TorchRL's learner on an unbatched
/// env; N sub-envs as [N, T], that of a batched env), the weights to its
/// `update_policy_weights_` (applied before the next batch; a refusal names
/// the key), the seed to its `set_seed`. `weights` is the layout the learner
/// sends (its `TensorDict.from_module(policy)`), with the names the
/// collector's policy takes. The seed reported back is the one received
/// (TorchRL's env reports `seed_generator(seed)`). Throws as the hooks
/// overload, and ValueError if `collector` ends before the learner does.
TENSORDICT_API TorchRLWorkerStats run_torchrl_worker(
    Collector& collector,
    const TensorDict& weights,
    const TorchRLWorkerOptions& options);

}  // namespace rl
TENSORDICT_END_NAMESPACE
