// A vectorized environment written in C++ and driven from Python: N point
// masses on a plane, pushed by a force, deterministic given a seed
// (tensordict::rl::PointMassEnv of <tensordict/rl.h>, which a C++
// rl::Collector can also step). reset()
// and step(td) take and return `tensordict.TensorDict`s in TorchRL's layout
// (the casters of <tensordict/python.h> convert them without copying a
// tensor), so TorchRL-style Python code drives it like a Python env.
//
// The rules (reference.py implements them in Python, and the test checks
// the two agree step by step):
//   state        position [N, 2] and velocity [N, 2], float32; steps [N, 1]
//   reset        velocity 0, steps 0, position uniform in [-1, 1)^2 from
//                splitmix64(seed, env, episode) (src/rl/envs.cpp)
//   step         a = clamp(action, -1, 1); v = 0.9 v + 0.1 a;
//                p = p + 0.1 v; steps += 1
//   reward       -|p|
//   terminated   |p| > 1.5 or |p| < 0.05; truncated: steps >= max_steps
//   observation  cat(p, v) [N, 4]
// A step writes ("next", "observation"), ("next", "reward"), ("next",
// "done"), ("next", "terminated") and ("next", "truncated") into the dict it
// was given, as TorchRL's EnvBase.step does; reset(td) with a "_reset" mask
// resets only the masked envs.
//
// The env is not thread-safe: the wrapper holds a mutex around each call.
// The GIL: converting the dicts holds it; the env's own work releases it
// (py::call_guard<py::gil_scoped_release>), see NOTE [The GIL and the
// casters] in tensordict/python.h.

#include <pybind11/pybind11.h>
#include <tensordict/memmap.h>
#include <tensordict/python.h>
#include <tensordict/rl.h>
#include <tensordict/tensordict.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

namespace py = pybind11;
using tensordict::TensorDict;

namespace {

class PointMassEnv {
 public:
  PointMassEnv(int64_t num_envs, uint64_t seed, int64_t max_steps)
      : env_(num_envs, seed, max_steps) {}

  int64_t num_envs() const {
    return env_.num_envs();
  }

  // Resets every env, or those `td["_reset"]` marks; returns the root of
  // the next step: observation, done, terminated, truncated.
  TensorDict reset(const std::optional<TensorDict>& td) {
    std::lock_guard<std::mutex> lock(mutex_);
    return env_.reset(td);
  }

  // Applies td["action"] and writes the "next" entries into `td`.
  TensorDict step(TensorDict td) {
    std::lock_guard<std::mutex> lock(mutex_);
    return env_.step(std::move(td));
  }

 private:
  tensordict::rl::PointMassEnv env_;
  std::mutex mutex_;
};

}  // namespace

PYBIND11_MODULE(point_mass_env, m) {
  m.doc() = "N point masses, a vectorized env in C++ with TorchRL's layout";
  py::class_<PointMassEnv>(m, "PointMassEnv")
      .def(
          py::init<int64_t, uint64_t, int64_t>(),
          py::arg("num_envs"),
          py::arg("seed") = 0,
          py::arg("max_steps") = 50)
      .def_property_readonly("num_envs", &PointMassEnv::num_envs)
      .def(
          "reset",
          &PointMassEnv::reset,
          py::arg("td") = py::none(),
          py::call_guard<py::gil_scoped_release>())
      .def(
          "step",
          &PointMassEnv::step,
          py::arg("td"),
          py::call_guard<py::gil_scoped_release>());
  // Memmaps `td` (a rollout) under `prefix` from C++, the GIL released;
  // Python's TensorDict.load_memmap(prefix) reads it.
  m.def(
      "memmap",
      [](TensorDict td, const std::string& prefix) {
        td.memmap_(tensordict::MemmapOptions(prefix));
      },
      py::arg("td"),
      py::arg("prefix"),
      py::call_guard<py::gil_scoped_release>());
}
