#include <tensordict/value.h>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace value_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)

TEST(ValueTest, ReportsItsKind) {
  Value t(torch::ones({2}));
  EXPECT_TRUE(t.is_tensor());
  EXPECT_EQ(t.kind(), Value::Kind::kTensor);
  EXPECT_STREQ(t.type_name(), "Tensor");
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2}));

  Value d(TensorDict({3}));
  EXPECT_TRUE(d.is_tensordict());
  EXPECT_EQ(d.shape(), (std::vector<int64_t>{3}));

  Value n(NonTensorData("x", {5}));
  EXPECT_TRUE(n.is_non_tensor());
  EXPECT_TRUE(n.is_non_tensor_data());
  EXPECT_EQ(n.non_tensor(), "x");

  Value s(NonTensorStack({1, 2}));
  EXPECT_TRUE(s.is_non_tensor_stack());
  EXPECT_EQ(s.non_tensor(), Json({1, 2}));
  EXPECT_STREQ(s.type_name(), "NonTensorStack");
}

TEST(ValueTest, WrongKindAccessIsATypeError) {
  Value t(torch::ones({2}));
  EXPECT_THROWS_EXACTLY(
      t.tensordict(),
      c10::TypeError,
      "the entry is a Tensor, not a TensorDict");
  EXPECT_THROWS_WITH(t.non_tensor(), c10::TypeError, "not a NonTensorData");
  Value d(TensorDict{});
  EXPECT_THROWS_WITH(
      d.tensor(), c10::TypeError, "is a TensorDict, not a Tensor");
}

TEST(ValueTest, UndefinedTensorIsRejected) {
  EXPECT_THROWS_WITH(
      Value(at::Tensor()), c10::ValueError, "cannot be an undefined tensor");
}

TEST(ValueTest, TensorDictValuesAlias) {
  TensorDict td;
  Value v(td);
  TensorDict inner = v.tensordict();
  inner.set("a", torch::zeros({1}));
  EXPECT_TRUE(td.contains("a"));
}

TEST(ItemTest, NumbersBecomeZeroDimTensorsAsInPython) {
  Item i("i", 3);
  Item f("f", 2.5);
  Item b("b", true);
  EXPECT_EQ(i.value()->tensor().scalar_type(), at::kLong);
  EXPECT_EQ(f.value()->tensor().scalar_type(), at::kFloat);
  EXPECT_EQ(b.value()->tensor().scalar_type(), at::kBool);
  EXPECT_EQ(i.value()->tensor().dim(), 0);
  EXPECT_EQ(f.value()->tensor().item<float>(), 2.5f);
}

TEST(ItemTest, StringsAndJsonBecomeNonTensorData) {
  Item s("s", "text");
  EXPECT_EQ(s.value()->non_tensor(), "text");
  Item str("s", std::string("owned"));
  EXPECT_EQ(str.value()->non_tensor(), "owned");
  Item null("n", nullptr);
  EXPECT_TRUE(null.value()->non_tensor().is_null());
  Item list("l", Json{1, 2, 3});
  EXPECT_EQ(list.value()->non_tensor(), Json({1, 2, 3}));
}

TEST(ItemTest, NonTensorEntriesOfADictShareTheirValueWithCopies) {
  TensorDict td({{"task", "reach"}, {"stack", NonTensorStack({1, 2})}}, {2});
  const Value task = td["task"];
  EXPECT_EQ(
      &task.non_tensor_data().data(), &td["task"].non_tensor_data().data());
  const TensorDict copy = td.clone();
  EXPECT_EQ(copy.get_non_tensor("task"), "reach");
  EXPECT_EQ(copy.get_non_tensor("stack"), Json({1, 2}));
}

TEST(TensorDictNonTensorTest, SetNonTensorTakesStringsWithoutJson) {
  TensorDict td({3});
  td.set_non_tensor("name", "run-1");
  td.set_non_tensor({"sub", "id"}, std::string("a1"));
  const char* missing = nullptr;
  td.set_non_tensor("none", missing);
  EXPECT_EQ(td.get_non_tensor("name"), "run-1");
  EXPECT_EQ(td.get_non_tensor({"sub", "id"}), "a1");
  EXPECT_TRUE(td.get_non_tensor("none").is_null());
  EXPECT_EQ(td["name"].non_tensor_data().batch_size(), c10::IntArrayRef({3}));
  td.set_non_tensor("count", Json(3));  // JSON values still take the Json form
  EXPECT_EQ(td.get_non_tensor("count"), 3);
}

TEST(ItemTest, NestedListsStayAsChildren) {
  Item nested("n", {{"a", torch::zeros({1})}, {"b", 1}});
  EXPECT_EQ(nested.value(), nullptr);
  ASSERT_EQ(nested.children().size(), 2u);
  EXPECT_EQ(nested.children()[1].key(), tensordict::NestedKey("b"));
}

}  // namespace value_test
