// The envs of make_env: gymnasium's CartPole-v1 and the point masses of
// examples/python_env.
//
// Compiled with -ffp-contract=off (CMakeLists.txt): CartPole must round
// after every operation as numpy does, never fuse a multiply-add.

#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <c10/macros/Macros.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tensordict/rl/env.h"
#include "tensordict/rl/env_kit.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

namespace {

// A float in [-1, 1) from the top 24 bits of a hash: exact in float32.
float unit_float(uint64_t h) {
  return static_cast<float>(h >> 40) / static_cast<float>(1 << 23) - 1.0F;
}

// A double in [0, 1) from the top 53 bits of a hash, as numpy's random().
double unit_double(uint64_t h) {
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

// gymnasium 1.4.0 CartPole-v1 constants, computed as its __init__ does.
constexpr double kGravity = 9.8;
constexpr double kMassCart = 1.0;
constexpr double kMassPole = 0.1;
constexpr double kTotalMass = kMassPole + kMassCart;
constexpr double kLength = 0.5;  // half the pole's length
constexpr double kPoleMassLength = kMassPole * kLength;
constexpr double kForceMag = 10.0;
constexpr double kTau = 0.02;
const double kThetaThreshold = 12 * 2 * M_PI / 360;
constexpr double kXThreshold = 2.4;
constexpr double kResetLow = -0.05;
constexpr double kResetHigh = 0.05;

// Writes a CartPole state as sub-env i's observation: through the row's
// pointer when its four floats are adjacent (as in every leaf make_next and
// the collector's batch give it), by element otherwise.
C10_ALWAYS_INLINE void write_observation(
    const Rows<float>& obs, int64_t i, const double* s) {
  if (obs.rows_contiguous()) {
    float* row = obs.row(i);
    for (int k = 0; k < 4; ++k) {
      row[k] = static_cast<float>(s[k]);
    }
    return;
  }
  for (int k = 0; k < 4; ++k) {
    obs(i, k) = static_cast<float>(s[k]);
  }
}

}  // namespace

// --- CartPole ----------------------------------------------------------------

CartPoleEnv::CartPoleEnv(int64_t num_envs, CartPoleOptions options)
    : EnvBase(num_envs),
      options_(options),
      state_(static_cast<size_t>(num_envs) * 4, 0.0),
      steps_(static_cast<size_t>(num_envs), 0),
      episodes_(static_cast<size_t>(num_envs), 0) {
  // gymnasium's observation_space: high = [2 x_threshold, inf,
  // 2 theta_threshold, inf] in float32, low = -high.
  TORCH_CHECK_VALUE(
      options_.max_episode_steps() >= 1,
      "CartPole-v1: max_episode_steps must be >= 1, got ",
      options_.max_episode_steps());
  const float inf = std::numeric_limits<float>::infinity();
  const at::Tensor high = at::tensor(
      {static_cast<float>(kXThreshold * 2),
       inf,
       static_cast<float>(kThetaThreshold * 2),
       inf});
  set_specs(
      Composite().set(
          "observation",
          TensorSpec::bounded({4}, c10::kFloat, high.neg(), high)),
      options_.categorical_action_encoding() ? TensorSpec::categorical(2)
                                             : TensorSpec::one_hot(2));
}

std::string CartPoleEnv::name() const {
  return "CartPole-v1";
}

void CartPoleEnv::set_seed_(uint64_t /*seed*/) {
  std::fill(episodes_.begin(), episodes_.end(), 0);
}

at::Tensor CartPoleEnv::state() const {
  return at::tensor(state_, at::TensorOptions(c10::kDouble))
      .reshape({num_envs(), 4});
}

void CartPoleEnv::set_state(const at::Tensor& state) {
  TORCH_CHECK_VALUE(
      state.defined() && state.sizes() == c10::IntArrayRef({num_envs(), 4}),
      "CartPoleEnv.set_state: expected a state of shape [",
      num_envs(),
      ", 4], got ",
      state.defined() ? state.sizes() : c10::IntArrayRef{});
  const at::Tensor s = state.to(c10::kDouble).contiguous();
  const double* data = s.data_ptr<double>();
  std::copy(data, data + state_.size(), state_.begin());
}

at::Tensor CartPoleEnv::elapsed_steps() const {
  return at::tensor(steps_, at::TensorOptions(c10::kLong));
}

void CartPoleEnv::reset_range_(
    int64_t begin, int64_t end, const bool* mask, const TensorDict& out) {
  const Rows<float> obs(out, "observation");
  for (int64_t i = begin; i < end; ++i) {
    double* s = &state_[static_cast<size_t>(i) * 4];
    if (mask == nullptr || mask[i]) {
      const uint64_t h =
          sub_env_seed(seed(), i, static_cast<int64_t>(episodes_[i]++));
      for (int k = 0; k < 4; ++k) {
        const double u = unit_double(splitmix64(h + static_cast<uint64_t>(k)));
        s[k] = kResetLow + (kResetHigh - kResetLow) * u;
      }
      steps_[i] = 0;
    }
    write_observation(obs, i, s);
  }
}

void CartPoleEnv::step_range_(
    int64_t begin, int64_t end, const TensorDict& td, const TensorDict& next) {
  step_rows(
      begin,
      end,
      td,
      next.get("observation"),
      next.get("reward"),
      next.get("terminated"),
      next.get("truncated"));
}

void CartPoleEnv::step_leaves_(
    int64_t begin,
    int64_t end,
    const TensorDict& td,
    const StepLeaves& leaves) {
  step_rows(
      begin,
      end,
      td,
      leaves.observations.front(),
      leaves.reward,
      leaves.terminated,
      leaves.truncated);
}

void CartPoleEnv::step_rows(
    int64_t begin,
    int64_t end,
    const TensorDict& td,
    const at::Tensor& observation,
    const at::Tensor& reward,
    const at::Tensor& terminated,
    const at::Tensor& truncated) {
  // The keys are made once: they name the leaves in errors only, and a
  // collector steps here every step.
  static const NestedKey kAction("action");
  static const NestedKey kObservation("observation");
  static const NestedKey kReward("reward");
  static const NestedKey kTerminated("terminated");
  static const NestedKey kTruncated("truncated");
  const IndexRows action(td, kAction, action_spec());
  const Rows<float> obs(observation, kObservation);
  const Rows<float> rew(reward, kReward);
  const Rows<bool> term(terminated, kTerminated);
  const Rows<bool> trunc(truncated, kTruncated);
  for (int64_t i = begin; i < end; ++i) {
    double* s = &state_[static_cast<size_t>(i) * 4];
    double x = s[0];
    double x_dot = s[1];
    double theta = s[2];
    double theta_dot = s[3];
    // The action's index (a one-hot's, as OneHot's to_numpy in TorchRL's
    // GymEnv, or a categorical index): 1 pushes right, anything else left.
    // Read from a table: a branch on a random action mispredicts half the
    // steps.
    static constexpr double kForces[2] = {-kForceMag, kForceMag};
    const double force = kForces[action[i] == 1 ? 1 : 0];
    const double costheta = std::cos(theta);
    const double sintheta = std::sin(theta);
    const double temp =
        (force + kPoleMassLength * (theta_dot * theta_dot) * sintheta) /
        kTotalMass;
    const double thetaacc =
        (kGravity * sintheta - costheta * temp) /
        (kLength *
         (4.0 / 3.0 - kMassPole * (costheta * costheta) / kTotalMass));
    const double xacc =
        temp - kPoleMassLength * thetaacc * costheta / kTotalMass;
    x = x + kTau * x_dot;
    x_dot = x_dot + kTau * xacc;
    theta = theta + kTau * theta_dot;
    theta_dot = theta_dot + kTau * thetaacc;
    s[0] = x;
    s[1] = x_dot;
    s[2] = theta;
    s[3] = theta_dot;
    ++steps_[i];
    write_observation(obs, i, s);
    rew(i, 0) = 1.0F;
    term(i, 0) = x < -kXThreshold || x > kXThreshold ||
                 theta < -kThetaThreshold || theta > kThetaThreshold;
    trunc(i, 0) = steps_[i] >= options_.max_episode_steps();
  }
}

// --- PointMass ---------------------------------------------------------------

PointMassEnv::PointMassEnv(int64_t num_envs, uint64_t seed, int64_t max_steps)
    : EnvBase(num_envs),
      max_steps_(max_steps),
      position_(at::zeros({num_envs, 2})),
      velocity_(at::zeros({num_envs, 2})),
      steps_(at::zeros({num_envs, 1}, at::TensorOptions(c10::kLong))),
      episodes_(static_cast<size_t>(num_envs), 0) {
  TORCH_CHECK_VALUE(
      max_steps >= 1, "PointMassEnv needs max_steps >= 1, got ", max_steps);
  set_specs(
      Composite().set("observation", TensorSpec::unbounded({4})),
      TensorSpec::unbounded({2}));
  set_seed(seed);
}

std::string PointMassEnv::name() const {
  return "PointMass";
}

void PointMassEnv::set_seed_(uint64_t /*seed*/) {
  std::fill(episodes_.begin(), episodes_.end(), 0);
}

void PointMassEnv::reset_range_(
    int64_t begin, int64_t end, const bool* mask, const TensorDict& out) {
  auto position = position_.accessor<float, 2>();
  auto velocity = velocity_.accessor<float, 2>();
  auto steps = steps_.accessor<int64_t, 2>();
  for (int64_t i = begin; i < end; ++i) {
    if (mask != nullptr && !mask[i]) {
      continue;
    }
    const uint64_t h = sub_env_seed(seed(), i, episodes_[i]++);
    position[i][0] = unit_float(h);
    position[i][1] = unit_float(splitmix64(h));
    velocity[i][0] = 0.0F;
    velocity[i][1] = 0.0F;
    steps[i][0] = 0;
  }
  const int64_t n = end - begin;
  out.get("observation")
      .narrow(0, begin, n)
      .copy_(at::cat(
          {position_.narrow(0, begin, n), velocity_.narrow(0, begin, n)}, -1));
}

void PointMassEnv::step_range_(
    int64_t begin, int64_t end, const TensorDict& td, const TensorDict& next) {
  const int64_t n = end - begin;
  const at::Tensor action = td.get("action").narrow(0, begin, n).clamp(-1, 1);
  at::Tensor velocity = velocity_.narrow(0, begin, n);
  at::Tensor position = position_.narrow(0, begin, n);
  at::Tensor steps = steps_.narrow(0, begin, n);
  velocity.copy_(velocity * 0.9 + action * 0.1);
  position.copy_(position + velocity * 0.1);
  steps.add_(1);
  const at::Tensor distance = position.pow(2).sum(-1, /*keepdim=*/true).sqrt();
  next.get("observation")
      .narrow(0, begin, n)
      .copy_(at::cat({position, velocity}, -1));
  next.get("reward").narrow(0, begin, n).copy_(distance.neg());
  next.get("terminated")
      .narrow(0, begin, n)
      .copy_(distance.gt(1.5).logical_or(distance.lt(0.05)));
  next.get("truncated").narrow(0, begin, n).copy_(steps.ge(max_steps_));
}

}  // namespace rl
TENSORDICT_END_NAMESPACE
