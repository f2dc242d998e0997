#pragma once

// The root of every TensorClass, below the TensorClass template
// (tensordict/tensor_class.h): the TensorDict handle and the members that
// only read it. Not API on its own: include tensordict/tensor_class.h.

#include <c10/core/Device.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensordict/detail/tensor_class_traits.h"
#include "tensordict/options.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE

namespace detail {

/// The root of every TensorClass: the TensorDict handle.
class TENSORDICT_API TensorClassBase : public TensorClassRoot {
 public:
  /// Returns the dict that holds the fields (aliased: Python's
  /// `_tensordict`).
  const TensorDict& tensordict() const& noexcept {
    return td_;
  }
  /// Returns the dict of a temporary.
  TensorDict tensordict() && noexcept {
    return std::move(td_);
  }
  /// Returns the batch size (a view into the dict).
  c10::IntArrayRef batch_size() const& noexcept {
    return td_.batch_size();
  }
  /// Returns the batch size of a temporary by value.
  std::vector<int64_t> batch_size() const&& {
    return td_.batch_size().vec();
  }
  /// Same as `batch_size()`.
  c10::IntArrayRef shape() const& noexcept {
    return td_.batch_size();
  }
  /// Same as `batch_size()`, by value.
  std::vector<int64_t> shape() const&& {
    return td_.batch_size().vec();
  }
  /// Returns the number of batch dims.
  int64_t batch_dims() const noexcept {
    return td_.batch_dims();
  }
  /// Same as `batch_dims()`.
  int64_t ndim() const noexcept {
    return td_.batch_dims();
  }
  /// Same as `batch_dims()` (Python's `dim()`).
  int64_t dim() const noexcept {
    return td_.batch_dims();
  }
  /// Returns the number of batch elements.
  int64_t numel() const noexcept {
    return td_.numel();
  }
  /// Returns the device, or nullopt.
  std::optional<c10::Device> device() const noexcept {
    return td_.device();
  }
  /// Returns the dim names (empty when none).
  DimNames names() const {
    return td_.names();
  }
  /// Returns true if the dict is locked (always for frozen classes).
  bool is_locked() const noexcept {
    return td_.is_locked();
  }
  /// Returns true if the dict is marked shared.
  bool is_shared() const noexcept {
    return td_.is_shared();
  }
  /// Returns true if the dict is memory-mapped.
  bool is_memmap() const noexcept {
    return td_.is_memmap();
  }
  /// Returns the directory the instance was saved to or loaded from.
  std::optional<std::string> saved_path() const {
    return td_.saved_path();
  }
  /// Returns true if every element of every tensor is true.
  bool all() const {
    return td_.all();
  }
  /// Returns true if any element of any tensor is true.
  bool any() const {
    return td_.any();
  }
  /// Returns true if both instances share one dict.
  bool is_same(const TensorClassBase& other) const noexcept {
    return td_.is_same(other.td_);
  }

 protected:
  TensorClassBase() = default;
  TensorClassBase(TensorDict td, WrapTag) : td_(std::move(td)) {}

  TensorDict td_;
};

/// Passes an instance given to a generated forwarder as its dict, anything
/// else as it is; not API.
template <typename T>
decltype(auto) tc_unwrap(T&& value) {
  if constexpr (std::is_base_of_v<TensorClassBase, std::decay_t<T>>) {
    return std::forward<T>(value).tensordict();
  } else {
    return std::forward<T>(value);
  }
}

}  // namespace detail

TENSORDICT_END_NAMESPACE
