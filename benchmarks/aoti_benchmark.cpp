// Benchmarks of an AOTInductor package run as a TensorDict module: the
// AOTIModule call on a dict (<op>/cpp: key lookups, the checks against the
// package's metadata, writing the outputs back) against the raw loader call
// on the same tensors (<op>/raw: AOTIModelPackageLoader::run, through
// AOTIModuleImpl::run). The package is tests/python/aoti_packages.py's
// sequential.pt2 (two nested inputs, two outputs, batch 5); `make bench`
// exports it and sets TENSORDICT_AOTI_PACKAGES, without which nothing is
// registered. The Python side (eager TensorDictSequential, and torch's own
// package loader called with keyword tensors) is python_aoti.py.

#include <benchmark/benchmark.h>
#include <tensordict/aoti.h>
#include <tensordict/memmap.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace {

using tensordict::TensorDict;

std::string package_dir() {
  const char* dir = std::getenv("TENSORDICT_AOTI_PACKAGES");
  return dir == nullptr ? std::string() : std::string(dir);
}

void register_aoti(const std::string& op) {
  const std::string dir = package_dir();
  if (dir.empty()) {
    return;
  }
  benchmark::RegisterBenchmark(
      (op + "/cpp").c_str(), [dir](benchmark::State& state) {
        torch::NoGradGuard no_grad;
        tensordict::nn::AOTIModule module(dir + "/sequential.pt2");
        const TensorDict inputs =
            TensorDict::load_memmap(dir + "/sequential_inputs_5").clone();
        for (auto _ : state) {
          // A fresh dict per call, as a server builds one per request.
          TensorDict td = inputs.copy();
          benchmark::DoNotOptimize(module(td));
        }
      });
  benchmark::RegisterBenchmark(
      (op + "/raw").c_str(), [dir](benchmark::State& state) {
        torch::NoGradGuard no_grad;
        tensordict::nn::AOTIModule module(dir + "/sequential.pt2");
        const TensorDict inputs =
            TensorDict::load_memmap(dir + "/sequential_inputs_5").clone();
        const std::vector<at::Tensor> tensors = {
            inputs.get({"obs", "x"}), inputs.get({"obs", "y"})};
        for (auto _ : state) {
          benchmark::DoNotOptimize(module->run(tensors));
        }
      });
}

void register_all() {
  // Two ops with the same C++ sides: the Python script times eager modules
  // for the first and torch's package loader for the second.
  register_aoti("aoti_call");
  register_aoti("aoti_call_pt2");
}

[[maybe_unused]] const bool registered = (register_all(), true);

}  // namespace
