// TorchRL's leaf and composite specs: shapes, dtypes, bounds, and the
// checks that keep a malformed action or observation out of an env.

#include "tensordict/rl/spec.h"

#include <ATen/Dispatch.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/all.h>
#include <ATen/ops/full.h>
#include <ATen/ops/one_hot.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <c10/util/MaybeOwned.h>

#include <array>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tensordict/errors.h"
#include "util/dims.h"
#include "util/python_spelling.h"
#include "util/tensor_bytes.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

namespace {

std::vector<int64_t> full_shape(
    const std::vector<int64_t>& batch, const std::vector<int64_t>& shape) {
  std::vector<int64_t> out = batch;
  out.insert(out.end(), shape.begin(), shape.end());
  return out;
}

std::string shape_string(c10::IntArrayRef shape) {
  return "[" +
         detail::join_spelled(
             shape, [](int64_t size) { return std::to_string(size); }) +
         "]";
}

// TorchRL's class names, in SpecKind's order.
constexpr std::array<const char*, 4> kSpecKindNames = {
    "Unbounded", "Bounded", "Categorical", "OneHot"};
static_assert(
    static_cast<size_t>(SpecKind::kOneHot) + 1 == kSpecKindNames.size(),
    "one name per SpecKind");

const char* kind_name(SpecKind kind) {
  const auto index = static_cast<size_t>(kind);
  return index < kSpecKindNames.size() ? kSpecKindNames[index] : "?";
}

constexpr const char* kOneHotRule =
    "every row along the last dim must hold exactly one 1, the rest 0";

// Whether `count` rows of two are all one-hot: one pass of compares and
// no branch, where the general walk below costs a few times more. A
// collector checks every step's action, and two actions (CartPole's, and
// many a control task's) are the common width.
template <typename T>
bool one_hot_pairs(const T* rows, int64_t count) {
  bool ok = true;
  for (int64_t row = 0; row < count; ++row) {
    const bool a_one = rows[2 * row] == T(1);
    const bool a_zero = rows[2 * row] == T(0);
    const bool b_one = rows[2 * row + 1] == T(1);
    const bool b_zero = rows[2 * row + 1] == T(0);
    ok = ok & ((a_one & b_zero) | (a_zero & b_one));
  }
  return ok;
}

// Why row `row` of `rows` [R, width] is not one-hot, or empty if it is.
template <typename T>
std::string not_one_hot(const T* rows, int64_t count, int64_t width) {
  if (width == 2 && one_hot_pairs(rows, count)) {
    return {};
  }
  for (int64_t row = 0; row < count; ++row) {
    const T* x = rows + row * width;
    int64_t ones = 0;
    bool binary = true;
    // Bitwise, not short-circuit: the rows are random draws, and a branch
    // on their values is mispredicted every other row.
    for (int64_t j = 0; j < width; ++j) {
      const bool one = x[j] == T(1);
      ones += one ? 1 : 0;
      binary = binary & ((x[j] == T(0)) | one);
    }
    if (!binary || ones != 1) {
      std::string values;
      for (int64_t j = 0; j < width; ++j) {
        std::ostringstream value;
        value << +x[j];
        values += (j == 0 ? "" : ", ") + value.str();
      }
      return "row " + std::to_string(row) + " is [" + values +
             "], which is not one-hot (" + kOneHotRule + ")";
    }
  }
  return {};
}

// Why `values` (`count` of them, the spec's `width` elements a row,
// row-major) are not inside [low, high] elementwise, naming the first that
// is not (NaN is never inside), or empty if they all are.
template <typename T>
std::string outside_bounds(
    const T* values,
    int64_t count,
    const T* low,
    const T* high,
    int64_t width) {
  if (width == 0) {
    return {};  // then there are no values either
  }
  for (int64_t i = 0; i < count; ++i) {
    const int64_t j = i % width;
    if (!(values[i] >= low[j] && values[i] <= high[j])) {
      std::ostringstream why;
      // All the digits: 1.0000001 must not print as its bound 1.
      why.precision(std::numeric_limits<T>::max_digits10);
      why << "values outside the Bounded spec's [low, high]: element " << i
          << " (row " << i / width << ", position " << j << ") is "
          << +values[i] << ", outside [" << +low[j] << ", " << +high[j] << "]";
      return why.str();
    }
  }
  return {};
}

// `t` itself, borrowed, when it is CPU and contiguous (the collector's
// case), else a CPU contiguous copy: the checks below read elements by
// pointer.
c10::MaybeOwned<at::Tensor> cpu_contiguous(const at::Tensor& t) {
  if (t.device().is_cpu() && t.is_contiguous()) {
    return c10::MaybeOwned<at::Tensor>::borrowed(t);
  }
  return c10::MaybeOwned<at::Tensor>::owned(t.to(c10::kCPU).contiguous());
}

std::string mismatch(
    const TensorSpec& spec,
    const at::Tensor& value,
    const std::vector<int64_t>& batch) {
  if (!value.defined()) {
    return "an undefined tensor";
  }
  // Compared in place: a collector checks every step's action.
  const c10::IntArrayRef sizes = value.sizes();
  const std::vector<int64_t>& trailing = spec.shape();
  const bool shape_fits =
      sizes.size() == batch.size() + trailing.size() &&
      detail::same_dims(sizes.data(), batch.data(), batch.size()) &&
      detail::same_dims(
          sizes.data() + batch.size(), trailing.data(), trailing.size());
  if (!spec.accepts(value.scalar_type()) || !shape_fits) {
    const std::vector<int64_t> shape = full_shape(batch, spec.shape());
    return "expected " + shape_string(shape) + " " +
           (spec.kind() == SpecKind::kOneHot
                ? std::string("(any integer, bool or floating dtype)")
                : std::string(c10::toString(spec.dtype()))) +
           ", got " + shape_string(value.sizes()) + " " +
           c10::toString(value.scalar_type());
  }
  switch (spec.kind()) {
    case SpecKind::kUnbounded:
      return {};
    case SpecKind::kBounded: {
      // Read in place (a CPU contiguous copy of anything else): a collector
      // checks every step's action, and four tensor ops and a sync cost far
      // more than a few compares.
      const c10::MaybeOwned<at::Tensor> values = cpu_contiguous(value);
      const c10::MaybeOwned<at::Tensor> low = cpu_contiguous(spec.low());
      const c10::MaybeOwned<at::Tensor> high = cpu_contiguous(spec.high());
      std::string why;
      AT_DISPATCH_ALL_TYPES_AND3(
          c10::kBool,
          c10::kHalf,
          c10::kBFloat16,
          values->scalar_type(),
          "bounded_check",
          [&] {
            why = outside_bounds(
                values->const_data_ptr<scalar_t>(),
                values->numel(),
                low->const_data_ptr<scalar_t>(),
                high->const_data_ptr<scalar_t>(),
                low->numel());
          });
      return why;
    }
    case SpecKind::kCategorical: {
      if (value.scalar_type() == c10::kBool) {
        return {};
      }
      const c10::MaybeOwned<at::Tensor> values = cpu_contiguous(value);
      bool inside = true;
      AT_DISPATCH_ALL_TYPES_AND2(
          c10::kHalf,
          c10::kBFloat16,
          values->scalar_type(),
          "categorical_check",
          [&] {
            const scalar_t* x = values->const_data_ptr<scalar_t>();
            const auto n = static_cast<double>(spec.n());
            for (int64_t i = 0; i < values->numel() && inside; ++i) {
              const auto v = static_cast<double>(x[i]);
              inside = v >= 0 && v < n;
            }
          });
      if (!inside) {
        return "values outside [0, " + std::to_string(spec.n()) +
               ") of the Categorical spec";
      }
      return {};
    }
    case SpecKind::kOneHot: {
      // The collector checks every step's action: rows are read in place
      // (a CPU contiguous copy of anything else) rather than through
      // tensor ops, and the first bad row is named.
      const int64_t width = value.dim() >= 1 ? value.size(-1) : 0;
      if (width == 0 || value.numel() == 0) {
        return {};
      }
      const c10::MaybeOwned<at::Tensor> rows = cpu_contiguous(value);
      std::string why;
      AT_DISPATCH_ALL_TYPES_AND3(
          c10::kBool,
          c10::kHalf,
          c10::kBFloat16,
          rows->scalar_type(),
          "one_hot_check",
          [&] {
            why = not_one_hot(
                detail::readable_data<scalar_t>(*rows),
                rows->numel() / width,
                width);
          });
      return why;
    }
  }
  return {};
}

}  // namespace

TensorSpec TensorSpec::unbounded(
    std::vector<int64_t> shape, c10::ScalarType dtype) {
  TensorSpec spec;
  spec.kind_ = SpecKind::kUnbounded;
  spec.shape_ = std::move(shape);
  spec.dtype_ = dtype;
  return spec;
}

TensorSpec TensorSpec::bounded(
    std::vector<int64_t> shape,
    c10::ScalarType dtype,
    at::Tensor low,
    at::Tensor high) {
  TORCH_CHECK_VALUE(
      low.defined() && high.defined(), "Bounded spec needs low and high");
  TensorSpec spec;
  spec.kind_ = SpecKind::kBounded;
  spec.shape_ = std::move(shape);
  spec.dtype_ = dtype;
  spec.low_ = low.to(dtype).expand(spec.shape_).contiguous();
  spec.high_ = high.to(dtype).expand(spec.shape_).contiguous();
  TORCH_CHECK_VALUE(
      spec.low_.le(spec.high_).all().item<bool>(),
      "Bounded spec needs low <= high everywhere, got low ",
      spec.low_,
      " and high ",
      spec.high_);
  return spec;
}

TensorSpec TensorSpec::categorical(
    int64_t n, std::vector<int64_t> shape, c10::ScalarType dtype) {
  TORCH_CHECK_VALUE(n >= 1, "Categorical spec needs n >= 1, got ", n);
  TensorSpec spec;
  spec.kind_ = SpecKind::kCategorical;
  spec.shape_ = std::move(shape);
  spec.dtype_ = dtype;
  spec.n_ = n;
  return spec;
}

TensorSpec TensorSpec::one_hot(int64_t n, c10::ScalarType dtype) {
  TORCH_CHECK_VALUE(n >= 1, "OneHot spec needs n >= 1, got ", n);
  TensorSpec spec;
  spec.kind_ = SpecKind::kOneHot;
  spec.shape_ = {n};
  spec.dtype_ = dtype;
  spec.n_ = n;
  return spec;
}

bool TensorSpec::accepts(c10::ScalarType dtype) const noexcept {
  if (kind_ == SpecKind::kOneHot) {
    return c10::isIntegralType(dtype, /*includeBool=*/true) ||
           c10::isFloatingType(dtype);
  }
  return dtype == dtype_;
}

at::Tensor TensorSpec::zero(const std::vector<int64_t>& batch) const {
  return at::zeros(full_shape(batch, shape_), at::TensorOptions(dtype_));
}

at::Tensor TensorSpec::rand(
    const std::vector<int64_t>& batch,
    std::optional<at::Generator> generator) const {
  const std::vector<int64_t> shape = full_shape(batch, shape_);
  switch (kind_) {
    case SpecKind::kOneHot: {
      std::vector<int64_t> index_shape = shape;
      index_shape.pop_back();
      const at::Tensor index = at::randint(n_, index_shape, generator);
      return at::one_hot(index, n_).to(dtype_);
    }
    case SpecKind::kCategorical:
      return at::randint(n_, shape, generator).to(dtype_);
    case SpecKind::kBounded: {
      if (c10::isFloatingType(dtype_)) {
        const at::Tensor u =
            at::rand(shape, generator, at::TensorOptions(c10::kDouble));
        return (low_.to(c10::kDouble) +
                u * (high_.to(c10::kDouble) - low_.to(c10::kDouble)))
            .to(dtype_);
      }
      const at::Tensor u =
          at::rand(shape, generator, at::TensorOptions(c10::kDouble));
      const at::Tensor span = (high_ - low_ + 1).to(c10::kDouble);
      return (low_.to(c10::kDouble) + (u * span).floor())
          .to(dtype_)
          .minimum(high_);
    }
    case SpecKind::kUnbounded:
      if (c10::isFloatingType(dtype_)) {
        return at::randn(shape, generator, at::TensorOptions(dtype_));
      }
      if (dtype_ == c10::kBool) {
        return at::randint(2, shape, generator).to(dtype_);
      }
      return at::randint(-100, 100, shape, generator).to(dtype_);
  }
  return zero(batch);
}

bool TensorSpec::is_in(
    const at::Tensor& value, const std::vector<int64_t>& batch) const {
  return mismatch(*this, value, batch).empty();
}

void TensorSpec::check(
    const at::Tensor& value,
    const std::vector<int64_t>& batch,
    const NestedKey& key) const {
  const std::string why = mismatch(*this, value, batch);
  TORCH_CHECK_VALUE(
      why.empty(),
      "value of key ",
      key.to_string(),
      " is not in its ",
      kind_name(kind_),
      " spec: ",
      why);
}

Composite& Composite::set(const NestedKey& key, TensorSpec spec) {
  for (auto& entry : entries_) {
    if (entry.first == key) {
      entry.second = std::move(spec);
      return *this;
    }
  }
  entries_.emplace_back(key, std::move(spec));
  return *this;
}

const TensorSpec& Composite::get(const NestedKey& key) const {
  const TensorSpec* spec = find(key);
  TENSORDICT_CHECK_KEY(
      spec != nullptr, "key ", key.to_string(), " not found in the Composite");
  return *spec;
}

const TensorSpec* Composite::find(const NestedKey& key) const noexcept {
  for (const auto& entry : entries_) {
    if (entry.first == key) {
      return &entry.second;
    }
  }
  return nullptr;
}

bool Composite::contains(const NestedKey& key) const noexcept {
  return find(key) != nullptr;
}

std::vector<NestedKey> Composite::keys() const {
  std::vector<NestedKey> out;
  out.reserve(entries_.size());
  for (const auto& entry : entries_) {
    out.push_back(entry.first);
  }
  return out;
}

TensorDict Composite::zero(const std::vector<int64_t>& batch) const {
  TensorDict out{c10::IntArrayRef(batch)};
  for (const auto& entry : entries_) {
    out.set(entry.first, entry.second.zero(batch));
  }
  return out;
}

void Composite::check(
    const TensorDict& td, const std::vector<int64_t>& batch) const {
  for (const auto& entry : entries_) {
    TENSORDICT_CHECK_KEY(
        td.contains(entry.first),
        "key ",
        entry.first.to_string(),
        " of the spec is missing from the dict");
    entry.second.check(td.get(entry.first), batch, entry.first);
  }
}

}  // namespace rl
TENSORDICT_END_NAMESPACE
