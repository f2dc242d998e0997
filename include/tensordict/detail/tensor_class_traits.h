#pragma once

// The compile-time side of TensorClass: its flags, the traits of each field
// type and the run-time class description the macros build. Include
// tensordict/tensor_class.h, not this header; only ClassFlags, has_flag and
// is_tensor_class_v are API.

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tensordict/detail/tensor_class_ops.h"
#include "tensordict/fwd.h"

TENSORDICT_BEGIN_NAMESPACE

class FieldArg;  // tensordict/tensor_class.h

/// The class flags of a TensorClass, Python's `@tensorclass(frozen=...,
/// ...)`; combine them with `|`. `kInherit` (the default) takes the parent's.
///
/// Example: `struct A : TensorClass<A, ClassFlags::kFrozen |
/// ClassFlags::kShadow>`
enum class ClassFlags : uint8_t {
  kNone = 0,
  kFrozen = 1,
  kTensorOnly = 2,
  kAutocast = 4,
  kNocast = 8,
  kShadow = 16,
  kInherit = 128,
};

/// Returns the union of two flag sets.
constexpr ClassFlags operator|(ClassFlags a, ClassFlags b) noexcept {
  return static_cast<ClassFlags>(
      static_cast<uint8_t>(a) | static_cast<uint8_t>(b));
}

/// Returns true if `flags` holds `flag`.
constexpr bool has_flag(ClassFlags flags, ClassFlags flag) noexcept {
  return (static_cast<uint8_t>(flags) & static_cast<uint8_t>(flag)) != 0;
}

namespace detail {

/// Marks every TensorClass; not API.
struct TensorClassRoot {};

/// Selects the constructor that wraps an existing dict; not API.
struct WrapTag {};

/// False for every `T`, for a static_assert in a template; not API.
template <typename T>
inline constexpr bool kAlwaysFalse = false;

/// The kinds of field; not API.
enum class FieldKind : uint8_t {
  kTensor,
  kTensorDict,
  kTensorClass,
  kString,
  kInt,
  kDouble,
  kBool,
  kJson,
};

struct ClassInfo;

/// One field of a class description; not API.
struct FieldInfo {
  std::string name;
  FieldKind kind;
  bool optional;
  // The class of a TensorClass field, else null.
  const ClassInfo* nested;
  // Makes the declared default (`(type, name, default)`), else null.
  FieldArg (*make_default)() = nullptr;
};

/// The run-time description of a TensorClass; not API.
struct ClassInfo {
  std::string name;
  ClassFlags flags;
  std::vector<FieldInfo> fields;
  // The registered `_type` of the Python class; empty = none.
  std::string python_class;
};

/// How a field declared `T` is stored: its kind, whether it may be unset,
/// and whether kTensorOnly allows it; not API.
template <typename T, typename = void>
struct FieldTraits {
  static_assert(
      kAlwaysFalse<T>,
      "unsupported TensorClass field type: use at::Tensor, TensorDict, a "
      "TensorClass, std::string, int64_t, double, bool, Json, or a "
      "std::optional of one");
};

/// The members every FieldTraits specialization shares; not API.
template <FieldKind K, bool TensorLike>
struct FieldTraitsBase {
  static constexpr FieldKind kind = K;
  static constexpr bool optional = false;
  static constexpr bool tensor_like = TensorLike;
};

template <>
struct FieldTraits<at::Tensor> : FieldTraitsBase<FieldKind::kTensor, true> {
  using value_type = at::Tensor;
};
template <>
struct FieldTraits<TensorDict> : FieldTraitsBase<FieldKind::kTensorDict, true> {
  using value_type = TensorDict;
};
template <>
struct FieldTraits<std::string> : FieldTraitsBase<FieldKind::kString, false> {
  using value_type = std::string;
};
template <>
struct FieldTraits<int64_t> : FieldTraitsBase<FieldKind::kInt, false> {
  using value_type = int64_t;
};
template <>
struct FieldTraits<double> : FieldTraitsBase<FieldKind::kDouble, false> {
  using value_type = double;
};
template <>
struct FieldTraits<bool> : FieldTraitsBase<FieldKind::kBool, false> {
  using value_type = bool;
};
template <>
struct FieldTraits<Json> : FieldTraitsBase<FieldKind::kJson, false> {
  using value_type = Json;
};
template <typename T>
struct FieldTraits<T, std::enable_if_t<std::is_base_of_v<TensorClassRoot, T>>>
    : FieldTraitsBase<FieldKind::kTensorClass, true> {
  using value_type = T;
};
template <typename T>
struct FieldTraits<std::optional<T>> : FieldTraits<T> {
  static constexpr bool optional = true;
};

/// The type a getter returns for a field declared `T` under `Flags`.
template <typename T, ClassFlags Flags>
struct ReadType {
  using type = std::conditional_t<
      (FieldTraits<T>::kind == FieldKind::kInt ||
       FieldTraits<T>::kind == FieldKind::kDouble ||
       FieldTraits<T>::kind == FieldKind::kBool) &&
          !has_flag(Flags, ClassFlags::kAutocast) &&
          !has_flag(Flags, ClassFlags::kNocast),
      at::Tensor,
      T>;
};
template <typename T, ClassFlags Flags>
struct ReadType<std::optional<T>, Flags> {
  using type = std::optional<typename ReadType<T, Flags>::type>;
};
template <typename T, ClassFlags Flags>
using read_type_t = typename ReadType<T, Flags>::type;

/// Keeps a setter's parameter out of template argument deduction.
template <typename T>
struct TypeIdentity {
  using type = T;
};

/// The names a field may only take with kShadow: every member of
/// TensorClass and the members of Python's TensorDict, from the one list
/// in tensordict/detail/tensor_class_ops.h.
inline constexpr std::string_view kReservedFieldNames[] = {
    TENSORDICT_TENSORCLASS_OPS(TENSORDICT_DETAIL_TC_NAMES)};

/// The names of TensorClass's C++ members: the list without its PYTHON
/// entries (what tests compare with TensorDict's ops).
inline constexpr std::string_view kTensorClassMemberNames[] = {
    TENSORDICT_TENSORCLASS_OPS(TENSORDICT_DETAIL_TC_MEMBERS)};

/// The operators TensorClass generates ("operator+=", ...).
inline constexpr std::string_view kTensorClassOperatorNames[] = {
    TENSORDICT_DETAIL_TC_OPERATORS(
        TENSORDICT_DETAIL_TC_OPERATOR_NAME_CMP,
        TENSORDICT_DETAIL_TC_OPERATOR_NAME_ARITH)};

/// Returns true for the names a field may only take with kShadow.
constexpr bool is_reserved_field_name(std::string_view name) noexcept {
  for (std::string_view reserved : kReservedFieldNames) {
    if (reserved == name) {
      return true;
    }
  }
  return false;
}

/// Resolves a class's flags from its own and its parent's.
template <ClassFlags Own, typename Parent>
constexpr ClassFlags resolve_flags() noexcept {
  if constexpr (std::is_void_v<Parent>) {
    return Own == ClassFlags::kInherit ? ClassFlags::kNone : Own;
  } else if constexpr (Own == ClassFlags::kInherit) {
    return Parent::kFlags;
  } else {
    return Own | Parent::kFlags;
  }
}

}  // namespace detail

/// Returns true if `T` is a TensorClass.
template <typename T>
inline constexpr bool is_tensor_class_v =
    std::is_base_of_v<detail::TensorClassRoot, T>;

TENSORDICT_END_NAMESPACE
