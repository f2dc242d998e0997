// Buffers mapped for transparent huge pages (src/util/huge_pages.h), and
// consolidate's use of them for large CPU dicts.
#include "util/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

#include "io/metadata_reader.h"
#include "support.h"
#include "util/shared_memory.h"

// Its own namespace, so that test files can share a unity batch.
namespace huge_pages_test {

using tensordict::ConsolidateOptions;
using tensordict::TensorDict;
using tensordict::detail::huge_page_bytes;
using tensordict::detail::kHugePageBufferMin;

constexpr uintptr_t kTwoMiB = uintptr_t{2} << 20;

TEST(HugePagesTest, SmallBuffersComeFromTheAllocator) {
  for (const int64_t n : {int64_t{0}, int64_t{1}, kHugePageBufferMin - 1}) {
    const at::Tensor t = huge_page_bytes(n);
    EXPECT_EQ(t.numel(), n);
    EXPECT_EQ(t.scalar_type(), c10::kByte);
    EXPECT_TRUE(t.is_cpu());
    // The allocator's storage can grow; the mapped one cannot.
    EXPECT_TRUE(t.storage().resizable());
  }
}

TEST(HugePagesTest, LargeBuffersAreAlignedWritableMappings) {
  // An odd size: the last partial page must be usable too.
  const int64_t n = kHugePageBufferMin + 12345;
  at::Tensor t = huge_page_bytes(n);
  ASSERT_EQ(t.numel(), n);
  EXPECT_FALSE(t.storage().resizable());
  const auto address = reinterpret_cast<uintptr_t>(t.data_ptr());
  EXPECT_EQ(address % kTwoMiB, 0u);
  // The mapping covers every byte: mincore succeeds on each of its pages.
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> resident((n + page - 1) / page);
  EXPECT_EQ(
      ::mincore(t.data_ptr(), static_cast<size_t>(n), resident.data()), 0);
  t.fill_(7);
  t[n - 1] = 9;
  EXPECT_EQ(t.sum().item<int64_t>(), 7 * (n - 1) + 9);
}

TEST(HugePagesTest, ReleasedMappingsDoNotLeak) {
  // Each buffer is unmapped, whole, when its last tensor goes: neither the
  // process's mappings nor its address space grow over many buffers.
#ifdef __SANITIZE_THREAD__
  // TSan maps shadow memory for mappings it sees, as the run goes: its own
  // mappings, not the library's, move the count (by 4 in a CI run).
  GTEST_SKIP() << "the ThreadSanitizer runtime maps memory of its own";
#endif
  using tensordict::detail::mappings_in_use;
  const int64_t before = mappings_in_use();
  for (int i = 0; i < 64; ++i) {
    at::Tensor t = huge_page_bytes(int64_t{64} << 20);
    t[0] = 1;
  }
  EXPECT_LE(mappings_in_use(), before + 2);
}

TEST(HugePagesTest, ConsolidateOfALargeDictUsesAnAlignedBufferAndKeepsValues) {
  TensorDict td({}, {4});
  td.set("a", torch::randn({4, 1 << 20}));  // 16 MiB
  td.set({"n", "b"}, torch::arange(4 * 1000).reshape({4, 1000}));
  td.set("c", torch::randn({4, 3}).t().contiguous().t());  // not contiguous
  for (const int64_t threads : {int64_t{0}, int64_t{2}}) {
    const TensorDict c =
        td.consolidate(ConsolidateOptions().num_threads(threads));
    const at::Tensor storage = c.consolidated_storage();
    ASSERT_TRUE(storage.defined());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(storage.data_ptr()) % kTwoMiB, 0u);
    EXPECT_TRUE(torch::equal(c.get("a"), td.get("a")));
    EXPECT_TRUE(torch::equal(c.get({"n", "b"}), td.get({"n", "b"})));
    EXPECT_TRUE(torch::equal(c.get("c"), td.get("c")));
    // The bytes round-trip through the reader as any consolidated buffer.
    const TensorDict back =
        tensordict::from_consolidated_bytes(tensordict::consolidated_bytes(c));
    EXPECT_TRUE(torch::equal(back.get("a"), td.get("a")));
  }
}

TEST(HugePagesTest, ALargeConsolidatedDictMovesToSharedMemory) {
  TensorDict td({}, {2});
  td.set("a", torch::randn({2, 1 << 21}));  // 16 MiB
  TensorDict c = td.consolidate();
  ASSERT_FALSE(c.consolidated_storage().storage().resizable());
  c.share_memory_();
  EXPECT_TRUE(c.is_shared());
  EXPECT_TRUE(tensordict::detail::tensor_is_shared(c.get("a")));
  EXPECT_TRUE(torch::equal(c.get("a"), td.get("a")));
}

}  // namespace huge_pages_test
