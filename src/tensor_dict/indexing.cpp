// Indexing over the batch dims: index, index_put_ (with lazy
// preallocation), where, masked_fill, masked_select, gather, pad.

#include "tensordict/indexing.h"

#include <ATen/ops/aminmax.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/full.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include "core/batch_index.h"
#include "tensor_dict/batch_transform.h"
#include "tensor_dict/fast_view.h"
#include "tensordict/errors.h"
#include "tensordict/json.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE

using at::indexing::TensorIndex;

namespace detail {

// See NOTE [Batch-dim indices] in core/batch_index.h.
int64_t consumed_dims(const TensorIndex& index) {
  if (index.is_integer() || index.is_slice()) {
    return 1;
  }
  if (index.is_tensor()) {
    // A bool mask covers as many dims as it has: none for a 0-dim one,
    // which adds a dim of size 1 (true) or 0 (false), as torch does.
    const at::Tensor& t = index.tensor();
    return t.scalar_type() == at::kBool ? t.dim() : 1;
  }
  return 0;  // None, Ellipsis, bool
}

NormalizedIndex normalize_index(
    c10::ArrayRef<TensorIndex> indices,
    c10::IntArrayRef batch_size,
    const DimNames& names,
    const char* owner) {
  const int64_t ndim = static_cast<int64_t>(batch_size.size());
  int64_t consumed = 0;
  int64_t ellipses = 0;
  int64_t tensors = 0;
  for (const TensorIndex& index : indices) {
    consumed += consumed_dims(index);
    ellipses += index.is_ellipsis();
    tensors += index.is_tensor();
  }
  TORCH_CHECK_INDEX(
      ellipses <= 1, "an index can only have a single ellipsis ('...')");
  TORCH_CHECK_INDEX(
      consumed <= ndim,
      "too many indices for tensor of dimension ",
      ndim,
      " (the ",
      owner,
      "'s batch dims are ",
      size_repr(batch_size),
      ")");
  NormalizedIndex out;
  out.indices.reserve(indices.size() + ndim);
  const bool named = !names.empty();
  int64_t dim = 0;
  // torch moves the dims of several advanced indices around; names then
  // cannot follow, so they are dropped.
  const bool keep_names = named && tensors <= 1;
  for (const TensorIndex& index : indices) {
    if (index.is_ellipsis()) {
      for (int64_t k = 0; k < ndim - consumed; ++k, ++dim) {
        out.indices.emplace_back(at::indexing::Slice());
        out.names.push_back(keep_names ? names[dim] : std::nullopt);
      }
      continue;
    }
    out.indices.push_back(index);
    if (index.is_integer()) {
      ++dim;
    } else if (index.is_slice()) {
      out.names.push_back(keep_names ? names[dim] : std::nullopt);
      ++dim;
    } else if (index.is_none() || index.is_boolean()) {
      out.names.emplace_back(std::nullopt);
    } else if (index.is_tensor()) {
      const at::Tensor& t = index.tensor();
      const int64_t used = consumed_dims(index);
      if (t.scalar_type() == at::kBool) {
        // A mask over one dim keeps that dim's name, as in Python.
        out.names.push_back(
            keep_names && used == 1 ? names[dim] : std::nullopt);
      } else {
        for (int64_t k = 0; k < t.dim(); ++k) {
          out.names.push_back(
              keep_names && t.dim() == 1 ? names[dim] : std::nullopt);
        }
      }
      dim += used;
    }
  }
  // Dims after the last index are kept whole.
  for (; dim < ndim; ++dim) {
    out.names.push_back(keep_names ? names[dim] : std::nullopt);
  }
  if (std::none_of(out.names.begin(), out.names.end(), [](const auto& n) {
        return n.has_value();
      })) {
    out.names.clear();
  }
  return out;
}

NormalizedIndex normalize_index(
    c10::ArrayRef<TensorIndex> indices, const TensorDictImpl& impl) {
  return normalize_index(indices, impl.batch_size, impl.names, "TensorDict");
}

namespace {

// The batch size the index gives, computed on a stand-in tensor of the
// batch shape whose storage is a single element (indexing it costs what the
// index itself costs, not what the batch holds).
std::vector<int64_t> indexed_batch_size(
    const TensorDictImpl& impl, c10::ArrayRef<TensorIndex> indices) {
  const at::Tensor proxy = at::zeros({}, at::TensorOptions().dtype(at::kByte))
                               .expand(impl.batch_size);
  return proxy.index(indices).sizes().vec();
}

}  // namespace
}  // namespace detail

namespace {

// Returns the index tensor when `indices` only picks rows of the first batch
// dim with in-range integers (a gather), else an undefined tensor. Such an
// index is served by index_select, which copies whole rows where advanced
// indexing copies element by element (many times slower on wide leaves);
// the results are equal. Negative or out-of-range indices take the general
// path, which wraps them or raises Python's IndexError.
at::Tensor gather_rows(
    c10::ArrayRef<TensorIndex> indices, c10::IntArrayRef batch_size) {
  if (indices.size() != 1 || !indices[0].is_tensor() || batch_size.empty()) {
    return {};
  }
  const at::Tensor& index = indices[0].tensor();
  const auto dtype = index.scalar_type();
  if (index.dim() != 1 || (dtype != at::kLong && dtype != at::kInt)) {
    return {};
  }
  if (index.numel() > 0) {
    const auto [lo, hi] = at::aminmax(index);
    if (lo.item<int64_t>() < 0 || hi.item<int64_t>() >= batch_size[0]) {
      return {};
    }
  }
  return index;
}

}  // namespace

TensorDict TensorDict::index(c10::ArrayRef<TensorIndex> indices) const {
  const detail::TensorDictImpl& impl = *impl_;
  detail::NormalizedIndex norm = detail::normalize_index(indices, impl);
  // Integers, slices and None: the batch size follows from the index alone,
  // and leaves are views (built directly where NOTE [Fast views] allows).
  if (std::optional<detail::BasicIndex> plan =
          detail::plan_basic_index(norm.indices, impl.batch_size)) {
    const detail::LeafViews views;
    return detail::transform(
        *this,
        [&](const at::Tensor& t) { return views.index(t, *plan); },
        {std::move(plan->batch_size), std::move(norm.names)});
  }
  // The first top-level tensor tells the new batch size for free; the engine
  // then reuses its result instead of indexing it twice.
  const at::Tensor* first = nullptr;
  for (const auto& node : impl.nodes()) {
    if (node->value.is_tensor()) {
      first = &node->value.tensor();
      break;
    }
  }
  detail::BatchChange change;
  at::Tensor first_result;
  change.names = std::move(norm.names);
  const at::Tensor rows = gather_rows(norm.indices, impl.batch_size);
  auto index_leaf = [&](const at::Tensor& t) {
    if (rows.defined() && t.device() == rows.device()) {
      return at::index_select(t, 0, rows);
    }
    return t.index(norm.indices);
  };
  if (first != nullptr) {
    first_result = index_leaf(*first);
    const int64_t feature_dims =
        first->dim() - static_cast<int64_t>(impl.batch_size.size());
    change.batch_size =
        first_result.sizes().slice(0, first_result.dim() - feature_dims).vec();
  } else {
    change.batch_size = detail::indexed_batch_size(impl, norm.indices);
  }
  return detail::transform(
      *this,
      [&](const at::Tensor& t) {
        if (first != nullptr && t.is_same(*first)) {
          return first_result;
        }
        return index_leaf(t);
      },
      change);
}

// --- index_put_
// ----------------------------------------------------------------

namespace {

// Writes `values` (a stack or one value for all) at the indexed positions of
// a non-tensor entry, turning it into a NonTensorStack.
Value write_non_tensor(
    const Value* existing,
    const Value& value,
    c10::IntArrayRef batch_size,
    c10::ArrayRef<TensorIndex> indices,
    std::optional<c10::Device> device,
    const NestedKey& key) {
  if (existing != nullptr && existing->is_non_tensor_data() &&
      value.is_non_tensor_data() &&
      existing->non_tensor_data().data() == value.non_tensor_data().data()) {
    return *existing;  // the same value everywhere: nothing changes
  }
  std::vector<Json> values;
  std::vector<int64_t> shape;
  if (existing == nullptr) {
    shape = batch_size.vec();
    int64_t n = 1;
    for (int64_t s : shape) {
      n *= s;
    }
    values.assign(n, Json());
  } else if (existing->is_non_tensor_data()) {
    shape = existing->shape();
    int64_t n = 1;
    for (int64_t s : shape) {
      n *= s;
    }
    values.assign(n, existing->non_tensor_data().data());
  } else if (existing->is_non_tensor_stack()) {
    shape = existing->shape();
    values = existing->non_tensor_stack().values();
  } else {
    TORCH_CHECK_TYPE(
        false,
        "cannot write non-tensor data into the entry ",
        key.to_string(),
        ", which is a ",
        existing->type_name());
  }
  TORCH_CHECK(
      !shape.empty(),
      "cannot write non-tensor data at an index of ",
      key.to_string(),
      ": the dict has no batch dims");
  NonTensorStack stack(std::move(values), shape, device);
  const at::Tensor positions =
      detail::stack_positions(stack).index(indices).contiguous();
  const int64_t* pos = positions.data_ptr<int64_t>();
  std::vector<Json> out = stack.values();
  if (value.is_non_tensor_data()) {
    for (int64_t i = 0; i < positions.numel(); ++i) {
      out[pos[i]] = value.non_tensor_data().data();
    }
  } else {
    const NonTensorStack& src = value.non_tensor_stack();
    TORCH_CHECK(
        static_cast<int64_t>(src.values().size()) == positions.numel(),
        "cannot write a NonTensorStack of batch size ",
        detail::size_repr(src.batch_size()),
        " into ",
        positions.numel(),
        " elements of ",
        key.to_string());
    for (int64_t i = 0; i < positions.numel(); ++i) {
      out[pos[i]] = src.values()[i];
    }
  }
  return Value(NonTensorStack(std::move(out), shape, device));
}

void index_put_dict(
    TensorDict& dst,
    c10::ArrayRef<TensorIndex> indices,
    const TensorDict& value,
    int64_t value_root_dims,
    detail::KeyPath& path) {
  detail::TensorDictImpl& impl = *dst.unsafeGetImpl();
  for (const auto& node : value.unsafeGetImpl()->nodes()) {
    detail::PathPart part(path, node->key);
    const Value& v = node->value;
    detail::Node* existing = impl.find(node->key);
    switch (v.kind()) {
      case Value::Kind::kTensor: {
        const at::Tensor& t = v.tensor();
        if (existing == nullptr) {
          // Lazy preallocation: zeros of batch size + the value's own dims.
          detail::check_unlocked(impl);
          std::vector<int64_t> shape = impl.batch_size;
          const auto feature =
              t.sizes().slice(std::min<int64_t>(value_root_dims, t.dim()));
          shape.insert(shape.end(), feature.begin(), feature.end());
          at::Tensor fresh = at::zeros(
              shape, t.options().device(impl.device.value_or(t.device())));
          impl.append(node->key, Value(fresh));
          existing = impl.find(node->key);
        }
        TORCH_CHECK_TYPE(
            existing->value.is_tensor(),
            "cannot write a Tensor at an index of ",
            path.to_string(),
            ", which is a ",
            existing->value.type_name());
        at::Tensor dest = existing->value.tensor();
        dest.index_put_(indices, t);
        break;
      }
      case Value::Kind::kTensorDict: {
        if (existing == nullptr) {
          detail::check_unlocked(impl);
          // The nested dict keeps its own extra batch dims.
          const auto& child = *v.tensordict().unsafeGetImpl();
          std::vector<int64_t> shape = impl.batch_size;
          shape.insert(
              shape.end(),
              child.batch_size.begin() +
                  std::min<size_t>(value_root_dims, child.batch_size.size()),
              child.batch_size.end());
          impl.append(
              node->key,
              Value(detail::make_tensordict(shape, impl.device, {})));
          existing = impl.find(node->key);
        }
        TORCH_CHECK_TYPE(
            existing->value.is_tensordict(),
            "cannot write a TensorDict at an index of ",
            path.to_string(),
            ", which is a ",
            existing->value.type_name());
        TensorDict sub = existing->value.tensordict();
        index_put_dict(sub, indices, v.tensordict(), value_root_dims, path);
        break;
      }
      case Value::Kind::kLazyStack:
        TORCH_CHECK_NOT_IMPLEMENTED(
            false,
            "cannot write the lazy stack at ",
            path.to_string(),
            " at an index: write into the elements of the destination "
            "(LazyStackedTensorDict::tensordicts()) instead");
      case Value::Kind::kNonTensorData:
      case Value::Kind::kNonTensorStack: {
        if (existing == nullptr) {
          detail::check_unlocked(impl);
        }
        Value written = write_non_tensor(
            existing ? &existing->value : nullptr,
            v,
            impl.batch_size,
            indices,
            impl.device,
            path.key());
        if (existing == nullptr) {
          impl.append(node->key, std::move(written));
        } else {
          existing->value = std::move(written);
        }
        break;
      }
    }
  }
}

}  // namespace

TensorDict& TensorDict::index_put_(
    c10::ArrayRef<TensorIndex> indices, const TensorDict& value) {
  detail::NormalizedIndex norm = detail::normalize_index(indices, *impl_);
  const std::vector<int64_t> target =
      detail::indexed_batch_size(*impl_, norm.indices);
  // The value must fit the indexed part, as `td[idx] = value` requires.
  const auto vb = value.batch_size();
  const size_t common = std::min(vb.size(), target.size());
  bool fits = true;
  for (size_t i = 0; i < common; ++i) {
    const int64_t a = vb[vb.size() - common + i];
    const int64_t b = target[target.size() - common + i];
    fits = fits && (a == b || a == 1);
  }
  TORCH_CHECK(
      fits && vb.size() <= target.size(),
      "cannot write a TensorDict of batch size ",
      detail::size_repr(vb),
      " into an index of batch size ",
      detail::size_repr(target));
  detail::KeyPath path;
  index_put_dict(
      *this, norm.indices, value, static_cast<int64_t>(vb.size()), path);
  return *this;
}

namespace {

// Writes one value (a scalar or a tensor) at the index of every tensor.
template <typename V>
void index_put_all(
    TensorDict& td, c10::ArrayRef<TensorIndex> indices, const V& value) {
  detail::NormalizedIndex norm =
      detail::normalize_index(indices, *td.unsafeGetImpl());
  detail::all_tensors(td, [&](at::Tensor t) {
    t.index_put_(norm.indices, value);
    return true;
  });
}

}  // namespace

TensorDict& TensorDict::index_put_(
    c10::ArrayRef<TensorIndex> indices, const c10::Scalar& value) {
  index_put_all(*this, indices, value);
  return *this;
}

TensorDict& TensorDict::index_put_(
    c10::ArrayRef<TensorIndex> indices, const at::Tensor& value) {
  index_put_all(*this, indices, value);
  return *this;
}

TensorDict& TensorDict::index_put_(
    c10::ArrayRef<TensorIndex> indices, std::initializer_list<Item> items) {
  detail::NormalizedIndex norm = detail::normalize_index(indices, *impl_);
  const std::vector<int64_t> target =
      detail::indexed_batch_size(*impl_, norm.indices);
  return index_put_(indices, TensorDict(items, target, impl_->device));
}

// --- masks, where, gather, pad -----------------------------------------------

namespace {

// Shapes a batch-shaped tensor (a mask, a condition) to broadcast against a
// leaf: trailing singleton dims for the leaf's feature dims.
at::Tensor expand_to_leaf(
    const at::Tensor& batch_shaped, const at::Tensor& leaf) {
  std::vector<int64_t> shape = batch_shaped.sizes().vec();
  shape.resize(std::max<int64_t>(leaf.dim(), batch_shaped.dim()), 1);
  return batch_shaped.view(shape);
}

void check_batch_shaped(
    const at::Tensor& t, const TensorDict& td, const char* what) {
  TORCH_CHECK(
      t.dim() <= td.batch_dims() &&
          std::equal(
              t.sizes().begin(),
              t.sizes().end(),
              td.batch_size().begin() + (td.batch_dims() - t.dim())),
      what,
      " of shape ",
      detail::size_repr(t.sizes()),
      " does not match the batch size ",
      detail::size_repr(td.batch_size()));
}

}  // namespace

TensorDict TensorDict::where(
    const at::Tensor& condition, const TensorDict& other) const {
  check_batch_shaped(condition, *this, "where: the condition");
  return detail::zip_entries(
      *this,
      other,
      "apply where to",
      [&](const at::Tensor& a, const at::Tensor& b) {
        return at::where(expand_to_leaf(condition, a), a, b);
      },
      [&](const Value& a, const Value&, c10::IntArrayRef) { return a; });
}

TensorDict TensorDict::where(
    const at::Tensor& condition, const c10::Scalar& other) const {
  check_batch_shaped(condition, *this, "where: the condition");
  return detail::map_entries(*this, [&](const at::Tensor& t) {
    return at::where(expand_to_leaf(condition, t), t, other);
  });
}

TensorDict TensorDict::masked_fill(
    const at::Tensor& mask, const c10::Scalar& value) const {
  check_batch_shaped(mask, *this, "masked_fill: the mask");
  return detail::map_entries(*this, [&](const at::Tensor& t) {
    return t.masked_fill(expand_to_leaf(mask, t), value);
  });
}

TensorDict& TensorDict::masked_fill_(
    const at::Tensor& mask, const c10::Scalar& value) {
  check_batch_shaped(mask, *this, "masked_fill_: the mask");
  detail::all_tensors(*this, [&](const at::Tensor& t) {
    t.masked_fill_(expand_to_leaf(mask, t), value);
    return true;
  });
  return *this;
}

TensorDict TensorDict::masked_select(const at::Tensor& mask) const {
  TORCH_CHECK(
      mask.scalar_type() == at::kBool,
      "masked_select: the mask must be a bool tensor, got ",
      detail::dtype_name(mask.scalar_type()));
  TORCH_CHECK(
      mask.sizes() == batch_size(),
      "masked_select: the mask of shape ",
      detail::size_repr(mask.sizes()),
      " does not match the batch size ",
      detail::size_repr(batch_size()));
  return index({mask});
}

TensorDict TensorDict::gather(int64_t dim, const at::Tensor& index) const {
  const int64_t ndim = batch_dims();
  dim = detail::wrap_dim(dim, ndim);
  TORCH_CHECK(
      index.dim() == ndim,
      "gather: the index must have as many dims as the batch (",
      ndim,
      "), got ",
      index.dim());
  detail::BatchChange change{index.sizes().vec(), impl_->names};
  return detail::transform(
      *this,
      [&](const at::Tensor& t) {
        // The index covers the batch dims; feature dims come along whole.
        std::vector<int64_t> shape = index.sizes().vec();
        std::vector<int64_t> view_shape = shape;
        for (int64_t d = ndim; d < t.dim(); ++d) {
          shape.push_back(t.size(d));
          view_shape.push_back(1);
        }
        return at::gather(t, dim, index.view(view_shape).expand(shape));
      },
      change);
}

TensorDict TensorDict::pad(
    c10::IntArrayRef pad_sizes, const c10::Scalar& value) const {
  const int64_t ndim = batch_dims();
  TORCH_CHECK_VALUE(
      pad_sizes.size() % 2 == 0 &&
          static_cast<int64_t>(pad_sizes.size()) <= 2 * ndim,
      "pad: expected an even number of pad sizes, at most two per batch dim "
      "(",
      2 * ndim,
      "), got ",
      pad_sizes.size());
  // pad_sizes lists (before, after) pairs starting at the last batch dim,
  // as torch.nn.functional.pad.
  std::vector<int64_t> batch = impl_->batch_size;
  for (size_t i = 0; i < pad_sizes.size() / 2; ++i) {
    const size_t d = ndim - 1 - i;
    batch[d] += pad_sizes[2 * i] + pad_sizes[2 * i + 1];
    TORCH_CHECK_VALUE(
        batch[d] >= 0, "pad: batch dim ", d, " would have negative size");
  }
  detail::BatchChange change{batch, impl_->names};
  auto pad_with = [&](const at::Tensor& t, const c10::Scalar& fill) {
    std::vector<int64_t> full(2 * (t.dim() - ndim), 0);
    full.insert(full.end(), pad_sizes.begin(), pad_sizes.end());
    return at::constant_pad_nd(t, full, fill);
  };
  // Non-tensor entries hold None in the padded slots, as in Python.
  return detail::transform_filling(
      *this,
      [&](const at::Tensor& t) { return pad_with(t, value); },
      [&](const at::Tensor& positions) { return pad_with(positions, -1); },
      change);
}

TENSORDICT_END_NAMESPACE
