#pragma once

// The state behind a TensorDict handle, and the helpers every source file of
// the dict shares. Not installed: only src/ sees it.

#include <c10/util/intrusive_ptr.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// One entry: its own name and its value. Nodes live on the heap so the
/// index can hold views of their keys.
struct Node {
  std::string key;
  Value value;
};

class TensorDictImpl : public c10::intrusive_ptr_target {
 public:
  TensorDictImpl() = default;

  /// Returns the node named `key`, or null.
  Node* find(std::string_view key) const noexcept {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : it->second;
  }
  /// Appends a node; the key must not exist.
  Node& append(std::string key, Value value);
  /// Removes the node named `key` and returns its value; it must exist.
  Value erase(std::string_view key);
  /// Removes every node.
  void clear() noexcept {
    index_.clear();
    nodes_.clear();
  }
  /// Returns the nodes in insertion order.
  const std::vector<std::unique_ptr<Node>>& nodes() const noexcept {
    return nodes_;
  }
  /// Returns the keys at this level, sorted, as Python lists them.
  std::string sorted_keys_repr() const;

  std::vector<int64_t> batch_size;
  std::optional<c10::Device> device;
  DimNames names; // empty = no names
  bool locked = false;
  bool shared = false;
  // Locked dicts that hold this one; unlock_ refuses while one of them is
  // alive and locked (Python's lock graph).
  std::vector<c10::weak_intrusive_ptr<TensorDictImpl>> lock_parents;

 private:
  std::vector<std::unique_ptr<Node>> nodes_;
  std::unordered_map<std::string_view, Node*> index_;
};

using ImplPtr = c10::intrusive_ptr<TensorDictImpl>;

/// Makes an empty dict with the given attributes (names are not checked).
TensorDict make_tensordict(
    std::vector<int64_t> batch_size,
    std::optional<c10::Device> device,
    DimNames names);

/// Returns a dict with the same batch size, device and names, no entries.
TensorDict empty_like(const TensorDict& td);

/// The message of Python's `_LOCK_ERROR`.
extern const char* const kLockError;

/// Throws the Python-worded KeyError for `part` missing from `impl`; `key`
/// is the full key looked up.
[[noreturn]] void throw_missing_key(
    const TensorDictImpl& impl,
    std::string_view part,
    const NestedKey& key);

/// Walks `key` down to the dict holding its last part. Throws KeyError if a
/// level is missing or is not a dict.
TensorDictImpl& resolve_parent(const TensorDict& root, const NestedKey& key);

/// Returns the deepest dict that exists along `key`'s parents. Throws
/// KeyError if the path walks through a leaf.
TensorDictImpl& deepest_existing(const TensorDict& root, const NestedKey& key);

/// Like resolve_parent, but returns null instead of throwing.
TensorDictImpl* find_parent(const TensorDict& root, const NestedKey& key) noexcept;

/// Checks that `value` fits in `impl` as entry `key` and returns it ready to
/// store: tensors moved to the dict's device, non-tensors broadcast to the
/// batch size, nested dicts moved and named.
Value validate_value(
    const TensorDictImpl& impl,
    const Value& value,
    const NestedKey& key,
    bool non_blocking);

/// Throws the lock error if `impl` is locked.
void check_unlocked(const TensorDictImpl& impl);

} // namespace detail
TENSORDICT_END_NAMESPACE
