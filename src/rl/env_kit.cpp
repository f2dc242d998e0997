// The env author's kit: row layouts of leaves, IndexRows, and the sub-env
// seed streams (NOTE [Rows in a range call] in rl/env_kit.h).

#include "tensordict/rl/env_kit.h"

#include <ATen/Dispatch.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <string>

#include "tensordict/errors.h"
#include "tensordict/value.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

RowLayout row_layout(
    const at::Tensor& leaf, const NestedKey& key, bool writable) {
  TORCH_CHECK_VALUE(
      leaf.defined(), "row view: key ", key.to_string(), " is undefined");
  TORCH_CHECK_VALUE(
      leaf.device().is_cpu(),
      "row view: key ",
      key.to_string(),
      " is on ",
      leaf.device(),
      "; row views read CPU tensors (write other devices with tensor ops)");
  TORCH_CHECK_VALUE(
      leaf.dim() >= 1,
      "row view: key ",
      key.to_string(),
      " expected a leaf [N, ...] with a batch dim, got shape ",
      leaf.sizes());
  // The sizes and strides are read once: an env makes its views at every
  // step.
  const c10::IntArrayRef sizes = leaf.sizes();
  const c10::IntArrayRef strides = leaf.strides();
  RowLayout layout;
  layout.dtype = leaf.scalar_type();
  layout.rows = sizes[0];
  layout.row_stride = strides[0];
  layout.width = 1;
  layout.col_stride = 1;
  // The trailing dims must be one strided axis: each dim's stride is the
  // next one's times its size (dims of size 1 are skipped).
  int64_t expected_stride = -1;
  for (size_t d = sizes.size() - 1; d >= 1; --d) {
    if (sizes[d] == 1) {
      continue;
    }
    if (expected_stride == -1) {
      layout.col_stride = strides[d];
    } else {
      TORCH_CHECK_VALUE(
          strides[d] == expected_stride,
          "row view: key ",
          key.to_string(),
          " has trailing dims ",
          sizes.slice(1),
          " with strides ",
          strides.slice(1),
          " that are not one strided axis (make it contiguous)");
    }
    expected_stride = strides[d] * sizes[d];
    layout.width *= sizes[d];
  }
  layout.data =
      writable ? leaf.data_ptr() : const_cast<void*>(leaf.const_data_ptr());
  return layout;
}

RowLayout row_layout(
    const TensorDict& td, const NestedKey& key, bool writable) {
  const Value* found = td.find(key);
  TENSORDICT_CHECK_KEY(
      found != nullptr,
      "row view: key ",
      key.to_string(),
      " is missing from the dict");
  TORCH_CHECK_TYPE(
      found->is_tensor(),
      "row view: key ",
      key.to_string(),
      " holds ",
      found->is_tensordict()   ? "a dict"
      : found->is_lazy_stack() ? "a lazy stack"
                               : "non-tensor data",
      ", expected a tensor");
  return row_layout(found->tensor(), key, writable);
}

void throw_row_dtype(
    const NestedKey& key, c10::ScalarType expected, c10::ScalarType got) {
  TORCH_CHECK_VALUE(
      false,
      "row view: key ",
      key.to_string(),
      " is ",
      got,
      ", the view reads ",
      expected);
}

int64_t read_as_int64(const RowLayout& layout, int64_t offset) {
  int64_t out = 0;
  AT_DISPATCH_ALL_TYPES_AND3(
      c10::kBool,
      c10::kHalf,
      c10::kBFloat16,
      layout.dtype,
      "read_as_int64",
      [&] {
        out = static_cast<int64_t>(
            static_cast<const scalar_t*>(layout.data)[offset]);
      });
  return out;
}

}  // namespace detail

namespace rl {

IndexRows::IndexRows(
    const TensorDict& td, const NestedKey& key, const TensorSpec& spec) {
  TORCH_CHECK_VALUE(
      spec.kind() == SpecKind::kCategorical || spec.kind() == SpecKind::kOneHot,
      "IndexRows: key ",
      key.to_string(),
      " needs a Categorical or OneHot spec");
  layout_ = detail::row_layout(td, key, /*writable=*/false);
  one_hot_ = spec.kind() == SpecKind::kOneHot;
  TORCH_CHECK_VALUE(
      spec.accepts(layout_.dtype),
      "IndexRows: key ",
      key.to_string(),
      " is ",
      layout_.dtype,
      ", which its ",
      one_hot_ ? "OneHot" : "Categorical",
      " spec does not accept");
  TORCH_CHECK_VALUE(
      one_hot_ ? layout_.width == spec.n() : layout_.width == 1,
      "IndexRows: key ",
      key.to_string(),
      " expected rows of ",
      one_hot_ ? spec.n() : 1,
      " element(s), got ",
      layout_.width);
}

uint64_t sub_env_seed(uint64_t seed, int64_t index, int64_t episode) noexcept {
  return splitmix64(
      splitmix64(seed ^ (static_cast<uint64_t>(index) << 32)) +
      static_cast<uint64_t>(episode));
}

}  // namespace rl
TENSORDICT_END_NAMESPACE
