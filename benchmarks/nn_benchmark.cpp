// Benchmarks of tensordict::nn: a TensorDictSequential of 3 Linear layers
// with ReLU between them (16 -> 64 -> 64 -> 4) on a batch of 32, called on a
// dict (<op>/cpp), against the same module objects called on the tensors
// (<op>/raw: each layer's forward, nothing else). Without grad, on one
// intra-op thread (main.cpp). The Python side, tensordict.nn's
// TensorDictSequential on the same work, is python_nn.py.

#include <benchmark/benchmark.h>
#include <tensordict/nn.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <functional>
#include <memory>

#include "instructions.h"

namespace {

using tensordict::TensorDict;
using tensordict::nn::TensorDictModule;
using tensordict::nn::TensorDictSequential;

struct Policy {
  Policy()
      : first(16, 64),
        second(64, 64),
        third(64, 4),
        sequence(
            {TensorDictModule(first, {{"obs", "x"}}, {"hidden"}),
             TensorDictModule(relu, {"hidden"}, {"hidden"}),
             TensorDictModule(second, {"hidden"}, {"hidden"}),
             TensorDictModule(relu, {"hidden"}, {"hidden"}),
             TensorDictModule(third, {"hidden"}, {{"action", "logits"}})}),
        x(torch::randn({32, 16})),
        td({{"obs", {{"x", x}}}}, {32}) {}

  at::Tensor raw() {
    return third->forward(
        relu->forward(second->forward(relu->forward(first->forward(x)))));
  }

  TensorDict cpp() {
    return sequence(td);
  }

  torch::nn::Linear first;
  torch::nn::Linear second;
  torch::nn::Linear third;
  torch::nn::ReLU relu;
  TensorDictSequential sequence;
  at::Tensor x;
  TensorDict td;
};

void register_all() {
  benchmark::RegisterBenchmark(
      "nn_sequential/cpp",
      [](benchmark::State& state) {
        torch::NoGradGuard no_grad;
        Policy policy;
        for (auto _ : state) {
          benchmark::DoNotOptimize(policy.cpp());
        }
      })
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(
      "nn_sequential/raw",
      [](benchmark::State& state) {
        torch::NoGradGuard no_grad;
        Policy policy;
        for (auto _ : state) {
          benchmark::DoNotOptimize(policy.raw());
        }
      })
      ->Unit(benchmark::kMicrosecond);
  // Counted without grad as well: the guard lives as long as the op.
  tensordict_bench::register_instruction_op("nn_sequential/cpp", [] {
    auto policy = std::make_shared<Policy>();
    return std::function<void()>([policy] {
      torch::NoGradGuard no_grad;
      benchmark::DoNotOptimize(policy->cpp());
    });
  });
  tensordict_bench::register_instruction_op("nn_sequential/raw", [] {
    auto policy = std::make_shared<Policy>();
    return std::function<void()>([policy] {
      torch::NoGradGuard no_grad;
      benchmark::DoNotOptimize(policy->raw());
    });
  });
}

[[maybe_unused]] const bool registered = (register_all(), true);

}  // namespace
