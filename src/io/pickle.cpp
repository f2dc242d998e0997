#include "io/pickle.h"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>
#include <c10/util/safe_numerics.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <vector>

#include "util/utf8.h"

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

// The names a pickle may import: each resolves to a tag, never to a Python
// object. See NOTE [Restricted unpickler].
enum class Global {
  kReconstruct,
  kNdarray,
  kFromBuffer,
  kDtype,
  kScalar,
  kSize,
  kOrderedDict,
  kEncode,
};

struct GlobalName {
  const char* module;
  const char* name;
  Global tag;
};

constexpr GlobalName kGlobals[] = {
    {"numpy.core.multiarray", "_reconstruct", Global::kReconstruct},
    {"numpy._core.multiarray", "_reconstruct", Global::kReconstruct},
    {"numpy", "ndarray", Global::kNdarray},
    {"numpy.core.numeric", "_frombuffer", Global::kFromBuffer},
    {"numpy._core.numeric", "_frombuffer", Global::kFromBuffer},
    {"numpy", "dtype", Global::kDtype},
    {"numpy.core.multiarray", "scalar", Global::kScalar},
    {"numpy._core.multiarray", "scalar", Global::kScalar},
    {"torch", "Size", Global::kSize},
    {"collections", "OrderedDict", Global::kOrderedDict},
    {"_codecs", "encode", Global::kEncode},
};

// The numpy dtypes torch shares, by their `descr` without the byte order.
struct DtypeName {
  const char* descr;
  c10::ScalarType type;
};

constexpr DtypeName kDtypes[] = {
    {"b1", c10::ScalarType::Bool},
    {"i1", c10::ScalarType::Char},
    {"i2", c10::ScalarType::Short},
    {"i4", c10::ScalarType::Int},
    {"i8", c10::ScalarType::Long},
    {"u1", c10::ScalarType::Byte},
    {"u2", c10::ScalarType::UInt16},
    {"u4", c10::ScalarType::UInt32},
    {"u8", c10::ScalarType::UInt64},
    {"f2", c10::ScalarType::Half},
    {"f4", c10::ScalarType::Float},
    {"f8", c10::ScalarType::Double},
    {"c8", c10::ScalarType::ComplexFloat},
    {"c16", c10::ScalarType::ComplexDouble},
};

constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
constexpr int64_t kMaxArrayDims = 64;  // numpy's NPY_MAXDIMS
// A zero-size array's nested lists (shape [n, 0]: n empty lists) are bounded
// on their own, as they are not bounded by the array's bytes.
constexpr int64_t kMaxEmptyLists = int64_t{1} << 20;

// Objects are nodes in an arena and containers hold node ids, so that a
// memoized list filled after it was memoized is seen filled, as in Python,
// and BUILD completes an array or dtype that is already referenced.
struct Node {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kBytes,
    kList,
    kTuple,
    kDict,
    kGlobal,
    kDtype,
    kArray,
    kScalar,
    kSize,
  };
  Kind kind = Kind::kNone;
  int64_t integer = 0;
  bool is_unsigned = false;  // `integer` holds a uint64 above INT64_MAX
  double real = 0.0;
  std::string text;  // str, bytes, a global's name, a scalar's raw bytes
  // An array's raw bytes: the id of the bytes node that holds them (shared,
  // never copied: many arrays may be built from one memoized buffer).
  size_t data_id = 0;
  std::vector<size_t> items;  // a dict's keys and values, alternating
  Global global = Global::kNdarray;
  // A dtype's, an array's or a scalar's element type and byte order.
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  char byte_order = '=';
  std::vector<int64_t> shape;
  bool fortran = false;
  bool built = false;  // an array whose BUILD came
};

const char* node_kind_name(Node::Kind kind) {
  switch (kind) {
    case Node::Kind::kNone:
      return "None";
    case Node::Kind::kBool:
      return "bool";
    case Node::Kind::kInt:
      return "int";
    case Node::Kind::kFloat:
      return "float";
    case Node::Kind::kString:
      return "str";
    case Node::Kind::kBytes:
      return "bytes";
    case Node::Kind::kList:
      return "list";
    case Node::Kind::kTuple:
      return "tuple";
    case Node::Kind::kDict:
      return "dict";
    case Node::Kind::kGlobal:
      return "global";
    case Node::Kind::kDtype:
      return "numpy.dtype";
    case Node::Kind::kArray:
      return "numpy.ndarray";
    case Node::Kind::kScalar:
      return "numpy scalar";
    case Node::Kind::kSize:
      return "torch.Size";
  }
  return "?";
}

// The names of the opcodes that are refused, for messages.
const char* opcode_name(uint8_t op) {
  switch (op) {
    case 'c':
      return "GLOBAL";
    case 0x93:
      return "STACK_GLOBAL";
    case 'R':
      return "REDUCE";
    case 'b':
      return "BUILD";
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 0x81:
      return "NEWOBJ";
    case 0x92:
      return "NEWOBJ_EX";
    case 'P':
      return "PERSID";
    case 'Q':
      return "BINPERSID";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    case 0x8f:
      return "EMPTY_SET";
    case 0x90:
      return "ADDITEMS";
    case 0x91:
      return "FROZENSET";
    case 0x97:
      return "NEXT_BUFFER";
    case 0x98:
      return "READONLY_BUFFER";
    case 'I':
      return "INT";
    case 'L':
      return "LONG";
    case 'F':
      return "FLOAT";
    case 'S':
      return "STRING";
    case 'V':
      return "UNICODE";
    case 'T':
      return "BINSTRING";
    case 'U':
      return "SHORT_BINSTRING";
    case 'B':
      return "BINBYTES";
    case 'C':
      return "SHORT_BINBYTES";
    case 0x8e:
      return "BINBYTES8";
    case 0x96:
      return "BYTEARRAY8";
    case 'p':
      return "PUT";
    case 'g':
      return "GET";
    case '2':
      return "DUP";
    default:
      return nullptr;
  }
}

std::string hex(uint8_t op) {
  const char* digits = "0123456789abcdef";
  return {digits[op >> 4], digits[op & 15]};
}

// The stack machine. With `extended`, the names of kGlobals, bytes, REDUCE
// and BUILD are accepted (unpickle); without, plain data only
// (pickle_loads).
class Machine {
 public:
  Machine(
      std::string_view bytes,
      std::string_view what,
      int64_t max_depth,
      bool extended)
      : bytes_(bytes),
        what_(what),
        max_depth_(max_depth),
        extended_(extended) {}

  // Runs to STOP; returns the id of the one object left.
  size_t run() {
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
        return stack_.back();
      }
      step(op, at);
    }
  }

  // Plain data as JSON (pickle_loads).
  Json to_json(size_t id, std::vector<size_t>& path) {
    enter(id, path);
    const Node& node = nodes_[id];
    switch (node.kind) {
      case Node::Kind::kNone:
        return nullptr;
      case Node::Kind::kBool:
        return node.integer != 0;
      case Node::Kind::kInt:
        return node.is_unsigned ? Json(static_cast<uint64_t>(node.integer))
                                : Json(node.integer);
      case Node::Kind::kFloat:
        return node.real;
      case Node::Kind::kString:
        return node.text;
      case Node::Kind::kList:
      case Node::Kind::kTuple:
      case Node::Kind::kDict:
        break;
      default:
        TORCH_CHECK_VALUE(
            false,
            "invalid pickle in ",
            what_,
            ": a ",
            node_kind_name(node.kind),
            " is not plain data");
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

  // Any accepted value (unpickle).
  PickledValue to_value(size_t id, std::vector<size_t>& path) {
    enter(id, path);
    const Node& node = nodes_[id];
    PickledValue out;
    using Kind = PickledValue::Kind;
    switch (node.kind) {
      case Node::Kind::kNone:
        out.kind = Kind::kNone;
        return out;
      case Node::Kind::kBool:
        out.kind = Kind::kBool;
        out.atom = node.integer != 0;
        return out;
      case Node::Kind::kInt:
        out.kind = Kind::kInt;
        out.atom = node.is_unsigned ? Json(static_cast<uint64_t>(node.integer))
                                    : Json(node.integer);
        return out;
      case Node::Kind::kFloat:
        out.kind = Kind::kFloat;
        out.atom = node.real;
        return out;
      case Node::Kind::kString:
        out.kind = Kind::kStr;
        out.atom = node.text;
        return out;
      case Node::Kind::kBytes:
        out.kind = Kind::kBytes;
        out.atom = Json::binary(
            std::vector<uint8_t>(node.text.begin(), node.text.end()));
        return out;
      case Node::Kind::kArray:
        out.kind = Kind::kArray;
        out.array = array_tensor(id);
        return out;
      case Node::Kind::kScalar:
        out.kind = Kind::kNumpyScalar;
        out.array = array_tensor(id);
        out.atom = scalar_atom(out.array);
        return out;
      case Node::Kind::kGlobal:
      case Node::Kind::kDtype:
        TORCH_CHECK_VALUE(
            false,
            "invalid pickle in ",
            what_,
            ": it holds ",
            node.kind == Node::Kind::kGlobal
                ? "the global '" + node.text + "' itself"
                : std::string("a bare numpy.dtype"),
            ", which is not a value this reader builds");
      case Node::Kind::kList:
        out.kind = Kind::kList;
        break;
      case Node::Kind::kTuple:
        out.kind = Kind::kTuple;
        break;
      case Node::Kind::kDict:
        out.kind = Kind::kDict;
        break;
      case Node::Kind::kSize:
        out.kind = Kind::kSize;
        break;
    }
    path.push_back(id);
    out.items.reserve(node.items.size());
    for (const size_t item : node.items) {
      out.items.push_back(to_value(item, path));
    }
    path.pop_back();
    return out;
  }

 private:
  std::string error_prefix(size_t at) const {
    return "invalid pickle in " + std::string(what_) + " at byte " +
           std::to_string(at) + ": ";
  }
  std::string error_prefix() const {
    return error_prefix(pos_);
  }

  // Bounds the output as it is built: depth, expansion of shared values
  // (an array counts its elements) and containers that hold themselves.
  void enter(size_t id, const std::vector<size_t>& path) {
    TORCH_CHECK_VALUE(
        static_cast<int64_t>(path.size()) < max_depth_,
        "invalid pickle in ",
        what_,
        ": nesting deeper than ",
        max_depth_,
        " levels");
    const Node& node = nodes_[id];
    const size_t limit = 16 * bytes_.size() + 1024;
    // Text and array data count their bytes: a memoized 1 MB string
    // referenced a thousand times would otherwise make a GB of copies.
    size_t weight = 1 + node.text.size();
    if (node.kind == Node::Kind::kArray && node.built) {
      weight += nodes_[node.data_id].text.size();
      // A zero-size array's empty lists ([n, 0]: n of them).
      size_t lists = 1;
      for (const int64_t dim : node.shape) {
        if (dim == 0) {
          break;
        }
        if (static_cast<size_t>(dim) > limit / lists) {
          lists = limit + 1;
          break;
        }
        lists *= static_cast<size_t>(dim);
      }
      weight += lists;
    }
    emitted_ += std::min(weight, limit + 1);
    TORCH_CHECK_VALUE(
        emitted_ <= limit,
        "invalid pickle in ",
        what_,
        ": its shared references expand to more than ",
        limit,
        " values");
    for (const size_t open : path) {
      TORCH_CHECK_VALUE(
          open != id,
          "invalid pickle in ",
          what_,
          ": a container holds itself");
    }
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
  // A line of GLOBAL's operand, without its newline.
  std::string_view take_line(size_t at) {
    const size_t end = bytes_.find('\n', pos_);
    TORCH_CHECK_VALUE(
        end != std::string_view::npos,
        error_prefix(at),
        "GLOBAL's name has no newline before the end");
    std::string_view out = bytes_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }

  // Counts what REDUCE copies from a memoized argument (a torch.Size's dims,
  // _codecs.encode's text), which a short pickle could repeat many times.
  void charge(size_t n, size_t at) {
    const size_t limit = 16 * bytes_.size() + 1024;
    copied_ += n;
    TORCH_CHECK_VALUE(
        copied_ <= limit,
        error_prefix(at),
        "its REDUCE calls copy more than ",
        limit,
        " values");
  }

  size_t push(Node node) {
    nodes_.push_back(std::move(node));
    stack_.push_back(nodes_.size() - 1);
    return nodes_.size() - 1;
  }
  size_t push_int(int64_t v, bool is_unsigned = false) {
    Node n;
    n.kind = Node::Kind::kInt;
    n.integer = v;
    n.is_unsigned = is_unsigned;
    return push(std::move(n));
  }
  size_t push_text(Node::Kind kind, std::string_view text, size_t at) {
    if (kind == Node::Kind::kString) {
      const size_t bad = utf8_invalid_offset(text);
      TORCH_CHECK_VALUE(
          bad == std::string_view::npos,
          error_prefix(at),
          "a str that is not valid UTF-8 (at its byte ",
          bad,
          ")");
    }
    Node n;
    n.kind = kind;
    n.text = std::string(text);
    return push(std::move(n));
  }
  size_t push_kind(Node::Kind kind) {
    Node n;
    n.kind = kind;
    return push(std::move(n));
  }

  size_t floor() const {
    return marks_.empty() ? 0 : marks_.back();
  }
  size_t pop(size_t at) {
    TORCH_CHECK_VALUE(
        stack_.size() > floor(), error_prefix(at), "the stack is empty");
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
        stack_.size() > floor(),
        error_prefix(at),
        opname,
        " with nothing to add to");
    Node& node = nodes_[stack_.back()];
    TORCH_CHECK_VALUE(
        node.kind == kind,
        error_prefix(at),
        opname,
        " expects a ",
        node_kind_name(kind),
        " below its items, found a ",
        node_kind_name(node.kind));
    return node;
  }

  void make_tuple(std::vector<size_t> items) {
    Node n;
    n.kind = Node::Kind::kTuple;
    n.items = std::move(items);
    push(std::move(n));
  }

  [[noreturn]] void refuse(uint8_t op, size_t at) const {
    const char* name = opcode_name(op);
    const std::string label =
        "opcode 0x" + hex(op) +
        (name != nullptr ? std::string(" (") + name + ")" : "");
    if (!extended_) {
      TORCH_CHECK_VALUE(
          false,
          error_prefix(at),
          "opcode 0x",
          hex(op),
          " is not plain data (only dict, list, tuple, str, int, float, "
          "bool and None are accepted)");
    }
    TORCH_CHECK_VALUE(
        false,
        error_prefix(at),
        label,
        " is not allowed: only the opcodes that build dicts, lists, tuples, "
        "str, bytes, numbers, None, numpy arrays and scalars and torch.Size "
        "are read, and nothing is executed");
  }

  // LONG1/LONG4: a little-endian two's complement integer of `n` bytes,
  // read if it fits in int64 or uint64.
  void push_long(uint64_t n, size_t at) {
    TORCH_CHECK_VALUE(
        n <= 9,
        error_prefix(at),
        "an integer of ",
        n,
        " bytes does not fit in 64 bits");
    const std::string_view raw = take(n, at);
    if (n == 9) {
      // Only 2**63 .. 2**64-1 need a ninth byte: a zero sign byte.
      TORCH_CHECK_VALUE(
          raw[8] == '\0' && (static_cast<uint8_t>(raw[7]) & 0x80) != 0,
          error_prefix(at),
          "an integer of 9 bytes does not fit in 64 bits");
    }
    uint64_t v = 0;
    for (size_t i = 0; i < std::min<uint64_t>(n, 8); ++i) {
      v |= static_cast<uint64_t>(static_cast<uint8_t>(raw[i])) << (8 * i);
    }
    if (n == 9) {
      push_int(static_cast<int64_t>(v), /*is_unsigned=*/true);
      return;
    }
    if (n > 0 && n < 8 && (v >> (8 * n - 1)) != 0) {
      v |= ~uint64_t{0} << (8 * n);  // sign-extend
    }
    push_int(static_cast<int64_t>(v));
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
      case '0':  // POP
        (void)pop(at);
        return;
      case '1':  // POP_MARK
        (void)pop_mark(at);
        return;
      case 'l': {  // LIST
        Node n;
        n.kind = Node::Kind::kList;
        n.items = pop_mark(at);
        push(std::move(n));
        return;
      }
      case 'd': {  // DICT
        Node n;
        n.kind = Node::Kind::kDict;
        n.items = pop_mark(at);
        TORCH_CHECK_VALUE(
            n.items.size() % 2 == 0,
            error_prefix(at),
            "DICT with an odd number of items (",
            n.items.size(),
            ")");
        push(std::move(n));
        return;
      }
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
      case 0x8a:  // LONG1
        push_long(take_le(1, at), at);
        return;
      case 0x8b:  // LONG4
        push_long(take_le(4, at), at);
        return;
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
        push_text(Node::Kind::kString, take(take_le(1, at), at), at);
        return;
      case 'X':  // BINUNICODE
        push_text(Node::Kind::kString, take(take_le(4, at), at), at);
        return;
      case 0x8d:  // BINUNICODE8
        push_text(Node::Kind::kString, take(take_le(8, at), at), at);
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
        break;
    }
    if (!extended_) {
      refuse(op, at);
    }
    switch (op) {
      case 'C':  // SHORT_BINBYTES
        push_text(Node::Kind::kBytes, take(take_le(1, at), at), at);
        return;
      case 'B':  // BINBYTES
        push_text(Node::Kind::kBytes, take(take_le(4, at), at), at);
        return;
      case 0x8e:  // BINBYTES8
      case 0x96:  // BYTEARRAY8 (protocol 5's in-band buffer of an array)
        push_text(Node::Kind::kBytes, take(take_le(8, at), at), at);
        return;
      case 'c': {  // GLOBAL
        const std::string_view module = take_line(at);
        const std::string_view name = take_line(at);
        push_global(module, name, at);
        return;
      }
      case 0x93: {  // STACK_GLOBAL
        const Node name = nodes_[pop(at)];
        const Node module = nodes_[pop(at)];
        TORCH_CHECK_VALUE(
            name.kind == Node::Kind::kString &&
                module.kind == Node::Kind::kString,
            error_prefix(at),
            "STACK_GLOBAL expects two str, found a ",
            node_kind_name(module.kind),
            " and a ",
            node_kind_name(name.kind));
        push_global(module.text, name.text, at);
        return;
      }
      case 'R':  // REDUCE
        reduce(at);
        return;
      case 'b':  // BUILD
        build(at);
        return;
      default:
        refuse(op, at);
    }
  }

  void push_global(std::string_view module, std::string_view name, size_t at) {
    for (const GlobalName& allowed : kGlobals) {
      if (module == allowed.module && name == allowed.name) {
        Node n;
        n.kind = Node::Kind::kGlobal;
        n.global = allowed.tag;
        n.text = std::string(module) + "." + std::string(name);
        push(std::move(n));
        return;
      }
    }
    TORCH_CHECK_VALUE(
        false,
        error_prefix(at),
        "the global '",
        module,
        ".",
        name,
        "' is not allowed: a pickle may name only numpy arrays, dtypes and "
        "scalars, torch.Size, collections.OrderedDict and _codecs.encode, "
        "and nothing it names is imported or called");
  }

  // The node `id` checked to be of `kind`; `role` names it in messages.
  const Node& expect(size_t id, Node::Kind kind, const char* role, size_t at) {
    const Node& node = nodes_[id];
    TORCH_CHECK_VALUE(
        node.kind == kind,
        error_prefix(at),
        role,
        " must be a ",
        node_kind_name(kind),
        ", found a ",
        node_kind_name(node.kind));
    return node;
  }

  // A shape: a tuple of non-negative ints, at most kMaxArrayDims long.
  std::vector<int64_t> shape_of(size_t id, const char* role, size_t at) {
    const Node& tuple = expect(id, Node::Kind::kTuple, role, at);
    TORCH_CHECK_VALUE(
        static_cast<int64_t>(tuple.items.size()) <= kMaxArrayDims,
        error_prefix(at),
        role,
        " has ",
        tuple.items.size(),
        " dims, more than numpy's ",
        kMaxArrayDims);
    std::vector<int64_t> shape;
    for (const size_t item : tuple.items) {
      const Node& dim = expect(item, Node::Kind::kInt, "a dim", at);
      TORCH_CHECK_VALUE(
          !dim.is_unsigned && dim.integer >= 0,
          error_prefix(at),
          role,
          " has a negative or huge dim");
      shape.push_back(dim.integer);
    }
    return shape;
  }

  // Checks that `data` holds `shape` of `dtype` exactly.
  void check_array_bytes(
      const std::vector<int64_t>& shape,
      c10::ScalarType dtype,
      size_t data_bytes,
      size_t at) {
    int64_t numel = 1;
    bool overflow = false;
    for (const int64_t dim : shape) {
      overflow = overflow || c10::mul_overflows(numel, dim, &numel);
    }
    int64_t nbytes = 0;
    overflow =
        overflow ||
        c10::mul_overflows(
            numel, static_cast<int64_t>(c10::elementSize(dtype)), &nbytes);
    TORCH_CHECK_VALUE(
        !overflow && static_cast<uint64_t>(nbytes) == data_bytes,
        error_prefix(at),
        "a numpy array of shape ",
        c10::IntArrayRef(shape),
        " and dtype ",
        c10::toString(dtype),
        " needs ",
        overflow ? std::string("more than 2**63") : std::to_string(nbytes),
        " bytes, but its data has ",
        data_bytes);
  }

  void reduce(size_t at) {
    const size_t args_id = pop(at);
    const size_t callable_id = pop(at);
    const Node& callable = nodes_[callable_id];
    TORCH_CHECK_VALUE(
        callable.kind == Node::Kind::kGlobal,
        error_prefix(at),
        "REDUCE calls a ",
        node_kind_name(callable.kind),
        "; only the allowed globals build values");
    const Node& args =
        expect(args_id, Node::Kind::kTuple, "REDUCE's arguments", at);
    const std::string& name = callable.text;
    const auto arity = [&](size_t n) {
      TORCH_CHECK_VALUE(
          args.items.size() == n,
          error_prefix(at),
          name,
          " takes ",
          n,
          " arguments here, got ",
          args.items.size());
    };
    Node out;
    switch (callable.global) {
      case Global::kNdarray:
        TORCH_CHECK_VALUE(
            false,
            error_prefix(at),
            "numpy.ndarray is only read as _reconstruct's argument");
      case Global::kReconstruct: {
        arity(3);
        const Node& cls = expect(
            args.items[0], Node::Kind::kGlobal, "_reconstruct's class", at);
        TORCH_CHECK_VALUE(
            cls.global == Global::kNdarray,
            error_prefix(at),
            "_reconstruct builds a '",
            cls.text,
            "', only numpy.ndarray is read");
        (void)shape_of(args.items[1], "_reconstruct's shape", at);
        out.kind = Node::Kind::kArray;
        break;
      }
      case Global::kFromBuffer: {
        arity(4);
        const Node& data = expect(
            args.items[0], Node::Kind::kBytes, "_frombuffer's buffer", at);
        const Node& dtype = expect(
            args.items[1], Node::Kind::kDtype, "_frombuffer's dtype", at);
        const Node& order = expect(
            args.items[3], Node::Kind::kString, "_frombuffer's order", at);
        TORCH_CHECK_VALUE(
            order.text == "C" || order.text == "F",
            error_prefix(at),
            "_frombuffer's order is '",
            order.text,
            "', expected 'C' or 'F'");
        out.kind = Node::Kind::kArray;
        out.shape = shape_of(args.items[2], "_frombuffer's shape", at);
        out.dtype = dtype.dtype;
        out.byte_order = dtype.byte_order;
        out.fortran = order.text == "F";
        check_array_bytes(out.shape, out.dtype, data.text.size(), at);
        out.data_id = args.items[0];
        out.built = true;
        break;
      }
      case Global::kDtype: {
        arity(3);
        const Node& descr = expect(
            args.items[0], Node::Kind::kString, "numpy.dtype's descr", at);
        for (const DtypeName& known : kDtypes) {
          if (descr.text == known.descr) {
            out.dtype = known.type;
          }
        }
        TORCH_CHECK_VALUE(
            out.dtype != c10::ScalarType::Undefined,
            error_prefix(at),
            "the numpy dtype '",
            descr.text,
            "' has no torch equivalent (read: bool, int8 to int64, uint8 to "
            "uint64, float16, float32, float64, complex64, complex128)");
        out.kind = Node::Kind::kDtype;
        out.byte_order = c10::elementSize(out.dtype) == 1 ? '|' : '=';
        break;
      }
      case Global::kScalar: {
        arity(2);
        const Node& dtype =
            expect(args.items[0], Node::Kind::kDtype, "scalar's dtype", at);
        const Node& data =
            expect(args.items[1], Node::Kind::kBytes, "scalar's data", at);
        check_array_bytes({}, dtype.dtype, data.text.size(), at);
        out.kind = Node::Kind::kScalar;
        out.dtype = dtype.dtype;
        out.byte_order = dtype.byte_order;
        out.text = data.text;
        out.built = true;
        break;
      }
      case Global::kSize: {
        arity(1);
        const Node& dims = expect(
            args.items[0], Node::Kind::kTuple, "torch.Size's argument", at);
        for (const size_t item : dims.items) {
          (void)expect(item, Node::Kind::kInt, "a torch.Size dim", at);
        }
        out.kind = Node::Kind::kSize;
        charge(dims.items.size(), at);
        out.items = dims.items;
        break;
      }
      case Global::kOrderedDict:
        arity(0);
        out.kind = Node::Kind::kDict;
        break;
      case Global::kEncode: {
        arity(2);
        const Node& text = expect(
            args.items[0], Node::Kind::kString, "_codecs.encode's text", at);
        const Node& codec = expect(
            args.items[1], Node::Kind::kString, "_codecs.encode's codec", at);
        TORCH_CHECK_VALUE(
            codec.text == "latin1" || codec.text == "latin-1",
            error_prefix(at),
            "_codecs.encode with the codec '",
            codec.text,
            "', only latin1 is read");
        out.kind = Node::Kind::kBytes;
        charge(text.text.size(), at);
        for (size_t i = 0; i < text.text.size();) {
          uint32_t cp = 0;
          const size_t n = utf8_decode(text.text, i, cp);
          TORCH_CHECK_VALUE(
              n > 0 && cp < 256,
              error_prefix(at),
              "_codecs.encode's text is not latin1");
          out.text.push_back(static_cast<char>(cp));
          i += n;
        }
        break;
      }
    }
    push(std::move(out));
  }

  void build(size_t at) {
    const size_t state_id = pop(at);
    TORCH_CHECK_VALUE(
        stack_.size() > floor(),
        error_prefix(at),
        "BUILD with nothing to build");
    const size_t target_id = stack_.back();
    const Node::Kind kind = nodes_[target_id].kind;
    const Node& state =
        expect(state_id, Node::Kind::kTuple, "BUILD's state", at);
    if (kind == Node::Kind::kDtype) {
      // (version, byte order, subarray, names, fields, elsize, alignment,
      // flags[, metadata])
      TORCH_CHECK_VALUE(
          state.items.size() == 8 || state.items.size() == 9,
          error_prefix(at),
          "a numpy.dtype state of ",
          state.items.size(),
          " items, expected 8 or 9");
      const Node& order = expect(
          state.items[1], Node::Kind::kString, "the dtype's byte order", at);
      TORCH_CHECK_VALUE(
          order.text.size() == 1 &&
              std::string_view("<>|=").find(order.text[0]) !=
                  std::string_view::npos,
          error_prefix(at),
          "the dtype's byte order is '",
          order.text,
          "', expected one of <, >, | and =");
      for (size_t i = 2; i < state.items.size(); ++i) {
        if (i >= 5 && i <= 7) {
          continue;
        }
        TORCH_CHECK_VALUE(
            nodes_[state.items[i]].kind == Node::Kind::kNone,
            error_prefix(at),
            "a structured, sub-array or annotated numpy dtype is not read");
      }
      nodes_[target_id].byte_order = order.text[0];
      return;
    }
    TORCH_CHECK_VALUE(
        kind == Node::Kind::kArray && !nodes_[target_id].built,
        error_prefix(at),
        "BUILD on a ",
        node_kind_name(kind),
        " is not allowed (only numpy arrays and dtypes are built)");
    // (version, shape, dtype, is_fortran, data), or without the version.
    TORCH_CHECK_VALUE(
        state.items.size() == 5 || state.items.size() == 4,
        error_prefix(at),
        "a numpy.ndarray state of ",
        state.items.size(),
        " items, expected 4 or 5");
    const size_t first = state.items.size() - 4;
    std::vector<int64_t> shape =
        shape_of(state.items[first], "the array's shape", at);
    const Node& dtype = expect(
        state.items[first + 1], Node::Kind::kDtype, "the array's dtype", at);
    const Node& fortran = nodes_[state.items[first + 2]];
    TORCH_CHECK_VALUE(
        fortran.kind == Node::Kind::kBool || fortran.kind == Node::Kind::kInt,
        error_prefix(at),
        "the array's is_fortran must be a bool, found a ",
        node_kind_name(fortran.kind));
    const Node& data = nodes_[state.items[first + 3]];
    TORCH_CHECK_VALUE(
        data.kind == Node::Kind::kBytes,
        error_prefix(at),
        "the array's data must be bytes, found a ",
        node_kind_name(data.kind),
        " (object arrays are not read)");
    check_array_bytes(shape, dtype.dtype, data.text.size(), at);
    Node& array = nodes_[target_id];
    array.shape = std::move(shape);
    array.dtype = dtype.dtype;
    array.byte_order = dtype.byte_order;
    array.fortran = fortran.integer != 0;
    array.data_id = state.items[first + 3];
    array.built = true;
  }

  // The tensor of an array or scalar node: C order, native byte order.
  at::Tensor array_tensor(size_t id) {
    const auto cached = tensors_.find(id);
    if (cached != tensors_.end()) {
      return cached->second;
    }
    const Node& node = nodes_[id];
    TORCH_CHECK_VALUE(
        node.built,
        "invalid pickle in ",
        what_,
        ": a numpy array without its state (no BUILD)");
    std::vector<int64_t> dims = node.shape;
    if (node.fortran) {
      std::reverse(dims.begin(), dims.end());
    }
    at::Tensor t = at::empty(dims, at::TensorOptions().dtype(node.dtype));
    auto* data = static_cast<char*>(t.data_ptr());
    const std::string& raw =
        node.kind == Node::Kind::kArray ? nodes_[node.data_id].text : node.text;
    if (!raw.empty()) {
      std::memcpy(data, raw.data(), raw.size());
    }
    const bool swap =
        kLittleEndian ? node.byte_order == '>' : node.byte_order == '<';
    const size_t item = c10::elementSize(node.dtype);
    const size_t unit = c10::isComplexType(node.dtype) ? item / 2 : item;
    if (swap && unit > 1) {
      for (size_t i = 0; i + unit <= raw.size(); i += unit) {
        std::reverse(data + i, data + i + unit);
      }
    }
    if (node.fortran && dims.size() > 1) {
      std::vector<int64_t> order(dims.size());
      for (size_t i = 0; i < order.size(); ++i) {
        order[i] = static_cast<int64_t>(order.size() - 1 - i);
      }
      t = t.permute(order).contiguous();
    }
    tensors_.emplace(id, t);
    return t;
  }

  static Json scalar_atom(const at::Tensor& t) {
    const void* p = t.const_data_ptr();
    switch (t.scalar_type()) {
      case c10::ScalarType::Bool:
        return *static_cast<const uint8_t*>(p) != 0;
      case c10::ScalarType::Char:
        return *static_cast<const int8_t*>(p);
      case c10::ScalarType::Short:
        return *static_cast<const int16_t*>(p);
      case c10::ScalarType::Int:
        return *static_cast<const int32_t*>(p);
      case c10::ScalarType::Long:
        return *static_cast<const int64_t*>(p);
      case c10::ScalarType::Byte:
        return *static_cast<const uint8_t*>(p);
      case c10::ScalarType::UInt16:
        return *static_cast<const uint16_t*>(p);
      case c10::ScalarType::UInt32:
        return *static_cast<const uint32_t*>(p);
      case c10::ScalarType::UInt64:
        return *static_cast<const uint64_t*>(p);
      case c10::ScalarType::Half:
        return static_cast<double>(
            static_cast<float>(*static_cast<const c10::Half*>(p)));
      case c10::ScalarType::Float:
        return static_cast<double>(*static_cast<const float*>(p));
      case c10::ScalarType::Double:
        return *static_cast<const double*>(p);
      default:
        return nullptr;  // complex: no JSON value
    }
  }

  std::string_view bytes_;
  std::string_view what_;
  int64_t max_depth_;
  bool extended_;
  size_t pos_ = 0;
  size_t emitted_ = 0;
  size_t copied_ = 0;
  std::vector<Node> nodes_;
  std::vector<size_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, size_t> memo_;
  std::unordered_map<size_t, at::Tensor> tensors_;

 public:
  // One element of a contiguous array, as JSON (not complex).
  static Json element(const at::Tensor& t, const char* p) {
    switch (t.scalar_type()) {
      case c10::ScalarType::Bool:
        return *reinterpret_cast<const uint8_t*>(p) != 0;
      case c10::ScalarType::Char:
        return *reinterpret_cast<const int8_t*>(p);
      case c10::ScalarType::Short:
        return *reinterpret_cast<const int16_t*>(p);
      case c10::ScalarType::Int:
        return *reinterpret_cast<const int32_t*>(p);
      case c10::ScalarType::Long:
        return *reinterpret_cast<const int64_t*>(p);
      case c10::ScalarType::Byte:
        return *reinterpret_cast<const uint8_t*>(p);
      case c10::ScalarType::UInt16:
        return *reinterpret_cast<const uint16_t*>(p);
      case c10::ScalarType::UInt32:
        return *reinterpret_cast<const uint32_t*>(p);
      case c10::ScalarType::UInt64:
        return *reinterpret_cast<const uint64_t*>(p);
      case c10::ScalarType::Half:
        return static_cast<double>(
            static_cast<float>(*reinterpret_cast<const c10::Half*>(p)));
      case c10::ScalarType::Float:
        return static_cast<double>(*reinterpret_cast<const float*>(p));
      case c10::ScalarType::Double:
        return *reinterpret_cast<const double*>(p);
      default:
        return nullptr;
    }
  }
};

// Nested lists of a contiguous array's elements, dims from `dim` on.
Json nested_lists(
    const at::Tensor& t, size_t dim, const char*& p, size_t item) {
  if (dim == static_cast<size_t>(t.dim())) {
    Json out = Machine::element(t, p);
    p += item;
    return out;
  }
  Json out = Json::array();
  for (int64_t i = 0; i < t.size(static_cast<int64_t>(dim)); ++i) {
    out.push_back(nested_lists(t, dim + 1, p, item));
  }
  return out;
}

Json array_to_json(const at::Tensor& t, std::string_view what) {
  TORCH_CHECK_VALUE(
      !c10::isComplexType(t.scalar_type()),
      what,
      ": a complex numpy value (",
      c10::toString(t.scalar_type()),
      ") has no JSON form");
  // A zero-size array's empty lists are not bounded by its bytes.
  int64_t lists = 1;
  for (int64_t i = 0; i < t.dim() && t.size(i) != 0; ++i) {
    TORCH_CHECK_VALUE(
        !c10::mul_overflows(lists, t.size(i), &lists) &&
            lists <= kMaxEmptyLists,
        what,
        ": a zero-size numpy array of shape ",
        t.sizes(),
        " would expand to more than ",
        kMaxEmptyLists,
        " empty lists");
    if (t.numel() != 0) {
      break;
    }
  }
  const char* p = static_cast<const char*>(t.const_data_ptr());
  return nested_lists(t, 0, p, t.element_size());
}

Json to_json_impl(const PickledValue& value, std::string_view what) {
  using Kind = PickledValue::Kind;
  switch (value.kind) {
    case Kind::kNone:
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
    case Kind::kStr:
    case Kind::kBytes:
      return value.atom;
    case Kind::kNumpyScalar:
      TORCH_CHECK_VALUE(
          !value.atom.is_null(),
          what,
          ": a complex numpy value (",
          c10::toString(value.array.scalar_type()),
          ") has no JSON form");
      return value.atom;
    case Kind::kArray:
      return array_to_json(value.array, what);
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kSize: {
      Json out = Json::array();
      for (const PickledValue& item : value.items) {
        out.push_back(to_json_impl(item, what));
      }
      return out;
    }
    case Kind::kDict:
      break;
  }
  Json out = Json::object();
  for (size_t i = 0; i + 1 < value.items.size(); i += 2) {
    const PickledValue& key = value.items[i];
    std::string text;
    switch (key.kind) {
      case Kind::kStr:
        text = key.atom.get<std::string>();
        break;
      case Kind::kInt:
      case Kind::kBool:
      case Kind::kNone:
        text = key.atom.dump();  // as json.dumps writes these keys
        break;
      default:
        TORCH_CHECK_VALUE(
            false,
            what,
            ": a dict key of type ",
            pickled_kind_name(key.kind),
            " has no JSON form (str, int, bool and None keys are read)");
    }
    TORCH_CHECK_VALUE(
        !out.contains(text),
        what,
        ": two dict keys are both the JSON key \"",
        text,
        "\"");
    out[text] = to_json_impl(value.items[i + 1], what);
  }
  return out;
}

}  // namespace

std::string pickle_dumps(const Json& value) {
  std::string out = "\x80\x02";
  dump(value, out);
  out.push_back('.');
  return out;
}

Json pickle_loads(
    std::string_view bytes, std::string_view what, int64_t max_depth) {
  Machine machine(bytes, what, max_depth, /*extended=*/false);
  const size_t root = machine.run();
  std::vector<size_t> path;
  return machine.to_json(root, path);
}

const char* pickled_kind_name(PickledValue::Kind kind) noexcept {
  using Kind = PickledValue::Kind;
  switch (kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kStr:
      return "str";
    case Kind::kBytes:
      return "bytes";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kSize:
      return "torch.Size";
    case Kind::kArray:
      return "numpy.ndarray";
    case Kind::kNumpyScalar:
      return "numpy scalar";
  }
  return "?";
}

PickledValue unpickle(
    std::string_view bytes, std::string_view what, int64_t max_depth) {
  Machine machine(bytes, what, max_depth, /*extended=*/true);
  const size_t root = machine.run();
  std::vector<size_t> path;
  return machine.to_value(root, path);
}

Json pickled_to_json(const PickledValue& value, std::string_view what) {
  return to_json_impl(value, what);
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
