#pragma once

// Private to src/distributed/: what point-to-point and the collectives share.

#include <optional>
#include <string>
#include <vector>

#include "tensordict/distributed.h"

TENSORDICT_BEGIN_NAMESPACE
namespace dist {
namespace detail {

/// The tensor leaves of a dict in wire order. Their keys, needed only for
/// messages, are built on demand from a table of names borrowed from the
/// dict, so a transfer formats no key unless it reports one: the dict must
/// outlive the table and stay unchanged.
struct WireLeaves {
  std::vector<at::Tensor> tensors;

  /// Leaf i's key as messages show it: "key ('a', 'b')".
  std::string key(size_t i) const;

  /// One entry of a path: its name and the entry it is in (-1: the root).
  struct PathPart {
    const std::string* name;
    int32_t parent;
  };
  std::vector<PathPart> parts;
  std::vector<int32_t> leaf_part;  // leaf i's innermost part
};

/// The tensor leaves of `td` in Python's order (NOTE [The wire]): keys
/// sorted at each level, or in insertion order (all_reduce's _fast_apply).
WireLeaves wire_leaves(const TensorDict& td, bool sorted = true);

/// `group` if set, else the default group.
ProcessGroupPtr group_or_default(const ProcessGroupPtr& group);

/// Checks that `rank` is a rank of `group`; `what` names the call.
void check_rank(const ProcessGroupPtr& group, int rank, const char* what);

/// Checks that `peer` is another rank of `group`; `what` names the call.
void check_peer(const ProcessGroupPtr& group, int peer, const char* what);

/// Whether `peer` announced the checked wire in `group`'s store (NOTE [Who
/// speaks the checked wire]); nullopt when `group` was not created by
/// init_process_group, so nothing is known of its ranks.
std::optional<bool> peer_speaks_checked(const ProcessGroupPtr& group, int peer);

/// Resolves a transfer's `checked` option toward `peer` (NOTE [The wire]):
/// unset means checked iff both ends announced it; true toward a rank known
/// not to speak it throws; `what` names the call.
bool use_checked(
    std::optional<bool> asked,
    const ProcessGroupPtr& group,
    int peer,
    const char* what);

/// Waits for every work; rethrows the first failure, prefixed by `what`.
void wait_all(const Works& works, const std::string& what);

/// torch.distributed's send_object_list/recv_object_list of one object:
/// its pickled size (int64), then the pickle, both with tag 0.
void send_object(const Json& object, int dst, const ProcessGroupPtr& group);
Json recv_object(
    int src, const ProcessGroupPtr& group, const std::string& what);

/// broadcast_object_list of one object: on `src`, sends `object` (and
/// returns it); elsewhere returns what `src` sent.
Json broadcast_object(
    const Json& object, int src, const ProcessGroupPtr& group);

/// all_gather_object: every rank's object, in rank order.
std::vector<Json> all_gather_object(
    const Json& object, const ProcessGroupPtr& group);

/// Reads a pickle that a peer sent; `what` names it in messages.
Json read_pickle(
    const at::Tensor& bytes, int64_t size, const std::string& what);

}  // namespace detail
}  // namespace dist
TENSORDICT_END_NAMESPACE
