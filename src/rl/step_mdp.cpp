// step_mdp (TorchRL's function): the root of the next step. Two ways to
// one result: by node (the common case) and through `set` (anything else).

#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "tensordict/detail/entries.h"
#include "tensordict/errors.h"
#include "tensordict/rl/env.h"
#include "tensordict/value.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

namespace {

// The key lists step_mdp leaves out (pointers into its options: a
// rollout calls it every step).
using ExcludedKeys = c10::SmallVector<const std::vector<NestedKey>*, 3>;

// The key lists `options` leaves out.
ExcludedKeys excluded_keys(const StepMdpOptions& options) {
  ExcludedKeys excluded;
  if (options.exclude_reward()) {
    excluded.push_back(&options.reward_keys());
  }
  if (options.exclude_done()) {
    excluded.push_back(&options.done_keys());
  }
  if (options.exclude_action()) {
    excluded.push_back(&options.action_keys());
  }
  return excluded;
}

// A key's length and first letter, as one number.
uint64_t prefix(std::string_view key) {
  return (static_cast<uint64_t>(key.size()) << 8) |
         (key.empty() ? 0U : static_cast<unsigned char>(key[0]));
}

// The keys step_mdp leaves out. A top-level key can be excluded only if it
// has the length and first letter of a one-part excluded key, so most
// entries are told apart without comparing keys.
class StepMdpExclusion {
 public:
  explicit StepMdpExclusion(const StepMdpOptions& options)
      : excluded_(excluded_keys(options)) {
    for (const std::vector<NestedKey>* keys : excluded_) {
      for (const NestedKey& key : *keys) {
        if (key.size() == 1) {
          top_prefixes_.push_back(prefix(key[0]));
        }
      }
    }
  }

  bool excludes(c10::ArrayRef<std::string_view> path) const {
    if (path.size() == 1 &&
        std::find(
            top_prefixes_.begin(), top_prefixes_.end(), prefix(path[0])) ==
            top_prefixes_.end()) {
      return false;
    }
    for (const std::vector<NestedKey>* keys : excluded_) {
      for (const NestedKey& key : *keys) {
        if (key.size() == path.size() &&
            std::equal(key.begin(), key.end(), path.begin())) {
          return true;
        }
      }
    }
    return false;
  }

 private:
  ExcludedKeys excluded_;
  c10::SmallVector<uint64_t, 8> top_prefixes_;
};

// Which entries of one source step_mdp leaves out: the excluded keys, and,
// at the root of the stepped dict, its "next" (moved up separately).
struct StepMdpSkip {
  bool operator()(c10::ArrayRef<std::string_view> path) const {
    return (skip_next && path.size() == 1 &&
            path[0] == std::string_view("next")) ||
           exclusion.excludes(path);
  }
  const StepMdpExclusion& exclusion;
  bool skip_next;
};

// step_mdp's copy of one dict into the new root through `set`, for the
// dicts that merge_entries does not take (another batch size or device,
// dim names): leaves aliased, nested dicts made anew (the collector's
// resets write into the new root's, which must not reach the stepped
// dict's), merged with those already there, the excluded keys left out and
// a lazy stack kept whole. What merge_entries builds, checked.
void copy_through_set(
    const TensorDict& from,
    TensorDict& to,
    const StepMdpSkip& skip,
    std::vector<std::string_view>& path) {
  for (const NestedKey& key : from.keys()) {
    const std::string_view name = key[0];
    path.push_back(name);
    if (!skip(path)) {
      const Value& value = *from.find(key);
      if (value.is_tensordict()) {
        const Value* there = to.find(key);
        TensorDict made = there != nullptr && there->is_tensordict()
                              ? there->tensordict()
                              : value.tensordict().empty();
        copy_through_set(value.tensordict(), made, skip, path);
        if (!made.is_empty()) {
          to.set(key, made);
        }
      } else {
        to.set(key, value);
      }
    }
    path.pop_back();
  }
}

}  // namespace

// NOTE [step_mdp by node]
// A rollout calls step_mdp every step, and TensorDict::set checks each
// value again against the new root: its key, batch prefix, device and dim
// names. When the root and its "next" share batch size and device and have
// no dim names (what every env here writes), each value has passed those
// checks already in a dict of the same batch size and device, so the new
// root takes the entries as they are (detail::merge_entries): keys hashed
// once, room reserved, no checks repeated. Anything else goes through set
// (copy_through_set), which builds the same dict.

TensorDict step_mdp(const TensorDict& td, const StepMdpOptions& options) {
  TENSORDICT_CHECK_KEY(
      td.contains("next"),
      "step_mdp: key 'next' is missing: the dict was not stepped");
  const TensorDict next = td.get_tensordict("next");
  const StepMdpExclusion exclusion(options);
  const StepMdpSkip root_skip{exclusion, /*skip_next=*/true};
  const StepMdpSkip next_skip{exclusion, /*skip_next=*/false};
  TensorDict out = next.empty();
  if (options.keep_other() && detail::merge_entries(td, out, root_skip)) {
    // The root shares next's frame: so does everything of next.
    const bool merged = detail::merge_entries(next, out, next_skip);
    TORCH_INTERNAL_ASSERT(merged);
    return out;
  }
  std::vector<std::string_view> path;
  if (options.keep_other()) {
    copy_through_set(td, out, root_skip, path);
  } else if (!options.exclude_action()) {
    for (const NestedKey& key : options.action_keys()) {
      if (td.contains(key)) {
        out.set(key, td[key]);
      }
    }
  }
  copy_through_set(next, out, next_skip, path);
  return out;
}

}  // namespace rl
TENSORDICT_END_NAMESPACE
