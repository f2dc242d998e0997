#pragma once

// Shared-memory checks, in one place for reprs and share_memory_().

#include <ATen/core/Tensor.h>
#include <c10/core/Storage.h>

#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Returns true if the storage lives in a shared-memory mapping, the test
/// Python's `Tensor.is_shared()` makes on the CPU.
bool storage_is_shared(const c10::Storage& storage);

/// Returns true if `t` is a CPU tensor whose storage is shared (see
/// `storage_is_shared`); false for other devices and storage-less tensors.
bool tensor_is_shared(const at::Tensor& t);

}  // namespace detail
TENSORDICT_END_NAMESPACE
