// tensor_class.h: the TensorDict ops a TensorClass forwards (indexing, shape
// ops, stack and cat, apply, arithmetic, reductions, casts), the reserved field
// names they imply, and generic code over a dict or an instance.
#include <tensordict/map.h>
#include <tensordict/tensor_class.h>

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include "support.h"
#include "tensor_class_support.h"

// Its own namespace, so that test files can share a unity batch.
namespace tensor_class_ops_test {

using namespace tensordict;
using namespace tensordict::indexing;
using tensor_class_testing::Fast;
using tensor_class_testing::Frozen;
using tensor_class_testing::Holder;
using tensor_class_testing::Inner;
using tensor_class_testing::make_holder;
using tensor_class_testing::make_trajectory;
using tensor_class_testing::Trajectory;
using namespace tensordict::testing;  // NOLINT(google-build-using-namespace)

// --- ops return the struct ---------------------------------------------------

TEST(TensorClassTest, IndexingReturnsTheStruct) {
  Trajectory t = make_trajectory();
  Trajectory first = t.index({0});
  EXPECT_EQ(first.batch_dims(), 0);
  EXPECT_TRUE(torch::equal(first.obs(), torch::arange(3, torch::kFloat)));
  EXPECT_EQ(first.task(), "reach");
  EXPECT_EQ(first.inner().x().sizes(), c10::IntArrayRef({2}));
  Trajectory some = t.index({Slice(1, 3)});
  EXPECT_EQ(some.batch_size(), c10::IntArrayRef({2}));
  // Views: writing through the index writes the original.
  first.obs().fill_(-1);
  EXPECT_EQ(t.obs()[0][0].item<float>(), -1.0f);
  Trajectory masked = t.index({torch::tensor({true, false, true, false})});
  EXPECT_EQ(masked.batch_size(), c10::IntArrayRef({2}));
}

TEST(TensorClassTest, IndexPutWritesEveryField) {
  Trajectory t = make_trajectory();
  Trajectory src = make_trajectory(2).apply(
      [](const at::Tensor& x) { return torch::full_like(x, 5); });
  t.index_put_({Slice(0, 2)}, src);
  EXPECT_EQ(t.obs()[1][2].item<float>(), 5.0f);
  EXPECT_EQ(t.obs()[2][0].item<float>(), 6.0f);
  EXPECT_EQ(t.inner().x()[0][0].item<float>(), 5.0f);
  t.index_put_({3}, 0);
  EXPECT_EQ(t.action()[3].item<int64_t>(), 0);
}

TEST(TensorClassTest, ShapeOpsReturnTheStruct) {
  Trajectory t = make_trajectory();
  Trajectory r = t.reshape({2, 2});
  EXPECT_EQ(r.obs().sizes(), c10::IntArrayRef({2, 2, 3}));
  EXPECT_EQ(r.inner().x().sizes(), c10::IntArrayRef({2, 2, 2}));
  EXPECT_EQ(r.flatten().batch_size(), c10::IntArrayRef({4}));
  EXPECT_EQ(t.unsqueeze(0).batch_size(), c10::IntArrayRef({1, 4}));
  EXPECT_EQ(t.unsqueeze(0).squeeze(0).batch_size(), c10::IntArrayRef({4}));
  EXPECT_EQ(r.permute({1, 0}).obs().sizes(), c10::IntArrayRef({2, 2, 3}));
  EXPECT_EQ(r.transpose(0, 1).batch_size(), c10::IntArrayRef({2, 2}));
  EXPECT_EQ(t.expand({3, 4}).obs().sizes(), c10::IntArrayRef({3, 4, 3}));
  EXPECT_EQ(t.view({4, 1}).batch_size(), c10::IntArrayRef({4, 1}));
  EXPECT_EQ(t.unflatten(0, {2, 2}).batch_size(), c10::IntArrayRef({2, 2}));
  EXPECT_EQ(t.narrow(0, 1, 2).obs()[0][0].item<float>(), 3.0f);
  EXPECT_EQ(t.flip({0}).obs()[0][0].item<float>(), 9.0f);
  EXPECT_EQ(t.repeat({2}).batch_size(), c10::IntArrayRef({8}));
}

TEST(TensorClassTest, UnbindSplitAndChunkGiveStructs) {
  Trajectory t = make_trajectory();
  std::vector<Trajectory> items = t.unbind(0);
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[2].obs()[0].item<float>(), 6.0f);
  std::vector<Trajectory> parts = t.split(3);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].batch_size(), c10::IntArrayRef({1}));
  EXPECT_EQ(
      t.split(std::vector<int64_t>{1, 3})[1].batch_size(),
      c10::IntArrayRef({3}));
  EXPECT_EQ(t.chunk(2).size(), 2u);
}

TEST(TensorClassTest, StackAndCatTakeVectorsOfStructs) {
  std::vector<Trajectory> items = make_trajectory().unbind(0);
  Trajectory stacked = stack(items);
  EXPECT_EQ(stacked.batch_size(), c10::IntArrayRef({4}));
  EXPECT_TRUE(torch::equal(stacked.obs(), make_trajectory().obs()));
  // Equal strings stack into a NonTensorStack that still reads as one value.
  EXPECT_TRUE(stacked.get("task").is_non_tensor_stack());
  EXPECT_EQ(stacked.task(), "reach");
  Trajectory two = stack(std::vector<Trajectory>{items[0], items[1]}, 0);
  EXPECT_EQ(two.inner().x().sizes(), c10::IntArrayRef({2, 2}));
  Trajectory joined =
      cat(std::vector<Trajectory>{make_trajectory(2), make_trajectory(3)});
  EXPECT_EQ(joined.batch_size(), c10::IntArrayRef({5}));
  EXPECT_EQ(joined.obs().size(0), 5);
  items[1].set_task("other");
  Trajectory mixed = stack(items);
  EXPECT_THROWS_EXACTLY(
      mixed.task(),
      c10::TypeError,
      "field 'task' of Trajectory holds NonTensorStack whose elements differ; "
      "read them with get(), not a string");
  EXPECT_EQ(
      mixed.get("task").non_tensor(),
      Json({"reach", "other", "reach", "reach"}));
}

TEST(TensorClassTest, ApplyToCloneAndCompare) {
  Trajectory t = make_trajectory();
  Trajectory doubled = t.apply([](const at::Tensor& x) { return x * 2; });
  EXPECT_EQ(doubled.obs()[1][0].item<float>(), 6.0f);
  EXPECT_EQ(doubled.task(), "reach");
  Trajectory summed = t.apply(
      [](const at::Tensor& a, const at::Tensor& b) { return a + b; }, doubled);
  EXPECT_EQ(summed.obs()[1][0].item<float>(), 9.0f);
  Trajectory as_double = t.to(torch::kDouble);
  EXPECT_EQ(as_double.obs().scalar_type(), torch::kDouble);
  EXPECT_EQ(as_double.inner().x().scalar_type(), torch::kDouble);
  Trajectory moved = t.to(at::TensorOptions().device(c10::kCPU));
  EXPECT_EQ(moved.device(), c10::Device(c10::kCPU));
  // A DeviceType, a Device and a string each name one overload.
  for (const Trajectory& m :
       {t.to(torch::kMeta), t.to(c10::Device("meta")), t.to("meta")}) {
    EXPECT_EQ(m.device(), c10::Device("meta"));
    EXPECT_EQ(m.obs().device(), c10::Device("meta"));
    EXPECT_EQ(m.inner().x().device(), c10::Device("meta"));
    EXPECT_EQ(m.task(), "reach");
  }
  Trajectory copy = t.clone();
  EXPECT_NE(copy.obs().data_ptr(), t.obs().data_ptr());
  EXPECT_TRUE(equal(copy, t));
  Trajectory same = t == copy;
  EXPECT_TRUE(same.all());
  EXPECT_TRUE(same.obs().all().item<bool>());
  Trajectory diff = t != doubled;
  EXPECT_TRUE(diff.obs()[1].all().item<bool>());
  EXPECT_FALSE(diff.obs()[0][0].item<bool>());
  EXPECT_EQ(t.detach().obs().data_ptr(), t.obs().data_ptr());
  EXPECT_THROWS_WITH(
      t.apply([](const at::Tensor& x) { return x.sum(); }),
      c10::Error,
      "batch dimension mismatch");
}

TEST(TensorClassTest, CopiesAliasAndCloneIsDeep) {
  Trajectory t = make_trajectory();
  Trajectory alias = t;
  alias.set_task("changed");
  EXPECT_EQ(t.task(), "changed");
  EXPECT_TRUE(alias.is_same(t));
  Trajectory deep = t.clone();
  deep.set_task("again");
  EXPECT_EQ(t.task(), "changed");
}

TEST(TensorClassTest, MaskedOpsAndWhereReturnTheStruct) {
  Trajectory t = make_trajectory();
  const at::Tensor mask = torch::tensor({true, false, true, false});
  Trajectory picked = t.masked_select(mask);
  EXPECT_EQ(picked.batch_size(), c10::IntArrayRef({2}));
  Trajectory filled = t.masked_fill(mask, 0);
  EXPECT_EQ(filled.obs()[0][1].item<float>(), 0.0f);
  EXPECT_EQ(filled.obs()[1][1].item<float>(), 4.0f);
  Trajectory zeros =
      t.apply([](const at::Tensor& x) { return torch::zeros_like(x); });
  Trajectory mixed = t.where(mask, zeros);
  EXPECT_EQ(mixed.obs()[1][0].item<float>(), 0.0f);
  EXPECT_EQ(mixed.obs()[2][0].item<float>(), 6.0f);
}

TEST(TensorClassTest, ArithmeticCastsAndOrderingReturnTheStruct) {
  Inner a({{"x", torch::tensor({1.0, 4.0})}}, {2});
  Inner b({{"x", torch::tensor({3.0, 2.0})}}, {2});
  EXPECT_TRUE(torch::equal((a + b).x(), torch::tensor({4.0f, 6.0f})));
  EXPECT_TRUE(torch::equal((a - 1).x(), torch::tensor({0.0f, 3.0f})));
  EXPECT_TRUE(torch::equal((a * b).x(), torch::tensor({3.0f, 8.0f})));
  EXPECT_TRUE(torch::equal((a / 2).x(), torch::tensor({0.5f, 2.0f})));
  EXPECT_TRUE(torch::equal((-a).x(), torch::tensor({-1.0f, -4.0f})));
  EXPECT_TRUE(torch::equal(a.sqrt().x(), torch::tensor({1.0f, 2.0f})));
  EXPECT_TRUE(torch::equal(a.clamp(2, 3).x(), torch::tensor({2.0f, 3.0f})));
  EXPECT_EQ(a.float64().x().scalar_type(), torch::kDouble);
  EXPECT_EQ(a.half().x().scalar_type(), torch::kHalf);
  EXPECT_TRUE(torch::equal((a < b).x(), torch::tensor({true, false})));
  EXPECT_TRUE(torch::equal((a >= b).x(), torch::tensor({false, true})));
  EXPECT_TRUE(torch::equal((a > 2).x(), torch::tensor({false, true})));
  Inner c = a.clone();
  c.add_(b).mul_(2);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({8.0f, 12.0f})));
}

TEST(TensorClassTest, ReductionsNamesAndPaddingReturnTheStruct) {
  Inner a({{"x", torch::tensor({{1.0f, 2.0f}, {3.0f, 4.0f}})}}, {2, 2});
  EXPECT_TRUE(torch::equal(a.sum().x(), torch::tensor(10.0f)));
  Inner rows = a.sum(ReduceOptions().dim({1}));
  EXPECT_EQ(rows.batch_size(), c10::IntArrayRef({2}));
  EXPECT_TRUE(torch::equal(rows.x(), torch::tensor({3.0f, 7.0f})));
  EXPECT_TRUE(torch::equal(a.mean().x(), torch::tensor(2.5f)));
  EXPECT_TRUE(torch::equal(
      a.amax(ReduceOptions().dim({0})).x(), torch::tensor({3.0f, 4.0f})));
  EXPECT_TRUE(torch::equal(a.min().x(), torch::tensor(1.0f)));
  EXPECT_TRUE(torch::equal(a.prod().x(), torch::tensor(24.0f)));
  EXPECT_TRUE(torch::allclose(
      a.var().x(), torch::tensor({1.0f, 2.0f, 3.0f, 4.0f}).var()));
  EXPECT_TRUE(torch::equal((a > 1.5).all(1).x(), torch::tensor({false, true})));
  EXPECT_TRUE((a > 0).all());
  EXPECT_TRUE(torch::equal((a > 3.5).any(0).x(), torch::tensor({false, true})));

  Inner named = a.rename({"rows", "cols"});
  EXPECT_EQ(named.names(), (DimNames{"rows", "cols"}));
  EXPECT_FALSE(a.tensordict().has_names());
  EXPECT_EQ(
      named.rename_by_map({{"cols", "c"}}).names(), (DimNames{"rows", "c"}));
  a.refine_names({"r", std::nullopt});
  EXPECT_EQ(a.names(), (DimNames{"r", std::nullopt}));

  Inner padded = Inner({{"x", torch::ones({2})}}, {2}).pad({1, 0}, -1);
  EXPECT_TRUE(torch::equal(padded.x(), torch::tensor({-1.0f, 1.0f, 1.0f})));
  Inner rolled =
      Inner({{"x", torch::arange(3, torch::kFloat)}}, {3}).roll({1}, {0});
  EXPECT_TRUE(torch::equal(rolled.x(), torch::tensor({2.0f, 0.0f, 1.0f})));
  Inner gathered = Inner({{"x", torch::arange(3, torch::kFloat)}}, {3})
                       .gather(0, torch::tensor({2, 0}));
  EXPECT_TRUE(torch::equal(gathered.x(), torch::tensor({2.0f, 0.0f})));
  Inner twice = Inner({{"x", torch::arange(2, torch::kFloat)}}, {2})
                    .repeat_interleave(2, 0);
  EXPECT_TRUE(torch::equal(twice.x(), torch::tensor({0.0f, 0.0f, 1.0f, 1.0f})));
  Inner filled = Inner({{"x", torch::zeros({2})}}, {2});
  filled.masked_fill_(torch::tensor({false, true}), 4);
  EXPECT_TRUE(torch::equal(filled.x(), torch::tensor({0.0f, 4.0f})));
}

// --- the generated forwarders (TENSORDICT_TENSORCLASS_OPS) ------------------

namespace {

Fast make_fast() {
  return Fast(
      {{"a", torch::tensor({0.25f, 1.5f})},
       {"b", torch::tensor({2.75f, 0.5f})}},
      {2});
}

// Checks `op` and `op_` against torch's op on each field: values, the type
// returned, and that the in-place form writes into and returns the instance.
#define EXPECT_UNARY_FORWARDER(op)                             \
  do {                                                         \
    const Fast f = make_fast();                                \
    static_assert(std::is_same_v<decltype(f.op()), Fast>);     \
    const Fast out = f.op();                                   \
    EXPECT_TRUE(torch::allclose(out.a(), f.a().op())) << #op;  \
    EXPECT_TRUE(torch::allclose(out.b(), f.b().op())) << #op;  \
    EXPECT_FALSE(out.c().has_value()) << #op;                  \
    Fast g = f.clone();                                        \
    static_assert(std::is_same_v<decltype(g.op##_()), Fast&>); \
    EXPECT_EQ(&g.op##_(), &g) << #op "_";                      \
    EXPECT_TRUE(torch::allclose(g.a(), out.a())) << #op "_";   \
    EXPECT_TRUE(torch::allclose(g.b(), out.b())) << #op "_";   \
  } while (false)

}  // namespace

TEST(
    TensorClassTest,
    EveryUnaryMathOpOfTensorDictIsForwardedWithItsInPlaceForm) {
  EXPECT_UNARY_FORWARDER(abs);
  EXPECT_UNARY_FORWARDER(neg);
  EXPECT_UNARY_FORWARDER(exp);
  EXPECT_UNARY_FORWARDER(expm1);
  EXPECT_UNARY_FORWARDER(log);
  EXPECT_UNARY_FORWARDER(log1p);
  EXPECT_UNARY_FORWARDER(sqrt);
  EXPECT_UNARY_FORWARDER(reciprocal);
  EXPECT_UNARY_FORWARDER(sigmoid);
  EXPECT_UNARY_FORWARDER(tanh);
  EXPECT_UNARY_FORWARDER(sin);
  EXPECT_UNARY_FORWARDER(cos);
  EXPECT_UNARY_FORWARDER(sign);
  EXPECT_UNARY_FORWARDER(floor);
  EXPECT_UNARY_FORWARDER(ceil);
  EXPECT_UNARY_FORWARDER(round);
  EXPECT_UNARY_FORWARDER(trunc);
#undef EXPECT_UNARY_FORWARDER
  // Spot values, so that the macro cannot pass by comparing two wrong ops.
  const Fast f = make_fast();
  EXPECT_TRUE(torch::equal(f.neg().a(), torch::tensor({-0.25f, -1.5f})));
  EXPECT_TRUE(torch::equal(f.floor().b(), torch::tensor({2.0f, 0.0f})));
  EXPECT_TRUE(
      torch::allclose(f.reciprocal().a(), torch::tensor({4.0f, 2.0f / 3})));
}

TEST(TensorClassTest, DetachHasItsInPlaceForm) {
  Fast f = make_fast().apply(
      [](const at::Tensor& t) { return t.clone().requires_grad_(true); });
  ASSERT_TRUE(f.a().requires_grad());
  EXPECT_FALSE(f.detach().a().requires_grad());
  EXPECT_TRUE(f.a().requires_grad());
  static_assert(std::is_same_v<decltype(f.detach_()), Fast&>);
  EXPECT_EQ(&f.detach_(), &f);
  EXPECT_FALSE(f.a().requires_grad());
  EXPECT_FALSE(f.b().requires_grad());
}

TEST(TensorClassTest, GeneratedForwardersOfFrozenClassesReturnLockedInstances) {
  Frozen f({{"x", torch::tensor({0.5f, 2.0f})}}, {2});
  static_assert(std::is_same_v<decltype(f.sin()), Frozen>);
  EXPECT_TRUE(f.sin().is_locked());
  EXPECT_TRUE(f.pow(2).is_locked());
  EXPECT_TRUE(f.clamp_min(1).is_locked());
  EXPECT_TRUE(f.view({2, 1}).is_locked());
  // In-place ops write the tensors, which a frozen instance allows.
  f.mul_(2).sqrt_();
  EXPECT_TRUE(torch::allclose(f.x(), torch::tensor({1.0f, 2.0f})));
}

TEST(TensorClassTest, EveryInPlaceArithmeticOpTakesAStructATensorOrAScalar) {
  Inner a({{"x", torch::tensor({1.0f, 4.0f})}}, {2});
  Inner b({{"x", torch::tensor({3.0f, 2.0f})}}, {2});
  const at::Tensor t = torch::tensor({10.0f, 20.0f});

  Inner c = a.clone();
  static_assert(std::is_same_v<decltype(c.sub_(b)), Inner&>);
  EXPECT_EQ(&c.sub_(b), &c);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({-2.0f, 2.0f})));
  c.sub_(t, /*alpha=*/0.5).sub_(1);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({-8.0f, -9.0f})));

  c = a.clone();
  EXPECT_EQ(&c.div_(b), &c);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({1.0f / 3, 2.0f})));
  c = a.clone().div_(t).div_(0.5);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({0.2f, 0.4f})));

  c = a.clone().add_(2, /*alpha=*/3).add_(t);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({17.0f, 30.0f})));
  c = a.clone().mul_(b).mul_(t);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({30.0f, 160.0f})));
  c = a.clone().pow_(b).pow_(0.5);
  EXPECT_TRUE(torch::allclose(c.x(), torch::tensor({1.0f, 4.0f})));
  c = a.clone().pow_(torch::tensor({3.0f, 0.0f}));
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({1.0f, 1.0f})));
}

TEST(TensorClassTest, OutOfPlaceArithmeticTakesATensorAndPow) {
  Inner a({{"x", torch::tensor({1.0f, 4.0f})}}, {2});
  Inner b({{"x", torch::tensor({3.0f, 2.0f})}}, {2});
  const at::Tensor t = torch::tensor({10.0f, 20.0f});
  static_assert(std::is_same_v<decltype(a.add(t)), Inner>);
  EXPECT_TRUE(
      torch::equal(a.add(t, /*alpha=*/2).x(), torch::tensor({21.0f, 44.0f})));
  EXPECT_TRUE(torch::equal(a.sub(t).x(), torch::tensor({-9.0f, -16.0f})));
  EXPECT_TRUE(torch::equal(a.mul(t).x(), torch::tensor({10.0f, 80.0f})));
  EXPECT_TRUE(torch::equal(a.div(t).x(), torch::tensor({0.1f, 0.2f})));
  EXPECT_TRUE(torch::equal(a.pow(b).x(), torch::tensor({1.0f, 16.0f})));
  EXPECT_TRUE(torch::equal(a.pow(2).x(), torch::tensor({1.0f, 16.0f})));
  EXPECT_TRUE(torch::equal(a.pow(t.div(10)).x(), torch::tensor({1.0f, 16.0f})));
  EXPECT_TRUE(torch::equal((a + t).x(), torch::tensor({11.0f, 24.0f})));
  EXPECT_TRUE(torch::equal((a * t).x(), torch::tensor({10.0f, 80.0f})));
  // A tensor operand broadcasts against the batch size, as in TensorDict.
  Inner wide = a.add(torch::ones({3, 1}));
  EXPECT_EQ(wide.batch_size(), c10::IntArrayRef({3, 2}));
  EXPECT_TRUE(torch::equal(wide.x()[2], torch::tensor({2.0f, 5.0f})));
}

TEST(TensorClassTest, CompoundAssignmentOperatorsWorkInPlace) {
  Inner a({{"x", torch::tensor({1.0f, 4.0f})}}, {2});
  Inner b({{"x", torch::tensor({3.0f, 2.0f})}}, {2});
  Inner c = a.clone();
  static_assert(std::is_same_v<decltype(c += b), Inner&>);
  EXPECT_EQ(&(c += b), &c);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({4.0f, 6.0f})));
  c -= 1;
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({3.0f, 5.0f})));
  c *= torch::tensor({2.0f, 3.0f});
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({6.0f, 15.0f})));
  c /= b;
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({2.0f, 7.5f})));
  // Copies alias: the compound operators write through every handle.
  Inner alias = c;
  alias += 1;
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({3.0f, 8.5f})));
}

TEST(TensorClassTest, EveryOrderingComparisonTakesAStructOrAScalar) {
  Inner a({{"x", torch::tensor({1.0f, 4.0f, 2.0f})}}, {3});
  Inner b({{"x", torch::tensor({3.0f, 2.0f, 2.0f})}}, {3});
  static_assert(std::is_same_v<decltype(a <= 2), Inner>);
  EXPECT_TRUE(torch::equal((a <= 2).x(), torch::tensor({true, false, true})));
  EXPECT_TRUE(torch::equal((a >= 2).x(), torch::tensor({false, true, true})));
  EXPECT_TRUE(torch::equal((a < 2).x(), torch::tensor({true, false, false})));
  EXPECT_TRUE(torch::equal((a > 2).x(), torch::tensor({false, true, false})));
  EXPECT_TRUE(torch::equal((a <= b).x(), torch::tensor({true, false, true})));
  EXPECT_TRUE(torch::equal((a > b).x(), torch::tensor({false, true, false})));
  EXPECT_TRUE(torch::equal((a == b).x(), torch::tensor({false, false, true})));
  EXPECT_TRUE(torch::equal((a != 4).x(), torch::tensor({true, false, true})));
}

TEST(TensorClassTest, ClampBoundsHaveInPlaceForms) {
  Inner a({{"x", torch::tensor({-1.0f, 0.5f, 3.0f})}}, {3});
  EXPECT_TRUE(
      torch::equal(a.clamp_min(0).x(), torch::tensor({0.0f, 0.5f, 3.0f})));
  EXPECT_TRUE(
      torch::equal(a.clamp_max(1).x(), torch::tensor({-1.0f, 0.5f, 1.0f})));
  Inner c = a.clone();
  static_assert(std::is_same_v<decltype(c.clamp_min_(0)), Inner&>);
  EXPECT_EQ(&c.clamp_min_(0), &c);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({0.0f, 0.5f, 3.0f})));
  EXPECT_EQ(&c.clamp_max_(1), &c);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({0.0f, 0.5f, 1.0f})));
  c = a.clone();
  EXPECT_EQ(&c.clamp_(std::nullopt, 2), &c);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({-1.0f, 0.5f, 2.0f})));
  EXPECT_THROWS_WITH(
      c.clamp_(std::nullopt, std::nullopt),
      c10::Error,
      "At least one of 'min' or 'max' must not be None");
}

TEST(TensorClassTest, EveryCastOfTensorDictIsForwarded) {
  Inner a({{"x", torch::tensor({1.5f, -2.0f})}}, {2});
  static_assert(std::is_same_v<decltype(a.bfloat16()), Inner>);
  EXPECT_EQ(a.bfloat16().x().scalar_type(), torch::kBFloat16);
  EXPECT_EQ(a.int32().x().scalar_type(), torch::kInt);
  EXPECT_TRUE(torch::equal(a.int32().x(), torch::tensor({1, -2}, torch::kInt)));
  EXPECT_EQ(a.float32().x().scalar_type(), torch::kFloat);
  EXPECT_EQ(a.boolean().x().scalar_type(), torch::kBool);
}

TEST(TensorClassTest, NamedComparisonsAndLogicalOpsAreForwarded) {
  Inner a({{"x", torch::tensor({1.0f, 4.0f, 2.0f})}}, {3});
  Inner b({{"x", torch::tensor({3.0f, 2.0f, 2.0f})}}, {3});
  static_assert(std::is_same_v<decltype(a.le(b)), Inner>);
  EXPECT_TRUE(torch::equal(a.lt(b).x(), torch::tensor({true, false, false})));
  EXPECT_TRUE(torch::equal(a.le(2).x(), torch::tensor({true, false, true})));
  EXPECT_TRUE(torch::equal(a.gt(2).x(), torch::tensor({false, true, false})));
  EXPECT_TRUE(torch::equal(a.ge(b).x(), torch::tensor({false, true, true})));
  const Inner lt = a < 2;
  const Inner ge = a >= b;
  EXPECT_TRUE(torch::equal(lt.logical_not().x(), (a >= 2).x()));
  EXPECT_TRUE(
      torch::equal(lt.logical_or(ge).x(), torch::tensor({true, true, true})));
  EXPECT_TRUE(torch::equal(
      lt.logical_and(ge).x(), torch::tensor({false, false, false})));
}

TEST(TensorClassTest, BroadcastGradAndMemoryForwardersReturnTheStruct) {
  Inner a({{"x", torch::tensor({1.0f, 4.0f})}}, {2});
  Inner wide({{"x", torch::zeros({3, 2})}}, {3, 2});
  static_assert(std::is_same_v<decltype(a.broadcast_to({3, 2})), Inner>);
  EXPECT_EQ(a.broadcast_to({3, 2}).batch_size(), c10::IntArrayRef({3, 2}));
  EXPECT_EQ(a.expand_as(wide).x().sizes(), c10::IntArrayRef({3, 2}));
  EXPECT_TRUE(a.is_contiguous());
  EXPECT_FALSE(a.expand_as(wide).is_contiguous());
  EXPECT_EQ(&a.requires_grad_(), &a);
  EXPECT_TRUE(a.x().requires_grad());
  a.requires_grad_(false);
  EXPECT_FALSE(a.x().requires_grad());
  EXPECT_EQ(&a.share_memory_(), &a);
  EXPECT_TRUE(a.is_shared());
}

// Every arithmetic, comparison and reduction op that TensorDict declares
// (read from its header, so a new op there fails this test until
// TENSORDICT_TENSORCLASS_OPS forwards it) is a TensorClass member.
TEST(TensorClassTest, EveryTensorDictMathOpHasAForwarder) {
  const auto header =
      std::filesystem::path(__FILE__).parent_path().parent_path() / "include" /
      "tensordict" / "tensor_dict.h";
  const std::string text = read_text(header.string());
  const size_t begin = text.find("// --- arithmetic and comparison");
  const size_t end = text.find("// --- locking");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::string section = text.substr(begin, end - begin);
  auto is_member = [](std::string_view name) {
    for (std::string_view member :
         tensordict::detail::kTensorClassMemberNames) {
      if (member == name) {
        return true;
      }
    }
    for (std::string_view op : tensordict::detail::kTensorClassOperatorNames) {
      if (op == name) {
        return true;
      }
    }
    return false;
  };
  // `reduce` gives one tensor, not a dict, so it has no TensorClass form.
  const std::set<std::string> not_forwarded = {"reduce"};
  std::set<std::string> seen;
  std::istringstream lines(section);
  std::string line;
  const std::regex declaration(
      R"(^\s*(?:\[\[nodiscard\]\]\s*)?(?:TensorDict&?|bool|at::Tensor)\s+(operator\S+|\w+)\()");
  for (; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, declaration)) {
      const std::string name = match[1];
      if (not_forwarded.count(name) == 0) {
        seen.insert(name);
        EXPECT_TRUE(is_member(name))
            << "TensorDict::" << name << " has no TensorClass forwarder";
      }
    }
  }
  // The ops of TensorDict's op table are declared by expanding it, not
  // spelled out in the header: take their names from the table.
#define TC_TEST_OP_NAMES(kind, name) TC_TEST_OP_NAMES_##kind(name)
#define TC_TEST_OP_NAMES_1(name) #name,
#define TC_TEST_OP_NAMES_2(name) #name, #name "_",
#define TC_TEST_OP_NAMES_UNARY_PAIR TC_TEST_OP_NAMES_2
#define TC_TEST_OP_NAMES_ALPHA_PAIR TC_TEST_OP_NAMES_2
#define TC_TEST_OP_NAMES_BINARY_PAIR TC_TEST_OP_NAMES_2
#define TC_TEST_OP_NAMES_BOUND_PAIR TC_TEST_OP_NAMES_2
#define TC_TEST_OP_NAMES_COMPARE TC_TEST_OP_NAMES_1
#define TC_TEST_OP_NAMES_LOGICAL TC_TEST_OP_NAMES_1
#define TC_TEST_OP_NAMES_REDUCE TC_TEST_OP_NAMES_1
  for (const char* name : {TENSORDICT_DICT_OPS(TC_TEST_OP_NAMES)}) {
    seen.insert(name);
    EXPECT_TRUE(is_member(name))
        << "TensorDict::" << name << " has no TensorClass forwarder";
  }
#undef TC_TEST_OP_NAMES_REDUCE
#undef TC_TEST_OP_NAMES_LOGICAL
#undef TC_TEST_OP_NAMES_COMPARE
#undef TC_TEST_OP_NAMES_BOUND_PAIR
#undef TC_TEST_OP_NAMES_BINARY_PAIR
#undef TC_TEST_OP_NAMES_ALPHA_PAIR
#undef TC_TEST_OP_NAMES_UNARY_PAIR
#undef TC_TEST_OP_NAMES_2
#undef TC_TEST_OP_NAMES_1
#undef TC_TEST_OP_NAMES
  EXPECT_NE(section.find("TENSORDICT_DICT_MATH_OPS("), std::string::npos);
  EXPECT_NE(section.find("TENSORDICT_DICT_REDUCE_OPS("), std::string::npos);
  // The scan and the table found the ops (a changed header layout must not
  // pass).
  for (const char* name :
       {"add",
        "sub_",
        "div_",
        "le",
        "ge",
        "logical_and",
        "trunc_",
        "clamp_max_",
        "operator<=",
        "operator/=",
        "sum",
        "any"}) {
    EXPECT_EQ(seen.count(name), 1u) << name;
  }
}

// --- the reserved field names come from the same list ------------------------

namespace {

// True when `T` has a member named `name`, however overloaded: a class
// deriving from `T` and from a struct with an `int name` finds the name
// twice, which makes `&Probe::name` ill-formed.
#define TC_TEST_DEFINE_MEMBER_PROBE(name)                                     \
  struct ProbeFallback_##name {                                               \
    int name;                                                                 \
  };                                                                          \
  template <typename T>                                                       \
  struct ProbeMixed_##name : T, ProbeFallback_##name {};                      \
  template <typename T, typename = void>                                      \
  struct HasMember_##name : std::true_type {};                                \
  template <typename T>                                                       \
  struct HasMember_##name<                                                    \
      T,                                                                      \
      std::void_t<decltype(&ProbeMixed_##name<T>::name)>> : std::false_type { \
  };

#define TC_TEST_PROBE(kind, name) TC_TEST_PROBE_##kind(name)
#define TC_TEST_PROBE_MEMBER(name)              \
  TC_TEST_DEFINE_MEMBER_PROBE(name)             \
  static_assert(                                \
      HasMember_##name<Inner>::value,           \
      "TENSORDICT_TENSORCLASS_OPS lists " #name \
      " as a MEMBER, but TensorClass has no such member");
#define TC_TEST_PROBE_PYTHON(name)
#define TC_TEST_PROBE_COPY(name)
#define TC_TEST_PROBE_INPLACE(name)
#define TC_TEST_PROBE_SIZES(name)
#define TC_TEST_PROBE_DIMS(name)
#define TC_TEST_PROBE_REDUCE(name)
#define TC_TEST_PROBE_UNARY_PAIR(name)
#define TC_TEST_PROBE_ALPHA_PAIR(name)
#define TC_TEST_PROBE_BINARY_PAIR(name)
#define TC_TEST_PROBE_BOUND_PAIR(name)
#define TC_TEST_PROBE_COMPARE(name)
#define TC_TEST_PROBE_LOGICAL(name)
#define TC_TEST_PROBE_QUERY(name)
#define TC_TEST_PROBE_SUBSET(name)
#define TC_TEST_PROBE_KEYS(name)
#define TC_TEST_PROBE_MUTATE(name)
#define TC_TEST_PROBE_TAKE(name)
#define TC_TEST_PROBE_CHECKED(name)
#define TC_TEST_PROBE_FACTORY(name)

// Every MEMBER entry of the list names a member of TensorClass (checked at
// compile time, one static_assert per entry).
TENSORDICT_TENSORCLASS_OPS(TC_TEST_PROBE)

// The probe also tells a name that is not a member: `cat` is a PYTHON entry
// (reserved, no C++ member), and `unsqueeze_` is no name at all; `keys`, a
// generated template, is a member.
TC_TEST_DEFINE_MEMBER_PROBE(cat)
TC_TEST_DEFINE_MEMBER_PROBE(keys)
TC_TEST_DEFINE_MEMBER_PROBE(unsqueeze_)
static_assert(!HasMember_cat<Inner>::value);
static_assert(HasMember_keys<Inner>::value);
static_assert(!HasMember_unsqueeze_<Inner>::value);
TC_TEST_DEFINE_MEMBER_PROBE(squeeze)
static_assert(HasMember_squeeze<Inner>::value);

constexpr bool reserved_names_are_unique() {
  const auto& names = tensordict::detail::kReservedFieldNames;
  constexpr size_t count = std::size(tensordict::detail::kReservedFieldNames);
  for (size_t i = 0; i < count; ++i) {
    for (size_t j = i + 1; j < count; ++j) {
      if (names[i] == names[j]) {
        return false;
      }
    }
  }
  return true;
}

#undef TC_TEST_PROBE
#undef TC_TEST_PROBE_MEMBER
#undef TC_TEST_DEFINE_MEMBER_PROBE

}  // namespace

TEST(TensorClassTest, ReservedNamesAreTheListedMembersAndTheirInPlaceForms) {
  static_assert(reserved_names_are_unique());
  // Generated pairs reserve both forms; hand-written members and Python's
  // TensorDict names are reserved too.
  for (const char* name :
       {"sub_",   "div_",       "pow",       "pow_",       "sin",    "sin_",
        "trunc_", "detach_",    "clamp_min", "clamp_max_", "clamp_", "bfloat16",
        "int32",  "lock_",      "zero_",     "view",       "flip",   "sum",
        "index",  "state_dict", "keys",      "float"}) {
    EXPECT_TRUE(tensordict::detail::is_reserved_field_name(name)) << name;
  }
  for (const char* name :
       {"obs", "x", "reward", "data", "sin__", "lt_", "", "Sum"}) {
    EXPECT_FALSE(tensordict::detail::is_reserved_field_name(name)) << name;
  }
}

TEST(TensorClassTest, EveryNameReservedBeforeTheOpListIsStillReserved) {
  // The hand-kept list that TENSORDICT_TENSORCLASS_OPS replaced.
  for (const char* name :
       {"all",
        "any",
        "apply",
        "batch_dims",
        "batch_size",
        "bfloat16",
        "boolean",
        "cat",
        "chunk",
        "clone",
        "contiguous",
        "copy",
        "copy_",
        "cpu",
        "cuda",
        "del_",
        "detach",
        "detach_",
        "device",
        "dim",
        "double",
        "empty",
        "exclude",
        "expand",
        "fields",
        "fill_",
        "flatten",
        "flip",
        "float",
        "float32",
        "float64",
        "from_dict",
        "from_tensordict",
        "gather",
        "get",
        "half",
        "index",
        "index_put_",
        "int",
        "int32",
        "is_locked",
        "is_memmap",
        "is_none",
        "is_shared",
        "items",
        "keys",
        "load",
        "load_memmap",
        "load_memmap_",
        "lock_",
        "masked_fill",
        "memmap",
        "memmap_",
        "named_apply",
        "names",
        "narrow",
        "ndim",
        "numel",
        "permute",
        "pop",
        "repeat",
        "repr",
        "reshape",
        "save",
        "saved_path",
        "select",
        "set",
        "shape",
        "size",
        "split",
        "squeeze",
        "stack",
        "tensordict",
        "to",
        "to_dict",
        "to_tensordict",
        "transpose",
        "unbind",
        "unflatten",
        "unlock_",
        "unsqueeze",
        "update",
        "values",
        "view",
        "where",
        "zero_",
        "state_dict",
        "tensor_class_info",
        "load_state_dict",
        "sum",
        "mean",
        "std",
        "var",
        "prod",
        "amax",
        "amin",
        "max",
        "min",
        "rename",
        "rename_",
        "rename_by_map",
        "refine_names",
        "pad",
        "roll",
        "repeat_interleave",
        "masked_fill_",
        "add",
        "sub",
        "mul",
        "div",
        "add_",
        "mul_",
        "abs",
        "exp",
        "log",
        "sqrt",
        "clamp",
        "masked_select",
        "is_same",
        "apply_"}) {
    EXPECT_TRUE(tensordict::detail::is_reserved_field_name(name)) << name;
  }
}

namespace {

struct Signal : TensorClass<Signal, ClassFlags::kShadow> {
  TENSORDICT_FIELDS(Signal, sin, x)
};

}  // namespace

TEST(TensorClassTest, ShadowAllowsAFieldNamedAfterAGeneratedForwarder) {
  Signal s({{"sin", torch::ones({2})}, {"x", torch::zeros({2})}}, {2});
  at::Tensor field = s.sin();
  EXPECT_TRUE(torch::equal(field, torch::ones({2})));
  // The other forwarders are still there.
  EXPECT_TRUE(torch::equal(s.cos().x(), torch::ones({2})));
}

// --- TensorDict's members with TensorDict's arguments (QUERY to TAKE) ------

namespace {

// Code written once for a TensorDict or an instance: no `.tensordict()`.
template <typename Dict>
std::vector<std::string> generic_edit(Dict& dict, const Dict& other) {
  std::vector<std::string> out;
  for (const NestedKey& key : dict.keys(/*include_nested=*/true, true, true)) {
    out.push_back(key.to_string());
  }
  out.push_back(std::to_string(dict.values().size()));
  out.push_back(std::to_string(dict.items().size()));
  out.push_back(std::to_string(dict.select({"a"}).keys().size()));
  out.push_back(std::to_string(dict.exclude({"a"}).keys().size()));
  out.push_back(std::to_string(dict.empty().keys().size()));
  dict.update(other);
  dict.fill_("a", 5.0);
  const Value popped = dict.pop("a");
  out.push_back(std::to_string(popped.tensor().sum().template item<float>()));
  dict.del_({"inner"});
  out.push_back(std::to_string(dict.keys().size()));
  const auto sd = dict.state_dict(StateDictOptions().prefix("p."));
  out.push_back(std::to_string(sd.size()));
  return out;
}

}  // namespace

TEST(TensorClassTest, KeysValuesAndItemsAreTheDicts) {
  const Holder h = make_holder();
  EXPECT_EQ(h.keys(), h.tensordict().keys());
  EXPECT_EQ(h.keys(true, true, true), h.tensordict().keys(true, true, true));
  ASSERT_EQ(h.values().size(), 3u);
  EXPECT_TRUE(torch::equal(h.values()[0].tensor(), h.a()));
  const auto items = h.items(/*include_nested=*/true, /*leaves_only=*/true);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[1].first, NestedKey({"inner", "x"}));
  EXPECT_TRUE(torch::equal(items[1].second.tensor(), h.inner().x()));
}

TEST(TensorClassTest, SelectExcludeAndEmptyGiveTheClassWithTheOthersUnset) {
  const Holder h = make_holder();
  // As Python: `C(fields={a: f32[], inner: None, s: None})`.
  const Holder selected = h.select({"a"});
  EXPECT_TRUE(selected.a().is_same(h.a()));
  EXPECT_TRUE(selected.is_none("inner"));
  EXPECT_TRUE(selected.is_none("s"));
  EXPECT_THROW((void)h.select({"nope"}), KeyError);
  EXPECT_TRUE(h.select({"a", "nope"}, /*strict=*/false).is_none("inner"));
  const Holder excluded = h.exclude(std::vector<NestedKey>{"a", "s"});
  EXPECT_TRUE(excluded.is_none("a"));
  EXPECT_TRUE(torch::equal(excluded.inner().x(), h.inner().x()));
  const Holder empty = h.empty();
  EXPECT_TRUE(empty.is_none("a"));
  EXPECT_EQ(empty.batch_size(), h.batch_size());
  EXPECT_EQ(h.empty(/*recurse=*/true).keys(), std::vector<NestedKey>{"inner"});
}

TEST(TensorClassTest, UpdatePopDelAndFillEditTheFields) {
  Holder h = make_holder();
  Holder other = make_holder();
  other.set("a", torch::tensor({7.0f, 8.0f}));
  EXPECT_EQ(&h.update(other), &h);  // an instance passes as its dict
  EXPECT_TRUE(torch::equal(h.a(), torch::tensor({7.0f, 8.0f})));
  EXPECT_EQ(&h.fill_("a", 2.5), &h);
  EXPECT_TRUE(torch::equal(h.a(), torch::full({2}, 2.5f)));
  const Value popped = h.pop("a");
  EXPECT_TRUE(torch::equal(popped.tensor(), torch::full({2}, 2.5f)));
  EXPECT_TRUE(h.is_none("a"));
  EXPECT_FALSE(
      h.pop("a", Value(torch::zeros({2}))).tensor().sum().item<float>());
  EXPECT_EQ(&h.del_("inner"), &h);
  EXPECT_TRUE(h.is_none("inner"));
  EXPECT_THROW(h.del_("inner"), KeyError);
  // A locked (or frozen) instance refuses edits, as the dict does.
  Holder locked = make_holder();
  locked.lock_();
  EXPECT_THROW(locked.del_("a"), std::exception);
  EXPECT_FALSE(locked.is_none("a"));
}

TEST(TensorClassTest, NamedApplyAndConsolidateGiveTheClass) {
  const Holder h = make_holder();
  const Holder doubled =
      h.named_apply([](const NestedKey& key, const at::Tensor& t) {
        return key == NestedKey({"inner", "x"}) ? t * 2 : t;
      });
  EXPECT_TRUE(torch::equal(doubled.inner().x(), torch::tensor({6.0f, 8.0f})));
  EXPECT_TRUE(torch::equal(doubled.a(), h.a()));
  EXPECT_EQ(doubled.s(), std::optional<std::string>("hi"));
  const Holder packed = h.consolidate();
  EXPECT_TRUE(packed.is_consolidated());
  EXPECT_TRUE(torch::equal(packed.inner().x(), h.inner().x()));
  EXPECT_EQ(packed.s(), std::optional<std::string>("hi"));
}

TEST(TensorClassTest, GenericCodeRunsOnADictAndOnAnInstance) {
  TensorDict td = make_holder().to_tensordict();
  const TensorDict td_other = make_holder().to_tensordict();
  Holder h = make_holder();
  const Holder h_other = make_holder();
  // The class keeps `s` out of the state dict (its metadata holds it).
  const std::vector<std::string> expected{
      "'a'", "('inner', 'x')", "3", "3", "1", "2", "0", "10.000000", "1", "0"};
  EXPECT_EQ(generic_edit(td, td_other), expected);
  EXPECT_EQ(generic_edit(h, h_other), expected);
}

// --- the rest of TensorDict's API, generic over a dict and an instance -----

namespace {

std::string str(const at::Tensor& t) {
  std::ostringstream out;
  for (float v : std::vector<float>(
           t.to(torch::kFloat).contiguous().data_ptr<float>(),
           t.to(torch::kFloat).contiguous().data_ptr<float>() + t.numel())) {
    out << v << ' ';
  }
  return out.str();
}

// Each member of the list, called as TensorDict spells it; the results are
// written as text, so a dict and an instance can be compared.
template <typename Dict>
std::vector<std::string> generic_rest(Dict& dict, const Dict& other) {
  std::vector<std::string> out;
  for (const NestedKey& key : dict.flatten_keys().keys()) {
    out.push_back(key.to_string());
  }
  out.push_back(dict.flatten_keys("/").keys()[1].to_string());
  out.push_back(std::to_string(dict.unflatten_keys().keys(true).size()));
  out.push_back(std::to_string(dict.num_keys()));
  out.push_back(
      std::to_string(dict.size(0)) + "," + std::to_string(dict.size(-1)) +
      " dim " + std::to_string(dict.dim()));
  out.push_back(dict.is_empty() ? "empty" : "not empty");
  for (const Item& item : dict.to_dict()) {
    out.push_back(
        item.key().to_string() +
        (item.value() == nullptr
             ? " nested"
             : " " + std::to_string(static_cast<int>(item.value()->kind()))));
  }
  out.push_back(dict.get_non_tensor("s").dump());
  dict.set_non_tensor("s", Json("yo"));
  out.push_back(dict.get_non_tensor("s").dump());
  out.push_back(dict.get_non_tensor("nope", Json(7)).dump());
  // `a` aliases the field: the in-place writes show through it.
  const at::Tensor a = dict.values()[0].tensor();
  const std::string before = str(a);
  dict.set_("a", torch::tensor({5.0f, 6.0f}));
  dict.set_({"inner", "x"}, torch::tensor({7.0f, 8.0f}));
  out.push_back(before + str(a) + str(dict.flatten_keys().get("inner.x")));
  dict.update_(other);
  out.push_back(str(a) + (a.is_same(dict.values()[0].tensor()) ? "same" : ""));
  out.push_back(str(dict.setdefault("a", torch::zeros({2})).tensor()));
  StateDict destination;
  destination.insert("z", torch::zeros({1}));
  StateDict& written =
      dict.state_dict(destination, StateDictOptions().prefix("p."));
  out.push_back(&written == &destination ? "destination" : "other");
  for (const auto& key : destination.keys()) {
    out.push_back(key);
  }
  const auto twice = [](const TensorDict& chunk) {
    return chunk.select({"a"}).mul(2);
  };
  const TensorDict mapped =
      dict.map(twice, MapOptions().num_workers(2).chunksize(1));
  out.push_back(str(mapped.get("a")));
  for (const TensorDict& piece :
       dict.map_iter(twice, MapOptions().num_workers(2).chunksize(1))) {
    out.push_back(str(piece.get("a")));
  }
  dict.clear();
  out.push_back(dict.is_empty() ? "empty" : "not empty");
  out.push_back(std::to_string(dict.num_keys()));
  return out;
}

}  // namespace

TEST(TensorClassTest, TheRestOfTheDictApiRunsOnADictAndOnAnInstance) {
  TensorDict td = make_holder().to_tensordict();
  const TensorDict td_other = make_holder().to_tensordict() * 3;
  Holder h = make_holder();
  const Holder h_other = make_holder() * 3;
  const std::string leaf =
      std::to_string(static_cast<int>(Value(torch::zeros({})).kind()));
  const std::string text =
      std::to_string(static_cast<int>(Value(NonTensorData("x")).kind()));
  // Each group ends with the members it comes from.
  const std::vector<std::string> expected{
      "'a'",
      "'inner.x'",
      "'s'",        // flatten_keys
      "'inner/x'",  // flatten_keys("/")
      "4",          // unflatten_keys
      "3",
      "2,2 dim 1",
      "not empty",  // size, size(dim), dim, is_empty
      "'a' " + leaf,
      "'inner' nested",
      "'s' " + text,  // to_dict
      "\"hi\"",
      "\"yo\"",
      "7",             // get_non_tensor, set_non_tensor
      "1 2 5 6 7 8 ",  // set_
      "3 6 same",      // update_
      "3 6 ",          // setdefault
      "destination",
      "z",
      "p.a",
      "p.inner.x",  // state_dict(destination)
      "6 12 ",      // map
      "6 ",
      "12 ",  // map_iter
      "empty",
      "0"};  // clear
  EXPECT_EQ(generic_rest(td, td_other), expected);
  EXPECT_EQ(generic_rest(h, h_other), expected);
}

TEST(TensorClassTest, TheForwardedMembersKeepTheClassRules) {
  Holder h = make_holder();
  EXPECT_EQ(h.dim(), 1);
  EXPECT_EQ(Holder().dim(), 0);
  // size() is the batch size and size(dim) one dim, as Python's
  // (`h.size()` is torch.Size([2])); num_keys() counts the set fields.
  h.set("s", nullptr);
  EXPECT_EQ(h.size(), c10::IntArrayRef({2}));
  EXPECT_EQ(h.num_keys(), 2u);
  EXPECT_THROW((void)h.size(1), c10::IndexError);
  // flatten_keys gives the flat TensorDict (Python 0.15.3 raises
  // ValueError: "Keys from the tensordict ({'a', 'inner.x', 's'}) must
  // correspond to the class attributes"); unflatten_keys gives the class.
  static_assert(std::is_same_v<decltype(h.flatten_keys()), TensorDict>);
  static_assert(std::is_same_v<decltype(h.unflatten_keys()), Holder>);
  EXPECT_TRUE(h.flatten_keys().get("inner.x").is_same(h.inner().x()));
  // setdefault: a set field is returned, an unset one set by the class's
  // rules (Python also adds a name that is not a field: KeyError here).
  EXPECT_TRUE(h.setdefault("a", torch::zeros({2})).tensor().is_same(h.a()));
  EXPECT_EQ(h.setdefault("s", "dflt").non_tensor_data().data(), Json("dflt"));
  EXPECT_EQ(h.s(), std::optional<std::string>("dflt"));
  EXPECT_THROWS_WITH(
      h.setdefault("bogus", torch::zeros({2})),
      KeyError,
      "Holder has no field 'bogus'");
  h.set("s", nullptr);
  EXPECT_THROWS_WITH(
      h.setdefault("s", nullptr),
      c10::ValueError,
      "setdefault: the field 's' of Holder is unset and the default is None");
  // set_non_tensor keeps to the fields and their kinds (Python sets any
  // name, and turns a tensor field into a string).
  EXPECT_THROW(h.set_non_tensor("bogus", Json("x")), KeyError);
  EXPECT_THROW(h.set_non_tensor("a", Json("x")), c10::TypeError);
  EXPECT_TRUE(h.a().defined());
  // set_ and update_ write in place; a missing entry is TensorDict's
  // KeyError (Python: 'key "s" not found in TensorDict ...').
  EXPECT_THROW(h.set_("s", torch::zeros({2})), KeyError);
  // clear unsets every field, as Python's (which prints them as None).
  h.clear();
  EXPECT_TRUE(h.is_none("a"));
  EXPECT_TRUE(h.is_none("inner"));
  EXPECT_THROW((void)h.a(), c10::ValueError);
  // A frozen instance is locked: clear refuses.
  Frozen frozen({{"x", torch::zeros({2})}}, {2});
  EXPECT_THROW(frozen.clear(), c10::Error);
  EXPECT_FALSE(frozen.is_none("x"));
}

namespace {

struct Linear : TensorClass<Linear> {
  TENSORDICT_FIELDS(Linear, weight, bias)
};

// from_module / to_module, called as TensorDict spells them.
template <typename Dict>
std::vector<std::string> generic_module(torch::nn::Module& module) {
  std::vector<std::string> out;
  const Dict params = Dict::from_module(module);
  out.push_back(std::to_string(params.keys().size()));
  const Dict zeros =
      params.apply([](const at::Tensor& t) { return torch::zeros_like(t); });
  const Dict previous = zeros.to_module(module);
  out.push_back(str(module.named_parameters()["bias"]));
  out.push_back(str(previous.values()[1].tensor()));
  (void)previous.to_module(module);
  out.push_back(str(module.named_parameters()["bias"]));
  return out;
}

}  // namespace

TEST(TensorClassTest, FromModuleAndToModuleGoThroughTheClass) {
  torch::nn::Linear linear(3, 2);
  {
    torch::NoGradGuard no_grad;
    linear->bias.copy_(torch::tensor({1.0f, 2.0f}));
  }
  // Python 0.15.3: `Lin.from_module(nn.Linear(3, 2))` is a Lin (weight,
  // bias), and `to_module` returns the previous values as a Lin.
  static_assert(std::is_same_v<decltype(Linear::from_module(*linear)), Linear>);
  const std::vector<std::string> expected{"2", "0 0 ", "1 2 ", "1 2 "};
  EXPECT_EQ(generic_module<TensorDict>(*linear), expected);
  EXPECT_EQ(generic_module<Linear>(*linear), expected);
  // A class whose fields are not the module's: Python's ValueError.
  EXPECT_THROW((void)Inner::from_module(*linear), c10::ValueError);
}

}  // namespace tensor_class_ops_test
