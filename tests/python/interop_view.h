// The canonical JSON view of a dict, as interop_view.py's dump() gives it in
// Python, so that an interop test can compare what each side loaded: batch
// size, device, names, and per key (sorted) a nested view, a lazy stack's
// elements, a non-tensor value or a leaf's dtype, shape and values.

#pragma once

#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tensordict::interop {

/// Each dtype the interop tests use, with Python's name for it (torch.<name>).
inline const std::vector<std::pair<c10::ScalarType, const char*>>&
python_dtype_names() {
  static const std::vector<std::pair<c10::ScalarType, const char*>> names = {
      {torch::kFloat64, "float64"},
      {torch::kFloat32, "float32"},
      {torch::kFloat16, "float16"},
      {torch::kBFloat16, "bfloat16"},
      {torch::kInt8, "int8"},
      {torch::kUInt8, "uint8"},
      {torch::kInt16, "int16"},
      {torch::kInt32, "int32"},
      {torch::kInt64, "int64"},
      {torch::kUInt16, "uint16"},
      {torch::kUInt32, "uint32"},
      {torch::kUInt64, "uint64"},
      {torch::kComplexFloat, "complex64"},
      {torch::kComplexDouble, "complex128"},
      {c10::ScalarType::Float8_e4m3fn, "float8_e4m3fn"},
      {c10::ScalarType::Float8_e5m2, "float8_e5m2"},
      {torch::kBool, "bool"}};
  return names;
}

/// Python's spelling of `dtype`, "torch.float32".
inline std::string python_dtype(c10::ScalarType dtype) {
  for (const auto& [kind, name] : python_dtype_names()) {
    if (kind == dtype) {
      return std::string("torch.") + name;
    }
  }
  return "torch.?";
}

/// The dtype Python calls torch.<name>; throws on a name not in
/// python_dtype_names().
inline c10::ScalarType dtype_named(const std::string& name) {
  for (const auto& [kind, kind_name] : python_dtype_names()) {
    if (name == kind_name) {
      return kind;
    }
  }
  throw std::invalid_argument("dtype_named: unknown dtype name '" + name + "'");
}

Json dump(const TensorDict& td);

/// interop_view.py's dump_stack(): the stack dim (and its name if
/// `with_name`) and each element's view.
inline Json dump_stack(
    const LazyStackedTensorDict& stack, bool with_name = false) {
  Json elements = Json::array();
  for (const TensorDict& element : stack.tensordicts()) {
    elements.push_back(dump(element));
  }
  Json out = Json::object();
  out["stack_dim"] = stack.stack_dim();
  if (with_name) {
    out["stack_dim_name"] =
        stack.stack_dim_name() ? Json(*stack.stack_dim_name()) : Json(nullptr);
  }
  out["elements"] = elements;
  return out;
}

/// interop_view.py's dump().
inline Json dump(const TensorDict& td) {
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
      entries[key] = dump_stack(value.lazy_stack());
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
          {"dtype", python_dtype(t.scalar_type())},
          {"shape", t.sizes().vec()},
          {"values", values}};
    }
  }
  out["entries"] = entries;
  return out;
}

}  // namespace tensordict::interop
