#pragma once

// The one UTF-8 validator: meta.json strings, zip entry names and JSON
// strings all accept exactly RFC 3629's well-formed UTF-8, so an overlong
// form, an encoded surrogate or a code point past U+10FFFF is refused the
// same way wherever a name comes from.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tensordict::detail {

/// Decodes the UTF-8 sequence starting at `text[i]` (`i < text.size()`).
/// Returns its length (1 to 4) and stores its code point in `cp`, or returns
/// 0 (and leaves `cp` alone) when the bytes there are not well-formed UTF-8:
/// a stray continuation byte, a lead byte no sequence starts with, a
/// sequence cut short by the end of `text` or by a non-continuation byte, an
/// overlong form, a surrogate (U+D800..U+DFFF) or a code point past U+10FFFF.
size_t utf8_decode(std::string_view text, size_t i, uint32_t& cp) noexcept;

/// Returns the offset of the first byte that does not start a well-formed
/// UTF-8 sequence, or `std::string_view::npos` when all of `text` is valid.
size_t utf8_invalid_offset(std::string_view text) noexcept;

/// True when all of `text` is well-formed UTF-8 (the empty text is).
inline bool utf8_valid(std::string_view text) noexcept {
  return utf8_invalid_offset(text) == std::string_view::npos;
}

}  // namespace tensordict::detail
