// Saving and loading memmap trees against the least the same work can cost
// ("raw": write() and mmap() of the same bytes, or at::index_select on the
// same mapped tensor), and against torch::save/torch::load (whose raw is
// plain write()/read(): they return no mapped tensors). Registered at
// static initialization; benchmarks/main.cpp runs them and
// benchmarks/python_memmap.py times Python on the same work.
//
// Workloads (kept in step with python_memmap.py):
//   a) 256 MiB: 16 float32 leaves of [1024, 4096] and 500 of [1024], batch
//   [1024] b) 10,000 float32 leaves of [256] (1 KiB each) in 100 sub-dicts,
//   batch [256] c) 512 float32 leaves of [1024] in 8 sub-dicts (load_memmap
//   cost per leaf) d) 100,000 x 3 x 64 x 64 uint8 images: gather 256 random
//   rows e) the parameters of torch::nn::Transformer() (44M float32 in 184
//   leaves, nested dicts)
// Files go under $TENSORDICT_BENCH_DIR, by default /dev/shm when it is
// writable (else the system temp directory): the benchmark measures the
// libraries, not the disk. The save rows of b) and e) are the exception:
// they run on a named file system, as save_<work>_<fresh|overwrite>_<fs>
// (see NOTE [Save rows]).
//
// NOTE [Save rows]: a fresh save (the prefix removed, untimed, before each
// save) and an overwrite (each save over the complete save the previous one
// left) are separate rows, because they cost different things: a fresh
// save creates every file, an overwrite replaces a save (the library keeps
// the old one loadable until the new one is complete; Python writes over
// the old files). Each runs on ext4 (the system temp directory, or
// $TENSORDICT_BENCH_EXT4_DIR) and on tmpfs (/dev/shm); a directory whose
// file system (statfs) is not the one the row names is skipped with a
// message, not timed under a false name. The transformer is saved with 2
// writer threads and the 10,000 leaves with none, on both sides. The rows
// report the median iteration (`median_us`), as the Python side does.
// The raw baseline of a fresh save writes and maps a new file per leaf;
// that of an overwrite opens each existing file, pwrite()s it and maps it.

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <tensordict/tensordict.h>
#include <torch/serialize.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

using tensordict::LoadMemmapOptions;
using tensordict::MemmapOptions;
using tensordict::NestedKey;
using tensordict::TensorDict;
namespace fs = std::filesystem;

namespace {

// Python's benchmark uses the same number of writer threads.
constexpr int64_t kSaveThreads = 2;
// The transformer's save rows: as many threads as Python's (see NOTE [Save
// rows]).
constexpr int64_t kTransformerSaveThreads = 2;

// A directory of this process, removed at exit.
class BenchDir {
 public:
  BenchDir() {
    const char* env = std::getenv("TENSORDICT_BENCH_DIR");
    fs::path base;
    if (env != nullptr && *env != '\0') {
      base = env;
    } else if (::access("/dev/shm", W_OK) == 0) {
      base = "/dev/shm";
    } else {
      base = fs::temp_directory_path();
    }
    path_ = base / ("tensordict_memmap_bench_" + std::to_string(::getpid()));
    fs::create_directories(path_);
  }
  BenchDir(const BenchDir&) = delete;
  BenchDir& operator=(const BenchDir&) = delete;
  ~BenchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const noexcept {
    return path_;
  }

 private:
  fs::path path_;
};

const fs::path& bench_dir() {
  static const BenchDir dir;
  return dir.path();
}

struct Workload {
  TensorDict td;
  std::vector<at::Tensor> leaves;  // contiguous, in key order
};

Workload make_workload(
    std::vector<int64_t> batch,
    int64_t groups,
    int64_t per_group,
    std::vector<int64_t> leaf_shape) {
  Workload w;
  w.td = TensorDict(batch);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t i = 0; i < per_group; ++i) {
      at::Tensor t = torch::randn(leaf_shape);
      const std::string name = "x" + std::to_string(i);
      if (groups == 1) {
        w.td.set(name, t);
      } else {
        w.td.set({"g" + std::to_string(g), name}, t);
      }
      w.leaves.push_back(t);
    }
  }
  return w;
}

const Workload& workload_a() {
  static const Workload w = [] {
    Workload big = make_workload({1024}, 1, 16, {1024, 4096});
    Workload small = make_workload({1024}, 1, 500, {1024});
    for (int64_t i = 0; i < 500; ++i) {
      big.td.set("s" + std::to_string(i), small.leaves[i]);
      big.leaves.push_back(small.leaves[i]);
    }
    return big;
  }();
  return w;
}

const Workload& workload_b() {
  static const Workload w = make_workload({256}, 100, 100, {256});
  return w;
}

const Workload& workload_c() {
  static const Workload w = make_workload({1024}, 8, 64, {1024});
  return w;
}

void check_errno(bool ok, const char* what, const fs::path& path) {
  if (!ok) {
    throw std::runtime_error(
        std::string(what) + " " + path.string() + ": " + std::strerror(errno));
  }
}

// Creates the file `path` with `leaf`'s bytes, written with write(), and
// returns its open descriptor.
int create_with_bytes(const fs::path& path, const at::Tensor& leaf) {
  const int fd =
      ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  check_errno(fd >= 0, "open", path);
  const char* data = static_cast<const char*>(leaf.data_ptr());
  size_t left = leaf.nbytes();
  while (left > 0) {
    const ssize_t n = ::write(fd, data, left);
    check_errno(n > 0, "write", path);
    data += n;
    left -= static_cast<size_t>(n);
  }
  return fd;
}

// The least a save can cost: one file per leaf, written with write().
void raw_write(const std::vector<at::Tensor>& leaves, const fs::path& dir) {
  fs::create_directories(dir);
  for (size_t i = 0; i < leaves.size(); ++i) {
    ::close(
        create_with_bytes(dir / (std::to_string(i) + ".memmap"), leaves[i]));
  }
}

// The least a save with memmap's result can cost: raw_write's files, each
// also mapped on its open descriptor, as the returned dict's leaves map
// their files. Mapping 10,000 small files costs about as much as writing
// them, so a baseline without it would not be the same result.
std::vector<at::Tensor> raw_write_mapped(
    const std::vector<at::Tensor>& leaves, const fs::path& dir) {
  fs::create_directories(dir);
  std::vector<at::Tensor> out;
  out.reserve(leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) {
    const fs::path path = dir / (std::to_string(i) + ".memmap");
    const int fd = create_with_bytes(path, leaves[i]);
    const size_t size = leaves[i].nbytes();
    void* mapped =
        ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    check_errno(mapped != MAP_FAILED, "mmap", path);
    out.push_back(at::from_blob(
        mapped,
        leaves[i].sizes(),
        [size](void* p) { ::munmap(p, size); },
        at::TensorOptions().dtype(leaves[i].dtype())));
  }
  return out;
}

// The least a zero-copy load can cost: open and mmap each file, wrap it.
// Mapped read-write and shared, as load_memmap maps a writable file.
std::vector<at::Tensor> raw_map(
    const std::vector<at::Tensor>& like, const fs::path& dir) {
  std::vector<at::Tensor> out;
  out.reserve(like.size());
  for (size_t i = 0; i < like.size(); ++i) {
    const fs::path path = dir / (std::to_string(i) + ".memmap");
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    check_errno(fd >= 0, "open", path);
    struct stat st {};
    check_errno(::fstat(fd, &st) == 0, "fstat", path);
    const size_t size = static_cast<size_t>(st.st_size);
    void* data =
        ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    check_errno(data != MAP_FAILED, "mmap", path);
    out.push_back(at::from_blob(
        data,
        like[i].sizes(),
        [size](void* p) { ::munmap(p, size); },
        at::TensorOptions().dtype(like[i].dtype())));
  }
  return out;
}

// The least a copying load can cost: read() each file into a new tensor.
std::vector<at::Tensor> raw_read(
    const std::vector<at::Tensor>& like, const fs::path& dir) {
  std::vector<at::Tensor> out;
  out.reserve(like.size());
  for (size_t i = 0; i < like.size(); ++i) {
    const fs::path path = dir / (std::to_string(i) + ".memmap");
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    check_errno(fd >= 0, "open", path);
    at::Tensor t = at::empty_like(like[i]);
    char* data = static_cast<char*>(t.data_ptr());
    size_t left = t.nbytes();
    while (left > 0) {
      const ssize_t n = ::read(fd, data, left);
      check_errno(n > 0, "read", path);
      data += n;
      left -= static_cast<size_t>(n);
    }
    ::close(fd);
    out.push_back(std::move(t));
  }
  return out;
}

// Runs `save(dir)` once per iteration into a fresh directory; removing the
// previous one is not timed.
template <typename Save>
void time_saves(benchmark::State& state, const std::string& name, Save save) {
  const fs::path dir = bench_dir() / name;
  for (auto _ : state) {
    state.PauseTiming();
    fs::remove_all(dir);
    state.ResumeTiming();
    save(dir);
  }
  fs::remove_all(dir);
}

void register_save(
    const std::string& name, const Workload& (*workload)(), int64_t threads) {
  benchmark::RegisterBenchmark(
      (name + "/cpp").c_str(),
      [=](benchmark::State& state) {
        const Workload& w = workload();
        time_saves(state, name, [&](const fs::path& dir) {
          benchmark::DoNotOptimize(
              w.td.memmap(MemmapOptions(dir.string()).num_threads(threads)));
        });
      })
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime()
      ->MinTime(1.0);
  benchmark::RegisterBenchmark(
      (name + "/raw").c_str(),
      [=](benchmark::State& state) {
        const Workload& w = workload();
        time_saves(state, name, [&](const fs::path& dir) {
          benchmark::DoNotOptimize(raw_write_mapped(w.leaves, dir));
        });
      })
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime()
      ->MinTime(1.0);
}

// Loads `name`'s tree, written once before timing.
void register_load(const std::string& name, const Workload& (*workload)()) {
  benchmark::RegisterBenchmark(
      (name + "/cpp").c_str(),
      [=](benchmark::State& state) {
        const fs::path dir = bench_dir() / name;
        (void)workload().td.memmap(MemmapOptions(dir.string()));
        for (auto _ : state) {
          benchmark::DoNotOptimize(TensorDict::load_memmap(dir.string()));
        }
        fs::remove_all(dir);
      })
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark(
      (name + "/raw").c_str(),
      [=](benchmark::State& state) {
        const fs::path dir = bench_dir() / name;
        const Workload& w = workload();
        raw_write(w.leaves, dir);
        for (auto _ : state) {
          benchmark::DoNotOptimize(raw_map(w.leaves, dir));
        }
        fs::remove_all(dir);
      })
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
}

// torch::save / torch::load of the same leaves (a flat list: what libtorch
// offers without a dict type), against write()/read() of the same bytes.
void register_torch_serialize() {
  benchmark::RegisterBenchmark(
      "torch_save_256MiB/cpp",
      [](benchmark::State& state) {
        const Workload& w = workload_a();
        time_saves(state, "torch_save", [&](const fs::path& dir) {
          fs::create_directories(dir);
          torch::save(w.leaves, (dir / "leaves.pt").string());
        });
      })
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime()
      ->MinTime(1.0);
  benchmark::RegisterBenchmark(
      "torch_save_256MiB/raw",
      [](benchmark::State& state) {
        const Workload& w = workload_a();
        time_saves(state, "torch_save", [&](const fs::path& dir) {
          raw_write(w.leaves, dir);
        });
      })
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime()
      ->MinTime(1.0);
  benchmark::RegisterBenchmark(
      "torch_load_256MiB/cpp",
      [](benchmark::State& state) {
        const fs::path file = bench_dir() / "torch_load.pt";
        torch::save(workload_a().leaves, file.string());
        for (auto _ : state) {
          std::vector<at::Tensor> leaves;
          torch::load(leaves, file.string());
          benchmark::DoNotOptimize(leaves);
        }
        fs::remove(file);
      })
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark(
      "torch_load_256MiB/raw",
      [](benchmark::State& state) {
        const fs::path dir = bench_dir() / "torch_load_raw";
        const Workload& w = workload_a();
        raw_write(w.leaves, dir);
        for (auto _ : state) {
          benchmark::DoNotOptimize(raw_read(w.leaves, dir));
        }
        fs::remove_all(dir);
      })
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
}

// 256 random rows of a memory-mapped 100,000 x 3 x 64 x 64 uint8 dataset:
// TensorDict indexing against at::index_select on the same mapped tensor.
struct Images {
  TensorDict td;  // memmapped, one leaf "pixels"
  at::Tensor index;
};

const Images& images() {
  static const Images images = [] {
    constexpr int64_t kRows = 100000;
    TensorDict like({kRows});
    like.set("pixels", at::empty({kRows, 3, 64, 64}, at::kByte));
    Images out;
    out.td = like.memmap_like(MemmapOptions((bench_dir() / "images").string()));
    at::Tensor pixels = out.td.get("pixels");
    for (int64_t start = 0; start < kRows; start += 10000) {
      pixels.narrow(0, start, 10000)
          .copy_(torch::randint(0, 256, {10000, 3, 64, 64}, at::kByte));
    }
    out.index = torch::randint(0, kRows, {256}, at::kLong);
    return out;
  }();
  return images;
}

void register_gather() {
  benchmark::RegisterBenchmark(
      "gather_256_rows/cpp",
      [](benchmark::State& state) {
        const Images& im = images();
        for (auto _ : state) {
          benchmark::DoNotOptimize(im.td.index({im.index}));
        }
      })
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark(
      "gather_256_rows/raw",
      [](benchmark::State& state) {
        const Images& im = images();
        const at::Tensor pixels = im.td.get("pixels");
        for (auto _ : state) {
          benchmark::DoNotOptimize(at::index_select(pixels, 0, im.index));
        }
      })
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
}

// The parameters of torch::nn::Transformer() as a TensorDict, with its
// leaves in key order.
const Workload& workload_e() {
  static const Workload w = [] {
    torch::nn::Transformer model{torch::nn::TransformerOptions()};
    Workload out;
    out.td = TensorDict::from_module(*model);
    for (const auto& value : out.td.values(true, true)) {
      out.leaves.push_back(value.tensor().contiguous());
    }
    return out;
  }();
  return w;
}

// The raw baseline of an overwrite: each leaf's existing file (written by
// raw_write) opened, its bytes pwrite()n over the old ones, and mapped, as
// Python writes over a save; no second tree, so nothing crash-safe.
std::vector<at::Tensor> raw_overwrite_mapped(
    const std::vector<at::Tensor>& leaves, const fs::path& dir) {
  std::vector<at::Tensor> out;
  out.reserve(leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) {
    const fs::path path = dir / (std::to_string(i) + ".memmap");
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    check_errno(fd >= 0, "open", path);
    const char* data = static_cast<const char*>(leaves[i].data_ptr());
    const size_t size = leaves[i].nbytes();
    for (size_t done = 0; done < size;) {
      const ssize_t n =
          ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
      check_errno(n > 0, "pwrite", path);
      done += static_cast<size_t>(n);
    }
    void* mapped =
        ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    check_errno(mapped != MAP_FAILED, "mmap", path);
    out.push_back(at::from_blob(
        mapped,
        leaves[i].sizes(),
        [size](void* p) { ::munmap(p, size); },
        at::TensorOptions().dtype(leaves[i].dtype())));
  }
  return out;
}

// A file system a save row claims to run on (see NOTE [Save rows]).
struct FileSystem {
  const char* name;  // the row's suffix
  long magic;        // statfs f_type
  fs::path base;
};

std::vector<FileSystem> save_file_systems() {
  const char* ext4_env = std::getenv("TENSORDICT_BENCH_EXT4_DIR");
  const fs::path ext4_base = ext4_env != nullptr && *ext4_env != '\0'
                                 ? fs::path(ext4_env)
                                 : fs::temp_directory_path();
  const FileSystem claimed[] = {
      {"ext4", 0xEF53, ext4_base},        // EXT4_SUPER_MAGIC (ext2/3 share it)
      {"tmpfs", 0x01021994, "/dev/shm"},  // TMPFS_MAGIC
  };
  std::vector<FileSystem> found;
  for (const FileSystem& fs : claimed) {
    struct statfs st {};
    if (::statfs(fs.base.c_str(), &st) != 0 ||
        ::access(fs.base.c_str(), W_OK) != 0) {
      std::fprintf(
          stderr,
          "memmap_benchmark: skipping the *_%s save rows: %s is not a "
          "writable directory\n",
          fs.name,
          fs.base.c_str());
    } else if (static_cast<long>(st.f_type) != fs.magic) {
      std::fprintf(
          stderr,
          "memmap_benchmark: skipping the *_%s save rows: %s is on a file "
          "system of type 0x%lx, not %s\n",
          fs.name,
          fs.base.c_str(),
          static_cast<long>(st.f_type),
          fs.name);
    } else {
      found.push_back(fs);
    }
  }
  return found;
}

// Times `save()` per iteration after an untimed `setup()`, and records the
// median iteration as the `median_us` counter.
template <typename Setup, typename Save>
void time_median(benchmark::State& state, Setup setup, Save save) {
  std::vector<double> times;
  for (auto _ : state) {
    setup();
    const auto start = std::chrono::steady_clock::now();
    save();
    const std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - start;
    state.SetIterationTime(took.count());
    times.push_back(took.count() * 1e6);
  }
  if (!times.empty()) {
    std::sort(times.begin(), times.end());
    state.counters["median_us"] = times[times.size() / 2];
  }
}

// The four rows of one workload on one file system: fresh and overwrite,
// C++ and raw (see NOTE [Save rows]).
void register_save_rows(
    const std::string& work,
    const Workload& (*workload)(),
    int64_t threads,
    const FileSystem& file_system) {
  const fs::path root = file_system.base /
                        ("tensordict_save_bench_" + std::to_string(::getpid()));
  for (const bool overwrite : {false, true}) {
    const std::string name =
        work + (overwrite ? "_overwrite_" : "_fresh_") + file_system.name;
    const fs::path dir = root / name;
    auto cpp = [=](benchmark::State& state) {
      const Workload& w = workload();
      const MemmapOptions options =
          MemmapOptions(dir.string()).num_threads(threads);
      fs::remove_all(dir);
      if (overwrite) {
        (void)w.td.memmap(options);
      }
      time_median(
          state,
          [&] {
            if (!overwrite) {
              fs::remove_all(dir);
            }
          },
          [&] { benchmark::DoNotOptimize(w.td.memmap(options)); });
      fs::remove_all(root);
    };
    auto raw = [=](benchmark::State& state) {
      const Workload& w = workload();
      fs::remove_all(dir);
      if (overwrite) {
        raw_write(w.leaves, dir);
      }
      time_median(
          state,
          [&] {
            if (!overwrite) {
              fs::remove_all(dir);
            }
          },
          [&] {
            benchmark::DoNotOptimize(
                overwrite ? raw_overwrite_mapped(w.leaves, dir)
                          : raw_write_mapped(w.leaves, dir));
          });
      fs::remove_all(root);
    };
    for (const bool is_raw : {false, true}) {
      auto* bench =
          is_raw ? benchmark::RegisterBenchmark((name + "/raw").c_str(), raw)
                 : benchmark::RegisterBenchmark((name + "/cpp").c_str(), cpp);
      bench->Unit(benchmark::kMillisecond)->UseManualTime()->MinTime(2.0);
    }
  }
}

// NOTE [Deflated archive loads]: load_memmap of a `.tdz` whose 16 leaves
// of 4 MiB (float32 [1024, 1024], values rounded to 1/16 so that deflate
// has something to remove) are deflated, written once before timing, with
// `LoadMemmapOptions::num_threads` 1 (each leaf inflated as it loads) and
// kDeflateThreads (inflated on that many threads first, Python's
// `load_memmap(num_threads=n)`). The gain is bounded by the cores the
// machine lends.
constexpr int64_t kDeflateThreads = 4;

void register_load_tdz_deflated() {
  for (const int64_t threads : {int64_t{1}, kDeflateThreads}) {
    const std::string name =
        "load_tdz_deflated/threads:" + std::to_string(threads);
    benchmark::RegisterBenchmark(
        name.c_str(),
        [threads](benchmark::State& state) {
          const fs::path path = bench_dir() / "load_tdz_deflated.tdz";
          TensorDict td({1024});
          for (int i = 0; i < 16; ++i) {
            td.set(
                "x" + std::to_string(i),
                (torch::randn({1024, 1024}) * 16).round() / 16);
          }
          (void)td.save(MemmapOptions(path.string()).compression("deflate"));
          for (auto _ : state) {
            benchmark::DoNotOptimize(TensorDict::load_memmap(
                path.string(), LoadMemmapOptions().num_threads(threads)));
          }
          fs::remove(path);
        })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

void register_all() {
  register_save("save_256MiB", workload_a, 0);
  register_save("save_256MiB_2threads", workload_a, kSaveThreads);
  for (const FileSystem& file_system : save_file_systems()) {
    register_save_rows(
        "save_transformer", workload_e, kTransformerSaveThreads, file_system);
    register_save_rows("save_10k_1KiB", workload_b, 0, file_system);
  }
  register_torch_serialize();
  register_load("load_256MiB", workload_a);
  register_load("load_10k_1KiB", workload_b);
  register_load("load_512_leaves", workload_c);
  register_load_tdz_deflated();
  register_gather();
}

[[maybe_unused]] const bool registered = (register_all(), true);

}  // namespace
