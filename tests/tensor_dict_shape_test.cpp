// Shape ops over the batch dims (declared in tensor_dict.h).
#include <tensordict/tensor_dict.h>

#include "tensor_dict_support.h"

// Its own namespace, so that test files can share a unity batch.
namespace tensor_dict_shape_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)

namespace {

// batch [2, 3], named (x, y): a [2, 3, 4]; n {b} with batch [2, 3, 5];
// st a stack [2, 3] of 0..5.
TensorDict make_td() {
  TensorDict td = tensordict::testing::named_2x3_td();
  td.set("st", Value(NonTensorStack({0, 1, 2, 3, 4, 5}, {2, 3})));
  td.set_non_tensor("s", "txt");
  return td;
}

void expect_leaf(
    const TensorDict& td,
    const tensordict::NestedKey& key,
    const at::Tensor& expected) {
  const at::Tensor got = td.get(key);
  EXPECT_EQ(got.sizes(), expected.sizes()) << key;
  EXPECT_TRUE(torch::equal(got, expected)) << key;
}

}  // namespace

TEST(TensorDictShapeTest, ReshapeAndView) {
  TensorDict td = make_td();
  TensorDict flat = td.reshape({-1});
  EXPECT_EQ(flat.batch_size(), c10::IntArrayRef({6}));
  EXPECT_EQ(flat.names(), DimNames{std::nullopt});
  expect_leaf(flat, "a", td.get("a").reshape({6, 4}));
  EXPECT_EQ(flat.get_tensordict("n").batch_size(), c10::IntArrayRef({6, 5}));
  EXPECT_EQ(flat.get_non_tensor("st"), Json({0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(flat["s"].non_tensor_data().batch_size(), c10::IntArrayRef({6}));
  TensorDict viewed = td.view({3, 2});
  EXPECT_EQ(viewed.get("a").data_ptr(), td.get("a").data_ptr());
  EXPECT_EQ(viewed.get_non_tensor("st"), Json({{0, 1}, {2, 3}, {4, 5}}));
  EXPECT_THROWS_WITH(
      td.view({4}), c10::Error, "shape '[4]' is invalid for input of size 6");
  // view fails where torch's view fails: a transposed leaf is not viewable.
  EXPECT_THROWS_WITH(
      td.transpose(0, 1).view({6}), c10::Error, "view size is not compatible");
  EXPECT_EQ(
      td.transpose(0, 1).reshape({6}).batch_size(), c10::IntArrayRef({6}));
}

TEST(TensorDictShapeTest, FlattenAndUnflatten) {
  TensorDict td = make_td();
  TensorDict flat = td.flatten();
  EXPECT_EQ(flat.batch_size(), c10::IntArrayRef({6}));
  expect_leaf(flat, "a", td.get("a").flatten(0, 1));
  EXPECT_EQ(flat.get({"n", "b"}).sizes(), c10::IntArrayRef({6, 5}));
  TensorDict back = flat.unflatten(0, {2, 3});
  EXPECT_EQ(back.batch_size(), c10::IntArrayRef({2, 3}));
  expect_leaf(back, "a", td.get("a"));
  EXPECT_EQ(back.get_non_tensor("st"), td.get_non_tensor("st"));
  EXPECT_EQ(td.unflatten(1, {3, 1}).batch_size(), c10::IntArrayRef({2, 3, 1}));
  EXPECT_THROWS_WITH(
      td.flatten(1, 0), c10::IndexError, "start_dim cannot come after end_dim");
}

TEST(TensorDictShapeTest, SqueezeAndUnsqueeze) {
  TensorDict td = make_td();
  TensorDict u = td.unsqueeze(-1);
  EXPECT_EQ(u.batch_size(), c10::IntArrayRef({2, 3, 1}));
  EXPECT_EQ(u.names(), (DimNames{"x", "y", std::nullopt}));
  expect_leaf(u, "a", td.get("a").unsqueeze(2));
  EXPECT_EQ(u.get_tensordict("n").batch_size(), c10::IntArrayRef({2, 3, 1, 5}));
  TensorDict front = td.unsqueeze(0);
  EXPECT_EQ(front.batch_size(), c10::IntArrayRef({1, 2, 3}));
  EXPECT_EQ(front.squeeze(0).batch_size(), c10::IntArrayRef({2, 3}));
  EXPECT_EQ(
      front.squeeze(1).batch_size(),
      c10::IntArrayRef({1, 2, 3}));  // size 2: kept
  EXPECT_EQ(u.unsqueeze(0).squeeze().batch_size(), c10::IntArrayRef({2, 3}));
  EXPECT_EQ(u.squeeze().names(), (DimNames{"x", "y"}));
  EXPECT_THROWS_EXACTLY(
      td.unsqueeze(4),
      c10::IndexError,
      "Dimension out of range (expected to be in range of [-3, 2], but got 4)");
}

TEST(TensorDictShapeTest, PermuteAndTranspose) {
  TensorDict td = make_td();
  TensorDict p = td.permute({1, 0});
  EXPECT_EQ(p.batch_size(), c10::IntArrayRef({3, 2}));
  EXPECT_EQ(p.names(), (DimNames{"y", "x"}));
  expect_leaf(p, "a", td.get("a").permute({1, 0, 2}));
  EXPECT_EQ(p.get_tensordict("n").batch_size(), c10::IntArrayRef({3, 2, 5}));
  EXPECT_EQ(p.get({"n", "b"}).sizes(), c10::IntArrayRef({3, 2, 5}));
  EXPECT_EQ(p.get_non_tensor("st"), Json({{0, 3}, {1, 4}, {2, 5}}));
  TensorDict t = td.transpose(-1, 0);
  expect_leaf(t, "a", td.get("a").transpose(0, 1));
  EXPECT_EQ(t.names(), (DimNames{"y", "x"}));
  EXPECT_THROWS_WITH(
      td.permute({0}), c10::ValueError, "permute: expected 2 dims");
  EXPECT_THROWS_WITH(
      td.permute({0, 0}), c10::ValueError, "permute: repeated dim 0");
}

TEST(TensorDictShapeTest, ExpandAndRepeat) {
  TensorDict td({{"a", torch::arange(3, torch::kFloat).view({1, 3})}}, {1});
  TensorDict e = td.expand({4, 2});
  EXPECT_EQ(e.batch_size(), c10::IntArrayRef({4, 2}));
  EXPECT_EQ(e.get("a").sizes(), c10::IntArrayRef({4, 2, 3}));
  EXPECT_EQ(e.get("a").stride(0), 0);  // a view
  EXPECT_EQ(td.expand_as(TensorDict({5})).batch_size(), c10::IntArrayRef({5}));
  EXPECT_EQ(td.broadcast_to({2}).get("a").sizes(), c10::IntArrayRef({2, 3}));
  EXPECT_THROWS_WITH(
      TensorDict({2}).expand({3}),
      c10::Error,
      "expand: the batch size torch.Size([2]) cannot be expanded to "
      "torch.Size([3])");
  TensorDict big = make_td();
  TensorDict r = big.repeat({2, 1});
  EXPECT_EQ(r.batch_size(), c10::IntArrayRef({4, 3}));
  expect_leaf(r, "a", big.get("a").repeat({2, 1, 1}));
  EXPECT_EQ(r.get_non_tensor("st")[2], Json({0, 1, 2}));
  TensorDict ri = big.repeat_interleave(2, 1);
  EXPECT_EQ(ri.batch_size(), c10::IntArrayRef({2, 6}));
  expect_leaf(ri, "a", big.get("a").repeat_interleave(2, 1));
  EXPECT_EQ(ri.get_non_tensor("st")[0], Json({0, 0, 1, 1, 2, 2}));
}

TEST(TensorDictShapeTest, FlipRollNarrow) {
  TensorDict td = make_td();
  expect_leaf(td.flip({0}), "a", td.get("a").flip({0}));
  EXPECT_EQ(td.flip({1}).get_non_tensor("st")[0], Json({2, 1, 0}));
  expect_leaf(td.roll({1}, {1}), "a", td.get("a").roll({1}, {1}));
  EXPECT_EQ(td.roll({1}, {1}).get_non_tensor("st")[0], Json({2, 0, 1}));
  TensorDict n = td.narrow(1, 1, 2);
  EXPECT_EQ(n.batch_size(), c10::IntArrayRef({2, 2}));
  expect_leaf(n, "a", td.get("a").narrow(1, 1, 2));
  EXPECT_EQ(n.get("a").data_ptr<float>(), td.get("a").data_ptr<float>() + 4);
  EXPECT_THROWS_WITH(
      td.narrow(1, 2, 2), c10::IndexError, "exceeds dimension size (3)");
}

TEST(TensorDictShapeTest, UnbindSplitChunk) {
  TensorDict td = make_td();
  std::vector<TensorDict> rows = td.unbind(0);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].batch_size(), c10::IntArrayRef({3}));
  EXPECT_EQ(rows[1].names(), DimNames{"y"});
  expect_leaf(rows[1], "a", td.get("a")[1]);
  EXPECT_EQ(rows[1].get_non_tensor("st"), Json({3, 4, 5}));
  EXPECT_EQ(rows[1].get_tensordict("n").batch_size(), c10::IntArrayRef({3, 5}));
  std::vector<TensorDict> cols = td.unbind(-1);
  ASSERT_EQ(cols.size(), 3u);
  EXPECT_EQ(cols[2].get_non_tensor("st"), Json({2, 5}));

  std::vector<TensorDict> pieces = td.split(2, 1);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].batch_size(), c10::IntArrayRef({2, 2}));
  EXPECT_EQ(pieces[1].batch_size(), c10::IntArrayRef({2, 1}));
  expect_leaf(pieces[1], "a", td.get("a").narrow(1, 2, 1));
  std::vector<TensorDict> sized = td.split(std::vector<int64_t>{1, 2}, 1);
  EXPECT_EQ(sized[1].get_non_tensor("st"), Json({{1, 2}, {4, 5}}));
  EXPECT_THROWS_WITH(
      td.split(std::vector<int64_t>{1, 1}, 1),
      c10::ValueError,
      "add up to 2, but batch dim 1 has size 3");
  std::vector<TensorDict> chunks = td.chunk(2, 1);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].batch_size(), c10::IntArrayRef({2, 2}));
}

}  // namespace tensor_dict_shape_test
