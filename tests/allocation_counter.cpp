// Replaces the global operator new/delete of a test binary with counting
// versions, so a test can check that an operation allocates nothing. Kept in
// its own file: seeing both halves inline makes GCC warn about new/free.

#include "allocation_counter.h"

#include <atomic>
#include <cstdlib>
#include <new>

// Sanitizer builds keep their runtime's operator new: replacing it there
// mixes the two allocators across shared libraries.
#if defined(TENSORDICT_TEST_COUNT_ALLOCATIONS)

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

namespace tensordict::testing {
int64_t allocation_count() {
  return g_allocations.load();
}
}  // namespace tensordict::testing

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) {
    return p;
  }
  throw std::bad_alloc();
}

void* operator new[](std::size_t size) {
  return ::operator new(size);
}

void operator delete(void* p) noexcept {
  std::free(p);
}

void operator delete[](void* p) noexcept {
  std::free(p);
}

void operator delete(void* p, std::size_t /*size*/) noexcept {
  std::free(p);
}

void operator delete[](void* p, std::size_t /*size*/) noexcept {
  std::free(p);
}

#else

namespace tensordict::testing {
int64_t allocation_count() {
  return -1;
}
}  // namespace tensordict::testing

#endif
