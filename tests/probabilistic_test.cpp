// Tests of include/tensordict/probabilistic.h: the distributions' formulas
// on parameters whose values are known in closed form, sampling statistics,
// the interaction type and its guard, the factory's errors, and the
// probabilistic modules. The comparison with torch.distributions and
// TorchRL on the same parameters is tests/rl/probabilistic_interop.py.

#include <tensordict/json.h>
#include <tensordict/probabilistic.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <set>
#include <thread>
#include <vector>

#include "nn/categorical_draw.h"
#include "support.h"
#include "weights_contract.h"

// Its own namespace, so that test files can share a unity batch.
namespace probabilistic_test {

using namespace tensordict;      // NOLINT(google-build-using-namespace)
using namespace tensordict::nn;  // NOLINT(google-build-using-namespace)

namespace {

at::Tensor f32(std::vector<float> values) {
  return torch::tensor(values, torch::kFloat);
}

void expect_close(const at::Tensor& a, const at::Tensor& b, double tol = 1e-6) {
  ASSERT_EQ(a.sizes(), b.sizes());
  EXPECT_TRUE(torch::allclose(a, b, /*rtol=*/0, /*atol=*/tol)) << a << "\nvs\n"
                                                               << b;
}

}  // namespace

TEST(ProbabilisticTest, CategoricalLogProbModeEntropyFromProbs) {
  auto dist = Categorical::from_probs(f32({1, 2, 3}));
  EXPECT_EQ(dist->batch_shape(), std::vector<int64_t>{});
  EXPECT_EQ(dist->num_events(), 3);
  expect_close(dist->probs(), f32({1. / 6, 2. / 6, 3. / 6}));
  expect_close(
      dist->log_prob(torch::tensor({0, 2}, torch::kLong)),
      f32({std::log(1.f / 6), std::log(0.5f)}));
  EXPECT_EQ(dist->mode().item<int64_t>(), 2);
  EXPECT_EQ(dist->mode().scalar_type(), torch::kLong);
  const double h =
      -(1. / 6 * std::log(1. / 6) + 2. / 6 * std::log(2. / 6) +
        0.5 * std::log(0.5));
  EXPECT_NEAR(dist->entropy().item<double>(), h, 1e-6);
  EXPECT_TRUE(std::isnan(dist->mean().item<double>()));
  // The deterministic fallback of a discrete distribution is its mode.
  EXPECT_EQ(dist->deterministic_sample().item<int64_t>(), 2);
}

TEST(ProbabilisticTest, CategoricalFromLogitsBatchesAndBroadcastsLogProb) {
  at::Tensor logits = torch::log(f32({1, 1, 2, 4, 1, 3})).reshape({2, 3});
  auto dist = Categorical::from_logits(logits);
  EXPECT_EQ(dist->batch_shape(), std::vector<int64_t>{2});
  at::Tensor lp = dist->log_prob(torch::tensor({2, 0}, torch::kLong));
  expect_close(lp, f32({std::log(0.5f), std::log(0.5f)}));
  // A sample dim in front broadcasts against the batch.
  at::Tensor lp2 = dist->log_prob(torch::tensor({{0, 1}, {1, 2}}));
  EXPECT_EQ(lp2.sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_NEAR(lp2[1][1].item<float>(), std::log(3.f / 8), 1e-6);
  EXPECT_EQ(dist->sample({5}).sizes(), (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(dist->sample().scalar_type(), torch::kLong);
}

TEST(ProbabilisticTest, CategoricalSampleFrequenciesMatchProbs) {
  torch::manual_seed(0);
  auto dist = Categorical::from_probs(f32({0.1f, 0.2f, 0.7f}));
  const int64_t n = 40000;
  at::Tensor samples = dist->sample({n});
  at::Tensor counts = torch::bincount(samples, {}, 3).to(torch::kDouble) / n;
  // Four standard deviations of a frequency at n = 40000 are under 0.01.
  expect_close(counts, torch::tensor({0.1, 0.2, 0.7}, torch::kDouble), 0.01);
}

TEST(ProbabilisticTest, SamplingIsReproducibleWithManualSeedAndGenerators) {
  auto dist = Categorical::from_logits(torch::zeros({4, 5}));
  torch::manual_seed(7);
  at::Tensor a = dist->sample({3});
  torch::manual_seed(7);
  at::Tensor b = dist->sample({3});
  EXPECT_TRUE(torch::equal(a, b));
  auto gen = at::detail::createCPUGenerator(11);
  auto gen2 = at::detail::createCPUGenerator(11);
  Normal normal(torch::zeros({4}), torch::ones({4}));
  EXPECT_TRUE(torch::equal(normal.sample({2}, gen), normal.sample({2}, gen2)));
}

TEST(ProbabilisticTest, CategoricalLogProbRejectsValuesOutsideTheSupport) {
  auto dist = Categorical::from_logits(torch::zeros({3}));
  EXPECT_THROWS_WITH(
      dist->log_prob(torch::tensor({3}, torch::kLong)),
      c10::ValueError,
      "to be within the support (IntegerInterval(lower_bound=0, "
      "upper_bound=2)) of the distribution Categorical");
  EXPECT_THROWS_WITH(
      dist->log_prob(torch::tensor({-1}, torch::kLong)),
      c10::ValueError,
      "IntegerInterval");
  EXPECT_THROWS_WITH(
      dist->log_prob(f32({0.5f})), c10::ValueError, "IntegerInterval");
  auto batched = Categorical::from_logits(torch::zeros({2, 3}));
  EXPECT_THROWS_WITH(
      batched->log_prob(torch::zeros({3}, torch::kLong)),
      c10::ValueError,
      "Value is not broadcastable with batch_shape+event_shape: "
      "torch.Size([3]) vs torch.Size([2]).");
  EXPECT_THROWS_WITH(
      Categorical::from_logits(torch::zeros({3}, torch::kLong)),
      c10::ValueError,
      "expected the parameter 'logits' to be a floating point tensor, got "
      "Long");
  EXPECT_THROWS_WITH(
      Categorical::from_logits(f32({0, NAN})),
      c10::ValueError,
      "Expected parameter logits of distribution Categorical to satisfy the "
      "constraint Real(), but found NaN values");
  EXPECT_THROWS_WITH(
      Categorical::from_probs(f32({0.5f, -0.1f})),
      c10::ValueError,
      "to be nonnegative");
}

// NOTE [Loops for small CPU parameters] in distributions.cpp: without an
// autograd graph to record, CPU parameters take loops instead of torch's
// ops. Parameters that require grad take torch's ops; both must agree, draw
// the same samples from the same seed and raise the same errors.
TEST(ProbabilisticTest, LoopsForSmallCpuParametersAgreeWithTorchOps) {
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{5}, {4, 3}, {2, 3, 7}, {16, 2}}) {
      SCOPED_TRACE(
          ::testing::Message() << dtype << " " << c10::IntArrayRef(shape));
      torch::manual_seed(3);
      at::Tensor logits = torch::randn(shape, dtype) * 3;
      for (bool one_hot : {false, true}) {
        for (bool torch_semantics : {false, true}) {
          if (!one_hot && torch_semantics) {
            continue;
          }
          const auto make =
              [&](const at::Tensor& l) -> std::shared_ptr<Categorical> {
            if (one_hot) {
              return OneHotCategorical::from_logits(l, torch_semantics);
            }
            return Categorical::from_logits(l);
          };
          auto ops = make(logits.clone().requires_grad_());
          std::shared_ptr<Categorical> loops;
          at::Tensor fast_sample;
          at::Tensor fast_log_prob;
          {
            torch::NoGradGuard no_grad;
            loops = make(logits);
            auto gen = at::detail::createCPUGenerator(42);
            fast_sample = loops->sample({}, gen);
            fast_log_prob = loops->log_prob(fast_sample);
          }
          const double tol = dtype == torch::kFloat ? 1e-6 : 1e-12;
          expect_close(loops->logits(), ops->logits().detach(), tol);
          expect_close(loops->probs(), ops->probs().detach(), tol);
          auto gen = at::detail::createCPUGenerator(42);
          at::Tensor sample = ops->sample({}, gen);
          EXPECT_TRUE(torch::equal(fast_sample, sample))
              << fast_sample << "\nvs\n"
              << sample;
          EXPECT_EQ(fast_sample.scalar_type(), sample.scalar_type());
          // One sample asked for with a sample shape keeps that dim.
          {
            torch::NoGradGuard no_grad;
            std::vector<int64_t> one = {1};
            one.insert(one.end(), sample.sizes().begin(), sample.sizes().end());
            auto g1 = at::detail::createCPUGenerator(42);
            auto g2 = at::detail::createCPUGenerator(42);
            at::Tensor loop_one = loops->sample({1}, g1);
            EXPECT_EQ(loop_one.sizes(), c10::IntArrayRef(one));
            EXPECT_TRUE(torch::equal(loop_one, ops->sample({1}, g2)));
          }
          at::Tensor log_prob = ops->log_prob(sample);
          EXPECT_TRUE(log_prob.requires_grad());
          expect_close(fast_log_prob, log_prob.detach(), tol);
        }
      }
    }
  }
  // The draw's checks: an infinite logit makes NaN probabilities.
  at::Tensor bad = f32({0, INFINITY, 1});
  for (bool grad : {false, true}) {
    auto dist = OneHotCategorical::from_logits(
        grad ? bad.clone().requires_grad_() : bad);
    EXPECT_THROWS_WITH(
        dist->sample(),
        c10::Error,
        "probability tensor contains either `inf`, `nan` or element < 0");
  }
  // An index out of range names the value's shape, as torch's ops do.
  auto dist = Categorical::from_logits(torch::zeros({2, 3}));
  EXPECT_THROWS_WITH(
      dist->log_prob(torch::tensor({0, 3}, torch::kLong)),
      c10::ValueError,
      "Expected value argument of shape torch.Size([2]) to be within the "
      "support (IntegerInterval(lower_bound=0, upper_bound=2)) of the "
      "distribution Categorical");
}

TEST(ProbabilisticTest, OneHotCategoricalIsTorchRLs) {
  at::Tensor logits = torch::log(f32({1, 3, 1, 2, 2, 1})).reshape({2, 3});
  auto dist = OneHotCategorical::from_logits(logits);
  EXPECT_EQ(dist->batch_shape(), std::vector<int64_t>{2});
  EXPECT_EQ(dist->event_shape(), std::vector<int64_t>{});
  at::Tensor mode = dist->mode();
  EXPECT_EQ(mode.scalar_type(), torch::kLong);
  // TorchRL's mode marks every maximal entry.
  EXPECT_TRUE(
      torch::equal(mode, torch::tensor({{0, 1, 0}, {1, 1, 0}}, torch::kLong)));
  EXPECT_TRUE(torch::equal(dist->deterministic_sample(), mode));
  at::Tensor one_hot = torch::tensor({{0, 1, 0}, {0, 0, 1}}, torch::kLong);
  expect_close(dist->log_prob(one_hot), f32({std::log(0.6f), std::log(0.2f)}));
  at::Tensor sample = dist->sample({4});
  EXPECT_EQ(sample.sizes(), (std::vector<int64_t>{4, 2, 3}));
  EXPECT_EQ(sample.scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(sample.sum(-1), torch::ones({4, 2}, torch::kLong)));
  EXPECT_THROWS_WITH(
      dist->log_prob(torch::zeros({2, 4}, torch::kLong)),
      c10::ValueError,
      "OneHotCategorical.log_prob expects one-hot values whose last dim is 3, "
      "got shape torch.Size([2, 4])");
  // TorchRL drops a last dim of 1.
  auto squeezed = OneHotCategorical::from_logits(torch::zeros({4, 1}));
  EXPECT_EQ(squeezed->num_events(), 4);
  EXPECT_EQ(squeezed->batch_shape(), std::vector<int64_t>{});
}

TEST(ProbabilisticTest, OneHotCategoricalOfTorchHasAnEventDimAndFloatSamples) {
  auto dist = std::dynamic_pointer_cast<OneHotCategorical>(make_distribution(
      "torch.distributions.OneHotCategorical",
      Json::object(),
      {{"probs", f32({0.25f, 0.75f})}}));
  ASSERT_NE(dist, nullptr);
  EXPECT_EQ(dist->event_shape(), std::vector<int64_t>{2});
  EXPECT_EQ(dist->sample().scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(dist->mode(), f32({0, 1})));
  expect_close(dist->mean(), f32({0.25f, 0.75f}));
}

TEST(ProbabilisticTest, NormalFormulasAndSampleMoments) {
  Normal dist(f32({0.5f, -1.f}), f32({2.f, 0.5f}));
  at::Tensor x = f32({1.f, 0.f});
  at::Tensor expected = -((x - dist.loc()).pow(2)) / (2 * dist.scale().pow(2)) -
                        dist.scale().log() - 0.5 * std::log(2 * M_PI);
  expect_close(dist.log_prob(x), expected);
  expect_close(
      dist.entropy(), 0.5 + 0.5 * std::log(2 * M_PI) + dist.scale().log());
  EXPECT_TRUE(torch::equal(dist.mode(), dist.loc()));
  EXPECT_TRUE(torch::equal(dist.deterministic_sample(), dist.loc()));
  torch::manual_seed(1);
  at::Tensor s = dist.sample({50000});
  // Mean within 4 sigma / sqrt(n), variance within 3%.
  expect_close(s.mean(0), dist.loc(), 4 * 2.0 / std::sqrt(50000.));
  expect_close(s.var(0), dist.scale().pow(2), 0.03 * 4);
  at::Tensor r = dist.rsample({50000});
  expect_close(r.mean(0), dist.loc(), 4 * 2.0 / std::sqrt(50000.));
  EXPECT_THROWS_WITH(
      Normal(f32({0.f}), f32({0.f})),
      c10::ValueError,
      "Expected parameter scale (Tensor of shape torch.Size([1])) of "
      "distribution Normal to satisfy the constraint "
      "GreaterThan(lower_bound=0.0), but found invalid values");
}

TEST(ProbabilisticTest, TanhNormalDeterministicSampleLogProbAndBounds) {
  at::Tensor loc = f32({0.3f, -2.f, 10.f});
  at::Tensor scale = f32({0.5f, 1.f, 0.1f});
  TanhNormal dist(loc, scale);
  EXPECT_EQ(dist.batch_shape(), std::vector<int64_t>{});
  EXPECT_EQ(dist.event_shape(), std::vector<int64_t>{3});
  // tanh(10) rounds to 1 in float32: the safe tanh clamps it to 1 - 1e-6.
  expect_close(
      dist.deterministic_sample(),
      f32({std::tanh(0.3f), std::tanh(-2.f), 1.f - 1e-6f}));
  // log_prob of y = tanh(x): Normal log-prob of x minus log(1 - y^2),
  // summed over the event dim.
  at::Tensor x = f32({0.1f, -0.4f, 1.f});
  at::Tensor y = x.tanh();
  at::Tensor expected =
      (Normal(loc, scale).log_prob(x) - (1 - y.pow(2)).log()).sum();
  EXPECT_NEAR(dist.log_prob(y).item<double>(), expected.item<double>(), 1e-4);
  EXPECT_THROWS_WITH(
      dist.mode(),
      c10::Error,
      "The distribution TanhNormal has not analytical mode");
  EXPECT_THROWS_WITH(
      dist.mean(),
      c10::NotImplementedError,
      "TanhNormal does not have a closed form formula for the average");

  TanhNormal bounded(
      loc,
      scale,
      TanhNormalOptions()
          .low(at::scalar_tensor(-2.0))
          .high(at::scalar_tensor(4.0)));
  expect_close(
      bounded.deterministic_sample(),
      1.0 + 3.0 * f32({std::tanh(0.3f), std::tanh(-2.f), 1.f - 1e-6f}),
      1e-5);
  torch::manual_seed(3);
  at::Tensor s = bounded.sample({20000});
  EXPECT_TRUE((s >= -2).all().item<bool>() && (s <= 4).all().item<bool>());
  // The pre-image of the samples is the base Normal.
  at::Tensor pre = ((s - 1.0) / 3.0).clamp(-1 + 1e-6, 1 - 1e-6).atanh();
  expect_close(pre.mean(0).narrow(0, 0, 2), loc.narrow(0, 0, 2), 0.03);
  expect_close(pre.std(0).narrow(0, 0, 2), scale.narrow(0, 0, 2), 0.03);
  EXPECT_EQ(bounded.log_prob(s).sizes(), std::vector<int64_t>{20000});
  EXPECT_TRUE(torch::isfinite(bounded.log_prob(s)).all().item<bool>());

  EXPECT_THROWS_WITH(
      TanhNormal(
          loc,
          scale,
          TanhNormalOptions()
              .low(at::scalar_tensor(1.0))
              .high(at::scalar_tensor(1.0))),
      c10::Error,
      "TanhNormal high values must be strictly greater than low values");
  EXPECT_THROWS_WITH(
      TanhNormal(loc, f32({0.f, 1.f, 1.f})),
      c10::ValueError,
      "GreaterThan(lower_bound=1e-06)");
  EXPECT_THROWS_WITH(
      dist.log_prob(f32({0.f, 0.f})),
      c10::ValueError,
      "The right-most size of value must match event_shape");
}

TEST(ProbabilisticTest, DeltaPutsAllMassOnItsParameter) {
  at::Tensor param = f32({1.f, 2.f, 3.f, 4.f}).reshape({2, 2});
  Delta dist(param);
  EXPECT_EQ(dist.batch_shape(), std::vector<int64_t>{2});
  EXPECT_EQ(dist.event_shape(), std::vector<int64_t>{2});
  at::Tensor value = param.clone();
  value[1][0] = 3.5f;
  at::Tensor lp = dist.log_prob(value);
  EXPECT_EQ(lp[0].item<float>(), std::numeric_limits<float>::infinity());
  EXPECT_EQ(lp[1].item<float>(), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(torch::equal(dist.sample({3}), param.expand({3, 2, 2})));
  EXPECT_TRUE(torch::equal(dist.mode(), param));
  EXPECT_TRUE(torch::equal(dist.deterministic_sample(), param));
  EXPECT_THROWS_WITH(dist.entropy(), c10::NotImplementedError, "Delta.entropy");
}

TEST(ProbabilisticTest, FactoryAcceptsPythonNamesAndRejectsUnknownOnes) {
  const DistributionTensors logits{{"logits", torch::zeros({3})}};
  for (const char* name :
       {"Categorical",
        "torch.distributions.Categorical",
        "torch.distributions.categorical.Categorical"}) {
    EXPECT_EQ(
        make_distribution(name, Json::object(), logits)->name(), "Categorical");
  }
  EXPECT_EQ(
      make_distribution(
          "torchrl.modules.distributions.discrete.OneHotCategorical",
          Json::object(),
          logits)
          ->name(),
      "OneHotCategorical");
  auto tanh = make_distribution(
      "torchrl.modules.distributions.continuous.TanhNormal",
      Json::parse(R"({"low": -3, "high": 3, "event_dims": 1})"),
      {{"loc", torch::zeros({3})}, {"scale", torch::ones({3})}});
  expect_close(tanh->deterministic_sample(), torch::zeros({3}));
  auto normal = make_distribution(
      "torch.distributions.Normal",
      Json::parse(R"({"scale": 2})"),
      {{"loc", torch::zeros({2})}});
  expect_close(std::dynamic_pointer_cast<Normal>(normal)->scale(), f32({2, 2}));

  EXPECT_THROWS_WITH(
      make_distribution("Beta", Json::object(), logits),
      c10::ValueError,
      "unknown distribution class 'Beta'");
  EXPECT_THROWS_WITH(
      make_distribution("mypkg.Categorical", Json::object(), logits),
      c10::ValueError,
      "unknown distribution class 'mypkg.Categorical'");
  EXPECT_THROWS_WITH(
      make_distribution("Categorical", Json::parse(R"({"temp": 1})"), logits),
      c10::ValueError,
      "Categorical got an unexpected keyword argument 'temp'");
  EXPECT_THROWS_WITH(
      make_distribution(
          "Categorical",
          Json::object(),
          {{"logits", torch::zeros({3})}, {"probs", torch::ones({3})}}),
      c10::ValueError,
      "either `probs` or `logits` must be specified, but not both");
  EXPECT_THROWS_WITH(
      make_distribution(
          "TanhNormal",
          Json::parse(R"({"tanh_loc": 1})"),
          {{"loc", torch::zeros({3})}, {"scale", torch::ones({3})}}),
      c10::ValueError,
      "TanhNormal: the argument 'tanh_loc' must be a boolean, got 1");
  EXPECT_THROWS_WITH(
      make_distribution("Normal", Json::object(), {{"loc", torch::zeros({3})}}),
      c10::ValueError,
      "Normal: the argument 'scale' is missing");
}

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
