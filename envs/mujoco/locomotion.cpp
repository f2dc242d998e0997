#include "locomotion.h"

#include <mujoco/mujoco.h>
#include <tensordict/rl/env_kit.h>
#include <tensordict/rl/numpy_random.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <sstream>
#include <utility>

namespace tensordict_mujoco {
namespace {

namespace rl = tensordict::rl;
using tensordict::Json;
using tensordict::TensorDict;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Gymnasium's assets folder, found at configure time (CMakeLists.txt).
#ifndef TENSORDICT_MUJOCO_ASSETS
#define TENSORDICT_MUJOCO_ASSETS ""
#endif

// Gymnasium's assets folder: the environment variable
// TENSORDICT_MUJOCO_ASSETS when set (tensordict_cpp sets it from the
// gymnasium it finds, since a wheel is built where gymnasium may be absent
// or elsewhere), else the one found at configure time.
std::string gymnasium_assets() {
  const char* given = std::getenv("TENSORDICT_MUJOCO_ASSETS");
  if (given != nullptr && *given != '\0') {
    return given;
  }
  return TENSORDICT_MUJOCO_ASSETS;
}

const char* task_name(Task task) {
  switch (task) {
    case Task::kHalfCheetah:
      return "HalfCheetah-v5";
    case Task::kHopper:
      return "Hopper-v5";
    case Task::kWalker2d:
      return "Walker2d-v5";
    case Task::kAnt:
      return "Ant-v5";
  }
  return "?";
}

// NumPy's pairwise summation of a contiguous array (np.sum, np.add.reduce
// from the identity): sequential below 8 elements, eight interleaved
// partial sums up to 128, halves (a multiple of 8) above.
template <typename T>
T numpy_sum(const T* a, int64_t n) {
  if (n < 8) {
    T sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      sum += a[i];
    }
    return sum;
  }
  if (n <= 128) {
    T r[8];
    for (int j = 0; j < 8; ++j) {
      r[j] = a[j];
    }
    int64_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) {
        r[j] += a[i + j];
      }
    }
    T sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) {
      sum += a[i];
    }
    return sum;
  }
  int64_t half = n / 2;
  half -= half % 8;
  return numpy_sum(a, half) + numpy_sum(a + half, n - half);
}

// A (low, high) keyword argument: a JSON array of two numbers, where
// "inf" and "-inf" (or null, for the side it stands on) spell infinities
// that JSON cannot.
std::pair<double, double> read_range(
    const std::string& env,
    const Json& kwargs,
    const std::string& name,
    std::pair<double, double> default_value) {
  if (!kwargs.is_object() || !kwargs.contains(name)) {
    return default_value;
  }
  const Json& value = kwargs.at(name);
  auto side = [&](const Json& x, double infinity) {
    if (x.is_number()) {
      return x.get<double>();
    }
    if (x.is_null()) {
      return infinity;
    }
    if (x.is_string()) {
      const std::string s = x.get<std::string>();
      if (s == "inf" || s == "Infinity" || s == "+inf") {
        return kInf;
      }
      if (s == "-inf" || s == "-Infinity") {
        return -kInf;
      }
    }
    TORCH_CHECK_VALUE(
        false,
        env,
        ": keyword argument '",
        name,
        "' expects a pair of numbers (low, high), got ",
        value.dump());
    return 0.0;
  };
  TORCH_CHECK_VALUE(
      value.is_array() && value.size() == 2,
      env,
      ": keyword argument '",
      name,
      "' expects a pair of numbers (low, high), got ",
      value.dump());
  return {side(value[0], -kInf), side(value[1], kInf)};
}

// gymnasium's expand_model_path: a path starting with '.' or '/' as
// given, '~' expanded, anything else in gymnasium's assets.
std::string expand_model_path(const std::string& env, const std::string& file) {
  std::string path;
  if (!file.empty() && (file[0] == '.' || file[0] == '/')) {
    path = file;
  } else if (!file.empty() && file[0] == '~') {
    const char* home = std::getenv("HOME");
    path = std::string(home != nullptr ? home : "") + file.substr(1);
  } else {
    const std::string assets = gymnasium_assets();
    TORCH_CHECK_VALUE(
        !assets.empty(),
        env,
        ": xml_file '",
        file,
        "' names a model of gymnasium's assets, but no gymnasium was found "
        "(neither when this library was built nor through the environment "
        "variable TENSORDICT_MUJOCO_ASSETS; tensordict_cpp sets it from an "
        "installed gymnasium: pip install \"gymnasium[mujoco]==1.4.0\"); "
        "pass a path");
    path = assets + "/" + file;
  }
  TORCH_CHECK_VALUE(
      std::filesystem::exists(path),
      env,
      ": model file ",
      path,
      " does not exist (keyword argument xml_file='",
      file,
      "')");
  return path;
}

// MuJoCo's warnings while a model compiles, which its default handler
// would print and append to MUJOCO_LOG.TXT in the working directory.
thread_local std::string* warning_sink = nullptr;

void collect_warning(const char* message) {
  if (warning_sink != nullptr) {
    *warning_sink += (warning_sink->empty() ? "" : "; ") + std::string(message);
  }
}

// Loads `path`, passing MuJoCo's warnings on as one c10 warning (a Python
// warning under Python) instead of a log file. The handler is global in
// libmujoco: it is swapped for the load only, and the previous one (the
// mujoco Python module's, when loaded) restored.
mjModel* load_model(
    const std::string& env, const std::string& path, std::string& error) {
  char buffer[1000] = "";
  std::string warnings;
  void (*previous)(const char*) = mju_user_warning;
  warning_sink = &warnings;
  mju_user_warning = collect_warning;
  mjModel* model = mj_loadXML(path.c_str(), nullptr, buffer, sizeof(buffer));
  mju_user_warning = previous;
  warning_sink = nullptr;
  error = buffer;
  if (!warnings.empty()) {
    TORCH_WARN(env, ": MuJoCo warned while loading ", path, ": ", warnings);
  }
  return model;
}

// The model, shared by the sub-envs (mj_step reads it only).
struct ModelDeleter {
  void operator()(mjModel* m) const {
    mj_deleteModel(m);
  }
};
struct DataDeleter {
  void operator()(mjData* d) const {
    mj_deleteData(d);
  }
};

}  // namespace

std::string mujoco_version_mismatch(
    int header, int runtime, const std::string& runtime_string) {
  if (header == runtime) {
    return "";
  }
  std::ostringstream out;
  out << "tensordict_mujoco was built against MuJoCo headers of version "
      << header / 1000000 << "." << header / 1000 % 1000 << "." << header % 1000
      << " (mjVERSION_HEADER " << header
      << "), but the libmujoco loaded is version " << runtime_string
      << " (mj_version() " << runtime
      << "); rebuild the library against the installed mujoco, or install "
         "the mujoco it was built for";
  return out.str();
}

void check_mujoco_version() {
  const std::string why = mujoco_version_mismatch(
      mjVERSION_HEADER, mj_version(), mj_versionString());
  TORCH_CHECK_VALUE(why.empty(), why);
}

struct LocomotionEnv::Impl {
  Task task = Task::kHalfCheetah;
  std::string name;
  std::string xml_file;
  int frame_skip = 5;
  double forward_reward_weight = 1.0;
  double ctrl_cost_weight = 0.1;
  double contact_cost_weight = 5e-4;
  double healthy_reward = 1.0;
  bool terminate_when_unhealthy = true;
  std::pair<double, double> healthy_state_range{-100.0, 100.0};
  std::pair<double, double> healthy_z_range{0.7, kInf};
  std::pair<double, double> healthy_angle_range{-0.2, 0.2};
  std::pair<double, double> contact_force_range{-1.0, 1.0};
  double reset_noise_scale = 0.1;
  bool exclude_current_positions = true;
  bool include_cfrc_ext = true;
  int main_body = 1;
  int64_t max_episode_steps = 1000;

  std::unique_ptr<mjModel, ModelDeleter> model;
  double dt = 0.0;
  int64_t obs_dim = 0;
  struct Sub {
    std::unique_ptr<mjData, DataDeleter> data;
    rl::NumpyGenerator rng;
    int64_t steps = 0;
    bool reseed = true;
    double x_velocity = 0.0;
    double reward = 0.0;
  };
  std::vector<Sub> subs;

  void write_observation(const mjData* d, double* obs) const {
    const mjModel* m = model.get();
    int64_t k = 0;
    const int skip =
        exclude_current_positions ? (task == Task::kAnt ? 2 : 1) : 0;
    for (int i = skip; i < m->nq; ++i) {
      obs[k++] = d->qpos[i];
    }
    const bool clip = task == Task::kHopper || task == Task::kWalker2d;
    for (int i = 0; i < m->nv; ++i) {
      const double v = d->qvel[i];
      obs[k++] = clip ? std::min(std::max(v, -10.0), 10.0) : v;
    }
    if (task == Task::kAnt && include_cfrc_ext) {
      for (int i = 6; i < 6 * m->nbody; ++i) {
        obs[k++] = clip_force(d->cfrc_ext[i]);
      }
    }
  }

  double clip_force(double f) const {
    // np.clip(f, lo, hi): lo where f < lo, hi where f > hi.
    return std::min(
        std::max(f, contact_force_range.first), contact_force_range.second);
  }

  // Gymnasium's checks are strict inequalities, except Ant's z range.
  static bool inside(double v, const std::pair<double, double>& range) {
    return range.first < v && v < range.second;
  }
  // Hopper and Walker2d: the torso's height (qpos[1]) and angle (qpos[2]).
  bool torso_upright(const mjData* d) const {
    return inside(d->qpos[1], healthy_z_range) &&
           inside(d->qpos[2], healthy_angle_range);
  }

  bool is_healthy(const mjData* d) const {
    const mjModel* m = model.get();
    switch (task) {
      case Task::kHalfCheetah:
        return true;
      case Task::kHopper: {
        const auto in_state_range = [this](const double* v, int n) {
          return std::all_of(v, v + n, [this](double s) {
            return inside(s, healthy_state_range);
          });
        };
        return in_state_range(d->qpos + 2, m->nq - 2) &&
               in_state_range(d->qvel, m->nv) && torso_upright(d);
      }
      case Task::kWalker2d:
        return torso_upright(d);
      case Task::kAnt: {
        const auto finite = [](double s) { return std::isfinite(s); };
        const double z = d->qpos[2];
        return std::all_of(d->qpos, d->qpos + m->nq, finite) &&
               std::all_of(d->qvel, d->qvel + m->nv, finite) &&
               healthy_z_range.first <= z && z <= healthy_z_range.second;
      }
    }
    return true;
  }

  // gymnasium's reset_model after mj_resetData.
  void reset(Sub& sub) const {
    const mjModel* m = model.get();
    mjData* d = sub.data.get();
    mj_resetData(m, d);
    const double scale = reset_noise_scale;
    std::vector<double> noise(static_cast<size_t>(std::max(m->nq, m->nv)));
    sub.rng.uniform(-scale, scale, noise.data(), m->nq);
    for (int i = 0; i < m->nq; ++i) {
      d->qpos[i] = m->qpos0[i] + noise[static_cast<size_t>(i)];
    }
    if (task == Task::kHalfCheetah || task == Task::kAnt) {
      sub.rng.standard_normal(noise.data(), m->nv);
      for (int i = 0; i < m->nv; ++i) {
        d->qvel[i] = 0.0 + scale * noise[static_cast<size_t>(i)];
      }
    } else {
      sub.rng.uniform(-scale, scale, noise.data(), m->nv);
      for (int i = 0; i < m->nv; ++i) {
        d->qvel[i] = 0.0 + noise[static_cast<size_t>(i)];
      }
    }
    mj_forward(m, d);
    sub.steps = 0;
    sub.x_velocity = 0.0;
    sub.reward = 0.0;
  }

  // Where the forward velocity is measured: qpos[0], or the main body's
  // x for Ant (its xpos, as gymnasium's data.body(main_body).xpos).
  double x_position(const mjData* d) const {
    return task == Task::kAnt ? d->xpos[3 * main_body] : d->qpos[0];
  }

  rl::StepResult step(Sub& sub, const float* action) const {
    const mjModel* m = model.get();
    mjData* d = sub.data.get();
    const double before = x_position(d);
    for (int j = 0; j < m->nu; ++j) {
      d->ctrl[j] = static_cast<double>(action[j]);
    }
    for (int k = 0; k < frame_skip; ++k) {
      mj_step(m, d);
    }
    mj_rnePostConstraint(m, d);
    const double after = x_position(d);
    const double x_velocity = (after - before) / dt;
    sub.x_velocity = x_velocity;
    // float32 throughout, as numpy computes it (see the NOTE).
    float squares[64];
    for (int j = 0; j < m->nu; ++j) {
      squares[j] = action[j] * action[j];
    }
    const float ctrl_cost =
        static_cast<float>(ctrl_cost_weight) * numpy_sum<float>(squares, m->nu);
    const double forward_reward = task == Task::kAnt
                                      ? x_velocity * forward_reward_weight
                                      : forward_reward_weight * x_velocity;
    const bool healthy = is_healthy(d);
    double reward = 0.0;
    if (task == Task::kHalfCheetah) {
      reward = forward_reward - static_cast<double>(ctrl_cost);
    } else {
      const double survive = (healthy ? 1.0 : 0.0) * healthy_reward;
      double costs = static_cast<double>(ctrl_cost);
      if (task == Task::kAnt) {
        std::vector<double> forces(static_cast<size_t>(6 * m->nbody));
        for (int i = 0; i < 6 * m->nbody; ++i) {
          const double f = clip_force(d->cfrc_ext[i]);
          forces[static_cast<size_t>(i)] = f * f;
        }
        const double contact_cost =
            contact_cost_weight *
            numpy_sum<double>(forces.data(), 6 * m->nbody);
        costs = costs + contact_cost;
      }
      reward = (forward_reward + survive) - costs;
    }
    ++sub.steps;
    sub.reward = reward;
    rl::StepResult result;
    result.reward = static_cast<float>(reward);
    result.terminated =
        task != Task::kHalfCheetah && !healthy && terminate_when_unhealthy;
    result.truncated = sub.steps >= max_episode_steps;
    return result;
  }
};

LocomotionEnv::LocomotionEnv(Task task, int64_t num_envs, const Json& kwargs)
    : EnvBase(num_envs), impl_(std::make_unique<Impl>()) {
  // First: with another libmujoco, nothing else is worth checking.
  check_mujoco_version();
  Impl& s = *impl_;
  s.task = task;
  s.name = task_name(task);
  rl::EnvKwargs args(s.name, kwargs);
  const char* default_xml = "half_cheetah.xml";
  int default_skip = 5;
  double default_ctrl = 0.1;
  double default_noise = 0.1;
  switch (task) {
    case Task::kHalfCheetah:
      break;
    case Task::kHopper:
      default_xml = "hopper.xml";
      default_skip = 4;
      default_ctrl = 1e-3;
      default_noise = 5e-3;
      break;
    case Task::kWalker2d:
      default_xml = "walker2d_v5.xml";
      default_skip = 4;
      default_ctrl = 1e-3;
      default_noise = 5e-3;
      s.healthy_z_range = {0.8, 2.0};
      s.healthy_angle_range = {-1.0, 1.0};
      break;
    case Task::kAnt:
      default_xml = "ant.xml";
      default_ctrl = 0.5;
      s.healthy_z_range = {0.2, 1.0};
      break;
  }
  const std::string xml = args.get("xml_file", default_xml);
  const int64_t skip = args.get<int64_t>("frame_skip", default_skip);
  TORCH_CHECK_VALUE(
      skip >= 1 && skip <= std::numeric_limits<int>::max(),
      s.name,
      ": frame_skip must be >= 1 and fit an int, got ",
      skip);
  s.frame_skip = static_cast<int>(skip);
  s.forward_reward_weight = args.get<double>("forward_reward_weight", 1.0);
  s.ctrl_cost_weight = args.get<double>("ctrl_cost_weight", default_ctrl);
  s.reset_noise_scale = args.get<double>("reset_noise_scale", default_noise);
  s.exclude_current_positions =
      args.get("exclude_current_positions_from_observation", true);
  s.max_episode_steps = args.get<int64_t>("max_episode_steps", 1000);
  TORCH_CHECK_VALUE(
      s.max_episode_steps >= 1,
      s.name,
      ": max_episode_steps must be >= 1, got ",
      s.max_episode_steps);
  if (task != Task::kHalfCheetah) {
    s.healthy_reward = args.get<double>("healthy_reward", 1.0);
    s.terminate_when_unhealthy = args.get("terminate_when_unhealthy", true);
    args.contains("healthy_z_range");
    s.healthy_z_range =
        read_range(s.name, kwargs, "healthy_z_range", s.healthy_z_range);
  }
  if (task == Task::kHopper || task == Task::kWalker2d) {
    args.contains("healthy_angle_range");
    s.healthy_angle_range = read_range(
        s.name, kwargs, "healthy_angle_range", s.healthy_angle_range);
  }
  if (task == Task::kHopper) {
    args.contains("healthy_state_range");
    s.healthy_state_range = read_range(
        s.name, kwargs, "healthy_state_range", s.healthy_state_range);
  }
  std::string main_body_name;
  int64_t main_body_index = 1;
  if (task == Task::kAnt) {
    s.contact_cost_weight = args.get<double>("contact_cost_weight", 5e-4);
    args.contains("contact_force_range");
    s.contact_force_range = read_range(
        s.name, kwargs, "contact_force_range", s.contact_force_range);
    s.include_cfrc_ext = args.get("include_cfrc_ext_in_observation", true);
    if (args.contains("main_body")) {
      const Json& body = kwargs.at("main_body");
      TORCH_CHECK_VALUE(
          body.is_number_integer() || body.is_string(),
          s.name,
          ": keyword argument 'main_body' expects a body index (int) or name "
          "(str), got ",
          body.dump());
      if (body.is_string()) {
        main_body_name = body.get<std::string>();
      } else {
        const int64_t index = body.get<int64_t>();
        s.main_body = index >= 0 && index <= std::numeric_limits<int>::max()
                          ? static_cast<int>(index)
                          : -1;
        main_body_index = index;
      }
    }
  }
  args.check_all_read();

  s.xml_file = expand_model_path(s.name, xml);
  std::string error;
  s.model.reset(load_model(s.name, s.xml_file, error));
  TORCH_CHECK_VALUE(
      s.model != nullptr,
      s.name,
      ": MuJoCo could not load the model ",
      s.xml_file,
      ": ",
      error);
  const mjModel* m = s.model.get();
  TORCH_CHECK_VALUE(
      m->nu >= 1 && m->nu <= 64,
      s.name,
      ": the model ",
      s.xml_file,
      " has ",
      m->nu,
      " actuators; expected 1 to 64");
  const int skipped =
      s.exclude_current_positions ? (task == Task::kAnt ? 2 : 1) : 0;
  TORCH_CHECK_VALUE(
      m->nq > skipped && m->nbody >= 1,
      s.name,
      ": the model ",
      s.xml_file,
      " has too few coordinates (nq ",
      m->nq,
      ")");
  if (!main_body_name.empty()) {
    s.main_body = mj_name2id(m, mjOBJ_BODY, main_body_name.c_str());
    TORCH_CHECK_VALUE(
        s.main_body >= 0,
        s.name,
        ": main_body '",
        main_body_name,
        "' is not a body of ",
        s.xml_file);
  }
  TORCH_CHECK_VALUE(
      s.main_body >= 0 && s.main_body < m->nbody,
      s.name,
      ": main_body ",
      main_body_index,
      " is not a body index of ",
      s.xml_file,
      " (it has ",
      m->nbody,
      ")");
  s.dt = m->opt.timestep * s.frame_skip;
  s.obs_dim = m->nq - skipped + m->nv;
  if (task == Task::kAnt && s.include_cfrc_ext) {
    s.obs_dim += 6 * (m->nbody - 1);
  }
  s.subs.resize(static_cast<size_t>(num_envs));
  for (auto& sub : s.subs) {
    sub.data.reset(mj_makeData(m));
    TORCH_CHECK(sub.data != nullptr, s.name, ": mj_makeData failed");
  }
  // The action Box: the ctrlrange as float32, as gymnasium's
  // _set_action_space casts it.
  at::Tensor low = at::empty({m->nu}, at::kFloat);
  at::Tensor high = at::empty({m->nu}, at::kFloat);
  for (int j = 0; j < m->nu; ++j) {
    low.data_ptr<float>()[j] = static_cast<float>(m->actuator_ctrlrange[2 * j]);
    high.data_ptr<float>()[j] =
        static_cast<float>(m->actuator_ctrlrange[2 * j + 1]);
  }
  set_specs(
      rl::Composite()
          .set(
              "observation",
              rl::TensorSpec::unbounded({s.obs_dim}, at::kDouble))
          .set("x_velocity", rl::TensorSpec::unbounded({}, at::kDouble)),
      rl::TensorSpec::bounded({m->nu}, at::kFloat, low, high));
}

LocomotionEnv::~LocomotionEnv() = default;

std::string LocomotionEnv::name() const {
  return impl_->name;
}

const std::string& LocomotionEnv::xml_file() const noexcept {
  return impl_->xml_file;
}

at::Tensor LocomotionEnv::last_rewards() const {
  at::Tensor out = at::empty({num_envs()}, at::kDouble);
  for (int64_t i = 0; i < num_envs(); ++i) {
    out.data_ptr<double>()[i] = impl_->subs[static_cast<size_t>(i)].reward;
  }
  return out;
}

void LocomotionEnv::reset_range_(
    int64_t begin, int64_t end, const bool* mask, const TensorDict& out) {
  Impl& s = *impl_;
  const rl::Rows<double> obs(out, "observation");
  const rl::Rows<double> x_velocity(out, "x_velocity");
  std::vector<double> row(static_cast<size_t>(s.obs_dim));
  for (int64_t i = begin; i < end; ++i) {
    Impl::Sub& sub = s.subs[static_cast<size_t>(i)];
    if (mask == nullptr || mask[i]) {
      if (sub.reseed) {
        sub.rng.seed(seed() + static_cast<uint64_t>(i));
        sub.reseed = false;
      }
      s.reset(sub);
    }
    s.write_observation(sub.data.get(), row.data());
    for (int64_t j = 0; j < s.obs_dim; ++j) {
      obs(i, j) = row[static_cast<size_t>(j)];
    }
    x_velocity(i) = sub.x_velocity;
  }
}

void LocomotionEnv::step_range_(
    int64_t begin, int64_t end, const TensorDict& td, const TensorDict& next) {
  Impl& s = *impl_;
  const rl::Rows<const float> action(td, "action");
  const rl::Rows<double> obs(next, "observation");
  const rl::Rows<double> x_velocity(next, "x_velocity");
  const rl::Rows<float> reward(next, "reward");
  const rl::Rows<bool> terminated(next, "terminated");
  const rl::Rows<bool> truncated(next, "truncated");
  const int nu = s.model->nu;
  float act[64];
  std::vector<double> row(static_cast<size_t>(s.obs_dim));
  for (int64_t i = begin; i < end; ++i) {
    for (int j = 0; j < nu; ++j) {
      act[j] = action(i, j);
    }
    Impl::Sub& sub = s.subs[static_cast<size_t>(i)];
    const rl::StepResult result = s.step(sub, act);
    s.write_observation(sub.data.get(), row.data());
    for (int64_t j = 0; j < s.obs_dim; ++j) {
      obs(i, j) = row[static_cast<size_t>(j)];
    }
    x_velocity(i) = sub.x_velocity;
    reward(i) = result.reward;
    terminated(i) = result.terminated;
    truncated(i) = result.truncated;
  }
}

void LocomotionEnv::set_seed_(uint64_t /*seed*/) {
  for (auto& sub : impl_->subs) {
    sub.reseed = true;
  }
}

}  // namespace tensordict_mujoco

TENSORDICT_REGISTER_ENV("HalfCheetah-v5", tensordict_mujoco::HalfCheetahEnv);
TENSORDICT_REGISTER_ENV("Hopper-v5", tensordict_mujoco::HopperEnv);
TENSORDICT_REGISTER_ENV("Walker2d-v5", tensordict_mujoco::Walker2dEnv);
TENSORDICT_REGISTER_ENV("Ant-v5", tensordict_mujoco::AntEnv);
