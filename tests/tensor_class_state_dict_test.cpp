// tensor_class.h: state_dict and load_state_dict of instances (flat, nested,
// Python's legacy form, and their options).
#include <tensordict/tensor_class.h>

#include "support.h"
#include "tensor_class_support.h"

// Its own namespace, so that test files can share a unity batch.
namespace tensor_class_state_dict_test {

using namespace tensordict;
using namespace tensordict::indexing;
using tensor_class_testing::Cast;
using tensor_class_testing::Frozen;
using tensor_class_testing::Holder;
using tensor_class_testing::Inner;
using tensor_class_testing::make_holder;
using tensor_class_testing::make_trajectory;
using tensor_class_testing::Plain;
using tensor_class_testing::Registered;
using tensor_class_testing::Trajectory;
using namespace tensordict::testing;  // NOLINT(google-build-using-namespace)

// --- the legacy state-dict form
// -----------------------------------------------

namespace {

// Python's older tensorclass state dict: the TensorDict state dict of the
// tensor fields under "_tensordict", the non-tensor fields under
// "_non_tensordict" (see NOTE [Legacy TensorClass state dicts]).
StateDict legacy_state_dict(const StateDict& tensors, const Json& values) {
  StateDict non_tensors;
  StateDictMetadata metadata;
  metadata.non_tensor_fields = std::make_shared<const Json>(values);
  non_tensors.set_metadata("", metadata);
  StateDict out;
  out.insert("_tensordict", tensors);
  out.insert("_non_tensordict", non_tensors);
  return out;
}

Trajectory legacy_target() {
  return Trajectory(
      {{"obs", torch::full({4, 3}, -1.0)},
       {"action", torch::zeros({4}, torch::kLong)},
       {"inner", Inner({{"x", torch::full({4, 2}, 7.0)}}, {4})},
       {"task", "other"},
       {"step", 3}},
      {4});
}

}  // namespace

TEST(TensorClassTest, LoadStateDictReadsTheLegacyForm) {
  const Trajectory source = make_trajectory();
  const StateDict tensors = source.tensordict().exclude({"task"}).state_dict();
  Trajectory target = legacy_target();
  const void* obs_data = target.obs().data_ptr();
  target.load_state_dict(
      legacy_state_dict(tensors, Json{{"task", "reach"}, {"step", nullptr}}));
  EXPECT_TRUE(torch::equal(target.obs(), source.obs()));
  EXPECT_EQ(target.obs().data_ptr(), obs_data);  // written in place
  EXPECT_TRUE(torch::equal(target.action(), source.action()));
  EXPECT_TRUE(torch::equal(target.inner().x(), source.inner().x()));
  EXPECT_EQ(target.task(), "reach");
  // A None value leaves the field as it is, as Python's legacy loader does.
  EXPECT_TRUE(target.step().has_value());

  // The tensors in the oldest form (sentinels), the values one per prefix.
  StateDict inner;
  inner.insert("x", torch::full({4, 2}, 2.0));
  inner.insert_legacy_batch_size({4});
  inner.insert_legacy_device(std::nullopt);
  StateDict sentinels;
  sentinels.insert("obs", torch::full({4, 3}, 3.0));
  sentinels.insert("action", torch::ones({4}, torch::kLong));
  sentinels.insert("inner", inner);
  sentinels.insert_legacy_batch_size({4});
  sentinels.insert_legacy_device(std::nullopt);
  StateDict per_prefix;
  per_prefix.set_metadata(
      "task",
      StateDictMetadata({4}, std::nullopt, Value(NonTensorData("grasp"))));
  StateDict legacy;
  legacy.insert("_tensordict", sentinels);
  legacy.insert("_non_tensordict", per_prefix);
  target.load_state_dict(legacy);
  EXPECT_TRUE(torch::equal(target.obs(), torch::full({4, 3}, 3.0)));
  EXPECT_TRUE(torch::equal(target.inner().x(), torch::full({4, 2}, 2.0)));
  EXPECT_EQ(target.task(), "grasp");
}

TEST(TensorClassTest, LegacyStateDictsNameWhatDoesNotFit) {
  const Trajectory source = make_trajectory();
  const StateDict tensors = source.tensordict().exclude({"task"}).state_dict();
  Trajectory target = legacy_target();
  StateDict extra_top = legacy_state_dict(tensors, Json{{"task", "reach"}});
  extra_top.insert("other", torch::zeros({1}));
  EXPECT_THROWS_EXACTLY(
      target.load_state_dict(extra_top),
      KeyError,
      "Key 'other' wasn't expected in the state-dict.");
  EXPECT_THROWS_EXACTLY(
      target.load_state_dict(legacy_state_dict(tensors, Json{{"nope", 1}})),
      KeyError,
      "Key 'nope' wasn't expected in the state-dict.");
  StateDict bad_tensor = tensors;
  bad_tensor.insert("bad", torch::zeros({4}));
  EXPECT_THROWS_EXACTLY(
      target.load_state_dict(legacy_state_dict(bad_tensor, Json::object())),
      KeyError,
      "Key 'bad' wasn't expected in the state-dict.");
  StateDict missing = tensors;
  missing.erase("action");
  EXPECT_THROWS_EXACTLY(
      target.load_state_dict(legacy_state_dict(missing, Json::object())),
      c10::Error,
      "Cannot load the legacy state dict into Trajectory: its _tensordict "
      "has no entry for the fields {'action'} (pass strict=false to keep "
      "their values)");
  // Not strict: the fields it lacks keep their values.
  target.load_state_dict(
      legacy_state_dict(missing, Json::object()), /*strict=*/false);
  EXPECT_TRUE(torch::equal(target.obs(), source.obs()));
  EXPECT_TRUE(torch::equal(target.action(), torch::zeros({4}, torch::kLong)));
  // Python loads _tensordict as a TensorDict: with strict, an entry for an
  // unset field breaks its key-set match (checked before any write); not
  // strict, the entry sets the field.
  StateDict with_mask = tensors;
  with_mask.insert("mask", torch::ones({4}, torch::kBool));
  ASSERT_TRUE(target.is_none("mask"));
  EXPECT_THROWS_WITH(
      target.load_state_dict(
          legacy_state_dict(with_mask, Json{{"task", "changed"}})),
      c10::Error,
      "Cannot load the legacy state dict into Trajectory: its _tensordict has "
      "entries for the unset fields {'mask'} (pass strict=false to set them)");
  EXPECT_EQ(target.task(), "other");
  target.load_state_dict(
      legacy_state_dict(with_mask, Json::object()), /*strict=*/false);
  EXPECT_TRUE(torch::equal(*target.mask(), torch::ones({4}, torch::kBool)));
}

// --- state dict
// ---------------------------------------------------------------

namespace {

const StateDictMetadata& metadata_at(
    const StateDict& sd, const std::string& prefix) {
  const StateDictMetadata* md = sd.find_metadata(prefix);
  if (md == nullptr) {
    throw std::runtime_error("no metadata for prefix '" + prefix + "'");
  }
  return *md;
}

}  // namespace

TEST(TensorClassTest, StateDictUsesFieldNamesAndClassMetadata) {
  Trajectory t = make_trajectory();
  const StateDict sd = t.state_dict();
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"obs", "action", "inner.x"}));
  EXPECT_TRUE(torch::equal(sd.tensor("obs"), t.obs()));
  // Python records a class level after its children.
  EXPECT_EQ(metadata_keys(sd), (std::vector<std::string>{"inner", ""}));
  const StateDictMetadata& root = metadata_at(sd, "");
  EXPECT_EQ(root.type, "Trajectory");
  EXPECT_EQ(root.batch_size, std::vector<int64_t>{4});
  EXPECT_FALSE(root.device.has_value());
  // Unset fields first (None), then the non-tensor entries: Python's order.
  EXPECT_EQ(
      root.non_tensor_fields->dump(),
      R"({"extra":null,"step":null,"info":null,"mask":null,"task":"reach"})");
  const StateDictMetadata& inner = metadata_at(sd, "inner");
  EXPECT_EQ(inner.type, "Inner");
  EXPECT_EQ(*inner.non_tensor_fields, Json::object());

  const StateDict nested = t.state_dict(/*flatten=*/false);
  EXPECT_EQ(
      nested.keys(), (std::vector<std::string>{"obs", "action", "inner"}));
  EXPECT_EQ(metadata_at(nested, "").type, "Trajectory");
  EXPECT_EQ(metadata_at(nested.nested("inner"), "").type, "Inner");
  EXPECT_TRUE(torch::equal(nested.nested("inner").tensor("x"), t.inner().x()));
}

TEST(TensorClassTest, LoadStateDictRestoresEveryFieldInPlace) {
  const Trajectory source = make_trajectory();
  for (bool flatten : {true, false}) {
    SCOPED_TRACE(flatten ? "flat" : "nested");
    Trajectory target(
        {{"obs", torch::full({4, 3}, -1.0)},
         {"action", torch::zeros({4}, torch::kLong)},
         {"inner", Inner({{"x", torch::ones({4, 2})}}, {4})},
         {"task", "other"},
         {"step", 3},
         {"info", Json{{"k", 1}}}},
        {4});
    const void* obs_data = target.obs().data_ptr();
    target.load_state_dict(source.state_dict(flatten));
    EXPECT_TRUE(torch::equal(target.obs(), source.obs()));
    EXPECT_EQ(target.obs().data_ptr(), obs_data);  // written in place
    EXPECT_TRUE(torch::equal(target.action(), source.action()));
    EXPECT_TRUE(torch::equal(target.inner().x(), source.inner().x()));
    EXPECT_EQ(target.task(), "reach");
    // None in the state dict unsets the fields.
    EXPECT_FALSE(target.step().has_value());
    EXPECT_FALSE(target.info().has_value());
    EXPECT_TRUE(equal(target, source));
  }
}

TEST(TensorClassTest, LoadStateDictWithAssignTakesTheTensors) {
  const Trajectory source = make_trajectory();
  Trajectory target =
      make_trajectory().apply([](const at::Tensor& x) { return x * 0; });
  target.load_state_dict(source.state_dict(), /*strict=*/true, /*assign=*/true);
  EXPECT_EQ(target.obs().data_ptr(), source.obs().data_ptr());
  EXPECT_EQ(target.inner().x().data_ptr(), source.inner().x().data_ptr());
}

namespace {

struct MaybeInner : TensorClass<MaybeInner> {
  TENSORDICT_FIELDS(MaybeInner, a, (std::optional<Inner>, inner))
};

}  // namespace

TEST(TensorClassTest, LoadStateDictLeavesTheFieldsTheTargetLacksUnset) {
  Trajectory source = make_trajectory();
  source.set_mask(torch::ones({4}, torch::kBool)).set_step(9);
  const StateDict sd = source.state_dict();
  // Python 0.15.3, the same class and values: `target.load_state_dict(sd)`
  // raises KeyError("Key 'mask' wasn't expected in the state-dict."), mask
  // being unset in the target (after it has set step: C++ checks first).
  Trajectory target = make_trajectory();
  target.obs().zero_();
  EXPECT_THROWS_EXACTLY(
      target.load_state_dict(sd),
      KeyError,
      "Key 'mask' wasn't expected in the state-dict: the field 'mask' of "
      "Trajectory is unset (None) in the instance loaded into, and a strict "
      "load sets no field (pass strict=false to skip the entry)");
  EXPECT_TRUE(target.is_none("mask"));
  EXPECT_TRUE(target.is_none("step"));
  EXPECT_EQ(target.obs().sum().item<float>(), 0.0f);
  // With strict=False Python skips the entry: mask stays None, while step
  // (a non-tensor field of the metadata) is 9 and obs is loaded.
  EXPECT_EQ(&target.load_state_dict(sd, /*strict=*/false), &target);
  EXPECT_TRUE(target.is_none("mask"));
  EXPECT_TRUE(torch::equal(target.obs(), source.obs()));
  // An int with batch dims is non-tensor data, as in Python.
  EXPECT_EQ(source.tensordict().get_non_tensor("step"), Json(9));
  EXPECT_EQ(target.tensordict().get_non_tensor("step"), Json(9));
  // A target that holds the field takes it, strict or not.
  Trajectory holding = make_trajectory();
  holding.set_mask(torch::zeros({4}, torch::kBool));
  holding.load_state_dict(sd);
  EXPECT_TRUE(torch::equal(*holding.mask(), torch::ones({4}, torch::kBool)));
  // A nested class field the target leaves unset: Python names the field
  // ("Key 'inner' wasn't expected", the flat keys unflattened first).
  const MaybeInner full(
      {{"a", torch::ones({2})},
       {"inner", Inner({{"x", torch::ones({2})}}, {2})}},
      {2});
  MaybeInner lacking({{"a", torch::zeros({2})}}, {2});
  EXPECT_THROWS_WITH(
      lacking.load_state_dict(full.state_dict()),
      KeyError,
      "Key 'inner' wasn't expected in the state-dict: the field 'inner' of "
      "MaybeInner is unset");
  lacking.load_state_dict(full.state_dict(), /*strict=*/false);
  EXPECT_TRUE(lacking.is_none("inner"));
  EXPECT_TRUE(torch::equal(lacking.a(), torch::ones({2})));
}

TEST(TensorClassTest, StrictLoadChecksTheFields) {
  const Trajectory source = make_trajectory();
  Trajectory target = make_trajectory();  // values differ from none of source's

  StateDict extra = source.state_dict();
  extra.insert("bogus", torch::zeros({4}));
  EXPECT_THROWS_WITH(
      target.load_state_dict(extra),
      KeyError,
      "Key 'bogus' wasn't expected in the state-dict: Trajectory has no such "
      "field");
  target.load_state_dict(extra, /*strict=*/false);  // skipped

  // A set field the state dict lacks keeps its value, strict or not: Python
  // 0.15.3 loads a state dict without 'a' (or without 'inner.x') into an
  // instance holding them and returns it, 'a' unchanged.
  StateDict missing = source.state_dict();
  missing.erase("obs");
  missing.erase("inner.x");
  target.obs().fill_(5);
  target.inner().x().fill_(6);
  for (bool strict : {true, false}) {
    target.load_state_dict(missing, strict);
    EXPECT_EQ(target.obs()[0][0].item<float>(), 5.0f);  // kept
    EXPECT_EQ(target.inner().x()[0][0].item<float>(), 6.0f);
    EXPECT_TRUE(torch::equal(target.action(), source.action()));
  }

  // A non-tensor field that is not a field is refused even when not strict.
  StateDict unknown = source.state_dict();
  StateDictMetadata md = metadata_at(unknown, "");
  Json fields = *md.non_tensor_fields;
  fields["nope"] = "x";
  md.non_tensor_fields = std::make_shared<const Json>(fields);
  unknown.set_metadata("", md);
  EXPECT_THROWS_WITH(
      target.load_state_dict(unknown, /*strict=*/false),
      KeyError,
      "Key 'nope' wasn't expected in the state-dict");

  StateDict none_required = source.state_dict();
  md = metadata_at(none_required, "");
  fields = *md.non_tensor_fields;
  fields["task"] = nullptr;
  md.non_tensor_fields = std::make_shared<const Json>(fields);
  none_required.set_metadata("", md);
  EXPECT_THROWS_WITH(
      target.load_state_dict(none_required),
      c10::ValueError,
      "the state dict holds None for the field 'task' of Trajectory, which is "
      "not optional");

  StateDict wrong_kind = source.state_dict();
  wrong_kind.insert("task", torch::zeros({4}));
  EXPECT_THROWS_WITH(
      target.load_state_dict(wrong_kind),
      c10::TypeError,
      "the state dict holds a tensor for the field 'task' of Trajectory");
}

TEST(TensorClassTest, StateDictKeepsTypedNonTensorFields) {
  const Cast source({{"step", 7}, {"ratio", 0.25}, {"done", true}});
  const StateDict sd = source.state_dict();
  EXPECT_TRUE(sd.empty());
  EXPECT_EQ(
      metadata_at(sd, "").non_tensor_fields->dump(),
      R"({"label":null,"step":7,"ratio":0.25,"done":true})");
  Cast target({{"step", 1}, {"ratio", 1.5}, {"done", false}, {"label", "x"}});
  target.load_state_dict(sd);
  EXPECT_EQ(target.step(), 7);
  EXPECT_EQ(target.ratio(), 0.25);
  EXPECT_TRUE(target.done());
  EXPECT_FALSE(target.label().has_value());

  // Without batch dims, default-cast numbers are 0-dim tensors: entries.
  const Plain plain({{"step", 3}, {"ratio", 0.5}});
  const StateDict plain_sd = plain.state_dict();
  EXPECT_EQ(plain_sd.keys(), (std::vector<std::string>{"step", "ratio"}));
  Plain loaded({{"step", 0}, {"ratio", 0.0}});
  loaded.load_state_dict(plain_sd);
  EXPECT_EQ(loaded.step().item<int64_t>(), 3);
  EXPECT_EQ(loaded.ratio().item<double>(), 0.5);
}

TEST(TensorClassTest, StateDictOfStackedStructsRaisesForDifferingValues) {
  auto make = [](const char* label, float value) {
    return Registered(
        {{"pos", torch::full({2}, value)},
         {"inner", Inner({{"x", torch::full({2}, value)}}, {2})},
         {"label", label}},
        {2});
  };
  // Equal values are one value, as in Python.
  const Registered same =
      stack(std::vector<Registered>{make("a", 1), make("a", 2)});
  EXPECT_EQ(
      metadata_at(same.state_dict(), "").non_tensor_fields->at("label"),
      Json("a"));
  // Python 0.15.3: `torch.stack([C(s="a"), C(s="b")]).state_dict()` raises
  // AttributeError('Cannot get the non-unique data of a NonTensorStack. Use
  // .tolist() instead.').
  const Registered mixed =
      stack(std::vector<Registered>{make("a", 1), make("b", 2)});
  for (bool flatten : {true, false}) {
    EXPECT_THROWS_WITH(
        (void)mixed.state_dict(flatten),
        c10::Error,
        "Cannot get the non-unique data of a NonTensorStack. Use .tolist() "
        "instead. (the field 'label' of Registered holds a stack of differing "
        "values");
  }
  StateDict into;
  EXPECT_THROW(mixed.state_dict(into), c10::Error);
  EXPECT_TRUE(into.empty());
}

TEST(TensorClassTest, FrozenInstancesLoadStateDictsInPlace) {
  const Frozen source({{"x", torch::arange(3, torch::kFloat)}}, {3});
  Frozen target({{"x", torch::zeros({3})}}, {3});
  target.load_state_dict(source.state_dict());
  EXPECT_TRUE(torch::equal(target.x(), source.x()));
  EXPECT_THROWS_WITH(
      target.load_state_dict(source.state_dict(), true, /*assign=*/true),
      c10::Error,
      "locked");
}

TEST(TensorClassTest, TensorDictLoadsAStructsStateDict) {
  // The non-tensor fields of a class level become NonTensorData entries.
  const Trajectory source = make_trajectory();
  TensorDict td = make_trajectory().to_tensordict();
  td.set_non_tensor("task", "other");
  td.load_state_dict(source.state_dict());
  EXPECT_EQ(td.get_non_tensor("task"), Json("reach"));
  expect_td_equal(td, source.tensordict());
}

TEST(TensorClassTest, StateDictOptionsKeepTheClassMetadataUnderThePrefix) {
  const Holder h = make_holder();
  h.a().requires_grad_(true);
  // Python 0.15: keys ['p.a', 'p.inner.x']; metadata 'p.inner' (Inner,
  // no non-tensor fields), then 'p' (the class, {'s': 'hi'}).
  const StateDict sd =
      h.state_dict(StateDictOptions().prefix("p.").keep_vars(true));
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"p.a", "p.inner.x"}));
  EXPECT_TRUE(sd.tensor("p.a").requires_grad());
  EXPECT_FALSE(h.state_dict(StateDictOptions().prefix("p."))
                   .tensor("p.a")
                   .requires_grad());
  ASSERT_EQ(sd.metadata().size(), 2u);
  EXPECT_EQ(sd.metadata()[0].first, "p.inner");
  EXPECT_EQ(sd.metadata()[0].second.type, "Inner");
  EXPECT_EQ(sd.metadata()[1].first, "p");
  EXPECT_EQ(sd.metadata()[1].second.type, "Holder");
  ASSERT_NE(sd.metadata()[1].second.non_tensor_fields, nullptr);
  EXPECT_EQ(
      (*sd.metadata()[1].second.non_tensor_fields)["s"].get<std::string>(),
      "hi");
  // Through `.tensordict()` the class metadata is gone.
  const StateDict plain =
      h.tensordict().state_dict(StateDictOptions().prefix("p."));
  EXPECT_EQ(plain.find_metadata("p")->type, "");
}

TEST(TensorClassTest, LoadStateDictOptionsReadTheFormAsAsked) {
  const Holder h = make_holder();
  const StateDict flat = h.state_dict();
  Holder dest(
      {{"a", torch::zeros({2})},
       {"inner", Inner({{"x", torch::zeros({2})}}, {2})}},
      {2});
  EXPECT_EQ(
      &dest.load_state_dict(flat, LoadStateDictOptions().from_flatten(true)),
      &dest);
  EXPECT_TRUE(torch::equal(dest.inner().x(), h.inner().x()));
  EXPECT_EQ(dest.s(), std::optional<std::string>("hi"));
  Holder other(
      {{"a", torch::zeros({2})},
       {"inner", Inner({{"x", torch::zeros({2})}}, {2})}},
      {2});
  const at::Tensor kept = other.a();
  other.load_state_dict(flat, LoadStateDictOptions().assign(true));
  EXPECT_FALSE(other.a().is_same(kept));
  EXPECT_TRUE(other.a().is_same(flat.tensor("a")));
  StateDict extra = flat;
  extra.insert("nope", torch::zeros({2}));
  EXPECT_THROW(other.load_state_dict(extra), KeyError);
  EXPECT_NO_THROW(
      other.load_state_dict(extra, LoadStateDictOptions().strict(false)));

  // from_flatten(false) reads the flat keys as they are. Python 0.15.3:
  // `load_state_dict(flat_sd, from_flatten=False)` raises KeyError("Key
  // 'inner.x' wasn't expected in the state-dict."); with strict=False it
  // skips 'inner.x' and loads the rest.
  auto fresh = [] {
    return Holder(
        {{"a", torch::zeros({2})},
         {"inner", Inner({{"x", torch::zeros({2})}}, {2})}},
        {2});
  };
  Holder as_nested = fresh();
  EXPECT_THROWS_WITH(
      as_nested.load_state_dict(
          flat, LoadStateDictOptions().from_flatten(false)),
      KeyError,
      "Key 'inner.x' wasn't expected in the state-dict");
  as_nested.load_state_dict(
      flat, LoadStateDictOptions().from_flatten(false).strict(false));
  EXPECT_TRUE(torch::equal(as_nested.a(), h.a()));
  EXPECT_TRUE(torch::equal(as_nested.inner().x(), torch::zeros({2})));
  // Without metadata Python reads a state dict as nested unless told:
  // KeyError for 'inner.x' by default, loaded with from_flatten=True (and
  // `s`, which only the metadata holds, left as it is).
  StateDict bare;
  for (const auto& [key, entry] : flat.items()) {
    bare.insert(key, entry.tensor());
  }
  ASSERT_FALSE(bare.has_metadata());
  Holder from_bare = fresh();
  EXPECT_THROWS_WITH(
      from_bare.load_state_dict(bare),
      KeyError,
      "Key 'inner.x' wasn't expected in the state-dict");
  from_bare.load_state_dict(bare, LoadStateDictOptions().from_flatten(true));
  EXPECT_TRUE(torch::equal(from_bare.a(), h.a()));
  EXPECT_TRUE(torch::equal(from_bare.inner().x(), h.inner().x()));
  EXPECT_TRUE(from_bare.is_none("s"));
  // A nested state dict read as flat is the same state dict (no key holds
  // a "."), as in Python.
  Holder from_nested = fresh();
  from_nested.load_state_dict(
      h.state_dict(/*flatten=*/false),
      LoadStateDictOptions().from_flatten(true));
  EXPECT_TRUE(equal(from_nested, h));
}

}  // namespace tensor_class_state_dict_test
