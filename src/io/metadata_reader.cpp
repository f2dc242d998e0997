#include "io/metadata_reader.h"

#include <c10/util/safe_numerics.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "io/format.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

std::string MetadataReader::prefix() const {
  std::string out = "invalid metadata in ";
  out.append(file_);
  out += " at ";
  out += describe(path_);
  out += ": ";
  return out;
}

void MetadataReader::fail_with(const std::string& message) const {
  TORCH_CHECK(false, prefix(), message);
}

const Json& MetadataReader::member(const Json& object, const char* name) const {
  const auto it = object.find(name);
  TENSORDICT_CHECK_METADATA(
      *this, it != object.end(), "\"", name, "\" is missing");
  return *it;
}

void MetadataReader::expect_object(const Json& value, const char* what) const {
  TENSORDICT_CHECK_METADATA(
      *this,
      value.is_object(),
      "\"",
      what,
      "\" must be an object, found ",
      value.type_name());
}

const std::string& MetadataReader::string(
    const Json& value, const char* what) const {
  TENSORDICT_CHECK_METADATA(
      *this,
      value.is_string(),
      "\"",
      what,
      "\" must be a string, found ",
      value.type_name());
  return value.get_ref<const std::string&>();
}

bool MetadataReader::boolean(const Json& value, const char* what) const {
  TENSORDICT_CHECK_METADATA(
      *this,
      value.is_boolean(),
      "\"",
      what,
      "\" must be a boolean, found ",
      value.type_name());
  return value.get<bool>();
}

int64_t MetadataReader::integer(const Json& value, const char* what) const {
  TENSORDICT_CHECK_METADATA(
      *this,
      value.is_number_integer(),
      "\"",
      what,
      "\" must be an integer, found ",
      value.dump());
  TENSORDICT_CHECK_METADATA(
      *this,
      !value.is_number_unsigned() ||
          value.get<uint64_t>() <=
              static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
      "\"",
      what,
      "\" ",
      value.dump(),
      " is out of range");
  return value.get<int64_t>();
}

std::vector<int64_t> MetadataReader::shape(
    const Json& value, const char* what) const {
  TENSORDICT_CHECK_METADATA(
      *this,
      value.is_array(),
      "\"",
      what,
      "\" must be a list of sizes, found ",
      value.type_name());
  TENSORDICT_CHECK_METADATA(
      *this,
      value.size() <= kMaxDims,
      "\"",
      what,
      "\" has ",
      value.size(),
      " dims, more than ",
      kMaxDims);
  std::vector<int64_t> out;
  out.reserve(value.size());
  for (const Json& size : value) {
    TENSORDICT_CHECK_METADATA(
        *this,
        size.is_number_unsigned()
            ? size.get<uint64_t>() <=
                  static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
            : size.is_number_integer() && size.get<int64_t>() >= 0,
        "\"",
        what,
        "\" must hold non-negative integers, found ",
        size.dump());
    out.push_back(size.get<int64_t>());
  }
  return out;
}

c10::ScalarType MetadataReader::dtype(const Json& value) const {
  const std::string& name = string(value, "dtype");
  const std::optional<c10::ScalarType> dtype = dtype_from_name(name);
  TENSORDICT_CHECK_METADATA(
      *this,
      dtype.has_value(),
      "unknown dtype '",
      name,
      "' (expected one of torch.bool, torch.uint8, ..., torch.complex128)");
  return *dtype;
}

std::optional<c10::Device> MetadataReader::device(const Json& value) const {
  if (value.is_null()) {
    return std::nullopt;
  }
  TENSORDICT_CHECK_METADATA(
      *this,
      value.is_string(),
      "\"device\" must be a string or null, found ",
      value.type_name());
  const auto& text = value.get_ref<const std::string&>();
  if (text == "None") {  // Python's str(None)
    return std::nullopt;
  }
  try {
    return c10::Device(text);
  } catch (const c10::Error&) {
    fail("\"device\" is not a device: '", text, "'");
  }
}

DimNames MetadataReader::names(
    const Json& value, size_t batch_dims, const char* what) const {
  if (value.is_null()) {
    return {};
  }
  TENSORDICT_CHECK_METADATA(
      *this,
      value.is_array(),
      "\"",
      what,
      "\" must be a list of names, found ",
      value.type_name());
  TENSORDICT_CHECK_METADATA(
      *this,
      value.size() == batch_dims,
      "\"",
      what,
      "\" has ",
      value.size(),
      " names for ",
      batch_dims,
      " batch dims");
  DimNames names;
  bool any = false;
  for (const Json& name : value) {
    TENSORDICT_CHECK_METADATA(
        *this,
        name.is_null() || name.is_string(),
        "\"",
        what,
        "\" must hold strings or null, found ",
        name.dump());
    if (name.is_null()) {
      names.emplace_back(std::nullopt);
      continue;
    }
    const auto& text = name.get_ref<const std::string&>();
    for (const auto& earlier : names) {
      TENSORDICT_CHECK_METADATA(
          *this,
          earlier != text,
          "\"",
          what,
          "\" repeats the dim name '",
          text,
          "'");
    }
    names.emplace_back(text);
    any = true;
  }
  return any ? names : DimNames{};
}

int64_t MetadataReader::checked_nbytes(
    c10::IntArrayRef shape, c10::ScalarType dtype) const {
  uint64_t total = c10::elementSize(dtype);
  for (const int64_t size : shape) {
    TENSORDICT_CHECK_METADATA(
        *this,
        !c10::mul_overflows(total, static_cast<uint64_t>(size), &total) &&
            total <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
        "shape ",
        shape,
        " overflows a 64-bit byte count");
  }
  return static_cast<int64_t>(total);
}

void MetadataReader::expect_batch_prefix(
    c10::IntArrayRef sizes, c10::IntArrayRef batch, const char* what) const {
  TENSORDICT_CHECK_METADATA(
      *this,
      sizes.size() >= batch.size() &&
          sizes.slice(0, batch.size()).equals(batch),
      what,
      " ",
      sizes,
      " does not start with the batch size ",
      batch);
}

namespace {

std::atomic<int64_t> max_map_count_override{0};

// The kernel's limit on a process's mappings; Linux's default when it
// cannot be read.
int64_t max_map_count() {
  if (const int64_t value = max_map_count_override.load(); value > 0) {
    return value;
  }
  constexpr int64_t kLinuxDefault = 65530;
  std::ifstream in("/proc/sys/vm/max_map_count");
  int64_t value = 0;
  return in >> value && value > 0 ? value : kLinuxDefault;
}

}  // namespace

int64_t mappings_in_use() {
  std::ifstream in("/proc/self/maps");
  int64_t lines = 0;
  for (std::string line; std::getline(in, line);) {
    ++lines;
  }
  return lines;
}

void set_max_map_count_for_testing(int64_t value) {
  max_map_count_override.store(value);
}

void MappingBudget::reserve(
    int64_t leaves, const std::string& dir, const KeyPath& path) {
  if (limit_ < 0) {
    limit_ = max_map_count();
  }
  reserved_ += leaves;
  if (reserved_ <= limit_ / 4) {
    return;
  }
  const int64_t in_use = mappings_in_use();
  const int64_t available = std::max<int64_t>(limit_ - in_use - kMargin, 0);
  TORCH_CHECK(
      reserved_ <= available,
      "cannot load ",
      dir,
      " (",
      describe(path),
      "): the tree has at least ",
      reserved_,
      " memmap leaves, one memory mapping each, but only ",
      available,
      " more mappings are allowed (vm.max_map_count is ",
      limit_,
      ", the process holds ",
      in_use,
      " and ",
      kMargin,
      " are kept free). Raise the limit (sysctl -w vm.max_map_count=",
      in_use + kMargin + reserved_ * 2,
      "), or save the tree as one consolidated file "
      "(TensorDict::consolidate(filename)) and load that.");
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
