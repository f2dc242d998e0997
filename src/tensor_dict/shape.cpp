// Shape ops over the batch dims. Each computes the new batch size and names
// and hands a per-leaf op to the engine (detail::transform), which carries
// feature dims and nested dicts' extra batch dims along.

#include <ATen/InferSize.h>
#include <ATen/WrapDimUtils.h>
#include <c10/util/SmallVector.h>

#include <numeric>

#include "tensor_dict/batch_transform.h"
#include "tensor_dict/fast_view.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE

using detail::wrap_dim;

namespace {

// The leaf's shape with its first `batch_dims` dims replaced by `batch`.
// Inline storage: no heap allocation per leaf for the usual ranks.
c10::SmallVector<int64_t, 8> leaf_shape(
    const at::Tensor& t, c10::IntArrayRef batch, int64_t batch_dims) {
  c10::SmallVector<int64_t, 8> shape(batch.begin(), batch.end());
  const auto sizes = t.sizes();
  shape.insert(shape.end(), sizes.begin() + batch_dims, sizes.end());
  return shape;
}

DimNames no_names() {
  return {};
}

// Names after an op that keeps dim i at position order[i] (-1 = new dim).
DimNames reorder_names(const DimNames& names, c10::IntArrayRef order) {
  if (names.empty()) {
    return {};
  }
  DimNames out;
  for (int64_t src : order) {
    out.push_back(src < 0 ? std::nullopt : names[src]);
  }
  return out;
}

}  // namespace

TensorDict TensorDict::view(c10::IntArrayRef shape) const {
  const std::vector<int64_t> batch = at::infer_size(shape, numel());
  const int64_t ndim = batch_dims();
  const detail::LeafViews views;
  if (batch == impl_->batch_size) {
    return detail::transform(
        *this,
        [&](const at::Tensor& t) { return views.view(t, t.sizes()); },
        {batch, impl_->names});
  }
  return detail::transform(
      *this,
      [&](const at::Tensor& t) {
        return views.view(t, leaf_shape(t, batch, ndim));
      },
      {batch, no_names()});
}

TensorDict TensorDict::reshape(c10::IntArrayRef shape) const {
  const std::vector<int64_t> batch = at::infer_size(shape, numel());
  const int64_t ndim = batch_dims();
  const detail::LeafViews views;
  return detail::transform(
      *this,
      [&](const at::Tensor& t) {
        return views.reshape(t, leaf_shape(t, batch, ndim));
      },
      {batch, batch == impl_->batch_size ? impl_->names : no_names()});
}

TensorDict TensorDict::flatten(int64_t start_dim, int64_t end_dim) const {
  const int64_t ndim = batch_dims();
  if (ndim == 0) {
    return unsqueeze(0);
  }
  start_dim = wrap_dim(start_dim, ndim);
  end_dim = wrap_dim(end_dim, ndim);
  TORCH_CHECK_INDEX(
      start_dim <= end_dim,
      "flatten() has invalid args: start_dim cannot come after end_dim");
  std::vector<int64_t> batch(
      impl_->batch_size.begin(), impl_->batch_size.begin() + start_dim);
  batch.push_back(std::accumulate(
      impl_->batch_size.begin() + start_dim,
      impl_->batch_size.begin() + end_dim + 1,
      int64_t{1},
      std::multiplies<>()));
  batch.insert(
      batch.end(),
      impl_->batch_size.begin() + end_dim + 1,
      impl_->batch_size.end());
  DimNames names;
  if (!impl_->names.empty()) {
    names.assign(impl_->names.begin(), impl_->names.begin() + start_dim);
    names.emplace_back(
        start_dim == end_dim ? impl_->names[start_dim] : std::nullopt);
    names.insert(
        names.end(), impl_->names.begin() + end_dim + 1, impl_->names.end());
  }
  return detail::transform(
      *this,
      [&](const at::Tensor& t) { return t.flatten(start_dim, end_dim); },
      {batch, names});
}

TensorDict TensorDict::unflatten(int64_t dim, c10::IntArrayRef sizes) const {
  const int64_t ndim = batch_dims();
  dim = wrap_dim(dim, ndim);
  const std::vector<int64_t> inner =
      at::infer_size(sizes, impl_->batch_size[dim]);
  std::vector<int64_t> batch(
      impl_->batch_size.begin(), impl_->batch_size.begin() + dim);
  batch.insert(batch.end(), inner.begin(), inner.end());
  batch.insert(
      batch.end(),
      impl_->batch_size.begin() + dim + 1,
      impl_->batch_size.end());
  DimNames names;
  if (!impl_->names.empty()) {
    names.assign(impl_->names.begin(), impl_->names.begin() + dim);
    names.resize(names.size() + inner.size());
    names.insert(
        names.end(), impl_->names.begin() + dim + 1, impl_->names.end());
  }
  return detail::transform(
      *this,
      [&](const at::Tensor& t) { return t.unflatten(dim, inner); },
      {batch, names});
}

TensorDict TensorDict::squeeze() const {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < batch_dims(); ++d) {
    if (impl_->batch_size[d] == 1) {
      dims.push_back(d);
    }
  }
  std::vector<int64_t> batch;
  std::vector<int64_t> order;
  for (int64_t d = 0; d < batch_dims(); ++d) {
    if (impl_->batch_size[d] != 1) {
      batch.push_back(impl_->batch_size[d]);
      order.push_back(d);
    }
  }
  const detail::LeafViews views;
  return detail::transform(
      *this,
      [&](const at::Tensor& t) { return views.squeeze(t, dims); },
      {batch, reorder_names(impl_->names, order)});
}

TensorDict TensorDict::squeeze(int64_t dim) const {
  const int64_t ndim = batch_dims();
  dim = wrap_dim(dim, ndim);
  if (impl_->batch_size[dim] != 1) {
    return view(impl_->batch_size);
  }
  std::vector<int64_t> batch = impl_->batch_size;
  batch.erase(batch.begin() + dim);
  std::vector<int64_t> order(ndim);
  std::iota(order.begin(), order.end(), 0);
  order.erase(order.begin() + dim);
  const detail::LeafViews views;
  return detail::transform(
      *this,
      [&](const at::Tensor& t) { return views.squeeze(t, dim); },
      {batch, reorder_names(impl_->names, order)});
}

TensorDict TensorDict::unsqueeze(int64_t dim) const {
  const int64_t ndim = batch_dims();
  dim = wrap_dim(dim, ndim + 1);
  std::vector<int64_t> batch = impl_->batch_size;
  batch.insert(batch.begin() + dim, 1);
  std::vector<int64_t> order(ndim);
  std::iota(order.begin(), order.end(), 0);
  order.insert(order.begin() + dim, -1);
  const detail::LeafViews views;
  return detail::transform(
      *this,
      [&](const at::Tensor& t) { return views.unsqueeze(t, dim); },
      {batch, reorder_names(impl_->names, order)});
}

TensorDict TensorDict::permute(c10::IntArrayRef dims) const {
  const int64_t ndim = batch_dims();
  TORCH_CHECK_VALUE(
      static_cast<int64_t>(dims.size()) == ndim,
      "permute: expected ",
      ndim,
      " dims (one per batch dim), got ",
      dims.size());
  std::vector<int64_t> order;
  std::vector<bool> seen(ndim, false);
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, ndim);
    TORCH_CHECK_VALUE(!seen[w], "permute: repeated dim ", d);
    seen[w] = true;
    order.push_back(w);
  }
  std::vector<int64_t> batch;
  for (int64_t d : order) {
    batch.push_back(impl_->batch_size[d]);
  }
  const detail::LeafViews views;
  return detail::transform(
      *this,
      [&](const at::Tensor& t) { return views.permute_leading(t, order); },
      {batch, reorder_names(impl_->names, order)});
}

TensorDict TensorDict::transpose(int64_t dim0, int64_t dim1) const {
  const int64_t ndim = batch_dims();
  dim0 = wrap_dim(dim0, ndim);
  dim1 = wrap_dim(dim1, ndim);
  std::vector<int64_t> order(ndim);
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[dim0], order[dim1]);
  std::vector<int64_t> batch = impl_->batch_size;
  std::swap(batch[dim0], batch[dim1]);
  const detail::LeafViews views;
  return detail::transform(
      *this,
      [&](const at::Tensor& t) { return views.transpose(t, dim0, dim1); },
      {batch, reorder_names(impl_->names, order)});
}

TensorDict TensorDict::expand(c10::IntArrayRef shape) const {
  const int64_t ndim = batch_dims();
  const int64_t new_dims = static_cast<int64_t>(shape.size());
  TORCH_CHECK_VALUE(
      new_dims >= ndim,
      "expand: the new batch size ",
      detail::size_repr(shape),
      " has fewer dims than the batch size ",
      detail::size_repr(impl_->batch_size));
  std::vector<int64_t> batch(shape.begin(), shape.end());
  for (int64_t i = 0; i < ndim; ++i) {
    const int64_t old = impl_->batch_size[i];
    int64_t& target = batch[new_dims - ndim + i];
    if (target == -1) {
      target = old;
    }
    TORCH_CHECK(
        old == target || old == 1,
        "expand: the batch size ",
        detail::size_repr(impl_->batch_size),
        " cannot be expanded to ",
        detail::size_repr(shape));
  }
  std::vector<int64_t> order(new_dims - ndim, -1);
  for (int64_t i = 0; i < ndim; ++i) {
    order.push_back(i);
  }
  const detail::LeafViews views;
  return detail::transform(
      *this,
      [&](const at::Tensor& t) {
        // New leading dims go before the leaf; its own dims stay as they
        // are, broadcast where the batch grows.
        return views.expand(t, leaf_shape(t, batch, ndim));
      },
      {batch, reorder_names(impl_->names, order)});
}

TensorDict TensorDict::expand_as(const TensorDict& other) const {
  return expand(other.batch_size());
}

TensorDict TensorDict::broadcast_to(c10::IntArrayRef shape) const {
  return expand(shape);
}

TensorDict TensorDict::repeat(c10::IntArrayRef repeats) const {
  const int64_t ndim = batch_dims();
  TORCH_CHECK_VALUE(
      static_cast<int64_t>(repeats.size()) == ndim,
      "repeat: expected ",
      ndim,
      " repeat counts (one per batch dim), got ",
      repeats.size());
  std::vector<int64_t> batch = impl_->batch_size;
  for (int64_t i = 0; i < ndim; ++i) {
    batch[i] *= repeats[i];
  }
  return detail::transform(
      *this,
      [&](const at::Tensor& t) {
        std::vector<int64_t> full(repeats.begin(), repeats.end());
        full.resize(t.dim(), 1);
        return t.repeat(full);
      },
      {batch, impl_->names});
}

TensorDict TensorDict::repeat_interleave(int64_t repeats, int64_t dim) const {
  dim = wrap_dim(dim, batch_dims());
  std::vector<int64_t> batch = impl_->batch_size;
  batch[dim] *= repeats;
  return detail::transform(
      *this,
      [&](const at::Tensor& t) { return t.repeat_interleave(repeats, dim); },
      {batch, impl_->names});
}

TensorDict TensorDict::flip(c10::IntArrayRef dims) const {
  std::vector<int64_t> wrapped;
  for (int64_t d : dims) {
    wrapped.push_back(wrap_dim(d, batch_dims()));
  }
  return detail::transform(
      *this,
      [&](const at::Tensor& t) { return t.flip(wrapped); },
      {impl_->batch_size, impl_->names});
}

TensorDict TensorDict::roll(
    c10::IntArrayRef shifts, c10::IntArrayRef dims) const {
  TORCH_CHECK_VALUE(
      !dims.empty() && shifts.size() == dims.size(),
      "roll: expected as many shifts as dims (and at least one dim: rolling "
      "the flattened batch is not defined for a TensorDict), got ",
      shifts.size(),
      " shifts and ",
      dims.size(),
      " dims");
  std::vector<int64_t> wrapped;
  for (int64_t d : dims) {
    wrapped.push_back(wrap_dim(d, batch_dims()));
  }
  return detail::transform(
      *this,
      [&](const at::Tensor& t) { return t.roll(shifts, wrapped); },
      {impl_->batch_size, impl_->names});
}

TensorDict TensorDict::narrow(
    int64_t dim, int64_t start, int64_t length) const {
  dim = wrap_dim(dim, batch_dims());
  const int64_t size = impl_->batch_size[dim];
  if (start < 0) {
    start += size;
  }
  TORCH_CHECK_INDEX(
      start >= 0 && length >= 0 && start + length <= size,
      "narrow: start (",
      start,
      ") + length (",
      length,
      ") exceeds dimension size (",
      size,
      ")");
  std::vector<int64_t> batch = impl_->batch_size;
  batch[dim] = length;
  const detail::LeafViews views;
  return detail::transform(
      *this,
      [&](const at::Tensor& t) { return views.narrow(t, dim, start, length); },
      {batch, impl_->names});
}

// --- splitting
// ------------------------------------------------------------------

namespace {

std::vector<detail::BatchChange> split_changes(
    const detail::TensorDictImpl& impl,
    int64_t dim,
    c10::IntArrayRef sizes,
    bool drop_dim) {
  std::vector<detail::BatchChange> changes;
  for (int64_t s : sizes) {
    detail::BatchChange change{impl.batch_size, impl.names};
    if (drop_dim) {
      change.batch_size.erase(change.batch_size.begin() + dim);
      if (!change.names.empty()) {
        change.names.erase(change.names.begin() + dim);
        if (std::none_of(
                change.names.begin(), change.names.end(), [](const auto& n) {
                  return n.has_value();
                })) {
          change.names.clear();
        }
      }
    } else {
      change.batch_size[dim] = s;
    }
    changes.push_back(std::move(change));
  }
  return changes;
}

}  // namespace

std::vector<TensorDict> TensorDict::unbind(int64_t dim) const {
  dim = wrap_dim(dim, batch_dims());
  const std::vector<int64_t> ones(impl_->batch_size[dim], 1);
  const detail::LeafViews views;
  return detail::transform_split(
      *this,
      [&](const at::Tensor& t) { return views.unbind(t, dim); },
      split_changes(*impl_, dim, ones, /*drop_dim=*/true));
}

std::vector<TensorDict> TensorDict::split(
    c10::IntArrayRef split_sizes, int64_t dim) const {
  dim = wrap_dim(dim, batch_dims());
  const int64_t total =
      std::accumulate(split_sizes.begin(), split_sizes.end(), int64_t{0});
  TORCH_CHECK_VALUE(
      total == impl_->batch_size[dim],
      "split: the sizes ",
      c10::str(split_sizes),
      " add up to ",
      total,
      ", but batch dim ",
      dim,
      " has size ",
      impl_->batch_size[dim]);
  const detail::LeafViews views;
  return detail::transform_split(
      *this,
      [&](const at::Tensor& t) {
        return views.split_with_sizes(t, split_sizes, dim);
      },
      split_changes(*impl_, dim, split_sizes, /*drop_dim=*/false));
}

std::vector<TensorDict> TensorDict::split(
    int64_t split_size, int64_t dim) const {
  TORCH_CHECK_VALUE(
      split_size > 0, "split: split_size must be positive, got ", split_size);
  dim = wrap_dim(dim, batch_dims());
  std::vector<int64_t> sizes;
  for (int64_t left = impl_->batch_size[dim]; left > 0; left -= split_size) {
    sizes.push_back(std::min(left, split_size));
  }
  if (sizes.empty()) {
    sizes.push_back(0);  // torch gives one empty piece for an empty dim
  }
  return split(sizes, dim);
}

std::vector<TensorDict> TensorDict::chunk(int64_t chunks, int64_t dim) const {
  TORCH_CHECK_VALUE(
      chunks > 0, "chunk: expected a positive number of chunks, got ", chunks);
  dim = wrap_dim(dim, batch_dims());
  const int64_t size = impl_->batch_size[dim];
  const int64_t split_size = std::max<int64_t>((size + chunks - 1) / chunks, 1);
  return split(split_size, dim);
}

TENSORDICT_END_NAMESPACE
