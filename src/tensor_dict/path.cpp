// Nested keys as paths of dicts: the one walk from a root to the dict that
// holds a key's last part, and the KeyErrors it raises on the way.

#include <algorithm>
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
// the way does. Lookups stop (`find`, `contains`) or throw (`get`, `pop`).
// `set` walks in kExisting mode, which stops at the first missing level;
// the value is then validated against that dict, which the new levels will
// copy (batch size, device, names), and the same walk continues from there
// in kCreate mode. So a rejected value leaves no empty levels behind, and
// no level is looked up twice.

std::string TensorDictImpl::sorted_keys_repr() const {
  std::vector<std::string_view> keys;
  keys.reserve(nodes().size());
  for (const Node* node : nodes()) {
    keys.emplace_back(node->key);
  }
  std::sort(keys.begin(), keys.end());
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i > 0) {
      out += ", ";
    }
    out += python_repr(keys[i]);
  }
  out += "]";
  return out;
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

namespace {

// `node`, the entry at `key[depth]`, is not a dict, so the walk cannot go
// on to `key[depth + 1]`.
[[noreturn]] void throw_through_leaf(
    const Node& node, const NestedKey& key, size_t depth) {
  throw KeyError(
      {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
      c10::str(
          key.prefix(depth + 1).to_string(),
          " is a ",
          node.value.type_name(),
          ", not a tensordict, so it has no entry ",
          python_repr(key[depth + 1]),
          "."));
}

// Appends an empty dict named `name` to `parent`, shaped like it.
Node& append_level(TensorDictImpl& parent, std::string_view name) {
  check_unlocked(parent);
  TensorDict level =
      make_tensordict(parent.batch_size, parent.device, parent.names);
  return parent.append(std::string(name), Value(std::move(level)));
}

}  // namespace

PathEnd resolve(PathEnd from, const NestedKey& key, PathMode mode) {
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
        return {impl, depth};
      }
      throw_through_leaf(*node, key, depth);
    }
    impl = node->value.tensordict().unsafeGetImpl();
  }
  return {impl, key.size() - 1};
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
