// tensordict_cpp._C.Collector: rl::Collector (C++ envs, an AOTInductor
// policy) driven from Python. tensordict_cpp/_collector.py wraps it in the
// TorchRL-shaped class users see; this file holds what must be C++: the
// collector, the GIL release around each batch and the conversions.
//
// Each batch is collected with the GIL released (the env ranges on the
// collector's threads, the policy on the calling thread); the batch then
// reaches Python through the casters of <tensordict/python.h>, as a
// tensordict.TensorDict sharing the C++ tensors (no copy). See NOTE [The GIL
// and the casters] there.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <tensordict/aoti.h>
#include <tensordict/errors.h>
#include <tensordict/json.h>
#include <tensordict/probabilistic.h>
#include <tensordict/python.h>
#include <tensordict/rl.h>
#include <tensordict/tensor_dict.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

// Defined in envs.cpp: the env keyword arguments as tensordict_cpp._C.Env
// reads them.
tensordict::Json parse_env_kwargs(const std::string& text);

namespace {

using tensordict::TensorDict;
namespace rl = tensordict::rl;
namespace tdnn = tensordict::nn;

// The collector object of Python: owns an rl::Collector over a C++ env and
// an AOTInductor package as the policy.
class PyCollector {
 public:
  PyCollector(
      std::shared_ptr<rl::EnvBase> env,
      const std::string& policy,
      const rl::CollectorOptions& options)
      : policy_path_(policy),
        collector_(std::make_unique<rl::Collector>(
            std::move(env), tdnn::AOTIModule(policy), options)) {}

  ~PyCollector() {
    // Joining the stepping threads needs no Python, and they never take
    // the GIL: releasing it keeps other Python threads going meanwhile.
    py::gil_scoped_release release;
    collector_.reset();
  }

  PyCollector(const PyCollector&) = delete;
  PyCollector& operator=(const PyCollector&) = delete;

  // The next batch, or nullopt at the end, in TorchRL's layout for the
  // env a Python user builds (rl::squeeze_single_env). Called with the GIL
  // released.
  std::optional<TensorDict> next() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::optional<TensorDict> batch = collector_->next();
    if (batch) {
      return rl::squeeze_single_env(*batch);
    }
    return batch;
  }

  void update_policy_weights_(const TensorDict& weights) {
    collector_->update_policy_weights_(weights);
  }

  uint64_t set_seed(uint64_t seed) {
    std::lock_guard<std::mutex> lock(mutex_);
    collector_->set_seed(seed);
    return seed;
  }

  void shutdown() {
    std::lock_guard<std::mutex> lock(mutex_);
    collector_->shutdown();
  }

  int64_t policy_version() const noexcept {
    return collector_->policy_version();
  }
  int64_t total_frames() const noexcept {
    return collector_->total_frames();
  }
  int64_t frames() const noexcept {
    return collector_->frames();
  }
  int64_t frames_per_batch() const noexcept {
    return collector_->frames_per_batch();
  }
  int64_t num_envs() const noexcept {
    return collector_->env()->num_envs();
  }
  std::string env_name() const {
    return collector_->env()->name();
  }
  std::string policy_path() const {
    return policy_path_;
  }
  // The weights update_policy_weights_ takes, as the policy answers for
  // them (its weights_layout: the package's), "." between the key parts.
  std::vector<std::string> weight_names() const {
    std::vector<std::string> names;
    const TensorDict layout = collector_->policy()->weights_layout();
    for (const tensordict::NestedKey& key :
         layout.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
      names.push_back(key.join_parts("."));
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string policy_path_;
  std::unique_ptr<rl::Collector> collector_;
  // next, set_seed and shutdown from one thread at a time (rl::Collector's
  // rule); Python threads may call them concurrently.
  std::mutex mutex_;
};

// Python's keyword arguments as the C++ types: the env from the registry,
// the options. Every check is the C++ API's (rl::make_env,
// rl::Collector's constructor, nn::interaction_type_from_string), so the
// errors name the argument as C++ users see them.
std::unique_ptr<PyCollector> make_collector(
    const std::string& env,
    const std::string& policy,
    int64_t frames_per_batch,
    int64_t total_frames,
    int64_t num_envs,
    int64_t num_threads,
    std::optional<uint64_t> seed,
    const std::optional<std::string>& exploration_type,
    bool track_policy_version,
    bool reset_at_each_iter,
    bool return_same_td,
    const std::string& env_kwargs) {
  // Loading the package (a shared object) is slow: without the GIL.
  py::gil_scoped_release release;
  rl::CollectorOptions options(frames_per_batch);
  options.total_frames(total_frames)
      .num_threads(num_threads)
      .track_policy_version(track_policy_version)
      .reset_at_each_iter(reset_at_each_iter)
      .return_same_td(return_same_td)
      .seed(seed)
      .exploration_type(
          exploration_type
              ? std::optional<tdnn::InteractionType>(
                    tdnn::interaction_type_from_string(*exploration_type))
              : std::nullopt);
  return std::make_unique<PyCollector>(
      rl::make_env(env, num_envs, parse_env_kwargs(env_kwargs)),
      policy,
      options);
}

}  // namespace

void bind_collector(py::module_& m) {
  py::class_<PyCollector>(
      m,
      "Collector",
      "rl::Collector over a C++ env and an AOTInductor policy package; "
      "tensordict_cpp.Collector is the TorchRL-shaped wrapper to use.")
      .def(
          py::init(&make_collector),
          py::arg("env"),
          py::arg("policy"),
          py::kw_only(),
          py::arg("frames_per_batch"),
          py::arg("total_frames") = -1,
          py::arg("num_envs") = 1,
          py::arg("num_threads") = 1,
          py::arg("seed") = py::none(),
          py::arg("exploration_type") = "random",
          py::arg("track_policy_version") = false,
          py::arg("reset_at_each_iter") = false,
          py::arg("return_same_td") = false,
          py::arg("env_kwargs") = "")
      .def(
          "next",
          [](PyCollector& self) {
            std::optional<TensorDict> batch;
            {
              py::gil_scoped_release release;
              batch = self.next();
            }
            // Converted with the GIL held (the caster builds the Python
            // dicts around the same tensors).
            return batch;
          },
          "Collects the next batch with the GIL released; returns a "
          "tensordict.TensorDict, or None once total_frames were collected "
          "or after shutdown().")
      .def(
          "update_policy_weights_",
          [](PyCollector& self, const TensorDict& weights) {
            self.update_policy_weights_(weights);
          },
          py::arg("weights"),
          py::call_guard<py::gil_scoped_release>(),
          "Checks the weights against the policy's layout (keys, shapes, "
          "dtypes) and stages a copy, applied before the next batch; raises "
          "KeyError or ValueError naming a key that does not fit (the "
          "weights in use are then unchanged).")
      .def(
          "set_seed",
          [](PyCollector& self, uint64_t seed) { return self.set_seed(seed); },
          py::arg("seed"),
          py::call_guard<py::gil_scoped_release>())
      .def(
          "shutdown",
          [](PyCollector& self) { self.shutdown(); },
          py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("policy_version", &PyCollector::policy_version)
      .def_property_readonly("total_frames", &PyCollector::total_frames)
      .def_property_readonly("frames", &PyCollector::frames)
      .def_property_readonly("frames_per_batch", &PyCollector::frames_per_batch)
      .def_property_readonly("num_envs", &PyCollector::num_envs)
      .def_property_readonly("env_name", &PyCollector::env_name)
      .def_property_readonly("policy_path", &PyCollector::policy_path)
      .def_property_readonly("weight_names", &PyCollector::weight_names);
}
