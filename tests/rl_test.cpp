// Tests of include/tensordict/rl.h: specs, the envs' reset/step layout,
// partial resets, step_mdp, rollout and the collector (layout, traj_ids,
// threads, weight updates, buffer reuse, errors). The comparisons with
// TorchRL and gymnasium themselves are in tests/rl.

#include <tensordict/aoti.h>
#include <tensordict/probabilistic.h>
#include <tensordict/rl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "support.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RL_TEST_SANITIZER_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RL_TEST_SANITIZER_ALLOCATOR 1
#endif
#endif

#ifdef RL_TEST_SANITIZER_ALLOCATOR
// The sanitizer allocators' count of live heap bytes (sanitizer_common's
// allocator interface; GCC ships no header declaring it).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace rl_test {

using tensordict::KeyError;
using tensordict::NestedKey;
using tensordict::TensorDict;
using tensordict::nn::TensorDictModule;
namespace rl = tensordict::rl;

// A deterministic policy: one-hot argmax of a linear layer of the
// observation (CartPole's action spec).
struct ArgmaxPolicyImpl : torch::nn::Module {
  ArgmaxPolicyImpl()
      : linear(register_module("linear", torch::nn::Linear(4, 2))) {}
  torch::Tensor forward(const torch::Tensor& observation) {
    return torch::one_hot(linear(observation).argmax(-1), 2);
  }
  torch::nn::Linear linear;
};
TORCH_MODULE(ArgmaxPolicy);

TensorDictModule make_policy(uint64_t seed = 0) {
  torch::manual_seed(seed);
  return TensorDictModule(ArgmaxPolicy(), {"observation"}, {"action"});
}

// Weights that make the policy always pick `index`.
TensorDict constant_weights(TensorDictModule& policy, int64_t index) {
  TensorDict weights = TensorDict::from_module(*policy.ptr()).clone();
  weights.get({"module", "linear", "weight"}).zero_();
  at::Tensor bias = weights.get({"module", "linear", "bias"});
  bias.zero_();
  bias[index] = 1.0;
  return weights;
}

TEST(RlSpecTest, CartPoleSpecsAreTorchRLGymEnvs) {
  rl::CartPoleEnv env(3);
  EXPECT_EQ(env.batch_size(), std::vector<int64_t>({3}));
  const rl::TensorSpec& action = env.action_spec();
  EXPECT_EQ(action.kind(), rl::SpecKind::kOneHot);
  EXPECT_EQ(action.n(), 2);
  EXPECT_EQ(action.dtype(), torch::kLong);
  EXPECT_EQ(action.shape(), std::vector<int64_t>({2}));
  const rl::TensorSpec& obs = env.observation_spec().get("observation");
  EXPECT_EQ(obs.kind(), rl::SpecKind::kBounded);
  EXPECT_EQ(obs.dtype(), torch::kFloat);
  const float inf = std::numeric_limits<float>::infinity();
  const auto theta = static_cast<float>(2 * 12 * 2 * M_PI / 360);
  EXPECT_TRUE(torch::equal(obs.high(), torch::tensor({4.8F, inf, theta, inf})));
  EXPECT_TRUE(torch::equal(obs.low(), -obs.high()));
  EXPECT_EQ(env.reward_spec().dtype(), torch::kFloat);
  EXPECT_EQ(env.reward_spec().shape(), std::vector<int64_t>({1}));
  for (const char* key : {"done", "terminated", "truncated"}) {
    EXPECT_EQ(env.done_spec().get(key).dtype(), torch::kBool);
    EXPECT_EQ(env.done_spec().get(key).shape(), std::vector<int64_t>({1}));
  }
  EXPECT_EQ(env.done_spec().size(), 3U);
}

TEST(RlSpecTest, CheckNamesTheKeyAndWhatWasExpected) {
  const rl::TensorSpec one_hot = rl::TensorSpec::one_hot(2);
  EXPECT_TRUE(one_hot.is_in(torch::tensor({{0, 1}, {1, 0}}), {2}));
  EXPECT_FALSE(one_hot.is_in(torch::tensor({{1, 1}, {1, 0}}), {2}));
  // A row is one-hot only as one 1 and 0s: another value anywhere, or no
  // 1, is refused (the second row of each case).
  for (const auto& row :
       {std::vector<int64_t>{1, 2}, {2, 1}, {-1, 1}, {1, -1}, {2, 0}, {0, 0}}) {
    EXPECT_FALSE(one_hot.is_in(
        torch::tensor({int64_t{0}, int64_t{1}, row[0], row[1]}).reshape({2, 2}),
        {2}))
        << row[0] << ", " << row[1];
  }
  // The same in floating and bool rows: halves, NaN, two trues.
  for (const auto& row :
       {std::vector<float>{0.5F, 0.5F}, {NAN, 1.0F}, {1.0F, NAN}}) {
    EXPECT_FALSE(one_hot.is_in(
        torch::tensor({0.0F, 1.0F, row[0], row[1]}).reshape({2, 2}), {2}))
        << row[0] << ", " << row[1];
  }
  EXPECT_TRUE(one_hot.is_in(torch::tensor({{0.0F, 1.0F}, {1.0F, 0.0F}}), {2}));
  EXPECT_FALSE(
      one_hot.is_in(torch::tensor({{false, true}, {true, true}}), {2}));
  EXPECT_TRUE(
      one_hot.is_in(torch::tensor({{false, true}, {true, false}}), {2}));
  EXPECT_THROWS_WITH(
      one_hot.check(torch::tensor({{0, 0}}), {1}, "action"),
      c10::ValueError,
      "value of key 'action' is not in its OneHot spec: row 0 is [0, 0], "
      "which is not one-hot");
  EXPECT_THROWS_WITH(
      one_hot.check(torch::zeros({3, 3}), {3}, {"next", "action"}),
      c10::ValueError,
      "('next', 'action') is not in its OneHot spec: expected [3, 2] (any "
      "integer, bool or floating dtype), got [3, 3] Float");
  EXPECT_THROWS_WITH(
      one_hot.check(torch::zeros({3, 2}, torch::kComplexFloat), {3}, "action"),
      c10::ValueError,
      "got [3, 2] ComplexFloat");
  const rl::TensorSpec bounded = rl::TensorSpec::bounded(
      {2}, torch::kFloat, torch::tensor(-1.0), torch::tensor(1.0));
  EXPECT_TRUE(bounded.is_in(torch::tensor({{0.5F, -1.0F}}), {1}));
  EXPECT_FALSE(bounded.is_in(torch::tensor({{1.5F, 0.0F}}), {1}));
  const at::Tensor r = bounded.rand({100});
  EXPECT_TRUE(bounded.is_in(r, {100}));
  EXPECT_TRUE(one_hot.is_in(one_hot.rand({50}), {50}));
  // Every digit of the value: it does not print as its bound.
  EXPECT_THROWS_WITH(
      bounded.check(torch::tensor({{1.0000001F, 0.0F}}), {1}, "action"),
      c10::ValueError,
      "element 0 (row 0, position 0) is 1.00000012, outside [-1, 1]");
  // Bounds per element, read in place: element 3 is row 1, position 1.
  const rl::TensorSpec per_element = rl::TensorSpec::bounded(
      {2},
      torch::kDouble,
      torch::tensor({-1.0, 0.0}),
      torch::tensor({1.0, 2.0}));
  EXPECT_TRUE(per_element.is_in(
      torch::tensor({{-1.0, 2.0}, {1.0, 0.0}}, torch::kDouble), {2}));
  EXPECT_THROWS_WITH(
      per_element.check(
          torch::tensor({{0.0, 1.0}, {0.5, -0.5}}, torch::kDouble),
          {2},
          "action"),
      c10::ValueError,
      "value of key 'action' is not in its Bounded spec: values outside the "
      "Bounded spec's [low, high]: element 3 (row 1, position 1) is -0.5, "
      "outside [0, 2]");
  EXPECT_THROWS_WITH(
      per_element.check(
          torch::tensor({{0.0, std::nan("")}}, torch::kDouble), {1}, "action"),
      c10::ValueError,
      "element 1 (row 0, position 1) is nan, outside [0, 2]");
  // Not contiguous: read through a contiguous copy, so elements count in
  // row-major order (in storage order, element 1 would be -0.5).
  const at::Tensor columns =
      torch::tensor({{-1.0, 0.5}, {2.0, 1.0}}, torch::kDouble).t();
  EXPECT_TRUE(per_element.is_in(columns, {2}));
  const at::Tensor negated = columns * -1;
  ASSERT_FALSE(negated.is_contiguous());
  EXPECT_THROWS_WITH(
      per_element.check(negated, {2}, "action"),
      c10::ValueError,
      "element 1 (row 0, position 1) is -2, outside [0, 2]");
  const rl::TensorSpec index = rl::TensorSpec::categorical(3, {}, torch::kLong);
  EXPECT_TRUE(index.is_in(torch::tensor({0, 2, 1}), {3}));
  EXPECT_FALSE(index.is_in(torch::tensor({0, 3}), {2}));
  EXPECT_FALSE(index.is_in(torch::tensor({-1, 0}), {2}));
  const at::Tensor strided = torch::tensor({0, 1, 3, 2});
  EXPECT_FALSE(index.is_in(strided.slice(0, 0, 4, 2), {2}));
  EXPECT_TRUE(index.is_in(strided.slice(0, 1, 4, 2), {2}));
  EXPECT_THROWS_WITH(
      rl::TensorSpec::bounded(
          {1}, torch::kFloat, torch::tensor(1.0), torch::tensor(0.0)),
      c10::ValueError,
      "low <= high");
  rl::Composite composite;
  composite.set("observation", rl::TensorSpec::unbounded({4}));
  EXPECT_THROWS_WITH(
      composite.check(TensorDict({2}), {2}),
      KeyError,
      "key 'observation' of the spec is missing");
  EXPECT_THROWS_WITH(composite.get("pixels"), KeyError, "'pixels'");
}

TEST(RlEnvTest, ResetAndStepWriteTorchRLsLayout) {
  rl::CartPoleEnv env(5);
  env.set_seed(1);
  TensorDict td = env.reset();
  EXPECT_EQ(td.batch_size(), c10::IntArrayRef({5}));
  EXPECT_EQ(td.keys().size(), 4U);
  EXPECT_EQ(td.get("observation").sizes(), c10::IntArrayRef({5, 4}));
  EXPECT_EQ(td.get("observation").scalar_type(), torch::kFloat);
  EXPECT_TRUE(td.get("observation").abs().le(0.05).all().item<bool>());
  EXPECT_TRUE(
      torch::equal(td.get("observation"), env.state().to(torch::kFloat)));
  for (const char* key : {"done", "terminated", "truncated"}) {
    EXPECT_EQ(td.get(key).sizes(), c10::IntArrayRef({5, 1}));
    EXPECT_EQ(td.get(key).scalar_type(), torch::kBool);
    EXPECT_FALSE(td.get(key).any().item<bool>());
  }
  td.set("action", env.rand_action());
  TensorDict out = env.step(td);
  EXPECT_TRUE(out.is_same(td));
  const TensorDict next = td.get_tensordict("next");
  EXPECT_EQ(next.keys().size(), 5U);
  EXPECT_EQ(next.get("reward").sizes(), c10::IntArrayRef({5, 1}));
  EXPECT_EQ(next.get("reward").scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(next.get("reward"), torch::ones({5, 1})));
  EXPECT_TRUE(
      torch::equal(next.get("observation"), env.state().to(torch::kFloat)));
  EXPECT_TRUE(torch::equal(
      next.get("done"),
      next.get("terminated").logical_or(next.get("truncated"))));
  EXPECT_TRUE(
      torch::equal(env.elapsed_steps(), torch::ones({5}, torch::kLong)));
}

TEST(RlEnvTest, StepFollowsTheActionsDirection) {
  rl::CartPoleEnv env(2);
  env.set_state(torch::zeros({2, 4}, torch::kDouble));
  TensorDict td({2});
  td.set("action", torch::tensor({{1, 0}, {0, 1}}));
  env.step(td);
  const at::Tensor state = env.state();
  // Pushed left (index 0) the cart accelerates left, right to the right;
  // x moves only at the next step (Euler uses the old velocity).
  EXPECT_LT(state[0][1].item<double>(), 0.0);
  EXPECT_GT(state[1][1].item<double>(), 0.0);
  EXPECT_EQ(state[0][0].item<double>(), 0.0);
  // The cart gains 0.02 * xacc: xacc = temp - 0.05 thetaacc / 1.1 with
  // temp = 10 / 1.1 and thetaacc = -temp / (0.5 (4/3 - 0.1 / 1.1)).
  const double temp = 10.0 / 1.1;
  const double thetaacc = -temp / (0.5 * (4.0 / 3.0 - 0.1 / 1.1));
  EXPECT_DOUBLE_EQ(
      state[1][1].item<double>(), 0.02 * (temp - 0.05 * thetaacc / 1.1));
  EXPECT_DOUBLE_EQ(state[1][3].item<double>(), 0.02 * thetaacc);
}

TEST(RlEnvTest, StepRefusesAMissingOrMalformedAction) {
  rl::CartPoleEnv env(2);
  TensorDict td = env.reset();
  EXPECT_THROWS_WITH(
      env.step(td), KeyError, "key 'action' the env needs is missing");
  td.set("action", torch::tensor({{1, 1}, {0, 1}}));
  EXPECT_THROWS_WITH(env.step(td), c10::ValueError, "not one-hot");
  td.set("action", torch::tensor({{1}, {0}}));
  EXPECT_THROWS_WITH(
      env.step(td),
      c10::ValueError,
      "expected [2, 2] (any integer, bool or floating dtype), got [2, 1] Long");
  EXPECT_FALSE(td.contains("next"));
  EXPECT_TRUE(
      torch::equal(env.elapsed_steps(), torch::zeros({2}, torch::kLong)));
}

TEST(RlEnvTest, RangeCallsRefuseBuffersOfTheWrongShape) {
  rl::CartPoleEnv env(4);
  TensorDict next = env.make_next();
  TensorDict td({4});
  td.set("action", torch::ones({4, 1}, torch::kLong));
  EXPECT_THROWS_WITH(
      env.step_range(0, 4, td, next),
      c10::ValueError,
      "step_range: key 'action' expected [4, 2] Long, got [4, 1] Long");
  td.set("action", env.rand_action());
  next.set("reward", torch::zeros({4}));
  EXPECT_THROWS_WITH(
      env.step_range(0, 4, td, next),
      c10::ValueError,
      "key 'reward' expected [4, 1] Float, got [4] Float");
  EXPECT_THROWS_WITH(
      env.step_range(2, 5, td, env.make_next()),
      c10::IndexError,
      "sub-env range [2, 5) is not inside [0, 4)");
  TensorDict out({4});
  out.set("observation", torch::zeros({4, 3}));
  EXPECT_THROWS_WITH(
      env.reset_range(0, 4, nullptr, out),
      c10::ValueError,
      "reset_range: key 'observation' expected [4, 4] Float, got [4, 3] "
      "Float");
  EXPECT_THROWS_WITH(
      env.reset_range(0, 4, nullptr, TensorDict({4})),
      KeyError,
      "key 'observation' is missing");
  env.step_range(1, 3, td, next.set("reward", torch::zeros({4, 1})));
  EXPECT_TRUE(torch::equal(
      env.elapsed_steps(), torch::tensor({0, 1, 1, 0}, torch::kLong)));
}

// The leaves found once step as the dict does: CartPole takes them as
// found, PointMass (no override) through its dict; both write "done".
TEST(RlEnvTest, StepRangeIntoFoundLeavesStepsAsTheDictDoes) {
  // Walk-v0 is an env of the kit (rl_env_kit_test.cpp), with two
  // observation leaves.
  const std::vector<std::string> names = {
      "CartPole-v1", "PointMass", "Walk-v0"};
  for (const std::string& name : names) {
    const auto by_dict = rl::make_env(name, 4);
    const auto by_leaves = rl::make_env(name, 4);
    by_dict->set_seed(3);
    by_leaves->set_seed(3);
    TensorDict td = by_dict->reset();
    by_leaves->reset();
    TensorDict next = by_dict->make_next();
    TensorDict found = by_leaves->make_next();
    const rl::StepLeaves leaves = by_leaves->step_leaves(found);
    torch::manual_seed(0);
    for (int step = 0; step < 30; ++step) {
      td.set("action", by_dict->rand_action());
      by_dict->step_range(0, 4, td, next);
      by_leaves->step_range(0, 2, td, leaves);
      by_leaves->step_range(2, 4, td, leaves);
      for (const auto& key : next.keys(true, true)) {
        EXPECT_TRUE(torch::equal(next.get(key), found.get(key)))
            << name << " step " << step << " key " << key.to_string();
      }
      // Done sub-envs start anew in both, the same way.
      const at::Tensor done = next.get("done").reshape({4}).contiguous();
      by_dict->reset_range(0, 4, done.data_ptr<bool>(), next);
      by_leaves->reset_range(0, 4, done.data_ptr<bool>(), found);
    }
  }
  rl::CartPoleEnv env(4);
  TensorDict next = env.make_next();
  next.set("reward", torch::zeros({4}));
  EXPECT_THROWS_WITH(
      (void)env.step_leaves(next),
      c10::ValueError,
      "step_leaves: key 'reward' expected [4, 1] Float, got [4] Float");
  EXPECT_THROWS_WITH(
      (void)env.step_leaves(TensorDict({4})),
      KeyError,
      "step_leaves: key 'observation' is missing");
}

// CartPole writes an observation through its row's pointer when the row's
// floats are adjacent and element by element otherwise: the same values.
TEST(RlEnvTest, CartPoleWritesObservationsIntoAnyRowLayout) {
  rl::CartPoleEnv plain(3);
  rl::CartPoleEnv strided(3);
  plain.set_seed(5);
  strided.set_seed(5);
  TensorDict a = plain.make_next();
  TensorDict b = strided.make_next();
  // [3, 4], its four floats two apart: every other column of [3, 8].
  b.set("observation", torch::zeros({3, 8}).slice(1, 0, 8, 2));
  plain.reset_range(0, 3, nullptr, a);
  strided.reset_range(0, 3, nullptr, b);
  EXPECT_FALSE(b.get("observation").is_contiguous());
  EXPECT_TRUE(a.get("observation").ne(0).all().item<bool>());
  EXPECT_TRUE(torch::equal(a.get("observation"), b.get("observation")));
  TensorDict td({3});
  td.set("action", torch::one_hot(torch::tensor({0, 1, 1}), 2));
  const at::Tensor before = a.get("observation").clone();
  plain.step_range(0, 3, td, a);
  strided.step_range(0, 3, td, b);
  EXPECT_FALSE(torch::equal(a.get("observation"), before));
  EXPECT_TRUE(torch::equal(a.get("observation"), b.get("observation")));
}

// done = terminated | truncated over the range only, on the flags
// make_next makes (by pointer) and on strided ones (by tensor ops).
TEST(RlEnvTest, StepRangeWritesDoneOverItsRangeOnAnyFlagLayout) {
  for (const bool strided : {false, true}) {
    rl::CartPoleEnv env(4);
    TensorDict next = env.make_next();
    if (strided) {
      // [4, 1] views of every other column: the same shape, not contiguous.
      next.set("done", torch::ones({4, 2}, torch::kBool).narrow(1, 0, 1));
    } else {
      next.get("done").fill_(true);
    }
    TensorDict td({4});
    td.set("action", env.rand_action());
    // Each sub-env's cart position and pole angle; velocities 0.
    const auto set_positions =
        [&env](const std::vector<double>& x, const std::vector<double>& theta) {
          at::Tensor state = torch::zeros({4, 4}, torch::kDouble);
          state.select(1, 0).copy_(torch::tensor(x, torch::kDouble));
          state.select(1, 2).copy_(torch::tensor(theta, torch::kDouble));
          env.set_state(state);
        };
    // Pole far past the threshold in sub-envs 1 and 2 (the range [1, 3)).
    set_positions({0.0, 0.0, 0.0, 0.0}, {0.0, 1.0, 1.0, 0.0});
    env.step_range(1, 3, td, next);
    EXPECT_EQ(next.get("done").is_contiguous(), !strided);
    EXPECT_TRUE(torch::equal(
        next.get("done").reshape({4}), torch::tensor({true, true, true, true})))
        << "rows outside [1, 3) keep what they held; strided " << strided;
    env.set_state(torch::zeros({4, 4}, torch::kDouble));
    env.step_range(0, 4, td, next);
    EXPECT_TRUE(torch::equal(
        next.get("done").reshape({4}), torch::zeros({4}, torch::kBool)))
        << "strided " << strided;
    // Pole past the threshold in sub-env 0, cart off the track in 3.
    set_positions({0.0, 0.0, 0.0, 3.0}, {1.0, 0.0, 0.0, 0.0});
    env.step_range(0, 4, td, next);
    EXPECT_TRUE(torch::equal(
        next.get("done").reshape({4}),
        torch::tensor({true, false, false, true})))
        << "strided " << strided;
    EXPECT_TRUE(torch::equal(next.get("done"), next.get("terminated")));
  }
}

TEST(RlEnvTest, PartialResetResetsOnlyTheMaskedSubEnvs) {
  rl::CartPoleEnv env(4);
  TensorDict td = env.reset();
  for (int i = 0; i < 3; ++i) {
    td.set("action", env.rand_action());
    td = rl::step_mdp(env.step(td));
  }
  const at::Tensor before = env.state();
  td.set("done", torch::tensor({true, false, true, false}).unsqueeze(-1));
  td.set("terminated", td.get("done").clone());
  td.set("_reset", torch::tensor({true, false, false, false}));
  TensorDict out = env.reset(td);
  EXPECT_FALSE(out.contains("_reset"));
  EXPECT_TRUE(td.contains("_reset"));
  const at::Tensor after = env.state();
  EXPECT_FALSE(torch::equal(after[0], before[0]));
  for (int i = 1; i < 4; ++i) {
    EXPECT_TRUE(torch::equal(after[i], before[i]));
  }
  EXPECT_TRUE(torch::equal(
      env.elapsed_steps(), torch::tensor({0, 3, 3, 3}, torch::kLong)));
  // The sub-env reset is no longer done; the others keep their flags.
  EXPECT_TRUE(torch::equal(
      out.get("done").squeeze(-1), torch::tensor({false, false, true, false})));
  EXPECT_TRUE(torch::equal(out.get("observation"), after.to(torch::kFloat)));
}

TEST(RlEnvTest, ResetRefusesAMaskOfTheWrongShapeOrDtype) {
  rl::CartPoleEnv env(4);
  TensorDict td({4});
  td.set("_reset", torch::ones({4}, torch::kLong));
  EXPECT_THROWS_WITH(
      env.reset(td),
      c10::ValueError,
      "key '_reset' must be a bool mask of shape [4] or [4, 1], got [4] Long");
  td.set("_reset", torch::ones({4, 2}, torch::kBool));
  EXPECT_THROWS_WITH(env.reset(td), c10::ValueError, "got [4, 2] Bool");
  EXPECT_THROWS_WITH(
      env.reset(TensorDict({3})),
      c10::ValueError,
      "expected a dict of batch size [4], got [3]");
}

TEST(RlEnvTest, TheSameSeedGivesTheSameResets) {
  rl::CartPoleEnv a(6);
  rl::CartPoleEnv b(6);
  a.set_seed(7);
  b.set_seed(7);
  EXPECT_TRUE(
      torch::equal(a.reset().get("observation"), b.reset().get("observation")));
  const at::Tensor first = a.state();
  EXPECT_TRUE(
      torch::equal(a.reset().get("observation"), b.reset().get("observation")));
  EXPECT_FALSE(torch::equal(a.state(), first));  // a new episode, new draws
  b.set_seed(8);
  EXPECT_FALSE(
      torch::equal(a.reset().get("observation"), b.reset().get("observation")));
  a.set_seed(7);
  a.reset();
  EXPECT_TRUE(torch::equal(a.state(), first));
  // Sub-envs draw different states.
  EXPECT_FALSE(torch::equal(first[0], first[1]));
}

TEST(RlEnvTest, TruncatesAt500Steps) {
  rl::CartPoleEnv env(1);
  TensorDict td = env.reset();
  for (int t = 1; t <= 500; ++t) {
    // Upright and still: never terminates, so only the time limit ends it.
    env.set_state(torch::zeros({1, 4}, torch::kDouble));
    td.set("action", torch::tensor({{1, 0}}));
    env.step(td);
    EXPECT_FALSE(td.get({"next", "terminated"}).item<bool>());
    EXPECT_EQ(td.get({"next", "truncated"}).item<bool>(), t == 500) << t;
    EXPECT_EQ(td.get({"next", "done"}).item<bool>(), t == 500) << t;
  }
}

TEST(RlEnvTest, TerminatesPastTheThresholds) {
  rl::CartPoleEnv env(3);
  env.set_state(torch::tensor(
      {{2.41, 0.0, 0.0, 0.0}, {0.0, 0.0, -0.3, 0.0}, {2.3, 0.0, 0.1, 0.0}},
      torch::kDouble));
  TensorDict td({3});
  td.set("action", torch::tensor({{1, 0}, {1, 0}, {1, 0}}));
  env.step(td);
  EXPECT_TRUE(torch::equal(
      td.get({"next", "terminated"}).squeeze(-1),
      torch::tensor({true, true, false})));
  EXPECT_TRUE(torch::equal(td.get({"next", "reward"}), torch::ones({3, 1})));
}

TEST(RlEnvTest, StepMdpMovesNextToTheRoot) {
  rl::CartPoleEnv env(2);
  TensorDict td = env.reset();
  td.set({"collector", "traj_ids"}, torch::arange(2));
  td.set("action", env.rand_action());
  env.step(td);
  TensorDict root = rl::step_mdp(td);
  EXPECT_EQ(
      root.keys(true, true, /*sort=*/true),
      std::vector<NestedKey>(
          {{"collector", "traj_ids"},
           "done",
           "observation",
           "terminated",
           "truncated"}));
  EXPECT_TRUE(root.get("observation").is_same(td.get({"next", "observation"})));
  // Nested dicts are new (the collector's resets write into them), their
  // leaves aliased; a non-tensor entry is kept, as Python's step_mdp keeps
  // it; an excluded key nested in "next" is left out.
  EXPECT_FALSE(
      root.get_tensordict("collector").is_same(td.get_tensordict("collector")));
  EXPECT_TRUE(root.get({"collector", "traj_ids"})
                  .is_same(td.get({"collector", "traj_ids"})));
  td.set("task", tensordict::NonTensorData("balance", {2}));
  td.set({"next", "stats", "reward"}, torch::ones({2, 1}));
  td.set({"next", "stats", "length"}, torch::ones({2, 1}));
  TensorDict kept = rl::step_mdp(
      td, rl::StepMdpOptions().reward_keys({"reward", {"stats", "reward"}}));
  EXPECT_TRUE(kept.contains("task"));
  EXPECT_TRUE(kept.contains({"stats", "length"}));
  EXPECT_FALSE(kept.contains({"stats", "reward"}));
  EXPECT_FALSE(kept.contains("reward"));
  td = td.exclude({"task", {"next", "stats"}});
  TensorDict all = rl::step_mdp(
      td,
      rl::StepMdpOptions()
          .exclude_reward(false)
          .exclude_action(false)
          .keep_other(false));
  EXPECT_EQ(
      all.keys(true, true, /*sort=*/true),
      std::vector<NestedKey>(
          {"action",
           "done",
           "observation",
           "reward",
           "terminated",
           "truncated"}));
  TensorDict no_done =
      rl::step_mdp(td, rl::StepMdpOptions().exclude_done(true));
  EXPECT_FALSE(no_done.contains("done"));
  EXPECT_FALSE(no_done.contains("truncated"));
  EXPECT_THROWS_WITH(
      rl::step_mdp(TensorDict({2})), KeyError, "key 'next' is missing");
}

// NOTE [step_mdp by node] in env.cpp: dim names send step_mdp through
// TensorDict::set, none through the node copy; both give the same root.
TEST(RlEnvTest, StepMdpGivesTheSameRootWithOrWithoutDimNames) {
  const auto stepped = [](bool named) {
    TensorDict td({2});
    td.set("observation", torch::zeros({2, 3}));
    td.set("action", torch::ones({2, 1}));
    td.set("logits", torch::full({2, 2}, 0.5));
    td.set({"stats", "episode"}, torch::arange(2));
    td.set({"stats", "reward"}, torch::full({2, 1}, 7.0));
    td.set("task", tensordict::NonTensorData("balance", {2}));
    td.set(
        "stack",
        tensordict::LazyStackedTensorDict(
            {TensorDict({{"x", torch::zeros({3})}}),
             TensorDict({{"x", torch::ones({3})}})}));
    td.set({"next", "observation"}, torch::ones({2, 3}));
    td.set({"next", "reward"}, torch::ones({2, 1}));
    td.set({"next", "done"}, torch::zeros({2, 1}, torch::kBool));
    td.set({"next", "stats", "length"}, torch::full({2, 1}, 3.0));
    td.set({"next", "stats", "reward"}, torch::full({2, 1}, 9.0));
    td.set({"next", "empty"}, TensorDict({2}));
    if (named) {
      td.refine_names({"env"});
    }
    return std::make_pair(
        td,
        rl::step_mdp(
            td,
            rl::StepMdpOptions().reward_keys({"reward", {"stats", "reward"}})));
  };
  const auto [plain_td, plain] = stepped(false);
  const auto [named_td, named] = stepped(true);
  const std::vector<NestedKey> keys = plain.keys(true, false, /*sort=*/true);
  EXPECT_EQ(keys, named.keys(true, false, /*sort=*/true));
  EXPECT_EQ(
      keys,
      std::vector<NestedKey>(
          {"done",
           "logits",
           "observation",
           "stack",
           {"stack", "x"},
           "stats",
           {"stats", "episode"},
           {"stats", "length"},
           "task"}));
  for (const auto& [td, root] :
       {std::make_pair(plain_td, plain), std::make_pair(named_td, named)}) {
    EXPECT_TRUE(
        root.get("observation").is_same(td.get({"next", "observation"})));
    EXPECT_TRUE(root.get("logits").is_same(td.get("logits")));
    EXPECT_TRUE(
        root.get({"stats", "episode"}).is_same(td.get({"stats", "episode"})));
    EXPECT_TRUE(root.get({"stats", "length"})
                    .is_same(td.get({"next", "stats", "length"})));
    // A new nested dict, merged from the root's and next's.
    EXPECT_FALSE(
        root.get_tensordict("stats").is_same(td.get_tensordict("stats")));
    EXPECT_EQ(root.get_non_tensor("task"), "balance");
    EXPECT_TRUE(
        root.get_lazy_stack("stack").at(1).get("x").equal(torch::ones({3})));
  }
}

TEST(RlEnvTest, AnActionOrLeafThatIsNoTensorIsATypeErrorNamingTheKey) {
  rl::CartPoleEnv env(2);
  TensorDict td = env.reset();
  td.set("action", tensordict::NonTensorData("left", {2}));
  EXPECT_THROWS_WITH(
      env.step(td),
      c10::TypeError,
      "CartPole-v1: key 'action' holds non-tensor data, expected a tensor");
  td.set("action", env.rand_action());
  TensorDict next = env.make_next();
  next.set("reward", TensorDict({2}));
  EXPECT_THROWS_WITH(
      env.step_range(0, 2, td, next),
      c10::TypeError,
      "step_range: key 'reward' holds a dict, expected a tensor");
}

TEST(RlEnvTest, RolloutStacksStepsAlongDimOne) {
  rl::CartPoleEnv env(3);
  env.set_seed(0);
  TensorDictModule policy = make_policy();
  TensorDict out =
      env.rollout(600, policy, rl::RolloutOptions().break_when_any_done(false));
  EXPECT_EQ(out.batch_size(), c10::IntArrayRef({3, 600}));
  EXPECT_EQ(out.get("action").sizes(), c10::IntArrayRef({3, 600, 2}));
  EXPECT_EQ(out.get({"next", "reward"}).sizes(), c10::IntArrayRef({3, 600, 1}));
  const at::Tensor done = out.get({"next", "done"}).squeeze(-1);
  EXPECT_TRUE(done.any().item<bool>());  // episodes ended and were reset
  // After a done step the root is a reset one.
  const at::Tensor root_done = out.get("done").squeeze(-1);
  EXPECT_FALSE(root_done.any().item<bool>());
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t t = 0; t + 1 < 600; ++t) {
      if (!done[i][t].item<bool>()) {
        ASSERT_TRUE(torch::equal(
            out.get("observation")[i][t + 1],
            out.get({"next", "observation"})[i][t]));
      }
    }
  }
  // With break_when_any_done the rollout ends at the first done step.
  env.set_seed(0);
  TensorDict short_out = env.rollout(600, policy);
  const int64_t steps = short_out.size(1);
  EXPECT_LT(steps, 600);
  const at::Tensor short_done = short_out.get({"next", "done"}).squeeze(-1);
  EXPECT_TRUE(short_done.select(1, steps - 1).any().item<bool>());
  EXPECT_FALSE(short_done.narrow(1, 0, steps - 1).any().item<bool>());
  // No policy: random actions in the spec.
  TensorDict random = env.rollout(5);
  EXPECT_EQ(random.get("action").scalar_type(), torch::kLong);
  EXPECT_TRUE(random.get("action").sum(-1).eq(1).all().item<bool>());
  // Random actions with options, and the same rollout spelled with an
  // empty policy (the overload env.h declares without nn.h, and the one
  // with a policy).
  const auto no_break = rl::RolloutOptions().break_when_any_done(false);
  env.set_seed(1);
  torch::manual_seed(7);
  TensorDict long_random = env.rollout(50, no_break);
  EXPECT_EQ(long_random.batch_size(), c10::IntArrayRef({3, 50}));
  env.set_seed(1);
  torch::manual_seed(7);
  TensorDict same = env.rollout(50, nullptr, no_break);
  EXPECT_TRUE(torch::equal(long_random.get("action"), same.get("action")));
  EXPECT_TRUE(torch::equal(
      long_random.get({"next", "observation"}),
      same.get({"next", "observation"})));
}

TEST(RlEnvTest, MakeEnvKnowsCartPoleAndPointMass) {
  auto cartpole = rl::make_env("CartPole-v1", 4);
  EXPECT_EQ(cartpole->name(), "CartPole-v1");
  EXPECT_EQ(cartpole->num_envs(), 4);
  auto point_mass = rl::make_env("PointMass", 2);
  EXPECT_EQ(point_mass->name(), "PointMass");
  TensorDict td = point_mass->reset();
  td.set("action", torch::full({2, 2}, 5.0F));  // clamped to 1
  point_mass->step(td);
  EXPECT_EQ(td.get({"next", "observation"}).sizes(), c10::IntArrayRef({2, 4}));
  EXPECT_TRUE(torch::allclose(
      td.get({"next", "observation"}).narrow(1, 2, 2),
      torch::full({2, 2}, 0.1F)));
  EXPECT_THROWS_WITH(
      rl::make_env("Pendulum-v1", 4),
      c10::ValueError,
      "unknown env 'Pendulum-v1'; the registered envs are 'CartPole-v1', ");
  EXPECT_THROWS_WITH(
      rl::make_env("CartPole-v1", 0),
      c10::ValueError,
      "make_env: env 'CartPole-v1' needs num_envs >= 1, got 0");
}

// --- collector ---------------------------------------------------------------

// --- MLP
// -----------------------------------------------------------------------

TEST(RlMlpTest, ParametersAreNamedAsTorchRLsMLP) {
  rl::MLP mlp(rl::MLPOptions(4, 2).num_cells({64, 64}));
  std::vector<std::string> names;
  for (const auto& item : mlp->named_parameters()) {
    names.push_back(item.key());
  }
  // torchrl.modules.MLP(in_features=4, out_features=2, num_cells=[64, 64])
  // .state_dict().keys() in TorchRL 0.14.1.
  EXPECT_EQ(
      names,
      (std::vector<std::string>{
          "0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"}));
  EXPECT_EQ(
      mlp->named_parameters()["2.weight"].sizes(), (c10::IntArrayRef{64, 64}));
  rl::MLP bare(rl::MLPOptions(3, 5).bias_last_layer(false));
  EXPECT_EQ(bare->named_parameters().size(), 1U);
  EXPECT_THROWS_WITH(
      rl::MLP(rl::MLPOptions(4, 2).activation("GELU")),
      c10::ValueError,
      "MLP: unknown activation 'GELU'; the known ones are 'Tanh', 'ReLU' and "
      "'ELU'");
  EXPECT_THROWS_WITH(
      rl::MLP(rl::MLPOptions(0, 2)),
      c10::ValueError,
      "MLP: in_features and out_features must be >= 1, got 0 and 2");
  EXPECT_THROWS_WITH(
      rl::MLP(rl::MLPOptions(4, 2).num_cells({64, 0})),
      c10::ValueError,
      "MLP: num_cells must be >= 1, got 0");
  EXPECT_THROWS_WITH(
      mlp(torch::zeros({2, 3})),
      c10::ValueError,
      "MLP: expected an input whose last dim is 4, got [2, 3]");
}

// NOTE [Small-batch MLP]: the loops agree with torch's ops to rounding, and
// torch's ops (gradients recorded, or many rows) are Python's.
TEST(RlMlpTest, LoopsForFewRowsAgreeWithTorchsOps) {
  for (const char* activation : {"Tanh", "ReLU", "ELU"}) {
    for (bool activate_last : {false, true}) {
      SCOPED_TRACE(std::string(activation) + (activate_last ? " last" : ""));
      torch::manual_seed(1);
      rl::MLP mlp(rl::MLPOptions(5, 3)
                      .num_cells({17, 9})
                      .activation(activation)
                      .activate_last_layer(activate_last)
                      .bias_last_layer(!activate_last));
      // Python's MLP: its children's forwards in turn.
      const auto reference = [&](at::Tensor h) {
        for (const auto& child : mlp->children()) {
          if (auto* linear = child->as<torch::nn::Linear>()) {
            h = linear->forward(h);
          } else if (auto* tanh = child->as<torch::nn::Tanh>()) {
            h = tanh->forward(h);
          } else if (auto* relu = child->as<torch::nn::ReLU>()) {
            h = relu->forward(h);
          } else {
            h = child->as<torch::nn::ELU>()->forward(h);
          }
        }
        return h;
      };
      for (std::vector<int64_t> shape :
           {std::vector<int64_t>{5}, {1, 5}, {4, 5}, {2, 2, 5}, {64, 5}}) {
        const at::Tensor x = torch::randn(shape) * 2;
        const at::Tensor expected = reference(x).detach();
        at::Tensor got;
        {
          torch::NoGradGuard no_grad;
          got = mlp(x);
        }
        ASSERT_EQ(got.sizes(), expected.sizes());
        EXPECT_TRUE(torch::allclose(got, expected, 1e-5, 1e-6))
            << got << "\nvs\n"
            << expected;
        // Many rows, or gradients recorded: torch's ops, to the bit.
        if (x.numel() / 5 > rl::MLPImpl::kLoopRows) {
          torch::NoGradGuard no_grad;
          EXPECT_TRUE(torch::equal(mlp(x), expected));
        }
        at::Tensor recorded = mlp(x);
        EXPECT_TRUE(recorded.requires_grad());
        EXPECT_TRUE(torch::equal(recorded.detach(), expected));
      }
    }
  }
}

// NOTE [Hidden layers in reused buffers]: the buffers are the thread's,
// shared by every MLP on it; an output never aliases them, so the next
// call, of this MLP or another of other widths, leaves it as it was.
TEST(RlMlpTest, ReusedHiddenBuffersNeverReachTheOutput) {
  torch::manual_seed(2);
  rl::MLP wide(rl::MLPOptions(4, 3).num_cells({64, 32}));
  rl::MLP narrow(rl::MLPOptions(4, 2).num_cells({5, 7, 3}).activation("ELU"));
  const auto reference = [](rl::MLP& mlp, const at::Tensor& x) {
    return mlp(x).detach();  // gradients recorded: the functional ops
  };
  // Buffers of other shapes are resized without torch's warning on out=
  // tensors resized.
  struct CountWarnings : c10::WarningHandler {
    void process(const c10::Warning& /*warning*/) override {
      ++count;
    }
    int count = 0;
  } warnings;
  c10::WarningUtils::WarningHandlerGuard guard(&warnings);
  const at::Tensor x = torch::randn({16, 4});
  const at::Tensor y = torch::randn({9, 4});
  const at::Tensor wide_x = reference(wide, x);
  const at::Tensor narrow_y = reference(narrow, y);
  torch::NoGradGuard no_grad;
  const at::Tensor first = wide(x);
  const at::Tensor kept = first.clone();
  const at::Tensor second = narrow(y);
  const at::Tensor third = wide(y.narrow(0, 0, 8));
  EXPECT_TRUE(torch::equal(first, kept));
  EXPECT_TRUE(torch::equal(first, wide_x));
  EXPECT_TRUE(torch::equal(second, narrow_y));
  EXPECT_FALSE(first.is_alias_of(second));
  EXPECT_FALSE(first.is_alias_of(third));
  EXPECT_EQ(third.sizes(), c10::IntArrayRef({8, 3}));
  EXPECT_TRUE(torch::equal(wide(x), wide_x));
  // A strided input (a column of a batch), and one under inference mode.
  const at::Tensor column = torch::randn({16, 3, 4}).select(1, 1);
  at::Tensor column_reference;
  {
    torch::AutoGradMode recorded(true);
    column_reference = reference(wide, column);
  }
  EXPECT_TRUE(torch::equal(wide(column), column_reference));
  c10::InferenceMode inference;
  EXPECT_TRUE(torch::equal(wide(x), wide_x));
  EXPECT_EQ(warnings.count, 0);
}

TEST(RlMlpTest, LoopsSeeWeightsChangedInPlace) {
  torch::NoGradGuard no_grad;
  rl::MLP mlp(rl::MLPOptions(2, 1).num_cells({3}).activation("ReLU"));
  for (auto& p : mlp->parameters()) {
    p.fill_(1.0);
  }
  // relu(1 + 2 + 1) * 3 + 1 per hidden unit.
  EXPECT_FLOAT_EQ(mlp(torch::tensor({1.0F, 2.0F})).item<float>(), 13.0F);
  TensorDict weights = TensorDict::from_module(*mlp.ptr());
  weights.get({"2", "bias"}).fill_(-1.0);
  EXPECT_FLOAT_EQ(mlp(torch::tensor({1.0F, 2.0F})).item<float>(), 11.0F);
}

TEST(RlCollectorTest, BatchHasTorchRLsLayout) {
  auto env = rl::make_env("CartPole-v1", 4);
  // 30 frames over 4 envs: rounded up to 8 steps, as TorchRL does.
  rl::Collector collector(
      env, make_policy(), rl::CollectorOptions(30).total_frames(64).seed(0));
  EXPECT_EQ(collector.frames_per_batch(), 32);
  std::optional<TensorDict> batch = collector.next();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->batch_size(), c10::IntArrayRef({4, 8}));
  EXPECT_EQ(
      batch->keys(true, true, /*sort=*/true),
      std::vector<NestedKey>(
          {"action",
           {"collector", "traj_ids"},
           "done",
           {"next", "done"},
           {"next", "observation"},
           {"next", "reward"},
           {"next", "terminated"},
           {"next", "truncated"},
           "observation",
           "terminated",
           "truncated"}));
  EXPECT_EQ(batch->get("action").sizes(), c10::IntArrayRef({4, 8, 2}));
  EXPECT_EQ(batch->get("action").scalar_type(), torch::kLong);
  EXPECT_EQ(
      batch->get({"collector", "traj_ids"}).sizes(), c10::IntArrayRef({4, 8}));
  EXPECT_EQ(batch->get({"collector", "traj_ids"}).scalar_type(), torch::kLong);
  EXPECT_EQ(
      batch->get_tensordict("next").batch_size(), c10::IntArrayRef({4, 8}));
  EXPECT_EQ(
      batch->get_tensordict("collector").batch_size(),
      c10::IntArrayRef({4, 8}));
  EXPECT_EQ(batch->get("observation").scalar_type(), torch::kFloat);
  EXPECT_EQ(
      batch->get({"next", "reward"}).sizes(), c10::IntArrayRef({4, 8, 1}));
  EXPECT_EQ(batch->get({"next", "done"}).scalar_type(), torch::kBool);
  EXPECT_TRUE(torch::equal(
      batch->get({"collector", "traj_ids"}).select(1, 0), torch::arange(4)));
  EXPECT_EQ(collector.frames(), 32);
  EXPECT_TRUE(collector.next().has_value());
  EXPECT_FALSE(collector.next().has_value());  // total_frames reached
  EXPECT_EQ(collector.frames(), 64);
}

// Checks traj_ids as TorchRL numbers them: 0..N-1 first; after a done
// step a sub-env gets the next unused id, in sub-env order per step, and
// the ids go on across batches.
void check_traj_ids(const std::vector<TensorDict>& batches, int64_t n) {
  std::vector<int64_t> current(n);
  for (int64_t i = 0; i < n; ++i) {
    current[i] = i;
  }
  int64_t next_id = n;
  int64_t resets = 0;
  for (const TensorDict& batch : batches) {
    const at::Tensor ids = batch.get({"collector", "traj_ids"});
    const at::Tensor done = batch.get({"next", "done"}).squeeze(-1);
    const at::Tensor obs = batch.get("observation");
    const at::Tensor next_obs = batch.get({"next", "observation"});
    for (int64_t t = 0; t < batch.size(1); ++t) {
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(ids[i][t].item<int64_t>(), current[i]) << i << " " << t;
        ASSERT_FALSE(batch.get("done")[i][t].item<bool>());
      }
      for (int64_t i = 0; i < n; ++i) {
        if (done[i][t].item<bool>()) {
          current[i] = next_id++;
          ++resets;
          if (t + 1 < batch.size(1)) {
            ASSERT_TRUE(obs[i][t + 1].abs().le(0.05).all().item<bool>());
          }
        } else if (t + 1 < batch.size(1)) {
          ASSERT_TRUE(torch::equal(obs[i][t + 1], next_obs[i][t]));
        }
      }
    }
  }
  EXPECT_GT(resets, 3);
}

TEST(RlCollectorTest, SqueezeSingleEnvGivesOneSubEnvsBatchAsT) {
  rl::Collector one(
      rl::make_env("CartPole-v1", 1), make_policy(), rl::CollectorOptions(5));
  const TensorDict batch = *one.next();
  const TensorDict squeezed = rl::squeeze_single_env(batch);
  EXPECT_EQ(squeezed.batch_size(), c10::IntArrayRef({5}));
  EXPECT_EQ(squeezed.get({"next", "reward"}).sizes(), c10::IntArrayRef({5, 1}));
  EXPECT_TRUE(torch::equal(squeezed.get("action"), batch.get("action")[0]));
  rl::Collector two(
      rl::make_env("CartPole-v1", 2), make_policy(), rl::CollectorOptions(4));
  const TensorDict pair = *two.next();
  EXPECT_TRUE(rl::squeeze_single_env(pair).is_same(pair));
}

TEST(RlCollectorTest, TrajIdsFollowResetsAcrossBatches) {
  auto env = rl::make_env("CartPole-v1", 5);
  rl::Collector collector(
      env,
      make_policy(),
      rl::CollectorOptions(100).seed(3).return_same_td(false));
  std::vector<TensorDict> batches;
  for (int i = 0; i < 6; ++i) {
    batches.push_back(*collector.next());
  }
  check_traj_ids(batches, 5);
}

TEST(RlCollectorTest, OneOrManyThreadsGiveTheSameData) {
  std::vector<TensorDict> results[2];
  for (int k = 0; k < 2; ++k) {
    auto env = rl::make_env("CartPole-v1", 7);
    rl::Collector collector(
        env,
        make_policy(1),
        rl::CollectorOptions(70)
            .num_threads(k == 0 ? 1 : 3)
            .seed(11)
            .return_same_td(false));
    for (int i = 0; i < 5; ++i) {
      results[k].push_back(*collector.next());
    }
  }
  for (size_t i = 0; i < results[0].size(); ++i) {
    tensordict::testing::expect_td_equal(results[0][i], results[1][i]);
  }
  check_traj_ids(results[1], 7);
}

TEST(RlCollectorTest, RangeForIteratesUntilTotalFrames) {
  rl::Collector collector(
      rl::make_env("CartPole-v1", 2),
      make_policy(),
      rl::CollectorOptions(10).total_frames(45));
  int batches = 0;
  for (TensorDict& batch : collector) {
    EXPECT_EQ(batch.batch_size(), c10::IntArrayRef({2, 5}));
    ++batches;
  }
  EXPECT_EQ(batches, 5);  // 45 frames rounded up to 5 batches of 10
  EXPECT_EQ(collector.total_frames(), 45);
}

TEST(RlCollectorTest, WeightUpdatesShowInTheNextBatchWithTheirVersion) {
  TensorDictModule policy = make_policy();
  rl::Collector collector(
      rl::make_env("CartPole-v1", 3),
      policy,
      rl::CollectorOptions(30).track_policy_version(true));
  TensorDict first = collector.next()->clone();
  EXPECT_TRUE(torch::equal(
      first.get("policy_version"), torch::zeros({3, 10}, torch::kLong)));
  EXPECT_TRUE(torch::equal(
      first.get({"next", "policy_version"}),
      torch::zeros({3, 10}, torch::kLong)));
  collector.update_policy_weights_(constant_weights(policy, 1));
  EXPECT_EQ(collector.policy_version(), 0);  // staged, not applied yet
  TensorDict second = *collector.next();
  EXPECT_EQ(collector.policy_version(), 1);
  EXPECT_TRUE(torch::equal(
      second.get("action"), torch::tensor({0, 1}).expand({3, 10, 2})));
  // As TorchRL: the first root of the batch was made by the last step under
  // the old weights; every step from then on runs with the new ones.
  at::Tensor version = torch::ones({3, 10}, torch::kLong);
  version.select(1, 0).zero_();
  EXPECT_TRUE(torch::equal(second.get("policy_version"), version));
  EXPECT_TRUE(torch::equal(
      second.get({"next", "policy_version"}),
      torch::ones({3, 10}, torch::kLong)));
  collector.update_policy_weights_(constant_weights(policy, 0));
  TensorDict third = *collector.next();
  EXPECT_TRUE(torch::equal(
      third.get("action"), torch::tensor({1, 0}).expand({3, 10, 2})));
  EXPECT_EQ(third.get("policy_version")[0][0].item<int64_t>(), 1);
  EXPECT_EQ(third.get("policy_version")[0][1].item<int64_t>(), 2);
}

TEST(RlCollectorTest, WeightsThatDoNotFitAreRefusedAndTheOldOnesKept) {
  TensorDictModule policy = make_policy();
  rl::Collector collector(
      rl::make_env("CartPole-v1", 2), policy, rl::CollectorOptions(4));
  collector.update_policy_weights_(constant_weights(policy, 1));
  TensorDict missing =
      constant_weights(policy, 0).exclude({{"module", "linear", "bias"}});
  EXPECT_THROWS_WITH(
      collector.update_policy_weights_(missing),
      KeyError,
      "key ('module', 'linear', 'bias') of the policy is missing");
  TensorDict extra = constant_weights(policy, 0);
  extra.set({"module", "other"}, torch::zeros({1}));
  EXPECT_THROWS_WITH(
      collector.update_policy_weights_(extra),
      KeyError,
      "key ('module', 'other') is not a weight of the policy; its weights "
      "are module.linear.bias, module.linear.weight");
  TensorDict wrong = constant_weights(policy, 0);
  wrong.set({"module", "linear", "weight"}, torch::zeros({3, 4}));
  EXPECT_THROWS_WITH(
      collector.update_policy_weights_(wrong),
      c10::ValueError,
      "key ('module', 'linear', 'weight') expected [2, 4] torch.float32, "
      "got [3, 4] torch.float32");
  // The weights staged before the refusals are the ones applied.
  TensorDict batch = *collector.next();
  EXPECT_TRUE(torch::equal(
      batch.get("action"), torch::tensor({0, 1}).expand({2, 2, 2})));
  EXPECT_EQ(collector.policy_version(), 1);
}

// The collector asks the policy for its weights (NOTE [Weights contract]):
// a sequence's are its modules' under their prefixes.
TEST(RlCollectorTest, ASequencePolicyTakesWeightsUnderItsModulesPrefixes) {
  TensorDictModule inner = make_policy();
  tensordict::nn::TensorDictSequential policy({inner});
  rl::Collector collector(
      rl::make_env("CartPole-v1", 2), policy, rl::CollectorOptions(4));
  TensorDict weights;
  weights.set({"module", "0"}, constant_weights(inner, 1));
  collector.update_policy_weights_(weights);
  TensorDict batch = *collector.next();
  EXPECT_TRUE(torch::equal(
      batch.get("action"), torch::tensor({0, 1}).expand({2, 2, 2})));
  EXPECT_THROWS_WITH(
      collector.update_policy_weights_(constant_weights(inner, 0)),
      KeyError,
      "update_policy_weights_: key ('module', 'linear', 'weight') is not a "
      "weight of the policy; its weights are module.0.module.linear.bias, "
      "module.0.module.linear.weight");
}

// update_policy_weights_ and policy_version may run on any thread while
// next() collects on its pool (the sanitizer runs check the staging's
// locking): another thread stages a fixed number of updates, alternating
// two weight sets, while batches are collected.
TEST(RlCollectorTest, WeightsStagedFromAnotherThreadApplyWholeBetweenBatches) {
  TensorDictModule policy = make_policy();
  const TensorDict weights[2] = {
      constant_weights(policy, 0), constant_weights(policy, 1)};
  rl::Collector collector(
      rl::make_env("CartPole-v1", 6),
      policy,
      rl::CollectorOptions(24).num_threads(3).track_policy_version(true));
  constexpr int kUpdates = 200;
  std::atomic<int> staged{0};
  std::atomic<int64_t> max_version_seen{0};
  std::thread updater([&] {
    for (int i = 0; i < kUpdates; ++i) {
      collector.update_policy_weights_(weights[i % 2]);
      staged.fetch_add(1);
      max_version_seen.store(
          std::max(max_version_seen.load(), collector.policy_version()));
    }
  });
  int64_t last_version = 0;
  int batches = 0;
  const auto check_batch = [&](const TensorDict& batch) {
    // Weights are applied only between batches: every step of a batch ran
    // with one version, and with one whole weight set (a constant action).
    const at::Tensor version = batch.get({"next", "policy_version"});
    const int64_t v = version[0][0].item<int64_t>();
    EXPECT_TRUE(torch::equal(version, torch::full({6, 4}, v, torch::kLong)))
        << version;
    EXPECT_GE(v, last_version);
    EXPECT_LE(v, staged.load());
    EXPECT_EQ(collector.policy_version(), v);
    last_version = v;
    if (v > 0) {
      const at::Tensor action = batch.get("action");
      EXPECT_TRUE(torch::equal(action, action[0][0].expand({6, 4, 2})))
          << action;
    }
  };
  // Bounded by the updater's fixed count, not by time.
  while (staged.load() < kUpdates || batches < 5) {
    check_batch(*collector.next());
    ++batches;
  }
  updater.join();
  // The last update staged (weights[1]) is the one the next batch runs.
  const TensorDict last = *collector.next();
  check_batch(last);
  EXPECT_GE(last_version, 1);
  EXPECT_GE(last_version, max_version_seen.load());
  EXPECT_TRUE(torch::equal(
      last.get("action"), torch::tensor({0, 1}).expand({6, 4, 2})));
}

// A policy that calls `hook` with its call count before acting: a way to
// stage weights while a batch is being collected.
struct HookedPolicyImpl : tensordict::nn::TensorDictModuleBase {
  HookedPolicyImpl()
      : TensorDictModuleBase("HookedPolicy"),
        linear(register_module("linear", torch::nn::Linear(4, 2))) {
    set_keys({"observation"}, {"action"});
  }
  using TensorDictModuleBase::forward;
  TensorDict forward(TensorDict td, TensorDict out) override {
    if (hook) {
      hook(++calls);
    }
    return out.set(
        "action", torch::one_hot(linear(td.get("observation")).argmax(-1), 2));
  }
  torch::nn::Linear linear;
  std::function<void(int)> hook;
  int calls = 0;
};

TEST(RlCollectorTest, WeightsWaitForTheNextBatchUnlessAskedMidBatch) {
  for (const bool mid_batch : {false, true}) {
    auto policy = std::make_shared<HookedPolicyImpl>();
    rl::Collector collector(
        rl::make_env("CartPole-v1", 2),
        policy,
        rl::CollectorOptions(10)
            .track_policy_version(true)
            .update_weights_mid_batch(mid_batch));
    TensorDict weights = TensorDict::from_module(*policy).clone();
    weights.get({"linear", "weight"}).zero_();
    weights.get({"linear", "bias"}).copy_(torch::tensor({1.0F, 0.0F}));
    policy->hook = [&](int call) {
      if (call == 2) {  // while the first batch's second step runs
        collector.update_policy_weights_(weights);
      }
    };
    TensorDict batch = *collector.next();
    const at::Tensor version = batch.get({"next", "policy_version"})[0];
    const at::Tensor left = batch.get("action").select(-1, 0).eq(1);
    if (mid_batch) {
      // Applied before step 3: steps 2.. ran with the new weights.
      EXPECT_TRUE(torch::equal(version, torch::tensor({0, 0, 1, 1, 1})));
      EXPECT_TRUE(left.narrow(1, 2, 3).all().item<bool>());
    } else {
      EXPECT_TRUE(torch::equal(version, torch::zeros({5}, torch::kLong)));
      EXPECT_EQ(collector.policy_version(), 0);
      TensorDict second = *collector.next();
      EXPECT_TRUE(second.get("action").select(-1, 0).eq(1).all().item<bool>());
      EXPECT_EQ(collector.policy_version(), 1);
    }
  }
}

TEST(RlCollectorTest, APolicyErrorPropagatesAndTheCollectorGoesOn) {
  auto policy = std::make_shared<HookedPolicyImpl>();
  policy->hook = [](int call) {
    TORCH_CHECK(call != 3, "policy failed at call 3");
  };
  rl::Collector collector(
      rl::make_env("CartPole-v1", 2), policy, rl::CollectorOptions(8));
  try {
    collector.next();
    ADD_FAILURE() << "the policy's error did not propagate";
  } catch (const c10::Error& e) {
    EXPECT_EQ(e.msg(), "policy failed at call 3");
    // The context names the env and what the policy was given.
    const std::string what = e.what();
    EXPECT_NE(
        what.find("while the collector called the policy on the root of env "
                  "'CartPole-v1' (keys: "),
        std::string::npos)
        << what;
  }
  EXPECT_EQ(collector.frames(), 0);
  TensorDict batch = *collector.next();
  EXPECT_EQ(collector.frames(), 8);
  // The failed step is retried: its root is the one the batch starts at.
  EXPECT_EQ(batch.batch_size(), c10::IntArrayRef({2, 4}));
  EXPECT_TRUE(torch::equal(
      batch.get({"collector", "traj_ids"}).select(1, 0), torch::arange(2)));
}

TEST(RlCollectorTest, SetSeedAndResetAtEachIterStartFromAFreshReset) {
  rl::Collector collector(
      rl::make_env("CartPole-v1", 3),
      make_policy(),
      rl::CollectorOptions(6).seed(9).return_same_td(false));
  const TensorDict first = *collector.next();
  collector.next();
  collector.set_seed(9);
  const TensorDict again = *collector.next();
  // The same resets (seed 9, first episodes) and policy: the same steps;
  // the trajectories are new ones.
  EXPECT_TRUE(torch::equal(first.get("observation"), again.get("observation")));
  EXPECT_TRUE(torch::equal(
      first.get({"next", "observation"}), again.get({"next", "observation"})));
  EXPECT_GE(again.get({"collector", "traj_ids"}).min().item<int64_t>(), 3);

  rl::Collector each(
      rl::make_env("CartPole-v1", 3),
      make_policy(),
      rl::CollectorOptions(6).seed(9).reset_at_each_iter(true));
  for (int i = 0; i < 3; ++i) {
    const TensorDict batch = *each.next();
    EXPECT_TRUE(batch.get("observation")
                    .select(1, 0)
                    .abs()
                    .le(0.05)
                    .all()
                    .item<bool>());
    EXPECT_TRUE(torch::equal(
        batch.get({"collector", "traj_ids"}).select(1, 0),
        torch::arange(3 * i, 3 * i + 3)));
  }
}

// Memory in use, in 4 KiB pages. Resident pages normally; under ASan or
// TSan the live heap instead, as their allocator counts it: ASan's
// quarantine keeps every freed block resident (hundreds of MiB over this
// test's per-step temporaries), so resident pages would grow without any
// allocation of ours outliving its step.
int64_t resident_pages() {
#ifdef RL_TEST_SANITIZER_ALLOCATOR
  return static_cast<int64_t>(__sanitizer_get_current_allocated_bytes() / 4096);
#else
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0;
  int64_t resident = 0;
  statm >> size >> resident;
  return resident;
#endif
}

TEST(RlCollectorTest, ReusedBuffersKeepMemoryFlatOver1000Batches) {
  rl::Collector collector(
      rl::make_env("CartPole-v1", 8),
      make_policy(),
      rl::CollectorOptions(64).num_threads(2));
  const TensorDict first = *collector.next();
  for (int i = 0; i < 50; ++i) {
    collector.next();
  }
  const int64_t before = resident_pages();
  for (int i = 0; i < 1000; ++i) {
    TensorDict batch = *collector.next();
    ASSERT_TRUE(batch.is_same(first));
  }
  const int64_t after = resident_pages();
  // 1,000 fresh batches of this size would add ~1,000 * 9 KiB of leaves;
  // allow a few pages of allocator noise.
  EXPECT_LT(after - before, 256) << before << " -> " << after;
}

TEST(RlCollectorTest, FreshBatchesAreNotOverwritten) {
  rl::Collector collector(
      rl::make_env("CartPole-v1", 2),
      make_policy(),
      rl::CollectorOptions(8).return_same_td(false));
  TensorDict a = *collector.next();
  const TensorDict a_copy = a.clone();
  TensorDict b = *collector.next();
  EXPECT_FALSE(a.is_same(b));
  tensordict::testing::expect_td_equal(a, a_copy);
}

// TorchRL's CartPole PPO actor: logits, then a one-hot action sampled from
// them and its log-prob. From the second step on, the root step_mdp made
// still holds the previous "action_log_prob" (only the action is dropped),
// so the policy writes the action after it: the batch must not care.
TEST(RlCollectorTest, AProbabilisticActorWithItsLogProbFillsEveryBatch) {
  namespace tdnn = tensordict::nn;
  torch::manual_seed(0);
  torch::nn::Linear linear(4, 2);
  tdnn::ProbabilisticTensorDictSequential actor(
      {TensorDictModule(linear, {"observation"}, {"logits"}),
       tdnn::ProbabilisticTensorDictModule(
           std::vector<std::string>{"logits"},
           "action",
           tdnn::ProbabilisticTensorDictModuleOptions("OneHotCategorical")
               .return_log_prob(true)
               .default_interaction_type(tdnn::InteractionType::kRandom))});
  for (bool same_td : {true, false}) {
    rl::Collector collector(
        rl::make_env("CartPole-v1", 3),
        actor,
        rl::CollectorOptions(30).return_same_td(same_td).seed(1));
    for (int round = 0; round < 3; ++round) {
      TensorDict batch = *collector.next();
      ASSERT_EQ(batch.batch_size(), std::vector<int64_t>({3, 10}));
      const at::Tensor logits = batch.get("logits");
      const at::Tensor action = batch.get("action");
      EXPECT_EQ(action.scalar_type(), torch::kLong);
      EXPECT_TRUE(
          torch::equal(action.sum(-1), torch::ones({3, 10}, torch::kLong)));
      const at::Tensor expected =
          (logits.log_softmax(-1) * action.to(torch::kFloat)).sum(-1);
      EXPECT_TRUE(torch::allclose(batch.get("action_log_prob"), expected))
          << "same_td " << same_td << " round " << round;
    }
  }
  // TorchRL's collectors sample (ExplorationType.RANDOM) unless told: with
  // small logits, 30 draws that all pick the argmax would be a 1e-9 event.
  // Under kMode every action is the argmax.
  const auto argmax_share = [&](rl::CollectorOptions options) {
    rl::Collector collector(rl::make_env("CartPole-v1", 3), actor, options);
    TensorDict batch = *collector.next();
    const at::Tensor argmax = torch::one_hot(batch.get("logits").argmax(-1), 2);
    return torch::all(argmax == batch.get("action"), -1)
        .to(torch::kDouble)
        .mean()
        .item<double>();
  };
  EXPECT_LT(argmax_share(rl::CollectorOptions(30).seed(2)), 1.0);
  EXPECT_EQ(
      argmax_share(rl::CollectorOptions(30).seed(2).exploration_type(
          tdnn::InteractionType::kMode)),
      1.0);
}

TEST(RlCollectorTest, APolicyWithoutTheActionIsAnErrorNamingTheKey) {
  auto env = rl::make_env("CartPole-v1", 2);
  TensorDictModule no_action(
      torch::nn::Linear(4, 2), {"observation"}, {"logits"});
  rl::Collector collector(env, no_action, rl::CollectorOptions(4));
  EXPECT_THROWS_WITH(
      collector.next(), KeyError, "key 'action' the env needs is missing");
  // strict: a missing input is a KeyError (by default, as Python's
  // strict=False, the module would get an undefined tensor).
  TensorDictModule wrong_input(
      torch::nn::Linear(4, 2),
      {"pixels"},
      {"action"},
      tensordict::nn::TensorDictModuleOptions().strict(true));
  rl::Collector collector2(env, wrong_input, rl::CollectorOptions(4));
  EXPECT_THROWS_WITH(collector2.next(), KeyError, "pixels");
  TensorDictModule float_action(
      torch::nn::Linear(4, 2), {"observation"}, {"action"});
  rl::Collector collector3(env, float_action, rl::CollectorOptions(4));
  EXPECT_THROWS_WITH(
      collector3.next(),
      c10::ValueError,
      "key 'action' is not in its OneHot spec: row 0 is [");
  EXPECT_THROWS_WITH(
      rl::Collector(env, make_policy(), rl::CollectorOptions(0)),
      c10::ValueError,
      "frames_per_batch >= 1, got 0");
  EXPECT_THROWS_WITH(
      rl::Collector(env, nullptr, rl::CollectorOptions(4)),
      c10::ValueError,
      "needs a policy");
}

// A policy that starts writing a key of its own at its third call.
struct GrowingPolicyImpl : HookedPolicyImpl {
  using TensorDictModuleBase::forward;
  TensorDict forward(TensorDict td, TensorDict out) override {
    out = HookedPolicyImpl::forward(td, out);
    return ++calls > 2 ? out.set("extra", torch::zeros({2})) : out;
  }
};

TEST(RlCollectorTest, APolicyWhoseOutputsChangeMidBatchIsAnError) {
  rl::Collector collector(
      rl::make_env("CartPole-v1", 2),
      std::make_shared<GrowingPolicyImpl>(),
      rl::CollectorOptions(8));
  EXPECT_THROWS_WITH(
      collector.next(),
      c10::Error,
      "Collector: the policy's outputs changed between steps: expected keys "
      "'observation'");
  try {
    rl::Collector again(
        rl::make_env("CartPole-v1", 2),
        std::make_shared<GrowingPolicyImpl>(),
        rl::CollectorOptions(8));
    (void)again.next();
    ADD_FAILURE() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("got 'observation'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("'extra'"), std::string::npos);
  }
}

// Expects every step's observation, unless its sub-env was done the step
// before, to be the step before's ("next", "observation").
void expect_observations_carried(const TensorDict& batch) {
  const at::Tensor obs = batch.get("observation");
  const at::Tensor next_obs = batch.get({"next", "observation"});
  const at::Tensor done = batch.get({"next", "done"});
  for (int64_t env = 0; env < obs.size(0); ++env) {
    for (int64_t t = 0; t + 1 < obs.size(1); ++t) {
      if (!done[env][t].item<bool>()) {
        EXPECT_TRUE(torch::equal(obs[env][t + 1], next_obs[env][t]))
            << "sub-env " << env << ", step " << t;
      }
    }
  }
}

// Collects `batches` batches of `frames` frames from two CartPoles stepped
// by `policy`; each goes to `check` with its index, then must carry its
// observations from step to step.
template <class Check>
void check_batches_over_two_cartpoles(
    tensordict::nn::AnyTensorDictModule policy,
    int64_t frames,
    int batches,
    Check check) {
  rl::Collector collector(
      rl::make_env("CartPole-v1", 2),
      std::move(policy),
      rl::CollectorOptions(frames));
  for (int batch = 0; batch < batches; ++batch) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    TensorDict out = *collector.next();
    check(out, batch);
    expect_observations_carried(out);
  }
}

// Re-adds "extra" on odd calls, so the leaves' walk order changes from
// step to step (NOTE [One step path] in collector.cpp).
struct ReorderingPolicyImpl : HookedPolicyImpl {
  using TensorDictModuleBase::forward;
  TensorDict forward(TensorDict td, TensorDict out) override {
    out = HookedPolicyImpl::forward(td, out);
    ++steps;
    if (steps % 2 == 1 && out.contains("extra")) {
      out.del_("extra");
    }
    return out.set("extra", torch::full({2, 1}, static_cast<double>(steps)));
  }
  int steps = 0;
};

TEST(RlCollectorTest, LeavesWhoseOrderChangesBetweenStepsLandInTheirBuffers) {
  check_batches_over_two_cartpoles(
      std::make_shared<ReorderingPolicyImpl>(),
      /*frames=*/12,
      /*batches=*/2,
      [](const TensorDict& out, int batch) {
        const at::Tensor extra = out.get("extra");
        ASSERT_EQ(extra.sizes(), c10::IntArrayRef({2, 6, 1}));
        for (int64_t t = 0; t < 6; ++t) {
          EXPECT_EQ(extra[0][t][0].item<double>(), 6 * batch + t + 1) << t;
          EXPECT_EQ(extra[1][t][0].item<double>(), 6 * batch + t + 1) << t;
        }
      });
}

// Writes "a" then "b" for the first `switch_at` steps, "b" then "a" after
// (the root keeps both through step_mdp, so they are dropped and written
// anew), and "extra" from step `add_at` on, if given.
struct ChangingOutputsPolicyImpl : HookedPolicyImpl {
  ChangingOutputsPolicyImpl(int switch_at, int add_at)
      : switch_at(switch_at), add_at(add_at) {}
  using TensorDictModuleBase::forward;
  TensorDict forward(TensorDict td, TensorDict out) override {
    out = HookedPolicyImpl::forward(td, out);
    ++steps;
    const at::Tensor a = torch::full({2, 1}, static_cast<double>(steps));
    for (const char* key : {"a", "b"}) {
      if (out.contains(key)) {
        out.del_(key);
      }
    }
    if (steps <= switch_at) {
      out.set("a", a).set("b", -a);
    } else {
      out.set("b", -a).set("a", a);
    }
    if (add_at > 0 && steps >= add_at) {
      out.set("extra", a);
    }
    return out;
  }
  int switch_at;
  int add_at;
  int steps = 0;
};

// A collector of 8 frames a batch over two CartPoles stepped by a
// ChangingOutputsPolicyImpl(switch_at, add_at).
rl::Collector changing_outputs_collector(
    int switch_at, int add_at, bool same_td) {
  return rl::Collector(
      rl::make_env("CartPole-v1", 2),
      std::make_shared<ChangingOutputsPolicyImpl>(switch_at, add_at),
      rl::CollectorOptions(8).return_same_td(same_td));
}

TEST(RlCollectorTest, APolicyThatReordersItsOutputsBetweenBatchesFillsThem) {
  for (const bool same_td : {false, true}) {
    SCOPED_TRACE(same_td ? "return_same_td" : "a new dict a batch");
    rl::Collector collector = changing_outputs_collector(
        /*switch_at=*/4, /*add_at=*/0, same_td);
    const TensorDict first = collector.next()->clone();
    const TensorDict second = *collector.next();
    EXPECT_EQ(second.keys(true, true), first.keys(true, true));
    for (int64_t t = 0; t < 4; ++t) {
      for (int64_t env = 0; env < 2; ++env) {
        EXPECT_EQ(first.get("a")[env][t][0].item<double>(), t + 1) << t;
        EXPECT_EQ(second.get("a")[env][t][0].item<double>(), t + 5) << t;
        EXPECT_EQ(second.get("b")[env][t][0].item<double>(), -(t + 5)) << t;
      }
    }
  }
}

TEST(RlCollectorTest, APolicyThatAddsAnOutputBetweenBatchesGetsItBatched) {
  for (const bool same_td : {false, true}) {
    SCOPED_TRACE(same_td ? "return_same_td" : "a new dict a batch");
    rl::Collector collector = changing_outputs_collector(
        /*switch_at=*/100, /*add_at=*/5, same_td);
    const TensorDict first = collector.next()->clone();
    EXPECT_FALSE(first.contains("extra"));
    for (int batch = 1; batch < 3; ++batch) {
      const TensorDict out = *collector.next();
      ASSERT_TRUE(out.contains("extra"));
      EXPECT_EQ(out.batch_size(), c10::IntArrayRef({2, 4}));
      EXPECT_EQ(out.get("extra").sizes(), c10::IntArrayRef({2, 4, 1}));
      for (int64_t t = 0; t < 4; ++t) {
        for (int64_t env = 0; env < 2; ++env) {
          const double step = 4.0 * batch + static_cast<double>(t) + 1;
          EXPECT_EQ(out.get("extra")[env][t][0].item<double>(), step) << t;
          EXPECT_EQ(out.get("a")[env][t][0].item<double>(), step) << t;
        }
      }
      expect_observations_carried(out);
    }
  }
}

// Writes its input observation itself (the root's own tensor) under
// another key, and a view of it: the collector must not write the next
// root into a tensor the policy's outputs still hold.
struct AliasingPolicyImpl : HookedPolicyImpl {
  using TensorDictModuleBase::forward;
  TensorDict forward(TensorDict td, TensorDict out) override {
    out = HookedPolicyImpl::forward(td, out);
    const at::Tensor obs = td.get("observation");
    return out.set("seen", obs).set("seen_x", obs.narrow(-1, 0, 1));
  }
};

TEST(RlCollectorTest, OutputsAliasingTheRootKeepTheirStepsValues) {
  rl::Collector collector(
      rl::make_env("CartPole-v1", 3),
      std::make_shared<AliasingPolicyImpl>(),
      rl::CollectorOptions(30).seed(1));
  for (int batch = 0; batch < 2; ++batch) {
    const TensorDict out = *collector.next();
    EXPECT_TRUE(torch::equal(out.get("seen"), out.get("observation")));
    EXPECT_TRUE(torch::equal(
        out.get("seen_x"), out.get("observation").narrow(-1, 0, 1)));
    expect_observations_carried(out);
  }
}

// The batch holds what stepping the env by hand gives: step, step_mdp,
// a partial reset of the done sub-envs (the one step path against
// rl::step_mdp, TorchRL's function).
TEST(RlCollectorTest, BatchEqualsStepsMadeWithStepMdp) {
  const int64_t n = 3;
  const int64_t steps = 40;
  auto policy = std::make_shared<HookedPolicyImpl>();
  rl::Collector collector(
      rl::make_env("CartPole-v1", n),
      policy,
      rl::CollectorOptions(n * steps).seed(7));
  const TensorDict batch = *collector.next();
  const auto env = rl::make_env("CartPole-v1", n);
  env->set_seed(7);
  TensorDict td = env->reset();
  for (int64_t t = 0; t < steps; ++t) {
    td = (*policy)(td);
    td = env->step(td);
    for (const NestedKey& key : td.keys(true, true)) {
      EXPECT_TRUE(torch::equal(td.get(key), batch.get(key).select(1, t)))
          << key.to_string() << " at step " << t;
    }
    td = rl::step_mdp(td);
    const at::Tensor done = td.get("done");
    if (done.any().item<bool>()) {
      td.set("_reset", done.clone());
      td = env->reset(td);
    }
  }
}

// Non-tensor data a policy writes from the third step on is not batched
// and does not count as a changed output.
struct TaggingPolicyImpl : HookedPolicyImpl {
  using TensorDictModuleBase::forward;
  TensorDict forward(TensorDict td, TensorDict out) override {
    out = HookedPolicyImpl::forward(td, out);
    return ++steps > 2 ? out.set("task", tensordict::NonTensorData("go", {2}))
                       : out;
  }
  int steps = 0;
};

TEST(RlCollectorTest, NonTensorDataAPolicyAddsMidBatchIsNotBatched) {
  check_batches_over_two_cartpoles(
      std::make_shared<TaggingPolicyImpl>(),
      /*frames=*/12,
      /*batches=*/2,
      [](const TensorDict& out, int /*batch*/) {
        EXPECT_FALSE(out.contains("task"));
        EXPECT_EQ(out.get("action").sizes(), c10::IntArrayRef({2, 6, 2}));
      });
}

TEST(RlCollectorTest, ShutdownEndsIteration) {
  rl::Collector collector(
      rl::make_env("PointMass", 3),
      TensorDictModule(
          [](const torch::Tensor& obs) { return -obs.narrow(-1, 0, 2); },
          {"observation"},
          {"action"}),
      rl::CollectorOptions(6).num_threads(3));
  TensorDict batch = *collector.next();
  EXPECT_EQ(batch.get("action").sizes(), c10::IntArrayRef({3, 2, 2}));
  collector.shutdown();
  collector.shutdown();
  EXPECT_FALSE(collector.next().has_value());
}

}  // namespace rl_test
