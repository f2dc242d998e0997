// The compiled side of TensorClass (declared in the public
// include/tensordict/detail/tensor_class_impl.h): storing and reading fields
// by the class flags, construction and checks; its repr is repr/class_repr.cpp
// through a hook. The memmap glue is in
// src/memmap/tensor_class.cpp, the state dict in
// src/state_dict/tensor_class.cpp; what they share, in
// src/tensor_class/fields.h. See NOTE [TensorClass design].

#include "tensordict/tensor_class.h"

#include <ATen/Context.h>

#include <algorithm>
#include <array>
#include <memory>
#include <ostream>

#include "core/tensor_dict_impl.h"
#include "core/walk.h"
#include "repr/class_repr.h"
#include "tensor_class/fields.h"
#include "tensordict/json.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE

FieldArg::FieldArg(at::Tensor tensor) {
  if (tensor.defined()) {
    value_ = std::move(tensor);
  }
}
FieldArg::FieldArg(TensorDict td) : value_(std::move(td)) {}
FieldArg::FieldArg(const char* text)
    : value_(std::make_shared<const Json>(text)) {}
FieldArg::FieldArg(std::string text)
    : value_(std::make_shared<const Json>(std::move(text))) {}
FieldArg::FieldArg(const Json& value) {
  if (!value.is_null()) {
    value_ = std::make_shared<const Json>(value);
  }
}

namespace detail {
namespace {

// The string or JSON value a FieldArg holds, or null.
const Json* json_of(const FieldArg::Variant& v) {
  const auto* held = std::get_if<std::shared_ptr<const Json>>(&v);
  return held != nullptr ? held->get() : nullptr;
}

// What a field of each FieldKind holds, in the enum's order, for messages.
constexpr std::array<const char*, 8> kFieldKindNames = {
    "a tensor",
    "a TensorDict",
    "a TensorClass",
    "a string",
    "an integer",
    "a float",
    "a bool",
    "a JSON value"};
static_assert(
    static_cast<size_t>(FieldKind::kJson) + 1 == kFieldKindNames.size(),
    "one name per FieldKind");

const char* arg_name(const FieldArg& arg) {
  switch (arg.value().index()) {
    case 0:
      return "None";
    case 1:
      return "a tensor";
    case 2:
      return arg.class_info() ? "a TensorClass" : "a TensorDict";
    case 3:
      return json_of(arg.value())->is_string() ? "a string" : "a JSON value";
    case 4:
      return "an integer";
    case 5:
      return "a float";
    default:
      return "a bool";
  }
}

std::string sorted_names_repr(const std::vector<std::string>& names) {
  return sorted_list_repr({names.begin(), names.end()});
}

[[noreturn]] void throw_no_such_field(
    const ClassInfo& info, std::string_view name) {
  throw KeyError(
      {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
      c10::str(
          "Cannot set the attribute ",
          python_repr(name),
          ": ",
          info.name,
          " has no such field. Its fields are ",
          sorted_names_repr(tc_field_names(info)),
          "."));
}

std::string entry_name(const Value& value) {
  return value.type_name();
}

[[noreturn]] void throw_wrong_entry(
    const Value& value,
    const ClassInfo& info,
    size_t index,
    const char* expected) {
  std::string hint;
  if (value.is_non_tensor_stack()) {
    hint = " whose elements differ; read them with get()";
  }
  C10_THROW_ERROR(
      TypeError,
      c10::str(
          field_label(info, index),
          " holds ",
          entry_name(value),
          hint,
          ", not ",
          expected));
}

at::Tensor json_number_tensor(const Json& j) {
  if (j.is_boolean()) {
    return number_to_tensor(j.get<bool>());
  }
  if (j.is_number_integer()) {
    return number_to_tensor(j.get<int64_t>());
  }
  return number_to_tensor(j.get<double>());
}

// The number of a FieldArg as JSON, cast to the field's type when `cast`.
Json number_json(const FieldArg::Variant& v, FieldKind kind, bool cast) {
  double d = 0;
  Json given;
  if (const auto* i = std::get_if<int64_t>(&v)) {
    given = *i;
    d = static_cast<double>(*i);
  } else if (const auto* f = std::get_if<double>(&v)) {
    given = *f;
    d = *f;
  } else {
    const bool b = std::get<bool>(v);
    given = b;
    d = b ? 1 : 0;
  }
  if (!cast) {
    return given;
  }
  switch (kind) {
    case FieldKind::kInt:
      return given.is_number_integer() ? given : Json(static_cast<int64_t>(d));
    case FieldKind::kDouble:
      return d;
    default:
      return d != 0;
  }
}

at::Tensor number_tensor(const FieldArg::Variant& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) {
    return number_to_tensor(*i);
  }
  if (const auto* f = std::get_if<double>(&v)) {
    return number_to_tensor(*f);
  }
  return number_to_tensor(std::get<bool>(v));
}

bool is_number(const FieldArg::Variant& v) {
  return v.index() >= 4;
}

}  // namespace

const char* kind_name(FieldKind kind) {
  const auto index = static_cast<size_t>(kind);
  return index < kFieldKindNames.size() ? kFieldKindNames[index] : "a value";
}

std::string field_label(const ClassInfo& info, size_t index) {
  return c10::str("field '", info.fields[index].name, "' of ", info.name);
}

std::vector<std::string> tc_field_names(const ClassInfo& info) {
  std::vector<std::string> names;
  names.reserve(info.fields.size());
  for (const auto& f : info.fields) {
    names.push_back(f.name);
  }
  return names;
}

const char* kind_mismatch(const Value& value, FieldKind kind) {
  switch (kind) {
    case FieldKind::kTensor:
      return value.is_tensor() ? nullptr : "a tensor";
    case FieldKind::kTensorDict:
    case FieldKind::kTensorClass:
      return value.is_tensordict() ? nullptr : "a TensorDict";
    case FieldKind::kString:
      return value.is_non_tensor() ? nullptr : "a string";
    case FieldKind::kJson:
      return value.is_non_tensor() ? nullptr : "a JSON value";
    case FieldKind::kInt:
    case FieldKind::kDouble:
    case FieldKind::kBool:
      return value.is_tensordict() ? kind_name(kind) : nullptr;
  }
  return nullptr;
}

FieldAt resolve_field(
    const ClassInfo& info, const NestedKey& key, const char* op) {
  const ClassInfo* level = &info;
  for (size_t depth = 0;; ++depth) {
    const size_t index = tc_field_index(*level, key[depth]);
    if (depth + 1 == key.size()) {
      return {level, index};
    }
    const FieldInfo& field = level->fields[index];
    if (field.kind == FieldKind::kTensorDict) {
      return {};  // any key goes inside a TensorDict field
    }
    TORCH_CHECK_VALUE(
        field.kind == FieldKind::kTensorClass,
        op,
        ": the key ",
        key.to_string(),
        " goes through ",
        field_label(*level, index),
        ", which takes ",
        kind_name(field.kind),
        ", not a TensorDict or a TensorClass");
    level = field.nested;
  }
}

std::optional<size_t> find_field(const ClassInfo& info, std::string_view name) {
  for (size_t i = 0; i < info.fields.size(); ++i) {
    if (info.fields[i].name == name) {
      return i;
    }
  }
  return std::nullopt;
}

const ClassInfo* nested_class(const ClassInfo& info, std::string_view key) {
  const auto index = find_field(info, key);
  return index ? info.fields[*index].nested : nullptr;
}

std::optional<Json> single_json(const Value& value) {
  if (value.is_non_tensor_data()) {
    return value.non_tensor_data().data();
  }
  if (value.is_non_tensor_stack()) {
    const auto& values = value.non_tensor_stack().values();
    if (!values.empty() &&
        std::all_of(values.begin(), values.end(), [&](const Json& v) {
          return v == values.front();
        })) {
      return values.front();
    }
  }
  return std::nullopt;
}

FieldArg field_arg_from_json(const Json& value) {
  if (value.is_boolean()) {
    return FieldArg(value.get<bool>());
  }
  if (value.is_number_integer()) {
    return FieldArg(value.get<int64_t>());
  }
  if (value.is_number_float()) {
    return FieldArg(value.get<double>());
  }
  return FieldArg(value);
}

const Value* tc_find(
    const TensorDict& td, const ClassInfo& info, size_t index) noexcept {
  const TensorDictImpl& impl = *td.unsafeGetImpl();
  const std::string& name = info.fields[index].name;
  const NodeRange nodes = impl.nodes();
  // Fast path: fields are stored in declaration order, so field `index` is
  // usually node `index`.
  if (index < nodes.size()) {
    Node* node = *nodes.begin() + index;
    if (node->key == name) {
      return &node->value;
    }
  }
  Node* node = impl.find(name);
  return node == nullptr ? nullptr : &node->value;
}

const Value& tc_get(const TensorDict& td, const ClassInfo& info, size_t index) {
  const Value* value = tc_find(td, info, index);
  TORCH_CHECK_VALUE(
      value != nullptr,
      info.name,
      ".",
      info.fields[index].name,
      " is None (the field is unset)");
  return *value;
}

namespace {

// Field names are short: a loop beats a call to memcmp.
inline bool same_key(const std::string& a, const std::string& b) noexcept {
  const size_t n = a.size();
  if (n != b.size()) {
    return false;
  }
  const char* pa = a.data();
  const char* pb = b.data();
  for (size_t i = 0; i < n; ++i) {
    if (pa[i] != pb[i]) {
      return false;
    }
  }
  return true;
}

C10_NOINLINE at::Tensor read_tensor_slow(
    const TensorDict& td, const ClassInfo& info, size_t index) {
  const Value& value = tc_get(td, info, index);
  if (value.is_tensor()) {
    return value.tensor();
  }
  return tc_as_tensor(value, info, index);
}

}  // namespace

at::Tensor tc_read_tensor(
    const TensorDict& td, const ClassInfo& info, size_t index) {
  // The fast path of tc_find spelled out here, with the rest out of line:
  // a field read should cost about as much as copying a struct member (see
  // benchmarks/tensor_class_benchmark.cpp).
  const NodeRange nodes = td.unsafeGetImpl()->nodes();
  if (C10_LIKELY(index < nodes.size())) {
    const Node* node = *nodes.begin() + index;
    if (C10_LIKELY(same_key(node->key, info.fields[index].name))) {
      if (const auto* t = std::get_if<at::Tensor>(&node->value.variant())) {
        return *t;
      }
    }
  }
  return read_tensor_slow(td, info, index);
}

size_t tc_field_index(const ClassInfo& info, std::string_view name) {
  const auto index = find_field(info, name);
  TENSORDICT_CHECK_KEY(
      index.has_value(),
      info.name,
      " has no field ",
      python_repr(name),
      ". Its fields are ",
      sorted_names_repr(tc_field_names(info)),
      ".");
  return *index;
}

at::Tensor tc_as_tensor(
    const Value& value, const ClassInfo& info, size_t index) {
  if (value.is_tensor()) {
    return value.tensor();
  }
  // A number field stored as NonTensorData (batch dims, or saved by an
  // autocast class) reads back as its 0-dim tensor.
  const FieldKind kind = info.fields[index].kind;
  if (kind == FieldKind::kInt || kind == FieldKind::kDouble ||
      kind == FieldKind::kBool) {
    const auto j = single_json(value);
    if (j && (j->is_number() || j->is_boolean())) {
      return json_number_tensor(*j);
    }
  }
  throw_wrong_entry(value, info, index, "a tensor");
}

TensorDict tc_as_tensordict(
    const Value& value, const ClassInfo& info, size_t index) {
  if (!value.is_tensordict()) {
    throw_wrong_entry(value, info, index, "a TensorDict");
  }
  return value.tensordict();
}

std::string tc_as_string(
    const Value& value, const ClassInfo& info, size_t index) {
  const auto j = single_json(value);
  if (!j || !j->is_string()) {
    throw_wrong_entry(value, info, index, "a string");
  }
  return j->get<std::string>();
}

Json tc_as_json(const Value& value, const ClassInfo& info, size_t index) {
  const auto j = single_json(value);
  if (!j) {
    throw_wrong_entry(value, info, index, "a JSON value");
  }
  return *j;
}

namespace {
template <typename T>
T read_number(
    const Value& value,
    const ClassInfo& info,
    size_t index,
    const char* expected) {
  if (value.is_tensor()) {
    const at::Tensor& t = value.tensor();
    TORCH_CHECK_TYPE(
        t.numel() == 1,
        field_label(info, index),
        " holds a tensor of shape ",
        t.sizes(),
        ", not ",
        expected);
    return t.item<T>();
  }
  const auto j = single_json(value);
  if (!j || !(j->is_number() || j->is_boolean())) {
    throw_wrong_entry(value, info, index, expected);
  }
  if (j->is_boolean()) {
    return static_cast<T>(j->get<bool>());
  }
  if (j->is_number_integer()) {
    return static_cast<T>(j->get<int64_t>());
  }
  return static_cast<T>(j->get<double>());
}
}  // namespace

int64_t tc_as_int(const Value& value, const ClassInfo& info, size_t index) {
  return read_number<int64_t>(value, info, index, "an integer");
}

double tc_as_double(const Value& value, const ClassInfo& info, size_t index) {
  return read_number<double>(value, info, index, "a float");
}

bool tc_as_bool(const Value& value, const ClassInfo& info, size_t index) {
  return read_number<bool>(value, info, index, "a bool");
}

void tc_set_field(
    const TensorDict& td_in,
    const ClassInfo& info,
    size_t index,
    const FieldArg& arg,
    const SetOptions& options) {
  TensorDict td = td_in;
  const bool inplace = options.inplace();
  const FieldInfo& field = info.fields[index];
  const std::string& key = field.name;
  const FieldArg::Variant& v = arg.value();
  const Value* existing = inplace ? tc_find(td, info, index) : nullptr;
  if (inplace) {
    // Python's tensorclass refuses a locked instance even in place.
    check_unlocked(*td.unsafeGetImpl());
  }
  // Python writes a tensor or a dict into the entry it replaces; anything
  // else has no storage to write into.
  const auto refuse_in_place = [&]() {
    TORCH_CHECK(
        existing == nullptr,
        "Cannot update the existing ",
        entry_name(*existing),
        " of ",
        field_label(info, index),
        " in place with ",
        arg_name(arg));
  };
  const SetOptions& set_options = options;
  if (arg.is_none()) {
    refuse_in_place();
    if (td.contains(key)) {
      td.del_(key);
    }
    return;
  }
  const bool autocast = has_flag(info.flags, ClassFlags::kAutocast);
  const bool nocast = has_flag(info.flags, ClassFlags::kNocast);
  auto wrong = [&]() {
    C10_THROW_ERROR(
        TypeError,
        c10::str(
            field_label(info, index),
            " expects ",
            kind_name(field.kind),
            ", got ",
            arg_name(arg)));
  };
  switch (field.kind) {
    case FieldKind::kTensor:
      if (const auto* t = std::get_if<at::Tensor>(&v)) {
        td.set(key, *t, set_options);
      } else if (is_number(v)) {
        td.set(key, number_tensor(v), set_options);
      } else {
        wrong();
      }
      return;
    case FieldKind::kTensorDict:
      if (v.index() == 2 && arg.class_info() == nullptr) {
        td.set(key, std::get<TensorDict>(v), set_options);
      } else {
        wrong();
      }
      return;
    case FieldKind::kTensorClass: {
      const auto* nested = std::get_if<TensorDict>(&v);
      if (nested == nullptr) {
        wrong();
        return;
      }
      if (arg.class_info() == nullptr) {
        // A plain dict must fit the class, as Python's autocast checks.
        tc_check(*nested, *field.nested);
      } else {
        TORCH_CHECK_TYPE(
            arg.class_info() == field.nested,
            field_label(info, index),
            " expects a ",
            field.nested->name,
            ", got a ",
            arg.class_info()->name);
      }
      td.set(key, *nested, set_options);
      return;
    }
    case FieldKind::kString:
      refuse_in_place();
      if (const auto* j = json_of(v); j != nullptr && j->is_string()) {
        td.set_non_tensor(key, *j);
      } else if (autocast && is_number(v)) {
        td.set_non_tensor(key, number_json(v, field.kind, false).dump());
      } else {
        wrong();
      }
      return;
    case FieldKind::kJson:
      refuse_in_place();
      if (const auto* j = json_of(v)) {
        td.set_non_tensor(key, *j);
      } else if (is_number(v)) {
        td.set_non_tensor(key, number_json(v, field.kind, false));
      } else {
        wrong();
      }
      return;
    case FieldKind::kInt:
    case FieldKind::kDouble:
    case FieldKind::kBool: {
      if (const auto* t = std::get_if<at::Tensor>(&v)) {
        if (autocast) {
          TORCH_CHECK_TYPE(
              t->numel() == 1,
              "Failed to cast the value ",
              key,
              " to ",
              kind_name(field.kind),
              ": ",
              field_label(info, index),
              " got a tensor of shape ",
              t->sizes());
          Json j;
          if (field.kind == FieldKind::kInt) {
            j = t->item<int64_t>();
          } else if (field.kind == FieldKind::kDouble) {
            j = t->item<double>();
          } else {
            j = t->item<bool>();
          }
          refuse_in_place();
          td.set_non_tensor(key, j);
        } else {
          td.set(key, *t, set_options);
        }
        return;
      }
      if (!is_number(v)) {
        wrong();
        return;
      }
      if (existing != nullptr && existing->is_tensor()) {
        // In place, a number is written into the field's tensor (and
        // throws there if it does not fit the batch), as in Python.
        td.set(key, number_tensor(v), set_options);
        return;
      }
      refuse_in_place();
      if (autocast || nocast) {
        td.set_non_tensor(key, number_json(v, field.kind, autocast));
      } else if (td.batch_dims() > 0) {
        // A 0-dim tensor would not fit the batch: Python keeps the value.
        td.set_non_tensor(key, number_json(v, field.kind, false));
      } else {
        td.set(key, number_tensor(v));
      }
      return;
    }
  }
}

void tc_set_by_name(
    const TensorDict& td,
    const ClassInfo& info,
    std::string_view name,
    const FieldArg& value,
    const SetOptions& options) {
  const auto index = find_field(info, name);
  if (!index) {
    throw_no_such_field(info, name);
  }
  tc_set_field(td, info, *index, value, options);
}

void tc_set_nested(
    const TensorDict& td,
    const ClassInfo& info,
    c10::ArrayRef<std::string_view> key,
    const FieldArg& value,
    const SetOptions& options) {
  TORCH_CHECK_VALUE(!key.empty(), "set: the key is empty");
  if (key.size() == 1) {
    tc_set_by_name(td, info, key.front(), value, options);
    return;
  }
  const auto index = find_field(info, key.front());
  if (!index) {
    throw_no_such_field(info, key.front());
  }
  // Python checks the instance's own lock before it reaches the field.
  check_unlocked(*td.unsafeGetImpl());
  const FieldInfo& field = info.fields[*index];
  const Value* first = tc_find(td, info, *index);
  TORCH_CHECK_VALUE(
      first != nullptr && first->is_tensordict(),
      "set: ",
      field_label(info, *index),
      first == nullptr ? " is unset (None)" : " holds no nested dict or class",
      ", so it has no entry '",
      key[1],
      "'");
  const TensorDict& nested = first->tensordict();
  if (field.kind == FieldKind::kTensorClass) {
    try {
      tc_set_nested(nested, *field.nested, key.slice(1), value, options);
    } catch (c10::Error& e) {
      TORCH_RETHROW(e, "while setting ", field_label(info, *index));
    }
    return;
  }
  std::vector<std::string> rest(key.begin() + 1, key.end());
  TensorDict dest = nested;
  const FieldArg::Variant& v = value.value();
  if (const auto* t = std::get_if<at::Tensor>(&v)) {
    dest.set(NestedKey(rest), *t, options);
  } else if (const auto* d = std::get_if<TensorDict>(&v)) {
    dest.set(NestedKey(rest), *d, options);
  } else if (const auto* j = json_of(v)) {
    dest.set_non_tensor(NestedKey(rest), *j);
  } else if (is_number(v)) {
    dest.set(NestedKey(rest), number_tensor(v), options);
  } else {
    // None: Python's TensorDict.set(key, None) stores nothing either.
    TORCH_CHECK_VALUE(
        false,
        "set: cannot store None at ",
        NestedKey(rest).to_string(),
        " of the TensorDict ",
        field_label(info, *index));
  }
}

std::optional<Value> tc_get_or(
    const TensorDict& td,
    const ClassInfo& info,
    std::string_view name,
    std::optional<Value> default_value) {
  const auto index = find_field(info, name);
  if (!index) {
    return default_value;
  }
  const Value* value = tc_find(td, info, *index);
  if (value == nullptr) {
    return std::nullopt;
  }
  return *value;
}

std::optional<Value> tc_get_or_nested(
    const TensorDict& td,
    const ClassInfo& info,
    c10::ArrayRef<std::string_view> key,
    std::optional<Value> default_value) {
  TORCH_CHECK_VALUE(!key.empty(), "get: the key is empty");
  TensorDict level = td;
  const ClassInfo* level_info = &info;
  for (size_t i = 0; i < key.size(); ++i) {
    const bool last = i + 1 == key.size();
    if (level_info == nullptr) {
      // A TensorDict field: the rest of the key is its nested key.
      std::vector<std::string> rest(key.begin() + i, key.end());
      const Value* value = level.find(NestedKey(std::move(rest)));
      return value != nullptr ? std::optional<Value>(*value) : default_value;
    }
    const auto index = find_field(*level_info, key[i]);
    if (!index) {
      return default_value;
    }
    const Value* value = tc_find(level, *level_info, *index);
    if (value == nullptr) {
      // Python: an unset last field is None; an unset one before it has
      // no attribute to chain to, so the default.
      return last ? std::nullopt : default_value;
    }
    if (last) {
      return *value;
    }
    if (!value->is_tensordict()) {
      return default_value;
    }
    level = value->tensordict();
    level_info = level_info->fields[*index].nested;
  }
  return default_value;  // not reached: the loop returns at the last part
}

Value tc_setdefault(
    const TensorDict& td,
    const ClassInfo& info,
    std::string_view name,
    const FieldArg& default_value) {
  const size_t index = tc_field_index(info, name);
  if (const Value* value = tc_find(td, info, index)) {
    return *value;
  }
  // Python stores None and returns it; a Value cannot be None.
  TORCH_CHECK_VALUE(
      !default_value.is_none(),
      "setdefault: the field '",
      name,
      "' of ",
      info.name,
      " is unset and the default is None, so there is no entry to return");
  tc_set_field(td, info, index, default_value);
  return tc_get(td, info, index);
}

TensorDict tc_construct(
    const ClassInfo& info,
    c10::ArrayRef<FieldInit> fields,
    c10::IntArrayRef batch_size,
    std::optional<c10::Device> device,
    const DimNames& names) {
  TensorDict td(batch_size, device, names);
  std::vector<const FieldArg*> given(info.fields.size(), nullptr);
  for (const FieldInit& init : fields) {
    const auto index = find_field(info, init.name());
    if (!index) {
      throw_no_such_field(info, init.name());
    }
    TORCH_CHECK_TYPE(
        given[*index] == nullptr,
        info.name,
        ".__init__() got multiple values for argument ",
        python_repr(init.name()));
    given[*index] = &init.value();
  }
  std::vector<std::string> missing;
  for (size_t i = 0; i < info.fields.size(); ++i) {
    if (given[i] == nullptr && !info.fields[i].optional &&
        info.fields[i].make_default == nullptr) {
      missing.push_back(python_repr(info.fields[i].name));
    }
  }
  if (!missing.empty()) {
    // Python's wording: 'a', 'a' and 'b', 'a', 'b', and 'c'.
    std::string list;
    for (size_t i = 0; i < missing.size(); ++i) {
      if (i > 0) {
        list += missing.size() == 2       ? " and "
                : i + 1 == missing.size() ? ", and "
                                          : ", ";
      }
      list += missing[i];
    }
    TORCH_CHECK_TYPE(
        false,
        info.name,
        ".__init__() missing ",
        missing.size(),
        " required positional argument",
        missing.size() == 1 ? "" : "s",
        ": ",
        list);
  }
  td.unsafeGetImpl()->reserve(info.fields.size());
  for (size_t i = 0; i < info.fields.size(); ++i) {
    if (given[i] != nullptr) {
      tc_set_field(td, info, i, *given[i]);
    } else if (info.fields[i].make_default != nullptr) {
      tc_set_field(td, info, i, info.fields[i].make_default());
    }
  }
  if (has_flag(info.flags, ClassFlags::kFrozen)) {
    td.lock_();
  }
  return td;
}

namespace {

// Python's error for keys that are not fields: `keys` are the dict's,
// `extra` the ones (of the dict or given beside it) that are no field.
[[noreturn]] void throw_keys_not_fields(
    const std::vector<std::string>& keys,
    const std::vector<std::string>& extra,
    const ClassInfo& info) {
  auto set_repr = [](std::vector<std::string> names) {
    std::sort(names.begin(), names.end());
    return "{" + join_spelled(names, python_repr) + "}";
  };
  TORCH_CHECK_VALUE(
      false,
      "Keys from the tensordict (",
      set_repr(keys),
      ") must correspond to the class attributes (",
      set_repr(tc_field_names(info)),
      "). Got the set of keys {",
      set_repr(extra),
      "} which do not belong to the class.");
}

}  // namespace

namespace {

// Checks the dict of a TensorClass field: its Python class marker and its
// fields.
void check_nested_class(
    const TensorDict& nested, const ClassInfo& info, size_t index) {
  const FieldInfo& field = info.fields[index];
  const std::string& cls = nested.python_class();
  TORCH_CHECK_VALUE(
      cls.empty() || field.nested->python_class.empty() ||
          cls == field.nested->python_class,
      field_label(info, index),
      " holds the Python class ",
      cls,
      ", but ",
      field.nested->name,
      " is registered as ",
      field.nested->python_class);
  try {
    tc_check(nested, *field.nested);
  } catch (c10::Error& e) {
    TORCH_RETHROW(e, "while checking ", field_label(info, index));
  }
}

// Throws unless `value` fits field `index`.
void check_entry(const Value& value, const ClassInfo& info, size_t index) {
  const FieldKind kind = info.fields[index].kind;
  if (const char* expected = kind_mismatch(value, kind)) {
    throw_wrong_entry(value, info, index, expected);
  }
  if (kind == FieldKind::kTensorClass) {
    check_nested_class(value.tensordict(), info, index);
  }
}

}  // namespace

void tc_check(const TensorDict& td, const ClassInfo& info) {
  const TensorDictImpl& impl = *td.unsafeGetImpl();
  std::vector<std::string> extra;
  std::vector<std::string> keys;
  for (const auto& node : impl.nodes()) {
    keys.push_back(node->key);
    if (!find_field(info, node->key)) {
      extra.push_back(node->key);
    }
  }
  if (!extra.empty()) {
    throw_keys_not_fields(keys, extra, info);
  }
  for (size_t i = 0; i < info.fields.size(); ++i) {
    if (const Value* value = tc_find(td, info, i)) {
      check_entry(*value, info, i);
    }
  }
}

void tc_rename_key(
    const TensorDict& td,
    const ClassInfo& info,
    const NestedKey& old_key,
    const NestedKey& new_key,
    bool safe) {
  (void)resolve_field(info, old_key, "rename_key_");
  const FieldAt to = resolve_field(info, new_key, "rename_key_");
  const Value* value = td.find(old_key);
  if (value != nullptr && to.info != nullptr) {
    const FieldKind kind = to.info->fields[to.index].kind;
    if (const char* expected = kind_mismatch(*value, kind)) {
      C10_THROW_ERROR(
          TypeError,
          c10::str(
              "rename_key_: the entry at ",
              old_key.to_string(),
              " is ",
              entry_name(*value),
              ", but ",
              field_label(*to.info, to.index),
              " takes ",
              expected));
    }
    if (kind == FieldKind::kTensorClass) {
      check_nested_class(value->tensordict(), *to.info, to.index);
    }
  }
  TensorDict(td).rename_key_(old_key, new_key, safe);
}

namespace {

// Writes NonTensorData(null) for the unset fields of a class level and of
// its TensorClass fields (the dicts of a deep copy).
void write_none_fields(const TensorDict& td, const ClassInfo& info) {
  TensorDict out = td;
  for (size_t i = 0; i < info.fields.size(); ++i) {
    const FieldInfo& field = info.fields[i];
    const Value* value = tc_find(td, info, i);
    if (value == nullptr) {
      out.set_non_tensor(field.name, Json(nullptr));
    } else if (field.nested != nullptr && value->is_tensordict()) {
      write_none_fields(value->tensordict(), *field.nested);
    }
  }
}

}  // namespace

TensorDict tc_to_tensordict(
    const TensorDict& td, const ClassInfo& info, bool retain_none) {
  TensorDict out = td.clone();
  if (retain_none) {
    if (out.is_locked()) {
      out.unlock_();
    }
    write_none_fields(out, info);
  }
  return out;
}

TensorDict tc_from_tensordict(
    TensorDict td,
    const ClassInfo& info,
    c10::ArrayRef<FieldInit> non_tensordict) {
  std::vector<const FieldInit*> given;
  std::vector<std::string> extra;
  for (const FieldInit& init : non_tensordict) {
    if (init.value().is_none()) {
      continue;
    }
    TENSORDICT_CHECK_KEY(
        !td.contains(init.name()),
        init.name(),
        " is present in both tensor and non-tensor dicts.");
    if (!find_field(info, init.name())) {
      extra.push_back(init.name());
    }
    given.push_back(&init);
  }
  std::vector<std::string> keys;
  for (const auto& node : td.unsafeGetImpl()->nodes()) {
    keys.push_back(node->key);
    if (!find_field(info, node->key)) {
      extra.push_back(node->key);
    }
  }
  if (!extra.empty()) {
    throw_keys_not_fields(keys, extra, info);
  }
  if (!given.empty()) {
    const bool locked = td.is_locked();
    td = td.copy();
    if (td.is_locked()) {
      td.unlock_();
    }
    for (const FieldInit* init : given) {
      tc_set_field(td, info, *find_field(info, init->name()), init->value());
    }
    if (locked) {
      td.lock_();
    }
  }
  tc_check(td, info);
  return td;
}

namespace {

// A class description as the reprs read it (NOTE [Class reprs]).
class TensorClassReprHook final : public ClassReprHook {
 public:
  explicit TensorClassReprHook(const ClassInfo& info) : info_(info) {}

  const std::string& name() const override {
    return info_.name;
  }
  size_t field_count() const override {
    return info_.fields.size();
  }
  const std::string& field_name(size_t index) const override {
    return info_.fields[index].name;
  }
  const Value* field_value(const TensorDict& td, size_t index) const override {
    return tc_find(td, info_, index);
  }
  ClassReprHookPtr nested(size_t index) const override {
    const FieldInfo& field = info_.fields[index];
    return field.kind == FieldKind::kTensorClass
               ? std::make_unique<TensorClassReprHook>(*field.nested)
               : ClassReprHookPtr();
  }

 private:
  const ClassInfo& info_;
};

}  // namespace

std::string tc_repr(const TensorDict& td, const ClassInfo& info) {
  return class_repr(td, TensorClassReprHook(info), get_printoptions());
}

std::string tc_repr_compact(const TensorDict& td, const ClassInfo& info) {
  return class_repr_compact(td, TensorClassReprHook(info), get_printoptions());
}

std::string tc_repr_detailed(const TensorDict& td, const ClassInfo& info) {
  return class_repr_detailed(td, TensorClassReprHook(info), get_printoptions());
}

void tc_mark_classes(const TensorDict& td, const ClassInfo& info) {
  // The walk enters the TensorClass fields only, keeping their classes.
  struct Mark : WalkVisitor {
    std::vector<const ClassInfo*> classes;  // of the dicts entered

    void mark(TensorDictImpl& impl, const ClassInfo& cls) {
      if (!cls.python_class.empty()) {
        impl.python_class = cls.python_class;
      }
      classes.push_back(&cls);
    }
    bool enter_dict(const KeyPath& path, const TensorDict& dict) {
      const ClassInfo* cls = nested_class(*classes.back(), path.back());
      if (cls == nullptr) {
        return false;
      }
      mark(*dict.unsafeGetImpl(), *cls);
      return true;
    }
    void leave_dict(const KeyPath& /*path*/, const TensorDict& /*dict*/) {
      classes.pop_back();
    }
  } mark;
  mark.mark(*td.unsafeGetImpl(), info);
  walk(td, mark);
}

TensorDict tc_marked_copy(const TensorDict& td, const ClassInfo& info) {
  TensorDict copy = td.copy();
  tc_mark_classes(copy, info);
  return copy;
}

void check_loaded_class(
    const std::string& cls, const ClassInfo& info, const std::string& prefix) {
  TORCH_CHECK_VALUE(
      cls.empty() || info.python_class.empty() || cls == info.python_class,
      prefix,
      " holds the Python class ",
      cls,
      ", but ",
      info.name,
      " is registered as ",
      info.python_class);
}

TensorDict tc_entry(
    const TensorDict& td, const ClassInfo& info, const NestedKey& key) {
  const Value* value = td.find(key);
  TENSORDICT_CHECK_KEY(
      value != nullptr && value->is_tensordict(),
      "no ",
      info.name,
      " at key ",
      key.to_string(),
      value == nullptr ? ": the key is missing"
                       : c10::str(": the entry is a ", value->type_name()));
  TensorDict nested = value->tensordict();
  check_loaded_class(nested.python_class(), info, key.to_string());
  try {
    tc_check(nested, info);
  } catch (c10::Error& e) {
    TORCH_RETHROW(e, "while reading ", key.to_string(), " as ", info.name);
  }
  return nested;
}

void tc_check_lazy(const LazyStackedTensorDict& stack, const ClassInfo& info) {
  const auto& elements = stack.tensordicts();
  for (size_t i = 0; i < elements.size(); ++i) {
    try {
      tc_check(elements[i], info);
    } catch (c10::Error& e) {
      TORCH_RETHROW(e, "(element ", i, " of the lazy stack)");
    }
  }
}

void tc_register(ClassInfo& info, std::string type_string) {
  // set_python_class validates the spelling.
  TensorDict probe;
  probe.set_python_class(type_string);
  info.python_class = std::move(type_string);
}

void tc_write(std::ostream& out, const std::string& text) {
  out << text;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
