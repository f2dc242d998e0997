#pragma once

// The bodies of TensorDict's inline and template members (not API: include
// tensordict/tensor_dict.h, which includes this at its end). Here so that
// the class reads as its declarations and their comments, as abseil's
// *-inl.h files keep bodies out of the class.

#include <c10/core/Device.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/FunctionRef.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensordict/nested_key.h"
#include "tensordict/options.h"
#include "tensordict/tensor_dict.h"
#include "tensordict/value.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// The compiled form of `TensorDict::apply` and `named_apply` over tensors
/// (src/tensor_dict/apply.cpp): `fn(key, leaves)` gets the nested key and
/// one leaf from `td` then each of `others`. Throws ValueError with
/// `options.call_on_nested()`.
[[nodiscard]] TENSORDICT_API TensorDict apply_impl(
    const TensorDict& td,
    c10::function_ref<at::Tensor(const NestedKey&, c10::ArrayRef<at::Tensor>)>
        fn,
    c10::ArrayRef<TensorDict> others,
    const ApplyOptions& options);
/// The compiled form of `TensorDict::apply` and `named_apply` over entries:
/// `fn(key, values)` gets the nested key and one entry from `td` then each
/// of `others` (a missing key gives `options.default_value()` or throws
/// KeyError).
[[nodiscard]] TENSORDICT_API TensorDict apply_entries_impl(
    const TensorDict& td,
    c10::function_ref<
        std::optional<Value>(const NestedKey&, c10::ArrayRef<Value>)> fn,
    c10::ArrayRef<TensorDict> others,
    const ApplyOptions& options);
/// The compiled form of `TensorDict::apply_`.
TENSORDICT_API void apply_inplace_impl(
    TensorDict& td,
    c10::function_ref<at::Tensor(const NestedKey&, c10::ArrayRef<at::Tensor>)>
        fn);

}  // namespace detail

inline bool TensorDict::is_same(const TensorDict& other) const noexcept {
  return impl_ == other.impl_;
}

inline c10::IntArrayRef TensorDict::shape() const& noexcept {
  return batch_size();
}
inline std::vector<int64_t> TensorDict::shape() const&& {
  return std::move(*this).batch_size();
}

inline int64_t TensorDict::ndim() const noexcept {
  return batch_dims();
}
inline int64_t TensorDict::dim() const noexcept {
  return batch_dims();
}

inline TensorDict TensorDict::to(
    c10::DeviceType type, bool non_blocking) const {
  return to(c10::Device(type), non_blocking);
}

inline TensorDict TensorDict::to(const char* device, bool non_blocking) const {
  return to(c10::Device(std::string(device)), non_blocking);
}

template <typename Fn>
TensorDict TensorDict::apply(Fn&& fn, const ApplyOptions& options) const {
  if constexpr (std::is_convertible_v<
                    std::invoke_result_t<Fn&, const at::Tensor&>,
                    at::Tensor>) {
    return detail::apply_impl(
        *this,
        [&](const NestedKey&, c10::ArrayRef<at::Tensor> leaves) {
          return fn(leaves[0]);
        },
        {},
        options);
  } else {
    return detail::apply_entries_impl(
        *this,
        [&](const NestedKey&, const auto& values) {
          return std::optional<Value>(fn(values[0]));
        },
        {},
        options);
  }
}

template <typename Fn>
TensorDict TensorDict::apply(
    Fn&& fn, const TensorDict& other, const ApplyOptions& options) const {
  if constexpr (
      std::is_convertible_v<
          std::invoke_result_t<Fn&, const at::Tensor&, const at::Tensor&>,
          at::Tensor>) {
    return detail::apply_impl(
        *this,
        [&](const NestedKey&, c10::ArrayRef<at::Tensor> leaves) {
          return fn(leaves[0], leaves[1]);
        },
        other,
        options);
  } else {
    return detail::apply_entries_impl(
        *this,
        [&](const NestedKey&, const auto& values) {
          return std::optional<Value>(fn(values[0], values[1]));
        },
        other,
        options);
  }
}

template <typename Fn>
TensorDict TensorDict::named_apply(Fn&& fn, const ApplyOptions& options) const {
  if constexpr (
      std::is_convertible_v<
          std::invoke_result_t<Fn&, const NestedKey&, const at::Tensor&>,
          at::Tensor>) {
    return detail::apply_impl(
        *this,
        [&](const NestedKey& key, c10::ArrayRef<at::Tensor> leaves) {
          return fn(key, leaves[0]);
        },
        {},
        options);
  } else {
    return detail::apply_entries_impl(
        *this,
        [&](const NestedKey& key, const auto& values) {
          return std::optional<Value>(fn(key, values[0]));
        },
        {},
        options);
  }
}

template <typename Fn>
TensorDict& TensorDict::apply_(Fn&& fn) {
  detail::apply_inplace_impl(
      *this, [&](const NestedKey&, c10::ArrayRef<at::Tensor> leaves) {
        return fn(leaves[0]);
      });
  return *this;
}

TENSORDICT_END_NAMESPACE
