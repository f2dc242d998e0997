#include <tensordict/tensor_dict.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "allocation_counter.h"
#include "core/tensor_dict_impl.h"
#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace tensor_dict_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)
using tensordict::detail::PathEnd;
using tensordict::detail::PathMode;
using tensordict::detail::resolve;
using tensordict::detail::TensorDictImpl;
using namespace tensordict::testing;  // NOLINT(google-build-using-namespace)

namespace {

const char* const kLockError =
    "Cannot modify locked TensorDict. For in-place modification, consider "
    "using the `set_()` method and make sure the key is present.";

// b: [4, 3] float, a: {y: [4, 2] int64, x: [4] float}, s: "text"
TensorDict make_td() {
  return TensorDict(
      {{"b", torch::zeros({4, 3})},
       {"a",
        {{"y", torch::ones({4, 2}, torch::kLong)},
         {"x", torch::arange(4, torch::kFloat)}}},
       {"s", "text"}},
      {4});
}

std::vector<std::string> key_strings(const std::vector<NestedKey>& keys) {
  std::vector<std::string> out;
  for (const auto& k : keys) {
    out.push_back(k.to_string());
  }
  return out;
}

using Strings = std::vector<std::string>;

}  // namespace

// --- handle semantics
// ----------------------------------------------------------

TEST(TensorDictTest, DefaultConstructedIsAValidEmptyDict) {
  TensorDict td;
  EXPECT_TRUE(td.is_empty());
  EXPECT_EQ(td.batch_dims(), 0);
  EXPECT_EQ(td.numel(), 1);
  EXPECT_FALSE(td.device().has_value());
  EXPECT_FALSE(td.is_locked());
  td.set("x", torch::ones({2}));
  EXPECT_EQ(td.num_keys(), 1u);
}

TEST(TensorDictTest, CopiesAliasTheSameDict) {
  TensorDict td = make_td();
  TensorDict alias = td;
  alias.set("new", torch::zeros({4}));
  EXPECT_TRUE(td.contains("new"));
  EXPECT_TRUE(alias.is_same(td));
  TensorDict sub = td.get_tensordict("a");
  sub.set("z", torch::zeros({4}));
  EXPECT_TRUE(td.contains({"a", "z"}));
}

TEST(TensorDictTest, CloneIsDeep) {
  TensorDict td = make_td();
  TensorDict deep = td.clone();
  EXPECT_FALSE(deep.is_same(td));
  expect_td_equal(deep, td);
  deep.get({"a", "x"}).fill_(42);
  EXPECT_EQ(td.get({"a", "x"})[0].item<float>(), 0.f);
  deep.get_tensordict("a").set("only_in_clone", torch::zeros({4}));
  EXPECT_FALSE(td.contains({"a", "only_in_clone"}));
}

TEST(TensorDictTest, CopyIsShallow) {
  TensorDict td = make_td();
  TensorDict shallow = td.copy();
  // Same tensors...
  EXPECT_TRUE(shallow.get({"a", "x"}).is_same(td.get({"a", "x"})));
  // ...but new dicts, nested ones included (as Python's copy()).
  shallow.set("top", torch::zeros({4}));
  shallow.get_tensordict("a").set("inner", torch::zeros({4}));
  EXPECT_FALSE(td.contains("top"));
  EXPECT_FALSE(td.contains({"a", "inner"}));
}

TEST(TensorDictTest, MovedFromHandleIsStillUsable) {
  TensorDict td = make_td();
  TensorDict moved = std::move(td);
  EXPECT_EQ(moved.num_keys(), 3u);
  td.set("fresh", torch::zeros({4}));  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(td.contains("fresh"));
  TensorDict assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.batch_size(), c10::IntArrayRef({4}));
  moved.set("again", torch::zeros({1}));  // NOLINT(bugprone-use-after-move)
}

// --- construction
// --------------------------------------------------------------

TEST(TensorDictTest, ConstructsFromKeyValueLists) {
  TensorDict td(
      {{"t", torch::ones({2, 5})},
       {"nested", {{"deep", {{"leaf", torch::zeros({2})}}}}},
       {"text", "hello"},
       {"cfg", Json{{"lr", 0.1}}},
       {"sub", TensorDict({{"q", torch::ones({2, 1})}}, {2})},
       {"stack", NonTensorStack({"x", "y"})}},
      {2});
  EXPECT_EQ(
      td.keys(),
      (std::vector<NestedKey>{"t", "nested", "text", "cfg", "sub", "stack"}));
  EXPECT_EQ(td.get_tensordict("nested").batch_size(), c10::IntArrayRef({2}));
  EXPECT_EQ(td.get({"nested", "deep", "leaf"}).sizes(), c10::IntArrayRef({2}));
  EXPECT_EQ(td.get_non_tensor("text"), "hello");
  EXPECT_EQ(td.get_non_tensor("cfg")["lr"], 0.1);
  EXPECT_EQ(td.get_non_tensor("stack"), Json({"x", "y"}));
  EXPECT_EQ(td["text"].non_tensor_data().batch_size(), c10::IntArrayRef({2}));
}

TEST(TensorDictTest, NumbersNeedAnEmptyBatchSize) {
  TensorDict scalars({{"i", 1}, {"f", 1.5}, {"b", false}});
  EXPECT_EQ(scalars.get("i").scalar_type(), at::kLong);
  EXPECT_EQ(scalars.get("f").scalar_type(), at::kFloat);
  EXPECT_EQ(scalars.get("b").scalar_type(), at::kBool);
  EXPECT_THROWS_EXACTLY(
      TensorDict({{"n", 3.5}}, {4}),
      c10::Error,
      "batch dimension mismatch, got self.batch_size=torch.Size([4]) and "
      "value.shape=torch.Size([]) for key 'n'. The leading dimensions of a "
      "value must match the batch size.");
}

TEST(TensorDictTest, ConstructorChecksBatchSizeOfNestedLeaves) {
  EXPECT_THROWS_EXACTLY(
      TensorDict({{"a", {{"b", torch::zeros({4})}}}}, {5}),
      c10::Error,
      "batch dimension mismatch, got self.batch_size=torch.Size([5]) and "
      "value.shape=torch.Size([4]) for key 'b'. The leading dimensions of a "
      "value must match the batch size.");
  EXPECT_THROWS_WITH(
      TensorDict(std::vector<int64_t>{-2}),
      c10::ValueError,
      "batch size must be non-negative, got torch.Size([-2])");
}

TEST(TensorDictTest, FromDictInfersTheBatchSize) {
  std::vector<Item> items = {
      {"a", torch::zeros({3, 4, 5})}, {"b", {{"c", torch::zeros({3, 4})}}}};
  TensorDict plain = TensorDict::from_dict(items);
  EXPECT_EQ(plain.batch_size(), c10::IntArrayRef{});

  TensorDict inferred =
      TensorDict::from_dict(items, FromDictOptions().auto_batch_size(true));
  EXPECT_EQ(inferred.batch_size(), c10::IntArrayRef({3, 4}));
  EXPECT_EQ(
      inferred.get_tensordict("b").batch_size(), c10::IntArrayRef({3, 4}));

  TensorDict capped = TensorDict::from_dict(
      items, FromDictOptions().auto_batch_size(true).batch_dims(1));
  EXPECT_EQ(capped.batch_size(), c10::IntArrayRef({3}));
  EXPECT_EQ(capped.get_tensordict("b").batch_size(), c10::IntArrayRef({3}));

  TensorDict given = TensorDict::from_dict(
      items,
      FromDictOptions()
          .batch_size(std::vector<int64_t>{3})
          .names(DimNames{"time"}));
  EXPECT_EQ(given.batch_size(), c10::IntArrayRef({3}));
  EXPECT_EQ(given.names(), DimNames{"time"});
  EXPECT_EQ(given.get_tensordict("b").names(), DimNames{"time"});
}

TEST(TensorDictTest, FromDictTakesNamedParameters) {
  torch::nn::Sequential model(torch::nn::Linear(3, 4));
  const TensorDict td = TensorDict::from_dict(model->named_parameters());
  // What Python prints for TensorDict.from_dict(dict(s.named_parameters())).
  EXPECT_EQ(
      td.repr_compact(),
      "TensorDict(batch_size=[], fields={0.bias: f32[4], 0.weight: f32[4,3]})");
  EXPECT_EQ(td.keys(), (std::vector<NestedKey>{"0.weight", "0.bias"}));
  EXPECT_TRUE(
      td.get("0.weight").is_same(model[0]->named_parameters()["weight"]));

  torch::OrderedDict<std::string, at::Tensor> batched;
  batched.insert("x", torch::zeros({5, 2}));
  batched.insert("y", torch::zeros({5}));
  EXPECT_EQ(
      TensorDict::from_dict(batched, FromDictOptions().auto_batch_size(true))
          .batch_size(),
      c10::IntArrayRef({5}));
  // y has no dim 2: a batch size it does not start with is refused.
  EXPECT_THROW(
      (void)TensorDict::from_dict(
          batched, FromDictOptions().batch_size(std::vector<int64_t>{5, 2})),
      c10::Error);
}

TEST(TensorDictTest, FromDictIgnoresNonTensorDataWhenInferring) {
  TensorDict td = TensorDict::from_dict(
      {{"x", torch::zeros({2, 3})}, {"label", "cat"}},
      FromDictOptions().auto_batch_size(true));
  EXPECT_EQ(td.batch_size(), c10::IntArrayRef({2, 3}));
  EXPECT_EQ(
      td["label"].non_tensor_data().batch_size(), c10::IntArrayRef({2, 3}));
}

TEST(TensorDictTest, FromkeysSetsEveryKey) {
  TensorDict zeros = TensorDict::fromkeys({"a", {"b", "c"}});
  EXPECT_EQ(zeros.get("a").scalar_type(), at::kLong);
  EXPECT_EQ(zeros.get({"b", "c"}).item<int64_t>(), 0);
  TensorDict halves = TensorDict::fromkeys({"a"}, 1.5);
  EXPECT_EQ(halves.get("a").scalar_type(), at::kFloat);
  EXPECT_EQ(halves.get("a").item<float>(), 1.5f);
  TensorDict tensors = TensorDict::fromkeys({"a", "b"}, torch::ones({2}));
  EXPECT_TRUE(tensors.get("a").is_same(tensors.get("b")));
}

// --- batch size
// ----------------------------------------------------------------

TEST(TensorDictTest, BatchSizeAccessors) {
  TensorDict td({{"x", torch::zeros({2, 3, 4})}}, {2, 3});
  EXPECT_EQ(td.batch_size(), c10::IntArrayRef({2, 3}));
  EXPECT_EQ(td.shape(), c10::IntArrayRef({2, 3}));
  EXPECT_EQ(td.batch_dims(), 2);
  EXPECT_EQ(td.ndim(), 2);
  EXPECT_EQ(td.numel(), 6);
  EXPECT_EQ(td.size(0), 2);
  EXPECT_EQ(td.size(-1), 3);
  EXPECT_THROWS_EXACTLY(
      td.size(2),
      c10::IndexError,
      "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  // A temporary dict returns its batch size by value.
  std::vector<int64_t> owned = TensorDict({5}).batch_size();
  EXPECT_EQ(owned, (std::vector<int64_t>{5}));
}

TEST(TensorDictTest, SizeIsTheBatchSizeAndNumKeysCountsEntries) {
  // Python 0.15.3:
  //   td = TensorDict({"a": x, "b": {"c": y}}, [3, 4])
  //   td.size()              # torch.Size([3, 4])
  //   td.size(1)             # 4
  //   len(td.keys())         # 2
  //   TensorDict({}, []).size()   # torch.Size([])
  TensorDict td(
      {{"a", torch::zeros({3, 4, 2})},
       {"b", TensorDict({{"c", torch::zeros({3, 4})}}, {3, 4})}},
      {3, 4});
  EXPECT_EQ(td.size(), c10::IntArrayRef({3, 4}));
  EXPECT_EQ(td.size(), td.batch_size());
  EXPECT_EQ(td.size(1), 4);
  EXPECT_EQ(td.num_keys(), 2u);
  EXPECT_EQ(TensorDict().size(), c10::IntArrayRef({}));
  EXPECT_EQ(TensorDict().num_keys(), 0u);
  // A temporary dict returns it by value, as `batch_size()`.
  std::vector<int64_t> owned = TensorDict({5}).size();
  EXPECT_EQ(owned, (std::vector<int64_t>{5}));
}

TEST(TensorDictTest, SetBatchSizeGrowsNestedDictsAndShrinks) {
  TensorDict td(
      {{"a", {{"x", torch::zeros({4, 3})}}},
       {"b", torch::zeros({4, 3})},
       {"s", "text"},
       {"l", NonTensorStack({1, 2, 3, 4})}},
      {4});
  td.set_batch_size({4, 3});
  EXPECT_EQ(td["l"].non_tensor_stack().batch_size(), c10::IntArrayRef({4, 3}));
  EXPECT_EQ(td.get_non_tensor("l")[1], Json({2, 2, 2}));
  EXPECT_EQ(td.get_tensordict("a").batch_size(), c10::IntArrayRef({4, 3}));
  EXPECT_EQ(td["s"].non_tensor_data().batch_size(), c10::IntArrayRef({4, 3}));
  td.set_names({"n", "m"});
  EXPECT_EQ(td.get_tensordict("a").names(), (DimNames{"n", "m"}));
  td.set_batch_size({4});
  EXPECT_EQ(td.names(), DimNames{"n"});
  EXPECT_EQ(td.get_tensordict("a").batch_size(), c10::IntArrayRef({4, 3}));
  td.set_batch_size({});
  EXPECT_FALSE(td.has_names());
}

TEST(TensorDictTest, SetBatchSizeRejectsWhatDoesNotFitAndChangesNothing) {
  TensorDict td = make_td();
  EXPECT_THROWS_EXACTLY(
      td.set_batch_size({5}),
      c10::Error,
      "the Tensor b has shape torch.Size([4, 3]) which is incompatible with "
      "the batch-size torch.Size([5]).");
  EXPECT_EQ(td.batch_size(), c10::IntArrayRef({4}));
  // 'a' could grow to [4, 3] from x alone, but y is [4, 2]: nothing changes.
  EXPECT_THROWS_WITH(
      td.set_batch_size({4, 3}),
      c10::Error,
      "the Tensor y has shape torch.Size([4, 2]) which is incompatible with "
      "the batch-size torch.Size([4, 3]).");
  EXPECT_EQ(td.get_tensordict("a").batch_size(), c10::IntArrayRef({4}));
  EXPECT_EQ(td.batch_size(), c10::IntArrayRef({4}));
}

// --- device
// ----------------------------------------------------------------------

TEST(TensorDictTest, TensorsAreMovedToTheDictsDevice) {
  const c10::Device meta("meta");
  TensorDict td({{"x", torch::zeros({2})}}, {2}, meta);
  EXPECT_EQ(td.device(), meta);
  EXPECT_EQ(td.get("x").device(), meta);
  td.set("y", torch::ones({2, 2}), SetOptions().non_blocking(true));
  EXPECT_EQ(td.get("y").device(), meta);
  // Nested dicts share the device, and nested dicts created by set() too.
  td.set({"n", "z"}, torch::ones({2}));
  EXPECT_EQ(td.get_tensordict("n").device(), meta);
  TensorDict cpu_sub({{"w", torch::ones({2})}}, {2});
  td.set("sub", cpu_sub);
  EXPECT_EQ(td.get({"sub", "w"}).device(), meta);
  EXPECT_EQ(td.get_tensordict("sub").device(), meta);
  EXPECT_EQ(cpu_sub.get("w").device().type(), c10::kCPU);  // source untouched
}

TEST(TensorDictTest, WithoutADeviceLeavesStayWhereTheyAre) {
  TensorDict td({2});
  td.set("cpu", torch::zeros({2}));
  td.set("meta", torch::zeros({2}, torch::Device("meta")));
  EXPECT_EQ(td.get("cpu").device().type(), c10::kCPU);
  EXPECT_EQ(td.get("meta").device().type(), c10::kMeta);
  TensorDict moved = td.to(c10::Device("meta"));
  EXPECT_EQ(moved.device(), c10::Device("meta"));
  EXPECT_EQ(moved.get("cpu").device().type(), c10::kMeta);
}

// --- names
// ------------------------------------------------------------------------

TEST(TensorDictTest, NamesAreValidatedAgainstBatchDims) {
  EXPECT_THROWS_EXACTLY(
      TensorDict({{"a", torch::zeros({4})}}, {4}, std::nullopt, {"x", "y"}),
      c10::ValueError,
      "the length of the dimension names must equate the tensordict "
      "batch_dims attribute. Got ['x', 'y'] for batch_dims 1.");
  EXPECT_THROWS_EXACTLY(
      TensorDict({4, 3}, std::nullopt, {"x", "x"}),
      c10::ValueError,
      "Some dimension names are non-unique: ['x', 'x'].");
  TensorDict td({2, 3}, std::nullopt, {"x", std::nullopt});
  EXPECT_EQ(td.names(), (DimNames{"x", std::nullopt}));
  EXPECT_TRUE(td.has_names());
  EXPECT_EQ(TensorDict({2}).names(), DimNames{std::nullopt});
  EXPECT_FALSE(TensorDict({2}).has_names());
}

TEST(TensorDictTest, NamesPropagateToNestedDicts) {
  TensorDict td({{"n", {{"c", torch::zeros({2, 3, 1})}}}}, {2, 3});
  td.get_tensordict("n").set_batch_size({2, 3, 1});
  td.set_names({"x", "y"});
  EXPECT_EQ(td.get_tensordict("n").names(), (DimNames{"x", "y", std::nullopt}));
  td.set({"m", "d"}, torch::zeros({2, 3}));
  EXPECT_EQ(td.get_tensordict("m").names(), (DimNames{"x", "y"}));
  td.set_names({});
  EXPECT_FALSE(td.get_tensordict("n").has_names());
}

TEST(TensorDictTest, RefineNamesFillsUnnamedDimsInPlace) {
  TensorDict td(
      {{"a", torch::zeros({2, 3})}}, {2, 3}, std::nullopt, {"x", std::nullopt});
  td.refine_names({"x", "y"});
  EXPECT_EQ(td.names(), (DimNames{"x", "y"}));
  EXPECT_THROWS_EXACTLY(
      td.refine_names({"w", "y"}),
      c10::Error,
      "refine_names: cannot coerce TensorDict names ['x', 'y'] with ['w', "
      "'y'].");
  TensorDict other({2, 3, 4});
  other.refine_names({"...", "z"});
  EXPECT_EQ(other.names(), (DimNames{std::nullopt, std::nullopt, "z"}));
}

TEST(TensorDictTest, RenameReturnsAShallowCopy) {
  TensorDict td(
      {{"a", torch::zeros({2, 3})}}, {2, 3}, std::nullopt, {"x", "y"});
  TensorDict renamed = td.rename(DimNames{"p", "q"});
  EXPECT_EQ(renamed.names(), (DimNames{"p", "q"}));
  EXPECT_EQ(td.names(), (DimNames{"x", "y"}));
  EXPECT_TRUE(renamed.get("a").is_same(td.get("a")));
  EXPECT_EQ(td.rename_by_map({{"x", "z"}}).names(), (DimNames{"z", "y"}));
  EXPECT_THROWS_EXACTLY(
      td.rename_by_map({{"w", "z"}}),
      c10::ValueError,
      "Some names to be renamed were not part of the tensordict names: ['w'] "
      "vs ['x', 'y'].");
  td.rename_({"u", "v"});
  EXPECT_EQ(td.names(), (DimNames{"u", "v"}));
}

// --- reading
// ----------------------------------------------------------------------

TEST(TensorDictTest, GetReadsNestedKeys) {
  TensorDict td = make_td();
  EXPECT_TRUE(
      torch::equal(td.get({"a", "x"}), torch::arange(4, torch::kFloat)));
  EXPECT_TRUE(torch::equal(
      td.get(NestedKey{"a", {"y"}}), torch::ones({4, 2}, torch::kLong)));
  EXPECT_TRUE(td["a"].is_tensordict());
  EXPECT_EQ(td["s"].non_tensor(), "text");
}

TEST(TensorDictTest, GetThrowsAKeyErrorListingTheKeys) {
  TensorDict td = make_td();
  EXPECT_THROWS_EXACTLY(
      td.get("zz"),
      KeyError,
      "key \"zz\" not found in TensorDict with keys ['a', 'b', 's']");
  EXPECT_THROWS_EXACTLY(
      td.get({"a", "zz"}),
      KeyError,
      "key \"zz\" not found in TensorDict with keys ['x', 'y'] (while looking "
      "up ('a', 'zz'))");
  EXPECT_THROWS_EXACTLY(
      td.get({"zz", "x"}),
      KeyError,
      "key \"zz\" not found in TensorDict with keys ['a', 'b', 's'] (while "
      "looking up ('zz', 'x'))");
  EXPECT_THROWS_EXACTLY(
      td.get({"b", "zz"}),
      KeyError,
      "'b' is a Tensor, not a tensordict, so it has no entry 'zz'.");
  EXPECT_THROWS_EXACTLY(
      td["zz"],
      KeyError,
      "key \"zz\" not found in TensorDict with keys ['a', 'b', 's']");
}

TEST(TensorDictTest, GetOfTheWrongKindIsATypeError) {
  TensorDict td = make_td();
  EXPECT_THROWS_EXACTLY(
      td.get("a"),
      c10::TypeError,
      "the entry 'a' is a TensorDict, not a Tensor");
  EXPECT_THROWS_EXACTLY(
      td.get_tensordict("b"),
      c10::TypeError,
      "the entry 'b' is a Tensor, not a TensorDict");
  EXPECT_THROWS_EXACTLY(
      td.get_non_tensor("b"),
      c10::TypeError,
      "the entry 'b' is a Tensor, not a NonTensorData or NonTensorStack");
  EXPECT_THROWS_WITH(
      td.get("s", torch::ones({1})), c10::TypeError, "is a NonTensorData");
}

TEST(TensorDictTest, FindReturnsNullInsteadOfThrowing) {
  TensorDict td = make_td();
  const Value* x = td.find({"a", "x"});
  ASSERT_NE(x, nullptr);
  EXPECT_TRUE(x->tensor().is_same(td.get({"a", "x"})));
  EXPECT_EQ(td.find("zz"), nullptr);
  EXPECT_EQ(td.find({"a", "zz"}), nullptr);
  EXPECT_EQ(td.find({"b", "through", "leaf"}), nullptr);
  EXPECT_EQ(td.find({"zz", "x"}), nullptr);
}

TEST(TensorDictTest, GetWithADefault) {
  TensorDict td = make_td();
  at::Tensor fallback = torch::full({1}, 7);
  EXPECT_TRUE(td.get("zz", fallback).is_same(fallback));
  EXPECT_TRUE(td.get({"a", "zz"}, fallback).is_same(fallback));
  EXPECT_TRUE(td.get("b", fallback).is_same(td.get("b")));
  EXPECT_EQ(td.get_non_tensor("zz", "dflt"), "dflt");
  EXPECT_EQ(td.get_non_tensor("s", "dflt"), "text");
}

TEST(TensorDictTest, ContainsUnderstandsNestedKeys) {
  TensorDict td = make_td();
  EXPECT_TRUE(td.contains("a"));
  EXPECT_TRUE(td.contains({"a", "y"}));
  EXPECT_TRUE(td.contains("s"));
  EXPECT_FALSE(td.contains({"a", "q"}));
  EXPECT_FALSE(td.contains({"b", "q"}));
}

TEST(TensorDictTest, SetdefaultSetsOnlyWhenMissing) {
  TensorDict td = make_td();
  Value first = td.setdefault("q", Value(torch::ones({4})));
  EXPECT_TRUE(torch::equal(first.tensor(), torch::ones({4})));
  Value second = td.setdefault("q", Value(torch::zeros({4})));
  EXPECT_TRUE(torch::equal(second.tensor(), torch::ones({4})));
  Value nested = td.setdefault({"new", "leaf"}, Value(torch::zeros({4})));
  EXPECT_TRUE(td.contains({"new", "leaf"}));
  EXPECT_TRUE(nested.tensor().is_same(td.get({"new", "leaf"})));
}

TEST(TensorDictTest, NonTensorAccessors) {
  TensorDict td = make_td();
  EXPECT_TRUE(td.is_non_tensor("s"));
  EXPECT_FALSE(td.is_non_tensor("b"));
  EXPECT_FALSE(td.is_non_tensor("a"));
  EXPECT_THROWS_WITH(td.is_non_tensor("zz"), KeyError, "key \"zz\" not found");
  td.set_non_tensor({"a", "meta"}, Json{{"seed", 1}});
  EXPECT_EQ(td.get_non_tensor({"a", "meta"})["seed"], 1);
  EXPECT_EQ(
      td[NestedKey({"a", "meta"})].non_tensor_data().batch_size(),
      c10::IntArrayRef({4}));
  td.set("stack", Value(NonTensorStack({1, 2, 3, 4})));
  EXPECT_EQ(td.get_non_tensor("stack"), Json({1, 2, 3, 4}));
}

TEST(TensorDictTest, ReadingAnExistingKeyAllocatesNothing) {
  if (tensordict::testing::allocation_count() < 0) {
    GTEST_SKIP() << "allocation counting is off in sanitizer builds";
  }
  TensorDict td(
      {{"a_key_too_long_for_small_strings", {{"b", {{"c", torch::ones({2})}}}}},
       {"obs", torch::zeros({2})}},
      {2});
  at::Tensor sink;
  const int64_t before = tensordict::testing::allocation_count();
  sink = td.get("obs");
  sink = td.get({"a_key_too_long_for_small_strings", "b", "c"});
  const bool found = td.contains({"a_key_too_long_for_small_strings", "b"});
  const Value* value = td.find("obs");
  sink = td.get("obs", sink);
  const int64_t after = tensordict::testing::allocation_count();
  EXPECT_EQ(after - before, 0);
  EXPECT_TRUE(found);
  EXPECT_NE(value, nullptr);
}

// --- writing
// ----------------------------------------------------------------------

TEST(TensorDictTest, SetCreatesMissingNestedLevels) {
  TensorDict td({4, 2});
  td.set({"a", "b", "c"}, torch::zeros({4, 2, 7}));
  EXPECT_EQ(
      td.get_tensordict({"a", "b"}).batch_size(), c10::IntArrayRef({4, 2}));
  EXPECT_EQ(td.get({"a", "b", "c"}).size(2), 7);
}

TEST(TensorDictTest, SetMakesMissingLevelsLikeTheDeepestExistingDict) {
  TensorDict td({4}, std::nullopt, {"n"});
  td.set("a", TensorDict({4, 3}));
  td.set({"a", "b", "c", "x"}, torch::zeros({4, 3, 5}));
  for (const NestedKey& level :
       {NestedKey({"a", "b"}), NestedKey({"a", "b", "c"})}) {
    const TensorDict made = td.get_tensordict(level);
    EXPECT_EQ(made.batch_size(), c10::IntArrayRef({4, 3})) << level.to_string();
    EXPECT_EQ(made.names(), (DimNames{"n", std::nullopt})) << level.to_string();
  }
  EXPECT_EQ(td.get({"a", "b", "c", "x"}).size(2), 5);
  EXPECT_EQ(td.get_tensordict("a").keys(), (std::vector<NestedKey>{"b"}));
}

TEST(TensorDictTest, SetIntoALockedNestedDictLeavesNoNewLevels) {
  TensorDict td({4});
  TensorDict child({4});
  td.set("a", child);
  child.lock_();
  EXPECT_THROWS_EXACTLY(
      td.set({"a", "new", "leaf"}, torch::zeros({4})), c10::Error, kLockError);
  EXPECT_FALSE(td.contains({"a", "new"}));
  EXPECT_TRUE(child.is_empty());
  // The unlocked root still takes new levels.
  td.set({"b", "leaf"}, torch::zeros({4}));
  EXPECT_TRUE(td.contains({"b", "leaf"}));
}

TEST(TensorDictTest, SettingAnExistingNestedKeyAllocatesNothing) {
  if (tensordict::testing::allocation_count() < 0) {
    GTEST_SKIP() << "allocation counting is off in sanitizer builds";
  }
  TensorDict td(
      {{"a_key_too_long_for_small_strings",
        {{"b", {{"c", torch::ones({2})}}}}}},
      {2});
  const at::Tensor value = torch::zeros({2});
  const int64_t before = tensordict::testing::allocation_count();
  td.set({"a_key_too_long_for_small_strings", "b", "c"}, value);
  const int64_t after = tensordict::testing::allocation_count();
  EXPECT_EQ(after - before, 0);
  EXPECT_TRUE(
      td.get({"a_key_too_long_for_small_strings", "b", "c"}).is_same(value));
}

TEST(TensorDictTest, SetChecksTheBatchSizeAndNamesTheNestedKey) {
  TensorDict td = make_td();
  EXPECT_THROWS_EXACTLY(
      td.set("c", torch::zeros({3})),
      c10::Error,
      "batch dimension mismatch, got self.batch_size=torch.Size([4]) and "
      "value.shape=torch.Size([3]) for key 'c'. The leading dimensions of a "
      "value must match the batch size.");
  EXPECT_THROWS_EXACTLY(
      td.set({"a", "c"}, torch::zeros({3})),
      c10::Error,
      "batch dimension mismatch, got self.batch_size=torch.Size([4]) and "
      "value.shape=torch.Size([3]) for key ('a', 'c'). The leading "
      "dimensions of a value must match the batch size.");
  EXPECT_THROWS_WITH(
      td.set("sub", TensorDict({3})),
      c10::Error,
      "value.shape=torch.Size([3]) for key 'sub'");
  EXPECT_THROWS_WITH(
      td.set("ns", Value(NonTensorData("x", {3}))),
      c10::Error,
      "value.shape=torch.Size([3]) for key 'ns'");
  EXPECT_THROWS_WITH(
      td.set("st", Value(NonTensorStack({1, 2}))),
      c10::Error,
      "value.shape=torch.Size([2]) for key 'st'");
  EXPECT_FALSE(td.contains("c"));
  EXPECT_FALSE(td.contains({"a", "c"}));
  // A rejected value does not leave the levels it would have created.
  EXPECT_THROWS_WITH(
      td.set({"new", "deeper", "leaf"}, torch::zeros({3})),
      c10::Error,
      "for key ('new', 'deeper', 'leaf')");
  EXPECT_FALSE(td.contains("new"));
  td.lock_();
  EXPECT_THROWS_EXACTLY(
      td.set({"new", "leaf"}, torch::zeros({4})), c10::Error, kLockError);
  EXPECT_FALSE(td.contains("new"));
}

TEST(TensorDictTest, SetThroughALeafIsAKeyError) {
  TensorDict td = make_td();
  EXPECT_THROWS_EXACTLY(
      td.set({"b", "c"}, torch::zeros({4})),
      KeyError,
      "'b' is a Tensor, not a tensordict, so it has no entry 'c'.");
  EXPECT_THROWS_EXACTLY(
      td.set({"a", "x", "deeper"}, torch::zeros({4})),
      KeyError,
      "('a', 'x') is a Tensor, not a tensordict, so it has no entry 'deeper'.");
}

TEST(TensorDictTest, SetReplacesAndKeepsPosition) {
  TensorDict td = make_td();
  at::Tensor old = td.get("b");
  td.set("b", torch::ones({4, 9}));
  EXPECT_EQ(td.get("b").size(1), 9);
  EXPECT_EQ(old.size(1), 3);  // replaced, not written into
  EXPECT_EQ(td.keys(), (std::vector<NestedKey>{"b", "a", "s"}));
  // A tensor over a tensor takes a path of its own: the same checks.
  const at::Tensor kept = td.get("b");
  EXPECT_THROWS_EXACTLY(
      td.set("b", torch::zeros({3, 9})),
      c10::Error,
      "batch dimension mismatch, got self.batch_size=torch.Size([4]) and "
      "value.shape=torch.Size([3, 9]) for key 'b'. The leading dimensions of "
      "a value must match the batch size.");
  EXPECT_TRUE(td.get("b").is_same(kept));
  td.lock_();
  EXPECT_THROWS_EXACTLY(
      td.set("b", torch::zeros({4, 9})), c10::Error, kLockError);
  EXPECT_TRUE(td.get("b").is_same(kept));
}

TEST(TensorDictTest, SetInplaceWritesIntoTheExistingTensor) {
  TensorDict td = make_td();
  at::Tensor old = td.get("b");
  td.set("b", torch::ones({4, 3}), SetOptions().inplace(true));
  EXPECT_TRUE(td.get("b").is_same(old));
  EXPECT_EQ(old.sum().item<float>(), 12.f);
  // A missing key is created.
  td.set("fresh", torch::ones({4}), SetOptions().inplace(true));
  EXPECT_TRUE(td.contains("fresh"));
}

TEST(TensorDictTest, SetRejectsADictHoldingItself) {
  TensorDict td({2});
  EXPECT_THROWS_EXACTLY(
      td.set("me", td),
      c10::ValueError,
      "cannot set 'me': a TensorDict cannot hold itself");
  TensorDict child({2});
  td.set("child", child);
  EXPECT_THROWS_WITH(
      child.set("parent", td), c10::ValueError, "cannot hold itself");
}

TEST(TensorDictTest, SetNonTensorBroadcastsToTheBatch) {
  TensorDict td({3});
  td.set_non_tensor("label", "cat");
  EXPECT_EQ(td["label"].non_tensor_data().batch_size(), c10::IntArrayRef({3}));
  td.set("plain", Value(NonTensorData("dog")));
  EXPECT_EQ(td["plain"].non_tensor_data().batch_size(), c10::IntArrayRef({3}));
  td.set("longer", Value(NonTensorData("x", {3, 2})));
  EXPECT_EQ(
      td["longer"].non_tensor_data().batch_size(), c10::IntArrayRef({3, 2}));
}

TEST(TensorDictTest, StrictSetInPlace) {
  TensorDict td = make_td();
  at::Tensor b = td.get("b");
  td.set_("b", torch::ones({4, 3}, torch::kInt));  // int -> float is safe
  EXPECT_TRUE(td.get("b").is_same(b));
  EXPECT_EQ(b.sum().item<float>(), 12.f);
  td.set_("b", torch::full({4, 1}, 2.f));  // feature dims broadcast
  EXPECT_EQ(b.sum().item<float>(), 24.f);
  EXPECT_THROWS_EXACTLY(
      td.set_("zz", torch::zeros({4})),
      KeyError,
      "key \"zz\" not found in TensorDict with keys ['a', 'b', 's']");
  EXPECT_THROWS_EXACTLY(
      td.set_("b", torch::zeros({4, 2})),
      c10::Error,
      "Failed to update 'b': the value of shape torch.Size([4, 2]) does not "
      "fit the entry of shape torch.Size([4, 3])");
  EXPECT_THROWS_EXACTLY(
      td.set_("b", torch::zeros({4, 3}, torch::kComplexFloat)),
      c10::TypeError,
      "Failed to update 'b': a value of dtype torch.complex64 cannot be cast "
      "safely to the entry's dtype torch.float32");
  EXPECT_THROWS_WITH(
      td.set_({"a", "y"}, torch::zeros({4, 2})),
      c10::TypeError,
      "a value of dtype torch.float32 cannot be cast safely to the entry's "
      "dtype torch.int64");
  EXPECT_THROWS_EXACTLY(
      td.set_("a", torch::zeros({4})),
      c10::TypeError,
      "the entry 'a' is a TensorDict, not a Tensor");
  EXPECT_THROWS_WITH(
      td.set_("b", torch::zeros({3})),
      c10::Error,
      "batch dimension mismatch, got self.batch_size=torch.Size([4]) and "
      "value.shape=torch.Size([3]) for key 'b'");
}

// --- update
// ---------------------------------------------------------------------

TEST(TensorDictTest, UpdateMergesRecursively) {
  TensorDict td = make_td();
  at::Tensor old_x = td.get({"a", "x"});
  TensorDict other(
      {{"a", {{"x", torch::full({4}, 7.f)}, {"z", torch::ones({4})}}},
       {"w", torch::ones({4})}},
      {4});
  td.update(other);
  EXPECT_EQ(
      td.get_tensordict("a").keys(), (std::vector<NestedKey>{"y", "x", "z"}));
  EXPECT_EQ(td.get({"a", "x"})[0].item<float>(), 7.f);
  EXPECT_EQ(old_x[0].item<float>(), 0.f);  // replaced, not written into
  EXPECT_TRUE(td.contains("w"));
  EXPECT_TRUE(td.get("w").is_same(other.get("w")));  // aliased, as in Python
}

TEST(TensorDictTest, UpdateInplaceAndClone) {
  TensorDict td = make_td();
  at::Tensor old_x = td.get({"a", "x"});
  TensorDict other({{"a", {{"x", torch::full({4}, 7.f)}}}}, {4});
  td.update(other, UpdateOptions().inplace(true));
  EXPECT_TRUE(td.get({"a", "x"}).is_same(old_x));
  EXPECT_EQ(old_x[3].item<float>(), 7.f);
  TensorDict cloned = make_td();
  cloned.update(
      TensorDict({{"w", torch::ones({4})}}, {4}), UpdateOptions().clone(true));
  EXPECT_EQ(cloned.get("w").sum().item<float>(), 4.f);
}

TEST(TensorDictTest, UpdateKeysToUpdateFilters) {
  TensorDict td = make_td();
  TensorDict other(
      {{"w", torch::zeros({4})},
       {"b", torch::ones({4, 3})},
       {"a",
        {{"x", torch::full({4}, 5.f)},
         {"y", torch::zeros({4, 2}, torch::kLong)}}},
       {"n", {{"deep", torch::ones({4})}, {"skip", torch::ones({4})}}}},
      {4});
  td.update(
      other, UpdateOptions().keys_to_update({"w", {"a", "x"}, {"n", "deep"}}));
  EXPECT_TRUE(td.contains("w"));
  EXPECT_EQ(td.get("b").sum().item<float>(), 0.f);
  EXPECT_EQ(td.get({"a", "x"})[0].item<float>(), 5.f);
  EXPECT_EQ(td.get({"a", "y"}).sum().item<int64_t>(), 8);
  EXPECT_TRUE(td.contains({"n", "deep"}));
  EXPECT_FALSE(td.contains({"n", "skip"}));
}

TEST(TensorDictTest, StrictUpdateInPlace) {
  TensorDict td = make_td();
  at::Tensor b = td.get("b");
  td.update_(TensorDict({{"b", torch::ones({4, 3})}, {"s", "changed"}}, {4}));
  EXPECT_TRUE(td.get("b").is_same(b));
  EXPECT_EQ(b.sum().item<float>(), 12.f);
  EXPECT_EQ(td.get_non_tensor("s"), "changed");
  EXPECT_THROWS_EXACTLY(
      td.update_(TensorDict({{"nope", torch::zeros({4})}}, {4})),
      KeyError,
      "The key 'nope' was not found in the dest tensordict.");
  td.update_(
      TensorDict(
          {{"b", torch::zeros({4, 3})}, {"nope", torch::zeros({4})}}, {4}),
      {"b"});
  EXPECT_EQ(b.sum().item<float>(), 0.f);
}

// --- select / exclude
// -----------------------------------------------------------

TEST(TensorDictTest, SelectKeepsOnlyTheGivenKeys) {
  TensorDict td = make_td();
  TensorDict picked = td.select({{"a", "x"}, "s"});
  EXPECT_EQ(
      key_strings(picked.keys(true)), (Strings{"('a', 'x')", "'a'", "'s'"}));
  EXPECT_TRUE(picked.get({"a", "x"}).is_same(td.get({"a", "x"})));
  EXPECT_EQ(picked.batch_size(), c10::IntArrayRef({4}));
  EXPECT_EQ(td.select({"b", "a"}).keys(), (std::vector<NestedKey>{"b", "a"}));
  EXPECT_THROWS_EXACTLY(
      td.select({"zz"}),
      KeyError,
      "key \"zz\" not found in TensorDict with keys ['a', 'b', 's']");
  EXPECT_THROWS_WITH(
      td.select({{"a", "zz"}}),
      KeyError,
      "key \"zz\" not found in TensorDict with keys ['x', 'y']");
  EXPECT_EQ(
      td.select({"b", "zz"}, /*strict=*/false).keys(),
      (std::vector<NestedKey>{"b"}));
}

TEST(TensorDictTest, SelectKeepsNestedBatchSizes) {
  TensorDict td({{"a", {{"x", torch::zeros({2, 3})}}}}, {2});
  td.get_tensordict("a").set_batch_size({2, 3});
  TensorDict picked = td.select({{"a", "x"}});
  EXPECT_EQ(picked.get_tensordict("a").batch_size(), c10::IntArrayRef({2, 3}));
}

TEST(TensorDictTest, ExcludeDropsKeysAndLeavesTheSourceAlone) {
  TensorDict td = make_td();
  TensorDict rest = td.exclude({{"a", "x"}, "zz"});
  EXPECT_EQ(
      key_strings(rest.keys(true)),
      (Strings{"'b'", "('a', 'y')", "'a'", "'s'"}));
  EXPECT_TRUE(td.contains({"a", "x"}));
  EXPECT_EQ(td.exclude({"a", "b", "s"}).num_keys(), 0u);
}

// --- keys, items, values
// ----------------------------------------------------------

TEST(TensorDictTest, KeysFollowPythonsOrder) {
  TensorDict td = make_td();
  td.set("e", TensorDict({4}));
  EXPECT_EQ(key_strings(td.keys()), (Strings{"'b'", "'a'", "'s'", "'e'"}));
  EXPECT_EQ(
      key_strings(td.keys(/*include_nested=*/true)),
      (Strings{"'b'", "('a', 'y')", "('a', 'x')", "'a'", "'s'", "'e'"}));
  EXPECT_EQ(
      key_strings(td.keys(/*include_nested=*/true, /*leaves_only=*/true)),
      (Strings{"'b'", "('a', 'y')", "('a', 'x')"}));
  EXPECT_EQ(
      key_strings(td.keys(true, true, /*sort=*/true)),
      (Strings{"('a', 'x')", "('a', 'y')", "'b'"}));
  EXPECT_EQ(
      key_strings(td.keys(true, false, true)),
      (Strings{"'a'", "('a', 'x')", "('a', 'y')", "'b'", "'e'", "'s'"}));
  EXPECT_EQ(key_strings(td.keys(false, true)), (Strings{"'b'"}));
}

TEST(TensorDictTest, ItemsAndValuesMatchKeys) {
  TensorDict td = make_td();
  auto items = td.items(true, true);
  auto values = td.values(true, true);
  ASSERT_EQ(items.size(), 3u);
  ASSERT_EQ(values.size(), 3u);
  for (size_t i = 0; i < items.size(); ++i) {
    EXPECT_TRUE(items[i].second.tensor().is_same(td.get(items[i].first)));
    EXPECT_TRUE(values[i].tensor().is_same(items[i].second.tensor()));
  }
}

TEST(TensorDictTest, FlattenAndUnflattenKeys) {
  TensorDict td = make_td();
  td.set("e", TensorDict({4}));
  TensorDict flat = td.flatten_keys("/");
  EXPECT_EQ(
      key_strings(flat.keys()), (Strings{"'b'", "'a/y'", "'a/x'", "'s'"}));
  EXPECT_TRUE(flat.get("a/x").is_same(td.get({"a", "x"})));
  TensorDict back = flat.unflatten_keys("/");
  EXPECT_EQ(
      key_strings(back.keys(true)),
      (Strings{"'b'", "('a', 'y')", "('a', 'x')", "'a'", "'s'"}));
  EXPECT_EQ(
      key_strings(td.flatten_keys().keys()),
      (Strings{"'b'", "'a.y'", "'a.x'", "'s'"}));
}

TEST(TensorDictTest, FlattenAndUnflattenReportCollisions) {
  TensorDict clash(
      {{"a.b", torch::zeros({2})}, {"a", {{"b", torch::zeros({2})}}}}, {2});
  EXPECT_THROWS_EXACTLY(
      clash.flatten_keys(),
      KeyError,
      "Flattening keys in tensordict causes keys [('a', 'b')] to collide.");
  TensorDict leaf({{"a", torch::zeros({2})}, {"a.b", torch::zeros({2})}}, {2});
  EXPECT_THROWS_EXACTLY(
      leaf.unflatten_keys(),
      KeyError,
      "Unflattening key(s) in tensordict will override an existing for "
      "unflattened key ('a', 'b').");
  TensorDict merge(
      {{"a", {{"b", torch::zeros({2})}}}, {"a.c", torch::zeros({2})}}, {2});
  EXPECT_EQ(
      key_strings(merge.unflatten_keys().keys(true, true)),
      (Strings{"('a', 'b')", "('a', 'c')"}));
}

// --- removing and renaming
// ---------------------------------------------------------

TEST(TensorDictTest, RenameKeyMovesTheEntryToTheEnd) {
  TensorDict td = make_td();
  at::Tensor b = td.get("b");
  td.rename_key_("b", "c");
  EXPECT_EQ(key_strings(td.keys()), (Strings{"'a'", "'s'", "'c'"}));
  EXPECT_TRUE(td.get("c").is_same(b));
  td.rename_key_({"a", "x"}, {"a", "x2"});
  EXPECT_EQ(
      key_strings(td.get_tensordict("a").keys()), (Strings{"'y'", "'x2'"}));
  td.rename_key_({"a", "y"}, "top");
  EXPECT_TRUE(td.contains("top"));
  td.rename_key_("s", "s");  // renaming onto itself keeps the entry
  EXPECT_TRUE(td.contains("s"));
  EXPECT_THROWS_EXACTLY(
      td.rename_key_("c", "a", /*safe=*/true),
      KeyError,
      "key a already present in TensorDict.");
  EXPECT_THROWS_EXACTLY(
      td.rename_key_("zz", "k"),
      KeyError,
      "key \"zz\" not found in TensorDict with keys ['a', 'c', 's', 'top']");
}

TEST(TensorDictTest, RenameKeyChecksTheBatchSizeOfTheNewPlace) {
  TensorDict td({{"n", {{"deep", torch::zeros({2, 3})}}}}, {2});
  td.get_tensordict("n").set_batch_size({2, 3});
  td.set("flat", torch::zeros({2, 5}));
  EXPECT_THROWS_WITH(
      td.rename_key_("flat", {"n", "flat"}),
      c10::Error,
      "value.shape=torch.Size([2, 5]) for key ('n', 'flat')");
  EXPECT_TRUE(td.contains("flat"));
}

TEST(TensorDictTest, PopDelAndClear) {
  TensorDict td = make_td();
  Value b = td.pop("b");
  EXPECT_EQ(b.tensor().size(1), 3);
  EXPECT_FALSE(td.contains("b"));
  EXPECT_THROWS_EXACTLY(
      td.pop("b"),
      KeyError,
      "key \"b\" not found in TensorDict with keys ['a', 's']");
  Value dflt = td.pop("b", Value(torch::ones({1})));
  EXPECT_EQ(dflt.tensor().item<float>(), 1.f);
  td.del_({"a", "x"});
  EXPECT_EQ(key_strings(td.get_tensordict("a").keys()), (Strings{"'y'"}));
  EXPECT_THROWS_WITH(td.del_("zz"), KeyError, "key \"zz\" not found");
  td.clear();
  EXPECT_TRUE(td.is_empty());
  EXPECT_EQ(td.batch_size(), c10::IntArrayRef({4}));
}

// Python:
//   td = TensorDict(a=torch.tensor([1., 2.]), b=torch.tensor([3, 4]),
//                   batch_size=[2])
//   td.popitem()  # ('b', tensor([3, 4])); list(td.keys()) == ['a']
//   TensorDict().popitem()  # KeyError: 'popitem(): dictionary is empty'
//   TensorDict(a=torch.zeros(2), batch_size=[2]).lock_().popitem()
//   # RuntimeError: Cannot modify locked TensorDict. ...
TEST(TensorDictTest, PopitemRemovesTheLastInsertedEntry) {
  TensorDict td(
      {{"a", torch::tensor({1.0f, 2.0f})},
       {"b", torch::tensor({3, 4}, torch::kLong)}},
      {2});
  td.set("n", TensorDict({{"y", torch::zeros({2, 1})}}, {2}));
  auto [nkey, nvalue] = td.popitem();
  EXPECT_EQ(nkey, "n");
  ASSERT_TRUE(nvalue.is_tensordict());
  EXPECT_EQ(nvalue.tensordict().get("y").sizes(), c10::IntArrayRef({2, 1}));
  auto [key, value] = td.popitem();
  EXPECT_EQ(key, "b");
  ASSERT_TRUE(value.is_tensor());
  EXPECT_EQ(value.tensor().scalar_type(), torch::kLong);
  EXPECT_TRUE(
      torch::equal(value.tensor(), torch::tensor({3, 4}, torch::kLong)));
  EXPECT_EQ(key_strings(td.keys()), (Strings{"'a'"}));
  // A key set again goes to the end.
  td.set("b", torch::zeros({2}));
  td.set("a", torch::ones({2}));
  EXPECT_EQ(td.popitem().first, "b");
  EXPECT_EQ(td.popitem().first, "a");
  EXPECT_THROWS_EXACTLY(
      td.popitem(), KeyError, "popitem(): dictionary is empty");
  TensorDict locked({{"a", torch::zeros({2})}}, {2});
  locked.lock_();
  EXPECT_THROWS_EXACTLY(locked.popitem(), c10::Error, kLockError);
  EXPECT_TRUE(locked.contains("a"));
  // The lock is checked first, as in Python.
  EXPECT_THROWS_EXACTLY(
      TensorDict({2}).lock_().popitem(), c10::Error, kLockError);
}

TEST(TensorDictTest, EmptyKeepsTheShapeAndOptionallyTheStructure) {
  TensorDict td(
      {{"a", {{"b", {{"c", torch::zeros({2})}}}}}, {"x", torch::zeros({2})}},
      {2},
      std::nullopt,
      {"n"});
  TensorDict flat = td.empty();
  EXPECT_TRUE(flat.is_empty());
  EXPECT_EQ(flat.batch_size(), c10::IntArrayRef({2}));
  EXPECT_EQ(flat.names(), DimNames{"n"});
  TensorDict tree = td.empty(/*recurse=*/true);
  EXPECT_EQ(key_strings(tree.keys(true)), (Strings{"('a', 'b')", "'a'"}));
  EXPECT_TRUE(tree.get_tensordict({"a", "b"}).is_empty());
}

// --- locking
// ----------------------------------------------------------------------

TEST(TensorDictTest, LockedDictRefusesStructuralChanges) {
  TensorDict td = make_td();
  td.lock_();
  EXPECT_TRUE(td.is_locked());
  EXPECT_TRUE(td.get_tensordict("a").is_locked());
  EXPECT_THROWS_EXACTLY(td.set("c", torch::zeros({4})), c10::Error, kLockError);
  EXPECT_THROWS_EXACTLY(
      td.set("b", torch::zeros({4, 3})), c10::Error, kLockError);
  EXPECT_THROWS_EXACTLY(
      td.set({"a", "new"}, torch::zeros({4})), c10::Error, kLockError);
  EXPECT_THROWS_EXACTLY(
      td.set({"new", "leaf"}, torch::zeros({4})), c10::Error, kLockError);
  EXPECT_THROWS_EXACTLY(td.del_("b"), c10::Error, kLockError);
  EXPECT_THROWS_EXACTLY(td.pop({"a", "x"}), c10::Error, kLockError);
  EXPECT_THROWS_EXACTLY(td.rename_key_("b", "c"), c10::Error, kLockError);
  EXPECT_THROWS_EXACTLY(td.clear(), c10::Error, kLockError);
  EXPECT_FALSE(td.contains("new"));
  // In-place writes are fine.
  td.set_("b", torch::ones({4, 3}));
  td.set({"a", "x"}, torch::ones({4}), SetOptions().inplace(true));
  td.update_(TensorDict({{"b", torch::full({4, 3}, 2.f)}}, {4}));
  td.set("s", Value(NonTensorData("replaced")), SetOptions().inplace(true));
  EXPECT_EQ(td.get("b").sum().item<float>(), 24.f);
  EXPECT_EQ(td.get_non_tensor("s"), "replaced");
  td.unlock_();
  EXPECT_FALSE(td.get_tensordict("a").is_locked());
  td.set("c", torch::zeros({4}));
}

TEST(TensorDictTest, NestedDictOfALockedParentCannotBeUnlocked) {
  TensorDict td = make_td();
  td.lock_();
  TensorDict a = td.get_tensordict("a");
  EXPECT_THROWS_EXACTLY(
      a.unlock_(),
      c10::Error,
      "Cannot unlock a tensordict that is part of a locked graph. Unlock the "
      "root tensordict first. If the tensordict is part of multiple graphs, "
      "group the graphs under a common tensordict an unlock this root.");
  EXPECT_TRUE(a.is_locked());
  td.unlock_();
  a.unlock_();
  EXPECT_FALSE(a.is_locked());
}

TEST(TensorDictTest, SharedNestedDictStaysLockedWhileAnotherParentIsLocked) {
  TensorDict shared({{"x", torch::zeros({2})}}, {2});
  TensorDict p1({{"s", shared}}, {2});
  TensorDict p2({{"s", shared}}, {2});
  p1.lock_();
  p2.lock_();
  p1.unlock_();
  EXPECT_TRUE(shared.is_locked());
  p2.unlock_();
  EXPECT_FALSE(shared.is_locked());
}

TEST(TensorDictTest, ADestroyedLockedParentNoLongerHoldsTheLock) {
  TensorDict child({{"x", torch::zeros({2})}}, {2});
  {
    TensorDict parent({{"c", child}}, {2});
    parent.lock_();
  }
  EXPECT_TRUE(child.is_locked());
  child.unlock_();
  EXPECT_FALSE(child.is_locked());
}

TEST(TensorDictTest, ADestroyedLockedTreeReleasesItsTensors) {
  at::Tensor t = torch::zeros({2});
  at::Tensor deep = torch::ones({2});
  {
    TensorDict td({{"a", {{"b", t}, {"c", {{"d", deep}}}}}}, {2});
    td.lock_();
    EXPECT_EQ(t.use_count(), 2);
  }
  // Children keep weak pointers to their locked parents: the entries must
  // still go with the last handle.
  EXPECT_EQ(t.use_count(), 1);
  EXPECT_EQ(deep.use_count(), 1);
}

TEST(TensorDictTest, LockedChildInUnlockedParent) {
  TensorDict x({{"x", torch::zeros({2})}}, {2});
  x.lock_();
  TensorDict p({{"x", x}}, {2});
  EXPECT_FALSE(p.is_locked());
  EXPECT_TRUE(x.is_locked());
  EXPECT_FALSE(p.clone().get_tensordict("x").is_locked());
}

// --- comparison
// ------------------------------------------------------------------

TEST(TensorDictTest, EqualityGivesBoolDicts) {
  TensorDict td = make_td();
  TensorDict other = td.clone();
  other.get("b").add_(1);
  TensorDict eq = td == other;
  EXPECT_EQ(eq.get("b").scalar_type(), at::kBool);
  EXPECT_FALSE(eq.get("b").any().item<bool>());
  EXPECT_TRUE(eq.get({"a", "x"}).all().item<bool>());
  EXPECT_EQ(eq.get("s").sizes(), c10::IntArrayRef({4}));
  EXPECT_TRUE(eq.get("s").all().item<bool>());
  EXPECT_FALSE(eq.all());
  EXPECT_TRUE(eq.any());
  EXPECT_TRUE((td == td.clone()).all());
  EXPECT_TRUE((td != other).any());
  EXPECT_FALSE((td != td.clone()).any());
}

TEST(TensorDictTest, EqualityWithAScalar) {
  TensorDict td({{"z", torch::zeros({2})}, {"o", torch::ones({2})}}, {2});
  EXPECT_TRUE((td == 0).get("z").all().item<bool>());
  EXPECT_FALSE((td == 0).get("o").any().item<bool>());
  EXPECT_TRUE((td != 0).get("o").all().item<bool>());
}

TEST(TensorDictTest, EqualityWithDifferentKeysIsAKeyError) {
  TensorDict a({{"x", torch::zeros({2})}}, {2});
  TensorDict b({{"y", torch::zeros({2})}}, {2});
  EXPECT_THROWS_EXACTLY(
      a == b, KeyError, "key \"y\" not found in TensorDict with keys ['x']");
  TensorDict c({{"x", TensorDict({2})}}, {2});
  EXPECT_THROWS_EXACTLY(
      a == c,
      c10::TypeError,
      "cannot compare entry 'x': it is a Tensor in tensordict 0 and a "
      "TensorDict in tensordict 1");
}

TEST(TensorDictTest, AllAndAnyOnEmptyDicts) {
  EXPECT_TRUE(TensorDict().all());
  EXPECT_FALSE(TensorDict().any());
}

namespace {

// Copies of make_td()'s `td` that differ from it in one way besides the
// values, which equal and allclose both see: a missing key, another batch
// size, another dtype, another non-tensor value.
std::vector<std::pair<std::string, TensorDict>> different_in_structure(
    const TensorDict& td) {
  TensorDict reshaped = td.clone();
  reshaped.set_batch_size({});
  TensorDict retyped = td.clone();
  retyped.set("b", retyped.get("b").to(torch::kDouble));
  TensorDict text = td.clone();
  text.set_non_tensor("s", "other");
  return {
      {"a missing key", td.exclude({"s"})},
      {"another batch size", reshaped},
      {"another dtype", retyped},
      {"another non-tensor value", text}};
}

}  // namespace

TEST(TensorDictTest, EqualChecksStructureBatchSizeAndValues) {
  TensorDict td = make_td();
  EXPECT_TRUE(tensordict::equal(td, td.clone()));
  TensorDict other = td.clone();
  other.get({"a", "x"}).add_(1);
  EXPECT_FALSE(tensordict::equal(td, other));
  for (const auto& [what, different] : different_in_structure(td)) {
    SCOPED_TRACE(what);
    EXPECT_FALSE(tensordict::equal(td, different));
  }
}

// Python has no dict-level allclose; it is, leaf by leaf:
//   all(torch.allclose(a[k], b[k]) for k in a.keys(True, True))
//   and a.batch_size == b.batch_size and a.keys() == b.keys()
//   x = torch.arange(4.); y = x * (1 + 1e-6)
//   torch.equal(x, y), torch.allclose(x, y)  # False, True
//   torch.allclose(x, y + 1e-3)  # False; with rtol=0, atol=1e-2: True
TEST(TensorDictTest, AllcloseComparesLeavesWithinTolerance) {
  TensorDict td = make_td();
  TensorDict near = td.clone();
  near.get({"a", "x"}).mul_(1 + 1e-6);  // [0, 1, 2, 3]: within rtol 1e-5
  EXPECT_FALSE(tensordict::equal(td, near));
  EXPECT_TRUE(tensordict::allclose(td, near));
  near.get({"a", "x"}).add_(1e-3);
  EXPECT_FALSE(tensordict::allclose(td, near));
  EXPECT_TRUE(tensordict::allclose(td, near, /*rtol=*/0, /*atol=*/1e-2));
  // NaNs are equal only with equal_nan.
  TensorDict nan({{"v", torch::tensor({1.0f, NAN})}}, {2});
  EXPECT_FALSE(tensordict::allclose(nan, nan.clone()));
  EXPECT_TRUE(tensordict::allclose(nan, nan.clone(), 1e-5, 1e-8, true));
  // Keys, batch size, dtype and non-tensor values must match, as for equal.
  for (const auto& [what, different] : different_in_structure(td)) {
    SCOPED_TRACE(what);
    EXPECT_FALSE(tensordict::allclose(td, different));
  }
}

// Python (tensordict 0.15.3):
//   a = TensorDict(x=torch.zeros(3), n=TensorDict(y=torch.ones(2)))
//   b = TensorDict(x=torch.zeros(3), n=TensorDict(y=torch.tensor([1., 1.5])))
//   assert_allclose_td(a, b)
//   # AssertionError: key ('n', 'y') does not match, got mse = 0.3536
//   assert_allclose_td(a, TensorDict(x=torch.zeros(3)))
//   # KeyError: keys in tensordicts mismatch. The first TD has keys {'n'}
//   # that the second does not have.
//   assert_allclose_td(a, a.clone())  # True
TEST(TensorDictTest, AssertAllcloseNamesTheKeyThatDiffers) {
  TensorDict a({{"x", torch::zeros({3})}}, {});
  a.set("n", TensorDict({{"y", torch::ones({2})}}, {}));
  a.set_non_tensor("s", "text");
  TensorDict b = a.clone();
  b.set({"n", "y"}, torch::tensor({1.0f, 1.5f}));
  EXPECT_TRUE(tensordict::assert_allclose_td(a, a.clone()));
  EXPECT_THROWS_EXACTLY(
      tensordict::assert_allclose_td(a, b),
      c10::Error,
      "key ('n', 'y') does not match, got mse = 0.3536");
  EXPECT_TRUE(tensordict::assert_allclose_td(a, b, 0.0, 0.6));
  // Non-tensor data is not compared (Python skips it).
  TensorDict text = a.clone();
  text.set_non_tensor("s", "other");
  EXPECT_TRUE(tensordict::assert_allclose_td(a, text));
  // float32's default tolerance is torch.testing.assert_close's (atol 1e-5).
  TensorDict near = a.clone();
  near.get("x").add_(1e-6);
  EXPECT_TRUE(tensordict::assert_allclose_td(a, near));
  near.get("x").add_(1e-4);
  EXPECT_THROWS_WITH(
      tensordict::assert_allclose_td(a, near),
      c10::Error,
      "key ('x',) does not match, got mse = 0.0001");
  TensorDict missing = a.exclude({"n"});
  EXPECT_THROWS_EXACTLY(
      tensordict::assert_allclose_td(a, missing),
      KeyError,
      "keys in tensordicts mismatch. The first TD has keys ['n'] that the "
      "second does not have.");
  TensorDict retyped = a.clone();
  retyped.set("x", torch::zeros({3}, torch::kDouble));
  EXPECT_THROWS_EXACTLY(
      tensordict::assert_allclose_td(a, retyped),
      c10::Error,
      "key ('x',) does not match: dtype torch.float32 != torch.float64");
  TensorDict leaf = a.clone();
  leaf.del_("n");
  leaf.set("n", torch::zeros({2}));
  EXPECT_THROWS_WITH(
      tensordict::assert_allclose_td(a, leaf),
      c10::TypeError,
      "the entry at ('n',) is a TensorDict in the first tensordict and a "
      "Tensor in the second");
}

// --- printing
// ---------------------------------------------------------------------

TEST(TensorDictTest, ReprMatchesPythonsDetailedForm) {
  TensorDict td(
      {{"b", torch::zeros({4, 3})},
       {"a",
        {{"y", torch::ones({4, 2}, torch::kLong)}, {"x", torch::zeros({4})}}},
       {"s", "text"},
       {"l", NonTensorStack({"x", "y", "z", "w"})},
       {"e", TensorDict({4})}},
      {4});
  const std::string expected =
      "TensorDict(\n"
      "    fields={\n"
      "        a: TensorDict(\n"
      "            fields={\n"
      "                x: Tensor(shape=torch.Size([4]), device=cpu, "
      "dtype=torch.float32, is_shared=False),\n"
      "                y: Tensor(shape=torch.Size([4, 2]), device=cpu, "
      "dtype=torch.int64, is_shared=False)},\n"
      "            batch_size=torch.Size([4]),\n"
      "            device=None,\n"
      "            is_shared=False),\n"
      "        b: Tensor(shape=torch.Size([4, 3]), device=cpu, "
      "dtype=torch.float32, is_shared=False),\n"
      "        e: TensorDict(\n"
      "            fields={\n"
      "            },\n"
      "            batch_size=torch.Size([4]),\n"
      "            device=None,\n"
      "            is_shared=False),\n"
      "        l: NonTensorStack(\n"
      "            ['x', 'y', 'z', 'w'],\n"
      "            batch_size=torch.Size([4]),\n"
      "            device=None),\n"
      "        s: NonTensorData(data=text, batch_size=torch.Size([4]), "
      "device=None)},\n"
      "    batch_size=torch.Size([4]),\n"
      "    device=None,\n"
      "    is_shared=False)";
  EXPECT_EQ(td.repr_detailed(), expected);
  {
    tensordict::PrintOptionsGuard detailed(
        tensordict::PrintOptions().compact(false));
    EXPECT_EQ(td.repr(), expected);
    std::ostringstream out;
    out << td;
    EXPECT_EQ(out.str(), expected);
  }
  EXPECT_EQ(
      TensorDict().repr_detailed(),
      "TensorDict(\n    fields={\n    },\n    batch_size=torch.Size([]),\n"
      "    device=None,\n    is_shared=False)");
}

TEST(TensorDictTest, ReprShowsDeviceAndDtypes) {
  TensorDict td(
      {{"h", torch::zeros({2}, torch::kBFloat16)},
       {"c", torch::zeros({2}, torch::kComplexFloat)}},
      {2},
      c10::Device("meta"));
  EXPECT_NE(
      td.repr_detailed().find("c: Tensor(shape=torch.Size([2]), device=meta, "
                              "dtype=torch.complex64"),
      std::string::npos);
  EXPECT_NE(td.repr_detailed().find("dtype=torch.bfloat16"), std::string::npos);
  EXPECT_NE(td.repr_detailed().find("    device=meta,\n"), std::string::npos);
}

// --- path resolution (src/tensor_dict/path.cpp)
// ---------------------------------

TEST(TensorDictTest, ResolveFindStopsWhereThePathEndsWithoutThrowing) {
  TensorDict td = make_td();
  TensorDictImpl* root = td.unsafeGetImpl();
  TensorDictImpl* a = td.get_tensordict("a").unsafeGetImpl();

  const NestedKey whole({"a", "x"});
  PathEnd end = resolve(td, whole, PathMode::kFind);
  EXPECT_EQ(end.dict, a);
  EXPECT_EQ(end.depth, 1u);
  EXPECT_TRUE(end.reached(whole));

  const NestedKey missing({"a", "zz", "q", "x"});
  end = resolve(td, missing, PathMode::kFind);
  EXPECT_EQ(end.dict, a);
  EXPECT_EQ(end.depth, 1u);
  EXPECT_FALSE(end.reached(missing));

  const NestedKey through_leaf({"b", "c", "d"});
  end = resolve(td, through_leaf, PathMode::kFind);
  EXPECT_EQ(end.dict, root);
  EXPECT_EQ(end.depth, 0u);
  EXPECT_FALSE(end.reached(through_leaf));
  EXPECT_EQ(tensordict::detail::find_parent(td, through_leaf), nullptr);
  EXPECT_EQ(tensordict::detail::find_parent(td, whole), a);

  // A one-part key is held by the root itself.
  end = resolve(td, "zz", PathMode::kRequire);
  EXPECT_EQ(end.dict, root);
  EXPECT_TRUE(end.reached("zz"));
}

TEST(TensorDictTest, ResolveModesTellMissingLevelsFromLeavesInTheWay) {
  TensorDict td = make_td();
  const NestedKey missing({"a", "zz", "x"});
  const NestedKey through_leaf({"a", "x", "deeper", "y"});
  EXPECT_EQ(
      resolve(td, missing, PathMode::kExisting).dict,
      td.get_tensordict("a").unsafeGetImpl());
  EXPECT_THROWS_EXACTLY(
      resolve(td, missing, PathMode::kRequire),
      KeyError,
      "key \"zz\" not found in TensorDict with keys ['x', 'y'] (while looking "
      "up ('a', 'zz', 'x'))");
  // A leaf in the way is an error in every mode.
  const std::pair<PathMode, const char*> modes[] = {
      {PathMode::kExisting, "kExisting"},
      {PathMode::kRequire, "kRequire"},
      {PathMode::kCreate, "kCreate"}};
  for (const auto& [mode, name] : modes) {
    SCOPED_TRACE(name);
    EXPECT_THROWS_EXACTLY(
        resolve(td, through_leaf, mode),
        KeyError,
        "('a', 'x') is a Tensor, not a tensordict, so it has no entry "
        "'deeper'.");
  }
  EXPECT_FALSE(td.contains({"a", "zz"}));
}

TEST(TensorDictTest, ResolveCreateContinuesFromWhereAWalkStopped) {
  TensorDict td({4}, std::nullopt, {"n"});
  td.set({"a", "b"}, TensorDict({4, 2}));
  const NestedKey key({"a", "b", "c", "d", "leaf"});
  PathEnd end = resolve(td, key, PathMode::kExisting);
  EXPECT_EQ(end.depth, 2u);
  EXPECT_EQ(end.dict, td.get_tensordict({"a", "b"}).unsafeGetImpl());
  end = resolve(end, key, PathMode::kCreate);
  EXPECT_TRUE(end.reached(key));
  const TensorDict made = td.get_tensordict({"a", "b", "c", "d"});
  EXPECT_EQ(end.dict, made.unsafeGetImpl());
  EXPECT_EQ(made.batch_size(), c10::IntArrayRef({4, 2}));
  EXPECT_EQ(made.names(), (DimNames{"n", std::nullopt}));
  EXPECT_TRUE(made.is_empty());
  // Created levels are checked against the lock of the dict they go into.
  td.get_tensordict("a").lock_();
  EXPECT_THROWS_EXACTLY(
      resolve(td, NestedKey({"a", "new", "leaf"}), PathMode::kCreate),
      c10::Error,
      kLockError);
  EXPECT_FALSE(td.contains({"a", "new"}));
}

// Python (tensordict 0.15) on the same dict:
//   td.to_dict() -> {'a': tensor([0, 1, 2]), 'n': {'b': <ones [3, 2]>,
//                    's': 'hi'}, 'st': ['x', 'y', 'z']}
TEST(TensorDictTest, ToDictGivesNestedItemsAsPythonsToDict) {
  TensorDict td({3});
  td.set("a", torch::arange(3));
  td.set({"n", "b"}, torch::ones({3, 2}));
  td.set({"n", "s"}, Value(NonTensorData("hi", {3})));
  td.set("st", Value(NonTensorStack({"x", "y", "z"})));
  td.set(
      "lazy",
      Value(tensordict::lazy_stack(
          {TensorDict({{"c", torch::zeros({2})}}),
           TensorDict({{"c", torch::ones({3})}}),
           TensorDict({{"c", torch::ones({1})}})})));
  const std::vector<Item> items = td.to_dict();
  ASSERT_EQ(items.size(), 4U);
  EXPECT_EQ(items[0].key(), NestedKey("a"));
  EXPECT_TRUE(items[0].value()->tensor().is_same(td.get("a")));  // aliased
  EXPECT_EQ(items[1].key(), NestedKey("n"));
  EXPECT_EQ(items[1].value(), nullptr);  // a nested list
  ASSERT_EQ(items[1].children().size(), 2U);
  EXPECT_TRUE(
      items[1].children()[0].value()->tensor().is_same(td.get({"n", "b"})));
  EXPECT_EQ(items[1].children()[1].value()->non_tensor(), Json("hi"));
  EXPECT_EQ(items[2].key(), NestedKey("st"));
  EXPECT_EQ(items[2].value()->non_tensor(), (Json{"x", "y", "z"}));
  EXPECT_TRUE(items[3].value()->is_lazy_stack());
  EXPECT_TRUE(
      items[3].value()->lazy_stack().is_same(td.get_lazy_stack("lazy")));

  // from_dict builds it again.
  const TensorDict back =
      TensorDict::from_dict(items, FromDictOptions().batch_size({{3}}));
  EXPECT_EQ(back.keys(), td.keys());
  EXPECT_TRUE(torch::equal(back.get({"n", "b"}), td.get({"n", "b"})));
  EXPECT_EQ(back.get_non_tensor({"n", "s"}), Json("hi"));
}

// --- one lookup walk (src/tensor_dict/path.cpp) -----------------------------

namespace {

// make_td() with a third level: a: {n: {w: [4, 5]}} besides x and y.
TensorDict make_deep_td() {
  TensorDict td = make_td();
  td.set({"a", "n", "w"}, torch::zeros({4, 5}));
  return td;
}

}  // namespace

TEST(TensorDictTest, LookupSaysWhatTheOneWalkFound) {
  using tensordict::detail::lookup;
  using Kind = tensordict::detail::Lookup::Kind;
  TensorDict td = make_deep_td();
  TensorDictImpl* root = td.unsafeGetImpl();
  TensorDictImpl* a = td.get_tensordict("a").unsafeGetImpl();
  TensorDictImpl* n = td.get_tensordict({"a", "n"}).unsafeGetImpl();

  auto found = lookup(td, NestedKey({"a", "n", "w"}));
  EXPECT_EQ(found.kind, Kind::kFound);
  EXPECT_EQ(found.dict, n);
  EXPECT_EQ(found.depth, 2u);
  ASSERT_NE(found.node, nullptr);
  EXPECT_TRUE(found.node->value.tensor().is_same(td.get({"a", "n", "w"})));

  found = lookup(td, "b");
  EXPECT_EQ(found.kind, Kind::kFound);
  EXPECT_EQ(found.dict, root);
  EXPECT_EQ(found.depth, 0u);

  // Missing: `depth` is the part that is missing, `dict` the one lacking it.
  found = lookup(td, "zz");
  EXPECT_EQ(found.kind, Kind::kMissing);
  EXPECT_EQ(found.dict, root);
  EXPECT_EQ(found.node, nullptr);
  found = lookup(td, NestedKey({"a", "n", "zz", "q"}));
  EXPECT_EQ(found.kind, Kind::kMissing);
  EXPECT_EQ(found.dict, n);
  EXPECT_EQ(found.depth, 2u);
  found = lookup(td, NestedKey({"a", "n", "zz"}));
  EXPECT_EQ(found.kind, Kind::kMissing);
  EXPECT_EQ(found.dict, n);
  EXPECT_EQ(found.depth, 2u);

  // A leaf in the way is reported with the entry that blocked the walk,
  // and so is a lazy stack, which the key may go through.
  const NestedKey through_leaf({"a", "x", "deeper", "y"});
  found = lookup(td, through_leaf);
  EXPECT_EQ(found.kind, Kind::kThroughLeaf);
  EXPECT_EQ(found.dict, a);
  EXPECT_EQ(found.depth, 1u);
  ASSERT_NE(found.node, nullptr);
  EXPECT_EQ(found.node->key, "x");
  const PathEnd end = resolve(td, through_leaf, PathMode::kFind);
  EXPECT_EQ(end.blocker, found.node);
  EXPECT_EQ(
      resolve(td, NestedKey({"a", "zz", "q"}), PathMode::kFind).blocker,
      nullptr);
  EXPECT_EQ(
      resolve(td, NestedKey({"a", "x"}), PathMode::kFind).blocker, nullptr);
  EXPECT_THROWS_EXACTLY(
      tensordict::detail::throw_key_error(found, through_leaf),
      KeyError,
      "('a', 'x') is a Tensor, not a tensordict, so it has no entry 'deeper'.");

  td.set(
      {"a", "st"},
      tensordict::lazy_stack(
          {TensorDict({{"v", torch::zeros({4, 3})}}, {4}),
           TensorDict({{"v", torch::ones({4, 3})}}, {4})},
          1));
  const NestedKey through_stack({"a", "st", "v"});
  found = lookup(td, through_stack);
  EXPECT_EQ(found.kind, Kind::kThroughLazyStack);
  EXPECT_EQ(found.dict, a);
  EXPECT_EQ(found.depth, 1u);
  EXPECT_TRUE(tensordict::detail::lazy_hop_contains(found, through_stack));
  EXPECT_FALSE(tensordict::detail::lazy_hop_contains(
      found, NestedKey({"a", "st", "zz"})));
  const tensordict::detail::LazyHop hop =
      tensordict::detail::lazy_hop(found, through_stack);
  EXPECT_TRUE(hop.stack.is_same(td.get_lazy_stack({"a", "st"})));
  EXPECT_EQ(hop.rest, NestedKey("v"));
  EXPECT_THROWS_EXACTLY(
      tensordict::detail::throw_key_error(found, through_stack),
      KeyError,
      "('a', 'st') is a LazyStackedTensorDict, not a tensordict, so it has no "
      "entry 'v'.");
}

namespace {

// Expects every reader of `key`, set_ and a strict select to throw
// KeyError with exactly `message`, and contains, find and get with a
// default to find nothing.
void expect_every_reader_refuses(
    TensorDict& td, const NestedKey& key, const char* message) {
  SCOPED_TRACE(key.to_string());
  EXPECT_THROWS_EXACTLY(td.get(key), KeyError, message);
  EXPECT_THROWS_EXACTLY(td[key], KeyError, message);
  EXPECT_THROWS_EXACTLY(td.get_tensordict(key), KeyError, message);
  EXPECT_THROWS_EXACTLY(td.get_lazy_stack(key), KeyError, message);
  EXPECT_THROWS_EXACTLY(td.get_non_tensor(key), KeyError, message);
  EXPECT_THROWS_EXACTLY(td.is_non_tensor(key), KeyError, message);
  EXPECT_THROWS_EXACTLY(td.set_(key, torch::zeros({4})), KeyError, message);
  EXPECT_THROWS_EXACTLY(td.select({key}, /*strict=*/true), KeyError, message);
  EXPECT_FALSE(td.contains(key));
  EXPECT_EQ(td.find(key), nullptr);
  const at::Tensor fallback = torch::full({1}, 7);
  EXPECT_TRUE(td.get(key, fallback).is_same(fallback));
}

}  // namespace

TEST(TensorDictTest, EveryReaderAgreesOnAKeyThroughALeaf) {
  TensorDict td = make_deep_td();
  const NestedKey key({"a", "x", "deeper"});
  const char* const message =
      "('a', 'x') is a Tensor, not a tensordict, so it has no entry 'deeper'.";
  expect_every_reader_refuses(td, key, message);
  // Through a leaf, set cannot make the missing level either.
  EXPECT_THROWS_EXACTLY(td.set(key, torch::zeros({4})), KeyError, message);
  EXPECT_EQ(
      td.select({key}, /*strict=*/false).keys(), std::vector<NestedKey>{});
  EXPECT_EQ(td.get_non_tensor(key, "dflt"), "dflt");
  // Nothing was written on the way.
  EXPECT_EQ(td.get({"a", "x"}).sizes(), c10::IntArrayRef({4}));
  EXPECT_EQ(td.keys(/*include_nested=*/true).size(), 7u);
}

TEST(TensorDictTest, EveryReaderAgreesOnAKeyMissingAtDepthTwo) {
  TensorDict td = make_deep_td();
  const NestedKey key({"a", "n", "zz", "q"});
  const char* const message =
      "key \"zz\" not found in TensorDict with keys ['w'] (while looking up "
      "('a', 'n', 'zz', 'q'))";
  expect_every_reader_refuses(td, key, message);
  // The last part missing at depth 2 names the dict that lacks it.
  EXPECT_THROWS_EXACTLY(
      td.get({"a", "n", "zz"}),
      KeyError,
      "key \"zz\" not found in TensorDict with keys ['w'] (while looking up "
      "('a', 'n', 'zz'))");
  EXPECT_FALSE(td.contains({"a", "n", "zz"}));

  // set makes the missing levels like the dict at ('a', 'n').
  td.get_tensordict({"a", "n"}).set_batch_size({4, 5});
  td.set(key, torch::ones({4, 5, 2}));
  EXPECT_TRUE(td.contains(key));
  EXPECT_EQ(
      td.get_tensordict({"a", "n", "zz"}).batch_size(),
      c10::IntArrayRef({4, 5}));
  EXPECT_TRUE(torch::equal(td.get(key), torch::ones({4, 5, 2})));
  EXPECT_TRUE(td.find(key)->tensor().is_same(td.get(key)));
}

}  // namespace tensor_dict_test
