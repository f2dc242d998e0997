// The cases consolidate_interop and safetensors_interop both build, as
// interop_cases.py builds them in Python, and the loop both run over their
// cases.

#pragma once

#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "interop_view.h"

namespace tensordict::interop {

/// interop_cases.basic(): a few leaves, a nested dict and a string, batch [3].
inline TensorDict basic_case() {
  return TensorDict(
      {{"a", torch::arange(3, torch::kInt32)},
       {"b", {{"c", torch::ones({3, 2})}, {"s", "hello"}}},
       {"d", torch::tensor({true, false, true})}},
      {3});
}

/// interop_cases.dtypes(names): 0..5 as [2, 3] in each dtype of `names`
/// (Python's names, in that order), batch [2].
inline TensorDict dtypes_case(const std::vector<std::string>& names) {
  TensorDict out({}, {2});
  for (const std::string& name : names) {
    out.set(name, torch::arange(6).reshape({2, 3}).to(dtype_named(name)));
  }
  return out;
}

/// interop_cases.named(device): batch [2] named "b" and a nested dict of
/// batch [2, 4].
inline TensorDict named_case(std::optional<c10::Device> device = std::nullopt) {
  TensorDict out(
      {{"x", torch::arange(6, torch::kFloat32).reshape({2, 3})},
       {"n",
        TensorDict({{"y", torch::ones({2, 4}, torch::kFloat64)}}, {2, 4})}},
      {2},
      device);
  out.set_names({"b"});
  return out;
}

/// interop_cases.empty_leaf(): a leaf with no elements.
inline TensorDict empty_leaf_case() {
  return TensorDict(
      {{"e", torch::zeros({2, 0})}, {"f", torch::arange(2, torch::kInt16)}},
      {2});
}

/// interop_cases.deep(): a leaf three levels down, batch [5].
inline TensorDict deep_case() {
  return TensorDict(
      {{"l1", {{"l2", {{"l3", {{"v", torch::arange(5, torch::kInt64)}}}}}}},
       {"w", torch::arange(5, torch::kUInt8)}},
      {5});
}

/// interop_cases.lazy_stack_entry(second): a lazy stack along dim 1 of two
/// [3] dicts under "stack", and "x", batch [3, 2]; `second` is the second
/// element's dict.
inline TensorDict lazy_stack_case(const TensorDict& second) {
  const TensorDict first(
      {{"y", torch::arange(6, torch::kFloat32).reshape({3, 2})}}, {3});
  return TensorDict(
      {{"stack", tensordict::lazy_stack({first, second}, 1)},
       {"x", torch::ones({3, 2})}},
      {3, 2});
}

/// The PYTHON_DIR and CPP_DIR arguments of a C++ half; without exactly
/// two, prints `usage` and exits with status 2.
inline std::pair<std::string, std::string> dir_args(
    int argc, char** argv, const char* usage) {
  if (argc != 3) {
    std::cerr << usage;
    std::exit(2);
  }
  return {argv[1], argv[2]};
}

/// Runs `check(name, value)` over `cases`; returns how many failed: the
/// failures `check` returns, and each case that throws (printed as FAIL).
template <class Cases, class Check>
int count_failures(const Cases& cases, Check check) {
  int failures = 0;
  for (const auto& [name, value] : cases) {
    try {
      failures += check(name, value);
    } catch (const std::exception& e) {
      std::cerr << "FAIL " << name << ": " << e.what() << "\n";
      ++failures;
    }
  }
  return failures;
}

}  // namespace tensordict::interop
