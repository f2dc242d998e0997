#pragma once

// The state behind a TensorDict handle, and the helpers every source file of
// the dict shares. Not installed: only src/ sees it.

#include <c10/util/intrusive_ptr.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/node_table.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// What a memmap save or load leaves on a dict (src/memmap/).
struct MemmapState {
  /// Set by memmap/memmap_, cleared by unlock_.
  bool is_memmap = false;
  /// The directory the dict was saved to or loaded from; empty = none.
  std::string prefix;
};

/// What consolidate leaves on a dict (src/consolidate/).
struct ConsolidatedState {
  /// The uint8 storage whose views the leaves are, set by consolidate and
  /// from_consolidated; undefined = none.
  at::Tensor storage;
};

/// The state of one dict level: its entries (a NodeTable, see NOTE [Dict
/// storage] in node_table.h) and its attributes. The table's methods are
/// forwarded, so call sites read `impl.find(key)` and `impl.nodes()`.
class TensorDictImpl : public c10::intrusive_ptr_target {
 public:
  TensorDictImpl() = default;

  /// Returns the node named `key`, or null.
  Node* find(std::string_view key) const noexcept {
    return entries_.find(key);
  }
  /// Appends a node; the key must not exist.
  Node& append(std::string key, Value value) {
    return entries_.append(std::move(key), std::move(value));
  }
  /// Appends a node named like `source`, a node of another dict; the key
  /// must not exist.
  Node& append_like(const Node& source, Value value) {
    return entries_.append_like(source, std::move(value));
  }
  /// Removes the node named `key` and returns its value; it must exist.
  Value erase(std::string_view key) {
    return entries_.erase(key);
  }
  /// Makes room for `n` entries.
  void reserve(size_t n) {
    entries_.reserve(n);
  }
  /// Removes every node.
  void clear() noexcept {
    entries_.clear();
  }
  /// Returns the nodes in insertion order.
  NodeRange nodes() const noexcept {
    return entries_.nodes();
  }
  /// Returns the keys at this level, sorted, as Python lists them.
  std::string sorted_keys_repr() const;
  /// Drops the entries when the last handle goes. Locked children keep weak
  /// pointers to their parents (`lock_parents`), and a weak pointer keeps
  /// the object itself alive; without this, a locked parent would hold its
  /// children, and with them every tensor, until the children died, which
  /// its own entries prevent: a cycle that leaked whole locked trees.
  void release_resources() override {
    entries_.clear();
    lock_parents.clear();
    consolidated.storage.reset();
  }

  std::vector<int64_t> batch_size;
  std::optional<c10::Device> device;
  DimNames names;  // empty = no names
  bool locked = false;
  bool shared = false;
  // Locked dicts that hold this one; unlock_ refuses while one of them is
  // alive and locked (Python's lock graph).
  std::vector<c10::weak_intrusive_ptr<TensorDictImpl>> lock_parents;
  // `_type` of the Python tensorclass the dict stands for; empty = none.
  std::string python_class;
  MemmapState memmap;              // owned by src/memmap/
  ConsolidatedState consolidated;  // owned by src/consolidate/

 private:
  NodeTable entries_;
};

using ImplPtr = c10::intrusive_ptr<TensorDictImpl>;

// --- building (src/tensor_dict/handle.cpp) -----------------------------------

/// Makes an empty dict with the given attributes (names are not checked).
TensorDict make_tensordict(
    std::vector<int64_t> batch_size,
    std::optional<c10::Device> device,
    DimNames names);

/// Returns a dict with the same batch size, device and names, no entries.
TensorDict empty_like(const TensorDict& td);

// --- key paths (src/tensor_dict/path.cpp) ------------------------------------

/// Throws the Python-worded KeyError for `part` missing from `impl`; `key`
/// is the full key looked up.
[[noreturn]] void throw_missing_key(
    const TensorDictImpl& impl, std::string_view part, const NestedKey& key);

/// What `resolve` does on the way down a key's parents when a level is
/// missing or is not a dict ("blocked").
enum class PathMode {
  kFind,      ///< stops at a missing or blocked level; never throws
  kExisting,  ///< stops at a missing level; throws KeyError when blocked
  kRequire,   ///< throws KeyError at a missing or blocked level
  kCreate,    ///< makes missing levels (lock error if the dict is locked) like
              ///< their parent; throws KeyError when blocked
};

/// Where a walk down a key's parents stopped: `dict` is the deepest dict
/// reached (never null) and `depth` the number of parts walked into it.
struct PathEnd {
  TensorDictImpl* dict;
  size_t depth;
  /// The entry `key[depth]` of `dict` when it is not a dict and so blocked
  /// a kFind walk; null when the walk reached the end or a missing level.
  Node* blocker = nullptr;
  /// Returns whether `dict` is the one holding `key.back()`.
  bool reached(const NestedKey& key) const noexcept {
    return depth + 1 == key.size();
  }
};

/// Continues a walk down the parents of `key` from where an earlier one
/// stopped, treating a missing or blocked level as `mode` says. See NOTE
/// [Key paths] in src/tensor_dict/path.cpp.
PathEnd resolve(PathEnd from, const NestedKey& key, PathMode mode);

/// Walks the parents of `key` (all its parts but the last) from `root`,
/// treating a missing or blocked level as `mode` says. A one-part key has
/// no parents to walk, so most lookups stop here.
inline PathEnd resolve(
    const TensorDict& root, const NestedKey& key, PathMode mode) {
  const PathEnd start{root.unsafeGetImpl(), 0};
  return key.size() == 1 ? start : resolve(start, key, mode);
}

/// Walks `key` down to the dict holding its last part. Throws KeyError if a
/// level is missing or is not a dict.
inline TensorDictImpl& resolve_parent(
    const TensorDict& root, const NestedKey& key) {
  return *resolve(root, key, PathMode::kRequire).dict;
}

/// Returns the deepest dict that exists along `key`'s parents. Throws
/// KeyError if the path walks through a leaf.
inline TensorDictImpl& deepest_existing(
    const TensorDict& root, const NestedKey& key) {
  return *resolve(root, key, PathMode::kExisting).dict;
}

/// Like resolve_parent, but returns null instead of throwing.
inline TensorDictImpl* find_parent(
    const TensorDict& root, const NestedKey& key) noexcept {
  const PathEnd end = resolve(root, key, PathMode::kFind);
  return end.reached(key) ? end.dict : nullptr;
}

/// Throws the KeyError for a walk that cannot go past `blocker`, the entry
/// at `key[depth]`, because it is not a dict.
[[noreturn]] void throw_through_leaf(
    const Node& blocker, const NestedKey& key, size_t depth);

/// A key that goes through a lazy stack entry: the stack and the part of
/// the key inside its elements.
struct LazyHop {
  LazyStackedTensorDict stack;
  NestedKey rest;
};

/// What one walk found at a key. In every case `key[depth]` is the part it
/// is about, held (or not) by `dict`: the entry itself, the first missing
/// level, or the entry that is not a dict and stands in the path. See NOTE
/// [Key paths] in src/tensor_dict/path.cpp.
struct Lookup {
  enum class Kind {
    kFound,             ///< `node` is the entry (depth = key.size() - 1)
    kMissing,           ///< `dict` has no `key[depth]`; `node` is null
    kThroughLazyStack,  ///< `node` is a lazy stack before the last part
    kThroughLeaf,       ///< `node` is another non-dict before the last part
  };
  Kind kind;
  TensorDictImpl* dict;
  Node* node;
  size_t depth;

  /// Returns where the walk stopped, for `resolve` to continue from.
  PathEnd end() const noexcept {
    return {dict, depth, nullptr};
  }
};

// The helpers below take the result by value, not as members: a Lookup
// whose address never escapes stays in registers on the hot paths of `get`
// and `set`, which these cold paths would otherwise spill to the stack.

/// Returns the stack and the rest of `key` inside its elements; `found`
/// must be kThroughLazyStack. Built on demand: it copies the key's rest.
LazyHop lazy_hop(Lookup found, const NestedKey& key);

/// Returns whether every element of the lazy stack holds the rest of
/// `key`; `found` must be kThroughLazyStack. Copies nothing.
bool lazy_hop_contains(Lookup found, const NestedKey& key) noexcept;

/// Throws the KeyError `get` raises for `found`: the missing part with the
/// keys present, or the non-dict in the way. `found` must not be kFound.
[[noreturn]] void throw_key_error(Lookup found, const NestedKey& key);

/// Continues a lookup of `key` from where an earlier walk stopped (`from`
/// holds `key[from.depth]`).
Lookup lookup(PathEnd from, const NestedKey& key) noexcept;

/// Finds what `key` names in `root` with one walk, for the readers and
/// `set` to switch over. A one-part key costs one table probe.
inline Lookup lookup(const TensorDict& root, const NestedKey& key) noexcept {
  TensorDictImpl* dict = root.unsafeGetImpl();
  if (key.size() == 1) {
    Node* node = dict->find(key[0]);
    return {
        node != nullptr ? Lookup::Kind::kFound : Lookup::Kind::kMissing,
        dict,
        node,
        0};
  }
  return lookup(PathEnd{dict, 0, nullptr}, key);
}

// --- stored values (src/tensor_dict/set.cpp) ---------------------------------

/// Checks that `value` fits in `impl` as entry `key` and returns it ready to
/// store: tensors moved to the dict's device, non-tensors broadcast to the
/// batch size, nested dicts moved and named.
Value validate_value(
    const TensorDictImpl& impl,
    const Value& value,
    const NestedKey& key,
    bool non_blocking);

/// Returns whether `shape` begins with the dims of `batch_size`.
bool shape_starts_with(c10::IntArrayRef shape, c10::IntArrayRef batch_size);

// --- names (src/tensor_dict/names.cpp) ---------------------------------------

/// Returns whether no dim of `names` has a name (also true when empty).
bool all_unnamed(const DimNames& names);

/// Gives the nested dict `child`, and its own nested dicts, the names of its
/// parent (`names`) on the dims they share.
void propagate_names(TensorDictImpl& child, const DimNames& names);

// --- locking (src/tensor_dict/lock.cpp) --------------------------------------

/// The message of Python's `_LOCK_ERROR`.
extern const char* const kLockError;

/// Throws the lock error if `impl` is locked.
void check_unlocked(const TensorDictImpl& impl);

// --- consolidated storage (src/consolidate/) ---------------------------------

/// Moves a consolidated dict to `device` with one copy of its storage
/// (src/consolidate/device.cpp); `to(device)` calls it.
TensorDict move_consolidated(
    const TensorDict& td, c10::Device device, bool non_blocking);

}  // namespace detail
TENSORDICT_END_NAMESPACE
