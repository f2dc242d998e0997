#pragma once

/// @file
/// Value, one entry of a TensorDict, and Item, one entry of a constructor
/// list.

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "tensordict/fwd.h"
#include "tensordict/nested_key.h"
#include "tensordict/non_tensor.h"
// Value holds a TensorDict by value, so it needs the complete class;
// tensor_dict.h includes this header after defining TensorDict.
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE

/// One entry of a TensorDict: a tensor, a nested TensorDict, a NonTensorData,
/// a NonTensorStack or a LazyStackedTensorDict. Copies are cheap (tensors,
/// dicts and stacks are handles).
///
/// Example:
/// ```
///   Value v = td["obs"];
///   if (v.is_tensor()) { v.tensor().sum(); }
/// ```
class TENSORDICT_API Value {
 public:
  /// The alternatives, in the order of Kind.
  using Variant = std::variant<
      at::Tensor,
      TensorDict,
      NonTensorData,
      NonTensorStack,
      LazyStackedTensorDict>;

  /// The kinds of entry, in the order of the alternatives.
  enum class Kind : uint8_t {
    kTensor,
    kTensorDict,
    kNonTensorData,
    kNonTensorStack,
    kLazyStack
  };

  /// Holds a tensor; throws ValueError if it is undefined.
  Value(at::Tensor tensor);  // NOLINT(google-explicit-constructor)
  /// Holds a nested dict (aliased).
  Value(TensorDict td);  // NOLINT(google-explicit-constructor)
  /// Holds non-tensor data.
  Value(NonTensorData data);  // NOLINT(google-explicit-constructor)
  /// Holds a non-tensor stack.
  Value(NonTensorStack stack);  // NOLINT(google-explicit-constructor)
  /// Holds a lazy stack of dicts (aliased).
  Value(LazyStackedTensorDict stack);  // NOLINT(google-explicit-constructor)

  /// Returns the kind of entry.
  Kind kind() const noexcept {
    return static_cast<Kind>(value_.index());
  }
  /// Returns true for a tensor.
  bool is_tensor() const noexcept {
    return kind() == Kind::kTensor;
  }
  /// Returns true for a nested dict.
  bool is_tensordict() const noexcept {
    return kind() == Kind::kTensorDict;
  }
  /// Returns true for NonTensorData or NonTensorStack.
  bool is_non_tensor() const noexcept {
    return kind() == Kind::kNonTensorData || kind() == Kind::kNonTensorStack;
  }
  /// Returns true for NonTensorData.
  bool is_non_tensor_data() const noexcept {
    return kind() == Kind::kNonTensorData;
  }
  /// Returns true for NonTensorStack.
  bool is_non_tensor_stack() const noexcept {
    return kind() == Kind::kNonTensorStack;
  }
  /// Returns true for a LazyStackedTensorDict.
  bool is_lazy_stack() const noexcept {
    return kind() == Kind::kLazyStack;
  }
  /// Returns true for a nested dict or a lazy stack of dicts: what Python
  /// calls a tensor collection.
  bool is_collection() const noexcept {
    return kind() == Kind::kTensorDict || kind() == Kind::kLazyStack;
  }

  /// Returns the tensor; throws TypeError for other kinds.
  const at::Tensor& tensor() const {
    // Inline: this is the hot path of every lookup.
    if (const at::Tensor* t = std::get_if<at::Tensor>(&value_)) {
      return *t;
    }
    throw_kind("Tensor");
  }
  /// Returns the nested dict; throws TypeError for other kinds.
  const TensorDict& tensordict() const {
    if (const TensorDict* td = std::get_if<TensorDict>(&value_)) {
      return *td;
    }
    throw_kind("TensorDict");
  }
  /// Returns the lazy stack; throws TypeError for other kinds.
  const LazyStackedTensorDict& lazy_stack() const {
    if (const auto* stack = std::get_if<LazyStackedTensorDict>(&value_)) {
      return *stack;
    }
    throw_kind("LazyStackedTensorDict");
  }
  /// Returns the NonTensorData; throws TypeError for other kinds.
  const NonTensorData& non_tensor_data() const;
  /// Returns the NonTensorStack; throws TypeError for other kinds.
  const NonTensorStack& non_tensor_stack() const;
  /// Returns the JSON data of a non-tensor entry (nested lists for a
  /// stack); throws TypeError for tensors and dicts.
  Json non_tensor() const;

  /// Returns the batch-dim shape of this entry: the full shape of a tensor,
  /// the batch size of the others.
  std::vector<int64_t> shape() const;
  /// Returns the kind's Python class name ("Tensor", "TensorDict", ...).
  const char* type_name() const noexcept;

  /// Returns the variant; not API.
  const Variant& variant() const noexcept {
    return value_;
  }
  /// Replaces the tensor this value holds with `tensor` (defined), a handle
  /// swap without the variant's assignment; throws TypeError for other
  /// kinds. Not API: dicts hand out their values as const, and core's
  /// in-place refills (src/core/entries.cpp) use it on their own nodes.
  void replace_tensor(const at::Tensor& tensor) {
    if (at::Tensor* t = std::get_if<at::Tensor>(&value_)) {
      TORCH_INTERNAL_ASSERT_DEBUG_ONLY(tensor.defined());
      *t = tensor;
      return;
    }
    throw_kind("Tensor");
  }

 private:
  [[noreturn]] void throw_kind(const char* wanted) const;

  Variant value_;
};

namespace detail {
/// Makes the 0-dim tensor of a C++ number as Python does for its numbers.
TENSORDICT_API at::Tensor number_to_tensor(double value);
TENSORDICT_API at::Tensor number_to_tensor(int64_t value);
TENSORDICT_API at::Tensor number_to_tensor(bool value);
}  // namespace detail

/// One key/value pair of a TensorDict literal. The value may be any entry
/// kind, a nested brace list of Items (a nested dict of the same batch size),
/// a number (a 0-dim tensor: int64, float32 or bool, as in Python), or a
/// string or JSON value (non-tensor data). Strings, numbers and null need
/// no JSON header; a `Json` value needs `<tensordict/json.h>`.
///
/// Example:
/// ```
///   TensorDict td({{"x", torch::ones({2})},
///                  {"meta", {{"step", 3}, {"name", "run-1"}}}});
/// ```
class TENSORDICT_API Item {
 public:
  /// Pairs `key` with a tensor.
  Item(NestedKey key, at::Tensor value);
  /// Pairs `key` with a nested dict.
  Item(NestedKey key, TensorDict value);
  /// Pairs `key` with non-tensor data.
  Item(NestedKey key, NonTensorData value);
  /// Pairs `key` with a non-tensor stack.
  Item(NestedKey key, NonTensorStack value);
  /// Pairs `key` with a lazy stack of dicts.
  Item(NestedKey key, LazyStackedTensorDict value);
  /// Pairs `key` with a nested dict built from `items`.
  Item(NestedKey key, std::initializer_list<Item> items);
  /// Pairs `key` with a nested dict built from `items`.
  Item(NestedKey key, std::vector<Item> items);
  /// Pairs `key` with a string (non-tensor data).
  Item(NestedKey key, const char* text);
  /// Pairs `key` with a string (non-tensor data).
  Item(NestedKey key, std::string text);
  /// Pairs `key` with a JSON null (non-tensor data).
  Item(NestedKey key, std::nullptr_t null);
  /// Pairs `key` with a JSON value (non-tensor data); the caller needs
  /// `<tensordict/json.h>` to build one.
  Item(NestedKey key, Json value);
  /// Pairs `key` with a number, stored as a 0-dim tensor.
  template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Item(NestedKey key, T number) : Item(std::move(key), number_tensor(number)) {}

  /// Returns the key.
  const NestedKey& key() const noexcept {
    return key_;
  }
  /// Returns the value, or null for a nested item list.
  const Value* value() const noexcept {
    return value_.get();
  }
  /// Returns the nested items (empty unless `value()` is null).
  const std::vector<Item>& children() const noexcept {
    return children_;
  }

 private:
  template <typename T>
  static at::Tensor number_tensor(T number) {
    if constexpr (std::is_same_v<T, bool>) {
      return detail::number_to_tensor(number);
    } else if constexpr (std::is_integral_v<T>) {
      return detail::number_to_tensor(static_cast<int64_t>(number));
    } else {
      return detail::number_to_tensor(static_cast<double>(number));
    }
  }

  NestedKey key_;
  std::shared_ptr<const Value> value_;
  std::vector<Item> children_;
};

TENSORDICT_END_NAMESPACE
