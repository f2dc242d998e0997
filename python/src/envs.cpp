// tensordict_cpp._C's env registry and envs: registered_envs,
// load_env_library, and Env, a registered C++ env stepped from Python, which
// tensordict_cpp/envs.py wraps as a TorchRL EnvBase (CppEnv).
//
// The registry is libtensordict's (NOTE [The env registry] in rl/env.h):
// a user's extension linked to the same libtensordict registers into the
// registry this module reads. Reset and step run with the GIL released and
// return tensordict.TensorDict over the C++ tensors (no copy, no numpy).

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <tensordict/json.h>
#include <tensordict/python.h>
#include <tensordict/rl.h>
#include <torch/csrc/DynamicTypes.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

// The env keyword arguments (JSON text; empty: none) as make_env takes
// them; the collector's too (collector.cpp).
tensordict::Json parse_env_kwargs(const std::string& text) {
  try {
    return text.empty() ? tensordict::Json::object()
                        : tensordict::Json::parse(text);
  } catch (const std::exception& e) {
    TORCH_CHECK_VALUE(false, "env keyword arguments are not JSON: ", e.what());
  }
}

namespace {

using tensordict::Json;
using tensordict::NestedKey;
using tensordict::TensorDict;
namespace rl = tensordict::rl;

const char* kind_name(rl::SpecKind kind) {
  switch (kind) {
    case rl::SpecKind::kUnbounded:
      return "Unbounded";
    case rl::SpecKind::kBounded:
      return "Bounded";
    case rl::SpecKind::kCategorical:
      return "Categorical";
    case rl::SpecKind::kOneHot:
      return "OneHot";
  }
  return "Unbounded";
}

// A leaf spec as a dict of plain values, which envs.py turns into TorchRL's
// spec class of that name (per sub-env shape: envs.py adds the batch dim).
py::dict spec_dict(const rl::TensorSpec& spec) {
  py::dict out;
  out["kind"] = kind_name(spec.kind());
  out["shape"] = spec.shape();
  out["dtype"] = py::reinterpret_borrow<py::object>(
      reinterpret_cast<PyObject*>(torch::getTHPDtype(spec.dtype())));
  out["n"] = spec.n();
  out["low"] = spec.low().defined() ? py::cast(spec.low()) : py::none();
  out["high"] = spec.high().defined() ? py::cast(spec.high()) : py::none();
  return out;
}

py::list composite_list(const rl::Composite& composite) {
  py::list out;
  for (const auto& [key, spec] : composite.entries()) {
    py::tuple parts(key.size());
    for (size_t i = 0; i < key.size(); ++i) {
      parts[i] = std::string(key[i]);
    }
    out.append(py::make_tuple(parts, spec_dict(spec)));
  }
  return out;
}

// A registered env, stepped whole from Python.
class PyEnv {
 public:
  PyEnv(const std::string& name, int64_t num_envs, const std::string& kwargs)
      : env_(rl::make_env(name, num_envs, parse_env_kwargs(kwargs))) {}

  // The reset root: observation keys and the flags; with a mask, only the
  // sub-envs it marks are reset (EnvBase::reset's "_reset").
  TensorDict reset(const std::optional<at::Tensor>& mask) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!mask) {
      return env_->reset();
    }
    TensorDict td(env_->batch_size());
    td.set("_reset", *mask);
    return env_->reset(td);
  }

  // The "next" dict of a step with `action`.
  TensorDict step(const at::Tensor& action) {
    std::lock_guard<std::mutex> lock(mutex_);
    TensorDict td(env_->batch_size());
    td.set("action", action);
    return env_->step(td).get_tensordict("next");
  }

  void set_seed(uint64_t seed) {
    std::lock_guard<std::mutex> lock(mutex_);
    env_->set_seed(seed);
  }

  rl::EnvBase& env() {
    return *env_;
  }

 private:
  std::shared_ptr<rl::EnvBase> env_;
  // An env is stepped by one thread at a time (EnvBase's rule); Python
  // threads may call it concurrently, with the GIL released.
  std::mutex mutex_;
};

}  // namespace

void bind_envs(py::module_& m) {
  m.def(
      "registered_envs",
      &rl::registered_envs,
      "The names of the registered C++ envs, sorted: the built-ins, those "
      "of libraries loaded with load_env_library, and those of extensions "
      "linked to this package's libtensordict.");
  m.def(
      "load_env_library",
      &rl::load_env_library,
      py::arg("path"),
      py::call_guard<py::gil_scoped_release>(),
      "Loads a shared library of C++ envs (dlopen) and returns the names it "
      "registered; raises ValueError when it does not load or registers "
      "nothing.");
  py::class_<PyEnv>(
      m,
      "Env",
      "A registered C++ env (rl::make_env); tensordict_cpp.envs.CppEnv is "
      "the TorchRL EnvBase over it.")
      .def(
          py::init<const std::string&, int64_t, const std::string&>(),
          py::arg("name"),
          py::arg("num_envs"),
          py::arg("kwargs_json") = "",
          py::call_guard<py::gil_scoped_release>())
      .def_property_readonly(
          "name", [](PyEnv& self) { return self.env().name(); })
      .def_property_readonly(
          "num_envs", [](PyEnv& self) { return self.env().num_envs(); })
      .def_property_readonly(
          "seed", [](PyEnv& self) { return self.env().seed(); })
      .def(
          "observation_spec",
          [](PyEnv& self) {
            return composite_list(self.env().observation_spec());
          })
      .def(
          "action_spec",
          [](PyEnv& self) { return spec_dict(self.env().action_spec()); })
      .def(
          "reward_spec",
          [](PyEnv& self) { return spec_dict(self.env().reward_spec()); })
      .def(
          "done_spec",
          [](PyEnv& self) { return composite_list(self.env().done_spec()); })
      .def(
          "reset",
          [](PyEnv& self, std::optional<at::Tensor> mask) {
            TensorDict out;
            {
              py::gil_scoped_release release;
              out = self.reset(mask);
            }
            return out;
          },
          py::arg("mask") = py::none(),
          "Resets every sub-env, or those `mask` ([N] or [N, 1] bool) marks; "
          "returns the root (observations and flags) as a "
          "tensordict.TensorDict.")
      .def(
          "step",
          [](PyEnv& self, const at::Tensor& action) {
            TensorDict out;
            {
              py::gil_scoped_release release;
              out = self.step(action);
            }
            return out;
          },
          py::arg("action"),
          "Steps every sub-env with `action`; returns the next dict "
          "(observations, reward, done, terminated, truncated).")
      .def(
          "set_seed",
          [](PyEnv& self, uint64_t seed) { self.set_seed(seed); },
          py::arg("seed"),
          py::call_guard<py::gil_scoped_release>());
}
