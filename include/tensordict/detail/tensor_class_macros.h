#pragma once

// Preprocessor machinery behind TENSORDICT_FIELDS (not API). A field is
// either a bare name (a tensor field) or a parenthesized `(Type, name)` pair;
// the helpers below tell them apart and visit each with its position.

#define TENSORDICT_DETAIL_CAT(a, b) TENSORDICT_DETAIL_CAT_I(a, b)
#define TENSORDICT_DETAIL_CAT_I(a, b) a##b
#define TENSORDICT_DETAIL_EXPAND(x) x

// TENSORDICT_DETAIL_IS_PAREN(x) is 1 when x is `( ... )`, else 0.
#define TENSORDICT_DETAIL_SECOND(a, b, ...) b
#define TENSORDICT_DETAIL_SECOND_I(...) \
  TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_SECOND(__VA_ARGS__, 0, 0))
#define TENSORDICT_DETAIL_PAREN_PROBE(...) ~, 1,
#define TENSORDICT_DETAIL_IS_PAREN(x) \
  TENSORDICT_DETAIL_SECOND_I(TENSORDICT_DETAIL_PAREN_PROBE x)

// The type and the name of a field, bare or parenthesized as `(type, name)`
// or `(type, name, default)`.
#define TENSORDICT_DETAIL_PAIR_TYPE(type, ...) type
#define TENSORDICT_DETAIL_PAIR_NAME(...) \
  TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_PAIR_NAME_I(__VA_ARGS__, ~))
#define TENSORDICT_DETAIL_PAIR_NAME_I(type, name, ...) name
#define TENSORDICT_DETAIL_PAIR_DEFAULT(type, name, value) value
#define TENSORDICT_DETAIL_TYPE_0(x) ::at::Tensor
#define TENSORDICT_DETAIL_TYPE_1(x) TENSORDICT_DETAIL_PAIR_TYPE x
#define TENSORDICT_DETAIL_NAME_0(x) x
#define TENSORDICT_DETAIL_NAME_1(x) TENSORDICT_DETAIL_PAIR_NAME x
#define TENSORDICT_DETAIL_FIELD_TYPE(x)                       \
  TENSORDICT_DETAIL_CAT(                                      \
      TENSORDICT_DETAIL_TYPE_, TENSORDICT_DETAIL_IS_PAREN(x)) \
  (x)
#define TENSORDICT_DETAIL_FIELD_NAME(x)                       \
  TENSORDICT_DETAIL_CAT(                                      \
      TENSORDICT_DETAIL_NAME_, TENSORDICT_DETAIL_IS_PAREN(x)) \
  (x)

// Counts up to 32 arguments.
#define TENSORDICT_DETAIL_COUNT(...)                  \
  TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_COUNT_I( \
      __VA_ARGS__,                                    \
      32,                                             \
      31,                                             \
      30,                                             \
      29,                                             \
      28,                                             \
      27,                                             \
      26,                                             \
      25,                                             \
      24,                                             \
      23,                                             \
      22,                                             \
      21,                                             \
      20,                                             \
      19,                                             \
      18,                                             \
      17,                                             \
      16,                                             \
      15,                                             \
      14,                                             \
      13,                                             \
      12,                                             \
      11,                                             \
      10,                                             \
      9,                                              \
      8,                                              \
      7,                                              \
      6,                                              \
      5,                                              \
      4,                                              \
      3,                                              \
      2,                                              \
      1,                                              \
      0))
#define TENSORDICT_DETAIL_COUNT_I( \
    _1,                            \
    _2,                            \
    _3,                            \
    _4,                            \
    _5,                            \
    _6,                            \
    _7,                            \
    _8,                            \
    _9,                            \
    _10,                           \
    _11,                           \
    _12,                           \
    _13,                           \
    _14,                           \
    _15,                           \
    _16,                           \
    _17,                           \
    _18,                           \
    _19,                           \
    _20,                           \
    _21,                           \
    _22,                           \
    _23,                           \
    _24,                           \
    _25,                           \
    _26,                           \
    _27,                           \
    _28,                           \
    _29,                           \
    _30,                           \
    _31,                           \
    _32,                           \
    n,                             \
    ...)                           \
  n

// TENSORDICT_DETAIL_FOR_EACH(m, a, b, c) is m(0, a) m(1, b) m(2, c).
#define TENSORDICT_DETAIL_FE_1(m, i, x) m(i, x)
#define TENSORDICT_DETAIL_FE_2(m, i, x, ...) \
  m(i, x)                                    \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_1(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_3(m, i, x, ...) \
  m(i, x)                                    \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_2(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_4(m, i, x, ...) \
  m(i, x)                                    \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_3(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_5(m, i, x, ...) \
  m(i, x)                                    \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_4(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_6(m, i, x, ...) \
  m(i, x)                                    \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_5(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_7(m, i, x, ...) \
  m(i, x)                                    \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_6(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_8(m, i, x, ...) \
  m(i, x)                                    \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_7(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_9(m, i, x, ...) \
  m(i, x)                                    \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_8(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_10(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_9(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_11(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_10(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_12(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_11(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_13(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_12(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_14(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_13(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_15(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_14(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_16(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_15(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_17(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_16(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_18(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_17(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_19(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_18(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_20(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_19(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_21(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_20(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_22(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_21(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_23(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_22(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_24(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_23(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_25(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_24(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_26(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_25(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_27(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_26(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_28(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_27(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_29(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_28(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_30(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_29(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_31(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_30(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FE_32(m, i, x, ...) \
  m(i, x)                                     \
      TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_FE_31(m, i + 1, __VA_ARGS__))
#define TENSORDICT_DETAIL_FOR_EACH(m, ...)                          \
  TENSORDICT_DETAIL_EXPAND(TENSORDICT_DETAIL_CAT(                   \
      TENSORDICT_DETAIL_FE_, TENSORDICT_DETAIL_COUNT(__VA_ARGS__))( \
      m, 0, __VA_ARGS__))

// The members TENSORDICT_FIELDS generates for one field (used inside a
// TensorClass, where kFlags, kParentFieldCount, read_field and write_field
// are in scope).

#define TENSORDICT_DETAIL_STR(x) TENSORDICT_DETAIL_STR_I(x)
#define TENSORDICT_DETAIL_STR_I(x) #x

#define TENSORDICT_DETAIL_ACCESSORS(i, field) \
  TENSORDICT_DETAIL_ACCESSORS_I(              \
      i,                                      \
      TENSORDICT_DETAIL_FIELD_TYPE(field),    \
      TENSORDICT_DETAIL_FIELD_NAME(field))
#define TENSORDICT_DETAIL_ACCESSORS_I(FieldIndex, FieldType, FieldName) \
  TENSORDICT_DETAIL_ACCESSORS_II(FieldIndex, FieldType, FieldName)
#define TENSORDICT_DETAIL_ACCESSORS_II(FieldIndex, FieldType, FieldName)     \
  static_assert(                                                             \
      ::tensordict::has_flag(kFlags, ::tensordict::ClassFlags::kShadow) ||   \
          !::tensordict::detail::is_reserved_field_name(#FieldName),         \
      "a TensorClass field has the name of a TensorClass member; to allow "  \
      "it, pass ClassFlags::kShadow");                                       \
  static_assert(                                                             \
      !::tensordict::has_flag(                                               \
          kFlags, ::tensordict::ClassFlags::kTensorOnly) ||                  \
          ::tensordict::detail::FieldTraits<FieldType>::tensor_like,         \
      "tensor_only requires every field to be a tensor, a TensorDict or a "  \
      "TensorClass");                                                        \
                                                                             \
 public:                                                                     \
  /** Returns the field; throws ValueError if it is unset (not optional). */ \
  ::tensordict::detail::read_type_t<FieldType, kFlags> FieldName() const {   \
    return this->template read_field<FieldType>(                             \
        kParentFieldCount + (FieldIndex));                                   \
  }                                                                          \
  /** Sets the field (checked against the batch size); not for frozen. */    \
  template <typename TensordictFieldT = FieldType>                           \
  tensor_class_self& set_##FieldName(                                        \
      const typename ::tensordict::detail::TypeIdentity<                     \
          TensordictFieldT>::type& value) {                                  \
    return this->template write_field<TensordictFieldT>(                     \
        kParentFieldCount + (FieldIndex), ::tensordict::FieldArg(value));    \
  }

// A field's parts: 1 (a bare name), 2 (`(type, name)`) or 3 (with a
// default).
#define TENSORDICT_DETAIL_ARITY_0(x) 1
#define TENSORDICT_DETAIL_ARITY_1(x) TENSORDICT_DETAIL_COUNT x
#define TENSORDICT_DETAIL_FIELD_ARITY(x)                       \
  TENSORDICT_DETAIL_CAT(                                       \
      TENSORDICT_DETAIL_ARITY_, TENSORDICT_DETAIL_IS_PAREN(x)) \
  (x)

#define TENSORDICT_DETAIL_ADD_FIELD(i, field)                             \
  TENSORDICT_DETAIL_CAT(                                                  \
      TENSORDICT_DETAIL_ADD_FIELD_, TENSORDICT_DETAIL_FIELD_ARITY(field)) \
  (field)
#define TENSORDICT_DETAIL_ADD_FIELD_1(field)      \
  add_field<TENSORDICT_DETAIL_FIELD_TYPE(field)>( \
      fields, TENSORDICT_DETAIL_STR(TENSORDICT_DETAIL_FIELD_NAME(field)));
#define TENSORDICT_DETAIL_ADD_FIELD_2 TENSORDICT_DETAIL_ADD_FIELD_1
// The default is evaluated at each construction that leaves the field out,
// so a tensor default is a new tensor every time (Python shares one default
// object among instances; see docs/python_parity.md).
#define TENSORDICT_DETAIL_ADD_FIELD_3(field)                               \
  add_field<TENSORDICT_DETAIL_FIELD_TYPE(field)>(                          \
      fields,                                                              \
      TENSORDICT_DETAIL_STR(TENSORDICT_DETAIL_FIELD_NAME(field)),          \
      []() -> ::tensordict::FieldArg {                                     \
        return ::tensordict::FieldArg(TENSORDICT_DETAIL_FIELD_TYPE(field)( \
            TENSORDICT_DETAIL_PAIR_DEFAULT field));                        \
      });

// One parameter of the positional constructor (a trailing comma: the batch
// size follows) and the field it initializes.
#define TENSORDICT_DETAIL_POSITIONAL_ARG(field) \
  TENSORDICT_DETAIL_CAT(tensordict_arg_, TENSORDICT_DETAIL_FIELD_NAME(field))
#define TENSORDICT_DETAIL_POSITIONAL_PARAM(i, field) \
  const TENSORDICT_DETAIL_FIELD_TYPE(field) &        \
      TENSORDICT_DETAIL_POSITIONAL_ARG(field),
#define TENSORDICT_DETAIL_POSITIONAL_INIT(i, field)               \
  ::tensordict::FieldInit(                                        \
      TENSORDICT_DETAIL_STR(TENSORDICT_DETAIL_FIELD_NAME(field)), \
      ::tensordict::FieldArg(TENSORDICT_DETAIL_POSITIONAL_ARG(field))),
