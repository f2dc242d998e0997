// Tests of include/tensordict/state_dict.h and TensorDict::state_dict /
// load_state_dict, against the forms Python tensordict 0.15 produces.

#include <tensordict/json.h>

#include <cmath>
#include <limits>
#include <sstream>
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

// Python (tensordict 0.15), on the same dict as sample():
//   sd = td.state_dict(prefix="p.")
//   list(sd)            -> ['p.a', 'p.b.c', 'p.b.d.e']
//   list(sd._metadata)  -> ['p', 'p.b', 'p.b.d', 'p.b.s']
//   sd = td.state_dict(prefix="p")
//   list(sd)            -> ['pa', 'pb.c', 'pb.d.e']
//   list(sd._metadata)  -> ['p', 'pb', 'pb.d', 'pb.s']
TEST(StateDictTest, PrefixIsPrependedToKeysAndMetadataAsInPython) {
  const TensorDict td = sample();
  const StateDict dotted = td.state_dict(StateDictOptions().prefix("p."));
  EXPECT_EQ(
      dotted.keys(), (std::vector<std::string>{"p.a", "p.b.c", "p.b.d.e"}));
  EXPECT_EQ(
      metadata_keys(dotted),
      (std::vector<std::string>{"p", "p.b", "p.b.d", "p.b.s"}));
  EXPECT_EQ(dotted.find_metadata("p.b.s")->non_tensor->non_tensor(), "txt");
  const StateDict bare = td.state_dict(StateDictOptions().prefix("p"));
  EXPECT_EQ(bare.keys(), (std::vector<std::string>{"pa", "pb.c", "pb.d.e"}));
  EXPECT_EQ(
      metadata_keys(bare),
      (std::vector<std::string>{"p", "pb", "pb.d", "pb.s"}));
}

// Python (tensordict 0.15), gathering two dicts into one destination:
//   d = OrderedDict(); d["x"] = torch.tensor(1.)
//   a.state_dict(destination=d, prefix="actor.")   # returns d
//   b.state_dict(destination=d, prefix="critic.")
//   a2.state_dict(destination=d, prefix="actor.")  # a2["w"] is 5s
//   list(d)           -> ['x', 'actor.w', 'actor.n.u', 'critic.v']
//   list(d._metadata) -> ['actor', 'actor.n', 'critic'];  d["actor.w"] -> 5s
TEST(StateDictTest, DestinationGathersSeveralDictsAsInPython) {
  const TensorDict a(
      {{"w", torch::ones({2})}, {"n", {{"u", torch::arange(2)}}}}, {2});
  const TensorDict b({{"v", torch::zeros({3})}});
  const TensorDict a2(
      {{"w", torch::full({2}, 5.0)}, {"n", {{"u", torch::arange(2)}}}}, {2});
  StateDict d;
  d.insert("x", torch::tensor(1.0));
  StateDict& returned = a.state_dict(d, StateDictOptions().prefix("actor."));
  EXPECT_EQ(&returned, &d);
  (void)b.state_dict(d, StateDictOptions().prefix("critic."));
  (void)a2.state_dict(d, StateDictOptions().prefix("actor."));
  EXPECT_EQ(
      d.keys(),
      (std::vector<std::string>{"x", "actor.w", "actor.n.u", "critic.v"}));
  EXPECT_EQ(
      metadata_keys(d),
      (std::vector<std::string>{"actor", "actor.n", "critic"}));
  EXPECT_TRUE(torch::equal(d.tensor("actor.w"), torch::full({2}, 5.0)));
  EXPECT_EQ(d.find_metadata("actor")->batch_size, (std::vector<int64_t>{2}));
  EXPECT_EQ(d.find_metadata("critic")->batch_size, (std::vector<int64_t>{}));
  // What was gathered loads back into each dict by its prefix.
  TensorDict critic({{"v", torch::full({3}, 7.0)}});
  StateDict only_critic;
  only_critic.insert("v", d.tensor("critic.v"));
  critic.load_state_dict(only_critic);
  EXPECT_TRUE(torch::equal(critic.get("v"), torch::zeros({3})));
}

// Loading into a memmapped dict copies into its mapped files (Python's
// load_state_dict copies in place too); the files hold the new values.
TEST(StateDictTest, LoadIntoAMemmappedDictWritesItsFiles) {
  tensordict::testing::TempDir dir;
  const TensorDict td(
      {{"w", torch::zeros({2, 3})}, {"n", {{"b", torch::zeros({2})}}}}, {2});
  TensorDict mapped = td.memmap(dir / "td");
  ASSERT_TRUE(mapped.is_locked());
  const at::Tensor w_before = mapped.get("w");
  TensorDict source(
      {{"w", torch::full({2, 3}, 4.0)}, {"n", {{"b", torch::ones({2})}}}}, {2});
  mapped.load_state_dict(source.state_dict());
  EXPECT_TRUE(mapped.get("w").is_same(w_before));  // copied, not replaced
  EXPECT_TRUE(mapped.is_memmap());
  const TensorDict reread = TensorDict::load_memmap(dir / "td");
  EXPECT_TRUE(torch::equal(reread.get("w"), torch::full({2, 3}, 4.0)));
  EXPECT_TRUE(torch::equal(reread.get({"n", "b"}), torch::ones({2})));
  // A shape that does not fit the files is refused, naming the key.
  TensorDict wrong(
      {{"w", torch::ones({2, 4})}, {"n", {{"b", torch::ones({2})}}}}, {2});
  EXPECT_THROWS_WITH(
      mapped.load_state_dict(wrong.state_dict()), c10::Error, "w");
  EXPECT_TRUE(torch::equal(
      TensorDict::load_memmap(dir / "td").get("w"), torch::full({2, 3}, 4.0)));
}

// Python: sd = td.state_dict(prefix="p.", flatten=False)
//   list(sd) -> ['p.a', 'p.b'];  list(sd._metadata) -> ['p']
//   list(sd["p.b"]) -> ['c', 'd', 's'];  list(sd["p.b"]._metadata) -> ['']
TEST(StateDictTest, PrefixOfTheNestedFormAppliesToTheRootOnly) {
  const StateDict sd =
      sample().state_dict(StateDictOptions().prefix("p.").flatten(false));
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"p.a", "p.b"}));
  EXPECT_EQ(metadata_keys(sd), (std::vector<std::string>{"p"}));
  const StateDict& b = sd.nested("p.b");
  EXPECT_EQ(b.keys(), (std::vector<std::string>{"c", "d", "s"}));
  EXPECT_EQ(metadata_keys(b), (std::vector<std::string>{""}));
  EXPECT_EQ(metadata_keys(b.nested("d")), (std::vector<std::string>{""}));
}

TEST(StateDictTest, KeepVarsKeepsTheTensorsOtherwiseTheyAreDetached) {
  TensorDict td(
      {{"w", torch::ones({2}, torch::requires_grad())},
       {"n", {{"v", torch::zeros({2}, torch::requires_grad())}}}});
  for (const bool flatten : {true, false}) {
    const auto options = StateDictOptions().flatten(flatten);
    const StateDict kept =
        td.state_dict(StateDictOptions(options).keep_vars(true));
    EXPECT_TRUE(kept.tensor("w").is_same(td.get("w")));
    EXPECT_TRUE(kept.tensor("w").requires_grad());
    const at::Tensor& kept_v =
        flatten ? kept.tensor("n.v") : kept.nested("n").tensor("v");
    EXPECT_TRUE(kept_v.is_same(td.get({"n", "v"})));
    const StateDict detached = td.state_dict(options);
    EXPECT_FALSE(detached.tensor("w").requires_grad());
    EXPECT_FALSE(detached.tensor("w").is_same(td.get("w")));
    EXPECT_EQ(detached.tensor("w").data_ptr(), td.get("w").data_ptr());
  }
}

TEST(StateDictTest, PrefixedStateDictLoadsIntoAPrefixedTarget) {
  // The keys and metadata keep one prefix throughout, so a flat state dict
  // with a prefix reads back as a dict with one more level.
  const StateDict sd = sample().state_dict(StateDictOptions().prefix("p."));
  TensorDict target;
  target.load_state_dict(sd, /*strict=*/false);
  expect_td_equal(target.get_tensordict("p"), sample());
}

// Python:
//   td.load_state_dict(OrderedDict(a=..., **{"b.c": ..., "b.d.e": ...}))
//   -> RuntimeError: ... got state_dict extra keys {'b.d.e', 'b.c'} and
//      tensordict extra keys {'b'}
//   td.load_state_dict(same, from_flatten=True)  # loads
TEST(StateDictTest, FromFlattenReadsDottedKeysWithoutMetadata) {
  StateDict flat;  // as from a module: no metadata
  flat.insert("a", torch::full({3}, 5.0));
  flat.insert("b.c", torch::full({3, 2}, 6.0));
  flat.insert("b.d.e", torch::full({3}, 7.0));
  TensorDict target(
      {{"a", torch::zeros({3})},
       {"b", {{"c", torch::zeros({3, 2})}, {"d", {{"e", torch::zeros({3})}}}}}},
      /*batch_size=*/{3});
  EXPECT_THROWS_EXACTLY(
      target.load_state_dict(flat),
      c10::Error,
      "Cannot load state-dict because the key sets don't match: got "
      "state_dict extra keys \n{'b.c', 'b.d.e'}\n and tensordict extra "
      "keys\n{'b'}\n");
  const void* before = target.get({"b", "d", "e"}).data_ptr();
  target.load_state_dict(flat, LoadStateDictOptions().from_flatten(true));
  EXPECT_TRUE(torch::equal(target.get({"b", "d", "e"}), torch::full({3}, 7.0)));
  EXPECT_TRUE(torch::equal(target.get({"b", "c"}), torch::full({3, 2}, 6.0)));
  EXPECT_EQ(target.get({"b", "d", "e"}).data_ptr(), before);  // in place
  // assign through the options too.
  target.load_state_dict(
      flat, LoadStateDictOptions().from_flatten(true).assign(true));
  EXPECT_EQ(target.get({"b", "c"}).data_ptr(), flat.tensor("b.c").data_ptr());
}

TEST(StateDictTest, FromFlattenFalseReadsAFlatStateDictAsNested) {
  TensorDict target = sample();
  EXPECT_THROWS_WITH(
      target.load_state_dict(
          sample().state_dict(), LoadStateDictOptions().from_flatten(false)),
      c10::Error,
      "got state_dict extra keys \n{'b.c', 'b.d.e'}\n and tensordict extra "
      "keys\n{'b'}\n");
  // Not strict: the dotted keys are set as they are.
  target.load_state_dict(
      sample().state_dict(),
      LoadStateDictOptions().from_flatten(false).strict(false));
  EXPECT_TRUE(target.contains("b.c"));
}

// The expected texts are Python's (tensordict 0.15, torch's default print
// options), printed by:
//   import torch, collections
//   from tensordict import TensorDict
//   td = TensorDict({
//     "f": torch.tensor([0.5, 1.0, -2.25]),
//     "whole": torch.tensor([[1.0, 2.0], [3.0, -4.0]]),
//     "sci": torch.tensor([1e-5, 1.0, 3e8]),
//     "i32": torch.arange(3, dtype=torch.int32),
//     "i64": torch.tensor([[-10, 2], [3, 400]]),
//     "b": torch.tensor([True, False]),
//     "scalar": torch.tensor(3.5),
//     "empty": torch.zeros(0, 2),
//     "wrap": torch.arange(30, dtype=torch.float64) / 7,
//     "cube": torch.arange(8).reshape(2, 2, 2),
//     "big": torch.arange(2000.).reshape(40, 50),
//     "nan": torch.tensor([float("nan"), float("inf"), 1.0]),
//     "half": torch.tensor([1.5, 2.0], dtype=torch.float16),
//     "c": torch.tensor([1+2j, -0.5-1j]),
//     "n": {"x": torch.zeros(2)},
//   }, batch_size=[])
//   print(repr(td.state_dict(flatten=False)))
//   print("----")
//   sd = td.select("f","n").state_dict(prefix="p.")
//   print(repr(sd)); print(repr(sd._metadata))
//   print("----")
//   print(repr(torch.ones(2, requires_grad=True)))
//   print(repr(torch.ones(2, requires_grad=True) * 2))
//   print(repr(torch.zeros(2, 3, device="meta", dtype=torch.int32)))
TEST(StateDictTest, ReprReadsLikePythonsOrderedDict) {
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  TensorDict td({
      {"f", torch::tensor({0.5, 1.0, -2.25}, torch::kFloat32)},
      {"whole", torch::tensor({1.0f, 2.0f, 3.0f, -4.0f}).reshape({2, 2})},
      {"sci", torch::tensor({1e-5, 1.0, 3e8}, torch::kFloat32)},
      {"i32", torch::arange(3, torch::kInt32)},
      {"i64", torch::tensor({-10, 2, 3, 400}, torch::kLong).reshape({2, 2})},
      {"b", torch::tensor({true, false})},
      {"scalar", torch::tensor(3.5f)},
      {"empty", torch::zeros({0, 2})},
      {"wrap", torch::arange(30, f64) / 7},
      {"cube", torch::arange(8).reshape({2, 2, 2})},
      {"big", torch::arange(2000, torch::kFloat32).reshape({40, 50})},
      {"nan",
       torch::tensor(
           {std::nan(""), std::numeric_limits<double>::infinity(), 1.0},
           torch::kFloat32)},
      {"half", torch::tensor({1.5, 2.0}, torch::kHalf)},
      {"c",
       torch::complex(
           torch::tensor({1.0f, -0.5f}), torch::tensor({2.0f, -1.0f}))},
      {"n", {{"x", torch::zeros({2})}}},
  });
  EXPECT_EQ(
      td.state_dict(/*flatten=*/false).repr(),
      R"py(OrderedDict([('f', tensor([ 0.5000,  1.0000, -2.2500])), ('whole', tensor([[ 1.,  2.],
        [ 3., -4.]])), ('sci', tensor([1.0000e-05, 1.0000e+00, 3.0000e+08])), ('i32', tensor([0, 1, 2], dtype=torch.int32)), ('i64', tensor([[-10,   2],
        [  3, 400]])), ('b', tensor([ True, False])), ('scalar', tensor(3.5000)), ('empty', tensor([], size=(0, 2))), ('wrap', tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429,
        1.2857, 1.4286, 1.5714, 1.7143, 1.8571, 2.0000, 2.1429, 2.2857, 2.4286,
        2.5714, 2.7143, 2.8571, 3.0000, 3.1429, 3.2857, 3.4286, 3.5714, 3.7143,
        3.8571, 4.0000, 4.1429], dtype=torch.float64)), ('cube', tensor([[[0, 1],
         [2, 3]],

        [[4, 5],
         [6, 7]]])), ('big', tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 4.7000e+01, 4.8000e+01,
         4.9000e+01],
        [5.0000e+01, 5.1000e+01, 5.2000e+01,  ..., 9.7000e+01, 9.8000e+01,
         9.9000e+01],
        [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.4700e+02, 1.4800e+02,
         1.4900e+02],
        ...,
        [1.8500e+03, 1.8510e+03, 1.8520e+03,  ..., 1.8970e+03, 1.8980e+03,
         1.8990e+03],
        [1.9000e+03, 1.9010e+03, 1.9020e+03,  ..., 1.9470e+03, 1.9480e+03,
         1.9490e+03],
        [1.9500e+03, 1.9510e+03, 1.9520e+03,  ..., 1.9970e+03, 1.9980e+03,
         1.9990e+03]])), ('nan', tensor([nan, inf, 1.])), ('half', tensor([1.5000, 2.0000], dtype=torch.float16)), ('c', tensor([ 1.0000+2.j, -0.5000-1.j])), ('n', OrderedDict([('x', tensor([0., 0.]))]))]))py");
  const StateDict prefixed =
      td.select({"f", "n"}).state_dict(StateDictOptions().prefix("p."));
  EXPECT_EQ(
      prefixed.repr(),
      R"py(OrderedDict([('p.f', tensor([ 0.5000,  1.0000, -2.2500])), ('p.n.x', tensor([0., 0.]))]))py");
  EXPECT_EQ(
      prefixed.metadata_repr(),
      R"py(OrderedDict([('p', {'batch_size': torch.Size([]), 'device': None}), ('p.n', {'batch_size': torch.Size([]), 'device': None})]))py");
  std::ostringstream printed;
  printed << prefixed;
  EXPECT_EQ(
      printed.str(),
      prefixed.repr() + "\n_metadata=" + prefixed.metadata_repr());
}

TEST(StateDictTest, ReprPrintsAutogradAndMetaTensorsAsPythonDoes) {
  const at::Tensor leaf = torch::ones({2}, torch::requires_grad());
  StateDict sd;
  sd.insert("leaf", leaf);
  // Python's `leaf * 2` records MulBackward0, as a tensor product does here
  // (libtorch's tensor-by-scalar overload records MulBackward1).
  sd.insert("grad_fn", leaf * torch::tensor(2.0f));
  sd.insert(
      "meta",
      torch::zeros(
          {2, 3},
          torch::TensorOptions().device(torch::kMeta).dtype(torch::kInt32)));
  EXPECT_EQ(
      sd.repr(),
      "OrderedDict([('leaf', tensor([1., 1.], requires_grad=True)), "
      "('grad_fn', tensor([2., 2.], grad_fn=<MulBackward0>)), ('meta', "
      "tensor(..., device='meta', size=(2, 3), dtype=torch.int32))])");
  EXPECT_EQ(sd.metadata_repr(), "None");
  std::ostringstream printed;
  printed << sd;  // no metadata line
  EXPECT_EQ(printed.str(), sd.repr());
}

// Python: TensorDict({"s": "txt", "n": NonTensorData(3, batch_size=[2]),
// "st": NonTensorStack("a", "b")}, [2]).state_dict()._metadata, and the legacy
// sentinels as Python prints torch.Size and torch.device.
TEST(StateDictTest, MetadataReprHasPythonsNonTensorEntries) {
  TensorDict td({{"s", "txt"}}, {2});
  td.set("n", Value(NonTensorData(Json(3), {2})));
  td.set("st", Value(NonTensorStack::from_list(Json::array({"a", "b"}), 1)));
  EXPECT_EQ(
      td.state_dict().metadata_repr(),
      "OrderedDict([('', {'batch_size': torch.Size([2]), 'device': None}), "
      "('s', {'batch_size': torch.Size([2]), 'device': None, '_type': "
      "'NonTensorData', '_non_tensor': {'data': 'txt', '_metadata': None, "
      "'_is_non_tensor': True}}), ('n', {'batch_size': torch.Size([2]), "
      "'device': None, '_type': 'NonTensorData', '_non_tensor': {'data': 3, "
      "'_metadata': None, '_is_non_tensor': True}}), ('st', {'batch_size': "
      "torch.Size([2]), 'device': None})])");
  StateDict legacy;
  legacy.insert_legacy_batch_size({2});
  legacy.insert_legacy_device(c10::Device(c10::kCUDA, 1));
  EXPECT_EQ(
      legacy.repr(),
      "OrderedDict([('__batch_size', torch.Size([2])), ('__device', "
      "device(type='cuda', index=1))])");
  EXPECT_EQ(StateDict().repr(), "OrderedDict()");
}

}  // namespace state_dict_test
