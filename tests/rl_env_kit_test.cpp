// Tests of include/tensordict/rl/env_kit.h and the env registry of
// rl/env.h: envs defined in this file (never compiled into the library)
// registered and made by name, keyword arguments, row views, the
// EnvPool-shaped BatchedEnv adapter, actions of any one-hot dtype, and
// errors raised inside an env's step on a collector thread.

#include <tensordict/json.h>
#include <tensordict/rl.h>
#include <tensordict/rl/env_kit.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "support.h"

namespace rl_env_kit_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)
using tensordict::nn::TensorDictModule;
namespace rl = tensordict::rl;

// --- an env written as a user would, over ranges
// ------------------------------

// A counter that moves by `step_size` times the action's index (0 or 1),
// terminated at `limit`; observation int64 [1], reward the position.
class CounterEnv : public rl::EnvBase {
 public:
  CounterEnv(int64_t num_envs, const Json& kwargs) : EnvBase(num_envs) {
    rl::EnvKwargs args("Counter-v0", kwargs);
    step_size_ = args.get<int64_t>("step_size", 1);
    limit_ = args.get<int64_t>("limit", 5);
    args.check_all_read();
    positions_.assign(static_cast<size_t>(num_envs), 0);
    set_specs(
        rl::Composite().set(
            "observation", rl::TensorSpec::unbounded({1}, torch::kLong)),
        rl::TensorSpec::one_hot(2));
  }
  std::string name() const override {
    return "Counter-v0";
  }
  std::atomic<bool> fail_next_step{false};

 protected:
  void reset_range_(
      int64_t begin,
      int64_t end,
      const bool* mask,
      const TensorDict& out) override {
    const rl::Rows<int64_t> obs(out, "observation");
    for (int64_t i = begin; i < end; ++i) {
      if (mask == nullptr || mask[i]) {
        positions_[static_cast<size_t>(i)] = 0;
      }
      obs(i) = positions_[static_cast<size_t>(i)];
    }
  }
  void step_range_(
      int64_t begin,
      int64_t end,
      const TensorDict& td,
      const TensorDict& next) override {
    if (fail_next_step && end > 2 && begin <= 2) {
      throw std::runtime_error("the simulator lost sub-env 2");
    }
    const rl::IndexRows action(td, "action", action_spec());
    const rl::Rows<int64_t> obs(next, "observation");
    const rl::Rows<float> reward(next, "reward");
    const rl::Rows<bool> terminated(next, "terminated");
    const rl::Rows<bool> truncated(next, "truncated");
    for (int64_t i = begin; i < end; ++i) {
      int64_t& position = positions_[static_cast<size_t>(i)];
      position += step_size_ * action[i];
      obs(i) = position;
      reward(i) = static_cast<float>(position);
      terminated(i) = position >= limit_;
      truncated(i) = false;
    }
  }
  void set_seed_(uint64_t /*seed*/) override {}

 private:
  int64_t step_size_ = 1;
  int64_t limit_ = 5;
  std::vector<int64_t> positions_;
};

TENSORDICT_REGISTER_ENV("Counter-v0", CounterEnv);

// An env that takes no keyword arguments: registered from (num_envs) alone.
class PlainEnv : public CounterEnv {
 public:
  explicit PlainEnv(int64_t num_envs) : CounterEnv(num_envs, Json::object()) {}
};

TENSORDICT_REGISTER_ENV("Plain-v0", PlainEnv);

// --- an env written one sub-env at a time (EnvPool's shape)
// -------------------

// A random walk on a line of `size` cells: the action moves left (0) or
// right (1), a slip (probability `slip`) moves the other way; reaching
// either end terminates with reward +1 (right) or -1 (left). The start is
// drawn from the sub-env's stream.
struct Walk {
  explicit Walk(const Json& kwargs) {
    rl::EnvKwargs args("Walk-v0", kwargs);
    size = args.get<int64_t>("size", 7);
    slip = args.get("slip", 0.25);
    args.check_all_read();
  }
  std::string name() const {
    return "Walk-v0";
  }
  rl::Composite observation_spec() const {
    return rl::Composite()
        .set("observation", rl::TensorSpec::unbounded({2}))
        .set("cell", rl::TensorSpec::unbounded({1}, torch::kLong));
  }
  rl::TensorSpec action_spec() const {
    return rl::TensorSpec::one_hot(2);
  }
  void reset(const rl::SubEnvRows& rows, rl::SubEnvRng& rng) {
    cell = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(size - 2));
    write(rows);
  }
  rl::StepResult step(const rl::SubEnvRows& rows, rl::SubEnvRng& rng) {
    const bool slipped =
        std::uniform_real_distribution<double>(0.0, 1.0)(rng) < slip;
    const int64_t move = rows.action_index() == 1 ? 1 : -1;
    cell += slipped ? -move : move;
    write(rows);
    rl::StepResult result;
    result.terminated = cell <= 0 || cell >= size - 1;
    result.reward = cell >= size - 1 ? 1.0F : cell <= 0 ? -1.0F : 0.0F;
    return result;
  }
  void write(const rl::SubEnvRows& rows) const {
    float* obs = rows.observation<float>(0);
    obs[0] = static_cast<float>(cell) / static_cast<float>(size - 1);
    obs[1] = 1.0F - obs[0];
    rows.observation<int64_t>(1)[0] = cell;
  }
  int64_t size = 7;
  double slip = 0.25;
  int64_t cell = 0;
};

TENSORDICT_REGISTER_ENV("Walk-v0", rl::BatchedEnv<Walk>);

// A policy that always picks `index`, as a one-hot of `dtype`.
struct ConstantPolicyImpl : torch::nn::Module {
  ConstantPolicyImpl(int64_t index, torch::Dtype dtype)
      : index(index), dtype(dtype) {}
  torch::Tensor forward(const torch::Tensor& observation) {
    return torch::one_hot(
               torch::full({observation.size(0)}, index, torch::kLong), 2)
        .to(dtype);
  }
  int64_t index;
  torch::Dtype dtype;
};
TORCH_MODULE(ConstantPolicy);

TensorDictModule constant_policy(int64_t index, torch::Dtype dtype) {
  return TensorDictModule(
      ConstantPolicy(index, dtype), {"observation"}, {"action"});
}

// --- the registry
// ----------------------------------------------------------------

TEST(RlEnvRegistryTest, ListsBuiltInsAndEnvsRegisteredOutsideTheLibrary) {
  const std::vector<std::string> names = rl::registered_envs();
  for (const char* name :
       {"CartPole-v1", "PointMass", "Counter-v0", "Plain-v0", "Walk-v0"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  const auto env = rl::make_env("Counter-v0", 3, Json{{"step_size", 2}});
  EXPECT_EQ(env->name(), "Counter-v0");
  TensorDict td = env->reset();
  td.set("action", torch::tensor({{0, 1}, {1, 0}, {0, 1}}));
  env->step(td);
  EXPECT_TRUE(torch::equal(
      td.get({"next", "observation"}), torch::tensor({{2}, {0}, {2}})));
}

TEST(RlEnvRegistryTest, UnknownDuplicateAndMistypedAreValueErrorsNamingThem) {
  // Every name registered now, in order: a test run in the same process
  // (a shard, a repeat) may have registered more than this file's envs.
  // (ListsBuiltInsAndEnvsRegisteredOutsideTheLibrary checks the names.)
  std::string known;
  for (const std::string& name : rl::registered_envs()) {
    known += (known.empty() ? "'" : ", '") + name + "'";
  }
  EXPECT_THROWS_WITH(
      rl::make_env("Nope-v0", 2),
      c10::ValueError,
      "make_env: unknown env 'Nope-v0'; the registered envs are " + known +
          " (a library of envs registers more");
  EXPECT_THROWS_WITH(
      rl::make_env("CartPole-v1", 2, Json{{"render_mode", "human"}}),
      c10::ValueError,
      "CartPole-v1: unknown keyword argument 'render_mode'; the env takes "
      "'categorical_action_encoding', 'max_episode_steps'");
  EXPECT_THROWS_WITH(
      rl::make_env("CartPole-v1", 2, Json{{"categorical_action_encoding", 1}}),
      c10::ValueError,
      "CartPole-v1: keyword argument 'categorical_action_encoding' must be a "
      "bool, got int 1");
  EXPECT_THROWS_WITH(
      rl::make_env("CartPole-v1", 2, Json{{"max_episode_steps", 10.5}}),
      c10::ValueError,
      "'max_episode_steps' must be an int, got float 10.5");
  EXPECT_THROWS_WITH(
      rl::make_env("CartPole-v1", 2, Json{{"max_episode_steps", 0}}),
      c10::ValueError,
      "max_episode_steps must be >= 1, got 0");
  EXPECT_THROWS_WITH(
      rl::make_env("PointMass", 2, Json{{"seed", -1}}),
      c10::ValueError,
      "PointMass: keyword argument 'seed' must be a non-negative int, got int "
      "-1");
  EXPECT_THROWS_WITH(
      rl::make_env("Plain-v0", 2, Json{{"step_size", 2}}),
      c10::ValueError,
      "Plain-v0: unknown keyword argument 'step_size'; the env takes no "
      "keyword arguments");
  const Json not_an_object = Json::array({1, 2});
  EXPECT_THROWS_WITH(
      rl::EnvKwargs("Counter-v0", not_an_object),
      c10::ValueError,
      "Counter-v0: keyword arguments must be a JSON object, got array");
  EXPECT_THROWS_WITH(
      rl::make_env("Counter-v0", 2, Json::array({1, 2})),
      c10::ValueError,
      "env 'Counter-v0' takes its keyword arguments as a JSON object, got "
      "array");
  EXPECT_THROWS_WITH(
      rl::register_env(
          "Counter-v0",
          [](int64_t n, const Json& kwargs) {
            return std::make_shared<CounterEnv>(n, kwargs);
          }),
      c10::ValueError,
      "register_env: env 'Counter-v0' is already registered");
  EXPECT_THROWS_WITH(
      rl::register_env("", nullptr), c10::ValueError, "the env name is empty");
  EXPECT_THROWS_WITH(
      rl::register_env("Empty-v0", nullptr),
      c10::ValueError,
      "was given an empty factory");
}

TEST(RlEnvRegistryTest, ADuplicateAtLoadIsRecordedAndMakingThatNameThrows) {
  const auto factory = [](int64_t n, const Json& kwargs) {
    return std::shared_ptr<rl::EnvBase>(
        std::make_shared<CounterEnv>(n, kwargs));
  };
  // As two static initializers of two libraries would: neither throws.
  EXPECT_TRUE(tensordict::detail::register_env_at_load("Twice-v0", factory));
  EXPECT_TRUE(tensordict::detail::register_env_at_load("Twice-v0", factory));
  EXPECT_THROWS_WITH(
      rl::make_env("Twice-v0", 1),
      c10::ValueError,
      "env 'Twice-v0' was registered more than once");
}

TEST(RlEnvRegistryTest, LoadEnvLibraryNamesAPathThatDoesNotLoad) {
  EXPECT_THROWS_WITH(
      rl::load_env_library("/nonexistent/libmy_envs.so"),
      c10::ValueError,
      "load_env_library: cannot load '/nonexistent/libmy_envs.so': ");
}

// --- built-ins' keyword arguments
// ----------------------------------------------

TEST(RlEnvRegistryTest, CartPoleTakesTorchRLsKeywordArguments) {
  const auto index_env = rl::make_env(
      "CartPole-v1",
      3,
      Json{{"categorical_action_encoding", true}, {"max_episode_steps", 4}});
  const rl::TensorSpec& spec = index_env->action_spec();
  EXPECT_EQ(spec.kind(), rl::SpecKind::kCategorical);
  EXPECT_EQ(spec.n(), 2);
  EXPECT_EQ(spec.dtype(), torch::kLong);
  EXPECT_TRUE(spec.shape().empty());
  const auto one_hot_env = rl::make_env("CartPole-v1", 3);
  index_env->set_seed(3);
  one_hot_env->set_seed(3);
  TensorDict a = index_env->reset();
  TensorDict b = one_hot_env->reset();
  for (int64_t t = 0; t < 4; ++t) {
    const at::Tensor index = torch::tensor({int64_t{0}, int64_t{1}, t % 2});
    a.set("action", index);
    b.set("action", torch::one_hot(index, 2));
    index_env->step(a);
    one_hot_env->step(b);
    EXPECT_TRUE(torch::equal(
        a.get({"next", "observation"}), b.get({"next", "observation"})));
    // max_episode_steps = 4: truncated at the fourth step, not before.
    EXPECT_EQ(a.get({"next", "truncated"}).all().item<bool>(), t == 3);
    a = rl::step_mdp(a);
    b = rl::step_mdp(b);
  }
  a.set("action", torch::tensor({0, 2, 1}));
  EXPECT_THROWS_WITH(
      index_env->step(a),
      c10::ValueError,
      "values outside [0, 2) of the Categorical spec");
}

TEST(RlEnvRegistryTest, PointMassTakesSeedAndMaxSteps) {
  const auto made =
      rl::make_env("PointMass", 4, Json{{"seed", 42}, {"max_steps", 2}});
  rl::PointMassEnv direct(4, 42, 2);
  EXPECT_TRUE(torch::equal(
      made->reset().get("observation"), direct.reset().get("observation")));
  TensorDict td = made->reset();
  for (int t = 0; t < 2; ++t) {
    td.set("action", torch::zeros({4, 2}));
    td = rl::step_mdp(made->step(td));
  }
  EXPECT_TRUE(td.get("truncated").all().item<bool>());
}

// --- actions of any one-hot dtype
// -------------------------------------------------

TEST(RlEnvKitTest, OneHotActionsOfAnyIntegerBoolOrFloatDtypeStepAlike) {
  at::Tensor expected;
  for (const torch::Dtype dtype :
       {torch::kLong,
        torch::kFloat,
        torch::kDouble,
        torch::kBool,
        torch::kInt,
        torch::kUInt8,
        torch::kHalf}) {
    rl::CartPoleEnv env(3);
    env.set_seed(11);
    TensorDict td = env.reset();
    td.set("action", torch::one_hot(torch::tensor({1, 0, 1}), 2).to(dtype));
    env.step(td);
    const at::Tensor obs = td.get({"next", "observation"});
    if (!expected.defined()) {
      expected = obs;
    }
    EXPECT_TRUE(torch::equal(obs, expected)) << dtype;
  }
  rl::CartPoleEnv env(3);
  TensorDict td = env.reset();
  td.set("action", torch::tensor({{0.0F, 1.0F}, {0.5F, 0.5F}, {1.0F, 0.0F}}));
  EXPECT_THROWS_WITH(
      env.step(td),
      c10::ValueError,
      "value of key 'action' is not in its OneHot spec: row 1 is [0.5, 0.5], "
      "which is not one-hot");
  EXPECT_FALSE(td.contains("next"));
  td.set("action", torch::tensor({{true, true}, {false, true}, {true, false}}));
  EXPECT_THROWS_WITH(env.step(td), c10::ValueError, "row 0 is [1, 1]");
}

TEST(RlEnvKitTest, TheCollectorKeepsAFloatOneHotPolicysDtype) {
  rl::Collector collector(
      rl::make_env("CartPole-v1", 4),
      constant_policy(1, torch::kFloat),
      rl::CollectorOptions(16).seed(0));
  const std::optional<TensorDict> batch = collector.next();
  ASSERT_TRUE(batch.has_value());
  const at::Tensor action = batch->get("action");
  EXPECT_EQ(action.scalar_type(), torch::kFloat);
  EXPECT_EQ(action.sizes(), c10::IntArrayRef({4, 4, 2}));
  EXPECT_TRUE(
      torch::equal(action.select(-1, 1), torch::ones({4, 4}, torch::kFloat)));
  // Pushed right every step: the cart's velocity grows.
  const at::Tensor velocity = batch->get({"next", "observation"}).select(-1, 1);
  EXPECT_TRUE(
      (velocity.select(1, 3) > velocity.select(1, 0)).all().item<bool>());
}

// --- row views
// ---------------------------------------------------------------------

TEST(RlEnvKitTest, RowsResolveOnceAndRefuseWhatTheyCannotView) {
  TensorDict td({3});
  td.set("obs", torch::arange(12, torch::kFloat).reshape({3, 2, 2}));
  td.set("flag", torch::zeros({3, 1}, torch::kBool));
  const rl::Rows<float> obs(td, "obs");
  EXPECT_EQ(obs.size(), 3);
  EXPECT_EQ(obs.width(), 4);
  EXPECT_TRUE(obs.rows_contiguous());
  EXPECT_EQ(obs(2, 3), 11.0F);
  obs(1, 0) = -1.0F;
  EXPECT_EQ(td.get("obs")[1][0][0].item<float>(), -1.0F);
  // A strided leaf: every other column.
  const at::Tensor wide = torch::arange(12, torch::kLong).reshape({3, 4});
  const rl::Rows<const int64_t> strided(wide.narrow(1, 0, 4).slice(1, 0, 4, 2));
  EXPECT_EQ(strided.width(), 2);
  EXPECT_FALSE(strided.rows_contiguous());
  EXPECT_EQ(strided(2, 1), 10);
  EXPECT_THROWS_WITH(
      rl::Rows<int64_t>(td, "obs"),
      c10::ValueError,
      "row view: key 'obs' is Float, the view reads Long");
  EXPECT_THROWS_WITH(rl::Rows<float>(td, "pixels"), KeyError, "'pixels'");
  EXPECT_THROWS_WITH(
      rl::Rows<float>(torch::tensor(1.0F), "scalar"),
      c10::ValueError,
      "expected a leaf [N, ...] with a batch dim");
  EXPECT_THROWS_WITH(
      rl::Rows<float>(torch::zeros({2, 3, 4}).transpose(1, 2), NestedKey("t")),
      c10::ValueError,
      "are not one strided axis");
}

TEST(RlEnvKitTest, IndexRowsReadCategoricalAndOneHotActions) {
  TensorDict td({3});
  td.set("index", torch::tensor({1, 0, 1}));
  td.set("one_hot", torch::tensor({{0.0, 1.0}, {1.0, 0.0}, {0.0, 1.0}}));
  td.set("bools", torch::tensor({{false, true}, {true, false}, {false, true}}));
  for (const auto& [key, spec] :
       {std::pair{"index", rl::TensorSpec::categorical(2)},
        std::pair{"one_hot", rl::TensorSpec::one_hot(2)},
        std::pair{"bools", rl::TensorSpec::one_hot(2)}}) {
    const rl::IndexRows rows(td, key, spec);
    EXPECT_EQ(rows.size(), 3);
    EXPECT_EQ(rows[0], 1) << key;
    EXPECT_EQ(rows[1], 0) << key;
    EXPECT_EQ(rows[2], 1) << key;
  }
  EXPECT_THROWS_WITH(
      rl::IndexRows(td, "one_hot", rl::TensorSpec::one_hot(3)),
      c10::ValueError,
      "expected rows of 3 element(s), got 2");
  EXPECT_THROWS_WITH(
      rl::IndexRows(td, "index", rl::TensorSpec::unbounded({})),
      c10::ValueError,
      "needs a Categorical or OneHot spec");
  td.set("floats", torch::zeros({3}));
  EXPECT_THROWS_WITH(
      rl::IndexRows(td, "floats", rl::TensorSpec::categorical(2)),
      c10::ValueError,
      "IndexRows: key 'floats' is Float, which its Categorical spec does not "
      "accept");
}

// A one-hot row's index is its first nonzero element (-1 for none), in any
// dtype and column stride; floats are truncated first, so 0.5 is not a one.
TEST(RlEnvKitTest, IndexRowsTakeTheFirstNonzeroOfEachRow) {
  TensorDict td({4});
  const at::Tensor rows = torch::tensor(
      {{0, 0, 0, 1, 0}, {0, 1, 0, 1, 0}, {0, 0, 0, 0, 0}, {1, 0, 0, 0, 1}});
  const std::vector<int64_t> expected = {3, 1, -1, 0};
  for (auto dtype :
       {torch::kLong,
        torch::kInt,
        torch::kBool,
        torch::kFloat,
        torch::kDouble,
        torch::kUInt8}) {
    td.set("action", rows.to(dtype));
    // Every other column of a wider leaf: a column stride of 2.
    td.set(
        "strided",
        torch::stack({rows, torch::zeros_like(rows)}, 2)
            .reshape({4, 10})
            .to(dtype)
            .slice(1, 0, 10, 2));
    for (const char* key : {"action", "strided"}) {
      const rl::IndexRows index(td, key, rl::TensorSpec::one_hot(5));
      for (int64_t i = 0; i < 4; ++i) {
        EXPECT_EQ(index[i], expected[i]) << key << " " << dtype << " row " << i;
      }
    }
  }
  td.set(
      "halves",
      torch::tensor(
          {{0.5F, 1.0F, 0.0F, 0.0F, 0.0F},
           {0.0F, 0.0F, 0.0F, 0.0F, 0.0F},
           {0.0F, 0.0F, 0.0F, 0.0F, 0.0F},
           {0.0F, 0.0F, 0.0F, 0.0F, 2.0F}}));
  const rl::IndexRows halves(td, "halves", rl::TensorSpec::one_hot(5));
  EXPECT_EQ(halves[0], 1);
  EXPECT_EQ(halves[1], -1);
  EXPECT_EQ(halves[3], 4);
}

// --- BatchedEnv
// ----------------------------------------------------------------------

TEST(RlEnvKitTest, BatchedEnvStepsSubEnvsFromTheirOwnStreams) {
  const auto env = rl::make_env("Walk-v0", 5, Json{{"size", 9}});
  EXPECT_EQ(env->name(), "Walk-v0");
  EXPECT_EQ(env->observation_spec().keys().size(), 2);
  env->set_seed(7);
  const TensorDict first = env->reset();
  env->set_seed(7);
  const TensorDict again = env->reset();
  EXPECT_TRUE(torch::equal(first.get("cell"), again.get("cell")));
  EXPECT_TRUE((first.get("cell") >= 1).all().item<bool>());
  EXPECT_TRUE((first.get("cell") <= 7).all().item<bool>());
  EXPECT_TRUE(torch::allclose(
      first.get("observation").select(-1, 0),
      first.get("cell").squeeze(-1).to(torch::kFloat) / 8.0F));
  // A partial reset rewrites only the masked sub-envs; the others keep
  // their last observation in the rows it writes.
  TensorDict td = first.clone();
  td.set("action", torch::one_hot(torch::ones({5}, torch::kLong), 2));
  td = rl::step_mdp(env->step(td));
  const at::Tensor moved = td.get("cell").clone();
  td.set("_reset", torch::tensor({true, false, false, false, false}));
  const TensorDict reset = env->reset(td);
  EXPECT_TRUE(
      torch::equal(reset.get("cell").narrow(0, 1, 4), moved.narrow(0, 1, 4)));
  EXPECT_THROWS_WITH(
      rl::make_env("Walk-v0", 2, Json{{"slip", "high"}}),
      c10::ValueError,
      "Walk-v0: keyword argument 'slip' must be a number, got string \"high\"");
}

TEST(RlEnvKitTest, SubEnvRngIsASplitmix64StreamOfItsSeed) {
  // splitmix64's published outputs from seed 0.
  rl::SubEnvRng rng;
  EXPECT_EQ(rng(), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(rng(), 0x6E789E6AA1B965F4ULL);
  EXPECT_EQ(rng(), 0x06C45D188009454FULL);
  // seed() restarts the stream; discard(n) skips n outputs.
  rng.seed(0);
  rl::SubEnvRng skipped(0);
  skipped.discard(2);
  rng();
  rng();
  EXPECT_TRUE(rng == skipped);
  EXPECT_EQ(rng(), 0x06C45D188009454FULL);
  EXPECT_FALSE(rng == skipped);
  // A standard engine: <random>'s distributions take it.
  rl::SubEnvRng a(42);
  rl::SubEnvRng b(42);
  std::uniform_real_distribution<double> u(-0.05, 0.05);
  for (int k = 0; k < 100; ++k) {
    const double x = u(a);
    EXPECT_GE(x, -0.05);
    EXPECT_LT(x, 0.05);
    EXPECT_EQ(x, u(b));
  }
}

TEST(RlEnvKitTest, BatchedEnvResetsDrawFromSubEnvSeedStreams) {
  // Walk-v0's reset draws cell = 1 + rng() % (size - 2) from sub-env i's
  // stream, seeded with sub_env_seed(seed, i, episode) at each reset.
  const int64_t n = 6;
  const auto env = rl::make_env("Walk-v0", n, Json{{"size", 9}});
  env->set_seed(5);
  const auto expected_cells = [&](int64_t episode) {
    std::vector<int64_t> cells;
    for (int64_t i = 0; i < n; ++i) {
      rl::SubEnvRng rng(rl::sub_env_seed(5, i, episode));
      cells.push_back(1 + static_cast<int64_t>(rng() % 7U));
    }
    return torch::tensor(cells).unsqueeze(-1);
  };
  EXPECT_TRUE(torch::equal(env->reset().get("cell"), expected_cells(0)));
  EXPECT_TRUE(torch::equal(env->reset().get("cell"), expected_cells(1)));
}

TEST(RlEnvKitTest, CollectorGivesTheSameDataOnOneOrThreeThreads) {
  std::vector<TensorDict> batches;
  for (const int64_t threads : {1, 3}) {
    rl::Collector collector(
        rl::make_env("Walk-v0", 6, Json{{"slip", 0.5}}),
        constant_policy(1, torch::kLong),
        rl::CollectorOptions(60).seed(5).num_threads(threads).return_same_td(
            false));
    batches.push_back(*collector.next());
  }
  EXPECT_TRUE(
      batches[0].get({"next", "cell"}).equal(batches[1].get({"next", "cell"})));
  EXPECT_TRUE(batches[0]
                  .get({"collector", "traj_ids"})
                  .equal(batches[1].get({"collector", "traj_ids"})));
  // Slips happen: not every step moved right.
  const at::Tensor cells = batches[0].get({"next", "cell"});
  const at::Tensor before = batches[0].get("cell");
  EXPECT_TRUE((cells < before).any().item<bool>());
  EXPECT_TRUE((cells > before).any().item<bool>());
}

// --- errors on collector threads
// -------------------------------------------------------

TEST(RlEnvKitTest, AnEnvErrorOnAnyThreadReachesTheCallerNamingTheEnv) {
  // On two threads sub-env 2 fails on a worker; on one thread, the single
  // range runs on the calling thread, and the error reads the same.
  const std::vector<std::pair<int64_t, std::string>> cases = {
      {2, "[2, 4)"}, {1, "[0, 4)"}};
  for (const auto& [threads, range] : cases) {
    SCOPED_TRACE(threads);
    auto env = std::make_shared<CounterEnv>(4, Json::object());
    rl::Collector collector(
        env,
        constant_policy(1, torch::kLong),
        rl::CollectorOptions(8).num_threads(threads));
    ASSERT_TRUE(collector.next().has_value());
    env->fail_next_step = true;
    EXPECT_THROWS_WITH(
        collector.next(),
        c10::Error,
        "env 'Counter-v0' raised an error while the collector stepped "
        "sub-envs " +
            range + ": the simulator lost sub-env 2");
    EXPECT_THROWS_WITH(collector.next(), c10::Error, "unknown state");
    collector.shutdown();
    EXPECT_FALSE(collector.next().has_value());
  }
}

}  // namespace rl_env_kit_test
