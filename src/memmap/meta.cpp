// The meta.json texts of a save. See memmap/meta.h.

#include "memmap/meta.h"

#include <c10/util/Exception.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "io/format.h"
#include "tensordict/lazy_stack.h"
#include "tensordict/non_tensor.h"
#include "tensordict/value.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

std::string dump_checked(
    const Json& value, bool spaced, bool ascii, const KeyPath& path) {
  try {
    return dump_json(value, spaced, ascii);
  } catch (c10::Error& e) {
    TORCH_RETHROW(e, "while saving ", describe(path));
  }
}

void append_member(Json& object, std::string key, Json value) {
  static_cast<Json::object_t::Container&>(object.get_ref<Json::object_t&>())
      .emplace_back(std::move(key), std::move(value));
}

Json leaf_meta(
    std::string device, c10::IntArrayRef shape, c10::ScalarType dtype) {
  Json entry = Json::object();
  auto& members =
      static_cast<Json::object_t::Container&>(entry.get_ref<Json::object_t&>());
  members.reserve(4);
  members.emplace_back("device", std::move(device));
  members.emplace_back("shape", shape.vec());
  members.emplace_back("dtype", dtype_name(dtype));
  members.emplace_back("is_nested", false);
  return entry;
}

Json format_members(const char* class_id) {
  Json members = Json::object();
  members["_format_version"] = kMemmapFormatVersion;
  members["_class"] = class_id;
  return members;
}

Json lazy_stack_meta(const LazyStackedTensorDict& stack) {
  Json meta = Json::object();
  meta["_type"] = kLazyStackType;
  meta.update(format_members("tensordict:LazyStackedTensorDict"));
  meta["stack_dim"] = stack.stack_dim();
  if (const auto& name = stack.stack_dim_name()) {
    meta["stack_dim_name"] = *name;
  } else {
    meta["stack_dim_name"] = nullptr;
  }
  return meta;
}

std::string non_tensor_meta(
    const Value& value, JsonStyle style, const KeyPath& path) {
  Json meta = Json::object();
  const bool ascii = style == JsonStyle::kSpaced;
  if (value.is_non_tensor_data()) {
    meta["_type"] = kNonTensorDataType;
    meta["data"] = value.non_tensor_data().data();
    meta["_metadata"] = nullptr;
    meta["_is_non_tensor"] = true;
    return dump_checked(meta, /*spaced=*/ascii, ascii, path);
  }
  meta["_type"] = kNonTensorStackType;
  meta.update(format_members("tensordict:NonTensorStack"));
  meta["stack_dim"] = 0;
  // Python writes the device the stack was built with, which its loader
  // leaves unset: null, also for stacks that a dict moved to its device.
  meta["device"] = nullptr;
  meta["data"] = value.non_tensor_stack().tolist();
  // Python writes a stack's meta.json compact in both styles.
  return dump_checked(meta, /*spaced=*/false, ascii, path);
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
