#include "core/walk.h"

#include <string>

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

Value non_tensor_on(const Value& v, std::optional<c10::Device> device) {
  if (!device) {
    return v;
  }
  if (v.is_non_tensor_data()) {
    NonTensorData data = v.non_tensor_data();
    data.set_device(device);
    return Value(std::move(data));
  }
  NonTensorStack stack = v.non_tensor_stack();
  stack.set_device(device);
  return Value(std::move(stack));
}

std::vector<std::string> element_names(size_t n) {
  std::vector<std::string> names;
  names.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    names.push_back(std::to_string(i));
  }
  return names;
}

LazyStackedTensorDict restack_like(
    const LazyStackedTensorDict& like, std::vector<TensorDict> elements) {
  LazyStackedTensorDict out(
      std::move(elements), like.stack_dim(), like.stack_dim_name());
  if (!like.python_class().empty()) {
    out.set_python_class(like.python_class());
  }
  return out;
}

void check_same_stacking(
    const LazyStackedTensorDict& a,
    const LazyStackedTensorDict& b,
    const KeyPath& path,
    const char* verb) {
  TORCH_CHECK(
      a.tensordicts().size() == b.tensordicts().size() &&
          a.stack_dim() == b.stack_dim(),
      "cannot ",
      verb,
      " the lazy stacks at ",
      path.to_string(),
      ": one has ",
      a.tensordicts().size(),
      " elements stacked at dim ",
      a.stack_dim(),
      ", the other ",
      b.tensordicts().size(),
      " at dim ",
      b.stack_dim());
}

namespace {

bool same_key_set(const TensorDictImpl& first, const TensorDictImpl& other) {
  // Same size and every key of the first found: the same key set.
  if (other.nodes().size() != first.nodes().size()) {
    return false;
  }
  size_t pos = 0;
  for (const auto& node : first.nodes()) {
    if (find_matching(other, node->key, pos++) == nullptr) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool same_keys(c10::ArrayRef<const TensorDictImpl*> dicts) noexcept {
  for (size_t i = 1; i < dicts.size(); ++i) {
    if (!same_key_set(*dicts[0], *dicts[i])) {
      return false;
    }
  }
  return true;
}

void check_same_keys(
    c10::ArrayRef<const TensorDictImpl*> dicts, const KeyPath& path) {
  const TensorDictImpl& first = *dicts[0];
  for (size_t i = 1; i < dicts.size(); ++i) {
    const TensorDictImpl& other = *dicts[i];
    if (same_key_set(first, other)) {
      continue;
    }
    KeyPath at = path;
    for (const auto& node : other.nodes()) {
      if (first.find(node->key) == nullptr) {
        at.push(node->key);
        throw_missing_key(first, node->key, at.key());
      }
    }
    for (const auto& node : first.nodes()) {
      if (other.find(node->key) == nullptr) {
        at.push(node->key);
        throw_missing_key(other, node->key, at.key());
      }
    }
  }
}

void match_same_keys(
    c10::ArrayRef<const TensorDictImpl*> dicts,
    const KeyPath& path,
    c10::SmallVectorImpl<const Node*>& matches) {
  const auto first = dicts[0]->nodes();
  const size_t n = dicts.size();
  const auto mismatch = [&] {
    check_same_keys(dicts, path);  // throws the KeyError
    TORCH_INTERNAL_ASSERT(false, "match_same_keys: the key sets agree");
  };
  matches.resize_for_overwrite(first.size() * (n - 1));
  for (size_t i = 1; i < n; ++i) {
    const TensorDictImpl& other = *dicts[i];
    if (other.nodes().size() != first.size()) {
      mismatch();
    }
    // Same size and every key of the first found: the same key set.
    size_t pos = 0;
    for (const auto& node : first) {
      const Node* match = find_matching(other, node->key, pos);
      if (match == nullptr) {
        mismatch();
      }
      matches[pos * (n - 1) + i - 1] = match;
      ++pos;
    }
  }
}

void throw_kind_mismatch(
    const Value& first,
    const Value& other,
    size_t i,
    const KeyPath& path,
    const char* verb) {
  TORCH_CHECK_TYPE(
      false,
      "cannot ",
      verb,
      " entry ",
      path.to_string(),
      ": it is a ",
      first.type_name(),
      " in tensordict 0 and a ",
      other.type_name(),
      " in tensordict ",
      i);
  TORCH_INTERNAL_ASSERT(false);
}

void check_same_kind(
    c10::ArrayRef<const Value*> values, const KeyPath& path, const char* verb) {
  const Value& first = *values[0];
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i] != nullptr && !same_kind(first, *values[i])) {
      throw_kind_mismatch(first, *values[i], i, path, verb);
    }
  }
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
