#pragma once

/// @file
/// The collector: a policy stepping a batched env, batches in TorchRL
/// 0.14.1's `Collector` layout. Part of <tensordict/rl.h>.

#include <cstdint>
#include <memory>
#include <optional>

#include "tensordict/export.h"
#include "tensordict/nn.h"
#include "tensordict/options.h"
#include "tensordict/probabilistic.h"
#include "tensordict/rl/env.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

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
/// batch dim and gives [T]: `squeeze_single_env(batch)` is that layout).
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
  /// returns the same dict, overwritten, until the policy's outputs change
  /// between batches (a key added or dropped): that batch is a new dict of
  /// the new keys. Keys that change within a batch are an error. Errors
  /// from the policy or the env
  /// propagate; the collector can go on after an error in the policy
  /// (that step is retried) but not after one in the env.
  std::optional<TensorDict> next();
  /// Checks `weights` against the layout the policy answers for (its
  /// `weights_layout()`: every key, shape and dtype; see NOTE [Weights
  /// contract] in tensordict/nn.h) and stages a copy; the policy's
  /// `load_weights` takes them before the next batch (or the next step
  /// with `update_weights_mid_batch`), whatever the module: parameters and
  /// buffers, an AOTIModule's package, or an AOTIModule inside a
  /// TensorDictSequential under its place's keys (`module.0`, ...). Throws
  /// ValueError or KeyError naming the key that does not fit; the staged
  /// and the current weights are then unchanged.
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

/// Returns a collector batch in the layout TorchRL's `Collector` gives for
/// the env a Python user would build: a batch of one sub-env, [1, T], as
/// [T] (a view; the layout of an unbatched `GymEnv`), and a batch of N > 1
/// sub-envs, [N, T], as it is (the same dict). What
/// `tensordict_cpp.Collector` yields and what the TorchRL worker sends.
[[nodiscard]] TENSORDICT_API TensorDict
squeeze_single_env(const TensorDict& batch);

}  // namespace rl
TENSORDICT_END_NAMESPACE
