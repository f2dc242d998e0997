// A vectorized environment written in C++ and driven from Python: N point
// masses on a plane, pushed by a force, deterministic given a seed. reset()
// and step(td) take and return `tensordict.TensorDict`s in TorchRL's layout
// (the casters of <tensordict/python.h> convert them without copying a
// tensor), so TorchRL-style Python code drives it like a Python env.
//
// The rules (reference.py implements them in Python, and the test checks
// the two agree step by step):
//   state        position [N, 2] and velocity [N, 2], float32; steps [N, 1]
//   reset        velocity 0, steps 0, position uniform in [-1, 1)^2 from
//                splitmix64(seed, env, episode): see reset_position
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
// The GIL: converting the dicts holds it; the env's own work releases it
// (py::call_guard<py::gil_scoped_release>), see NOTE [The GIL and the
// casters] in tensordict/python.h.

#include <pybind11/pybind11.h>
#include <tensordict/memmap.h>
#include <tensordict/python.h>
#include <tensordict/tensordict.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;
using tensordict::TensorDict;

namespace {

// splitmix64: the same integers in Python (reference.py).
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// A float in [-1, 1) from the top 24 bits of a hash: exact in float32.
float unit(uint64_t h) {
  return static_cast<float>(h >> 40) / static_cast<float>(1 << 23) - 1.0F;
}

class PointMassEnv {
 public:
  PointMassEnv(int64_t num_envs, uint64_t seed, int64_t max_steps)
      : num_envs_(num_envs),
        seed_(seed),
        max_steps_(max_steps),
        position_(torch::zeros({num_envs, 2})),
        velocity_(torch::zeros({num_envs, 2})),
        steps_(torch::zeros({num_envs, 1}, torch::kInt64)),
        episodes_(num_envs, 0) {}

  int64_t num_envs() const {
    return num_envs_;
  }

  // Resets every env, or those `td["_reset"]` marks; returns the root of
  // the next step: observation, done, terminated, truncated.
  TensorDict reset(const std::optional<TensorDict>& td) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::optional<at::Tensor> mask;
    if (td && td->contains("_reset")) {
      mask = td->get("_reset").reshape({num_envs_});
    }
    auto position = position_.accessor<float, 2>();
    auto velocity = velocity_.accessor<float, 2>();
    auto steps = steps_.accessor<int64_t, 2>();
    const bool* reset = nullptr;
    at::Tensor keep_mask;
    if (mask) {
      keep_mask = mask->to(torch::kBool).contiguous();
      reset = keep_mask.data_ptr<bool>();
    }
    for (int64_t i = 0; i < num_envs_; ++i) {
      if (reset != nullptr && !reset[i]) {
        continue;
      }
      const uint64_t h = splitmix64(
          splitmix64(seed_ ^ (static_cast<uint64_t>(i) << 32)) +
          static_cast<uint64_t>(episodes_[i]++));
      position[i][0] = unit(h);
      position[i][1] = unit(splitmix64(h));
      velocity[i][0] = 0.0F;
      velocity[i][1] = 0.0F;
      steps[i][0] = 0;
    }
    TensorDict out = td ? td->exclude({"_reset"}) : TensorDict({num_envs_});
    const at::Tensor flags = torch::zeros({num_envs_, 1}, torch::kBool);
    at::Tensor done = flags;
    if (td && mask && td->contains("done")) {
      // Envs not reset keep their flags.
      const at::Tensor keep = keep_mask.logical_not().unsqueeze(-1);
      done = td->get("done").logical_and(keep);
      out.set("terminated", td->get("terminated").logical_and(keep));
      out.set("truncated", td->get("truncated").logical_and(keep));
    } else {
      out.set("terminated", flags.clone());
      out.set("truncated", flags.clone());
    }
    out.set("done", done);
    out.set("observation", torch::cat({position_, velocity_}, -1));
    return out;
  }

  // Applies td["action"] and writes the "next" entries into `td`.
  TensorDict step(TensorDict td) {
    std::lock_guard<std::mutex> lock(mutex_);
    const at::Tensor action = td.get("action").clamp(-1.0, 1.0);
    velocity_ = velocity_ * 0.9 + action * 0.1;
    position_ = position_ + velocity_ * 0.1;
    steps_ = steps_ + 1;
    const at::Tensor distance =
        position_.pow(2).sum(-1, /*keepdim=*/true).sqrt();
    const at::Tensor terminated =
        distance.gt(1.5).logical_or(distance.lt(0.05));
    const at::Tensor truncated = steps_.ge(max_steps_);
    td.set({"next", "observation"}, torch::cat({position_, velocity_}, -1));
    td.set({"next", "reward"}, distance.neg());
    td.set({"next", "done"}, terminated.logical_or(truncated));
    td.set({"next", "terminated"}, terminated);
    td.set({"next", "truncated"}, truncated);
    return td;
  }

 private:
  int64_t num_envs_;
  uint64_t seed_;
  int64_t max_steps_;
  at::Tensor position_;
  at::Tensor velocity_;
  at::Tensor steps_;
  std::vector<int64_t> episodes_;
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
