// pack() and PackLayout: all the leaves of a dict in one tensor of features
// and back, with Python tensordict's column order (the one-tensor contract
// of deployment stacks).

#include "tensordict/pack.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensordict/errors.h"
#include "tensordict/value.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
// Named, not anonymous: the library is compiled in unity batches.
namespace pack_impl {

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t size : shape) {
    n *= size;
  }
  return n;
}

std::string shapes_string(const std::vector<std::vector<int64_t>>& shapes) {
  return "[" +
         detail::join_spelled(
             shapes,
             [](const std::vector<int64_t>& shape) {
               return c10::str(c10::IntArrayRef(shape));
             }) +
         "]";
}

void set_offsets(PackLayout& layout) {
  layout.offsets.clear();
  layout.numel = 0;
  for (const auto& shape : layout.shapes) {
    layout.offsets.push_back(layout.numel);
    layout.numel += product(shape);
  }
}

// Renders `keys` as Python prints a list of keys: ['a', ('b', 'c')].
std::string pack_keys_string(const std::vector<NestedKey>& keys) {
  std::vector<std::string> parts;
  parts.reserve(keys.size());
  for (const NestedKey& key : keys) {
    parts.push_back(key.to_string());
  }
  return "[" + c10::Join(", ", parts) + "]";
}

}  // namespace pack_impl
}  // namespace detail

bool PackLayout::operator==(const PackLayout& other) const {
  return keys == other.keys && shapes == other.shapes && dim == other.dim &&
         nested == other.nested && device == other.device;
}

TensorDict PackLayout::unpack(const at::Tensor& flat) const {
  const int64_t ndim = flat.dim();
  const int64_t pos = dim < 0 ? dim + ndim : dim;
  TORCH_CHECK_INDEX(
      pos >= 0 && pos < ndim,
      "dim ",
      dim,
      " is out of range for a tensor with ",
      ndim,
      " dimensions.");
  TORCH_CHECK_VALUE(
      flat.size(pos) == numel,
      "Expected ",
      numel,
      " entries along dim ",
      dim,
      " of the packed tensor, got ",
      flat.size(pos),
      ".");
  const at::Tensor moved = flat.movedim(pos, -1);
  const c10::IntArrayRef batch = moved.sizes().slice(0, ndim - 1);
  const std::optional<c10::Device> out_device =
      device ? std::optional<c10::Device>(flat.device()) : std::nullopt;
  TensorDict out(std::vector<Item>{}, batch, out_device);
  for (const auto& [key, nested_batch] : nested) {
    std::vector<int64_t> size(batch.begin(), batch.end());
    size.insert(size.end(), nested_batch.begin(), nested_batch.end());
    out.set(key, TensorDict(std::vector<Item>{}, size, out_device));
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    at::Tensor value =
        moved.narrow(-1, offsets[i], detail::pack_impl::product(shapes[i]));
    value =
        shapes[i].empty() ? value.squeeze(-1) : value.unflatten(-1, shapes[i]);
    out.set(keys[i], value);
  }
  return out;
}

std::pair<at::Tensor, PackLayout> pack(
    const TensorDict& td, int64_t dim, const PackLayout* layout) {
  const c10::IntArrayRef batch = td.batch_size();
  const auto batch_dims = static_cast<int64_t>(batch.size());
  TORCH_CHECK_INDEX(
      dim >= -batch_dims - 1 && dim <= batch_dims,
      "dim ",
      dim,
      " is out of range for packing a tensordict with ",
      batch_dims,
      " batch dimensions.");
  const int64_t pos = dim < 0 ? dim + batch_dims + 1 : dim;

  PackLayout out;
  out.dim = pos - batch_dims - 1;
  out.device = td.device();
  std::vector<at::Tensor> leaves;
  for (const auto& [key, value] : td.items(
           /*include_nested=*/true, /*leaves_only=*/false, /*sort=*/true)) {
    TORCH_CHECK_TYPE(
        !value.is_non_tensor(),
        "Cannot pack the non-tensor entry ",
        key.to_string(),
        ". Drop the non-tensor entries with filter_non_tensor_data() first.");
    TORCH_CHECK(
        !value.is_lazy_stack(),
        "Cannot pack the lazy stack at ",
        key.to_string(),
        ": stack it densely first.");
    if (value.is_tensordict()) {
      const c10::IntArrayRef sub = value.tensordict().batch_size();
      out.nested.emplace_back(
          key, std::vector<int64_t>(sub.begin() + batch_dims, sub.end()));
      continue;
    }
    out.keys.push_back(key);
    leaves.push_back(value.tensor());
  }
  if (layout != nullptr) {
    const int64_t layout_pos =
        layout->dim < 0 ? layout->dim + batch_dims + 1 : layout->dim;
    TORCH_CHECK_VALUE(
        layout_pos == pos,
        "Cannot pack along dim ",
        dim,
        " with a layout packed along dim ",
        layout->dim,
        ".");
    std::vector<NestedKey> have = out.keys;
    std::vector<NestedKey> want = layout->keys;
    const auto by_text = [](const NestedKey& a, const NestedKey& b) {
      return a.to_string() < b.to_string();
    };
    std::sort(have.begin(), have.end(), by_text);
    std::sort(want.begin(), want.end(), by_text);
    TENSORDICT_CHECK_KEY(
        have == want,
        "The leaves of the tensordict differ from the keys of the layout: ",
        detail::pack_impl::pack_keys_string(have),
        " vs ",
        detail::pack_impl::pack_keys_string(want),
        ".");
    std::vector<at::Tensor> ordered;
    for (const NestedKey& key : layout->keys) {
      const auto it = std::find(out.keys.begin(), out.keys.end(), key);
      ordered.push_back(leaves[static_cast<size_t>(it - out.keys.begin())]);
    }
    leaves = std::move(ordered);
    out.keys = layout->keys;
  }
  at::Tensor first;
  const NestedKey* first_key = nullptr;
  std::vector<at::Tensor> columns;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const at::Tensor& leaf = leaves[i];
    const c10::IntArrayRef sizes = leaf.sizes();
    out.shapes.emplace_back(sizes.begin() + batch_dims, sizes.end());
    if (first_key == nullptr) {
      first = leaf;
      first_key = &out.keys[i];
    } else {
      TORCH_CHECK_TYPE(
          leaf.scalar_type() == first.scalar_type(),
          "Cannot pack leaves of different dtypes: ",
          first.scalar_type(),
          " and ",
          leaf.scalar_type(),
          " at ",
          out.keys[i].to_string(),
          ". Cast the tensordict first, e.g. with float().");
      TORCH_CHECK(
          leaf.device() == first.device(),
          "Cannot pack leaves on different devices: ",
          first.device(),
          " and ",
          leaf.device(),
          " at ",
          out.keys[i].to_string(),
          ".");
    }
    at::Tensor column =
        leaf.dim() > batch_dims ? leaf.flatten(batch_dims) : leaf.unsqueeze(-1);
    if (pos != batch_dims) {
      column = column.movedim(-1, pos);
    }
    columns.push_back(std::move(column));
  }
  if (layout != nullptr) {
    TORCH_CHECK_VALUE(
        out.shapes == layout->shapes,
        "The feature shapes of the leaves differ from those of the layout: ",
        detail::pack_impl::shapes_string(out.shapes),
        " vs ",
        detail::pack_impl::shapes_string(layout->shapes),
        ".");
  }
  detail::pack_impl::set_offsets(out);
  at::Tensor flat;
  if (!columns.empty()) {
    // cat keeps its inputs' memory format, which movedim can make
    // channels-last: the contract is a contiguous tensor.
    flat = at::cat(columns, pos).contiguous();
  } else {
    std::vector<int64_t> size(batch.begin(), batch.end());
    size.insert(size.begin() + pos, 0);
    flat = at::empty(
        size, at::TensorOptions().device(td.device().value_or(c10::kCPU)));
  }
  return {std::move(flat), std::move(out)};
}

TENSORDICT_END_NAMESPACE
