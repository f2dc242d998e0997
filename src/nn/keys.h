#pragma once

// Key-list helpers shared by the modules of tensordict/nn.h.

#include <string>
#include <vector>

#include "tensordict/nested_key.h"

TENSORDICT_BEGIN_NAMESPACE
namespace nn {
namespace nn_module_internal {

// Returns true if `key` is one of `keys` (a linear scan: key lists are
// short, and their order is what Python's lists keep).
bool contains_key(const std::vector<NestedKey>& keys, const NestedKey& key);

// Returns true for the out_key "_", which discards an output.
bool is_discard(const NestedKey& key);

// Renders `keys` as Python prints a list of keys: ['a', ('b', 'c')].
std::string keys_to_string(const std::vector<NestedKey>& keys);

}  // namespace nn_module_internal
}  // namespace nn
TENSORDICT_END_NAMESPACE
