// TensorClass against a plain struct of at::Tensor members ("raw"), and
// (benchmarks/python_tensor_class.py) against Python's tensorclass:
// - tc_field_read: one field read of a tensor_only struct (nanoseconds);
// - tc_construct: building a 10-field struct of batch size [64];
// - tc_index: indexing that struct with an integer.
// Registered at static initialization; benchmarks/main.cpp runs them.

#include <benchmark/benchmark.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <vector>

using tensordict::ClassFlags;
using tensordict::TensorClass;

namespace {

constexpr int64_t kBatch = 64;

struct Ten : TensorClass<Ten, ClassFlags::kTensorOnly> {
  TENSORDICT_FIELDS(Ten, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9)
};

struct PlainTen {
  at::Tensor f0, f1, f2, f3, f4, f5, f6, f7, f8, f9;
};

std::vector<at::Tensor> leaves() {
  static const std::vector<at::Tensor> out = [] {
    std::vector<at::Tensor> v;
    for (int i = 0; i < 10; ++i) {
      v.push_back(torch::randn({kBatch, 8}));
    }
    return v;
  }();
  return out;
}

Ten make_ten() {
  const auto& l = leaves();
  return Ten(
      {{"f0", l[0]},
       {"f1", l[1]},
       {"f2", l[2]},
       {"f3", l[3]},
       {"f4", l[4]},
       {"f5", l[5]},
       {"f6", l[6]},
       {"f7", l[7]},
       {"f8", l[8]},
       {"f9", l[9]}},
      {kBatch});
}

PlainTen make_plain() {
  const auto& l = leaves();
  return PlainTen{l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7], l[8], l[9]};
}

void field_read_cpp(benchmark::State& state) {
  const Ten t = make_ten();
  for (auto _ : state) {
    at::Tensor x = t.f5();
    benchmark::DoNotOptimize(x);
  }
}

void field_read_raw(benchmark::State& state) {
  const PlainTen p = make_plain();
  benchmark::DoNotOptimize(&p);
  for (auto _ : state) {
    at::Tensor x = p.f5;
    benchmark::DoNotOptimize(x);
  }
}

void construct_cpp(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(make_ten());
  }
}

void construct_raw(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(make_plain());
  }
}

void index_cpp(benchmark::State& state) {
  const Ten t = make_ten();
  for (auto _ : state) {
    benchmark::DoNotOptimize(t.index({3}));
  }
}

void index_raw(benchmark::State& state) {
  const PlainTen p = make_plain();
  for (auto _ : state) {
    PlainTen out{
        p.f0.index({3}),
        p.f1.index({3}),
        p.f2.index({3}),
        p.f3.index({3}),
        p.f4.index({3}),
        p.f5.index({3}),
        p.f6.index({3}),
        p.f7.index({3}),
        p.f8.index({3}),
        p.f9.index({3})};
    benchmark::DoNotOptimize(out);
  }
}

const bool registered = [] {
  benchmark::RegisterBenchmark("tc_field_read/cpp", field_read_cpp)
      ->Unit(benchmark::kNanosecond);
  benchmark::RegisterBenchmark("tc_field_read/raw", field_read_raw)
      ->Unit(benchmark::kNanosecond);
  benchmark::RegisterBenchmark("tc_construct/cpp", construct_cpp)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("tc_construct/raw", construct_raw)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("tc_index/cpp", index_cpp)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("tc_index/raw", index_raw)
      ->Unit(benchmark::kMicrosecond);
  return true;
}();

}  // namespace
