#pragma once

// A per-thread cache of recently freed arrays, and the allocator that uses
// it for the node and slot arrays of every dict level.

#include <cstddef>

#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

// NOTE [Recycled arrays]
// glibc's malloc serves a request past about 1 KiB outside its per-thread
// caches, and before it does, it merges every freed small chunk waiting in
// its fast bins (malloc_consolidate). Freeing a dict of tensors leaves
// hundreds of those (TensorImpls, autograd metadata, version counters), and
// a dict level of ten entries or more (a Node is 112 bytes) asks for such an
// array each time it is built: measured, the merge and the slower small
// allocations it causes were 54K of the 81K instructions a 100-leaf reshape
// of leaves that require grad spent beyond ATen's own calls. So each thread
// keeps its last few freed arrays from 1 KiB to 64 KiB and hands one back
// for a request of exactly its size: a loop that builds and drops dicts of
// the same shape allocates no node arrays in its steady state. At most
// kMaxCachedArrays arrays (512 KiB) stay per thread; they are freed when
// the thread exits. Under AddressSanitizer a cached array is poisoned, so a
// use after free still reports.

/// Arrays from this many bytes up are recycled.
constexpr size_t kMinCachedArrayBytes = 1024;
/// Arrays above this many bytes go straight back to malloc.
constexpr size_t kMaxCachedArrayBytes = 64 * 1024;
/// Arrays kept per thread.
constexpr int kMaxCachedArrays = 8;

/// Returns `bytes` of uninitialized memory aligned for any object: a cached
/// array of exactly that size when the thread has one, else new memory.
void* allocate_array(size_t bytes);

/// Frees an array from `allocate_array` of `bytes`, keeping it for reuse if
/// its size is in the cached range and the thread's cache has room.
void free_array(void* p, size_t bytes) noexcept;

/// Returns how many arrays the calling thread's cache holds; for tests.
int cached_array_count() noexcept;

/// A std allocator over `allocate_array` / `free_array`. Stateless: every
/// instance can free what another allocated, on any thread.
template <typename T>
struct RecyclingAllocator {
  using value_type = T;

  RecyclingAllocator() = default;
  template <typename U>
  RecyclingAllocator(const RecyclingAllocator<U>&) noexcept {}

  /// Returns room for `n` objects of T.
  T* allocate(size_t n) {
    return static_cast<T*>(allocate_array(n * sizeof(T)));
  }
  /// Frees room for `n` objects of T from `allocate(n)`.
  void deallocate(T* p, size_t n) noexcept {
    free_array(p, n * sizeof(T));
  }

  template <typename U>
  bool operator==(const RecyclingAllocator<U>&) const noexcept {
    return true;
  }
  template <typename U>
  bool operator!=(const RecyclingAllocator<U>&) const noexcept {
    return false;
  }
};

}  // namespace detail
TENSORDICT_END_NAMESPACE
