// parse_meta_json: one pass over untrusted metadata text into a Json
// document, without nlohmann's lexer, which copies every character of the
// text into a token buffer and dominated the time of reading a consolidated
// file or a memmap tree.
//
// The grammar and results are nlohmann's (RFC 8259, as Json::parse reads
// it), plus the NaN, Infinity and -Infinity literals Python's json writes:
// - strings must be valid UTF-8; \u escapes pair their surrogates;
// - an integer without a sign is unsigned, with one signed; an integer
//   outside 64 bits is read as a double; a double that overflows is refused,
//   one that underflows is zero;
// - a duplicate key keeps its first position and takes the last value;
// - a UTF-8 byte order mark at the start is skipped;
// - nothing but whitespace may follow the top value.
// The parser is iterative, so hostile nesting cannot overflow the stack; it
// is bounded by `max_depth` with the same message as before.

#include <c10/util/Exception.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "io/format.h"
#include "util/utf8.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

class MetaJsonParser {
 public:
  MetaJsonParser(
      std::string_view text, int64_t max_depth, const std::string& path)
      : begin_(text.data()),
        p_(text.data()),
        end_(text.data() + text.size()),
        max_depth_(max_depth),
        path_(path) {}

  Json parse() {
    if (end_ - p_ >= 3 && std::string_view(p_, 3) == "\xEF\xBB\xBF") {
      p_ += 3;
    }
    Json root;
    Json* slot = &root;
    while (true) {
      // A value goes into `slot`.
      skip_whitespace();
      check_depth();
      const char c = peek("a value");
      if (c == '{' || c == '[') {
        ++p_;
        *slot = c == '{' ? Json::object() : Json::array();
        open(slot);
        skip_whitespace();
        if (peek(c == '{' ? "a key or '}'" : "a value or ']'") ==
            (c == '{' ? '}' : ']')) {
          ++p_;
          close();
        } else {
          slot = c == '{' ? member_slot() : element_slot();
          continue;
        }
      } else {
        scalar(*slot);
      }
      // After a value: a separator, the end of containers, or of the text.
      while (true) {
        skip_whitespace();
        if (depth_ == 0) {
          if (p_ != end_) {
            fail("unexpected '", std::string(1, *p_), "' after the top value");
          }
          return root;
        }
        Level& level = levels_[depth_ - 1];
        const bool object = level.json->is_object();
        const char next = peek(object ? "',' or '}'" : "',' or ']'");
        ++p_;
        if (next == ',') {
          skip_whitespace();
          slot = object ? member_slot() : element_slot();
          break;
        }
        if (next != (object ? '}' : ']')) {
          --p_;
          fail("expected ", object ? "',' or '}'" : "',' or ']'");
        }
        close();
      }
    }
  }

 private:
  static constexpr size_t kIndexedMembers = 32;
  // The ordered object's vector, whose emplace_back does not search.
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

  template <typename... Args>
  [[noreturn]] void fail(const Args&... args) const {
    TORCH_CHECK(
        false,
        path_,
        " is not valid JSON: at byte ",
        p_ - begin_,
        ": ",
        args...);
  }

  void check_depth() const {
    TORCH_CHECK(
        static_cast<int64_t>(depth_) <= max_depth_,
        path_,
        " nests JSON deeper than ",
        max_depth_,
        " levels (LoadMemmapOptions::max_depth)");
  }

  char peek(const char* expected) const {
    if (p_ == end_) {
      fail("expected ", expected, ", found the end of the text");
    }
    return *p_;
  }

  void skip_whitespace() {
    while (p_ != end_ &&
           (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) {
      ++p_;
    }
  }

  void open(Json* json) {
    if (levels_.size() == depth_) {
      levels_.emplace_back();
    }
    levels_[depth_++].json = json;
  }

  void close() {
    Level& level = levels_[--depth_];
    if (level.json->is_object()) {
      Members& members = level.json->get_ref<Json::object_t&>();
      members.reserve(level.members.size());
      for (auto& member : level.members) {
        members.emplace_back(std::move(member.first), std::move(member.second));
      }
      level.members.clear();
      if (!level.index.empty()) {
        level.index = {};  // clear() would walk every bucket of a big index
      }
    } else {
      Json::array_t& elements = level.json->get_ref<Json::array_t&>();
      elements.reserve(level.elements.size());
      for (Json& element : level.elements) {
        elements.push_back(std::move(element));
      }
      level.elements.clear();
    }
  }

  Json* element_slot() {
    return &levels_[depth_ - 1].elements.emplace_back();
  }

  // Reads `"key":` and returns the key's value slot.
  Json* member_slot() {
    check_depth();
    if (peek("a key") != '"') {
      fail("expected a key");
    }
    std::string name = string();
    skip_whitespace();
    if (peek("':'") != ':') {
      fail("expected ':'");
    }
    ++p_;
    Level& object = levels_[depth_ - 1];
    std::optional<size_t> position;
    if (!object.index.empty()) {
      const auto [it, inserted] =
          object.index.try_emplace(name, object.members.size());
      if (!inserted) {
        position = it->second;
      }
    } else {
      position = find(object, name);
      if (!position && object.members.size() + 1 > kIndexedMembers) {
        for (size_t i = 0; i < object.members.size(); ++i) {
          object.index.emplace(object.members[i].first, i);
        }
        object.index.emplace(name, object.members.size());
      }
    }
    if (position) {
      Json& value = object.members[*position].second;
      value = Json();
      return &value;
    }
    return &object.members.emplace_back(std::move(name), Json()).second;
  }

  // A member's position by a scan, for objects not yet indexed.
  static std::optional<size_t> find(
      const Level& object, const std::string& name) {
    for (size_t i = 0; i < object.members.size(); ++i) {
      if (object.members[i].first == name) {
        return i;
      }
    }
    return std::nullopt;
  }

  bool literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) >= word.size() &&
        std::string_view(p_, word.size()) == word) {
      p_ += word.size();
      return true;
    }
    return false;
  }

  void scalar(Json& out) {
    const char c = *p_;
    if (c == '"') {
      out = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      if (literal("-Infinity")) {
        out = -std::numeric_limits<double>::infinity();
      } else {
        out = number();
      }
    } else if (literal("true")) {
      out = true;
    } else if (literal("false")) {
      out = false;
    } else if (literal("null")) {
      out = nullptr;
    } else if (literal("NaN")) {
      out = std::numeric_limits<double>::quiet_NaN();
    } else if (literal("Infinity")) {
      out = std::numeric_limits<double>::infinity();
    } else {
      fail("expected a value, found '", std::string(1, c), "'");
    }
  }

  // --- strings ---------------------------------------------------------

  // Checks the UTF-8 sequence at p_ (its lead byte >= 0x80) and returns its
  // length.
  size_t utf8_length() const {
    uint32_t cp = 0;
    const size_t length = utf8_decode(
        std::string_view(p_, static_cast<size_t>(end_ - p_)), 0, cp);
    if (length == 0) {
      fail("invalid UTF-8 byte in a string");
    }
    return length;
  }

  unsigned hex4() {
    if (end_ - p_ < 4) {
      fail("a \\u escape needs four hex digits");
    }
    unsigned value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = *p_++;
      value <<= 4;
      if (c >= '0' && c <= '9') {
        value |= static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        value |= static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        value |= static_cast<unsigned>(c - 'A' + 10);
      } else {
        --p_;
        fail("a \\u escape needs four hex digits");
      }
    }
    return value;
  }

  static void append_utf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  void escape(std::string& out) {
    if (p_ == end_) {
      fail("unterminated string");
    }
    const char c = *p_++;
    switch (c) {
      case '"':
      case '\\':
      case '/':
        out += c;
        return;
      case 'b':
        out += '\b';
        return;
      case 'f':
        out += '\f';
        return;
      case 'n':
        out += '\n';
        return;
      case 'r':
        out += '\r';
        return;
      case 't':
        out += '\t';
        return;
      case 'u':
        break;
      default:
        --p_;
        fail("invalid escape '\\", std::string(1, c), "'");
    }
    unsigned code = hex4();
    if (code >= 0xDC00 && code <= 0xDFFF) {
      fail("a low surrogate \\u escape without a high one before it");
    }
    if (code >= 0xD800 && code <= 0xDBFF) {
      if (!literal("\\u")) {
        fail("a high surrogate \\u escape must be followed by a low one");
      }
      const unsigned low = hex4();
      if (low < 0xDC00 || low > 0xDFFF) {
        fail("a high surrogate \\u escape must be followed by a low one");
      }
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(out, code);
  }

  // Reads the string at p_ (its opening quote).
  std::string string() {
    ++p_;
    std::string out;
    const char* run = p_;  // bytes copied as they are, up to p_
    while (true) {
      if (p_ == end_) {
        fail("unterminated string");
      }
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        out.append(run, p_);
        ++p_;
        return out;
      }
      if (c == '\\') {
        out.append(run, p_);
        ++p_;
        escape(out);
        run = p_;
      } else if (c < 0x20) {
        fail("control character ", static_cast<int>(c), " in a string");
      } else if (c < 0x80) {
        ++p_;
      } else {
        p_ += utf8_length();
      }
    }
  }

  // --- numbers ---------------------------------------------------------

  bool digit() const {
    return p_ != end_ && *p_ >= '0' && *p_ <= '9';
  }

  Json number() {
    const char* start = p_;
    const bool negative = *p_ == '-';
    if (negative) {
      ++p_;
    }
    if (!digit()) {
      fail("expected a digit");
    }
    // Where the first significant digit stands relative to the point, to
    // tell an overflow from an underflow.
    int64_t magnitude = 0;
    // The integer part's value while it fits, the common case read here
    // rather than by from_chars.
    uint64_t integer = 0;
    bool fits = true;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (digit()) {
        const auto d = static_cast<uint64_t>(*p_ - '0');
        fits = fits && integer <= (UINT64_MAX - d) / 10;
        if (fits) {
          integer = integer * 10 + d;
        }
        ++p_;
        ++magnitude;
      }
    }
    bool integral = true;
    if (p_ != end_ && *p_ == '.') {
      integral = false;
      ++p_;
      if (!digit()) {
        fail("expected a digit after '.'");
      }
      bool leading = magnitude == 0;
      while (digit()) {
        if (leading && *p_ == '0') {
          --magnitude;
        } else {
          leading = false;
        }
        ++p_;
      }
    }
    int64_t exponent = 0;
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      integral = false;
      ++p_;
      bool exponent_negative = false;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) {
        exponent_negative = *p_ == '-';
        ++p_;
      }
      if (!digit()) {
        fail("expected a digit in the exponent");
      }
      while (digit()) {
        exponent = std::min<int64_t>(exponent * 10 + (*p_ - '0'), 1 << 30);
        ++p_;
      }
      if (exponent_negative) {
        exponent = -exponent;
      }
    }
    if (integral && fits) {
      if (!negative) {
        return Json(integer);
      }
      if (integer <= uint64_t{1} << 63) {
        // -2^63 itself has no positive int64 to negate.
        return Json(static_cast<int64_t>(0 - integer));
      }
    }
    double value = 0;
    const auto result = std::from_chars(start, p_, value);
    if (result.ec == std::errc::result_out_of_range) {
      if (magnitude + exponent > 0) {
        fail("number overflow: ", std::string(start, p_));
      }
      value = negative ? -0.0 : 0.0;
    } else if (result.ec != std::errc() || result.ptr != p_) {
      fail("cannot read the number ", std::string(start, p_));
    }
    return Json(value);
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  int64_t max_depth_;
  const std::string& path_;
  std::vector<Level> levels_;  // levels_[0, depth_) are open, root first
  size_t depth_ = 0;
};

}  // namespace

Json parse_meta_json(
    std::string_view text, int64_t max_depth, const std::string& path) {
  Json parsed = MetaJsonParser(text, max_depth, path).parse();
  TORCH_CHECK(
      parsed.is_object(),
      path,
      " must hold a JSON object, found ",
      parsed.type_name());
  return parsed;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
