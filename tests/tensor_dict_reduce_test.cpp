// Reductions over the batch dims (declared in tensor_dict.h).
#include <tensordict/tensor_dict.h>

#include "tensor_dict_support.h"

// Its own namespace, so that test files can share a unity batch.
namespace tensor_dict_reduce_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)
using tensordict::testing::expect_leaf;

namespace {

// batch [2, 3], named (x, y): a float [2, 3, 4]; n {b} float with batch
// [2, 3, 5]; i int64 [2, 3]; s "txt".
TensorDict make_td() {
  TensorDict td = tensordict::testing::named_2x3_td(/*b_divisor=*/7);
  td.set_non_tensor("s", "txt");
  return td;
}

}  // namespace

TEST(TensorDictReduceTest, WithoutDimReducesEveryElementOfEachLeaf) {
  TensorDict td = make_td();
  td.set("i", torch::arange(6).view({2, 3}));
  const at::Tensor a = td.get("a");
  const at::Tensor b = td.get({"n", "b"});
  TensorDict s = td.sum();
  EXPECT_TRUE(s.batch_size().empty());
  EXPECT_TRUE(s.names().empty());
  EXPECT_TRUE(s.get_tensordict("n").batch_size().empty());
  expect_leaf(s, "a", a.sum());
  expect_leaf(s, {"n", "b"}, b.sum());
  expect_leaf(s, "i", torch::tensor(15));  // int64 stays int64
  EXPECT_EQ(s.get_non_tensor("s"), Json("txt"));
  EXPECT_TRUE(s["s"].non_tensor_data().batch_size().empty());
  expect_leaf(td.prod(), "i", torch::tensor(0));
  expect_leaf(td.amax(), "a", a.amax());
  expect_leaf(td.max(), {"n", "b"}, b.max());
  expect_leaf(td.amin(), "a", a.min());
  expect_leaf(td.min(), "i", torch::tensor(0));
  TensorDict floats = td.exclude({"i"});
  expect_leaf(floats.mean(), "a", a.mean());
  expect_leaf(floats.std(), {"n", "b"}, b.std());
  expect_leaf(floats.var(), "a", a.var());
  expect_leaf(
      floats.std(ReduceOptions().correction(0)),
      "a",
      a.std(/*unbiased=*/false));
  expect_leaf(floats.var(ReduceOptions().correction(0)), "a", a.var(false));
  // mean of an int leaf is torch's error, as in Python.
  EXPECT_THROWS_WITH(
      td.mean(), c10::Error, "mean(): could not infer output dtype");
}

TEST(TensorDictReduceTest, KeepdimWithoutDimKeepsEveryDimAsOne) {
  // Python: td.mean(keepdim=True) has batch [1, 1] and names kept.
  TensorDict m = make_td().mean(ReduceOptions().keepdim(true));
  EXPECT_EQ(m.batch_size(), c10::IntArrayRef({1, 1}));
  EXPECT_EQ(m.names(), (DimNames{"x", "y"}));
  EXPECT_EQ(m.get("a").sizes(), c10::IntArrayRef({1, 1, 1}));
  EXPECT_EQ(m.get_tensordict("n").batch_size(), c10::IntArrayRef({1, 1, 1}));
  EXPECT_EQ(m.get({"n", "b"}).sizes(), c10::IntArrayRef({1, 1, 1}));
  EXPECT_FLOAT_EQ(m.get("a").item<float>(), 11.5f);
}

TEST(TensorDictReduceTest, DimReducesThoseBatchDims) {
  TensorDict td = make_td();
  const at::Tensor a = td.get("a");
  const at::Tensor b = td.get({"n", "b"});
  TensorDict s = td.sum(ReduceOptions().dim({0}));
  EXPECT_EQ(s.batch_size(), c10::IntArrayRef({3}));
  EXPECT_EQ(s.names(), DimNames{"y"});
  expect_leaf(s, "a", a.sum(0));
  EXPECT_EQ(s.get_tensordict("n").batch_size(), c10::IntArrayRef({3, 5}));
  expect_leaf(s, {"n", "b"}, b.sum(0));
  EXPECT_EQ(s["s"].non_tensor_data().batch_size(), c10::IntArrayRef({3}));
  // Negative dims count from the end of the batch dims, not of the leaves.
  TensorDict last = td.mean(ReduceOptions().dim({-1}));
  EXPECT_EQ(last.batch_size(), c10::IntArrayRef({2}));
  EXPECT_EQ(last.names(), DimNames{"x"});
  expect_leaf(last, "a", a.mean(1));
  expect_leaf(last, {"n", "b"}, b.mean(1));
  // Several dims, with keepdim.
  TensorDict both = td.mean(ReduceOptions().dim({1, 0}).keepdim(true));
  EXPECT_EQ(both.batch_size(), c10::IntArrayRef({1, 1}));
  EXPECT_EQ(both.names(), (DimNames{"x", "y"}));
  expect_leaf(both, "a", a.mean({0, 1}, /*keepdim=*/true));
  EXPECT_EQ(both.get_tensordict("n").batch_size(), c10::IntArrayRef({1, 1, 5}));
  expect_leaf(both, {"n", "b"}, b.mean({0, 1}, true));
  expect_leaf(
      td.std(ReduceOptions().dim({0, 1}).correction(0)),
      "a",
      a.std(at::IntArrayRef{0, 1}, /*correction=*/c10::Scalar(0), false));
  expect_leaf(td.var(ReduceOptions().dim({1})), {"n", "b"}, b.var(1));
  expect_leaf(td.amax(ReduceOptions().dim({1})), "a", a.amax(1));
  expect_leaf(td.max(ReduceOptions().dim({0})), "a", std::get<0>(a.max(0)));
  expect_leaf(td.amin(ReduceOptions().dim({0, 1})), "a", a.amin({0, 1}));
  expect_leaf(
      td.min(ReduceOptions().dim({1}).keepdim(true)), "a", a.amin(1, true));
  // prod reduces every dim it is given (Python reduces only the first).
  expect_leaf(
      td.prod(ReduceOptions().dim({0, 1})), {"n", "b"}, b.prod(1).prod(0));
  expect_leaf(
      td.prod(ReduceOptions().dim({1}).keepdim(true)), "a", a.prod(1, true));
}

TEST(TensorDictReduceTest, DimOutsideTheBatchDimsIsAnIndexError) {
  TensorDict td = make_td();
  EXPECT_THROWS_EXACTLY(
      td.sum(ReduceOptions().dim({2})),
      c10::IndexError,
      "Incompatible dim 2 for tensordict with batch dims 2.");
  EXPECT_THROWS_EXACTLY(
      td.amax(ReduceOptions().dim({0, -3})),
      c10::IndexError,
      "Incompatible dim -3 for tensordict with batch dims 2.");
  EXPECT_THROWS_EXACTLY(
      td.mean(ReduceOptions().dim({1, -1})),
      c10::Error,
      "dim 1 appears multiple times in the list of dims");
}

TEST(TensorDictReduceTest, MaxAndMinAlongADimGiveValuesAndIndices) {
  // Python 0.15.3:
  //   td = TensorDict({"a": torch.tensor([[1., 5.], [3., 2.]]),
  //                    "n": {"b": torch.tensor([[1, 9], [4, 0]])},
  //                    "s": NonTensorData("x", batch_size=[2])}, [2])
  //   r = td.max(dim=0)     # torch.return_types.max
  //   r.values   # TensorDict(batch_size=[], fields={a: f32[2], n: {b:
  //   i64[2]}}) r.indices  # TensorDict(batch_size=[], fields={a: i64[2], n:
  //   {b: i64[2]}}) r.values["a"], r.indices["a"]             # [3., 5.], [1,
  //   0] r = td.min(dim=0, keepdim=True) r.values.batch_size, r.indices["n",
  //   "b"]  # [1], [[0, 1]] td.max(dim=2)  # IndexError: Incompatible dim 2 for
  //   tensordict with
  //                  # batch dims 1.
  TensorDict td({{"a", torch::tensor({{1.F, 5.F}, {3.F, 2.F}})}}, {2});
  td.set(
      "n",
      TensorDict({{"b", torch::tensor({{1, 9}, {4, 0}}, torch::kLong)}}, {2}));
  td.set_non_tensor("s", "x");
  const tensordict::ValuesIndices r = td.max(0);
  EXPECT_EQ(r.values.batch_size(), c10::IntArrayRef({}));
  EXPECT_EQ(r.indices.batch_size(), c10::IntArrayRef({}));
  EXPECT_FALSE(r.values.contains("s"));  // non-tensor data is left out
  EXPECT_FALSE(r.indices.contains("s"));
  expect_leaf(r.values, "a", torch::tensor({3.F, 5.F}));
  expect_leaf(r.indices, "a", torch::tensor({1, 0}, torch::kLong));
  expect_leaf(r.values, {"n", "b"}, torch::tensor({4, 9}, torch::kLong));
  expect_leaf(r.indices, {"n", "b"}, torch::tensor({1, 0}, torch::kLong));
  auto [values, indices] = td.min(0, /*keepdim=*/true);
  EXPECT_EQ(values.batch_size(), c10::IntArrayRef({1}));
  EXPECT_EQ(indices.get_tensordict("n").batch_size(), c10::IntArrayRef({1}));
  expect_leaf(values, "a", torch::tensor({{1.F, 2.F}}));
  expect_leaf(indices, {"n", "b"}, torch::tensor({{0, 1}}, torch::kLong));
  // Negative dims count from the end of the batch dims; names follow.
  TensorDict named = make_td();
  const auto last = named.max(-1);
  EXPECT_EQ(last.values.names(), DimNames{"x"});
  expect_leaf(last.values, "a", std::get<0>(named.get("a").max(1)));
  expect_leaf(
      last.indices, {"n", "b"}, std::get<1>(named.get({"n", "b"}).max(1)));
  EXPECT_THROWS_EXACTLY(
      (void)td.max(2),
      c10::IndexError,
      "Incompatible dim 2 for tensordict with batch dims 1.");
}

TEST(TensorDictReduceTest, AllAndAnyAlongADim) {
  TensorDict td(
      {{"m", torch::tensor({{true, false}, {true, true}})}},
      {2, 2},
      std::nullopt,
      {"r", "c"});
  td.set({"n", "v"}, torch::tensor({{0, 0}, {3, 0}}));
  TensorDict all = td.all(1);
  EXPECT_EQ(all.batch_size(), c10::IntArrayRef({2}));
  EXPECT_EQ(all.names(), DimNames{"r"});
  expect_leaf(all, "m", torch::tensor({false, true}));
  expect_leaf(all, {"n", "v"}, torch::tensor({false, false}));
  TensorDict any = td.any(-2);
  EXPECT_EQ(any.names(), DimNames{"c"});
  expect_leaf(any, "m", torch::tensor({true, true}));
  expect_leaf(any, {"n", "v"}, torch::tensor({true, false}));
  // The no-argument forms still return bool.
  EXPECT_FALSE(td.all());
  EXPECT_TRUE(td.any());
  const char* const kDimError =
      "dim must be greater than or equal to -tensordict.batch_dims and "
      "smaller than tensordict.batch_dims";
  EXPECT_THROWS_EXACTLY(td.all(2), c10::Error, kDimError);
  EXPECT_THROWS_EXACTLY(td.any(-3), c10::Error, kDimError);
}

TEST(TensorDictReduceTest, NonTensorStacksCannotBeReduced) {
  TensorDict td({{"a", torch::ones({2})}}, {2});
  td.set({"n", "st"}, Value(NonTensorStack({"x", "y"}, {2})));
  EXPECT_THROWS_EXACTLY(
      td.sum(),
      c10::Error,
      "sum requires this object to be cast to a regular TensorDict. If you "
      "need NonTensorStack to support sum, help us by filing an issue on "
      "github!");
  EXPECT_THROWS_WITH(
      td.amax(ReduceOptions().dim({0})),
      c10::Error,
      "amax requires this object");
}

TEST(TensorDictReduceTest, ReduceCombinesAllLeavesIntoOneTensor) {
  // Python: td.sum(reduce=True) is 276 + 15 = 291 here (float + int64
  // leaves concatenate to float).
  TensorDict td(
      {{"a", torch::arange(24, torch::kFloat).view({2, 3, 4})}}, {2, 3});
  td.set({"n", "b"}, torch::arange(6).view({2, 3}));
  const at::Tensor all = torch::cat(
      {td.get("a").flatten(), td.get({"n", "b"}).flatten().to(torch::kFloat)});
  const at::Tensor s = td.reduce(ReduceOp::kSum);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.scalar_type(), torch::kFloat);
  EXPECT_FLOAT_EQ(s.item<float>(), 291.0f);
  EXPECT_TRUE(torch::allclose(td.reduce(ReduceOp::kMean), all.mean()));
  EXPECT_TRUE(torch::allclose(
      td.reduce(ReduceOp::kStd, ReduceOptions().correction(0)),
      all.std(false)));
  EXPECT_TRUE(torch::allclose(td.reduce(ReduceOp::kVar), all.var()));
  EXPECT_TRUE(torch::allclose(td.reduce(ReduceOp::kMax), all.max()));
  EXPECT_TRUE(torch::allclose(td.reduce(ReduceOp::kAmin), all.min()));
  EXPECT_TRUE(td.reduce(ReduceOp::kAny).item<bool>());
  EXPECT_FALSE(td.reduce(ReduceOp::kAll).item<bool>());
  // With dims, leaves of the same rank are concatenated along the first.
  TensorDict flat(
      {{"a", torch::arange(6, torch::kFloat).view({2, 3})},
       {"b", torch::ones({2, 3})}},
      {2, 3});
  const at::Tensor cat = torch::cat({flat.get("a"), flat.get("b")}, 0);
  const at::Tensor by_dim =
      flat.reduce(ReduceOp::kSum, ReduceOptions().dim({0}));
  EXPECT_TRUE(torch::equal(by_dim, cat.sum(0)));
  EXPECT_TRUE(torch::equal(
      flat.reduce(ReduceOp::kAmax, ReduceOptions().dim({-1}).keepdim(true)),
      torch::cat({flat.get("a"), flat.get("b")}, 1).amax(1, true)));
  EXPECT_THROWS_EXACTLY(
      TensorDict({2}).reduce(ReduceOp::kMean),
      c10::ValueError,
      "mean(reduce=True) reduces the tensor leaves together, and this "
      "tensordict has no tensor leaves.");
  EXPECT_THROWS_EXACTLY(
      flat.reduce(ReduceOp::kSum, ReduceOptions().dim({2})),
      c10::IndexError,
      "Incompatible dim 2 for tensordict with batch dims 2.");
}

TEST(TensorDictReduceTest, EveryOpIsNamedAsPythonNamesIt) {
  // The message of reduce=True on a dict with no leaves names the op.
  const std::vector<std::pair<ReduceOp, std::string>> ops = {
      {ReduceOp::kSum, "sum"},
      {ReduceOp::kMean, "mean"},
      {ReduceOp::kStd, "std"},
      {ReduceOp::kVar, "var"},
      {ReduceOp::kProd, "prod"},
      {ReduceOp::kAmax, "amax"},
      {ReduceOp::kAmin, "amin"},
      {ReduceOp::kMax, "max"},
      {ReduceOp::kMin, "min"},
      {ReduceOp::kAll, "all"},
      {ReduceOp::kAny, "any"}};
  for (const auto& [op, name] : ops) {
    EXPECT_THROWS_EXACTLY(
        TensorDict({2}).reduce(op),
        c10::ValueError,
        name +
            "(reduce=True) reduces the tensor leaves together, and this "
            "tensordict has no tensor leaves.");
  }
}

}  // namespace tensor_dict_reduce_test
