// Tests of tensordict_mujoco that need no gymnasium: what the envs refuse
// (unknown and mistyped keyword arguments, a model that does not load, an
// action of the wrong shape, dtype or with NaN, a libmujoco of another
// version), and that seeding replays episodes. mujoco_vs_gymnasium.py
// checks the numbers against gymnasium.

#include <gtest/gtest.h>
#include <tensordict/json.h>
#include <tensordict/rl.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>

#include "locomotion.h"
#include "support.h"

namespace mujoco_envs_test {

namespace rl = tensordict::rl;
using tensordict::Json;
using tensordict::TensorDict;

TEST(MujocoEnvsTest, TheFourEnvsAreRegistered) {
  const auto names = rl::registered_envs();
  for (const char* name :
       {"HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

TEST(MujocoEnvsTest, SpecsFollowGymnasium) {
  // nq + nv - 1 (HalfCheetah 17, Hopper 11, Walker2d 17); Ant 13 + 14 +
  // 13 bodies x 6 contact forces = 105, or 27 without them.
  const std::pair<const char*, int64_t> dims[] = {
      {"HalfCheetah-v5", 17},
      {"Hopper-v5", 11},
      {"Walker2d-v5", 17},
      {"Ant-v5", 105}};
  for (const auto& [name, dim] : dims) {
    auto env = rl::make_env(name, 2);
    EXPECT_EQ(
        env->observation_spec().get("observation").shape(),
        std::vector<int64_t>{dim})
        << name;
    EXPECT_EQ(env->observation_spec().get("observation").dtype(), at::kDouble);
    EXPECT_EQ(env->observation_spec().get("x_velocity").dtype(), at::kDouble);
    EXPECT_EQ(env->action_spec().dtype(), at::kFloat);
  }
  auto ant = rl::make_env(
      "Ant-v5", 1, Json{{"include_cfrc_ext_in_observation", false}});
  EXPECT_EQ(
      ant->observation_spec().get("observation").shape(),
      std::vector<int64_t>{27});
}

TEST(MujocoEnvsTest, RefusesUnknownAndMistypedKeywordArguments) {
  EXPECT_THROWS_WITH(
      rl::make_env("Hopper-v5", 1, Json{{"healthy_rewrd", 2.0}}),
      c10::ValueError,
      "healthy_rewrd");
  // HalfCheetah has no health terms.
  EXPECT_THROWS_WITH(
      rl::make_env("HalfCheetah-v5", 1, Json{{"healthy_reward", 2.0}}),
      c10::ValueError,
      "healthy_reward");
  EXPECT_THROWS_WITH(
      rl::make_env("Hopper-v5", 1, Json{{"frame_skip", "4"}}),
      c10::ValueError,
      "frame_skip");
  EXPECT_THROWS_WITH(
      rl::make_env("Hopper-v5", 1, Json{{"frame_skip", 0}}),
      c10::ValueError,
      "frame_skip must be >= 1 and fit an int, got 0");
  EXPECT_THROWS_WITH(
      rl::make_env("Walker2d-v5", 1, Json{{"healthy_z_range", {0.8}}}),
      c10::ValueError,
      "'healthy_z_range' expects a pair of numbers (low, high), got [0.8]");
  EXPECT_THROWS_WITH(
      rl::make_env("Ant-v5", 1, Json{{"main_body", "head"}}),
      c10::ValueError,
      "main_body 'head' is not a body of");
  EXPECT_THROWS_WITH(
      rl::make_env("Ant-v5", 1, Json{{"main_body", 99}}),
      c10::ValueError,
      "main_body 99 is not a body index");
  EXPECT_THROWS_WITH(
      rl::make_env("Ant-v5", 1, Json{{"main_body", -1}}),
      c10::ValueError,
      "main_body -1 is not a body index");
}

TEST(MujocoEnvsTest, AModelThatDoesNotLoadNamesTheFileAndMujocosMessage) {
  const std::string missing = "/nonexistent/hopper.xml";
  EXPECT_THROWS_WITH(
      rl::make_env("Hopper-v5", 1, Json{{"xml_file", missing}}),
      c10::ValueError,
      "model file /nonexistent/hopper.xml does not exist");
  const auto path =
      std::filesystem::temp_directory_path() / "tensordict_mujoco_bad.xml";
  {
    std::ofstream out(path);
    out << "<mujoco><worldbody><body><geom type='box'/></body></worldbody>"
           "</mujoc>";
  }
  try {
    rl::make_env("Hopper-v5", 1, Json{{"xml_file", path.string()}});
    ADD_FAILURE() << "a broken model loaded";
  } catch (const c10::ValueError& e) {
    const std::string msg = e.msg();
    EXPECT_NE(
        msg.find("MuJoCo could not load the model " + path.string() + ": "),
        std::string::npos)
        << msg;
    // MuJoCo's own message follows (an XML parse error).
    EXPECT_GT(
        msg.size(), msg.find(path.string() + ": ") + path.string().size() + 3)
        << msg;
  }
  std::filesystem::remove(path);
}

// Returns env's next observation after one step from `seed` with
// `action`.
at::Tensor step_once(
    rl::EnvBase& env, uint64_t seed, const at::Tensor& action) {
  env.set_seed(seed);
  TensorDict td = env.reset();
  td.set("action", action);
  return env.step(td).get({"next", "observation"});
}

TEST(MujocoEnvsTest, RefusesBadActionsAndStaysUnchanged) {
  auto env = rl::make_env("HalfCheetah-v5", 2);
  auto fresh = rl::make_env("HalfCheetah-v5", 2);
  const at::Tensor good = torch::full({2, 6}, 0.25F);
  env->set_seed(3);
  TensorDict td = env->reset();
  td.set("action", torch::zeros({2, 5}));
  EXPECT_THROWS_WITH(env->step(td), c10::ValueError, "action");
  td.set("action", torch::zeros({2, 6}, torch::kDouble));
  EXPECT_THROWS_WITH(env->step(td), c10::ValueError, "action");
  at::Tensor nan = good.clone();
  nan[1][2] = std::numeric_limits<float>::quiet_NaN();
  td.set("action", nan);
  EXPECT_THROWS_WITH(
      env->step(td),
      c10::ValueError,
      "value of key 'action' is not in its Bounded spec");
  at::Tensor far = good.clone();
  far[0][0] = 2.0F;  // outside the ctrlrange [-1, 1]
  td.set("action", far);
  EXPECT_THROWS_WITH(
      env->step(td),
      c10::ValueError,
      "value of key 'action' is not in its Bounded spec");
  // The refusals left the state as the reset made it.
  td.set("action", good);
  const at::Tensor after = env->step(td).get({"next", "observation"});
  EXPECT_TRUE(torch::equal(after, step_once(*fresh, 3, good)));
}

TEST(MujocoEnvsTest, TheSameSeedReplaysAndSubEnvsDiffer) {
  auto env = rl::make_env("Ant-v5", 3);
  env->set_seed(11);
  const at::Tensor first = env->reset().get("observation");
  // A reset without a new seed continues each sub-env's stream.
  const at::Tensor second = env->reset().get("observation");
  EXPECT_FALSE(torch::equal(first, second));
  env->set_seed(11);
  EXPECT_TRUE(torch::equal(env->reset().get("observation"), first));
  // Sub-env 1 of seed 11 starts as sub-env 0 of seed 12.
  auto other = rl::make_env("Ant-v5", 1);
  other->set_seed(12);
  EXPECT_TRUE(torch::equal(other->reset().get("observation")[0], first[1]));
  EXPECT_FALSE(torch::equal(first[0], first[1]));
}

// Steps `env` with `td["action"]` as a collector with two threads does:
// two ranges of sub-envs at once, into one "next" dict.
TensorDict step_on_two_threads(rl::EnvBase& env, TensorDict td) {
  env.check_action(td);
  const TensorDict next = env.make_next();
  const int64_t half = env.num_envs() / 2;
  std::thread first([&] { env.step_range(0, half, td, next); });
  std::thread second([&] { env.step_range(half, env.num_envs(), td, next); });
  first.join();
  second.join();
  td.set("next", next);
  return td;
}

TEST(MujocoEnvsTest, RangesOnTwoThreadsStepAsOneCall) {
  for (const char* name : {"Hopper-v5", "Ant-v5"}) {
    auto serial = rl::make_env(name, 4);
    auto threaded = rl::make_env(name, 4);
    serial->set_seed(5);
    threaded->set_seed(5);
    TensorDict a = serial->reset();
    TensorDict b = threaded->reset();
    at::Generator gen = at::detail::createCPUGenerator(9);
    for (int t = 0; t < 200; ++t) {
      const at::Tensor action =
          serial->action_spec().rand({4}, gen).to(torch::kFloat);
      a.set("action", action);
      b.set("action", action.clone());
      a = serial->step(a);
      b = step_on_two_threads(*threaded, b);
      for (const char* key :
           {"observation", "x_velocity", "reward", "terminated", "done"}) {
        ASSERT_TRUE(torch::equal(a.get({"next", key}), b.get({"next", key})))
            << name << " step " << t << " key " << key;
      }
      a = rl::step_mdp(a);
      b = rl::step_mdp(b);
      const at::Tensor done = a.get("done").reshape({4});
      if (done.any().item<bool>()) {
        a.set("_reset", done.clone());
        b.set("_reset", done.clone());
        a = serial->reset(a);
        b = threaded->reset(b);
      }
    }
  }
}

// TENSORDICT_MUJOCO_ASSETS, which tensordict_cpp sets from the installed
// gymnasium, is where a model named without a path is read from.
TEST(MujocoEnvsTest, ReadsGymnasiumsModelsFromTheEnvironmentVariable) {
  const std::filesystem::path empty =
      std::filesystem::temp_directory_path() / "tensordict_mujoco_no_assets";
  std::filesystem::create_directories(empty);
  ASSERT_EQ(::setenv("TENSORDICT_MUJOCO_ASSETS", empty.c_str(), 1), 0);
  const std::string expected = (empty / "hopper.xml").string();
  EXPECT_THROWS_WITH(
      rl::make_env("Hopper-v5", 1),
      c10::ValueError,
      expected + " does not exist");
  ASSERT_EQ(::unsetenv("TENSORDICT_MUJOCO_ASSETS"), 0);
  EXPECT_NO_THROW(rl::make_env("Hopper-v5", 1));
}

TEST(MujocoEnvsTest, RefusesALibmujocoOfAnotherVersion) {
  EXPECT_EQ(
      tensordict_mujoco::mujoco_version_mismatch(4000000, 4000000, "4.0.0"),
      "");
  const std::string why =
      tensordict_mujoco::mujoco_version_mismatch(4000000, 4001002, "4.1.2");
  EXPECT_NE(why.find("headers of version 4.0.0"), std::string::npos) << why;
  EXPECT_NE(why.find("libmujoco loaded is version 4.1.2"), std::string::npos)
      << why;
  // The real one matches, or no env could have been made above.
  EXPECT_NO_THROW(tensordict_mujoco::check_mujoco_version());
}

}  // namespace mujoco_envs_test
