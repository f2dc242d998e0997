// Key-set operations: listing keys, select/exclude, update, renaming and
// removing entries, flattening nested keys.

#include <algorithm>
#include <optional>

#include "core/tensor_dict_impl.h"
#include "core/walk.h"
#include "tensordict/errors.h"
#include "tensordict/json.h"
#include "tensordict/non_tensor.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE

using detail::Node;
using detail::TensorDictImpl;

// --- listing -----------------------------------------------------------------

namespace {

// Lists the keys below `impl` in the order of Python's
// `keys(include_nested=True)`: a nested dict's keys right before its own.
// A lazy stack contributes the keys its elements share, once; `on_entry`
// gets each key and, for a key inside a lazy stack, the stack and the key
// within it (to read the value only when it is wanted).
template <typename OnEntry>
void list_nested(
    const detail::TensorDictImpl& impl, bool leaves_only, OnEntry& on_entry) {
  struct Lister : detail::WalkVisitor {
    bool leaves_only;
    OnEntry& on_entry;
    void emit(const detail::KeyPath& path, const Value& value) {
      on_entry(path.key(), &value, nullptr, nullptr);
    }
    void leaf(const detail::KeyPath& path, const at::Tensor& tensor) {
      emit(path, Value(tensor));
    }
    void leave_dict(const detail::KeyPath& path, const TensorDict& dict) {
      if (!leaves_only) {
        emit(path, Value(dict));
      }
    }
    void non_tensor(const detail::KeyPath& path, const Value& value) {
      if (!leaves_only) {
        emit(path, value);
      }
    }
    bool enter_lazy_stack(
        const detail::KeyPath& path, const LazyStackedTensorDict& stack) {
      for (const NestedKey& inner :
           stack.keys(/*include_nested=*/true, leaves_only)) {
        std::vector<std::string_view> parts(
            path.parts().begin(), path.parts().end());
        parts.insert(parts.end(), inner.begin(), inner.end());
        on_entry(NestedKey::from_parts(parts), nullptr, &stack, &inner);
      }
      if (!leaves_only) {
        emit(path, Value(stack));
      }
      return false;
    }
  } lister{{}, leaves_only, on_entry};
  detail::KeyPath path;
  detail::walk(impl, lister, path);
}

template <typename T>
void sort_by_key(std::vector<T>& out, bool sort) {
  if (sort) {
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
      if constexpr (std::is_same_v<T, NestedKey>) {
        return a < b;
      } else {
        return a.first < b.first;
      }
    });
  }
}

}  // namespace

std::vector<std::pair<NestedKey, Value>> TensorDict::items(
    bool include_nested, bool leaves_only, bool sort) const {
  std::vector<std::pair<NestedKey, Value>> out;
  if (include_nested) {
    auto on_entry = [&](NestedKey key,
                        const Value* value,
                        const LazyStackedTensorDict* stack,
                        const NestedKey* inner) {
      if (value != nullptr) {
        out.emplace_back(std::move(key), *value);
        return;
      }
      // list_nested passes a lazy stack and the key inside it otherwise.
      TORCH_INTERNAL_ASSERT(stack != nullptr && inner != nullptr);
      const Value* first = stack->tensordicts().front().find(*inner);
      Value entry = first != nullptr && first->is_tensordict()
                        ? Value(stack->get_tensordict(*inner))
                        : Value(stack->get(*inner));
      out.emplace_back(std::move(key), std::move(entry));
    };
    list_nested(*impl_, leaves_only, on_entry);
  } else {
    for (const auto& node : impl_->nodes()) {
      if (!leaves_only || node->value.is_tensor()) {
        out.emplace_back(NestedKey(std::string_view(node->key)), node->value);
      }
    }
  }
  sort_by_key(out, sort);
  return out;
}

std::vector<NestedKey> TensorDict::keys(
    bool include_nested, bool leaves_only, bool sort) const {
  std::vector<NestedKey> out;
  if (include_nested) {
    auto on_entry = [&](NestedKey key,
                        const Value* /*value*/,
                        const LazyStackedTensorDict* /*stack*/,
                        const NestedKey* /*inner*/) {
      out.push_back(std::move(key));
    };
    list_nested(*impl_, leaves_only, on_entry);
  } else {
    for (const auto& node : impl_->nodes()) {
      if (!leaves_only || node->value.is_tensor()) {
        out.emplace_back(std::string_view(node->key));
      }
    }
  }
  sort_by_key(out, sort);
  return out;
}

std::vector<Value> TensorDict::values(
    bool include_nested, bool leaves_only, bool sort) const {
  std::vector<Value> out;
  for (auto& [key, value] : items(include_nested, leaves_only, sort)) {
    out.push_back(std::move(value));
  }
  return out;
}

size_t TensorDict::num_keys() const noexcept {
  return impl_->nodes().size();
}

bool TensorDict::is_empty() const noexcept {
  return impl_->nodes().empty();
}

// --- structure ---------------------------------------------------------------

TensorDict TensorDict::empty(bool recurse) const {
  TensorDict result = detail::empty_like(*this);
  if (recurse) {
    for (const auto& node : impl_->nodes()) {
      if (node->value.is_tensordict()) {
        result.unsafeGetImpl()->append(
            node->key, Value(node->value.tensordict().empty(true)));
      }
    }
  }
  return result;
}

TensorDict TensorDict::select(
    const std::vector<NestedKey>& keys, bool strict) const {
  TensorDict result = detail::empty_like(*this);
  for (const NestedKey& key : keys) {
    const detail::Lookup found = detail::lookup(*this, key);
    if (found.kind != detail::Lookup::Kind::kFound) {
      TORCH_CHECK_NOT_IMPLEMENTED(
          found.kind != detail::Lookup::Kind::kThroughLazyStack,
          "select: ",
          key.to_string(),
          " is inside a lazy stack; select the stack itself");
      if (strict) {
        detail::throw_key_error(found, key);
      }
      continue;
    }
    const Value* value = &found.node->value;
    // Intermediate dicts keep the source's own batch size and names.
    TensorDict src = *this;
    TensorDict dst = result;
    for (size_t depth = 0; depth + 1 < key.size(); ++depth) {
      src = src.get_tensordict(key.prefix(depth + 1).back());
      const Value* existing = dst.find(key[depth]);
      if (existing == nullptr) {
        dst.unsafeGetImpl()->append(
            std::string(key[depth]), Value(detail::empty_like(src)));
        existing = dst.find(key[depth]);
      }
      dst = existing->tensordict();
    }
    dst.set(key.back(), *value);
  }
  return result;
}

TensorDict TensorDict::exclude(const std::vector<NestedKey>& keys) const {
  TensorDict result = copy();
  for (const NestedKey& key : keys) {
    if (result.contains(key)) {
      result.del_(key);
    }
  }
  return result;
}

namespace {

// Appends every entry below `src` that is not a nested dict to `dst`, named
// by its key path joined by `separator`.
void flatten_into(
    TensorDictImpl& dst, const TensorDict& src, std::string_view separator) {
  struct Flatten : detail::WalkVisitor {
    TensorDictImpl& dst;
    std::string_view separator;
    void add(const detail::KeyPath& path, Value value) {
      std::string name = path.joined(separator);
      TENSORDICT_CHECK_KEY(
          dst.find(name) == nullptr,
          "Flattening keys in tensordict causes keys [",
          path.to_string(),
          "] to collide.");
      dst.append(std::move(name), std::move(value));
    }
    void leaf(const detail::KeyPath& path, const at::Tensor& tensor) {
      add(path, Value(tensor));
    }
    void non_tensor(const detail::KeyPath& path, const Value& value) {
      add(path, value);
    }
    // A lazy stack stays one entry, as in Python.
    bool enter_lazy_stack(
        const detail::KeyPath& path, const LazyStackedTensorDict& stack) {
      add(path, Value(stack));
      return false;
    }
  } flatten{{}, dst, separator};
  detail::walk(src, flatten);
}

std::vector<std::string> split_key(
    std::string_view text, std::string_view sep) {
  std::vector<std::string> parts;
  if (sep.empty()) {
    parts.emplace_back(text);
    return parts;
  }
  size_t start = 0;
  while (true) {
    const size_t pos = text.find(sep, start);
    if (pos == std::string_view::npos) {
      parts.emplace_back(text.substr(start));
      return parts;
    }
    parts.emplace_back(text.substr(start, pos - start));
    start = pos + sep.size();
  }
}

}  // namespace

TensorDict TensorDict::flatten_keys(std::string_view separator) const {
  TensorDict result = detail::empty_like(*this);
  flatten_into(*result.unsafeGetImpl(), *this, separator);
  return result;
}

std::vector<Item> TensorDict::to_dict() const {
  std::vector<Item> out;
  out.reserve(num_keys());
  for (auto& [key, value] : items()) {
    switch (value.kind()) {
      case Value::Kind::kTensor:
        out.emplace_back(key, value.tensor());
        break;
      case Value::Kind::kTensorDict:
        out.emplace_back(key, value.tensordict().to_dict());
        break;
      case Value::Kind::kNonTensorData:
        out.emplace_back(key, value.non_tensor_data().data());
        break;
      case Value::Kind::kNonTensorStack:
        out.emplace_back(key, value.non_tensor_stack().tolist());
        break;
      case Value::Kind::kLazyStack:
        out.emplace_back(key, value.lazy_stack());
        break;
    }
  }
  return out;
}

TensorDict TensorDict::unflatten_keys(std::string_view separator) const {
  TensorDict result = detail::empty_like(*this);
  for (const auto& node : impl_->nodes()) {
    const NestedKey key(split_key(node->key, separator));
    const Value value =
        node->value.is_tensordict()
            ? Value(node->value.tensordict().unflatten_keys(separator))
            : node->value;
    const Value* existing = result.find(key);
    if (existing != nullptr && existing->is_tensordict() &&
        value.is_tensordict()) {
      TensorDict dst = existing->tensordict();
      dst.update(value.tensordict());
      continue;
    }
    TENSORDICT_CHECK_KEY(
        existing == nullptr,
        "Unflattening key(s) in tensordict will override an existing for "
        "unflattened key ",
        key.to_string(),
        ".");
    try {
      result.set(key, value);
    } catch (const KeyError&) {
      // A part of the key is already a leaf.
      TENSORDICT_CHECK_KEY(
          false,
          "Unflattening key(s) in tensordict will override an existing for "
          "unflattened key ",
          key.to_string(),
          ".");
    }
  }
  return result;
}

// --- update ------------------------------------------------------------------

namespace {

enum class Match { kNone, kPartial, kAll };

// How `key` relates to the filter: covered by an entry (kAll), on the way to
// one (kPartial), or outside it (kNone).
Match match_filter(const NestedKey& key, const std::vector<NestedKey>& filter) {
  Match best = Match::kNone;
  for (const NestedKey& f : filter) {
    const size_t n = std::min(f.size(), key.size());
    if (!std::equal(f.begin(), f.begin() + n, key.begin())) {
      continue;
    }
    if (f.size() <= key.size()) {
      return Match::kAll;
    }
    best = Match::kPartial;
  }
  return best;
}

// The nested key of entry `name` under `path`; built only where a key is
// needed (filters, errors), so plain updates allocate no keys.
NestedKey key_at(c10::ArrayRef<std::string_view> path, std::string_view name) {
  std::vector<std::string> parts(path.begin(), path.end());
  parts.emplace_back(name);
  return NestedKey(parts);
}

void update_level(
    TensorDict& dst,
    const TensorDict& src,
    std::vector<std::string_view>& path,
    const UpdateOptions& options,
    bool covered) {
  detail::TensorDictImpl& out = *dst.unsafeGetImpl();
  const bool filtered = !covered && !options.keys_to_update().empty();
  size_t pos = 0;  // of `node` in `src`
  for (const auto& node : src.unsafeGetImpl()->nodes()) {
    const size_t here = pos++;
    bool sub_covered = covered;
    if (filtered) {
      const Match m =
          match_filter(key_at(path, node->key), options.keys_to_update());
      if (m == Match::kNone) {
        continue;
      }
      sub_covered = m == Match::kAll;
      if (m == Match::kPartial && !node->value.is_tensordict()) {
        continue;
      }
    }
    // Dicts built alike keep their keys in the same order: try the node at
    // the same position before hashing.
    detail::Node* existing =
        here < out.nodes().size()
            ? *out.nodes().begin() + here  // nodes are contiguous
            : nullptr;
    if (existing == nullptr || existing->hash != node->hash ||
        existing->key != node->key) {
      existing = out.find(node->key);
    }
    const bool merge =
        existing == nullptr ? !sub_covered : existing->value.is_tensordict();
    if (node->value.is_tensordict() && merge) {
      TensorDict target;
      if (existing != nullptr) {
        target = existing->value.tensordict();
      } else {
        target = detail::empty_like(node->value.tensordict());
        dst.set(NestedKey(std::string_view(node->key)), target);
      }
      path.push_back(node->key);
      update_level(
          target, node->value.tensordict(), path, options, sub_covered);
      path.pop_back();
      continue;
    }
    // Copied only when cloned: copying a Value costs more than the rest of
    // the fast path below.
    std::optional<Value> cloned;
    if (options.clone()) {
      if (node->value.is_tensor()) {
        cloned.emplace(node->value.tensor().clone());
      } else if (node->value.is_tensordict()) {
        cloned.emplace(node->value.tensordict().clone());
      }
    }
    const Value& value = cloned ? *cloned : node->value;
    // Fast path: a tensor that fits replaces the entry, as `set` would do
    // after the same checks, without building a key.
    if (!options.inplace() && value.is_tensor()) {
      const at::Tensor& t = value.tensor();
      const auto sizes = t.sizes();
      const auto& batch = out.batch_size;
      const bool fits = sizes.size() >= batch.size() &&
                        std::equal(batch.begin(), batch.end(), sizes.begin()) &&
                        (!out.device || t.device() == *out.device);
      if (fits) {
        detail::check_unlocked(out);
        if (existing != nullptr) {
          existing->value = value;
        } else {
          out.append(node->key, value);
        }
        continue;
      }
    }
    dst.set(
        NestedKey(std::string_view(node->key)),
        value,
        SetOptions()
            .inplace(options.inplace())
            .non_blocking(options.non_blocking()));
  }
}

}  // namespace

TensorDict& TensorDict::update(
    const TensorDict& other, const UpdateOptions& options) {
  if (is_same(other)) {
    return *this;
  }
  std::vector<std::string_view> path;
  update_level(*this, other, path, options, /*covered=*/false);
  return *this;
}

TensorDict& TensorDict::update_(
    const TensorDict& other, const std::vector<NestedKey>& keys_to_update) {
  for (const auto& [key, value] : other.items(/*include_nested=*/true)) {
    if (value.is_tensordict()) {
      continue;  // its entries are visited on their own
    }
    if (!keys_to_update.empty() &&
        match_filter(key, keys_to_update) != Match::kAll) {
      continue;
    }
    TENSORDICT_CHECK_KEY(
        contains(key),
        "The key ",
        key.to_string(),
        " was not found in the dest tensordict.");
    if (value.is_tensor()) {
      set_(key, value.tensor());
    } else {
      set(key, value, SetOptions().inplace(true));
    }
  }
  return *this;
}

// --- renaming and removing ---------------------------------------------------

TensorDict& TensorDict::rename_key_(
    const NestedKey& old_key, const NestedKey& new_key, bool safe) {
  TensorDictImpl& old_parent = detail::resolve_parent(*this, old_key);
  if (old_parent.find(old_key.back()) == nullptr) {
    detail::throw_missing_key(old_parent, old_key.back(), old_key);
  }
  if (old_key == new_key) {
    return *this;
  }
  // Python formats the key with str(): bare for a string, a tuple repr
  // for a nested key.
  TENSORDICT_CHECK_KEY(
      !(safe && contains(new_key)),
      "key ",
      new_key.size() == 1 ? std::string(new_key[0]) : new_key.to_string(),
      " already present in TensorDict.");
  detail::check_unlocked(old_parent);
  const Value value = old_parent.find(old_key.back())->value;
  set(new_key, value);
  old_parent.erase(old_key.back());
  return *this;
}

Value TensorDict::pop(const NestedKey& key) {
  TensorDictImpl& parent = detail::resolve_parent(*this, key);
  if (parent.find(key.back()) == nullptr) {
    detail::throw_missing_key(parent, key.back(), key);
  }
  detail::check_unlocked(parent);
  return parent.erase(key.back());
}

Value TensorDict::pop(const NestedKey& key, const Value& default_value) {
  if (!contains(key)) {
    return default_value;
  }
  return pop(key);
}

std::pair<std::string, Value> TensorDict::popitem() {
  // Python checks the lock first, so a locked empty dict reports the lock.
  detail::check_unlocked(*impl_);
  const auto nodes = impl_->nodes();
  TENSORDICT_CHECK_KEY(!nodes.empty(), "popitem(): dictionary is empty");
  std::string key = (*nodes.begin() + (nodes.size() - 1))->key;
  Value value = impl_->erase(key);
  return {std::move(key), std::move(value)};
}

TensorDict& TensorDict::del_(const NestedKey& key) {
  (void)pop(key);
  return *this;
}

TensorDict& TensorDict::clear() {
  detail::check_unlocked(*impl_);
  impl_->clear();
  return *this;
}

TENSORDICT_END_NAMESPACE
