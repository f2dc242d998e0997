#pragma once

// Field lookup and field values of a TensorClass description, shared by
// src/tensor_class/tensor_class.cpp, src/memmap/tensor_class.cpp and
// src/state_dict/tensor_class.cpp. Not
// API: the public declarations of the compiled TensorClass side are in
// include/tensordict/detail/tensor_class_impl.h.

#include <cstddef>
#include <optional>
#include <string>
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

/// Returns what a field of `kind` holds ("a tensor", "a string", ...).
const char* kind_name(FieldKind kind);

/// Returns "field 'name' of Class", for messages.
std::string field_label(const ClassInfo& info, size_t index);

/// Returns what a field of `kind` takes when `value` does not fit it ("a
/// tensor"), or null when it fits (a TensorClass field's own fields are not
/// checked here).
const char* kind_mismatch(const Value& value, FieldKind kind);

/// The field a nested key names: the class level holding its last part and
/// the field's index there. `info` is null when the key ends inside a
/// TensorDict field, where any key goes.
struct FieldAt {
  const ClassInfo* info = nullptr;
  size_t index = 0;
};

/// Resolves `key` against the class: each part before the last must name a
/// TensorClass field of its level (whose class takes the next part) or a
/// TensorDict field. Throws KeyError for a part that is not a field and
/// ValueError, naming `op`, for one whose field holds no dict.
FieldAt resolve_field(
    const ClassInfo& info, const NestedKey& key, const char* op);

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
