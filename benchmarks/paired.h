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
#include <utility>
#include <vector>

namespace tensordict_bench {

/// CPU seconds of the calling thread (the rows' sides run on it).
inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// The median of `v` (0 for none).
inline double median_of(std::vector<double> v) {
  if (v.empty()) {
    return 0.0;
  }
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) {
    return *mid;
  }
  return (*mid + *std::max_element(v.begin(), mid)) / 2;
}

/// Runs `cpp()` and `raw()` twice each per iteration, times the second
/// call of each on the thread's CPU clock and sets the counters `cpp_over_raw`
/// (the median of the per-pair ratios), `cpp_us` and `raw_us` (the medians of
/// each side, microseconds) and `pairs`. With `split`, `inner()` returns the
/// thread's running total of seconds spent in a part both sides call (timed
/// by the caller), and the counters `inner_ratio` and `rest_ratio` are the
/// medians of the per-pair ratios of the time in that part and outside it.
template <class Cpp, class Raw, class Inner>
void run_paired_split(
    benchmark::State& state, Cpp&& cpp, Raw&& raw, Inner&& inner, bool split) {
  std::vector<double> ratios;
  std::vector<double> cpp_seconds;
  std::vector<double> raw_seconds;
  std::vector<double> inner_ratios;
  std::vector<double> rest_ratios;
  bool cpp_first = true;
  for (auto _ : state) {
    // {total, inner} seconds of the timed call.
    const auto timed = [&](auto& side) {
      side();
      const double inner_start = inner();
      const double start = thread_cpu_seconds();
      side();
      const double total = thread_cpu_seconds() - start;
      return std::pair<double, double>{total, inner() - inner_start};
    };
    std::pair<double, double> c;
    std::pair<double, double> r;
    if (cpp_first) {
      c = timed(cpp);
      r = timed(raw);
    } else {
      r = timed(raw);
      c = timed(cpp);
    }
    cpp_first = !cpp_first;
    cpp_seconds.push_back(c.first);
    raw_seconds.push_back(r.first);
    ratios.push_back(c.first / r.first);
    if (split) {
      inner_ratios.push_back(c.second / r.second);
      rest_ratios.push_back((c.first - c.second) / (r.first - r.second));
    }
  }
  state.counters["cpp_over_raw"] = median_of(ratios);
  state.counters["cpp_us"] = median_of(cpp_seconds) * 1e6;
  state.counters["raw_us"] = median_of(raw_seconds) * 1e6;
  state.counters["pairs"] = static_cast<double>(ratios.size());
  if (split) {
    state.counters["inner_ratio"] = median_of(inner_ratios);
    state.counters["rest_ratio"] = median_of(rest_ratios);
  }
}

/// `run_paired_split` without a part.
template <class Cpp, class Raw>
void run_paired(benchmark::State& state, Cpp&& cpp, Raw&& raw) {
  run_paired_split(
      state, cpp, raw, [] { return 0.0; }, false);
}

/// The collector rows' pairs: `collector.next()` against `loop.batch()`,
/// after one untimed call of each (the collector's first batch resets the
/// env); `frames` per batch. With `split`, as `run_paired_split`.
template <class Collector, class Loop, class Inner>
void run_paired_batches_split(
    benchmark::State& state,
    Collector& collector,
    Loop& loop,
    int64_t frames,
    Inner&& inner,
    bool split) {
  benchmark::DoNotOptimize(collector.next());
  loop.batch();
  run_paired_split(
      state,
      [&] { benchmark::DoNotOptimize(collector.next()); },
      [&] {
        loop.batch();
        benchmark::ClobberMemory();
      },
      inner,
      split);
  // Four batches an iteration: a side's untimed call and its timed one.
  state.SetItemsProcessed(state.iterations() * frames * 4);
}

/// `run_paired_batches_split` without a part.
template <class Collector, class Loop>
void run_paired_batches(
    benchmark::State& state, Collector& collector, Loop& loop, int64_t frames) {
  run_paired_batches_split(
      state, collector, loop, frames, [] { return 0.0; }, false);
}

}  // namespace tensordict_bench
