#pragma once

// The compiled side of TensorClass (src/tensor_class/tensor_class.cpp and, for
// the state dict, src/state_dict/tensor_class.cpp): the functions the
// TensorClass templates call, exported so that the templates stay thin. Not
// API: include tensordict/tensor_class.h. Each function takes the class
// description and names the field in its errors.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/ArrayRef.h>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tensordict/detail/tensor_class_traits.h"
#include "tensordict/lazy_stack.h"
#include "tensordict/options.h"
#include "tensordict/state_dict.h"
#include "tensordict/tensor_dict.h"
#include "tensordict/value.h"

TENSORDICT_BEGIN_NAMESPACE

class FieldArg;   // tensordict/tensor_class.h
class FieldInit;  // tensordict/tensor_class.h

namespace detail {

/// Builds the dict of a new instance from named fields; throws like Python's
/// `__init__` on unknown, repeated or missing fields.
TENSORDICT_API TensorDict tc_construct(
    const ClassInfo& info,
    c10::ArrayRef<FieldInit> fields,
    c10::IntArrayRef batch_size,
    std::optional<c10::Device> device,
    const DimNames& names);
/// Stores `value` as field `index`, cast as the class flags say; with
/// `inplace`, copies it into the field's tensor (or dict) when set, as
/// Python's `set(..., inplace=True)`; `non_blocking` goes to the copy.
TENSORDICT_API void tc_set_field(
    const TensorDict& td,
    const ClassInfo& info,
    size_t index,
    const FieldArg& value,
    const SetOptions& options = {});
/// Stores `value` as the field named `name`; throws AttributeError's text
/// (as a KeyError) for a name that is not a field.
TENSORDICT_API void tc_set_by_name(
    const TensorDict& td,
    const ClassInfo& info,
    std::string_view name,
    const FieldArg& value,
    const SetOptions& options = {});
/// Stores `value` at a nested key whose first part names a field holding a
/// dict or a class (Python's `tc.set(("a", "b"), value)`): by the nested
/// class's rules for a TensorClass field, as `TensorDict::set` for a
/// TensorDict field. A key of one part is `tc_set_by_name`.
TENSORDICT_API void tc_set_nested(
    const TensorDict& td,
    const ClassInfo& info,
    c10::ArrayRef<std::string_view> key,
    const FieldArg& value,
    const SetOptions& options = {});
/// Returns the entry of the field named `name`: nullopt when the field is
/// unset, `default_value` when `name` is not a field (Python's `get`).
TENSORDICT_API std::optional<Value> tc_get_or(
    const TensorDict& td,
    const ClassInfo& info,
    std::string_view name,
    std::optional<Value> default_value);
// `get(key, default)` of a nested key whose first part names a field of
// `info`: Python's chained getattr with a default.
TENSORDICT_API std::optional<Value> tc_get_or_nested(
    const TensorDict& td,
    const ClassInfo& info,
    c10::ArrayRef<std::string_view> key,
    std::optional<Value> default_value);
/// Returns the field named `name`, first setting it to `default_value` when
/// unset; throws KeyError for a name that is not a field.
TENSORDICT_API Value tc_setdefault(
    const TensorDict& td,
    const ClassInfo& info,
    std::string_view name,
    const FieldArg& default_value);
/// Returns a deep copy of the fields; with `retain_none`, unset fields (at
/// every class level) hold NonTensorData(null), as Python's.
TENSORDICT_API TensorDict
tc_to_tensordict(const TensorDict& td, const ClassInfo& info, bool retain_none);
/// Returns `td` with the non-tensor fields of `non_tensordict` added (a
/// shallow copy when there are any) after Python's checks; see
/// `TensorClass::from_tensordict`.
TENSORDICT_API TensorDict tc_from_tensordict(
    TensorDict td,
    const ClassInfo& info,
    c10::ArrayRef<FieldInit> non_tensordict);
/// Returns the entry of field `index`, or null when it is unset.
TENSORDICT_API const Value* tc_find(
    const TensorDict& td, const ClassInfo& info, size_t index) noexcept;
/// Returns the entry of field `index`; throws ValueError when unset.
TENSORDICT_API const Value& tc_get(
    const TensorDict& td, const ClassInfo& info, size_t index);
/// Returns the tensor of field `index` (the fast path of tensor fields).
TENSORDICT_API at::Tensor tc_read_tensor(
    const TensorDict& td, const ClassInfo& info, size_t index);
/// Returns the index of the field named `name`; throws KeyError.
TENSORDICT_API size_t
tc_field_index(const ClassInfo& info, std::string_view name);
/// Returns the field names in declaration order, the parents' first.
TENSORDICT_API std::vector<std::string> tc_field_names(const ClassInfo& info);
/// Renames the entry at `old_key` to `new_key` in place, as
/// `TensorDict::rename_key_`, after checking (before anything changes) that
/// both keys name fields and that the entry fits the field it moves to.
TENSORDICT_API void tc_rename_key(
    const TensorDict& td,
    const ClassInfo& info,
    const NestedKey& old_key,
    const NestedKey& new_key,
    bool safe);
/// Adds a memory-mapped tensor at `key`, as `TensorDict::make_memmap`,
/// after checking that a tensor may be stored there.
TENSORDICT_API at::Tensor tc_make_memmap(
    const TensorDict& td,
    const ClassInfo& info,
    const NestedKey& key,
    c10::IntArrayRef shape,
    c10::ScalarType dtype);

// Convert a stored entry to the field's C++ type; each throws TypeError
// naming the field when the entry holds something else.

/// Returns the entry as a tensor (numbers as 0-dim tensors).
TENSORDICT_API at::Tensor tc_as_tensor(
    const Value& value, const ClassInfo& info, size_t index);
/// Returns the entry as a dict (aliased).
TENSORDICT_API TensorDict
tc_as_tensordict(const Value& value, const ClassInfo& info, size_t index);
/// Returns the entry as a string.
TENSORDICT_API std::string tc_as_string(
    const Value& value, const ClassInfo& info, size_t index);
/// Returns the entry as a JSON value.
TENSORDICT_API Json
tc_as_json(const Value& value, const ClassInfo& info, size_t index);
/// Returns the entry as an integer.
TENSORDICT_API int64_t
tc_as_int(const Value& value, const ClassInfo& info, size_t index);
/// Returns the entry as a double.
TENSORDICT_API double tc_as_double(
    const Value& value, const ClassInfo& info, size_t index);
/// Returns the entry as a bool.
TENSORDICT_API bool tc_as_bool(
    const Value& value, const ClassInfo& info, size_t index);

/// Checks that `td` holds only fields of the class, of the right kinds.
TENSORDICT_API void tc_check(const TensorDict& td, const ClassInfo& info);
/// Returns Python's repr of a tensorclass in the form the print options
/// select (compact by default).
TENSORDICT_API std::string tc_repr(const TensorDict& td, const ClassInfo& info);
/// Returns Python's compact repr of a tensorclass:
/// `Name(batch_size=[4], fields={a: f32[3], b: None})`.
TENSORDICT_API std::string tc_repr_compact(
    const TensorDict& td, const ClassInfo& info);
/// Returns Python's detailed repr of a tensorclass.
TENSORDICT_API std::string tc_repr_detailed(
    const TensorDict& td, const ClassInfo& info);
/// Marks `td` and its TensorClass fields with their Python classes.
TENSORDICT_API void tc_mark_classes(
    const TensorDict& td, const ClassInfo& info);
/// Returns a shallow copy of `td` marked with the Python classes, to save.
TENSORDICT_API TensorDict
tc_marked_copy(const TensorDict& td, const ClassInfo& info);
/// Loads a memmap directory as the class (checks `_type` and the fields).
TENSORDICT_API TensorDict tc_load_memmap(
    const ClassInfo& info,
    const std::string& prefix,
    const LoadMemmapOptions& options);
/// Loads a memmap directory into an instance's dict in place, after checking
/// (from meta.json only) that it holds this class.
TENSORDICT_API void tc_load_memmap_into(
    const TensorDict& td,
    const ClassInfo& info,
    const std::string& prefix,
    const LoadMemmapOptions& options);
/// Loads a memmap directory into an instance's dict as
/// `TensorDict::load_memmap(prefix, out)`, after the same check.
TENSORDICT_API void tc_load_memmap_out(
    const TensorDict& td,
    const ClassInfo& info,
    const std::string& prefix,
    const LoadMemmapOptions& options);
/// Returns the nested dict at `key` of `td`, checked against the class (its
/// Python class marker and its fields), for `get_as`.
TENSORDICT_API TensorDict
tc_entry(const TensorDict& td, const ClassInfo& info, const NestedKey& key);
/// Returns the state dict of an instance (src/state_dict/tensor_class.cpp).
TENSORDICT_API StateDict tc_state_dict(
    const TensorDict& td,
    const ClassInfo& info,
    const StateDictOptions& options);
/// Writes the state dict of an instance into `destination` and returns it
/// (src/state_dict/tensor_class.cpp).
TENSORDICT_API StateDict& tc_state_dict_into(
    StateDict& destination,
    const TensorDict& td,
    const ClassInfo& info,
    const StateDictOptions& options);
/// Loads a state dict into an instance (src/state_dict/tensor_class.cpp).
TENSORDICT_API void tc_load_state_dict(
    const TensorDict& td,
    const ClassInfo& info,
    const StateDict& state_dict,
    const LoadStateDictOptions& options);
/// Checks every element of a lazy stack against the class (errors name the
/// element).
TENSORDICT_API void tc_check_lazy(
    const LazyStackedTensorDict& stack, const ClassInfo& info);
/// Saves a lazy stack of instances in Python's layout of `Cls.lazy_stack`.
TENSORDICT_API LazyStackedTensorDict tc_memmap_lazy(
    const LazyStackedTensorDict& stack,
    const ClassInfo& info,
    const MemmapOptions& options);
/// Marks a lazy stack of instances in place so that a save writes Python's
/// layout of `Cls.lazy_stack` (the class on the stack, none on the
/// elements, the classes of their TensorClass fields).
TENSORDICT_API void tc_mark_lazy(
    LazyStackedTensorDict& stack, const ClassInfo& info);
/// Returns a stack of shallow copies of the elements, marked as
/// `tc_mark_lazy` marks, to save.
TENSORDICT_API LazyStackedTensorDict
tc_marked_lazy_copy(const LazyStackedTensorDict& stack, const ClassInfo& info);
/// Loads a lazy stack of instances saved at `prefix` into `stack` in place
/// (`LazyStackedTensorDict::load_memmap_`), after checking from meta.json
/// that it holds this class.
TENSORDICT_API void tc_load_lazy_memmap_into(
    LazyStackedTensorDict& stack,
    const ClassInfo& info,
    const std::string& prefix,
    const LoadMemmapOptions& options);
/// Loads a lazy stack of instances (checks `_type` and every element).
TENSORDICT_API LazyStackedTensorDict tc_load_lazy_memmap(
    const ClassInfo& info,
    const std::string& prefix,
    const LoadMemmapOptions& options);
/// Records the Python class string of a class; throws ValueError unless it
/// reads `<class 'module.Name'>`.
TENSORDICT_API void tc_register(ClassInfo& info, std::string type_string);
/// Writes text to a stream (keeps <ostream> out of the headers).
TENSORDICT_API void tc_write(std::ostream& out, const std::string& text);

/// Converts a stored entry to what the getter of a field declared `T`
/// returns under `Flags`; throws like the `tc_as_*` it calls.
template <typename T, ClassFlags Flags>
read_type_t<T, Flags> tc_convert(
    const Value& value, const ClassInfo& info, size_t index) {
  constexpr FieldKind kind = FieldTraits<T>::kind;
  constexpr bool cast_numbers = !has_flag(Flags, ClassFlags::kAutocast) &&
                                !has_flag(Flags, ClassFlags::kNocast);
  if constexpr (kind == FieldKind::kTensor) {
    return tc_as_tensor(value, info, index);
  } else if constexpr (kind == FieldKind::kTensorDict) {
    return tc_as_tensordict(value, info, index);
  } else if constexpr (kind == FieldKind::kTensorClass) {
    return T(tc_as_tensordict(value, info, index), WrapTag{});
  } else if constexpr (kind == FieldKind::kString) {
    return tc_as_string(value, info, index);
  } else if constexpr (kind == FieldKind::kJson) {
    // json_fwd.hpp leaves Json incomplete here, and clang completes the
    // type a non-dependent call returns where the template is defined: an
    // argument that depends on T defers it to a Json field's read, whose
    // caller has the full header.
    return tc_as_json(value, info, std::conditional_t<true, size_t, T>(index));
  } else if constexpr (cast_numbers) {
    return tc_as_tensor(value, info, index);
  } else if constexpr (kind == FieldKind::kInt) {
    return tc_as_int(value, info, index);
  } else if constexpr (kind == FieldKind::kDouble) {
    return tc_as_double(value, info, index);
  } else {
    return tc_as_bool(value, info, index);
  }
}

/// Reads field `index` of `td` as the getter of a field declared `T`
/// returns under `Flags`: nullopt for an unset optional field; throws
/// ValueError for an unset required one, else like `tc_convert`.
template <typename T, ClassFlags Flags>
read_type_t<T, Flags> tc_read_field(
    const TensorDict& td, const ClassInfo& info, size_t index) {
  using Traits = FieldTraits<T>;
  if constexpr (Traits::optional) {
    const Value* value = tc_find(td, info, index);
    if (value == nullptr) {
      return std::nullopt;
    }
    return tc_convert<typename Traits::value_type, Flags>(*value, info, index);
  } else if constexpr (Traits::kind == FieldKind::kTensor) {
    return tc_read_tensor(td, info, index);
  } else {
    return tc_convert<T, Flags>(tc_get(td, info, index), info, index);
  }
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
