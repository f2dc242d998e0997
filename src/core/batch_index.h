#pragma once

// The one reading of an index over a dict's batch dims, shared by TensorDict
// and LazyStackedTensorDict.

#include <ATen/TensorIndexing.h>

#include <cstdint>
#include <vector>

#include "core/tensor_dict_impl.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

// NOTE [Batch-dim indices]
// A leaf has the dict's batch dims first and its own feature dims after, so
// an index meant for the batch dims must not reach the feature dims: an
// Ellipsis would expand over them. normalize_index expands the Ellipsis
// into full slices over the batch dims only, so the same index then works on
// every leaf and nested dict, whatever its feature dims.

/// An index with its Ellipsis expanded over the batch dims.
struct NormalizedIndex {
  std::vector<at::indexing::TensorIndex> indices;
  DimNames names;  // names of the result's batch dims (empty = none)
};

/// Returns the number of batch dims an index element consumes: 1 for an
/// integer, a slice or an integer tensor, `dim()` for a bool mask (0 for a
/// 0-dim one, which adds a dim as torch does), 0 for None, Ellipsis and
/// true/false.
int64_t consumed_dims(const at::indexing::TensorIndex& index);

/// Expands the Ellipsis of `indices` over `batch_size` and works out the
/// names of the result's batch dims. Throws IndexError for a second
/// Ellipsis or more indexed dims than batch dims (naming `owner`, the class
/// indexed).
NormalizedIndex normalize_index(
    c10::ArrayRef<at::indexing::TensorIndex> indices,
    c10::IntArrayRef batch_size,
    const DimNames& names,
    const char* owner);

/// Like the above, for a dict's batch size and names.
NormalizedIndex normalize_index(
    c10::ArrayRef<at::indexing::TensorIndex> indices,
    const TensorDictImpl& impl);

}  // namespace detail
TENSORDICT_END_NAMESPACE
