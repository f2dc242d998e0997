// Benchmarks of consolidate against memcpy bandwidth, of loading a memmap
// checkpoint of an nn::Transformer against torch::load, and
// from_consolidated against load_memmap of the same leaves. Registered at
// static initialization, like tensor_dict_benchmark.cpp; the Python side is
// python_consolidate.py. Memory: about 1 GiB at the peak.

#include <benchmark/benchmark.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace {

using tensordict::ConsolidateOptions;
using tensordict::TensorDict;
namespace fs = std::filesystem;

// A directory for the files of one benchmark, removed at exit.
std::string bench_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() /
                       ("tensordict_bench_" + std::to_string(::getpid())) /
                       name;
  fs::create_directories(dir);
  return dir.string();
}

struct Cleanup {
  ~Cleanup() {
    std::error_code ignored;
    fs::remove_all(
        fs::temp_directory_path() /
            ("tensordict_bench_" + std::to_string(::getpid())),
        ignored);
  }
} cleanup;

constexpr int64_t kBigLeaves = 100;
constexpr int64_t kBigBytes = int64_t{256} << 20;

// 256 MiB of float32 in 100 leaves over two levels.
TensorDict big_dict() {
  TensorDict td;
  const int64_t per_leaf = kBigBytes / kBigLeaves / 4;
  for (int64_t i = 0; i < kBigLeaves; ++i) {
    const std::string name = "leaf" + std::to_string(i);
    if (i % 2 == 0) {
      td.set(name, torch::randn({per_leaf}));
    } else {
      td.set({"nested", name}, torch::randn({per_leaf}));
    }
  }
  return td;
}

// 512 small leaves ([64, 8] float32) over three levels.
TensorDict small_dict() {
  TensorDict td({}, {64});
  for (int i = 0; i < 512; ++i) {
    const std::string name = "leaf" + std::to_string(i);
    if (i % 3 == 0) {
      td.set(name, torch::randn({64, 8}));
    } else if (i % 3 == 1) {
      td.set({"l1", name}, torch::randn({64, 8}));
    } else {
      td.set({"l1", "l2", name}, torch::randn({64, 8}));
    }
  }
  return td;
}

void register_all() {
  // consolidate vs memcpy of the same bytes into one buffer.
  benchmark::RegisterBenchmark(
      "consolidate_256MiB/cpp",
      [](benchmark::State& state) {
        const TensorDict td = big_dict();
        for (auto _ : state) {
          benchmark::DoNotOptimize(
              td.consolidate(ConsolidateOptions().num_threads(2)));
        }
      })
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark(
      "consolidate_256MiB/raw",
      [](benchmark::State& state) {
        const TensorDict td = big_dict();
        std::vector<at::Tensor> leaves;
        for (const auto& v : td.values(true, true)) {
          leaves.push_back(v.tensor());
        }
        for (auto _ : state) {
          // One new buffer and one memcpy per leaf: what consolidate must do.
          at::Tensor out = torch::empty({kBigBytes}, torch::kUInt8);
          auto* dst = out.data_ptr<uint8_t>();
          for (const auto& t : leaves) {
            const size_t n = t.numel() * t.element_size();
            std::memcpy(dst, t.data_ptr(), n);
            dst += n;
          }
          benchmark::DoNotOptimize(out);
        }
      })
      ->Unit(benchmark::kMillisecond);

  // Checkpoints of nn::Transformer (d_model 512, 6 + 6 layers: 44M params).
  // Its saves, fresh and overwriting, are rows of memmap_benchmark.cpp
  // (save_transformer_*), which names the file system.
  benchmark::RegisterBenchmark(
      "load_transformer/cpp",
      [](benchmark::State& state) {
        torch::nn::Transformer model{torch::nn::TransformerOptions()};
        const std::string dir = bench_dir("load_memmap");
        (void)TensorDict::from_module(*model).memmap(dir);
        for (auto _ : state) {
          // Zero-copy: the leaves map the files.
          benchmark::DoNotOptimize(TensorDict::load_memmap(dir));
        }
      })
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark(
      "load_transformer/raw",
      [](benchmark::State& state) {
        torch::nn::Transformer model{torch::nn::TransformerOptions()};
        const std::string path = bench_dir("load_torch") + "/model.pt";
        torch::save(model, path);
        for (auto _ : state) {
          torch::load(model, path);
        }
      })
      ->Unit(benchmark::kMillisecond);

  // from_consolidated vs load_memmap of the same 512 leaves.
  benchmark::RegisterBenchmark(
      "from_consolidated_512/cpp",
      [](benchmark::State& state) {
        const std::string path = bench_dir("consolidated") + "/td.bin";
        (void)small_dict().consolidate(ConsolidateOptions().filename(path));
        for (auto _ : state) {
          benchmark::DoNotOptimize(TensorDict::from_consolidated(path));
        }
      })
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(
      "from_consolidated_512/raw",
      [](benchmark::State& state) {
        const std::string dir = bench_dir("memmap_512");
        (void)small_dict().memmap(dir);
        for (auto _ : state) {
          benchmark::DoNotOptimize(TensorDict::load_memmap(dir));
        }
      })
      ->Unit(benchmark::kMicrosecond);
}

[[maybe_unused]] const bool registered = (register_all(), true);

}  // namespace
