#pragma once

// Private to src/: the byte layout that the consolidate writer, reader and
// device moves share, and the parts that src/distributed/ sends. See NOTE
// [Consolidated layout] in tensordict/consolidate.h.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "tensordict/options.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Each leaf's bytes are zero-padded to a multiple of this.
constexpr int64_t kAlignment = 8;
/// The metadata length after the JSON: a little-endian int64.
constexpr int64_t kTrailerBytes = 8;

/// True if `key` is a member of a level's metadata object rather than a
/// nested key.
inline bool is_reserved_member(std::string_view key) {
  return key == "cls" || key == "non_tensors" || key == "leaves" ||
         key == "cls_metadata" || key == "size";
}

/// Returns a contiguous `shape` tensor of `dtype` viewing `storage` from
/// byte `start`, which must be a multiple of the item size.
at::Tensor leaf_view(
    const at::Tensor& storage,
    int64_t start,
    c10::ScalarType dtype,
    c10::IntArrayRef shape);

/// A dict's leaves in one uint8 storage and the metadata that describes it,
/// without the file's trailer: what travels between ranks.
struct ConsolidatedParts {
  at::Tensor storage;  // CPU unless the dict's leaves are elsewhere
  Json metadata;
};

/// Packs `td`'s leaves into a new storage, or returns the storage a
/// consolidated `td` already views when its leaves sit where the metadata
/// puts them (no copy).
ConsolidatedParts consolidated_parts(const TensorDict& td);

/// Rebuilds a dict of views of `storage` (a 1-dim uint8 CPU tensor) from
/// `metadata`, checked as `from_consolidated` checks a file; `source` names
/// the data in messages.
TensorDict read_consolidated_parts(
    const at::Tensor& storage,
    const Json& metadata,
    const std::string& source,
    const LoadConsolidatedOptions& options);

}  // namespace detail
TENSORDICT_END_NAMESPACE
