// Arithmetic, comparisons and logical ops, leaf by leaf. Every op is a thin
// wrapper over one of a few helpers: `binary` / `binary_` for an operand
// (TensorDict, tensor or scalar), `map_leaves` / `for_each_leaf` for unary
// ops. Non-tensor entries are kept as they are.

#include <ATen/ScalarOps.h>

#include <algorithm>
#include <string_view>
#include <utility>

#include "core/walk.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

using BinaryFn =
    c10::function_ref<at::Tensor(const at::Tensor&, const at::Tensor&)>;
using InplaceFn = c10::function_ref<void(const at::Tensor&, const at::Tensor&)>;
using UnaryFn = c10::function_ref<at::Tensor(const at::Tensor&)>;

// A scalar as a 0-dim tensor that promotes like a Python number, as ATen
// wraps scalars itself: `int_leaf + 0.5` is a float, `float_leaf + 1` stays
// float.
at::Tensor wrap_scalar(const c10::Scalar& s) {
  at::Tensor t = c10::scalar_to_tensor(s);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// Broadcasts the batch size `batch` with `shape` as torch broadcasts shapes
// (aligned from the right); `what` names the operand in the error.
std::vector<int64_t> broadcast_batch(
    c10::IntArrayRef batch, c10::IntArrayRef shape, const char* what) {
  const size_t n = std::max(batch.size(), shape.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t a = i < batch.size() ? batch[batch.size() - 1 - i] : 1;
    const int64_t b = i < shape.size() ? shape[shape.size() - 1 - i] : 1;
    TORCH_CHECK(
        a == b || a == 1 || b == 1,
        "the batch size ",
        batch,
        " does not broadcast with ",
        what,
        " ",
        shape,
        ": size ",
        a,
        " against ",
        b,
        " at dim ",
        -static_cast<int64_t>(i) - 1);
    out[n - 1 - i] = a == 1 ? b : a;
  }
  return out;
}

// An in-place op keeps the batch size: the operand must broadcast to it.
void check_keeps_batch(
    c10::IntArrayRef batch, c10::IntArrayRef shape, const char* what) {
  const std::vector<int64_t> out = broadcast_batch(batch, shape, what);
  TORCH_CHECK(
      c10::IntArrayRef(out) == batch,
      "an in-place op cannot change the batch size: expected ",
      what,
      " that broadcasts to ",
      batch,
      ", got ",
      shape);
}

TensorDict expand_to(const TensorDict& td, c10::IntArrayRef batch) {
  return td.batch_size() == batch ? td : td.expand(batch);
}

// `t`, whose dims line up with the batch dims (right-aligned, `batch_dims`
// of them after broadcasting), viewed with trailing 1s so that it
// broadcasts against a leaf of `leaf_dim` dims.
at::Tensor align(const at::Tensor& t, int64_t leaf_dim, size_t batch_dims) {
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
  sizes.resize(sizes.size() + (leaf_dim - static_cast<int64_t>(batch_dims)), 1);
  return t.reshape(sizes);
}

Value keep_first(
    const Value& a, const Value& /*b*/, c10::IntArrayRef /*shape*/) {
  return a;
}

TensorDict map_leaves(const TensorDict& td, UnaryFn fn) {
  return detail::map_entries(td, fn);
}

void for_each_leaf(
    const TensorDict& td, c10::function_ref<void(const at::Tensor&)> fn) {
  detail::all_tensors(td, [&](const at::Tensor& t) {
    fn(t);
    return true;
  });
}

// `verb` says what the op does, for errors ("add", "compare", ...).
TensorDict binary(
    const TensorDict& td,
    const TensorDict& other,
    BinaryFn fn,
    const char* verb) {
  const std::vector<int64_t> batch = broadcast_batch(
      td.batch_size(), other.batch_size(), "the other TensorDict's batch size");
  return detail::zip_entries(
      expand_to(td, batch), expand_to(other, batch), verb, fn, keep_first);
}

// `fn(leaf, other)`, or `fn(other, leaf)` when `reversed`.
TensorDict binary(
    const TensorDict& td,
    const at::Tensor& other,
    BinaryFn fn,
    const char* /*verb*/,
    bool reversed = false) {
  const std::vector<int64_t> batch =
      broadcast_batch(td.batch_size(), other.sizes(), "a tensor of shape");
  const size_t n = batch.size();
  return map_leaves(expand_to(td, batch), [&](const at::Tensor& leaf) {
    const at::Tensor o = align(other, leaf.dim(), n);
    return reversed ? fn(o, leaf) : fn(leaf, o);
  });
}

TensorDict binary(
    const TensorDict& td,
    const c10::Scalar& other,
    BinaryFn fn,
    const char* /*verb*/,
    bool reversed = false) {
  const at::Tensor o = wrap_scalar(other);
  return map_leaves(td, [&](const at::Tensor& leaf) {
    return reversed ? fn(o, leaf) : fn(leaf, o);
  });
}

void binary_(
    TensorDict& td, const TensorDict& other, InplaceFn fn, const char* verb) {
  check_keeps_batch(
      td.batch_size(), other.batch_size(), "the other TensorDict's batch size");
  // Match every key before writing anything: a KeyError leaves `td` as is.
  std::vector<std::pair<at::Tensor, at::Tensor>> pairs;
  (void)detail::zip_entries(
      td,
      expand_to(other, td.batch_size()),
      verb,
      [&](const at::Tensor& a, const at::Tensor& b) {
        pairs.emplace_back(a, b);
        return a;
      },
      keep_first);
  for (const auto& [a, b] : pairs) {
    fn(a, b);
  }
}

void binary_(
    TensorDict& td,
    const at::Tensor& other,
    InplaceFn fn,
    const char* /*verb*/) {
  check_keeps_batch(td.batch_size(), other.sizes(), "a tensor of shape");
  const size_t n = td.batch_size().size();
  for_each_leaf(td, [&](const at::Tensor& leaf) {
    fn(leaf, align(other, leaf.dim(), n));
  });
}

void binary_(
    TensorDict& td,
    const c10::Scalar& other,
    InplaceFn fn,
    const char* /*verb*/) {
  const at::Tensor o = wrap_scalar(other);
  for_each_leaf(td, [&](const at::Tensor& leaf) { fn(leaf, o); });
}

void check_clamp_bounds(
    const std::optional<c10::Scalar>& min,
    const std::optional<c10::Scalar>& max) {
  TORCH_CHECK(
      min.has_value() || max.has_value(),
      "torch.clamp: At least one of 'min' or 'max' must not be None");
}

}  // namespace

// --- binary ops
// -----------------------------------------------------------------

namespace {

// What an op's errors say it was doing ("cannot add ...").
constexpr const char* verb_of(std::string_view name) {
  return name == "sub"           ? "subtract"
         : name == "mul"         ? "multiply"
         : name == "div"         ? "divide"
         : name == "pow"         ? "raise to a power"
         : name == "logical_and" ? "compute the logical and of"
         : name == "logical_or"  ? "compute the logical or of"
         : name == "lt" || name == "le" || name == "gt" || name == "ge"
             ? "compare"
             : name.data();  // "add", or a new op's own name (a literal)
}

}  // namespace

// The definitions of one TENSORDICT_DICT_MATH_OPS entry, by kind.
#define TENSORDICT_DEFINE(kind, name) TENSORDICT_DEFINE_##kind(name)

// `name(other)` for one operand type, as the tensor op `a.name(b)`: the
// out-of-place half of the arithmetic ops, and the whole of the comparison
// and logical ops.
#define TENSORDICT_DEFINE_OUT_OF_PLACE(name, Operand)                       \
  TensorDict TensorDict::name(const Operand& other) const {                 \
    return binary(                                                          \
        *this,                                                              \
        other,                                                              \
        [](const at::Tensor& a, const at::Tensor& b) { return a.name(b); }, \
        verb_of(#name));                                                    \
  }

// `name(other)` and `name_(other)` for one operand type, as the tensor ops
// `a.name(b)` and `a.name_(b)`.
#define TENSORDICT_DEFINE_BINARY(name, Operand)                         \
  TENSORDICT_DEFINE_OUT_OF_PLACE(name, Operand)                         \
  TensorDict& TensorDict::name##_(const Operand& other) {               \
    binary_(                                                            \
        *this,                                                          \
        other,                                                          \
        [](const at::Tensor& a, const at::Tensor& b) { a.name##_(b); }, \
        verb_of(#name));                                                \
    return *this;                                                       \
  }

// The same for add and sub, which take `alpha`.
#define TENSORDICT_DEFINE_ALPHA(name, Operand)                                \
  TensorDict TensorDict::name(const Operand& other, const c10::Scalar& alpha) \
      const {                                                                 \
    return binary(                                                            \
        *this,                                                                \
        other,                                                                \
        [&](const at::Tensor& a, const at::Tensor& b) {                       \
          return a.name(b, alpha);                                            \
        },                                                                    \
        verb_of(#name));                                                      \
  }                                                                           \
  TensorDict& TensorDict::name##_(                                            \
      const Operand& other, const c10::Scalar& alpha) {                       \
    binary_(                                                                  \
        *this,                                                                \
        other,                                                                \
        [&](const at::Tensor& a, const at::Tensor& b) {                       \
          a.name##_(b, alpha);                                                \
        },                                                                    \
        verb_of(#name));                                                      \
    return *this;                                                             \
  }

#define TENSORDICT_DEFINE_ALPHA_PAIR(name)  \
  TENSORDICT_DEFINE_ALPHA(name, TensorDict) \
  TENSORDICT_DEFINE_ALPHA(name, at::Tensor) \
  TENSORDICT_DEFINE_ALPHA(name, c10::Scalar)

#define TENSORDICT_DEFINE_BINARY_PAIR(name)  \
  TENSORDICT_DEFINE_BINARY(name, TensorDict) \
  TENSORDICT_DEFINE_BINARY(name, at::Tensor) \
  TENSORDICT_DEFINE_BINARY(name, c10::Scalar)

// `name()` and `name_()` as the tensor ops of the same name.
#define TENSORDICT_DEFINE_UNARY_PAIR(name)                                  \
  TensorDict TensorDict::name() const {                                     \
    return map_leaves(*this, [](const at::Tensor& t) { return t.name(); }); \
  }                                                                         \
  TensorDict& TensorDict::name##_() {                                       \
    for_each_leaf(*this, [](const at::Tensor& t) { t.name##_(); });         \
    return *this;                                                           \
  }

// `name(bound)` and `name_(bound)` as the tensor ops of the same name.
#define TENSORDICT_DEFINE_BOUND_PAIR(name)                                \
  TensorDict TensorDict::name(const c10::Scalar& bound) const {           \
    return map_leaves(                                                    \
        *this, [&](const at::Tensor& t) { return t.name(bound); });       \
  }                                                                       \
  TensorDict& TensorDict::name##_(const c10::Scalar& bound) {             \
    for_each_leaf(*this, [&](const at::Tensor& t) { t.name##_(bound); }); \
    return *this;                                                         \
  }

// `name(other)` for dict and scalar operands.
#define TENSORDICT_DEFINE_COMPARE(name)            \
  TENSORDICT_DEFINE_OUT_OF_PLACE(name, TensorDict) \
  TENSORDICT_DEFINE_OUT_OF_PLACE(name, c10::Scalar)

// `name(other)` for a dict operand.
#define TENSORDICT_DEFINE_LOGICAL(name) \
  TENSORDICT_DEFINE_OUT_OF_PLACE(name, TensorDict)

TENSORDICT_DICT_MATH_OPS(TENSORDICT_DEFINE)

#undef TENSORDICT_DEFINE_LOGICAL
#undef TENSORDICT_DEFINE_COMPARE
#undef TENSORDICT_DEFINE_BOUND_PAIR
#undef TENSORDICT_DEFINE_UNARY_PAIR
#undef TENSORDICT_DEFINE_BINARY_PAIR
#undef TENSORDICT_DEFINE_ALPHA_PAIR
#undef TENSORDICT_DEFINE_ALPHA
#undef TENSORDICT_DEFINE_BINARY
#undef TENSORDICT_DEFINE_OUT_OF_PLACE
#undef TENSORDICT_DEFINE

// Compound assignment and the free operators, for each operand type.
#define TENSORDICT_ARITHMETIC_OPERATOR(op, name, Operand)         \
  TensorDict& TensorDict::operator op##=(const Operand& other) {  \
    return name##_(other);                                        \
  }                                                               \
  TensorDict operator op(const TensorDict& a, const Operand& b) { \
    return a.name(b);                                             \
  }

#define TENSORDICT_ARITHMETIC_OPERATORS(op, name)                           \
  TENSORDICT_ARITHMETIC_OPERATOR(op, name, TensorDict)                      \
  TENSORDICT_ARITHMETIC_OPERATOR(op, name, at::Tensor)                      \
  TENSORDICT_ARITHMETIC_OPERATOR(op, name, c10::Scalar)                     \
  TensorDict operator op(const at::Tensor& a, const TensorDict& b) {        \
    return binary(                                                          \
        b,                                                                  \
        a,                                                                  \
        [](const at::Tensor& x, const at::Tensor& y) { return x.name(y); }, \
        #name,                                                              \
        /*reversed=*/true);                                                 \
  }                                                                         \
  TensorDict operator op(const c10::Scalar& a, const TensorDict& b) {       \
    return binary(                                                          \
        b,                                                                  \
        a,                                                                  \
        [](const at::Tensor& x, const at::Tensor& y) { return x.name(y); }, \
        #name,                                                              \
        /*reversed=*/true);                                                 \
  }

TENSORDICT_ARITHMETIC_OPERATORS(+, add)
TENSORDICT_ARITHMETIC_OPERATORS(-, sub)
TENSORDICT_ARITHMETIC_OPERATORS(*, mul)
TENSORDICT_ARITHMETIC_OPERATORS(/, div)

#undef TENSORDICT_ARITHMETIC_OPERATORS
#undef TENSORDICT_ARITHMETIC_OPERATOR

TensorDict TensorDict::operator-() const {
  return neg();
}

TensorDict TensorDict::clamp(
    const std::optional<c10::Scalar>& min,
    const std::optional<c10::Scalar>& max) const {
  check_clamp_bounds(min, max);
  return map_leaves(
      *this, [&](const at::Tensor& t) { return t.clamp(min, max); });
}

TensorDict& TensorDict::clamp_(
    const std::optional<c10::Scalar>& min,
    const std::optional<c10::Scalar>& max) {
  check_clamp_bounds(min, max);
  for_each_leaf(*this, [&](const at::Tensor& t) { t.clamp_(min, max); });
  return *this;
}

// --- comparisons and logical ops
// ----------------------------------------------

// The comparison operators, as their named ops.
#define TENSORDICT_COMPARISON_OPERATOR(name, op)                       \
  TensorDict TensorDict::operator op(const TensorDict& other) const {  \
    return name(other);                                                \
  }                                                                    \
  TensorDict TensorDict::operator op(const c10::Scalar& other) const { \
    return name(other);                                                \
  }

TENSORDICT_COMPARISON_OPERATOR(lt, <)
TENSORDICT_COMPARISON_OPERATOR(le, <=)
TENSORDICT_COMPARISON_OPERATOR(gt, >)
TENSORDICT_COMPARISON_OPERATOR(ge, >=)

#undef TENSORDICT_COMPARISON_OPERATOR

TensorDict TensorDict::logical_not() const {
  return map_leaves(*this, [](const at::Tensor& t) { return t.logical_not(); });
}

TENSORDICT_END_NAMESPACE
