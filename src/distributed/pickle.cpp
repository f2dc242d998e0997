#include "distributed/pickle.h"

#include <c10/util/Exception.h>

#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <vector>

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

// --- writing ---------------------------------------------------------------

void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
}

// LONG1: the value's two's complement, little-endian, in as few bytes as
// keep its sign.
void put_long1(std::string& out, int64_t value, bool is_unsigned) {
  std::string bytes;
  if (is_unsigned) {
    auto v = static_cast<uint64_t>(value);
    while (v != 0) {
      bytes.push_back(static_cast<char>(v & 0xff));
      v >>= 8;
    }
    if (bytes.empty() || (static_cast<uint8_t>(bytes.back()) & 0x80) != 0) {
      bytes.push_back('\0');
    }
  } else {
    int64_t v = value;
    for (;;) {
      const auto byte = static_cast<uint8_t>(v & 0xff);
      bytes.push_back(static_cast<char>(byte));
      v >>= 8;  // arithmetic: keeps the sign
      if ((v == 0 && (byte & 0x80) == 0) || (v == -1 && (byte & 0x80) != 0)) {
        break;
      }
    }
  }
  out.push_back('\x8a');
  out.push_back(static_cast<char>(bytes.size()));
  out += bytes;
}

void dump(const Json& value, std::string& out) {
  switch (value.type()) {
    case Json::value_t::null:
      out.push_back('N');
      return;
    case Json::value_t::boolean:
      out.push_back(value.get<bool>() ? '\x88' : '\x89');
      return;
    case Json::value_t::number_integer: {
      const auto v = value.get<int64_t>();
      if (v >= std::numeric_limits<int32_t>::min() &&
          v <= std::numeric_limits<int32_t>::max()) {
        out.push_back('J');
        put_le(out, static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
      } else {
        put_long1(out, v, /*is_unsigned=*/false);
      }
      return;
    }
    case Json::value_t::number_unsigned: {
      const auto v = value.get<uint64_t>();
      if (v <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
        out.push_back('J');
        put_le(out, v, 4);
      } else {
        put_long1(out, static_cast<int64_t>(v), /*is_unsigned=*/true);
      }
      return;
    }
    case Json::value_t::number_float: {
      const double v = value.get<double>();
      uint64_t bits = 0;
      std::memcpy(&bits, &v, sizeof bits);
      out.push_back('G');
      for (int i = 7; i >= 0; --i) {  // big-endian
        out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
      }
      return;
    }
    case Json::value_t::string: {
      const auto& s = value.get_ref<const std::string&>();
      TORCH_CHECK_VALUE(
          s.size() <= std::numeric_limits<uint32_t>::max(),
          "cannot pickle a string of ",
          s.size(),
          " bytes");
      out.push_back('X');
      put_le(out, s.size(), 4);
      out += s;
      return;
    }
    case Json::value_t::array:
      out.push_back(']');
      if (!value.empty()) {
        out.push_back('(');
        for (const Json& item : value) {
          dump(item, out);
        }
        out.push_back('e');
      }
      return;
    case Json::value_t::object:
      out.push_back('}');
      if (!value.empty()) {
        out.push_back('(');
        for (const auto& [key, item] : value.items()) {
          dump(Json(key), out);
          dump(item, out);
        }
        out.push_back('u');
      }
      return;
    default:
      TORCH_CHECK_VALUE(
          false, "cannot pickle a JSON ", value.type_name(), " value");
  }
}

// --- reading ---------------------------------------------------------------

// Objects are nodes in an arena and containers hold node ids, so that a
// memoized list filled after it was memoized is seen filled, as in Python.
struct Node {
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict };
  Kind kind = Kind::kNone;
  int64_t integer = 0;
  double real = 0.0;
  std::string text;
  std::vector<size_t> items;  // a dict's keys and values, alternating
};

class Unpickler {
 public:
  Unpickler(std::string_view bytes, std::string_view what, int64_t max_depth)
      : bytes_(bytes), what_(what), max_depth_(max_depth) {}

  Json load() {
    for (;;) {
      TORCH_CHECK_VALUE(
          pos_ < bytes_.size(), error_prefix(), "the pickle ends before STOP");
      const size_t at = pos_;
      const auto op = static_cast<uint8_t>(bytes_[pos_++]);
      if (op == '.') {
        TORCH_CHECK_VALUE(
            stack_.size() == 1 && marks_.empty(),
            error_prefix(at),
            "STOP with ",
            stack_.size(),
            " objects on the stack, expected one");
        std::vector<size_t> path;
        return to_json(stack_.back(), path);
      }
      step(op, at);
    }
  }

 private:
  std::string error_prefix(size_t at) const {
    return "invalid pickle in " + std::string(what_) + " at byte " +
           std::to_string(at) + ": ";
  }
  std::string error_prefix() const {
    return error_prefix(pos_);
  }

  std::string_view take(uint64_t n, size_t at) {
    TORCH_CHECK_VALUE(
        n <= bytes_.size() - pos_,
        error_prefix(at),
        "expected ",
        n,
        " more bytes, only ",
        bytes_.size() - pos_,
        " remain");
    std::string_view out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  uint64_t take_le(int n, size_t at) {
    const std::string_view raw = take(n, at);
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) {
      v |= static_cast<uint64_t>(static_cast<uint8_t>(raw[i])) << (8 * i);
    }
    return v;
  }

  size_t push(Node node) {
    nodes_.push_back(std::move(node));
    stack_.push_back(nodes_.size() - 1);
    return nodes_.size() - 1;
  }
  size_t push_int(int64_t v) {
    Node n;
    n.kind = Node::Kind::kInt;
    n.integer = v;
    return push(std::move(n));
  }
  size_t push_string(std::string_view text) {
    Node n;
    n.kind = Node::Kind::kString;
    n.text = std::string(text);
    return push(std::move(n));
  }
  size_t push_kind(Node::Kind kind) {
    Node n;
    n.kind = kind;
    return push(std::move(n));
  }

  size_t pop(size_t at) {
    TORCH_CHECK_VALUE(
        stack_.size() > (marks_.empty() ? 0 : marks_.back()),
        error_prefix(at),
        "the stack is empty");
    const size_t id = stack_.back();
    stack_.pop_back();
    return id;
  }
  // Pops everything above the last MARK, in order.
  std::vector<size_t> pop_mark(size_t at) {
    TORCH_CHECK_VALUE(!marks_.empty(), error_prefix(at), "no MARK to pop to");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<size_t> items(stack_.begin() + mark, stack_.end());
    stack_.resize(mark);
    return items;
  }
  Node& top(size_t at, Node::Kind kind, const char* opname) {
    TORCH_CHECK_VALUE(
        stack_.size() > (marks_.empty() ? 0 : marks_.back()),
        error_prefix(at),
        opname,
        " with nothing to add to");
    Node& node = nodes_[stack_.back()];
    TORCH_CHECK_VALUE(
        node.kind == kind,
        error_prefix(at),
        opname,
        " expects a ",
        kind == Node::Kind::kList ? "list" : "dict",
        " below its items");
    return node;
  }

  void make_tuple(std::vector<size_t> items) {
    Node n;
    n.kind = Node::Kind::kTuple;
    n.items = std::move(items);
    push(std::move(n));
  }

  void step(uint8_t op, size_t at) {
    switch (op) {
      case 0x80: {  // PROTO
        const auto version = static_cast<uint8_t>(take(1, at)[0]);
        TORCH_CHECK_VALUE(
            at == 0 && version >= 2 && version <= 5,
            error_prefix(at),
            "expected protocol 2 to 5 at the start, got protocol ",
            static_cast<int>(version),
            at == 0 ? "" : " later in the stream");
        return;
      }
      case 0x95:  // FRAME: a length hint
        (void)take(8, at);
        return;
      case '}':
        push_kind(Node::Kind::kDict);
        return;
      case ']':
        push_kind(Node::Kind::kList);
        return;
      case ')':
        push_kind(Node::Kind::kTuple);
        return;
      case '(':
        marks_.push_back(stack_.size());
        return;
      case 'N':
        push_kind(Node::Kind::kNone);
        return;
      case 0x88:
      case 0x89: {
        Node n;
        n.kind = Node::Kind::kBool;
        n.integer = op == 0x88 ? 1 : 0;
        push(std::move(n));
        return;
      }
      case 'J':
        push_int(static_cast<int32_t>(static_cast<uint32_t>(take_le(4, at))));
        return;
      case 'K':
        push_int(static_cast<int64_t>(take_le(1, at)));
        return;
      case 'M':
        push_int(static_cast<int64_t>(take_le(2, at)));
        return;
      case 0x8a: {  // LONG1
        const auto n = take_le(1, at);
        TORCH_CHECK_VALUE(
            n <= 8,
            error_prefix(at),
            "an integer of ",
            n,
            " bytes does not fit in 64 bits");
        uint64_t v = n == 0 ? 0 : take_le(static_cast<int>(n), at);
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) != 0) {
          v |= ~uint64_t{0} << (8 * n);  // sign-extend
        }
        push_int(static_cast<int64_t>(v));
        return;
      }
      case 'G': {  // BINFLOAT, big-endian
        const std::string_view raw = take(8, at);
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) {
          bits = (bits << 8) | static_cast<uint8_t>(raw[i]);
        }
        Node n;
        n.kind = Node::Kind::kFloat;
        std::memcpy(&n.real, &bits, sizeof bits);
        push(std::move(n));
        return;
      }
      case 0x8c:  // SHORT_BINUNICODE
        push_string(take(take_le(1, at), at));
        return;
      case 'X':  // BINUNICODE
        push_string(take(take_le(4, at), at));
        return;
      case 0x8d:  // BINUNICODE8
        push_string(take(take_le(8, at), at));
        return;
      case 0x94:  // MEMOIZE
        TORCH_CHECK_VALUE(
            !stack_.empty(), error_prefix(at), "MEMOIZE on an empty stack");
        memo_[memo_.size()] = stack_.back();
        return;
      case 'q':
      case 'r': {  // BINPUT, LONG_BINPUT
        const uint64_t index = take_le(op == 'q' ? 1 : 4, at);
        TORCH_CHECK_VALUE(
            !stack_.empty(), error_prefix(at), "PUT on an empty stack");
        memo_[index] = stack_.back();
        return;
      }
      case 'h':
      case 'j': {  // BINGET, LONG_BINGET
        const uint64_t index = take_le(op == 'h' ? 1 : 4, at);
        const auto found = memo_.find(index);
        TORCH_CHECK_VALUE(
            found != memo_.end(),
            error_prefix(at),
            "GET of memo entry ",
            index,
            ", which was never stored");
        stack_.push_back(found->second);
        return;
      }
      case 'a': {  // APPEND
        const size_t item = pop(at);
        top(at, Node::Kind::kList, "APPEND").items.push_back(item);
        return;
      }
      case 'e': {  // APPENDS
        std::vector<size_t> items = pop_mark(at);
        Node& list = top(at, Node::Kind::kList, "APPENDS");
        list.items.insert(list.items.end(), items.begin(), items.end());
        return;
      }
      case 's': {  // SETITEM
        const size_t value = pop(at);
        const size_t key = pop(at);
        Node& dict = top(at, Node::Kind::kDict, "SETITEM");
        dict.items.push_back(key);
        dict.items.push_back(value);
        return;
      }
      case 'u': {  // SETITEMS
        std::vector<size_t> items = pop_mark(at);
        TORCH_CHECK_VALUE(
            items.size() % 2 == 0,
            error_prefix(at),
            "SETITEMS with an odd number of items (",
            items.size(),
            ")");
        Node& dict = top(at, Node::Kind::kDict, "SETITEMS");
        dict.items.insert(dict.items.end(), items.begin(), items.end());
        return;
      }
      case 't':
        make_tuple(pop_mark(at));
        return;
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        const size_t n = op - 0x84;
        std::vector<size_t> items(n);
        for (size_t i = n; i-- > 0;) {
          items[i] = pop(at);
        }
        make_tuple(std::move(items));
        return;
      }
      default:
        TORCH_CHECK_VALUE(
            false,
            error_prefix(at),
            "opcode 0x",
            hex(op),
            " is not plain data (only dict, list, tuple, str, int, float, "
            "bool and None are accepted)");
    }
  }

  static std::string hex(uint8_t op) {
    const char* digits = "0123456789abcdef";
    return {digits[op >> 4], digits[op & 15]};
  }

  Json to_json(size_t id, std::vector<size_t>& path) {
    TORCH_CHECK_VALUE(
        static_cast<int64_t>(path.size()) < max_depth_,
        "invalid pickle in ",
        what_,
        ": nesting deeper than ",
        max_depth_,
        " levels");
    // Memo references share nodes: bound the output, not only the input.
    TORCH_CHECK_VALUE(
        ++emitted_ <= 16 * bytes_.size() + 1024,
        "invalid pickle in ",
        what_,
        ": its shared references expand to more than ",
        16 * bytes_.size() + 1024,
        " values");
    for (const size_t open : path) {
      TORCH_CHECK_VALUE(
          open != id,
          "invalid pickle in ",
          what_,
          ": a container holds itself");
    }
    const Node& node = nodes_[id];
    switch (node.kind) {
      case Node::Kind::kNone:
        return nullptr;
      case Node::Kind::kBool:
        return node.integer != 0;
      case Node::Kind::kInt:
        return node.integer;
      case Node::Kind::kFloat:
        return node.real;
      case Node::Kind::kString:
        return node.text;
      default:
        break;
    }
    path.push_back(id);
    Json out = node.kind == Node::Kind::kDict ? Json::object() : Json::array();
    if (node.kind == Node::Kind::kDict) {
      for (size_t i = 0; i < node.items.size(); i += 2) {
        const Node& key = nodes_[node.items[i]];
        TORCH_CHECK_VALUE(
            key.kind == Node::Kind::kString,
            "invalid pickle in ",
            what_,
            ": a dict key is not a string");
        out[key.text] = to_json(node.items[i + 1], path);
      }
    } else {
      for (const size_t item : node.items) {
        out.push_back(to_json(item, path));
      }
    }
    path.pop_back();
    return out;
  }

  std::string_view bytes_;
  std::string_view what_;
  int64_t max_depth_;
  size_t pos_ = 0;
  size_t emitted_ = 0;
  std::vector<Node> nodes_;
  std::vector<size_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, size_t> memo_;
};

}  // namespace

std::string pickle_dumps(const Json& value) {
  std::string out = "\x80\x02";
  dump(value, out);
  out.push_back('.');
  return out;
}

Json pickle_loads(
    std::string_view bytes, std::string_view what, int64_t max_depth) {
  return Unpickler(bytes, what, max_depth).load();
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
