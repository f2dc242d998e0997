// The per-thread cache of freed arrays (src/util/array_cache.h), and the
// dict levels whose node and slot arrays come from it.
#include "util/array_cache.h"

#include <cstring>
#include <thread>
#include <vector>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace array_cache_test {

using tensordict::TensorDict;
using tensordict::detail::allocate_array;
using tensordict::detail::cached_array_count;
using tensordict::detail::free_array;
using tensordict::detail::kMaxCachedArrayBytes;
using tensordict::detail::kMaxCachedArrays;
using tensordict::detail::kMinCachedArrayBytes;

namespace {

// Empties the calling thread's cache by asking for what it holds.
void drain() {
  std::vector<std::pair<void*, size_t>> held;
  for (size_t bytes = kMinCachedArrayBytes; cached_array_count() > 0;
       bytes += 8) {
    ASSERT_LE(bytes, kMaxCachedArrayBytes) << "an array of unknown size";
    while (true) {
      const int before = cached_array_count();
      void* p = allocate_array(bytes);
      if (cached_array_count() == before) {
        ::operator delete(p);  // new memory: not what we look for
        break;
      }
      held.emplace_back(p, bytes);
    }
  }
  for (const auto& [p, bytes] : held) {
    ::operator delete(p);
  }
}

}  // namespace

TEST(ArrayCacheTest, AFreedArrayComesBackForTheSameSizeOnly) {
  drain();
  void* a = allocate_array(4096);
  std::memset(a, 7, 4096);
  free_array(a, 4096);
  EXPECT_EQ(cached_array_count(), 1);
  void* other = allocate_array(4096 + 8);  // another size: new memory
  EXPECT_NE(other, a);
  EXPECT_EQ(cached_array_count(), 1);
  void* again = allocate_array(4096);
  EXPECT_EQ(again, a);
  EXPECT_EQ(cached_array_count(), 0);
  free_array(other, 4096 + 8);
  free_array(again, 4096);
  EXPECT_EQ(cached_array_count(), 2);
  drain();
}

TEST(ArrayCacheTest, SmallAndLargeArraysGoStraightBackToMalloc) {
  drain();
  for (const size_t bytes :
       {size_t{16}, kMinCachedArrayBytes - 8, kMaxCachedArrayBytes + 8}) {
    void* p = allocate_array(bytes);
    std::memset(p, 1, bytes);
    free_array(p, bytes);
    EXPECT_EQ(cached_array_count(), 0) << bytes;
  }
  free_array(nullptr, 2048);
  EXPECT_EQ(cached_array_count(), 0);
}

TEST(ArrayCacheTest, AFullCacheFreesItsOldestArray) {
  drain();
  std::vector<void*> arrays;
  for (int i = 0; i < kMaxCachedArrays + 2; ++i) {
    arrays.push_back(allocate_array(kMinCachedArrayBytes + 8 * i));
  }
  for (int i = 0; i < kMaxCachedArrays + 2; ++i) {
    free_array(arrays[i], kMinCachedArrayBytes + 8 * i);
  }
  EXPECT_EQ(cached_array_count(), kMaxCachedArrays);
  // The two oldest were freed; the newest come back.
  const size_t newest = kMinCachedArrayBytes + 8 * (kMaxCachedArrays + 1);
  void* p = allocate_array(newest);
  EXPECT_EQ(p, arrays.back());
  free_array(p, newest);
  drain();
}

TEST(ArrayCacheTest, EachThreadHasItsOwnCacheAndFreesItOnExit) {
  drain();
  std::thread worker([] {
    void* p = allocate_array(8192);
    free_array(p, 8192);
    EXPECT_EQ(cached_array_count(), 1);
  });  // exiting frees the worker's cache
  worker.join();
  EXPECT_EQ(cached_array_count(), 0);
  void* mine = allocate_array(8192);
  EXPECT_EQ(cached_array_count(), 0);
  ::operator delete(mine);
}

TEST(ArrayCacheTest, ADictRebuiltInALoopReusesItsLevelsArrays) {
  // 40 entries: a walk reserves the 40 nodes of a level up front, one
  // array of 40 * 112 bytes that no growth by appends has (64 or 32 nodes).
  TensorDict source({2});
  for (int i = 0; i < 40; ++i) {
    source.set("k" + std::to_string(i), torch::full({2}, i));
  }
  const TensorDict reshaped = source.reshape({1, 2});
  drain();
  (void)reshaped.clone();  // built, dropped: its node array is cached
  const int cached = cached_array_count();
  EXPECT_EQ(cached, 1);
  for (int round = 0; round < 3; ++round) {
    const TensorDict copy = reshaped.clone();
    EXPECT_EQ(cached_array_count(), cached - 1) << round;
    for (int i = 0; i < 40; ++i) {
      const std::string key = "k" + std::to_string(i);
      EXPECT_TRUE(torch::equal(copy.get(key), torch::full({1, 2}, i))) << key;
    }
  }
  EXPECT_EQ(cached_array_count(), cached);
  drain();
}

}  // namespace array_cache_test
