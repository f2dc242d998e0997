#include <tensordict/map.h>
#include <tensordict/tensor_class.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <set>
#include <sstream>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace tensor_class_test {

using namespace tensordict;
using namespace tensordict::indexing;
using tensordict::testing::expect_td_equal;
using tensordict::testing::metadata_keys;
using tensordict::testing::read_text;
using tensordict::testing::TempDir;

namespace {

struct Inner : TensorClass<Inner> {
  TENSORDICT_FIELDS(Inner, x)
};

struct Trajectory : TensorClass<Trajectory> {
  TENSORDICT_FIELDS(
      Trajectory,
      obs,
      action,
      (Inner, inner),
      (std::optional<TensorDict>, extra),
      (std::string, task),
      (std::optional<int64_t>, step),
      (std::optional<Json>, info),
      (std::optional<at::Tensor>, mask))
};

struct Cast : TensorClass<Cast, ClassFlags::kAutocast> {
  TENSORDICT_FIELDS(
      Cast,
      (int64_t, step),
      (double, ratio),
      (bool, done),
      (std::optional<std::string>, label))
};

struct NoCast : TensorClass<NoCast, ClassFlags::kNocast> {
  TENSORDICT_FIELDS(NoCast, (int64_t, step), (double, ratio))
};

struct Plain : TensorClass<Plain> {
  TENSORDICT_FIELDS(Plain, (int64_t, step), (double, ratio))
};

struct Frozen : TensorClass<Frozen, ClassFlags::kFrozen> {
  TENSORDICT_FIELDS(Frozen, x)
};

struct Fast : TensorClass<Fast, ClassFlags::kTensorOnly> {
  TENSORDICT_FIELDS(Fast, a, b, (std::optional<at::Tensor>, c))
};

struct Shadowing : TensorClass<Shadowing, ClassFlags::kShadow> {
  TENSORDICT_FIELDS(Shadowing, batch_size, x)
};

struct Base : TensorClass<Base, ClassFlags::kAutocast> {
  TENSORDICT_FIELDS(Base, obs, (int64_t, step))
};

struct Derived : TensorClass<Derived, ClassFlags::kInherit, Base> {
  TENSORDICT_FIELDS(Derived, reward)
};

struct FrozenBase : TensorClass<FrozenBase, ClassFlags::kFrozen> {
  TENSORDICT_FIELDS(FrozenBase, a)
};

struct FrozenChild : TensorClass<FrozenChild, ClassFlags::kFrozen, FrozenBase> {
  TENSORDICT_FIELDS(FrozenChild, b)
};

// Flag combinations Python accepts together; each compiles and keeps both
// behaviours (the exclusive ones are compile_fail tests).
struct FrozenCast
    : TensorClass<FrozenCast, ClassFlags::kFrozen | ClassFlags::kAutocast> {
  TENSORDICT_FIELDS(FrozenCast, x, (int64_t, step))
};

struct FrozenFast
    : TensorClass<FrozenFast, ClassFlags::kFrozen | ClassFlags::kTensorOnly> {
  TENSORDICT_FIELDS(FrozenFast, a, b)
};

struct ShadowNocast
    : TensorClass<ShadowNocast, ClassFlags::kShadow | ClassFlags::kNocast> {
  TENSORDICT_FIELDS(ShadowNocast, batch_size, (double, ratio))
};

struct Registered : TensorClass<Registered> {
  TENSORDICT_FIELDS(Registered, pos, (Inner, inner), (std::string, label))
};
TENSORDICT_PYTHON_CLASS(Registered, "<class 'tests.Registered'>");
TENSORDICT_PYTHON_CLASS(Inner, "<class 'tests.Inner'>");

struct Unregistered : TensorClass<Unregistered> {
  TENSORDICT_FIELDS(Unregistered, x)
};

Trajectory make_trajectory(int64_t batch = 4) {
  return Trajectory(
      {{"obs", torch::arange(batch * 3, torch::kFloat).reshape({batch, 3})},
       {"action", torch::ones({batch}, torch::kLong)},
       {"inner", Inner({{"x", torch::zeros({batch, 2})}}, {batch})},
       {"task", "reach"}},
      {batch});
}

// A Registered instance with batch size [2].
Registered make_registered(
    at::Tensor pos, at::Tensor inner_x, const std::string& label) {
  return Registered(
      {{"pos", std::move(pos)},
       {"inner", Inner({{"x", std::move(inner_x)}}, {2})},
       {"label", label}},
      {2});
}

}  // namespace

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

// `save` is Python's spelling of `memmap`: the same files, a mapped
// instance back, and `load` reads it as the class.
TEST(TensorClassTest, SaveWritesWhatMemmapWritesAndLoadsAsTheClass) {
  TempDir dir;
  const Cast c(3, 0.5, true, std::string("label"));
  const Cast saved = c.save(MemmapOptions(dir / "saved"));
  (void)c.memmap(MemmapOptions(dir / "memmapped"));
  EXPECT_TRUE(saved.is_locked());
  EXPECT_EQ(saved.step(), 3);
  EXPECT_EQ(saved.label(), std::optional<std::string>("label"));
  for (const std::string name :
       {"meta.json", "step/meta.json", "label/meta.json"}) {
    EXPECT_FALSE(read_text(dir / ("saved/" + name)).empty()) << name;
    EXPECT_EQ(
        read_text(dir / ("saved/" + name)),
        read_text(dir / ("memmapped/" + name)))
        << name;
  }
  const Cast loaded = Cast::load(dir / "saved");
  EXPECT_EQ(loaded.step(), 3);
  EXPECT_EQ(loaded.ratio(), 0.5);
  EXPECT_TRUE(loaded.done());
  EXPECT_EQ(loaded.label(), std::optional<std::string>("label"));
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

// --- ops return the struct ---------------------------------------------------

TEST(TensorClassTest, IndexingReturnsTheStruct) {
  Trajectory t = make_trajectory();
  Trajectory first = t.index({0});
  EXPECT_EQ(first.batch_dims(), 0);
  EXPECT_TRUE(torch::equal(first.obs(), torch::arange(3, torch::kFloat)));
  EXPECT_EQ(first.task(), "reach");
  EXPECT_EQ(first.inner().x().sizes(), c10::IntArrayRef({2}));
  Trajectory some = t.index({Slice(1, 3)});
  EXPECT_EQ(some.batch_size(), c10::IntArrayRef({2}));
  // Views: writing through the index writes the original.
  first.obs().fill_(-1);
  EXPECT_EQ(t.obs()[0][0].item<float>(), -1.0f);
  Trajectory masked = t.index({torch::tensor({true, false, true, false})});
  EXPECT_EQ(masked.batch_size(), c10::IntArrayRef({2}));
}

TEST(TensorClassTest, IndexPutWritesEveryField) {
  Trajectory t = make_trajectory();
  Trajectory src = make_trajectory(2).apply(
      [](const at::Tensor& x) { return torch::full_like(x, 5); });
  t.index_put_({Slice(0, 2)}, src);
  EXPECT_EQ(t.obs()[1][2].item<float>(), 5.0f);
  EXPECT_EQ(t.obs()[2][0].item<float>(), 6.0f);
  EXPECT_EQ(t.inner().x()[0][0].item<float>(), 5.0f);
  t.index_put_({3}, 0);
  EXPECT_EQ(t.action()[3].item<int64_t>(), 0);
}

TEST(TensorClassTest, ShapeOpsReturnTheStruct) {
  Trajectory t = make_trajectory();
  Trajectory r = t.reshape({2, 2});
  EXPECT_EQ(r.obs().sizes(), c10::IntArrayRef({2, 2, 3}));
  EXPECT_EQ(r.inner().x().sizes(), c10::IntArrayRef({2, 2, 2}));
  EXPECT_EQ(r.flatten().batch_size(), c10::IntArrayRef({4}));
  EXPECT_EQ(t.unsqueeze(0).batch_size(), c10::IntArrayRef({1, 4}));
  EXPECT_EQ(t.unsqueeze(0).squeeze(0).batch_size(), c10::IntArrayRef({4}));
  EXPECT_EQ(r.permute({1, 0}).obs().sizes(), c10::IntArrayRef({2, 2, 3}));
  EXPECT_EQ(r.transpose(0, 1).batch_size(), c10::IntArrayRef({2, 2}));
  EXPECT_EQ(t.expand({3, 4}).obs().sizes(), c10::IntArrayRef({3, 4, 3}));
  EXPECT_EQ(t.view({4, 1}).batch_size(), c10::IntArrayRef({4, 1}));
  EXPECT_EQ(t.unflatten(0, {2, 2}).batch_size(), c10::IntArrayRef({2, 2}));
  EXPECT_EQ(t.narrow(0, 1, 2).obs()[0][0].item<float>(), 3.0f);
  EXPECT_EQ(t.flip({0}).obs()[0][0].item<float>(), 9.0f);
  EXPECT_EQ(t.repeat({2}).batch_size(), c10::IntArrayRef({8}));
}

TEST(TensorClassTest, UnbindSplitAndChunkGiveStructs) {
  Trajectory t = make_trajectory();
  std::vector<Trajectory> items = t.unbind(0);
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[2].obs()[0].item<float>(), 6.0f);
  std::vector<Trajectory> parts = t.split(3);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].batch_size(), c10::IntArrayRef({1}));
  EXPECT_EQ(
      t.split(std::vector<int64_t>{1, 3})[1].batch_size(),
      c10::IntArrayRef({3}));
  EXPECT_EQ(t.chunk(2).size(), 2u);
}

TEST(TensorClassTest, StackAndCatTakeVectorsOfStructs) {
  std::vector<Trajectory> items = make_trajectory().unbind(0);
  Trajectory stacked = stack(items);
  EXPECT_EQ(stacked.batch_size(), c10::IntArrayRef({4}));
  EXPECT_TRUE(torch::equal(stacked.obs(), make_trajectory().obs()));
  // Equal strings stack into a NonTensorStack that still reads as one value.
  EXPECT_TRUE(stacked.get("task").is_non_tensor_stack());
  EXPECT_EQ(stacked.task(), "reach");
  Trajectory two = stack(std::vector<Trajectory>{items[0], items[1]}, 0);
  EXPECT_EQ(two.inner().x().sizes(), c10::IntArrayRef({2, 2}));
  Trajectory joined =
      cat(std::vector<Trajectory>{make_trajectory(2), make_trajectory(3)});
  EXPECT_EQ(joined.batch_size(), c10::IntArrayRef({5}));
  EXPECT_EQ(joined.obs().size(0), 5);
  items[1].set_task("other");
  Trajectory mixed = stack(items);
  EXPECT_THROWS_EXACTLY(
      mixed.task(),
      c10::TypeError,
      "field 'task' of Trajectory holds NonTensorStack whose elements differ; "
      "read them with get(), not a string");
  EXPECT_EQ(
      mixed.get("task").non_tensor(),
      Json({"reach", "other", "reach", "reach"}));
}

TEST(TensorClassTest, ApplyToCloneAndCompare) {
  Trajectory t = make_trajectory();
  Trajectory doubled = t.apply([](const at::Tensor& x) { return x * 2; });
  EXPECT_EQ(doubled.obs()[1][0].item<float>(), 6.0f);
  EXPECT_EQ(doubled.task(), "reach");
  Trajectory summed = t.apply(
      [](const at::Tensor& a, const at::Tensor& b) { return a + b; }, doubled);
  EXPECT_EQ(summed.obs()[1][0].item<float>(), 9.0f);
  Trajectory as_double = t.to(torch::kDouble);
  EXPECT_EQ(as_double.obs().scalar_type(), torch::kDouble);
  EXPECT_EQ(as_double.inner().x().scalar_type(), torch::kDouble);
  Trajectory moved = t.to(at::TensorOptions().device(c10::kCPU));
  EXPECT_EQ(moved.device(), c10::Device(c10::kCPU));
  // A DeviceType, a Device and a string each name one overload.
  for (const Trajectory& m :
       {t.to(torch::kMeta), t.to(c10::Device("meta")), t.to("meta")}) {
    EXPECT_EQ(m.device(), c10::Device("meta"));
    EXPECT_EQ(m.obs().device(), c10::Device("meta"));
    EXPECT_EQ(m.inner().x().device(), c10::Device("meta"));
    EXPECT_EQ(m.task(), "reach");
  }
  Trajectory copy = t.clone();
  EXPECT_NE(copy.obs().data_ptr(), t.obs().data_ptr());
  EXPECT_TRUE(equal(copy, t));
  Trajectory same = t == copy;
  EXPECT_TRUE(same.all());
  EXPECT_TRUE(same.obs().all().item<bool>());
  Trajectory diff = t != doubled;
  EXPECT_TRUE(diff.obs()[1].all().item<bool>());
  EXPECT_FALSE(diff.obs()[0][0].item<bool>());
  EXPECT_EQ(t.detach().obs().data_ptr(), t.obs().data_ptr());
  EXPECT_THROWS_WITH(
      t.apply([](const at::Tensor& x) { return x.sum(); }),
      c10::Error,
      "batch dimension mismatch");
}

TEST(TensorClassTest, CopiesAliasAndCloneIsDeep) {
  Trajectory t = make_trajectory();
  Trajectory alias = t;
  alias.set_task("changed");
  EXPECT_EQ(t.task(), "changed");
  EXPECT_TRUE(alias.is_same(t));
  Trajectory deep = t.clone();
  deep.set_task("again");
  EXPECT_EQ(t.task(), "changed");
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

// --- memmap
// -------------------------------------------------------------------

TEST(TensorClassTest, MemmapRoundTripsAsTheStruct) {
  TempDir tmp;
  const std::string dir = tmp / "roundtrip";
  Trajectory t = make_trajectory();
  t.set_step(7);
  Trajectory saved = t.memmap(MemmapOptions(dir));
  EXPECT_TRUE(saved.is_memmap());
  // Trajectory is not registered: a plain TensorDict layout.
  EXPECT_NE(
      read_text(dir + "/meta.json").find("tensordict._td.TensorDict"),
      std::string::npos);
  Trajectory loaded = Trajectory::load_memmap(dir);
  expect_td_equal(loaded.tensordict(), t.tensordict());
  EXPECT_EQ(loaded.task(), "reach");
  EXPECT_EQ(loaded.step().value().item<int64_t>(), 7);
  EXPECT_EQ(loaded.inner().x().sizes(), c10::IntArrayRef({4, 2}));
}

TEST(TensorClassTest, RegisteredClassesSaveThePythonLayout) {
  TempDir tmp;
  const std::string dir = tmp / "registered";
  Registered p(
      {{"pos", torch::arange(6, torch::kFloat).reshape({2, 3})},
       {"inner", Inner({{"x", torch::ones({2})}}, {2})},
       {"label", "hi"}},
      {2});
  (void)p.memmap(MemmapOptions(dir));
  EXPECT_EQ(
      read_text(dir + "/meta.json"),
      "{\"_type\":\"<class 'tests.Registered'>\"}");
  EXPECT_EQ(
      read_text(dir + "/_tensordict/inner/meta.json"),
      "{\"_type\":\"<class 'tests.Inner'>\"}");
  EXPECT_TRUE(std::filesystem::exists(dir + "/_tensordict/pos.memmap"));
  // The original's dicts are not marked.
  EXPECT_EQ(p.tensordict().python_class(), "");
  Registered loaded = Registered::load_memmap(dir);
  EXPECT_TRUE(torch::equal(loaded.pos(), p.pos()));
  EXPECT_EQ(loaded.label(), "hi");
  // Another registered class refuses the tree.
  EXPECT_THROWS_WITH(
      Inner::load_memmap(dir),
      c10::ValueError,
      "holds the Python class <class 'tests.Registered'>, but Inner is "
      "registered as <class 'tests.Inner'>");
  // Python's own spacing on request: the bytes Python writes.
  (void)p.memmap(
      MemmapOptions(dir).existsok(true).json_style(JsonStyle::kSpaced));
  EXPECT_EQ(
      read_text(dir + "/meta.json"),
      "{\"_type\": \"<class 'tests.Registered'>\"}");
}

TEST(TensorClassTest, MemmapInPlaceMapsTheFields) {
  TempDir tmp;
  const std::string dir = tmp / "inplace";
  Registered p(
      {{"pos", torch::zeros({2, 3})},
       {"inner", Inner({{"x", torch::ones({2})}}, {2})},
       {"label", "hi"}},
      {2});
  p.memmap_(MemmapOptions(dir));
  EXPECT_TRUE(p.is_memmap());
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(p.pos()));
  p.pos().fill_(3);
  Registered loaded = Registered::load(dir);
  EXPECT_EQ(loaded.pos()[1][2].item<float>(), 3.0f);
}

TEST(TensorClassTest, MemmapLikeWritesTheLayoutWithZeroFilledTensors) {
  TempDir tmp;
  const std::string dir = tmp / "like";
  Registered p = make_registered(
      torch::arange(6, torch::kFloat).reshape({2, 3}), torch::ones({2}), "hi");
  Registered like = p.memmap_like(MemmapOptions(dir));
  static_assert(std::is_same_v<decltype(like), Registered>);
  EXPECT_TRUE(like.is_memmap());
  EXPECT_TRUE(torch::equal(like.pos(), torch::zeros({2, 3})));
  EXPECT_TRUE(torch::equal(like.inner().x(), torch::zeros({2})));
  EXPECT_EQ(like.label(), "hi");
  EXPECT_EQ(
      read_text(dir + "/meta.json"),
      "{\"_type\":\"<class 'tests.Registered'>\"}");
  EXPECT_TRUE(torch::equal(Registered::load(dir).pos(), torch::zeros({2, 3})));
  // The original keeps its data.
  EXPECT_EQ(p.pos()[1][2].item<float>(), 5.0f);
}

TEST(TensorClassTest, DumpsAndLoadInPlaceRoundTrip) {
  TempDir tmp;
  const std::string dir = tmp / "dumps";
  Registered p = make_registered(
      torch::arange(6, torch::kFloat).reshape({2, 3}), torch::ones({2}), "hi");
  Registered saved = p.dumps(MemmapOptions(dir));
  EXPECT_TRUE(saved.is_memmap());
  Registered target =
      make_registered(torch::zeros({2, 3}), torch::zeros({2}), "other");
  static_assert(std::is_same_v<decltype(target.load_(dir)), Registered&>);
  EXPECT_EQ(&target.load_(dir), &target);
  EXPECT_TRUE(torch::equal(target.pos(), p.pos()));
  EXPECT_TRUE(torch::equal(target.inner().x(), torch::ones({2})));
  EXPECT_EQ(target.label(), "hi");
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(target.pos()));
  EXPECT_EQ(&target.load_memmap_(dir), &target);
  // Another registered class refuses the directory before loading.
  Inner other({{"x", torch::full({2}, 4.0f)}}, {2});
  EXPECT_THROWS_WITH(
      other.load_(dir),
      c10::ValueError,
      "holds the Python class <class 'tests.Registered'>, but Inner is "
      "registered as <class 'tests.Inner'>");
  EXPECT_TRUE(torch::equal(other.x(), torch::full({2}, 4.0f)));
  // An unregistered class refuses entries that are not its fields.
  Unregistered plain({{"x", torch::zeros({2})}}, {2});
  EXPECT_THROWS_WITH(
      plain.load_(dir), c10::ValueError, "which do not belong to the class");
  EXPECT_TRUE(torch::equal(plain.x(), torch::zeros({2})));
}

TEST(TensorClassTest, MemmapRefreshRereadsTheDirectory) {
  TempDir tmp;
  const std::string dir = tmp / "refresh";
  Registered p = make_registered(torch::zeros({2, 3}), torch::ones({2}), "old");
  EXPECT_THROWS_WITH(
      p.memmap_refresh_(), c10::Error, "memmap_refresh_ needs a dict");
  p.memmap_(MemmapOptions(dir));
  // Another writer replaces the directory's contents.
  Registered newer =
      make_registered(torch::full({2, 3}, 9.0f), torch::zeros({2}), "new");
  (void)newer.memmap(MemmapOptions(dir));
  EXPECT_EQ(&p.memmap_refresh_(), &p);
  EXPECT_TRUE(torch::equal(p.pos(), torch::full({2, 3}, 9.0f)));
  EXPECT_EQ(p.label(), "new");
  EXPECT_TRUE(p.is_memmap());
}

TEST(TensorClassTest, MemmapAsyncReturnsAFutureOfTheStruct) {
  TempDir tmp;
  const std::string dir = tmp / "async";
  Registered p = make_registered(torch::ones({2, 3}), torch::ones({2}), "hi");
  auto saving = p.memmap_async(MemmapOptions(dir));
  static_assert(std::is_same_v<decltype(saving), std::future<Registered>>);
  Registered saved = saving.get();
  EXPECT_TRUE(saved.is_memmap());
  EXPECT_EQ(saved.label(), "hi");
  EXPECT_EQ(
      read_text(dir + "/meta.json"),
      "{\"_type\":\"<class 'tests.Registered'>\"}");
  EXPECT_TRUE(torch::equal(Registered::load(dir).pos(), torch::ones({2, 3})));
  Registered like = p.memmap_like_async(MemmapOptions(tmp / "like")).get();
  EXPECT_EQ(like.pos().sum().item<float>(), 0.0F);
  EXPECT_EQ(like.label(), "hi");
  Registered copy = p.save_async(MemmapOptions(tmp / "saved")).get();
  EXPECT_TRUE(torch::equal(copy.pos(), p.pos()));
}

TEST(TensorClassTest, LazyStackHasTheSaveAliases) {
  TempDir tmp;
  const std::string dir = tmp / "lazy_dumps";
  auto stack = lazy_stack(std::vector<Inner>{
      Inner({{"x", torch::ones({2, 3})}}, {2}),
      Inner({{"x", torch::zeros({2, 4})}}, {2})});
  (void)stack.dumps(MemmapOptions(dir));
  auto loaded = LazyStackedTensorClass<Inner>::load(dir);
  EXPECT_TRUE(torch::equal(loaded.at(1).x(), torch::zeros({2, 4})));
  (void)stack.save(MemmapOptions(dir));
}

// --- a TensorClass as a TensorDict entry ------------------------------------

TEST(TensorClassTest, AnInstanceIsATensorDictEntryThatKeepsItsClass) {
  TempDir tmp;
  const std::string dir = tmp / "entry";
  Registered p = make_registered(
      torch::arange(6, torch::kFloat).reshape({2, 3}), torch::ones({2}), "hi");
  TensorDict td({{"x", torch::zeros({2})}}, {2});
  td.set("step", p);
  // Stored as the instance's own dict (Python stores the instance), marked
  // with its Python class.
  EXPECT_TRUE(td.get_tensordict("step").is_same(p.tensordict()));
  EXPECT_EQ(
      td.get_tensordict("step").python_class(), "<class 'tests.Registered'>");
  Registered back = get_as<Registered>(td, "step");
  static_assert(std::is_same_v<decltype(back), Registered>);
  // Copies and batch-dim ops keep the entry's class.
  EXPECT_EQ(
      td.clone().get_tensordict("step").python_class(),
      "<class 'tests.Registered'>");
  EXPECT_EQ(
      td.index({0}).get_tensordict("step").python_class(),
      "<class 'tests.Registered'>");
  EXPECT_TRUE(back.is_same(p));
  p.set_label("changed");
  EXPECT_EQ(get_as<Registered>(td, "step").label(), "changed");

  // A save writes Python's layout for the entry, and a load keeps the class.
  (void)td.memmap(MemmapOptions(dir));
  EXPECT_EQ(
      read_text(dir + "/step/meta.json"),
      "{\"_type\":\"<class 'tests.Registered'>\"}");
  EXPECT_TRUE(std::filesystem::exists(dir + "/step/_tensordict/pos.memmap"));
  EXPECT_NE(
      read_text(dir + "/meta.json").find("\"step\":{\"type\":\"Registered\"}"),
      std::string::npos);
  TensorDict loaded = TensorDict::load_memmap(dir);
  EXPECT_EQ(
      loaded.get_tensordict("step").python_class(),
      "<class 'tests.Registered'>");
  Registered from_disk = get_as<Registered>(loaded, "step");
  EXPECT_TRUE(torch::equal(from_disk.pos(), p.pos()));
  EXPECT_EQ(from_disk.label(), "changed");
  EXPECT_TRUE(torch::equal(from_disk.inner().x(), torch::ones({2})));

  EXPECT_THROWS_WITH(
      get_as<Inner>(td, "step"),
      c10::ValueError,
      "holds the Python class <class 'tests.Registered'>, but Inner is "
      "registered as <class 'tests.Inner'>");
  EXPECT_THROWS_WITH(
      get_as<Registered>(td, "x"), KeyError, "no Registered at key");
  EXPECT_THROWS_WITH(
      get_as<Registered>(td, "missing"), KeyError, "the key is missing");
}

TEST(TensorClassTest, AnUnregisteredInstanceIsStoredAsAPlainDict) {
  Unregistered u({{"x", torch::ones({2})}}, {2});
  TensorDict td({{"y", torch::zeros({2})}}, {2});
  td.set("u", u);
  EXPECT_EQ(td.get_tensordict("u").python_class(), "");
  EXPECT_TRUE(torch::equal(get_as<Unregistered>(td, "u").x(), u.x()));
  // The fields must still fit the class.
  td.set("other", Inner({{"x", torch::ones({2})}}, {2}));
  EXPECT_THROWS_WITH(
      get_as<Trajectory>(td, "other"),
      c10::ValueError,
      "which do not belong to the class");
}

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

TEST(TensorClassTest, RegistrationRejectsMalformedClassStrings) {
  EXPECT_THROWS_WITH(
      register_python_class<Unregistered>("Local"),
      c10::ValueError,
      "a Python class is spelled \"<class 'module.Name'>\", got 'Local'");
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

TEST(TensorClassTest, FrozenInstancesCanBeMemmappedInPlace) {
  TempDir tmp;
  const std::string dir = tmp / "frozen";
  Frozen f({{"x", torch::arange(3, torch::kFloat)}}, {3});
  f.memmap_(MemmapOptions(dir));
  EXPECT_TRUE(f.is_memmap());
  EXPECT_TRUE(f.is_locked());
  Frozen loaded = Frozen::load_memmap(dir);
  EXPECT_TRUE(loaded.is_locked());
  EXPECT_TRUE(torch::equal(loaded.x(), torch::arange(3, torch::kFloat)));
}

TEST(TensorClassTest, MaskedOpsAndWhereReturnTheStruct) {
  Trajectory t = make_trajectory();
  const at::Tensor mask = torch::tensor({true, false, true, false});
  Trajectory picked = t.masked_select(mask);
  EXPECT_EQ(picked.batch_size(), c10::IntArrayRef({2}));
  Trajectory filled = t.masked_fill(mask, 0);
  EXPECT_EQ(filled.obs()[0][1].item<float>(), 0.0f);
  EXPECT_EQ(filled.obs()[1][1].item<float>(), 4.0f);
  Trajectory zeros =
      t.apply([](const at::Tensor& x) { return torch::zeros_like(x); });
  Trajectory mixed = t.where(mask, zeros);
  EXPECT_EQ(mixed.obs()[1][0].item<float>(), 0.0f);
  EXPECT_EQ(mixed.obs()[2][0].item<float>(), 6.0f);
}

TEST(TensorClassTest, ArithmeticCastsAndOrderingReturnTheStruct) {
  Inner a({{"x", torch::tensor({1.0, 4.0})}}, {2});
  Inner b({{"x", torch::tensor({3.0, 2.0})}}, {2});
  EXPECT_TRUE(torch::equal((a + b).x(), torch::tensor({4.0f, 6.0f})));
  EXPECT_TRUE(torch::equal((a - 1).x(), torch::tensor({0.0f, 3.0f})));
  EXPECT_TRUE(torch::equal((a * b).x(), torch::tensor({3.0f, 8.0f})));
  EXPECT_TRUE(torch::equal((a / 2).x(), torch::tensor({0.5f, 2.0f})));
  EXPECT_TRUE(torch::equal((-a).x(), torch::tensor({-1.0f, -4.0f})));
  EXPECT_TRUE(torch::equal(a.sqrt().x(), torch::tensor({1.0f, 2.0f})));
  EXPECT_TRUE(torch::equal(a.clamp(2, 3).x(), torch::tensor({2.0f, 3.0f})));
  EXPECT_EQ(a.float64().x().scalar_type(), torch::kDouble);
  EXPECT_EQ(a.half().x().scalar_type(), torch::kHalf);
  EXPECT_TRUE(torch::equal((a < b).x(), torch::tensor({true, false})));
  EXPECT_TRUE(torch::equal((a >= b).x(), torch::tensor({false, true})));
  EXPECT_TRUE(torch::equal((a > 2).x(), torch::tensor({false, true})));
  Inner c = a.clone();
  c.add_(b).mul_(2);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({8.0f, 12.0f})));
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

TEST(TensorClassTest, ReductionsNamesAndPaddingReturnTheStruct) {
  Inner a({{"x", torch::tensor({{1.0f, 2.0f}, {3.0f, 4.0f}})}}, {2, 2});
  EXPECT_TRUE(torch::equal(a.sum().x(), torch::tensor(10.0f)));
  Inner rows = a.sum(ReduceOptions().dim({1}));
  EXPECT_EQ(rows.batch_size(), c10::IntArrayRef({2}));
  EXPECT_TRUE(torch::equal(rows.x(), torch::tensor({3.0f, 7.0f})));
  EXPECT_TRUE(torch::equal(a.mean().x(), torch::tensor(2.5f)));
  EXPECT_TRUE(torch::equal(
      a.amax(ReduceOptions().dim({0})).x(), torch::tensor({3.0f, 4.0f})));
  EXPECT_TRUE(torch::equal(a.min().x(), torch::tensor(1.0f)));
  EXPECT_TRUE(torch::equal(a.prod().x(), torch::tensor(24.0f)));
  EXPECT_TRUE(torch::allclose(
      a.var().x(), torch::tensor({1.0f, 2.0f, 3.0f, 4.0f}).var()));
  EXPECT_TRUE(torch::equal((a > 1.5).all(1).x(), torch::tensor({false, true})));
  EXPECT_TRUE((a > 0).all());
  EXPECT_TRUE(torch::equal((a > 3.5).any(0).x(), torch::tensor({false, true})));

  Inner named = a.rename({"rows", "cols"});
  EXPECT_EQ(named.names(), (DimNames{"rows", "cols"}));
  EXPECT_FALSE(a.tensordict().has_names());
  EXPECT_EQ(
      named.rename_by_map({{"cols", "c"}}).names(), (DimNames{"rows", "c"}));
  a.refine_names({"r", std::nullopt});
  EXPECT_EQ(a.names(), (DimNames{"r", std::nullopt}));

  Inner padded = Inner({{"x", torch::ones({2})}}, {2}).pad({1, 0}, -1);
  EXPECT_TRUE(torch::equal(padded.x(), torch::tensor({-1.0f, 1.0f, 1.0f})));
  Inner rolled =
      Inner({{"x", torch::arange(3, torch::kFloat)}}, {3}).roll({1}, {0});
  EXPECT_TRUE(torch::equal(rolled.x(), torch::tensor({2.0f, 0.0f, 1.0f})));
  Inner gathered = Inner({{"x", torch::arange(3, torch::kFloat)}}, {3})
                       .gather(0, torch::tensor({2, 0}));
  EXPECT_TRUE(torch::equal(gathered.x(), torch::tensor({2.0f, 0.0f})));
  Inner twice = Inner({{"x", torch::arange(2, torch::kFloat)}}, {2})
                    .repeat_interleave(2, 0);
  EXPECT_TRUE(torch::equal(twice.x(), torch::tensor({0.0f, 0.0f, 1.0f, 1.0f})));
  Inner filled = Inner({{"x", torch::zeros({2})}}, {2});
  filled.masked_fill_(torch::tensor({false, true}), 4);
  EXPECT_TRUE(torch::equal(filled.x(), torch::tensor({0.0f, 4.0f})));
}

// --- lazy stacks
// ----------------------------------------------------------------

namespace {

Registered registered(int64_t width, const char* label) {
  return Registered(
      {{"pos", torch::arange(2 * width, torch::kFloat).reshape({2, width})},
       {"inner",
        Inner({{"x", torch::full({2}, static_cast<double>(width))}}, {2})},
       {"label", label}},
      {2});
}

}  // namespace

TEST(TensorClassTest, LazyStackKeepsElementShapesAndReturnsTheStruct) {
  const Registered a = registered(3, "a");
  const Registered b = registered(4, "b");
  LazyStackedTensorClass<Registered> lazy =
      lazy_stack(std::vector<Registered>{a, b});
  EXPECT_EQ(lazy.batch_size(), c10::IntArrayRef({2, 2}));
  EXPECT_EQ(lazy.num_elements(), 2u);
  Registered second = lazy.at(1);
  EXPECT_EQ(second.pos().sizes(), c10::IntArrayRef({2, 4}));
  EXPECT_EQ(second.pos().data_ptr(), b.pos().data_ptr());  // aliased
  EXPECT_EQ(lazy.elements()[0].label(), "a");
  // A field whose shapes differ cannot be stacked.
  EXPECT_THROWS_WITH(lazy.get("pos"), c10::Error, "pos");
  EXPECT_THROWS_WITH(
      lazy.get("nope"), KeyError, "Registered has no field 'nope'");
  EXPECT_THROWS_WITH(lazy.contiguous(), c10::Error, "pos");

  auto first = lazy.index({0});
  ASSERT_TRUE(std::holds_alternative<Registered>(first));
  EXPECT_EQ(std::get<Registered>(first).label(), "a");
  auto rows = lazy.index({Slice(), 1});
  ASSERT_TRUE(std::holds_alternative<LazyStackedTensorClass<Registered>>(rows));
  const auto& lazy_rows = std::get<LazyStackedTensorClass<Registered>>(rows);
  EXPECT_EQ(lazy_rows.batch_size(), c10::IntArrayRef({2}));
  EXPECT_TRUE(torch::equal(lazy_rows.at(1).pos(), b.pos()[1]));

  // With equal shapes, contiguous() is the dense stack.
  const auto same =
      lazy_stack(std::vector<Registered>{a, registered(3, "c")}, 1);
  EXPECT_EQ(same.stack_dim(), 1);
  EXPECT_TRUE(
      torch::equal(same.get("pos"), torch::stack({a.pos(), a.pos()}, 1)));
  expect_td_equal(
      same.contiguous().tensordict(),
      stack(std::vector<Registered>{a, registered(3, "c")}, 1).tensordict());
}

TEST(TensorClassTest, LazyStackChecksUntypedStacks) {
  LazyStackedTensorDict untyped = lazy_stack(
      {registered(3, "a").tensordict(),
       TensorDict({{"other", torch::zeros({2})}}, {2})});
  try {
    (void)LazyStackedTensorClass<Registered>::from_lazy_stack(untyped);
    ADD_FAILURE() << "an element that does not fit was accepted";
  } catch (const c10::ValueError& e) {
    EXPECT_NE(std::string(e.msg()).find("{'other'}"), std::string::npos)
        << e.msg();
    EXPECT_NE(
        std::string(e.what()).find("(element 1 of the lazy stack)"),
        std::string::npos)
        << e.what();
  }
  const auto typed =
      LazyStackedTensorClass<Registered>::from_lazy_stack(lazy_stack(
          {registered(3, "a").tensordict(), registered(5, "b").tensordict()}));
  EXPECT_EQ(typed.at(1).pos().size(1), 5);
}

TEST(TensorClassTest, LazyStackSavesPythonsLayout) {
  TempDir tmp;
  const std::string dir = tmp / "lazy";
  const auto lazy = lazy_stack(
      std::vector<Registered>{registered(3, "a"), registered(4, "b")});
  const auto saved = lazy.memmap(MemmapOptions(dir));
  EXPECT_TRUE(saved.at(0).is_memmap());
  EXPECT_EQ(
      read_text(dir + "/meta.json"),
      "{\"_type\":\"<class 'tests.Registered'>\"}");
  EXPECT_NE(
      read_text(dir + "/_tensordict/meta.json").find("LazyStackedTensorDict"),
      std::string::npos);
  EXPECT_NE(
      read_text(dir + "/_tensordict/1/meta.json").find("TensorDict"),
      std::string::npos);
  EXPECT_EQ(
      read_text(dir + "/_tensordict/1/inner/meta.json"),
      "{\"_type\":\"<class 'tests.Inner'>\"}");
  // The elements of the original are not marked.
  EXPECT_EQ(lazy.at(0).tensordict().python_class(), "");

  const auto loaded = LazyStackedTensorClass<Registered>::load_memmap(dir);
  EXPECT_EQ(
      loaded.lazy_stacked_tensordict().python_class(),
      "<class 'tests.Registered'>");
  EXPECT_EQ(loaded.at(1).pos().sizes(), c10::IntArrayRef({2, 4}));
  EXPECT_EQ(loaded.at(1).label(), "b");
  EXPECT_TRUE(torch::equal(loaded.at(0).inner().x(), torch::full({2}, 3.0)));
  EXPECT_THROWS_WITH(
      LazyStackedTensorClass<Inner>::load_memmap(dir),
      c10::ValueError,
      "holds the Python class <class 'tests.Registered'>, but Inner is "
      "registered");
  // A dense load needs equal shapes, and says where to go otherwise.
  EXPECT_THROWS_WITH(
      Registered::load_memmap(dir), c10::Error, "load_memmap_any");

  const std::string same_dir = tmp / "same";
  (void)lazy_stack(
      std::vector<Registered>{registered(3, "a"), registered(3, "b")})
      .memmap(MemmapOptions(same_dir));
  // Even with equal shapes: a dense load would be a copy, never made
  // silently; the lazy stack loads mapped, and contiguous() copies it.
  EXPECT_THROWS_WITH(
      Registered::load_memmap(same_dir), c10::Error, "load_memmap_any");
  const auto same = LazyStackedTensorClass<Registered>::load_memmap(same_dir);
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(same.at(1).pos()));
  EXPECT_EQ(
      same.lazy_stacked_tensordict().python_class(),
      "<class 'tests.Registered'>");
  Registered dense = same.contiguous();
  EXPECT_EQ(dense.batch_size(), c10::IntArrayRef({2, 2}));
  EXPECT_EQ(
      dense.get("label").non_tensor_stack().tolist(),
      Json::parse(R"([["a","a"],["b","b"]])"));

  const std::string dense_dir = tmp / "dense";
  (void)registered(3, "a").memmap(MemmapOptions(dense_dir));
  EXPECT_THROWS_WITH(
      LazyStackedTensorClass<Registered>::load_memmap(dense_dir),
      c10::ValueError,
      "holds a dense Registered, not a lazy stack: load it with "
      "Registered::load_memmap");
}

// --- the generated forwarders (TENSORDICT_TENSORCLASS_OPS) ------------------

namespace {

Fast make_fast() {
  return Fast(
      {{"a", torch::tensor({0.25f, 1.5f})},
       {"b", torch::tensor({2.75f, 0.5f})}},
      {2});
}

// Checks `op` and `op_` against torch's op on each field: values, the type
// returned, and that the in-place form writes into and returns the instance.
#define EXPECT_UNARY_FORWARDER(op)                             \
  do {                                                         \
    const Fast f = make_fast();                                \
    static_assert(std::is_same_v<decltype(f.op()), Fast>);     \
    const Fast out = f.op();                                   \
    EXPECT_TRUE(torch::allclose(out.a(), f.a().op())) << #op;  \
    EXPECT_TRUE(torch::allclose(out.b(), f.b().op())) << #op;  \
    EXPECT_FALSE(out.c().has_value()) << #op;                  \
    Fast g = f.clone();                                        \
    static_assert(std::is_same_v<decltype(g.op##_()), Fast&>); \
    EXPECT_EQ(&g.op##_(), &g) << #op "_";                      \
    EXPECT_TRUE(torch::allclose(g.a(), out.a())) << #op "_";   \
    EXPECT_TRUE(torch::allclose(g.b(), out.b())) << #op "_";   \
  } while (false)

}  // namespace

TEST(
    TensorClassTest,
    EveryUnaryMathOpOfTensorDictIsForwardedWithItsInPlaceForm) {
  EXPECT_UNARY_FORWARDER(abs);
  EXPECT_UNARY_FORWARDER(neg);
  EXPECT_UNARY_FORWARDER(exp);
  EXPECT_UNARY_FORWARDER(expm1);
  EXPECT_UNARY_FORWARDER(log);
  EXPECT_UNARY_FORWARDER(log1p);
  EXPECT_UNARY_FORWARDER(sqrt);
  EXPECT_UNARY_FORWARDER(reciprocal);
  EXPECT_UNARY_FORWARDER(sigmoid);
  EXPECT_UNARY_FORWARDER(tanh);
  EXPECT_UNARY_FORWARDER(sin);
  EXPECT_UNARY_FORWARDER(cos);
  EXPECT_UNARY_FORWARDER(sign);
  EXPECT_UNARY_FORWARDER(floor);
  EXPECT_UNARY_FORWARDER(ceil);
  EXPECT_UNARY_FORWARDER(round);
  EXPECT_UNARY_FORWARDER(trunc);
#undef EXPECT_UNARY_FORWARDER
  // Spot values, so that the macro cannot pass by comparing two wrong ops.
  const Fast f = make_fast();
  EXPECT_TRUE(torch::equal(f.neg().a(), torch::tensor({-0.25f, -1.5f})));
  EXPECT_TRUE(torch::equal(f.floor().b(), torch::tensor({2.0f, 0.0f})));
  EXPECT_TRUE(
      torch::allclose(f.reciprocal().a(), torch::tensor({4.0f, 2.0f / 3})));
}

TEST(TensorClassTest, DetachHasItsInPlaceForm) {
  Fast f = make_fast().apply(
      [](const at::Tensor& t) { return t.clone().requires_grad_(true); });
  ASSERT_TRUE(f.a().requires_grad());
  EXPECT_FALSE(f.detach().a().requires_grad());
  EXPECT_TRUE(f.a().requires_grad());
  static_assert(std::is_same_v<decltype(f.detach_()), Fast&>);
  EXPECT_EQ(&f.detach_(), &f);
  EXPECT_FALSE(f.a().requires_grad());
  EXPECT_FALSE(f.b().requires_grad());
}

TEST(TensorClassTest, GeneratedForwardersOfFrozenClassesReturnLockedInstances) {
  Frozen f({{"x", torch::tensor({0.5f, 2.0f})}}, {2});
  static_assert(std::is_same_v<decltype(f.sin()), Frozen>);
  EXPECT_TRUE(f.sin().is_locked());
  EXPECT_TRUE(f.pow(2).is_locked());
  EXPECT_TRUE(f.clamp_min(1).is_locked());
  EXPECT_TRUE(f.view({2, 1}).is_locked());
  // In-place ops write the tensors, which a frozen instance allows.
  f.mul_(2).sqrt_();
  EXPECT_TRUE(torch::allclose(f.x(), torch::tensor({1.0f, 2.0f})));
}

TEST(TensorClassTest, EveryInPlaceArithmeticOpTakesAStructATensorOrAScalar) {
  Inner a({{"x", torch::tensor({1.0f, 4.0f})}}, {2});
  Inner b({{"x", torch::tensor({3.0f, 2.0f})}}, {2});
  const at::Tensor t = torch::tensor({10.0f, 20.0f});

  Inner c = a.clone();
  static_assert(std::is_same_v<decltype(c.sub_(b)), Inner&>);
  EXPECT_EQ(&c.sub_(b), &c);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({-2.0f, 2.0f})));
  c.sub_(t, /*alpha=*/0.5).sub_(1);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({-8.0f, -9.0f})));

  c = a.clone();
  EXPECT_EQ(&c.div_(b), &c);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({1.0f / 3, 2.0f})));
  c = a.clone().div_(t).div_(0.5);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({0.2f, 0.4f})));

  c = a.clone().add_(2, /*alpha=*/3).add_(t);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({17.0f, 30.0f})));
  c = a.clone().mul_(b).mul_(t);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({30.0f, 160.0f})));
  c = a.clone().pow_(b).pow_(0.5);
  EXPECT_TRUE(torch::allclose(c.x(), torch::tensor({1.0f, 4.0f})));
  c = a.clone().pow_(torch::tensor({3.0f, 0.0f}));
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({1.0f, 1.0f})));
}

TEST(TensorClassTest, OutOfPlaceArithmeticTakesATensorAndPow) {
  Inner a({{"x", torch::tensor({1.0f, 4.0f})}}, {2});
  Inner b({{"x", torch::tensor({3.0f, 2.0f})}}, {2});
  const at::Tensor t = torch::tensor({10.0f, 20.0f});
  static_assert(std::is_same_v<decltype(a.add(t)), Inner>);
  EXPECT_TRUE(
      torch::equal(a.add(t, /*alpha=*/2).x(), torch::tensor({21.0f, 44.0f})));
  EXPECT_TRUE(torch::equal(a.sub(t).x(), torch::tensor({-9.0f, -16.0f})));
  EXPECT_TRUE(torch::equal(a.mul(t).x(), torch::tensor({10.0f, 80.0f})));
  EXPECT_TRUE(torch::equal(a.div(t).x(), torch::tensor({0.1f, 0.2f})));
  EXPECT_TRUE(torch::equal(a.pow(b).x(), torch::tensor({1.0f, 16.0f})));
  EXPECT_TRUE(torch::equal(a.pow(2).x(), torch::tensor({1.0f, 16.0f})));
  EXPECT_TRUE(torch::equal(a.pow(t.div(10)).x(), torch::tensor({1.0f, 16.0f})));
  EXPECT_TRUE(torch::equal((a + t).x(), torch::tensor({11.0f, 24.0f})));
  EXPECT_TRUE(torch::equal((a * t).x(), torch::tensor({10.0f, 80.0f})));
  // A tensor operand broadcasts against the batch size, as in TensorDict.
  Inner wide = a.add(torch::ones({3, 1}));
  EXPECT_EQ(wide.batch_size(), c10::IntArrayRef({3, 2}));
  EXPECT_TRUE(torch::equal(wide.x()[2], torch::tensor({2.0f, 5.0f})));
}

TEST(TensorClassTest, CompoundAssignmentOperatorsWorkInPlace) {
  Inner a({{"x", torch::tensor({1.0f, 4.0f})}}, {2});
  Inner b({{"x", torch::tensor({3.0f, 2.0f})}}, {2});
  Inner c = a.clone();
  static_assert(std::is_same_v<decltype(c += b), Inner&>);
  EXPECT_EQ(&(c += b), &c);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({4.0f, 6.0f})));
  c -= 1;
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({3.0f, 5.0f})));
  c *= torch::tensor({2.0f, 3.0f});
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({6.0f, 15.0f})));
  c /= b;
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({2.0f, 7.5f})));
  // Copies alias: the compound operators write through every handle.
  Inner alias = c;
  alias += 1;
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({3.0f, 8.5f})));
}

TEST(TensorClassTest, EveryOrderingComparisonTakesAStructOrAScalar) {
  Inner a({{"x", torch::tensor({1.0f, 4.0f, 2.0f})}}, {3});
  Inner b({{"x", torch::tensor({3.0f, 2.0f, 2.0f})}}, {3});
  static_assert(std::is_same_v<decltype(a <= 2), Inner>);
  EXPECT_TRUE(torch::equal((a <= 2).x(), torch::tensor({true, false, true})));
  EXPECT_TRUE(torch::equal((a >= 2).x(), torch::tensor({false, true, true})));
  EXPECT_TRUE(torch::equal((a < 2).x(), torch::tensor({true, false, false})));
  EXPECT_TRUE(torch::equal((a > 2).x(), torch::tensor({false, true, false})));
  EXPECT_TRUE(torch::equal((a <= b).x(), torch::tensor({true, false, true})));
  EXPECT_TRUE(torch::equal((a > b).x(), torch::tensor({false, true, false})));
  EXPECT_TRUE(torch::equal((a == b).x(), torch::tensor({false, false, true})));
  EXPECT_TRUE(torch::equal((a != 4).x(), torch::tensor({true, false, true})));
}

TEST(TensorClassTest, ClampBoundsHaveInPlaceForms) {
  Inner a({{"x", torch::tensor({-1.0f, 0.5f, 3.0f})}}, {3});
  EXPECT_TRUE(
      torch::equal(a.clamp_min(0).x(), torch::tensor({0.0f, 0.5f, 3.0f})));
  EXPECT_TRUE(
      torch::equal(a.clamp_max(1).x(), torch::tensor({-1.0f, 0.5f, 1.0f})));
  Inner c = a.clone();
  static_assert(std::is_same_v<decltype(c.clamp_min_(0)), Inner&>);
  EXPECT_EQ(&c.clamp_min_(0), &c);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({0.0f, 0.5f, 3.0f})));
  EXPECT_EQ(&c.clamp_max_(1), &c);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({0.0f, 0.5f, 1.0f})));
  c = a.clone();
  EXPECT_EQ(&c.clamp_(std::nullopt, 2), &c);
  EXPECT_TRUE(torch::equal(c.x(), torch::tensor({-1.0f, 0.5f, 2.0f})));
  EXPECT_THROWS_WITH(
      c.clamp_(std::nullopt, std::nullopt),
      c10::Error,
      "At least one of 'min' or 'max' must not be None");
}

TEST(TensorClassTest, EveryCastOfTensorDictIsForwarded) {
  Inner a({{"x", torch::tensor({1.5f, -2.0f})}}, {2});
  static_assert(std::is_same_v<decltype(a.bfloat16()), Inner>);
  EXPECT_EQ(a.bfloat16().x().scalar_type(), torch::kBFloat16);
  EXPECT_EQ(a.int32().x().scalar_type(), torch::kInt);
  EXPECT_TRUE(torch::equal(a.int32().x(), torch::tensor({1, -2}, torch::kInt)));
  EXPECT_EQ(a.float32().x().scalar_type(), torch::kFloat);
  EXPECT_EQ(a.boolean().x().scalar_type(), torch::kBool);
}

TEST(TensorClassTest, NamedComparisonsAndLogicalOpsAreForwarded) {
  Inner a({{"x", torch::tensor({1.0f, 4.0f, 2.0f})}}, {3});
  Inner b({{"x", torch::tensor({3.0f, 2.0f, 2.0f})}}, {3});
  static_assert(std::is_same_v<decltype(a.le(b)), Inner>);
  EXPECT_TRUE(torch::equal(a.lt(b).x(), torch::tensor({true, false, false})));
  EXPECT_TRUE(torch::equal(a.le(2).x(), torch::tensor({true, false, true})));
  EXPECT_TRUE(torch::equal(a.gt(2).x(), torch::tensor({false, true, false})));
  EXPECT_TRUE(torch::equal(a.ge(b).x(), torch::tensor({false, true, true})));
  const Inner lt = a < 2;
  const Inner ge = a >= b;
  EXPECT_TRUE(torch::equal(lt.logical_not().x(), (a >= 2).x()));
  EXPECT_TRUE(
      torch::equal(lt.logical_or(ge).x(), torch::tensor({true, true, true})));
  EXPECT_TRUE(torch::equal(
      lt.logical_and(ge).x(), torch::tensor({false, false, false})));
}

TEST(TensorClassTest, BroadcastGradAndMemoryForwardersReturnTheStruct) {
  Inner a({{"x", torch::tensor({1.0f, 4.0f})}}, {2});
  Inner wide({{"x", torch::zeros({3, 2})}}, {3, 2});
  static_assert(std::is_same_v<decltype(a.broadcast_to({3, 2})), Inner>);
  EXPECT_EQ(a.broadcast_to({3, 2}).batch_size(), c10::IntArrayRef({3, 2}));
  EXPECT_EQ(a.expand_as(wide).x().sizes(), c10::IntArrayRef({3, 2}));
  EXPECT_TRUE(a.is_contiguous());
  EXPECT_FALSE(a.expand_as(wide).is_contiguous());
  EXPECT_EQ(&a.requires_grad_(), &a);
  EXPECT_TRUE(a.x().requires_grad());
  a.requires_grad_(false);
  EXPECT_FALSE(a.x().requires_grad());
  EXPECT_EQ(&a.share_memory_(), &a);
  EXPECT_TRUE(a.is_shared());
}

// Every arithmetic, comparison and reduction op that TensorDict declares
// (read from its header, so a new op there fails this test until
// TENSORDICT_TENSORCLASS_OPS forwards it) is a TensorClass member.
TEST(TensorClassTest, EveryTensorDictMathOpHasAForwarder) {
  const auto header =
      std::filesystem::path(__FILE__).parent_path().parent_path() / "include" /
      "tensordict" / "tensor_dict.h";
  const std::string text = read_text(header.string());
  const size_t begin = text.find("// --- arithmetic and comparison");
  const size_t end = text.find("// --- locking");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::string section = text.substr(begin, end - begin);
  auto is_member = [](std::string_view name) {
    for (std::string_view member :
         tensordict::detail::kTensorClassMemberNames) {
      if (member == name) {
        return true;
      }
    }
    for (std::string_view op : tensordict::detail::kTensorClassOperatorNames) {
      if (op == name) {
        return true;
      }
    }
    return false;
  };
  // `reduce` gives one tensor, not a dict, so it has no TensorClass form.
  const std::set<std::string> not_forwarded = {"reduce"};
  std::set<std::string> seen;
  std::istringstream lines(section);
  std::string line;
  const std::regex declaration(
      R"(^\s*(?:\[\[nodiscard\]\]\s*)?(?:TensorDict&?|bool|at::Tensor)\s+(operator\S+|\w+)\()");
  for (; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, declaration)) {
      const std::string name = match[1];
      if (not_forwarded.count(name) == 0) {
        seen.insert(name);
        EXPECT_TRUE(is_member(name))
            << "TensorDict::" << name << " has no TensorClass forwarder";
      }
    }
  }
  // The ops of TensorDict's op table are declared by expanding it, not
  // spelled out in the header: take their names from the table.
#define TC_TEST_OP_NAMES(kind, name) TC_TEST_OP_NAMES_##kind(name)
#define TC_TEST_OP_NAMES_1(name) #name,
#define TC_TEST_OP_NAMES_2(name) #name, #name "_",
#define TC_TEST_OP_NAMES_UNARY_PAIR TC_TEST_OP_NAMES_2
#define TC_TEST_OP_NAMES_ALPHA_PAIR TC_TEST_OP_NAMES_2
#define TC_TEST_OP_NAMES_BINARY_PAIR TC_TEST_OP_NAMES_2
#define TC_TEST_OP_NAMES_BOUND_PAIR TC_TEST_OP_NAMES_2
#define TC_TEST_OP_NAMES_COMPARE TC_TEST_OP_NAMES_1
#define TC_TEST_OP_NAMES_LOGICAL TC_TEST_OP_NAMES_1
#define TC_TEST_OP_NAMES_REDUCE TC_TEST_OP_NAMES_1
  for (const char* name : {TENSORDICT_DICT_OPS(TC_TEST_OP_NAMES)}) {
    seen.insert(name);
    EXPECT_TRUE(is_member(name))
        << "TensorDict::" << name << " has no TensorClass forwarder";
  }
#undef TC_TEST_OP_NAMES_REDUCE
#undef TC_TEST_OP_NAMES_LOGICAL
#undef TC_TEST_OP_NAMES_COMPARE
#undef TC_TEST_OP_NAMES_BOUND_PAIR
#undef TC_TEST_OP_NAMES_BINARY_PAIR
#undef TC_TEST_OP_NAMES_ALPHA_PAIR
#undef TC_TEST_OP_NAMES_UNARY_PAIR
#undef TC_TEST_OP_NAMES_2
#undef TC_TEST_OP_NAMES_1
#undef TC_TEST_OP_NAMES
  EXPECT_NE(section.find("TENSORDICT_DICT_MATH_OPS("), std::string::npos);
  EXPECT_NE(section.find("TENSORDICT_DICT_REDUCE_OPS("), std::string::npos);
  // The scan and the table found the ops (a changed header layout must not
  // pass).
  for (const char* name :
       {"add",
        "sub_",
        "div_",
        "le",
        "ge",
        "logical_and",
        "trunc_",
        "clamp_max_",
        "operator<=",
        "operator/=",
        "sum",
        "any"}) {
    EXPECT_EQ(seen.count(name), 1u) << name;
  }
}

// --- the reserved field names come from the same list ------------------------

namespace {

// True when `T` has a member named `name`, however overloaded: a class
// deriving from `T` and from a struct with an `int name` finds the name
// twice, which makes `&Probe::name` ill-formed.
#define TC_TEST_DEFINE_MEMBER_PROBE(name)                                     \
  struct ProbeFallback_##name {                                               \
    int name;                                                                 \
  };                                                                          \
  template <typename T>                                                       \
  struct ProbeMixed_##name : T, ProbeFallback_##name {};                      \
  template <typename T, typename = void>                                      \
  struct HasMember_##name : std::true_type {};                                \
  template <typename T>                                                       \
  struct HasMember_##name<                                                    \
      T,                                                                      \
      std::void_t<decltype(&ProbeMixed_##name<T>::name)>> : std::false_type { \
  };

#define TC_TEST_PROBE(kind, name) TC_TEST_PROBE_##kind(name)
#define TC_TEST_PROBE_MEMBER(name)              \
  TC_TEST_DEFINE_MEMBER_PROBE(name)             \
  static_assert(                                \
      HasMember_##name<Inner>::value,           \
      "TENSORDICT_TENSORCLASS_OPS lists " #name \
      " as a MEMBER, but TensorClass has no such member");
#define TC_TEST_PROBE_PYTHON(name)
#define TC_TEST_PROBE_COPY(name)
#define TC_TEST_PROBE_INPLACE(name)
#define TC_TEST_PROBE_SIZES(name)
#define TC_TEST_PROBE_DIMS(name)
#define TC_TEST_PROBE_REDUCE(name)
#define TC_TEST_PROBE_UNARY_PAIR(name)
#define TC_TEST_PROBE_ALPHA_PAIR(name)
#define TC_TEST_PROBE_BINARY_PAIR(name)
#define TC_TEST_PROBE_BOUND_PAIR(name)
#define TC_TEST_PROBE_COMPARE(name)
#define TC_TEST_PROBE_LOGICAL(name)
#define TC_TEST_PROBE_QUERY(name)
#define TC_TEST_PROBE_SUBSET(name)
#define TC_TEST_PROBE_KEYS(name)
#define TC_TEST_PROBE_MUTATE(name)
#define TC_TEST_PROBE_TAKE(name)
#define TC_TEST_PROBE_CHECKED(name)
#define TC_TEST_PROBE_FACTORY(name)

// Every MEMBER entry of the list names a member of TensorClass (checked at
// compile time, one static_assert per entry).
TENSORDICT_TENSORCLASS_OPS(TC_TEST_PROBE)

// The probe also tells a name that is not a member: `cuda` is a PYTHON entry
// (reserved, no C++ member), and `unsqueeze_` is no name at all; `keys`, a
// generated template, is a member.
TC_TEST_DEFINE_MEMBER_PROBE(cuda)
TC_TEST_DEFINE_MEMBER_PROBE(keys)
TC_TEST_DEFINE_MEMBER_PROBE(unsqueeze_)
static_assert(!HasMember_cuda<Inner>::value);
static_assert(HasMember_keys<Inner>::value);
static_assert(!HasMember_unsqueeze_<Inner>::value);
TC_TEST_DEFINE_MEMBER_PROBE(squeeze)
static_assert(HasMember_squeeze<Inner>::value);

constexpr bool reserved_names_are_unique() {
  const auto& names = tensordict::detail::kReservedFieldNames;
  constexpr size_t count = std::size(tensordict::detail::kReservedFieldNames);
  for (size_t i = 0; i < count; ++i) {
    for (size_t j = i + 1; j < count; ++j) {
      if (names[i] == names[j]) {
        return false;
      }
    }
  }
  return true;
}

#undef TC_TEST_PROBE
#undef TC_TEST_PROBE_MEMBER
#undef TC_TEST_DEFINE_MEMBER_PROBE

}  // namespace

TEST(TensorClassTest, ReservedNamesAreTheListedMembersAndTheirInPlaceForms) {
  static_assert(reserved_names_are_unique());
  // Generated pairs reserve both forms; hand-written members and Python's
  // TensorDict names are reserved too.
  for (const char* name :
       {"sub_",   "div_",       "pow",       "pow_",       "sin",    "sin_",
        "trunc_", "detach_",    "clamp_min", "clamp_max_", "clamp_", "bfloat16",
        "int32",  "lock_",      "zero_",     "view",       "flip",   "sum",
        "index",  "state_dict", "keys",      "float"}) {
    EXPECT_TRUE(tensordict::detail::is_reserved_field_name(name)) << name;
  }
  for (const char* name :
       {"obs", "x", "reward", "data", "sin__", "lt_", "", "Sum"}) {
    EXPECT_FALSE(tensordict::detail::is_reserved_field_name(name)) << name;
  }
}

TEST(TensorClassTest, EveryNameReservedBeforeTheOpListIsStillReserved) {
  // The hand-kept list that TENSORDICT_TENSORCLASS_OPS replaced.
  for (const char* name :
       {"all",
        "any",
        "apply",
        "batch_dims",
        "batch_size",
        "bfloat16",
        "boolean",
        "cat",
        "chunk",
        "clone",
        "contiguous",
        "copy",
        "copy_",
        "cpu",
        "cuda",
        "del_",
        "detach",
        "detach_",
        "device",
        "dim",
        "double",
        "empty",
        "exclude",
        "expand",
        "fields",
        "fill_",
        "flatten",
        "flip",
        "float",
        "float32",
        "float64",
        "from_dict",
        "from_tensordict",
        "gather",
        "get",
        "half",
        "index",
        "index_put_",
        "int",
        "int32",
        "is_locked",
        "is_memmap",
        "is_none",
        "is_shared",
        "items",
        "keys",
        "load",
        "load_memmap",
        "load_memmap_",
        "lock_",
        "masked_fill",
        "memmap",
        "memmap_",
        "named_apply",
        "names",
        "narrow",
        "ndim",
        "numel",
        "permute",
        "pop",
        "repeat",
        "repr",
        "reshape",
        "save",
        "saved_path",
        "select",
        "set",
        "shape",
        "size",
        "split",
        "squeeze",
        "stack",
        "tensordict",
        "to",
        "to_dict",
        "to_tensordict",
        "transpose",
        "unbind",
        "unflatten",
        "unlock_",
        "unsqueeze",
        "update",
        "values",
        "view",
        "where",
        "zero_",
        "state_dict",
        "tensor_class_info",
        "load_state_dict",
        "sum",
        "mean",
        "std",
        "var",
        "prod",
        "amax",
        "amin",
        "max",
        "min",
        "rename",
        "rename_",
        "rename_by_map",
        "refine_names",
        "pad",
        "roll",
        "repeat_interleave",
        "masked_fill_",
        "add",
        "sub",
        "mul",
        "div",
        "add_",
        "mul_",
        "abs",
        "exp",
        "log",
        "sqrt",
        "clamp",
        "masked_select",
        "is_same",
        "apply_"}) {
    EXPECT_TRUE(tensordict::detail::is_reserved_field_name(name)) << name;
  }
}

namespace {

struct Signal : TensorClass<Signal, ClassFlags::kShadow> {
  TENSORDICT_FIELDS(Signal, sin, x)
};

}  // namespace

TEST(TensorClassTest, ShadowAllowsAFieldNamedAfterAGeneratedForwarder) {
  Signal s({{"sin", torch::ones({2})}, {"x", torch::zeros({2})}}, {2});
  at::Tensor field = s.sin();
  EXPECT_TRUE(torch::equal(field, torch::ones({2})));
  // The other forwarders are still there.
  EXPECT_TRUE(torch::equal(s.cos().x(), torch::ones({2})));
}

// --- TensorDict's members with TensorDict's arguments (QUERY to TAKE) ------

namespace {

struct Holder : TensorClass<Holder> {
  TENSORDICT_FIELDS(Holder, a, (Inner, inner), (std::optional<std::string>, s))
};

Holder make_holder() {
  return Holder(
      {{"a", torch::tensor({1.0f, 2.0f})},
       {"inner", Inner({{"x", torch::tensor({3.0f, 4.0f})}}, {2})},
       {"s", "hi"}},
      {2});
}

// Code written once for a TensorDict or an instance: no `.tensordict()`.
template <typename Dict>
std::vector<std::string> generic_edit(Dict& dict, const Dict& other) {
  std::vector<std::string> out;
  for (const NestedKey& key : dict.keys(/*include_nested=*/true, true, true)) {
    out.push_back(key.to_string());
  }
  out.push_back(std::to_string(dict.values().size()));
  out.push_back(std::to_string(dict.items().size()));
  out.push_back(std::to_string(dict.select({"a"}).keys().size()));
  out.push_back(std::to_string(dict.exclude({"a"}).keys().size()));
  out.push_back(std::to_string(dict.empty().keys().size()));
  dict.update(other);
  dict.fill_("a", 5.0);
  const Value popped = dict.pop("a");
  out.push_back(std::to_string(popped.tensor().sum().template item<float>()));
  dict.del_({"inner"});
  out.push_back(std::to_string(dict.keys().size()));
  const auto sd = dict.state_dict(StateDictOptions().prefix("p."));
  out.push_back(std::to_string(sd.size()));
  return out;
}

}  // namespace

TEST(TensorClassTest, KeysValuesAndItemsAreTheDicts) {
  const Holder h = make_holder();
  EXPECT_EQ(h.keys(), h.tensordict().keys());
  EXPECT_EQ(h.keys(true, true, true), h.tensordict().keys(true, true, true));
  ASSERT_EQ(h.values().size(), 3u);
  EXPECT_TRUE(torch::equal(h.values()[0].tensor(), h.a()));
  const auto items = h.items(/*include_nested=*/true, /*leaves_only=*/true);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[1].first, NestedKey({"inner", "x"}));
  EXPECT_TRUE(torch::equal(items[1].second.tensor(), h.inner().x()));
}

TEST(TensorClassTest, SelectExcludeAndEmptyGiveTheClassWithTheOthersUnset) {
  const Holder h = make_holder();
  // As Python: `C(fields={a: f32[], inner: None, s: None})`.
  const Holder selected = h.select({"a"});
  EXPECT_TRUE(selected.a().is_same(h.a()));
  EXPECT_TRUE(selected.is_none("inner"));
  EXPECT_TRUE(selected.is_none("s"));
  EXPECT_THROW((void)h.select({"nope"}), KeyError);
  EXPECT_TRUE(h.select({"a", "nope"}, /*strict=*/false).is_none("inner"));
  const Holder excluded = h.exclude(std::vector<NestedKey>{"a", "s"});
  EXPECT_TRUE(excluded.is_none("a"));
  EXPECT_TRUE(torch::equal(excluded.inner().x(), h.inner().x()));
  const Holder empty = h.empty();
  EXPECT_TRUE(empty.is_none("a"));
  EXPECT_EQ(empty.batch_size(), h.batch_size());
  EXPECT_EQ(h.empty(/*recurse=*/true).keys(), std::vector<NestedKey>{"inner"});
}

TEST(TensorClassTest, UpdatePopDelAndFillEditTheFields) {
  Holder h = make_holder();
  Holder other = make_holder();
  other.set("a", torch::tensor({7.0f, 8.0f}));
  EXPECT_EQ(&h.update(other), &h);  // an instance passes as its dict
  EXPECT_TRUE(torch::equal(h.a(), torch::tensor({7.0f, 8.0f})));
  EXPECT_EQ(&h.fill_("a", 2.5), &h);
  EXPECT_TRUE(torch::equal(h.a(), torch::full({2}, 2.5f)));
  const Value popped = h.pop("a");
  EXPECT_TRUE(torch::equal(popped.tensor(), torch::full({2}, 2.5f)));
  EXPECT_TRUE(h.is_none("a"));
  EXPECT_FALSE(
      h.pop("a", Value(torch::zeros({2}))).tensor().sum().item<float>());
  EXPECT_EQ(&h.del_("inner"), &h);
  EXPECT_TRUE(h.is_none("inner"));
  EXPECT_THROW(h.del_("inner"), KeyError);
  // A locked (or frozen) instance refuses edits, as the dict does.
  Holder locked = make_holder();
  locked.lock_();
  EXPECT_THROW(locked.del_("a"), std::exception);
  EXPECT_FALSE(locked.is_none("a"));
}

TEST(TensorClassTest, NamedApplyAndConsolidateGiveTheClass) {
  const Holder h = make_holder();
  const Holder doubled =
      h.named_apply([](const NestedKey& key, const at::Tensor& t) {
        return key == NestedKey({"inner", "x"}) ? t * 2 : t;
      });
  EXPECT_TRUE(torch::equal(doubled.inner().x(), torch::tensor({6.0f, 8.0f})));
  EXPECT_TRUE(torch::equal(doubled.a(), h.a()));
  EXPECT_EQ(doubled.s(), std::optional<std::string>("hi"));
  const Holder packed = h.consolidate();
  EXPECT_TRUE(packed.is_consolidated());
  EXPECT_TRUE(torch::equal(packed.inner().x(), h.inner().x()));
  EXPECT_EQ(packed.s(), std::optional<std::string>("hi"));
}

TEST(TensorClassTest, GenericCodeRunsOnADictAndOnAnInstance) {
  TensorDict td = make_holder().to_tensordict();
  const TensorDict td_other = make_holder().to_tensordict();
  Holder h = make_holder();
  const Holder h_other = make_holder();
  // The class keeps `s` out of the state dict (its metadata holds it).
  const std::vector<std::string> expected{
      "'a'", "('inner', 'x')", "3", "3", "1", "2", "0", "10.000000", "1", "0"};
  EXPECT_EQ(generic_edit(td, td_other), expected);
  EXPECT_EQ(generic_edit(h, h_other), expected);
}

// --- the rest of TensorDict's API, generic over a dict and an instance -----

namespace {

std::string str(const at::Tensor& t) {
  std::ostringstream out;
  for (float v : std::vector<float>(
           t.to(torch::kFloat).contiguous().data_ptr<float>(),
           t.to(torch::kFloat).contiguous().data_ptr<float>() + t.numel())) {
    out << v << ' ';
  }
  return out.str();
}

// Each member of the list, called as TensorDict spells it; the results are
// written as text, so a dict and an instance can be compared.
template <typename Dict>
std::vector<std::string> generic_rest(Dict& dict, const Dict& other) {
  std::vector<std::string> out;
  for (const NestedKey& key : dict.flatten_keys().keys()) {
    out.push_back(key.to_string());
  }
  out.push_back(dict.flatten_keys("/").keys()[1].to_string());
  out.push_back(std::to_string(dict.unflatten_keys().keys(true).size()));
  out.push_back(std::to_string(dict.size()));
  out.push_back(
      std::to_string(dict.size(0)) + "," + std::to_string(dict.size(-1)) +
      " dim " + std::to_string(dict.dim()));
  out.push_back(dict.is_empty() ? "empty" : "not empty");
  for (const Item& item : dict.to_dict()) {
    out.push_back(
        item.key().to_string() +
        (item.value() == nullptr
             ? " nested"
             : " " + std::to_string(static_cast<int>(item.value()->kind()))));
  }
  out.push_back(dict.get_non_tensor("s").dump());
  dict.set_non_tensor("s", Json("yo"));
  out.push_back(dict.get_non_tensor("s").dump());
  out.push_back(dict.get_non_tensor("nope", Json(7)).dump());
  // `a` aliases the field: the in-place writes show through it.
  const at::Tensor a = dict.values()[0].tensor();
  const std::string before = str(a);
  dict.set_("a", torch::tensor({5.0f, 6.0f}));
  dict.set_({"inner", "x"}, torch::tensor({7.0f, 8.0f}));
  out.push_back(before + str(a) + str(dict.flatten_keys().get("inner.x")));
  dict.update_(other);
  out.push_back(str(a) + (a.is_same(dict.values()[0].tensor()) ? "same" : ""));
  out.push_back(str(dict.setdefault("a", torch::zeros({2})).tensor()));
  StateDict destination;
  destination.insert("z", torch::zeros({1}));
  StateDict& written =
      dict.state_dict(destination, StateDictOptions().prefix("p."));
  out.push_back(&written == &destination ? "destination" : "other");
  for (const auto& key : destination.keys()) {
    out.push_back(key);
  }
  const auto twice = [](const TensorDict& chunk) {
    return chunk.select({"a"}).mul(2);
  };
  const TensorDict mapped =
      dict.map(twice, MapOptions().num_workers(2).chunksize(1));
  out.push_back(str(mapped.get("a")));
  for (const TensorDict& piece :
       dict.map_iter(twice, MapOptions().num_workers(2).chunksize(1))) {
    out.push_back(str(piece.get("a")));
  }
  dict.clear();
  out.push_back(dict.is_empty() ? "empty" : "not empty");
  out.push_back(std::to_string(dict.size()));
  return out;
}

}  // namespace

TEST(TensorClassTest, TheRestOfTheDictApiRunsOnADictAndOnAnInstance) {
  TensorDict td = make_holder().to_tensordict();
  const TensorDict td_other = make_holder().to_tensordict() * 3;
  Holder h = make_holder();
  const Holder h_other = make_holder() * 3;
  const std::string leaf =
      std::to_string(static_cast<int>(Value(torch::zeros({})).kind()));
  const std::string text =
      std::to_string(static_cast<int>(Value(NonTensorData("x")).kind()));
  // Each group ends with the members it comes from.
  const std::vector<std::string> expected{
      "'a'",
      "'inner.x'",
      "'s'",        // flatten_keys
      "'inner/x'",  // flatten_keys("/")
      "4",          // unflatten_keys
      "3",
      "2,2 dim 1",
      "not empty",  // size, size(dim), dim, is_empty
      "'a' " + leaf,
      "'inner' nested",
      "'s' " + text,  // to_dict
      "\"hi\"",
      "\"yo\"",
      "7",             // get_non_tensor, set_non_tensor
      "1 2 5 6 7 8 ",  // set_
      "3 6 same",      // update_
      "3 6 ",          // setdefault
      "destination",
      "z",
      "p.a",
      "p.inner.x",  // state_dict(destination)
      "6 12 ",      // map
      "6 ",
      "12 ",  // map_iter
      "empty",
      "0"};  // clear
  EXPECT_EQ(generic_rest(td, td_other), expected);
  EXPECT_EQ(generic_rest(h, h_other), expected);
}

TEST(TensorClassTest, TheForwardedMembersKeepTheClassRules) {
  Holder h = make_holder();
  EXPECT_EQ(h.dim(), 1);
  EXPECT_EQ(Holder().dim(), 0);
  // size() is TensorDict's: the set fields; size(dim) is Python's.
  h.set("s", nullptr);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_THROW((void)h.size(1), c10::IndexError);
  // flatten_keys gives the flat TensorDict (Python 0.15.3 raises
  // ValueError: "Keys from the tensordict ({'a', 'inner.x', 's'}) must
  // correspond to the class attributes"); unflatten_keys gives the class.
  static_assert(std::is_same_v<decltype(h.flatten_keys()), TensorDict>);
  static_assert(std::is_same_v<decltype(h.unflatten_keys()), Holder>);
  EXPECT_TRUE(h.flatten_keys().get("inner.x").is_same(h.inner().x()));
  // setdefault: a set field is returned, an unset one set by the class's
  // rules (Python also adds a name that is not a field: KeyError here).
  EXPECT_TRUE(h.setdefault("a", torch::zeros({2})).tensor().is_same(h.a()));
  EXPECT_EQ(h.setdefault("s", "dflt").non_tensor_data().data(), Json("dflt"));
  EXPECT_EQ(h.s(), std::optional<std::string>("dflt"));
  EXPECT_THROWS_WITH(
      h.setdefault("bogus", torch::zeros({2})),
      KeyError,
      "Holder has no field 'bogus'");
  h.set("s", nullptr);
  EXPECT_THROWS_WITH(
      h.setdefault("s", nullptr),
      c10::ValueError,
      "setdefault: the field 's' of Holder is unset and the default is None");
  // set_non_tensor keeps to the fields and their kinds (Python sets any
  // name, and turns a tensor field into a string).
  EXPECT_THROW(h.set_non_tensor("bogus", Json("x")), KeyError);
  EXPECT_THROW(h.set_non_tensor("a", Json("x")), c10::TypeError);
  EXPECT_TRUE(h.a().defined());
  // set_ and update_ write in place; a missing entry is TensorDict's
  // KeyError (Python: 'key "s" not found in TensorDict ...').
  EXPECT_THROW(h.set_("s", torch::zeros({2})), KeyError);
  // clear unsets every field, as Python's (which prints them as None).
  h.clear();
  EXPECT_TRUE(h.is_none("a"));
  EXPECT_TRUE(h.is_none("inner"));
  EXPECT_THROW((void)h.a(), c10::ValueError);
  // A frozen instance is locked: clear refuses.
  Frozen frozen({{"x", torch::zeros({2})}}, {2});
  EXPECT_THROW(frozen.clear(), c10::Error);
  EXPECT_FALSE(frozen.is_none("x"));
}

namespace {

struct Linear : TensorClass<Linear> {
  TENSORDICT_FIELDS(Linear, weight, bias)
};

// from_module / to_module, called as TensorDict spells them.
template <typename Dict>
std::vector<std::string> generic_module(torch::nn::Module& module) {
  std::vector<std::string> out;
  const Dict params = Dict::from_module(module);
  out.push_back(std::to_string(params.keys().size()));
  const Dict zeros =
      params.apply([](const at::Tensor& t) { return torch::zeros_like(t); });
  const Dict previous = zeros.to_module(module);
  out.push_back(str(module.named_parameters()["bias"]));
  out.push_back(str(previous.values()[1].tensor()));
  (void)previous.to_module(module);
  out.push_back(str(module.named_parameters()["bias"]));
  return out;
}

}  // namespace

TEST(TensorClassTest, FromModuleAndToModuleGoThroughTheClass) {
  torch::nn::Linear linear(3, 2);
  {
    torch::NoGradGuard no_grad;
    linear->bias.copy_(torch::tensor({1.0f, 2.0f}));
  }
  // Python 0.15.3: `Lin.from_module(nn.Linear(3, 2))` is a Lin (weight,
  // bias), and `to_module` returns the previous values as a Lin.
  static_assert(std::is_same_v<decltype(Linear::from_module(*linear)), Linear>);
  const std::vector<std::string> expected{"2", "0 0 ", "1 2 ", "1 2 "};
  EXPECT_EQ(generic_module<TensorDict>(*linear), expected);
  EXPECT_EQ(generic_module<Linear>(*linear), expected);
  // A class whose fields are not the module's: Python's ValueError.
  EXPECT_THROW((void)Inner::from_module(*linear), c10::ValueError);
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

TEST(TensorClassTest, MemmapAsyncInPlaceMapsTheInstance) {
  TempDir tmp;
  const std::string dir = tmp / "async_";
  Registered p =
      make_registered(torch::full({2, 3}, 2.0f), torch::ones({2}), "hi");
  auto saving = p.memmap_async_(MemmapOptions(dir));
  static_assert(std::is_same_v<decltype(saving), std::future<Registered>>);
  const Registered done = saving.get();
  EXPECT_TRUE(done.is_same(p));
  EXPECT_TRUE(p.is_memmap());
  EXPECT_TRUE(p.is_locked());
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(p.pos()));
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(p.inner().x()));
  EXPECT_EQ(
      read_text(dir + "/meta.json"),
      "{\"_type\":\"<class 'tests.Registered'>\"}");
  const Registered loaded = Registered::load(dir);
  EXPECT_TRUE(torch::equal(loaded.pos(), torch::full({2, 3}, 2.0f)));
  EXPECT_EQ(loaded.label(), "hi");
  // An error is thrown by get(), and the instance is not memmapped.
  Registered other =
      make_registered(torch::ones({2, 3}), torch::ones({2}), "x");
  auto refused = other.memmap_async_(MemmapOptions(dir).existsok(false));
  EXPECT_THROW(refused.get(), c10::Error);
  EXPECT_FALSE(other.is_memmap());
}

TEST(TensorClassTest, LoadMemmapIntoOutUnsetsTheFieldsTheDirectoryLacks) {
  TempDir tmp;
  const std::string dir = tmp / "out";
  Trajectory saved = make_trajectory(2);
  (void)saved.memmap(MemmapOptions(dir));
  Trajectory out = make_trajectory(2);
  out.set_step(int64_t{3});
  out.set_mask(torch::ones({2}, torch::kBool));
  out.set_task("old");
  const TensorDict inner = out.inner().tensordict();
  static_assert(
      std::is_same_v<decltype(Trajectory::load_memmap(dir, out)), Trajectory>);
  const Trajectory got = Trajectory::load_memmap(dir, out);
  EXPECT_TRUE(got.is_same(out));
  // As Python: the optional fields the directory lacks are unset.
  EXPECT_TRUE(out.is_none("step"));
  EXPECT_TRUE(out.is_none("mask"));
  EXPECT_EQ(out.task(), "reach");
  EXPECT_TRUE(torch::equal(out.obs(), saved.obs()));
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(out.obs()));
  // The nested class's dict is reused.
  EXPECT_TRUE(out.inner().tensordict().is_same(inner));
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(out.inner().x()));
  // load_ (Python's load_memmap_) follows the same rule.
  Holder h = make_holder();
  Holder without_s(
      {{"a", torch::ones({2})},
       {"inner", Inner({{"x", torch::ones({2})}}, {2})},
       {"s", std::nullopt}},
      {2});
  (void)without_s.memmap(MemmapOptions(tmp / "holder"));
  h.load_(tmp / "holder");
  EXPECT_TRUE(h.is_none("s"));
  EXPECT_TRUE(torch::equal(h.a(), torch::ones({2})));
  // A frozen instance is locked: refused, unchanged.
  Frozen frozen({{"x", torch::zeros({2})}}, {2});
  (void)Frozen({{"x", torch::ones({2})}}, {2})
      .memmap(MemmapOptions(tmp / "frozen"));
  EXPECT_THROWS_WITH(
      Frozen::load_memmap(tmp / "frozen", frozen),
      c10::Error,
      "Cannot modify locked TensorDict");
  EXPECT_TRUE(torch::equal(frozen.x(), torch::zeros({2})));
  // Another registered class is refused before anything is written.
  (void)make_registered(torch::ones({2, 3}), torch::ones({2}), "r")
      .memmap(MemmapOptions(tmp / "registered"));
  Inner other({{"x", torch::full({2}, 4.0f)}}, {2});
  EXPECT_THROWS_WITH(
      Inner::load_memmap(tmp / "registered", other),
      c10::ValueError,
      "holds the Python class <class 'tests.Registered'>");
  EXPECT_TRUE(torch::equal(other.x(), torch::full({2}, 4.0f)));
}

}  // namespace tensor_class_test
