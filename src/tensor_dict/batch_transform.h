#pragma once

// The batch-dim ops' rebuild: every entry of a dict through one op over its
// batch dims (reshape, permute, index, unbind, pad, ...), with nested dicts,
// non-tensor values and lazy stacks carried along. A client of the walk
// engine (core/walk.h), used by the shape, indexing and reduction ops.

#include <c10/util/ArrayRef.h>

#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/walk.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

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

// The twin of `transform_into` for N pieces. Kept apart rather than one
// body over N destinations because `transform` (reshape, index, permute)
// is the hot path: it builds each entry once, with no vector of
// destinations and no vector of pieces per leaf.
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
