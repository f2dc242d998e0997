#pragma once

// A small CPU tensor's elements on a hot path: the typed accessors
// (const_data_ptr<T>, data_ptr<T>) are two calls out of line with a dtype
// check, where a collector's step reads and writes a dozen tensors of a
// few elements each. The callers have checked the dtype and the device.

#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>
#include <c10/macros/Macros.h>

#include <cstdint>

namespace tensordict::detail {

/// Returns the first byte of `t`'s elements to read, or null when it has
/// no storage, no elements or no memory.
C10_ALWAYS_INLINE const char* readable_bytes(const at::Tensor& t) {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  const c10::Storage& storage = impl->unsafe_storage();
  const void* data = storage ? storage.data() : nullptr;
  if (data == nullptr || impl->numel() == 0) {
    return nullptr;
  }
  return static_cast<const char*>(data) +
         impl->storage_offset() * static_cast<int64_t>(impl->itemsize());
}

/// Returns the same bytes to write, as `data_ptr` does (a copy-on-write
/// storage gets its own copy first), or null as `readable_bytes`.
C10_ALWAYS_INLINE char* writable_bytes(const at::Tensor& t) {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  const c10::Storage& storage = impl->unsafe_storage();
  if (!storage || impl->numel() == 0) {
    return nullptr;
  }
  void* data = storage.mutable_data();
  if (data == nullptr) {
    return nullptr;
  }
  return static_cast<char*>(data) +
         impl->storage_offset() * static_cast<int64_t>(impl->itemsize());
}

/// Returns `t`'s first element as a `T` to read, `t` holding `T`s on the
/// CPU: inline, or through `const_data_ptr` for a tensor the above do not
/// read (which it refuses, or gives null for, as everywhere else).
template <typename T>
C10_ALWAYS_INLINE const T* readable_data(const at::Tensor& t) {
  const char* bytes = readable_bytes(t);
  return bytes != nullptr ? reinterpret_cast<const T*>(bytes)
                          : t.const_data_ptr<T>();
}

/// Returns `t`'s first element as a `T` to write: `readable_data`'s twin
/// through `writable_bytes` and `mutable_data_ptr`.
template <typename T>
C10_ALWAYS_INLINE T* writable_data(const at::Tensor& t) {
  char* bytes = writable_bytes(t);
  return bytes != nullptr ? reinterpret_cast<T*>(bytes)
                          : t.mutable_data_ptr<T>();
}

}  // namespace tensordict::detail
