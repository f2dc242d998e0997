#include "io/format.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "detail/format.h"

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

// Decodes one UTF-8 sequence at `i`; returns the code point, or throws.
uint32_t decode_utf8(std::string_view s, size_t& i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  int extra = 0;
  uint32_t cp = 0;
  if (lead < 0x80) {
    ++i;
    return lead;
  }
  if ((lead & 0xE0) == 0xC0) {
    extra = 1;
    cp = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    extra = 2;
    cp = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    extra = 3;
    cp = lead & 0x07;
  } else {
    extra = -1;
  }
  bool ok = extra > 0;
  for (int k = 1; ok && k <= extra; ++k) {
    if (i + k >= s.size() || (byte(i + k) & 0xC0) != 0x80) {
      ok = false;
    } else {
      cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
  }
  constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  ok = ok && cp >= kMin[std::max(extra, 0)] && cp <= 0x10FFFF &&
       !(cp >= 0xD800 && cp <= 0xDFFF);
  TORCH_CHECK(
      ok,
      "cannot write invalid UTF-8 to meta.json (byte ",
      i,
      " of a string); keys and non-tensor strings must be UTF-8");
  i += static_cast<size_t>(extra) + 1;
  return cp;
}

void dump_string(std::string& out, std::string_view s, bool ascii) {
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
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
      out += std::to_string(value.get<int64_t>());
      return;
    case Json::value_t::number_unsigned:
      out += std::to_string(value.get<uint64_t>());
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
      for (const auto& [key, item] : value.items()) {
        out += first ? "" : item_sep;
        first = false;
        dump_string(out, key, ascii);
        out += key_sep;
        dump_value(out, item, spaced, ascii);
      }
      out += '}';
      return;
    }
    default:
      TORCH_CHECK(false, "cannot write a binary JSON value to meta.json");
  }
}

// Python's json writes NaN, Infinity and -Infinity, which JSON (and
// nlohmann) reject: swap them for marker strings before parsing, and back
// after. The markers cannot clash with data: the text is first checked not
// to contain them.
constexpr std::string_view kNanMarker = "\x01tensordict:NaN";
constexpr std::string_view kInfMarker = "\x01tensordict:Infinity";
constexpr std::string_view kNegInfMarker = "\x01tensordict:-Infinity";

bool replace_float_literals(std::string_view text, std::string& out) {
  // Most metadata has none: one scan for each spelling settles it.
  if (text.find("NaN") == std::string_view::npos &&
      text.find("Infinity") == std::string_view::npos) {
    return false;
  }
  bool in_string = false;
  bool replaced = false;
  out.clear();
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    if (c != 'N' && c != 'I' && c != '-') {
      out += c;
      continue;
    }
    const std::string_view rest = text.substr(i);
    const std::pair<std::string_view, std::string_view> literals[] = {
        {"NaN", "\"\\u0001tensordict:NaN\""},
        {"Infinity", "\"\\u0001tensordict:Infinity\""},
        {"-Infinity", "\"\\u0001tensordict:-Infinity\""}};
    bool matched = false;
    for (const auto& [literal, marker] : literals) {
      if (rest.substr(0, literal.size()) == literal) {
        out += marker;
        i += literal.size() - 1;
        matched = replaced = true;
        break;
      }
    }
    if (!matched) {
      out += c;
    }
  }
  return replaced;
}

void restore_float_literals(Json& value) {
  if (value.is_string()) {
    const auto& s = value.get_ref<const std::string&>();
    if (s == kNanMarker) {
      value = std::nan("");
    } else if (s == kInfMarker) {
      value = HUGE_VAL;
    } else if (s == kNegInfMarker) {
      value = -HUGE_VAL;
    }
  } else if (value.is_structured()) {
    for (auto& item : value) {
      restore_float_literals(item);
    }
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

std::string class_name_of(std::string_view type_string) {
  constexpr std::string_view kPrefix = "<class '";
  constexpr std::string_view kSuffix = "'>";
  if (type_string.size() <= kPrefix.size() + kSuffix.size() ||
      type_string.substr(0, kPrefix.size()) != kPrefix ||
      type_string.substr(type_string.size() - kSuffix.size()) != kSuffix) {
    return "";
  }
  std::string_view path = type_string.substr(
      kPrefix.size(), type_string.size() - kPrefix.size() - kSuffix.size());
  const size_t dot = path.find_last_of('.');
  return std::string(
      dot == std::string_view::npos ? path : path.substr(dot + 1));
}

void check_python_class(std::string_view type_string) {
  TORCH_CHECK_VALUE(
      type_string.empty() || !class_name_of(type_string).empty(),
      "a Python class is spelled \"<class 'module.Name'>\", got '",
      type_string,
      "'");
}

std::string dump_json(const Json& value, bool spaced, bool ascii) {
  std::string out;
  dump_value(out, value, spaced, ascii);
  return out;
}

namespace {

// Builds a Json document from nlohmann's SAX events, as Json::parse does,
// except that an object member is appended in constant time: the ordered
// object's own insert scans the members before it, so a hostile meta.json
// with a million members in one object would take hours to parse. Duplicate
// keys keep the first position and the last value, as Json::parse does; an
// object past kIndexedMembers members finds them through a hash index.
// `max_depth` bounds the nesting as the depth callback did.
class MetaJsonBuilder {
 public:
  using string_t = Json::string_t;
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using binary_t = Json::binary_t;

  MetaJsonBuilder(int64_t max_depth, const std::string& path)
      : max_depth_(max_depth), path_(path) {}

  Json take() {
    return std::move(root_);
  }

  bool null() {
    return value(Json(nullptr));
  }
  bool boolean(bool v) {
    return value(Json(v));
  }
  bool number_integer(number_integer_t v) {
    return value(Json(v));
  }
  bool number_unsigned(number_unsigned_t v) {
    return value(Json(v));
  }
  bool number_float(number_float_t v, const string_t& /*text*/) {
    return value(Json(v));
  }
  bool string(string_t& v) {
    return value(Json(std::move(v)));
  }
  bool binary(binary_t& v) {
    return value(Json::binary(std::move(v)));
  }

  bool start_object(std::size_t /*size*/) {
    open(Json::object());
    return true;
  }
  bool key(string_t& name) {
    check_depth(depth_);
    Level& object = levels_[depth_ - 1];
    if (const auto position = find(object, name)) {
      member_ = &object.members[*position].second;
      return true;
    }
    if (!object.index.empty() || object.members.size() + 1 > kIndexedMembers) {
      if (object.index.empty()) {
        for (size_t i = 0; i < object.members.size(); ++i) {
          object.index.emplace(object.members[i].first, i);
        }
      }
      object.index.emplace(name, object.members.size());
    }
    object.members.emplace_back(std::move(name), Json());
    member_ = &object.members.back().second;
    return true;
  }
  bool end_object() {
    Level& object = levels_[--depth_];
    Members& members = object.json->get_ref<Json::object_t&>();
    members.reserve(object.members.size());
    for (auto& member : object.members) {
      members.emplace_back(std::move(member.first), std::move(member.second));
    }
    object.members.clear();
    if (!object.index.empty()) {
      object.index = {};  // clear() would walk every bucket of a big index
    }
    return true;
  }
  bool start_array(std::size_t /*size*/) {
    open(Json::array());
    return true;
  }
  bool end_array() {
    Level& array = levels_[--depth_];
    Json::array_t& elements = array.json->get_ref<Json::array_t&>();
    elements.reserve(array.elements.size());
    for (Json& element : array.elements) {
      elements.push_back(std::move(element));
    }
    array.elements.clear();
    return true;
  }
  bool parse_error(
      std::size_t /*position*/,
      const std::string& /*last_token*/,
      const nlohmann::detail::exception& e) {
    throw e;
  }

 private:
  static constexpr size_t kIndexedMembers = 32;
  // The ordered object's vector, whose operator[] and emplace_back do not
  // search.
  using Members = Json::object_t::Container;

  // An open container. Its members or elements are staged here until it
  // closes, then moved into it at their final size: the ordered object's
  // vector holds pairs with a const key, which it copies, values and all,
  // each time it grows. Levels are reused by the containers opened later at
  // the same depth, so the staging buffers are allocated once per depth.
  struct Level {
    Json* json = nullptr;
    std::vector<std::pair<std::string, Json>> members;
    std::vector<Json> elements;
    std::unordered_map<std::string, size_t> index;  // objects past the limit
  };

  void open(Json container) {
    check_depth(depth_);
    Json* slot = value(std::move(container), /*is_container=*/true);
    if (levels_.size() == depth_) {
      levels_.emplace_back();
    }
    levels_[depth_++].json = slot;
  }

  void check_depth(size_t depth) const {
    TORCH_CHECK(
        static_cast<int64_t>(depth) <= max_depth_,
        path_,
        " nests JSON deeper than ",
        max_depth_,
        " levels (LoadMemmapOptions::max_depth)");
  }

  static std::optional<size_t> find(const Level& object, const string_t& name) {
    const auto& members = object.members;
    if (!object.index.empty()) {
      const auto it = object.index.find(name);
      return it == object.index.end() ? std::nullopt
                                      : std::optional<size_t>(it->second);
    }
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i].first == name) {
        return i;
      }
    }
    return std::nullopt;
  }

  // Places `v` where the document expects the next value and returns it.
  Json* value(Json v, bool is_container = false) {
    if (!is_container) {
      check_depth(depth_);
    }
    if (depth_ == 0) {
      root_ = std::move(v);
      return &root_;
    }
    Level& parent = levels_[depth_ - 1];
    if (parent.json->is_array()) {
      parent.elements.push_back(std::move(v));
      return &parent.elements.back();
    }
    *member_ = std::move(v);
    return member_;
  }

  int64_t max_depth_;
  const std::string& path_;
  Json root_;
  std::vector<Level> levels_;  // levels_[0, depth_) are open, root first
  size_t depth_ = 0;
  Json* member_ = nullptr;  // the value slot of the last key
};

}  // namespace

Json parse_meta_json(
    std::string_view text, int64_t max_depth, const std::string& path) {
  std::string rewritten;
  const bool has_literals = replace_float_literals(text, rewritten);
  if (has_literals) {
    TORCH_CHECK(
        text.find("tensordict:NaN") == std::string_view::npos &&
            text.find("tensordict:Infinity") == std::string_view::npos &&
            text.find("tensordict:-Infinity") == std::string_view::npos,
        path,
        " mixes NaN/Infinity literals with strings this reader uses to "
        "parse them");
  }
  const std::string_view source = has_literals ? rewritten : text;
  MetaJsonBuilder builder(max_depth, path);
  try {
    Json::sax_parse(source.begin(), source.end(), &builder);
  } catch (const nlohmann::json::exception& e) {
    TORCH_CHECK(false, path, " is not valid JSON: ", e.what());
  }
  Json parsed = builder.take();
  TORCH_CHECK(
      parsed.is_object(),
      path,
      " must hold a JSON object, found ",
      parsed.type_name());
  if (has_literals) {
    restore_float_literals(parsed);
  }
  return parsed;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
