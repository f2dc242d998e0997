#pragma once

// The safetensors file format, with no TensorDict: the header of a file
// read from untrusted bytes and checked the way the safetensors crate
// checks it (`SafeTensors::read_metadata` and `Metadata::validate`), and the
// header of a file written byte for byte as the crate writes it.
//
// NOTE [Safetensors layout]
// A file is an 8-byte little-endian header length N, N bytes of JSON (an
// object, padded with spaces), then the data region. The object maps each
// tensor's name to {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin,
// end]} (offsets into the data region), plus an optional "__metadata__"
// object of string values. The crate writes the tensors sorted by dtype,
// widest first, then by name, back to back from offset 0, and pads N to a
// multiple of 8, so every tensor is aligned to its item size.

#include <c10/core/ScalarType.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensordict/options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// The largest header accepted (the crate's MAX_HEADER_SIZE).
constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

/// One tensor of a safetensors header.
struct SafetensorsTensor {
  std::string name;
  c10::ScalarType dtype = c10::kFloat;
  std::vector<int64_t> shape;
  int64_t begin = 0;  ///< offset into the data region
  int64_t end = 0;
};

/// A checked safetensors header.
struct SafetensorsHeader {
  /// The tensors sorted by offset: back to back, covering the data region.
  std::vector<SafetensorsTensor> tensors;
  /// The `__metadata__` entries, in file order (empty when absent).
  std::vector<std::pair<std::string, std::string>> metadata;
  /// Where the data region starts in the file: 8 + the header length.
  int64_t data_start = 0;
};

/// Returns the dtype the safetensors name `name` stands for ("F32"), as
/// `safetensors.torch` maps them; nothing for a name it does not load.
std::optional<c10::ScalarType> safetensors_dtype(std::string_view name);

/// Returns the safetensors name of `dtype`, or nothing if the format has
/// none (complex128, the quantized and bit types).
std::optional<std::string_view> safetensors_dtype_name(c10::ScalarType dtype);

/// Reads and checks the header of the `size` bytes at `data`, a whole file
/// named `source` in messages. Throws c10::Error, saying what was expected
/// and what was found and naming the tensor, unless: the 8-byte length fits
/// the file and kSafetensorsMaxHeaderBytes; the header is a JSON object in
/// UTF-8; `__metadata__` is an object of strings (or null); every other
/// member is an object with a known "dtype", a "shape" of non-negative
/// sizes and "data_offsets" [begin, end] with end - begin the shape's byte
/// size; and the tensors, sorted by offset, start at 0, neither overlap nor
/// leave holes, and end at the end of the file. Unknown members of a tensor
/// entry are ignored and a name given twice keeps its last entry, as in the
/// crate (the first one's bytes are then a hole, refused).
SafetensorsHeader parse_safetensors_header(
    const uint8_t* data, size_t size, const std::string& source);

/// Returns the header bytes (the 8-byte length, then the JSON padded with
/// spaces to a multiple of 8) for `tensors` in the order given, their
/// offsets already set, and `metadata`: what the crate writes for them.
std::string safetensors_header_bytes(
    const std::vector<SafetensorsTensor>& tensors,
    const std::vector<std::pair<std::string, std::string>>& metadata);

/// Sorts `tensors` as the crate writes them (dtype widest first in its
/// order, then name) and sets their offsets back to back from 0; returns
/// the size of the data region.
int64_t layout_safetensors(std::vector<SafetensorsTensor>& tensors);

}  // namespace detail
TENSORDICT_END_NAMESPACE
