// The C++ half of the `.tdz` archive interop test (see
// run_archive_interop.py): loads the archives Python wrote (stored and
// deflated), unpacks one, and writes archives for Python to load. Every
// tree is the sample both sides build the same way.
//
// usage: archive_interop WORK_DIR

#include <tensordict/archive.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

using tensordict::TensorDict;

// The sample of run_archive_interop.py.
TensorDict sample() {
  TensorDict td({3});
  td.set("a", torch::arange(12, torch::kFloat32).reshape({3, 4}));
  td.set({"nested", "b"}, torch::tensor({1, 2, 3}, torch::kInt64));
  td.set({"nested", "c"}, torch::tensor({true, false, true}));
  td.set("half", torch::ones({3, 2}, torch::kFloat16));
  td.set("bf", torch::arange(3, torch::kBFloat16));
  td.set("text", tensordict::NonTensorData("hello", {3}));
  return td;
}

int compare(const std::string& what, const TensorDict& got) {
  const TensorDict want = sample();
  int problems = 0;
  if (got.batch_size() != want.batch_size()) {
    std::cout << what << ": batch size " << got.batch_size() << ", expected "
              << want.batch_size() << "\n";
    ++problems;
  }
  for (const auto& key :
       want.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    const tensordict::Value* value = got.find(key);
    if (value == nullptr) {
      std::cout << what << ": missing " << key << "\n";
      ++problems;
      continue;
    }
    const tensordict::Value& expected = *want.find(key);
    if (expected.is_tensor()) {
      if (!value->is_tensor() ||
          value->tensor().dtype() != expected.tensor().dtype() ||
          !torch::equal(value->tensor(), expected.tensor())) {
        std::cout << what << ": " << key << " differs\n";
        ++problems;
      }
    } else if (
        !value->is_non_tensor() ||
        value->non_tensor() != expected.non_tensor()) {
      std::cout << what << ": " << key << " differs (non-tensor)\n";
      ++problems;
    }
  }
  const tensordict::Value* text = got.find("text");
  if (text == nullptr || !text->is_non_tensor() ||
      text->non_tensor() != tensordict::Json("hello")) {
    std::cout << what << ": 'text' is not the non-tensor \"hello\"\n";
    ++problems;
  }
  if (got.keys(true, true).size() != want.keys(true, true).size()) {
    std::cout << what << ": " << got.keys(true, true).size()
              << " leaves, expected " << want.keys(true, true).size() << "\n";
    ++problems;
  }
  std::cout << what << ": " << (problems == 0 ? "ok" : "FAILED") << "\n";
  return problems;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: archive_interop WORK_DIR\n";
    return 2;
  }
  const std::string work = argv[1];
  int problems = 0;
  try {
    // Python -> C++.
    for (const char* name : {"py.tdz", "py_packed.tdz", "py_deflate.tdz"}) {
      const std::string path = work + "/" + name;
      if (!tensordict::is_memmap_archive(path)) {
        std::cout << name << ": not recognised as an archive\n";
        ++problems;
      }
      problems += compare(name, TensorDict::load_memmap(path));
    }
    // Python's load_memmap(num_threads=4): the deflated leaves inflated on
    // four threads first load as they do one at a time.
    problems += compare(
        "py_deflate.tdz with num_threads(4)",
        TensorDict::load_memmap(
            work + "/py_deflate.tdz",
            tensordict::LoadMemmapOptions().num_threads(4)));
    const TensorDict mapped = TensorDict::load_memmap(work + "/py.tdz");
    const at::Tensor a = mapped.get("a");
    const auto* base = static_cast<const char*>(a.storage().data());
    const auto* ptr = static_cast<const char*>(a.data_ptr());
    if (ptr < base || ptr + a.nbytes() > base + a.storage().nbytes() ||
        reinterpret_cast<uintptr_t>(ptr) % 64 != 0) {
      std::cout << "py.tdz: leaf 'a' is not an aligned view into the mapping\n";
      ++problems;
    }
    tensordict::unpack_memmap(work + "/py.tdz", work + "/py_unpacked_by_cpp");
    problems += compare(
        "unpack_memmap(py.tdz)",
        TensorDict::load_memmap(work + "/py_unpacked_by_cpp"));
    tensordict::unpack_memmap(
        work + "/py_deflate.tdz", work + "/py_deflate_unpacked_by_cpp");
    problems += compare(
        "unpack_memmap(py_deflate.tdz)",
        TensorDict::load_memmap(work + "/py_deflate_unpacked_by_cpp"));
    // Python's archives written through a shared mapping (memmap_like and
    // a zip with data descriptors, a payload byte changed in place): the
    // CRCs are stale until refresh_archive_checksums rewrites them.
    for (const char* name : {"py_stale.tdz", "py_descriptor.tdz"}) {
      const std::string path = work + "/" + name;
      bool refused = false;
      try {
        tensordict::unpack_memmap(path, work + "/" + name + ".before");
      } catch (const c10::Error& e) {
        refused = e.msg().find("'a.memmap' is corrupted") != std::string::npos;
      }
      if (!refused) {
        std::cout << name << ": unpack_memmap did not report a.memmap's CRC\n";
        ++problems;
      }
      tensordict::refresh_archive_checksums(path);
      tensordict::unpack_memmap(path, work + "/" + name + ".after");
      std::cout << name << ": refreshed\n";
    }
    // C++ -> Python.
    (void)sample().save(work + "/cpp.tdz");
    // For the byte comparison with py.tdz: Python's json module spacing.
    (void)sample().save(tensordict::MemmapOptions(work + "/cpp_spaced.tdz")
                            .json_style(tensordict::JsonStyle::kSpaced));
    // memmap_like: zeros, written through; one archive left stale, one
    // refreshed.
    for (const char* name : {"cpp_like.tdz", "cpp_like_refreshed.tdz"}) {
      const TensorDict like = sample().memmap_like(work + "/" + name);
      like.get("a").fill_(5);
      like.get({"nested", "b"}).copy_(torch::tensor({7, 8, 9}));
    }
    tensordict::refresh_archive_checksums(work + "/cpp_like_refreshed.tdz");
    // A lazy stack root, as an archive.
    TensorDict first({2});
    first.set("a", torch::ones({2, 3}));
    TensorDict second({2});
    second.set("a", torch::zeros({2, 4}));
    (void)tensordict::memmap(
        tensordict::lazy_stack({first, second}, 0), work + "/cpp_stack.tdz");
    (void)sample().memmap(work + "/cpp_dir");
    tensordict::pack_memmap(work + "/cpp_dir", work + "/cpp_packed.tdz");
    tensordict::pack_memmap(
        work + "/cpp_dir",
        work + "/cpp_deflate.tdz",
        tensordict::PackMemmapOptions().compression("deflate"));
    // save's own compression, and an archive named without the suffix.
    (void)sample().save(
        tensordict::MemmapOptions(work + "/cpp_saved_deflate.tdz")
            .compression("deflate"));
    (void)sample().save(
        tensordict::MemmapOptions(work + "/cpp_archive_flag").archive(true));
  } catch (const std::exception& e) {
    std::cout << "error: " << e.what() << "\n";
    return 1;
  }
  return problems == 0 ? 0 : 1;
}
