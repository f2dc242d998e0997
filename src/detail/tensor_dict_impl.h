#pragma once

// The state behind a TensorDict handle, and the helpers every source file of
// the dict shares. Not installed: only src/ sees it.

#include <c10/util/intrusive_ptr.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// One entry: its own name and its value.
struct Node {
  std::string key;
  Value value;
  size_t hash = 0; // of key, kept for the index
};

/// Iterates over a dict's nodes in insertion order, yielding `Node*`, so
/// loops read `for (const auto& node : impl.nodes()) node->key`.
class NodeRange {
 public:
  class iterator {
   public:
    explicit iterator(Node* p) : p_(p) {}
    Node* operator*() const noexcept {
      return p_;
    }
    iterator& operator++() noexcept {
      ++p_;
      return *this;
    }
    bool operator!=(const iterator& other) const noexcept {
      return p_ != other.p_;
    }
    bool operator==(const iterator& other) const noexcept {
      return p_ == other.p_;
    }

   private:
    Node* p_;
  };
  NodeRange(Node* begin, Node* end) : begin_(begin), end_(end) {}
  iterator begin() const noexcept {
    return iterator(begin_);
  }
  iterator end() const noexcept {
    return iterator(end_);
  }
  size_t size() const noexcept {
    return static_cast<size_t>(end_ - begin_);
  }
  bool empty() const noexcept {
    return begin_ == end_;
  }

 private:
  Node* begin_;
  Node* end_;
};

// NOTE [Dict storage]
// Entries live contiguously in insertion order, and a flat open-addressing
// table of positions (linear probing, at most half full) finds them by key:
// building a dict costs one allocation for the nodes and one for the table,
// not several per entry, and a lookup hashes the key once and compares
// strings only on a hash match. Appending may move the nodes, so a Node* or
// Value& is valid only until the dict's keys change.
class TensorDictImpl : public c10::intrusive_ptr_target {
 public:
  TensorDictImpl() = default;

  /// Returns the node named `key`, or null.
  Node* find(std::string_view key) const noexcept;
  /// Appends a node; the key must not exist.
  Node& append(std::string key, Value value);
  /// Removes the node named `key` and returns its value; it must exist.
  Value erase(std::string_view key);
  /// Makes room for `n` entries.
  void reserve(size_t n);
  /// Removes every node.
  void clear() noexcept {
    nodes_.clear();
    slots_.clear();
  }
  /// Returns the nodes in insertion order.
  NodeRange nodes() const noexcept {
    Node* data = const_cast<Node*>(nodes_.data());
    return NodeRange(data, data + nodes_.size());
  }
  /// Returns the keys at this level, sorted, as Python lists them.
  std::string sorted_keys_repr() const;

  /// Drops the entries when the last handle goes. Locked children keep weak
  /// pointers to their parents (`lock_parents`), and a weak pointer keeps
  /// the object itself alive; without this, a locked parent would hold its
  /// children, and with them every tensor, until the children died, which
  /// its own entries prevent: a cycle that leaked whole locked trees.
  void release_resources() override {
    nodes_.clear();
    slots_.clear();
    lock_parents.clear();
    consolidated_storage.reset();
  }

  std::vector<int64_t> batch_size;
  std::optional<c10::Device> device;
  DimNames names; // empty = no names
  bool locked = false;
  bool shared = false;
  // Locked dicts that hold this one; unlock_ refuses while one of them is
  // alive and locked (Python's lock graph).
  std::vector<c10::weak_intrusive_ptr<TensorDictImpl>> lock_parents;
  // Memmap state (src/memmap/): set by memmap/memmap_, cleared by unlock_.
  bool is_memmap = false;
  // The directory the dict was saved to or loaded from; empty = none.
  std::string memmap_prefix;
  // `_type` of the Python tensorclass the dict stands for; empty = none.
  std::string python_class;
  // Consolidated state (src/consolidate/): the uint8 storage whose views
  // the leaves are, set by consolidate/from_consolidated; undefined = none.
  at::Tensor consolidated_storage;

 private:
  void rebuild_slots(size_t capacity);

  std::vector<Node> nodes_;
  std::vector<int32_t> slots_; // node positions; -1 = empty; size 2^k
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

/// Moves a consolidated dict to `device` with one copy of its storage
/// (src/consolidate/device.cpp); `to(device)` calls it.
TensorDict move_consolidated(
    const TensorDict& td,
    c10::Device device,
    bool non_blocking);

} // namespace detail
TENSORDICT_END_NAMESPACE
