#pragma once

// The per-level hook of the state-dict walk (src/state_dict/state_dict.cpp);
// not API. See NOTE [State-dict hooks].

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "tensordict/fwd.h"
#include "tensordict/state_dict.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

// NOTE [State-dict hooks]
// `state_dict` and `load_state_dict` walk TensorDict levels and know nothing
// more. A level that is more (a TensorClass instance,
// src/state_dict/tensor_class.cpp) comes with a StateDictHook, which the
// walk asks, once per level, for what that level adds:
//  - saving: its extra metadata, recorded after its children's (Python
//    records a tensorclass's `_metadata` last), and which non-tensor
//    entries that metadata holds instead of the state dict;
//  - loading: the key checks, each non-tensor field of its metadata, a
//    check per entry, and the tensor entries it stores itself;
//  - the hook of a nested level.
// A plain dict, and everything inside one, has no hook (null).

/// What a state-dict entry being loaded holds.
enum class LoadedEntry {
  kTensor,
  /// A nested state dict holding one non-tensor value.
  kNonTensor,
  /// A nested level.
  kNested,
};

class StateDictHook;
/// A level's hook; null for a TensorDict level.
using StateDictHookPtr = std::unique_ptr<const StateDictHook>;

/// What one level of a state dict adds to a TensorDict level; see NOTE
/// [State-dict hooks].
class StateDictHook {
 public:
  virtual ~StateDictHook() = default;

  /// Returns the hook of the nested level `key`, or null for a TensorDict.
  virtual StateDictHookPtr nested(std::string_view key) const = 0;

  // --- saving

  /// Returns true if the level's metadata holds the non-tensor entry
  /// `value` (so the state dict has no entry for it).
  virtual bool saves_in_metadata(const Value& value) const = 0;
  /// Adds what the level records to `metadata`, which holds the batch size
  /// and device of `td`.
  virtual void add_metadata(
      const TensorDict& td, StateDictMetadata& metadata) const = 0;

  // --- loading

  /// Returns true if the level's non-tensor entries are keys of its state
  /// dict: the key sets tell a flat state dict from a nested one.
  virtual bool non_tensor_entries_are_keys() const = 0;
  /// Checks the keys of `state_dict` against `td` before anything is
  /// loaded; `fields` are the non-tensor fields of its metadata, or null.
  virtual void check_keys(
      const TensorDict& td,
      const StateDict& state_dict,
      const Json* fields,
      bool strict) const = 0;
  /// Loads the non-tensor field `name` of the level's metadata into `td`.
  virtual void load_field(
      TensorDict& td, const std::string& name, const Json& value) const = 0;
  /// Returns false to skip entry `key` of the level loaded into `td`, which
  /// holds `what`; throws if the level cannot hold that there.
  virtual bool takes_entry(
      const TensorDict& td, std::string_view key, LoadedEntry what) const = 0;
  /// Stores the tensor entry `key` if the level keeps it as something else
  /// and returns true; returns false to have it set as a tensor.
  virtual bool load_tensor(
      TensorDict& td,
      const std::string& key,
      const at::Tensor& tensor) const = 0;
};

/// Returns the state dict of `td`, whose root level has `hook`.
StateDict make_state_dict(
    const TensorDict& td,
    StateDictHookPtr hook,
    const StateDictOptions& options);
/// Returns the state dict of `td` with the default options but `flatten`.
StateDict make_state_dict(
    const TensorDict& td, StateDictHookPtr hook, bool flatten);

/// Loads `state_dict` (flat, nested or legacy) into `td`, whose root level
/// has `hook` (null for a TensorDict), reading it as flat or nested as
/// `from_flatten` says; nullopt detects it as Python does.
void load_state_dict_into(
    TensorDict& td,
    const StateDict& state_dict,
    bool strict,
    bool assign,
    const StateDictHook* hook,
    std::optional<bool> from_flatten = std::nullopt);

/// Adds the entries and metadata of `part`, a fresh state dict (tensors and
/// nested state dicts only), to `destination` (Python's
/// `state_dict(destination=...)`); returns `destination`.
StateDict& add_to_destination(StateDict& destination, const StateDict& part);

/// Returns Python's repr of a set of str, sorted: {'a', 'b'}, or set().
std::string key_set_repr(const std::set<std::string>& keys);

}  // namespace detail
TENSORDICT_END_NAMESPACE
