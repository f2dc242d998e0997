#include "util/huge_pages.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

uintptr_t round_up(uintptr_t value, uintptr_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace

at::Tensor huge_page_bytes(int64_t nbytes) {
  const auto options = at::TensorOptions().dtype(c10::kByte);
  if (nbytes < kHugePageBufferMin) {
    return at::empty({nbytes}, options);
  }
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t length = round_up(static_cast<uintptr_t>(nbytes), page);
  // Over-allocate by one huge page, then trim the ends so the mapping
  // starts on a 2 MiB boundary: the kernel only backs aligned 2 MiB ranges
  // with huge pages.
  void* raw = ::mmap(
      nullptr,
      length + kHugePage,
      PROT_READ | PROT_WRITE,
      MAP_PRIVATE | MAP_ANONYMOUS,
      -1,
      0);
  if (raw == MAP_FAILED) {
    return at::empty({nbytes}, options);  // the allocator's error, if any
  }
  const auto begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = round_up(begin, kHugePage);
  if (start > begin) {
    ::munmap(raw, start - begin);
  }
  const uintptr_t end = begin + length + kHugePage;
  if (end > start + length) {
    ::munmap(reinterpret_cast<void*>(start + length), end - start - length);
  }
  auto* data = reinterpret_cast<void*>(start);
  // Advice only: without huge pages the mapping works as a plain one.
  (void)::madvise(data, length, MADV_HUGEPAGE);
  return at::from_blob(
      data, {nbytes}, [length](void* p) { ::munmap(p, length); }, options);
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
