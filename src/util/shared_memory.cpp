#include "util/shared_memory.h"

#include <ATen/MapAllocator.h>

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

bool storage_is_shared(const c10::Storage& storage) {
  const auto* map = at::MapAllocator::fromDataPtr(storage.data_ptr());
  return map != nullptr && (map->flags() & at::ALLOCATOR_MAPPED_SHAREDMEM);
}

bool tensor_is_shared(const at::Tensor& t) {
  return t.has_storage() && t.device().type() == c10::kCPU &&
         storage_is_shared(t.storage());
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
