#include <tensordict/json.h>
#include <tensordict/memmap.h>
#include <tensordict/non_tensor.h>
#include <tensordict/state_dict.h>
#include <tensordict/tensor_dict.h>
#include <tensordict/value.h>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace non_tensor_test {

using namespace tensordict;           // NOLINT(google-build-using-namespace)
using namespace tensordict::testing;  // NOLINT(google-build-using-namespace)

TEST(NonTensorDataTest, HoldsAnyJsonValue) {
  NonTensorData text("hello", {3});
  EXPECT_EQ(text.data(), "hello");
  EXPECT_EQ(text.batch_size(), c10::IntArrayRef({3}));
  EXPECT_FALSE(text.device().has_value());

  Json object = {{"lr", 0.5}, {"layers", {64, 64}}, {"name", nullptr}};
  NonTensorData cfg(object);
  EXPECT_EQ(cfg.data()["layers"][1], 64);
  EXPECT_TRUE(cfg.data()["name"].is_null());
  EXPECT_EQ(cfg.data().dump(), object.dump());
}

TEST(NonTensorDataTest, JsonRoundTripsExactly) {
  // Object keys keep insertion order (as Python dicts do), big integers stay
  // exact, and floats print with their shortest round-trip digits.
  const std::string text =
      R"({"z":1,"big":9007199254740993,"neg":-3,"f":0.1,"u":"é中","l":[true,false,null],"a":{}})";
  NonTensorData data(Json::parse(text));
  EXPECT_EQ(data.data().dump(), text);
  EXPECT_EQ(data.data()["big"].get<int64_t>(), 9007199254740993LL);
  EXPECT_EQ(data.data().begin().key(), "z");
}

TEST(NonTensorDataTest, ReprMatchesPython) {
  EXPECT_EQ(
      NonTensorData("text", {4}).repr(),
      "NonTensorData(data=text, batch_size=torch.Size([4]), device=None)");
  EXPECT_EQ(
      NonTensorData(Json{{"k", {1, 2}}}, {2}, c10::Device("cpu")).repr(),
      "NonTensorData(data={'k': [1, 2]}, batch_size=torch.Size([2]), "
      "device=cpu)");
  EXPECT_EQ(
      NonTensorData(Json::array({nullptr, true, 1.5, "s"})).repr(),
      "NonTensorData(data=[None, True, 1.5, 's'], batch_size=torch.Size([]), "
      "device=None)");
}

TEST(NonTensorDataTest, StringAndNullConstructorsNeedNoJson) {
  EXPECT_TRUE(NonTensorData().data().is_null());
  EXPECT_TRUE(NonTensorData().batch_size().empty());
  EXPECT_EQ(NonTensorData("cat", {2}).data(), Json("cat"));
  EXPECT_EQ(NonTensorData(std::string("dog"), {2}).data(), Json("dog"));
  EXPECT_TRUE(NonTensorData(nullptr, {2}).data().is_null());
  const char* missing = nullptr;
  EXPECT_TRUE(NonTensorData(missing).data().is_null());
  EXPECT_EQ(NonTensorData(nullptr, {2}).batch_size(), c10::IntArrayRef({2}));
}

TEST(NonTensorDataTest, CopiesShareTheValueAndMovesLeaveItValid) {
  NonTensorData a(Json{{"k", {1, 2}}}, {3});
  NonTensorData b = a;
  EXPECT_EQ(&a.data(), &b.data());  // one value, not a deep copy
  EXPECT_EQ(a, b);
  b.set_batch_size({4});
  EXPECT_EQ(a.batch_size(), c10::IntArrayRef({3}));

  NonTensorData c = std::move(a);
  EXPECT_EQ(c.data(), Json({{"k", {1, 2}}}));
  EXPECT_EQ(a.data(), c.data());  // NOLINT(bugprone-use-after-move)
  a = NonTensorData("other");
  EXPECT_EQ(a.data(), "other");
  EXPECT_EQ(c.data(), Json({{"k", {1, 2}}}));
}

TEST(NonTensorDataTest, RejectsNegativeBatchSize) {
  EXPECT_THROWS_WITH(
      NonTensorData("x", {-1}),
      c10::ValueError,
      "batch size must be non-negative, got torch.Size([-1])");
}

TEST(NonTensorStackTest, OneValuePerElement) {
  NonTensorStack stack({"a", "b", "c"});
  EXPECT_EQ(stack.batch_size(), c10::IntArrayRef({3}));
  EXPECT_EQ(stack.at(1), "b");
  EXPECT_EQ(stack.tolist(), Json({"a", "b", "c"}));
  EXPECT_THROWS_WITH(stack.at(3), c10::IndexError, "index 3 is out of bounds");
}

TEST(NonTensorStackTest, FromNestedListsFollowsBatchDims) {
  Json nested = {{1, 2, 3}, {4, 5, 6}};
  NonTensorStack stack = NonTensorStack::from_list(nested, 2);
  EXPECT_EQ(stack.batch_size(), c10::IntArrayRef({2, 3}));
  EXPECT_EQ(stack.at(4), 5);
  EXPECT_EQ(stack.tolist(), nested);
  // One batch dim: the inner lists are the values.
  NonTensorStack rows = NonTensorStack::from_list(nested, 1);
  EXPECT_EQ(rows.batch_size(), c10::IntArrayRef({2}));
  EXPECT_EQ(rows.at(0), Json({1, 2, 3}));
}

TEST(NonTensorStackTest, FromListRejectsRaggedOrShallowLists) {
  EXPECT_THROWS_WITH(
      NonTensorStack::from_list(Json{{1, 2}, {3}}, 2),
      c10::ValueError,
      "ragged lists: expected a list of length 2 at depth 1, got 1");
  EXPECT_THROWS_WITH(
      NonTensorStack::from_list(Json{1, 2}, 2),
      c10::ValueError,
      "expected a list at depth 1, got number");
  EXPECT_THROWS_WITH(
      NonTensorStack::from_list(Json("x"), 1),
      c10::ValueError,
      "expected a list at depth 0, got string");
}

TEST(NonTensorStackTest, CountMustMatchBatchSize) {
  EXPECT_THROWS_EXACTLY(
      NonTensorStack(std::vector<Json>{1, 2, 3}, {2, 2}),
      c10::ValueError,
      "a NonTensorStack of batch size torch.Size([2, 2]) needs 4 values, got "
      "3");
  EXPECT_THROWS_WITH(
      NonTensorStack(std::vector<Json>{1}, c10::IntArrayRef{}),
      c10::ValueError,
      "needs at least one batch dim");
}

TEST(NonTensorStackTest, GrowingTheBatchRepeatsValues) {
  NonTensorStack stack({"a", "b"});
  stack.set_batch_size({2, 2});
  EXPECT_EQ(
      stack.tolist(),
      Json::array({Json::array({"a", "a"}), Json::array({"b", "b"})}));
  stack.set_batch_size({2});  // shrinking keeps the values
  EXPECT_EQ(stack.batch_size(), c10::IntArrayRef({2, 2}));
  EXPECT_THROWS_WITH(
      stack.set_batch_size({3}),
      c10::Error,
      "the NonTensorStack has batch size torch.Size([2, 2]) which is "
      "incompatible with the batch-size torch.Size([3]).");
}

TEST(NonTensorStackTest, CopiesShareValuesUntilTheBatchGrows) {
  NonTensorStack a({"x", "y"});
  NonTensorStack b = a;
  EXPECT_EQ(&a.values(), &b.values());  // one vector, not a deep copy
  b.set_batch_size({2, 2});
  EXPECT_EQ(a.values(), std::vector<Json>({"x", "y"}));
  EXPECT_EQ(a.batch_size(), c10::IntArrayRef({2}));
  EXPECT_EQ(b.values(), std::vector<Json>({"x", "x", "y", "y"}));

  NonTensorStack c = std::move(a);
  EXPECT_EQ(c.values(), std::vector<Json>({"x", "y"}));
  EXPECT_EQ(a.values().size(), 2u);  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(NonTensorStack().values().empty());
}

TEST(NonTensorStackTest, ReprMatchesPython) {
  EXPECT_EQ(
      NonTensorStack({1, 2}).repr(),
      "NonTensorStack(\n    [1, 2],\n    batch_size=torch.Size([2]),\n"
      "    device=None)");
  EXPECT_EQ(
      NonTensorStack(std::vector<Json>{"a\nb", 1e15, 1e16}).repr(),
      "NonTensorStack(\n    ['a\\nb', 1000000000000000.0, 1e+16],\n"
      "    batch_size=torch.Size([3]),\n    device=None)");
}

TEST(NonTensorStackTest, EqualityComparesValuesAndShape) {
  EXPECT_EQ(NonTensorStack({1, 2}), NonTensorStack({1, 2}));
  EXPECT_NE(NonTensorStack({1, 2}), NonTensorStack({2, 1}));
  EXPECT_NE(
      NonTensorStack(std::vector<Json>{1, 2}, {2, 1}),
      NonTensorStack(std::vector<Json>{1, 2}, {2}));
}

TEST(PythonStrTest, FormatsLikePythonStr) {
  EXPECT_EQ(tensordict::python_str("text"), "text");
  EXPECT_EQ(tensordict::python_str(Json{{"a", "b"}}), "{'a': 'b'}");
  EXPECT_EQ(tensordict::python_str(Json(false)), "False");
  EXPECT_EQ(tensordict::python_str(Json(nullptr)), "None");
  EXPECT_EQ(tensordict::python_str(Json(2.0)), "2.0");
  EXPECT_EQ(tensordict::python_str(Json(-7)), "-7");
  EXPECT_EQ(tensordict::python_str(Json(1e-5)), "1e-05");
  EXPECT_EQ(tensordict::python_str(Json(0.0001)), "0.0001");
  EXPECT_EQ(tensordict::python_str(Json(-2.5e-7)), "-2.5e-07");
  EXPECT_EQ(tensordict::python_str(Json(123456.5)), "123456.5");
  EXPECT_EQ(tensordict::python_str(Json(1.5e300)), "1.5e+300");
  EXPECT_EQ(tensordict::python_str(Json(-0.0)), "-0.0");
  EXPECT_EQ(
      tensordict::python_str(
          Json::array({"bell\x07", "zw\u200b", "caf\u00e9"})),
      "['bell\\x07', 'zw\\u200b', 'caf\u00e9']");
}

// A literal 0 is a null pointer constant: a `const char*` overload would take
// it and store None. The text overloads are templates so that it stays 0.
TEST(NonTensorDataTest, ZeroLiteralIsTheNumberZeroNotNull) {
  EXPECT_EQ(NonTensorData(0).data(), Json(0));
  EXPECT_EQ(NonTensorData(0, {2}).data(), Json(0));
  tensordict::TensorDict td;
  td.set_non_tensor("zero", 0);
  td.set_non_tensor("text", "zero");
  td.set_non_tensor("string", std::string("zero"));
  const char* null_text = nullptr;
  td.set_non_tensor("null", null_text);
  EXPECT_EQ(td.get_non_tensor("zero"), Json(0));
  EXPECT_EQ(td.get_non_tensor("text"), Json("zero"));
  EXPECT_EQ(td.get_non_tensor("string"), Json("zero"));
  EXPECT_TRUE(td.get_non_tensor("null").is_null());
}

// --- Python's NonTensorData / NonTensorStack methods ----------------------

TEST(NonTensorMethodsTest, DataFollowsPython) {
  const NonTensorData data("x", {2, 3});
  EXPECT_EQ(data.names(), tensordict::DimNames(2, std::nullopt));
  // Python: [['x', 'x', 'x'], ['x', 'x', 'x']].
  EXPECT_EQ(data.tolist(), Json::parse(R"([["x","x","x"],["x","x","x"]])"));
  EXPECT_EQ(NonTensorData(Json(5)).tolist(), Json(5));
  const NonTensorStack stack = data.maybe_to_stack().non_tensor_stack();
  EXPECT_EQ(stack.batch_size(), c10::IntArrayRef({2, 3}));
  EXPECT_EQ(stack.tolist(), data.tolist());
  const std::vector<NonTensorData> rows = data.unbind(0);
  ASSERT_EQ(rows.size(), 2U);
  EXPECT_EQ(rows[1].batch_size(), c10::IntArrayRef({3}));
  EXPECT_EQ(data.unbind(-1).size(), 3U);
  EXPECT_EQ(data.get("data"), Json("x"));
  EXPECT_THROWS_WITH(data.get("other"), c10::Error, "there is no key 'other'");
  EXPECT_THROWS_WITH(data.unbind(2), c10::IndexError, "");
  EXPECT_TRUE(data.state_dict().empty());
}

TEST(NonTensorMethodsTest, StackUnbindsAlongAnyDim) {
  // [[a, b, c], [d, e, f]]
  const NonTensorStack stack = NonTensorStack::from_list(
      Json::parse(R"([["a","b","c"],["d","e","f"]])"), 2);
  EXPECT_EQ(stack.names().size(), 2U);
  const std::vector<tensordict::Value> columns = stack.unbind(1);
  ASSERT_EQ(columns.size(), 3U);
  EXPECT_EQ(
      columns[2].non_tensor_stack().tolist(), Json::parse(R"(["c","f"])"));
  const std::vector<tensordict::Value> items =
      columns[0].non_tensor_stack().unbind(0);
  ASSERT_EQ(items.size(), 2U);
  ASSERT_TRUE(items[1].is_non_tensor_data());
  EXPECT_EQ(items[1].non_tensor_data().data(), Json("d"));
  EXPECT_EQ(stack.maybe_to_stack(), stack);
}

TEST(NonTensorMethodsTest, RootDirectoriesRoundTripInPythonsLayout) {
  TempDir dir;
  // Python 0.15 writes NonTensorData("hello", batch_size=[2]).memmap(p)
  // as these bytes (stdlib json) and loads them back with batch size [].
  const std::string python_bytes =
      "{\"_type\": \"<class 'tensordict.tensorclass.NonTensorData'>\", "
      "\"data\": \"hello\", \"_metadata\": null, \"_is_non_tensor\": true}";
  (void)NonTensorData("hello", {2})
      .memmap(tensordict::MemmapOptions(dir / "data")
                  .json_style(tensordict::JsonStyle::kSpaced));
  EXPECT_EQ(read_text(dir / "data/meta.json"), python_bytes);
  const NonTensorData loaded = NonTensorData::load_memmap(dir / "data");
  EXPECT_EQ(loaded.data(), Json("hello"));
  EXPECT_TRUE(loaded.batch_size().empty());
  // Python's NonTensorStack("a", "b").memmap(p).
  (void)NonTensorStack({"a", "b"}).save(dir / "stack");
  EXPECT_EQ(
      read_text(dir / "stack/meta.json"),
      "{\"_type\":\"<class 'tensordict.tensorclass.NonTensorStack'>\","
      "\"_format_version\":1,\"_class\":\"tensordict:NonTensorStack\","
      "\"stack_dim\":0,\"device\":null,\"data\":[\"a\",\"b\"]}");
  NonTensorStack target;
  target.load_(dir / "stack");
  EXPECT_EQ(target.tolist(), Json::parse(R"(["a","b"])"));
  EXPECT_THROWS_WITH(
      NonTensorData::load_memmap(dir / "stack"),
      c10::Error,
      "holds a NonTensorStack, not a NonTensorData: load it with "
      "NonTensorStack::load_memmap");
  EXPECT_THROWS_WITH(
      tensordict::TensorDict::load_memmap(dir / "data"),
      c10::Error,
      "or load it with NonTensorData::load_memmap");
}

// Python's spellings of the save family on NonTensorData: `save` and
// `memmap_like` write what `memmap` writes (there are no leaves to size),
// `load` and `load_` read it back, and the state dict is empty both ways.
TEST(NonTensorMethodsTest, SaveLoadAndMemmapLikeOfNonTensorData) {
  TempDir dir;
  const NonTensorData value(Json::parse(R"({"lr": 0.1, "name": "run"})"));
  const NonTensorData saved =
      value.save(tensordict::MemmapOptions(dir / "saved"));
  EXPECT_EQ(saved.data(), value.data());
  const NonTensorData like =
      value.memmap_like(tensordict::MemmapOptions(dir / "like"));
  EXPECT_EQ(like.data(), value.data());
  EXPECT_EQ(
      read_text(dir / "like/meta.json"), read_text(dir / "saved/meta.json"));
  EXPECT_EQ(NonTensorData::load(dir / "saved").data(), value.data());
  EXPECT_EQ(NonTensorData::load(dir / "like").data(), value.data());
  NonTensorData target("old");
  EXPECT_EQ(&target.load_(dir / "saved"), &target);
  EXPECT_EQ(target.data(), value.data());
  EXPECT_THROWS_WITH(
      target.load_(dir / "missing"), c10::Error, dir / "missing");
  EXPECT_EQ(target.data(), value.data());  // a failed load changes nothing
}

TEST(NonTensorMethodsTest, StateDictCarriesAndRestoresValueAndBatchSize) {
  // Python 0.15.3:
  //   sd = NonTensorData("a", batch_size=[2]).state_dict()
  //   sd          # OrderedDict()
  //   sd._metadata
  //   # OrderedDict([('', {'batch_size': torch.Size([2]), 'device': None,
  //   #   '_type': 'NonTensorData', '_non_tensor': {'data': 'a',
  //   #   '_metadata': None, '_is_non_tensor': True}})])
  //   e = NonTensorData("b", batch_size=[3]); e.load_state_dict(sd)
  //   e.data, e.batch_size                  # 'a', torch.Size([2])
  //   e.load_state_dict({}, strict=True)    # unchanged
  //   e.load_state_dict({"x": torch.zeros(1)})
  //   # KeyError: "Key 'x' wasn't expected in the state-dict."
  //   e.load_state_dict({"x": torch.zeros(1)}, strict=False)  # unchanged
  //   e.load_state_dict(TensorDict({}, [4]).state_dict())
  //   e.data, e.batch_size                  # 'a', torch.Size([4])
  const tensordict::StateDict sd = NonTensorData("a", {2}).state_dict();
  EXPECT_TRUE(sd.empty());
  EXPECT_EQ(
      sd.metadata_repr(),
      "OrderedDict([('', {'batch_size': torch.Size([2]), 'device': None, "
      "'_type': 'NonTensorData', '_non_tensor': {'data': 'a', '_metadata': "
      "None, '_is_non_tensor': True}})])");
  NonTensorData e("b", {3});
  EXPECT_EQ(&e.load_state_dict(sd), &e);
  EXPECT_EQ(e.data(), Json("a"));
  EXPECT_EQ(e.batch_size(), c10::IntArrayRef({2}));

  NonTensorData kept("kept", {3});
  kept.load_state_dict(tensordict::StateDict());
  EXPECT_EQ(kept.data(), Json("kept"));
  EXPECT_EQ(kept.batch_size(), c10::IntArrayRef({3}));
  tensordict::StateDict one;
  one.insert("x", torch::zeros({1}));
  EXPECT_THROWS_WITH(
      kept.load_state_dict(one),
      KeyError,
      "Key 'x' wasn't expected in the state-dict.");
  kept.load_state_dict(one, /*strict=*/false);
  EXPECT_EQ(kept.data(), Json("kept"));
  EXPECT_EQ(kept.batch_size(), c10::IntArrayRef({3}));

  e.load_state_dict(TensorDict({}, {4}).state_dict());
  EXPECT_EQ(e.data(), Json("a"));
  EXPECT_EQ(e.batch_size(), c10::IntArrayRef({4}));

  // A number round-trips as a number, with its batch size.
  NonTensorData n("b", {3});
  n.load_state_dict(NonTensorData(Json(3), {2, 1}).state_dict());
  EXPECT_EQ(n.data(), Json(3));
  EXPECT_EQ(n.batch_size(), c10::IntArrayRef({2, 1}));
}

TEST(NonTensorMethodsTest, SetFromTensordictAndRefreshFollowPython) {
  NonTensorData data("x", {2});
  data.set("data", Json("y"));
  EXPECT_EQ(data.data(), Json("y"));
  EXPECT_THROWS_WITH(
      data.set("other", Json(1)), c10::Error, "there is no key 'other'");
  const NonTensorData made = NonTensorData::from_tensordict(
      tensordict::TensorDict({}, {3}), Json::parse(R"({"data": "z"})"));
  EXPECT_EQ(made.data(), Json("z"));
  EXPECT_EQ(made.batch_size(), c10::IntArrayRef({3}));
  EXPECT_THROWS_WITH(
      NonTensorData::from_tensordict(
          tensordict::TensorDict({}, {3}), Json::object()),
      c10::Error,
      "needs the field 'data'");
  // Python: "Cannot refresh a TensorDict that is not memory mapped ...".
  EXPECT_THROWS_WITH(
      data.memmap_refresh_(), c10::Error, "is not memory mapped");
  TempDir dir;
  data.memmap_(dir / "d");
  NonTensorData("changed").memmap(dir / "d");  // another writer
  data.memmap_refresh_();
  EXPECT_EQ(data.data(), Json("changed"));
  EXPECT_EQ(data.batch_size(), c10::IntArrayRef({2}));  // kept
  NonTensorStack stack = NonTensorStack({"a", "b"}).memmap(dir / "s");
  (void)NonTensorStack({"c", "d", "e"}).save(dir / "s");
  stack.memmap_refresh_();
  EXPECT_EQ(stack.tolist(), Json::parse(R"(["c","d","e"])"));
}

// --- the rows of Python 0.15.3's NonTensorData that C++ lacked -------------

TEST(NonTensorRowsTest, DimNamesFollowTheirDimsAsInPython) {
  // Python: NonTensorData("a", batch_size=[2, 3], names=["x", "y"]).names
  // is ['x', 'y'].
  NonTensorData data("a", {2, 3}, std::nullopt, {"x", "y"});
  EXPECT_EQ(data.names(), (tensordict::DimNames{"x", "y"}));
  const NonTensorData from_json(Json(1), {2}, std::nullopt, {"b"});
  EXPECT_EQ(from_json.names(), (tensordict::DimNames{"b"}));
  // Python's `d[0].names` is ['y'] (its unbind keeps none: see the header).
  EXPECT_EQ(data.unbind(0)[1].names(), (tensordict::DimNames{"y"}));
  EXPECT_EQ(data.unbind(1)[0].names(), (tensordict::DimNames{"x"}));
  // Python's maybe_to_stack() has no names: [None, None].
  EXPECT_EQ(
      data.maybe_to_stack().non_tensor_stack().names(),
      tensordict::DimNames(2, std::nullopt));
  // Python: `d.batch_size = [2]` leaves ['x']; back to [2, 3]: ['x', None].
  data.set_batch_size({2});
  EXPECT_EQ(data.names(), (tensordict::DimNames{"x"}));
  data.set_batch_size({2, 3});
  EXPECT_EQ(data.names(), (tensordict::DimNames{"x", std::nullopt}));
  // Unnamed: one null per dim, as before.
  EXPECT_EQ(NonTensorData("a", {4}).names(), tensordict::DimNames(1));
  // TensorDict's checks and messages (Python's NonTensorData skips them).
  EXPECT_THROWS_WITH(
      NonTensorData("a", {2, 3}, std::nullopt, {"x"}),
      c10::ValueError,
      "the length of the dimension names must equate the tensordict "
      "batch_dims attribute. Got ['x'] for batch_dims 2.");
  EXPECT_THROWS_WITH(
      NonTensorData("a", {2, 3}, std::nullopt, {"x", "x"}),
      c10::ValueError,
      "Some dimension names are non-unique: ['x', 'x'].");
  // A saved directory holds no names (Python's meta.json neither).
  TempDir dir;
  const NonTensorData named("a", {2}, std::nullopt, {"t"});
  EXPECT_EQ(named.memmap(dir / "n").names(), (tensordict::DimNames{"t"}));
  (void)NonTensorData("a", {2}).memmap(dir / "plain");
  EXPECT_EQ(read_text(dir / "n/meta.json"), read_text(dir / "plain/meta.json"));
  EXPECT_TRUE(NonTensorData::load_memmap(dir / "n").names().empty());
}

TEST(NonTensorRowsTest, MaybeToStackKeepsANonTensorDataWithoutBatchDims) {
  // Python: NonTensorData("a").maybe_to_stack() is the NonTensorData.
  const NonTensorData scalar("a");
  const tensordict::Value kept = scalar.maybe_to_stack();
  ASSERT_TRUE(kept.is_non_tensor_data());
  EXPECT_EQ(kept.non_tensor_data(), scalar);
  // A batch dim of size 0 is a batch dim: an empty stack.
  const tensordict::Value empty = NonTensorData("a", {0}).maybe_to_stack();
  ASSERT_TRUE(empty.is_non_tensor_stack());
  EXPECT_EQ(empty.non_tensor_stack().batch_size(), c10::IntArrayRef({0}));
  EXPECT_TRUE(empty.non_tensor_stack().values().empty());
}

TEST(NonTensorRowsTest, GetWithADefaultAndSetWithOptionsFollowPython) {
  NonTensorData data("a", {2});
  // Python: d.get("data", default="zz") is 'a'; d.get("missing", "zz") 'zz'.
  EXPECT_EQ(data.get("data", Json("zz")), Json("a"));
  EXPECT_EQ(data.get("missing", Json("zz")), Json("zz"));
  EXPECT_TRUE(data.get("missing", Json()).is_null());
  EXPECT_THROWS_WITH(
      (void)data.get("missing"), c10::Error, "there is no key 'missing'");
  // Python: d.set("data", "b", inplace=True) then d.data is 'b'.
  const NonTensorData copy = data;
  data.set("data", Json("b"), tensordict::SetOptions().inplace(true));
  EXPECT_EQ(data.data(), Json("b"));
  EXPECT_EQ(copy.data(), Json("a"));  // copies keep their value
  data.set("data", Json(5), tensordict::SetOptions().non_blocking(true));
  EXPECT_EQ(data.data(), Json(5));
  EXPECT_THROWS_WITH(
      data.set("other", Json(1), tensordict::SetOptions().inplace(true)),
      c10::Error,
      "there is no key 'other'");
  EXPECT_EQ(data.data(), Json(5));
  // A saved value is replaced in memory only; refresh reads the file.
  TempDir dir;
  data.memmap_(dir / "d");
  data.set("data", Json("new"), tensordict::SetOptions().inplace(true));
  EXPECT_EQ(NonTensorData::load_memmap(dir / "d").data(), Json(5));
  data.memmap_refresh_();
  EXPECT_EQ(data.data(), Json(5));
}

TEST(NonTensorRowsTest, LoadMemmapIntoOutKeepsItsBatchSizeAsPython) {
  TempDir dir;
  (void)NonTensorData("saved", {2}).memmap(dir / "a");
  // Python: NonTensorData.load_memmap(p, out=NonTensorData("old",
  // batch_size=[3])) is `out`, now NonTensorData(data=saved,
  // batch_size=torch.Size([3])).
  NonTensorData out("old", {3}, std::nullopt, {"t"});
  NonTensorData& result = NonTensorData::load_memmap(dir / "a", out);
  EXPECT_EQ(&result, &out);
  EXPECT_EQ(out.data(), Json("saved"));
  EXPECT_EQ(out.batch_size(), c10::IntArrayRef({3}));
  EXPECT_EQ(out.names(), (tensordict::DimNames{"t"}));
  // Saved there: a refresh reads that directory.
  (void)NonTensorData("again").memmap(dir / "a");
  out.memmap_refresh_();
  EXPECT_EQ(out.data(), Json("again"));
  // A failed load leaves `out` as it was.
  (void)NonTensorStack({"x", "y"}).memmap(dir / "stack");
  EXPECT_THROWS_WITH(
      NonTensorData::load_memmap(dir / "stack", out),
      c10::Error,
      "holds a NonTensorStack, not a NonTensorData");
  EXPECT_THROWS_WITH(
      NonTensorData::load_memmap(dir / "missing", out),
      c10::Error,
      dir / "missing");
  EXPECT_EQ(out.data(), Json("again"));
  // Python's load_memmap_ is load_memmap(out=self): the batch size stays.
  NonTensorData target("old", {3});
  EXPECT_EQ(&target.load_memmap_(dir / "a"), &target);
  EXPECT_EQ(target.data(), Json("again"));
  EXPECT_EQ(target.batch_size(), c10::IntArrayRef({3}));
}

TEST(NonTensorRowsTest, ReturnEarlySavesOnAnotherThread) {
  TempDir dir;
  const NonTensorData value("v", {2});
  // Python: value.memmap(p, num_threads=2, return_early=True) is a future
  // whose result is NonTensorData(data=v, ...); the files are memmap's.
  std::future<NonTensorData> saved = value.memmap_async(dir / "m");
  EXPECT_EQ(saved.get(), value);
  (void)value.memmap(dir / "sync");
  EXPECT_EQ(read_text(dir / "m/meta.json"), read_text(dir / "sync/meta.json"));
  EXPECT_EQ(value.save_async(dir / "s").get().data(), Json("v"));
  EXPECT_EQ(value.memmap_like_async(dir / "l").get().data(), Json("v"));
  EXPECT_EQ(NonTensorData::load_memmap(dir / "s").data(), Json("v"));
  EXPECT_EQ(NonTensorData::load_memmap(dir / "l").data(), Json("v"));
  NonTensorData inplace("w", {2});
  EXPECT_EQ(inplace.memmap_async_(dir / "i").get().data(), Json("w"));
  (void)NonTensorData("other").memmap(dir / "i");
  inplace.memmap_refresh_();  // saved there by the future
  EXPECT_EQ(inplace.data(), Json("other"));
  // The future carries the error.
  write_text(dir / "file", "x");
  std::future<NonTensorData> failed = value.memmap_async(dir / "file/sub");
  EXPECT_THROW((void)failed.get(), c10::Error);
}

}  // namespace non_tensor_test
