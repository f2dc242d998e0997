// lazy_stacked_tensor_class.h: lazy stacks of instances, their checks and their
// saved layout.
#include <tensordict/lazy_stacked_tensor_class.h>
#include <tensordict/tensor_class.h>

#include "support.h"
#include "tensor_class_support.h"

// Its own namespace, so that test files can share a unity batch.
namespace lazy_stacked_tensor_class_test {

using namespace tensordict;
using namespace tensordict::indexing;
using tensor_class_testing::Inner;
using tensor_class_testing::Registered;
using namespace tensordict::testing;  // NOLINT(google-build-using-namespace)

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
      Registered::load_memmap(dir), c10::Error, "tensordict::load_memmap");

  const std::string same_dir = tmp / "same";
  (void)lazy_stack(
      std::vector<Registered>{registered(3, "a"), registered(3, "b")})
      .memmap(MemmapOptions(same_dir));
  // Even with equal shapes: a dense load would be a copy, never made
  // silently; the lazy stack loads mapped, and contiguous() copies it.
  EXPECT_THROWS_WITH(
      Registered::load_memmap(same_dir), c10::Error, "tensordict::load_memmap");
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

// Python: `lazy.memmap_(prefix)` returns the stack itself, mapped, in the
// layout of `memmap`.
TEST(TensorClassTest, LazyStackMemmapInPlaceMapsTheElements) {
  TempDir tmp;
  const std::string dir = tmp / "lazy_inplace";
  auto lazy = lazy_stack(
      std::vector<Registered>{registered(3, "a"), registered(4, "b")});
  const Registered first = lazy.at(0);
  EXPECT_FALSE(lazy.is_memmap());
  EXPECT_EQ(&lazy.memmap_(MemmapOptions(dir)), &lazy);
  EXPECT_TRUE(lazy.is_memmap());
  EXPECT_TRUE(lazy.saved_path().has_value());
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(first.pos()));
  EXPECT_TRUE(first.is_locked());
  EXPECT_EQ(
      read_text(dir + "/meta.json"),
      "{\"_type\":\"<class 'tests.Registered'>\"}");
  EXPECT_EQ(
      read_text(dir + "/_tensordict/1/inner/meta.json"),
      "{\"_type\":\"<class 'tests.Inner'>\"}");
  first.pos().fill_(7);
  const auto loaded = LazyStackedTensorClass<Registered>::load_memmap(dir);
  EXPECT_TRUE(torch::equal(loaded.at(0).pos(), torch::full({2, 3}, 7.0f)));
  EXPECT_EQ(loaded.at(1).label(), "b");

  // Another writer replaces the files; memmap_refresh_ reads them again.
  (void)lazy_stack(
      std::vector<Registered>{registered(3, "c"), registered(4, "d")})
      .memmap(MemmapOptions(dir));
  EXPECT_EQ(&lazy.memmap_refresh_(), &lazy);
  EXPECT_EQ(lazy.at(1).label(), "d");
  EXPECT_TRUE(torch::equal(
      lazy.at(0).pos(), torch::arange(6, torch::kFloat).reshape({2, 3})));
  auto unsaved = lazy_stack(std::vector<Registered>{registered(3, "a")});
  EXPECT_THROWS_WITH(
      unsaved.memmap_refresh_(),
      c10::Error,
      "memmap_refresh_ needs a lazy stack memmapped to a directory");
  // With no prefix, anonymous shared memory, as Python's save().
  const auto anonymous = unsaved.save();
  EXPECT_TRUE(anonymous.is_memmap());
  EXPECT_FALSE(anonymous.saved_path().has_value());
}

// Python: `lazy.memmap_like(prefix)` writes the layout with zeros, and
// `other.load_(prefix)` loads a saved stack into `other` in place.
TEST(TensorClassTest, LazyStackMemmapLikeAndLoadInPlace) {
  TempDir tmp;
  const auto lazy = lazy_stack(
      std::vector<Registered>{registered(3, "a"), registered(4, "b")});
  const std::string like_dir = tmp / "lazy_like";
  const auto like = lazy.memmap_like(MemmapOptions(like_dir));
  EXPECT_TRUE(like.is_memmap());
  EXPECT_TRUE(torch::equal(like.at(1).pos(), torch::zeros({2, 4})));
  EXPECT_EQ(like.at(1).label(), "b");
  EXPECT_EQ(
      read_text(like_dir + "/meta.json"),
      "{\"_type\":\"<class 'tests.Registered'>\"}");
  // The original is neither marked nor changed.
  EXPECT_EQ(lazy.at(0).tensordict().python_class(), "");
  EXPECT_EQ(lazy.at(0).pos()[1][2].item<float>(), 5.0f);

  const std::string dir = tmp / "lazy_saved";
  (void)lazy.memmap(MemmapOptions(dir));
  auto target = lazy_stack(
      std::vector<Registered>{registered(3, "x"), registered(4, "y")});
  target.at(0).pos().zero_();
  EXPECT_EQ(&target.load_(dir), &target);
  EXPECT_EQ(target.at(1).label(), "b");
  EXPECT_TRUE(torch::equal(target.at(0).pos(), lazy.at(0).pos()));
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(target.at(0).pos()));
  EXPECT_EQ(&target.load_memmap_(dir), &target);

  // Refused before anything is loaded: another class, another count.
  auto inners = lazy_stack(std::vector<Inner>{
      Inner({{"x", torch::ones({2})}}, {2}),
      Inner({{"x", torch::ones({2})}}, {2})});
  EXPECT_THROWS_WITH(
      inners.load_(dir),
      c10::ValueError,
      "holds the Python class <class 'tests.Registered'>, but Inner is "
      "registered");
  EXPECT_TRUE(torch::equal(inners.at(0).x(), torch::ones({2})));
  auto three = lazy_stack(std::vector<Registered>{
      registered(3, "p"), registered(3, "q"), registered(3, "r")});
  EXPECT_THROW(three.load_(dir), c10::ValueError);
  EXPECT_EQ(three.at(0).label(), "p");
}

}  // namespace lazy_stacked_tensor_class_test
