// StateDict, TensorDict::state_dict and load_state_dict, following Python
// tensordict's flat, nested and legacy forms, and the same for TensorClass
// (detail::tc_state_dict): one walk, told the class of each level.

#include "tensordict/state_dict.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "detail/class_fields.h"
#include "detail/format.h"
#include "detail/walk.h"
#include "tensordict/errors.h"
#include "tensordict/json.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

constexpr const char* kLegacyBatchSize = "__batch_size";
constexpr const char* kLegacyDevice = "__device";

const char* kind_name(StateDict::Kind kind) {
  switch (kind) {
    case StateDict::Kind::kTensor:
      return "a tensor";
    case StateDict::Kind::kNested:
      return "a nested state dict";
    case StateDict::Kind::kBatchSize:
      return "a legacy batch size";
    case StateDict::Kind::kDevice:
      return "a legacy device";
  }
  return "?";
}

void check_kind(StateDict::Kind got, StateDict::Kind expected) {
  TORCH_CHECK_TYPE(
      got == expected,
      "state dict entry is ",
      kind_name(got),
      ", not ",
      kind_name(expected));
}

// Python's repr of a set of str, sorted for stable messages: {'a', 'b'}.
std::string set_repr(const std::set<std::string>& keys) {
  if (keys.empty()) {
    return "set()";
  }
  std::string out = "{";
  bool first = true;
  for (const auto& key : keys) {
    if (!first) {
      out += ", ";
    }
    first = false;
    out += detail::python_repr(key);
  }
  return out + "}";
}

}  // namespace

// --- StateDict
// -------------------------------------------------------------------

const at::Tensor& StateDict::Entry::tensor() const {
  check_kind(kind_, Kind::kTensor);
  return tensor_;
}

const StateDict& StateDict::Entry::nested() const {
  check_kind(kind_, Kind::kNested);
  return *nested_;
}

const std::vector<int64_t>& StateDict::Entry::batch_size() const {
  check_kind(kind_, Kind::kBatchSize);
  return batch_size_;
}

const std::optional<c10::Device>& StateDict::Entry::device() const {
  check_kind(kind_, Kind::kDevice);
  return device_;
}

StateDict::Entry& StateDict::emplace(std::string key) {
  for (auto& item : items_) {
    if (item.first == key) {
      item.second = Entry();
      return item.second;
    }
  }
  items_.emplace_back(std::move(key), Entry());
  return items_.back().second;
}

StateDict& StateDict::insert(std::string key, at::Tensor tensor) {
  TORCH_CHECK_VALUE(
      tensor.defined(), "cannot insert an undefined tensor at '", key, "'");
  Entry& entry = emplace(std::move(key));
  entry.kind_ = Kind::kTensor;
  entry.tensor_ = std::move(tensor);
  return *this;
}

StateDict& StateDict::insert(std::string key, StateDict nested) {
  Entry& entry = emplace(std::move(key));
  entry.kind_ = Kind::kNested;
  entry.nested_ = std::make_shared<StateDict>(std::move(nested));
  return *this;
}

StateDict& StateDict::insert_legacy_batch_size(
    std::vector<int64_t> batch_size) {
  Entry& entry = emplace(kLegacyBatchSize);
  entry.kind_ = Kind::kBatchSize;
  entry.batch_size_ = std::move(batch_size);
  return *this;
}

StateDict& StateDict::insert_legacy_device(std::optional<c10::Device> device) {
  Entry& entry = emplace(kLegacyDevice);
  entry.kind_ = Kind::kDevice;
  entry.device_ = device;
  return *this;
}

bool StateDict::erase(const std::string& key) {
  const auto it =
      std::find_if(items_.begin(), items_.end(), [&](const auto& item) {
        return item.first == key;
      });
  if (it == items_.end()) {
    return false;
  }
  items_.erase(it);
  return true;
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& item : items_) {
    out.push_back(item.first);
  }
  return out;
}

const StateDict::Entry* StateDict::find(const std::string& key) const noexcept {
  for (const auto& item : items_) {
    if (item.first == key) {
      return &item.second;
    }
  }
  return nullptr;
}

const StateDict::Entry& StateDict::at(const std::string& key) const {
  const Entry* entry = find(key);
  if (entry == nullptr) {
    const auto names = keys();
    TENSORDICT_CHECK_KEY(
        false,
        "key \"",
        key,
        "\" not found in the state dict, whose keys are ",
        set_repr(std::set<std::string>(names.begin(), names.end())));
  }
  return *entry;
}

const at::Tensor& StateDict::tensor(const std::string& key) const {
  return at(key).tensor();
}

const StateDict& StateDict::nested(const std::string& key) const {
  return at(key).nested();
}

const StateDictMetadata* StateDict::find_metadata(
    const std::string& prefix) const noexcept {
  for (const auto& item : metadata_) {
    if (item.first == prefix) {
      return &item.second;
    }
  }
  return nullptr;
}

StateDict& StateDict::set_metadata(
    std::string prefix, StateDictMetadata metadata) {
  has_metadata_ = true;
  for (auto& item : metadata_) {
    if (item.first == prefix) {
      item.second = std::move(metadata);
      return *this;
    }
  }
  metadata_.emplace_back(std::move(prefix), std::move(metadata));
  return *this;
}

// --- state_dict
// --------------------------------------------------------------------

namespace {

StateDictMetadata level_metadata(const detail::TensorDictImpl& impl) {
  StateDictMetadata out;
  out.batch_size = impl.batch_size;
  out.device = impl.device;
  return out;
}

StateDictMetadata non_tensor_metadata(const Value& value) {
  StateDictMetadata out;
  out.batch_size = value.shape();
  out.device = value.is_non_tensor_data() ? value.non_tensor_data().device()
                                          : value.non_tensor_stack().device();
  out.non_tensor = value;
  return out;
}

// The class of a nested level: that of field `key` of `cls`, or null for a
// plain dict (and everything inside one).
const detail::ClassInfo* nested_class(
    const detail::ClassInfo* cls, std::string_view key) {
  if (cls == nullptr) {
    return nullptr;
  }
  const auto index = detail::find_field(*cls, key);
  return index ? cls->fields[*index].nested : nullptr;
}

// A TensorClass level's `_non_tensor`, as Python builds it: first the unset
// fields (None), then the non-tensor entries in order (added by
// `add_non_tensor_field`).
Json unset_fields(
    const detail::TensorDictImpl& impl, const detail::ClassInfo& cls) {
  Json fields = Json::object();
  for (const auto& field : cls.fields) {
    if (impl.find(field.name) == nullptr) {
      fields[field.name] = nullptr;
    }
  }
  return fields;
}

// Puts a non-tensor entry of a TensorClass level into `fields` by its one
// value; returns false for a stack whose elements differ, which Python
// cannot store there (C++ keeps it as a TensorDict level keeps a stack).
bool add_non_tensor_field(
    Json& fields, std::string_view key, const Value& value) {
  auto one = detail::single_json(value);
  if (!one) {
    return false;
  }
  fields[std::string(key)] = std::move(*one);
  return true;
}

StateDictMetadata class_metadata(
    const detail::TensorDictImpl& impl,
    const detail::ClassInfo& cls,
    Json fields) {
  StateDictMetadata out = level_metadata(impl);
  out.type = cls.name;
  out.non_tensor_fields = std::make_shared<const Json>(std::move(fields));
  return out;
}

// The state of one level while a state dict is built: its TensorClass (null
// for a TensorDict) and that class's `_non_tensor` fields so far. Python
// records a class level's metadata after its children's.
struct LevelState {
  const detail::TensorDictImpl* impl;
  const detail::ClassInfo* cls;
  Json fields;
  StateDict nested;  // the level's own state dict (nested form only)
};

// Starts a level: a TensorDict's metadata goes first, a class's is
// gathered until `class_level_metadata`.
LevelState begin_level(
    const detail::TensorDictImpl& impl,
    const detail::ClassInfo* cls,
    StateDict& metadata_out,
    const std::string& prefix) {
  LevelState level{&impl, cls, Json(), StateDict()};
  if (cls == nullptr) {
    metadata_out.set_metadata(prefix, level_metadata(impl));
  } else {
    level.fields = unset_fields(impl, *cls);
  }
  return level;
}

// Records a finished class level's metadata under `prefix`.
void end_level(
    LevelState& level, StateDict& metadata_out, const std::string& prefix) {
  if (level.cls != nullptr) {
    metadata_out.set_metadata(
        prefix,
        class_metadata(*level.impl, *level.cls, std::move(level.fields)));
  }
}

// The flat form: keys joined by ".", one metadata entry per level.
class FlatStateDict : public detail::WalkVisitor {
 public:
  explicit FlatStateDict(StateDict& out) : out_(out) {}

  void run(const detail::TensorDictImpl& root, const detail::ClassInfo* cls) {
    levels_.push_back(begin_level(root, cls, out_, ""));
    detail::KeyPath path;
    detail::walk(root, *this, path);
    end_level(levels_.back(), out_, "");
  }
  bool enter_dict(const detail::KeyPath& path, const TensorDict& dict) {
    const std::string name = path.joined(".");
    claim(name);
    const detail::ClassInfo* cls =
        nested_class(levels_.back().cls, path.back());
    levels_.push_back(begin_level(*dict.unsafeGetImpl(), cls, out_, name));
    return true;
  }
  void leave_dict(const detail::KeyPath& path, const TensorDict& /*dict*/) {
    if (levels_.back().cls != nullptr) {
      end_level(levels_.back(), out_, path.joined("."));
    }
    levels_.pop_back();
  }
  void leaf(const detail::KeyPath& path, const at::Tensor& tensor) {
    std::string key = path.joined(".");
    claim(key);
    out_.insert(std::move(key), tensor.detach());
  }
  void non_tensor(const detail::KeyPath& path, const Value& value) {
    LevelState& level = levels_.back();
    if (level.cls == nullptr ||
        !add_non_tensor_field(level.fields, path.back(), value)) {
      std::string key = path.joined(".");
      claim(key);
      out_.set_metadata(std::move(key), non_tensor_metadata(value));
    }
  }

 private:
  void claim(const std::string& key) {
    TENSORDICT_CHECK_KEY(
        seen_.insert(key).second,
        "Key '",
        key,
        "' appears twice in the flat state dict: a key holding \".\" "
        "collides with a nested key; use state_dict(/*flatten=*/false)");
  }

  StateDict& out_;
  std::set<std::string> seen_;
  std::vector<LevelState> levels_;
};

// The nested form: one StateDict per level, metadata under "".
class NestedStateDict : public detail::WalkVisitor {
 public:
  StateDict run(
      const detail::TensorDictImpl& root, const detail::ClassInfo* cls) {
    start(root, cls);
    detail::KeyPath path;
    detail::walk(root, *this, path);
    return finish();
  }
  bool enter_dict(const detail::KeyPath& path, const TensorDict& dict) {
    start(*dict.unsafeGetImpl(), nested_class(levels_.back().cls, path.back()));
    return true;
  }
  void leave_dict(const detail::KeyPath& path, const TensorDict& /*dict*/) {
    StateDict done = finish();
    levels_.back().nested.insert(std::string(path.back()), std::move(done));
  }
  void leaf(const detail::KeyPath& path, const at::Tensor& tensor) {
    levels_.back().nested.insert(std::string(path.back()), tensor.detach());
  }
  void non_tensor(const detail::KeyPath& path, const Value& value) {
    LevelState& level = levels_.back();
    if (level.cls == nullptr ||
        !add_non_tensor_field(level.fields, path.back(), value)) {
      StateDict leaf;
      leaf.set_metadata("", non_tensor_metadata(value));
      level.nested.insert(std::string(path.back()), std::move(leaf));
    }
  }

 private:
  void start(const detail::TensorDictImpl& impl, const detail::ClassInfo* cls) {
    StateDict sd;
    LevelState level = begin_level(impl, cls, sd, "");
    level.nested = std::move(sd);
    levels_.push_back(std::move(level));
  }
  StateDict finish() {
    LevelState& level = levels_.back();
    end_level(level, level.nested, "");
    StateDict done = std::move(level.nested);
    levels_.pop_back();
    return done;
  }

  std::vector<LevelState> levels_;
};

// --- load_state_dict
// -------------------------------------------------------------

std::vector<std::string> split_dots(const std::string& key) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t dot = key.find('.', begin);
    parts.push_back(key.substr(begin, dot - begin));
    if (dot == std::string::npos) {
      return parts;
    }
    begin = dot + 1;
  }
}

// A mutable tree to unflatten into.
struct Level {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  std::vector<std::pair<std::string, std::unique_ptr<Level>>> children;
  // Nested state dicts given whole (a nested form mistaken for a flat one).
  std::vector<std::pair<std::string, StateDict>> given;
  std::vector<std::string> order;  // keys in first-seen order
  std::optional<StateDictMetadata> metadata;

  Level& child(const std::string& name, const std::string& flat_key) {
    for (auto& c : children) {
      if (c.first == name) {
        return *c.second;
      }
    }
    for (const auto& t : tensors) {
      TENSORDICT_CHECK_KEY(
          t.first != name,
          "Cannot unflatten the state dict: '",
          flat_key,
          "' goes through '",
          name,
          "', which is a tensor");
    }
    children.emplace_back(name, std::make_unique<Level>());
    order.push_back(name);
    return *children.back().second;
  }

  void add_tensor(
      const std::string& name, at::Tensor t, const std::string& flat_key) {
    for (const auto& c : children) {
      TENSORDICT_CHECK_KEY(
          c.first != name,
          "Cannot unflatten the state dict: '",
          flat_key,
          "' is both a tensor and a nested level");
    }
    tensors.emplace_back(name, std::move(t));
    order.push_back(name);
  }

  void add_nested(const std::string& name, const StateDict& sd) {
    given.emplace_back(name, sd);
    order.push_back(name);
  }

  StateDict build() const {
    StateDict out;
    if (metadata) {
      out.set_metadata("", *metadata);
    }
    for (const auto& name : order) {
      bool done = false;
      for (const auto& t : tensors) {
        if (t.first == name) {
          out.insert(name, t.second);
          done = true;
          break;
        }
      }
      for (const auto& g : given) {
        if (!done && g.first == name) {
          out.insert(name, g.second);
          done = true;
        }
      }
      if (!done) {
        for (const auto& c : children) {
          if (c.first == name) {
            out.insert(name, c.second->build());
            break;
          }
        }
      }
    }
    return out;
  }
};

StateDict unflatten_state_dict(const StateDict& flat) {
  Level root;
  for (const auto& [key, entry] : flat.items()) {
    if (entry.kind() == StateDict::Kind::kNested) {
      root.add_nested(key, entry.nested());
      continue;
    }
    if (entry.kind() != StateDict::Kind::kTensor) {
      continue;  // sentinels have no place in the flat form
    }
    const auto parts = split_dots(key);
    Level* level = &root;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      level = &level->child(parts[i], key);
    }
    level->add_tensor(parts.back(), entry.tensor(), key);
  }
  for (const auto& [prefix, metadata] : flat.metadata()) {
    Level* level = &root;
    if (!prefix.empty()) {
      if (flat.find(prefix) != nullptr) {
        continue;  // a nested state dict given whole carries its own
      }
      for (const auto& part : split_dots(prefix)) {
        level = &level->child(part, prefix);
      }
    }
    level->metadata = metadata;
  }
  return root.build();
}

bool is_empty_state_dict(const StateDict& sd) {
  for (const auto& [key, entry] : sd.items()) {
    if (entry.kind() == StateDict::Kind::kBatchSize ||
        entry.kind() == StateDict::Kind::kDevice) {
      continue;
    }
    if (entry.kind() != StateDict::Kind::kNested ||
        !is_empty_state_dict(entry.nested())) {
      return false;
    }
  }
  const StateDictMetadata* md = sd.find_metadata("");
  return md == nullptr ||
         (!md->non_tensor &&
          !(md->non_tensor_fields && md->non_tensor_fields->is_object() &&
            !md->non_tensor_fields->empty()));
}

// A TensorDict level's strict check: the key sets must match, as in Python,
// except that a nested dict empty on one side may be missing on the other.
void check_dict_keys(
    const TensorDict& td,
    const StateDict& sd,
    const std::set<std::string>& sd_keys) {
  std::set<std::string> td_keys;
  for (const auto& key : td.keys()) {
    td_keys.insert(std::string(key.back()));
  }
  std::set<std::string> unexpected;  // in the state dict only
  std::set<std::string> missing;     // in the dict only
  std::set_difference(
      sd_keys.begin(),
      sd_keys.end(),
      td_keys.begin(),
      td_keys.end(),
      std::inserter(unexpected, unexpected.end()));
  std::set_difference(
      td_keys.begin(),
      td_keys.end(),
      sd_keys.begin(),
      sd_keys.end(),
      std::inserter(missing, missing.end()));
  bool ok = true;
  for (const auto& key : missing) {
    const Value* value = td.find(key);
    ok = ok && value->is_tensordict() && value->tensordict().is_empty();
  }
  for (const auto& key : unexpected) {
    const auto* entry = sd.find(key);
    ok = ok && entry != nullptr && entry->kind() == StateDict::Kind::kNested &&
         is_empty_state_dict(entry->nested());
  }
  TORCH_CHECK(
      ok,
      "Cannot load state-dict because the key sets don't match: got "
      "state_dict extra keys \n",
      set_repr(unexpected),
      "\n and tensordict extra keys\n",
      set_repr(missing),
      "\n");
}

[[noreturn]] void throw_unexpected_field(
    const std::string& key, const detail::ClassInfo& cls) {
  TENSORDICT_CHECK_KEY(
      false,
      "Key '",
      key,
      "' wasn't expected in the state-dict: ",
      cls.name,
      " has no such field");
}

// A TensorClass level's strict check: every entry names a field (Python's
// rule), and every set field has an entry or a non-tensor value.
void check_class_keys(
    const TensorDict& td,
    const StateDict& sd,
    const Json* fields,
    const detail::ClassInfo& cls) {
  for (const auto& [key, entry] : sd.items()) {
    if ((entry.kind() == StateDict::Kind::kTensor ||
         entry.kind() == StateDict::Kind::kNested) &&
        !detail::find_field(cls, key)) {
      throw_unexpected_field(key, cls);
    }
  }
  std::set<std::string> missing;
  for (const auto& key : td.keys()) {
    const std::string name(key.back());
    if (!sd.contains(name) && !(fields != nullptr && fields->contains(name))) {
      missing.insert(name);
    }
  }
  TORCH_CHECK(
      missing.empty(),
      "Cannot load the state dict into ",
      cls.name,
      ": it has no entry for the set fields ",
      set_repr(missing),
      " (pass strict=false to keep their values)");
}

// Sets the non-tensor fields of a level (Python's `_non_tensor`): by the
// class's rules on a TensorClass level, where null unsets the field; as
// NonTensorData on a TensorDict level (a Python tensorclass nested in a
// dict), where null is skipped.
void load_non_tensor_fields(
    TensorDict& td, const Json& fields, const detail::ClassInfo* cls) {
  for (const auto& [name, value] : fields.items()) {
    try {
      if (cls == nullptr) {
        if (!value.is_null()) {
          td.set_non_tensor(name, value);
        }
        continue;
      }
      const size_t index = *detail::find_field(*cls, name);
      if (value.is_null()) {
        TORCH_CHECK_VALUE(
            cls->fields[index].optional,
            "the state dict holds None for the field '",
            name,
            "' of ",
            cls->name,
            ", which is not optional");
        if (td.contains(name)) {
          td.del_(name);
        }
      } else if (const Value* existing = td.find(name);
                 existing == nullptr ||
                 detail::single_json(*existing) != value) {
        // Equal values are left alone, so a frozen instance can load.
        detail::tc_set_field(
            td, *cls, index, detail::field_arg_from_json(value));
      }
    } catch (c10::Error& e) {
      TORCH_RETHROW(
          e,
          "while loading the non-tensor field '",
          name,
          "' of the state dict");
    }
  }
}

void check_field_takes(
    const detail::FieldInfo& field,
    const detail::ClassInfo& cls,
    bool ok,
    const char* what) {
  TORCH_CHECK_TYPE(
      ok,
      "the state dict holds ",
      what,
      " for the field '",
      field.name,
      "' of ",
      cls.name,
      ", which cannot hold one");
}

bool is_tensor_kind(detail::FieldKind kind) {
  return kind == detail::FieldKind::kTensor ||
         kind == detail::FieldKind::kInt ||
         kind == detail::FieldKind::kDouble || kind == detail::FieldKind::kBool;
}

void load_level(
    TensorDict& td,
    const StateDict& sd,
    bool strict,
    bool assign,
    const detail::ClassInfo* cls);

// Loads one entry of a level; `cls` is the level's TensorClass or null.
void load_entry(
    TensorDict& td,
    const std::string& key,
    const StateDict::Entry& entry,
    bool strict,
    bool assign,
    const detail::ClassInfo* cls) {
  const detail::FieldInfo* field = nullptr;
  if (cls != nullptr) {
    const auto index = detail::find_field(*cls, key);
    if (!index) {
      return;  // not a field: refused when strict, skipped when not
    }
    field = &cls->fields[*index];
  }
  if (entry.kind() == StateDict::Kind::kTensor) {
    if (field == nullptr || field->kind == detail::FieldKind::kTensor) {
      td.set(key, entry.tensor(), SetOptions().inplace(!assign));
      return;
    }
    check_field_takes(*field, *cls, is_tensor_kind(field->kind), "a tensor");
    const Value* existing = td.find(key);
    if (existing != nullptr && existing->is_tensor()) {
      td.set(key, entry.tensor(), SetOptions().inplace(!assign));
    } else {
      // A number field stored as non-tensor data: the class flags cast it.
      detail::tc_set_field(
          td, *cls, field - cls->fields.data(), FieldArg(entry.tensor()));
    }
    return;
  }
  if (entry.kind() != StateDict::Kind::kNested) {
    return;
  }
  const StateDict& nested = entry.nested();
  const StateDictMetadata* md = nested.find_metadata("");
  if (md != nullptr && md->non_tensor) {
    if (field != nullptr) {
      check_field_takes(
          *field,
          *cls,
          field->kind != detail::FieldKind::kTensor &&
              field->kind != detail::FieldKind::kTensorDict &&
              field->kind != detail::FieldKind::kTensorClass,
          "non-tensor data");
    }
    td.set(key, *md->non_tensor);
    return;
  }
  const detail::ClassInfo* nested_cls = nullptr;
  if (field != nullptr) {
    check_field_takes(
        *field,
        *cls,
        field->kind == detail::FieldKind::kTensorDict ||
            field->kind == detail::FieldKind::kTensorClass,
        "a nested level");
    nested_cls = field->nested;
  }
  const Value* existing = td.find(key);
  if (existing != nullptr && existing->is_tensordict()) {
    TensorDict dest = existing->tensordict();
    load_level(dest, nested, strict, assign, nested_cls);
  } else {
    TensorDict dest = td.empty();
    load_level(dest, nested, strict, assign, nested_cls);
    td.set(key, dest);
  }
}

// Loads a nested-form level into `td`; `cls` is its TensorClass or null.
void load_level(
    TensorDict& td,
    const StateDict& sd,
    bool strict,
    bool assign,
    const detail::ClassInfo* cls) {
  std::vector<int64_t> batch_size = td.batch_size().vec();
  std::optional<c10::Device> device = td.device();
  const StateDictMetadata* md = sd.find_metadata("");
  if (md != nullptr) {
    batch_size = md->batch_size;
    device = md->device;
  } else if (const auto* legacy = sd.find(kLegacyBatchSize)) {
    batch_size = legacy->batch_size();
    const auto* legacy_device = sd.find(kLegacyDevice);
    device = legacy_device != nullptr ? legacy_device->device() : std::nullopt;
  }
  const Json* fields = md != nullptr && md->non_tensor_fields &&
                               md->non_tensor_fields->is_object()
                           ? md->non_tensor_fields.get()
                           : nullptr;

  if (cls != nullptr) {
    if (fields != nullptr) {
      // Python refuses an unknown non-tensor field even when not strict.
      for (const auto& [name, value] : fields->items()) {
        if (!detail::find_field(*cls, name)) {
          throw_unexpected_field(name, *cls);
        }
      }
    }
    if (strict) {
      check_class_keys(td, sd, fields, *cls);
    }
  } else if (strict) {
    std::set<std::string> sd_keys;
    for (const auto& [key, entry] : sd.items()) {
      if (entry.kind() == StateDict::Kind::kTensor ||
          entry.kind() == StateDict::Kind::kNested) {
        sd_keys.insert(key);
      }
    }
    if (fields != nullptr) {
      for (const auto& [name, value] : fields->items()) {
        if (!value.is_null()) {
          sd_keys.insert(name);
        }
      }
    }
    check_dict_keys(td, sd, sd_keys);
  }
  if (batch_size != td.batch_size().vec()) {
    td.set_batch_size(batch_size);
  }
  TORCH_CHECK(
      !(device && td.device() && *device != *td.device()),
      "Loading data from another device is not yet supported.");
  if (fields != nullptr) {
    load_non_tensor_fields(td, *fields, cls);
  }
  for (const auto& [key, entry] : sd.items()) {
    try {
      load_entry(td, key, entry, strict, assign, cls);
    } catch (c10::Error& e) {
      TORCH_RETHROW(e, "while loading key '", key, "' of the state dict");
    }
  }
}

StateDict make_state_dict(
    const detail::TensorDictImpl& impl,
    const detail::ClassInfo* cls,
    bool flatten) {
  if (!flatten) {
    return NestedStateDict().run(impl, cls);
  }
  StateDict out;
  FlatStateDict(out).run(impl, cls);
  return out;
}

// Python's rule: a state dict with metadata whose keys are not the dict's
// own (a TensorClass's tensor and nested fields) is flat.
void load_state_dict_into(
    TensorDict& td,
    const StateDict& state_dict,
    bool strict,
    bool assign,
    const detail::ClassInfo* cls) {
  bool from_flatten = false;
  if (state_dict.has_metadata()) {
    std::set<std::string> sd_keys;
    for (const auto& key : state_dict.keys()) {
      sd_keys.insert(key);
    }
    std::set<std::string> td_keys;
    for (const detail::Node* node : td.unsafeGetImpl()->nodes()) {
      if (cls == nullptr || !node->value.is_non_tensor()) {
        td_keys.insert(node->key);
      }
    }
    from_flatten = sd_keys != td_keys;
  }
  if (from_flatten) {
    load_level(td, unflatten_state_dict(state_dict), strict, assign, cls);
  } else {
    load_level(td, state_dict, strict, assign, cls);
  }
}

}  // namespace

StateDict TensorDict::state_dict(bool flatten) const {
  return make_state_dict(*impl_, nullptr, flatten);
}

TensorDict& TensorDict::load_state_dict(
    const StateDict& state_dict, bool strict, bool assign) {
  load_state_dict_into(*this, state_dict, strict, assign, nullptr);
  return *this;
}

namespace detail {

StateDict tc_state_dict(
    const TensorDict& td, const ClassInfo& info, bool flatten) {
  return make_state_dict(*td.unsafeGetImpl(), &info, flatten);
}

void tc_load_state_dict(
    const TensorDict& td,
    const ClassInfo& info,
    const StateDict& state_dict,
    bool strict,
    bool assign) {
  TensorDict dest = td;
  load_state_dict_into(dest, state_dict, strict, assign, &info);
}

}  // namespace detail

TENSORDICT_END_NAMESPACE
