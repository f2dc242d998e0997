// Reductions over the batch dims (or every element of each leaf), and
// Python's reduce=True across all leaves. One leaf function, `reduce_leaf`,
// does the tensor work for every op; the batch-dim case goes through the
// engine's detail::transform.

#include <ATen/ops/cat.h>
#include <ATen/ops/max.h>
#include <ATen/ops/min.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string_view>

#include "tensor_dict/batch_transform.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

// Python's name of each ReduceOp, in the enum's order: messages print it,
// and each TENSORDICT_DICT_REDUCE_OPS member finds its op by it, so the two
// cannot disagree. An op added past kAny fails op_name's assert.
constexpr std::array<const char*, 11> kReduceOpNames = {
    "sum",
    "mean",
    "std",
    "var",
    "prod",
    "amax",
    "amin",
    "max",
    "min",
    "all",
    "any"};
static_assert(
    static_cast<size_t>(ReduceOp::kAny) + 1 == kReduceOpNames.size(),
    "one name per ReduceOp");

const char* op_name(ReduceOp op) {
  const auto index = static_cast<size_t>(op);
  TORCH_INTERNAL_ASSERT(index < kReduceOpNames.size(), "unknown ReduceOp");
  return kReduceOpNames[index];
}

// Reduces `t` over `dims` (sorted, non-negative), or over every element
// when `dims` is nullopt (then `keepdim` keeps every dim as size 1).
at::Tensor reduce_leaf(
    const at::Tensor& t,
    ReduceOp op,
    const std::optional<std::vector<int64_t>>& dims,
    bool keepdim,
    int64_t correction) {
  if (!dims) {
    at::Tensor out = reduce_leaf(
        t.flatten(),
        op,
        std::vector<int64_t>{0},
        /*keepdim=*/false,
        correction);
    return keepdim ? out.view(std::vector<int64_t>(t.dim(), 1)) : out;
  }
  const c10::IntArrayRef d = *dims;
  switch (op) {
    case ReduceOp::kSum:
      return t.sum(d, keepdim);
    case ReduceOp::kMean:
      return t.mean(d, keepdim);
    case ReduceOp::kStd:
      return t.std(d, c10::Scalar(correction), keepdim);
    case ReduceOp::kVar:
      return t.var(d, c10::Scalar(correction), keepdim);
    case ReduceOp::kProd: {
      // torch's prod takes one dim: reduce the last first so the others
      // keep their positions.
      at::Tensor out = t;
      for (auto it = d.rbegin(); it != d.rend(); ++it) {
        out = out.prod(*it, keepdim);
      }
      return out;
    }
    case ReduceOp::kAmax:
    case ReduceOp::kMax:
      return t.amax(d, keepdim);
    case ReduceOp::kAmin:
    case ReduceOp::kMin:
      return t.amin(d, keepdim);
    case ReduceOp::kAll:
      return t.all(d, keepdim);
    case ReduceOp::kAny:
      return t.any(d, keepdim);
  }
  TORCH_INTERNAL_ASSERT(false, "unknown ReduceOp");
}

// Wraps `dims` against `ndim` batch dims and sorts them; throws IndexError
// (Python's text) out of range, an error on a repeat (torch's text).
std::vector<int64_t> wrap_dims(c10::IntArrayRef dims, int64_t ndim) {
  std::vector<int64_t> out;
  for (const int64_t dim : dims) {
    TORCH_CHECK_INDEX(
        dim >= -ndim && dim < ndim,
        "Incompatible dim ",
        dim,
        " for tensordict with batch dims ",
        ndim,
        ".");
    const int64_t wrapped = dim < 0 ? dim + ndim : dim;
    TORCH_CHECK(
        std::find(out.begin(), out.end(), wrapped) == out.end(),
        "dim ",
        wrapped,
        " appears multiple times in the list of dims");
    out.push_back(wrapped);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Python refuses to reduce a NonTensorStack; so do we, before any work.
void check_no_stack(const TensorDict& td, ReduceOp op) {
  struct Visitor : detail::WalkVisitor {
    ReduceOp op;
    void non_tensor(const detail::KeyPath& /*path*/, const Value& value) {
      TORCH_CHECK(
          !value.is_non_tensor_stack(),
          op_name(op),
          " requires this object to be cast to a regular TensorDict. If you "
          "need NonTensorStack to support ",
          op_name(op),
          ", help us by filing an issue on github!");
    }
    bool enter_lazy_stack(
        const detail::KeyPath& path, const LazyStackedTensorDict& /*stack*/) {
      TORCH_CHECK_NOT_IMPLEMENTED(
          false,
          op_name(op),
          " cannot reduce the lazy stack at ",
          path.to_string(),
          ": make it dense first (LazyStackedTensorDict::contiguous())");
      return false;
    }
  } visitor;
  visitor.op = op;
  detail::walk(td, visitor);
}

// Reduces every element of each leaf: batch size [] (all 1s with
// `keepdim`, names kept), at every level.
TensorDict reduce_elements(
    const TensorDict& td, ReduceOp op, const ReduceOptions& options) {
  const detail::TensorDictImpl& src = *td.unsafeGetImpl();
  std::vector<int64_t> batch;
  DimNames names;
  if (options.keepdim()) {
    batch.assign(src.batch_size.size(), 1);
    names = src.names;
  }
  TensorDict result = detail::make_tensordict(batch, src.device, names);
  detail::TensorDictImpl& dst = *result.unsafeGetImpl();
  for (const auto& node : src.nodes()) {
    const Value& v = node->value;
    if (v.is_tensor()) {
      dst.append(
          node->key,
          Value(reduce_leaf(
              v.tensor(),
              op,
              std::nullopt,
              options.keepdim(),
              options.correction())));
    } else if (v.is_tensordict()) {
      dst.append(
          node->key, Value(reduce_elements(v.tensordict(), op, options)));
    } else {
      // A NonTensorData (stacks were refused): shared by the new batch.
      NonTensorData data = v.non_tensor_data();
      data.set_batch_size(batch);
      dst.append(node->key, Value(std::move(data)));
    }
  }
  return result;
}

TensorDict reduce_dict(
    const TensorDict& td, ReduceOp op, const ReduceOptions& options) {
  check_no_stack(td, op);
  if (options.dim().empty()) {
    return reduce_elements(td, op, options);
  }
  const std::vector<int64_t> dims = wrap_dims(options.dim(), td.batch_dims());
  const c10::IntArrayRef old_batch = td.batch_size();
  const DimNames old_names = td.names();
  detail::BatchChange change;
  for (int64_t i = 0; i < static_cast<int64_t>(old_batch.size()); ++i) {
    const bool reduced = std::binary_search(dims.begin(), dims.end(), i);
    if (reduced && !options.keepdim()) {
      continue;
    }
    change.batch_size.push_back(reduced ? 1 : old_batch[i]);
    if (!old_names.empty()) {
      change.names.push_back(old_names[i]);
    }
  }
  return detail::transform(
      td,
      [&](const at::Tensor& t) {
        return reduce_leaf(
            t, op, dims, options.keepdim(), options.correction());
      },
      change);
}

// The ReduceOp of a TENSORDICT_DICT_REDUCE_OPS entry.
constexpr ReduceOp reduce_op_named(std::string_view name) {
  for (size_t i = 0; i < kReduceOpNames.size(); ++i) {
    if (name == kReduceOpNames[i]) {
      return static_cast<ReduceOp>(i);
    }
  }
  throw std::logic_error("not a reduction");
}

// `all(dim)` and `any(dim)`: `op` over the one batch dim `dim`, checked
// with Python's message.
TensorDict reduce_batch_dim(const TensorDict& td, ReduceOp op, int64_t dim) {
  const int64_t ndim = td.batch_dims();
  TORCH_CHECK(
      dim >= -ndim && dim < ndim,
      "dim must be greater than or equal to -tensordict.batch_dims and "
      "smaller than tensordict.batch_dims");
  return reduce_dict(td, op, ReduceOptions().dim({dim}));
}

// `max(dim)`/`min(dim)` of every tensor leaf of `td`, values and indices,
// with `dim` already wrapped; nested dicts recurse and non-tensor data is
// left out, as in Python.
ValuesIndices minmax_dim(
    const TensorDict& td, int64_t dim, bool keepdim, bool is_max) {
  const detail::TensorDictImpl& src = *td.unsafeGetImpl();
  std::vector<int64_t> batch;
  DimNames names;
  for (int64_t i = 0; i < static_cast<int64_t>(src.batch_size.size()); ++i) {
    if (i == dim && !keepdim) {
      continue;
    }
    batch.push_back(i == dim ? 1 : src.batch_size[i]);
    if (!src.names.empty()) {
      names.push_back(src.names[i]);
    }
  }
  ValuesIndices out{
      detail::make_tensordict(batch, src.device, names),
      detail::make_tensordict(batch, src.device, names)};
  detail::TensorDictImpl& values = *out.values.unsafeGetImpl();
  detail::TensorDictImpl& indices = *out.indices.unsafeGetImpl();
  for (const auto& node : src.nodes()) {
    const Value& v = node->value;
    if (v.is_tensor()) {
      auto result = is_max ? at::max(v.tensor(), dim, keepdim)
                           : at::min(v.tensor(), dim, keepdim);
      values.append(node->key, Value(std::move(std::get<0>(result))));
      indices.append(node->key, Value(std::move(std::get<1>(result))));
    } else if (v.is_tensordict()) {
      ValuesIndices nested = minmax_dim(v.tensordict(), dim, keepdim, is_max);
      values.append(node->key, Value(std::move(nested.values)));
      indices.append(node->key, Value(std::move(nested.indices)));
    } else if (v.is_lazy_stack()) {
      TORCH_CHECK_NOT_IMPLEMENTED(
          false,
          is_max ? "max" : "min",
          "(dim) cannot reduce the lazy stack at '",
          node->key,
          "': make it dense first (LazyStackedTensorDict::contiguous())");
    }
  }
  return out;
}

ValuesIndices minmax_dim_checked(
    const TensorDict& td, int64_t dim, bool keepdim, bool is_max) {
  return minmax_dim(td, wrap_dims({dim}, td.batch_dims())[0], keepdim, is_max);
}

}  // namespace

ValuesIndices TensorDict::max(int64_t dim, bool keepdim) const {
  return minmax_dim_checked(*this, dim, keepdim, /*is_max=*/true);
}

ValuesIndices TensorDict::min(int64_t dim, bool keepdim) const {
  return minmax_dim_checked(*this, dim, keepdim, /*is_max=*/false);
}

#define TENSORDICT_DEFINE_REDUCE(kind, name)                        \
  TensorDict TensorDict::name(const ReduceOptions& options) const { \
    constexpr ReduceOp kOp = reduce_op_named(#name);                \
    return reduce_dict(*this, kOp, options);                        \
  }

TENSORDICT_DICT_REDUCE_OPS(TENSORDICT_DEFINE_REDUCE)

#undef TENSORDICT_DEFINE_REDUCE

TensorDict TensorDict::all(int64_t dim) const {
  return reduce_batch_dim(*this, ReduceOp::kAll, dim);
}

TensorDict TensorDict::any(int64_t dim) const {
  return reduce_batch_dim(*this, ReduceOp::kAny, dim);
}

at::Tensor TensorDict::reduce(ReduceOp op, const ReduceOptions& options) const {
  std::vector<at::Tensor> leaves;
  detail::all_tensors(*this, [&](const at::Tensor& t) {
    leaves.push_back(t);
    return true;
  });
  TORCH_CHECK_VALUE(
      !leaves.empty(),
      op_name(op),
      "(reduce=True) reduces the tensor leaves together, and this tensordict "
      "has no tensor leaves.");
  if (options.dim().empty()) {
    for (at::Tensor& leaf : leaves) {
      leaf = leaf.flatten();
    }
    return reduce_leaf(
        at::cat(leaves),
        op,
        std::nullopt,
        /*keepdim=*/false,
        options.correction());
  }
  const std::vector<int64_t> dims = wrap_dims(options.dim(), batch_dims());
  return reduce_leaf(
      at::cat(leaves, dims.front()),
      op,
      dims,
      options.keepdim(),
      options.correction());
}

TENSORDICT_END_NAMESPACE
