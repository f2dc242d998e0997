// Benchmarks of an ensemble of 8 MLPs run through functional_call_vmap
// (<op>/cpp) against the loop over the members that it replaces (<op>/raw:
// each member's parameters swapped into one shell with ScopedModuleSwap,
// outputs stacked). vmap_ensemble is 64 -> 256 -> 256 -> 10 on a batch of
// 128, where the matrix products dominate; vmap_ensemble_small is
// 16 -> 32 -> 32 -> 4 on a batch of 16, where the per-call overhead does.
// Both run without grad, on one intra-op thread (main.cpp). The Python
// side, torch.vmap over params.to_module with tensordict, is python_vmap.py.

#include <benchmark/benchmark.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <string>
#include <vector>

namespace {

using tensordict::TensorDict;

constexpr int64_t kMembers = 8;

struct Sizes {
  int64_t in;
  int64_t hidden;
  int64_t out;
  int64_t batch;
};

torch::nn::Sequential make_mlp(const Sizes& sizes) {
  return torch::nn::Sequential(
      torch::nn::Linear(sizes.in, sizes.hidden),
      torch::nn::ReLU(),
      torch::nn::Linear(sizes.hidden, sizes.hidden),
      torch::nn::ReLU(),
      torch::nn::Linear(sizes.hidden, sizes.out));
}

struct Ensemble {
  explicit Ensemble(const Sizes& sizes)
      : shell(make_mlp(sizes)), x(torch::randn({sizes.batch, sizes.in})) {
    std::vector<TensorDict> params;
    for (int64_t i = 0; i < kMembers; ++i) {
      params.push_back(TensorDict::from_module(*make_mlp(sizes)).detach());
    }
    params_stack = tensordict::stack(params);
  }
  torch::nn::Sequential shell;
  at::Tensor x;
  TensorDict params_stack;
};

void register_ensemble(const std::string& op, const Sizes& sizes) {
  benchmark::RegisterBenchmark(
      (op + "/cpp").c_str(),
      [sizes](benchmark::State& state) {
        torch::NoGradGuard no_grad;
        Ensemble e(sizes);
        for (auto _ : state) {
          benchmark::DoNotOptimize(
              tensordict::functional_call_vmap(e.shell, e.params_stack, e.x));
        }
      })
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(
      (op + "/raw").c_str(),
      [sizes](benchmark::State& state) {
        torch::NoGradGuard no_grad;
        Ensemble e(sizes);
        for (auto _ : state) {
          std::vector<at::Tensor> outputs;
          outputs.reserve(kMembers);
          for (int64_t i = 0; i < kMembers; ++i) {
            tensordict::ScopedModuleSwap swap(
                e.params_stack.index({i}), *e.shell);
            outputs.push_back(e.shell->forward(e.x));
          }
          benchmark::DoNotOptimize(torch::stack(outputs));
        }
      })
      ->Unit(benchmark::kMicrosecond);
}

void register_all() {
  register_ensemble("vmap_ensemble", Sizes{64, 256, 10, 128});
  register_ensemble("vmap_ensemble_small", Sizes{16, 32, 4, 16});
}

[[maybe_unused]] const bool registered = (register_all(), true);

}  // namespace
