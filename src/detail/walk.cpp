#include "detail/walk.h"

#include <ATen/ops/arange.h>

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

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
    values.push_back(stack.at(pos[i]));
  }
  return Value(NonTensorStack(std::move(values), positions.sizes(), device));
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

} // namespace detail
TENSORDICT_END_NAMESPACE
