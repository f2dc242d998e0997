// TensorDict::map and map_iter (tensordict/map.h). Expected shapes, chunk
// sizes and messages were checked against Python tensordict 0.15's td.map.
#include <sys/stat.h>
#include <tensordict/map.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace map_test {

using namespace tensordict;           // NOLINT(google-build-using-namespace)
using namespace tensordict::testing;  // NOLINT(google-build-using-namespace)

namespace {

// x = 0..n-1 (float), batch [n].
TensorDict make_td(int64_t n = 10) {
  return TensorDict({{"x", torch::arange(n, torch::kFloat)}}, {n});
}

// Python's `td.empty().set("y", td["x"] * 2)`.
TensorDict doubled(const TensorDict& chunk) {
  TensorDict out = chunk.empty();
  out.set("y", chunk.get("x") * 2);
  return out;
}

// Records the batch size of every chunk fn sees, thread-safely.
struct ChunkSizes {
  std::mutex mutex;
  std::vector<std::vector<int64_t>> sizes;

  void add(const TensorDict& chunk) {
    std::lock_guard<std::mutex> lock(mutex);
    sizes.push_back(chunk.batch_size().vec());
  }
  std::vector<std::vector<int64_t>> sorted() {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<std::vector<int64_t>> out = sizes;
    std::sort(out.begin(), out.end());
    return out;
  }
};

// Maps `doubled` over `td`, recording the batch size of each chunk.
TensorDict map_doubled(
    const TensorDict& td, const MapOptions& options, ChunkSizes& seen) {
  return td.map(
      [&](const TensorDict& chunk) {
        seen.add(chunk);
        return doubled(chunk);
      },
      options);
}

// The bytes a file occupies on disk.
int64_t disk_usage(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(stat(path.c_str(), &info), 0) << path;
  return static_cast<int64_t>(info.st_blocks) * 512;
}

// Returns what(), without c10's backtrace.
std::string message_of(const c10::Error& e) {
  return e.what_without_backtrace();
}

}  // namespace

// Python: td.map(f, num_workers=2, chunksize=0) -> batch [10], y = 2 * x.
TEST(MapTest, ChunksizeZeroPassesElementsOneByOneAndStacksTheResults) {
  ChunkSizes seen;
  const TensorDict result =
      map_doubled(make_td(), MapOptions().num_workers(2).chunksize(0), seen);
  EXPECT_EQ(result.batch_size(), std::vector<int64_t>({10}));
  EXPECT_TRUE(torch::equal(result.get("y"), torch::arange(10.) * 2));
  EXPECT_EQ(
      seen.sorted(),
      std::vector<std::vector<int64_t>>(10, std::vector<int64_t>{}));
}

TEST(MapTest, ChunksizeCutsSlicesAndConcatenatesTheResultsInOrder) {
  ChunkSizes seen;
  const TensorDict result =
      map_doubled(make_td(), MapOptions().num_workers(2).chunksize(3), seen);
  EXPECT_EQ(result.batch_size(), std::vector<int64_t>({10}));
  EXPECT_TRUE(torch::equal(result.get("y"), torch::arange(10.) * 2));
  EXPECT_EQ(
      seen.sorted(), (std::vector<std::vector<int64_t>>{{1}, {3}, {3}, {3}}));
}

// torch.chunk: 4 chunks of 10 are 3, 3, 3, 1; 20 chunks of 10 are 10 of 1;
// neither option gives one chunk per worker.
TEST(MapTest, NumChunksSplitsAsTorchChunkAndDefaultsToOnePerWorker) {
  for (const auto& [options, expected] :
       std::vector<std::pair<MapOptions, std::vector<std::vector<int64_t>>>>{
           {MapOptions().num_workers(2).num_chunks(4), {{1}, {3}, {3}, {3}}},
           {MapOptions().num_workers(2).num_chunks(20),
            std::vector<std::vector<int64_t>>(10, {1})},
           {MapOptions().num_workers(2), {{5}, {5}}},
           {MapOptions().num_workers(3), {{2}, {4}, {4}}},
       }) {
    ChunkSizes seen;
    const TensorDict result = map_doubled(make_td(), options, seen);
    EXPECT_TRUE(torch::equal(result.get("y"), torch::arange(10.) * 2));
    EXPECT_EQ(seen.sorted(), expected);
  }
}

// Python: dim=1 with chunksize=0 gives batch [3, 4]; dim=-1 chunksize 3 too.
TEST(MapTest, SplitsAlongTheGivenDim) {
  const TensorDict td(
      {{"x", torch::arange(12, torch::kFloat).view({3, 4})}}, {3, 4});
  ChunkSizes seen;
  const TensorDict by_item =
      map_doubled(td, MapOptions().dim(1).num_workers(2).chunksize(0), seen);
  EXPECT_EQ(by_item.batch_size(), std::vector<int64_t>({3, 4}));
  EXPECT_TRUE(torch::equal(by_item.get("y"), td.get("x") * 2));
  EXPECT_EQ(seen.sorted(), std::vector<std::vector<int64_t>>(4, {3}));

  const TensorDict by_slice =
      td.map(doubled, MapOptions().dim(-1).num_workers(2).chunksize(3));
  EXPECT_EQ(by_slice.batch_size(), std::vector<int64_t>({3, 4}));
  EXPECT_TRUE(torch::equal(by_slice.get("y"), td.get("x") * 2));
}

// The seed's preprocessing: fn returns nothing and writes with set_ into
// the chunk, a view of a memory-mapped dict.
TEST(MapTest, VoidFnWorksInPlaceOnAMemmappedDict) {
  TempDir dir;
  TensorDict data = TensorDict(
                        {{"images", torch::zeros({2, 2}, torch::kUInt8)},
                         {"labels", torch::zeros({}, torch::kInt)}},
                        {})
                        .expand({20})
                        .memmap_like(tensordict::MemmapOptions(dir.str()));
  data.map(
      [](TensorDict& chunk) {
        chunk.set_("images", chunk.get("images") + 7);
        chunk.set_("labels", torch::full(chunk.batch_size(), 42, torch::kInt));
      },
      MapOptions().num_workers(2).chunksize(3));
  EXPECT_TRUE(torch::equal(
      data.get("images"), torch::full({20, 2, 2}, 7, torch::kUInt8)));
  EXPECT_TRUE(
      torch::equal(data.get("labels"), torch::full({20}, 42, torch::kInt)));
  const TensorDict back = TensorDict::load_memmap(dir.str());
  EXPECT_TRUE(
      torch::equal(back.get("labels"), torch::full({20}, 42, torch::kInt)));
}

// Python returns None when every chunk returns None, and joins the others.
TEST(MapTest, OptionalFnJoinsTheResultsItGot) {
  const auto none = make_td().map(
      [](const TensorDict&) -> std::optional<TensorDict> {
        return std::nullopt;
      },
      MapOptions().num_workers(2).chunksize(2));
  EXPECT_FALSE(none.has_value());
  const auto some = make_td().map(
      [](const TensorDict& chunk) -> std::optional<TensorDict> {
        if (chunk.get("x")[0].item<float>() >= 4) {
          return std::nullopt;
        }
        return doubled(chunk);
      },
      MapOptions().num_workers(2).chunksize(2));
  ASSERT_TRUE(some.has_value());
  EXPECT_TRUE(torch::equal(some->get("y"), torch::arange(4.) * 2));
}

TEST(MapTest, OutReceivesTheResultsAndIsReturned) {
  TempDir dir;
  for (const int64_t chunksize : {0, 3}) {
    const TensorDict out =
        TensorDict({{"y", torch::zeros({10})}}, {10})
            .memmap(tensordict::MemmapOptions(dir / std::to_string(chunksize)));
    const TensorDict result = make_td().map(
        doubled, MapOptions().num_workers(2).chunksize(chunksize).out(out));
    EXPECT_TRUE(result.is_same(out));
    EXPECT_TRUE(torch::equal(out.get("y"), torch::arange(10.) * 2));
  }
}

TEST(MapTest, EmptyDimMapsNothing) {
  const TensorDict empty({{"x", torch::zeros({0})}}, {0});
  const auto none = empty.map(
      [](const TensorDict& chunk) -> std::optional<TensorDict> {
        return chunk;
      },
      MapOptions().num_workers(2).chunksize(0));
  EXPECT_FALSE(none.has_value());
  EXPECT_THROWS_WITH(
      empty.map(doubled, MapOptions().num_workers(2)),
      c10::ValueError,
      "map: nothing to join: dim 0 of the dict has size 0");
}

TEST(MapTest, RejectsInconsistentOptions) {
  const TensorDict td = make_td();
  EXPECT_THROWS_WITH(
      td.map(doubled, MapOptions().chunksize(2).num_chunks(2)),
      c10::ValueError,
      "Either chunksize or num_chunks must be provided, but not both.");
  EXPECT_THROWS_WITH(
      td.map(doubled, MapOptions().num_workers(0)),
      c10::ValueError,
      "map: num_workers must be at least 1, got 0");
  EXPECT_THROWS_WITH(
      td.map(doubled, MapOptions().chunksize(-1)),
      c10::ValueError,
      "map: chunksize must be 0 or more, got -1");
  EXPECT_THROWS_WITH(
      td.map(doubled, MapOptions().num_chunks(0)),
      c10::ValueError,
      "map: num_chunks must be positive, got 0");
  EXPECT_THROWS_WITH(
      td.map(doubled, MapOptions().worker_threads(0)),
      c10::ValueError,
      "map: worker_threads must be at least 1, got 0");
  // Python's text.
  EXPECT_THROWS_WITH(
      TensorDict({{"x", torch::zeros({3, 4})}}, {3, 4})
          .map(doubled, MapOptions().dim(2)),
      c10::IndexError,
      "Incompatible dim 2 for tensordict with shape torch.Size([3, 4]).");
  EXPECT_THROWS_WITH(
      td.map(doubled, MapOptions().shuffle(true)),
      c10::ValueError,
      "map: shuffle is an option of map_iter only");
  EXPECT_THROWS_WITH(
      td.map_iter(doubled, MapOptions().out(td)),
      c10::ValueError,
      "map_iter: out is an option of map only");
  EXPECT_THROWS_WITH(
      td.map(
          doubled,
          MapOptions().out(TensorDict({{"y", torch::zeros({4})}}, {4}))),
      c10::ValueError,
      "map: out has batch size [4], but the dict has 10 elements along dim 0");
}

// One worker takes the chunks in order, so the failing chunk is the last
// one to run and `out` holds exactly the chunks before it.
TEST(MapTest, AnExceptionStopsTheMapWithTheChunksRangeAndOutKeepsDoneChunks) {
  const TensorDict out = TensorDict({{"y", torch::full({10}, -1.)}}, {10});
  std::atomic<int> calls{0};
  try {
    (void)make_td().map(
        [&](const TensorDict& chunk) {
          ++calls;
          TORCH_CHECK_VALUE(chunk.get("x")[0].item<float>() < 4, "boom");
          return doubled(chunk);
        },
        MapOptions().num_workers(1).chunksize(2).out(out));
    ADD_FAILURE() << "map did not throw";
  } catch (const c10::ValueError& e) {  // the type is kept, as in Python
    EXPECT_EQ(e.msg(), "boom");
    EXPECT_NE(
        message_of(e).find(
            "while mapping chunk 2 of 5 (items [4, 6)) along dim 0"),
        std::string::npos)
        << message_of(e);
  }
  EXPECT_EQ(calls.load(), 3);
  EXPECT_TRUE(torch::equal(
      out.get("y"),
      torch::tensor({0., 2., 4., 6., -1., -1., -1., -1., -1., -1.})));
}

TEST(MapTest, AStdExceptionBecomesAC10ErrorThatNestsIt) {
  try {
    (void)make_td().map(
        [](const TensorDict& chunk) -> TensorDict {
          if (chunk.get("x").item<float>() == 7) {
            throw std::runtime_error("bad item");
          }
          return chunk;
        },
        MapOptions().num_workers(2).chunksize(0));
    ADD_FAILURE() << "map did not throw";
  } catch (const c10::Error& e) {
    EXPECT_NE(
        message_of(e).find("map: fn threw: bad item\nwhile mapping chunk 7 of "
                           "10 (item 7) along dim 0"),
        std::string::npos)
        << message_of(e);
    try {
      std::rethrow_if_nested(e);
      ADD_FAILURE() << "no nested exception";
    } catch (const std::runtime_error& inner) {
      EXPECT_STREQ(inner.what(), "bad item");
    }
  }
}

TEST(MapTest, CancellationStopsTheWorkersAndThrowsMapCancelled) {
  std::atomic<bool> cancel{false};
  const TensorDict out = TensorDict({{"y", torch::full({10}, -1.)}}, {10});
  EXPECT_THROWS_WITH(
      make_td().map(
          [&](const TensorDict& chunk) {
            if (chunk.get("x")[0].item<float>() == 4) {
              cancel = true;  // as a SIGINT handler would
            }
            return doubled(chunk);
          },
          MapOptions().num_workers(1).chunksize(2).out(out).cancel(&cancel)),
      MapCancelled,
      "map was cancelled after 3 of 5 chunks");
  EXPECT_TRUE(torch::equal(
      out.get("y"),
      torch::tensor({0., 2., 4., 6., 8., 10., -1., -1., -1., -1.})));
}

// The first two chunks wait for each other: they can only both finish if
// two workers run them at the same time.
TEST(MapTest, WorkersRunChunksConcurrently) {
  std::atomic<int> started{0};
  std::atomic<bool> met{false};
  (void)make_td(2).map(
      [&](const TensorDict& chunk) {
        ++started;
        const auto deadline =
            std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (started.load() < 2 &&
               std::chrono::steady_clock::now() < deadline) {
          std::this_thread::yield();
        }
        if (started.load() >= 2) {
          met = true;
        }
        return chunk;
      },
      MapOptions().num_workers(2).chunksize(1));
  EXPECT_TRUE(met.load());
}

TEST(MapTest, WorkersGetTheCallersGradModeAndTheirOwnIntraOpThreads) {
  const int before = at::get_num_threads();
  std::atomic<int> worker_threads{-1};
  std::atomic<bool> grad_enabled{true};
  {
    torch::NoGradGuard no_grad;
    make_td().map(
        [&](const TensorDict&) {
          worker_threads = at::get_num_threads();
          grad_enabled = torch::GradMode::is_enabled();
        },
        MapOptions().num_workers(2).worker_threads(before + 1));
  }
  EXPECT_EQ(worker_threads.load(), before + 1);
  EXPECT_FALSE(grad_enabled.load());
  EXPECT_EQ(at::get_num_threads(), before);
  // By default the caller's threads are divided among the workers.
  make_td().map(
      [&](const TensorDict&) { worker_threads = at::get_num_threads(); },
      MapOptions().num_workers(2));
  EXPECT_EQ(worker_threads.load(), std::max(before / 2, 1));
  EXPECT_EQ(at::get_num_threads(), before);
}

TEST(MapTest, ProgressCallbackRunsOnTheCallerAndEndsWithEverything) {
  std::vector<MapProgress> reports;
  const auto caller = std::this_thread::get_id();
  bool on_caller = true;
  (void)make_td(100).map(
      doubled,
      MapOptions()
          .num_workers(2)
          .chunksize(7)
          .pbar(true)  // draws only when stderr is a terminal
          .progress([&](const MapProgress& progress) {
            on_caller = on_caller && std::this_thread::get_id() == caller;
            reports.push_back(progress);
          }));
  ASSERT_FALSE(reports.empty());
  EXPECT_TRUE(on_caller);
  EXPECT_EQ(reports.back().items_done, 100);
  EXPECT_EQ(reports.back().items_total, 100);
  EXPECT_EQ(reports.back().chunks_done, 15);
  EXPECT_EQ(reports.back().chunks_total, 15);
  for (size_t i = 1; i < reports.size(); ++i) {
    EXPECT_LE(reports[i - 1].items_done, reports[i].items_done);
  }
}

TEST(MapTest, ProgressLineShowsPercentBarCountRateAndEta) {
  MapProgress progress;
  progress.items_done = 45000;
  progress.items_total = 100000;
  progress.elapsed_seconds = 5;
  // 9000 items/s, 55000 left: 6.1 s.
  EXPECT_EQ(
      progress.to_string(60),
      " 45% [#########           ] 45000/100000 9.00k it/s ETA 0:06");
  EXPECT_EQ(progress.to_string(60).size(), 60u);
  // Too narrow for a bar: the text alone.
  EXPECT_EQ(progress.to_string(20), " 45% 45000/100000 9.00k it/s ETA 0:06");
  progress.items_done = 0;
  progress.elapsed_seconds = 0;
  EXPECT_EQ(progress.to_string(39), "  0% [          ] 0/100000 ? it/s ETA ?");
  progress.items_done = 3;
  progress.items_total = 7200;
  progress.elapsed_seconds = 3;  // 1 item/s: 7197 s left
  EXPECT_EQ(progress.to_string(20), "  0% 3/7200 1.00 it/s ETA 1:59:57");
  progress.items_done = 7200;
  progress.elapsed_seconds = 0.5;
  EXPECT_EQ(
      progress.to_string(48),
      "100% [##########] 7200/7200 14.40k it/s ETA 0:00");
}

// The seed's dataset workflow (examples/dataset.cpp) at test scale: 600,000
// items of uint8[128, 128, 3] allocated with memmap_like (29 GB apparent),
// the first 256 filled and preprocessed by map on two workers.
TEST(MapTest, SeedDatasetWorkflowStaysSparseOnDisk) {
  TempDir dir;
  const int64_t n = 600000;
  const int64_t processed = 256;
  TensorDict data = TensorDict(
                        {{"images", torch::zeros({128, 128, 3}, torch::kUInt8)},
                         {"labels", torch::zeros({}, torch::kLong)}},
                        {})
                        .expand({n})
                        .memmap_like(tensordict::MemmapOptions(dir.str()));
  const std::string images_file = dir / "images.memmap";
  const int64_t item_bytes = 128 * 128 * 3;
  EXPECT_EQ(
      static_cast<int64_t>(std::filesystem::file_size(images_file)),
      n * item_bytes);
  EXPECT_LT(disk_usage(images_file), 1 << 20);

  data.get("labels").copy_(torch::arange(n));
  TensorDict part = data.narrow(0, 0, processed);
  const MapOptions options = MapOptions().num_workers(2).chunksize(100);
  part.map(
      [](TensorDict& chunk) {
        const at::Tensor labels = chunk.get("labels").view({-1, 1, 1, 1});
        const at::Tensor w = torch::arange(128).view({1, 1, 128, 1});
        chunk.set_(
            "images",
            ((labels + w) % 251).to(torch::kUInt8).expand({-1, 128, 128, 3}));
      },
      options);
  part.map(
      [](TensorDict& chunk) {
        chunk.set_("images", chunk.get("images").flip(-2));
        chunk.set_("labels", chunk.get("labels").div(10, "floor"));
      },
      options);
  // Only the processed items' pages were written.
  EXPECT_LT(disk_usage(images_file), processed * item_bytes + (1 << 20));

  const TensorDict items = data.index({torch::tensor({1, 10000, 500000})});
  EXPECT_EQ(items.batch_size(), std::vector<int64_t>({3}));
  EXPECT_TRUE(
      torch::equal(items.get("labels"), torch::tensor({0, 10000, 500000})));
  // Item 1, flipped along w: pixel (h, w, c) = (1 + 127 - w) % 251.
  const at::Tensor w = torch::arange(128);
  const at::Tensor expected = ((128 - w) % 251)
                                  .to(torch::kUInt8)
                                  .view({1, 128, 1})
                                  .expand({128, 128, 3});
  EXPECT_TRUE(torch::equal(items.get("images")[0], expected));
  EXPECT_EQ(
      items.get("images")
          .index({torch::indexing::Slice(1)})
          .count_nonzero()
          .item<int64_t>(),
      0);
}

// Python: map_iter(f, chunksize=4) yields [0, 2, 4, 6], [8, 10, 12, 14],
// [16, 18] in order.
TEST(MapIterTest, YieldsTheResultsInChunkOrder) {
  std::vector<std::vector<float>> got;
  for (const TensorDict& result :
       make_td().map_iter(doubled, MapOptions().num_workers(2).chunksize(4))) {
    const at::Tensor y = result.get("y");
    got.emplace_back(y.data_ptr<float>(), y.data_ptr<float>() + y.numel());
  }
  EXPECT_EQ(
      got,
      (std::vector<std::vector<float>>{
          {0, 2, 4, 6}, {8, 10, 12, 14}, {16, 18}}));
}

TEST(MapIterTest, ShuffleCoversEveryElementOnce) {
  std::vector<float> got;
  MapIterator results = make_td(50).map_iter(
      doubled, MapOptions().num_workers(2).chunksize(4).shuffle(true));
  while (std::optional<TensorDict> result = results.next()) {
    EXPECT_LE(result->batch_size()[0], 4);
    const at::Tensor y = result->get("y");
    got.insert(got.end(), y.data_ptr<float>(), y.data_ptr<float>() + y.numel());
  }
  EXPECT_FALSE(results.next().has_value());
  std::sort(got.begin(), got.end());
  std::vector<float> expected;
  for (int i = 0; i < 50; ++i) {
    expected.push_back(2.f * static_cast<float>(i));
  }
  EXPECT_EQ(got, expected);
}

TEST(MapIterTest, StoppingEarlyJoinsTheWorkersAndRestoresThreads) {
  const int before = at::get_num_threads();
  std::atomic<int> calls{0};
  {
    MapIterator results = make_td(1000).map_iter(
        [&](const TensorDict& chunk) {
          ++calls;
          return chunk;
        },
        MapOptions().num_workers(2).chunksize(0).worker_threads(before + 1));
    ASSERT_TRUE(results.next().has_value());
  }
  // At most the window (2 * workers) ahead of the one result taken, plus
  // the chunks the workers had claimed.
  EXPECT_LE(calls.load(), 8);
  EXPECT_EQ(at::get_num_threads(), before);
}

TEST(MapIterTest, YieldsTheResultsBeforeAFailureThenThrows) {
  MapIterator results = make_td().map_iter(
      [](const TensorDict& chunk) {
        TORCH_CHECK_VALUE(chunk.get("x")[0].item<float>() < 6, "boom");
        return doubled(chunk);
      },
      MapOptions().num_workers(2).chunksize(3));
  ASSERT_TRUE(results.next().has_value());
  ASSERT_TRUE(results.next().has_value());
  EXPECT_THROWS_WITH(results.next(), c10::ValueError, "boom");
}

// The flag is set from a thread of the caller's while two workers are
// inside fn: both finish their chunk, neither starts another.
TEST(MapTest, CancellationFromAnotherThreadStopsEveryWorker) {
  std::atomic<bool> cancel{false};
  std::atomic<int> started{0};
  std::thread canceller([&] {
    while (started.load() < 2) {
      std::this_thread::yield();
    }
    cancel = true;
  });
  EXPECT_THROWS_WITH(
      make_td().map(
          [&](const TensorDict& chunk) {
            ++started;
            while (!cancel.load()) {
              std::this_thread::yield();
            }
            return doubled(chunk);
          },
          MapOptions().num_workers(2).chunksize(1).cancel(&cancel)),
      MapCancelled,
      "map was cancelled after 2 of 10 chunks");
  canceller.join();
}

// Two workers fail at once: the error of the earlier chunk wins, as in a
// serial loop, whichever thread threw first.
TEST(MapTest, TwoFailingWorkersReportTheEarlierChunk) {
  std::atomic<int> started{0};
  EXPECT_THROWS_WITH(
      make_td(4).map(
          [&](const TensorDict& chunk) -> TensorDict {
            ++started;
            while (started.load() < 2) {
              std::this_thread::yield();
            }
            throw std::runtime_error(
                "bad " + std::to_string(chunk.get("x")[0].item<int>()));
          },
          MapOptions().num_workers(2).chunksize(1)),
      c10::Error,
      "map: fn threw: bad 0");
}

}  // namespace map_test
