// Building dicts: the literal constructor, from_dict with batch-size
// inference, fromkeys.

#include <ATen/ops/scalar_tensor.h>
#include <c10/core/DefaultDtype.h>

#include <algorithm>

#include "core/tensor_dict_impl.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

// Sets every item into `td`; nested item lists become dicts of td's batch
// size (Python turns a nested dict into a TensorDict of the parent's size).
void fill(TensorDict& td, const std::vector<Item>& items) {
  for (const Item& item : items) {
    if (const Value* value = item.value()) {
      td.set(item.key(), *value);
    } else {
      TensorDict child = detail::empty_like(td);
      fill(child, item.children());
      td.set(item.key(), child);
    }
  }
}

// NOTE [Batch-size inference]
// Python's auto_batch_size_ takes, over every entry, the longest common
// leading shape; nested dicts are inferred first, from their own entries, so
// their batch size (not their leaves' full shape) is what the parent sees.
// Non-tensor data has no shape of its own and does not constrain the result.
// `batch_dims` caps the number of dims.
std::vector<int64_t> infer_batch_size(
    const TensorDict& td, std::optional<int64_t> max_dims) {
  std::optional<std::vector<int64_t>> common;
  for (const auto& node : td.unsafeGetImpl()->nodes()) {
    const Value& v = node->value;
    if (v.is_non_tensor_data()) {
      continue;
    }
    const std::vector<int64_t> shape = v.shape();
    if (!common) {
      common = shape;
      continue;
    }
    size_t n = 0;
    while (n < common->size() && n < shape.size() && (*common)[n] == shape[n]) {
      ++n;
    }
    common->resize(n);
  }
  std::vector<int64_t> result = common.value_or(std::vector<int64_t>{});
  if (max_dims && static_cast<int64_t>(result.size()) > *max_dims) {
    result.resize(*max_dims);
  }
  return result;
}

TensorDict from_items(
    const std::vector<Item>& items, const FromDictOptions& options, bool root) {
  const bool infer = !options.batch_size() && options.auto_batch_size();
  std::vector<int64_t> batch_size =
      options.batch_size().value_or(std::vector<int64_t>{});
  // Build with no batch dims first, then settle the batch size.
  TensorDict td(
      infer ? c10::IntArrayRef{} : c10::IntArrayRef(batch_size),
      options.device());
  for (const Item& item : items) {
    if (const Value* value = item.value()) {
      td.set(item.key(), *value);
    } else {
      FromDictOptions nested;
      nested.auto_batch_size(options.auto_batch_size());
      nested.device(options.device());
      nested.batch_dims(options.batch_dims());
      if (!infer) {
        nested.batch_size(batch_size);
      }
      td.set(item.key(), from_items(item.children(), nested, false));
    }
  }
  if (infer) {
    td.set_batch_size(infer_batch_size(td, options.batch_dims()));
  }
  if (root && !options.names().empty()) {
    td.set_names(options.names());
  }
  return td;
}

}  // namespace

TensorDict::TensorDict(
    std::initializer_list<Item> items,
    c10::IntArrayRef batch_size,
    std::optional<c10::Device> device,
    const DimNames& names)
    : TensorDict(std::vector<Item>(items), batch_size, device, names) {}

TensorDict::TensorDict(
    const std::vector<Item>& items,
    c10::IntArrayRef batch_size,
    std::optional<c10::Device> device,
    const DimNames& names)
    : TensorDict(batch_size, device, names) {
  fill(*this, items);
}

TensorDict TensorDict::from_dict(
    const std::vector<Item>& items, const FromDictOptions& options) {
  return from_items(items, options, /*root=*/true);
}

TensorDict TensorDict::from_dict(
    const torch::OrderedDict<std::string, at::Tensor>& tensors,
    const FromDictOptions& options) {
  std::vector<Item> items;
  items.reserve(tensors.size());
  for (const auto& item : tensors) {
    items.emplace_back(NestedKey(item.key()), item.value());
  }
  return from_dict(items, options);
}

TensorDict TensorDict::fromkeys(
    const std::vector<NestedKey>& keys, const at::Tensor& value) {
  TensorDict td;
  for (const NestedKey& key : keys) {
    td.set(key, value);
  }
  return td;
}

TensorDict TensorDict::fromkeys(
    const std::vector<NestedKey>& keys, const c10::Scalar& value) {
  const auto dtype = value.isFloatingPoint()
                         ? c10::get_default_dtype_as_scalartype()
                         : value.type();
  return fromkeys(
      keys, at::scalar_tensor(value, at::TensorOptions().dtype(dtype)));
}

TENSORDICT_END_NAMESPACE
