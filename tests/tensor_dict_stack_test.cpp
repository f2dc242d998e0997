// stack and cat (declared in tensor_dict.h).
#include <tensordict/tensor_dict.h>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace tensor_dict_stack_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)

namespace {

// batch [2] named (x): a [2, 3] filled with v; n {b [2, 4, 5]} batch [2, 4];
// s the string `s`.
TensorDict make_td(double v, const std::string& s = "txt") {
  TensorDict td(
      {{"a", torch::arange(6, torch::kFloat).view({2, 3}) + v}},
      {2},
      std::nullopt,
      {"x"});
  td.set(
      "n",
      TensorDict(
          {{"b", torch::arange(40).view({2, 4, 5}) * static_cast<int64_t>(v)}},
          {2, 4}));
  td.set_non_tensor("s", s);
  return td;
}

}  // namespace

TEST(TensorDictStackTest, StackInsertsANewBatchDimAtEveryPosition) {
  const TensorDict x = make_td(1);
  const TensorDict y = make_td(2);
  for (int64_t dim : {0, 1, -1, -2}) {
    const int64_t d = dim < 0 ? dim + 2 : dim;
    TensorDict s = tensordict::stack({x, y}, dim);
    EXPECT_EQ(s.batch_size(), c10::IntArrayRef({2, 2})) << dim;
    EXPECT_TRUE(
        torch::equal(s.get("a"), torch::stack({x.get("a"), y.get("a")}, d)));
    EXPECT_TRUE(torch::equal(
        s.get({"n", "b"}),
        torch::stack({x.get({"n", "b"}), y.get({"n", "b"})}, d)));
    EXPECT_EQ(s.get_tensordict("n").batch_size(), c10::IntArrayRef({2, 2, 4}));
    const DimNames names =
        d == 0 ? DimNames{std::nullopt, "x"} : DimNames{"x", std::nullopt};
    EXPECT_EQ(s.names(), names) << dim;
    EXPECT_FALSE(s.is_locked());
  }
  // The result owns new storage.
  TensorDict s = tensordict::stack({x, y});
  s.get("a").zero_();
  EXPECT_FALSE(torch::equal(x.get("a"), torch::zeros({2, 3})));
}

TEST(TensorDictStackTest, StackOfNoBatchDimsAndOfOneDict) {
  TensorDict s = tensordict::stack(
      {TensorDict({{"a", torch::tensor(1.0)}}),
       TensorDict({{"a", torch::tensor(2.0)}})});
  EXPECT_EQ(s.batch_size(), c10::IntArrayRef({2}));
  EXPECT_TRUE(torch::equal(s.get("a"), torch::tensor({1.0, 2.0})));
  EXPECT_FALSE(s.has_names());
  TensorDict one = tensordict::stack({make_td(1)});
  EXPECT_EQ(one.batch_size(), c10::IntArrayRef({1, 2}));
}

TEST(TensorDictStackTest, StackAndCatMatchEntriesByKeyWhateverTheirOrder) {
  // Three dicts, the keys in a different order in each, values by dict.
  const std::vector<std::vector<std::string>> orders = {
      {"p", "q", "r"}, {"r", "p", "q"}, {"q", "r", "p"}};
  std::vector<TensorDict> tds;
  for (size_t d = 0; d < orders.size(); ++d) {
    TensorDict td({}, {2});
    for (const std::string& key : orders[d]) {
      const double base = 10.0 * static_cast<double>(d) + (key[0] - 'p');
      td.set(key, torch::full({2, 3}, base));
      td.set({"n", key}, torch::full({2}, -base));
    }
    tds.push_back(td);
  }
  const TensorDict stacked = tensordict::stack(tds, 1);
  const TensorDict catted = tensordict::cat(tds, 0);
  EXPECT_EQ(
      stacked.keys(), (std::vector<tensordict::NestedKey>{"p", "n", "q", "r"}));
  for (const std::string key : {"p", "q", "r"}) {
    std::vector<torch::Tensor> parts, nested;
    for (const TensorDict& td : tds) {
      parts.push_back(td.get(key));
      nested.push_back(td.get({"n", key}));
    }
    EXPECT_TRUE(torch::equal(stacked.get(key), torch::stack(parts, 1))) << key;
    EXPECT_TRUE(torch::equal(stacked.get({"n", key}), torch::stack(nested, 1)))
        << key;
    EXPECT_TRUE(torch::equal(catted.get(key), torch::cat(parts, 0))) << key;
  }
}

TEST(TensorDictStackTest, StackPromotesDtypesAsTorchDoes) {
  TensorDict s = tensordict::stack(
      {TensorDict({{"a", torch::zeros({2})}}, {2}),
       TensorDict({{"a", torch::ones({2}, torch::kLong)}}, {2})});
  EXPECT_EQ(s.get("a").scalar_type(), torch::kFloat);
}

TEST(TensorDictStackTest, StackKeepsOnlyNamesAndDevicesAllDictsShare) {
  const c10::Device cpu(c10::kCPU);
  TensorDict x({{"a", torch::zeros({2})}}, {2}, cpu, {"x"});
  TensorDict y({{"a", torch::zeros({2})}}, {2}, cpu, {"y"});
  TensorDict z({{"a", torch::zeros({2})}}, {2});
  TensorDict same = tensordict::stack({x, x});
  EXPECT_EQ(same.device(), cpu);
  EXPECT_EQ(same.names(), (DimNames{std::nullopt, "x"}));
  EXPECT_FALSE(tensordict::stack({x, y}).has_names());
  EXPECT_FALSE(tensordict::stack({x, z}).has_names());
  EXPECT_FALSE(tensordict::stack({x, z}).device().has_value());
}

TEST(TensorDictStackTest, StackMakesNonTensorStacksEvenOfEqualValues) {
  TensorDict same = tensordict::stack({make_td(1), make_td(2)});
  ASSERT_TRUE(same["s"].is_non_tensor_stack());
  EXPECT_EQ(
      same["s"].non_tensor_stack().batch_size(), c10::IntArrayRef({2, 2}));
  EXPECT_EQ(
      same.get_non_tensor("s"),
      Json::parse(R"([["txt", "txt"], ["txt", "txt"]])"));

  TensorDict diff = tensordict::stack({make_td(1), make_td(2, "other")}, 1);
  EXPECT_EQ(
      diff.get_non_tensor("s"),
      Json::parse(R"([["txt", "other"], ["txt", "other"]])"));

  // NonTensorStack entries are stacked element by element.
  TensorDict x({}, {2});
  x.set("s", Value(NonTensorStack({"a", "b"})));
  TensorDict y({}, {2});
  y.set_non_tensor("s", "c");
  EXPECT_EQ(
      tensordict::stack({x, y}, 1).get_non_tensor("s"),
      Json::parse(R"([["a", "c"], ["b", "c"]])"));
  EXPECT_EQ(
      tensordict::stack({x, y}, 0).get_non_tensor("s"),
      Json::parse(R"([["a", "b"], ["c", "c"]])"));
}

TEST(TensorDictStackTest, StackErrors) {
  EXPECT_THROWS_EXACTLY(
      tensordict::stack({}),
      c10::Error,
      "stack expects a non-empty TensorList");
  EXPECT_THROWS_EXACTLY(
      tensordict::stack({make_td(1), make_td(2)}, 2),
      c10::IndexError,
      "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  EXPECT_THROWS_EXACTLY(
      tensordict::stack({make_td(1), make_td(2)}, -3),
      c10::IndexError,
      "Dimension out of range (expected to be in range of [-2, 1], but got "
      "-3)");
  EXPECT_THROWS_EXACTLY(
      tensordict::stack(
          {make_td(1), TensorDict({{"a", torch::zeros({3, 3})}}, {3})}),
      c10::Error,
      "stacking tensordicts requires them to have congruent batch sizes, got "
      "td[1].batch_size=torch.Size([3]) and td[0].batch_size=torch.Size([2])");

  TensorDict other_keys = make_td(2);
  other_keys.del_("a");
  other_keys.set("c", torch::zeros({2}));
  EXPECT_THROWS_EXACTLY(
      tensordict::stack({make_td(1), other_keys}),
      KeyError,
      "key \"c\" not found in TensorDict with keys ['a', 'n', 's']");
  TensorDict nested_extra = make_td(2);
  nested_extra.set({"n", "z"}, torch::zeros({2, 4}));
  EXPECT_THROWS_EXACTLY(
      tensordict::stack({make_td(1), nested_extra}),
      KeyError,
      "key \"z\" not found in TensorDict with keys ['b'] (while looking up "
      "('n', 'z'))");

  TensorDict nested_batch = make_td(2);
  nested_batch.set("n", TensorDict({{"b", torch::zeros({2, 3})}}, {2, 3}));
  EXPECT_THROWS_EXACTLY(
      tensordict::stack({make_td(1), nested_batch}),
      c10::Error,
      "stacking tensordicts requires them to have congruent batch sizes, got "
      "td[1].batch_size=torch.Size([2, 3]) and "
      "td[0].batch_size=torch.Size([2, 4]) for the entry 'n'");

  EXPECT_THROWS_EXACTLY(
      tensordict::stack(
          {TensorDict({{"a", torch::zeros({2, 3})}}, {2}),
           TensorDict({{"a", torch::zeros({2, 4})}}, {2})}),
      c10::Error,
      "The shapes of the tensors to stack are incompatible: "
      "torch.Size([2, 4]) vs torch.Size([2, 3]) for key 'a'.");
  EXPECT_THROWS_EXACTLY(
      tensordict::stack(
          {TensorDict({{"a", torch::zeros({2, 3})}}, {2}),
           TensorDict({{"a", TensorDict({}, {2})}}, {2})}),
      c10::TypeError,
      "cannot stack entry 'a': it is a Tensor in tensordict 0 and a "
      "TensorDict in tensordict 1");
}

TEST(TensorDictStackTest, CatJoinsAlongABatchDim) {
  const TensorDict x = make_td(1);
  const TensorDict y = make_td(2);
  for (int64_t dim : {0, -1}) {
    TensorDict c = tensordict::cat({x, y}, dim);
    EXPECT_EQ(c.batch_size(), c10::IntArrayRef({4}));
    EXPECT_EQ(c.names(), DimNames{"x"});
    EXPECT_TRUE(
        torch::equal(c.get("a"), torch::cat({x.get("a"), y.get("a")}, 0)));
    EXPECT_TRUE(torch::equal(
        c.get({"n", "b"}),
        torch::cat({x.get({"n", "b"}), y.get({"n", "b"})}, 0)));
    EXPECT_EQ(c.get_tensordict("n").batch_size(), c10::IntArrayRef({4, 4}));
    // Equal NonTensorData stays one value, as in Python.
    ASSERT_TRUE(c["s"].is_non_tensor_data());
    EXPECT_EQ(c["s"].non_tensor_data().batch_size(), c10::IntArrayRef({4}));
    EXPECT_EQ(c.get_non_tensor("s"), Json("txt"));
  }
  // Sizes may differ along the dim; the first dict's names are kept.
  TensorDict p(
      {{"a", torch::arange(6).view({2, 3})}}, {2, 3}, std::nullopt, {"r", "c"});
  TensorDict q({{"a", torch::arange(8).view({2, 4})}}, {2, 4});
  TensorDict c = tensordict::cat({p, q}, 1);
  EXPECT_EQ(c.batch_size(), c10::IntArrayRef({2, 7}));
  EXPECT_EQ(c.names(), (DimNames{"r", "c"}));
  EXPECT_TRUE(
      torch::equal(c.get("a"), torch::cat({p.get("a"), q.get("a")}, 1)));
  EXPECT_FALSE(tensordict::cat({q, p}, 1).has_names());
}

TEST(TensorDictStackTest, CatOfDifferingNonTensorsGivesAStack) {
  TensorDict c = tensordict::cat({make_td(1), make_td(2, "o")});
  ASSERT_TRUE(c["s"].is_non_tensor_stack());
  EXPECT_EQ(c.get_non_tensor("s"), Json({"txt", "txt", "o", "o"}));
  TensorDict x({}, {2});
  x.set("s", Value(NonTensorStack({"a", "b"})));
  TensorDict y({}, {1});
  y.set_non_tensor("s", "c");
  TensorDict xy = tensordict::cat({x, y});
  EXPECT_EQ(xy["s"].non_tensor_stack().batch_size(), c10::IntArrayRef({3}));
  EXPECT_EQ(xy.get_non_tensor("s"), Json({"a", "b", "c"}));
}

TEST(TensorDictStackTest, CatErrors) {
  EXPECT_THROWS_EXACTLY(
      tensordict::cat({}),
      c10::ValueError,
      "torch.cat(): expected a non-empty list of Tensors");
  EXPECT_THROWS_EXACTLY(
      tensordict::cat({TensorDict({{"a", torch::tensor(1.0)}})}),
      c10::IndexError,
      "zero-dimensional tensordict (at position 0) cannot be concatenated");
  EXPECT_THROWS_EXACTLY(
      tensordict::cat({make_td(1), make_td(2)}, 1),
      c10::IndexError,
      "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
  TensorDict p({{"a", torch::zeros({2, 3})}}, {2, 3});
  TensorDict q({{"a", torch::zeros({2, 4})}}, {2, 4});
  EXPECT_THROWS_EXACTLY(
      tensordict::cat({p, q}, 0),
      c10::Error,
      "concatenating tensordicts requires them to have congruent batch sizes "
      "except along dim 0, got td[1].batch_size=torch.Size([2, 4]) and "
      "td[0].batch_size=torch.Size([2, 3])");
  EXPECT_THROWS_EXACTLY(
      tensordict::cat(
          {make_td(1), TensorDict({{"a", torch::zeros({3, 3})}}, {3})}),
      KeyError,
      "key \"n\" not found in TensorDict with keys ['a']");
  EXPECT_THROWS_EXACTLY(
      tensordict::cat(
          {TensorDict({{"a", torch::zeros({2, 3})}}, {2}),
           TensorDict({{"a", torch::zeros({2, 4})}}, {2})}),
      c10::Error,
      "The shapes of the tensors to concatenate are incompatible: "
      "torch.Size([2, 4]) vs torch.Size([2, 3]) for key 'a'.");
}

}  // namespace tensor_dict_stack_test
