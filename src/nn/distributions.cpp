// The distributions of tensordict/distributions.h. Each formula follows the
// op order of torch.distributions (torch 2.13) or TorchRL 0.14.1, so that
// results match Python's to rounding, and sampling calls the same at:: ops
// in the same order, so that a seeded generator gives Python's samples.
//
// NOTE [Loops for small CPU parameters]
// A policy acting in an env evaluates a categorical head on a few rows a
// step, where each at:: op costs a dispatcher round trip (the multinomial
// alone runs a dozen ops to validate its input). Where the parameters are
// contiguous CPU floats and no autograd graph is recorded, the
// normalization, the draw's validation and arg-max, the one-hot and the
// log-prob of an index are plain loops instead. The draw keeps torch's
// algorithm and its one generator call (Exp(1) noise from `exponential_`,
// then argmax p / q, the first maximum winning), so a seeded generator still
// gives torch's samples; exp and log may round differently from torch's
// vectorized kernels in the last bit. A TanhNormal head gets loops too
// (NOTE [A TanhNormal head without its distribution]).

#include "tensordict/distributions.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/tanh_cpu_dispatch.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nn/categorical_draw.h"
#include "nn/tanh_normal_draw.h"
#include "util/dims.h"
#include "util/tensor_bytes.h"

TENSORDICT_BEGIN_NAMESPACE
namespace nn {
namespace {

std::string shape_string(c10::IntArrayRef shape) {
  std::ostringstream out;
  out << "torch.Size([";
  for (size_t i = 0; i < shape.size(); ++i) {
    out << (i > 0 ? ", " : "") << shape[i];
  }
  out << "])";
  return out.str();
}

void check_floating(const at::Tensor& t, const char* dist, const char* arg) {
  TORCH_CHECK_VALUE(
      t.defined(), dist, ": the parameter '", arg, "' is not defined");
  TORCH_CHECK_VALUE(
      at::isFloatingType(t.scalar_type()),
      dist,
      ": expected the parameter '",
      arg,
      "' to be a floating point tensor, got ",
      t.scalar_type());
}

// torch.distributions validates its parameters (constraints.real rejects
// NaN): without it a NaN would sample garbage silently.
void check_not_nan(const at::Tensor& t, const char* dist, const char* arg) {
  TORCH_CHECK_VALUE(
      !at::isnan(t).any().item<bool>(),
      "Expected parameter ",
      arg,
      " of distribution ",
      dist,
      " to satisfy the constraint Real(), but found NaN values");
}

// Python's `_sum_rightmost`: sums the last `dims` dims.
at::Tensor sum_rightmost(const at::Tensor& value, int64_t dims) {
  if (dims == 0) {
    return value;
  }
  std::vector<int64_t> shape(value.sizes().begin(), value.sizes().end() - dims);
  shape.push_back(-1);
  return value.reshape(shape).sum(-1);
}

// Python's `torch.finfo(dtype).resolution`.
double resolution(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kDouble:
      return 1e-15;
    case at::kHalf:
      return 1e-3;
    case at::kBFloat16:
      return 1e-2;
    default:
      return 1e-6;
  }
}

at::Tensor safe_tanh(const at::Tensor& x) {
  const double lim = 1.0 - resolution(x.scalar_type());
  return x.tanh().clamp(-lim, lim);
}

at::Tensor safe_atanh(const at::Tensor& y) {
  const double lim = 1.0 - resolution(y.scalar_type());
  return y.clamp(-lim, lim).atanh();
}

// torch.distributions' TanhTransform.log_abs_det_jacobian.
at::Tensor tanh_ladj(const at::Tensor& x) {
  return 2. * (std::log(2.) - x - at::softplus(-2. * x));
}

// NOTE [Loops for small CPU parameters]: whether loops may stand in for
// torch's ops on `t`.
bool loopable(const at::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.layout() == at::kStrided &&
         (t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble) &&
         t.is_contiguous() && t.dim() >= 1 && t.numel() > 0 &&
         !(t.requires_grad() && at::GradMode::is_enabled());
}

// A new CPU tensor for the loops to write, made without the dispatcher:
// the tensor at::empty makes for CPU options (TensorImpl's constructor sets
// the autograd and inference keys) at two thirds of its instructions, and
// allocation dominates a step of a few rows.
at::Tensor empty_cpu(c10::IntArrayRef shape, c10::ScalarType dtype) {
  return at::detail::empty_cpu(
      shape, dtype, /*pin_memory=*/false, /*memory_format_opt=*/std::nullopt);
}

// NOTE [Recycled draws]
// An actor makes the same small tensors at every step (the sample and its
// log-prob), and drops those of a step or two before: a collector copies
// them into its batch. Each thread keeps its last few such outputs, and
// hands one out again once this ring alone holds it and it is as it was
// made: then no one can see the reuse, and the step skips the allocation
// and the release (most of a step's cost beyond its arithmetic). A
// tensor anyone else holds, views, or has changed (resized, restrided,
// given a gradient or a Python object) is left alone.
class DrawRing {
 public:
  // A contiguous CPU tensor of `shape` and `dtype`, its contents unset.
  at::Tensor take(c10::IntArrayRef shape, c10::ScalarType dtype) {
    const bool small = c10::multiply_integers(shape) *
                           static_cast<int64_t>(c10::elementSize(dtype)) <=
                       kMaxBytes;
    // Inference tensors have other keys: the ring keeps normal ones.
    if (!small || c10::InferenceMode::is_enabled()) {
      return empty_cpu(shape, dtype);
    }
    for (Slot& slot : slots_) {
      if (reusable(slot, shape, dtype)) {
        return slot.tensor;
      }
    }
    Slot& slot = slots_[next_];
    next_ = (next_ + 1) % kSlots;
    slot.tensor = empty_cpu(shape, dtype);
    slot.keys = slot.tensor.unsafeGetTensorImpl()->key_set();
    slot.storage = slot.tensor.storage().unsafeGetStorageImpl();
    slot.data = slot.tensor.const_data_ptr();
    slot.nbytes = slot.storage->nbytes();
    return slot.tensor;
  }

 private:
  static constexpr size_t kSlots = 8;
  static constexpr int64_t kMaxBytes = 4096;

  struct Slot {
    at::Tensor tensor;
    c10::DispatchKeySet keys;
    const c10::StorageImpl* storage = nullptr;
    const void* data = nullptr;
    size_t nbytes = 0;
  };

  static bool reusable(
      const Slot& slot, c10::IntArrayRef shape, c10::ScalarType dtype) {
    if (!slot.tensor.defined() || slot.tensor.scalar_type() != dtype ||
        !tensordict::detail::same_dims(slot.tensor.sizes(), shape)) {
      return false;
    }
    const c10::TensorImpl* impl = slot.tensor.unsafeGetTensorImpl();
    const c10::Storage& storage = impl->storage();
    if (!slot.tensor.getIntrusivePtr().is_uniquely_owned() ||
        !storage.unique() ||
        storage.getWeakStorageImpl().weak_use_count() != 2) {
      return false;
    }
    // The last holder's release (acq_rel) comes before the writes of the
    // next step; the counts above are read relaxed.
    std::atomic_thread_fence(std::memory_order_acquire);
    return storage.unsafeGetStorageImpl() == slot.storage &&
           storage.nbytes() == slot.nbytes && storage.data() == slot.data &&
           impl->storage_offset() == 0 && impl->is_contiguous() &&
           impl->key_set() == slot.keys && impl->autograd_meta() == nullptr &&
           !impl->is_wrapped_number() &&
           impl->pyobj_slot()->load_pyobj() == nullptr &&
           slot.storage->pyobj_slot()->load_pyobj() == nullptr;
  }

  Slot slots_[kSlots];
  size_t next_ = 0;
};

// This thread's recycled draws (NOTE [Recycled draws]).
at::Tensor recycled_cpu(c10::IntArrayRef shape, c10::ScalarType dtype) {
  thread_local DrawRing ring;
  return ring.take(shape, dtype);
}

// The row helpers below take the row width `k` at run time, or at compile
// time as `K` (K > 0; then `k` is ignored): a collector's categorical head
// draws from a handful of actions every step, where the loops over a row
// of two, unrolled, cost a few instructions and the general loops several
// times that in their bookkeeping and mispredicted exits. The arithmetic,
// and its order, is the same either way.
template <int64_t K>
constexpr int64_t row_width(int64_t k) {
  return K > 0 ? K : k;
}

// The maximum of row[0, k), -inf for no element above it.
template <int64_t K = 0, typename T>
T row_max(const T* row, int64_t k) {
  T max = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < row_width<K>(k); ++j) {
    max = row[j] > max ? row[j] : max;
  }
  return max;
}

// logits - logsumexp(logits) of one row, in T: torch's formula (an
// infinite maximum shifts by 0).
template <int64_t K = 0, typename T>
C10_ALWAYS_INLINE void normalize_row(const T* x, T* l, int64_t width) {
  const T max = row_max<K>(x, width);
  const T shift = std::isinf(max) ? T(0) : max;
  T sum = 0;
  for (int64_t j = 0; j < row_width<K>(width); ++j) {
    sum += std::exp(x[j] - shift);
  }
  const T lse = std::log(sum) + shift;
  for (int64_t j = 0; j < row_width<K>(width); ++j) {
    l[j] = x[j] - lse;
  }
}

// normalize_row of every row.
template <typename T>
void normalize_rows(const T* in, T* logits, int64_t rows, int64_t k) {
  for (int64_t r = 0; r < rows; ++r) {
    normalize_row(in + r * k, logits + r * k, k);
  }
}

// The softmax of one row of normalized logits, in T: torch's formula
// (softmax multiplies by the inverse sum).
template <int64_t K = 0, typename T>
C10_ALWAYS_INLINE void softmax_row(const T* l, T* p, int64_t width) {
  const T lmax = row_max<K>(l, width);
  T psum = 0;
  for (int64_t j = 0; j < row_width<K>(width); ++j) {
    p[j] = std::exp(l[j] - lmax);
    psum += p[j];
  }
  const T scale = T(1) / psum;
  for (int64_t j = 0; j < row_width<K>(width); ++j) {
    p[j] *= scale;
  }
}

// softmax_row of every row.
template <typename T>
void softmax_rows(const T* logits, T* probs, int64_t rows, int64_t k) {
  for (int64_t r = 0; r < rows; ++r) {
    softmax_row(logits + r * k, probs + r * k, k);
  }
}

// The index of the first maximum of row[0, k), NaN counting as the
// maximum: torch's argmax. The compare is a select, not a branch: drawn
// indices are random, and a branch on them is mispredicted half the time.
template <int64_t K = 0, typename T>
int64_t first_argmax(const T* row, int64_t k) {
  int64_t best = 0;
  for (int64_t j = 0; j < row_width<K>(k); ++j) {
    if (std::isnan(row[j])) {
      return j;
    }
    best = row[j] > row[best] ? j : best;
  }
  return best;
}

// The most categories the loops draw from: torch.multinomial's limit.
constexpr int64_t kMaxLoopEvents = int64_t{1} << 24;

constexpr const char* kNotFiniteProbs =
    "probability tensor contains either `inf`, `nan` or element < 0";
constexpr const char* kZeroProbs =
    "invalid multinomial distribution (sum of probabilities <= 0)";

// What torch.multinomial's checks say of one row of probabilities: null if
// it may be drawn from, else the error.
template <int64_t K = 0, typename T>
C10_ALWAYS_INLINE const char* probs_row_error(const T* p, int64_t width) {
  T sum = 0;
  bool finite = true;
  for (int64_t j = 0; j < row_width<K>(width); ++j) {
    const T v = p[j];
    finite = finite && v >= 0 && v < std::numeric_limits<T>::infinity();
    sum += v;
  }
  return !finite ? kNotFiniteProbs : sum == 0 ? kZeroProbs : nullptr;
}

// torch.multinomial's Exp(1) noise for `rows` rows of `width`: one
// `exponential_` call.
template <typename T>
at::Tensor exponential_noise(
    int64_t rows,
    int64_t width,
    const std::optional<at::Generator>& generator) {
  return empty_cpu({rows, width}, c10::CppTypeToScalarType<T>::value)
      .exponential_(1, generator);
}

// torch.multinomial's draw of one index per row of `p` (probabilities,
// `rows` rows of `k`) into `out`: its checks, Exp(1) noise from one
// `exponential_` call, then the first argmax of p / q.
template <typename T>
void draw_rows(
    const T* p,
    int64_t rows,
    int64_t k,
    const std::optional<at::Generator>& generator,
    int64_t* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const char* error = probs_row_error(p + r * k, k);
    TORCH_CHECK(error == nullptr, error);
  }
  at::Tensor q = exponential_noise<T>(rows, k, generator);
  T* ratio = q.mutable_data_ptr<T>();
  for (int64_t i = 0; i < rows * k; ++i) {
    ratio[i] = p[i] / ratio[i];
  }
  for (int64_t r = 0; r < rows; ++r) {
    out[r] = first_argmax(ratio + r * k, k);
  }
}

// torch's Real() constraint error for NaN logits of `dist`.
C10_NOINLINE void throw_nan_logits(const char* dist) {
  TORCH_CHECK_VALUE(
      false,
      "Expected parameter logits of distribution ",
      dist,
      " to satisfy the constraint Real(), but found NaN values");
}

// Normalizes `rows` rows of `k` logits at `in` into `out` (normalize_rows),
// after torch's Real() constraint check on every value, naming `dist`.
template <typename T>
void normalize_checked_rows(
    const T* in, T* out, int64_t rows, int64_t k, const char* dist) {
  bool any_nan = false;
  for (int64_t i = 0; i < rows * k; ++i) {
    any_nan = any_nan || std::isnan(in[i]);
  }
  if (any_nan) {
    throw_nan_logits(dist);
  }
  normalize_rows(in, out, rows, k);
}

// Writes the one-hot rows of `drawn` (one index in [0, k) per row) into
// `one_hot`, contiguous [rows, k] of any dtype: every element, so the
// tensor may come uninitialized (at::zeros would dispatch a fill).
void write_one_hot(
    const at::Tensor& one_hot, const int64_t* drawn, int64_t rows, int64_t k) {
  AT_DISPATCH_ALL_TYPES(one_hot.scalar_type(), "one_hot", [&] {
    scalar_t* out = one_hot.mutable_data_ptr<scalar_t>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < k; ++j) {
        out[r * k + j] = j == drawn[r] ? scalar_t(1) : scalar_t(0);
      }
    }
  });
}

}  // namespace

// --- Distribution ----------------------------------------------------------

Distribution::Distribution(
    std::vector<int64_t> batch_shape, std::vector<int64_t> event_shape)
    : batch_shape_(std::move(batch_shape)),
      event_shape_(std::move(event_shape)) {}

Distribution::~Distribution() = default;

void Distribution::set_shapes(
    std::vector<int64_t> batch_shape, std::vector<int64_t> event_shape) {
  batch_shape_ = std::move(batch_shape);
  event_shape_ = std::move(event_shape);
}

std::vector<int64_t> Distribution::extended_shape(
    c10::IntArrayRef sample_shape) const {
  std::vector<int64_t> shape(sample_shape.begin(), sample_shape.end());
  shape.insert(shape.end(), batch_shape_.begin(), batch_shape_.end());
  shape.insert(shape.end(), event_shape_.begin(), event_shape_.end());
  return shape;
}

at::Tensor Distribution::rsample(
    c10::IntArrayRef /*sample_shape*/,
    std::optional<at::Generator> /*generator*/) const {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, name(), " has no reparameterized sample (rsample)");
}

at::Tensor Distribution::mode() const {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "method ", name(), ".mode is not implemented");
}

at::Tensor Distribution::mean() const {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "method ", name(), ".mean is not implemented");
}

at::Tensor Distribution::entropy() const {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "method ", name(), ".entropy is not implemented");
}

at::Tensor Distribution::deterministic_sample() const {
  // tensordict's fallback for torch's distributions, which have no
  // deterministic_sample: the mode where the support can be enumerated,
  // else the mean.
  return has_enumerate_support() ? mode() : mean();
}

namespace {

// torch.distributions' `_validate_sample` shape checks, with its messages.
void validate_sample_shape(
    const at::Tensor& value,
    const std::vector<int64_t>& batch,
    const std::vector<int64_t>& event) {
  const auto size = value.sizes();
  TORCH_CHECK_VALUE(
      size.size() >= event.size() &&
          std::equal(event.begin(), event.end(), size.end() - event.size()),
      "The right-most size of value must match event_shape: ",
      shape_string(size),
      " vs ",
      shape_string(event),
      ".");
  std::vector<int64_t> expected = batch;
  expected.insert(expected.end(), event.begin(), event.end());
  auto i = size.rbegin();
  auto j = expected.rbegin();
  for (; i != size.rend() && j != expected.rend(); ++i, ++j) {
    TORCH_CHECK_VALUE(
        *i == 1 || *j == 1 || *i == *j,
        "Value is not broadcastable with batch_shape+event_shape: ",
        shape_string(size),
        " vs ",
        shape_string(expected),
        ".");
  }
}

}  // namespace

// --- Categorical -----------------------------------------------------------

Categorical::Categorical(at::Tensor logits, at::Tensor probs)
    : Distribution(
          std::vector<int64_t>(
              logits.sizes().begin(), logits.sizes().end() - 1),
          {}),
      logits_(std::move(logits)),
      probs_(std::move(probs)),
      num_events_(logits_.size(-1)) {}

namespace {

at::Tensor normalized_logits(const at::Tensor& logits, const char* dist) {
  check_floating(logits, dist, "logits");
  TORCH_CHECK_VALUE(
      logits.dim() >= 1,
      dist,
      ": logits must be at least one-dimensional, got shape ",
      shape_string(logits.sizes()));
  check_not_nan(logits, dist, "logits");
  return logits - logits.logsumexp(-1, /*keepdim=*/true);
}

// Normalized logits and their softmax: loops where NOTE [Loops for small CPU
// parameters] allows, and then no probs (undefined): Categorical computes
// them when asked, and its draw row by row, so a step of a collector makes
// one tensor fewer. Else torch's ops.
std::pair<at::Tensor, at::Tensor> logits_and_probs(
    const at::Tensor& logits, const char* dist) {
  if (!loopable(logits)) {
    at::Tensor normalized = normalized_logits(logits, dist);
    at::Tensor probs = at::softmax(normalized, -1);
    return {std::move(normalized), std::move(probs)};
  }
  at::Tensor normalized = empty_cpu(logits.sizes(), logits.scalar_type());
  const int64_t k = logits.size(-1);
  const int64_t rows = logits.numel() / k;
  AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "logits_and_probs", [&] {
    normalize_checked_rows(
        logits.const_data_ptr<scalar_t>(),
        normalized.mutable_data_ptr<scalar_t>(),
        rows,
        k,
        dist);
  });
  return {std::move(normalized), at::Tensor()};
}

at::Tensor normalized_probs(const at::Tensor& probs, const char* dist) {
  check_floating(probs, dist, "probs");
  TORCH_CHECK_VALUE(
      probs.dim() >= 1,
      dist,
      ": probs must be at least one-dimensional, got shape ",
      shape_string(probs.sizes()));
  TORCH_CHECK_VALUE(
      (probs >= 0).all().item<bool>(),
      "Expected parameter probs of distribution ",
      dist,
      " to be nonnegative, found negative or NaN values");
  return probs / probs.sum(-1, /*keepdim=*/true);
}

// torch's probs_to_logits for a categorical: log of the clamped probs.
at::Tensor probs_to_logits(const at::Tensor& probs) {
  const double eps =
      probs.scalar_type() == at::kDouble
          ? std::numeric_limits<double>::epsilon()
      : probs.scalar_type() == at::kHalf ? 0.0009765625
      : probs.scalar_type() == at::kBFloat16
          ? 0.0078125
          : static_cast<double>(std::numeric_limits<float>::epsilon());
  return probs.clamp(eps, 1 - eps).log();
}

}  // namespace

std::shared_ptr<Categorical> Categorical::from_logits(
    const at::Tensor& logits) {
  auto [normalized, probs] = logits_and_probs(logits, "Categorical");
  return std::shared_ptr<Categorical>(
      new Categorical(std::move(normalized), std::move(probs)));
}

std::shared_ptr<Categorical> Categorical::from_probs(const at::Tensor& probs) {
  at::Tensor normalized = normalized_probs(probs, "Categorical");
  at::Tensor logits = probs_to_logits(normalized);
  return std::shared_ptr<Categorical>(
      new Categorical(std::move(logits), std::move(normalized)));
}

at::Tensor Categorical::probs() const {
  if (probs_.defined()) {
    return probs_;
  }
  // Loops made the logits (logits_and_probs): their softmax, by loops.
  at::Tensor probs = empty_cpu(logits_.sizes(), logits_.scalar_type());
  AT_DISPATCH_FLOATING_TYPES(logits_.scalar_type(), "probs", [&] {
    softmax_rows(
        logits_.const_data_ptr<scalar_t>(),
        probs.mutable_data_ptr<scalar_t>(),
        logits_.numel() / num_events_,
        num_events_);
  });
  return probs;
}

bool Categorical::draw_indices(
    int64_t* out, const std::optional<at::Generator>& generator) const {
  // torch.multinomial's path for one sample (NOTE [Loops for small CPU
  // parameters]).
  const int64_t k = num_events_;
  const at::Tensor& source = probs_.defined() ? probs_ : logits_;
  if (!loopable(source) || k > kMaxLoopEvents) {
    return false;
  }
  // Contiguous (loopable): rows of k by pointer, no view to dispatch.
  const int64_t rows = source.numel() / k;
  AT_DISPATCH_FLOATING_TYPES(source.scalar_type(), "sample", [&] {
    // The probs, or computed here as probs() computes them (on the stack
    // up to 64 values: 32 sub-envs of two actions).
    c10::SmallVector<scalar_t, 64> computed;
    const scalar_t* p = nullptr;
    if (probs_.defined()) {
      p = probs_.const_data_ptr<scalar_t>();
    } else {
      computed.resize(static_cast<size_t>(rows * k));
      softmax_rows(
          logits_.const_data_ptr<scalar_t>(), computed.data(), rows, k);
      p = computed.data();
    }
    draw_rows(p, rows, k, generator, out);
  });
  return true;
}

at::Tensor Categorical::sample(
    c10::IntArrayRef sample_shape,
    std::optional<at::Generator> generator) const {
  at::NoGradGuard no_grad;
  int64_t count = 1;
  for (int64_t n : sample_shape) {
    count *= n;
  }
  std::vector<int64_t> shape(sample_shape.begin(), sample_shape.end());
  shape.insert(shape.end(), batch_shape().begin(), batch_shape().end());
  if (count == 1 && loopable(probs_.defined() ? probs_ : logits_)) {
    at::Tensor index = empty_cpu(shape, at::kLong);
    if (draw_indices(index.mutable_data_ptr<int64_t>(), generator)) {
      return index;
    }
  }
  at::Tensor probs_2d = probs().reshape({-1, num_events_});
  at::Tensor samples_2d =
      at::multinomial(probs_2d, count, /*replacement=*/true, generator).t();
  return samples_2d.reshape(shape);
}

at::Tensor Categorical::log_prob(const at::Tensor& value) const {
  TORCH_CHECK_VALUE(
      value.defined(), name(), ".log_prob: the value is not defined");
  TORCH_CHECK_VALUE(
      at::isIntegralType(value.scalar_type(), /*includeBool=*/false) ||
          at::isFloatingType(value.scalar_type()),
      name(),
      ".log_prob expects category indices (int64), got ",
      value.scalar_type());
  if (loopable(logits_) && value.device().is_cpu() &&
      value.scalar_type() == at::kLong && value.is_contiguous() &&
      value.sizes() == c10::IntArrayRef(batch_shape())) {
    return gather_log_prob(value.const_data_ptr<int64_t>(), value.sizes());
  }
  // Indices have no event dims, also under torch's OneHotCategorical.
  validate_sample_shape(value, batch_shape(), {});
  at::Tensor in_support = (value >= 0) & (value <= num_events_ - 1);
  if (at::isFloatingType(value.scalar_type())) {
    in_support = in_support & (value == value.floor());
  }
  TORCH_CHECK_VALUE(
      in_support.all().item<bool>(),
      "Expected value argument of shape ",
      shape_string(value.sizes()),
      " to be within the support (IntegerInterval(lower_bound=0, upper_bound=",
      num_events_ - 1,
      ")) of the distribution ",
      name(),
      ", but found invalid values");
  at::Tensor index = value.to(at::kLong).unsqueeze(-1);
  auto both = at::broadcast_tensors({index, logits_});
  index = both[0].narrow(-1, 0, 1);
  return both[1].gather(-1, index).squeeze(-1);
}

at::Tensor Categorical::gather_log_prob(
    const int64_t* index, c10::IntArrayRef shape) const {
  const int64_t k = num_events_;
  const int64_t rows = logits_.numel() / k;
  for (int64_t r = 0; r < rows; ++r) {
    TORCH_CHECK_VALUE(
        index[r] >= 0 && index[r] < k,
        "Expected value argument of shape ",
        shape_string(shape),
        " to be within the support (IntegerInterval(lower_bound=0, "
        "upper_bound=",
        k - 1,
        ")) of the distribution ",
        name(),
        ", but found invalid values");
  }
  at::Tensor out = empty_cpu(batch_shape(), logits_.scalar_type());
  AT_DISPATCH_FLOATING_TYPES(logits_.scalar_type(), "log_prob", [&] {
    const scalar_t* l = logits_.const_data_ptr<scalar_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    for (int64_t r = 0; r < rows; ++r) {
      o[r] = l[r * k + index[r]];
    }
  });
  return out;
}

at::Tensor Categorical::mode() const {
  return probs().argmax(-1);
}

at::Tensor Categorical::mean() const {
  return at::full(
      extended_shape({}),
      std::numeric_limits<double>::quiet_NaN(),
      logits_.options());
}

at::Tensor Categorical::entropy() const {
  const double min_real =
      logits_.scalar_type() == at::kDouble
          ? std::numeric_limits<double>::lowest()
      : logits_.scalar_type() == at::kHalf ? -65504.0
      : logits_.scalar_type() == at::kBFloat16
          ? -3.3895313892515355e+38
          : static_cast<double>(std::numeric_limits<float>::lowest());
  at::Tensor logits = at::clamp(logits_, min_real);
  at::Tensor p_log_p = logits * probs();
  return -p_log_p.sum(-1);
}

// --- OneHotCategorical -----------------------------------------------------

namespace {

// TorchRL's `_treat_categorical_params`: a last dim of 1 is dropped.
at::Tensor treat_params(const at::Tensor& params, bool torch_semantics) {
  if (!torch_semantics && params.defined() && params.dim() >= 1 &&
      params.size(-1) == 1) {
    return params.select(-1, 0);
  }
  return params;
}

}  // namespace

OneHotCategorical::OneHotCategorical(
    at::Tensor logits, at::Tensor probs, bool torch_semantics)
    : Categorical(std::move(logits), std::move(probs)),
      torch_semantics_(torch_semantics) {
  if (torch_semantics_) {
    set_shapes(batch_shape(), {num_events()});
  }
}

std::shared_ptr<OneHotCategorical> OneHotCategorical::from_logits(
    const at::Tensor& logits, bool torch_semantics) {
  auto [normalized, probs] = logits_and_probs(
      treat_params(logits, torch_semantics), "OneHotCategorical");
  auto dist = std::shared_ptr<OneHotCategorical>(new OneHotCategorical(
      std::move(normalized), std::move(probs), torch_semantics));
  return dist;
}

std::shared_ptr<OneHotCategorical> OneHotCategorical::from_probs(
    const at::Tensor& probs, bool torch_semantics) {
  at::Tensor normalized = normalized_probs(
      treat_params(probs, torch_semantics), "OneHotCategorical");
  at::Tensor logits = probs_to_logits(normalized);
  return std::shared_ptr<OneHotCategorical>(new OneHotCategorical(
      std::move(logits), std::move(normalized), torch_semantics));
}

at::Tensor OneHotCategorical::sample(
    c10::IntArrayRef sample_shape,
    std::optional<at::Generator> generator) const {
  if (sample_shape.empty()) {
    // Drawn by loops, the indices are in range: at::one_hot's range checks
    // would cost two reductions and two syncs.
    const int64_t k = num_events();
    const int64_t rows = logits().numel() / k;
    c10::SmallVector<int64_t, 16> drawn(static_cast<size_t>(rows));
    if (draw_indices(drawn.data(), generator)) {
      c10::SmallVector<int64_t, 4> shape(
          batch_shape().begin(), batch_shape().end());
      shape.push_back(k);
      at::Tensor one_hot = empty_cpu(
          shape, torch_semantics_ ? logits().scalar_type() : at::kLong);
      write_one_hot(one_hot, drawn.data(), rows, k);
      return one_hot;
    }
  }
  at::Tensor index = Categorical::sample(sample_shape, std::move(generator));
  at::Tensor one_hot = at::one_hot(index, num_events());
  return torch_semantics_ ? one_hot.to(logits().scalar_type()) : one_hot;
}

at::Tensor OneHotCategorical::log_prob(const at::Tensor& value) const {
  TORCH_CHECK_VALUE(
      value.defined() && value.dim() >= 1 && value.size(-1) == num_events(),
      "OneHotCategorical.log_prob expects one-hot values whose last dim is ",
      num_events(),
      ", got shape ",
      value.defined() ? shape_string(value.sizes())
                      : std::string("(undefined)"));
  c10::SmallVector<int64_t, 4> rows_shape(
      batch_shape().begin(), batch_shape().end());
  rows_shape.push_back(num_events());
  if (loopable(logits()) && value.device().is_cpu() && value.is_contiguous() &&
      value.sizes() == c10::IntArrayRef(rows_shape) &&
      (value.scalar_type() == at::kLong || value.scalar_type() == at::kFloat ||
       value.scalar_type() == at::kDouble)) {
    const int64_t k = num_events();
    const int64_t rows = value.numel() / k;
    c10::SmallVector<int64_t, 16> index(static_cast<size_t>(rows));
    AT_DISPATCH_FLOATING_TYPES_AND(
        at::kLong, value.scalar_type(), "log_prob", [&] {
          const scalar_t* v = value.const_data_ptr<scalar_t>();
          for (int64_t r = 0; r < rows; ++r) {
            index[r] = first_argmax(v + r * k, k);
          }
        });
    return gather_log_prob(index.data(), c10::IntArrayRef(batch_shape()));
  }
  return Categorical::log_prob(value.argmax(-1));
}

// NOTE [A categorical head without its distribution]
// An actor's every step builds a categorical distribution from the logits,
// draws once and reads the log-prob of the draw. On small CPU logits (NOTE
// [Loops for small CPU parameters]) that is a few loops; the distribution
// object and its tensor of normalized logits would cost more than the loops.
// draw_from_logits runs the loops of from_logits, sample and log_prob, in
// their order, on the stack: the same checks, the same generator call and
// bit-identical values (probabilistic_test compares the two paths).
namespace detail {

std::optional<CategoricalDraw> draw_from_logits(
    const at::Tensor& logits,
    CategoricalHead head,
    bool with_log_prob,
    const std::optional<at::Generator>& generator) {
  // Rows past a few pages are left to the tensors: no gain from the stack.
  constexpr int64_t kMaxValues = 4096;
  const bool torch_semantics = head == CategoricalHead::kTorchOneHotCategorical;
  const bool one_hot = head != CategoricalHead::kCategorical;
  // TorchRL's OneHotCategorical drops a last dim of 1 (treat_params): a
  // view, left to the distribution.
  if (!loopable(logits) || logits.numel() > kMaxValues ||
      logits.size(-1) > kMaxLoopEvents ||
      (one_hot && !torch_semantics && logits.size(-1) == 1)) {
    return std::nullopt;
  }
  const char* dist = one_hot ? "OneHotCategorical" : "Categorical";
  const int64_t k = logits.size(-1);
  const int64_t rows = logits.numel() / k;
  const c10::IntArrayRef batch = logits.sizes().slice(0, logits.dim() - 1);
  CategoricalDraw out;
  // The loops for rows of `width` (K of them, or k when K is 0), in two
  // passes over the rows: the first makes each row's normalized logits
  // and probabilities and notes the first error (nothing is drawn before
  // every row has passed the checks, which report as the loops of
  // from_logits and sample would: a NaN logit first, then the first row
  // torch.multinomial refuses); the second draws, after the one
  // exponential_ call, and writes each row's sample and log-prob.
  const auto draw = [&](auto width) {
    constexpr int64_t K = decltype(width)::value;
    AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "draw_from_logits", [&] {
      const int64_t w = row_width<K>(k);
      const scalar_t* in =
          ::tensordict::detail::readable_data<scalar_t>(logits);
      c10::SmallVector<scalar_t, 64> normalized(static_cast<size_t>(rows * w));
      c10::SmallVector<scalar_t, 64> probs(static_cast<size_t>(rows * w));
      bool any_nan = false;
      const char* refused = nullptr;
      for (int64_t r = 0; r < rows; ++r) {
        const scalar_t* x = in + r * w;
        for (int64_t j = 0; j < w; ++j) {
          any_nan = any_nan || std::isnan(x[j]);
        }
        normalize_row<K>(x, normalized.data() + r * w, w);
        softmax_row<K>(normalized.data() + r * w, probs.data() + r * w, w);
        const char* error = probs_row_error<K>(probs.data() + r * w, w);
        refused = refused == nullptr ? error : refused;
      }
      if (any_nan) {
        throw_nan_logits(dist);
      }
      TORCH_CHECK(refused == nullptr, refused);
      const at::Tensor q = exponential_noise<scalar_t>(rows, w, generator);
      const scalar_t* noise = ::tensordict::detail::readable_data<scalar_t>(q);
      c10::SmallVector<int64_t, 4> shape(batch.begin(), batch.end());
      if (one_hot) {
        shape.push_back(k);
      }
      out.sample = recycled_cpu(
          shape, one_hot && torch_semantics ? logits.scalar_type() : at::kLong);
      if (with_log_prob) {
        out.log_prob = recycled_cpu(batch, logits.scalar_type());
      }
      scalar_t* log_prob =
          with_log_prob
              ? ::tensordict::detail::writable_data<scalar_t>(out.log_prob)
              : nullptr;
      // The sample's rows, by its dtype: int64 indices or one-hot rows, or
      // one-hot rows in the logits' dtype (torch's OneHotCategorical).
      const auto write = [&](auto* sample) {
        using S = std::remove_pointer_t<decltype(sample)>;
        c10::SmallVector<scalar_t, 16> ratio(static_cast<size_t>(w));
        for (int64_t r = 0; r < rows; ++r) {
          const scalar_t* p = probs.data() + r * w;
          for (int64_t j = 0; j < w; ++j) {
            ratio[j] = p[j] / noise[r * w + j];
          }
          const int64_t index = first_argmax<K>(ratio.data(), w);
          if (one_hot) {
            for (int64_t j = 0; j < w; ++j) {
              sample[r * w + j] = j == index ? S(1) : S(0);
            }
          } else {
            sample[r] = index;
          }
          if (log_prob != nullptr) {
            log_prob[r] = normalized[r * w + index];
          }
        }
      };
      if (one_hot && torch_semantics) {
        write(::tensordict::detail::writable_data<scalar_t>(out.sample));
      } else {
        write(::tensordict::detail::writable_data<int64_t>(out.sample));
      }
    });
  };
  // Two actions (CartPole's, and many a control task's) get loops unrolled
  // for them (row_width).
  if (k == 2) {
    draw(std::integral_constant<int64_t, 2>{});
  } else {
    draw(std::integral_constant<int64_t, 0>{});
  }
  return out;
}

}  // namespace detail

at::Tensor OneHotCategorical::mode() const {
  if (torch_semantics_) {
    return at::one_hot(probs().argmax(-1), num_events())
        .to(probs().scalar_type());
  }
  return (logits() == std::get<0>(logits().max(-1, /*keepdim=*/true)))
      .to(at::kLong);
}

at::Tensor OneHotCategorical::mean() const {
  if (torch_semantics_) {
    return probs();
  }
  return Categorical::mean();
}

at::Tensor OneHotCategorical::deterministic_sample() const {
  return mode();
}

// --- Normal ----------------------------------------------------------------

Normal::Normal(const at::Tensor& loc, const at::Tensor& scale)
    : Distribution({}, {}) {
  check_floating(loc, "Normal", "loc");
  check_floating(scale, "Normal", "scale");
  TORCH_CHECK_VALUE(
      at::is_expandable_to(
          loc.sizes(), at::infer_size(loc.sizes(), scale.sizes())),
      "Normal: loc and scale do not broadcast");
  auto both = at::broadcast_tensors({loc, scale});
  loc_ = both[0];
  scale_ = both[1];
  check_not_nan(loc_, "Normal", "loc");
  TORCH_CHECK_VALUE(
      (scale_ > 0).all().item<bool>(),
      "Expected parameter scale (Tensor of shape ",
      shape_string(scale_.sizes()),
      ") of distribution Normal to satisfy the constraint "
      "GreaterThan(lower_bound=0.0), but found invalid values");
  set_shapes(loc_.sizes().vec(), {});
}

at::Tensor Normal::sample(
    c10::IntArrayRef sample_shape,
    std::optional<at::Generator> generator) const {
  at::NoGradGuard no_grad;
  auto shape = extended_shape(sample_shape);
  return at::normal(loc_.expand(shape), scale_.expand(shape), generator);
}

at::Tensor Normal::rsample(
    c10::IntArrayRef sample_shape,
    std::optional<at::Generator> generator) const {
  auto shape = extended_shape(sample_shape);
  at::Tensor eps = at::empty(shape, loc_.options()).normal_(0, 1, generator);
  return loc_ + eps * scale_;
}

at::Tensor Normal::log_prob(const at::Tensor& value) const {
  TORCH_CHECK_VALUE(
      value.defined(), "Normal.log_prob: the value is not defined");
  validate_sample_shape(value, batch_shape(), event_shape());
  at::Tensor var = scale_.pow(2);
  at::Tensor log_scale = scale_.log();
  return -((value - loc_).pow(2)) / (2 * var) - log_scale -
         std::log(std::sqrt(2 * M_PI));
}

at::Tensor Normal::mode() const {
  return loc_;
}

at::Tensor Normal::mean() const {
  return loc_;
}

at::Tensor Normal::entropy() const {
  return 0.5 + 0.5 * std::log(2 * M_PI) + at::log(scale_);
}

// --- TanhNormal ------------------------------------------------------------

namespace {

// at::scalar_tensor(value, at::kFloat) without the dispatcher's two ops: an
// actor's every step makes the default bounds.
at::Tensor float_scalar(float value) {
  at::Tensor t = empty_cpu({}, at::kFloat);
  *t.mutable_data_ptr<float>() = value;
  return t;
}

}  // namespace

TanhNormalOptions::TanhNormalOptions()
    : low_(float_scalar(-1.0F)), high_(float_scalar(1.0F)) {}

TanhNormal::TanhNormal(
    const at::Tensor& loc,
    const at::Tensor& scale,
    const TanhNormalOptions& options)
    : Distribution({}, {}), safe_tanh_(options.safe_tanh()) {
  check_floating(loc, "TanhNormal", "loc");
  check_floating(scale, "TanhNormal", "scale");
  TORCH_CHECK_VALUE(
      options.low().defined() && options.high().defined(),
      "TanhNormal: low and high must be defined tensors");
  low_ = options.low().to(loc.device());
  high_ = options.high().to(loc.device());
  TORCH_CHECK(
      (high_ > low_).all().item<bool>(),
      "TanhNormal high values must be strictly greater than low values");
  const int64_t event_dims =
      options.event_dims().value_or(std::min<int64_t>(1, loc.dim()));
  affine_ =
      (high_ != 1.0).any().item<bool>() || (low_ != -1.0).any().item<bool>();
  at::Tensor base_loc = loc;
  if (options.tanh_loc()) {
    base_loc = (base_loc / options.upscale()).tanh() * options.upscale();
    if (affine_) {
      base_loc = base_loc + (high_ - low_) / 2 + low_;
    }
  }
  TORCH_CHECK_VALUE(
      at::is_expandable_to(
          scale.sizes(), at::infer_size(base_loc.sizes(), scale.sizes())),
      "TanhNormal: loc of shape ",
      shape_string(loc.sizes()),
      " and scale of shape ",
      shape_string(scale.sizes()),
      " do not broadcast");
  check_not_nan(base_loc, "TanhNormal", "loc");
  TORCH_CHECK_VALUE(
      (scale > 1e-6).all().item<bool>(),
      "Expected parameter scale (Tensor of shape ",
      shape_string(scale.sizes()),
      ") of distribution TanhNormal to satisfy the constraint "
      "GreaterThan(lower_bound=1e-06), but found invalid values");
  base_ = std::make_shared<Normal>(base_loc, scale);
  std::vector<int64_t> shape = base_->loc().sizes().vec();
  if (affine_) {
    // The affine transform broadcasts the base to the bounds' shape.
    shape = at::infer_size(shape, at::infer_size(low_.sizes(), high_.sizes()));
    if (shape != base_->loc().sizes().vec()) {
      base_ = std::make_shared<Normal>(
          base_->loc().expand(shape), base_->scale().expand(shape));
    }
  }
  TORCH_CHECK_VALUE(
      event_dims >= 0 && event_dims <= static_cast<int64_t>(shape.size()),
      "TanhNormal: event_dims=",
      event_dims,
      " is out of range for loc of shape ",
      shape_string(shape));
  event_dims_ = event_dims;
  const auto cut =
      shape.begin() + (static_cast<int64_t>(shape.size()) - event_dims);
  set_shapes(
      std::vector<int64_t>(shape.begin(), cut),
      std::vector<int64_t>(cut, shape.end()));
}

at::Tensor TanhNormal::transform(const at::Tensor& x) const {
  at::Tensor y = safe_tanh_ ? safe_tanh(x) : x.tanh();
  if (affine_) {
    y = (high_ + low_) / 2 + (high_ - low_) / 2 * y;
  }
  return y;
}

at::Tensor TanhNormal::sample(
    c10::IntArrayRef sample_shape,
    std::optional<at::Generator> generator) const {
  at::NoGradGuard no_grad;
  return transform(base_->sample(sample_shape, std::move(generator)));
}

at::Tensor TanhNormal::rsample(
    c10::IntArrayRef sample_shape,
    std::optional<at::Generator> generator) const {
  return transform(base_->rsample(sample_shape, std::move(generator)));
}

at::Tensor TanhNormal::log_prob(const at::Tensor& value) const {
  TORCH_CHECK_VALUE(
      value.defined(), "TanhNormal.log_prob: the value is not defined");
  validate_sample_shape(value, batch_shape(), event_shape());
  TORCH_CHECK_VALUE(
      !at::isnan(value).any().item<bool>(),
      "Expected value argument of shape ",
      shape_string(value.sizes()),
      " to be within the support (Real()) of the distribution TanhNormal, "
      "but found invalid values");
  // torch's TransformedDistribution.log_prob: invert the transforms, subtract
  // their log-Jacobians summed over the event dims, add the base log-prob.
  at::Tensor x;
  at::Tensor ladj;
  if (affine_) {
    const at::Tensor shift = (high_ + low_) / 2;
    const at::Tensor factor = (high_ - low_) / 2;
    at::Tensor t = (value - shift) / factor;
    x = safe_tanh_ ? safe_atanh(t) : t.atanh();
    // ComposeTransform recomputes the middle value from x.
    at::Tensor middle = safe_tanh_ ? safe_tanh(x) : x.tanh();
    ladj = tanh_ladj(x) + at::abs(factor).log().expand(middle.sizes());
  } else {
    x = safe_tanh_ ? safe_atanh(value) : value.atanh();
    ladj = tanh_ladj(x);
  }
  at::Tensor log_prob = 0.0 - sum_rightmost(ladj, event_dims_);
  return log_prob + sum_rightmost(base_->log_prob(x), event_dims_);
}

at::Tensor TanhNormal::mode() const {
  TORCH_CHECK(
      false,
      "The distribution TanhNormal has not analytical mode. Use "
      "ExplorationMode.DETERMINISTIC to get a deterministic sample from it.");
}

at::Tensor TanhNormal::mean() const {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false,
      "TanhNormal does not have a closed form formula for the average. An "
      "estimate of this value can be computed using "
      "dist.sample((N,)).mean(dim=0), where N is a large number of samples.");
}

at::Tensor TanhNormal::deterministic_sample() const {
  return transform(base_->mean());
}

// NOTE [A TanhNormal head without its distribution]
// A continuous actor's every step builds a TanhNormal from (loc, scale),
// draws once and reads the log-prob of the draw: about 35 ATen ops with
// eight `.item()` checks (seven in its and its base Normal's constructors,
// one in log_prob), where the arithmetic of a few rows is a few hundred
// flops. On small CPU parameters (NOTE [Loops for small CPU parameters])
// draw_tanh_normal runs the constructor's checks, rsample and log_prob as
// loops in their op order, with two ops left: the one generator call
// (`normal_` on a tensor of loc's shape, as Normal.rsample makes it) and
// ATen's own tanh on the drawn values, so that a seeded generator gives the
// op path's samples bit for bit (std::tanh may round otherwise than ATen's
// vectorized tanh). The log-prob's atanh, exp, log1p and log, and its sums
// in row order, may round otherwise than torch's kernels in the last bits.
// Parameters need not be contiguous, only row-major: an actor's loc is a
// chunk of its network's output. Parameters that record a graph, expanded
// ones (stride 0), bounds that would broadcast loc up, and any other case
// take the distribution. probabilistic_test pins the two paths together
// (samples equal, log-probs to 1e-5 relative in float and 1e-12 in double,
// and the errors).
namespace {

// Whether the loops can read the bound `t` element by element beside
// `loc`: CPU, contiguous, of loc's dtype or float (so that the sample keeps
// loc's dtype), recording no graph, and one value or the shape of a
// trailing part of loc's, so that element i of loc meets element
// i % t.numel() of the bound.
bool loopable_bound(const at::Tensor& t, const at::Tensor& loc) {
  if (!t.defined() || !t.device().is_cpu() || t.layout() != at::kStrided ||
      !t.is_contiguous() ||
      (t.scalar_type() != at::kFloat && t.scalar_type() != loc.scalar_type()) ||
      (t.requires_grad() && at::GradMode::is_enabled()) ||
      t.dim() > loc.dim()) {
    return false;
  }
  return t.numel() == 1 ||
         std::equal(
             t.sizes().begin(), t.sizes().end(), loc.sizes().end() - t.dim());
}

// Whether the loops can read the parameter `t`: loopable but for
// contiguity, its elements in row-major order without overlap (a chunk of
// the actor's output, as NormalParamExtractor makes loc, is one), so that
// torch's ops on it write row-major outputs as on a contiguous copy.
bool loopable_param(const at::Tensor& t) {
  if (!t.defined() || !t.device().is_cpu() || t.layout() != at::kStrided ||
      (t.scalar_type() != at::kFloat && t.scalar_type() != at::kDouble) ||
      t.dim() < 1 || t.numel() == 0 ||
      (t.requires_grad() && at::GradMode::is_enabled())) {
    return false;
  }
  int64_t span = 1;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    if (t.size(d) == 1) {
      continue;
    }
    if (t.stride(d) < span) {
      return false;
    }
    span = t.stride(d) * t.size(d);
  }
  return true;
}

// The values of `t` (loopable_param) in row-major order: its data when
// contiguous, else gathered into `buffer`.
template <typename T>
const T* row_major_values(
    const at::Tensor& t, c10::SmallVector<T, 64>& buffer) {
  const T* data = t.const_data_ptr<T>();
  if (t.is_contiguous()) {
    return data;
  }
  const int64_t dims = t.dim();
  buffer.resize(static_cast<size_t>(t.numel()));
  c10::SmallVector<int64_t, 6> index(static_cast<size_t>(dims), 0);
  for (T& value : buffer) {
    int64_t offset = 0;
    for (int64_t d = 0; d < dims; ++d) {
      offset += index[d] * t.stride(d);
    }
    value = data[offset];
    for (int64_t d = dims - 1; d >= 0 && ++index[d] == t.size(d); --d) {
      index[d] = 0;
    }
  }
  return buffer.data();
}

// The loops of TanhNormal's constructor, rsample and log_prob, in loc's
// dtype T with bounds of dtype L (float or T), in torch's op order.
template <typename T, typename L>
detail::TanhNormalDraw tanh_normal_loops(
    const at::Tensor& loc_tensor,
    const at::Tensor& scale_tensor,
    const at::Tensor& low_tensor,
    const at::Tensor& high_tensor,
    const TanhNormalOptions& options,
    int64_t event_dims,
    bool with_log_prob,
    const std::optional<at::Generator>& generator) {
  const c10::ScalarType dtype = loc_tensor.scalar_type();
  const int64_t n = loc_tensor.numel();
  c10::SmallVector<T, 64> loc_buffer;
  c10::SmallVector<T, 64> scale_buffer;
  const T* loc = row_major_values(loc_tensor, loc_buffer);
  const T* scale = row_major_values(scale_tensor, scale_buffer);
  const L* low = low_tensor.const_data_ptr<L>();
  const L* high = high_tensor.const_data_ptr<L>();
  const int64_t n_low = low_tensor.numel();
  const int64_t n_high = high_tensor.numel();
  const auto lo = [&](int64_t i) { return low[i % n_low]; };
  const auto hi = [&](int64_t i) { return high[i % n_high]; };
  // (high + low) / 2 and (high - low) / 2, in the bounds' dtype.
  const auto shift = [&](int64_t i) { return (hi(i) + lo(i)) / L(2); };
  const auto factor = [&](int64_t i) { return (hi(i) - lo(i)) / L(2); };

  // The constructor.
  bool ordered = true;
  for (int64_t i = 0; i < n; ++i) {
    ordered = ordered && hi(i) > lo(i);
  }
  TORCH_CHECK(
      ordered,
      "TanhNormal high values must be strictly greater than low values");
  bool affine = false;
  for (int64_t i = 0; i < n_high; ++i) {
    affine = affine || high[i] != L(1);
  }
  for (int64_t i = 0; i < n_low; ++i) {
    affine = affine || low[i] != L(-1);
  }
  at::Tensor base_tensor;
  const T* base = loc;
  if (options.tanh_loc()) {
    const T upscale = static_cast<T>(options.upscale());
    base_tensor = empty_cpu(loc_tensor.sizes(), dtype);
    T* b = base_tensor.mutable_data_ptr<T>();
    for (int64_t i = 0; i < n; ++i) {
      b[i] = loc[i] / upscale;
    }
    at::cpu::tanh_(base_tensor);
    for (int64_t i = 0; i < n; ++i) {
      b[i] = b[i] * upscale;
      if (affine) {
        b[i] = b[i] + static_cast<T>(factor(i));
        b[i] = b[i] + static_cast<T>(lo(i));
      }
    }
    base = b;
  }
  for (int64_t i = 0; i < n; ++i) {
    TORCH_CHECK_VALUE(
        !std::isnan(base[i]),
        "Expected parameter loc of distribution TanhNormal to satisfy the "
        "constraint Real(), but found NaN values");
  }
  for (int64_t i = 0; i < n; ++i) {
    TORCH_CHECK_VALUE(
        scale[i] > static_cast<T>(1e-6),
        "Expected parameter scale (Tensor of shape ",
        shape_string(scale_tensor.sizes()),
        ") of distribution TanhNormal to satisfy the constraint "
        "GreaterThan(lower_bound=1e-06), but found invalid values");
  }

  // rsample: loc + eps * scale, tanh, the clamp, the affine map.
  const at::Tensor eps_tensor =
      empty_cpu(loc_tensor.sizes(), dtype).normal_(0, 1, generator);
  const T* eps = eps_tensor.const_data_ptr<T>();
  detail::TanhNormalDraw out;
  out.sample = recycled_cpu(loc_tensor.sizes(), dtype);
  T* y = out.sample.mutable_data_ptr<T>();
  for (int64_t i = 0; i < n; ++i) {
    const T noise = eps[i] * scale[i];
    y[i] = base[i] + noise;
  }
  at::cpu::tanh_(out.sample);
  const T lim = static_cast<T>(1.0 - resolution(dtype));
  const auto clamped = [&](T v) {
    return v < -lim ? -lim : (v > lim ? lim : v);
  };
  for (int64_t i = 0; i < n; ++i) {
    if (options.safe_tanh()) {
      y[i] = clamped(y[i]);
    }
    if (affine) {
      const T scaled = static_cast<T>(factor(i)) * y[i];
      y[i] = static_cast<T>(shift(i)) + scaled;
    }
  }
  if (!with_log_prob) {
    return out;
  }

  // log_prob: the support check, atanh back, the base Normal's log-density
  // minus the transforms' log-Jacobians, each summed over the event dims.
  for (int64_t i = 0; i < n; ++i) {
    TORCH_CHECK_VALUE(
        !std::isnan(y[i]),
        "Expected value argument of shape ",
        shape_string(out.sample.sizes()),
        " to be within the support (Real()) of the distribution TanhNormal, "
        "but found invalid values");
  }
  const c10::IntArrayRef sizes = loc_tensor.sizes();
  const int64_t rows =
      c10::multiply_integers(sizes.begin(), sizes.end() - event_dims);
  const int64_t per_row = rows == 0 ? 0 : n / rows;
  out.log_prob = recycled_cpu(
      sizes.slice(0, static_cast<size_t>(loc_tensor.dim() - event_dims)),
      dtype);
  T* log_prob = out.log_prob.mutable_data_ptr<T>();
  const T log2 = static_cast<T>(std::log(2.));
  const T log_sqrt_2pi = static_cast<T>(std::log(std::sqrt(2 * M_PI)));
  for (int64_t r = 0; r < rows; ++r) {
    T ladj_sum = 0;
    T base_sum = 0;
    for (int64_t i = r * per_row; i < (r + 1) * per_row; ++i) {
      T t = y[i];
      if (affine) {
        t = (t - static_cast<T>(shift(i))) / static_cast<T>(factor(i));
      }
      const T x = std::atanh(options.safe_tanh() ? clamped(t) : t);
      const T z = static_cast<T>(-2.) * x;
      const T softplus = z > T(20) ? z : std::log1p(std::exp(z));
      T ladj = static_cast<T>(2.) * ((log2 - x) - softplus);
      if (affine) {
        ladj = ladj + static_cast<T>(std::log(std::abs(factor(i))));
      }
      const T d = x - base[i];
      const T var = scale[i] * scale[i];
      const T base_log_prob =
          -(d * d) / (T(2) * var) - std::log(scale[i]) - log_sqrt_2pi;
      ladj_sum += ladj;
      base_sum += base_log_prob;
    }
    log_prob[r] = (T(0) - ladj_sum) + base_sum;
  }
  return out;
}

}  // namespace

namespace detail {

std::optional<TanhNormalDraw> draw_tanh_normal(
    const at::Tensor& loc,
    const at::Tensor& scale,
    const TanhNormalOptions& options,
    bool with_log_prob,
    const std::optional<at::Generator>& generator) {
  // Past a few pages the ops' vectorized kernels win back their overhead.
  constexpr int64_t kMaxValues = 4096;
  const at::Tensor& low = options.low();
  const at::Tensor& high = options.high();
  if (!loopable_param(loc) || !loopable_param(scale) ||
      scale.scalar_type() != loc.scalar_type() ||
      scale.sizes() != loc.sizes() || loc.numel() > kMaxValues ||
      !loopable_bound(low, loc) || !loopable_bound(high, loc) ||
      low.scalar_type() != high.scalar_type()) {
    return std::nullopt;
  }
  const int64_t event_dims =
      options.event_dims().value_or(std::min<int64_t>(1, loc.dim()));
  if (event_dims < 0 || event_dims > loc.dim()) {
    return std::nullopt;
  }
  const bool float_bounds = low.scalar_type() == at::kFloat;
  const auto run = [&](auto t, auto l) {
    using T = decltype(t);
    using L = decltype(l);
    return tanh_normal_loops<T, L>(
        loc, scale, low, high, options, event_dims, with_log_prob, generator);
  };
  if (loc.scalar_type() == at::kFloat) {
    return run(float(), float());
  }
  return float_bounds ? run(double(), float()) : run(double(), double());
}

}  // namespace detail

// --- Delta -----------------------------------------------------------------

Delta::Delta(
    const at::Tensor& param,
    double atol,
    double rtol,
    std::vector<int64_t> batch_shape,
    std::vector<int64_t> event_shape)
    : Distribution({}, {}), param_(param), atol_(atol), rtol_(rtol) {
  TORCH_CHECK_VALUE(
      param.defined(), "Delta: the parameter 'param' is not defined");
  if (batch_shape.empty() && event_shape.empty()) {
    const auto sizes = param.sizes();
    if (!sizes.empty()) {
      batch_shape.assign(sizes.begin(), sizes.end() - 1);
      event_shape.assign(sizes.end() - 1, sizes.end());
    }
  } else {
    std::vector<int64_t> full = batch_shape;
    full.insert(full.end(), event_shape.begin(), event_shape.end());
    TORCH_CHECK_VALUE(
        full == param.sizes().vec(),
        "Delta: batch_shape + event_shape ",
        shape_string(full),
        " differs from the parameter's shape ",
        shape_string(param.sizes()));
  }
  set_shapes(std::move(batch_shape), std::move(event_shape));
}

at::Tensor Delta::sample(
    c10::IntArrayRef sample_shape,
    std::optional<at::Generator> /*generator*/) const {
  std::vector<int64_t> shape(sample_shape.begin(), sample_shape.end());
  shape.insert(shape.end(), param_.sizes().begin(), param_.sizes().end());
  return param_.detach().expand(shape);
}

at::Tensor Delta::rsample(
    c10::IntArrayRef sample_shape,
    std::optional<at::Generator> /*generator*/) const {
  std::vector<int64_t> shape(sample_shape.begin(), sample_shape.end());
  shape.insert(shape.end(), param_.sizes().begin(), param_.sizes().end());
  return param_.expand(shape);
}

at::Tensor Delta::log_prob(const at::Tensor& value) const {
  TORCH_CHECK_VALUE(
      value.defined() && at::is_expandable_to(param_.sizes(), value.sizes()),
      "Delta.log_prob: the value of shape ",
      value.defined() ? shape_string(value.sizes())
                      : std::string("(undefined)"),
      " does not fit the parameter of shape ",
      shape_string(param_.sizes()));
  at::Tensor param = param_.expand_as(value);
  at::Tensor is_equal = at::abs(value - param) < atol_ + rtol_ * at::abs(param);
  for (size_t i = 0; i < event_shape().size(); ++i) {
    is_equal = is_equal.all(-1);
  }
  at::Tensor out = at::zeros_like(is_equal, value.options());
  out.masked_fill_(is_equal, std::numeric_limits<double>::infinity());
  out.masked_fill_(
      is_equal.logical_not(), -std::numeric_limits<double>::infinity());
  return out;
}

at::Tensor Delta::mode() const {
  return param_;
}

at::Tensor Delta::mean() const {
  return param_;
}

at::Tensor Delta::deterministic_sample() const {
  return param_;
}

}  // namespace nn
TENSORDICT_END_NAMESPACE
