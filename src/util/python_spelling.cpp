#include "util/python_spelling.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

int64_t wrap_dim(int64_t dim, int64_t ndim) {
  TORCH_CHECK_INDEX(
      dim >= -ndim && dim < ndim,
      "Dimension out of range (expected to be in range of [",
      -ndim,
      ", ",
      ndim - 1,
      "], but got ",
      dim,
      ")");
  return dim < 0 ? dim + ndim : dim;
}

std::string dtype_name(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Bool:
      return "torch.bool";
    case c10::ScalarType::Byte:
      return "torch.uint8";
    case c10::ScalarType::Char:
      return "torch.int8";
    case c10::ScalarType::Short:
      return "torch.int16";
    case c10::ScalarType::Int:
      return "torch.int32";
    case c10::ScalarType::Long:
      return "torch.int64";
    case c10::ScalarType::UInt16:
      return "torch.uint16";
    case c10::ScalarType::UInt32:
      return "torch.uint32";
    case c10::ScalarType::UInt64:
      return "torch.uint64";
    case c10::ScalarType::Half:
      return "torch.float16";
    case c10::ScalarType::BFloat16:
      return "torch.bfloat16";
    case c10::ScalarType::Float:
      return "torch.float32";
    case c10::ScalarType::Double:
      return "torch.float64";
    case c10::ScalarType::ComplexHalf:
      return "torch.complex32";
    case c10::ScalarType::ComplexFloat:
      return "torch.complex64";
    case c10::ScalarType::ComplexDouble:
      return "torch.complex128";
    case c10::ScalarType::QInt8:
      return "torch.qint8";
    case c10::ScalarType::QUInt8:
      return "torch.quint8";
    case c10::ScalarType::QInt32:
      return "torch.qint32";
    case c10::ScalarType::QUInt4x2:
      return "torch.quint4x2";
    case c10::ScalarType::Float8_e4m3fn:
      return "torch.float8_e4m3fn";
    case c10::ScalarType::Float8_e5m2:
      return "torch.float8_e5m2";
    case c10::ScalarType::Float8_e4m3fnuz:
      return "torch.float8_e4m3fnuz";
    case c10::ScalarType::Float8_e5m2fnuz:
      return "torch.float8_e5m2fnuz";
    default:
      return std::string("torch.") + c10::toString(dtype);
  }
}

std::string size_repr(c10::IntArrayRef sizes) {
  return "torch.Size([" +
         join_spelled(
             sizes, [](int64_t size) { return std::to_string(size); }) +
         "])";
}

std::string python_tuple(c10::IntArrayRef sizes) {
  return "(" +
         join_spelled(
             sizes, [](int64_t size) { return std::to_string(size); }) +
         (sizes.size() == 1 ? ",)" : ")");
}

namespace {

// Decodes one UTF-8 code point at text[i]; returns its length (1 for bytes
// that are not valid UTF-8, which are then kept as they are).
size_t decode_utf8(std::string_view text, size_t i, uint32_t& cp) {
  const auto byte = [&](size_t k) {
    return static_cast<unsigned char>(text[k]);
  };
  const unsigned char b0 = byte(i);
  size_t len = b0 < 0x80           ? 1
               : (b0 >> 5) == 0x6  ? 2
               : (b0 >> 4) == 0xE  ? 3
               : (b0 >> 3) == 0x1E ? 4
                                   : 0;
  if (len == 0 || i + len > text.size()) {
    cp = b0;
    return 1;
  }
  cp = len == 1 ? b0 : b0 & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) {
      cp = b0;
      return 1;
    }
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  return len;
}

// Python's str.isprintable() for the code points that matter in practice:
// controls, separators other than the space, and the common format
// characters. (Unassigned code points would need Unicode's tables.)
bool is_printable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) {
    return false;
  }
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) ||
      (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x2064) ||
      cp == 0x3000 || cp == 0xFEFF || (cp >= 0xD800 && cp <= 0xDFFF) ||
      (cp >= 0xE000 && cp <= 0xF8FF) || (cp >= 0xFFF9 && cp <= 0xFFFB)) {
    return false;
  }
  return true;
}

void append_escape(std::string& out, uint32_t cp) {
  char buf[16];
  if (cp <= 0xFF) {
    std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
  } else if (cp <= 0xFFFF) {
    std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
  } else {
    std::snprintf(buf, sizeof(buf), "\\U%08x", cp);
  }
  out += buf;
}

}  // namespace

std::string python_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t len = decode_utf8(text, i, cp);
    switch (cp) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (cp == static_cast<uint32_t>(quote)) {
          out += '\\';
          out += quote;
        } else if (len == 1 && cp >= 0x80) {
          out += text[i];  // a stray byte: not valid UTF-8, keep it
        } else if (!is_printable(cp)) {
          append_escape(out, cp);
        } else {
          out.append(text.substr(i, len));
        }
    }
    i += len;
  }
  out += quote;
  return out;
}

std::string float_repr(double value) {
  if (std::isnan(value)) {
    return "nan";
  }
  if (std::isinf(value)) {
    return value > 0 ? "inf" : "-inf";
  }
  // nlohmann prints the shortest digits that round-trip; Python's repr uses
  // the same digits with its own layout. Pull out digits and exponent.
  const std::string shortest = nlohmann::json(value).dump();
  std::string digits;
  int exponent = 0;  // value = 0.DIGITS * 10^exponent
  bool negative = false;
  bool seen_point = false;
  int int_digits = 0;
  size_t i = 0;
  if (shortest[i] == '-') {
    negative = true;
    ++i;
  }
  for (; i < shortest.size() && shortest[i] != 'e' && shortest[i] != 'E'; ++i) {
    if (shortest[i] == '.') {
      seen_point = true;
    } else {
      digits += shortest[i];
      int_digits += seen_point ? 0 : 1;
    }
  }
  exponent = int_digits;
  if (i < shortest.size()) {
    exponent += std::stoi(shortest.substr(i + 1));
  }
  // Strip leading zeros (adjusting the exponent) and trailing zeros.
  size_t lead = 0;
  while (lead + 1 < digits.size() && digits[lead] == '0') {
    ++lead;
    --exponent;
  }
  digits.erase(0, lead);
  while (digits.size() > 1 && digits.back() == '0') {
    digits.pop_back();
  }
  if (digits == "0") {
    return negative ? "-0.0" : "0.0";
  }
  std::string out = negative ? "-" : "";
  if (exponent > -4 && exponent <= 16) {
    if (exponent <= 0) {
      out += "0." + std::string(-exponent, '0') + digits;
    } else if (static_cast<size_t>(exponent) >= digits.size()) {
      out += digits + std::string(exponent - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, exponent) + "." + digits.substr(exponent);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out += "." + digits.substr(1);
  }
  const int e = exponent - 1;
  char buf[16];
  std::snprintf(buf, sizeof(buf), "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
  return out + buf;
}

std::string indent_lines(std::string_view text, std::string_view prefix) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find_first_of("\r\n", start);
    if (end == std::string_view::npos) {
      end = text.size();
    } else if (
        text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n') {
      end += 2;
    } else {
      end += 1;
    }
    const std::string_view line = text.substr(start, end - start);
    if (line.find_first_not_of(" \t\r\n\f\v") != std::string_view::npos) {
      out += prefix;
    }
    out += line;
    start = end;
  }
  return out;
}

std::string names_repr(const std::vector<std::optional<std::string>>& names) {
  return "[" +
         join_spelled(
             names,
             [](const std::optional<std::string>& name) {
               return name ? python_repr(*name) : std::string("None");
             }) +
         "]";
}

std::string sorted_list_repr(std::vector<std::string_view> names) {
  std::sort(names.begin(), names.end());
  return "[" + join_spelled(names, python_repr) + "]";
}

const char* python_bool(bool b) {
  return b ? "True" : "False";
}

std::string device_repr(const std::optional<c10::Device>& device) {
  return device ? device->str() : "None";
}

std::string tensor_repr(
    c10::IntArrayRef shape,
    c10::Device device,
    c10::ScalarType dtype,
    bool shared) {
  return c10::str(
      "Tensor(shape=",
      size_repr(shape),
      ", device=",
      device.str(),
      ", dtype=",
      dtype_name(dtype),
      ", is_shared=",
      python_bool(shared),
      ")");
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
