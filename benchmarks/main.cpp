// Runs every benchmark the files of this directory register (each file
// registers its own at static initialization, so adding a file adds its
// benchmarks without touching this one).

#include <benchmark/benchmark.h>
#include <torch/torch.h>

int main(int argc, char** argv) {
  // One intra-op thread, here and in the Python scripts, so both sides do
  // the same work the same way.
  at::set_num_threads(1);
  torch::manual_seed(0);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
