#pragma once

/// @file
/// TensorClass: typed, dataclass-like structs over a TensorDict handle, the
/// C++ form of Python's `@tensorclass` / `TensorClass`.
//
// NOTE [TensorClass design]
// A TensorClass is a typed view: its only state is a TensorDict handle that
// holds the fields as entries (tensors, nested dicts, NonTensorData), so
// every TensorDict operation works on it and the struct's ops just re-wrap
// the result in the struct's type. `TENSORDICT_FIELDS(Type, obs, action,
// (std::string, task))` declares the fields in one place: a bare name is a
// tensor field, a `(Type, name)` pair any other kind. The macro generates,
// per field, a getter `name()` and a setter `set_name(value)`, and the class
// description that construction, `from_tensordict`, `repr` and memmap use.
//
// Field types and how they are stored (Python's rules for its annotations):
//   at::Tensor             a tensor entry (numbers become 0-dim tensors)
//   TensorDict             a nested dict
//   another TensorClass    a nested dict; read back as that class
//   std::string, Json      NonTensorData
//   int64_t, double, bool  by default a 0-dim tensor (NonTensorData when the
//                          batch has dims, as Python does) read back as a
//                          tensor; with kAutocast or kNocast, NonTensorData
//                          read back as the declared C++ type
//   std::optional<T>       T, or unset (Python's None): no entry at all
// A field that is not optional must be given at construction unless it
// declares a default, `(int64_t, n, 3)` (Python's `n: int = 3`), which the
// named constructor stores when the field is left out (not
// `from_tensordict`, nor the default constructor, as in Python); reading an
// unset field throws ValueError naming it.
//
// `state_dict()` is keyed by field names, with the class name and the
// non-tensor fields in the metadata, as Python's (`load_state_dict` also
// reads Python's older `_tensordict` / `_non_tensordict` form);
// `lazy_stack(vector<T>)` gives a LazyStackedTensorClass<T>, Python's
// `Cls.lazy_stack`, whose elements keep their own field shapes.
//
// An instance is also a TensorDict entry, as in Python: `td.set("step",
// step)` stores its dict (aliased, marked with its registered Python class,
// so a save writes Python's layout) and `get_as<Step>(td, "step")` reads it
// back as the class.
//
// Flags (`ClassFlags`, the second template argument):
//   kFrozen     setters do not compile; instances are locked
//   kTensorOnly every field is a tensor, a TensorDict or a TensorClass
//               (checked at compile time); reads take the fast path
//   kAutocast   non-tensor fields are cast to and read as their C++ type
//   kNocast     numbers are stored as given (NonTensorData), not as tensors
//   kShadow     allows field names that TensorClass methods use
//               (`batch_size`, `device`, `names`, `get`, ...); the field's
//               accessor then hides the method
// kAutocast, kNocast and kTensorOnly are mutually exclusive and every rule
// above is a static_assert. A derived class (`TensorClass<Derived, Flags,
// Parent>`) inherits its parent's fields and flags; with explicit flags, a
// class deriving from a frozen one must be frozen too.
//
// Differences from Python, for C++'s sake:
// - Fields are read with `obs()` and written with `set_obs(x)`; the
//   positional constructor takes every field (optional ones included, as
//   `std::nullopt`), see TENSORDICT_FIELDS.
// - Python's `data` is allowed as a field name (as in Python 0.15);
//   `tensordict` and `to_tensordict` are reserved instead of `_tensordict`,
//   and so is every TensorClass member name (`index`, `get`, `lt`, `fields`,
//   ...) unless the class takes kShadow, where Python accepts them as field
//   names: a field's accessor would hide the member.
// - A field default is evaluated for each instance (Python shares one).
// - A string or number field that a stack turned into a NonTensorStack reads
//   back as its value when all elements agree, else throws TypeError (Python
//   returns the list); `get(name)` gives the stack.
// - The forwarded TensorDict members keep TensorDict's C++ signatures:
//   `size()` is the batch size and `size(dim)` one dim of it, as in Python;
//   `num_keys()` counts the set fields. `flatten_keys` returns the
//   flat TensorDict (Python raises ValueError: flat keys are no fields);
//   `unflatten_keys`, `from_module` and Python alike check the result.
// - `rename_key_` and `make_memmap` take fields only (or keys inside a
//   TensorDict or TensorClass field) and refuse an entry the field cannot
//   hold: Python writes any key (deprecated) and any entry, which a typed
//   getter could no longer read.
// - `save()` and `memmap()` with no prefix map anonymous shared memory (no
//   file, `saved_path()` nullopt), as Python's file-less
//   MemoryMappedTensors; `make_memmap` needs a directory, so it refuses
//   such an instance, which Python accepts.
// - The batch size is set with `set_batch_size(...)` (Python's property
//   setter) and the field names are `fields()` (Python's `Cls.fields()` and
//   `dataclasses.fields`).
//
// The TensorDict ops a TensorClass forwards, and so the names a field may
// not take without kShadow, come from one list, TENSORDICT_TENSORCLASS_OPS
// in tensordict/detail/tensor_class_ops.h: forwarding an op is an entry
// there, and the field-name check follows by construction.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/ArrayRef.h>

#include <cstddef>
#include <cstdint>
#include <future>
#include <initializer_list>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "tensordict/detail/tensor_class_base.h"
#include "tensordict/detail/tensor_class_impl.h"
#include "tensordict/detail/tensor_class_macros.h"
#include "tensordict/detail/tensor_class_ops.h"
#include "tensordict/detail/tensor_class_traits.h"
#include "tensordict/errors.h"
#include "tensordict/lazy_stacked_tensor_class.h"
#include "tensordict/options.h"
#include "tensordict/state_dict.h"
#include "tensordict/tensor_dict.h"
#include "tensordict/value.h"

namespace at::indexing {
struct TensorIndex;
}  // namespace at::indexing

TENSORDICT_BEGIN_NAMESPACE

/// A value given to a field, before it is stored: a tensor, a dict, a
/// TensorClass, a string or JSON value, a number, or nothing (Python's
/// None, from `nullptr` or an empty `std::optional`).
class TENSORDICT_API FieldArg {
 public:
  /// The alternatives, in order; `std::monostate` is None. A string or JSON
  /// value is held shared and never null (as NonTensorData holds its
  /// value), so this header needs no complete Json.
  using Variant = std::variant<
      std::monostate,
      at::Tensor,
      TensorDict,
      std::shared_ptr<const Json>,
      int64_t,
      double,
      bool>;

  /// Holds None.
  FieldArg(std::nullptr_t) {}  // NOLINT(google-explicit-constructor)
  /// Holds None.
  FieldArg(std::nullopt_t) {}  // NOLINT(google-explicit-constructor)
  /// Holds a tensor (None if undefined).
  FieldArg(at::Tensor tensor);  // NOLINT(google-explicit-constructor)
  /// Holds a dict (aliased).
  FieldArg(TensorDict td);  // NOLINT(google-explicit-constructor)
  /// Holds a string.
  FieldArg(const char* text);  // NOLINT(google-explicit-constructor)
  /// Holds a string.
  FieldArg(std::string text);  // NOLINT(google-explicit-constructor)
  /// Holds a JSON value (None if null).
  FieldArg(const Json& value);  // NOLINT(google-explicit-constructor)
  /// Holds a number as given (bool, int64_t or double).
  template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  FieldArg(T number) {  // NOLINT(google-explicit-constructor)
    if constexpr (std::is_same_v<T, bool>) {
      value_ = number;
    } else if constexpr (std::is_integral_v<T>) {
      value_ = static_cast<int64_t>(number);
    } else {
      value_ = static_cast<double>(number);
    }
  }
  /// Holds a TensorClass (its dict, aliased, and its class).
  template <
      typename TC,
      // Json first: std::is_base_of needs a complete TC, and json_fwd.hpp
      // leaves Json incomplete (clang says so; gcc does not look).
      std::enable_if_t<
          std::conjunction_v<
              std::negation<std::is_same<TC, Json>>,
              std::is_base_of<detail::TensorClassRoot, TC>>,
          int> = 0>
  FieldArg(const TC& value)  // NOLINT(google-explicit-constructor)
      : value_(value.tensordict()), class_info_(&TC::tensor_class_info()) {}
  /// Holds the optional's value, or None.
  template <typename T>
  FieldArg(
      const std::optional<T>& value) {  // NOLINT(google-explicit-constructor)
    if (value) {
      *this = FieldArg(*value);
    }
  }

  /// Returns the value.
  const Variant& value() const noexcept {
    return value_;
  }
  /// Returns the class of a TensorClass value, else null.
  const detail::ClassInfo* class_info() const noexcept {
    return class_info_;
  }
  /// Returns true for None.
  bool is_none() const noexcept {
    return value_.index() == 0;
  }

 private:
  Variant value_;
  const detail::ClassInfo* class_info_ = nullptr;
};

/// One named field of a TensorClass constructor: `{"obs", tensor}`.
class TENSORDICT_API FieldInit {
 public:
  /// Pairs a field name with its value.
  FieldInit(std::string name, FieldArg value)
      : name_(std::move(name)), value_(std::move(value)) {}
  /// Returns the field name.
  const std::string& name() const noexcept {
    return name_;
  }
  /// Returns the value.
  const FieldArg& value() const noexcept {
    return value_;
  }

 private:
  std::string name_;
  FieldArg value_;
};

/// The base of a typed, dataclass-like struct whose fields live in a
/// TensorDict: Python's `TensorClass`. `Derived` is the struct itself
/// (CRTP), `Flags` its `ClassFlags`, `Parent` a TensorClass it extends.
/// Every op returns `Derived`. See NOTE [TensorClass design].
///
/// Like TensorDict, an instance is a handle: copies alias the same fields,
/// `clone()` is deep, and const is shallow. Thread safety is TensorDict's.
///
/// Example:
/// ```
///   struct Step : tensordict::TensorClass<Step> {
///     TENSORDICT_FIELDS(Step, obs, action, (std::string, task))
///   };
///   Step s({{"obs", torch::zeros({4, 3})}, {"action", torch::ones({4})},
///           {"task", "reach"}}, /*batch_size=*/{4});
///   Step first = s.index({0});     // obs() is [3]
/// ```
template <
    typename Derived,
    ClassFlags Flags = ClassFlags::kInherit,
    typename Parent = void>
class TensorClass : public std::conditional_t<
                        std::is_void_v<Parent>,
                        detail::TensorClassBase,
                        Parent> {
  using Base = std::
      conditional_t<std::is_void_v<Parent>, detail::TensorClassBase, Parent>;

 public:
  /// The class's flags: its own, or with the parent's.
  static constexpr ClassFlags kFlags = detail::resolve_flags<Flags, Parent>();
  /// The number of fields the parent classes declare.
  static constexpr size_t kParentFieldCount = [] {
    if constexpr (std::is_void_v<Parent>) {
      return size_t{0};
    } else {
      return Parent::kFieldCount;
    }
  }();

  static_assert(
      !(has_flag(kFlags, ClassFlags::kAutocast) &&
        has_flag(kFlags, ClassFlags::kNocast)),
      "autocast is exclusive with nocast");
  static_assert(
      !(has_flag(kFlags, ClassFlags::kTensorOnly) &&
        (has_flag(kFlags, ClassFlags::kAutocast) ||
         has_flag(kFlags, ClassFlags::kNocast))),
      "tensor_only and autocast or nocast are exclusive features");
  static_assert(
      std::is_void_v<Parent> || is_tensor_class_v<Parent>,
      "the parent of a TensorClass must be a TensorClass");
  static_assert(
      [] {
        if constexpr (std::is_void_v<Parent>) {
          return true;
        } else {
          return Flags == ClassFlags::kInherit ||
                 !has_flag(Parent::kFlags, ClassFlags::kFrozen) ||
                 has_flag(Flags, ClassFlags::kFrozen);
        }
      }(),
      "cannot inherit non-frozen TensorClass from a frozen one");

  /// The TensorClass layer of `Derived`, for its macro.
  using tensor_class_base = TensorClass;
  /// The struct type that ops return.
  using tensor_class_self = Derived;

  /// Makes an instance with no batch dims whose fields are all unset.
  TensorClass() : Base(TensorDict(), detail::WrapTag{}) {
    if constexpr (has_flag(kFlags, ClassFlags::kFrozen)) {
      this->td_.lock_();
    }
  }
  /// Makes an instance from named fields, as Python's `Cls(obs=..., ...,
  /// batch_size=..., device=..., names=...)`. Throws KeyError for a name
  /// that is not a field, TypeError for a missing required field or a
  /// value of the wrong kind, and what `TensorDict::set` throws (with the
  /// field name) when a value does not fit the batch size.
  TensorClass(  // NOLINT(google-explicit-constructor)
      std::initializer_list<FieldInit> fields,
      c10::IntArrayRef batch_size = {},
      std::optional<c10::Device> device = std::nullopt,
      const DimNames& names = {})
      : Base(
            detail::tc_construct(
                Derived::tensor_class_info(),
                c10::ArrayRef<FieldInit>(fields.begin(), fields.size()),
                batch_size,
                device,
                names),
            detail::WrapTag{}) {}
  /// Same as the initializer-list form, for fields built at run time.
  explicit TensorClass(
      const std::vector<FieldInit>& fields,
      c10::IntArrayRef batch_size = {},
      std::optional<c10::Device> device = std::nullopt,
      const DimNames& names = {})
      : Base(
            detail::tc_construct(
                Derived::tensor_class_info(),
                fields,
                batch_size,
                device,
                names),
            detail::WrapTag{}) {}
  /// Wraps a dict without checks; not API (use `from_tensordict`).
  TensorClass(TensorDict td, detail::WrapTag tag) : Base(std::move(td), tag) {}

  /// Returns the description of the class (built once); not API.
  static detail::ClassInfo& tensor_class_info() {
    static detail::ClassInfo info = [] {
      detail::ClassInfo out;
      out.name = Derived::tensor_class_name();
      out.flags = kFlags;
      if constexpr (!std::is_void_v<Parent>) {
        out.fields = Parent::tensor_class_info().fields;
      }
      Derived::tensor_class_own_fields(out.fields);
      return out;
    }();
    return info;
  }

  /// Wraps `td` as this class without copying, as Python's
  /// `from_tensordict`: throws ValueError listing the keys that are not
  /// fields, TypeError when an entry's kind does not fit its field.
  [[nodiscard]] static Derived from_tensordict(TensorDict td) {
    detail::tc_check(td, Derived::tensor_class_info());
    return wrap(std::move(td));
  }
  /// Wraps `td` with the fields of `non_tensordict` added, as Python's
  /// `from_tensordict(td, non_tensordict)`: `{{"task", "reach"}}`. A None
  /// value is skipped; a field `td` already holds is a KeyError ("... is
  /// present in both tensor and non-tensor dicts."), a name that is not a
  /// field a ValueError. The values are stored by the class's rules, in a
  /// shallow copy of `td` (C++ keeps every field in the dict: `td` itself is
  /// not changed), so the result aliases `td`'s entries but not `td`.
  /// Python's deprecated `safe` has no C++ form: `td` is always a dict.
  [[nodiscard]] static Derived from_tensordict(
      TensorDict td, c10::ArrayRef<FieldInit> non_tensordict) {
    return wrap(detail::tc_from_tensordict(
        std::move(td), Derived::tensor_class_info(), non_tensordict));
  }
  /// Same as the ArrayRef form, for a braced list.
  [[nodiscard]] static Derived from_tensordict(
      TensorDict td, std::initializer_list<FieldInit> non_tensordict) {
    return from_tensordict(
        std::move(td),
        c10::ArrayRef<FieldInit>(
            non_tensordict.begin(), non_tensordict.size()));
  }
  /// Builds an instance from key/value pairs, as Python's
  /// `Cls.from_dict(d, auto_batch_size=..., batch_size=...)`: the dict of
  /// `TensorDict::from_dict(items, options)`, checked as `from_tensordict`
  /// (ValueError listing the keys that are not fields, TypeError for an
  /// entry that does not fit its field). Fields left out are unset.
  [[nodiscard]] static Derived from_dict(
      const std::vector<Item>& items, const FromDictOptions& options = {}) {
    return checked(TensorDict::from_dict(items, options));
  }
  /// Makes an instance with no batch dims whose fields named in `keys` all
  /// hold `value` (aliased), as Python's `Cls.fromkeys(keys, value)`; throws
  /// like `from_tensordict` for a key that is not a field or a field that
  /// takes no tensor.
  [[nodiscard]] static Derived fromkeys(
      const std::vector<NestedKey>& keys, const at::Tensor& value) {
    return checked(TensorDict::fromkeys(keys, value));
  }
  /// Same, each field holding the 0-dim tensor of `value` (int64 for
  /// integers, the default dtype for floats), Python's
  /// `Cls.fromkeys(keys, 0)`.
  [[nodiscard]] static Derived fromkeys(
      const std::vector<NestedKey>& keys, const c10::Scalar& value = 0) {
    return checked(TensorDict::fromkeys(keys, value));
  }
  /// Returns the field names in declaration order, the parents' first: the
  /// names of Python's `Cls.fields()` (deprecated there for
  /// `dataclasses.fields(Cls)`, which gives the same order).
  [[nodiscard]] static std::vector<std::string> fields() {
    return detail::tc_field_names(Derived::tensor_class_info());
  }
  /// Returns a new TensorDict holding a deep copy of the fields, as
  /// Python's `to_tensordict(retain_none=...)`; `tensordict()` gives the
  /// dict itself. Unset fields are left out, or with `retain_none` written
  /// as NonTensorData(null) (Python's `None` entries), at every class level.
  /// Python's default `retain_none=None` drops them, as `false` does.
  [[nodiscard]] TensorDict to_tensordict(bool retain_none = false) const {
    return detail::tc_to_tensordict(
        this->td_, Derived::tensor_class_info(), retain_none);
  }

  /// Returns the field named `name` as an entry; throws KeyError for a name
  /// that is not a field and ValueError when the field is unset.
  Value get(std::string_view name) const {
    const auto& info = Derived::tensor_class_info();
    return detail::tc_get(this->td_, info, detail::tc_field_index(info, name));
  }
  /// Returns the entry at a nested key whose first part names a field,
  /// Python's chained getattr: `tc.get({"inner", "x"})` is
  /// `tc.inner.x`. Throws KeyError for a first part that is not a field or
  /// a missing entry, ValueError when the field is unset.
  Value get(std::initializer_list<std::string_view> key) const {
    TORCH_CHECK_VALUE(key.size() > 0, "get: the key is empty");
    const Value first = get(*key.begin());
    if (key.size() == 1) {
      return first;
    }
    std::vector<std::string> rest(key.begin() + 1, key.end());
    TORCH_CHECK_VALUE(
        first.is_tensordict(),
        "get: field '",
        *key.begin(),
        "' holds no nested dict or class, so it has no entry '",
        rest.front(),
        "'");
    return first.tensordict()[NestedKey(rest)];
  }
  /// Returns true if the field named `name` is unset (Python's None);
  /// throws KeyError for a name that is not a field.
  bool is_none(std::string_view name) const {
    const auto& info = Derived::tensor_class_info();
    return detail::tc_find(
               this->td_, info, detail::tc_field_index(info, name)) == nullptr;
  }
  /// Returns true if the entry at `key` (a field name, or a nested key whose
  /// first part names a field) holds non-tensor data, as Python's
  /// `is_non_tensor(key)`: a string or JSON field, or a number stored as
  /// data. Throws KeyError for a first part that is not a field, and, as
  /// Python, for an unset field or a missing entry.
  bool is_non_tensor(const NestedKey& key) const {
    (void)detail::tc_field_index(Derived::tensor_class_info(), key[0]);
    return this->td_.is_non_tensor(key);
  }
  /// Returns the field named `name` as an entry, Python's `get(name,
  /// default)`: nullopt (Python's None) when the field is unset, and
  /// `default_value` when `name` is not a field.
  std::optional<Value> get(
      std::string_view name, std::optional<Value> default_value) const {
    return detail::tc_get_or(
        this->td_,
        Derived::tensor_class_info(),
        name,
        std::move(default_value));
  }
  /// Returns the entry at a nested key whose first part names a field,
  /// Python's `get(("inner", "x"), default)`: `default_value` when a part
  /// is not a field of its class, a key its TensorDict lacks, or an unset
  /// field before the last part; nullopt (Python's None) when the last part
  /// names an unset field of a nested class. Throws ValueError for an empty
  /// key.
  std::optional<Value> get(
      std::initializer_list<std::string_view> key,
      std::optional<Value> default_value) const {
    return detail::tc_get_or_nested(
        this->td_,
        Derived::tensor_class_info(),
        c10::ArrayRef<std::string_view>(key.begin(), key.size()),
        std::move(default_value));
  }
  /// Sets the field named `name` (None unsets it); does not compile for a
  /// frozen class. Throws like the typed setters. With `inplace` (Python's
  /// `set(name, value, inplace=True)`), a value for a set tensor field is
  /// copied into its tensor, keeping its storage (throws if the shape does
  /// not fit or the dtype cannot be cast), a dict into the nested dict's
  /// tensors; replacing a set non-tensor field, or unsetting a set field,
  /// throws. A locked instance throws even in place, as in Python.
  /// `non_blocking` copies to the instance's device asynchronously where
  /// the device allows it, as `TensorDict::set`.
  template <typename V = void>
  Derived& set(
      std::string_view name,
      const FieldArg& value,
      bool inplace = false,
      bool non_blocking = false) {
    return set<V>(
        name, value, SetOptions().inplace(inplace).non_blocking(non_blocking));
  }
  /// Same, with TensorDict's `SetOptions` (so code generic over a dict and
  /// a class compiles).
  template <typename V = void>
  Derived& set(
      std::string_view name, const FieldArg& value, const SetOptions& options) {
    static_assert(
        std::is_void_v<V> && !has_flag(kFlags, ClassFlags::kFrozen),
        "cannot assign to a field of a frozen TensorClass");
    detail::tc_set_by_name(
        this->td_, Derived::tensor_class_info(), name, value, options);
    return self();
  }
  /// Sets the entry at a nested key whose first part names a field holding
  /// a dict or a class, Python's `tc.set(("inner", "x"), value)`: by the
  /// nested class's rules (a TensorClass field) or as `TensorDict::set` (a
  /// TensorDict field). Throws KeyError for a first part that is not a
  /// field, ValueError when that field is unset or holds no dict, and
  /// RuntimeError when the instance is locked. Unlike Python, which drops
  /// them for a nested key, `inplace` and `non_blocking` apply.
  template <typename V = void>
  Derived& set(
      std::initializer_list<std::string_view> key,
      const FieldArg& value,
      bool inplace = false,
      bool non_blocking = false) {
    return set<V>(
        key, value, SetOptions().inplace(inplace).non_blocking(non_blocking));
  }
  /// Same, with TensorDict's `SetOptions`.
  template <typename V = void>
  Derived& set(
      std::initializer_list<std::string_view> key,
      const FieldArg& value,
      const SetOptions& options) {
    static_assert(
        std::is_void_v<V> && !has_flag(kFlags, ClassFlags::kFrozen),
        "cannot assign to a field of a frozen TensorClass");
    detail::tc_set_nested(
        this->td_,
        Derived::tensor_class_info(),
        c10::ArrayRef<std::string_view>(key.begin(), key.size()),
        value,
        options);
    return self();
  }

  /// Returns the field named `name`, first setting it to `default_value`
  /// by the class's rules when unset (Python's `setdefault`, which also
  /// adds a name that is not a field: C++ throws KeyError instead).
  Value setdefault(std::string_view name, const FieldArg& default_value) {
    return detail::tc_setdefault(
        this->td_, Derived::tensor_class_info(), name, default_value);
  }
  /// Sets the field named `name` to non-tensor data by the class's rules,
  /// as `set`. Python's `set_non_tensor` also takes a name that is not a
  /// field, and turns a tensor field into data; C++ throws KeyError and
  /// TypeError.
  template <typename V = void>
  Derived& set_non_tensor(std::string_view name, const Json& value) {
    return set<V>(name, FieldArg(value));
  }
  /// Moves the entry at `old_key` to `new_key` in place, as Python's
  /// `rename_key_(old_key, new_key, safe=...)`: both name fields (or keys
  /// inside a TensorDict or TensorClass field), `old_key`'s field is unset
  /// after. Without `safe` a set `new_key` is replaced, as in Python; with
  /// it, that is a KeyError. Throws KeyError for a key whose first part is
  /// not a field (Python still writes it, deprecated) or for an unset
  /// `old_key`, TypeError when the entry does not fit `new_key`'s field
  /// (Python stores it anyway), and RuntimeError when the instance is
  /// locked; nothing changes on an error. Does not compile for a frozen
  /// class.
  template <typename V = void>
  Derived& rename_key_(
      const NestedKey& old_key, const NestedKey& new_key, bool safe = false) {
    static_assert(
        std::is_void_v<V> && !has_flag(kFlags, ClassFlags::kFrozen),
        "cannot rename a field of a frozen TensorClass");
    detail::tc_rename_key(
        this->td_, Derived::tensor_class_info(), old_key, new_key, safe);
    return self();
  }
  /// Sets the batch size in place, Python's `tc.batch_size = [...]`, by
  /// `TensorDict::set_batch_size`'s rules: shrinking always fits, growing
  /// is checked against every field. Throws, naming the field, if one does
  /// not fit; the instance is then unchanged. Works on a locked instance,
  /// as in Python; does not compile for a frozen class (Python's
  /// FrozenInstanceError).
  template <typename V = void>
  Derived& set_batch_size(c10::IntArrayRef batch_size) {
    static_assert(
        std::is_void_v<V> && !has_flag(kFlags, ClassFlags::kFrozen),
        "cannot set the batch size of a frozen TensorClass");
    this->td_.set_batch_size(batch_size);
    return self();
  }

  // --- generated forwarders: TENSORDICT_TENSORCLASS_OPS lists them (shape
  // ops, reductions, copies and casts, arithmetic with its `_` forms, unary
  // math, `zero_`, `lock_`) and TENSORDICT_DETAIL_TC_OPERATORS the
  // operators. Each forwards to the TensorDict op of the same name and
  // returns Derived (views where TensorDict gives views), or *this for the
  // in-place forms -----------------------------------------------------------

  TENSORDICT_TENSORCLASS_OPS(TENSORDICT_DETAIL_TC_FORWARD)
  TENSORDICT_DETAIL_TC_OPERATORS(
      TENSORDICT_DETAIL_TC_COMPARISON, TENSORDICT_DETAIL_TC_ARITHMETIC)

  // --- the members written by hand (each is a MEMBER entry of the list):
  // signatures of their own, or more than forwarding -------------------------

  /// Indexes the batch dims (see tensordict/indexing.h).
  [[nodiscard]] Derived index(
      c10::ArrayRef<at::indexing::TensorIndex> indices) const {
    return wrap(this->td_.index(indices));
  }
  /// Writes `value`'s fields into the indexed part of every field.
  Derived& index_put_(
      c10::ArrayRef<at::indexing::TensorIndex> indices, const Derived& value) {
    this->td_.index_put_(indices, value.tensordict());
    return self();
  }
  /// Writes a scalar into the indexed part of every tensor field.
  Derived& index_put_(
      c10::ArrayRef<at::indexing::TensorIndex> indices,
      const c10::Scalar& value) {
    this->td_.index_put_(indices, value);
    return self();
  }
  /// Splits batch dim `dim` into `sizes`.
  [[nodiscard]] Derived unflatten(int64_t dim, c10::IntArrayRef sizes) const {
    return wrap(this->td_.unflatten(dim, sizes));
  }
  /// Splits along batch dim `dim` into its elements; views.
  [[nodiscard]] std::vector<Derived> unbind(int64_t dim = 0) const {
    return wrap_all(this->td_.unbind(dim));
  }
  /// Splits along batch dim `dim` into pieces of `split_size`; views.
  [[nodiscard]] std::vector<Derived> split(
      int64_t split_size, int64_t dim = 0) const {
    return wrap_all(this->td_.split(split_size, dim));
  }
  /// Splits along batch dim `dim` into pieces of the given sizes; views.
  [[nodiscard]] std::vector<Derived> split(
      c10::IntArrayRef split_sizes, int64_t dim = 0) const {
    return wrap_all(this->td_.split(split_sizes, dim));
  }
  /// Splits along batch dim `dim` into `chunks` pieces.
  [[nodiscard]] std::vector<Derived> chunk(
      int64_t chunks, int64_t dim = 0) const {
    return wrap_all(this->td_.chunk(chunks, dim));
  }
  /// Rolls along batch dims, as torch.roll.
  [[nodiscard]] Derived roll(
      c10::IntArrayRef shifts, c10::IntArrayRef dims) const {
    return wrap(this->td_.roll(shifts, dims));
  }
  /// Pads the batch dims with `value` (see TensorDict::pad); non-tensor
  /// fields hold None in the padded slots.
  [[nodiscard]] Derived pad(
      c10::IntArrayRef pad_sizes, const c10::Scalar& value = 0) const {
    return wrap(this->td_.pad(pad_sizes, value));
  }

  /// Returns a shallow copy with these dim names.
  [[nodiscard]] Derived rename(const DimNames& names) const {
    return wrap(this->td_.rename(names));
  }
  /// Returns a shallow copy whose dims named like a key take the mapped
  /// name (Python's `rename(old=new)`).
  [[nodiscard]] Derived rename_by_map(
      const std::map<std::string, std::string>& old_to_new) const {
    return wrap(this->td_.rename_by_map(old_to_new));
  }
  /// Renames the dims in place.
  Derived& rename_(const DimNames& names) {
    this->td_.rename_(names);
    return self();
  }
  /// Refines the dim names in place (see TensorDict::refine_names).
  Derived& refine_names(const DimNames& names) {
    this->td_.refine_names(names);
    return self();
  }

  using Base::all;
  using Base::any;
  /// Returns whether all elements along batch dim `dim` are true.
  [[nodiscard]] Derived all(int64_t dim) const {
    return wrap(this->td_.all(dim));
  }
  /// Returns whether any element along batch dim `dim` is true.
  [[nodiscard]] Derived any(int64_t dim) const {
    return wrap(this->td_.any(dim));
  }

  /// Returns an instance of `fn(leaf)` for every tensor (non-tensor fields
  /// kept), as `TensorDict::apply`; throws if a result drops or reshapes a
  /// field so that it no longer fits the class.
  template <typename Fn>
  [[nodiscard]] Derived apply(Fn&& fn, const ApplyOptions& options = {}) const {
    return checked(this->td_.apply(std::forward<Fn>(fn), options));
  }
  /// Returns an instance of `fn(leaf, other_leaf)`, matched by field.
  template <typename Fn>
  [[nodiscard]] Derived apply(
      Fn&& fn, const Derived& other, const ApplyOptions& options = {}) const {
    return checked(
        this->td_.apply(std::forward<Fn>(fn), other.tensordict(), options));
  }
  /// Writes `fn(leaf)` into every tensor in place.
  template <typename Fn>
  Derived& apply_(Fn&& fn) {
    this->td_.apply_(std::forward<Fn>(fn));
    return self();
  }
  /// Returns a copy with every tensor moved to `device`.
  [[nodiscard]] Derived to(
      c10::Device device, bool non_blocking = false) const {
    return wrap(this->td_.to(device, non_blocking));
  }
  /// Same as `to(c10::Device(type))` (`torch::kCPU` would be ambiguous).
  [[nodiscard]] Derived to(
      c10::DeviceType type, bool non_blocking = false) const {
    return wrap(this->td_.to(type, non_blocking));
  }
  /// Same as `to(c10::Device(device))` for a device string ("cpu").
  [[nodiscard]] Derived to(
      const char* device, bool non_blocking = false) const {
    return wrap(this->td_.to(device, non_blocking));
  }
  /// Returns a copy with every tensor cast to `dtype`.
  [[nodiscard]] Derived to(c10::ScalarType dtype) const {
    return wrap(this->td_.to(dtype));
  }
  /// Returns a copy moved and cast as `options` says.
  [[nodiscard]] Derived to(
      const at::TensorOptions& options, bool non_blocking = false) const {
    return wrap(this->td_.to(options, non_blocking));
  }
  /// Returns a copy with every tensor on CUDA device `index` (the current
  /// one when nullopt), as Python's `cuda(device=None)`. Throws when CUDA
  /// is unavailable (no CUDA build or no GPU: Python's "Torch not compiled
  /// with CUDA enabled") and IndexError for an index out of range, even
  /// when the instance holds no tensor.
  [[nodiscard]] Derived cuda(
      std::optional<c10::DeviceIndex> index = std::nullopt,
      bool non_blocking = false) const {
    return wrap(this->td_.cuda(index, non_blocking));
  }
  /// Copies every field of `src` into this instance's tensors in place.
  Derived& copy_(const Derived& src, bool non_blocking = false) {
    this->td_.copy_(src.tensordict(), non_blocking);
    return self();
  }
  /// Sets `requires_grad` on every tensor field in place.
  Derived& requires_grad_(bool requires_grad = true) {
    this->td_.requires_grad_(requires_grad);
    return self();
  }
  /// Returns true if every tensor field is contiguous.
  bool is_contiguous() const {
    return this->td_.is_contiguous();
  }
  /// Returns the negation of every tensor (same as `neg()`).
  [[nodiscard]] Derived operator-() const {
    return wrap(-this->td_);
  }
  /// Returns every tensor clamped to [min, max]; throws like
  /// `TensorDict::clamp`.
  [[nodiscard]] Derived clamp(
      const std::optional<c10::Scalar>& min,
      const std::optional<c10::Scalar>& max = std::nullopt) const {
    return wrap(this->td_.clamp(min, max));
  }
  /// Clamps every tensor to [min, max] in place; throws like `clamp`.
  Derived& clamp_(
      const std::optional<c10::Scalar>& min,
      const std::optional<c10::Scalar>& max = std::nullopt) {
    this->td_.clamp_(min, max);
    return self();
  }

  // --- unlocking (`lock_` is generated) and memory-mapped storage ---------

  /// Unlocks the instance; does not compile for a frozen class.
  template <typename V = void>
  Derived& unlock_() {
    static_assert(
        std::is_void_v<V> && !has_flag(kFlags, ClassFlags::kFrozen),
        "cannot unlock a frozen TensorClass");
    this->td_.unlock_();
    return self();
  }
  /// Writes the instance as a memmap directory and returns a locked copy
  /// backed by the files. With a registered Python class (see
  /// `register_python_class`), the layout is Python's tensorclass layout
  /// (`meta.json` with `_type`, fields under `_tensordict/`), which Python
  /// loads as its class; otherwise a plain TensorDict layout.
  Derived memmap(const MemmapOptions& options = {}) const {
    return wrap(detail::tc_marked_copy(this->td_, Derived::tensor_class_info())
                    .memmap(options));
  }
  /// Writes the instance like `memmap`, then maps its own tensors to the
  /// files in place and locks it.
  Derived& memmap_(const MemmapOptions& options = {}) {
    detail::tc_mark_classes(this->td_, Derived::tensor_class_info());
    this->td_.memmap_(options);
    return self();
  }
  /// Runs `memmap` on a background thread, as Python's
  /// `memmap(..., return_early=True)` (see `TensorDict::memmap_async`); the
  /// instance must not change until the future is ready.
  [[nodiscard]] std::future<Derived> memmap_async(
      const MemmapOptions& options = {}) const {
    return std::async(
        std::launch::deferred,
        [saving =
             detail::tc_marked_copy(this->td_, Derived::tensor_class_info())
                 .memmap_async(options)]() mutable {
          return wrap(saving.get());
        });
  }
  /// Runs `memmap_` on a background thread, as Python's
  /// `memmap_(..., return_early=True)` (see `TensorDict::memmap_async_`):
  /// the future holds this instance once its tensors map the files, locked.
  /// The instance must not be used until the future is ready; an error is
  /// thrown by `get()`.
  [[nodiscard]] std::future<Derived> memmap_async_(
      const MemmapOptions& options = {}) {
    detail::tc_mark_classes(this->td_, Derived::tensor_class_info());
    return std::async(
        std::launch::deferred,
        [saving = this->td_.memmap_async_(options)]() mutable {
          return wrap(saving.get());
        });
  }
  /// `memmap_like(..., return_early=True)`, as `memmap_async`.
  [[nodiscard]] std::future<Derived> memmap_like_async(
      const MemmapOptions& options = {}) const {
    return std::async(
        std::launch::deferred,
        [saving =
             detail::tc_marked_copy(this->td_, Derived::tensor_class_info())
                 .memmap_like_async(options)]() mutable {
          return wrap(saving.get());
        });
  }
  /// `save(..., return_early=True)`: the same as `memmap_async`.
  [[nodiscard]] std::future<Derived> save_async(
      const MemmapOptions& options) const {
    return memmap_async(options);
  }
  /// Writes the layout of `memmap` (the class's too) with zero-filled leaf
  /// files and returns an instance backed by them, as Python's
  /// `memmap_like`: shapes, dtypes and non-tensor fields, no tensor data.
  Derived memmap_like(const MemmapOptions& options = {}) const {
    return wrap(detail::tc_marked_copy(this->td_, Derived::tensor_class_info())
                    .memmap_like(options));
  }
  /// Re-reads the instance's own directory (see
  /// `TensorDict::memmap_refresh_`); throws like it, and like
  /// `from_tensordict` if the files no longer fit the class.
  Derived& memmap_refresh_() {
    this->td_.memmap_refresh_();
    detail::tc_check(this->td_, Derived::tensor_class_info());
    return self();
  }
  /// Adds a zero-filled tensor backed by a new file at `key` of an instance
  /// memmapped to a directory and returns it, as Python's `make_memmap`
  /// (see `TensorDict::make_memmap`): the field reads it from then on, and
  /// its entry in meta.json makes loads see it, in Python's tensorclass
  /// layout for a registered class. `key` is a tensor field (or a number
  /// field), or a key inside a TensorDict or TensorClass field. Throws
  /// KeyError for a part that is not a field (Python adds the key anyway),
  /// TypeError for a field that takes no tensor, and what
  /// `TensorDict::make_memmap` throws: an instance not memmapped to a
  /// directory (an anonymous `memmap()` too, which Python allows), a set
  /// field, a shape that does not start with the batch size.
  at::Tensor make_memmap(
      const NestedKey& key,
      c10::IntArrayRef shape,
      c10::ScalarType dtype = c10::kFloat) {
    return detail::tc_make_memmap(
        this->td_, Derived::tensor_class_info(), key, shape, dtype);
  }
  /// Same as `memmap` (Python's `save`). With no prefix, as Python's
  /// `save()`, the tensors go to anonymous shared memory: the result
  /// `is_memmap()`, has no `saved_path()` and nothing is written to disk
  /// (Python's MemoryMappedTensors without a file).
  Derived save(const MemmapOptions& options = {}) const {
    return memmap(options);
  }
  /// Same as `memmap` (Python's `dumps`); with no prefix as `save()`.
  Derived dumps(const MemmapOptions& options = {}) const {
    return memmap(options);
  }
  /// Loads a directory saved by `memmap` (or by Python) into this instance
  /// in place, as Python's `load_` / `load_memmap_`: tensors map the files,
  /// non-tensor fields take the saved values, nested dicts and classes are
  /// loaded into, and fields the directory lacks are unset, as in Python
  /// (see `TensorDict::load_memmap_`). Throws ValueError, before loading
  /// anything, if the directory holds another registered class or entries
  /// that do not fit this one.
  Derived& load_(
      const std::string& prefix, const LoadMemmapOptions& options = {}) {
    detail::tc_load_memmap_into(
        this->td_, Derived::tensor_class_info(), prefix, options);
    return self();
  }
  /// Same as `load_` (Python's `load_memmap_`).
  Derived& load_memmap_(
      const std::string& prefix, const LoadMemmapOptions& options = {}) {
    return load_(prefix, options);
  }
  /// Loads a memmap directory written by `memmap` or by Python (a
  /// tensorclass or a TensorDict): throws ValueError if its `_type` is not
  /// the registered Python class, and like `from_tensordict` if the fields
  /// do not fit.
  [[nodiscard]] static Derived load_memmap(
      const std::string& prefix, const LoadMemmapOptions& options = {}) {
    return wrap(
        detail::tc_load_memmap(Derived::tensor_class_info(), prefix, options));
  }
  /// Loads a memmap directory into `out` and returns it, as Python's
  /// `Cls.load_memmap(prefix, out=out)`: the rules of
  /// `TensorDict::load_memmap(prefix, out)` on `out`'s dict (fields the
  /// directory lacks are unset, non-tensor fields replaced), after the
  /// checks of `load_memmap` (from meta.json, before anything is written).
  /// A frozen `out` is locked, so it is refused, as in Python.
  static Derived load_memmap(
      const std::string& prefix,
      Derived& out,
      const LoadMemmapOptions& options = {}) {
    detail::tc_load_memmap_out(
        out.tensordict(), Derived::tensor_class_info(), prefix, options);
    return out;
  }
  /// Same as `load_memmap` (Python's `load`).
  [[nodiscard]] static Derived load(
      const std::string& prefix, const LoadMemmapOptions& options = {}) {
    return load_memmap(prefix, options);
  }

  // --- state dict ------------------------------------------------------------

  /// Returns the state dict keyed by field names, as Python's tensorclass
  /// `state_dict`: tensors are entries (nested dicts and classes below their
  /// field, "."-joined with `flatten`), and each class level's metadata
  /// holds the class name and the non-tensor fields, unset ones as null
  /// (see tensordict/state_dict.h). A non-tensor field whose stacked values
  /// differ has no one value there: an error, with Python's text.
  [[nodiscard]] StateDict state_dict(bool flatten = true) const {
    return state_dict(StateDictOptions().flatten(flatten));
  }
  /// Same, with Python's `prefix`, `keep_vars` and `flatten` (see
  /// StateDictOptions). The class metadata (`_type`, `_non_tensor`) goes
  /// under the prefix as the root's metadata does, which
  /// `tensordict().state_dict(options)` would drop.
  [[nodiscard]] StateDict state_dict(const StateDictOptions& options) const {
    return detail::tc_state_dict(
        this->td_, Derived::tensor_class_info(), options);
  }
  /// Writes the entries and metadata of `state_dict(options)` into
  /// `destination` and returns it, Python's `state_dict(destination=...)`;
  /// what is there under the same key is replaced.
  StateDict& state_dict(
      StateDict& destination, const StateDictOptions& options = {}) const {
    return detail::tc_state_dict_into(
        destination, this->td_, Derived::tensor_class_info(), options);
  }
  /// Loads a state dict made by `state_dict` (flat or nested, detected as
  /// `TensorDict::load_state_dict` does) into this instance and returns it,
  /// by Python's rules: tensors are written in place unless `assign`, and
  /// only into the fields the instance holds (an entry for an unset field
  /// is a KeyError with `strict`, skipped without); a set field the state
  /// dict lacks keeps its value. The metadata's non-tensor fields are set
  /// by the class's rules, null unsetting an optional field (Python fails
  /// on a null for a tensor field the instance holds); one that is not a
  /// field is a KeyError even without `strict`. Unlike Python, a
  /// level's keys are checked before anything is written into it. Frozen
  /// instances load in place only.
  Derived& load_state_dict(
      const StateDict& state_dict, bool strict = true, bool assign = false) {
    return load_state_dict(
        state_dict, LoadStateDictOptions().strict(strict).assign(assign));
  }
  /// Same, with Python's `strict`, `assign` and `from_flatten` (see
  /// LoadStateDictOptions); the class metadata is read as above.
  Derived& load_state_dict(
      const StateDict& state_dict, const LoadStateDictOptions& options) {
    detail::tc_load_state_dict(
        this->td_, Derived::tensor_class_info(), state_dict, options);
    return self();
  }

  /// Returns the instance as a TensorDict entry, Python's
  /// `td.set("step", step)`: its own dict (aliased, so later writes show
  /// through), marked with the registered Python class of every class level
  /// so that a save writes Python's tensorclass layout. Read it back with
  /// `get_as<Derived>(td, key)`.
  operator Value() const {  // NOLINT(google-explicit-constructor)
    detail::tc_mark_classes(this->td_, Derived::tensor_class_info());
    return Value(this->td_);
  }

  /// Returns Python's repr in the form the print options select: compact
  /// by default (`Name(batch_size=[4], fields={obs: f32[3], ...})`), see
  /// tensordict/print_options.h.
  std::string repr() const {
    return detail::tc_repr(this->td_, Derived::tensor_class_info());
  }
  /// Returns Python's compact repr, whatever the print options say.
  std::string repr_compact() const {
    return detail::tc_repr_compact(this->td_, Derived::tensor_class_info());
  }
  /// Returns Python's detailed repr, whatever the print options say:
  /// `Name(\n    field=..., batch_size=..., device=..., is_shared=...)`.
  std::string repr_detailed() const {
    return detail::tc_repr_detailed(this->td_, Derived::tensor_class_info());
  }

 protected:
  /// Wraps a dict as Derived (locked when frozen).
  static Derived wrap(TensorDict td) {
    if constexpr (has_flag(kFlags, ClassFlags::kFrozen)) {
      if (!td.is_locked()) {
        td.lock_();
      }
    }
    return Derived(std::move(td), detail::WrapTag{});
  }
  /// Wraps a dict as Derived after checking it: throws for a key that is
  /// not a field or a field of the wrong kind.
  static Derived checked(TensorDict td) {
    detail::tc_check(td, Derived::tensor_class_info());
    return wrap(std::move(td));
  }
  /// Wraps each dict as Derived, unchecked.
  static std::vector<Derived> wrap_all(const std::vector<TensorDict>& tds) {
    std::vector<Derived> out;
    out.reserve(tds.size());
    for (const auto& td : tds) {
      out.push_back(wrap(td));
    }
    return out;
  }
  /// Returns *this as Derived, for the chaining setters.
  Derived& self() noexcept {
    return static_cast<Derived&>(*this);
  }
  /// Reads field number `index` as `T` (what the generated getters call).
  template <typename T>
  detail::read_type_t<T, kFlags> read_field(size_t index) const {
    return detail::tc_read_field<T, kFlags>(
        this->td_, Derived::tensor_class_info(), index);
  }
  /// Writes field number `index` (what the generated setters call); does
  /// not compile for a frozen class.
  template <typename T>
  Derived& write_field(size_t index, const FieldArg& value) {
    static_assert(
        !has_flag(kFlags, ClassFlags::kFrozen) || detail::kAlwaysFalse<T>,
        "cannot assign to a field of a frozen TensorClass");
    detail::tc_set_field(this->td_, Derived::tensor_class_info(), index, value);
    return self();
  }
  /// Appends the description of field `name` of type `T` to `fields`.
  template <typename T>
  static void add_field(
      std::vector<detail::FieldInfo>& fields,
      const char* name,
      FieldArg (*make_default)() = nullptr) {
    using Traits = detail::FieldTraits<T>;
    const detail::ClassInfo* nested = nullptr;
    if constexpr (Traits::kind == detail::FieldKind::kTensorClass) {
      nested = &Traits::value_type::tensor_class_info();
    }
    fields.push_back(detail::FieldInfo{
        name, Traits::kind, Traits::optional, nested, make_default});
  }
};

/// Stacks instances along a new batch dim, as `torch.stack` on Python
/// tensorclasses; throws what `tensordict::stack` throws.
template <typename TC, std::enable_if_t<is_tensor_class_v<TC>, int> = 0>
[[nodiscard]] TC stack(const std::vector<TC>& items, int64_t dim = 0) {
  std::vector<TensorDict> tds;
  tds.reserve(items.size());
  for (const auto& item : items) {
    tds.push_back(item.tensordict());
  }
  return TC::from_tensordict(stack(tds, dim));
}

/// Concatenates instances along batch dim `dim`, as `torch.cat`; throws
/// what `tensordict::cat` throws.
template <typename TC, std::enable_if_t<is_tensor_class_v<TC>, int> = 0>
[[nodiscard]] TC cat(const std::vector<TC>& items, int64_t dim = 0) {
  std::vector<TensorDict> tds;
  tds.reserve(items.size());
  for (const auto& item : items) {
    tds.push_back(item.tensordict());
  }
  return TC::from_tensordict(cat(tds, dim));
}

/// Returns true if both instances hold equal fields and batch sizes.
template <typename TC, std::enable_if_t<is_tensor_class_v<TC>, int> = 0>
bool equal(const TC& a, const TC& b) {
  return equal(a.tensordict(), b.tensordict());
}

/// Returns the entry at `key` of `td` as a `TC` (aliasing the nested dict),
/// for an instance stored with `td.set(key, instance)` or loaded from a
/// tree Python saved with a tensorclass entry. Throws KeyError if `key` is
/// missing or not a dict, ValueError if the entry is marked with another
/// registered Python class, and like `TC::from_tensordict` if it does not
/// fit the class.
template <typename TC>
[[nodiscard]] TC get_as(const TensorDict& td, const NestedKey& key) {
  static_assert(is_tensor_class_v<TC>, "get_as needs a TensorClass");
  return TC(
      detail::tc_entry(td, TC::tensor_class_info(), key), detail::WrapTag{});
}

/// Writes `value.repr()`.
template <typename TC, std::enable_if_t<is_tensor_class_v<TC>, int> = 0>
std::ostream& operator<<(std::ostream& out, const TC& value) {
  detail::tc_write(out, value.repr());
  return out;
}

/// Maps the Python class string `type_string` ("<class 'module.Name'>", as
/// Python writes `_type` in meta.json) to `TC`: saves then write Python's
/// tensorclass layout, and loads check `_type`. Throws ValueError on a
/// malformed string. Returns true, so it can initialize a static.
template <typename TC>
bool register_python_class(std::string type_string) {
  static_assert(
      is_tensor_class_v<TC>, "register_python_class needs a TensorClass");
  detail::tc_register(TC::tensor_class_info(), std::move(type_string));
  return true;
}

TENSORDICT_END_NAMESPACE

/// Declares the fields of a TensorClass `Type`, in order: a bare name is an
/// `at::Tensor` field, `(T, name)` a field of type T, `(T, name, value)` one
/// whose default is `T(value)` (see NOTE [TensorClass design]). Generates the
/// constructors, a getter `name()` and a setter `set_name(value)` per field,
/// and the class description. Up to 32 fields; a type with a comma needs an
/// alias.
///
/// The positional constructor, Python's generated `__init__` without
/// keywords, takes every field in declaration order as its declared type
/// (`const T&`), then the batch size, device and names:
/// `Step(obs, action, "reach", {4})`. A missing or extra field, or a value
/// of another type, does not compile; an optional field takes
/// `std::nullopt` and a defaulted one its value (C++ has no keyword
/// defaults to skip them). Unlike
/// Python, the C++ number and tensor types are not cast into each other
/// here (use the named form, `Step({{"obs", 1.5}, ...})`). A class with a
/// parent has only the named form, since its macro does not see the
/// parent's field types.
///
/// Example: `TENSORDICT_FIELDS(Step, obs, (std::optional<std::string>, task))`
#define TENSORDICT_FIELDS(Type, ...)                                \
 public:                                                            \
  using tensor_class_base::tensor_class_base;                       \
  Type() = default;                                                 \
  Type(const Type&) = default;                                      \
  Type(Type&&) noexcept = default;                                  \
  Type& operator=(const Type&)& = default;                          \
  Type& operator=(Type&&)& noexcept = default;                      \
  Type& operator=(const Type&)&& = delete;                          \
  Type& operator=(Type&&)&& = delete;                               \
  ~Type() = default;                                                \
  /** Makes an instance from every field in declaration order, then \
   * the batch size, device and names, as Python's positional       \
   * `Cls(obs, action, batch_size)`; see TENSORDICT_FIELDS. */      \
  template <                                                        \
      size_t TensordictParentFields = kParentFieldCount,            \
      std::enable_if_t<TensordictParentFields == 0, int> = 0>       \
  explicit Type(                                                    \
      TENSORDICT_DETAIL_FOR_EACH(                                   \
          TENSORDICT_DETAIL_POSITIONAL_PARAM, __VA_ARGS__)          \
          c10::IntArrayRef batch_size = {},                         \
      std::optional<c10::Device> device = std::nullopt,             \
      const ::tensordict::DimNames& names = {})                     \
      : tensor_class_base(                                          \
            {TENSORDICT_DETAIL_FOR_EACH(                            \
                TENSORDICT_DETAIL_POSITIONAL_INIT, __VA_ARGS__)},   \
            batch_size,                                             \
            device,                                                 \
            names) {}                                               \
  /** The number of fields, the parents' included. */               \
  static constexpr size_t kFieldCount =                             \
      kParentFieldCount + TENSORDICT_DETAIL_COUNT(__VA_ARGS__);     \
  /** Returns the class name; not API. */                           \
  static constexpr const char* tensor_class_name() noexcept {       \
    return #Type;                                                   \
  }                                                                 \
  /** Appends the class's own fields to a description; not API. */  \
  static void tensor_class_own_fields(                              \
      std::vector<::tensordict::detail::FieldInfo>&                 \
          fields){TENSORDICT_DETAIL_FOR_EACH(                       \
      TENSORDICT_DETAIL_ADD_FIELD,                                  \
      __VA_ARGS__)} TENSORDICT_DETAIL_FOR_EACH(TENSORDICT_DETAIL_ACCESSORS, __VA_ARGS__)

/// Registers at static initialization the Python class string of a
/// TensorClass (see `register_python_class`); use at namespace scope.
///
/// Example: `TENSORDICT_PYTHON_CLASS(Step, "<class 'envs.Step'>");`
#define TENSORDICT_PYTHON_CLASS(Type, type_string)          \
  [[maybe_unused]] static const bool TENSORDICT_DETAIL_CAT( \
      tensordict_python_class_, __LINE__) =                 \
      ::tensordict::register_python_class<Type>(type_string)
