#pragma once

// The one list of TensorClass's members (not API). It expands to both the
// forwarders TensorClass generates (tensordict/tensor_class.h) and the names
// a field may not take without kShadow (detail::is_reserved_field_name), so
// the two cannot drift apart.
//
// Each entry is `X(kind, name)`. The kind says how TensorClass gets the
// member:
//   COPY         generated: `Derived name() const`
//   INPLACE      generated: `Derived& name()`
//   SIZES        generated: `Derived name(c10::IntArrayRef sizes) const`
//   DIMS         generated: `Derived name(c10::IntArrayRef dims) const`
//   REDUCE       generated: `Derived name(const ReduceOptions& = {}) const`
//   UNARY_PAIR   generated: `Derived name() const` and `Derived& name_()`
//   ALPHA_PAIR   generated: `name(other, alpha = 1) const` and
//                `name_(other, alpha = 1)`, `other` a Derived, a tensor or
//                a scalar
//   BINARY_PAIR  generated: `name(other) const` and `name_(other)`, `other`
//                a Derived, a tensor or a scalar
//   BOUND_PAIR   generated: `name(const c10::Scalar&) const` and `name_(...)`
//   COMPARE      generated: `name(other) const`, `other` a Derived or a
//                scalar (the named forms of the comparison operators)
//   LOGICAL      generated: `name(const Derived& other) const`
//   QUERY        generated: `name(args...) const`, returning what
//                TensorDict's `name(args...)` returns (keys, values, ...)
//   SUBSET       generated: `Derived name(args...) const`
//   KEYS         SUBSET, and the same with a braced list of keys first
//   CHECKED      generated: `Derived name(args...) const`, checked against
//                the class as `from_tensordict` checks (the result of the
//                op may not fit it)
//   FACTORY      generated: `static Derived name(args...)`, TensorDict's
//                static `name` checked as `from_tensordict` checks
//   MUTATE       generated: `Derived& name(args...)`
//   TAKE         generated: `name(key, args...)`, non-const, returning
//                what TensorDict's `name(key, args...)` returns
// MUTATE also takes a key first, so a braced key (`{"inner", "x"}`) works.
//   MEMBER       written by hand in TensorClass or TensorClassBase (an
//                unusual signature, or more than forwarding)
//   PYTHON       no C++ member: a member of Python's TensorDict, reserved so
//                that a field cannot hide it once C++ has it (Python itself
//                accepts these names as fields; see docs/python_parity.md)
// A `_PAIR` entry reserves both `name` and `name_`. Each generated member
// forwards to the TensorDict member of the same name and re-wraps the result
// as `Derived` (views where TensorDict gives views; a `_` form returns
// `*this`). The forwarders of the variadic kinds (QUERY to TAKE) take
// TensorDict's arguments, and pass an instance given as an argument as its
// dict, so `tc.update(other_tc)` is `td.update(other_td)`.
//
// TensorDict's own op table (TENSORDICT_DICT_OPS, tensordict/detail/ops.h)
// is part of this list: an op added there is forwarded here too. Adding
// another member that has the shape of a kind is one entry here. A member
// written by hand must be listed as MEMBER: tests/tensor_class_test.cpp checks
// that every MEMBER entry names a member of TensorClass.

#include "tensordict/detail/ops.h"
#include "tensordict/detail/tensor_class_macros.h"

// clang-format off
#define TENSORDICT_TENSORCLASS_OPS(X)                                         \
  /* the handle and its batch (TensorClassBase) */                           \
  X(MEMBER, tensordict)       X(MEMBER, batch_size)     X(MEMBER, shape)      \
  X(MEMBER, batch_dims)       X(MEMBER, ndim)           X(MEMBER, numel)      \
  X(MEMBER, dim)              X(QUERY, size)            X(QUERY, is_empty)    \
  X(QUERY, num_keys)                                                          \
  X(MEMBER, device)           X(MEMBER, names)          X(MEMBER, is_locked)  \
  X(MEMBER, is_shared)        X(MEMBER, is_memmap)      X(MEMBER, saved_path) \
  X(MEMBER, all)              X(MEMBER, any)            X(MEMBER, is_same)    \
  /* construction, fields by name, entries, modules */                        \
  X(MEMBER, tensor_class_info) X(MEMBER, from_tensordict)                     \
  X(MEMBER, to_tensordict)    X(MEMBER, get)            X(MEMBER, is_none)    \
  X(MEMBER, set)              X(MEMBER, setdefault)     X(MEMBER, set_non_tensor) \
  X(QUERY, get_non_tensor)    X(MUTATE, set_)           X(MUTATE, update_)    \
  X(MEMBER, is_non_tensor)    X(MEMBER, rename_key_)    X(MEMBER, set_batch_size) \
  X(MEMBER, from_dict)        X(MEMBER, fromkeys)       X(FACTORY, from_consolidated) \
  X(MEMBER, fields)                                                           \
  X(INPLACE, clear)           X(QUERY, to_dict)         X(QUERY, flatten_keys) \
  X(CHECKED, unflatten_keys)  X(SUBSET, to_module)      X(FACTORY, from_module) \
  /* indexing and shape */                                                   \
  X(MEMBER, index)            X(MEMBER, index_put_)     X(SIZES, view)        \
  X(SIZES, reshape)           X(SIZES, expand)          X(SIZES, repeat)      \
  X(DIMS, permute)            X(DIMS, flip)             X(SUBSET, flatten)    \
  X(SIZES, broadcast_to)      X(SUBSET, expand_as)                            \
  X(MEMBER, unflatten)        X(SUBSET, squeeze)        X(SUBSET, unsqueeze)  \
  X(SUBSET, transpose)        X(SUBSET, narrow)         X(MEMBER, unbind)     \
  X(MEMBER, split)            X(MEMBER, chunk)          X(SUBSET, gather)     \
  X(MEMBER, roll)             X(SUBSET, repeat_interleave) X(MEMBER, pad)     \
  X(SUBSET, masked_select)    X(SUBSET, masked_fill)    X(MUTATE, masked_fill_) \
  X(SUBSET, where)                                                            \
  /* dim names */                                                            \
  X(MEMBER, rename)           X(MEMBER, rename_)        X(MEMBER, rename_by_map) \
  X(MEMBER, refine_names)                                                     \
  /* apply, copies and casts */                                              \
  X(MEMBER, apply)            X(MEMBER, apply_)         X(MEMBER, to)         \
  X(MEMBER, cuda)                                                             \
  X(COPY, cpu)                X(COPY, clone)            X(COPY, copy)         \
  X(MEMBER, copy_)            X(COPY, contiguous)       X(INPLACE, zero_)     \
  X(UNARY_PAIR, detach)       X(COPY, float32)          X(COPY, float64)      \
  X(COPY, half)               X(COPY, bfloat16)         X(COPY, int32)        \
  X(COPY, boolean)            X(COPY, pin_memory)       X(INPLACE, share_memory_) \
  X(MEMBER, requires_grad_)   X(MEMBER, is_contiguous)                        \
  /* TensorDict's op table: arithmetic, comparisons, unary math and       \
     reductions (the operators are in TENSORDICT_DETAIL_TC_OPERATORS) */     \
  TENSORDICT_DICT_OPS(X)                                                      \
  X(COPY, logical_not)        X(MEMBER, clamp)          X(MEMBER, clamp_)     \
  /* locking, storage, state dict, repr */                                   \
  X(INPLACE, lock_)           X(MEMBER, unlock_)        X(MEMBER, memmap)     \
  X(MEMBER, memmap_)          X(MEMBER, save)           X(MEMBER, load_memmap) \
  X(MEMBER, load)             X(MEMBER, state_dict)     X(MEMBER, load_state_dict) \
  X(MEMBER, repr)             X(MEMBER, memmap_async)   X(MEMBER, memmap_like) \
  X(MEMBER, memmap_refresh_)  X(MEMBER, dumps)          X(MEMBER, load_)      \
  X(MEMBER, load_memmap_)     X(MEMBER, memmap_async_)  X(MEMBER, save_async) \
  X(MEMBER, memmap_like_async) X(MEMBER, make_memmap)                        \
  /* keys, structure and updates, with TensorDict's arguments */            \
  X(QUERY, keys)              X(QUERY, values)          X(QUERY, items)       \
  X(QUERY, map)               X(QUERY, map_iter)        X(QUERY, is_consolidated) \
  X(SUBSET, empty)            X(KEYS, select)           X(KEYS, exclude)      \
  X(SUBSET, named_apply)      X(SUBSET, consolidate)                          \
  X(MUTATE, update)           X(MUTATE, del_)           X(MUTATE, fill_)      \
  X(TAKE, pop)                                                                \
  /* Python's TensorDict members that TensorClass does not have */           \
  X(PYTHON, cat)              X(PYTHON, double)         X(PYTHON, float)      \
  X(PYTHON, int)              X(PYTHON, stack)

// The operators TensorClass generates: CMP(op) for a comparison, leaf by
// leaf, with a Derived or a scalar; ARITH(op, compound, name) for an
// arithmetic operator and its compound assignment, the same as `name` and
// `name_` (with a Derived, a tensor or a scalar).
#define TENSORDICT_DETAIL_TC_OPERATORS(CMP, ARITH)                            \
  CMP(==) CMP(!=) CMP(<) CMP(<=) CMP(>) CMP(>=)                               \
  ARITH(+, +=, add) ARITH(-, -=, sub) ARITH(*, *=, mul) ARITH(/, /=, div)
// clang-format on

// --- the names: one string per reserved name -------------------------------

#define TENSORDICT_DETAIL_TC_NAMES(kind, name) \
  TENSORDICT_DETAIL_TC_NAMES_##kind(name)
#define TENSORDICT_DETAIL_TC_NAMES_1(name) #name,
#define TENSORDICT_DETAIL_TC_NAMES_2(name) #name, #name "_",
#define TENSORDICT_DETAIL_TC_NAMES_COPY TENSORDICT_DETAIL_TC_NAMES_1
#define TENSORDICT_DETAIL_TC_NAMES_INPLACE TENSORDICT_DETAIL_TC_NAMES_1
#define TENSORDICT_DETAIL_TC_NAMES_SIZES TENSORDICT_DETAIL_TC_NAMES_1
#define TENSORDICT_DETAIL_TC_NAMES_DIMS TENSORDICT_DETAIL_TC_NAMES_1
#define TENSORDICT_DETAIL_TC_NAMES_REDUCE TENSORDICT_DETAIL_TC_NAMES_1
#define TENSORDICT_DETAIL_TC_NAMES_MEMBER TENSORDICT_DETAIL_TC_NAMES_1
#define TENSORDICT_DETAIL_TC_NAMES_PYTHON TENSORDICT_DETAIL_TC_NAMES_1
#define TENSORDICT_DETAIL_TC_NAMES_COMPARE TENSORDICT_DETAIL_TC_NAMES_1
#define TENSORDICT_DETAIL_TC_NAMES_LOGICAL TENSORDICT_DETAIL_TC_NAMES_1
#define TENSORDICT_DETAIL_TC_NAMES_QUERY TENSORDICT_DETAIL_TC_NAMES_1
#define TENSORDICT_DETAIL_TC_NAMES_SUBSET TENSORDICT_DETAIL_TC_NAMES_1
#define TENSORDICT_DETAIL_TC_NAMES_KEYS TENSORDICT_DETAIL_TC_NAMES_1
#define TENSORDICT_DETAIL_TC_NAMES_MUTATE TENSORDICT_DETAIL_TC_NAMES_1
#define TENSORDICT_DETAIL_TC_NAMES_CHECKED TENSORDICT_DETAIL_TC_NAMES_1
#define TENSORDICT_DETAIL_TC_NAMES_FACTORY TENSORDICT_DETAIL_TC_NAMES_1
#define TENSORDICT_DETAIL_TC_NAMES_TAKE TENSORDICT_DETAIL_TC_NAMES_1
#define TENSORDICT_DETAIL_TC_NAMES_UNARY_PAIR TENSORDICT_DETAIL_TC_NAMES_2
#define TENSORDICT_DETAIL_TC_NAMES_ALPHA_PAIR TENSORDICT_DETAIL_TC_NAMES_2
#define TENSORDICT_DETAIL_TC_NAMES_BINARY_PAIR TENSORDICT_DETAIL_TC_NAMES_2
#define TENSORDICT_DETAIL_TC_NAMES_BOUND_PAIR TENSORDICT_DETAIL_TC_NAMES_2

// --- the C++ members: every name but the PYTHON entries ---------------------

// A PYTHON entry probes to 1, any other kind to 0 (see IS_PAREN).
#define TENSORDICT_DETAIL_TC_PYTHON_PROBE_PYTHON ~, 1,
#define TENSORDICT_DETAIL_TC_MEMBERS(kind, name)                            \
  TENSORDICT_DETAIL_CAT(                                                    \
      TENSORDICT_DETAIL_TC_MEMBERS_,                                        \
      TENSORDICT_DETAIL_SECOND_I(TENSORDICT_DETAIL_TC_PYTHON_PROBE_##kind)) \
  (kind, name)
#define TENSORDICT_DETAIL_TC_MEMBERS_0(kind, name) \
  TENSORDICT_DETAIL_TC_NAMES(kind, name)
#define TENSORDICT_DETAIL_TC_MEMBERS_1(kind, name)

// The operators, spelled as C++ names them ("operator<=", "operator+=").
#define TENSORDICT_DETAIL_TC_OPERATOR_NAME_CMP(op) "operator" #op,
#define TENSORDICT_DETAIL_TC_OPERATOR_NAME_ARITH(op, compound, name) \
  "operator" #op, "operator" #compound,

// --- the forwarders: expanded inside TensorClass ----------------------------
// They use TensorClass's `Derived`, `td_`, `wrap` and `self`.

#define TENSORDICT_DETAIL_TC_FORWARD(kind, name) \
  TENSORDICT_DETAIL_TC_FORWARD_##kind(name)
#define TENSORDICT_DETAIL_TC_FORWARD_MEMBER(name)
#define TENSORDICT_DETAIL_TC_FORWARD_PYTHON(name)

#define TENSORDICT_DETAIL_TC_FORWARD_COPY(name)                      \
  /** Returns TensorDict's `name()` of the fields, as this class. */ \
  [[nodiscard]] Derived name() const {                               \
    return wrap(this->td_.name());                                   \
  }

#define TENSORDICT_DETAIL_TC_FORWARD_INPLACE(name)                   \
  /** Applies TensorDict's `name()` to the fields; returns *this. */ \
  Derived& name() {                                                  \
    this->td_.name();                                                \
    return self();                                                   \
  }

#define TENSORDICT_DETAIL_TC_FORWARD_SIZES(name)             \
  /** Returns TensorDict's `name(sizes)`, as this class. */  \
  [[nodiscard]] Derived name(c10::IntArrayRef sizes) const { \
    return wrap(this->td_.name(sizes));                      \
  }

#define TENSORDICT_DETAIL_TC_FORWARD_DIMS(name)                            \
  /** Returns TensorDict's `name(dims)` over batch dims, as this class. */ \
  [[nodiscard]] Derived name(c10::IntArrayRef dims) const {                \
    return wrap(this->td_.name(dims));                                     \
  }

#define TENSORDICT_DETAIL_TC_FORWARD_REDUCE(name)                       \
  /** Returns TensorDict's `name` reduction of every tensor field. */   \
  [[nodiscard]] Derived name(const ReduceOptions& options = {}) const { \
    return wrap(this->td_.name(options));                               \
  }

#define TENSORDICT_DETAIL_TC_FORWARD_QUERY(name)                       \
  /** Returns TensorDict's `name(args...)` of the fields. */           \
  template <typename... Args>                                          \
  decltype(auto) name(Args&&... args) const {                          \
    return this->td_.name(                                             \
        ::tensordict::detail::tc_unwrap(std::forward<Args>(args))...); \
  }

#define TENSORDICT_DETAIL_TC_FORWARD_SUBSET(name)                       \
  /** Returns TensorDict's `name(args...)`, as this class. */           \
  template <typename... Args>                                           \
  [[nodiscard]] Derived name(Args&&... args) const {                    \
    return wrap(this->td_.name(                                         \
        ::tensordict::detail::tc_unwrap(std::forward<Args>(args))...)); \
  }

#define TENSORDICT_DETAIL_TC_FORWARD_CHECKED(name)                      \
  /** Returns TensorDict's `name(args...)` as this class; throws as     \
     `from_tensordict` if the result does not fit it. */                \
  template <typename... Args>                                           \
  [[nodiscard]] Derived name(Args&&... args) const {                    \
    return checked(this->td_.name(                                      \
        ::tensordict::detail::tc_unwrap(std::forward<Args>(args))...)); \
  }

#define TENSORDICT_DETAIL_TC_FORWARD_FACTORY(name)                      \
  /** Returns TensorDict's static `name(args...)` as this class; throws \
     as `from_tensordict` if the result does not fit it. */             \
  template <typename... Args>                                           \
  [[nodiscard]] static Derived name(Args&&... args) {                   \
    return checked(TensorDict::name(std::forward<Args>(args)...));      \
  }

#define TENSORDICT_DETAIL_TC_FORWARD_KEYS(name)                         \
  TENSORDICT_DETAIL_TC_FORWARD_SUBSET(name)                             \
  /** Returns TensorDict's `name(keys, args...)`, as this class. */     \
  template <typename... Args>                                           \
  [[nodiscard]] Derived name(                                           \
      std::initializer_list<NestedKey> keys, Args&&... args) const {    \
    return wrap(this->td_.name(                                         \
        std::vector<NestedKey>(keys),                                   \
        ::tensordict::detail::tc_unwrap(std::forward<Args>(args))...)); \
  }

#define TENSORDICT_DETAIL_TC_FORWARD_MUTATE(name)                           \
  /** Applies TensorDict's `name(args...)` to the fields; returns *this. */ \
  template <typename... Args>                                               \
  Derived& name(Args&&... args) {                                           \
    this->td_.name(                                                         \
        ::tensordict::detail::tc_unwrap(std::forward<Args>(args))...);      \
    return self();                                                          \
  }                                                                         \
  /** Same, with a key first, braced (`{"inner", "x"}`) or not. */          \
  template <typename... Args>                                               \
  Derived& name(const NestedKey& key, Args&&... args) {                     \
    this->td_.name(                                                         \
        key, ::tensordict::detail::tc_unwrap(std::forward<Args>(args))...); \
    return self();                                                          \
  }

#define TENSORDICT_DETAIL_TC_FORWARD_TAKE(name)                             \
  /** Applies TensorDict's `name(key, args...)` to the fields and           \
     returns its result. */                                                 \
  template <typename... Args>                                               \
  decltype(auto) name(const NestedKey& key, Args&&... args) {               \
    return this->td_.name(                                                  \
        key, ::tensordict::detail::tc_unwrap(std::forward<Args>(args))...); \
  }

#define TENSORDICT_DETAIL_TC_FORWARD_UNARY_PAIR(name) \
  TENSORDICT_DETAIL_TC_FORWARD_COPY(name)             \
  TENSORDICT_DETAIL_TC_FORWARD_INPLACE(name##_)

#define TENSORDICT_DETAIL_TC_FORWARD_ALPHA_PAIR(name)                        \
  /** Returns TensorDict's `name(other, alpha)`, field by field. */          \
  [[nodiscard]] Derived name(                                                \
      const Derived& other, const c10::Scalar& alpha = 1) const {            \
    return wrap(this->td_.name(other.tensordict(), alpha));                  \
  }                                                                          \
  /** Returns TensorDict's `name(other, alpha)` (batch broadcast). */        \
  [[nodiscard]] Derived name(                                                \
      const at::Tensor& other, const c10::Scalar& alpha = 1) const {         \
    return wrap(this->td_.name(other, alpha));                               \
  }                                                                          \
  /** Returns TensorDict's `name(other, alpha)` for every tensor. */         \
  [[nodiscard]] Derived name(                                                \
      const c10::Scalar& other, const c10::Scalar& alpha = 1) const {        \
    return wrap(this->td_.name(other, alpha));                               \
  }                                                                          \
  /** Applies `name(other, alpha)` in place; returns *this. */               \
  Derived& name##_(const Derived& other, const c10::Scalar& alpha = 1) {     \
    this->td_.name##_(other.tensordict(), alpha);                            \
    return self();                                                           \
  }                                                                          \
  /** Applies `name(other, alpha)` in place; returns *this. */               \
  Derived& name##_(const at::Tensor& other, const c10::Scalar& alpha = 1) {  \
    this->td_.name##_(other, alpha);                                         \
    return self();                                                           \
  }                                                                          \
  /** Applies `name(other, alpha)` in place; returns *this. */               \
  Derived& name##_(const c10::Scalar& other, const c10::Scalar& alpha = 1) { \
    this->td_.name##_(other, alpha);                                         \
    return self();                                                           \
  }

// The overloads of an op with an instance and with a scalar, shared by
// BINARY_PAIR, COMPARE and LOGICAL.
#define TENSORDICT_DETAIL_TC_FORWARD_WITH_STRUCT(name)       \
  /** Returns TensorDict's `name(other)`, field by field. */ \
  [[nodiscard]] Derived name(const Derived& other) const {   \
    return wrap(this->td_.name(other.tensordict()));         \
  }
#define TENSORDICT_DETAIL_TC_FORWARD_WITH_SCALAR(name)              \
  /** Returns TensorDict's `name(other)` for every tensor field. */ \
  [[nodiscard]] Derived name(const c10::Scalar& other) const {      \
    return wrap(this->td_.name(other));                             \
  }

#define TENSORDICT_DETAIL_TC_FORWARD_BINARY_PAIR(name)         \
  TENSORDICT_DETAIL_TC_FORWARD_WITH_STRUCT(name)               \
  TENSORDICT_DETAIL_TC_FORWARD_WITH_SCALAR(name)               \
  /** Returns TensorDict's `name(other)` (batch broadcast). */ \
  [[nodiscard]] Derived name(const at::Tensor& other) const {  \
    return wrap(this->td_.name(other));                        \
  }                                                            \
  /** Applies `name(other)` in place; returns *this. */        \
  Derived& name##_(const Derived& other) {                     \
    this->td_.name##_(other.tensordict());                     \
    return self();                                             \
  }                                                            \
  /** Applies `name(other)` in place; returns *this. */        \
  Derived& name##_(const at::Tensor& other) {                  \
    this->td_.name##_(other);                                  \
    return self();                                             \
  }                                                            \
  /** Applies `name(other)` in place; returns *this. */        \
  Derived& name##_(const c10::Scalar& other) {                 \
    this->td_.name##_(other);                                  \
    return self();                                             \
  }

#define TENSORDICT_DETAIL_TC_FORWARD_BOUND_PAIR(name)              \
  /** Returns TensorDict's `name(bound)` of every tensor field. */ \
  [[nodiscard]] Derived name(const c10::Scalar& bound) const {     \
    return wrap(this->td_.name(bound));                            \
  }                                                                \
  /** Applies `name(bound)` in place; returns *this. */            \
  Derived& name##_(const c10::Scalar& bound) {                     \
    this->td_.name##_(bound);                                      \
    return self();                                                 \
  }

#define TENSORDICT_DETAIL_TC_FORWARD_COMPARE(name) \
  TENSORDICT_DETAIL_TC_FORWARD_WITH_STRUCT(name)   \
  TENSORDICT_DETAIL_TC_FORWARD_WITH_SCALAR(name)
#define TENSORDICT_DETAIL_TC_FORWARD_LOGICAL \
  TENSORDICT_DETAIL_TC_FORWARD_WITH_STRUCT

#define TENSORDICT_DETAIL_TC_COMPARISON(op)                           \
  /** Compares field by field: an instance of bool tensors. */        \
  [[nodiscard]] Derived operator op(const Derived& other) const {     \
    return wrap(this->td_ op other.tensordict());                     \
  }                                                                   \
  /** Compares every tensor field to a scalar: bool tensors. */       \
  [[nodiscard]] Derived operator op(const c10::Scalar& other) const { \
    return wrap(this->td_ op other);                                  \
  }

#define TENSORDICT_DETAIL_TC_ARITHMETIC(op, compound, name)           \
  /** Same as `name(other)`. */                                       \
  [[nodiscard]] Derived operator op(const Derived& other) const {     \
    return name(other);                                               \
  }                                                                   \
  /** Same as `name(other)`. */                                       \
  [[nodiscard]] Derived operator op(const at::Tensor& other) const {  \
    return name(other);                                               \
  }                                                                   \
  /** Same as `name(other)`. */                                       \
  [[nodiscard]] Derived operator op(const c10::Scalar& other) const { \
    return name(other);                                               \
  }                                                                   \
  /** Same as `name_(other)`. */                                      \
  Derived& operator compound(const Derived& other) {                  \
    return name##_(other);                                            \
  }                                                                   \
  /** Same as `name_(other)`. */                                      \
  Derived& operator compound(const at::Tensor& other) {               \
    return name##_(other);                                            \
  }                                                                   \
  /** Same as `name_(other)`. */                                      \
  Derived& operator compound(const c10::Scalar& other) {              \
    return name##_(other);                                            \
  }
