// Moving a consolidated dict to another device with one copy of its
// storage; see NOTE [Consolidated layout] in tensordict/consolidate.h.

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <utility>

#include "core/tensor_dict_impl.h"
#include "core/walk.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

TensorDict move_consolidated(
    const TensorDict& td, c10::Device device, bool non_blocking) {
  const TensorDictImpl& root = *td.unsafeGetImpl();
  const at::Tensor& storage = root.consolidated.storage;
  const at::Tensor moved = storage.to(device, non_blocking);
  const int64_t base = storage.storage_offset();
  auto make_dict = [&](const TensorDictImpl& level) {
    TensorDict dict = make_tensordict(level.batch_size, device, level.names);
    dict.unsafeGetImpl()->consolidated.storage = moved;
    return dict;
  };
  // Each leaf keeps its byte offset, sizes and strides over the new storage.
  auto move_leaf = [&](const at::Tensor& t) {
    const int64_t itemsize = static_cast<int64_t>(t.element_size());
    const int64_t byte_offset =
        moved.storage_offset() + t.storage_offset() * itemsize - base;
    TORCH_INTERNAL_ASSERT(byte_offset % itemsize == 0);
    at::Tensor leaf = at::empty({0}, moved.options().dtype(t.scalar_type()));
    leaf.set_(moved.storage(), byte_offset / itemsize, t.sizes(), t.strides());
    return leaf;
  };
  TensorDict result =
      rebuild(root, make_dict, move_leaf, /*move_non_tensors=*/true);
  if (root.locked) {
    result.lock_();
  }
  return result;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
