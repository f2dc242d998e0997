#pragma once
/// @file
/// TensorDicts over torch.distributed (c10d), wire-compatible with Python
/// tensordict 0.15's `send`, `recv`, `isend`, `irecv`, `init_remote`,
/// `from_remote_init`, `broadcast`, `reduce`, `all_reduce`, `all_gather` and
/// `gather_and_stack`.
//
// Not included by <tensordict/tensordict.h>: this header brings c10d's
// ProcessGroup. Link TensorDict::distributed.
//
// NOTE [The wire]
// Per-leaf messages (send/recv/isend/irecv, reduce, all_reduce) go leaf by
// leaf in Python's order: at each level the keys sorted by code point, a
// nested dict's (or TensorClass's) leaves where its key sorts, a lazy
// stack's dicts one after the other. Point-to-point leaf i (from 0) has tag
// `init_tag + i`, or with `pseudo_rand` the chain of Python's
// `_int_generator` seeded with `init_tag`. Non-tensor values do not cross
// this wire: each side keeps its own, as in Python.
// `consolidated(true)` sends the consolidated storage as one message (tag
// 0); the receiver must be consolidated with the same layout. init_remote,
// broadcast, all_gather and gather_and_stack send the consolidated storage
// and its metadata (pickled, as torch.distributed's *_object_list
// functions do), so the receiver learns keys, shapes, dtypes and non-tensor
// values. Pickles are read and written by a plain-data codec: a Python rank
// whose metadata holds other objects is refused with a clear error.
//
// Differences from Python, for C++'s sake:
// - The methods are free functions in `tensordict::dist` taking the dict
//   first, so c10d stays out of tensor_dict.h; keyword arguments are
//   options structs. Each also takes a TensorClass (Python's tensorclass
//   methods): `dist::send(step, 1)` on one rank, `dist::recv(step, 0)` on
//   the other; `from_remote_init<Step>(0)` names the class to build. A
//   Python tensorclass also names its class in the metadata of init_remote
//   and broadcast (`_tensorclass_type`, which C++ skips); a C++ class does
//   not, so a Python receiver gets a TensorDict (`Cls.from_tensordict`).
// - Point-to-point transfers between two C++ ranks are `checked`: the
//   sender first sends a digest of its keys, shapes and dtypes (tag
//   2^31 - 2), the receiver compares it with its own and answers (one round
//   trip), and only then do the leaves flow; when the digests differ, the
//   full lists are compared. A mismatch is an error on both ranks naming
//   the key and both sides' values, before a byte is written. Python ranks
//   know nothing of this exchange and get Python's exact wire, where Gloo
//   silently fills a leaf only partly if fewer bytes arrive and aborts the
//   receiving process if more do. See NOTE [Choosing the wire].
// - `gather_and_stack` with Gloo reads the storage form of Python's buffers
//   only; a Python rank that pickles its dict instead (non-CPU or
//   requires-grad leaves) is refused with a message saying so.
//
// NOTE [Choosing the wire]
// With `checked` unset (the default), a transfer is checked exactly when
// both ends announced the checked wire, so a C++ rank and a stock Python
// rank talk with no options at all, and two C++ ranks keep the checks:
// - `init_process_group` announces it: before joining Gloo, each C++ rank
//   writes "tensordict_cpp/checked_wire/<rank>" in the group's store (the
//   store Python's `_get_default_store()` returns for that group; no Python
//   code uses these keys).
//   Gloo's full-mesh connect waits for every rank, so when
//   `init_process_group` returns every C++ rank has announced; each side
//   reads its peer's key once (one store round trip) and caches it. Both
//   ends read the same two keys, so they always agree.
// - A group created elsewhere (by Python's torch.distributed in a TorchRL
//   or torchrun job, or by c10d directly) and passed in `options.group` or
//   `set_default_group` made no announcement: its transfers use Python's wire
//   unless `checked(true)` says otherwise, on both ends.
// - `checked(false)` always uses Python's wire. `checked(true)` always
//   checks, except toward a rank of an `init_process_group` group that did
//   not announce (a Python rank): that is a ValueError at once, before any
//   message, since the peer would never answer. On a group created
//   elsewhere, `checked(true)` toward a Python rank waits until the group's
//   timeout and fails.
// `checked_by_default(group, peer)` says which wire the default picks.
// The explicit options must agree on both ends, as every option of
// Python's send/recv must.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensordict/detail/tensor_class_traits.h"
#include "tensordict/options.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
/// TensorDicts over torch.distributed, wire-compatible with Python.
namespace dist {

/// A c10d process group: one created by `init_process_group`, or any other.
using ProcessGroupPtr = c10::intrusive_ptr<c10d::ProcessGroup>;
/// Pending c10d work: `wait()` on each.
using Works = std::vector<c10::intrusive_ptr<c10d::Work>>;

/// How `init_process_group` joins: unset fields come from the environment
/// variables torchrun sets (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE).
struct TENSORDICT_API InitOptions {
  /// The TCPStore host; MASTER_ADDR, else "127.0.0.1".
  TENSORDICT_ARG(std::optional<std::string>, master_addr);
  /// The TCPStore port; MASTER_PORT when unset.
  TENSORDICT_ARG(std::optional<int>, master_port);
  /// This process's rank; RANK when unset.
  TENSORDICT_ARG(std::optional<int>, rank);
  /// The number of ranks; WORLD_SIZE when unset.
  TENSORDICT_ARG(std::optional<int>, world_size);
  /// How long to wait for peers and for each operation; when unset,
  /// TENSORDICT_DIST_TIMEOUT_SECONDS, else 300 s.
  TENSORDICT_ARG(std::optional<std::chrono::milliseconds>, timeout);
};

/// Joins a Gloo process group as Python's
/// `torch.distributed.init_process_group("gloo")` does (the same store
/// prefixes, so C++ and Python ranks can share the group), announces the
/// checked wire in its store (NOTE [Choosing the wire]), makes it the
/// default group and returns it.
TENSORDICT_API ProcessGroupPtr
init_process_group(const InitOptions& options = {});
/// True when point-to-point transfers with `peer` on `group` are checked
/// by default: `group` came from `init_process_group` and `peer` is a C++
/// rank that joined it the same way (NOTE [Choosing the wire]). Throws if
/// `peer` is not another rank of `group`; asks the group's store once per
/// peer.
TENSORDICT_API bool checked_by_default(const ProcessGroupPtr& group, int peer);
/// Makes `group` the group used when an options struct names none; a group
/// created elsewhere gets Python's wire (NOTE [Choosing the wire]).
TENSORDICT_API void set_default_group(ProcessGroupPtr group);
/// The default group; throws if there is none.
TENSORDICT_API ProcessGroupPtr default_group();
/// True once a default group is set.
TENSORDICT_API bool is_initialized();
/// Forgets the default group (its connections close with the last handle).
TENSORDICT_API void destroy_process_group();

/// Options of send/isend (Python's keyword arguments).
struct TENSORDICT_API SendOptions {
  /// The group; the default group when unset.
  TENSORDICT_ARG(ProcessGroupPtr, group);
  /// The tag of the first leaf (see NOTE [The wire]).
  TENSORDICT_ARG(int64_t, init_tag) = 0;
  /// Tags from Python's pseudo-random chain instead of consecutive ones.
  TENSORDICT_ARG(bool, pseudo_rand) = false;
  /// One message: the consolidated storage.
  TENSORDICT_ARG(bool, consolidated) = false;
  /// isend: return the pending works instead of waiting for them.
  TENSORDICT_ARG(bool, return_early) = false;
  /// Exchange keys, shapes and dtypes first; unset: only when both ends
  /// announced it (see NOTE [Choosing the wire]).
  TENSORDICT_ARG(std::optional<bool>, checked);
};

/// Options of recv/irecv (Python's keyword arguments).
struct TENSORDICT_API RecvOptions {
  /// The group; the default group when unset.
  TENSORDICT_ARG(ProcessGroupPtr, group);
  /// The tag of the first leaf (see NOTE [The wire]).
  TENSORDICT_ARG(int64_t, init_tag) = 0;
  /// Tags from Python's pseudo-random chain instead of consecutive ones.
  TENSORDICT_ARG(bool, pseudo_rand) = false;
  /// One message: the consolidated storage, into this consolidated dict.
  TENSORDICT_ARG(bool, consolidated) = false;
  /// irecv: return the pending works instead of waiting for them.
  TENSORDICT_ARG(bool, return_premature) = false;
  /// Exchange keys, shapes and dtypes first; unset: only when both ends
  /// announced it (see NOTE [Choosing the wire]).
  TENSORDICT_ARG(std::optional<bool>, checked);
};

/// Options of the collectives.
struct TENSORDICT_API CollectiveOptions {
  /// The group; the default group when unset.
  TENSORDICT_ARG(ProcessGroupPtr, group);
  /// reduce/all_reduce: the reduction (SUM by default).
  TENSORDICT_ARG(c10d::ReduceOp::RedOpType, op) = c10d::ReduceOp::SUM;
  /// reduce/all_reduce: start every leaf's collective, then wait (or, with
  /// return_premature, return the works).
  TENSORDICT_ARG(bool, async_op) = false;
  /// reduce/all_reduce with async_op: return the works without waiting.
  TENSORDICT_ARG(bool, return_premature) = false;
  /// reduce/all_reduce: pack contiguous leaves of one dtype into buckets of
  /// at most this many bytes, one collective per bucket (Python's order).
  TENSORDICT_ARG(std::optional<int64_t>, bucket_bytes);
  /// init_remote/from_remote_init: use broadcast instead of point to point.
  TENSORDICT_ARG(bool, use_broadcast) = false;
};

/// Sends every tensor leaf to rank `dst` (Python's `td.send(dst)`).
/// Returns the last tag used.
TENSORDICT_API int64_t
send(const TensorDict& td, int dst, const SendOptions& options = {});
/// Receives every tensor leaf from rank `src` into `td`'s leaves, in place
/// (memmapped leaves write their files). Returns the last tag used.
TENSORDICT_API int64_t
recv(const TensorDict& td, int src, const RecvOptions& options = {});
/// Starts sending every leaf; waits unless `return_early`, then returns the
/// pending works (empty once waited).
TENSORDICT_API Works
isend(const TensorDict& td, int dst, const SendOptions& options = {});
/// Starts receiving into `td`; waits unless `return_premature`, then
/// returns the pending works (empty once waited).
TENSORDICT_API Works
irecv(const TensorDict& td, int src, const RecvOptions& options = {});

/// Sends `td`'s metadata and storage so that rank `dst` can build it with
/// `from_remote_init` (Python's `td.init_remote(dst)`).
TENSORDICT_API void init_remote(
    const TensorDict& td, int dst, const CollectiveOptions& options = {});
/// Receives what `init_remote` sent and returns a new dict of it.
[[nodiscard]] TENSORDICT_API TensorDict
from_remote_init(int src, const CollectiveOptions& options = {});

/// Rank `src` sends `td` to every rank; every rank returns the dict (on
/// `src`, its consolidated form). `td` is ignored elsewhere.
[[nodiscard]] TENSORDICT_API TensorDict
broadcast(const TensorDict& td, int src, const CollectiveOptions& options = {});
/// Reduces every leaf onto rank `dst`, in place there.
TENSORDICT_API Works
reduce(const TensorDict& td, int dst, const CollectiveOptions& options = {});
/// Reduces every leaf across the group, in place on every rank.
TENSORDICT_API Works
all_reduce(const TensorDict& td, const CollectiveOptions& options = {});
/// Returns every rank's dict, in rank order (the dicts may differ).
[[nodiscard]] TENSORDICT_API std::vector<TensorDict> all_gather(
    const TensorDict& td, const CollectiveOptions& options = {});
/// On `dst`, writes the other ranks' dicts, stacked in rank order, into
/// `td` (batch [world_size - 1, ...]) and returns it; elsewhere sends `td`
/// and returns nullopt.
TENSORDICT_API std::optional<TensorDict> gather_and_stack(
    const TensorDict& td, int dst, const CollectiveOptions& options = {});

// --- TensorClass on either end -----------------------------------------------
// A TensorClass crosses the wire as its dict, as in Python (whose tensorclass
// methods forward to `_tensordict`): the same messages and tags, so a class
// on one end talks to a dict or a class on the other, C++ or Python. A class
// received in place keeps its class; one built from what arrived
// (from_remote_init, broadcast, all_gather, gather_and_stack) is checked
// like `TC::from_tensordict`.

/// Sends the fields of `tc` (see `send`).
template <typename TC, std::enable_if_t<is_tensor_class_v<TC>, int> = 0>
int64_t send(const TC& tc, int dst, const SendOptions& options = {}) {
  return send(tc.tensordict(), dst, options);
}
/// Receives into the tensor fields of `tc` in place (see `recv`).
template <typename TC, std::enable_if_t<is_tensor_class_v<TC>, int> = 0>
int64_t recv(const TC& tc, int src, const RecvOptions& options = {}) {
  return recv(tc.tensordict(), src, options);
}
/// Starts sending the fields of `tc` (see `isend`).
template <typename TC, std::enable_if_t<is_tensor_class_v<TC>, int> = 0>
Works isend(const TC& tc, int dst, const SendOptions& options = {}) {
  return isend(tc.tensordict(), dst, options);
}
/// Starts receiving into the tensor fields of `tc` (see `irecv`).
template <typename TC, std::enable_if_t<is_tensor_class_v<TC>, int> = 0>
Works irecv(const TC& tc, int src, const RecvOptions& options = {}) {
  return irecv(tc.tensordict(), src, options);
}
/// Sends `tc` for `from_remote_init<TC>` (or the dict form) on `dst`.
template <typename TC, std::enable_if_t<is_tensor_class_v<TC>, int> = 0>
void init_remote(const TC& tc, int dst, const CollectiveOptions& options = {}) {
  init_remote(tc.tensordict(), dst, options);
}
/// Receives what `init_remote` sent as a `TC`; throws like
/// `TC::from_tensordict` when it does not fit the class.
template <typename TC, std::enable_if_t<is_tensor_class_v<TC>, int> = 0>
[[nodiscard]] TC from_remote_init(
    int src, const CollectiveOptions& options = {}) {
  return TC::from_tensordict(from_remote_init(src, options));
}
/// `broadcast` of a class: every rank returns rank `src`'s instance.
template <typename TC, std::enable_if_t<is_tensor_class_v<TC>, int> = 0>
[[nodiscard]] TC broadcast(
    const TC& tc, int src, const CollectiveOptions& options = {}) {
  return TC::from_tensordict(broadcast(tc.tensordict(), src, options));
}
/// Reduces every tensor field onto rank `dst`, in place there.
template <typename TC, std::enable_if_t<is_tensor_class_v<TC>, int> = 0>
Works reduce(const TC& tc, int dst, const CollectiveOptions& options = {}) {
  return reduce(tc.tensordict(), dst, options);
}
/// Reduces every tensor field across the group, in place on every rank.
template <typename TC, std::enable_if_t<is_tensor_class_v<TC>, int> = 0>
Works all_reduce(const TC& tc, const CollectiveOptions& options = {}) {
  return all_reduce(tc.tensordict(), options);
}
/// Returns every rank's instance, in rank order.
template <typename TC, std::enable_if_t<is_tensor_class_v<TC>, int> = 0>
[[nodiscard]] std::vector<TC> all_gather(
    const TC& tc, const CollectiveOptions& options = {}) {
  std::vector<TC> out;
  for (auto& td : all_gather(tc.tensordict(), options)) {
    out.push_back(TC::from_tensordict(std::move(td)));
  }
  return out;
}
/// `gather_and_stack` of a class: on `dst`, the other ranks' instances
/// stacked into `tc`'s fields, returned as `tc`; elsewhere nullopt.
template <typename TC, std::enable_if_t<is_tensor_class_v<TC>, int> = 0>
std::optional<TC> gather_and_stack(
    const TC& tc, int dst, const CollectiveOptions& options = {}) {
  if (gather_and_stack(tc.tensordict(), dst, options)) {
    return tc;
  }
  return std::nullopt;
}

namespace detail {
/// Python's `tensordict.utils._int_generator`: the next pseudo-random tag
/// (in [0, 10000)) after `seed` (numpy's PCG64 seeded with `seed`).
TENSORDICT_API int64_t int_generator(int64_t seed);
}  // namespace detail

}  // namespace dist
TENSORDICT_END_NAMESPACE
