// The per-thread array cache. See NOTE [Recycled arrays] in array_cache.h.

#include "util/array_cache.h"

#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define TENSORDICT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TENSORDICT_ASAN 1
#endif
#endif

#ifdef TENSORDICT_ASAN
#include <sanitizer/asan_interface.h>
#define TENSORDICT_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define TENSORDICT_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define TENSORDICT_POISON(p, n) ((void)(p), (void)(n))
#define TENSORDICT_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

// Trivially destructible, so that it stays usable while the thread's other
// thread_local objects (dicts among them) are destroyed.
struct ArrayCache {
  void* arrays[kMaxCachedArrays];
  size_t sizes[kMaxCachedArrays];
  int count;
  // Set once the thread's releaser ran: from then on arrays go to malloc.
  bool closed;
};

thread_local ArrayCache cache;

// Removes array `i` from the cache and returns it, usable again.
void* take(ArrayCache& c, int i) noexcept {
  void* p = c.arrays[i];
  TENSORDICT_UNPOISON(p, c.sizes[i]);
  for (int j = i + 1; j < c.count; ++j) {
    c.arrays[j - 1] = c.arrays[j];
    c.sizes[j - 1] = c.sizes[j];
  }
  --c.count;
  return p;
}

// Frees the cached arrays when the thread exits. Constructed on the first
// array a thread caches.
struct CacheReleaser {
  ~CacheReleaser() {
    while (cache.count > 0) {
      ::operator delete(take(cache, cache.count - 1));
    }
    cache.closed = true;
  }
};

}  // namespace

void* allocate_array(size_t bytes) {
  ArrayCache& c = cache;
  if (bytes >= kMinCachedArrayBytes) {
    // Newest first: a loop's next dict asks for what its last one freed.
    for (int i = c.count - 1; i >= 0; --i) {
      if (c.sizes[i] == bytes) {
        return take(c, i);
      }
    }
  }
  return ::operator new(bytes);
}

void free_array(void* p, size_t bytes) noexcept {
  ArrayCache& c = cache;
  if (p == nullptr || bytes < kMinCachedArrayBytes ||
      bytes > kMaxCachedArrayBytes || c.closed) {
    ::operator delete(p);
    return;
  }
  thread_local CacheReleaser releaser;
  (void)releaser;
  if (c.count == kMaxCachedArrays) {
    ::operator delete(take(c, 0));  // full: the oldest goes to malloc
  }
  TENSORDICT_POISON(p, bytes);
  c.arrays[c.count] = p;
  c.sizes[c.count] = bytes;
  ++c.count;
}

int cached_array_count() noexcept {
  return cache.count;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
