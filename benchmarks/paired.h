// Paired timing: a C++ side and its raw baseline run back to back in each
// iteration, and the row reports the median of the per-pair ratios. On a
// shared VM the speed of the machine drifts over seconds (other tenants),
// so two medians taken minutes apart can differ by more than the effect
// measured; the two sides of a pair run milliseconds apart and see the
// same machine, and the median over many pairs drops the pairs a burst
// hit. What runs on the other core still matters: it shares the caches
// and memory bandwidth, and can move the ratio itself. Each timed call
// follows an untimed call of the same side, so that it starts with its own
// data in the caches, as in a row of its own; the order of the sides
// alternates from pair to pair.

#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <vector>

namespace tensordict_bench {

/// CPU seconds of the calling thread (the rows' sides run on it).
inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// Runs `cpp()` and `raw()` twice each per iteration, times the second
/// call of each on the thread's CPU clock and sets the counters `cpp_over_raw`
/// (the median of the per-pair ratios), `cpp_us` and `raw_us` (the medians of
/// each side, microseconds) and `pairs`.
template <class Cpp, class Raw>
void run_paired(benchmark::State& state, Cpp&& cpp, Raw&& raw) {
  std::vector<double> ratios;
  std::vector<double> cpp_seconds;
  std::vector<double> raw_seconds;
  bool cpp_first = true;
  for (auto _ : state) {
    double c = 0;
    double r = 0;
    const auto timed = [](auto& side) {
      side();
      const double start = thread_cpu_seconds();
      side();
      return thread_cpu_seconds() - start;
    };
    if (cpp_first) {
      c = timed(cpp);
      r = timed(raw);
    } else {
      r = timed(raw);
      c = timed(cpp);
    }
    cpp_first = !cpp_first;
    cpp_seconds.push_back(c);
    raw_seconds.push_back(r);
    ratios.push_back(c / r);
  }
  const auto median = [](std::vector<double> v) {
    if (v.empty()) {
      return 0.0;
    }
    const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    if (v.size() % 2 == 1) {
      return *mid;
    }
    return (*mid + *std::max_element(v.begin(), mid)) / 2;
  };
  state.counters["cpp_over_raw"] = median(ratios);
  state.counters["cpp_us"] = median(cpp_seconds) * 1e6;
  state.counters["raw_us"] = median(raw_seconds) * 1e6;
  state.counters["pairs"] = static_cast<double>(ratios.size());
}

/// The collector rows' pairs: `collector.next()` against `loop.batch()`,
/// after one untimed call of each (the collector's first batch resets the
/// env); `frames` per batch.
template <class Collector, class Loop>
void run_paired_batches(
    benchmark::State& state, Collector& collector, Loop& loop, int64_t frames) {
  benchmark::DoNotOptimize(collector.next());
  loop.batch();
  run_paired(
      state,
      [&] { benchmark::DoNotOptimize(collector.next()); },
      [&] {
        loop.batch();
        benchmark::ClobberMemory();
      });
  // Four batches an iteration: a side's untimed call and its timed one.
  state.SetItemsProcessed(state.iterations() * frames * 4);
}

}  // namespace tensordict_bench
