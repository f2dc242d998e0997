// The TensorClass side of the state dict: the StateDictHook of a class level
// (see NOTE [State-dict hooks]), and tc_state_dict / tc_load_state_dict.

#include "tensordict/tensor_class.h"

#include <c10/util/Exception.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "core/tensor_dict_impl.h"
#include "state_dict/hook.h"
#include "tensor_class/fields.h"
#include "tensordict/errors.h"
#include "tensordict/json.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

bool is_tensor_field(FieldKind kind) {
  return kind == FieldKind::kTensor || kind == FieldKind::kInt ||
         kind == FieldKind::kDouble || kind == FieldKind::kBool;
}

// A level that is an instance of `cls`: keyed by field names, with the
// class name and the non-tensor fields (Python's `_type` and `_non_tensor`)
// in its metadata.
class ClassStateDictHook final : public StateDictHook {
 public:
  // `loads_unset`: entries for unset fields are loaded too (the legacy
  // form, which Python loads as a TensorDict, unset fields included).
  explicit ClassStateDictHook(const ClassInfo& cls, bool loads_unset = false)
      : cls_(cls), loads_unset_(loads_unset) {}

  StateDictHookPtr nested(std::string_view key) const override {
    const ClassInfo* nested = nested_class(cls_, key);
    if (nested == nullptr) {
      return nullptr;
    }
    return std::make_unique<ClassStateDictHook>(*nested, loads_unset_);
  }

  // Every non-tensor field goes to `_non_tensor`, as in Python.
  bool saves_in_metadata(const Value& /*value*/) const override {
    return true;
  }

  // `_non_tensor` as Python builds it: first the unset fields (None), then
  // the non-tensor entries in order. A stack whose elements differ has no
  // one value there: Python raises (AttributeError, from reading the
  // stack's `data`), and so does C++, with Python's text.
  void add_metadata(
      const TensorDict& td, StateDictMetadata& metadata) const override {
    const TensorDictImpl& impl = *td.unsafeGetImpl();
    Json fields = Json::object();
    for (const auto& field : cls_.fields) {
      if (impl.find(field.name) == nullptr) {
        fields[field.name] = nullptr;
      }
    }
    for (const auto& node : impl.nodes()) {
      if (node->value.is_non_tensor()) {
        auto one = single_json(node->value);
        TORCH_CHECK(
            one.has_value(),
            "Cannot get the non-unique data of a NonTensorStack. Use "
            ".tolist() instead. (the field '",
            node->key,
            "' of ",
            cls_.name,
            " holds a stack of differing values, which a state dict cannot "
            "hold)");
        fields[node->key] = std::move(*one);
      }
    }
    metadata.type = cls_.name;
    metadata.non_tensor_fields =
        std::make_shared<const Json>(std::move(fields));
  }

  bool non_tensor_entries_are_keys() const override {
    return false;
  }

  // Python refuses an unknown non-tensor field even when not strict. With
  // `strict`, every entry names a field the instance holds or the metadata
  // lists (Python's expected keys); a set field the state dict lacks keeps
  // its value, as in Python, strict or not.
  void check_keys(
      const TensorDict& td,
      const StateDict& state_dict,
      const Json* fields,
      bool strict) const override {
    if (fields != nullptr) {
      for (const auto& [name, value] : fields->items()) {
        if (!find_field(cls_, name)) {
          throw_unexpected_field(name);
        }
      }
    }
    if (!strict) {
      return;
    }
    for (const auto& [key, entry] : state_dict.items()) {
      if (entry.kind() != StateDict::Kind::kTensor &&
          entry.kind() != StateDict::Kind::kNested) {
        continue;
      }
      if (!find_field(cls_, key)) {
        throw_unexpected_field(key);
      }
      TENSORDICT_CHECK_KEY(
          td.find(key) != nullptr ||
              (fields != nullptr && fields->contains(key)),
          "Key '",
          key,
          "' wasn't expected in the state-dict: the field '",
          key,
          "' of ",
          cls_.name,
          " is unset (None) in the instance loaded into, and a strict load "
          "sets no field (pass strict=false to skip the entry)");
    }
  }

  // Null unsets the field; equal values are left alone, so a frozen
  // instance can load.
  void load_field(TensorDict& td, const std::string& name, const Json& value)
      const override {
    const size_t index = *find_field(cls_, name);
    if (value.is_null()) {
      TORCH_CHECK_VALUE(
          cls_.fields[index].optional,
          "the state dict holds None for the field '",
          name,
          "' of ",
          cls_.name,
          ", which is not optional");
      if (td.contains(name)) {
        td.del_(name);
      }
    } else if (const Value* existing = td.find(name);
               existing == nullptr || single_json(*existing) != value) {
      tc_set_field(td, cls_, index, field_arg_from_json(value));
    }
  }

  // An entry that is not a field, or is a field the instance leaves unset,
  // is refused by check_keys when strict and skipped when not (Python loads
  // only the fields the instance holds).
  bool takes_entry(const TensorDict& td, std::string_view key, LoadedEntry what)
      const override {
    const auto index = find_field(cls_, key);
    if (!index || (!loads_unset_ && td.find(std::string(key)) == nullptr)) {
      return false;
    }
    const FieldInfo& field = cls_.fields[*index];
    const FieldKind kind = field.kind;
    switch (what) {
      case LoadedEntry::kTensor:
        check_takes(field, is_tensor_field(kind), "a tensor");
        break;
      case LoadedEntry::kNonTensor:
        check_takes(
            field,
            kind != FieldKind::kTensor && kind != FieldKind::kTensorDict &&
                kind != FieldKind::kTensorClass,
            "non-tensor data");
        break;
      case LoadedEntry::kNested:
        check_takes(
            field,
            kind == FieldKind::kTensorDict || kind == FieldKind::kTensorClass,
            "a nested level");
        break;
    }
    return true;
  }

  // A number field stored as non-tensor data takes the tensor as the class
  // flags cast it.
  bool load_tensor(
      TensorDict& td,
      const std::string& key,
      const at::Tensor& tensor) const override {
    const size_t index = *find_field(cls_, key);
    if (cls_.fields[index].kind == FieldKind::kTensor) {
      return false;
    }
    const Value* existing = td.find(key);
    if (existing != nullptr && existing->is_tensor()) {
      return false;
    }
    tc_set_field(td, cls_, index, FieldArg(tensor));
    return true;
  }

 private:
  [[noreturn]] void throw_unexpected_field(const std::string& key) const {
    TENSORDICT_CHECK_KEY(
        false,
        "Key '",
        key,
        "' wasn't expected in the state-dict: ",
        cls_.name,
        " has no such field");
  }

  void check_takes(const FieldInfo& field, bool ok, const char* what) const {
    TORCH_CHECK_TYPE(
        ok,
        "the state dict holds ",
        what,
        " for the field '",
        field.name,
        "' of ",
        cls_.name,
        ", which cannot hold one");
  }

  const ClassInfo& cls_;
  bool loads_unset_;
};

}  // namespace

StateDict tc_state_dict(
    const TensorDict& td,
    const ClassInfo& info,
    const StateDictOptions& options) {
  return make_state_dict(
      td, std::make_unique<ClassStateDictHook>(info), options);
}

StateDict& tc_state_dict_into(
    StateDict& destination,
    const TensorDict& td,
    const ClassInfo& info,
    const StateDictOptions& options) {
  return detail::add_to_destination(
      destination, tc_state_dict(td, info, options));
}

namespace {

// NOTE [Legacy TensorClass state dicts]
// Python tensorclasses before the field-keyed form saved
// `{"_tensordict": <the TensorDict state dict of the tensor fields>,
// "_non_tensordict": {name: value}}`, and Python's `load_state_dict` still
// reads it. In a C++ StateDict both are nested levels; the non-tensor values
// are in the metadata of "_non_tensordict": as `non_tensor_fields` (a JSON
// object) at its "" prefix, or as one non-tensor value per prefix (how a
// TensorDict state dict carries its non-tensor entries).

bool is_legacy_class_state_dict(const StateDict& state_dict) {
  const auto* tensors = state_dict.find("_tensordict");
  const auto* non_tensors = state_dict.find("_non_tensordict");
  return tensors != nullptr && non_tensors != nullptr &&
         tensors->kind() == StateDict::Kind::kNested &&
         non_tensors->kind() == StateDict::Kind::kNested;
}

// The values of a legacy "_non_tensordict" level, by field name.
Json legacy_non_tensor_values(const StateDict& level) {
  Json values = Json::object();
  for (const auto& [prefix, md] : level.metadata()) {
    if (prefix.empty()) {
      if (md.non_tensor_fields != nullptr) {
        values.update(*md.non_tensor_fields);
      }
    } else if (md.non_tensor) {
      const auto one = single_json(*md.non_tensor);
      TORCH_CHECK_VALUE(
          one.has_value(),
          "the legacy state dict holds a stack of differing values for '",
          prefix,
          "' in _non_tensordict");
      values[prefix] = *one;
    }
  }
  return values;
}

[[noreturn]] void throw_legacy_unexpected(const std::string& key) {
  TENSORDICT_CHECK_KEY(
      false, "Key '", key, "' wasn't expected in the state-dict.");
}

// Loads the legacy form, as Python's `_load_state_dict_legacy`: a None
// value leaves the field as it is, and `strict` applies to the tensor
// fields only (the ones "_tensordict" must hold).
void load_legacy_state_dict(
    TensorDict& dest,
    const ClassInfo& info,
    const StateDict& state_dict,
    bool strict,
    bool assign,
    const ClassStateDictHook& hook) {
  for (const auto& [key, entry] : state_dict.items()) {
    if (key != "_tensordict" && key != "_non_tensordict") {
      throw_legacy_unexpected(key);
    }
  }
  const StateDict& tensors = state_dict.nested("_tensordict");
  for (const auto& [key, entry] : tensors.items()) {
    // Flat keys ("inner.x") name their field first.
    const std::string field = key.substr(0, key.find('.'));
    if ((entry.kind() == StateDict::Kind::kTensor ||
         entry.kind() == StateDict::Kind::kNested) &&
        !find_field(info, field)) {
      throw_legacy_unexpected(key);
    }
  }
  const Json values =
      legacy_non_tensor_values(state_dict.nested("_non_tensordict"));
  for (const auto& [name, value] : values.items()) {
    if (!find_field(info, name)) {
      throw_legacy_unexpected(name);
    }
  }
  // Python loads "_tensordict" as a TensorDict, whose strict load wants the
  // key sets to match: both ways are checked here, before any write.
  if (strict) {
    std::set<std::string> missing;
    for (const auto& node : dest.unsafeGetImpl()->nodes()) {
      if (node->value.is_non_tensor()) {
        continue;
      }
      bool found = false;
      for (const auto& [key, entry] : tensors.items()) {
        found = found || key == node->key || key.rfind(node->key + ".", 0) == 0;
      }
      if (!found) {
        missing.insert(node->key);
      }
    }
    TORCH_CHECK(
        missing.empty(),
        "Cannot load the legacy state dict into ",
        info.name,
        ": its _tensordict has no entry for the fields ",
        key_set_repr(missing),
        " (pass strict=false to keep their values)");
    std::set<std::string> unset;
    for (const auto& [key, entry] : tensors.items()) {
      const std::string field = key.substr(0, key.find('.'));
      if ((entry.kind() == StateDict::Kind::kTensor ||
           entry.kind() == StateDict::Kind::kNested) &&
          dest.find(field) == nullptr) {
        unset.insert(field);
      }
    }
    TORCH_CHECK(
        unset.empty(),
        "Cannot load the legacy state dict into ",
        info.name,
        ": its _tensordict has entries for the unset fields ",
        key_set_repr(unset),
        " (pass strict=false to set them)");
  }
  for (const auto& [name, value] : values.items()) {
    if (!value.is_null()) {
      tc_set_field(
          dest, info, *find_field(info, name), field_arg_from_json(value));
    }
  }
  load_state_dict_into(dest, tensors, /*strict=*/false, assign, &hook);
}

}  // namespace

void tc_load_state_dict(
    const TensorDict& td,
    const ClassInfo& info,
    const StateDict& state_dict,
    const LoadStateDictOptions& options) {
  TensorDict dest = td;
  // The legacy form is one nested shape, whatever `from_flatten` says.
  if (is_legacy_class_state_dict(state_dict)) {
    const ClassStateDictHook legacy(info, /*loads_unset=*/true);
    load_legacy_state_dict(
        dest, info, state_dict, options.strict(), options.assign(), legacy);
    return;
  }
  const ClassStateDictHook hook(info);
  load_state_dict_into(
      dest,
      state_dict,
      options.strict(),
      options.assign(),
      &hook,
      options.from_flatten());
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
