// An env of a user's own, written outside the library: one file, one
// registration. "Corridor-v0": a cart in a corridor pushed left or right
// towards a goal at one of its ends, written one sub-env at a time
// (rl::BatchedEnv batches it, EnvPool's shape). Its layout is CartPole's
// (observation float32 [4], a OneHot(2) action), so CartPole's policies
// fit it.
//
// Built into a shared library (`--env-library` of the worker,
// tensordict_cpp.load_env_library, rl::load_env_library), into a Python
// extension (import it, and tensordict_cpp sees the env), or into a
// program linked to a static libtensordict: the registration below runs
// wherever this file is linked.

#include <tensordict/rl/env_kit.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>

namespace corridor {

namespace rl = tensordict::rl;

struct Corridor {
  // Keyword arguments: `length` (the corridor's half length) and
  // `max_steps`; any other is refused, naming the known ones.
  explicit Corridor(const tensordict::Json& kwargs) {
    rl::EnvKwargs args("Corridor-v0", kwargs);
    length = args.get("length", 1.0);
    max_steps = args.get<int64_t>("max_steps", 200);
    args.check_all_read();
    TORCH_CHECK_VALUE(
        length > 0, "Corridor-v0: length must be > 0, got ", length);
    TORCH_CHECK_VALUE(
        max_steps >= 1, "Corridor-v0: max_steps must be >= 1, got ", max_steps);
  }

  std::string name() const {
    return "Corridor-v0";
  }
  // [position, velocity, goal, share of the steps left].
  rl::Composite observation_spec() const {
    return rl::Composite().set("observation", rl::TensorSpec::unbounded({4}));
  }
  // 0 pushes left, 1 right.
  rl::TensorSpec action_spec() const {
    return rl::TensorSpec::one_hot(2);
  }

  void reset(const rl::SubEnvRows& rows, rl::SubEnvRng& rng) {
    std::uniform_real_distribution<double> start(-0.5 * length, 0.5 * length);
    position = start(rng);
    velocity = 0.0;
    goal = (rng() & 1U) != 0 ? length : -length;
    steps = 0;
    write(rows);
  }

  rl::StepResult step(const rl::SubEnvRows& rows, rl::SubEnvRng& rng) {
    std::normal_distribution<double> wind(0.0, 0.01);
    const double push = rows.action_index() == 1 ? 0.05 : -0.05;
    velocity = 0.9 * velocity + push + wind(rng);
    position += velocity;
    ++steps;
    write(rows);
    rl::StepResult result;
    const double distance = std::abs(position - goal);
    result.reward = static_cast<float>(1.0 - distance / (2.0 * length));
    result.terminated = distance < 0.05 || std::abs(position) > 1.5 * length;
    result.truncated = steps >= max_steps;
    return result;
  }

  void write(const rl::SubEnvRows& rows) const {
    float* obs = rows.observation<float>();
    obs[0] = static_cast<float>(position);
    obs[1] = static_cast<float>(velocity);
    obs[2] = static_cast<float>(goal);
    obs[3] =
        static_cast<float>(max_steps - steps) / static_cast<float>(max_steps);
  }

  double length = 1.0;
  int64_t max_steps = 200;
  double position = 0.0;
  double velocity = 0.0;
  double goal = 1.0;
  int64_t steps = 0;
};

}  // namespace corridor

TENSORDICT_REGISTER_ENV(
    "Corridor-v0", tensordict::rl::BatchedEnv<corridor::Corridor>);
