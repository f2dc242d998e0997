#include "util/utf8.h"

namespace tensordict::detail {

size_t utf8_decode(std::string_view text, size_t i, uint32_t& cp) noexcept {
  const auto byte = [&](size_t k) {
    return static_cast<unsigned char>(text[k]);
  };
  const unsigned char lead = byte(i);
  if (lead < 0x80) {
    cp = lead;
    return 1;
  }
  // The lead byte fixes the length and, for the second byte, the range that
  // rules out overlong forms (E0, F0), surrogates (ED) and code points past
  // U+10FFFF (F4); C0, C1 and F5..FF lead only overlong or too-large forms.
  size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    low = lead == 0xE0 ? 0xA0 : 0x80;
    high = lead == 0xED ? 0x9F : 0xBF;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    low = lead == 0xF0 ? 0x90 : 0x80;
    high = lead == 0xF4 ? 0x8F : 0xBF;
  } else {
    return 0;
  }
  if (text.size() - i < length) {
    return 0;
  }
  uint32_t code = lead & (0x7Fu >> length);
  for (size_t k = 1; k < length; ++k) {
    const unsigned char next = byte(i + k);
    const unsigned char lo = k == 1 ? low : 0x80;
    const unsigned char hi = k == 1 ? high : 0xBF;
    if (next < lo || next > hi) {
      return 0;
    }
    code = (code << 6) | (next & 0x3Fu);
  }
  cp = code;
  return length;
}

size_t utf8_invalid_offset(std::string_view text) noexcept {
  size_t i = 0;
  uint32_t cp = 0;
  while (i < text.size()) {
    const size_t length = utf8_decode(text, i, cp);
    if (length == 0) {
      return i;
    }
    i += length;
  }
  return std::string_view::npos;
}

}  // namespace tensordict::detail
