// tensor_class.h: memmap, save and load of instances, the Python class
// registration and layout, and instances stored as TensorDict entries.
#include <tensordict/tensor_class.h>

#include <filesystem>
#include <future>

#include "support.h"
#include "tensor_class_support.h"

// Its own namespace, so that test files can share a unity batch.
namespace tensor_class_memmap_test {

using namespace tensordict;
using namespace tensordict::indexing;
using tensor_class_testing::Cast;
using tensor_class_testing::Frozen;
using tensor_class_testing::Holder;
using tensor_class_testing::Inner;
using tensor_class_testing::make_holder;
using tensor_class_testing::make_registered;
using tensor_class_testing::make_trajectory;
using tensor_class_testing::Registered;
using tensor_class_testing::Trajectory;
using tensor_class_testing::Unregistered;
using namespace tensordict::testing;  // NOLINT(google-build-using-namespace)

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

TEST(TensorClassTest, RegistrationRejectsMalformedClassStrings) {
  EXPECT_THROWS_WITH(
      register_python_class<Unregistered>("Local"),
      c10::ValueError,
      "a Python class is spelled \"<class 'module.Name'>\", got 'Local'");
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

// Python: `s.save()` (and `memmap()`) with no prefix gives
// MemoryMappedTensors without a file: `is_memmap()`, `saved_path` None.
TEST(TensorClassTest, SaveWithNoPrefixMapsAnonymousMemory) {
  const Registered p =
      make_registered(torch::ones({2, 3}), torch::ones({2}), "hi");
  const Registered saved = p.save();
  EXPECT_TRUE(saved.is_memmap());
  EXPECT_TRUE(saved.is_locked());
  EXPECT_FALSE(saved.saved_path().has_value());
  EXPECT_TRUE(torch::equal(saved.pos(), p.pos()));
  EXPECT_FALSE(saved.pos().is_same(p.pos()));
  EXPECT_EQ(saved.label(), "hi");
  EXPECT_TRUE(p.dumps().is_memmap());
  // Nothing to add a file to: make_memmap needs a directory.
  Trajectory anonymous = make_trajectory(2).save();
  EXPECT_THROWS_WITH(
      anonymous.make_memmap("mask", {2}),
      c10::Error,
      "make_memmap needs a dict memmapped to a directory");
}

// Python: `make_memmap(key, shape)` on a memmapped instance adds a
// zero-filled tensor that the field then reads.
TEST(TensorClassTest, MakeMemmapAddsAFieldThatLoadsBack) {
  TempDir tmp;
  const std::string dir = tmp / "made";
  Trajectory t = make_trajectory();
  t.memmap_(MemmapOptions(dir));
  at::Tensor mask = t.make_memmap("mask", {4, 2}, torch::kBool);
  EXPECT_EQ(mask.sizes(), c10::IntArrayRef({4, 2}));
  EXPECT_EQ(mask.scalar_type(), torch::kBool);
  EXPECT_FALSE(mask.any().item<bool>());
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(mask));
  mask.fill_(true);
  EXPECT_TRUE(t.mask()->is_same(mask));
  const at::Tensor u = t.make_memmap({"extra", "u"}, {4}, torch::kLong);
  u.fill_(7);
  const Trajectory loaded = Trajectory::load_memmap(dir);
  EXPECT_TRUE(torch::equal(*loaded.mask(), torch::ones({4, 2}, torch::kBool)));
  EXPECT_TRUE(torch::equal(loaded.extra()->get("u"), torch::full({4}, 7L)));
  EXPECT_THROWS_WITH(
      t.make_memmap("nope", {4}), KeyError, "Trajectory has no field 'nope'");
  EXPECT_THROWS_WITH(
      t.make_memmap("task", {4}),
      c10::TypeError,
      "make_memmap: field 'task' of Trajectory takes a string, not a tensor");
  EXPECT_THROWS_WITH(
      t.make_memmap("inner", {4}),
      c10::TypeError,
      "make_memmap: field 'inner' of Trajectory takes a TensorClass, not a "
      "tensor");
  EXPECT_THROWS_WITH(
      t.make_memmap({"inner", "y"}, {4}), KeyError, "Inner has no field 'y'");
  EXPECT_THROWS_WITH(
      t.make_memmap("mask", {4}),
      c10::Error,
      "make_memmap: the key 'mask' already exists");

  // A registered class: the file goes in Python's layout, under
  // _tensordict/.
  const std::string registered_dir = tmp / "registered";
  Registered r = Registered::from_dict(
      {{"inner", Inner({{"x", torch::ones({2})}}, {2}).tensordict()},
       {"label", "hi"}},
      FromDictOptions().batch_size(std::vector<int64_t>{2}));
  r.memmap_(MemmapOptions(registered_dir));
  r.make_memmap("pos", {2, 3}).fill_(2);
  EXPECT_TRUE(
      std::filesystem::exists(registered_dir + "/_tensordict/pos.memmap"));
  EXPECT_TRUE(torch::equal(
      Registered::load_memmap(registered_dir).pos(), torch::full({2, 3}, 2.0)));
}

// Python: `S.from_consolidated(filename)` reads what
// `consolidate(filename=...)` wrote, as the class.
TEST(TensorClassTest, FromConsolidatedReadsTheFileAsTheClass) {
  TempDir tmp;
  const std::string file = tmp / "traj.bin";
  const Trajectory t = make_trajectory();
  (void)t.consolidate(ConsolidateOptions().filename(file));
  const Trajectory back = Trajectory::from_consolidated(file);
  EXPECT_TRUE(back.is_consolidated());
  EXPECT_EQ(back.batch_size(), c10::IntArrayRef({4}));
  EXPECT_TRUE(torch::equal(back.obs(), t.obs()));
  EXPECT_TRUE(torch::equal(back.inner().x(), t.inner().x()));
  EXPECT_EQ(back.action().scalar_type(), torch::kLong);
  EXPECT_EQ(back.task(), "reach");
  const std::string other = tmp / "other.bin";
  (void)TensorDict({{"foo", torch::ones({2})}}, {2})
      .consolidate(ConsolidateOptions().filename(other));
  EXPECT_THROWS_WITH(
      Trajectory::from_consolidated(other),
      c10::ValueError,
      "Got the set of keys {{'foo'}} which do not belong to the class.");
}

}  // namespace tensor_class_memmap_test
