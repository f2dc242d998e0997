// Benchmarks of from_safetensors on a 256 MiB checkpoint (64 float32
// weights of [1024, 1024], named "layers.<i>.weight" as a state_dict names
// them), against a plain mmap of the same file with one from_blob view per
// weight. The Python side (python_safetensors.py) writes the same file,
// byte for byte, with tensordict.to_safetensors and times
// safetensors.torch.load_file on it. Registered at static initialization,
// like tensor_dict_benchmark.cpp.
//
// safetensors_load_256MiB: the load alone (C++ maps the file and makes
// views; no byte is read). safetensors_load_sum_256MiB: the load, then a
// sum over every weight, so that every byte is read from the page cache.

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace {

using tensordict::TensorDict;
namespace fs = std::filesystem;

constexpr int kWeights = 64;
constexpr int64_t kSide = 1024;

// The file, written once per process and removed at exit.
class CheckpointFile {
 public:
  CheckpointFile() {
    dir_ = fs::temp_directory_path() /
           ("tensordict_bench_safetensors_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "model.safetensors").string();
    TensorDict td;
    for (int i = 0; i < kWeights; ++i) {
      td.set(
          {"layers", std::to_string(i), "weight"},
          torch::zeros({kSide, kSide}));
    }
    tensordict::to_safetensors(td, path_);
  }
  ~CheckpointFile() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  const std::string& path() const {
    return path_;
  }

 private:
  fs::path dir_;
  std::string path_;
};

const CheckpointFile& checkpoint() {
  static const CheckpointFile file;
  return file;
}

// Unmaps when the last view goes.
struct Mapping {
  void* address = nullptr;
  size_t length = 0;
  ~Mapping() {
    ::munmap(address, length);
  }
};

// The baseline: mmap the file privately, read the header length, and view
// each weight with from_blob (offsets known: the weights are back to back,
// in name order, each 4 MiB), the mapping kept alive by the deleters.
std::vector<at::Tensor> raw_load(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const off_t size = ::lseek(fd, 0, SEEK_END);
  void* address = ::mmap(
      nullptr,
      static_cast<size_t>(size),
      PROT_READ | PROT_WRITE,
      MAP_PRIVATE,
      fd,
      0);
  ::close(fd);
  uint64_t header = 0;
  std::memcpy(&header, address, 8);
  auto mapping = std::make_shared<Mapping>();
  mapping->address = address;
  mapping->length = static_cast<size_t>(size);
  auto* data = static_cast<uint8_t*>(address) + 8 + header;
  std::vector<at::Tensor> out;
  out.reserve(kWeights);
  const int64_t nbytes = kSide * kSide * 4;
  for (int i = 0; i < kWeights; ++i) {
    auto keep = new std::shared_ptr<Mapping>(mapping);
    out.push_back(torch::from_blob(
        data + i * nbytes,
        {kSide, kSide},
        [keep](void*) { delete keep; },
        torch::kFloat32));
  }
  return out;
}

void register_all() {
  benchmark::RegisterBenchmark(
      "safetensors_load_256MiB/cpp",
      [](benchmark::State& state) {
        const std::string& path = checkpoint().path();
        for (auto _ : state) {
          benchmark::DoNotOptimize(tensordict::from_safetensors(path));
        }
      })
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(
      "safetensors_load_256MiB/raw",
      [](benchmark::State& state) {
        const std::string& path = checkpoint().path();
        for (auto _ : state) {
          benchmark::DoNotOptimize(raw_load(path));
        }
      })
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(
      "safetensors_load_sum_256MiB/cpp",
      [](benchmark::State& state) {
        const std::string& path = checkpoint().path();
        for (auto _ : state) {
          const TensorDict td = tensordict::from_safetensors(path);
          double total = 0;
          for (const auto& value : td.values(true, true)) {
            total += value.tensor().sum().item<double>();
          }
          benchmark::DoNotOptimize(total);
        }
      })
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark(
      "safetensors_load_sum_256MiB/raw",
      [](benchmark::State& state) {
        const std::string& path = checkpoint().path();
        for (auto _ : state) {
          double total = 0;
          for (const at::Tensor& t : raw_load(path)) {
            total += t.sum().item<double>();
          }
          benchmark::DoNotOptimize(total);
        }
      })
      ->Unit(benchmark::kMillisecond);
}

[[maybe_unused]] const bool registered = (register_all(), true);

}  // namespace
