// Arithmetic, comparisons and logical ops (declared in tensor_dict.h).
#include <tensordict/tensor_dict.h>

#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "tensor_dict_support.h"

// Its own namespace, so that test files can share a unity batch.
namespace tensor_dict_math_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)

namespace {

// batch [2], named (x): a float [2, 3]; n {b: int64 [2]}; s "txt".
TensorDict make_td() {
  TensorDict td(
      {{"a", torch::arange(6, torch::kFloat).view({2, 3}) + 1}},
      {2},
      std::nullopt,
      {"x"});
  td.set("n", TensorDict({{"b", torch::arange(2)}}, {2}));
  td.set_non_tensor("s", "txt");
  return td;
}

// NaN where `expected` has NaN counts as equal.
void expect_leaf(
    const TensorDict& td, const NestedKey& key, const at::Tensor& expected) {
  tensordict::testing::expect_leaf(
      td, key, expected, 1e-6, 1e-6, /*equal_nan=*/true);
}

}  // namespace

TEST(TensorDictMathTest, AddsDictsLeafByLeaf) {
  TensorDict td = make_td();
  TensorDict other = td.clone();
  TensorDict sum = td + other;
  EXPECT_EQ(sum.batch_size(), c10::IntArrayRef({2}));
  EXPECT_EQ(sum.names(), DimNames{"x"});
  expect_leaf(sum, "a", td.get("a") + td.get("a"));
  expect_leaf(sum, {"n", "b"}, td.get({"n", "b"}) * 2);
  EXPECT_EQ(sum.get_non_tensor("s"), Json("txt"));
  EXPECT_FALSE(sum.get("a").is_same(td.get("a")));
  expect_leaf(td.add(other, /*alpha=*/2), "a", td.get("a") * 3);
  expect_leaf(td.sub(other), "a", torch::zeros({2, 3}));
  expect_leaf(td - other, {"n", "b"}, torch::zeros({2}, torch::kLong));
  expect_leaf(td * other, "a", td.get("a") * td.get("a"));
  expect_leaf(td / other, {"n", "b"}, td.get({"n", "b"}) / td.get({"n", "b"}));
  expect_leaf(
      td.pow(other), {"n", "b"}, td.get({"n", "b"}).pow(td.get({"n", "b"})));
}

TEST(TensorDictMathTest, BroadcastsBatchSizesOfTwoDicts) {
  TensorDict a({{"x", torch::ones({1, 3})}}, {1});
  TensorDict b({{"x", torch::arange(12, torch::kFloat).view({4, 3})}}, {4});
  TensorDict sum = a + b;
  EXPECT_EQ(sum.batch_size(), c10::IntArrayRef({4}));
  expect_leaf(sum, "x", b.get("x") + 1);
  EXPECT_THROWS_EXACTLY(
      TensorDict({2}) + TensorDict({3}),
      c10::Error,
      "the batch size [2] does not broadcast with the other TensorDict's "
      "batch size [3]: size 2 against 3 at dim -1");
}

TEST(TensorDictMathTest, DictOperandsMustHaveTheSameKeys) {
  TensorDict td = make_td();
  TensorDict missing = td.exclude({"a"});
  EXPECT_THROWS_EXACTLY(
      td + missing,
      KeyError,
      "key \"a\" not found in TensorDict with keys ['n', 's']");
  EXPECT_THROWS_WITH(missing + td, KeyError, "key \"a\" not found");
  TensorDict extra = td.clone();
  extra.set({"n", "z"}, torch::zeros({2}));
  EXPECT_THROWS_WITH(td.mul(extra), KeyError, "(while looking up ('n', 'z'))");
  // In place, nothing is written before the keys are matched.
  TensorDict copy = td.clone();
  EXPECT_THROWS_WITH(copy.add_(extra), KeyError, "key \"z\" not found");
  tensordict::testing::expect_td_equal(copy, td);
}

TEST(TensorDictMathTest, KindMismatchesNameTheOp) {
  TensorDict a({{"x", torch::zeros({2})}}, {2});
  TensorDict b({{"x", TensorDict({2})}}, {2});
  EXPECT_THROWS_EXACTLY(
      a + b,
      c10::TypeError,
      "cannot add entry 'x': it is a Tensor in tensordict 0 and a "
      "TensorDict in tensordict 1");
  EXPECT_THROWS_WITH(a.sub_(b), c10::TypeError, "cannot subtract entry 'x'");
  EXPECT_THROWS_WITH(a * b, c10::TypeError, "cannot multiply entry 'x'");
  EXPECT_THROWS_WITH(a.lt(b), c10::TypeError, "cannot compare entry 'x'");
  EXPECT_THROWS_WITH(
      a.logical_and(b),
      c10::TypeError,
      "cannot compute the logical and of entry 'x'");
}

TEST(TensorDictMathTest, ScalarOperandsCombineWithEveryLeaf) {
  TensorDict td = make_td();
  expect_leaf(td + 1, "a", td.get("a") + 1);
  expect_leaf(td + 1, {"n", "b"}, td.get({"n", "b"}) + 1);
  // Python-number promotion: an int leaf plus a float becomes float.
  expect_leaf(td + 0.5, {"n", "b"}, td.get({"n", "b"}) + 0.5);
  expect_leaf(td.add(1, /*alpha=*/3), "a", td.get("a") + 3);
  expect_leaf(td - 2, "a", td.get("a") - 2);
  expect_leaf(td.sub(2, /*alpha=*/3), "a", td.get("a") - 6);
  expect_leaf(td * 3, {"n", "b"}, td.get({"n", "b"}) * 3);
  expect_leaf(td / 2, {"n", "b"}, td.get({"n", "b"}) / 2);
  expect_leaf(td.pow(2), {"n", "b"}, td.get({"n", "b"}).pow(2));
  expect_leaf(td.pow(0.5), "a", td.get("a").pow(0.5));
  // Scalar on the left.
  expect_leaf(2 + td, "a", td.get("a") + 2);
  expect_leaf(2 - td, "a", 2 - td.get("a"));
  expect_leaf(3 * td, {"n", "b"}, td.get({"n", "b"}) * 3);
  // Python gives float here; torch C++'s `2 / int_tensor` would throw.
  expect_leaf(2 / td, {"n", "b"}, torch::tensor({INFINITY, 2.0f}));
  EXPECT_EQ((2 / td).get_non_tensor("s"), Json("txt"));
  EXPECT_EQ((2 / td).names(), DimNames{"x"});
}

TEST(TensorDictMathTest, TensorOperandsLineUpWithTheBatchDims) {
  // batch [2, 3]; a [2, 3, 4]; n has batch [2, 3, 5].
  TensorDict td({{"a", torch::zeros({2, 3, 4})}}, {2, 3});
  td.set("n", TensorDict({{"b", torch::zeros({2, 3, 5})}}, {2, 3, 5}));
  const at::Tensor t = torch::tensor({10.0f, 20.0f, 30.0f});
  TensorDict sum = td + t;
  EXPECT_EQ(sum.batch_size(), c10::IntArrayRef({2, 3}));
  expect_leaf(sum, "a", t.view({1, 3, 1}).expand({2, 3, 4}));
  expect_leaf(sum, {"n", "b"}, t.view({1, 3, 1}).expand({2, 3, 5}));
  EXPECT_EQ(sum.get_tensordict("n").batch_size(), c10::IntArrayRef({2, 3, 5}));
  // A tensor with more dims grows the batch size, as in Python.
  TensorDict grown = td + torch::ones({4, 1, 3});
  EXPECT_EQ(grown.batch_size(), c10::IntArrayRef({4, 2, 3}));
  EXPECT_EQ(grown.get("a").sizes(), c10::IntArrayRef({4, 2, 3, 4}));
  EXPECT_EQ(
      grown.get_tensordict("n").batch_size(), c10::IntArrayRef({4, 2, 3, 5}));
  // Tensor on the left.
  expect_leaf(t - td, "a", t.view({1, 3, 1}).expand({2, 3, 4}));
  expect_leaf(td.mul(t), "a", torch::zeros({2, 3, 4}));
  EXPECT_THROWS_EXACTLY(
      td + torch::ones({4}),
      c10::Error,
      "the batch size [2, 3] does not broadcast with a tensor of shape [4]: "
      "size 3 against 4 at dim -1");
}

TEST(TensorDictMathTest, InPlaceOpsWriteIntoTheLeaves) {
  TensorDict td = make_td();
  td.set({"n", "b"}, torch::arange(2, torch::kFloat));
  const at::Tensor a = td.get("a");
  const at::Tensor a0 = a.clone();
  const at::Tensor b0 = td.get({"n", "b"}).clone();
  td += 1;
  EXPECT_TRUE(td.get("a").is_same(a));
  expect_leaf(td, "a", a0 + 1);
  expect_leaf(td, {"n", "b"}, b0 + 1);
  td -= td.clone();
  expect_leaf(td, "a", torch::zeros({2, 3}));
  td.add_(2).mul_(3);
  expect_leaf(td, "a", torch::full({2, 3}, 6.0f));
  td *= torch::tensor({1.0f, 2.0f});
  expect_leaf(
      td, "a", torch::tensor({{6.0f, 6.0f, 6.0f}, {12.0f, 12.0f, 12.0f}}));
  td.select({"a"}) /= 6;
  expect_leaf(td, "a", torch::tensor({{1.0f, 1.0f, 1.0f}, {2.0f, 2.0f, 2.0f}}));
  td.sub_(1, /*alpha=*/2).pow_(2);
  expect_leaf(td, "a", torch::tensor({{1.0f, 1.0f, 1.0f}, {0.0f, 0.0f, 0.0f}}));
  // Works on a locked dict, like any in-place write.
  td.lock_();
  td.add_(td.clone());
  expect_leaf(td, "a", torch::tensor({{2.0f, 2.0f, 2.0f}, {0.0f, 0.0f, 0.0f}}));
  td.unlock_();
  // torch's own checks: an int leaf cannot hold a float result.
  EXPECT_THROWS_WITH(
      make_td().div_(2),
      c10::Error,
      "result type Float can't be cast to the desired output type Long");
  EXPECT_THROWS_EXACTLY(
      td.add_(torch::ones({4, 2})),
      c10::Error,
      "an in-place op cannot change the batch size: expected a tensor of "
      "shape that broadcasts to [2], got [4, 2]");
  EXPECT_THROWS_WITH(
      td.mul_(TensorDict({3})),
      c10::Error,
      "does not broadcast with the other TensorDict's batch size [3]");
}

TEST(TensorDictMathTest, UnaryOpsMatchTorch) {
  TensorDict td({{"a", torch::randn({2, 3})}}, {2}, std::nullopt, {"x"});
  td.set({"n", "b"}, torch::rand({2}) + 0.5);
  td.set_non_tensor("s", "txt");
  using Op = at::Tensor (*)(const at::Tensor&);
  const std::vector<std::tuple<std::string, TensorDict, Op>> cases = {
      {"abs", td.abs(), [](const at::Tensor& t) { return t.abs(); }},
      {"neg", td.neg(), [](const at::Tensor& t) { return t.neg(); }},
      {"-", -td, [](const at::Tensor& t) { return -t; }},
      {"exp", td.exp(), [](const at::Tensor& t) { return t.exp(); }},
      {"expm1", td.expm1(), [](const at::Tensor& t) { return t.expm1(); }},
      {"log", td.log(), [](const at::Tensor& t) { return t.log(); }},
      {"log1p", td.log1p(), [](const at::Tensor& t) { return t.log1p(); }},
      {"sqrt", td.sqrt(), [](const at::Tensor& t) { return t.sqrt(); }},
      {"reciprocal",
       td.reciprocal(),
       [](const at::Tensor& t) { return t.reciprocal(); }},
      {"sigmoid",
       td.sigmoid(),
       [](const at::Tensor& t) { return t.sigmoid(); }},
      {"tanh", td.tanh(), [](const at::Tensor& t) { return t.tanh(); }},
      {"sin", td.sin(), [](const at::Tensor& t) { return t.sin(); }},
      {"cos", td.cos(), [](const at::Tensor& t) { return t.cos(); }},
      {"sign", td.sign(), [](const at::Tensor& t) { return t.sign(); }},
      {"floor", td.floor(), [](const at::Tensor& t) { return t.floor(); }},
      {"ceil", td.ceil(), [](const at::Tensor& t) { return t.ceil(); }},
      {"round", td.round(), [](const at::Tensor& t) { return t.round(); }},
      {"trunc", td.trunc(), [](const at::Tensor& t) { return t.trunc(); }},
  };
  for (const auto& [name, result, op] : cases) {
    SCOPED_TRACE(name);
    EXPECT_EQ(result.names(), DimNames{"x"});
    EXPECT_EQ(result.get_non_tensor("s"), Json("txt"));
    expect_leaf(result, "a", op(td.get("a")));
    expect_leaf(result, {"n", "b"}, op(td.get({"n", "b"})));
  }
}

TEST(TensorDictMathTest, InPlaceUnaryOpsMatchTorch) {
  TensorDict td({{"a", torch::randn({2, 3})}}, {2});
  td.set({"n", "b"}, torch::rand({2}) + 0.5);
  const TensorDict before = td.clone();
  const at::Tensor a = td.get("a");
  EXPECT_EQ(&td.abs_(), &td);
  EXPECT_TRUE(td.get("a").is_same(a));
  expect_leaf(td, "a", before.get("a").abs());
  td.sqrt_().log1p_().neg_().exp_().expm1_().sigmoid_().tanh_();
  at::Tensor expected =
      before.get("a").abs().sqrt().log1p().neg().exp().expm1().sigmoid().tanh();
  expect_leaf(td, "a", expected);
  td.mul_(10).sin_().cos_().reciprocal_().log_();
  expected = (expected * 10).sin().cos().reciprocal().log();
  expect_leaf(td, "a", expected);
  td.sign_();
  expect_leaf(td, "a", expected.sign());
  TensorDict r({{"a", torch::tensor({-1.5f, -0.5f, 0.5f, 1.5f, 2.5f})}}, {5});
  expect_leaf(
      r.clone().floor_(), "a", torch::tensor({-2.0f, -1.0f, 0.0f, 1.0f, 2.0f}));
  expect_leaf(
      r.clone().ceil_(), "a", torch::tensor({-1.0f, -0.0f, 1.0f, 2.0f, 3.0f}));
  expect_leaf(
      r.clone().round_(), "a", torch::tensor({-2.0f, -0.0f, 0.0f, 2.0f, 2.0f}));
  expect_leaf(
      r.clone().trunc_(), "a", torch::tensor({-1.0f, -0.0f, 0.0f, 1.0f, 2.0f}));
  TensorDict ints({{"i", torch::arange(3)}}, {3});
  EXPECT_THROWS_WITH(
      ints.sqrt_(), c10::Error, "result type Float can't be cast");
}

// The trigonometric, hyperbolic, log, error-function and gamma ops. Python:
//   x = TensorDict(a=torch.tensor([0.5, 0.25]),
//                  n=TensorDict(i=torch.tensor([1, 2])), batch_size=[2])
//   x.tan()["a"]  # [0.5463025, 0.2553419]; x.tan()["n", "i"].dtype float32
//   x.log2()["a"]  # [-1., -2.]; x.erfc()["n", "i"]  # [0.1572992, 0.004677735]
//   x.asin()["n", "i"]  # [1.570796, nan]
TEST(TensorDictMathTest, MoreUnaryOpsMatchPython) {
  TensorDict x({{"a", torch::tensor({0.5f, 0.25f})}}, {2});
  x.set("n", TensorDict({{"i", torch::tensor({1, 2}, torch::kLong)}}, {2}));
  using Op = std::function<at::Tensor(const at::Tensor&)>;
  const std::vector<std::tuple<std::string, TensorDict, std::vector<float>, Op>>
      cases = {
          {"tan",
           x.tan(),
           {0.5463025f, 0.2553419f},
           [](const at::Tensor& t) { return t.tan(); }},
          {"asin",
           x.asin(),
           {0.5235988f, 0.2526802f},
           [](const at::Tensor& t) { return t.asin(); }},
          {"acos",
           x.acos(),
           {1.047198f, 1.318116f},
           [](const at::Tensor& t) { return t.acos(); }},
          {"atan",
           x.atan(),
           {0.4636476f, 0.2449787f},
           [](const at::Tensor& t) { return t.atan(); }},
          {"sinh",
           x.sinh(),
           {0.5210953f, 0.2526123f},
           [](const at::Tensor& t) { return t.sinh(); }},
          {"cosh",
           x.cosh(),
           {1.127626f, 1.031413f},
           [](const at::Tensor& t) { return t.cosh(); }},
          {"log2",
           x.log2(),
           {-1.0f, -2.0f},
           [](const at::Tensor& t) { return t.log2(); }},
          {"log10",
           x.log10(),
           {-0.30103f, -0.60206f},
           [](const at::Tensor& t) { return t.log10(); }},
          {"erf",
           x.erf(),
           {0.5204999f, 0.2763264f},
           [](const at::Tensor& t) { return t.erf(); }},
          {"erfc",
           x.erfc(),
           {0.4795001f, 0.7236736f},
           [](const at::Tensor& t) { return t.erfc(); }},
          {"lgamma",
           x.lgamma(),
           {0.5723649f, 1.288023f},
           [](const at::Tensor& t) { return t.lgamma(); }},
      };
  for (const auto& [name, result, values, op] : cases) {
    SCOPED_TRACE(name);
    EXPECT_EQ(result.batch_size(), c10::IntArrayRef({2}));
    expect_leaf(result, "a", torch::tensor(values));
    // Integer leaves come back as float32, as torch (and Python) give them.
    expect_leaf(result, {"n", "i"}, op(x.get({"n", "i"})));
    EXPECT_EQ(result.get({"n", "i"}).scalar_type(), torch::kFloat);
  }
  expect_leaf(x.erfc(), {"n", "i"}, torch::tensor({0.1572992f, 0.004677735f}));
  EXPECT_TRUE(std::isnan(x.asin().get({"n", "i"})[1].item<float>()));
  EXPECT_FLOAT_EQ(x.get("a")[0].item<float>(), 0.5f);  // not in place
}

// The in-place forms write into the same tensors. Python:
//   f = TensorDict(a=torch.tensor([-1.75, 2.5]), batch_size=[2])
//   f.frac()["a"]  # [-0.75, 0.5]; f.clone().frac_()["a"]  # the same
//   TensorDict(i=torch.tensor([1, 2])).frac()
//   # NotImplementedError: "frac_cpu" not implemented for 'Long'
//   TensorDict(i=torch.tensor([1, 2])).tan_()
//   # RuntimeError: result type Float can't be cast to ... Long
TEST(TensorDictMathTest, MoreInPlaceUnaryOpsMatchPython) {
  TensorDict f({{"a", torch::tensor({-1.75f, 2.5f})}}, {2});
  expect_leaf(f.frac(), "a", torch::tensor({-0.75f, 0.5f}));
  TensorDict g = f.clone();
  const at::Tensor a = g.get("a");
  EXPECT_EQ(&g.frac_(), &g);
  EXPECT_TRUE(g.get("a").is_same(a));
  expect_leaf(g, "a", torch::tensor({-0.75f, 0.5f}));
  TensorDict h({{"a", torch::tensor({0.5f, 0.25f})}}, {2});
  h.log2_();
  expect_leaf(h, "a", torch::tensor({-1.0f, -2.0f}));
  const TensorDict before = TensorDict({{"a", torch::rand({3}) * 0.5}}, {3});
  TensorDict c = before.clone();
  c.tan_().atan_().sinh_().cosh_().log10_().erf_().erfc_().lgamma_();
  c.asin_().acos_();
  const at::Tensor expected = before.get("a")
                                  .tan()
                                  .atan()
                                  .sinh()
                                  .cosh()
                                  .log10()
                                  .erf()
                                  .erfc()
                                  .lgamma()
                                  .asin()
                                  .acos();
  expect_leaf(c, "a", expected);
  TensorDict ints({{"i", torch::tensor({1, 2}, torch::kLong)}}, {2});
  EXPECT_THROWS_WITH(
      (void)ints.frac(), c10::Error, "\"frac_cpu\" not implemented for 'Long'");
  EXPECT_THROWS_WITH(
      ints.tan_(), c10::Error, "result type Float can't be cast");
}

TEST(TensorDictMathTest, ClampWithOptionalBounds) {
  TensorDict td = make_td();  // a = 1..6
  expect_leaf(td.clamp(2, 4), "a", td.get("a").clamp(2, 4));
  expect_leaf(td.clamp(std::nullopt, 3), "a", td.get("a").clamp_max(3));
  expect_leaf(td.clamp(5), "a", td.get("a").clamp_min(5));
  expect_leaf(td.clamp_min(1), {"n", "b"}, torch::tensor({1, 1}));
  expect_leaf(td.clamp_max(0), {"n", "b"}, torch::tensor({0, 0}));
  EXPECT_EQ(td.clamp(0, 1).get_non_tensor("s"), Json("txt"));
  TensorDict copy = td.clone();
  copy.clamp_(2, 4);
  expect_leaf(copy, "a", td.get("a").clamp(2, 4));
  copy.clamp_min_(3).clamp_max_(3);
  expect_leaf(copy, "a", torch::full({2, 3}, 3.0f));
  EXPECT_THROWS_EXACTLY(
      td.clamp(std::nullopt),
      c10::Error,
      "torch.clamp: At least one of 'min' or 'max' must not be None");
  EXPECT_THROWS_EXACTLY(
      copy.clamp_(std::nullopt, std::nullopt),
      c10::Error,
      "torch.clamp: At least one of 'min' or 'max' must not be None");
}

TEST(TensorDictMathTest, OrderingComparisonsGiveBoolDicts) {
  TensorDict td = make_td();
  TensorDict other = td.clone();
  other.set("a", torch::full({2, 3}, 3.5f));
  other.set({"n", "b"}, torch::tensor({1, 1}));
  const at::Tensor a = td.get("a");
  const at::Tensor b = td.get({"n", "b"});
  expect_leaf(td < other, "a", a < 3.5);
  expect_leaf(td.lt(other), {"n", "b"}, b < 1);
  expect_leaf(td <= other, {"n", "b"}, b <= 1);
  expect_leaf(td.le(3), "a", a <= 3);
  expect_leaf(td > 3, "a", a > 3);
  expect_leaf(td.gt(other), "a", a > 3.5);
  expect_leaf(td >= other, {"n", "b"}, b >= 1);
  expect_leaf(td.ge(2), "a", a >= 2);
  TensorDict lt = td < 2;
  EXPECT_EQ(lt.names(), DimNames{"x"});
  EXPECT_EQ(lt.get_tensordict("n").batch_size(), c10::IntArrayRef({2}));
  // As in Python, non-tensor data is kept rather than compared.
  EXPECT_EQ(lt.get_non_tensor("s"), Json("txt"));
  EXPECT_THROWS_WITH(
      td < td.exclude({{"n", "b"}}), KeyError, "key \"b\" not found");
}

TEST(TensorDictMathTest, LogicalOps) {
  TensorDict p({{"x", torch::tensor({true, true, false, false})}}, {4});
  p.set({"n", "y"}, torch::tensor({1, 0, 2, 0}));
  TensorDict q({{"x", torch::tensor({true, false, true, false})}}, {4});
  q.set({"n", "y"}, torch::tensor({0, 0, 1, 1}));
  expect_leaf(
      p.logical_and(q), "x", torch::tensor({true, false, false, false}));
  expect_leaf(
      p.logical_and(q), {"n", "y"}, torch::tensor({false, false, true, false}));
  expect_leaf(p.logical_or(q), "x", torch::tensor({true, true, true, false}));
  expect_leaf(
      p.logical_or(q), {"n", "y"}, torch::tensor({true, false, true, true}));
  expect_leaf(p.logical_not(), "x", torch::tensor({false, false, true, true}));
  expect_leaf(
      p.logical_not(), {"n", "y"}, torch::tensor({false, true, false, true}));
  EXPECT_THROWS_WITH(
      p.logical_or(q.exclude({"x"})), KeyError, "key \"x\" not found");
}

}  // namespace tensor_dict_math_test
