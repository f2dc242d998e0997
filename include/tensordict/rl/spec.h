#pragma once

/// @file
/// TorchRL's specs for C++ envs: leaf specs (`TensorSpec`: Unbounded,
/// Bounded, Categorical, OneHot) and `Composite`. Part of <tensordict/rl.h>.

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "tensordict/export.h"
#include "tensordict/nested_key.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
/// C++ actors for TorchRL: specs, batched environments, the collector.
namespace rl {

/// The kinds of TorchRL's leaf specs (torchrl.data's class names).
enum class SpecKind {
  /// `Unbounded`: any value of the dtype.
  kUnbounded,
  /// `Bounded`: low <= value <= high, element-wise.
  kBounded,
  /// `Categorical`: an index in [0, n) (or a bool flag, n = 2).
  kCategorical,
  /// `OneHot`: the last dim has n entries, exactly one of them set.
  kOneHot,
};

/// A leaf spec: what one entry of an env's dicts holds, without the env's
/// batch dims (TorchRL's specs of a batched env include them; these do
/// not, and `shape()` is the per-sub-env shape).
///
/// Example: `TensorSpec::one_hot(2)` is CartPole's action spec.
class TENSORDICT_API TensorSpec {
 public:
  /// Returns an `Unbounded` spec.
  static TensorSpec unbounded(
      std::vector<int64_t> shape, c10::ScalarType dtype = c10::kFloat);
  /// Returns a `Bounded` spec with element-wise bounds `low` and `high`
  /// (of `shape`, broadcast if scalar). Throws ValueError if low > high.
  static TensorSpec bounded(
      std::vector<int64_t> shape,
      c10::ScalarType dtype,
      at::Tensor low,
      at::Tensor high);
  /// Returns a `Categorical` spec of `n` values.
  static TensorSpec categorical(
      int64_t n,
      std::vector<int64_t> shape = {},
      c10::ScalarType dtype = c10::kLong);
  /// Returns a `OneHot` spec of `n` values: shape [n].
  static TensorSpec one_hot(int64_t n, c10::ScalarType dtype = c10::kLong);

  /// Returns the kind of spec.
  SpecKind kind() const noexcept {
    return kind_;
  }
  /// Returns the shape of one sub-env's value.
  const std::vector<int64_t>& shape() const noexcept {
    return shape_;
  }
  /// Returns the dtype.
  c10::ScalarType dtype() const noexcept {
    return dtype_;
  }
  /// Returns the lower bound (a `Bounded` spec's), or an undefined tensor.
  const at::Tensor& low() const noexcept {
    return low_;
  }
  /// Returns the upper bound (a `Bounded` spec's), or an undefined tensor.
  const at::Tensor& high() const noexcept {
    return high_;
  }
  /// Returns true if a value of `dtype` can be in the spec: its own dtype,
  /// or for a `OneHot` spec any integer, bool or floating dtype (torch's
  /// `OneHotCategorical` samples float one-hots; TorchRL takes them).
  bool accepts(c10::ScalarType dtype) const noexcept;
  /// Returns the number of values of a categorical or one-hot spec, or 0.
  int64_t n() const noexcept {
    return n_;
  }

  /// Returns zeros of shape `batch + shape()` (TorchRL's `spec.zero()`).
  at::Tensor zero(const std::vector<int64_t>& batch) const;
  /// Returns a uniform random value of shape `batch + shape()` (TorchRL's
  /// `spec.rand()`); unbounded float specs draw from a standard normal.
  at::Tensor rand(
      const std::vector<int64_t>& batch,
      std::optional<at::Generator> generator = std::nullopt) const;
  /// Returns true if `value` has shape `batch + shape()`, a dtype the spec
  /// `accepts`, and values the spec allows (TorchRL's `spec.is_in`; a
  /// one-hot row must hold exactly one 1 and zeros, where TorchRL would
  /// take the argmax of anything).
  bool is_in(const at::Tensor& value, const std::vector<int64_t>& batch) const;
  /// Throws ValueError if `value` is not in the spec, saying what was
  /// expected, what was found and naming `key` (and, for a one-hot value,
  /// the first row that is not one-hot).
  void check(
      const at::Tensor& value,
      const std::vector<int64_t>& batch,
      const NestedKey& key) const;

 private:
  TensorSpec() = default;
  SpecKind kind_ = SpecKind::kUnbounded;
  std::vector<int64_t> shape_;
  c10::ScalarType dtype_ = c10::kFloat;
  at::Tensor low_;
  at::Tensor high_;
  int64_t n_ = 0;
};

/// A composite spec (TorchRL's `Composite`): leaf specs by key, in order.
///
/// Example: `Composite().set("observation", TensorSpec::unbounded({4}))`
class TENSORDICT_API Composite {
 public:
  /// Makes an empty composite.
  Composite() = default;
  /// Adds or replaces the spec of `key`; returns this composite.
  Composite& set(const NestedKey& key, TensorSpec spec);
  /// Returns the spec of `key`, or throws KeyError naming it.
  const TensorSpec& get(const NestedKey& key) const;
  /// Returns the spec of `key`, or null.
  const TensorSpec* find(const NestedKey& key) const noexcept;
  /// Returns true if `key` has a spec.
  bool contains(const NestedKey& key) const noexcept;
  /// Returns the keys, in the order they were set.
  std::vector<NestedKey> keys() const;
  /// Returns the (key, spec) entries, in the order they were set: what
  /// per-step checks iterate without copying the keys.
  const std::vector<std::pair<NestedKey, TensorSpec>>& entries()
      const noexcept {
    return entries_;
  }
  /// Returns the number of leaf specs.
  size_t size() const noexcept {
    return entries_.size();
  }
  /// Returns a dict of batch size `batch` with every leaf's `zero(batch)`.
  [[nodiscard]] TensorDict zero(const std::vector<int64_t>& batch) const;
  /// Throws ValueError (KeyError for a missing key) unless every leaf of
  /// the spec is in `td` and in its spec, for batch size `batch`.
  void check(const TensorDict& td, const std::vector<int64_t>& batch) const;

 private:
  std::vector<std::pair<NestedKey, TensorSpec>> entries_;
};

}  // namespace rl
TENSORDICT_END_NAMESPACE
