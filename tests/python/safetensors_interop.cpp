// The C++ half of safetensors_interop.py.
//
// usage: safetensors_interop PYTHON_DIR CPP_DIR
//   loads every <case>.safetensors Python wrote (tensordict.to_safetensors,
//   and plain_*.safetensors from safetensors.torch.save_file), writes what it
//   read as CPP_DIR/<case>.loaded.json, then builds the same cases and
//   writes CPP_DIR/<case>.safetensors with to_safetensors.
// usage: safetensors_interop --load FILE
//   loads FILE; exits 0 if it loads, 1 (printing the error) if refused.

#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "interop_cases.h"
#include "interop_view.h"

using namespace tensordict;  // NOLINT(google-build-using-namespace)

namespace {

// safetensors_interop.py's DTYPES: every dtype safetensors stores.
std::vector<std::string> dtype_names() {
  // clang-format off
  return {"float64", "float32", "float16", "bfloat16", "int8", "uint8",
          "int16", "int32", "int64", "uint16", "uint32", "uint64",
          "complex64", "float8_e4m3fn", "float8_e5m2", "bool"};
  // clang-format on
}

// The cases of safetensors_interop.py, built the same way.
std::map<std::string, std::variant<TensorDict, LazyStackedTensorDict>> cases() {
  std::map<std::string, std::variant<TensorDict, LazyStackedTensorDict>> out;
  out.emplace("basic", interop::basic_case());
  out.emplace("dtypes", interop::dtypes_case(dtype_names()));
  out.emplace("names", interop::named_case());
  out.emplace("empty_leaf", interop::empty_leaf_case());
  TensorDict scalar(
      {{"x", torch::tensor(3.5)},
       {"meta", Json(7)},
       {"ratio", Json(0.1)},
       {"text", "h\xc3\xa9llo \"q\"\n"}});
  scalar.set_non_tensor("obj", Json::parse(R"({"k": [1, "two", null]})"));
  out.emplace("scalar", scalar);
  out.emplace(
      "noncontiguous",
      TensorDict(
          {{"t", torch::arange(6, torch::kInt32).reshape({3, 2}).t()},
           {"s",
            torch::arange(12, torch::kFloat64)
                .reshape({3, 4})
                .slice(1, 0, 4, 2)}}));
  out.emplace("deep", interop::deep_case());
  out.emplace(
      "lazy_stack",
      interop::lazy_stack_case(TensorDict(
          {{"y", torch::arange(6, 12, torch::kFloat32).reshape({3, 2})}},
          {3})));
  out.emplace(
      "lazy_root",
      tensordict::lazy_stack(
          {TensorDict(
               {{"obs", torch::zeros({4})},
                {"sub", {{"r", torch::arange(4, torch::kInt64)}}}},
               {4}),
           TensorDict(
               {{"obs", torch::ones({4})},
                {"sub", {{"r", torch::arange(4, 8, torch::kInt64)}}}},
               {4})},
          0));
  return out;
}

Json dump_any(const std::variant<TensorDict, LazyStackedTensorDict>& loaded) {
  if (const auto* td = std::get_if<TensorDict>(&loaded)) {
    return interop::dump(*td);
  }
  return interop::dump_stack(std::get<LazyStackedTensorDict>(loaded));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--load") {
    try {
      (void)from_safetensors_any(argv[2]);
    } catch (const c10::Error& e) {
      std::cout << e.msg() << "\n";
      return 1;
    }
    return 0;
  }
  const auto dirs = interop::dir_args(
      argc,
      argv,
      "usage: safetensors_interop PYTHON_DIR CPP_DIR\n"
      "       safetensors_interop --load FILE\n");
  const std::string& py_dir = dirs.first;
  const std::string& cpp_dir = dirs.second;
  int failures = interop::count_failures(
      cases(), [&](const std::string& name, const auto& td) {
        const auto loaded =
            from_safetensors_any(py_dir + "/" + name + ".safetensors");
        std::ofstream(cpp_dir + "/" + name + ".loaded.json")
            << dump_any(loaded).dump();
        const std::string path = cpp_dir + "/" + name + ".safetensors";
        std::visit([&](const auto& dict) { to_safetensors(dict, path); }, td);
        std::cout << "ok " << name
                  << ": C++ read Python's file and wrote its own\n";
        return 0;
      });
  // The plain_*.safetensors files, by name.
  std::map<std::string, std::string> plain_files;
  for (const auto& entry : std::filesystem::directory_iterator(py_dir)) {
    if (entry.path().filename().string().rfind("plain_", 0) == 0) {
      plain_files.emplace(entry.path().stem().string(), entry.path().string());
    }
  }
  failures += interop::count_failures(
      plain_files, [&](const std::string& name, const std::string& path) {
        const TensorDict loaded = from_safetensors(path);
        std::ofstream(cpp_dir + "/" + name + ".loaded.json")
            << interop::dump(loaded).dump();
        std::cout << "ok " << name << ": C++ read the plain safetensors file\n";
        return 0;
      });
  return failures == 0 ? 0 : 1;
}
