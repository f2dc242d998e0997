#include "io/format.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/python_spelling.h"
#include "util/utf8.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

const char* const kTensorDictType = "<class 'tensordict._td.TensorDict'>";
const char* const kLazyStackType =
    "<class 'tensordict._lazy.LazyStackedTensorDict'>";
const char* const kNonTensorDataType =
    "<class 'tensordict.tensorclass.NonTensorData'>";
const char* const kNonTensorStackType =
    "<class 'tensordict.tensorclass.NonTensorStack'>";
const char* const kMetaDataType = "<class 'tensordict.tensorclass.MetaData'>";
const char* const kTensorDictParamsType =
    "<class 'tensordict.nn.params.TensorDictParams'>";

namespace {

// Python's _TORCH_DTYPES: what load_memmap can read back.
constexpr c10::ScalarType kSaveableDtypes[] = {
    c10::ScalarType::Bool,
    c10::ScalarType::Byte,
    c10::ScalarType::Char,
    c10::ScalarType::Short,
    c10::ScalarType::Int,
    c10::ScalarType::Long,
    c10::ScalarType::UInt16,
    c10::ScalarType::UInt32,
    c10::ScalarType::UInt64,
    c10::ScalarType::Half,
    c10::ScalarType::BFloat16,
    c10::ScalarType::Float,
    c10::ScalarType::Double,
    c10::ScalarType::ComplexHalf,
    c10::ScalarType::ComplexFloat,
    c10::ScalarType::ComplexDouble,
};

bool is_unsafe_char(unsigned char c) {
  if (c < 32 || c == 127) {
    return true;
  }
  switch (c) {
    case '/':
    case '<':
    case '>':
    case ':':
    case '"':
    case '|':
    case '?':
    case '*':
    case '\\':
    case ' ':
    case '%':
      return true;
    default:
      return false;
  }
}

void append_hex4(std::string& out, uint32_t unit) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "\\u%04x", unit);
  out += buffer;
}

// Decodes one UTF-8 sequence at `i` and steps past it; returns the code
// point, or throws.
uint32_t decode_utf8(std::string_view s, size_t& i) {
  uint32_t cp = 0;
  const size_t length = detail::utf8_decode(s, i, cp);
  TORCH_CHECK(
      length != 0,
      "cannot write invalid UTF-8 to meta.json (byte ",
      i,
      " of a string); keys and non-tensor strings must be UTF-8");
  i += length;
  return cp;
}

// Bytes written as they are in either style: printable ASCII but the
// quote and the backslash.
bool is_plain_byte(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return c >= 0x20 && c < 0x7F && c != '"' && c != '\\';
}

void dump_string(std::string& out, std::string_view s, bool ascii) {
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    size_t run = i;
    while (run < s.size() && is_plain_byte(s[run])) {
      ++run;
    }
    if (run > i) {
      out.append(s.data() + i, run - i);
      i = run;
      continue;
    }
    const size_t start = i;
    const uint32_t cp = decode_utf8(s, i);
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (cp < 0x20 || (ascii && cp == 0x7F)) {
      append_hex4(out, cp);
    } else if (ascii && cp > 0x7F) {
      if (cp >= 0x10000) {
        const uint32_t v = cp - 0x10000;
        append_hex4(out, 0xD800 + (v >> 10));
        append_hex4(out, 0xDC00 + (v & 0x3FF));
      } else {
        append_hex4(out, cp);
      }
    } else {
      out.append(s.substr(start, i - start));
    }
  }
  out += '"';
}

template <typename Integer>
void append_number(std::string& out, Integer value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out.append(buffer, result.ptr);
}

void dump_value(std::string& out, const Json& value, bool spaced, bool ascii) {
  const char* item_sep = spaced ? ", " : ",";
  const char* key_sep = spaced ? ": " : ":";
  switch (value.type()) {
    case Json::value_t::null:
      out += "null";
      return;
    case Json::value_t::boolean:
      out += value.get<bool>() ? "true" : "false";
      return;
    case Json::value_t::number_integer:
      append_number(out, value.get<int64_t>());
      return;
    case Json::value_t::number_unsigned:
      append_number(out, value.get<uint64_t>());
      return;
    case Json::value_t::number_float: {
      const double d = value.get<double>();
      if (std::isnan(d)) {
        out += ascii ? "NaN" : "null";
      } else if (std::isinf(d)) {
        out += ascii ? (d > 0 ? "Infinity" : "-Infinity") : "null";
      } else {
        out += float_repr(d);
      }
      return;
    }
    case Json::value_t::string:
      dump_string(out, value.get_ref<const std::string&>(), ascii);
      return;
    case Json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& item : value) {
        out += first ? "" : item_sep;
        first = false;
        dump_value(out, item, spaced, ascii);
      }
      out += ']';
      return;
    }
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : value.get_ref<const Json::object_t&>()) {
        out += first ? "" : item_sep;
        first = false;
        dump_string(out, key, ascii);
        out += key_sep;
        dump_value(out, item, spaced, ascii);
      }
      out += '}';
      return;
    }
    case Json::value_t::binary: {
      // Python's bytes, read from a pickle (see docs/pickled_values.md):
      // JSON has none, so the list of byte values, which bytes() rebuilds.
      out += '[';
      bool first = true;
      for (const uint8_t byte : value.get_binary()) {
        out += first ? "" : item_sep;
        first = false;
        append_number(out, static_cast<unsigned>(byte));
      }
      out += ']';
      return;
    }
    default:
      TORCH_CHECK(false, "cannot write a discarded JSON value to meta.json");
  }
}

}  // namespace

std::optional<c10::ScalarType> dtype_from_name(std::string_view name) {
  // Spelled once: readers look a name up per leaf.
  static const auto* const kNames = [] {
    auto* names = new std::vector<std::string>();
    for (const c10::ScalarType dtype : kSaveableDtypes) {
      names->push_back(dtype_name(dtype));
    }
    return names;
  }();
  for (size_t i = 0; i < kNames->size(); ++i) {
    if ((*kNames)[i] == name) {
      return kSaveableDtypes[i];
    }
  }
  return std::nullopt;
}

bool is_saveable_dtype(c10::ScalarType dtype) {
  for (const c10::ScalarType saveable : kSaveableDtypes) {
    if (saveable == dtype) {
      return true;
    }
  }
  return false;
}

std::string describe(const KeyPath& path) {
  return path.empty() ? "the root" : "key " + path.to_string();
}

std::string encode_key(std::string_view key) {
  if (key.empty()) {
    return "%";
  }
  if (key == "." || key == "..") {
    std::string out;
    for (size_t i = 0; i < key.size(); ++i) {
      out += "%2E";
    }
    return out;
  }
  std::string out;
  out.reserve(key.size());
  for (const char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (is_unsafe_char(c)) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "%%%02X", c);
      out += buffer;
    } else {
      out += ch;
    }
  }
  return out;
}

bool is_safe_legacy_key(std::string_view key, bool is_collection) {
  if (key.find('/') != std::string_view::npos ||
      key.find('\\') != std::string_view::npos ||
      key.find('\0') != std::string_view::npos) {
    return false;
  }
  if (key.size() >= 2 && std::isalpha(static_cast<unsigned char>(key[0])) &&
      key[1] == ':') {
    return false;
  }
  // "." and ".." never name a child, not even as "<key>.memmap"'s stem.
  if (key.empty() || key == "." || key == "..") {
    return !is_collection;
  }
  return true;
}

std::string dump_json(const Json& value, bool spaced, bool ascii) {
  std::string out;
  dump_value(out, value, spaced, ascii);
  return out;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
