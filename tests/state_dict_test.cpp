// Tests of include/tensordict/state_dict.h and TensorDict::state_dict /
// load_state_dict, against the forms Python tensordict 0.15 produces.

#include <string>
#include <vector>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace state_dict_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)
using tensordict::testing::expect_td_equal;
using tensordict::testing::metadata_keys;

namespace {

// {"a": [3], "b": {"c": [3, 2], "d": {"e": [3]}, "s": "txt"}}
TensorDict sample() {
  return TensorDict(
      {{"a", torch::zeros({3})},
       {"b",
        {{"c", torch::ones({3, 2})},
         {"d", {{"e", torch::full({3}, 2.0)}}},
         {"s", "txt"}}}},
      /*batch_size=*/{3});
}

}  // namespace

TEST(StateDictTest, FlatFormHasPythonKeysAndMetadata) {
  const TensorDict td = sample();
  const StateDict sd = td.state_dict();
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"a", "b.c", "b.d.e"}));
  // Python: OrderedDict([('', ...), ('b', ...), ('b.d', ...), ('b.s', ...)])
  EXPECT_EQ(
      metadata_keys(sd), (std::vector<std::string>{"", "b", "b.d", "b.s"}));
  EXPECT_EQ(sd.find_metadata("b.d")->batch_size, (std::vector<int64_t>{3}));
  EXPECT_FALSE(sd.find_metadata("")->device.has_value());
  ASSERT_TRUE(sd.find_metadata("b.s")->non_tensor.has_value());
  EXPECT_EQ(sd.find_metadata("b.s")->non_tensor->non_tensor(), "txt");
  // Leaves are detached aliases, not copies.
  EXPECT_EQ(sd.tensor("b.c").data_ptr(), td.get({"b", "c"}).data_ptr());
}

TEST(StateDictTest, NestedFormHasMetadataPerLevel) {
  const StateDict sd = sample().state_dict(/*flatten=*/false);
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"a", "b"}));
  const StateDict& b = sd.nested("b");
  EXPECT_EQ(b.keys(), (std::vector<std::string>{"c", "d", "s"}));
  EXPECT_EQ(metadata_keys(b), (std::vector<std::string>{""}));
  EXPECT_TRUE(b.nested("s").empty());
  EXPECT_EQ(b.nested("s").find_metadata("")->non_tensor->non_tensor(), "txt");
  EXPECT_TRUE(torch::equal(b.nested("d").tensor("e"), torch::full({3}, 2.0)));
}

TEST(StateDictTest, FlatAndNestedFormsLoadIntoAnEmptyDict) {
  for (const bool flatten : {true, false}) {
    // Python's strict mode refuses an empty target; strict=false fills it.
    TensorDict fresh;
    EXPECT_THROWS_WITH(
        fresh.load_state_dict(sample().state_dict(flatten)),
        c10::Error,
        "got state_dict extra keys \n{'a', 'b'}\n and tensordict extra "
        "keys\nset()\n");
    fresh.load_state_dict(sample().state_dict(flatten), /*strict=*/false);
    expect_td_equal(fresh, sample());
    EXPECT_EQ(
        fresh.get_tensordict({"b", "d"}).batch_size(),
        (std::vector<int64_t>{3}));
  }
}

TEST(StateDictTest, LoadCopiesInPlaceUnlessAssign) {
  TensorDict target = sample().apply([](const at::Tensor& t) { return t * 0; });
  const void* before = target.get({"b", "c"}).data_ptr();
  const StateDict sd = sample().state_dict();
  target.load_state_dict(sd);
  EXPECT_EQ(target.get({"b", "c"}).data_ptr(), before);
  EXPECT_TRUE(torch::equal(target.get({"b", "c"}), torch::ones({3, 2})));
  target.load_state_dict(sd, /*strict=*/true, /*assign=*/true);
  EXPECT_EQ(target.get({"b", "c"}).data_ptr(), sd.tensor("b.c").data_ptr());
}

TEST(StateDictTest, LegacyFormIsDetected) {
  StateDict nested;
  nested.insert("c", torch::ones({2, 5}));
  nested.insert_legacy_batch_size({2, 5});
  nested.insert_legacy_device(std::nullopt);
  StateDict sd;
  sd.insert("a", torch::arange(2));
  sd.insert("b", nested);
  sd.insert_legacy_batch_size({2});
  sd.insert_legacy_device(c10::Device(c10::kCPU));
  TensorDict td;
  td.load_state_dict(sd, /*strict=*/false);
  EXPECT_EQ(td.batch_size(), (std::vector<int64_t>{2}));
  EXPECT_EQ(td.get_tensordict("b").batch_size(), (std::vector<int64_t>{2, 5}));
  EXPECT_TRUE(torch::equal(td.get("a"), torch::arange(2)));
  EXPECT_FALSE(td.contains("__batch_size"));
}

TEST(StateDictTest, StrictReportsMissingAndUnexpectedKeysByName) {
  TensorDict other({{"a", torch::zeros({3})}, {"x", torch::zeros({3})}}, {3});
  EXPECT_THROWS_EXACTLY(
      other.load_state_dict(sample().state_dict()),
      c10::Error,
      "Cannot load state-dict because the key sets don't match: got "
      "state_dict extra keys \n{'b'}\n and tensordict extra keys\n{'x'}\n");
  // Non-strict: the given keys are written, the others kept.
  other.load_state_dict(sample().state_dict(), /*strict=*/false);
  EXPECT_TRUE(other.contains("x"));
  EXPECT_TRUE(torch::equal(other.get({"b", "d", "e"}), torch::full({3}, 2.0)));
}

TEST(StateDictTest, StrictErrorsInNestedLevelsNameTheLevel) {
  TensorDict target = sample();
  target.set({"b", "extra"}, torch::zeros({3}));
  EXPECT_THROWS_WITH(
      target.load_state_dict(sample().state_dict()),
      c10::Error,
      "tensordict extra keys\n{'extra'}");
  try {
    target.load_state_dict(sample().state_dict());
    ADD_FAILURE() << "did not throw";
  } catch (const c10::Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("while loading key 'b' of the state dict"),
        std::string::npos);
  }
}

TEST(StateDictTest, EmptyNestedDictsDoNotBreakStrictMode) {
  TensorDict target = sample();
  target.set("empty", TensorDict({}, {3}));
  target.load_state_dict(sample().state_dict(/*flatten=*/false));
  EXPECT_TRUE(target.contains("empty"));
}

TEST(StateDictTest, CollidingFlatKeysAreAKeyError) {
  TensorDict td({{"a.b", torch::zeros({1})}, {"a", {{"b", torch::ones({1})}}}});
  EXPECT_THROWS_WITH(td.state_dict(), KeyError, "Key 'a.b' appears twice");
  // The nested form keeps them apart (detected as nested because its keys
  // are the target's, as in Python).
  TensorDict back = td.apply([](const at::Tensor& t) { return t * 0; });
  back.load_state_dict(td.state_dict(/*flatten=*/false));
  EXPECT_TRUE(torch::equal(back.get("a.b"), torch::zeros({1})));
}

TEST(StateDictTest, ShapeMismatchNamesTheKey) {
  TensorDict target({{"a", torch::zeros({3, 4})}}, {3});
  StateDict sd;
  sd.insert("a", torch::zeros({3, 5}));
  EXPECT_THROWS_WITH(
      target.load_state_dict(sd),
      c10::Error,
      "Failed to update 'a': the value of shape torch.Size([3, 5]) does not "
      "fit "
      "the entry of shape torch.Size([3, 4])");
}

TEST(StateDictTest, DeviceMismatchIsRefusedWithPythonsMessage) {
  TensorDict target({{"a", torch::zeros({3})}}, {3}, c10::Device(c10::kCPU));
  StateDict sd;
  sd.insert("a", torch::zeros({3}));
  sd.set_metadata(
      "", StateDictMetadata{{3}, c10::Device(c10::kMeta), std::nullopt});
  EXPECT_THROWS_EXACTLY(
      target.load_state_dict(sd),
      c10::Error,
      "Loading data from another device is not yet supported.");
}

TEST(StateDictTest, EntryAccessorsCheckTheKind) {
  StateDict sd;
  sd.insert("a", torch::zeros({1}));
  EXPECT_THROWS_WITH(
      sd.nested("a"),
      c10::TypeError,
      "state dict entry is a tensor, not a nested state dict");
  EXPECT_THROWS_WITH(
      sd.at("zz"),
      KeyError,
      "key \"zz\" not found in the state dict, whose keys are {'a'}");
  EXPECT_TRUE(sd.erase("a"));
  EXPECT_TRUE(sd.empty());
}

}  // namespace state_dict_test
