// See instructions.h.

#include "instructions.h"

#include <valgrind/callgrind.h>

#include <cstdio>
#include <utility>
#include <vector>

namespace tensordict_bench {
namespace {

// Warm-up calls resolve symbols and fill caches that a steady state has.
constexpr int kWarmup = 3;
constexpr int kRuns = 20;

std::vector<std::pair<std::string, OpFactory>>& registry() {
  static std::vector<std::pair<std::string, OpFactory>> ops;
  return ops;
}

}  // namespace

void register_instruction_op(std::string name, OpFactory make) {
  registry().emplace_back(std::move(name), std::move(make));
}

int run_instruction_counts() {
  if (RUNNING_ON_VALGRIND == 0) {
    std::fprintf(
        stderr,
        "--instructions counts under callgrind: run benchmarks/"
        "instructions.py (valgrind --tool=callgrind --instr-atstart=no)\n");
    return 2;
  }
  CALLGRIND_START_INSTRUMENTATION;
  for (const auto& [name, make] : registry()) {
    const std::function<void()> run = make();
    for (int i = 0; i < kWarmup; ++i) {
      run();
    }
    CALLGRIND_ZERO_STATS;
    for (int i = 0; i < kRuns; ++i) {
      run();
    }
    // The dump's description carries the op and the number of runs.
    const std::string label = name + " runs=" + std::to_string(kRuns);
    CALLGRIND_DUMP_STATS_AT(label.c_str());
  }
  CALLGRIND_STOP_INSTRUMENTATION;
  return 0;
}

}  // namespace tensordict_bench
