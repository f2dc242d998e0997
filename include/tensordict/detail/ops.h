#pragma once

// TensorDict's leafwise op families as one list (not API). Each entry is
// `X(kind, name)`, with the kinds of tensordict/detail/tensor_class_ops.h:
//   UNARY_PAIR   `name()` and `name_()`: torch's op on every leaf
//   ALPHA_PAIR   `name(other, alpha = 1)` and `name_(other, alpha = 1)`,
//                `other` a TensorDict, a tensor or a scalar
//   BINARY_PAIR  `name(other)` and `name_(other)`, the same operands
//   BOUND_PAIR   `name(const c10::Scalar&)` and `name_(...)`
//   COMPARE      `name(other)`, `other` a TensorDict or a scalar
//   LOGICAL      `name(const TensorDict& other)`
//   REDUCE       `name(const ReduceOptions& = {})`
// The lists expand to TensorDict's declarations (tensordict/tensor_dict.h),
// their definitions (src/tensor_dict/math.cpp and reduce.cpp) and
// TensorClass's forwarders (TENSORDICT_TENSORCLASS_OPS), so adding an op of
// one of these shapes is one entry here. Ops of other shapes (clamp,
// logical_not, the operators) are written by hand.

// clang-format off
/// The arithmetic, comparison and unary ops (src/tensor_dict/math.cpp).
#define TENSORDICT_DICT_MATH_OPS(X)                                           \
  X(ALPHA_PAIR, add)          X(ALPHA_PAIR, sub)        X(BINARY_PAIR, mul)   \
  X(BINARY_PAIR, div)         X(BINARY_PAIR, pow)                             \
  X(COMPARE, lt)              X(COMPARE, le)            X(COMPARE, gt)        \
  X(COMPARE, ge)              X(LOGICAL, logical_and)   X(LOGICAL, logical_or) \
  X(UNARY_PAIR, abs)          X(UNARY_PAIR, neg)        X(UNARY_PAIR, exp)    \
  X(UNARY_PAIR, expm1)        X(UNARY_PAIR, log)        X(UNARY_PAIR, log1p)  \
  X(UNARY_PAIR, sqrt)         X(UNARY_PAIR, reciprocal) X(UNARY_PAIR, sigmoid) \
  X(UNARY_PAIR, tanh)         X(UNARY_PAIR, sin)        X(UNARY_PAIR, cos)    \
  X(UNARY_PAIR, sign)         X(UNARY_PAIR, floor)      X(UNARY_PAIR, ceil)   \
  X(UNARY_PAIR, round)        X(UNARY_PAIR, trunc)      X(UNARY_PAIR, tan)    \
  X(UNARY_PAIR, asin)         X(UNARY_PAIR, acos)       X(UNARY_PAIR, atan)   \
  X(UNARY_PAIR, sinh)         X(UNARY_PAIR, cosh)       X(UNARY_PAIR, log2)   \
  X(UNARY_PAIR, log10)        X(UNARY_PAIR, erf)        X(UNARY_PAIR, erfc)   \
  X(UNARY_PAIR, lgamma)       X(UNARY_PAIR, frac)                             \
  X(BOUND_PAIR, clamp_min)    X(BOUND_PAIR, clamp_max)

/// The reductions (src/tensor_dict/reduce.cpp).
#define TENSORDICT_DICT_REDUCE_OPS(X)                                         \
  X(REDUCE, sum)              X(REDUCE, mean)           X(REDUCE, std)        \
  X(REDUCE, var)              X(REDUCE, prod)           X(REDUCE, amax)       \
  X(REDUCE, amin)             X(REDUCE, max)            X(REDUCE, min)

/// Every op of the two lists.
#define TENSORDICT_DICT_OPS(X) TENSORDICT_DICT_MATH_OPS(X) TENSORDICT_DICT_REDUCE_OPS(X)
// clang-format on

// --- declarations, expanded inside class TensorDict -------------------------

#define TENSORDICT_DETAIL_DICT_DECLARE(kind, name) \
  TENSORDICT_DETAIL_DICT_DECLARE_##kind(name)

#define TENSORDICT_DETAIL_DICT_DECLARE_UNARY_PAIR(name)        \
  /** Returns torch's `name` of every leaf. */                 \
  [[nodiscard]] TensorDict name() const;                       \
  /** Applies in-place `name` to every leaf; returns *this. */ \
  TensorDict& name##_();

#define TENSORDICT_DETAIL_DICT_DECLARE_ALPHA_PAIR(name)                       \
  /** Returns `name(leaf, alpha * other)`, leaf by leaf. */                   \
  [[nodiscard]] TensorDict name(                                              \
      const TensorDict& other, const c10::Scalar& alpha = 1) const;           \
  /** Returns `name(leaf, alpha * other)` for every leaf. */                  \
  [[nodiscard]] TensorDict name(                                              \
      const at::Tensor& other, const c10::Scalar& alpha = 1) const;           \
  /** Returns `name(leaf, alpha * other)` for every leaf. */                  \
  [[nodiscard]] TensorDict name(                                              \
      const c10::Scalar& other, const c10::Scalar& alpha = 1) const;          \
  /** Writes `name(leaf, alpha * other)` into every leaf; returns *this. */   \
  TensorDict& name##_(const TensorDict& other, const c10::Scalar& alpha = 1); \
  /** Writes `name(leaf, alpha * other)` into every leaf; returns *this. */   \
  TensorDict& name##_(const at::Tensor& other, const c10::Scalar& alpha = 1); \
  /** Writes `name(leaf, alpha * other)` into every leaf; returns *this. */   \
  TensorDict& name##_(const c10::Scalar& other, const c10::Scalar& alpha = 1);

#define TENSORDICT_DETAIL_DICT_DECLARE_BINARY_PAIR(name)            \
  /** Returns torch's `name(leaf, other)`, leaf by leaf. */         \
  [[nodiscard]] TensorDict name(const TensorDict& other) const;     \
  /** Returns torch's `name(leaf, other)` for every leaf. */        \
  [[nodiscard]] TensorDict name(const at::Tensor& other) const;     \
  /** Returns torch's `name(leaf, other)` for every leaf. */        \
  [[nodiscard]] TensorDict name(const c10::Scalar& other) const;    \
  /** Writes `name(leaf, other)` into every leaf; returns *this. */ \
  TensorDict& name##_(const TensorDict& other);                     \
  /** Writes `name(leaf, other)` into every leaf; returns *this. */ \
  TensorDict& name##_(const at::Tensor& other);                     \
  /** Writes `name(leaf, other)` into every leaf; returns *this. */ \
  TensorDict& name##_(const c10::Scalar& other);

#define TENSORDICT_DETAIL_DICT_DECLARE_BOUND_PAIR(name)               \
  /** Returns torch's `name(leaf, bound)` for every leaf. */          \
  [[nodiscard]] TensorDict name(const c10::Scalar& bound) const;      \
  /** Applies in-place `name(bound)` to every leaf; returns *this. */ \
  TensorDict& name##_(const c10::Scalar& bound);

#define TENSORDICT_DETAIL_DICT_DECLARE_COMPARE(name)            \
  /** Returns torch's `name(leaf, other)`, leaf by leaf. */     \
  [[nodiscard]] TensorDict name(const TensorDict& other) const; \
  /** Returns torch's `name(leaf, other)` for every leaf. */    \
  [[nodiscard]] TensorDict name(const c10::Scalar& other) const;

#define TENSORDICT_DETAIL_DICT_DECLARE_LOGICAL(name)        \
  /** Returns torch's `name(leaf, other)`, leaf by leaf. */ \
  [[nodiscard]] TensorDict name(const TensorDict& other) const;

#define TENSORDICT_DETAIL_DICT_DECLARE_REDUCE(name)             \
  /** Returns torch's `name` of every leaf (see the family). */ \
  [[nodiscard]] TensorDict name(const ReduceOptions& options = {}) const;
