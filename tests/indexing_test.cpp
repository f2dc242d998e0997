#include <tensordict/indexing.h>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace indexing_test {

using namespace tensordict::indexing;
using namespace tensordict;  // NOLINT(google-build-using-namespace)

namespace {

// batch [4, 3]: a [4, 3, 5], n {b [4, 3, 2, 7]} with batch [4, 3, 2],
// s "txt", st a stack of [4, 3] ints.
TensorDict make_td(bool names = false) {
  TensorDict td(
      {{"a", torch::arange(60, torch::kFloat).view({4, 3, 5})}, {"s", "txt"}},
      {4, 3},
      std::nullopt,
      names ? DimNames{"x", "y"} : DimNames{});
  TensorDict n(
      {{"b", torch::arange(168, torch::kFloat).view({4, 3, 2, 7})}}, {4, 3, 2});
  td.set("n", n);
  std::vector<Json> values;
  for (int i = 0; i < 12; ++i) {
    values.emplace_back(i);
  }
  td.set("st", Value(NonTensorStack(values, {4, 3})));
  return td;
}

}  // namespace

TEST(IndexingTest, IntegerIndexDropsTheFirstBatchDim) {
  TensorDict td = make_td(/*names=*/true);
  TensorDict row = td.index({1});
  EXPECT_EQ(row.batch_size(), c10::IntArrayRef({3}));
  EXPECT_EQ(row.names(), DimNames{"y"});
  EXPECT_TRUE(torch::equal(row.get("a"), td.get("a")[1]));
  EXPECT_EQ(row.get_tensordict("n").batch_size(), c10::IntArrayRef({3, 2}));
  EXPECT_TRUE(torch::equal(row.get({"n", "b"}), td.get({"n", "b"})[1]));
  EXPECT_EQ(row.get_non_tensor("s"), "txt");
  EXPECT_EQ(row["s"].non_tensor_data().batch_size(), c10::IntArrayRef({3}));
  EXPECT_EQ(row.get_non_tensor("st"), Json({3, 4, 5}));
  // A view: writing through it reaches the source.
  row.get("a").fill_(-1);
  EXPECT_EQ(td.get("a")[1].sum().item<float>(), -15.f);
}

TEST(IndexingTest, NegativeIntegersAndTwoIntegers) {
  TensorDict td = make_td();
  TensorDict last = td.index({-1, -2});
  EXPECT_EQ(last.batch_size(), c10::IntArrayRef{});
  EXPECT_TRUE(torch::equal(last.get("a"), td.get("a")[3][1]));
  EXPECT_EQ(last.get_non_tensor("st"), 10);
  EXPECT_TRUE(last["st"].is_non_tensor_data());
  EXPECT_EQ(last.get_tensordict("n").batch_size(), c10::IntArrayRef({2}));
}

TEST(IndexingTest, EllipsisOnlyCoversBatchDims) {
  TensorDict td = make_td(/*names=*/true);
  TensorDict col = td.index({Ellipsis, 0});
  EXPECT_EQ(col.batch_size(), c10::IntArrayRef({4}));
  EXPECT_EQ(col.names(), DimNames{"x"});
  // The leaf's feature dim (5) is untouched: the ellipsis did not reach it.
  EXPECT_EQ(col.get("a").sizes(), c10::IntArrayRef({4, 5}));
  EXPECT_TRUE(torch::equal(col.get("a"), td.get("a").select(1, 0)));
  EXPECT_EQ(col.get_tensordict("n").batch_size(), c10::IntArrayRef({4, 2}));
  EXPECT_EQ(col.get_non_tensor("st"), Json({0, 3, 6, 9}));
}

TEST(IndexingTest, SlicesAndNone) {
  TensorDict td = make_td(/*names=*/true);
  TensorDict out = td.index({None, Slice(1, 3)});
  EXPECT_EQ(out.batch_size(), c10::IntArrayRef({1, 2, 3}));
  EXPECT_EQ(out.names(), (DimNames{std::nullopt, "x", "y"}));
  EXPECT_TRUE(
      torch::equal(out.get("a"), td.get("a").slice(0, 1, 3).unsqueeze(0)));
  TensorDict stepped =
      td.index({Slice(None, None, 2), Slice(None, None, -1 + 2)});
  EXPECT_EQ(stepped.batch_size(), c10::IntArrayRef({2, 3}));
  EXPECT_EQ(stepped.get("a").data_ptr(), td.get("a").data_ptr());  // a view
  EXPECT_EQ(stepped.get_non_tensor("st"), Json({{0, 1, 2}, {6, 7, 8}}));
}

TEST(IndexingTest, BoolMasks) {
  TensorDict td = make_td(/*names=*/true);
  at::Tensor mask = torch::tensor({true, false, true, false});
  TensorDict rows = td.index({mask});
  EXPECT_EQ(rows.batch_size(), c10::IntArrayRef({2, 3}));
  EXPECT_EQ(rows.names(), (DimNames{"x", "y"}));
  EXPECT_TRUE(torch::equal(rows.get("a"), td.get("a").index({mask})));
  EXPECT_EQ(rows.get_non_tensor("st"), Json({{0, 1, 2}, {6, 7, 8}}));
  // A mask over both batch dims flattens them.
  at::Tensor full = td.get("a").select(2, 0) > 20;
  TensorDict picked = td.index({full});
  EXPECT_EQ(picked.batch_size(), c10::IntArrayRef({7}));
  EXPECT_FALSE(picked.has_names());
  EXPECT_EQ(picked.get({"n", "b"}).sizes(), c10::IntArrayRef({7, 2, 7}));
  EXPECT_TRUE(torch::equal(picked.get("a"), td.get("a").index({full})));
}

TEST(IndexingTest, IntegerTensors) {
  TensorDict td = make_td();
  at::Tensor idx = torch::tensor({3, 0, 3}, torch::kLong);
  TensorDict out = td.index({idx});
  EXPECT_EQ(out.batch_size(), c10::IntArrayRef({3, 3}));
  EXPECT_TRUE(torch::equal(out.get("a"), td.get("a").index_select(0, idx)));
  EXPECT_EQ(out.get_non_tensor("st")[0], Json({9, 10, 11}));
  at::Tensor grid = torch::tensor({{0, 1}, {2, 3}}, torch::kLong);
  EXPECT_EQ(td.index({grid}).batch_size(), c10::IntArrayRef({2, 2, 3}));
  EXPECT_EQ(
      td.index({Slice(), torch::tensor({2, 0})}).batch_size(),
      c10::IntArrayRef({4, 2}));
}

// A 1-D index of rows takes index_select (see gather_rows in
// src/tensor_dict/indexing.cpp); results must equal advanced indexing for
// every index dtype, negative and out-of-range indices and strided leaves.
TEST(IndexingTest, RowGathersMatchAdvancedIndexing) {
  TensorDict td = make_td();
  td.set(
      "t",
      torch::arange(24, torch::kDouble).view({3, 4, 2}).permute({1, 0, 2}));
  ASSERT_FALSE(td.get("t").is_contiguous());
  for (const at::Tensor& idx :
       {torch::tensor({3, 0, 3}, torch::kLong),
        torch::tensor({1, 2}, torch::kInt),
        torch::tensor({-1, 0}, torch::kLong),
        torch::empty({0}, torch::kLong)}) {
    TensorDict out = td.index({idx});
    for (const char* key : {"a", "t"}) {
      EXPECT_TRUE(torch::equal(out.get(key), td.get(key).index({idx})))
          << key << " " << idx;
    }
    EXPECT_TRUE(
        torch::equal(out.get({"n", "b"}), td.get({"n", "b"}).index({idx})));
  }
  EXPECT_THROWS_WITH(
      td.index({torch::tensor({0, 4}, torch::kLong)}),
      c10::IndexError,
      "index 4 is out of bounds for dimension 0 with size 4");
}

TEST(IndexingTest, IndexingPastTheBatchDimsIsAnIndexError) {
  TensorDict td = make_td();
  EXPECT_THROWS_EXACTLY(
      td.index({0, 0, 0}),
      c10::IndexError,
      "too many indices for tensor of dimension 2 (the TensorDict's batch "
      "dims are torch.Size([4, 3]))");
  EXPECT_THROWS_WITH(
      td.index({Ellipsis, 0, Ellipsis}), c10::IndexError, "single ellipsis");
  EXPECT_THROWS_WITH(
      td.index({7}),
      c10::IndexError,
      "index 7 is out of bounds for dimension 0 with size 4");
}

TEST(IndexingTest, DictWithoutTopLevelTensorsStillGetsItsBatchSize) {
  TensorDict td({{"n", {{"x", torch::zeros({5, 2})}}}}, {5});
  TensorDict out = td.index({Slice(1, 4)});
  EXPECT_EQ(out.batch_size(), c10::IntArrayRef({3}));
  EXPECT_EQ(out.get({"n", "x"}).sizes(), c10::IntArrayRef({3, 2}));
  EXPECT_EQ(
      TensorDict({5})
          .index({torch::tensor({true, false, true, true, false})})
          .batch_size(),
      c10::IntArrayRef({3}));
}

TEST(IndexingTest, IndexPutWritesInPlace) {
  TensorDict td = make_td();
  at::Tensor a = td.get("a");
  TensorDict value({{"a", torch::full({3, 5}, -1.f)}}, {3});
  td.index_put_({0}, value);
  EXPECT_TRUE(td.get("a").is_same(a));
  EXPECT_EQ(a[0].sum().item<float>(), -15.f);
  td.index_put_({Slice(), 1}, 7);
  EXPECT_TRUE((td.get("a").select(1, 1) == 7).all().item<bool>());
  EXPECT_TRUE((td.get({"n", "b"}).select(1, 1) == 7).all().item<bool>());
  // A tensor value broadcasts over each leaf's feature dims.
  TensorDict only_a = td.select({"a"});
  only_a.index_put_(
      {torch::tensor({true, false, false, false})}, torch::zeros({5}));
  EXPECT_EQ(td.get("a")[0].abs().sum().item<float>(), 0.f);
}

TEST(IndexingTest, LazyPreallocationFillsAnEmptyDict) {
  TensorDict buffer({3, 2});
  for (int64_t i : {2, 0, 1}) {  // any order
    TensorDict step(
        {{"obs", torch::full({2, 4}, static_cast<float>(i))},
         {"next", {{"r", torch::full({2}, i)}}},
         {"tag", "t" + std::to_string(i)}},
        {2});
    buffer.index_put_({i}, step);
  }
  EXPECT_EQ(buffer.get("obs").sizes(), c10::IntArrayRef({3, 2, 4}));
  EXPECT_EQ(buffer.get("obs").scalar_type(), at::kFloat);
  EXPECT_EQ(buffer.get({"next", "r"}).scalar_type(), at::kLong);
  EXPECT_EQ(
      buffer.get_tensordict("next").batch_size(), c10::IntArrayRef({3, 2}));
  EXPECT_TRUE(torch::equal(
      buffer.get("obs").select(2, 0).select(1, 0),
      torch::tensor({0.f, 1.f, 2.f})));
  EXPECT_TRUE(buffer["tag"].is_non_tensor_stack());
  EXPECT_EQ(
      buffer.get_non_tensor("tag"),
      Json::array(
          {Json::array({"t0", "t0"}),
           Json::array({"t1", "t1"}),
           Json::array({"t2", "t2"})}));
}

TEST(IndexingTest, IndexPutOfAKeyValueList) {
  TensorDict td({4});
  td.index_put_({Slice(0, 2)}, {{"x", torch::ones({2, 3})}});
  EXPECT_EQ(td.get("x").sizes(), c10::IntArrayRef({4, 3}));
  EXPECT_EQ(td.get("x").sum().item<float>(), 6.f);
}

TEST(IndexingTest, IndexPutChecksTheValuesBatchSize) {
  TensorDict td = make_td();
  EXPECT_THROWS_EXACTLY(
      td.index_put_({0}, TensorDict({{"a", torch::zeros({4, 5})}}, {4})),
      c10::Error,
      "cannot write a TensorDict of batch size torch.Size([4]) into an index "
      "of batch size torch.Size([3])");
  td.lock_();
  EXPECT_THROWS_WITH(
      td.index_put_({0}, TensorDict({{"new", torch::zeros({3})}}, {3})),
      c10::Error,
      "Cannot modify locked TensorDict");
  td.index_put_(
      {0}, TensorDict({{"a", torch::zeros({3, 5})}}, {3}));  // in place: fine
}

TEST(IndexingTest, WhereMaskedFillAndMaskedSelect) {
  TensorDict td({{"x", torch::arange(6, torch::kFloat).view({3, 2})}}, {3});
  at::Tensor cond = torch::tensor({true, false, true});
  TensorDict other({{"x", torch::full({3, 2}, -1.f)}}, {3});
  TensorDict w = td.where(cond, other);
  EXPECT_TRUE(torch::equal(
      w.get("x"), torch::tensor({{0.f, 1.f}, {-1.f, -1.f}, {4.f, 5.f}})));
  EXPECT_TRUE(
      torch::equal(td.where(cond, 9).get("x")[1], torch::tensor({9.f, 9.f})));
  TensorDict filled = td.masked_fill(cond, 0);
  EXPECT_EQ(filled.get("x").sum().item<float>(), 5.f);
  EXPECT_EQ(td.get("x").sum().item<float>(), 15.f);
  td.masked_fill_(cond, 1);
  EXPECT_EQ(td.get("x").sum().item<float>(), 9.f);
  TensorDict sel = td.masked_select(cond);
  EXPECT_EQ(sel.batch_size(), c10::IntArrayRef({2}));
  EXPECT_THROWS_WITH(
      td.masked_fill(torch::tensor({true}), 0),
      c10::Error,
      "masked_fill: the mask of shape torch.Size([1]) does not match the batch "
      "size torch.Size([3])");
}

TEST(IndexingTest, GatherAndPad) {
  TensorDict td(
      {{"x", torch::arange(12, torch::kFloat).view({3, 2, 2})}}, {3, 2});
  at::Tensor idx = torch::tensor({{1, 0}, {0, 0}, {1, 1}}, torch::kLong);
  TensorDict g = td.gather(1, idx);
  EXPECT_TRUE(torch::equal(
      g.get("x"),
      torch::gather(td.get("x"), 1, idx.unsqueeze(-1).expand({3, 2, 2}))));
  TensorDict p = td.pad({1, 0}, -1);
  EXPECT_EQ(p.batch_size(), c10::IntArrayRef({3, 3}));
  EXPECT_EQ(p.get("x").sizes(), c10::IntArrayRef({3, 3, 2}));
  EXPECT_TRUE((p.get("x").select(1, 0) == -1).all().item<bool>());
  EXPECT_THROWS_WITH(
      td.pad({1}), c10::ValueError, "expected an even number of pad sizes");
}

TEST(IndexingTest, PadFillsNonTensorSlotsWithNull) {
  // Python: pad(td, [1, 2]) gives [None, 'x', 'y', 'z', None, None].
  TensorDict td({{"a", torch::arange(3, torch::kFloat)}, {"d", "same"}}, {3});
  td.set("s", Value(NonTensorStack(std::vector<Json>{"x", "y", "z"}, {3})));
  TensorDict p = td.pad({1, 2});
  EXPECT_EQ(p.batch_size(), c10::IntArrayRef({6}));
  EXPECT_EQ(
      p.get_non_tensor("s"),
      Json::parse(R"([null, "x", "y", "z", null, null])"));
  ASSERT_TRUE(p["d"].is_non_tensor_stack());
  EXPECT_EQ(
      p.get_non_tensor("d"),
      Json::parse(R"([null, "same", "same", "same", null, null])"));
  // No padded slot: NonTensorData stays NonTensorData (Python's rule too).
  TensorDict same = td.pad({0, 0});
  ASSERT_TRUE(same["d"].is_non_tensor_data());
  EXPECT_EQ(same["d"].non_tensor_data().batch_size(), c10::IntArrayRef({3}));
  // Over two batch dims, as Python's pad(td, [1, 0, 0, 1]).
  TensorDict td2({{"a", torch::zeros({2, 3})}}, {2, 3});
  td2.set(
      "s",
      Value(NonTensorStack(
          std::vector<Json>{"a", "b", "c", "d", "e", "f"}, {2, 3})));
  EXPECT_EQ(
      td2.pad({1, 0, 0, 1}).get_non_tensor("s"),
      Json::parse(
          R"([[null, "a", "b", "c"], [null, "d", "e", "f"], [null, null, null, null]])"));
}

// A 0-dim bool index consumes no batch dim: it adds one of size 1 (true) or
// 0 (false), as torch and Python's tensordict do.
TEST(IndexingTest, ZeroDimBoolIndexAddsADimAndConsumesNone) {
  TensorDict td(
      {{"x", torch::arange(6).view({2, 3})},
       {"y", torch::arange(24).view({2, 3, 4})}},
      {2, 3});
  const TensorDict front = td.index({torch::tensor(true)});
  EXPECT_EQ(front.batch_size(), c10::IntArrayRef({1, 2, 3}));
  EXPECT_TRUE(torch::equal(front.get("y"), td.get("y").unsqueeze(0)));
  EXPECT_EQ(
      td.index({torch::tensor(false)}).batch_size(),
      c10::IntArrayRef({0, 2, 3}));
  // After an Ellipsis the new dim lands after the batch dims, before the
  // leaves' own dims.
  const TensorDict back = td.index({Ellipsis, torch::tensor(true)});
  EXPECT_EQ(back.batch_size(), c10::IntArrayRef({2, 3, 1}));
  EXPECT_EQ(back.get("y").sizes(), c10::IntArrayRef({2, 3, 1, 4}));
  EXPECT_TRUE(torch::equal(back.get("y"), td.get("y").unsqueeze(2)));
  // It leaves every batch dim to the other indices.
  const TensorDict picked = td.index({torch::tensor(true), 1, 2});
  EXPECT_EQ(picked.batch_size(), c10::IntArrayRef({1}));
  EXPECT_EQ(picked.get("x").item<int64_t>(), 5);
}

}  // namespace indexing_test
