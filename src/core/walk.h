#pragma once

// The traversal engine: every walk over a dict's tree is written once, here.
// See NOTE [Walking the tree].

#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/tensor_dict_impl.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

// NOTE [Walking the tree]
// One recursion serves every feature that touches each level of a dict:
//  - `walk(td, visitor)`: a depth-first visit with `enter_dict`, `leaf`,
//    `non_tensor` and `leave_dict` hooks (derive from `WalkVisitor` and
//    override what you need);
//  - `for_each_dict(impl, fn)`: every nested dict, the root first;
//  - `for_each_tensor` / `all_tensors`: every tensor;
//  - `zip_level(dicts, path, options, fn)`: several dicts matched by key at
//    one level, with the one key-set check (`match_same_keys`) and the one
//    kind check (`check_same_kind`); callers recurse from `fn`;
//  - `rebuild` / `map_entries` / `transform*`: rebuild the structure leaf
//    by leaf.
// Walkers keep the current key as a `KeyPath`, a stack of borrowed parts,
// and make a NestedKey only when they need one (a callback's key, an error),
// so a walk allocates nothing per node for its keys.

/// The key of the entry a walk is at, kept as a stack of parts borrowed
/// from the dicts being walked. Pushing and popping allocate nothing;
/// `key()` makes an owning NestedKey on demand. Valid while those dicts'
/// keys do not change.
class KeyPath {
 public:
  /// Starts at the root.
  KeyPath() = default;
  /// Starts at `key`, borrowing its parts.
  explicit KeyPath(const NestedKey& key) : parts_(key.begin(), key.end()) {}
  /// Enters entry `part` of the current dict.
  void push(std::string_view part) {
    parts_.push_back(part);
  }
  /// Leaves the innermost entry.
  void pop() noexcept {
    parts_.pop_back();
  }
  /// Returns true at the root (no entry entered).
  bool empty() const noexcept {
    return parts_.empty();
  }
  /// Returns the number of parts.
  size_t size() const noexcept {
    return parts_.size();
  }
  /// Returns the innermost part: the entry's name in its own dict.
  std::string_view back() const noexcept {
    return parts_.back();
  }
  /// Returns the parts, root first.
  c10::ArrayRef<std::string_view> parts() const noexcept {
    return parts_;
  }
  /// Returns the path as an owning key; the path must not be empty.
  NestedKey key() const {
    return NestedKey::from_parts(parts_);
  }
  /// Returns the key of entry `name` inside the dict the path names.
  NestedKey child(std::string_view name) const {
    c10::SmallVector<std::string_view, 8> parts(parts_);
    parts.push_back(name);
    return NestedKey::from_parts(parts);
  }
  /// Returns the parts joined by `separator` ("a.b" for "."): what
  /// `key().join_parts(separator)` gives, with one allocation.
  std::string joined(std::string_view separator) const {
    std::string out;
    for (size_t i = 0; i < parts_.size(); ++i) {
      if (i > 0) {
        out += separator;
      }
      out += parts_[i];
    }
    return out;
  }
  /// Returns the key as Python prints it, or "" at the root.
  std::string to_string() const {
    return parts_.empty() ? std::string() : key().to_string();
  }

 private:
  c10::SmallVector<std::string_view, 8> parts_;
};

/// Pushes a part onto a KeyPath for the lifetime of the scope.
class PathPart {
 public:
  PathPart(KeyPath& path, std::string_view part) : path_(path) {
    path_.push(part);
  }
  PathPart(const PathPart&) = delete;
  PathPart& operator=(const PathPart&) = delete;
  ~PathPart() {
    path_.pop();
  }

 private:
  KeyPath& path_;
};

/// The hooks of `walk`, all no-ops: derive and hide the ones you need. In
/// every hook `path` ends with the entry's own name.
struct WalkVisitor {
  /// Called on a nested dict before its entries; return false to skip them
  /// (and `leave_dict`).
  bool enter_dict(const KeyPath& /*path*/, const TensorDict& /*dict*/) {
    return true;
  }
  /// Called on a nested dict after its entries.
  void leave_dict(const KeyPath& /*path*/, const TensorDict& /*dict*/) {}
  /// Called on each tensor.
  void leaf(const KeyPath& /*path*/, const at::Tensor& /*tensor*/) {}
  /// Called on each NonTensorData or NonTensorStack.
  void non_tensor(const KeyPath& /*path*/, const Value& /*value*/) {}
  /// Called on a lazy stack entry before its elements, which are then
  /// visited as nested dicts named "0", "1", ... (the memmap layout); return
  /// false to skip them (and `leave_lazy_stack`).
  bool enter_lazy_stack(
      const KeyPath& /*path*/, const LazyStackedTensorDict& /*stack*/) {
    return true;
  }
  /// Called on a lazy stack entry after its elements.
  void leave_lazy_stack(
      const KeyPath& /*path*/, const LazyStackedTensorDict& /*stack*/) {}
};

/// The names of a lazy stack's elements in a walk: "0", "1", ...
std::vector<std::string> element_names(size_t n);

/// Visits the entries of `impl` depth first, in insertion order, with
/// `path` (the key of `impl` itself) extended by each entry's name.
template <typename Visitor>
void walk(const TensorDictImpl& impl, Visitor& visitor, KeyPath& path) {
  for (const auto& node : impl.nodes()) {
    PathPart part(path, node->key);
    const Value& v = node->value;
    if (v.is_tensor()) {
      visitor.leaf(path, v.tensor());
    } else if (v.is_tensordict()) {
      const TensorDict& child = v.tensordict();
      if (visitor.enter_dict(path, child)) {
        walk(*child.unsafeGetImpl(), visitor, path);
        visitor.leave_dict(path, child);
      }
    } else if (v.is_lazy_stack()) {
      const LazyStackedTensorDict& stack = v.lazy_stack();
      if (visitor.enter_lazy_stack(path, stack)) {
        const std::vector<TensorDict>& elements = stack.tensordicts();
        const std::vector<std::string> names = element_names(elements.size());
        for (size_t i = 0; i < elements.size(); ++i) {
          PathPart element(path, names[i]);
          if (visitor.enter_dict(path, elements[i])) {
            walk(*elements[i].unsafeGetImpl(), visitor, path);
            visitor.leave_dict(path, elements[i]);
          }
        }
        visitor.leave_lazy_stack(path, stack);
      }
    } else {
      visitor.non_tensor(path, v);
    }
  }
}

/// Visits every entry of `td` depth first; see WalkVisitor.
template <typename Visitor>
void walk(const TensorDict& td, Visitor& visitor) {
  KeyPath path;
  walk(*td.unsafeGetImpl(), visitor, path);
}

/// Calls `fn(dict)` on `impl` and every dict nested in it, the elements of
/// lazy stacks included, parents before their children.
template <typename Fn>
void for_each_dict(TensorDictImpl& impl, Fn&& fn) {
  fn(impl);
  for (const auto& node : impl.nodes()) {
    if (node->value.is_tensordict()) {
      for_each_dict(*node->value.tensordict().unsafeGetImpl(), fn);
    } else if (node->value.is_lazy_stack()) {
      for (const TensorDict& element : node->value.lazy_stack().tensordicts()) {
        for_each_dict(*element.unsafeGetImpl(), fn);
      }
    }
  }
}

/// Calls `fn(tensor)` on every tensor, nested ones and those of lazy stack
/// elements too, until it returns false; returns false if it did.
template <typename Fn>
bool all_tensors(const TensorDictImpl& impl, Fn&& fn) {
  for (const auto& node : impl.nodes()) {
    const Value& v = node->value;
    if (v.is_tensor() && !fn(v.tensor())) {
      return false;
    }
    if (v.is_tensordict() &&
        !all_tensors(*v.tensordict().unsafeGetImpl(), fn)) {
      return false;
    }
    if (v.is_lazy_stack()) {
      for (const TensorDict& element : v.lazy_stack().tensordicts()) {
        if (!all_tensors(*element.unsafeGetImpl(), fn)) {
          return false;
        }
      }
    }
  }
  return true;
}

/// Like `all_tensors(impl, fn)`, from a handle.
template <typename Fn>
bool all_tensors(const TensorDict& td, Fn&& fn) {
  return all_tensors(*td.unsafeGetImpl(), fn);
}

/// Calls `fn(tensor)` on every tensor, nested ones too.
template <typename Fn>
void for_each_tensor(const TensorDictImpl& impl, Fn&& fn) {
  all_tensors(impl, [&](const at::Tensor& t) {
    fn(t);
    return true;
  });
}

/// Calls `fn(key, value)` for every entry below `impl`, depth first, in the
/// order of Python's `keys(include_nested=True)`: a nested dict's entries
/// come right before the dict itself.
/// The entries of a lazy stack's elements are visited element after element
/// under the stack's own key, as Python's lazy stack passes them.
template <typename Fn>
void for_each_nested(const TensorDictImpl& impl, KeyPath& path, Fn& fn) {
  for (const auto& node : impl.nodes()) {
    PathPart part(path, node->key);
    if (node->value.is_tensordict()) {
      for_each_nested(*node->value.tensordict().unsafeGetImpl(), path, fn);
    } else if (node->value.is_lazy_stack()) {
      for (const TensorDict& element : node->value.lazy_stack().tensordicts()) {
        for_each_nested(*element.unsafeGetImpl(), path, fn);
      }
    }
    fn(path.key(), node->value);
  }
}

/// Like `for_each_nested(impl, path, fn)`, from the root of `td`.
template <typename Fn>
void for_each_nested(const TensorDict& td, Fn&& fn) {
  KeyPath path;
  for_each_nested(*td.unsafeGetImpl(), path, fn);
}

/// Says which keys `zip_level` visits and what a missing key does.
enum class ZipKeys {
  /// Every dict must have the same keys (`match_same_keys`).
  kSame,
  /// The first dict's keys; a key missing elsewhere is a KeyError.
  kFirst,
  /// The first dict's keys; a key missing elsewhere gives a null value.
  kFirstOrNull,
  /// Only the keys every dict has, in the first dict's order.
  kCommon,
};

/// How `zip_level` matches entries.
struct ZipOptions {
  /// What the caller does, for the kind error: "stack", "compare", ...
  const char* verb;
  ZipKeys keys = ZipKeys::kSame;
  /// Check that matched entries have the same kind (`check_same_kind`).
  bool check_kinds = true;
};

/// Throws Python's KeyError for the first key that one of `dicts` has and
/// another lacks; `path` is the key of the level (empty at the root).
void check_same_keys(
    c10::ArrayRef<const TensorDictImpl*> dicts, const KeyPath& path);

/// Matches every key of `dicts[0]` in each other dict, or throws the error
/// of `check_same_keys`: on return, `matches[j * (n - 1) + i - 1]` is dict
/// i's node for the first dict's key j (n = dicts.size()).
void match_same_keys(
    c10::ArrayRef<const TensorDictImpl*> dicts,
    const KeyPath& path,
    c10::SmallVectorImpl<const Node*>& matches);

/// Throws TypeError "cannot <verb> entry <key>: it is a <kind> in
/// tensordict 0 and a <kind> in tensordict <i>" unless every non-null value
/// has the kind of `values[0]` (all non-tensor kinds count as one). `path`
/// is the entry's key.
void check_same_kind(
    c10::ArrayRef<const Value*> values, const KeyPath& path, const char* verb);

/// Throws the kind error of `check_same_kind` for values `0` and `i`.
[[noreturn]] void throw_kind_mismatch(
    const Value& first,
    const Value& other,
    size_t i,
    const KeyPath& path,
    const char* verb);

/// Throws an error naming `path` unless lazy stacks `a` and `b` have the
/// same number of elements and the same stack dim, so that their elements
/// can be matched one to one.
void check_same_stacking(
    const LazyStackedTensorDict& a,
    const LazyStackedTensorDict& b,
    const KeyPath& path,
    const char* verb);

/// Returns true if `a` and `b` count as the same kind for a zip.
inline bool same_kind(const Value& a, const Value& b) noexcept {
  return a.kind() == b.kind() || (a.is_non_tensor() && b.is_non_tensor());
}

/// Returns the node of `other` named `key`, trying position `pos` first:
/// dicts built alike keep their keys in the same order, so that is a
/// string compare instead of a hash lookup.
inline const Node* find_matching(
    const TensorDictImpl& other, std::string_view key, size_t pos) noexcept {
  const auto nodes = other.nodes();
  if (pos < nodes.size()) {
    const Node* same_place = *nodes.begin() + pos;  // nodes are contiguous
    if (same_place->key == key) {
      return same_place;
    }
  }
  return other.find(key);
}

/// Walks one level of `dicts` together, matching entries by key (see
/// ZipKeys), and calls `fn(node, values)` per key with `path` extended by
/// it: `node` is the first dict's entry, `values[i]` dict i's (null only
/// with kFirstOrNull). Recurse from `fn` to go deeper.
template <typename Fn>
void zip_level(
    c10::ArrayRef<const TensorDictImpl*> dicts,
    KeyPath& path,
    const ZipOptions& options,
    Fn&& fn) {
  const size_t n = dicts.size();
  // kSame matches every key before `fn` sees one (a missing key throws
  // before any effect), and the walk reuses those matches.
  const bool same = options.keys == ZipKeys::kSame;
  c10::SmallVector<const Node*, 64> matches;
  if (same) {
    match_same_keys(dicts, path, matches);
  }
  c10::SmallVector<const Value*, 8> values(n);
  size_t pos = 0;
  for (const auto& node : dicts[0]->nodes()) {
    values[0] = &node->value;
    bool everywhere = true;
    for (size_t i = 1; i < n; ++i) {
      const Node* match = same ? matches[pos * (n - 1) + i - 1]
                               : find_matching(*dicts[i], node->key, pos);
      if (match == nullptr) {
        if (options.keys == ZipKeys::kFirst) {
          PathPart part(path, node->key);
          throw_missing_key(*dicts[i], node->key, path.key());
        }
        everywhere = false;
      }
      values[i] = match != nullptr ? &match->value : nullptr;
    }
    ++pos;
    if (!everywhere && options.keys == ZipKeys::kCommon) {
      continue;
    }
    PathPart part(path, node->key);
    if (options.check_kinds) {
      check_same_kind(values, path, options.verb);
    }
    fn(*node, c10::ArrayRef<const Value*>(values));
  }
}

/// Returns a copy of the non-tensor value `v` on `device`, or unchanged
/// when `device` is empty.
Value non_tensor_on(const Value& v, std::optional<c10::Device> device);

/// Returns a lazy stack of `elements` with the stack dim, its name and the
/// Python class of `like`.
LazyStackedTensorDict restack_like(
    const LazyStackedTensorDict& like, std::vector<TensorDict> elements);

/// Rebuilds the tree of `src` level by level: `make_dict(level)` returns the
/// new, empty dict for each dict of the tree (the root first), `fn(tensor)`
/// each tensor (an undefined result drops the entry), and non-tensor values
/// are copied, onto their new dict's device when `move_non_tensors`.
template <typename MakeDict, typename Fn>
TensorDict rebuild(
    const TensorDictImpl& src,
    MakeDict& make_dict,
    Fn& fn,
    bool move_non_tensors) {
  TensorDict result = make_dict(src);
  TensorDictImpl& dst = *result.unsafeGetImpl();
  dst.reserve(src.nodes().size());
  for (const auto& node : src.nodes()) {
    const Value& v = node->value;
    if (v.is_tensor()) {
      at::Tensor out = fn(v.tensor());
      if (out.defined()) {
        dst.append_like(*node, Value(std::move(out)));
      }
    } else if (v.is_tensordict()) {
      const TensorDictImpl& child = *v.tensordict().unsafeGetImpl();
      TensorDict out = rebuild(child, make_dict, fn, move_non_tensors);
      // A nested tensorclass instance stays one.
      out.unsafeGetImpl()->python_class = child.python_class;
      dst.append_like(*node, Value(std::move(out)));
    } else if (v.is_lazy_stack()) {
      const LazyStackedTensorDict& stack = v.lazy_stack();
      std::vector<TensorDict> elements;
      elements.reserve(stack.tensordicts().size());
      for (const TensorDict& element : stack.tensordicts()) {
        elements.push_back(
            rebuild(*element.unsafeGetImpl(), make_dict, fn, move_non_tensors));
      }
      dst.append_like(*node, Value(restack_like(stack, std::move(elements))));
    } else {
      const auto device = move_non_tensors ? dst.device : std::nullopt;
      dst.append_like(*node, non_tensor_on(v, device));
    }
  }
  return result;
}

/// Returns a new dict with the same structure as `td` where every tensor is
/// `fn(tensor)`; an undefined result drops the entry. Nested dicts are
/// rebuilt (never aliased), non-tensor values copied. `device`, when given,
/// becomes the device of the result and of its non-tensor values. The result
/// is unlocked, like Python's clone of a locked dict.
template <typename Fn>
TensorDict map_entries(
    const TensorDict& td,
    Fn&& fn,
    std::optional<c10::Device> device = std::nullopt) {
  auto make_dict = [&](const TensorDictImpl& src) {
    return make_tensordict(
        src.batch_size, device ? device : src.device, src.names);
  };
  return rebuild(*td.unsafeGetImpl(), make_dict, fn, device.has_value());
}

/// Walks `a` and `b` together, matching entries by key, and builds a dict
/// shaped like `a`: tensors become `on_tensors(ta, tb)`, non-tensor values
/// `on_non_tensors(va, vb, batch_size)`. Throws KeyError naming the first
/// key present in one dict only, and the kind error of `check_same_kind`
/// (`verb` says what the caller was doing: "compare", "add", ...).
template <typename TensorFn, typename NonTensorFn>
TensorDict zip_entries(
    const TensorDict& a,
    const TensorDict& b,
    const char* verb,
    TensorFn&& on_tensors,
    NonTensorFn&& on_non_tensors) {
  KeyPath path;
  const ZipOptions options{verb};
  auto zip = [&](const auto& self,
                 const TensorDictImpl& ia,
                 const TensorDictImpl& ib,
                 TensorDictImpl& dst) -> void {
    const TensorDictImpl* dicts[] = {&ia, &ib};
    dst.reserve(ia.nodes().size());
    zip_level(dicts, path, options, [&](const Node& node, auto values) {
      const Value& va = *values[0];
      const Value& vb = *values[1];
      if (va.is_tensor()) {
        dst.append(node.key, Value(on_tensors(va.tensor(), vb.tensor())));
      } else if (va.is_tensordict()) {
        TensorDict sub = empty_like(va.tensordict());
        self(
            self,
            *va.tensordict().unsafeGetImpl(),
            *vb.tensordict().unsafeGetImpl(),
            *sub.unsafeGetImpl());
        dst.append(node.key, Value(std::move(sub)));
      } else if (va.is_lazy_stack()) {
        const LazyStackedTensorDict& sa = va.lazy_stack();
        const LazyStackedTensorDict& sb = vb.lazy_stack();
        check_same_stacking(sa, sb, path, verb);
        std::vector<TensorDict> elements;
        for (size_t i = 0; i < sa.tensordicts().size(); ++i) {
          const TensorDict& ea = sa.tensordicts()[i];
          elements.push_back(empty_like(ea));
          self(
              self,
              *ea.unsafeGetImpl(),
              *sb.tensordicts()[i].unsafeGetImpl(),
              *elements.back().unsafeGetImpl());
        }
        dst.append(node.key, Value(restack_like(sa, std::move(elements))));
      } else {
        dst.append(node.key, Value(on_non_tensors(va, vb, va.shape())));
      }
    });
  };
  TensorDict result = empty_like(a);
  zip(zip, *a.unsafeGetImpl(), *b.unsafeGetImpl(), *result.unsafeGetImpl());
  return result;
}

/// How a batch-dim op reshapes one dict: the root's new batch size and
/// names. Nested dicts keep their extra batch dims after these.
struct BatchChange {
  std::vector<int64_t> batch_size;
  DimNames names;  // empty = no names
};

/// Applies a batch-dim op to every entry of `td`: `fn(t)` must transform the
/// first `td.batch_dims()` dims of `t` and leave the rest in place (a leaf's
/// feature dims, a nested dict's extra batch dims). Returns the new dict with
/// `change` applied at the root and carried down to nested dicts. Non-tensor
/// stacks follow by applying `fn` to a tensor of their element positions;
/// an element count of one dim-less result becomes NonTensorData.
template <typename Fn>
TensorDict transform(const TensorDict& td, Fn&& fn, const BatchChange& change);

/// Like `transform`, for ops that add batch elements with no source (pad):
/// non-tensor entries follow `on_positions(positions)` instead of `fn`, and
/// a position of -1 there is an element with no value, which holds null
/// (Python's None). A NonTensorData that gets such elements becomes a
/// NonTensorStack.
template <typename Fn, typename PositionsFn>
TensorDict transform_filling(
    const TensorDict& td,
    Fn&& fn,
    PositionsFn&& on_positions,
    const BatchChange& change);

/// Calls a splitting op (unbind, split, chunk) on every entry: `fn(t)`
/// returns the pieces of `t`, and `changes[i]` is the batch change of piece
/// i. Returns one dict per piece.
template <typename Fn>
std::vector<TensorDict> transform_split(
    const TensorDict& td, Fn&& fn, const std::vector<BatchChange>& changes);

// --- implementation
// ------------------------------------------------------------

/// The positions 0..n-1 of a stack's elements, shaped like its batch size.
at::Tensor stack_positions(const NonTensorStack& stack);
/// Rebuilds a stack from transformed positions (a NonTensorData when the
/// result has no dims); a position of -1 gives null.
Value gather_stack(
    const NonTensorStack& stack,
    const at::Tensor& positions,
    std::optional<c10::Device> device);
/// Rebuilds NonTensorData from transformed positions of its batch (all 0,
/// or -1 for an element with no value): the same data with the new batch
/// size, or a NonTensorStack with null at the -1s.
Value gather_data(const NonTensorData& data, const at::Tensor& positions);
/// The positions of a NonTensorData's batch elements: zeros of its shape.
at::Tensor data_positions(const NonTensorData& data);
/// Returns `change` carried to a nested level of batch size `old_batch`
/// and names `old_names`, for a root of `root_dims` batch dims.
BatchChange carry_change(
    const BatchChange& change,
    c10::IntArrayRef old_batch,
    const DimNames& old_names,
    size_t root_dims);
/// Returns the empty dict that nested dict `src` becomes under `change`
/// (carried from a root of `root_dims` dims), with its device and Python
/// class.
TensorDict carried_dict(
    const TensorDictImpl& src, const BatchChange& change, size_t root_dims);

/// A lazy stack cut at every position of its first `root_dims` batch dims
/// (which include the stack dim): what a batch-dim op of the parent moves
/// around when it mixes the stack dim with the others. See NOTE [Lazy
/// stacks under a batch-dim op].
struct LazyStackAtoms {
  /// One dict per position, row-major over the first `root_dims` dims.
  std::vector<TensorDict> atoms;
  /// The element each atom comes from (int64, one per atom).
  at::Tensor element_of;
  /// 0..atoms-1 shaped as the first `root_dims` batch dims: what the op
  /// transforms in place of a tensor.
  at::Tensor positions;
};

/// Cuts `stack` into atoms; its stack dim must be below `root_dims`.
LazyStackAtoms lazy_stack_atoms(
    const LazyStackedTensorDict& stack, size_t root_dims);

/// Builds the entry whose position i holds atom `picked[i]` (`picked` is
/// the op's result on `atoms.positions`): a lazy stack along the one dim
/// of `picked` whose slices each come from one element, a dense dict when
/// every atom comes from one element or no such dim exists and the atoms
/// stack densely. Throws naming `key` otherwise, and when `picked` holds
/// -1 (a padded position: a lazy stack has no value to fill it with).
Value assemble_atoms(
    const LazyStackAtoms& atoms,
    const at::Tensor& picked,
    const LazyStackedTensorDict& like,
    std::string_view key);

template <typename Fn, typename PositionsFn>
void transform_into(
    TensorDictImpl& dst,
    const TensorDictImpl& src,
    Fn& fn,
    PositionsFn* on_positions,
    const BatchChange& root_change,
    size_t root_dims);

// NOTE [Lazy stacks under a batch-dim op]
// A lazy stack entry whose stack dim lies past the parent's batch dims is
// transformed element by element, each element as a nested dict, and
// stacked again at the same place after the new root dims. One whose stack
// dim is among them is cut into atoms (one dict per position of those dims),
// the op runs on a tensor of atom positions, and `assemble_atoms` rebuilds
// the entry from where each atom landed, as Python's lazy stack does: an
// integer on the stack dim gives that element's dict, a reshape or permute
// gives a lazy stack along the dim that keeps the elements apart.
template <typename Fn, typename PositionsFn>
Value transform_lazy_stack(
    std::string_view key,
    const LazyStackedTensorDict& stack,
    Fn& fn,
    PositionsFn* on_positions,
    const BatchChange& root_change,
    size_t root_dims) {
  if (static_cast<size_t>(stack.stack_dim()) >= root_dims) {
    std::vector<TensorDict> elements;
    for (const TensorDict& element : stack.tensordicts()) {
      const TensorDictImpl& src = *element.unsafeGetImpl();
      elements.push_back(carried_dict(src, root_change, root_dims));
      transform_into(
          *elements.back().unsafeGetImpl(),
          src,
          fn,
          on_positions,
          root_change,
          root_dims);
    }
    const int64_t stack_dim =
        stack.stack_dim() - static_cast<int64_t>(root_dims) +
        static_cast<int64_t>(root_change.batch_size.size());
    return Value(lazy_stack(elements, stack_dim, stack.stack_dim_name()));
  }
  const LazyStackAtoms atoms = lazy_stack_atoms(stack, root_dims);
  const at::Tensor picked = on_positions != nullptr
                                ? (*on_positions)(atoms.positions)
                                : fn(atoms.positions);
  return assemble_atoms(atoms, picked, stack, key);
}

// `on_positions` is null unless the op fills (transform_filling).
template <typename Fn, typename PositionsFn>
void transform_into(
    TensorDictImpl& dst,
    const TensorDictImpl& src,
    Fn& fn,
    PositionsFn* on_positions,
    const BatchChange& root_change,
    size_t root_dims) {
  dst.reserve(src.nodes().size());
  for (const auto& node : src.nodes()) {
    const Value& v = node->value;
    switch (v.kind()) {
      case Value::Kind::kTensor:
        dst.append_like(*node, Value(fn(v.tensor())));
        break;
      case Value::Kind::kTensorDict: {
        const TensorDictImpl& child = *v.tensordict().unsafeGetImpl();
        TensorDict out = carried_dict(child, root_change, root_dims);
        transform_into(
            *out.unsafeGetImpl(),
            child,
            fn,
            on_positions,
            root_change,
            root_dims);
        dst.append_like(*node, Value(std::move(out)));
        break;
      }
      case Value::Kind::kNonTensorData: {
        const NonTensorData& data = v.non_tensor_data();
        if (on_positions != nullptr) {
          dst.append(
              node->key,
              gather_data(data, (*on_positions)(data_positions(data))));
          break;
        }
        NonTensorData moved = data;
        moved.set_batch_size(
            carry_change(root_change, data.batch_size(), {}, root_dims)
                .batch_size);
        dst.append_like(*node, Value(std::move(moved)));
        break;
      }
      case Value::Kind::kNonTensorStack: {
        const NonTensorStack& stack = v.non_tensor_stack();
        at::Tensor positions = on_positions != nullptr
                                   ? (*on_positions)(stack_positions(stack))
                                   : fn(stack_positions(stack));
        dst.append_like(*node, gather_stack(stack, positions, stack.device()));
        break;
      }
      case Value::Kind::kLazyStack:
        dst.append(
            node->key,
            transform_lazy_stack(
                node->key,
                v.lazy_stack(),
                fn,
                on_positions,
                root_change,
                root_dims));
        break;
    }
  }
}

template <typename Fn>
TensorDict transform(const TensorDict& td, Fn&& fn, const BatchChange& change) {
  const TensorDictImpl& src = *td.unsafeGetImpl();
  TensorDict result =
      make_tensordict(change.batch_size, src.device, change.names);
  transform_into(
      *result.unsafeGetImpl(),
      src,
      fn,
      static_cast<std::remove_reference_t<Fn>*>(nullptr),
      change,
      src.batch_size.size());
  return result;
}

template <typename Fn, typename PositionsFn>
TensorDict transform_filling(
    const TensorDict& td,
    Fn&& fn,
    PositionsFn&& on_positions,
    const BatchChange& change) {
  const TensorDictImpl& src = *td.unsafeGetImpl();
  TensorDict result =
      make_tensordict(change.batch_size, src.device, change.names);
  transform_into(
      *result.unsafeGetImpl(),
      src,
      fn,
      &on_positions,
      change,
      src.batch_size.size());
  return result;
}

template <typename Fn>
void transform_split_into(
    std::vector<TensorDictImpl*>& dsts,
    const TensorDictImpl& src,
    Fn& fn,
    const std::vector<BatchChange>& changes,
    size_t root_dims);

// Like `transform_lazy_stack`, for a splitting op: one entry per piece.
template <typename Fn>
std::vector<Value> split_lazy_stack(
    std::string_view key,
    const LazyStackedTensorDict& stack,
    Fn& fn,
    const std::vector<BatchChange>& changes,
    size_t root_dims) {
  const size_t n = changes.size();
  std::vector<Value> out;
  out.reserve(n);
  if (static_cast<size_t>(stack.stack_dim()) >= root_dims) {
    std::vector<std::vector<TensorDict>> pieces(n);
    for (const TensorDict& element : stack.tensordicts()) {
      const TensorDictImpl& src = *element.unsafeGetImpl();
      std::vector<TensorDictImpl*> dsts;
      for (size_t i = 0; i < n; ++i) {
        pieces[i].push_back(carried_dict(src, changes[i], root_dims));
        dsts.push_back(pieces[i].back().unsafeGetImpl());
      }
      transform_split_into(dsts, src, fn, changes, root_dims);
    }
    for (size_t i = 0; i < n; ++i) {
      const int64_t stack_dim =
          stack.stack_dim() - static_cast<int64_t>(root_dims) +
          static_cast<int64_t>(changes[i].batch_size.size());
      out.emplace_back(
          lazy_stack(pieces[i], stack_dim, stack.stack_dim_name()));
    }
    return out;
  }
  const LazyStackAtoms atoms = lazy_stack_atoms(stack, root_dims);
  for (const at::Tensor& picked : fn(atoms.positions)) {
    out.push_back(assemble_atoms(atoms, picked, stack, key));
  }
  return out;
}

template <typename Fn>
void transform_split_into(
    std::vector<TensorDictImpl*>& dsts,
    const TensorDictImpl& src,
    Fn& fn,
    const std::vector<BatchChange>& changes,
    size_t root_dims) {
  const size_t n = dsts.size();
  for (TensorDictImpl* dst : dsts) {
    dst->reserve(src.nodes().size());
  }
  for (const auto& node : src.nodes()) {
    const Value& v = node->value;
    switch (v.kind()) {
      case Value::Kind::kTensor: {
        std::vector<at::Tensor> pieces = fn(v.tensor());
        for (size_t i = 0; i < n; ++i) {
          dsts[i]->append_like(*node, Value(std::move(pieces[i])));
        }
        break;
      }
      case Value::Kind::kTensorDict: {
        const TensorDictImpl& child = *v.tensordict().unsafeGetImpl();
        std::vector<TensorDictImpl*> child_dsts;
        for (size_t i = 0; i < n; ++i) {
          TensorDict out = carried_dict(child, changes[i], root_dims);
          child_dsts.push_back(out.unsafeGetImpl());
          dsts[i]->append_like(*node, Value(std::move(out)));
        }
        transform_split_into(child_dsts, child, fn, changes, root_dims);
        break;
      }
      case Value::Kind::kNonTensorData:
        for (size_t i = 0; i < n; ++i) {
          NonTensorData data = v.non_tensor_data();
          data.set_batch_size(
              carry_change(changes[i], data.batch_size(), {}, root_dims)
                  .batch_size);
          dsts[i]->append_like(*node, Value(std::move(data)));
        }
        break;
      case Value::Kind::kNonTensorStack: {
        const NonTensorStack& stack = v.non_tensor_stack();
        std::vector<at::Tensor> pieces = fn(stack_positions(stack));
        for (size_t i = 0; i < n; ++i) {
          dsts[i]->append(
              node->key, gather_stack(stack, pieces[i], stack.device()));
        }
        break;
      }
      case Value::Kind::kLazyStack: {
        std::vector<Value> pieces =
            split_lazy_stack(node->key, v.lazy_stack(), fn, changes, root_dims);
        for (size_t i = 0; i < n; ++i) {
          dsts[i]->append_like(*node, std::move(pieces[i]));
        }
        break;
      }
    }
  }
}

template <typename Fn>
std::vector<TensorDict> transform_split(
    const TensorDict& td, Fn&& fn, const std::vector<BatchChange>& changes) {
  const TensorDictImpl& src = *td.unsafeGetImpl();
  std::vector<TensorDict> results;
  std::vector<TensorDictImpl*> dsts;
  results.reserve(changes.size());
  for (const BatchChange& change : changes) {
    results.push_back(
        make_tensordict(change.batch_size, src.device, change.names));
    dsts.push_back(results.back().unsafeGetImpl());
  }
  transform_split_into(dsts, src, fn, changes, src.batch_size.size());
  return results;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
