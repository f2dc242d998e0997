#pragma once

// The leaf-walking engine: most TensorDict operations are "do X to every
// tensor and rebuild the same structure". Write that walk once, here.

#include <optional>

#include "detail/tensor_dict_impl.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

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
  const TensorDictImpl& src = *td.unsafeGetImpl();
  TensorDict result = make_tensordict(
      src.batch_size, device ? device : src.device, src.names);
  TensorDictImpl& dst = *result.unsafeGetImpl();
  for (const auto& node : src.nodes()) {
    const Value& v = node->value;
    switch (v.kind()) {
      case Value::Kind::kTensor: {
        at::Tensor out = fn(v.tensor());
        if (out.defined()) {
          dst.append(node->key, Value(std::move(out)));
        }
        break;
      }
      case Value::Kind::kTensorDict:
        dst.append(node->key, Value(map_entries(v.tensordict(), fn, device)));
        break;
      case Value::Kind::kNonTensorData: {
        NonTensorData data = v.non_tensor_data();
        if (device) {
          data.set_device(device);
        }
        dst.append(node->key, Value(std::move(data)));
        break;
      }
      case Value::Kind::kNonTensorStack: {
        NonTensorStack stack = v.non_tensor_stack();
        if (device) {
          stack.set_device(device);
        }
        dst.append(node->key, Value(std::move(stack)));
        break;
      }
    }
  }
  return result;
}

/// Calls `fn(key, value)` for every entry, depth first, in the order of
/// Python's `keys(include_nested=True)`: a nested dict's entries come right
/// before the dict itself.
template <typename Fn>
void for_each_nested(
    const TensorDict& td,
    const std::optional<NestedKey>& prefix,
    Fn&& fn) {
  for (const auto& node : td.unsafeGetImpl()->nodes()) {
    NestedKey key =
        prefix ? prefix->child(node->key) : NestedKey(std::string_view(node->key));
    if (node->value.is_tensordict()) {
      for_each_nested(node->value.tensordict(), key, fn);
    }
    fn(key, node->value);
  }
}

} // namespace detail
TENSORDICT_END_NAMESPACE

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Walks `a` and `b` together, matching entries by key, and builds a dict
/// shaped like `a`: tensors become `on_tensors(ta, tb)`, non-tensor values
/// `on_non_tensors(va, vb, batch_size)`. Throws KeyError naming the first
/// key present in one dict only, TypeError when kinds differ.
template <typename TensorFn, typename NonTensorFn>
TensorDict zip_entries(
    const TensorDict& a,
    const TensorDict& b,
    TensorFn&& on_tensors,
    NonTensorFn&& on_non_tensors,
    const std::optional<NestedKey>& prefix = std::nullopt) {
  const TensorDictImpl& ia = *a.unsafeGetImpl();
  const TensorDictImpl& ib = *b.unsafeGetImpl();
  auto full_key = [&](const std::string& k) {
    return prefix ? prefix->child(k) : NestedKey(std::string_view(k));
  };
  for (const auto& node : ib.nodes()) {
    if (ia.find(node->key) == nullptr) {
      throw_missing_key(ia, node->key, full_key(node->key));
    }
  }
  TensorDict result = empty_like(a);
  TensorDictImpl& dst = *result.unsafeGetImpl();
  for (const auto& node : ia.nodes()) {
    const Node* other = ib.find(node->key);
    if (other == nullptr) {
      throw_missing_key(ib, node->key, full_key(node->key));
    }
    const Value& va = node->value;
    const Value& vb = other->value;
    const bool same_kind = va.kind() == vb.kind() ||
        (va.is_non_tensor() && vb.is_non_tensor());
    TORCH_CHECK_TYPE(
        same_kind,
        "cannot compare entry ",
        full_key(node->key).to_string(),
        ": it is a ",
        va.type_name(),
        " in one TensorDict and a ",
        vb.type_name(),
        " in the other");
    if (va.is_tensor()) {
      dst.append(node->key, Value(on_tensors(va.tensor(), vb.tensor())));
    } else if (va.is_tensordict()) {
      dst.append(
          node->key,
          Value(zip_entries(
              va.tensordict(),
              vb.tensordict(),
              on_tensors,
              on_non_tensors,
              full_key(node->key))));
    } else {
      dst.append(
          node->key, Value(on_non_tensors(va, vb, va.shape())));
    }
  }
  return result;
}

/// Calls `fn(tensor)` on every tensor, nested ones too, until it returns
/// false; returns false if it did.
template <typename Fn>
bool all_tensors(const TensorDict& td, Fn&& fn) {
  for (const auto& node : td.unsafeGetImpl()->nodes()) {
    const Value& v = node->value;
    if (v.is_tensor() && !fn(v.tensor())) {
      return false;
    }
    if (v.is_tensordict() && !all_tensors(v.tensordict(), fn)) {
      return false;
    }
  }
  return true;
}

} // namespace detail
TENSORDICT_END_NAMESPACE
