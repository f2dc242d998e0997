#pragma once

/// @file
/// LazyStackedTensorClass: a lazy stack of TensorClass instances, Python's
/// `Cls.lazy_stack(...)`. tensordict/tensor_class.h includes this header, so
/// code that includes that one has it too.

#include <c10/core/Device.h>
#include <c10/util/ArrayRef.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "tensordict/detail/tensor_class_impl.h"
#include "tensordict/detail/tensor_class_traits.h"
#include "tensordict/lazy_stack.h"
#include "tensordict/nested_key.h"
#include "tensordict/options.h"
#include "tensordict/tensor_dict.h"

namespace at::indexing {
struct TensorIndex;
}  // namespace at::indexing

TENSORDICT_BEGIN_NAMESPACE

/// A lazy stack of TensorClass instances: Python's `Cls.lazy_stack(...)`,
/// a tensorclass over a LazyStackedTensorDict. The elements keep their own
/// field shapes (their batch sizes must agree) and every read returns `TC`
/// or a lazy stack of `TC`. A cheap handle like LazyStackedTensorDict:
/// copies alias the stack, and the elements are aliased, not copied.
///
/// Differences from Python: fields are read with `get(name)` (stacked
/// tensors) or through `at(i)` / `elements()`, not as attributes; the
/// stack cannot grow or be written through (write into the elements).
///
/// Example:
/// ```
///   auto episodes = lazy_stack(std::vector<Step>{short_run, long_run});
///   Step second = episodes.at(1);       // aliased
///   episodes.get("reward");             // stacked, if the shapes agree
///   (void)episodes.memmap(MemmapOptions("/data/episodes"));
/// ```
template <typename TC>
class LazyStackedTensorClass {
  static_assert(
      is_tensor_class_v<TC>, "LazyStackedTensorClass needs a TensorClass");

 public:
  /// Stacks `items` (aliased) along batch dim `dim`; throws like
  /// `tensordict::lazy_stack`.
  explicit LazyStackedTensorClass(
      const std::vector<TC>& items,
      int64_t dim = 0,
      std::optional<std::string> stack_dim_name = std::nullopt)
      : stack_(tensordicts_of(items), dim, std::move(stack_dim_name)) {}

  /// Wraps an untyped lazy stack without copying; throws like
  /// `TC::from_tensordict`, naming the element, if one does not fit.
  [[nodiscard]] static LazyStackedTensorClass from_lazy_stack(
      LazyStackedTensorDict stack) {
    detail::tc_check_lazy(stack, TC::tensor_class_info());
    return LazyStackedTensorClass(std::move(stack));
  }
  /// Returns the untyped stack (aliased).
  const LazyStackedTensorDict& lazy_stacked_tensordict() const noexcept {
    return stack_;
  }
  /// Returns the elements (aliased), in stack order.
  [[nodiscard]] std::vector<TC> elements() const {
    std::vector<TC> out;
    out.reserve(stack_.tensordicts().size());
    for (const auto& td : stack_.tensordicts()) {
      out.push_back(TC::from_tensordict(td));
    }
    return out;
  }
  /// Returns the number of elements.
  size_t num_elements() const noexcept {
    return stack_.tensordicts().size();
  }
  /// Returns the batch dim along which the elements are stacked.
  int64_t stack_dim() const noexcept {
    return stack_.stack_dim();
  }
  /// Returns the batch size (the elements' with the stack dim inserted).
  c10::IntArrayRef batch_size() const& noexcept {
    return stack_.batch_size();
  }
  /// Returns the number of batch dims.
  int64_t batch_dims() const noexcept {
    return stack_.batch_dims();
  }
  /// Returns the device the elements share, or nullopt.
  std::optional<c10::Device> device() const noexcept {
    return stack_.device();
  }
  /// Returns the dim names, the stack dim's included.
  DimNames names() const {
    return stack_.names();
  }

  /// Returns element `index` along the stack dim (aliased); throws
  /// IndexError when out of range.
  [[nodiscard]] TC at(int64_t index) const {
    return TC::from_tensordict(stack_.at(index));
  }
  /// Indexes as `LazyStackedTensorDict::index`: one instance when an
  /// integer lands on the stack dim, else a lazy stack of instances.
  [[nodiscard]] std::variant<TC, LazyStackedTensorClass> index(
      c10::ArrayRef<at::indexing::TensorIndex> indices) const {
    auto result = stack_.index(indices);
    if (auto* td = std::get_if<TensorDict>(&result)) {
      return TC::from_tensordict(std::move(*td));
    }
    return LazyStackedTensorClass(
        std::get<LazyStackedTensorDict>(std::move(result)));
  }
  /// Returns the tensor field `name` of every element stacked along the
  /// stack dim (a new tensor). Throws KeyError for a name that is not a
  /// field, and what `LazyStackedTensorDict::get` throws (shapes that
  /// differ, an entry that is not a tensor).
  [[nodiscard]] at::Tensor get(std::string_view name) const {
    (void)detail::tc_field_index(TC::tensor_class_info(), name);
    return stack_.get(NestedKey(name));
  }
  /// Stacks the elements into one dense instance (new tensors); throws an
  /// error naming the field if its shapes differ.
  [[nodiscard]] TC contiguous() const {
    return TC::from_tensordict(stack_.contiguous());
  }

  /// Saves the stack as Python saves `Cls.lazy_stack(...)` (with a
  /// registered class: `meta.json` with `_type`, the lazy stack under
  /// `_tensordict/`, one directory per element) and returns it backed by
  /// the files. Python loads it as its class over a lazy stack. With no
  /// prefix, the tensors go to anonymous shared memory, as Python's
  /// `save()` (see `TensorClass::save`).
  LazyStackedTensorClass memmap(const MemmapOptions& options = {}) const {
    return LazyStackedTensorClass(
        detail::tc_memmap_lazy(stack_, TC::tensor_class_info(), options));
  }
  /// Same as `memmap` (Python's `save`).
  LazyStackedTensorClass save(const MemmapOptions& options = {}) const {
    return memmap(options);
  }
  /// Same as `memmap` (Python's `dumps`).
  LazyStackedTensorClass dumps(const MemmapOptions& options = {}) const {
    return memmap(options);
  }
  /// Writes the stack like `memmap`, then maps every element's tensors to
  /// the files in place and locks the elements, as Python's `memmap_`
  /// (see `LazyStackedTensorDict::memmap_`); the elements (aliased by the
  /// instances `at(i)` gave) now read the files. Throws as
  /// `TensorDict::memmap_`; on an error no element has changed.
  LazyStackedTensorClass& memmap_(const MemmapOptions& options = {}) {
    detail::tc_mark_lazy(stack_, TC::tensor_class_info());
    stack_.memmap_(options);
    return *this;
  }
  /// Writes the layout of `memmap` with zero-filled leaf files (shapes,
  /// dtypes and non-tensor fields, no tensor data) and returns the stack
  /// mapping them, as Python's `memmap_like`.
  [[nodiscard]] LazyStackedTensorClass memmap_like(
      const MemmapOptions& options = {}) const {
    return LazyStackedTensorClass(
        detail::tc_marked_lazy_copy(stack_, TC::tensor_class_info())
            .memmap_like(options));
  }
  /// Loads a lazy stack saved by `memmap` (or by Python) into this one in
  /// place, element by element, as Python's `load_` (see
  /// `LazyStackedTensorDict::load_memmap_`). Throws ValueError, before
  /// anything is loaded, if the directory holds another registered class,
  /// a dense instance, elements that do not fit the class, or another
  /// element count or stack dim.
  LazyStackedTensorClass& load_(
      const std::string& prefix, const LoadMemmapOptions& options = {}) {
    detail::tc_load_lazy_memmap_into(
        stack_, TC::tensor_class_info(), prefix, options);
    return *this;
  }
  /// Same as `load_` (Python's `load_memmap_`).
  LazyStackedTensorClass& load_memmap_(
      const std::string& prefix, const LoadMemmapOptions& options = {}) {
    return load_(prefix, options);
  }
  /// Re-reads the stack's own directory (see
  /// `LazyStackedTensorDict::memmap_refresh_`; Python refuses every lazy
  /// stack here); throws like it, and like `from_lazy_stack` if the files
  /// no longer fit the class.
  LazyStackedTensorClass& memmap_refresh_() {
    stack_.memmap_refresh_();
    detail::tc_check_lazy(stack_, TC::tensor_class_info());
    return *this;
  }
  /// Returns true if every element is memory-mapped.
  bool is_memmap() const {
    return stack_.is_memmap();
  }
  /// Returns the directory the stack was saved to or loaded from (see
  /// `LazyStackedTensorDict::saved_path`), or nullopt.
  std::optional<std::string> saved_path() const {
    return stack_.saved_path();
  }
  /// Loads a lazy stack of `TC` saved by `memmap` or by Python; throws
  /// ValueError if the tree holds another registered class or a dense
  /// instance (load that with `TC::load_memmap`), and like
  /// `from_lazy_stack` if an element does not fit.
  [[nodiscard]] static LazyStackedTensorClass load_memmap(
      const std::string& prefix, const LoadMemmapOptions& options = {}) {
    return LazyStackedTensorClass(
        detail::tc_load_lazy_memmap(TC::tensor_class_info(), prefix, options));
  }
  /// Same as `load_memmap` (Python's `load`).
  [[nodiscard]] static LazyStackedTensorClass load(
      const std::string& prefix, const LoadMemmapOptions& options = {}) {
    return load_memmap(prefix, options);
  }

 private:
  explicit LazyStackedTensorClass(LazyStackedTensorDict stack)
      : stack_(std::move(stack)) {}

  static std::vector<TensorDict> tensordicts_of(const std::vector<TC>& items) {
    std::vector<TensorDict> tds;
    tds.reserve(items.size());
    for (const auto& item : items) {
      tds.push_back(item.tensordict());
    }
    return tds;
  }

  LazyStackedTensorDict stack_;
};

/// Stacks instances lazily along batch dim `dim` (Python's
/// `Cls.lazy_stack`): the elements are aliased and may differ in field
/// shapes. Throws like `tensordict::lazy_stack`.
template <typename TC, std::enable_if_t<is_tensor_class_v<TC>, int> = 0>
[[nodiscard]] LazyStackedTensorClass<TC> lazy_stack(
    const std::vector<TC>& items,
    int64_t dim = 0,
    std::optional<std::string> stack_dim_name = std::nullopt) {
  return LazyStackedTensorClass<TC>(items, dim, std::move(stack_dim_name));
}

TENSORDICT_END_NAMESPACE
