#pragma once

// What a lazy stack's reads (core/lazy_stack.cpp) and its repr
// (repr/lazy_stack_repr.cpp) share: its elements' entries gathered key by key.

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/tensor_dict_impl.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail::stacked {

/// The nodes of the first element whose key every element holds, in the
/// first element's order.
std::vector<const Node*> common_nodes(const std::vector<TensorDict>& tds);

/// The entries named `part` of every element; throws Python's KeyError when
/// one of them lacks it. `key` is the full key looked up.
std::vector<Value> member_values(
    const std::vector<TensorDict>& tds,
    std::string_view part,
    const NestedKey& key);

/// The nested dicts of `values`, which must all be dicts.
std::vector<TensorDict> nested_dicts(const std::vector<Value>& values);

/// Stacks non-tensor `values` (one per element) into one NonTensorStack at
/// `stack_dim`; throws naming `key` unless they have one shape.
NonTensorStack stack_non_tensors(
    const std::vector<Value>& values, int64_t stack_dim, const NestedKey& key);

}  // namespace detail::stacked
TENSORDICT_END_NAMESPACE
