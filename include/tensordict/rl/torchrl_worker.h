#pragma once

/// @file
/// A C++ process as a worker of a stock TorchRL 0.14.1
/// `DistributedCollector` learner. Part of <tensordict/rl.h>.
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

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "tensordict/export.h"
#include "tensordict/options.h"
#include "tensordict/rl/collector.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

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

/// Serves `collector` as the overload above does, with the layout its
/// policy answers for (`weights_layout()`, see NOTE [Weights contract] in
/// tensordict/nn.h): the weights the learner sends must be the policy's,
/// keys, shapes and dtypes. Throws what `weights_layout()` throws.
TENSORDICT_API TorchRLWorkerStats
run_torchrl_worker(Collector& collector, const TorchRLWorkerOptions& options);

}  // namespace rl
TENSORDICT_END_NAMESPACE
