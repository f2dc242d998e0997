#pragma once

// Views of leaves built without ATen's dispatcher when autograd cannot tell
// the difference. See NOTE [Fast views].

#include <ATen/TensorIndexing.h>
#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <optional>
#include <vector>

#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

// NOTE [Fast views]
// A view op in ATen (select, slice, view, unbind...) costs a dispatcher
// call, an autograd view record and a TensorImpl: about 0.7 us, ten times
// the TensorImpl alone. Most batch-dim ops are views of every leaf, so a
// dict of many small leaves pays mostly for that overhead. When autograd
// cannot observe the difference, `LeafViews` builds each view directly: a
// TensorImpl on the leaf's storage, with its dispatch keys and dtype, the
// view's sizes, strides and offset, and the leaf's version counter. That is
// what ATen's own CPU kernels build before the autograd layer records the
// view, so values, geometry, shared storage, in-place writes through either
// tensor and the version counter all behave as ATen's view does.
//
// The rule, checked once per op and then per leaf:
//  - grad mode is off (NoGradGuard, or InferenceMode, which implies it), and
//    the thread adds no dispatch keys (no JIT tracer, functorch transform or
//    Python mode is active: they must see every op);
//  - the leaf is a plain dense CPU tensor: exactly the dispatch keys of one
//    made by at::empty (in or out of inference mode), the base TensorImpl
//    class, no symbolic sizes;
//  - the leaf does not require grad (directly or as a view of a tensor that
//    does) and carries no forward-mode tangent.
// Any other leaf takes ATen's op, as does any op whose arguments ATen would
// reject (an index out of range, a negative step, a shape a view cannot
// take), so errors are ATen's own.
//
// What differs: a directly built view is not an autograd view. `is_view()`
// is false and `_base` is undefined, and ATen's refusal to modify in place,
// with grad mode on, a view created under no_grad (or inference mode) does
// not apply to it; such a write changes the shared data and records history
// on the view alone, never on the leaf. Views of inference tensors are
// inference tensors, as in ATen.

/// The geometry of a strided view: sizes, strides and storage offset.
struct ViewGeometry {
  /// Starts from `t`'s own geometry.
  explicit ViewGeometry(const at::Tensor& t);

  /// Removes dim `dim`, keeping position `index` (in range, non-negative).
  void select(int64_t dim, int64_t index);
  /// Keeps `length` positions of dim `dim` from `start`, `step` apart
  /// (normalized: in range, positive step).
  void narrow(int64_t dim, int64_t start, int64_t length, int64_t step = 1);
  /// Inserts a dim of size 1 before `dim` (0 <= dim <= dims), with ATen's
  /// stride for it.
  void unsqueeze(int64_t dim);
  /// Removes the dims listed in `dims` whose size is 1.
  void squeeze(c10::IntArrayRef dims);
  /// Reorders the first dims.size() dims: new dim i is old dim dims[i].
  void permute_leading(c10::IntArrayRef dims);
  /// Swaps two dims.
  void transpose(int64_t dim0, int64_t dim1);
  /// Broadcasts to `sizes` by ATen's rules; returns false when `sizes` has
  /// fewer dims, throws ATen's error when a non-singleton dim differs.
  bool expand(c10::IntArrayRef sizes);
  /// Takes shape `sizes` (same element count) without copying; returns
  /// false when the strides do not allow it.
  bool view(c10::IntArrayRef sizes);

  c10::SmallVector<int64_t, 6> sizes;
  c10::SmallVector<int64_t, 6> strides;
  int64_t offset;
};

/// One step of an index made only of integers, slices and None over the
/// leading dims (NOTE [Batch-dim indices]), normalized against the batch
/// size: what ATen's indexing does to the geometry.
struct BasicIndexStep {
  enum class Kind { kSelect, kSlice, kNewDim };
  Kind kind;
  int64_t start = 0;   // select: the position; slice: the first one
  int64_t length = 0;  // slice
  int64_t step = 1;    // slice
};

/// A normalized basic index and the batch size it gives.
struct BasicIndex {
  std::vector<BasicIndexStep> steps;
  std::vector<int64_t> batch_size;
};

/// Returns `indices` (already through normalize_index) as geometry steps
/// over `batch_size`, or nothing when an index is not an integer, a slice
/// or None, or when ATen would reject it (out of range, non-positive step,
/// no index at all):
/// ATen's own indexing then serves, and raises its own errors.
std::optional<BasicIndex> plan_basic_index(
    c10::ArrayRef<at::indexing::TensorIndex> indices,
    c10::IntArrayRef batch_size);

/// Makes views of leaves for one batch-dim op: directly, when NOTE [Fast
/// views] allows it for the thread and the leaf, else with ATen's op of the
/// same name. Arguments are the op's, already checked against the batch
/// (wrapped dims, positions in range). Read the thread's state at
/// construction: make one per op, on the thread that runs it.
///
/// Example:
///   const LeafViews views;
///   at::Tensor row = views.select(leaf, /*dim=*/0, /*index=*/3);
class LeafViews {
 public:
  /// Reads grad mode and the thread's dispatch state.
  LeafViews();

  /// Returns whether a view of `t` would be built directly.
  bool direct(const at::Tensor& t) const;

  /// Returns `t.select(dim, index)`.
  at::Tensor select(const at::Tensor& t, int64_t dim, int64_t index) const;
  /// Returns `t.narrow(dim, start, length)`.
  at::Tensor narrow(
      const at::Tensor& t, int64_t dim, int64_t start, int64_t length) const;
  /// Returns what `t.index(indices)` gives for the index `plan` was made
  /// from (with ATen's select/slice/unsqueeze calls when not directly).
  at::Tensor index(const at::Tensor& t, const BasicIndex& plan) const;
  /// Returns `t.unsqueeze(dim)`.
  at::Tensor unsqueeze(const at::Tensor& t, int64_t dim) const;
  /// Returns `t.squeeze(dims)`.
  at::Tensor squeeze(const at::Tensor& t, c10::IntArrayRef dims) const;
  /// Returns `t.permute(dims + the rest in order)`: `dims` reorders the
  /// leading dims only.
  at::Tensor permute_leading(const at::Tensor& t, c10::IntArrayRef dims) const;
  /// Returns `t.transpose(dim0, dim1)`.
  at::Tensor transpose(const at::Tensor& t, int64_t dim0, int64_t dim1) const;
  /// Returns `t.expand(sizes)`.
  at::Tensor expand(const at::Tensor& t, c10::IntArrayRef sizes) const;
  /// Returns `t.view(sizes)`.
  at::Tensor view(const at::Tensor& t, c10::IntArrayRef sizes) const;
  /// Returns `t.reshape(sizes)`: a view when the strides allow, else a copy.
  at::Tensor reshape(const at::Tensor& t, c10::IntArrayRef sizes) const;
  /// Returns `t.unbind(dim)`.
  std::vector<at::Tensor> unbind(const at::Tensor& t, int64_t dim) const;
  /// Returns `t.split_with_sizes(sizes, dim)`.
  std::vector<at::Tensor> split_with_sizes(
      const at::Tensor& t, c10::IntArrayRef sizes, int64_t dim) const;

 private:
  bool enabled_;
};

/// Returns a tensor on `base`'s storage with geometry `g`, sharing its
/// version counter: a view that autograd does not know about. See NOTE
/// [Fast views] for when that is allowed.
at::Tensor make_direct_view(const at::Tensor& base, const ViewGeometry& g);

}  // namespace detail
TENSORDICT_END_NAMESPACE
