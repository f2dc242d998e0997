// Runs every benchmark the files of this directory register (each file
// registers its own at static initialization, so adding a file adds its
// benchmarks without touching this one). `--instructions` counts the
// per-leaf ops' instructions under callgrind instead (instructions.h).

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cstring>

#include "instructions.h"

int main(int argc, char** argv) {
  // One intra-op thread, here and in the Python scripts, so both sides do
  // the same work the same way.
  at::set_num_threads(1);
  torch::manual_seed(0);
  if (argc == 2 && std::strcmp(argv[1], "--instructions") == 0) {
    return tensordict_bench::run_instruction_counts();
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
