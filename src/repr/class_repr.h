#pragma once

// The reprs of a class level (a TensorClass instance, src/tensor_class/),
// written here with the other reprs; the class supplies its name and fields
// through a ClassReprHook. See NOTE [Class reprs].

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "tensordict/fwd.h"
#include "tensordict/print_options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

// NOTE [Class reprs]
// repr/ sits below tensor_class/, so it cannot read a class description.
// A class level is printed through a hook instead, the way the state-dict
// walk asks a StateDictHook (src/state_dict/hook.h): the hook names the
// class and lists its fields in declaration order, each with its value in
// the level (null when unset) and, for a field holding a class, that
// class's hook. The compact form is the dict's (NOTE [Compact repr]) with
// the class name and unset fields appended as `None`; the detailed form
// is Python's dataclass-like `Name(\n    a=..., ...)`.

class ClassReprHook;
/// The hook of a nested class level; null when the field holds no class.
using ClassReprHookPtr = std::unique_ptr<const ClassReprHook>;

/// What a class level tells the reprs; see NOTE [Class reprs].
class ClassReprHook {
 public:
  virtual ~ClassReprHook() = default;

  /// The class name printed before the parenthesis.
  virtual const std::string& name() const = 0;
  /// The number of fields.
  virtual size_t field_count() const = 0;
  /// The name of field `index`, in declaration order.
  virtual const std::string& field_name(size_t index) const = 0;
  /// The entry of field `index` in `td`, or null when the field is unset.
  virtual const Value* field_value(
      const TensorDict& td, size_t index) const = 0;
  /// The hook of field `index` when it holds a class, else null.
  virtual ClassReprHookPtr nested(size_t index) const = 0;

  /// Returns true if the class has a field named `name`.
  bool has_field(std::string_view name) const;
};

/// Returns Python's repr of the class level `td` in the form `options`
/// select (compact by default).
std::string class_repr(
    const TensorDict& td,
    const ClassReprHook& hook,
    const PrintOptions& options);
/// Returns Python's compact repr of a class level:
/// `Name(batch_size=[4], fields={a: f32[3], b: None})`.
std::string class_repr_compact(
    const TensorDict& td,
    const ClassReprHook& hook,
    const PrintOptions& options);
/// Returns Python's detailed repr of a class level.
std::string class_repr_detailed(
    const TensorDict& td,
    const ClassReprHook& hook,
    const PrintOptions& options);

}  // namespace detail
TENSORDICT_END_NAMESPACE
