#pragma once

// Comparing shapes on a hot path: c10::IntArrayRef's operator== and
// std::equal compile to a call to memcmp, whose size dispatch costs more
// than the compare of a dim or two; a collector's step compares a few
// shapes per leaf.

#include <c10/util/ArrayRef.h>

#include <cstddef>
#include <cstdint>

namespace tensordict::detail {

/// Returns whether the `n` dims at `a` and at `b` are the same, compared
/// in an inline loop. Takes pointers so that a caller comparing parts of
/// shapes, having checked their sizes, pays no `slice()` (an out-of-line
/// call with its own bounds check).
inline bool same_dims(const int64_t* a, const int64_t* b, size_t n) noexcept {
  for (size_t d = 0; d < n; ++d) {
    if (a[d] != b[d]) {
      return false;
    }
  }
  return true;
}

/// Returns whether `a` and `b` have the same dims.
inline bool same_dims(c10::IntArrayRef a, c10::IntArrayRef b) noexcept {
  return a.size() == b.size() && same_dims(a.data(), b.data(), a.size());
}

}  // namespace tensordict::detail
