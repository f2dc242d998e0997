// Tests of include/tensordict/distributions.h: the distributions' formulas
// on parameters whose values are known in closed form, sampling statistics,
// the loops for small CPU parameters against torch's ops, and the
// factory's errors. The comparison with torch.distributions and TorchRL on
// the same parameters is tests/rl/probabilistic_interop.py.

#include <tensordict/distributions.h>
#include <tensordict/json.h>

#include <cmath>
#include <vector>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace distributions_test {

using namespace tensordict;      // NOLINT(google-build-using-namespace)
using namespace tensordict::nn;  // NOLINT(google-build-using-namespace)

using tensordict::testing::expect_close;
using tensordict::testing::f32;

TEST(DistributionsTest, CategoricalLogProbModeEntropyFromProbs) {
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

TEST(DistributionsTest, CategoricalFromLogitsBatchesAndBroadcastsLogProb) {
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

TEST(DistributionsTest, CategoricalSampleFrequenciesMatchProbs) {
  torch::manual_seed(0);
  auto dist = Categorical::from_probs(f32({0.1f, 0.2f, 0.7f}));
  const int64_t n = 40000;
  at::Tensor samples = dist->sample({n});
  at::Tensor counts = torch::bincount(samples, {}, 3).to(torch::kDouble) / n;
  // Four standard deviations of a frequency at n = 40000 are under 0.01.
  expect_close(counts, torch::tensor({0.1, 0.2, 0.7}, torch::kDouble), 0.01);
}

TEST(DistributionsTest, SamplingIsReproducibleWithManualSeedAndGenerators) {
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

TEST(DistributionsTest, CategoricalLogProbRejectsValuesOutsideTheSupport) {
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
TEST(DistributionsTest, LoopsForSmallCpuParametersAgreeWithTorchOps) {
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

TEST(DistributionsTest, OneHotCategoricalIsTorchRLs) {
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

TEST(DistributionsTest, OneHotCategoricalOfTorchHasAnEventDimAndFloatSamples) {
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

TEST(DistributionsTest, NormalFormulasAndSampleMoments) {
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

TEST(DistributionsTest, TanhNormalDeterministicSampleLogProbAndBounds) {
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

TEST(DistributionsTest, DeltaPutsAllMassOnItsParameter) {
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

TEST(DistributionsTest, FactoryAcceptsPythonNamesAndRejectsUnknownOnes) {
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

}  // namespace distributions_test
