#pragma once

// Entry-level operations for the library's higher floors (not API): copies
// of a dict's entries that skip the checks `set` repeats, where the caller
// has established what those checks would find, and walks of its leaves.
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
