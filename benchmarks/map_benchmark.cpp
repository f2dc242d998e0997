// Benchmarks of TensorDict::map over 100,000 small items, one at a time
// (chunksize 0) and in chunks of 1000, on one and on two worker threads;
// the baseline (`raw`) is the same work in a plain loop on the calling
// thread. The Python side is python_map.py (td.map, worker processes).
// main.cpp sets one intra-op thread, so each worker runs one, as Python's
// default worker_threads=1 does.

#include <benchmark/benchmark.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <string>
#include <vector>

namespace {

using tensordict::MapOptions;
using tensordict::TensorDict;

constexpr int64_t kItems = 100000;

// 100,000 items: x float32 [16], y int64.
TensorDict items() {
  return TensorDict(
      {{"x", torch::randn({kItems, 16})},
       {"y", torch::arange(kItems, torch::kLong)}},
      {kItems});
}

// The per-chunk work, as python_map.py's `process`.
TensorDict process(const TensorDict& chunk) {
  TensorDict out = chunk.empty();
  const at::Tensor x = chunk.get("x");
  out.set("z", (x.sin() * x.cos()).sum(-1) + chunk.get("y"));
  return out;
}

void register_map(int64_t chunksize, int64_t workers) {
  const std::string op =
      "map_chunk" + std::to_string(chunksize) + "_w" + std::to_string(workers);
  benchmark::RegisterBenchmark(
      (op + "/cpp").c_str(),
      [=](benchmark::State& state) {
        const TensorDict td = items();
        for (auto _ : state) {
          benchmark::DoNotOptimize(td.map(
              process, MapOptions().num_workers(workers).chunksize(chunksize)));
        }
      })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark(
      (op + "/raw").c_str(),
      [=](benchmark::State& state) {
        const TensorDict td = items();
        for (auto _ : state) {
          std::vector<TensorDict> results;
          if (chunksize == 0) {
            for (const TensorDict& item : td.unbind(0)) {
              results.push_back(process(item));
            }
            benchmark::DoNotOptimize(tensordict::stack(results));
          } else {
            for (const TensorDict& chunk : td.split(chunksize)) {
              results.push_back(process(chunk));
            }
            benchmark::DoNotOptimize(tensordict::cat(results));
          }
        }
      })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

void register_all() {
  for (const int64_t chunksize : {0, 1000}) {
    for (const int64_t workers : {1, 2}) {
      register_map(chunksize, workers);
    }
  }
}

[[maybe_unused]] const bool registered = (register_all(), true);

}  // namespace
