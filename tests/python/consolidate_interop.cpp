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
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using namespace tensordict;  // NOLINT(google-build-using-namespace)

namespace {

// The cases of consolidate_interop.py, built the same way.
std::map<std::string, TensorDict> cases() {
  std::map<std::string, TensorDict> out;
  out.emplace(
      "basic",
      TensorDict(
          {{"a", torch::arange(3, torch::kInt32)},
           {"b", {{"c", torch::ones({3, 2})}, {"s", "hello"}}},
           {"d", torch::tensor({true, false, true})}},
          {3}));
  TensorDict dtypes({}, {2});
  const std::vector<std::pair<std::string, c10::ScalarType>> kinds = {
      {"float64", torch::kFloat64},
      {"float32", torch::kFloat32},
      {"float16", torch::kFloat16},
      {"bfloat16", torch::kBFloat16},
      {"int8", torch::kInt8},
      {"uint8", torch::kUInt8},
      {"int16", torch::kInt16},
      {"int32", torch::kInt32},
      {"int64", torch::kInt64},
      {"complex64", torch::kComplexFloat},
      {"bool", torch::kBool}};
  for (const auto& [name, dtype] : kinds) {
    dtypes.set(name, torch::arange(6).reshape({2, 3}).to(dtype));
  }
  out.emplace("dtypes", dtypes);
  TensorDict named(
      {{"x", torch::arange(6, torch::kFloat32).reshape({2, 3})},
       {"n",
        TensorDict({{"y", torch::ones({2, 4}, torch::kFloat64)}}, {2, 4})}},
      {2},
      c10::Device(c10::kCPU));
  named.set_names({"b"});
  named.lock_();
  out.emplace("names_device_locked", named);
  TensorDict stacked({{"x", torch::zeros({2, 2})}}, {2, 2});
  stacked.set(
      "words",
      NonTensorStack::from_list(Json::parse(R"([["a","b"],["c","d"]])"), 2));
  out.emplace("stack", stacked);
  out.emplace(
      "empty_leaf",
      TensorDict(
          {{"e", torch::zeros({2, 0})}, {"f", torch::arange(2, torch::kInt16)}},
          {2}));
  out.emplace(
      "scalar", TensorDict({{"x", torch::tensor(3.5)}, {"meta", Json(7)}}));
  out.emplace(
      "deep",
      TensorDict(
          {{"l1", {{"l2", {{"l3", {{"v", torch::arange(5, torch::kInt64)}}}}}}},
           {"w", torch::arange(5, torch::kUInt8)}},
          {5}));
  // A lazy stack entry whose elements differ in keys and shapes.
  TensorDict a({{"y", torch::arange(6, torch::kFloat32).reshape({3, 2})}}, {3});
  TensorDict b(
      {{"y", torch::arange(6, 12, torch::kFloat32).reshape({3, 2})},
       {"z", torch::arange(3, torch::kInt16).reshape({3, 1})}},
      {3});
  out.emplace(
      "lazy_stack",
      TensorDict(
          {{"stack", tensordict::lazy_stack({a, b}, 1)},
           {"x", torch::ones({3, 2})}},
          {3, 2}));
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

// The canonical view of consolidate_interop.py's dump().
Json dump(const TensorDict& td) {
  Json out = Json::object();
  out["batch_size"] = td.batch_size().vec();
  out["device"] = td.device() ? Json(td.device()->str()) : Json(nullptr);
  Json names = Json::array();
  if (td.has_names()) {
    for (const auto& name : td.names()) {
      names.push_back(name ? Json(*name) : Json(nullptr));
    }
  }
  out["names"] = names;
  Json entries = Json::object();
  std::vector<std::string> keys;
  for (const auto& key : td.keys()) {
    keys.emplace_back(key.back());
  }
  std::sort(keys.begin(), keys.end());
  for (const auto& key : keys) {
    const Value value = td[key];
    if (value.is_tensordict()) {
      entries[key] = dump(value.tensordict());
    } else if (value.is_lazy_stack()) {
      Json elements = Json::array();
      for (const TensorDict& element : value.lazy_stack().tensordicts()) {
        elements.push_back(dump(element));
      }
      entries[key] = Json{
          {"stack_dim", value.lazy_stack().stack_dim()},
          {"elements", elements}};
    } else if (value.is_non_tensor()) {
      entries[key] = Json{{"non_tensor", value.non_tensor()}};
    } else {
      const at::Tensor& t = value.tensor();
      at::Tensor flat = t.reshape({-1});
      if (flat.is_complex()) {
        flat = torch::view_as_real(flat).reshape({-1});
      }
      flat = flat.to(torch::kDouble).contiguous();
      std::vector<double> values(
          flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel());
      entries[key] = Json{
          {"dtype", "torch." + std::string(c10::toString(t.scalar_type()))},
          {"shape", t.sizes().vec()},
          {"values", values}};
    }
  }
  out["entries"] = entries;
  return out;
}

// c10::toString gives "Float"; Python spells "torch.float32".
void fix_dtype_names(Json& j) {
  static const std::map<std::string, std::string> names = {
      {"torch.Double", "torch.float64"},
      {"torch.Float", "torch.float32"},
      {"torch.Half", "torch.float16"},
      {"torch.BFloat16", "torch.bfloat16"},
      {"torch.Char", "torch.int8"},
      {"torch.Byte", "torch.uint8"},
      {"torch.Short", "torch.int16"},
      {"torch.Int", "torch.int32"},
      {"torch.Long", "torch.int64"},
      {"torch.ComplexFloat", "torch.complex64"},
      {"torch.Bool", "torch.bool"}};
  if (j.is_array()) {
    for (Json& item : j) {
      fix_dtype_names(item);
    }
  }
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "dtype" && it.value().is_string()) {
        const auto found = names.find(it.value().get<std::string>());
        if (found != names.end()) {
          it.value() = found->second;
        }
      } else {
        fix_dtype_names(it.value());
      }
    }
  }
}

// consolidate_interop.py's dump_stack().
Json dump_stack(const LazyStackedTensorDict& stack) {
  Json elements = Json::array();
  for (const TensorDict& element : stack.tensordicts()) {
    elements.push_back(dump(element));
  }
  Json out = Json::object();
  out["stack_dim"] = stack.stack_dim();
  out["stack_dim_name"] =
      stack.stack_dim_name() ? Json(*stack.stack_dim_name()) : Json(nullptr);
  out["elements"] = elements;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: consolidate_interop PYTHON_DIR CPP_DIR\n";
    return 2;
  }
  const std::string py_dir = argv[1];
  const std::string cpp_dir = argv[2];
  int failures = 0;
  for (const auto& [name, td] : cases()) {
    try {
      const TensorDict loaded =
          TensorDict::from_consolidated(py_dir + "/" + name + ".bin");
      if (!loaded.is_consolidated()) {
        std::cerr << "FAIL " << name << ": not consolidated after loading\n";
        ++failures;
      }
      Json view = dump(loaded);
      fix_dtype_names(view);
      std::ofstream(cpp_dir + "/" + name + ".loaded.json") << view.dump();
      (void)td.consolidate(
          ConsolidateOptions().filename(cpp_dir + "/" + name + ".bin"));
      std::cout << "ok " << name
                << ": C++ read Python's file and wrote its own\n";
    } catch (const std::exception& e) {
      std::cerr << "FAIL " << name << ": " << e.what() << "\n";
      ++failures;
    }
  }
  for (const auto& [name, stack] : stack_cases()) {
    try {
      const LazyStackedTensorDict loaded =
          LazyStackedTensorDict::from_consolidated(
              py_dir + "/" + name + ".bin");
      if (!loaded.is_consolidated()) {
        std::cerr << "FAIL " << name << ": not consolidated after loading\n";
        ++failures;
      }
      Json view = dump_stack(loaded);
      fix_dtype_names(view);
      std::ofstream(cpp_dir + "/" + name + ".loaded.json") << view.dump();
      (void)stack.consolidate(
          ConsolidateOptions().filename(cpp_dir + "/" + name + ".bin"));
      std::cout << "ok " << name
                << ": C++ read Python's lazy stack and wrote its own\n";
    } catch (const std::exception& e) {
      std::cerr << "FAIL " << name << ": " << e.what() << "\n";
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}
