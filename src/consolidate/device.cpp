// Moving a consolidated dict to another device with one copy of its
// storage; see NOTE [Consolidated layout] in tensordict/consolidate.h.

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <utility>

#include "detail/tensor_dict_impl.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

TensorDict move_consolidated(
    const TensorDict& td, c10::Device device, bool non_blocking) {
  const TensorDictImpl& root = *td.unsafeGetImpl();
  const at::Tensor& storage = root.consolidated.storage;
  const at::Tensor moved = storage.to(device, non_blocking);
  const int64_t base = storage.storage_offset();
  // Each leaf keeps its byte offset, sizes and strides over the new storage.
  auto rebuild = [&](const auto& self,
                     const TensorDictImpl& impl) -> TensorDict {
    TensorDict result = make_tensordict(impl.batch_size, device, impl.names);
    TensorDictImpl& out = *result.unsafeGetImpl();
    for (const Node* node : impl.nodes()) {
      const Value& value = node->value;
      if (value.is_tensor()) {
        const at::Tensor& t = value.tensor();
        const int64_t itemsize = static_cast<int64_t>(t.element_size());
        const int64_t byte_offset =
            moved.storage_offset() + t.storage_offset() * itemsize - base;
        TORCH_INTERNAL_ASSERT(byte_offset % itemsize == 0);
        at::Tensor leaf =
            at::empty({0}, moved.options().dtype(t.scalar_type()));
        leaf.set_(
            moved.storage(), byte_offset / itemsize, t.sizes(), t.strides());
        out.append(node->key, std::move(leaf));
      } else if (value.is_tensordict()) {
        out.append(node->key, self(self, *value.tensordict().unsafeGetImpl()));
      } else if (value.is_non_tensor_data()) {
        NonTensorData data = value.non_tensor_data();
        data.set_device(device);
        out.append(node->key, std::move(data));
      } else {
        NonTensorStack stack = value.non_tensor_stack();
        stack.set_device(device);
        out.append(node->key, std::move(stack));
      }
    }
    out.consolidated.storage = moved;
    return result;
  };
  TensorDict result = rebuild(rebuild, root);
  if (root.locked) {
    result.lock_();
  }
  return result;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
