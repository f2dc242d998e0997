// Tests of include/tensordict/probabilistic.h: the interaction type and its
// guard, and the probabilistic modules (the distributions they build are
// tests/distributions_test.cpp). The comparison with torch.distributions
// and TorchRL on the same parameters is tests/rl/probabilistic_interop.py.

#include <tensordict/json.h>
#include <tensordict/probabilistic.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <set>
#include <thread>
#include <vector>

#include "nn/categorical_draw.h"
#include "nn/tanh_normal_draw.h"
#include "support.h"
#include "weights_contract.h"

// Its own namespace, so that test files can share a unity batch.
namespace probabilistic_test {

using namespace tensordict;      // NOLINT(google-build-using-namespace)
using namespace tensordict::nn;  // NOLINT(google-build-using-namespace)

using tensordict::testing::expect_close;
using tensordict::testing::f32;

TEST(ProbabilisticTest, InteractionTypeGuardNestsAndIsPerThread) {
  EXPECT_FALSE(interaction_type().has_value());
  {
    SetInteractionType random(InteractionType::kRandom);
    EXPECT_EQ(interaction_type(), InteractionType::kRandom);
    {
      SetInteractionType mode(InteractionType::kMode);
      EXPECT_EQ(interaction_type(), InteractionType::kMode);
      std::optional<InteractionType> other = InteractionType::kMean;
      std::thread([&] { other = interaction_type(); }).join();
      EXPECT_FALSE(other.has_value());
    }
    EXPECT_EQ(interaction_type(), InteractionType::kRandom);
  }
  EXPECT_FALSE(interaction_type().has_value());
  EXPECT_EQ(interaction_type_from_string("MODE"), InteractionType::kMode);
  EXPECT_STREQ(
      interaction_type_name(InteractionType::kDeterministic), "deterministic");
  EXPECT_THROWS_WITH(
      interaction_type_from_string("median"),
      c10::ValueError,
      "'median' is not a valid InteractionType");
}

TEST(ProbabilisticTest, ModuleWritesSampleAndLogProbAsPython) {
  ProbabilisticTensorDictModule head(
      {"logits"},
      "action",
      ProbabilisticTensorDictModuleOptions("OneHotCategorical")
          .return_log_prob(true));
  EXPECT_EQ(head->log_prob_key(), NestedKey("action_log_prob"));
  ASSERT_EQ(head->out_keys().size(), 2u);
  at::Tensor logits = torch::log(f32({1, 3, 1, 2, 1, 1})).reshape({2, 3});
  TensorDict td({{"logits", logits}}, {2});
  head(td);
  // Unset interaction type: the default, deterministic, is the mode.
  EXPECT_TRUE(torch::equal(
      td.get("action"), torch::tensor({{0, 1, 0}, {1, 0, 0}}, torch::kLong)));
  expect_close(
      td.get("action_log_prob"), f32({std::log(0.6f), std::log(0.5f)}));
  {
    SetInteractionType random(InteractionType::kRandom);
    torch::manual_seed(5);
    head(td);
    at::Tensor first = td.get("action");
    torch::manual_seed(5);
    at::Tensor again = head->get_dist(td)->sample();
    EXPECT_TRUE(torch::equal(first, again));
    expect_close(
        td.get("action_log_prob"), head->get_dist(td)->log_prob(first));
  }
  TensorDict empty({}, {2});
  EXPECT_THROWS_WITH(
      head(empty),
      KeyError,
      "the distribution parameter 'logits' is read from the key 'logits', "
      "which the input does not have");
}

TEST(ProbabilisticTest, ModuleMapsArgumentsToKeysAndEstimatesMissingMeans) {
  ProbabilisticTensorDictModule head(
      {"loc", "scale"},
      {{"params", "loc"}, {"params", "scale"}},
      {"agent", "action"},
      ProbabilisticTensorDictModuleOptions("TanhNormal")
          .distribution_kwargs(R"({"low": -2.0, "high": 2.0})")
          .return_log_prob(true)
          .default_interaction_type(InteractionType::kMean)
          .n_empirical_estimate(20000));
  EXPECT_EQ(head->log_prob_key(), NestedKey({"agent", "action_log_prob"}));
  TensorDict td(
      {{{"params", "loc"}, f32({0.2f, -0.1f})},
       {{"params", "scale"}, f32({0.01f, 0.01f})}},
      {});
  torch::manual_seed(0);
  head(td);
  // A narrow TanhNormal: its mean is near the transformed loc.
  expect_close(
      td.get({"agent", "action"}),
      2.0 * f32({std::tanh(0.2f), std::tanh(-0.1f)}),
      1e-3);
  {
    SetInteractionType mode(InteractionType::kMode);
    EXPECT_THROWS_WITH(head(td), c10::Error, "has not analytical mode");
  }
  EXPECT_THROWS_WITH(
      ProbabilisticTensorDictModule(
          {"loc"}, "action", ProbabilisticTensorDictModuleOptions("Gamma")),
      c10::ValueError,
      "unknown distribution class 'Gamma'");
  EXPECT_THROWS_WITH(
      ProbabilisticTensorDictModule(
          {"loc"},
          "action",
          ProbabilisticTensorDictModuleOptions("Normal").distribution_kwargs(
              "[1")),
      c10::ValueError,
      "distribution_kwargs is not valid JSON");
  // Argument names are checked when the module is built, not at its call.
  EXPECT_THROWS_WITH(
      ProbabilisticTensorDictModule(
          {"loc"},
          "action",
          ProbabilisticTensorDictModuleOptions("TanhNormal")
              .distribution_kwargs(R"({"scale": 1.0, "min": -1})")),
      c10::ValueError,
      "TanhNormal got an unexpected keyword argument 'min'");
  EXPECT_THROWS_WITH(
      ProbabilisticTensorDictModule(
          {"mu"}, "action", ProbabilisticTensorDictModuleOptions("Normal")),
      c10::ValueError,
      "Normal got an unexpected keyword argument 'mu'");
}

TEST(ProbabilisticTest, SequentialRunsTheParameterModulesThenSamples) {
  torch::manual_seed(0);
  torch::nn::Linear linear(4, 2);
  ProbabilisticTensorDictSequential actor(
      {TensorDictModule(linear, {"observation"}, {"logits"}),
       ProbabilisticTensorDictModule(
           {"logits"},
           "action",
           ProbabilisticTensorDictModuleOptions("Categorical")
               .return_log_prob(true))});
  TensorDict td({{"observation", torch::randn({3, 4})}}, {3});
  auto dist = actor->get_dist(td);
  EXPECT_TRUE(td.contains("logits"));
  actor(td);
  at::Tensor logits = linear(td.get("observation"));
  EXPECT_TRUE(torch::equal(td.get("action"), logits.argmax(-1)));
  expect_close(td.get("action_log_prob"), dist->log_prob(td.get("action")));
  EXPECT_THROWS_WITH(
      ProbabilisticTensorDictSequential(
          {TensorDictModule(linear, {"observation"}, {"logits"})}),
      c10::TypeError,
      "The last module passed to ProbabilisticTensorDictSequential must be an "
      "instance of ProbabilisticTensorDictModule");
}

// NOTE [A categorical head without its distribution]: the module's draw on
// small CPU logits runs the distribution's loops without it. Every head,
// dtype and shape gives what get_dist + dist_sample + log_prob give from
// the same seed, bit for bit, and the same errors.
TEST(ProbabilisticTest, ModuleDrawsAsItsDistributionDoes) {
  const SetInteractionType random(InteractionType::kRandom);
  for (const char* cls :
       {"Categorical",
        "OneHotCategorical",
        "torch.distributions.OneHotCategorical"}) {
    ProbabilisticTensorDictModule head(
        std::vector<std::string>{"logits"},
        "action",
        ProbabilisticTensorDictModuleOptions(cls).return_log_prob(true));
    for (auto dtype : {torch::kFloat, torch::kDouble}) {
      for (std::vector<int64_t> shape :
           {std::vector<int64_t>{3}, {4, 3}, {2, 5, 2}, {6, 1}, {1, 2}}) {
        SCOPED_TRACE(
            ::testing::Message()
            << cls << " " << dtype << " " << c10::IntArrayRef(shape));
        torch::manual_seed(11);
        at::Tensor logits = torch::randn(shape, dtype) * 2;
        // TorchRL's head drops a last dim of 1: a batch of none then.
        const bool squeezed =
            std::string(cls) == "OneHotCategorical" && shape.back() == 1;
        const std::vector<int64_t> batch =
            squeezed ? std::vector<int64_t>{}
                     : std::vector<int64_t>(shape.begin(), shape.end() - 1);
        for (int seed = 0; seed < 5; ++seed) {
          TensorDict td({{"logits", logits}}, batch);
          torch::manual_seed(seed);
          head(td);
          torch::manual_seed(seed);
          auto dist = head->get_dist(td);
          at::Tensor sample = head->dist_sample(*dist);
          EXPECT_TRUE(torch::equal(td.get("action"), sample))
              << td.get("action") << "\nvs\n"
              << sample;
          EXPECT_EQ(td.get("action").scalar_type(), sample.scalar_type());
          at::Tensor log_prob = dist->log_prob(sample);
          EXPECT_EQ(td.get("action_log_prob").sizes(), log_prob.sizes());
          EXPECT_TRUE(torch::equal(td.get("action_log_prob"), log_prob))
              << td.get("action_log_prob") << "\nvs\n"
              << log_prob;
        }
        // The loops take the caller's generator as the distribution does.
        auto g1 = at::detail::createCPUGenerator(7);
        auto g2 = at::detail::createCPUGenerator(7);
        const auto kind =
            std::string(cls) == "Categorical"
                ? nn::detail::CategoricalHead::kCategorical
            : std::string(cls) == "OneHotCategorical"
                ? nn::detail::CategoricalHead::kOneHotCategorical
                : nn::detail::CategoricalHead::kTorchOneHotCategorical;
        auto drawn = nn::detail::draw_from_logits(logits, kind, true, g1);
        if (squeezed) {
          // A view of the logits: left to the distribution.
          EXPECT_FALSE(drawn);
          continue;
        }
        ASSERT_TRUE(drawn);
        TensorDict td({{"logits", logits}}, batch);
        auto dist = head->get_dist(td);
        at::Tensor sample = dist->sample({}, g2);
        EXPECT_TRUE(torch::equal(drawn->sample, sample));
        EXPECT_TRUE(torch::equal(drawn->log_prob, dist->log_prob(sample)));
      }
    }
    // NaN logits: the distribution's error, before any draw.
    TensorDict bad({{"logits", f32({0, NAN, 1})}}, {});
    EXPECT_THROWS_WITH(
        head(bad),
        c10::ValueError,
        "to satisfy the constraint Real(), but found NaN values");
    EXPECT_FALSE(bad.contains("action"));
    // An infinite logit makes NaN probabilities: the draw's error, from the
    // loops of two actions and of any other count alike.
    for (at::Tensor logits : {f32({INFINITY, 0}), f32({0, INFINITY, 1})}) {
      TensorDict inf({{"logits", logits}}, {});
      EXPECT_THROWS_WITH(
          head(inf),
          c10::Error,
          "probability tensor contains either `inf`, `nan` or element < 0");
      EXPECT_FALSE(inf.contains("action"));
    }
    // Every row is checked before the draw: a NaN in a later row wins over
    // an earlier row's error, as the distribution checks its logits first,
    // and a refused draw leaves the generator where it was.
    for (at::Tensor logits :
         {f32({INFINITY, 0, 0, NAN}).reshape({2, 2}),
          f32({INFINITY, 0, 1, 0, NAN, 1}).reshape({2, 3})}) {
      auto g = at::detail::createCPUGenerator(3);
      EXPECT_THROWS_WITH(
          nn::detail::draw_from_logits(
              logits, nn::detail::CategoricalHead::kOneHotCategorical, true, g),
          c10::ValueError,
          "but found NaN values");
      auto fresh = at::detail::createCPUGenerator(3);
      EXPECT_TRUE(torch::equal(
          at::empty({4}).exponential_(1, g),
          at::empty({4}).exponential_(1, fresh)));
    }
  }
  // Logits recording a graph take torch's ops: the log-prob has a gradient.
  ProbabilisticTensorDictModule head(
      std::vector<std::string>{"logits"},
      "action",
      ProbabilisticTensorDictModuleOptions("OneHotCategorical")
          .return_log_prob(true));
  TensorDict td({{"logits", torch::zeros({2, 3}).requires_grad_()}}, {2});
  head(td);
  EXPECT_TRUE(td.get("action_log_prob").requires_grad());
  EXPECT_FALSE(nn::detail::draw_from_logits(
      td.get("logits"),
      nn::detail::CategoricalHead::kCategorical,
      true,
      std::nullopt));
}

// NOTE [A TanhNormal head without its distribution]: the loops give the
// distribution's samples from the same generator, bit for bit, and its
// log-probs to rounding (atanh, exp, log1p and log may round otherwise than
// torch's vectorized kernels, and the event sums run in another order),
// with its errors; the rest takes the distribution.
TEST(ProbabilisticTest, TanhNormalHeadLoopsMatchItsDistribution) {
  struct Case {
    std::vector<int64_t> shape;
    TanhNormalOptions options;
  };
  for (const auto dtype : {at::kFloat, at::kDouble}) {
    const auto t = [&](std::vector<double> values) {
      return torch::tensor(values, at::kDouble).to(dtype);
    };
    std::vector<Case> cases = {
        {{16, 6}, TanhNormalOptions()},
        {{6}, TanhNormalOptions()},
        {{4, 3}, TanhNormalOptions().safe_tanh(false)},
        {{4, 3}, TanhNormalOptions().event_dims(0)},
        {{2, 4, 3}, TanhNormalOptions().event_dims(2)},
        // Number bounds are float tensors, whatever loc's dtype.
        {{4, 3},
         TanhNormalOptions()
             .low(at::scalar_tensor(-2.0, at::kFloat))
             .high(at::scalar_tensor(3.0, at::kFloat))},
        {{4, 3}, TanhNormalOptions().low(t({-1, -2, -0.5})).high(t({1, 2, 4}))},
        {{4, 3},
         TanhNormalOptions()
             .tanh_loc(true)
             .upscale(2.0)
             .low(t({-1, -2, 0}))
             .high(t({1, 2, 0.5}))},
        {{4, 3}, TanhNormalOptions().tanh_loc(true).upscale(0.5)},
    };
    for (const Case& c : cases) {
      SCOPED_TRACE(c10::str(
          dtype,
          " shape ",
          c10::IntArrayRef(c.shape),
          " event_dims ",
          c.options.event_dims().value_or(-1)));
      torch::manual_seed(3);
      // Some loc far out, so that the safe tanh clamps.
      at::Tensor loc = 3 * torch::randn(c.shape, dtype);
      loc.view(-1)[0] = 40;
      const at::Tensor scale = torch::rand(c.shape, dtype) + 0.05;
      for (int seed = 0; seed < 4; ++seed) {
        // Seed 3 reads loc as a chunk of a wider output, as an actor does.
        if (seed == 3 && loc.dim() > 1) {
          loc = torch::cat({loc, loc}, -1).chunk(2, -1)[1];
          ASSERT_FALSE(loc.is_contiguous());
        }
        auto g1 = at::detail::createCPUGenerator(seed);
        auto g2 = at::detail::createCPUGenerator(seed);
        auto drawn =
            nn::detail::draw_tanh_normal(loc, scale, c.options, true, g1);
        ASSERT_TRUE(drawn);
        const TanhNormal dist(loc, scale, c.options);
        const at::Tensor sample = dist.rsample({}, g2);
        EXPECT_EQ(drawn->sample.scalar_type(), sample.scalar_type());
        EXPECT_TRUE(torch::equal(drawn->sample, sample))
            << drawn->sample << "\nvs\n"
            << sample;
        const at::Tensor log_prob = dist.log_prob(sample);
        EXPECT_EQ(drawn->log_prob.scalar_type(), log_prob.scalar_type());
        ASSERT_EQ(drawn->log_prob.sizes(), log_prob.sizes());
        const double rtol = dtype == at::kFloat ? 1e-5 : 1e-12;
        // Without the safe tanh a saturated sample has a NaN log-prob.
        EXPECT_TRUE(torch::allclose(
            drawn->log_prob, log_prob, rtol, rtol, /*equal_nan=*/true))
            << drawn->log_prob << "\nvs\n"
            << log_prob;
        // Both drew the same count from their generators.
        EXPECT_TRUE(torch::equal(
            torch::randn({4}, g1.clone()), torch::randn({4}, g2.clone())));
      }
    }
  }

  // The module takes the loops, its kwargs included, with the global
  // generator as the distribution does.
  const SetInteractionType random(InteractionType::kRandom);
  ProbabilisticTensorDictModule head(
      std::vector<std::string>{"loc", "scale"},
      "action",
      ProbabilisticTensorDictModuleOptions("TanhNormal")
          .distribution_kwargs(R"({"low": -2.0, "high": 3.0})")
          .return_log_prob(true));
  torch::manual_seed(0);
  const at::Tensor loc = torch::randn({16, 6});
  const at::Tensor scale = torch::rand({16, 6}) + 0.1;
  TensorDict td({{"loc", loc}, {"scale", scale}}, {16});
  torch::manual_seed(5);
  head(td);
  torch::manual_seed(5);
  auto dist = head->get_dist(td);
  const at::Tensor sample = head->dist_sample(*dist);
  EXPECT_TRUE(torch::equal(td.get("action"), sample));
  EXPECT_TRUE(torch::allclose(
      td.get("action_log_prob"), dist->log_prob(sample), 1e-5, 1e-5));

  // The distribution's errors, through the loops.
  const auto both_throw = [&](const at::Tensor& l,
                              const at::Tensor& s,
                              const TanhNormalOptions& options,
                              const std::string& message,
                              bool value_error) {
    if (value_error) {
      EXPECT_THROWS_WITH(
          nn::detail::draw_tanh_normal(l, s, options, true, std::nullopt),
          c10::ValueError,
          message);
      EXPECT_THROWS_WITH(TanhNormal(l, s, options), c10::ValueError, message);
    } else {
      EXPECT_THROWS_WITH(
          nn::detail::draw_tanh_normal(l, s, options, true, std::nullopt),
          c10::Error,
          message);
      EXPECT_THROWS_WITH(TanhNormal(l, s, options), c10::Error, message);
    }
  };
  both_throw(
      f32({0, NAN, 1}),
      f32({1, 1, 1}),
      TanhNormalOptions(),
      "Expected parameter loc of distribution TanhNormal to satisfy the "
      "constraint Real(), but found NaN values",
      true);
  both_throw(
      f32({0, 0, 1}),
      f32({1, 0, 1}),
      TanhNormalOptions(),
      "Expected parameter scale (Tensor of shape torch.Size([3])) of "
      "distribution TanhNormal to satisfy the constraint "
      "GreaterThan(lower_bound=1e-06), but found invalid values",
      true);
  both_throw(
      f32({0, 0, 1}),
      f32({1, -1, 1}),
      TanhNormalOptions(),
      "GreaterThan(lower_bound=1e-06), but found invalid values",
      true);
  both_throw(
      f32({0, 0, 1}),
      f32({1, 1, 1}),
      TanhNormalOptions().low(f32({0, 1, 0})).high(f32({1, 1, 1})),
      "TanhNormal high values must be strictly greater than low values",
      false);
  TensorDict bad({{"loc", f32({0, NAN, 1})}, {"scale", f32({1, 1, 1})}}, {});
  EXPECT_THROWS_WITH(
      head(bad),
      c10::ValueError,
      "Expected parameter loc of distribution TanhNormal");
  EXPECT_FALSE(bad.contains("action"));

  // The rest takes the distribution: parameters recording a graph (the
  // log-prob keeps its gradient), ones not in row-major order, expanded
  // ones, bounds that broadcast loc up.
  EXPECT_FALSE(nn::detail::draw_tanh_normal(
      loc.clone().requires_grad_(), scale, {}, true, std::nullopt));
  EXPECT_FALSE(
      nn::detail::draw_tanh_normal(loc.t(), scale.t(), {}, true, std::nullopt));
  EXPECT_FALSE(nn::detail::draw_tanh_normal(
      loc, scale[0].expand({16, 6}), {}, true, std::nullopt));
  EXPECT_FALSE(nn::detail::draw_tanh_normal(
      loc,
      scale,
      TanhNormalOptions()
          .low(torch::full({2, 16, 6}, -2.0))
          .high(torch::full({2, 16, 6}, 2.0)),
      true,
      std::nullopt));
  TensorDict graph(
      {{"loc", loc.clone().requires_grad_()}, {"scale", scale}}, {16});
  head(graph);
  EXPECT_TRUE(graph.get("action_log_prob").requires_grad());
}

// NOTE [Recycled draws]: a draw is handed out again only once no one else
// can see it. Draws held, viewed, changed or passed to another thread keep
// their values; the rest are reused.
TEST(ProbabilisticTest, RecycledDrawsAreNeverSeenTwice) {
  const SetInteractionType random(InteractionType::kRandom);
  ProbabilisticTensorDictModule head(
      std::vector<std::string>{"logits"},
      "action",
      ProbabilisticTensorDictModuleOptions("OneHotCategorical")
          .return_log_prob(true));
  torch::manual_seed(0);
  const at::Tensor logits = torch::randn({4, 3});
  const auto draw = [&] {
    TensorDict td({{"logits", logits}}, {4});
    head(td);
    return std::make_pair(td.get("action"), td.get("action_log_prob"));
  };
  // Held: every draw a tensor of its own, its values kept.
  std::vector<std::pair<at::Tensor, at::Tensor>> held;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;
  for (int i = 0; i < 40; ++i) {
    held.push_back(draw());
    copies.emplace_back(held.back().first.clone(), held.back().second.clone());
  }
  std::set<const void*> pointers;
  for (size_t i = 0; i < held.size(); ++i) {
    EXPECT_TRUE(torch::equal(held[i].first, copies[i].first)) << i;
    EXPECT_TRUE(torch::equal(held[i].second, copies[i].second)) << i;
    pointers.insert(held[i].first.const_data_ptr());
    pointers.insert(held[i].second.const_data_ptr());
  }
  EXPECT_EQ(pointers.size(), 2 * held.size());
  held.clear();
  // Dropped: reused, a few tensors in turn, each draw still right.
  pointers.clear();
  for (int i = 0; i < 40; ++i) {
    torch::manual_seed(i);
    auto [sample, log_prob] = draw();
    torch::manual_seed(i);
    TensorDict td({{"logits", logits}}, {4});
    auto dist = head->get_dist(td);
    at::Tensor expected = dist->sample();
    EXPECT_TRUE(torch::equal(sample, expected));
    EXPECT_TRUE(torch::equal(log_prob, dist->log_prob(expected)));
    pointers.insert(sample.const_data_ptr());
  }
  EXPECT_LE(pointers.size(), 8u);
  // A view keeps its storage out of the ring: the values no draw writes
  // stay.
  const at::Tensor view = draw().first.select(0, 1).fill_(7);
  // So does a tensor on its storage that is no view (no base to hold).
  const at::Tensor alias = torch::empty({0}, torch::kLong)
                               .set_(draw().first.storage(), 0, {12}, {1})
                               .fill_(9);
  // Changed, then dropped: restrided, given a gradient, resized.
  {
    auto [sample, log_prob] = draw();
    sample.as_strided_({4, 3}, {1, 4});
    log_prob.requires_grad_(true);
  }
  {
    auto [sample, log_prob] = draw();
    sample.resize_({12});
    log_prob.resize_({4}).fill_(0);
  }
  // Held by another thread while this one draws.
  auto [shared, shared_log_prob] = draw();
  shared.fill_(5);
  const at::Tensor shared_copy = shared.clone();
  std::atomic<bool> done{false};
  bool intact = true;
  std::thread reader([&, held_sample = shared] {
    while (!done.load()) {
      intact = intact && torch::equal(held_sample, shared_copy);
    }
  });
  shared = at::Tensor();
  for (int i = 0; i < 100; ++i) {
    auto [sample, log_prob] = draw();
    EXPECT_TRUE(sample.is_contiguous());
    EXPECT_EQ(sample.sizes(), c10::IntArrayRef({4, 3}));
    EXPECT_FALSE(log_prob.requires_grad());
    EXPECT_TRUE(torch::equal(sample.sum(-1), torch::ones({4}, torch::kLong)));
  }
  done = true;
  reader.join();
  EXPECT_TRUE(intact);
  EXPECT_TRUE(torch::equal(view, torch::full({3}, 7, torch::kLong)));
  EXPECT_TRUE(torch::equal(alias, torch::full({12}, 9, torch::kLong)));
  // Inference mode makes inference tensors, and none of them is reused
  // outside it.
  {
    c10::InferenceMode guard;
    EXPECT_TRUE(draw().first.is_inference());
  }
  EXPECT_FALSE(draw().first.is_inference());
}

TEST(ProbabilisticTest, AProbabilisticActorAnswersForItsWeights) {
  ProbabilisticTensorDictSequential actor(
      {TensorDictModule(torch::nn::Linear(4, 2), {"observation"}, {"logits"}),
       ProbabilisticTensorDictModule(
           {"logits"},
           "action",
           ProbabilisticTensorDictModuleOptions("Categorical"))});
  weights_contract::expect_load_weights_contract(*actor);
}

}  // namespace probabilistic_test
