#pragma once

// The leaf-walking engine: most TensorDict operations are "do X to every
// tensor and rebuild the same structure". Write that walk once, here.

#include <optional>
#include <type_traits>

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
  dst.reserve(src.nodes().size());
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
/// key present in one dict only, TypeError when kinds differ ("cannot
/// <verb> entry 'x': ...", so `verb` says what the caller was doing:
/// "compare", "add", ...).
template <typename TensorFn, typename NonTensorFn>
TensorDict zip_entries(
    const TensorDict& a,
    const TensorDict& b,
    const char* verb,
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
        "cannot ",
        verb,
        " entry ",
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
              verb,
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

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// How a batch-dim op reshapes one dict: the root's new batch size and
/// names. Nested dicts keep their extra batch dims after these.
struct BatchChange {
  std::vector<int64_t> batch_size;
  DimNames names; // empty = no names
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
    const TensorDict& td,
    Fn&& fn,
    const std::vector<BatchChange>& changes);

// --- implementation ------------------------------------------------------------

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
        dst.append(node->key, Value(fn(v.tensor())));
        break;
      case Value::Kind::kTensorDict: {
        const TensorDictImpl& child = *v.tensordict().unsafeGetImpl();
        BatchChange change = carry_change(
            root_change, child.batch_size, child.names, root_dims);
        TensorDict out = make_tensordict(
            std::move(change.batch_size), child.device, std::move(change.names));
        transform_into(
            *out.unsafeGetImpl(),
            child,
            fn,
            on_positions,
            root_change,
            root_dims);
        dst.append(node->key, Value(std::move(out)));
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
        dst.append(node->key, Value(std::move(moved)));
        break;
      }
      case Value::Kind::kNonTensorStack: {
        const NonTensorStack& stack = v.non_tensor_stack();
        at::Tensor positions = on_positions != nullptr
            ? (*on_positions)(stack_positions(stack))
            : fn(stack_positions(stack));
        dst.append(node->key, gather_stack(stack, positions, stack.device()));
        break;
      }
    }
  }
}

template <typename Fn>
TensorDict transform(const TensorDict& td, Fn&& fn, const BatchChange& change) {
  const TensorDictImpl& src = *td.unsafeGetImpl();
  TensorDict result = make_tensordict(change.batch_size, src.device, change.names);
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
          dsts[i]->append(node->key, Value(std::move(pieces[i])));
        }
        break;
      }
      case Value::Kind::kTensorDict: {
        const TensorDictImpl& child = *v.tensordict().unsafeGetImpl();
        std::vector<TensorDictImpl*> child_dsts;
        for (size_t i = 0; i < n; ++i) {
          BatchChange change =
              carry_change(changes[i], child.batch_size, child.names, root_dims);
          TensorDict out = make_tensordict(
              std::move(change.batch_size), child.device, std::move(change.names));
          child_dsts.push_back(out.unsafeGetImpl());
          dsts[i]->append(node->key, Value(std::move(out)));
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
          dsts[i]->append(node->key, Value(std::move(data)));
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
    }
  }
}

template <typename Fn>
std::vector<TensorDict> transform_split(
    const TensorDict& td,
    Fn&& fn,
    const std::vector<BatchChange>& changes) {
  const TensorDictImpl& src = *td.unsafeGetImpl();
  std::vector<TensorDict> results;
  std::vector<TensorDictImpl*> dsts;
  results.reserve(changes.size());
  for (const BatchChange& change : changes) {
    results.push_back(make_tensordict(change.batch_size, src.device, change.names));
    dsts.push_back(results.back().unsafeGetImpl());
  }
  transform_split_into(dsts, src, fn, changes, src.batch_size.size());
  return results;
}

} // namespace detail
TENSORDICT_END_NAMESPACE
