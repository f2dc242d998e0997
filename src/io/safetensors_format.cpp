// The safetensors header: see NOTE [Safetensors layout] in
// io/safetensors_format.h.

#include "io/safetensors_format.h"

#include <c10/util/Exception.h>
#include <c10/util/safe_numerics.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/key_path.h"
#include "io/format.h"
#include "io/metadata_reader.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

struct DtypeName {
  const char* name;
  c10::ScalarType dtype;
  int rank;  // the crate's `Dtype` order, which sorts a file's tensors
};

// The names safetensors.torch loads (its `_TYPES`), with the rank of each in
// the crate's enum (BOOL 0, ..., U64 21).
constexpr std::array<DtypeName, 18> kDtypes = {{
    {"BOOL", c10::kBool, 0},
    {"U8", c10::kByte, 4},
    {"I8", c10::kChar, 5},
    {"F8_E5M2", c10::ScalarType::Float8_e5m2, 6},
    {"F8_E4M3", c10::ScalarType::Float8_e4m3fn, 7},
    {"F8_E4M3FNUZ", c10::ScalarType::Float8_e4m3fnuz, 9},
    {"F8_E5M2FNUZ", c10::ScalarType::Float8_e5m2fnuz, 10},
    {"I16", c10::kShort, 11},
    {"U16", c10::kUInt16, 12},
    {"F16", c10::kHalf, 13},
    {"BF16", c10::kBFloat16, 14},
    {"I32", c10::kInt, 15},
    {"U32", c10::kUInt32, 16},
    {"F32", c10::kFloat, 17},
    {"C64", c10::kComplexFloat, 18},
    {"F64", c10::kDouble, 19},
    {"I64", c10::kLong, 20},
    {"U64", c10::kUInt64, 21},
}};

// Names the crate knows but safetensors.torch does not load.
constexpr std::array<const char*, 4> kUnloadable = {
    "F4", "F6_E2M3", "F6_E3M2", "F8_E8M0"};

const DtypeName* find_dtype(c10::ScalarType dtype) {
  for (const DtypeName& entry : kDtypes) {
    if (entry.dtype == dtype) {
      return &entry;
    }
  }
  return nullptr;
}

std::string quote_name(std::string_view name) {
  std::string out = "'";
  out.append(name.substr(0, 200));
  out += name.size() > 200 ? "...'" : "'";
  return out;
}

// Appends `text` as serde_json writes a string: quotes, backslash escapes
// for '"', '\\' and the control characters (\b \t \n \f \r, else \u00xx),
// everything else as it is.
void append_json_string(std::string& out, std::string_view text) {
  static const char* const kHex = "0123456789abcdef";
  out += '"';
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (byte < 0x20) {
          out += "\\u00";
          out += kHex[byte >> 4];
          out += kHex[byte & 0xF];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// Reads a non-negative int64 member `what` of a tensor entry.
int64_t read_offset(
    const MetadataReader& at, const Json& value, const char* what) {
  const int64_t out = at.integer(value, what);
  TENSORDICT_CHECK_METADATA(
      at, out >= 0, "\"", what, "\" must not be negative, found ", out);
  return out;
}

SafetensorsTensor read_tensor(
    const std::string& name, const Json& entry, const MetadataReader& at) {
  TENSORDICT_CHECK_METADATA(
      at,
      entry.is_object(),
      "expected an object {\"dtype\", \"shape\", \"data_offsets\"}, found ",
      entry.type_name());
  SafetensorsTensor out;
  out.name = name;
  const std::string& dtype = at.string(at.member(entry, "dtype"), "dtype");
  const std::optional<c10::ScalarType> scalar = safetensors_dtype(dtype);
  if (!scalar) {
    const bool known =
        std::find_if(
            kUnloadable.begin(), kUnloadable.end(), [&](const char* n) {
              return dtype == n;
            }) != kUnloadable.end();
    at.fail(
        "dtype ",
        quote_name(dtype),
        known ? " is not supported (safetensors.torch does not load it either)"
              : " is unknown",
        "; expected one of BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, "
        "BF16, F32, F64, C64, F8_E4M3, F8_E5M2, F8_E4M3FNUZ, F8_E5M2FNUZ");
  }
  out.dtype = *scalar;
  out.shape = at.shape(at.member(entry, "shape"), "shape");
  const Json& offsets = at.member(entry, "data_offsets");
  TENSORDICT_CHECK_METADATA(
      at,
      offsets.is_array() && offsets.size() == 2,
      "\"data_offsets\" must be a list [begin, end], found ",
      offsets.dump().substr(0, 200));
  out.begin = read_offset(at, offsets[0], "data_offsets");
  out.end = read_offset(at, offsets[1], "data_offsets");
  TENSORDICT_CHECK_METADATA(
      at,
      out.begin <= out.end,
      "\"data_offsets\" [",
      out.begin,
      ", ",
      out.end,
      "] end before they begin");
  const int64_t nbytes = at.checked_nbytes(out.shape, out.dtype);
  // A zero size makes the byte count 0 whatever follows; the strides of the
  // other sizes must still fit an int64.
  uint64_t strided = c10::elementSize(out.dtype);
  for (const int64_t size : out.shape) {
    TENSORDICT_CHECK_METADATA(
        at,
        !c10::mul_overflows(
            strided,
            static_cast<uint64_t>(std::max<int64_t>(size, 1)),
            &strided) &&
            strided <= static_cast<uint64_t>(INT64_MAX),
        "shape ",
        c10::IntArrayRef(out.shape),
        " has strides that overflow a 64-bit count");
  }
  TENSORDICT_CHECK_METADATA(
      at,
      out.end - out.begin == nbytes,
      "shape ",
      c10::IntArrayRef(out.shape),
      " of ",
      dtype,
      " needs ",
      nbytes,
      " bytes, but \"data_offsets\" [",
      out.begin,
      ", ",
      out.end,
      "] hold ",
      out.end - out.begin);
  return out;
}

}  // namespace

std::optional<c10::ScalarType> safetensors_dtype(std::string_view name) {
  for (const DtypeName& entry : kDtypes) {
    if (name == entry.name) {
      return entry.dtype;
    }
  }
  return std::nullopt;
}

std::optional<std::string_view> safetensors_dtype_name(c10::ScalarType dtype) {
  const DtypeName* entry = find_dtype(dtype);
  if (entry == nullptr) {
    return std::nullopt;
  }
  return std::string_view(entry->name);
}

SafetensorsHeader parse_safetensors_header(
    const uint8_t* data, size_t size, const std::string& source) {
  const std::string prefix = "invalid safetensors file " + source + ": ";
  TORCH_CHECK(
      size >= 8,
      prefix,
      "expected at least 8 bytes (the header length), found ",
      size);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) {
    length |= static_cast<uint64_t>(data[i]) << (8 * i);
  }
  TORCH_CHECK(
      length <= kSafetensorsMaxHeaderBytes,
      prefix,
      "the header length is ",
      length,
      " bytes, more than the limit of ",
      kSafetensorsMaxHeaderBytes);
  TORCH_CHECK(
      length <= size - 8,
      prefix,
      "the header length is ",
      length,
      " bytes, but only ",
      size - 8,
      " bytes follow it");
  const std::string_view text(
      reinterpret_cast<const char*>(data + 8), static_cast<size_t>(length));
  // Names and dtypes sit at depth 2, data offsets at 3: anything deeper is
  // refused before it is built.
  const Json header = parse_meta_json(
      text, /*max_depth=*/8, "the safetensors header of " + source);

  SafetensorsHeader out;
  out.data_start = static_cast<int64_t>(8 + length);
  const int64_t data_size = static_cast<int64_t>(size - 8 - length);
  out.tensors.reserve(header.size());
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      const MetadataReader at(source, KeyPath());
      if (it->is_null()) {
        continue;
      }
      at.expect_object(*it, "__metadata__");
      for (auto m = it->begin(); m != it->end(); ++m) {
        TENSORDICT_CHECK_METADATA(
            at,
            m->is_string(),
            "the \"__metadata__\" value of ",
            quote_name(m.key()),
            " must be a string, found ",
            m->type_name());
        out.metadata.emplace_back(m.key(), m->get_ref<const std::string&>());
      }
      continue;
    }
    KeyPath path;
    path.push(name);
    out.tensors.push_back(read_tensor(name, *it, MetadataReader(source, path)));
  }
  std::sort(
      out.tensors.begin(),
      out.tensors.end(),
      [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
        return std::make_pair(a.begin, a.end) < std::make_pair(b.begin, b.end);
      });
  int64_t covered = 0;
  const SafetensorsTensor* previous = nullptr;
  for (const SafetensorsTensor& tensor : out.tensors) {
    if (tensor.begin != covered) {
      TORCH_CHECK(
          false,
          prefix,
          "tensor ",
          quote_name(tensor.name),
          " starts at byte ",
          tensor.begin,
          " of the data, but ",
          previous == nullptr
              ? std::string("the first tensor must start at 0")
              : "the previous tensor " + quote_name(previous->name) +
                    " ends at " + std::to_string(covered),
          tensor.begin < covered ? " (they overlap)"
                                 : " (a hole no tensor covers)");
    }
    TORCH_CHECK(
        tensor.end <= data_size,
        prefix,
        "tensor ",
        quote_name(tensor.name),
        " ends at byte ",
        tensor.end,
        " of the data, but the data region holds ",
        data_size,
        " bytes");
    covered = tensor.end;
    previous = &tensor;
  }
  TORCH_CHECK(
      covered == data_size,
      prefix,
      "the tensors cover ",
      covered,
      " bytes of data, but the file holds ",
      data_size,
      " after its header (bytes no tensor covers)");
  return out;
}

int64_t layout_safetensors(std::vector<SafetensorsTensor>& tensors) {
  auto rank = [](const SafetensorsTensor& t) {
    const DtypeName* entry = find_dtype(t.dtype);
    TORCH_INTERNAL_ASSERT(entry != nullptr);
    return entry->rank;
  };
  std::stable_sort(
      tensors.begin(),
      tensors.end(),
      [&](const SafetensorsTensor& a, const SafetensorsTensor& b) {
        const int ra = rank(a);
        const int rb = rank(b);
        if (ra != rb) {
          return ra > rb;
        }
        return a.name < b.name;
      });
  int64_t offset = 0;
  for (SafetensorsTensor& tensor : tensors) {
    const int64_t nbytes = c10::multiply_integers(tensor.shape) *
                           static_cast<int64_t>(c10::elementSize(tensor.dtype));
    tensor.begin = offset;
    tensor.end = offset + nbytes;
    offset = tensor.end;
  }
  return offset;
}

std::string safetensors_header_bytes(
    const std::vector<SafetensorsTensor>& tensors,
    const std::vector<std::pair<std::string, std::string>>& metadata) {
  std::string json = "{";
  bool first = true;
  auto separate = [&]() {
    if (!first) {
      json += ',';
    }
    first = false;
  };
  if (!metadata.empty()) {
    separate();
    json += "\"__metadata__\":{";
    for (size_t i = 0; i < metadata.size(); ++i) {
      if (i > 0) {
        json += ',';
      }
      append_json_string(json, metadata[i].first);
      json += ':';
      append_json_string(json, metadata[i].second);
    }
    json += '}';
  }
  for (const SafetensorsTensor& tensor : tensors) {
    separate();
    append_json_string(json, tensor.name);
    json += ":{\"dtype\":";
    append_json_string(json, *safetensors_dtype_name(tensor.dtype));
    json += ",\"shape\":[";
    for (size_t i = 0; i < tensor.shape.size(); ++i) {
      if (i > 0) {
        json += ',';
      }
      json += std::to_string(tensor.shape[i]);
    }
    json += "],\"data_offsets\":[";
    json += std::to_string(tensor.begin);
    json += ',';
    json += std::to_string(tensor.end);
    json += "]}";
  }
  json += '}';
  json.resize((json.size() + 7) / 8 * 8, ' ');
  TORCH_CHECK(
      json.size() <= kSafetensorsMaxHeaderBytes,
      "the safetensors header would have ",
      json.size(),
      " bytes, more than the limit of ",
      kSafetensorsMaxHeaderBytes,
      " that readers accept");
  std::string out(8, '\0');
  const uint64_t length = json.size();
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<char>((length >> (8 * i)) & 0xFF);
  }
  out += json;
  return out;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
