// StateDict, TensorDict::state_dict and load_state_dict, following Python
// tensordict's flat, nested and legacy forms. A level that is more than a
// TensorDict (a TensorClass) adds its part through a hook: see NOTE
// [State-dict hooks].

#include "tensordict/state_dict.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/walk.h"
#include "repr/python_repr.h"
#include "repr/python_tensor_repr.h"
#include "state_dict/hook.h"
#include "tensordict/errors.h"
#include "tensordict/json.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

constexpr const char* kLegacyBatchSize = "__batch_size";
constexpr const char* kLegacyDevice = "__device";

// What each StateDict::Kind holds, in the enum's order, for messages.
constexpr std::array<const char*, 4> kStateDictKindNames = {
    "a tensor",
    "a nested state dict",
    "a legacy batch size",
    "a legacy device"};
static_assert(
    static_cast<size_t>(StateDict::Kind::kDevice) + 1 ==
        kStateDictKindNames.size(),
    "one name per StateDict::Kind");

const char* kind_name(StateDict::Kind kind) {
  const auto index = static_cast<size_t>(kind);
  return index < kStateDictKindNames.size() ? kStateDictKindNames[index] : "?";
}

void check_kind(StateDict::Kind got, StateDict::Kind expected) {
  TORCH_CHECK_TYPE(
      got == expected,
      "state dict entry is ",
      kind_name(got),
      ", not ",
      kind_name(expected));
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
        detail::key_set_repr(
            std::set<std::string>(names.begin(), names.end())));
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

// --- printing
// ----------------------------------------------------------------------

namespace {

// One value of Python's `_metadata`: a dict.
std::string metadata_entry_repr(const StateDictMetadata& metadata) {
  std::string out = "{'batch_size': " + detail::size_repr(metadata.batch_size) +
                    ", 'device': " + detail::torch_device_repr(metadata.device);
  if (metadata.non_tensor && metadata.non_tensor->is_non_tensor_data()) {
    // Python keeps a NonTensorStack's batch size and device only.
    out +=
        ", '_type': 'NonTensorData', '_non_tensor': {'data': " +
        detail::json_value_repr(metadata.non_tensor->non_tensor_data().data()) +
        ", '_metadata': None, '_is_non_tensor': True}";
  }
  if (!metadata.type.empty()) {
    out += ", '_type': " + detail::python_repr(metadata.type);
    out += ", '_non_tensor': " +
           (metadata.non_tensor_fields
                ? detail::json_value_repr(*metadata.non_tensor_fields)
                : std::string("{}"));
  }
  return out + "}";
}

std::string entry_repr(const StateDict::Entry& entry) {
  switch (entry.kind()) {
    case StateDict::Kind::kTensor:
      return detail::python_tensor_repr(entry.tensor());
    case StateDict::Kind::kNested:
      return entry.nested().repr();
    case StateDict::Kind::kBatchSize:
      return detail::size_repr(entry.batch_size());
    case StateDict::Kind::kDevice:
      return detail::torch_device_repr(entry.device());
  }
  return "?";
}

}  // namespace

std::string StateDict::repr() const {
  std::vector<std::pair<std::string, std::string>> items;
  for (const auto& [key, entry] : items_) {
    items.emplace_back(key, entry_repr(entry));
  }
  return detail::ordered_dict_repr(items);
}

std::string StateDict::metadata_repr() const {
  if (!has_metadata_) {
    return "None";
  }
  std::vector<std::pair<std::string, std::string>> items;
  for (const auto& [prefix, metadata] : metadata_) {
    items.emplace_back(prefix, metadata_entry_repr(metadata));
  }
  return detail::ordered_dict_repr(items);
}

std::ostream& operator<<(std::ostream& out, const StateDict& state_dict) {
  out << state_dict.repr();
  if (state_dict.has_metadata()) {
    out << "\n_metadata=" << state_dict.metadata_repr();
  }
  return out;
}

// --- state_dict
// --------------------------------------------------------------------

namespace {

using detail::StateDictHook;
using detail::StateDictHookPtr;

StateDictMetadata level_metadata(const TensorDict& td) {
  const detail::TensorDictImpl& impl = *td.unsafeGetImpl();
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

StateDictHookPtr nested_hook(const StateDictHook* hook, std::string_view key) {
  return hook != nullptr ? hook->nested(key) : nullptr;
}

// Returns true if a non-tensor entry goes into its level's metadata rather
// than into the state dict.
bool in_level_metadata(const StateDictHook* hook, const Value& value) {
  return hook != nullptr && hook->saves_in_metadata(value);
}

// Python records a TensorDict level's metadata before its children's and a
// hooked (TensorClass) level's after them: open_level and close_level.
void open_level(
    const TensorDict& td,
    const StateDictHook* hook,
    StateDict& out,
    const std::string& prefix) {
  if (hook == nullptr) {
    out.set_metadata(prefix, level_metadata(td));
  }
}

void close_level(
    const TensorDict& td,
    const StateDictHook* hook,
    StateDict& out,
    const std::string& prefix) {
  if (hook != nullptr) {
    StateDictMetadata metadata = level_metadata(td);
    hook->add_metadata(td, metadata);
    out.set_metadata(prefix, std::move(metadata));
  }
}

// Python keys the root's metadata by the prefix without its trailing ".".
std::string root_metadata_key(const std::string& prefix) {
  if (!prefix.empty() && prefix.back() == '.') {
    return prefix.substr(0, prefix.size() - 1);
  }
  return prefix;
}

at::Tensor saved_tensor(const at::Tensor& tensor, bool keep_vars) {
  return keep_vars ? tensor : tensor.detach();
}

// The flat form: keys joined by ".", one metadata entry per level.
class FlatStateDict : public detail::WalkVisitor {
 public:
  FlatStateDict(StateDict& out, const StateDictOptions& options)
      : out_(out), prefix_(options.prefix()), keep_vars_(options.keep_vars()) {}

  void run(const TensorDict& root, StateDictHookPtr hook) {
    const std::string root_key = root_metadata_key(prefix_);
    open_level(root, hook.get(), out_, root_key);
    hooks_.push_back(std::move(hook));
    detail::walk(root, *this);
    close_level(root, hooks_.back().get(), out_, root_key);
  }
  bool enter_dict(const detail::KeyPath& path, const TensorDict& dict) {
    const std::string name = prefix_ + path.joined(".");
    claim(name);
    StateDictHookPtr hook = nested_hook(hooks_.back().get(), path.back());
    open_level(dict, hook.get(), out_, name);
    hooks_.push_back(std::move(hook));
    return true;
  }
  void leave_dict(const detail::KeyPath& path, const TensorDict& dict) {
    if (hooks_.back()) {
      close_level(dict, hooks_.back().get(), out_, prefix_ + path.joined("."));
    }
    hooks_.pop_back();
  }
  void leaf(const detail::KeyPath& path, const at::Tensor& tensor) {
    std::string key = prefix_ + path.joined(".");
    claim(key);
    out_.insert(std::move(key), saved_tensor(tensor, keep_vars_));
  }
  void non_tensor(const detail::KeyPath& path, const Value& value) {
    if (!in_level_metadata(hooks_.back().get(), value)) {
      std::string key = prefix_ + path.joined(".");
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
  const std::string& prefix_;
  bool keep_vars_;
  std::set<std::string> seen_;
  std::vector<StateDictHookPtr> hooks_;  // one per level being walked
};

// The nested form: one StateDict per level, metadata under "". As in
// Python, the prefix applies to the root's keys only, and the root's
// metadata goes under the prefix without its trailing ".".
class NestedStateDict : public detail::WalkVisitor {
 public:
  explicit NestedStateDict(const StateDictOptions& options)
      : prefix_(options.prefix()), keep_vars_(options.keep_vars()) {}

  StateDict run(const TensorDict& root, StateDictHookPtr hook) {
    start(root, std::move(hook));
    detail::walk(root, *this);
    return finish(root);
  }
  bool enter_dict(const detail::KeyPath& path, const TensorDict& dict) {
    start(dict, nested_hook(levels_.back().hook.get(), path.back()));
    return true;
  }
  void leave_dict(const detail::KeyPath& path, const TensorDict& dict) {
    StateDict done = finish(dict);
    levels_.back().out.insert(key(path), std::move(done));
  }
  void leaf(const detail::KeyPath& path, const at::Tensor& tensor) {
    levels_.back().out.insert(key(path), saved_tensor(tensor, keep_vars_));
  }
  void non_tensor(const detail::KeyPath& path, const Value& value) {
    Level& level = levels_.back();
    if (!in_level_metadata(level.hook.get(), value)) {
      StateDict leaf;
      leaf.set_metadata("", non_tensor_metadata(value));
      level.out.insert(key(path), std::move(leaf));
    }
  }

 private:
  struct Level {
    StateDictHookPtr hook;
    StateDict out;  // the level's own state dict
  };

  // The key of the entry at `path` in its level's state dict.
  std::string key(const detail::KeyPath& path) const {
    std::string name(path.back());
    return path.size() == 1 ? prefix_ + name : name;
  }
  // The key of a level's own metadata.
  std::string metadata_key(bool root) const {
    return root ? root_metadata_key(prefix_) : std::string();
  }
  void start(const TensorDict& td, StateDictHookPtr hook) {
    Level level{std::move(hook), StateDict()};
    open_level(td, level.hook.get(), level.out, metadata_key(levels_.empty()));
    levels_.push_back(std::move(level));
  }
  StateDict finish(const TensorDict& td) {
    Level& level = levels_.back();
    close_level(
        td, level.hook.get(), level.out, metadata_key(levels_.size() == 1));
    StateDict done = std::move(level.out);
    levels_.pop_back();
    return done;
  }

  const std::string& prefix_;
  bool keep_vars_;
  std::vector<Level> levels_;
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
// The set non-tensor fields of the metadata (`fields`, or null) count as
// keys.
void check_dict_keys(
    const TensorDict& td, const StateDict& sd, const Json* fields) {
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
      detail::key_set_repr(unexpected),
      "\n and tensordict extra keys\n",
      detail::key_set_repr(missing),
      "\n");
}

// Sets the non-tensor fields of a level (Python's `_non_tensor`): by the
// hook on a hooked level; as NonTensorData on a TensorDict level (a Python
// tensorclass nested in a dict), where null is skipped.
void load_non_tensor_fields(
    TensorDict& td, const Json& fields, const StateDictHook* hook) {
  for (const auto& [name, value] : fields.items()) {
    try {
      if (hook != nullptr) {
        hook->load_field(td, name, value);
      } else if (!value.is_null()) {
        td.set_non_tensor(name, value);
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

void load_level(
    TensorDict& td,
    const StateDict& sd,
    bool strict,
    bool assign,
    const StateDictHook* hook);

// Loads one entry of a level; `hook` is the level's, or null.
void load_entry(
    TensorDict& td,
    const std::string& key,
    const StateDict::Entry& entry,
    bool strict,
    bool assign,
    const StateDictHook* hook) {
  detail::LoadedEntry what = detail::LoadedEntry::kTensor;
  const StateDictMetadata* md = nullptr;
  if (entry.kind() == StateDict::Kind::kNested) {
    md = entry.nested().find_metadata("");
    what = md != nullptr && md->non_tensor ? detail::LoadedEntry::kNonTensor
                                           : detail::LoadedEntry::kNested;
  } else if (entry.kind() != StateDict::Kind::kTensor) {
    return;  // a legacy sentinel
  }
  if (hook != nullptr && !hook->takes_entry(td, key, what)) {
    return;
  }
  if (what == detail::LoadedEntry::kTensor) {
    if (hook == nullptr || !hook->load_tensor(td, key, entry.tensor())) {
      td.set(key, entry.tensor(), SetOptions().inplace(!assign));
    }
    return;
  }
  if (what == detail::LoadedEntry::kNonTensor) {
    td.set(key, *md->non_tensor);
    return;
  }
  const StateDictHookPtr nested = nested_hook(hook, key);
  const Value* existing = td.find(key);
  if (existing != nullptr && existing->is_tensordict()) {
    TensorDict dest = existing->tensordict();
    load_level(dest, entry.nested(), strict, assign, nested.get());
  } else {
    TensorDict dest = td.empty();
    load_level(dest, entry.nested(), strict, assign, nested.get());
    td.set(key, dest);
  }
}

// Loads a nested-form level into `td`; `hook` is the level's, or null.
void load_level(
    TensorDict& td,
    const StateDict& sd,
    bool strict,
    bool assign,
    const StateDictHook* hook) {
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
  if (hook != nullptr) {
    hook->check_keys(td, sd, fields, strict);
  } else if (strict) {
    check_dict_keys(td, sd, fields);
  }
  if (batch_size != td.batch_size().vec()) {
    td.set_batch_size(batch_size);
  }
  TORCH_CHECK(
      !(device && td.device() && *device != *td.device()),
      "Loading data from another device is not yet supported.");
  if (fields != nullptr) {
    load_non_tensor_fields(td, *fields, hook);
  }
  for (const auto& [key, entry] : sd.items()) {
    try {
      load_entry(td, key, entry, strict, assign, hook);
    } catch (c10::Error& e) {
      TORCH_RETHROW(e, "while loading key '", key, "' of the state dict");
    }
  }
}

}  // namespace

namespace detail {

std::string key_set_repr(const std::set<std::string>& keys) {
  if (keys.empty()) {
    return "set()";
  }
  return "{" + join_spelled(keys, python_repr) + "}";
}

StateDict make_state_dict(
    const TensorDict& td,
    StateDictHookPtr hook,
    const StateDictOptions& options) {
  if (!options.flatten()) {
    return NestedStateDict(options).run(td, std::move(hook));
  }
  StateDict out;
  FlatStateDict(out, options).run(td, std::move(hook));
  return out;
}

StateDict make_state_dict(
    const TensorDict& td, StateDictHookPtr hook, bool flatten) {
  return make_state_dict(
      td, std::move(hook), StateDictOptions().flatten(flatten));
}

// Python's rule: a state dict with metadata whose keys are not the dict's
// own (a TensorClass's tensor and nested fields) is flat.
void load_state_dict_into(
    TensorDict& td,
    const StateDict& state_dict,
    bool strict,
    bool assign,
    const StateDictHook* hook,
    std::optional<bool> from_flatten_option) {
  bool from_flatten = from_flatten_option.value_or(false);
  if (!from_flatten_option && state_dict.has_metadata()) {
    std::set<std::string> sd_keys;
    for (const auto& key : state_dict.keys()) {
      sd_keys.insert(key);
    }
    const bool non_tensor_keys =
        hook == nullptr || hook->non_tensor_entries_are_keys();
    std::set<std::string> td_keys;
    for (const Node* node : td.unsafeGetImpl()->nodes()) {
      if (non_tensor_keys || !node->value.is_non_tensor()) {
        td_keys.insert(node->key);
      }
    }
    from_flatten = sd_keys != td_keys;
  }
  if (from_flatten) {
    load_level(td, unflatten_state_dict(state_dict), strict, assign, hook);
  } else {
    load_level(td, state_dict, strict, assign, hook);
  }
}

}  // namespace detail

StateDict TensorDict::state_dict(bool flatten) const {
  return detail::make_state_dict(*this, nullptr, flatten);
}

StateDict TensorDict::state_dict(const StateDictOptions& options) const {
  return detail::make_state_dict(*this, nullptr, options);
}

StateDict& detail::add_to_destination(
    StateDict& destination, const StateDict& part) {
  for (const auto& [key, entry] : part.items()) {
    // A fresh state dict holds tensors and nested state dicts only.
    if (entry.kind() == StateDict::Kind::kTensor) {
      destination.insert(key, entry.tensor());
    } else {
      destination.insert(key, entry.nested());
    }
  }
  for (const auto& [prefix, metadata] : part.metadata()) {
    destination.set_metadata(prefix, metadata);
  }
  return destination;
}

StateDict& TensorDict::state_dict(
    StateDict& destination, const StateDictOptions& options) const {
  return detail::add_to_destination(destination, state_dict(options));
}

TensorDict& TensorDict::load_state_dict(
    const StateDict& state_dict, bool strict, bool assign) {
  detail::load_state_dict_into(*this, state_dict, strict, assign, nullptr);
  return *this;
}

TensorDict& TensorDict::load_state_dict(
    const StateDict& state_dict, const LoadStateDictOptions& options) {
  detail::load_state_dict_into(
      *this,
      state_dict,
      options.strict(),
      options.assign(),
      nullptr,
      options.from_flatten());
  return *this;
}

// --- non-tensor values: no tensors, so an empty state dict

namespace {

void check_empty_state_dict(const StateDict& state_dict, const char* what) {
  TORCH_CHECK_VALUE(
      state_dict.empty(),
      what,
      " holds no tensors, so its state dict is empty; got one with ",
      state_dict.size(),
      " entries");
}

}  // namespace

StateDict NonTensorData::state_dict() const {
  // No entries; the root's metadata carries the value, as Python's
  // `_metadata[""]["_non_tensor"]`.
  StateDict out;
  out.set_metadata("", non_tensor_metadata(Value(*this)));
  return out;
}

NonTensorData& NonTensorData::load_state_dict(
    const StateDict& state_dict, bool strict) {
  if (strict && !state_dict.empty()) {
    TENSORDICT_CHECK_KEY(
        false,
        "Key '",
        state_dict.items().front().first,
        "' wasn't expected in the state-dict.");
  }
  const StateDictMetadata* md = state_dict.find_metadata("");
  if (md == nullptr) {
    return *this;
  }
  std::optional<Json> data;
  if (md->non_tensor && md->non_tensor->is_non_tensor_data()) {
    data = md->non_tensor->non_tensor_data().data();
  } else if (
      md->non_tensor_fields && md->non_tensor_fields->is_object() &&
      md->non_tensor_fields->contains("data")) {
    data = md->non_tensor_fields->at("data");
  }
  // Checked before anything changes: names must fit the new batch size.
  NonTensorData loaded =
      data ? NonTensorData(*data, md->batch_size, md->device)
           : NonTensorData(this->data(), md->batch_size, md->device);
  *this = std::move(loaded);
  return *this;
}

StateDict NonTensorStack::state_dict() const {
  return {};
}

NonTensorStack& NonTensorStack::load_state_dict(const StateDict& state_dict) {
  check_empty_state_dict(state_dict, "NonTensorStack");
  return *this;
}

TENSORDICT_END_NAMESPACE
