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

#include "interop_view.h"

using namespace tensordict;  // NOLINT(google-build-using-namespace)

namespace {

const std::vector<std::pair<std::string, c10::ScalarType>>& dtypes() {
  static const std::vector<std::pair<std::string, c10::ScalarType>> kinds = {
      {"float64", torch::kFloat64},
      {"float32", torch::kFloat32},
      {"float16", torch::kFloat16},
      {"bfloat16", torch::kBFloat16},
      {"int8", torch::kInt8},
      {"uint8", torch::kUInt8},
      {"int16", torch::kInt16},
      {"int32", torch::kInt32},
      {"int64", torch::kInt64},
      {"uint16", torch::kUInt16},
      {"uint32", torch::kUInt32},
      {"uint64", torch::kUInt64},
      {"complex64", torch::kComplexFloat},
      {"float8_e4m3fn", c10::ScalarType::Float8_e4m3fn},
      {"float8_e5m2", c10::ScalarType::Float8_e5m2},
      {"bool", torch::kBool}};
  return kinds;
}

// The cases of safetensors_interop.py, built the same way.
std::map<std::string, std::variant<TensorDict, LazyStackedTensorDict>> cases() {
  std::map<std::string, std::variant<TensorDict, LazyStackedTensorDict>> out;
  out.emplace(
      "basic",
      TensorDict(
          {{"a", torch::arange(3, torch::kInt32)},
           {"b", {{"c", torch::ones({3, 2})}, {"s", "hello"}}},
           {"d", torch::tensor({true, false, true})}},
          {3}));
  TensorDict kinds({}, {2});
  for (const auto& [name, dtype] : dtypes()) {
    kinds.set(name, torch::arange(6).reshape({2, 3}).to(dtype));
  }
  out.emplace("dtypes", kinds);
  TensorDict named(
      {{"x", torch::arange(6, torch::kFloat32).reshape({2, 3})},
       {"n",
        TensorDict({{"y", torch::ones({2, 4}, torch::kFloat64)}}, {2, 4})}},
      {2});
  named.set_names({"b"});
  out.emplace("names", named);
  out.emplace(
      "empty_leaf",
      TensorDict(
          {{"e", torch::zeros({2, 0})}, {"f", torch::arange(2, torch::kInt16)}},
          {2}));
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
  out.emplace(
      "deep",
      TensorDict(
          {{"l1", {{"l2", {{"l3", {{"v", torch::arange(5, torch::kInt64)}}}}}}},
           {"w", torch::arange(5, torch::kUInt8)}},
          {5}));
  TensorDict a({{"y", torch::arange(6, torch::kFloat32).reshape({3, 2})}}, {3});
  TensorDict b(
      {{"y", torch::arange(6, 12, torch::kFloat32).reshape({3, 2})}}, {3});
  out.emplace(
      "lazy_stack",
      TensorDict(
          {{"stack", tensordict::lazy_stack({a, b}, 1)},
           {"x", torch::ones({3, 2})}},
          {3, 2}));
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
  if (argc != 3) {
    std::cerr << "usage: safetensors_interop PYTHON_DIR CPP_DIR\n"
                 "       safetensors_interop --load FILE\n";
    return 2;
  }
  const std::string py_dir = argv[1];
  const std::string cpp_dir = argv[2];
  int failures = 0;
  for (const auto& [name, td] : cases()) {
    try {
      const auto loaded =
          from_safetensors_any(py_dir + "/" + name + ".safetensors");
      std::ofstream(cpp_dir + "/" + name + ".loaded.json")
          << dump_any(loaded).dump();
      const std::string path = cpp_dir + "/" + name + ".safetensors";
      std::visit([&](const auto& dict) { to_safetensors(dict, path); }, td);
      std::cout << "ok " << name
                << ": C++ read Python's file and wrote its own\n";
    } catch (const std::exception& e) {
      std::cerr << "FAIL " << name << ": " << e.what() << "\n";
      ++failures;
    }
  }
  for (const auto& entry : std::filesystem::directory_iterator(py_dir)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("plain_", 0) != 0) {
      continue;
    }
    const std::string name = entry.path().stem().string();
    try {
      const TensorDict loaded = from_safetensors(entry.path().string());
      std::ofstream(cpp_dir + "/" + name + ".loaded.json")
          << interop::dump(loaded).dump();
      std::cout << "ok " << name << ": C++ read the plain safetensors file\n";
    } catch (const std::exception& e) {
      std::cerr << "FAIL " << name << ": " << e.what() << "\n";
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}
