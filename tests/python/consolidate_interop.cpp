// The C++ half of consolidate_interop.py: loads every consolidated file
// Python wrote and dumps what it read, then builds the same cases and writes
// them with consolidate(filename).
//
// usage: consolidate_interop PYTHON_DIR CPP_DIR

#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "interop_cases.h"
#include "interop_view.h"

using namespace tensordict;  // NOLINT(google-build-using-namespace)

namespace {

// The cases of consolidate_interop.py, built the same way.
std::map<std::string, TensorDict> cases() {
  std::map<std::string, TensorDict> out;
  out.emplace("basic", interop::basic_case());
  // clang-format off
  out.emplace("dtypes", interop::dtypes_case(
      {"float64", "float32", "float16", "bfloat16", "int8", "uint8", "int16",
       "int32", "int64", "complex64", "bool"}));
  // clang-format on
  TensorDict named = interop::named_case(c10::Device(c10::kCPU));
  named.lock_();
  out.emplace("names_device_locked", named);
  TensorDict stacked({{"x", torch::zeros({2, 2})}}, {2, 2});
  stacked.set(
      "words",
      NonTensorStack::from_list(Json::parse(R"([["a","b"],["c","d"]])"), 2));
  out.emplace("stack", stacked);
  out.emplace("empty_leaf", interop::empty_leaf_case());
  out.emplace(
      "scalar", TensorDict({{"x", torch::tensor(3.5)}, {"meta", Json(7)}}));
  out.emplace("deep", interop::deep_case());
  // A lazy stack entry whose elements differ in keys and shapes.
  out.emplace(
      "lazy_stack",
      interop::lazy_stack_case(TensorDict(
          {{"y", torch::arange(6, 12, torch::kFloat32).reshape({3, 2})},
           {"z", torch::arange(3, torch::kInt16).reshape({3, 1})}},
          {3})));
  // A nested tensorclass: Python names its level by the class
  // (corpus_classes.CorpusInner) and C++ keeps and writes that name.
  TensorDict inner(
      {{"y", torch::arange(2, torch::kInt64)}, {"tag", Json("t")}}, {2});
  inner.set_python_class("<class 'corpus_classes.CorpusInner'>");
  out.emplace(
      "tensorclass",
      TensorDict({{"x", torch::ones({2, 3})}, {"tc", inner}}, {2}));
  return out;
}

// The lazy stacks at the root of consolidate_interop.py's stack_cases().
std::map<std::string, LazyStackedTensorDict> stack_cases() {
  std::map<std::string, LazyStackedTensorDict> out;
  TensorDict a(
      {{"y", torch::arange(6, torch::kFloat32).reshape({3, 2})},
       {"n", {{"w", torch::arange(3, torch::kInt16)}}}},
      {3});
  TensorDict b(
      {{"y", torch::arange(6, 12, torch::kFloat32).reshape({3, 2})},
       {"z", torch::arange(3, torch::kInt16).reshape({3, 1})},
       {"s", "text"}},
      {3});
  out.emplace("root_stack", tensordict::lazy_stack({a, b}, 1));
  TensorDict c(
      {{"x", torch::arange(4, torch::kFloat64)}}, {4}, std::nullopt, {"b"});
  TensorDict d(
      {{"x", torch::ones({4}, torch::kFloat64)}}, {4}, std::nullopt, {"b"});
  out.emplace("root_stack_named", tensordict::lazy_stack({c, d}, 0, "s"));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const auto dirs = interop::dir_args(
      argc, argv, "usage: consolidate_interop PYTHON_DIR CPP_DIR\n");
  const std::string& py_dir = dirs.first;
  const std::string& cpp_dir = dirs.second;
  int failures = interop::count_failures(
      cases(), [&](const std::string& name, const TensorDict& td) {
        int failed = 0;
        const TensorDict loaded =
            TensorDict::from_consolidated(py_dir + "/" + name + ".bin");
        if (!loaded.is_consolidated()) {
          std::cerr << "FAIL " << name << ": not consolidated after loading\n";
          ++failed;
        }
        std::ofstream(cpp_dir + "/" + name + ".loaded.json")
            << interop::dump(loaded).dump();
        if (name == "tensorclass" &&
            loaded.get_tensordict("tc").python_class() !=
                "<class 'corpus_classes.CorpusInner'>") {
          std::cerr << "FAIL " << name << ": the nested level lost its class ('"
                    << loaded.get_tensordict("tc").python_class() << "')\n";
          ++failed;
        }
        (void)td.consolidate(
            ConsolidateOptions().filename(cpp_dir + "/" + name + ".bin"));
        std::cout << "ok " << name
                  << ": C++ read Python's file and wrote its own\n";
        return failed;
      });
  failures += interop::count_failures(
      stack_cases(),
      [&](const std::string& name, const LazyStackedTensorDict& stack) {
        int failed = 0;
        const LazyStackedTensorDict loaded =
            LazyStackedTensorDict::from_consolidated(
                py_dir + "/" + name + ".bin");
        if (!loaded.is_consolidated()) {
          std::cerr << "FAIL " << name << ": not consolidated after loading\n";
          ++failed;
        }
        std::ofstream(cpp_dir + "/" + name + ".loaded.json")
            << interop::dump_stack(loaded, /*with_name=*/true).dump();
        (void)stack.consolidate(
            ConsolidateOptions().filename(cpp_dir + "/" + name + ".bin"));
        // The same bytes from memory, and Python's file read back from them.
        const at::Tensor bytes = consolidated_bytes(stack);
        std::ofstream(cpp_dir + "/" + name + ".bytes.bin", std::ios::binary)
            .write(
                static_cast<const char*>(bytes.const_data_ptr()),
                bytes.numel());
        std::ifstream py_file(py_dir + "/" + name + ".bin", std::ios::binary);
        const std::string py_bytes(
            (std::istreambuf_iterator<char>(py_file)),
            std::istreambuf_iterator<char>());
        const LazyStackedTensorDict from_bytes =
            LazyStackedTensorDict::from_consolidated_bytes(
                torch::from_blob(
                    const_cast<char*>(py_bytes.data()),
                    {static_cast<int64_t>(py_bytes.size())},
                    torch::kUInt8)
                    .clone());
        if (interop::dump_stack(from_bytes, /*with_name=*/true) !=
            interop::dump_stack(loaded, /*with_name=*/true)) {
          std::cerr << "FAIL " << name
                    << ": from_consolidated_bytes reads Python's file unlike "
                       "from_consolidated\n";
          ++failed;
        }
        std::cout << "ok " << name
                  << ": C++ read Python's lazy stack and wrote its own\n";
        return failed;
      });
  return failures == 0 ? 0 : 1;
}
