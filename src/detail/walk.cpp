#include "detail/walk.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/zeros.h>

#include <algorithm>

#include "tensordict/json.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

Value non_tensor_on(const Value& v, std::optional<c10::Device> device) {
  if (!device) {
    return v;
  }
  if (v.is_non_tensor_data()) {
    NonTensorData data = v.non_tensor_data();
    data.set_device(device);
    return Value(std::move(data));
  }
  NonTensorStack stack = v.non_tensor_stack();
  stack.set_device(device);
  return Value(std::move(stack));
}

at::Tensor stack_positions(const NonTensorStack& stack) {
  return at::arange(
             static_cast<int64_t>(stack.values().size()),
             at::TensorOptions().dtype(at::kLong))
      .view(stack.batch_size());
}

Value gather_stack(
    const NonTensorStack& stack,
    const at::Tensor& positions,
    std::optional<c10::Device> device) {
  const at::Tensor flat = positions.contiguous().view(-1);
  const int64_t* pos = flat.data_ptr<int64_t>();
  if (positions.dim() == 0) {
    return Value(NonTensorData(stack.at(pos[0]), {}, device));
  }
  std::vector<Json> values;
  values.reserve(flat.numel());
  for (int64_t i = 0; i < flat.numel(); ++i) {
    values.push_back(pos[i] < 0 ? Json(nullptr) : stack.at(pos[i]));
  }
  return Value(NonTensorStack(std::move(values), positions.sizes(), device));
}

at::Tensor data_positions(const NonTensorData& data) {
  return at::zeros(data.batch_size(), at::TensorOptions().dtype(at::kLong));
}

Value gather_data(const NonTensorData& data, const at::Tensor& positions) {
  const at::Tensor flat = positions.contiguous().view(-1);
  const int64_t* pos = flat.data_ptr<int64_t>();
  const int64_t n = flat.numel();
  if (std::all_of(pos, pos + n, [](int64_t p) { return p >= 0; })) {
    NonTensorData out = data;
    out.set_batch_size(positions.sizes());
    return Value(std::move(out));
  }
  std::vector<Json> values;
  values.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    values.push_back(pos[i] < 0 ? Json(nullptr) : data.data());
  }
  return Value(
      NonTensorStack(std::move(values), positions.sizes(), data.device()));
}

void check_same_keys(
    c10::ArrayRef<const TensorDictImpl*> dicts, const KeyPath& path) {
  const TensorDictImpl& first = *dicts[0];
  for (size_t i = 1; i < dicts.size(); ++i) {
    const TensorDictImpl& other = *dicts[i];
    // Same size and every key of the first found: the same key set.
    bool same = other.nodes().size() == first.nodes().size();
    size_t pos = 0;
    for (const auto& node : first.nodes()) {
      if (!same) {
        break;
      }
      same = find_matching(other, node->key, pos++) != nullptr;
    }
    if (same) {
      continue;
    }
    KeyPath at = path;
    for (const auto& node : other.nodes()) {
      if (first.find(node->key) == nullptr) {
        at.push(node->key);
        throw_missing_key(first, node->key, at.key());
      }
    }
    for (const auto& node : first.nodes()) {
      if (other.find(node->key) == nullptr) {
        at.push(node->key);
        throw_missing_key(other, node->key, at.key());
      }
    }
  }
}

void throw_kind_mismatch(
    const Value& first,
    const Value& other,
    size_t i,
    const KeyPath& path,
    const char* verb) {
  TORCH_CHECK_TYPE(
      false,
      "cannot ",
      verb,
      " entry ",
      path.to_string(),
      ": it is a ",
      first.type_name(),
      " in tensordict 0 and a ",
      other.type_name(),
      " in tensordict ",
      i);
  TORCH_INTERNAL_ASSERT(false);
}

void check_same_kind(
    c10::ArrayRef<const Value*> values, const KeyPath& path, const char* verb) {
  const Value& first = *values[0];
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i] != nullptr && !same_kind(first, *values[i])) {
      throw_kind_mismatch(first, *values[i], i, path, verb);
    }
  }
}

BatchChange carry_change(
    const BatchChange& change,
    c10::IntArrayRef old_batch,
    const DimNames& old_names,
    size_t root_dims) {
  TORCH_INTERNAL_ASSERT(old_batch.size() >= root_dims);
  BatchChange out;
  out.batch_size = change.batch_size;
  out.batch_size.insert(
      out.batch_size.end(), old_batch.begin() + root_dims, old_batch.end());
  if (!change.names.empty() || !old_names.empty()) {
    out.names = change.names.empty() ? DimNames(change.batch_size.size())
                                     : change.names;
    for (size_t i = root_dims; i < old_batch.size(); ++i) {
      out.names.push_back(i < old_names.size() ? old_names[i] : std::nullopt);
    }
    bool any = false;
    for (const auto& name : out.names) {
      any = any || name.has_value();
    }
    if (!any) {
      out.names.clear();
    }
  }
  return out;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
