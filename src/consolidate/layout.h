#pragma once

// Private to src/consolidate/: the byte layout that the writer, the reader
// and device moves share. See NOTE [Consolidated layout] in
// tensordict/consolidate.h.

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

}  // namespace detail
TENSORDICT_END_NAMESPACE
