// The extension python_casters.py drives: functions taking and returning
// C++ dicts through the casters of <tensordict/python.h>, so the tests see
// exactly what a user's bindings would.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <tensordict/python.h>
#include <tensordict/tensordict.h>

#include <string>
#include <vector>

namespace py = pybind11;
using tensordict::Json;
using tensordict::LazyStackedTensorDict;
using tensordict::NestedKey;
using tensordict::NonTensorData;
using tensordict::NonTensorStack;
using tensordict::TensorClass;
using tensordict::TensorDict;

namespace {

// A TensorClass crossing as its dict.
struct Step : TensorClass<Step> {
  TENSORDICT_FIELDS(Step, obs, reward, (std::string, task))
};

NestedKey key_of(const std::vector<std::string>& parts) {
  return NestedKey(parts);
}

// A dict of every entry kind, built in C++.
TensorDict sample() {
  TensorDict td(
      {{"obs", torch::arange(12, torch::kFloat32).reshape({3, 4})},
       {"action", torch::ones({3, 2}, torch::kInt64)},
       {"mask", torch::tensor({true, false, true})},
       {"half", torch::zeros({3}, torch::kFloat16)},
       {"next",
        {{"reward", torch::full({3, 1}, 0.5, torch::kFloat64)},
         {"deep", {{"x", torch::zeros({3, 5}, torch::kUInt8)}}}}},
       {"task", "reach"},
       {"meta", Json{{"seed", 7}, {"tags", {"a", "b"}}, {"ok", true}}},
       {"none", nullptr}},
      /*batch_size=*/{3});
  td.set(
      "words",
      tensordict::Value(NonTensorStack(
          std::vector<Json>{"x", 1, Json{{"k", 2.5}}}, /*batch_size=*/{3})));
  td.set(
      "stack",
      tensordict::Value(tensordict::lazy_stack(
          {TensorDict(
               {{"a", torch::zeros({3, 2})}, {"b", torch::ones({3})}}, {3}),
           TensorDict(
               {{"a", torch::ones({3, 2})}, {"b", torch::zeros({3})}}, {3})},
          /*dim=*/1,
          std::string("agents"))));
  return td;
}

// 100 float leaves over 3 levels: 4 at the root, 4 dicts of 4 leaves, each
// with 4 dicts of 5 leaves (4 + 16 + 80), batch size [8].
TensorDict hundred_leaves() {
  TensorDict root({8});
  int leaf = 0;
  auto add = [&](TensorDict& td, int count) {
    for (int i = 0; i < count; ++i) {
      td.set("leaf" + std::to_string(i), torch::full({8, 3}, float(leaf++)));
    }
  };
  add(root, 4);
  for (int i = 0; i < 4; ++i) {
    TensorDict mid({8});
    add(mid, 4);
    for (int j = 0; j < 4; ++j) {
      TensorDict low({8});
      add(low, 5);
      mid.set("low" + std::to_string(j), low);
    }
    root.set("mid" + std::to_string(i), mid);
  }
  return root;
}

}  // namespace

PYBIND11_MODULE(python_casters, m) {
  m.doc() = "Test bindings of tensordict/python.h";
  m.def("identity", [](const TensorDict& td) { return td; });
  m.def("identity_lazy", [](const LazyStackedTensorDict& s) { return s; });
  m.def("identity_non_tensor", [](const NonTensorData& d) { return d; });
  m.def("identity_non_tensor_stack", [](const NonTensorStack& s) { return s; });
  m.def("identity_step", [](const Step& s) { return s; });
  m.def("identity_value", [](py::handle obj) {
    return tensordict::python::to_python(
        tensordict::python::value_from_python(obj));
  });
  m.def("from_python", [](py::handle obj) {
    return tensordict::python::to_python(
        tensordict::python::tensordict_from_python(obj));
  });
  m.def("make_step", [] {
    return Step(torch::zeros({2, 3}), torch::ones({2}), "run", {2});
  });
  m.def("step_task", [](const Step& s) { return s.task(); });
  m.def("sample", &sample);
  m.def("hundred_leaves", &hundred_leaves);
  // Converts the same C++ dict `n` times (the benchmark's C++ -> Python).
  m.def("convert_many", [](const TensorDict& td, int64_t n) {
    py::object last;
    for (int64_t i = 0; i < n; ++i) {
      last = tensordict::python::to_python(td);
    }
    return last;
  });
  // Python -> C++ `n` times, for the leak check.
  m.def("load_many", [](py::handle obj, int64_t n) {
    int64_t leaves = 0;
    for (int64_t i = 0; i < n; ++i) {
      leaves = static_cast<int64_t>(
          tensordict::python::tensordict_from_python(obj)
              .keys(/*include_nested=*/true, /*leaves_only=*/true)
              .size());
    }
    return leaves;
  });
  // Writes through C++, with the GIL released: fills the leaf at `key`.
  m.def(
      "fill",
      [](TensorDict td, const std::vector<std::string>& key, double value) {
        td.get(key_of(key)).fill_(value);
      },
      py::call_guard<py::gil_scoped_release>());
  // Returns the leaf at `key` as C++ sees it.
  m.def("get", [](const TensorDict& td, const std::vector<std::string>& key) {
    return td.get(key_of(key));
  });
  // Sets a new leaf in C++ and returns the dict: the caller's Python dict is
  // another object, so it does not see the key.
  m.def("set_zeros", [](TensorDict td, const std::string& key) {
    td.set(key, torch::zeros(td.batch_size()));
    return td;
  });
  // What C++ read: batch size, device, names, lock, keys.
  m.def("describe", [](const TensorDict& td) {
    py::dict out;
    out["batch_size"] = td.batch_size().vec();
    out["device"] = td.device() ? td.device()->str() : std::string("none");
    std::vector<py::object> names;
    for (const auto& name : td.names()) {
      names.push_back(name ? py::object(py::str(*name)) : py::none());
    }
    out["names"] = names;
    out["locked"] = td.is_locked();
    std::vector<std::string> keys;
    for (const NestedKey& key : td.keys(/*include_nested=*/true)) {
      keys.push_back(key.to_string());
    }
    out["keys"] = keys;
    return out;
  });
}
