// tensor_class.h: construction, fields and their kinds, the class flags, field
// defaults, get and set by name and nested key, the conversions to and from a
// TensorDict, and repr.
#include <tensordict/tensor_class.h>

#include <sstream>

#include "support.h"
#include "tensor_class_support.h"

// Its own namespace, so that test files can share a unity batch.
namespace tensor_class_test {

using namespace tensordict;
using namespace tensordict::indexing;
using tensor_class_testing::Base;
using tensor_class_testing::Cast;
using tensor_class_testing::Derived;
using tensor_class_testing::Fast;
using tensor_class_testing::Frozen;
using tensor_class_testing::FrozenCast;
using tensor_class_testing::FrozenChild;
using tensor_class_testing::FrozenFast;
using tensor_class_testing::Holder;
using tensor_class_testing::Inner;
using tensor_class_testing::make_holder;
using tensor_class_testing::make_trajectory;
using tensor_class_testing::NoCast;
using tensor_class_testing::Plain;
using tensor_class_testing::Registered;
using tensor_class_testing::Shadowing;
using tensor_class_testing::ShadowNocast;
using tensor_class_testing::Trajectory;
using namespace tensordict::testing;  // NOLINT(google-build-using-namespace)

// --- construction and fields ------------------------------------------------

TEST(TensorClassTest, ConstructionStoresEveryKindOfField) {
  Trajectory t = make_trajectory();
  EXPECT_EQ(t.batch_size(), c10::IntArrayRef({4}));
  EXPECT_EQ(t.obs().sizes(), c10::IntArrayRef({4, 3}));
  EXPECT_EQ(t.action().scalar_type(), torch::kLong);
  EXPECT_EQ(t.inner().x().sizes(), c10::IntArrayRef({4, 2}));
  EXPECT_EQ(t.task(), "reach");
  EXPECT_FALSE(t.extra().has_value());
  EXPECT_FALSE(t.step().has_value());
  EXPECT_FALSE(t.mask().has_value());
  EXPECT_TRUE(t.is_none("mask"));
  EXPECT_FALSE(t.is_none("obs"));
  // Fields live in the dict in declaration order; unset fields are absent.
  const auto keys = t.tensordict().keys();
  ASSERT_EQ(keys.size(), 4u);
  EXPECT_EQ(keys[0], NestedKey("obs"));
  EXPECT_EQ(keys[3], NestedKey("task"));
  EXPECT_TRUE(t.tensordict().is_non_tensor("task"));
}

TEST(TensorClassTest, ConstructionTakesDeviceAndNames) {
  Trajectory t(
      {{"obs", torch::zeros({2, 3})},
       {"action", torch::zeros({2, 3})},
       {"inner", Inner({{"x", torch::zeros({2, 3})}}, {2, 3})},
       {"task", "t"}},
      {2, 3},
      c10::Device(c10::kCPU),
      {"env", "time"});
  EXPECT_EQ(t.device(), c10::Device(c10::kCPU));
  ASSERT_EQ(t.names().size(), 2u);
  EXPECT_EQ(t.names()[1], "time");
}

TEST(TensorClassTest, SettersReplaceFieldsAndNoneUnsets) {
  Trajectory t = make_trajectory();
  t.set_obs(torch::ones({4, 7}));
  EXPECT_EQ(t.obs().size(1), 7);
  t.set_step(3);
  ASSERT_TRUE(t.step().has_value());
  // Default flags: a number is a 0-dim tensor... unless the batch has dims,
  // where Python keeps the value (NonTensorData).
  EXPECT_TRUE(t.tensordict().is_non_tensor("step"));
  t.set_info(Json{{"a", 1}});
  EXPECT_EQ((*t.info())["a"], 1);
  t.set_mask(torch::ones({4}, torch::kBool));
  EXPECT_TRUE(t.mask().has_value());
  t.set_mask(std::nullopt);
  EXPECT_FALSE(t.mask().has_value());
  EXPECT_FALSE(t.tensordict().contains("mask"));
  t.set("task", "grasp");
  EXPECT_EQ(t.task(), "grasp");
}

TEST(TensorClassTest, WrongBatchDimsNameTheField) {
  Trajectory t = make_trajectory();
  EXPECT_THROWS_WITH(
      t.set_obs(torch::zeros({3, 3})),
      c10::Error,
      "batch dimension mismatch, got self.batch_size=torch.Size([4]) and "
      "value.shape=torch.Size([3, 3]) for key 'obs'");
  EXPECT_THROWS_WITH(
      Trajectory(
          {{"obs", torch::zeros({2})},
           {"action", torch::zeros({4})},
           {"inner", Inner({{"x", torch::zeros({4})}}, {4})},
           {"task", "t"}},
          {4}),
      c10::Error,
      "for key 'obs'");
}

TEST(TensorClassTest, ConstructionRejectsUnknownMissingAndRepeatedFields) {
  EXPECT_THROWS_EXACTLY(
      Inner({{"x", torch::zeros({2})}, {"y", torch::zeros({2})}}),
      KeyError,
      "Cannot set the attribute 'y': Inner has no such field. Its fields are "
      "['x'].");
  EXPECT_THROWS_EXACTLY(
      Trajectory({{"obs", torch::zeros({2})}}, {2}),
      c10::TypeError,
      "Trajectory.__init__() missing 3 required positional arguments: "
      "'action', 'inner', and 'task'");
  EXPECT_THROWS_EXACTLY(
      Inner({}),
      c10::TypeError,
      "Inner.__init__() missing 1 required positional argument: 'x'");
  EXPECT_THROWS_EXACTLY(
      Inner({{"x", torch::zeros({2})}, {"x", torch::zeros({2})}}),
      c10::TypeError,
      "Inner.__init__() got multiple values for argument 'x'");
}

TEST(TensorClassTest, ValuesOfTheWrongKindNameTheField) {
  Trajectory t = make_trajectory();
  EXPECT_THROWS_EXACTLY(
      t.set("obs", "text"),
      c10::TypeError,
      "field 'obs' of Trajectory expects a tensor, got a string");
  EXPECT_THROWS_EXACTLY(
      t.set("task", torch::zeros({4})),
      c10::TypeError,
      "field 'task' of Trajectory expects a string, got a tensor");
  EXPECT_THROWS_EXACTLY(
      t.set("inner", Trajectory(t)),
      c10::TypeError,
      "field 'inner' of Trajectory expects a Inner, got a Trajectory");
  EXPECT_THROWS_EXACTLY(
      t.set("nope", 1),
      KeyError,
      "Cannot set the attribute 'nope': Trajectory has no such field. Its "
      "fields are ['action', 'extra', 'info', 'inner', 'mask', 'obs', "
      "'step', 'task'].");
}

TEST(TensorClassTest, GetByNameReturnsTheEntry) {
  Trajectory t = make_trajectory();
  EXPECT_TRUE(torch::equal(t.get("obs").tensor(), t.obs()));
  EXPECT_EQ(t.get("task").non_tensor(), "reach");
  EXPECT_TRUE(t.get("inner").is_tensordict());
  EXPECT_THROWS_EXACTLY(
      t.get("foo"),
      KeyError,
      "Trajectory has no field 'foo'. Its fields are ['action', 'extra', "
      "'info', 'inner', 'mask', 'obs', 'step', 'task'].");
  EXPECT_THROWS_EXACTLY(
      t.get("mask"),
      c10::ValueError,
      "Trajectory.mask is None (the field is unset)");
}

TEST(TensorClassTest, GetWithADefaultFollowsPython) {
  Trajectory t = make_trajectory();
  // A field that is set: its entry.
  auto obs = t.get("obs", std::nullopt);
  ASSERT_TRUE(obs.has_value());
  EXPECT_TRUE(torch::equal(obs->tensor(), t.obs()));
  // An unset field is None whatever the default, as Python's getattr.
  EXPECT_FALSE(t.get("mask", torch::ones({4})).has_value());
  // A name that is not a field gives the default.
  auto missing = t.get("foo", torch::ones({2}));
  ASSERT_TRUE(missing.has_value());
  EXPECT_TRUE(torch::equal(missing->tensor(), torch::ones({2})));
  EXPECT_FALSE(t.get("foo", std::nullopt).has_value());
}

TEST(TensorClassTest, SetInPlaceWritesIntoTheFieldsTensor) {
  Trajectory t = make_trajectory();
  const at::Tensor before = t.obs();
  t.set("obs", torch::full({4, 3}, 2.0f), /*inplace=*/true);
  EXPECT_TRUE(t.obs().is_same(before));
  EXPECT_TRUE(torch::equal(before, torch::full({4, 3}, 2.0f)));
  // Without inplace the tensor is replaced.
  t.set("obs", torch::zeros({4, 3}));
  EXPECT_FALSE(t.obs().is_same(before));
  // The shape must fit the field's tensor.
  EXPECT_THROWS_WITH(
      t.set("obs", torch::ones({4, 2}), /*inplace=*/true), c10::Error, "obs");
  EXPECT_THROWS_WITH(
      t.set("obs", torch::ones({3, 3}), /*inplace=*/true),
      c10::Error,
      "the value of shape torch.Size([3, 3]) does not fit the entry of shape "
      "torch.Size([4, 3])");
  // A number is written into the tensor (broadcast), as in Python.
  Plain p({{"step", 3}, {"ratio", 0.5}});
  const at::Tensor step = p.step();
  p.set("step", 7, /*inplace=*/true);
  EXPECT_TRUE(p.step().is_same(step));
  EXPECT_EQ(step.item<int64_t>(), 7);
  // A nested dict is written leaf by leaf.
  const at::Tensor x = t.inner().x();
  t.set("inner", Inner({{"x", torch::ones({4, 2})}}, {4}), /*inplace=*/true);
  EXPECT_TRUE(t.inner().x().is_same(x));
  EXPECT_TRUE(torch::equal(x, torch::ones({4, 2})));
  // An unset field is simply set.
  t.set("mask", torch::ones({4}, torch::kBool), /*inplace=*/true);
  EXPECT_TRUE(t.mask().has_value());
}

TEST(TensorClassTest, SetInPlaceRefusesNonTensorFieldsAndLockedInstances) {
  Trajectory t = make_trajectory();
  EXPECT_THROWS_EXACTLY(
      t.set("task", "grasp", /*inplace=*/true),
      c10::Error,
      "Cannot update the existing NonTensorData of field 'task' of "
      "Trajectory in place with a string");
  EXPECT_THROWS_EXACTLY(
      t.set("obs", nullptr, /*inplace=*/true),
      c10::Error,
      "Cannot update the existing Tensor of field 'obs' of Trajectory in "
      "place with None");
  EXPECT_EQ(t.task(), "reach");
  t.lock_();
  EXPECT_THROWS_EXACTLY(
      t.set("obs", torch::zeros({4, 3}), /*inplace=*/true),
      c10::Error,
      "Cannot modify locked TensorDict. For in-place modification, consider "
      "using the `set_()` method and make sure the key is present.");
}

TEST(TensorClassTest, UnsetRequiredFieldThrowsWhenRead) {
  Trajectory t;
  EXPECT_THROWS_EXACTLY(
      t.obs(), c10::ValueError, "Trajectory.obs is None (the field is unset)");
  EXPECT_THROWS_EXACTLY(
      t.task(),
      c10::ValueError,
      "Trajectory.task is None (the field is unset)");
}

// --- flags ------------------------------------------------------------------

TEST(TensorClassTest, DefaultFlagsStoreNumbersAsTensors) {
  Plain p({{"step", 3}, {"ratio", 0.5}});
  at::Tensor step = p.step();
  EXPECT_EQ(step.scalar_type(), torch::kLong);
  EXPECT_EQ(step.item<int64_t>(), 3);
  EXPECT_EQ(p.ratio().scalar_type(), torch::kFloat);
  EXPECT_TRUE(p.tensordict().get("ratio").defined());
  // With batch dims, Python keeps the number; it still reads as a tensor.
  Plain q({{"step", 3}, {"ratio", 0.5}}, {2});
  EXPECT_TRUE(q.tensordict().is_non_tensor("step"));
  EXPECT_EQ(q.step().item<int64_t>(), 3);
}

TEST(TensorClassTest, AutocastReadsTheDeclaredType) {
  Cast c({{"step", 2.7}, {"ratio", 1}, {"done", 1}, {"label", 5}}, {3});
  int64_t step = c.step();
  double ratio = c.ratio();
  bool done = c.done();
  EXPECT_EQ(step, 2);
  EXPECT_EQ(ratio, 1.0);
  EXPECT_TRUE(done);
  EXPECT_EQ(c.label(), std::optional<std::string>("5"));
  EXPECT_EQ(c.tensordict().get_non_tensor("step"), Json(2));
  EXPECT_EQ(c.tensordict().get_non_tensor("ratio"), Json(1.0));
  // A tensor is cast to the field's type too.
  c.set_step(7);
  c.set("step", torch::tensor(9));
  EXPECT_EQ(c.step(), 9);
}

TEST(TensorClassTest, NocastStoresNumbersAsGiven) {
  NoCast n({{"step", 2.5}, {"ratio", 1}});
  EXPECT_EQ(n.tensordict().get_non_tensor("step"), Json(2.5));
  EXPECT_EQ(n.tensordict().get_non_tensor("ratio"), Json(1));
  EXPECT_EQ(n.step(), 2);
  EXPECT_EQ(n.ratio(), 1.0);
}

TEST(TensorClassTest, FrozenInstancesAreLocked) {
  Frozen f({{"x", torch::zeros({2})}}, {2});
  EXPECT_TRUE(f.is_locked());
  f.zero_();
  EXPECT_TRUE(f.index({0}).is_locked());
  EXPECT_TRUE(f.clone().is_locked());
  EXPECT_THROWS_WITH(
      TensorDict(f.tensordict()).set("x", torch::ones({2})),
      c10::Error,
      "locked");
  FrozenChild child({{"a", torch::zeros({2})}, {"b", torch::ones({2})}}, {2});
  EXPECT_TRUE(child.is_locked());
  static_assert(has_flag(FrozenChild::kFlags, ClassFlags::kFrozen));
}

TEST(TensorClassTest, TensorOnlyReadsTensors) {
  Fast f({{"a", torch::zeros({2})}, {"b", torch::ones({2})}}, {2});
  EXPECT_TRUE(torch::equal(f.b(), torch::ones({2})));
  EXPECT_FALSE(f.c().has_value());
  // Out of declaration order (from_tensordict), the lookup falls back to
  // the hash table.
  TensorDict td({{"b", torch::ones({2})}, {"a", torch::zeros({2})}}, {2});
  Fast g = Fast::from_tensordict(td);
  EXPECT_TRUE(torch::equal(g.a(), torch::zeros({2})));
  EXPECT_TRUE(torch::equal(g.b(), torch::ones({2})));
}

TEST(TensorClassTest, ShadowAllowsReservedNames) {
  Shadowing s(
      {{"batch_size", torch::full({3}, 7.0)}, {"x", torch::zeros({3})}}, {3});
  at::Tensor field = s.batch_size();
  EXPECT_EQ(field[0].item<float>(), 7.0f);
  EXPECT_EQ(s.shape(), c10::IntArrayRef({3}));
  // A field named batch_size replaces the header item, as in Python.
  EXPECT_EQ(s.repr(), "Shadowing(fields={batch_size: f32[], x: f32[]})");
  EXPECT_EQ(
      s.repr_detailed(),
      "Shadowing(\n"
      "    batch_size=Tensor(shape=torch.Size([3]), device=cpu, "
      "dtype=torch.float32, is_shared=False),\n"
      "    x=Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.float32, "
      "is_shared=False),\n"
      "    shape=torch.Size([3]),\n"
      "    device=None,\n"
      "    is_shared=False)");
}

TEST(TensorClassTest, FlagCombinationsKeepEachFlagsBehaviour) {
  static_assert(has_flag(FrozenCast::kFlags, ClassFlags::kFrozen));
  static_assert(has_flag(FrozenCast::kFlags, ClassFlags::kAutocast));
  FrozenCast fc({{"x", torch::zeros({2})}, {"step", 2.7}}, {2});
  EXPECT_TRUE(fc.is_locked());
  EXPECT_EQ(fc.step(), 2);  // autocast to the declared int64_t
  EXPECT_EQ(fc.tensordict().get_non_tensor("step"), Json(2));

  static_assert(has_flag(FrozenFast::kFlags, ClassFlags::kTensorOnly));
  FrozenFast ff({{"a", torch::zeros({2})}, {"b", torch::ones({2})}}, {2});
  EXPECT_TRUE(ff.is_locked());
  EXPECT_TRUE(torch::equal(ff.b(), torch::ones({2})));
  EXPECT_TRUE(ff.clone().is_locked());

  static_assert(has_flag(ShadowNocast::kFlags, ClassFlags::kShadow));
  ShadowNocast sn({{"batch_size", torch::full({3}, 7.0)}, {"ratio", 1}}, {3});
  EXPECT_EQ(sn.batch_size()[0].item<float>(), 7.0F);  // the field
  EXPECT_EQ(sn.shape(), c10::IntArrayRef({3}));
  EXPECT_EQ(sn.tensordict().get_non_tensor("ratio"), Json(1));  // as given
  EXPECT_EQ(sn.ratio(), 1.0);
}

TEST(TensorClassTest, DerivedClassesInheritFieldsAndFlags) {
  static_assert(has_flag(Derived::kFlags, ClassFlags::kAutocast));
  static_assert(Derived::kFieldCount == 3);
  Derived d(
      {{"obs", torch::zeros({2})}, {"step", 4}, {"reward", torch::ones({2})}},
      {2});
  int64_t step = d.step();
  EXPECT_EQ(step, 4);
  EXPECT_TRUE(torch::equal(d.reward(), torch::ones({2})));
  Derived first = d.index({0});
  EXPECT_EQ(first.reward().dim(), 0);
  const Base& as_base = d;
  EXPECT_EQ(as_base.obs().size(0), 2);
  EXPECT_EQ(Derived::tensor_class_info().fields.size(), 3u);
  EXPECT_THROWS_EXACTLY(
      Derived({{"obs", torch::zeros({2})}, {"step", 1}}, {2}),
      c10::TypeError,
      "Derived.__init__() missing 1 required positional argument: 'reward'");
}

// --- conversions ------------------------------------------------------------

TEST(TensorClassTest, FromTensordictChecksTheFields) {
  TensorDict td({{"x", torch::zeros({2})}}, {2});
  Inner inner = Inner::from_tensordict(td);
  EXPECT_TRUE(inner.tensordict().is_same(td));
  TensorDict extra(
      {{"x", torch::zeros({2})}, {"extra", torch::ones({2})}}, {2});
  EXPECT_THROWS_EXACTLY(
      Inner::from_tensordict(extra),
      c10::ValueError,
      "Keys from the tensordict ({'extra', 'x'}) must correspond to the class "
      "attributes ({'x'}). Got the set of keys {{'extra'}} which do not "
      "belong to the class.");
  TensorDict wrong({{"x", "text"}}, {2});
  EXPECT_THROWS_EXACTLY(
      Inner::from_tensordict(wrong),
      c10::TypeError,
      "field 'x' of Inner holds NonTensorData, not a tensor");
  TensorDict nested_wrong(
      {{"obs", torch::zeros({2})},
       {"action", torch::zeros({2})},
       {"inner", {{"y", torch::zeros({2})}}},
       {"task", "t"}},
      {2});
  EXPECT_THROWS_WITH(
      Trajectory::from_tensordict(nested_wrong),
      c10::ValueError,
      "must correspond to the class attributes ({'x'}). Got the set of keys "
      "{{'y'}}");
}

TEST(TensorClassTest, ToTensordictIsADeepCopy) {
  Trajectory t = make_trajectory();
  TensorDict td = t.to_tensordict();
  EXPECT_FALSE(td.is_same(t.tensordict()));
  expect_td_equal(td, t.tensordict());
  EXPECT_NE(td.get("obs").data_ptr(), t.obs().data_ptr());
  td.set("obs", torch::zeros({4, 1}));
  EXPECT_EQ(t.obs().size(1), 3);
}

namespace {

struct Opt : TensorClass<Opt> {
  TENSORDICT_FIELDS(Opt, a, (std::optional<at::Tensor>, b))
};

struct Outer : TensorClass<Outer> {
  TENSORDICT_FIELDS(Outer, x, (std::optional<Opt>, inner))
};

}  // namespace

TEST(TensorClassTest, ToTensordictRetainNoneWritesUnsetFieldsAsNone) {
  Trajectory t = make_trajectory();
  EXPECT_FALSE(t.to_tensordict().contains("mask"));
  EXPECT_FALSE(t.to_tensordict(/*retain_none=*/false).contains("mask"));
  TensorDict td = t.to_tensordict(/*retain_none=*/true);
  // Python: TensorDict(..., fields={..., extra: NoneType, info: NoneType,
  // mask: NoneType, step: NoneType, ...}).
  for (const char* key : {"extra", "step", "info", "mask"}) {
    ASSERT_TRUE(td.contains(key)) << key;
    EXPECT_TRUE(td.get_non_tensor(key).is_null()) << key;
  }
  EXPECT_EQ(td.keys().size(), 8u);
  EXPECT_FALSE(td.is_locked());

  // Nested class levels too, as Python's `inner: {a: f32[], b: NoneType}`.
  Outer o(
      {{"x", torch::zeros({3})},
       {"inner", Opt({{"a", torch::ones({3})}}, {3})}},
      {3});
  TensorDict nested = o.to_tensordict(/*retain_none=*/true);
  EXPECT_TRUE(nested.get_non_tensor({"inner", "b"}).is_null());
  EXPECT_FALSE(o.inner()->tensordict().contains("b"));
}

TEST(TensorClassTest, FromTensordictTakesTheNonTensorFields) {
  TensorDict td(
      {{"obs", torch::zeros({4, 3})},
       {"action", torch::ones({4})},
       {"inner", {{"x", torch::zeros({4, 2})}}}},
      {4});
  Trajectory t = Trajectory::from_tensordict(
      td, {{"task", "reach"}, {"step", nullptr}, {"info", Json{{"k", 1}}}});
  EXPECT_EQ(t.task(), "reach");
  EXPECT_FALSE(t.step().has_value());
  EXPECT_EQ((*t.info())["k"], 1);
  // The entries alias td's; td itself gets no new keys.
  EXPECT_TRUE(t.obs().is_same(td.get("obs")));
  EXPECT_FALSE(td.contains("task"));
  EXPECT_THROWS_EXACTLY(
      Trajectory::from_tensordict(td, {{"obs", "text"}}),
      KeyError,
      "obs is present in both tensor and non-tensor dicts.");
  EXPECT_THROWS_EXACTLY(
      Trajectory::from_tensordict(td, {{"q", "hello"}}),
      c10::ValueError,
      "Keys from the tensordict ({'action', 'inner', 'obs'}) must correspond "
      "to the class attributes ({'action', 'extra', 'info', 'inner', 'mask', "
      "'obs', 'step', 'task'}). Got the set of keys {{'q'}} which do not "
      "belong to the class.");
  EXPECT_THROWS_EXACTLY(
      Trajectory::from_tensordict(td, {{"task", torch::zeros({4})}}),
      c10::TypeError,
      "field 'task' of Trajectory expects a string, got a tensor");
  // A None for a key td holds is dropped, as in Python.
  Trajectory same = Trajectory::from_tensordict(
      td.copy().set_non_tensor("task", "t"), {{"obs", nullptr}});
  EXPECT_EQ(same.task(), "t");
}

TEST(TensorClassTest, PositionalConstructionTakesFieldsInDeclarationOrder) {
  const at::Tensor obs = torch::zeros({4, 3});
  Trajectory t(
      obs,
      torch::ones({4}),
      Inner(torch::zeros({4, 2}), {4}),
      std::nullopt,
      "reach",
      std::nullopt,
      Json{{"k", 1}},
      std::nullopt,
      {4});
  EXPECT_EQ(t.batch_size(), c10::IntArrayRef({4}));
  EXPECT_TRUE(t.obs().is_same(obs));
  EXPECT_EQ(t.task(), "reach");
  EXPECT_FALSE(t.step().has_value());
  EXPECT_EQ((*t.info())["k"], 1);
  expect_td_equal(
      t.tensordict(),
      Trajectory(
          {{"obs", obs},
           {"action", torch::ones({4})},
           {"inner", Inner({{"x", torch::zeros({4, 2})}}, {4})},
           {"task", "reach"},
           {"info", Json{{"k", 1}}}},
          {4})
          .tensordict());
  // Numbers keep the class's rules; device and names follow the batch size.
  Cast c(3, 0.5, true, std::string("label"));
  EXPECT_EQ(c.step(), 3);
  EXPECT_EQ(c.label(), "label");
  Inner named(torch::zeros({2, 3}), {2}, torch::kCPU, {"time"});
  EXPECT_EQ(named.names(), DimNames({"time"}));
  EXPECT_EQ(named.device(), c10::Device(torch::kCPU));
  // A value that does not fit the batch names the field.
  EXPECT_THROWS_WITH(Inner(torch::zeros({3}), {2}), c10::Error, "for key 'x'");
  // Frozen classes are locked; a wrong count or type of fields does not
  // compile.
  EXPECT_TRUE(Frozen(torch::zeros({2}), {2}).is_locked());
  static_assert(!std::is_constructible_v<Inner, at::Tensor, at::Tensor>);
  static_assert(!std::is_constructible_v<Inner, std::string, c10::IntArrayRef>);
  static_assert(!std::is_constructible_v<Plain, at::Tensor, double>);
  static_assert(!std::is_constructible_v<Plain, int64_t>);
  static_assert(std::is_constructible_v<Plain, int64_t, double>);
  // A derived class takes its fields by name only.
  static_assert(
      !std::is_constructible_v<Derived, at::Tensor, int64_t, at::Tensor>);
}

TEST(TensorClassTest, NestedPlainDictIsCheckedAgainstTheClass) {
  Trajectory t = make_trajectory();
  t.set("inner", TensorDict({{"x", torch::ones({4})}}, {4}));
  EXPECT_TRUE(torch::equal(t.inner().x(), torch::ones({4})));
  EXPECT_THROWS_WITH(
      t.set("inner", TensorDict({{"z", torch::ones({4})}}, {4})),
      c10::ValueError,
      "Got the set of keys {{'z'}}");
}

// --- repr
// ---------------------------------------------------------------------

TEST(TensorClassTest, ReprMatchesPython) {
  // Printed by Python tensordict 0.15.3 (set_printoptions(compact=False)) for
  // the same classes.
  Registered p(
      {{"pos", torch::zeros({2, 3})},
       {"inner", Inner({{"x", torch::ones({2}, torch::kLong)}}, {2})},
       {"label", "hi"}},
      {2});
  // Compact by default, as Python 0.15; 84 columns, so it wraps.
  EXPECT_EQ(
      p.repr(),
      "Registered(batch_size=[2], fields={\n"
      "    inner: Inner{x: i64[]},\n"
      "    label: str,\n"
      "    pos: f32[3]})");
  EXPECT_EQ(
      p.repr_detailed(),
      "Registered(\n"
      "    inner=Inner(\n"
      "        x=Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.int64, "
      "is_shared=False),\n"
      "        batch_size=torch.Size([2]),\n"
      "        device=None,\n"
      "        is_shared=False),\n"
      "    label=NonTensorData(data=hi, batch_size=torch.Size([2]), "
      "device=None),\n"
      "    pos=Tensor(shape=torch.Size([2, 3]), device=cpu, "
      "dtype=torch.float32, is_shared=False),\n"
      "    batch_size=torch.Size([2]),\n"
      "    device=None,\n"
      "    is_shared=False)");
  Fast empty;
  EXPECT_EQ(
      empty.repr(), "Fast(batch_size=[], fields={a: None, b: None, c: None})");
  {
    PrintOptionsGuard detailed(get_printoptions().compact(false));
    EXPECT_EQ(empty.repr(), empty.repr_detailed());
  }
  EXPECT_EQ(
      empty.repr_detailed(),
      "Fast(\n,\n    a=None,\n    b=None,\n    c=None,\n"
      "    batch_size=torch.Size([]),\n    device=None,\n    is_shared=False)");
  std::ostringstream out;
  out << empty;
  EXPECT_EQ(out.str(), empty.repr());
}

TEST(TensorClassTest, AutocastReadsNumbersThatPythonStoredAsTensors) {
  // Python's default flags store a number as a 0-dim tensor (batch size []);
  // an autocast C++ class still reads it as its declared type.
  TensorDict td(
      {{"step", torch::tensor(12)},
       {"ratio", torch::tensor(0.5)},
       {"done", torch::tensor(true)}});
  Cast c = Cast::from_tensordict(td);
  EXPECT_EQ(c.step(), 12);
  EXPECT_EQ(c.ratio(), 0.5);
  EXPECT_TRUE(c.done());
  EXPECT_FALSE(c.label().has_value());
  TensorDict wide({{"step", torch::arange(3)}}, {3});
  EXPECT_THROWS_EXACTLY(
      Cast::from_tensordict(wide).step(),
      c10::TypeError,
      "field 'step' of Cast holds a tensor of shape [3], not an integer");
}

TEST(TensorClassTest, IsNoneRejectsUnknownNames) {
  Inner inner({{"x", torch::zeros({2})}}, {2});
  EXPECT_THROWS_EXACTLY(
      inner.is_none("y"),
      KeyError,
      "Inner has no field 'y'. Its fields are ['x'].");
}

// --- field defaults ---------------------------------------------------------

namespace {

// Python 0.15.3's
//   @tensorclass
//   class D:
//       x: torch.Tensor
//       n: int = 3
//       s: str = "hi"
//       o: Optional[int] = 4
struct Defaults : TensorClass<Defaults> {
  TENSORDICT_FIELDS(
      Defaults,
      x,
      (int64_t, n, 3),
      (std::string, s, "hi"),
      (std::optional<int64_t>, o, 4),
      (at::Tensor, t, torch::ones({2})))
};

struct CastDefaults : TensorClass<CastDefaults, ClassFlags::kAutocast> {
  TENSORDICT_FIELDS(
      CastDefaults,
      (double, ratio, 0.5),
      (bool, done, true),
      (std::optional<std::string>, label))
};

}  // namespace

TEST(TensorClassTest, FieldDefaultsFillTheFieldsLeftOut) {
  // Python: `D(x=torch.zeros(2), batch_size=[2]).state_dict()._metadata`
  // is {'': {..., '_non_tensor': {'n': 3, 's': 'hi', 'o': 4}}}.
  const Defaults d({{"x", torch::zeros({2})}}, {2});
  EXPECT_EQ(
      d.state_dict().find_metadata("")->non_tensor_fields->dump(),
      R"({"n":3,"s":"hi","o":4})");
  EXPECT_EQ(d.s(), "hi");
  EXPECT_EQ(d.tensordict().get_non_tensor("o"), Json(4));
  EXPECT_EQ(d.tensordict().get_non_tensor("n"), Json(3));
  EXPECT_TRUE(torch::equal(d.t(), torch::ones({2})));
  // Without batch dims a default number is a 0-dim tensor, as Python's
  // `D(x=torch.zeros(()))` holds n as tensor(3).
  const Defaults scalar({{"x", torch::zeros({})}, {"t", torch::zeros({})}});
  EXPECT_TRUE(torch::equal(scalar.n(), torch::tensor(int64_t{3})));
  // The default is made again for every instance: no shared tensor.
  const Defaults again({{"x", torch::zeros({2})}}, {2});
  EXPECT_FALSE(again.t().is_same(d.t()));
  // A given value wins; an optional field given None is unset.
  const Defaults given(
      {{"x", torch::zeros({2})}, {"s", "yo"}, {"o", std::nullopt}}, {2});
  EXPECT_EQ(given.s(), "yo");
  EXPECT_TRUE(given.is_none("o"));
  // The positional constructor takes every field, the defaulted ones too.
  const Defaults positional(
      torch::zeros({2}), 5, "p", std::nullopt, torch::zeros({2}), {2});
  EXPECT_EQ(positional.s(), "p");
  EXPECT_EQ(positional.tensordict().get_non_tensor("n"), Json(5));
  EXPECT_TRUE(positional.is_none("o"));
  // Only the fields without a default are required (Python's message).
  EXPECT_THROWS_EXACTLY(
      Defaults({}, {2}),
      c10::TypeError,
      "Defaults.__init__() missing 1 required positional argument: 'x'");
  // from_tensordict takes the dict as it is, as Python's (n is None).
  const Defaults wrapped =
      Defaults::from_tensordict(TensorDict({{"x", torch::zeros({2})}}, {2}));
  EXPECT_TRUE(wrapped.is_none("n"));
  EXPECT_TRUE(wrapped.is_none("o"));
  // Defaults are read back as the declared types with kAutocast.
  const CastDefaults c({});
  EXPECT_EQ(c.ratio(), 0.5);
  EXPECT_TRUE(c.done());
  EXPECT_FALSE(c.label().has_value());
  EXPECT_EQ(CastDefaults({{"done", false}}).done(), false);
}

TEST(TensorClassTest, GetWithANestedKeyChainsThroughTheFields) {
  const Holder h = make_holder();
  EXPECT_TRUE(h.get({"inner", "x"}).tensor().is_same(h.inner().x()));
  EXPECT_TRUE(h.get({"a"}).tensor().is_same(h.a()));
  EXPECT_THROWS_WITH((void)h.get({"nope", "x"}), KeyError, "nope");
  EXPECT_THROWS_WITH((void)h.get({"inner", "y"}), KeyError, "\"y\"");
  EXPECT_THROWS_WITH(
      (void)h.get({"a", "x"}),
      c10::ValueError,
      "field 'a' holds no nested dict");
}

TEST(TensorClassTest, GetWithANestedKeyAndADefaultFollowsPython) {
  // Python 0.15.3:
  //   class Opt(TensorClass): a: torch.Tensor; b: torch.Tensor = None
  //   class Outer(TensorClass): x: torch.Tensor; inner: Opt = None
  //   o = Outer(x=torch.zeros(3), inner=Opt(a=torch.ones(3), batch_size=[3]),
  //             batch_size=[3])
  //   o.get(("inner", "a"), "D")     # tensor([1., 1., 1.])
  //   o.get(("inner", "b"), "D")     # None (an unset field)
  //   o.get(("inner", "zz"), "D")    # 'D' (no such field)
  //   o.get(("nofield", "a"), "D")   # 'D'
  //   Outer(x=torch.zeros(3), batch_size=[3]).get(("inner", "a"), "D")  # 'D'
  const Outer o(
      {{"x", torch::zeros({3})},
       {"inner", Opt({{"a", torch::ones({3})}}, {3})}},
      {3});
  const tensordict::Value fallback(NonTensorData("D"));
  const auto a = o.get({"inner", "a"}, fallback);
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->tensor().is_same(o.inner()->a()));
  EXPECT_FALSE(o.get({"inner", "b"}, fallback).has_value());
  for (const auto& got :
       {o.get({"inner", "zz"}, fallback),
        o.get({"nofield", "a"}, fallback),
        Outer({{"x", torch::zeros({3})}}, {3}).get({"inner", "a"}, fallback)}) {
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->non_tensor_data().data(), Json("D"));
  }
  const Holder h = make_holder();
  const auto x = h.get({"inner", "x"}, fallback);
  ASSERT_TRUE(x.has_value());
  EXPECT_TRUE(x->tensor().is_same(h.inner().x()));
  EXPECT_THROWS_WITH(
      (void)o.get(std::initializer_list<std::string_view>{}, fallback),
      c10::ValueError,
      "get: the key is empty");
}

// --- set with SetOptions and nested keys, memmap_async_, load into `out` ---

namespace {

// Code generic over a dict and a class: SetOptions and nested keys.
template <typename Dict>
void generic_set(Dict& dict) {
  dict.set("a", torch::tensor({5.0f, 6.0f}), SetOptions().non_blocking(true));
  dict.set({"inner", "x"}, torch::tensor({7.0f, 8.0f}), SetOptions());
}

}  // namespace

TEST(TensorClassTest, SetTakesNonBlockingAndTensorDictsSetOptions) {
  Holder h = make_holder();
  EXPECT_EQ(
      &h.set(
          "a",
          torch::tensor({9.0f, 9.0f}),
          /*inplace=*/false,
          /*non_blocking=*/true),
      &h);
  EXPECT_TRUE(torch::equal(h.a(), torch::tensor({9.0f, 9.0f})));
  const at::Tensor storage = h.a();
  h.set(
      "a",
      torch::tensor({1.0f, 2.0f}),
      SetOptions().inplace(true).non_blocking(true));
  EXPECT_TRUE(h.a().is_same(storage));
  EXPECT_TRUE(torch::equal(storage, torch::tensor({1.0f, 2.0f})));
  // The options keep the class's rules: in place on a string field throws.
  EXPECT_THROWS_WITH(
      h.set("s", "other", SetOptions().inplace(true)),
      c10::Error,
      "Cannot update the existing NonTensorData of field 's' of Holder in "
      "place");

  TensorDict td = make_holder().to_tensordict();
  generic_set(td);
  generic_set(h);
  EXPECT_TRUE(torch::equal(h.a(), td.get("a")));
  EXPECT_TRUE(torch::equal(h.inner().x(), td.get({"inner", "x"})));
  EXPECT_TRUE(torch::equal(h.inner().x(), torch::tensor({7.0f, 8.0f})));
}

TEST(TensorClassTest, SetWithANestedKeyWritesIntoTheNestedField) {
  Holder h = make_holder();
  const Inner inner = h.inner();
  const at::Tensor x = inner.x();
  // Python's `h.set(("inner", "x"), value)` is `h.inner.set("x", value)`.
  EXPECT_EQ(&h.set({"inner", "x"}, torch::tensor({0.5f, 1.5f})), &h);
  EXPECT_TRUE(inner.x().is_same(h.inner().x()));
  EXPECT_TRUE(torch::equal(inner.x(), torch::tensor({0.5f, 1.5f})));
  EXPECT_FALSE(h.inner().x().is_same(x));
  // In place: the nested field's tensor keeps its storage.
  const at::Tensor kept = h.inner().x();
  h.set({"inner", "x"}, torch::tensor({3.0f, 3.0f}), /*inplace=*/true);
  EXPECT_TRUE(h.inner().x().is_same(kept));
  EXPECT_TRUE(torch::equal(kept, torch::tensor({3.0f, 3.0f})));
  // A key of one part is a field name.
  h.set({"a"}, torch::tensor({4.0f, 4.0f}));
  EXPECT_TRUE(torch::equal(h.a(), torch::tensor({4.0f, 4.0f})));
  // The nested class's own rules: its fields only.
  EXPECT_THROWS_WITH(
      h.set({"inner", "y"}, torch::zeros({2})),
      c10::Error,
      "Cannot set the attribute 'y': Inner has no such field. Its fields "
      "are ['x'].");
  EXPECT_THROWS_WITH(
      h.set({"nope", "y"}, torch::zeros({2})),
      c10::Error,
      "Cannot set the attribute 'nope': Holder has no such field");
  EXPECT_THROWS_WITH(
      h.set({"a", "y"}, torch::zeros({2})),
      c10::ValueError,
      "set: field 'a' of Holder holds no nested dict or class, so it has no "
      "entry 'y'");
  // A TensorDict field is written as TensorDict::set writes.
  Trajectory t = make_trajectory(2);
  EXPECT_THROWS_WITH(
      t.set({"extra", "y"}, torch::zeros({2})),
      c10::ValueError,
      "is unset (None), so it has no entry 'y'");
  t.set_extra(TensorDict({{"z", torch::zeros({2})}}, {2}));
  t.set({"extra", "y", "w"}, torch::ones({2, 3}));
  t.set({"extra", "label"}, "hi");
  EXPECT_TRUE(torch::equal(t.extra()->get({"y", "w"}), torch::ones({2, 3})));
  EXPECT_EQ(t.extra()->get_non_tensor("label"), Json("hi"));
  EXPECT_THROWS_WITH(
      t.set({"extra", "z"}, torch::zeros({3})),
      c10::Error,
      "batch dimension mismatch");
  // A locked instance refuses, as in Python.
  Holder locked = make_holder();
  locked.lock_();
  EXPECT_THROWS_WITH(
      locked.set({"inner", "x"}, torch::zeros({2})),
      c10::Error,
      "Cannot modify locked TensorDict");
  EXPECT_TRUE(torch::equal(locked.inner().x(), torch::tensor({3.0f, 4.0f})));
}

// --- the rest of Python's TensorClass API: class methods, keys, batch size,
// devices ----------------------------------------------------------------

// Python: `[f.name for f in B.fields()]` is `['a', 'z', 'b', 'a2']` for
// `class B(A)`: the parent's fields first, in declaration order.
TEST(TensorClassTest, FieldsListsTheNamesInDeclarationOrderParentsFirst) {
  EXPECT_EQ(
      Trajectory::fields(),
      (std::vector<std::string>{
          "obs", "action", "inner", "extra", "task", "step", "info", "mask"}));
  EXPECT_EQ(
      Derived::fields(), (std::vector<std::string>{"obs", "step", "reward"}));
  EXPECT_EQ(Inner::fields(), std::vector<std::string>{"x"});
}

// Python: `S.from_dict({"obs": ..., "act": ...}, auto_batch_size=True)` has
// batch size [2]; without it, []; a key that is not a field is a
// ValueError.
TEST(TensorClassTest, FromDictBuildsAnInstanceAndChecksItsKeys) {
  const Trajectory t = Trajectory::from_dict(
      {{"obs", torch::zeros({2, 3})},
       {"action", torch::ones({2}, torch::kLong)},
       {"inner", {{"x", torch::ones({2, 5})}}},
       {"task", "reach"}},
      FromDictOptions().auto_batch_size(true));
  EXPECT_EQ(t.batch_size(), c10::IntArrayRef({2}));
  EXPECT_EQ(t.obs().sizes(), c10::IntArrayRef({2, 3}));
  EXPECT_EQ(t.action().scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(t.inner().x(), torch::ones({2, 5})));
  EXPECT_EQ(t.task(), "reach");
  EXPECT_TRUE(t.is_none("mask"));
  const Inner flat = Inner::from_dict({{"x", torch::ones({2, 5})}});
  EXPECT_EQ(flat.batch_size(), c10::IntArrayRef({}));
  EXPECT_EQ(
      Inner::from_dict(
          {{"x", torch::ones({2, 5})}},
          FromDictOptions().batch_size(std::vector<int64_t>{2}))
          .batch_size(),
      c10::IntArrayRef({2}));
  EXPECT_THROWS_WITH(
      Inner::from_dict({{"x", torch::ones({2})}, {"y", torch::ones({2})}}),
      c10::ValueError,
      "Keys from the tensordict ({'x', 'y'}) must correspond to the class "
      "attributes ({'x'}). Got the set of keys {{'y'}} which do not belong "
      "to the class.");
  EXPECT_THROWS_WITH(
      Trajectory::from_dict({{"task", torch::ones({2})}}),
      c10::TypeError,
      "field 'task' of Trajectory holds Tensor, not a string");
}

// Python: `S.fromkeys(["obs", "act"], 0)` holds 0-dim int64 zeros.
TEST(TensorClassTest, FromKeysFillsTheNamedFields) {
  const Trajectory t = Trajectory::fromkeys({"obs", "action"});
  EXPECT_EQ(t.batch_size(), c10::IntArrayRef({}));
  EXPECT_EQ(t.obs().dim(), 0);
  EXPECT_EQ(t.obs().scalar_type(), torch::kLong);
  EXPECT_EQ(t.action().item<int64_t>(), 0);
  EXPECT_TRUE(t.is_none("task"));
  const Fast f = Fast::fromkeys({"a", "b"}, 2.5);
  EXPECT_EQ(f.b().item<double>(), 2.5);
  const at::Tensor shared = torch::ones({3});
  const Fast g = Fast::fromkeys({"a", "c"}, shared);
  EXPECT_TRUE(g.a().is_same(shared));
  EXPECT_TRUE(g.c()->is_same(shared));
  EXPECT_THROWS_WITH(
      Fast::fromkeys({"a", "d"}),
      c10::ValueError,
      "Got the set of keys {{'d'}} which do not belong to the class.");
  EXPECT_THROWS_WITH(
      Trajectory::fromkeys({"task"}),
      c10::TypeError,
      "field 'task' of Trajectory holds Tensor, not a string");
}

// Python: `s.is_non_tensor("task")` is True, `s.is_non_tensor("obs")`
// False, and a key the instance lacks is a KeyError.
TEST(TensorClassTest, IsNonTensorTellsDataFromTensors) {
  const Trajectory t = make_trajectory();
  EXPECT_TRUE(t.is_non_tensor("task"));
  EXPECT_FALSE(t.is_non_tensor("obs"));
  EXPECT_FALSE(t.is_non_tensor({"inner", "x"}));
  const Cast c(3, 0.5, true, std::string("label"));
  EXPECT_TRUE(c.is_non_tensor("step"));
  EXPECT_THROWS_WITH(
      t.is_non_tensor("nope"),
      KeyError,
      "Trajectory has no field 'nope'. Its fields are ['action', 'extra', "
      "'info', 'inner', 'mask', 'obs', 'step', 'task'].");
  // An unset field is no entry, as in Python.
  EXPECT_THROWS_WITH(t.is_non_tensor("mask"), KeyError, "mask");
}

// Python: `s.rename_key_("obs", "act")` moves obs into act (replacing it)
// and leaves obs None; `safe=True` refuses a key that is present.
TEST(TensorClassTest, RenameKeyMovesAnEntryToAnotherField) {
  Fast f({{"a", torch::ones({2})}, {"b", torch::zeros({2})}}, {2});
  EXPECT_EQ(&f.rename_key_("a", "c"), &f);
  EXPECT_TRUE(f.is_none("a"));
  EXPECT_TRUE(torch::equal(*f.c(), torch::ones({2})));
  f.rename_key_("c", "b");
  EXPECT_TRUE(torch::equal(f.b(), torch::ones({2})));
  EXPECT_TRUE(f.is_none("c"));
  f.set("a", torch::full({2}, 5.0));
  EXPECT_THROWS_WITH(
      f.rename_key_("a", "b", /*safe=*/true),
      KeyError,
      "key b already present in TensorDict.");
  EXPECT_TRUE(torch::equal(f.a(), torch::full({2}, 5.0)));
  EXPECT_THROWS_WITH(
      f.rename_key_("a", "d"),
      KeyError,
      "Fast has no field 'd'. Its fields are ['a', 'b', 'c'].");
  EXPECT_THROWS_WITH(
      f.rename_key_("d", "a"), KeyError, "Fast has no field 'd'");
  EXPECT_FALSE(f.is_none("a"));

  Trajectory t = make_trajectory();
  EXPECT_THROWS_WITH(
      t.rename_key_("task", "obs"),
      c10::TypeError,
      "rename_key_: the entry at 'task' is NonTensorData, but field 'obs' of "
      "Trajectory takes a tensor");
  EXPECT_EQ(t.task(), "reach");
  EXPECT_EQ(t.obs().sizes(), c10::IntArrayRef({4, 3}));
  // An unset field has no entry to move: TensorDict's KeyError.
  EXPECT_THROWS_WITH(t.rename_key_("mask", "obs"), KeyError, "mask");
  // Inside a TensorDict field any key goes; inside a TensorClass field, its
  // fields.
  t.set_extra(TensorDict({{"u", torch::ones({4})}}, {4}));
  t.rename_key_({"extra", "u"}, {"extra", "v"});
  EXPECT_TRUE(t.extra()->contains("v"));
  EXPECT_FALSE(t.extra()->contains("u"));
  EXPECT_THROWS_WITH(
      t.rename_key_({"inner", "x"}, {"inner", "y"}),
      KeyError,
      "Inner has no field 'y'");
  EXPECT_THROWS_WITH(
      t.rename_key_({"obs", "x"}, "mask"),
      c10::ValueError,
      "rename_key_: the key ('obs', 'x') goes through field 'obs' of "
      "Trajectory, which takes a tensor, not a TensorDict or a TensorClass");
  t.lock_();
  EXPECT_THROWS_WITH(
      t.rename_key_("obs", "mask"), c10::Error, "Cannot modify locked");
  EXPECT_FALSE(t.is_none("obs"));
}

// Python: `s.batch_size = [5]` raises naming the tensor that does not fit,
// and the instance keeps its batch size; a locked instance takes a new
// batch size too.
TEST(TensorClassTest, SetBatchSizeChecksTheFieldsAndChangesNothingOnError) {
  Trajectory t = make_trajectory();
  EXPECT_THROWS_WITH(t.set_batch_size({5}), c10::Error, "obs");
  EXPECT_THROWS_WITH(t.set_batch_size({4, 3}), c10::Error, "action");
  EXPECT_EQ(t.batch_size(), c10::IntArrayRef({4}));
  EXPECT_EQ(t.inner().batch_size(), c10::IntArrayRef({4}));
  EXPECT_EQ(&t.set_batch_size({}), &t);
  EXPECT_EQ(t.batch_size(), c10::IntArrayRef({}));
  EXPECT_EQ(t.task(), "reach");
  t.lock_();
  t.set_batch_size({4});
  EXPECT_EQ(t.batch_size(), c10::IntArrayRef({4}));
  EXPECT_EQ(t.index({1}).obs().sizes(), c10::IntArrayRef({3}));
}

// Without CUDA, `cuda()` names what is missing, even for an instance with
// no tensor to move (Python: "Torch not compiled with CUDA enabled").
TEST(TensorClassTest, CudaThrowsAClearErrorWithoutCuda) {
  if (at::hasCUDA()) {
    GTEST_SKIP() << "a CUDA device is here; CudaMovesEveryField_CUDA runs";
  }
  EXPECT_THROWS_WITH(
      (void)make_trajectory().cuda(),
      c10::Error,
      "cuda: CUDA is not available (this PyTorch was built without CUDA, or "
      "it sees no CUDA device)");
  EXPECT_THROWS_WITH(
      (void)Inner().cuda(0), c10::Error, "cuda: CUDA is not available");
}

TEST(TensorClassTest, CudaMovesEveryField_CUDA) {
  if (!at::hasCUDA()) {
    GTEST_SKIP() << "no CUDA device here";
  }
  const Trajectory t = make_trajectory();
  const Trajectory g = t.cuda();
  EXPECT_EQ(g.device()->type(), c10::kCUDA);
  EXPECT_TRUE(g.obs().is_cuda());
  EXPECT_TRUE(g.inner().x().is_cuda());
  EXPECT_TRUE(torch::equal(g.obs().cpu(), t.obs()));
  EXPECT_EQ(g.task(), "reach");
  EXPECT_TRUE(t.obs().device().is_cpu());
  EXPECT_TRUE(t.cuda(0).obs().is_cuda());
  EXPECT_THROWS_WITH(
      (void)t.cuda(static_cast<c10::DeviceIndex>(at::getNumGPUs())),
      c10::IndexError,
      "is out of range");
}

}  // namespace tensor_class_test
