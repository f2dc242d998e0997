#pragma once

// Field lookup and field values of a TensorClass description, shared by
// src/tensor_class/tensor_class.cpp, src/memmap/tensor_class.cpp and
// src/state_dict/tensor_class.cpp. Not
// API: the public declarations of the compiled TensorClass side are in
// include/tensordict/detail/tensor_class_impl.h.

#include <optional>
#include <string_view>

#include "tensordict/json.h"
#include "tensordict/tensor_class.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Returns the one JSON value of a non-tensor entry: its data, or the common
/// value of a stack whose elements all agree; nullopt otherwise.
std::optional<Json> single_json(const Value& value);

/// Returns the index of the field named `name`, or nullopt.
std::optional<size_t> find_field(const ClassInfo& info, std::string_view name);

/// Returns the class of the TensorClass field named `key`, or null when
/// `key` is another field or none.
const ClassInfo* nested_class(const ClassInfo& info, std::string_view key);

/// Returns `value` as a field argument: integers, floats and bools as C++
/// numbers (so the class flags cast them), anything else as JSON.
FieldArg field_arg_from_json(const Json& value);

/// Throws ValueError naming `where` unless a loaded Python class `cls` is
/// empty or the one `info` is registered as.
void check_loaded_class(
    const std::string& cls, const ClassInfo& info, const std::string& where);

}  // namespace detail
TENSORDICT_END_NAMESPACE
