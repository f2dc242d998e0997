#pragma once

// A small CPU tensor's elements on a hot path: the typed accessors
// (const_data_ptr<T>, data_ptr<T>) are two calls out of line with a dtype
// check, where a collector's step reads and writes a dozen tensors of a
// few elements each. The callers have checked the dtype and the device.

#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>

#include <cstdint>

namespace tensordict::detail {

/// Returns the first byte of `t`'s elements to read, or null when it has
/// no storage or no elements.
inline const char* readable_bytes(const at::Tensor& t) {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  const c10::Storage& storage = impl->unsafe_storage();
  if (!storage || impl->numel() == 0) {
    return nullptr;
  }
  return static_cast<const char*>(storage.data()) +
         impl->storage_offset() * static_cast<int64_t>(impl->itemsize());
}

/// Returns `t`'s first element as a `T` to read; `t` holds `T`s on the CPU
/// and has elements.
template <typename T>
const T* readable_data(const at::Tensor& t) {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  return static_cast<const T*>(impl->unsafe_storage().data()) +
         impl->storage_offset();
}

/// Returns `t`'s first element as a `T` to write, as `mutable_data_ptr`
/// does (a copy-on-write storage gets its own copy first); `t` holds `T`s
/// on the CPU and has elements.
template <typename T>
T* writable_data(const at::Tensor& t) {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  return static_cast<T*>(impl->unsafe_storage().mutable_data()) +
         impl->storage_offset();
}

}  // namespace tensordict::detail
