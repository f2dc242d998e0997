#pragma once

/// @file
/// StateDict: what `TensorDict::state_dict` returns and `load_state_dict`
/// reads, in Python tensordict's three forms.
//
// - Flat (`state_dict()`, the default): one tensor per leaf under its
//   "."-joined key ("b.c"), and `metadata()` holding the batch size and
//   device of every level under its "."-joined prefix ("" for the root),
//   as Python's `sd._metadata`. Non-tensor entries appear in `metadata()`
//   only, with their value.
// - Nested (`state_dict(/*flatten=*/false)`): nested StateDicts, each with
//   its own `metadata()[""]`.
// - Legacy (tensordict 0.11 and older): nested, with the sentinel entries
//   "__batch_size" and "__device" at every level and no metadata.
//
// A TensorClass level (`TensorClass::state_dict`) is keyed by field names;
// its metadata also holds the class name (`type`, Python's `_type`) and the
// non-tensor fields (`non_tensor_fields`, Python's `_non_tensor`), where an
// unset optional field is null (None).

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensordict/non_tensor.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE

/// Batch size and device of one level of a state dict (one entry of Python's
/// `_metadata`), and the value of a non-tensor entry.
struct TENSORDICT_API StateDictMetadata {
  /// Makes the metadata of an empty level with no dims and no device.
  StateDictMetadata() = default;
  /// Makes the metadata of a TensorDict level or a non-tensor entry.
  StateDictMetadata(
      std::vector<int64_t> batch_size,
      std::optional<c10::Device> device,
      std::optional<Value> non_tensor = std::nullopt)
      : batch_size(std::move(batch_size)),
        device(device),
        non_tensor(std::move(non_tensor)) {}

  /// The level's batch size.
  std::vector<int64_t> batch_size;
  /// The level's device (nullopt: Python's None).
  std::optional<c10::Device> device;
  /// The NonTensorData or NonTensorStack stored at this prefix, if any.
  std::optional<Value> non_tensor;
  /// The class name of a TensorClass level (Python's `_type`); empty for a
  /// TensorDict level.
  std::string type;
  /// The non-tensor fields of a TensorClass level by name, in Python's order
  /// (unset fields first, as null, then the set ones): Python's
  /// `_non_tensor`. Null for a TensorDict level. Shared, never modified in
  /// place (as NonTensorData's value), so this header needs no complete Json.
  std::shared_ptr<const Json> non_tensor_fields;
};

/// An ordered map from names to tensors, nested state dicts and legacy
/// sentinels, plus the per-level metadata: Python's state-dict
/// `OrderedDict` with its `_metadata` attribute. Copies share nested
/// levels' tensors (handles) but not the maps.
///
/// Example:
/// ```
///   StateDict sd = td.state_dict();   // {"a": ..., "b.c": ...}
///   sd.tensor("b.c");
///   other.load_state_dict(sd);
/// ```
class TENSORDICT_API StateDict {
 public:
  /// What an entry holds.
  enum class Kind : uint8_t {
    kTensor,
    kNested,
    kBatchSize,  // the legacy "__batch_size" sentinel
    kDevice,     // the legacy "__device" sentinel
  };

  /// One entry: a tensor, a nested state dict or a legacy sentinel.
  class TENSORDICT_API Entry {
   public:
    /// Returns what the entry holds.
    Kind kind() const noexcept {
      return kind_;
    }
    /// Returns the tensor; throws TypeError for other kinds.
    const at::Tensor& tensor() const;
    /// Returns the nested state dict; throws TypeError for other kinds.
    const StateDict& nested() const;
    /// Returns the legacy batch size; throws TypeError for other kinds.
    const std::vector<int64_t>& batch_size() const;
    /// Returns the legacy device; throws TypeError for other kinds.
    const std::optional<c10::Device>& device() const;

   private:
    friend class StateDict;
    Kind kind_ = Kind::kTensor;
    at::Tensor tensor_;
    std::shared_ptr<StateDict> nested_;
    std::vector<int64_t> batch_size_;
    std::optional<c10::Device> device_;
  };

  /// Makes an empty state dict without metadata (Python's plain dict).
  StateDict() = default;

  /// Appends or replaces the tensor at `key`.
  StateDict& insert(std::string key, at::Tensor tensor);
  /// Appends or replaces a nested state dict at `key` (copied).
  StateDict& insert(std::string key, StateDict nested);
  /// Sets the legacy "__batch_size" sentinel.
  StateDict& insert_legacy_batch_size(std::vector<int64_t> batch_size);
  /// Sets the legacy "__device" sentinel (nullopt: None).
  StateDict& insert_legacy_device(std::optional<c10::Device> device);
  /// Removes the entry at `key`; returns false if there was none.
  bool erase(const std::string& key);

  /// Returns the number of entries.
  size_t size() const noexcept {
    return items_.size();
  }
  /// Returns true if there are no entries.
  bool empty() const noexcept {
    return items_.empty();
  }
  /// Returns the keys in insertion order.
  std::vector<std::string> keys() const;
  /// Returns true if `key` names an entry.
  bool contains(const std::string& key) const noexcept {
    return find(key) != nullptr;
  }
  /// Returns the entry at `key`, or null.
  const Entry* find(const std::string& key) const noexcept;
  /// Returns the entry at `key`; throws KeyError if missing.
  const Entry& at(const std::string& key) const;
  /// Returns the tensor at `key`; throws KeyError or TypeError.
  const at::Tensor& tensor(const std::string& key) const;
  /// Returns the nested state dict at `key`; throws KeyError or TypeError.
  const StateDict& nested(const std::string& key) const;
  /// Returns the entries in insertion order.
  const std::vector<std::pair<std::string, Entry>>& items() const noexcept {
    return items_;
  }

  /// Returns true if the state dict carries metadata (Python's `_metadata`
  /// attribute), even an empty one.
  bool has_metadata() const noexcept {
    return has_metadata_;
  }
  /// Returns the per-level metadata in insertion order, keyed by the
  /// "."-joined prefix ("" for this level).
  const std::vector<std::pair<std::string, StateDictMetadata>>& metadata()
      const noexcept {
    return metadata_;
  }
  /// Returns the metadata of `prefix`, or null.
  const StateDictMetadata* find_metadata(
      const std::string& prefix) const noexcept;
  /// Sets (or replaces) the metadata of `prefix`; marks the state dict as
  /// carrying metadata.
  StateDict& set_metadata(std::string prefix, StateDictMetadata metadata);

  /// Returns what Python prints for the same state dict (Python 3.11's
  /// OrderedDict): `OrderedDict([('a', tensor([0., 0.])), ('b.c',
  /// tensor([1, 2], dtype=torch.int32))])`, tensors as `repr(tensor)`
  /// prints them with torch's default print options, nested state dicts
  /// alike, legacy sentinels as `torch.Size([2])` and `device(type='cpu')`.
  std::string repr() const;
  /// Returns what Python prints for `sd._metadata`: `OrderedDict([('',
  /// {'batch_size': torch.Size([3]), 'device': None}), ...])`, with
  /// `'_type'` and `'_non_tensor'` for non-tensor data and TensorClass
  /// levels; "None" when the state dict carries no metadata.
  std::string metadata_repr() const;

 private:
  Entry& emplace(std::string key);

  std::vector<std::pair<std::string, Entry>> items_;
  std::vector<std::pair<std::string, StateDictMetadata>> metadata_;
  bool has_metadata_ = false;
};

/// Writes `state_dict.repr()` and, if it carries metadata, a second line
/// `_metadata=` followed by `metadata_repr()`: what Python prints for
/// `print(sd); print("_metadata=", sd._metadata, sep="")`.
TENSORDICT_API std::ostream& operator<<(
    std::ostream& out, const StateDict& state_dict);

TENSORDICT_END_NAMESPACE
