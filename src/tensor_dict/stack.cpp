// stack and cat: walk the dicts level by level, check that keys, kinds and
// batch sizes agree, then make one at::stack / at::cat call per leaf.

#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/stack.h>
#include <c10/util/MaybeOwned.h>

#include <numeric>
#include <string>
#include <vector>

#include "core/walk.h"
#include "tensordict/errors.h"
#include "tensordict/json.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

using detail::Node;
using detail::TensorDictImpl;

enum class Op { kStack, kCat };

const char* op_verb(Op op) {
  return op == Op::kStack ? "stack" : "concatenate";
}

// " for the entry ('n', 'b')" at nested levels, "" at the root.
std::string where(const detail::KeyPath& path) {
  return path.empty() ? "" : " for the entry " + path.to_string();
}

// The batch size of a stack/cat of dicts of these batch sizes. Every batch
// size must equal the first, except along `dim` for cat.
std::vector<int64_t> combined_batch(
    const std::vector<c10::IntArrayRef>& sizes,
    Op op,
    int64_t dim,
    const detail::KeyPath& path) {
  const c10::IntArrayRef first = sizes[0];
  int64_t along = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const c10::IntArrayRef b = sizes[i];
    bool congruent = b.size() == first.size();
    for (size_t d = 0; congruent && d < b.size(); ++d) {
      congruent =
          b[d] == first[d] || (op == Op::kCat && d == static_cast<size_t>(dim));
    }
    if (op == Op::kStack) {
      TORCH_CHECK(
          congruent,
          "stacking tensordicts requires them to have congruent batch sizes, "
          "got td[",
          i,
          "].batch_size=",
          detail::size_repr(b),
          " and td[0].batch_size=",
          detail::size_repr(first),
          where(path));
    } else {
      TORCH_CHECK(
          congruent,
          "concatenating tensordicts requires them to have congruent batch "
          "sizes except along dim ",
          dim,
          ", got td[",
          i,
          "].batch_size=",
          detail::size_repr(b),
          " and td[0].batch_size=",
          detail::size_repr(first),
          where(path));
      along += b[dim];
    }
  }
  std::vector<int64_t> batch(first.begin(), first.end());
  if (op == Op::kStack) {
    batch.insert(batch.begin() + dim, static_cast<int64_t>(sizes.size()));
  } else {
    batch[dim] = along;
  }
  return batch;
}

// Python's rules: stack keeps the names all dicts share (the new dim
// unnamed); cat keeps the first dict's.
DimNames combined_names(
    c10::ArrayRef<const TensorDictImpl*> srcs, Op op, int64_t dim) {
  DimNames names = srcs[0]->names;
  if (names.empty()) {
    return names;
  }
  if (op == Op::kCat) {
    return names;
  }
  for (const TensorDictImpl* src : srcs) {
    if (src->names != names) {
      return {};
    }
  }
  names.insert(names.begin() + dim, std::nullopt);
  return names;
}

// The device all dicts share, else none.
template <typename T, typename Get>
std::optional<c10::Device> common_device(c10::ArrayRef<T> items, Get get) {
  std::optional<c10::Device> device = get(items[0]);
  for (const T& item : items) {
    if (get(item) != device) {
      return std::nullopt;
    }
  }
  return device;
}

// Checks that leaf shapes agree (except along `dim` for cat), naming the
// key (`key()`, built only for the error), so torch's own error need not be
// decoded. Called once at::stack / at::cat has failed: the happy path pays
// for torch's checks only.
void check_leaf_shapes(
    const std::vector<at::Tensor>& leaves,
    Op op,
    int64_t dim,
    const detail::KeyPath& path) {
  const auto first = leaves[0].sizes();
  for (size_t i = 1; i < leaves.size(); ++i) {
    const auto sizes = leaves[i].sizes();
    bool same = sizes.size() == first.size();
    for (size_t d = 0; same && d < sizes.size(); ++d) {
      same = sizes[d] == first[d] ||
             (op == Op::kCat && d == static_cast<size_t>(dim));
    }
    TORCH_CHECK(
        same,
        "The shapes of the tensors to ",
        op_verb(op),
        " are incompatible: ",
        detail::size_repr(sizes),
        " vs ",
        detail::size_repr(first),
        " for key ",
        path.to_string(),
        ".");
  }
}

// The leaves of one entry, borrowed for one at::stack / at::cat call
// without touching their refcounts (c10::MaybeOwned's borrow): copying
// eight handles per leaf costs as much atomic traffic as the call itself.
class BorrowedLeaves {
 public:
  BorrowedLeaves() = default;
  BorrowedLeaves(const BorrowedLeaves&) = delete;
  BorrowedLeaves& operator=(const BorrowedLeaves&) = delete;
  ~BorrowedLeaves() {
    clear();
  }
  void reserve(size_t n) {
    leaves_.reserve(n);
  }
  void push_back(const at::Tensor& t) {
    leaves_.push_back(c10::MaybeOwnedTraits<at::Tensor>::createBorrow(t));
  }
  void clear() noexcept {
    for (at::Tensor& t : leaves_) {
      c10::MaybeOwnedTraits<at::Tensor>::destroyBorrow(t);
    }
    leaves_.clear();
  }
  const std::vector<at::Tensor>& get() const noexcept {
    return leaves_;
  }

 private:
  std::vector<at::Tensor> leaves_;
};

// The flat, row-major values of a non-tensor entry.
std::vector<Json> flat_values(const Value& v) {
  if (v.is_non_tensor_stack()) {
    return v.non_tensor_stack().values();
  }
  const NonTensorData& data = v.non_tensor_data();
  const auto batch = data.batch_size();
  const int64_t n = std::accumulate(
      batch.begin(), batch.end(), int64_t{1}, std::multiplies<>());
  return std::vector<Json>(static_cast<size_t>(n), data.data());
}

// Stacks or concatenates non-tensor entries: cat of equal NonTensorData
// stays NonTensorData (Python); anything else becomes a NonTensorStack,
// whose element order comes from stacking tensors of element positions.
Value combine_non_tensors(
    c10::ArrayRef<const Value*> values,
    Op op,
    int64_t dim,
    c10::IntArrayRef batch) {
  const std::optional<c10::Device> device =
      common_device(values, [](const Value* v) {
        return v->is_non_tensor_stack() ? v->non_tensor_stack().device()
                                        : v->non_tensor_data().device();
      });
  if (op == Op::kCat) {
    bool uniform = true;
    for (const Value* v : values) {
      uniform =
          uniform && v->is_non_tensor_data() &&
          v->non_tensor_data().data() == values[0]->non_tensor_data().data();
    }
    if (uniform) {
      return Value(
          NonTensorData(values[0]->non_tensor_data().data(), batch, device));
    }
  }
  std::vector<Json> pool;
  std::vector<at::Tensor> positions;
  positions.reserve(values.size());
  for (const Value* v : values) {
    std::vector<Json> flat = flat_values(*v);
    const auto start = static_cast<int64_t>(pool.size());
    positions.push_back(
        at::arange(start, start + static_cast<int64_t>(flat.size()), at::kLong)
            .view(v->shape()));
    pool.insert(
        pool.end(),
        std::make_move_iterator(flat.begin()),
        std::make_move_iterator(flat.end()));
  }
  const at::Tensor order =
      (op == Op::kStack ? at::stack(positions, dim) : at::cat(positions, dim))
          .contiguous();
  const int64_t* idx = order.data_ptr<int64_t>();
  std::vector<Json> out;
  out.reserve(static_cast<size_t>(order.numel()));
  for (int64_t i = 0; i < order.numel(); ++i) {
    out.push_back(pool[static_cast<size_t>(idx[i])]);
  }
  return Value(NonTensorStack(std::move(out), batch, device));
}

TensorDict combine(
    c10::ArrayRef<const TensorDictImpl*> srcs,
    Op op,
    int64_t dim,
    detail::KeyPath& path);

// Stacks or concatenates lazy stack entries: along their stack dim, cat
// joins the element lists; along another dim, element i of the result
// combines element i of every stack, which must agree in element count and
// stack dim.
LazyStackedTensorDict combine_lazy_stacks(
    c10::ArrayRef<const Value*> values,
    Op op,
    int64_t dim,
    detail::KeyPath& path) {
  const LazyStackedTensorDict& first = values[0]->lazy_stack();
  const int64_t stack_dim = first.stack_dim();
  if (op == Op::kCat && dim == stack_dim) {
    std::vector<TensorDict> elements;
    for (const Value* v : values) {
      const auto& more = v->lazy_stack().tensordicts();
      TORCH_CHECK(
          v->lazy_stack().stack_dim() == stack_dim,
          "cannot cat the lazy stacks at ",
          path.to_string(),
          ": they are stacked at different dims");
      elements.insert(elements.end(), more.begin(), more.end());
    }
    return detail::restack_like(first, std::move(elements));
  }
  for (const Value* v : values) {
    detail::check_same_stacking(first, v->lazy_stack(), path, op_verb(op));
  }
  // The dim inside the elements, and where the stack dim ends up.
  const bool before = op == Op::kStack ? dim <= stack_dim : dim < stack_dim;
  const int64_t element_dim = before ? dim : dim - 1;
  const int64_t new_stack_dim =
      op == Op::kStack && before ? stack_dim + 1 : stack_dim;
  std::vector<TensorDict> elements;
  std::vector<const TensorDictImpl*> parts(values.size());
  for (size_t e = 0; e < first.tensordicts().size(); ++e) {
    for (size_t i = 0; i < values.size(); ++i) {
      parts[i] = values[i]->lazy_stack().tensordicts()[e].unsafeGetImpl();
    }
    elements.push_back(combine(parts, op, element_dim, path));
  }
  return LazyStackedTensorDict(
      std::move(elements), new_stack_dim, first.stack_dim_name());
}

TensorDict combine(
    c10::ArrayRef<const TensorDictImpl*> srcs,
    Op op,
    int64_t dim,
    detail::KeyPath& path) {
  std::vector<c10::IntArrayRef> sizes;
  sizes.reserve(srcs.size());
  for (const TensorDictImpl* src : srcs) {
    sizes.emplace_back(src->batch_size);
  }
  std::vector<int64_t> batch = combined_batch(sizes, op, dim, path);
  TensorDict result = detail::make_tensordict(
      batch,
      common_device(srcs, [](const TensorDictImpl* s) { return s->device; }),
      combined_names(srcs, op, dim));
  TensorDictImpl& dst = *result.unsafeGetImpl();
  dst.reserve(srcs[0]->nodes().size());
  const size_t n = srcs.size();
  BorrowedLeaves leaves;
  leaves.reserve(n);
  const detail::ZipOptions options{op_verb(op)};
  detail::zip_level(srcs, path, options, [&](const Node& node, auto values) {
    const Value& first = node.value;
    if (first.is_tensor()) {
      leaves.clear();
      for (const Value* v : values) {
        leaves.push_back(v->tensor());
      }
      at::Tensor combined;
      try {
        combined = op == Op::kStack ? at::stack(leaves.get(), dim)
                                    : at::cat(leaves.get(), dim);
      } catch (const c10::Error&) {
        // Name the key when the shapes are to blame; else torch's error.
        check_leaf_shapes(leaves.get(), op, dim, path);
        throw;
      }
      dst.append_like(node, Value(std::move(combined)));
    } else if (first.is_tensordict()) {
      std::vector<const TensorDictImpl*> nested;
      nested.reserve(n);
      for (const Value* v : values) {
        nested.push_back(v->tensordict().unsafeGetImpl());
      }
      dst.append_like(node, Value(combine(nested, op, dim, path)));
    } else if (first.is_lazy_stack()) {
      dst.append_like(node, Value(combine_lazy_stacks(values, op, dim, path)));
    } else {
      std::vector<std::vector<int64_t>> shapes;
      shapes.reserve(n);
      for (const Value* v : values) {
        shapes.push_back(v->shape());
      }
      const std::vector<c10::IntArrayRef> shape_refs(
          shapes.begin(), shapes.end());
      dst.append(
          node.key,
          combine_non_tensors(
              values, op, dim, combined_batch(shape_refs, op, dim, path)));
    }
  });
  return result;
}

}  // namespace

TensorDict stack(const std::vector<TensorDict>& tds, int64_t dim) {
  TORCH_CHECK(!tds.empty(), "stack expects a non-empty TensorList");
  const int64_t ndim = tds[0].batch_dims();
  dim = detail::wrap_dim(dim, ndim + 1);  // the new dim may go last
  std::vector<const TensorDictImpl*> srcs;
  srcs.reserve(tds.size());
  for (const TensorDict& td : tds) {
    srcs.push_back(td.unsafeGetImpl());
  }
  detail::KeyPath path;
  return combine(srcs, Op::kStack, dim, path);
}

TensorDict cat(const std::vector<TensorDict>& tds, int64_t dim) {
  TORCH_CHECK_VALUE(
      !tds.empty(), "torch.cat(): expected a non-empty list of Tensors");
  const int64_t ndim = tds[0].batch_dims();
  TORCH_CHECK_INDEX(
      ndim > 0,
      "zero-dimensional tensordict (at position 0) cannot be concatenated");
  dim = detail::wrap_dim(dim, ndim);
  std::vector<const TensorDictImpl*> srcs;
  srcs.reserve(tds.size());
  for (const TensorDict& td : tds) {
    srcs.push_back(td.unsafeGetImpl());
  }
  detail::KeyPath path;
  return combine(srcs, Op::kCat, dim, path);
}

TENSORDICT_END_NAMESPACE
