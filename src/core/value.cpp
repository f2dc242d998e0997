#include "tensordict/value.h"

#include <ATen/ops/scalar_tensor.h>
#include <c10/core/DefaultDtype.h>

#include <array>

#include "tensordict/json.h"
#include "util/python_spelling.h"
#include "util/shared_memory.h"

TENSORDICT_BEGIN_NAMESPACE

Value::Value(at::Tensor tensor) : value_(std::move(tensor)) {
  TORCH_CHECK_VALUE(
      std::get<at::Tensor>(value_).defined(),
      "a TensorDict entry cannot be an undefined tensor");
}
Value::Value(TensorDict td) : value_(std::move(td)) {}
Value::Value(NonTensorData data) : value_(std::move(data)) {}
Value::Value(NonTensorStack stack) : value_(std::move(stack)) {}
Value::Value(LazyStackedTensorDict stack) : value_(std::move(stack)) {}

void Value::throw_kind(const char* wanted) const {
  TORCH_CHECK_TYPE(false, "the entry is a ", type_name(), ", not a ", wanted);
  TORCH_INTERNAL_ASSERT(false);
}

const NonTensorData& Value::non_tensor_data() const {
  if (!is_non_tensor_data()) {
    throw_kind("NonTensorData");
  }
  return std::get<NonTensorData>(value_);
}

const NonTensorStack& Value::non_tensor_stack() const {
  if (!is_non_tensor_stack()) {
    throw_kind("NonTensorStack");
  }
  return std::get<NonTensorStack>(value_);
}

Json Value::non_tensor() const {
  if (is_non_tensor_data()) {
    return std::get<NonTensorData>(value_).data();
  }
  if (is_non_tensor_stack()) {
    return std::get<NonTensorStack>(value_).tolist();
  }
  throw_kind("NonTensorData or NonTensorStack");
}

std::vector<int64_t> Value::shape() const {
  switch (kind()) {
    case Kind::kTensor:
      return std::get<at::Tensor>(value_).sizes().vec();
    case Kind::kTensorDict:
      return std::get<TensorDict>(value_).batch_size().vec();
    case Kind::kNonTensorData:
      return std::get<NonTensorData>(value_).batch_size().vec();
    case Kind::kNonTensorStack:
      return std::get<NonTensorStack>(value_).batch_size().vec();
    case Kind::kLazyStack:
      return std::get<LazyStackedTensorDict>(value_).batch_size().vec();
  }
  return {};
}

const char* Value::type_name() const noexcept {
  // Python's class names, in Kind's order (the order of the variant).
  static constexpr std::array<const char*, 5> kNames = {
      "Tensor",
      "TensorDict",
      "NonTensorData",
      "NonTensorStack",
      "LazyStackedTensorDict"};
  static_assert(
      static_cast<size_t>(Kind::kLazyStack) + 1 == kNames.size(),
      "one name per Value::Kind");
  return kNames[static_cast<size_t>(kind())];
}

namespace detail {

at::Tensor number_to_tensor(double value) {
  return at::scalar_tensor(
      value, at::TensorOptions().dtype(c10::get_default_dtype()));
}

at::Tensor number_to_tensor(int64_t value) {
  return at::scalar_tensor(value, at::TensorOptions().dtype(at::kLong));
}

at::Tensor number_to_tensor(bool value) {
  return at::scalar_tensor(value, at::TensorOptions().dtype(at::kBool));
}

}  // namespace detail

// --- TensorDict's string overloads ------------------------------------------

// Out of line, so that setting a string needs no complete Json.
TensorDict& TensorDict::set_non_tensor_text(
    const NestedKey& key, detail::TextArg text) {
  return set(key, Value(NonTensorData(text, {}, std::nullopt)));
}

// --- Item --------------------------------------------------------------------

Item::Item(NestedKey key, at::Tensor value)
    : key_(std::move(key)),
      value_(std::make_shared<const Value>(std::move(value))) {}
Item::Item(NestedKey key, TensorDict value)
    : key_(std::move(key)),
      value_(std::make_shared<const Value>(std::move(value))) {}
Item::Item(NestedKey key, NonTensorData value)
    : key_(std::move(key)),
      value_(std::make_shared<const Value>(std::move(value))) {}
Item::Item(NestedKey key, NonTensorStack value)
    : key_(std::move(key)),
      value_(std::make_shared<const Value>(std::move(value))) {}
Item::Item(NestedKey key, LazyStackedTensorDict value)
    : key_(std::move(key)),
      value_(std::make_shared<const Value>(std::move(value))) {}
Item::Item(NestedKey key, std::initializer_list<Item> items)
    : key_(std::move(key)), children_(items) {}
Item::Item(NestedKey key, std::vector<Item> items)
    : key_(std::move(key)), children_(std::move(items)) {}
Item::Item(NestedKey key, const char* text)
    : Item(std::move(key), Json(text == nullptr ? Json() : Json(text))) {}
Item::Item(NestedKey key, std::string text)
    : Item(std::move(key), Json(std::move(text))) {}
Item::Item(NestedKey key, std::nullptr_t /*null*/)
    : Item(std::move(key), Json()) {}
Item::Item(NestedKey key, Json value)
    : Item(std::move(key), NonTensorData(std::move(value))) {}

TENSORDICT_END_NAMESPACE
