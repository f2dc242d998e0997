#pragma once

// Entry-level operations for the library's higher floors (not API): copies
// and in-place refills of a dict's entries that skip the checks `set`
// repeats, where the caller has established what those checks would find.
// They read and write core's state (src/core/tensor_dict_impl.h), so they
// live in core (src/core/entries.cpp), and a floor above reaches a dict's
// entries through them rather than through core's private headers: rl/'s
// step_mdp and collector do (see NOTE [step_mdp by node] there).

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/FunctionRef.h>

#include <cstddef>
#include <string_view>

#include "tensordict/export.h"
#include "tensordict/nested_key.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Says whether an entry is left out of a copy; `path` is its key,
/// outermost part first.
using EntrySkip = c10::function_ref<bool(c10::ArrayRef<std::string_view> path)>;

/// Copies the entries of `from` into `to` without checking them again:
/// tensors and non-tensor values aliased, lazy stacks kept whole, nested
/// dicts made anew like their source (or merged, in place, into the dict
/// `to` already holds at that key), a nested dict left empty not added, the
/// entries `skip` names left out. Returns false, having changed nothing,
/// unless `from` and `to` have the same batch size and device and neither
/// has dim names: each value then passed `set`'s checks in a dict like
/// `to`. Meant for a `to` the caller made.
TENSORDICT_API bool merge_entries(
    const TensorDict& from, const TensorDict& to, EntrySkip skip);

/// One source of `refill_entries`: a dict and the entries of it to skip.
struct EntrySource {
  /// The dict whose entries go into the refilled one.
  const TensorDict& dict;
  /// The entries left out.
  EntrySkip skip;
};

/// Makes `to` what `merge_entries` of each source in turn into an empty
/// dict like `to` would make, in place: each entry takes its new value,
/// and the entries left over (keys no source has) are dropped; no dict,
/// entry or key is made and nothing is hashed again. Returns true when
/// done; returns false when it cannot: a key missing or in another order, a
/// dict where a tensor was or the reverse, a nested dict that would be left
/// empty, `to` or a nested dict of it held by another handle or not plain
/// (locked, shared, memmapped, consolidated, named, a Python class), or a
/// source whose batch size or device differs from `to`'s. After false,
/// `to` holds a mix of old and new values: drop it.
TENSORDICT_API bool refill_entries(
    const TensorDict& to, c10::ArrayRef<EntrySource> sources);

/// Finds the tensors of `td` in walk order (depth first, in insertion
/// order) when they are exactly the keys `order` lists, in that order:
/// puts the i-th at `values[slots[i]]` and returns true. Returns false at
/// the first difference (another key, a missing or extra tensor) and at a
/// lazy stack; `values` then holds what was found before it. Non-tensor
/// values are not counted. No key is made.
TENSORDICT_API bool match_leaf_order(
    const TensorDict& td,
    c10::ArrayRef<NestedKey> order,
    c10::ArrayRef<size_t> slots,
    const at::Tensor** values);

}  // namespace detail
TENSORDICT_END_NAMESPACE
