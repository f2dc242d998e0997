// apply, named_apply, apply_ (declared in tensor_dict.h).
#include <tensordict/tensor_dict.h>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace tensor_dict_apply_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)

namespace {

TensorDict make_td() {
  return TensorDict(
      {{"a", torch::ones({4, 3})},
       {"n",
        {{"b", torch::full({4}, 2.f)},
         {"c", torch::zeros({4, 2}, torch::kLong)}}},
       {"s", "txt"}},
      {4});
}

}  // namespace

TEST(TensorDictApplyTest, AppliesToEveryLeafAndKeepsNonTensors) {
  TensorDict td = make_td();
  TensorDict doubled = td.apply([](const at::Tensor& t) { return t * 2; });
  EXPECT_EQ(doubled.get("a").sum().item<float>(), 24.f);
  EXPECT_EQ(doubled.get({"n", "b"})[0].item<float>(), 4.f);
  EXPECT_EQ(doubled.get_non_tensor("s"), "txt");
  EXPECT_EQ(doubled.batch_size(), td.batch_size());
  EXPECT_EQ(td.get("a").sum().item<float>(), 12.f);
}

TEST(TensorDictApplyTest, UndefinedResultsDropKeysAndEmptiedDicts) {
  TensorDict td = make_td();
  td.set("e", TensorDict({4}));
  auto only_2d = [](const at::Tensor& t) {
    return t.dim() == 2 ? t : at::Tensor();
  };
  TensorDict out = td.apply(only_2d);
  EXPECT_TRUE(out.contains("a"));
  EXPECT_FALSE(out.contains({"n", "b"}));
  EXPECT_TRUE(out.contains({"n", "c"}));
  EXPECT_TRUE(out.contains("e"));  // empty before: kept by default
  auto none = [](const at::Tensor&) { return at::Tensor(); };
  TensorDict emptied = td.apply(none);
  EXPECT_FALSE(emptied.contains("n"));  // emptied by fn: left out
  EXPECT_TRUE(emptied.contains("e"));
  EXPECT_TRUE(td.apply(none, ApplyOptions().filter_empty(false)).contains("n"));
  EXPECT_FALSE(td.apply(none, ApplyOptions().filter_empty(true)).contains("e"));
}

TEST(TensorDictApplyTest, BatchSizeAndNamesOptions) {
  TensorDict td = make_td();
  TensorDict first = td.apply(
      [](const at::Tensor& t) { return t[0]; },
      ApplyOptions().batch_size(std::vector<int64_t>{}));
  EXPECT_EQ(first.batch_size(), c10::IntArrayRef{});
  EXPECT_EQ(first.get("a").sizes(), c10::IntArrayRef({3}));
  EXPECT_EQ(first.get_tensordict("n").batch_size(), c10::IntArrayRef{});
  TensorDict named = td.apply(
      [](const at::Tensor& t) { return t; },
      ApplyOptions().names(tensordict::DimNames{"time"}));
  EXPECT_EQ(named.names(), tensordict::DimNames{"time"});
  EXPECT_THROWS_WITH(
      td.apply([](const at::Tensor& t) { return t[0]; }),
      c10::Error,
      "batch dimension mismatch, got self.batch_size=torch.Size([4]) and "
      "value.shape=torch.Size([3]) for key 'a'");
}

TEST(TensorDictApplyTest, OtherDictsAreMatchedByKey) {
  TensorDict td = make_td();
  TensorDict other =
      td.clone().apply([](const at::Tensor& t) { return t + 1; });
  TensorDict sum = td.apply(
      [](const at::Tensor& x, const at::Tensor& y) { return x + y; }, other);
  EXPECT_EQ(sum.get("a")[0][0].item<float>(), 3.f);
  EXPECT_EQ(sum.get({"n", "b"})[0].item<float>(), 5.f);
  TensorDict partial({{"a", torch::ones({4, 3})}}, {4});
  EXPECT_THROWS_EXACTLY(
      td.apply(
          [](const at::Tensor& x, const at::Tensor& y) { return x + y; },
          partial),
      KeyError,
      "key \"n\" not found in TensorDict with keys ['a']");
  TensorDict with_default = td.apply(
      [](const at::Tensor& x, const at::Tensor& y) { return x + y; },
      partial,
      ApplyOptions().default_value(torch::zeros({})));
  EXPECT_EQ(with_default.get({"n", "b"})[0].item<float>(), 2.f);
}

TEST(TensorDictApplyTest, OtherDictsMustHoldTheSameKindOfEntry) {
  TensorDict td = make_td();
  TensorDict swapped = td.clone();
  swapped.del_("a");
  swapped.set("a", TensorDict({}, {4}));
  auto add = [](const at::Tensor& x, const at::Tensor& y) { return x + y; };
  EXPECT_THROWS_EXACTLY(
      td.apply(add, swapped),
      c10::TypeError,
      "cannot apply a function to entry 'a': it is a Tensor in tensordict 0 "
      "and a TensorDict in tensordict 1");
  EXPECT_THROWS_EXACTLY(
      swapped.apply(add, td),
      c10::TypeError,
      "cannot apply a function to entry 'a': it is a TensorDict in "
      "tensordict 0 and a Tensor in tensordict 1");
}

TEST(TensorDictApplyTest, NamedApplySeesNestedKeys) {
  TensorDict td = make_td();
  std::vector<NestedKey> seen;
  TensorDict out =
      td.named_apply([&](const NestedKey& key, const at::Tensor& t) {
        seen.push_back(key);
        return key == NestedKey({"n", "b"}) ? t * 10 : t;
      });
  EXPECT_EQ(seen, (std::vector<NestedKey>{"a", {"n", "b"}, {"n", "c"}}));
  EXPECT_EQ(out.get({"n", "b"})[0].item<float>(), 20.f);
}

TEST(TensorDictApplyTest, ApplyInPlaceWritesIntoTheLeaves) {
  TensorDict td = make_td();
  at::Tensor a = td.get("a");
  td.apply_([](const at::Tensor& t) { return t * 3; });
  EXPECT_TRUE(td.get("a").is_same(a));
  EXPECT_EQ(a.sum().item<float>(), 36.f);
  EXPECT_EQ(td.get({"n", "b"})[0].item<float>(), 6.f);
}

TEST(TensorDictApplyTest, CallOnNestedPassesEachTopLevelEntryWhole) {
  TensorDict td = make_td();
  std::vector<std::pair<NestedKey, std::string>> seen;
  TensorDict out = td.named_apply(
      [&](const NestedKey& key, const Value& v) -> std::optional<Value> {
        seen.emplace_back(key, v.type_name());
        if (v.is_tensordict()) {
          return v.tensordict().apply(
              [](const at::Tensor& t) { return t + 1; });
        }
        return v;
      },
      ApplyOptions().call_on_nested(true));
  EXPECT_EQ(
      seen,
      (std::vector<std::pair<NestedKey, std::string>>{
          {"a", "Tensor"}, {"n", "TensorDict"}, {"s", "NonTensorData"}}));
  EXPECT_TRUE(out.get("a").is_same(td.get("a")));
  EXPECT_EQ(out.get({"n", "b"})[0].item<float>(), 3.f);
  EXPECT_EQ(out.get({"n", "c"})[0][0].item<int64_t>(), 1);
  EXPECT_EQ(out.get_non_tensor("s"), "txt");
  EXPECT_EQ(out.batch_size(), td.batch_size());
}

TEST(TensorDictApplyTest, CallOnNestedDropsEntriesMappedToNullopt) {
  TensorDict td = make_td();
  TensorDict out = td.apply(
      [](const Value& v) -> std::optional<Value> {
        if (v.is_tensordict()) {
          return std::nullopt;
        }
        return v;
      },
      ApplyOptions().call_on_nested(true));
  EXPECT_EQ(out.keys(), (std::vector<NestedKey>{"a", "s"}));
}

TEST(TensorDictApplyTest, CallOnNestedWithANewBatchSize) {
  TensorDict td = make_td();
  TensorDict first = td.apply(
      [](const Value& v) -> std::optional<Value> {
        if (v.is_tensor()) {
          return v.tensor()[0];
        }
        if (v.is_tensordict()) {
          return v.tensordict().unbind(0)[0];
        }
        return std::nullopt;
      },
      ApplyOptions().call_on_nested(true).batch_size(std::vector<int64_t>{}));
  EXPECT_EQ(first.batch_size(), c10::IntArrayRef{});
  EXPECT_EQ(first.get("a").sizes(), c10::IntArrayRef({3}));
  EXPECT_EQ(first.get_tensordict("n").batch_size(), c10::IntArrayRef{});
  EXPECT_EQ(first.get({"n", "c"}).sizes(), c10::IntArrayRef({2}));
  EXPECT_FALSE(first.contains("s"));
  EXPECT_THROWS_WITH(
      td.apply(
          [](const Value& v) -> std::optional<Value> {
            return v.is_tensordict() ? Value(v.tensordict().unbind(0)[0]) : v;
          },
          ApplyOptions().call_on_nested(true)),
      c10::Error,
      "batch dimension mismatch, got self.batch_size=torch.Size([4]) and "
      "value.shape=torch.Size([]) for key 'n'");
}

TEST(TensorDictApplyTest, CallOnNestedMatchesOtherDictsEntries) {
  TensorDict td = make_td();
  TensorDict other =
      td.clone().apply([](const at::Tensor& t) { return t + 1; });
  TensorDict out = td.apply(
      [](const Value& v, const Value& o) -> std::optional<Value> {
        EXPECT_EQ(v.kind(), o.kind());
        return o;
      },
      other,
      ApplyOptions().call_on_nested(true));
  EXPECT_TRUE(out.get_tensordict("n").is_same(other.get_tensordict("n")));
  TensorDict partial({{"a", torch::ones({4, 3})}}, {4});
  EXPECT_THROWS_EXACTLY(
      td.apply(
          [](const Value& v, const Value&) -> std::optional<Value> {
            return v;
          },
          partial,
          ApplyOptions().call_on_nested(true)),
      KeyError,
      "key \"n\" not found in TensorDict with keys ['a']");
}

TEST(TensorDictApplyTest, EntryCallbackWithoutCallOnNestedSeesTensorLeaves) {
  TensorDict td = make_td();
  std::vector<NestedKey> seen;
  TensorDict out = td.named_apply(
      [&](const NestedKey& key, const Value& v) -> std::optional<Value> {
        seen.push_back(key);
        return v.tensor() * 2;
      });
  EXPECT_EQ(seen, (std::vector<NestedKey>{"a", {"n", "b"}, {"n", "c"}}));
  EXPECT_EQ(out.get({"n", "b"})[0].item<float>(), 4.f);
  EXPECT_EQ(out.get_non_tensor("s"), "txt");
}

TEST(TensorDictApplyTest, CallOnNestedNeedsAnEntryCallback) {
  TensorDict td = make_td();
  EXPECT_THROWS_WITH(
      td.apply(
          [](const at::Tensor& t) { return t; },
          ApplyOptions().call_on_nested(true)),
      c10::ValueError,
      "apply: call_on_nested=true passes nested TensorDicts to the callback, "
      "so it must take a const Value& and return a std::optional<Value>");
}

}  // namespace tensor_dict_apply_test
