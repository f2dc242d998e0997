#pragma once

// The traversal engine: every walk over a dict's tree is written once, here.
// See NOTE [Walking the tree].

#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/key_path.h"
#include "core/tensor_dict_impl.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

// NOTE [Walking the tree]
// One recursion serves every feature that touches each level of a dict:
//  - `walk(td, visitor)`: a depth-first visit with `enter_dict`, `leaf`,
//    `non_tensor` and `leave_dict` hooks (derive from `WalkVisitor` and
//    override what you need);
//  - `walk_mut(impl, visitor)`: the same visit on mutable dicts and nodes,
//    for rewrites in place (`MutWalkVisitor`);
//  - `any_dict(impl, pred)` / `for_each_dict(impl, fn)`: every nested dict,
//    the root first; `any_dict` stops at the first that `pred` accepts;
//  - `for_each_tensor` / `all_tensors`: every tensor;
//  - `zip_level(dicts, path, options, fn)`: several dicts matched by key at
//    one level, with the one key-set check (`match_same_keys`) and the one
//    kind check (`check_same_kind`), or, with `ZipKeys::kMatch`, an answer
//    of false instead of either error; callers recurse from `fn`;
//  - `rebuild` / `map_entries`: rebuild the structure leaf by leaf.
// The batch-dim ops' rebuild (`transform*`: every entry through the same op
// on its batch dims) is a client of it, in tensor_dict/batch_transform.h.
// Walkers keep the current key as a `KeyPath`, a stack of borrowed parts,
// and make a NestedKey only when they need one (a callback's key, an error),
// so a walk allocates nothing per node for its keys.

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
    switch (v.kind()) {
      case Value::Kind::kTensor:
        visitor.leaf(path, v.tensor());
        break;
      case Value::Kind::kTensorDict: {
        const TensorDict& child = v.tensordict();
        if (visitor.enter_dict(path, child)) {
          walk(*child.unsafeGetImpl(), visitor, path);
          visitor.leave_dict(path, child);
        }
        break;
      }
      case Value::Kind::kLazyStack: {
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
        break;
      }
      case Value::Kind::kNonTensorData:
      case Value::Kind::kNonTensorStack:
        visitor.non_tensor(path, v);
        break;
    }
  }
}

/// Visits every entry of `td` depth first; see WalkVisitor.
template <typename Visitor>
void walk(const TensorDict& td, Visitor& visitor) {
  KeyPath path;
  walk(*td.unsafeGetImpl(), visitor, path);
}

/// The hooks of `walk_mut`, all no-ops: like WalkVisitor's, on the dicts
/// and entries themselves, for rewrites in place. A hook may replace its
/// node's value with one of the same kind; the walk then goes on below the
/// new value. `path` ends with the entry's own name.
struct MutWalkVisitor {
  /// Called on a nested dict before its entries; return false to skip them
  /// (and `leave_dict`).
  bool enter_dict(const KeyPath& /*path*/, TensorDictImpl& /*dict*/) {
    return true;
  }
  /// Called on a nested dict after its entries.
  void leave_dict(const KeyPath& /*path*/, TensorDictImpl& /*dict*/) {}
  /// Called on the node of each tensor.
  void leaf(const KeyPath& /*path*/, Node& /*node*/) {}
  /// Called on the node of each NonTensorData or NonTensorStack.
  void non_tensor(const KeyPath& /*path*/, Node& /*node*/) {}
  /// Called on the node of a lazy stack before its elements, which are then
  /// visited as nested dicts named "0", "1", ...; return false to skip them.
  bool enter_lazy_stack(const KeyPath& /*path*/, Node& /*node*/) {
    return true;
  }
};

/// Like `walk`, with the dicts and entries open to change: see
/// MutWalkVisitor. Entries must not be added or removed during the walk.
template <typename Visitor>
void walk_mut(TensorDictImpl& impl, Visitor& visitor, KeyPath& path) {
  for (Node* node : impl.nodes()) {
    PathPart part(path, node->key);
    switch (node->value.kind()) {
      case Value::Kind::kTensor:
        visitor.leaf(path, *node);
        break;
      case Value::Kind::kTensorDict: {
        TensorDictImpl& child = *node->value.tensordict().unsafeGetImpl();
        if (visitor.enter_dict(path, child)) {
          walk_mut(child, visitor, path);
          visitor.leave_dict(path, child);
        }
        break;
      }
      case Value::Kind::kLazyStack: {
        if (!visitor.enter_lazy_stack(path, *node)) {
          break;
        }
        const std::vector<TensorDict>& elements =
            node->value.lazy_stack().tensordicts();
        const std::vector<std::string> names = element_names(elements.size());
        for (size_t i = 0; i < elements.size(); ++i) {
          PathPart element(path, names[i]);
          TensorDictImpl& dict = *elements[i].unsafeGetImpl();
          if (visitor.enter_dict(path, dict)) {
            walk_mut(dict, visitor, path);
            visitor.leave_dict(path, dict);
          }
        }
        break;
      }
      case Value::Kind::kNonTensorData:
      case Value::Kind::kNonTensorStack:
        visitor.non_tensor(path, *node);
        break;
    }
  }
}

/// Like `walk_mut(impl, visitor, path)`, from the root of `impl`.
template <typename Visitor>
void walk_mut(TensorDictImpl& impl, Visitor& visitor) {
  KeyPath path;
  walk_mut(impl, visitor, path);
}

/// Returns true as soon as `pred(dict)` holds for `impl` or a dict nested
/// in it (the elements of lazy stacks included), parents first; false if
/// it holds for none.
template <typename Impl, typename Pred>
bool any_dict(Impl& impl, Pred&& pred) {
  static_assert(std::is_same_v<std::remove_const_t<Impl>, TensorDictImpl>);
  if (pred(impl)) {
    return true;
  }
  for (const auto& node : impl.nodes()) {
    switch (node->value.kind()) {
      case Value::Kind::kTensorDict:
        if (any_dict<Impl>(*node->value.tensordict().unsafeGetImpl(), pred)) {
          return true;
        }
        break;
      case Value::Kind::kLazyStack:
        for (const TensorDict& element :
             node->value.lazy_stack().tensordicts()) {
          if (any_dict<Impl>(*element.unsafeGetImpl(), pred)) {
            return true;
          }
        }
        break;
      case Value::Kind::kTensor:
      case Value::Kind::kNonTensorData:
      case Value::Kind::kNonTensorStack:
        break;
    }
  }
  return false;
}

/// Calls `fn(dict)` on `impl` and every dict nested in it, the elements of
/// lazy stacks included, parents before their children.
template <typename Fn>
void for_each_dict(TensorDictImpl& impl, Fn&& fn) {
  any_dict(impl, [&](TensorDictImpl& dict) {
    fn(dict);
    return false;
  });
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
  /// Every dict must have the same keys and the entries the same kinds, or
  /// `zip_level` returns false (it throws nothing of its own); `fn` may
  /// return false to stop the walk there too. For predicates: `equal`.
  kMatch,
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

/// Returns true if `dicts` (none null) have the same key set.
bool same_keys(c10::ArrayRef<const TensorDictImpl*> dicts) noexcept;

/// Walks one level of `dicts` together, matching entries by key (see
/// ZipKeys), and calls `fn(node, values)` per key with `path` extended by
/// it: `node` is the first dict's entry, `values[i]` dict i's (null only
/// with kFirstOrNull). Recurse from `fn` to go deeper. With kFirstOrNull,
/// `dicts[i]` (i > 0) may be null: a level below a dict that dict i lacks,
/// whose values are then all null. Returns false only with kMatch, on a
/// mismatch or when `fn` returned false; true otherwise.
template <typename Fn>
bool zip_level(
    c10::ArrayRef<const TensorDictImpl*> dicts,
    KeyPath& path,
    const ZipOptions& options,
    Fn&& fn) {
  const size_t n = dicts.size();
  const bool match = options.keys == ZipKeys::kMatch;
  TORCH_INTERNAL_ASSERT(
      options.keys == ZipKeys::kFirstOrNull ||
          std::find(dicts.begin(), dicts.end(), nullptr) == dicts.end(),
      "zip_level: only kFirstOrNull takes missing dicts");
  if (match && !same_keys(dicts)) {
    return false;
  }
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
      const Node* found = same ? matches[pos * (n - 1) + i - 1]
                          : dicts[i] == nullptr
                              ? nullptr
                              : find_matching(*dicts[i], node->key, pos);
      if (found == nullptr) {
        if (options.keys == ZipKeys::kFirst) {
          PathPart part(path, node->key);
          throw_missing_key(*dicts[i], node->key, path.key());
        }
        everywhere = false;
      }
      values[i] = found != nullptr ? &found->value : nullptr;
    }
    ++pos;
    if (!everywhere && options.keys == ZipKeys::kCommon) {
      continue;
    }
    PathPart part(path, node->key);
    if (match) {
      for (size_t i = 1; i < n; ++i) {
        if (!same_kind(*values[0], *values[i])) {
          return false;
        }
      }
    } else if (options.check_kinds) {
      check_same_kind(values, path, options.verb);
    }
    if constexpr (std::is_same_v<
                      decltype(fn(*node, c10::ArrayRef<const Value*>(values))),
                      bool>) {
      if (!fn(*node, c10::ArrayRef<const Value*>(values))) {
        return false;
      }
    } else {
      fn(*node, c10::ArrayRef<const Value*>(values));
    }
  }
  return true;
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

}  // namespace detail
TENSORDICT_END_NAMESPACE
