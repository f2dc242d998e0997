// Nested keys as paths of dicts: the one walk from a root to the dict that
// holds a key's last part, and the KeyErrors it raises on the way.

#include <c10/macros/Macros.h>

#include <string>
#include <vector>

#include "core/tensor_dict_impl.h"
#include "tensordict/errors.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

// NOTE [Key paths]
// A nested key names a path of dicts: ("a", "b", "x") is entry "x" of the
// dict at "b" of the dict at "a". Every operation finds that dict with one
// walk, `resolve`, and its PathMode says what a missing level or a leaf in
// the way does.
//
// The readers and `set` walk once with `lookup`, which never throws and
// says what it found: the entry, a missing part, a lazy stack in the path
// (the key goes on inside its elements, as Python's lazy stacks do), or
// another non-dict in the path. Each reader is a switch over that result,
// and the KeyError is built from it, with no second walk to find which
// part was missing. `set` validates the value against the deepest dict
// that exists, which new levels will copy (batch size, device, names), and
// only then continues the same walk in kCreate mode: a rejected value
// leaves no empty levels behind, and no level is looked up twice.

std::string TensorDictImpl::sorted_keys_repr() const {
  std::vector<std::string_view> keys;
  keys.reserve(nodes().size());
  for (const Node* node : nodes()) {
    keys.emplace_back(node->key);
  }
  return sorted_list_repr(std::move(keys));
}

void throw_missing_key(
    const TensorDictImpl& impl, std::string_view part, const NestedKey& key) {
  std::string msg = c10::str(
      "key \"",
      part,
      "\" not found in TensorDict with keys ",
      impl.sorted_keys_repr());
  if (key.size() > 1) {
    msg += c10::str(" (while looking up ", key.to_string(), ")");
  }
  throw KeyError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, msg);
}

void throw_through_leaf(
    const Node& blocker, const NestedKey& key, size_t depth) {
  throw KeyError(
      {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
      c10::str(
          key.prefix(depth + 1).to_string(),
          " is a ",
          blocker.value.type_name(),
          ", not a tensordict, so it has no entry ",
          python_repr(key[depth + 1]),
          "."));
}

namespace {

// Appends an empty dict named `name` to `parent`, shaped like it.
Node& append_level(TensorDictImpl& parent, std::string_view name) {
  check_unlocked(parent);
  TensorDict level =
      make_tensordict(parent.batch_size, parent.device, parent.names);
  return parent.append(std::string(name), Value(std::move(level)));
}

// The walk itself, inlined into `resolve` and `lookup` alike: `get`,
// `set` and `contains` run on every hot path, and with `mode` a constant
// the walk that `lookup` inlines has no mode branches left.
C10_ALWAYS_INLINE PathEnd
walk_parents(PathEnd from, const NestedKey& key, PathMode mode) {
  TORCH_INTERNAL_ASSERT_DEBUG_ONLY(from.depth < key.size());
  TensorDictImpl* impl = from.dict;
  for (size_t depth = from.depth; depth + 1 < key.size(); ++depth) {
    Node* node = impl->find(key[depth]);
    if (node == nullptr) {
      switch (mode) {
        case PathMode::kFind:
        case PathMode::kExisting:
          return {impl, depth};
        case PathMode::kRequire:
          throw_missing_key(*impl, key[depth], key);
        case PathMode::kCreate:
          node = &append_level(*impl, key[depth]);
          break;
      }
    }
    if (!node->value.is_tensordict()) {
      if (mode == PathMode::kFind) {
        return {impl, depth, node};
      }
      throw_through_leaf(*node, key, depth);
    }
    impl = node->value.tensordict().unsafeGetImpl();
  }
  return {impl, key.size() - 1, nullptr};
}

}  // namespace

PathEnd resolve(PathEnd from, const NestedKey& key, PathMode mode) {
  return walk_parents(from, key, mode);
}

Lookup lookup(PathEnd from, const NestedKey& key) noexcept {
  // kFind never throws: it only reads the tables.
  const PathEnd end = walk_parents(from, key, PathMode::kFind);
  if (end.blocker != nullptr) {
    return {
        end.blocker->value.is_lazy_stack() ? Lookup::Kind::kThroughLazyStack
                                           : Lookup::Kind::kThroughLeaf,
        end.dict,
        end.blocker,
        end.depth};
  }
  Node* node = end.reached(key) ? end.dict->find(key.back()) : nullptr;
  return {
      node != nullptr ? Lookup::Kind::kFound : Lookup::Kind::kMissing,
      end.dict,
      node,
      end.depth};
}

LazyHop lazy_hop(Lookup found, const NestedKey& key) {
  TORCH_INTERNAL_ASSERT_DEBUG_ONLY(
      found.kind == Lookup::Kind::kThroughLazyStack);
  const size_t depth = found.depth;
  return {
      found.node->value.lazy_stack(),
      NestedKey::from_parts(
          c10::ArrayRef<std::string_view>(key.begin() + depth + 1, key.end()))};
}

bool lazy_hop_contains(Lookup found, const NestedKey& key) noexcept {
  TORCH_INTERNAL_ASSERT_DEBUG_ONLY(
      found.kind == Lookup::Kind::kThroughLazyStack);
  // Each element holds the entry named by the rest of the key: the same
  // walk, started inside the element at the part after the stack.
  for (const TensorDict& element :
       found.node->value.lazy_stack().tensordicts()) {
    const PathEnd inside{element.unsafeGetImpl(), found.depth + 1, nullptr};
    if (lookup(inside, key).kind != Lookup::Kind::kFound) {
      return false;
    }
  }
  return true;
}

void throw_key_error(Lookup found, const NestedKey& key) {
  if (found.kind == Lookup::Kind::kMissing) {
    throw_missing_key(*found.dict, key[found.depth], key);
  }
  TORCH_INTERNAL_ASSERT(
      found.node != nullptr && found.kind != Lookup::Kind::kFound,
      "no KeyError for an entry");
  throw_through_leaf(*found.node, key, found.depth);
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
