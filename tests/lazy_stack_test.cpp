// LazyStackedTensorDict (declared in lazy_stack.h). Expected keys, messages
// and reprs come from Python tensordict 0.15.3.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <tensordict/consolidate.h>
#include <tensordict/indexing.h>
#include <tensordict/json.h>
#include <tensordict/lazy_stack.h>
#include <tensordict/memmap.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <sstream>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace lazy_stack_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)
using tensordict::indexing::Slice;
using namespace tensordict::testing;  // NOLINT(google-build-using-namespace)

namespace {

// Two elements of batch [3]: "a" [3, 2] in both, "r" ragged ([3, 4] vs
// [3, 5]), "n" a nested dict with "x" in both, "only0" in the first only.
std::vector<TensorDict> make_elements() {
  TensorDict t0(
      {{"a", torch::arange(6, torch::kFloat).view({3, 2})},
       {"r", torch::zeros({3, 4})},
       {"n", {{"x", torch::arange(3)}, {"y0", torch::ones({3})}}},
       {"only0", torch::ones({3})}},
      {3});
  TensorDict t1(
      {{"r", torch::zeros({3, 5})},
       {"a", torch::arange(6, 12, torch::kFloat).view({3, 2})},
       {"n", {{"x", torch::arange(3, 6)}}}},
      {3});
  return {t0, t1};
}

std::vector<NestedKey> as_keys(std::initializer_list<NestedKey> keys) {
  return keys;
}

}  // namespace

// --- construction ------------------------------------------------------------

TEST(LazyStackTest, StackInsertsTheStackDimAndAliasesElements) {
  std::vector<TensorDict> tds = make_elements();
  LazyStackedTensorDict stack = lazy_stack(tds);
  EXPECT_EQ(stack.batch_size(), c10::IntArrayRef({2, 3}));
  EXPECT_EQ(stack.batch_dims(), 2);
  EXPECT_EQ(stack.stack_dim(), 0);
  EXPECT_EQ(stack.size(0), 2);
  EXPECT_EQ(stack.size(-1), 3);
  EXPECT_EQ(stack.num_keys(), 3u);              // a, r, n
  EXPECT_EQ(stack.size(), stack.batch_size());  // Python's size()
  EXPECT_EQ(stack.device(), std::nullopt);
  ASSERT_EQ(stack.tensordicts().size(), 2u);
  EXPECT_TRUE(stack.tensordicts()[0].is_same(tds[0]));
  EXPECT_TRUE(stack.tensordicts()[1].is_same(tds[1]));
  LazyStackedTensorDict copy = stack;
  EXPECT_TRUE(copy.is_same(stack));
  EXPECT_FALSE(lazy_stack(tds).is_same(stack));
  // Writing into an element shows through the stack.
  tds[1].set("only0", torch::full({3}, 7.0));
  EXPECT_TRUE(torch::equal(
      stack.get("only0"),
      torch::stack({torch::ones({3}), torch::full({3}, 7.0)})));
}

TEST(LazyStackTest, StackDimMayBeInnerOrNegative) {
  LazyStackedTensorDict inner = lazy_stack(make_elements(), 1);
  EXPECT_EQ(inner.stack_dim(), 1);
  EXPECT_EQ(inner.batch_size(), c10::IntArrayRef({3, 2}));
  LazyStackedTensorDict last = lazy_stack(make_elements(), -1);
  EXPECT_EQ(last.stack_dim(), 1);
  EXPECT_EQ(std::move(last).batch_size(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(lazy_stack(make_elements(), -2).stack_dim(), 0);
  EXPECT_THROWS_WITH(inner.size(2), c10::IndexError, "Dimension out of range");
}

TEST(LazyStackTest, StackThrowsOnBadInputs) {
  EXPECT_THROWS_EXACTLY(lazy_stack({}), c10::Error, "items cannot be empty");
  EXPECT_THROWS_EXACTLY(
      lazy_stack({TensorDict({2}), TensorDict({2, 1})}),
      c10::Error,
      "batch sizes in tensordicts differs, LazyStackedTensorDict cannot be "
      "created. Got td[0].batch_size=torch.Size([2]) and "
      "td[1].batch_size=torch.Size([2, 1]).");
  EXPECT_THROWS_EXACTLY(
      lazy_stack({TensorDict({2}), TensorDict({2}), TensorDict({3})}),
      c10::Error,
      "batch sizes in tensordicts differs, LazyStackedTensorDict cannot be "
      "created. Got td[0].batch_size=torch.Size([2]) and "
      "td[2].batch_size=torch.Size([3]).");
  EXPECT_THROWS_EXACTLY(
      lazy_stack({TensorDict({2}, c10::Device("cpu")), TensorDict({2})}),
      c10::Error,
      "devices differ, got cpu and None");
  EXPECT_THROWS_EXACTLY(
      lazy_stack({TensorDict({2}), TensorDict({2})}, 2),
      c10::Error,
      "Stack dim 2 is too big for batch size torch.Size([2, 2]).");
  EXPECT_THROWS_EXACTLY(
      lazy_stack({TensorDict({2}), TensorDict({2})}, -3),
      c10::Error,
      "Couldn't infer stack dim from negative value, got stack_dim=-3 for "
      "elements with 1 batch dims (expected a dim in [-2, 1])");
}

// --- indexing ----------------------------------------------------------------

TEST(LazyStackTest, AtReturnsTheElement) {
  const std::vector<TensorDict> tds = make_elements();
  LazyStackedTensorDict stack = lazy_stack(tds, 1);
  EXPECT_TRUE(stack.at(0).is_same(tds[0]));
  EXPECT_TRUE(stack.at(-1).is_same(tds[1]));
  EXPECT_THROWS_EXACTLY(
      stack.at(2),
      c10::IndexError,
      "index 2 is out of bounds for the stack dim of size 2");
  EXPECT_THROWS_EXACTLY(
      stack.at(-3),
      c10::IndexError,
      "index -3 is out of bounds for the stack dim of size 2");
}

// Python: LazyStackedTensorDict(td_n, td_n, stack_dim=1, stack_dim_name="s")
// has names ['n', 's'] and _has_names() True; without element names it has
// names [None, 's'], _has_names() False, and contiguous() has no names.
TEST(LazyStackTest, NamesInsertTheStackDimName) {
  auto named = [](std::vector<std::optional<std::string>> names) {
    return TensorDict({{"a", torch::zeros({3, 2})}}, {3}, std::nullopt, names);
  };
  using tensordict::DimNames;
  const LazyStackedTensorDict both =
      lazy_stack({named({"n"}), named({"n"})}, 1, "s");
  EXPECT_EQ(both.stack_dim_name(), std::optional<std::string>("s"));
  EXPECT_TRUE(both.has_names());
  EXPECT_EQ(both.names(), (DimNames{"n", "s"}));
  EXPECT_EQ(both.contiguous().names(), (DimNames{"n", "s"}));

  const LazyStackedTensorDict elements_only =
      lazy_stack({named({"n"}), named({"n"})}, -1);
  EXPECT_EQ(elements_only.stack_dim_name(), std::nullopt);
  EXPECT_EQ(elements_only.names(), (DimNames{"n", std::nullopt}));
  EXPECT_EQ(elements_only.contiguous().names(), (DimNames{"n", std::nullopt}));

  const LazyStackedTensorDict stack_only =
      lazy_stack({named({}), named({})}, 1, "s");
  EXPECT_FALSE(stack_only.has_names());
  EXPECT_EQ(stack_only.names(), (DimNames{std::nullopt, "s"}));
  EXPECT_FALSE(stack_only.contiguous().has_names());

  // Where the stack dim survives, so does its name.
  auto sliced =
      std::get<LazyStackedTensorDict>(both.index({Slice(), Slice(0, 1)}));
  EXPECT_EQ(sliced.names(), (DimNames{"n", "s"}));
  auto row = std::get<LazyStackedTensorDict>(both.index({0}));
  EXPECT_EQ(row.names(), (DimNames{"s"}));
  TensorDict nested_a = named({"n"});
  nested_a.set("sub", named({"n"}));
  const LazyStackedTensorDict outer =
      lazy_stack({nested_a, nested_a.clone()}, 0, "s");
  EXPECT_EQ(
      outer.get_tensordict("sub").stack_dim_name(),
      std::optional<std::string>("s"));
  EXPECT_EQ(
      outer.contiguous().get_tensordict("sub").names(), (DimNames{"s", "n"}));
}

TEST(LazyStackTest, IndexTakesAnIntegerOrASliceOfTheStackDim) {
  std::vector<TensorDict> tds;
  for (int i = 0; i < 4; ++i) {
    tds.emplace_back(TensorDict({{"a", torch::full({3, 2}, i)}}, {3}));
  }
  LazyStackedTensorDict stack = lazy_stack(tds);
  auto element = stack.index({-1});
  ASSERT_TRUE(std::holds_alternative<TensorDict>(element));
  EXPECT_TRUE(std::get<TensorDict>(element).is_same(tds[3]));
  auto row = stack.index({1, 2});
  ASSERT_TRUE(std::holds_alternative<TensorDict>(row));
  EXPECT_EQ(std::get<TensorDict>(row).batch_size(), c10::IntArrayRef({}));
  EXPECT_TRUE(
      torch::equal(std::get<TensorDict>(row).get("a"), tds[1].get("a")[2]));

  auto sliced = stack.index({Slice(1, 3)});
  ASSERT_TRUE(std::holds_alternative<LazyStackedTensorDict>(sliced));
  const auto& middle = std::get<LazyStackedTensorDict>(sliced);
  EXPECT_EQ(middle.batch_size(), c10::IntArrayRef({2, 3}));
  EXPECT_TRUE(middle.tensordicts()[0].is_same(tds[1]));
  EXPECT_TRUE(middle.tensordicts()[1].is_same(tds[2]));
  auto reversed = std::get<LazyStackedTensorDict>(stack.index(
      {Slice(tensordict::indexing::None, tensordict::indexing::None, -1)}));
  ASSERT_EQ(reversed.tensordicts().size(), 4u);
  EXPECT_TRUE(reversed.tensordicts()[0].is_same(tds[3]));
  EXPECT_TRUE(reversed.tensordicts()[3].is_same(tds[0]));
  auto tail = std::get<LazyStackedTensorDict>(stack.index({Slice(-3, -1)}));
  ASSERT_EQ(tail.tensordicts().size(), 2u);
  EXPECT_TRUE(tail.tensordicts()[0].is_same(tds[1]));
  auto even = std::get<LazyStackedTensorDict>(stack.index(
      {Slice(tensordict::indexing::None, tensordict::indexing::None, 2)}));
  ASSERT_EQ(even.tensordicts().size(), 2u);
  EXPECT_TRUE(even.tensordicts()[1].is_same(tds[2]));

  EXPECT_THROWS_EXACTLY(
      (void)stack.index({4}),
      c10::IndexError,
      "index 4 is out of bounds for the stack dim of size 4");
}

namespace {

// Four elements of batch [3, 2] with equal shapes, stacked at `dim`, so the
// dense stack (contiguous()) is the oracle.
LazyStackedTensorDict uniform_stack(int64_t dim) {
  std::vector<TensorDict> tds;
  for (int i = 0; i < 4; ++i) {
    tds.emplace_back(TensorDict(
        {{"a", torch::arange(30, torch::kFloat).view({3, 2, 5}) + 100 * i},
         {"n", {{"b", torch::arange(6).view({3, 2}) + 100 * i}}}},
        {3, 2}));
  }
  return lazy_stack(tds, dim);
}

// Checks stack.index(idx) against the dense stack indexed the same way.
void expect_like_dense(
    const LazyStackedTensorDict& stack,
    const std::vector<at::indexing::TensorIndex>& idx) {
  SCOPED_TRACE(
      ::testing::Message() << "stack_dim " << stack.stack_dim() << ", "
                           << idx.size() << " indices");
  const TensorDict expected = stack.contiguous().index(idx);
  const auto got = stack.index(idx);
  const TensorDict dense =
      std::holds_alternative<TensorDict>(got)
          ? std::get<TensorDict>(got)
          : std::get<LazyStackedTensorDict>(got).contiguous();
  tensordict::testing::expect_td_equal(dense, expected);
}

}  // namespace

TEST(LazyStackTest, IndexMatchesTheDenseStackOnEveryStackDim) {
  using tensordict::indexing::Ellipsis;
  using tensordict::indexing::None;
  const at::Tensor pair = torch::tensor({1, 0});
  const at::Tensor mask4 = torch::tensor({true, false, true, true});
  for (int64_t dim = 0; dim < 3; ++dim) {
    const LazyStackedTensorDict stack = uniform_stack(dim);
    const std::vector<std::vector<at::indexing::TensorIndex>> cases = {
        {1},
        {-1},
        {Slice(0, 2)},
        {Slice(), 1},
        {Slice(), Slice(1)},
        {Slice(), Slice(), 1},
        {Slice(None, None, 2), Slice(), Slice(0, 1)},
        {Ellipsis, 0},
        {0, Ellipsis, 1},
        {None, 1},
        {None, Slice(), 0},
        {Slice(), None, 1},
        {torch::tensor(1)},
        {pair},
        {Slice(), pair},
        {Ellipsis, pair},
        {pair, Slice(), 1},
        {1, Slice(), pair},
    };
    for (const auto& idx : cases) {
      expect_like_dense(stack, idx);
    }
    if (dim == 0) {
      // A mask over both dims of the elements.
      expect_like_dense(
          stack,
          {Slice(),
           torch::tensor({{true, false}, {false, true}, {true, true}})});
    }
    // A mask on the stack dim, wherever it is.
    std::vector<at::indexing::TensorIndex> masked(dim, Slice());
    masked.emplace_back(mask4);
    expect_like_dense(stack, masked);
  }
}

TEST(LazyStackTest, IndexKeepsLazyStacksWhereTheStackDimSurvives) {
  const std::vector<TensorDict> tds = make_elements();  // ragged "r"
  const LazyStackedTensorDict stack = lazy_stack(tds);
  // Indexing another dim indexes every element: still ragged, still lazy.
  auto row = std::get<LazyStackedTensorDict>(stack.index({Slice(), 1}));
  EXPECT_EQ(row.batch_size(), c10::IntArrayRef({2}));
  EXPECT_EQ(row.stack_dim(), 0);
  EXPECT_EQ(row.tensordicts()[1].get("r").sizes(), c10::IntArrayRef({5}));
  // None before the stack dim moves it.
  auto moved = std::get<LazyStackedTensorDict>(
      stack.index({tensordict::indexing::None}));
  EXPECT_EQ(moved.stack_dim(), 1);
  EXPECT_EQ(moved.batch_size(), c10::IntArrayRef({1, 2, 3}));
  // A tensor on the stack dim picks (and may repeat) elements, aliased.
  auto picked =
      std::get<LazyStackedTensorDict>(stack.index({torch::tensor({1, 1, -2})}));
  ASSERT_EQ(picked.tensordicts().size(), 3u);
  EXPECT_TRUE(picked.tensordicts()[0].is_same(tds[1]));
  EXPECT_TRUE(picked.tensordicts()[2].is_same(tds[0]));
  auto masked = std::get<LazyStackedTensorDict>(
      stack.index({torch::tensor({false, true})}));
  ASSERT_EQ(masked.tensordicts().size(), 1u);
  EXPECT_TRUE(masked.tensordicts()[0].is_same(tds[1]));
  // An integer on an inner stack dim gives the element, indexed.
  auto inner = lazy_stack(tds, 1).index({Slice(0, 2), 0});
  ASSERT_TRUE(std::holds_alternative<TensorDict>(inner));
  EXPECT_EQ(
      std::get<TensorDict>(inner).get("r").sizes(), c10::IntArrayRef({2, 4}));
}

TEST(LazyStackTest, IndexThrowsWhereNoSingleLazyStackFits) {
  const LazyStackedTensorDict stack = uniform_stack(0);
  const LazyStackedTensorDict inner = uniform_stack(1);
  const at::Tensor pair = torch::tensor({1, 0});
  EXPECT_THROWS_EXACTLY(
      (void)stack.index({Slice(5)}),
      c10::Error,
      "LazyStackedTensorDict.index: an index selecting no element of the "
      "stack dim is not supported (a lazy stack needs at least one element)");
  EXPECT_THROWS_EXACTLY(
      (void)stack.index({pair, pair}),
      c10::Error,
      "LazyStackedTensorDict.index: an index tensor on the stack dim cannot be "
      "combined with index tensors on other batch dims");
  EXPECT_THROWS_EXACTLY(
      (void)stack.index({torch::tensor({{0, 1}})}),
      c10::Error,
      "LazyStackedTensorDict.index: an index tensor on the stack dim must be "
      "1-D (one lazy stack per index element is not supported), got 2 dims");
  EXPECT_THROWS_EXACTLY(
      (void)inner.index({pair, Slice(), pair}),
      c10::Error,
      "LazyStackedTensorDict.index: index tensors on both sides of the stack "
      "dim are not supported; index the elements (tensordicts()) instead");
  EXPECT_THROWS_EXACTLY(
      (void)stack.index({torch::ones({4, 3}, torch::kBool)}),
      c10::Error,
      "LazyStackedTensorDict.index: a bool mask over several batch dims that "
      "include the stack dim is not supported; index the elements "
      "(tensordicts()) instead");
  EXPECT_THROWS_EXACTLY(
      (void)stack.index({torch::tensor({true, false})}),
      c10::IndexError,
      "The shape of the mask [2] at the stack dim does not match the size 4 "
      "of the stack dim");
  EXPECT_THROWS_EXACTLY(
      (void)stack.index({torch::tensor({4})}),
      c10::IndexError,
      "index 4 is out of bounds for the stack dim of size 4");
  EXPECT_THROWS_EXACTLY(
      (void)stack.index({0, 0, 0, 0}),
      c10::IndexError,
      "too many indices for tensor of dimension 3 (the "
      "LazyStackedTensorDict's batch dims are torch.Size([4, 3, 2]))");
  EXPECT_THROWS_EXACTLY(
      (void)stack.index(
          {tensordict::indexing::Ellipsis, tensordict::indexing::Ellipsis}),
      c10::IndexError,
      "an index can only have a single ellipsis ('...')");
  EXPECT_THROWS_EXACTLY(
      (void)stack.index({true}),
      c10::Error,
      "LazyStackedTensorDict.index: a boolean (True/False) index is not "
      "supported");
}

// --- keys --------------------------------------------------------------------

TEST(LazyStackTest, KeysAreTheCommonKeysInTheFirstElementsOrder) {
  // Python: t0 = TensorDict(z=..., a=..., n=TensorDict(x, y, m=TensorDict(q)),
  // s="x", only0=...), t1 the same keys in another order plus ("n","m","r").
  TensorDict t0(
      {{"z", torch::zeros({2})},
       {"a", torch::ones({3})},
       {"n",
        {{"x", torch::ones({1})},
         {"y", torch::ones({2})},
         {"m", {{"q", torch::ones({1})}}}}},
       {"s", "x"},
       {"only0", torch::ones({1})}});
  TensorDict t1(
      {{"a", torch::ones({3})},
       {"n",
        {{"y", torch::ones({2})},
         {"x", torch::ones({1})},
         {"m", {{"q", torch::ones({1})}, {"r", torch::ones({1})}}}}},
       {"s", "x"},
       {"z", torch::ones({2})}});
  LazyStackedTensorDict stack = lazy_stack({t0, t1});
  EXPECT_EQ(stack.keys(), as_keys({"z", "a", "n", "s"}));
  EXPECT_EQ(
      stack.keys(/*include_nested=*/true),
      as_keys(
          {"z",
           "a",
           {"n", "x"},
           {"n", "y"},
           {"n", "m", "q"},
           {"n", "m"},
           "n",
           "s"}));
  EXPECT_EQ(
      stack.keys(/*include_nested=*/true, /*leaves_only=*/true),
      as_keys({"z", "a", {"n", "x"}, {"n", "y"}, {"n", "m", "q"}}));
  EXPECT_EQ(
      stack.keys(/*include_nested=*/false, /*leaves_only=*/true),
      as_keys({"z", "a"}));
  EXPECT_EQ(
      stack.keys(/*include_nested=*/true, /*leaves_only=*/false, /*sort=*/true),
      as_keys(
          {"a",
           "n",
           {"n", "m"},
           {"n", "m", "q"},
           {"n", "x"},
           {"n", "y"},
           "s",
           "z"}));
  EXPECT_EQ(stack.num_keys(), 4u);

  EXPECT_TRUE(stack.contains("a"));
  EXPECT_TRUE(stack.contains({"n", "m", "q"}));
  EXPECT_FALSE(stack.contains("only0"));
  EXPECT_FALSE(stack.contains({"n", "m", "r"}));
  EXPECT_FALSE(stack.contains({"a", "x"}));
  EXPECT_FALSE(stack.contains("missing"));
}

TEST(LazyStackTest, NestedKeysThrowWhenKindsDiffer) {
  LazyStackedTensorDict stack = lazy_stack(
      {TensorDict({{"a", {{"b", torch::ones({1})}}}}),
       TensorDict({{"a", torch::ones({1})}})});
  EXPECT_EQ(stack.keys(), as_keys({"a"}));
  EXPECT_THROWS_EXACTLY(
      stack.keys(/*include_nested=*/true),
      c10::TypeError,
      "cannot stack entry 'a': it is a TensorDict in tensordict 0 and a "
      "Tensor in tensordict 1");
}

// --- get ---------------------------------------------------------------------

TEST(LazyStackTest, GetStacksTheLeafAlongTheStackDim) {
  const std::vector<TensorDict> tds = make_elements();
  LazyStackedTensorDict stack = lazy_stack(tds);
  const at::Tensor a = stack.get("a");
  EXPECT_EQ(a.sizes(), c10::IntArrayRef({2, 3, 2}));
  EXPECT_TRUE(
      torch::equal(a, torch::stack({tds[0].get("a"), tds[1].get("a")})));
  EXPECT_TRUE(
      torch::equal(a, torch::arange(12, torch::kFloat).view({2, 3, 2})));
  const at::Tensor x = stack.get({"n", "x"});
  EXPECT_EQ(x.scalar_type(), torch::kInt64);
  EXPECT_TRUE(torch::equal(x, torch::arange(6).view({2, 3})));

  LazyStackedTensorDict inner = lazy_stack(tds, 1);
  const at::Tensor a1 = inner.get("a");
  EXPECT_EQ(a1.sizes(), c10::IntArrayRef({3, 2, 2}));
  EXPECT_TRUE(
      torch::equal(a1, torch::stack({tds[0].get("a"), tds[1].get("a")}, 1)));
  EXPECT_TRUE(torch::equal(
      inner.get({"n", "x"}),
      torch::stack({tds[0].get({"n", "x"}), tds[1].get({"n", "x"})}, 1)));

  // dtypes promote as in torch.stack.
  LazyStackedTensorDict mixed = lazy_stack(
      {TensorDict({{"a", torch::ones({3})}}),
       TensorDict({{"a", torch::ones({3}, torch::kInt64)}})});
  EXPECT_EQ(mixed.get("a").scalar_type(), torch::kFloat);
}

TEST(LazyStackTest, GetThrowsOnRaggedMissingOrWrongKindEntries) {
  LazyStackedTensorDict stack = lazy_stack(make_elements());
  EXPECT_THROWS_EXACTLY(
      stack.get("r"),
      c10::Error,
      "Failed to stack tensors within a tensordict under the key 'r': their "
      "shapes are [torch.Size([3, 4]), torch.Size([3, 5])]. To read them, take "
      "the entry from each of tensordicts().");
  EXPECT_THROWS_EXACTLY(
      lazy_stack({TensorDict({{"a", torch::ones({3, 2})}}),
                  TensorDict({{"a", torch::ones({3})}}),
                  TensorDict({{"a", torch::ones({3})}})})
          .get("a"),
      c10::Error,
      "Failed to stack tensors within a tensordict under the key 'a': their "
      "shapes are [torch.Size([3, 2]), torch.Size([3])]. To read them, take "
      "the entry from each of tensordicts().");
  EXPECT_THROWS_EXACTLY(
      stack.get("only0"),
      tensordict::KeyError,
      "key \"only0\" not found in LazyStackedTensorDict with keys ['a', 'n', "
      "'r']");
  EXPECT_THROWS_EXACTLY(
      stack.get({"n", "y0"}),
      tensordict::KeyError,
      "key \"y0\" not found in LazyStackedTensorDict with keys ['x'] (while "
      "looking up ('n', 'y0'))");
  EXPECT_THROWS_EXACTLY(
      stack.get({"a", "zz"}),
      tensordict::KeyError,
      "'a' is a Tensor, not a tensordict, so it has no entry 'zz'.");
  EXPECT_THROWS_EXACTLY(
      stack.get("n"),
      c10::TypeError,
      "the entry 'n' is a TensorDict, not a Tensor");
  EXPECT_THROWS_EXACTLY(
      lazy_stack(
          {TensorDict({{"a", torch::ones({1})}}), TensorDict({{"a", "text"}})})
          .get("a"),
      c10::TypeError,
      "cannot stack entry 'a': it is a Tensor in tensordict 0 and a "
      "NonTensorData in tensordict 1");
}

TEST(LazyStackTest, GetTensordictStacksTheNestedDictsLazily) {
  const std::vector<TensorDict> tds = make_elements();
  LazyStackedTensorDict stack = lazy_stack(tds, 1);
  LazyStackedTensorDict n = stack.get_tensordict("n");
  EXPECT_EQ(n.stack_dim(), 1);
  EXPECT_EQ(n.batch_size(), c10::IntArrayRef({3, 2}));
  EXPECT_TRUE(n.tensordicts()[0].is_same(tds[0].get_tensordict("n")));
  EXPECT_EQ(n.keys(), as_keys({"x"}));
  EXPECT_TRUE(torch::equal(n.get("x"), stack.get({"n", "x"})));
  EXPECT_THROWS_EXACTLY(
      stack.get_tensordict("a"),
      c10::TypeError,
      "the entry 'a' is a Tensor, not a TensorDict");
  LazyStackedTensorDict ragged = lazy_stack(
      {TensorDict({{"n", TensorDict({2})}}),
       TensorDict({{"n", TensorDict({3})}})});
  EXPECT_THROWS_WITH(
      ragged.get_tensordict("n"),
      c10::Error,
      "batch sizes in tensordicts differs, LazyStackedTensorDict cannot be "
      "created. Got td[0].batch_size=torch.Size([2]) and "
      "td[1].batch_size=torch.Size([3]).");
}

// --- contiguous --------------------------------------------------------------

TEST(LazyStackTest, ContiguousStacksTheCommonEntries) {
  TensorDict t0(
      {{"a", torch::arange(6, torch::kFloat).view({3, 2})},
       {"n", {{"x", torch::arange(3)}, {"only0", torch::ones({3})}}},
       {"s", "same"},
       {"w", "left"},
       {"only0", torch::ones({3})}},
      {3});
  TensorDict t1(
      {{"w", "right"},
       {"a", torch::arange(6, 12, torch::kFloat).view({3, 2})},
       {"n", {{"x", torch::arange(3, 6)}}},
       {"s", "same"}},
      {3});
  for (int64_t dim : {0, 1}) {
    SCOPED_TRACE(dim);
    TensorDict dense = lazy_stack({t0, t1}, dim).contiguous();
    std::vector<int64_t> batch = {3};
    batch.insert(batch.begin() + dim, 2);
    TensorDict expected{c10::IntArrayRef(batch)};
    expected.set("a", torch::stack({t0.get("a"), t1.get("a")}, dim));
    expected.set(
        "n",
        TensorDict(
            {{"x",
              torch::stack({t0.get({"n", "x"}), t1.get({"n", "x"})}, dim)}},
            batch));
    // Python's lazy stack gives a NonTensorStack even for equal values.
    // Built with Json::array: a brace list of two-element lists would make
    // a JSON object.
    auto grid = [&](const char* first, const char* second) {
      Json rows = Json::array();
      if (dim == 0) {
        rows.push_back(Json::array({first, first, first}));
        rows.push_back(Json::array({second, second, second}));
      } else {
        for (int i = 0; i < 3; ++i) {
          rows.push_back(Json::array({first, second}));
        }
      }
      return rows;
    };
    const Json same = grid("same", "same");
    const Json sides = grid("left", "right");
    expected.set("s", Value(NonTensorStack::from_list(same, 2)));
    expected.set("w", Value(NonTensorStack::from_list(sides, 2)));
    tensordict::testing::expect_td_equal(dense, expected);
    EXPECT_TRUE(dense["s"].is_non_tensor_stack());
    EXPECT_NE(dense.get("a").data_ptr(), t0.get("a").data_ptr());
  }
}

TEST(LazyStackTest, ContiguousThrowsOnRaggedOrMixedEntries) {
  LazyStackedTensorDict ragged = lazy_stack(
      {TensorDict({{"n", {{"a", torch::ones({3})}}}}),
       TensorDict({{"n", {{"a", torch::ones({4})}}}})});
  EXPECT_THROWS_EXACTLY(
      ragged.contiguous(),
      c10::Error,
      "Failed to stack tensors within a tensordict under the key ('n', 'a'): "
      "their shapes are [torch.Size([3]), torch.Size([4])]. To read them, "
      "take the entry from each of tensordicts().");
  LazyStackedTensorDict mixed = lazy_stack(
      {TensorDict({{"n", {{"a", torch::ones({3})}}}}),
       TensorDict({{"n", {{"a", {{"b", torch::ones({3})}}}}}})});
  EXPECT_THROWS_EXACTLY(
      mixed.contiguous(),
      c10::TypeError,
      "cannot stack entry ('n', 'a'): it is a Tensor in tensordict 0 and a "
      "TensorDict in tensordict 1");
}

// --- repr --------------------------------------------------------------------

TEST(LazyStackTest, ReprMatchesPython) {
  // python3 -c "with set_printoptions(compact=False): print(lazy_stack([
  //   TensorDict(a=torch.zeros(3), b=torch.zeros(2)),
  //   TensorDict(a=torch.zeros(4))]))"
  LazyStackedTensorDict simple = lazy_stack(
      {TensorDict({{"a", torch::zeros({3})}, {"b", torch::zeros({2})}}),
       TensorDict({{"a", torch::zeros({4})}})});
  EXPECT_EQ(
      simple.repr_detailed(),
      "LazyStackedTensorDict(\n"
      "    fields={\n"
      "        a: Tensor(shape=torch.Size([2, -1]), device=cpu, "
      "dtype=torch.float32, is_shared=False)},\n"
      "    exclusive_fields={\n"
      "        0 ->\n"
      "            b: Tensor(shape=torch.Size([2]), device=cpu, "
      "dtype=torch.float32, is_shared=False)},\n"
      "    batch_size=torch.Size([2]),\n"
      "    device=None,\n"
      "    is_shared=False,\n"
      "    stack_dim=0)");
  {
    tensordict::PrintOptionsGuard detailed(
        tensordict::PrintOptions().compact(false));
    std::ostringstream out;
    out << simple;
    EXPECT_EQ(out.str(), simple.repr_detailed());
  }

  // Nested lazy stacks, stack_dim 1, no exclusive fields.
  LazyStackedTensorDict nested = lazy_stack(
      {TensorDict(
           {{"a", torch::zeros({2, 3})},
            {"b", TensorDict({{"c", torch::zeros({2, 1})}}, {2})}},
           {2}),
       TensorDict(
           {{"a", torch::zeros({2, 4})},
            {"b", TensorDict({{"c", torch::zeros({2, 1})}}, {2})}},
           {2})},
      1);
  EXPECT_EQ(
      nested.repr_detailed(),
      "LazyStackedTensorDict(\n"
      "    fields={\n"
      "        a: Tensor(shape=torch.Size([2, 2, -1]), device=cpu, "
      "dtype=torch.float32, is_shared=False),\n"
      "        b: LazyStackedTensorDict(\n"
      "            fields={\n"
      "                c: Tensor(shape=torch.Size([2, 2, 1]), device=cpu, "
      "dtype=torch.float32, is_shared=False)},\n"
      "            exclusive_fields={\n"
      "            },\n"
      "            batch_size=torch.Size([2, 2]),\n"
      "            device=None,\n"
      "            is_shared=False,\n"
      "            stack_dim=1)},\n"
      "    exclusive_fields={\n"
      "    },\n"
      "    batch_size=torch.Size([2, 2]),\n"
      "    device=None,\n"
      "    is_shared=False,\n"
      "    stack_dim=1)");
}

TEST(LazyStackTest, ReprShowsRaggedMixedAndExclusiveEntriesAsPython) {
  TensorDict t0(
      {{"a", torch::zeros({3, 2})},
       {"n",
        {{"p", torch::zeros({1})}, {"e0", torch::ones({1}, torch::kInt64)}}},
       {"s", "x"},
       {"m", torch::ones({1})}});
  TensorDict t1(
      {{"a", torch::zeros({3})},
       {"n", {{"p", torch::zeros({2})}}},
       {"s", "y"},
       {"m", "q"},
       {"e1", {{"z", torch::ones({1})}}},
       {"e2", "w"}});
  EXPECT_EQ(
      lazy_stack({t0, t1}).repr_detailed(),
      "LazyStackedTensorDict(\n"
      "    fields={\n"
      "        a: Tensor(shape=torch.Size([-1]), device=cpu, "
      "dtype=torch.float32, is_shared=False),\n"
      "        m: [Tensor, NonTensorData],\n"
      "        n: LazyStackedTensorDict(\n"
      "            fields={\n"
      "                p: Tensor(shape=torch.Size([2, -1]), device=cpu, "
      "dtype=torch.float32, is_shared=False)},\n"
      "            exclusive_fields={\n"
      "                0 ->\n"
      "                    e0: Tensor(shape=torch.Size([1]), device=cpu, "
      "dtype=torch.int64, is_shared=False)},\n"
      "            batch_size=torch.Size([2]),\n"
      "            device=None,\n"
      "            is_shared=False,\n"
      "            stack_dim=0),\n"
      "        s: NonTensorStack(\n"
      "            ['x', 'y'],\n"
      "            batch_size=torch.Size([2]),\n"
      "            device=None)},\n"
      "    exclusive_fields={\n"
      "        1 ->\n"
      "            e1: TensorDict(\n"
      "                fields={\n"
      "                    z: Tensor(shape=torch.Size([1]), device=cpu, "
      "dtype=torch.float32, is_shared=False)},\n"
      "                batch_size=torch.Size([]),\n"
      "                device=None,\n"
      "                is_shared=False),\n"
      "            e2: NonTensorData(data=w, batch_size=torch.Size([]), "
      "device=None)},\n"
      "    batch_size=torch.Size([2]),\n"
      "    device=None,\n"
      "    is_shared=False,\n"
      "    stack_dim=0)");
  // Equal shapes and promoted dtypes print like the stacked tensor.
  EXPECT_EQ(
      lazy_stack({TensorDict({{"a", torch::zeros({3}, torch::kInt64)}}),
                  TensorDict({{"a", torch::zeros({3})}})})
          .repr_detailed(),
      "LazyStackedTensorDict(\n"
      "    fields={\n"
      "        a: Tensor(shape=torch.Size([2, 3]), device=cpu, "
      "dtype=torch.float32, is_shared=False)},\n"
      "    exclusive_fields={\n"
      "    },\n"
      "    batch_size=torch.Size([2]),\n"
      "    device=None,\n"
      "    is_shared=False,\n"
      "    stack_dim=0)");
}

// A 0-dim bool index consumes no batch dim (the normalizer TensorDict
// uses): it adds a dim of size 1, as Python's lazy stack does.
TEST(LazyStackTest, ZeroDimBoolIndexAddsADimAndConsumesNone) {
  std::vector<TensorDict> tds;
  for (int64_t i = 0; i < 2; ++i) {
    tds.push_back(
        TensorDict({{"x", torch::arange(12).view({3, 4}) + 12 * i}}, {3}));
  }
  const LazyStackedTensorDict stack = lazy_stack(tds, 0);
  const at::Tensor dense = stack.get("x");

  auto front =
      std::get<LazyStackedTensorDict>(stack.index({torch::tensor(true)}));
  EXPECT_EQ(front.batch_size(), c10::IntArrayRef({1, 2, 3}));
  EXPECT_EQ(front.stack_dim(), 1);
  EXPECT_TRUE(torch::equal(front.get("x"), dense.unsqueeze(0)));

  auto back = std::get<LazyStackedTensorDict>(
      stack.index({tensordict::indexing::Ellipsis, torch::tensor(true)}));
  EXPECT_EQ(back.batch_size(), c10::IntArrayRef({2, 3, 1}));
  EXPECT_TRUE(torch::equal(back.get("x"), dense.unsqueeze(2)));

  auto row = std::get<TensorDict>(stack.index({torch::tensor(true), 1}));
  EXPECT_EQ(row.batch_size(), c10::IntArrayRef({1, 3}));
  EXPECT_TRUE(torch::equal(row.get("x"), tds[1].get("x").unsqueeze(0)));
  EXPECT_EQ(
      std::get<TensorDict>(stack.index({0, torch::tensor(true)})).batch_size(),
      c10::IntArrayRef({1, 3}));

  auto column = std::get<LazyStackedTensorDict>(
      stack.index({torch::tensor(true), Slice(), 1}));
  EXPECT_EQ(column.batch_size(), c10::IntArrayRef({1, 2}));
  EXPECT_EQ(column.get("x").sum().item<int64_t>(), 92);
}

// --- a lazy stack as an entry of a TensorDict ------------------------------

namespace {

// Python's `TensorDict(stack=lazy_stack([a, b], 1), x=zeros(3, 2),
// batch_size=[3, 2])` with a: {y: [3, 2]}, b: {y: [3, 2], z: [3, 1]}.
TensorDict make_holder() {
  TensorDict a({{"y", torch::arange(6, torch::kFloat).view({3, 2})}}, {3});
  TensorDict b(
      {{"y", torch::arange(6, 12, torch::kFloat).view({3, 2})},
       {"z", torch::ones({3, 1})}},
      {3});
  return TensorDict(
      {{"stack", lazy_stack({a, b}, 1)}, {"x", torch::zeros({3, 2})}}, {3, 2});
}

}  // namespace

TEST(LazyStackEntryTest, SetGetAndKeysFollowPython) {
  TensorDict td = make_holder();
  const LazyStackedTensorDict stack = td.get_lazy_stack("stack");
  EXPECT_EQ(stack.stack_dim(), 1);
  EXPECT_TRUE(td["stack"].is_lazy_stack());
  EXPECT_TRUE(td["stack"].lazy_stack().is_same(stack));
  // Through the stack: the stacked leaf, [3, 2] + the leaf's [2].
  const at::Tensor y = td.get({"stack", "y"});
  EXPECT_EQ(y.sizes(), c10::IntArrayRef({3, 2, 2}));
  EXPECT_TRUE(at::equal(y.select(1, 1), stack.tensordicts()[1].get("y")));
  EXPECT_TRUE(td.contains({"stack", "y"}));
  EXPECT_FALSE(td.contains({"stack", "z"}));  // only element 1 holds it
  EXPECT_FALSE(td.contains({"stack", "nope"}));
  EXPECT_TRUE(td[NestedKey({"stack", "y"})].is_tensor());
  // Python: [('stack', 'y'), 'x'] for keys(True, True); the stack's own
  // key comes after its keys with leaves_only=false.
  EXPECT_EQ(
      td.keys(true, true),
      (std::vector<NestedKey>{NestedKey({"stack", "y"}), NestedKey("x")}));
  EXPECT_EQ(
      td.keys(true),
      (std::vector<NestedKey>{
          NestedKey({"stack", "y"}), NestedKey("stack"), NestedKey("x")}));
  EXPECT_THROWS_WITH(
      td.get_tensordict("stack"),
      c10::TypeError,
      "is a LazyStackedTensorDict, not a TensorDict");
  // A stack whose batch size does not start with the dict's is refused.
  EXPECT_THROWS_WITH(
      td.set("bad", lazy_stack({TensorDict({}, {2}), TensorDict({}, {2})})),
      c10::Error,
      "batch dimension mismatch");
}

TEST(LazyStackEntryTest, SetThroughTheStackCutsTheValueAlongTheStackDim) {
  TensorDict td = make_holder();
  td.set({"stack", "w"}, torch::arange(30, torch::kFloat).view({3, 2, 5}));
  const auto& elements = td.get_lazy_stack("stack").tensordicts();
  EXPECT_EQ(elements[0].get("w").sizes(), c10::IntArrayRef({3, 5}));
  EXPECT_EQ(elements[1].get("w")[0][0].item<float>(), 5.0F);
  EXPECT_TRUE(td.contains({"stack", "w"}));
  EXPECT_THROWS_WITH(
      td.set({"stack", "v"}, torch::zeros({3, 3})),
      c10::Error,
      "does not have 2 items at that dim");
}

TEST(LazyStackEntryTest, BatchOpsThroughTheStackMatchPython) {
  const TensorDict td = make_holder();
  // td[0]: the stack keeps its elements, now stacked at dim 0 (Python:
  // LazyStackedTensorDict, batch [2], stack_dim 0).
  const Value row = td.index({0})["stack"];
  ASSERT_TRUE(row.is_lazy_stack());
  EXPECT_EQ(row.lazy_stack().batch_size(), c10::IntArrayRef({2}));
  EXPECT_EQ(row.lazy_stack().stack_dim(), 0);
  EXPECT_TRUE(row.lazy_stack().tensordicts()[1].contains("z"));
  // td[:, 1]: one element, indexed (Python: a TensorDict).
  const Value column = td.index({Slice(), 1})["stack"];
  ASSERT_TRUE(column.is_tensordict());
  EXPECT_EQ(column.tensordict().batch_size(), c10::IntArrayRef({3}));
  EXPECT_TRUE(column.tensordict().contains("z"));
  // reshape(6): six elements stacked at dim 0, alternating a and b.
  const LazyStackedTensorDict flat = td.reshape({6}).get_lazy_stack("stack");
  EXPECT_EQ(flat.stack_dim(), 0);
  ASSERT_EQ(flat.tensordicts().size(), 6U);
  EXPECT_FALSE(flat.tensordicts()[2].contains("z"));
  EXPECT_TRUE(flat.tensordicts()[3].contains("z"));
  EXPECT_EQ(flat.tensordicts()[3].get("y")[0].item<float>(), 8.0F);
  // permute(1, 0) moves the stack dim to 0; unsqueeze(0) moves it to 2.
  const LazyStackedTensorDict permuted =
      td.permute({1, 0}).get_lazy_stack("stack");
  EXPECT_EQ(permuted.stack_dim(), 0);
  EXPECT_EQ(permuted.batch_size(), c10::IntArrayRef({2, 3}));
  EXPECT_EQ(td.unsqueeze(0).get_lazy_stack("stack").stack_dim(), 2);
  // unbind(0): three stacks of batch [2].
  const std::vector<TensorDict> rows = td.unbind(0);
  ASSERT_EQ(rows.size(), 3U);
  EXPECT_EQ(
      rows[2].get_lazy_stack("stack").batch_size(), c10::IntArrayRef({2}));
  EXPECT_TRUE(
      at::equal(rows[2].get({"stack", "y"}), td.get({"stack", "y"})[2]));
  // Elementwise ops keep the stack.
  const TensorDict cloned = td.clone();
  EXPECT_TRUE(cloned["stack"].is_lazy_stack());
  EXPECT_TRUE(tensordict::equal(cloned, td));
  EXPECT_FALSE(cloned.get_lazy_stack("stack").tensordicts()[0].get("y").is_same(
      td.get_lazy_stack("stack").tensordicts()[0].get("y")));
  const TensorDict plus = td.apply([](const at::Tensor& t) { return t + 1; });
  EXPECT_EQ(
      plus.get_lazy_stack("stack")
          .tensordicts()[1]
          .get("z")
          .sum()
          .item<float>(),
      6.0F);
  const TensorDict sum = td + td;
  EXPECT_TRUE(at::equal(sum.get({"stack", "y"}), 2 * td.get({"stack", "y"})));
}

TEST(LazyStackEntryTest, StackAndCatOfDictsHoldingStacks) {
  const TensorDict td = make_holder();
  const TensorDict stacked = tensordict::stack({td, td}, 0);
  const LazyStackedTensorDict inner = stacked.get_lazy_stack("stack");
  EXPECT_EQ(inner.batch_size(), c10::IntArrayRef({2, 3, 2}));
  EXPECT_EQ(inner.stack_dim(), 2);
  EXPECT_TRUE(at::equal(inner.get("y")[1], td.get({"stack", "y"})));
  const TensorDict joined = tensordict::cat({td, td}, 1);
  EXPECT_EQ(joined.get_lazy_stack("stack").tensordicts().size(), 4U);
  EXPECT_EQ(joined.batch_size(), c10::IntArrayRef({3, 4}));
}

namespace {

// A lazy stack one level down, at ("outer", "stack"), batch [3, 2] stacked
// at dim 1, whose elements hold a nested dict: a: {y: [3, 2], n: {q: [3]}},
// b: the same plus z: [3, 1].
TensorDict make_deep_holder() {
  TensorDict a(
      {{"y", torch::arange(6, torch::kFloat).view({3, 2})},
       {"n", {{"q", torch::arange(3)}}}},
      {3});
  TensorDict b(
      {{"y", torch::arange(6, 12, torch::kFloat).view({3, 2})},
       {"n", {{"q", torch::arange(3, 6)}}},
       {"z", torch::ones({3, 1})}},
      {3});
  TensorDict td({}, {3, 2});
  td.set({"outer", "stack"}, lazy_stack({a, b}, 1));
  return td;
}

}  // namespace

TEST(LazyStackEntryTest, EveryReaderGoesThroughAStackOneLevelDownAlike) {
  const TensorDict td = make_deep_holder();
  const LazyStackedTensorDict stack = td.get_lazy_stack({"outer", "stack"});
  const at::Tensor fallback = torch::full({1}, 7);

  // A leaf every element holds: stacked at the stack dim.
  const NestedKey y({"outer", "stack", "y"});
  EXPECT_TRUE(td.contains(y));
  EXPECT_EQ(td.find(y), nullptr);  // nothing is stored at that key
  EXPECT_EQ(td.get(y).sizes(), c10::IntArrayRef({3, 2, 2}));
  EXPECT_TRUE(at::equal(td.get(y), stack.get("y")));
  EXPECT_TRUE(at::equal(td.get(y, fallback), stack.get("y")));
  EXPECT_TRUE(td[y].is_tensor());
  EXPECT_TRUE(at::equal(td[y].tensor(), stack.get("y")));

  // Two levels inside the elements.
  const NestedKey q({"outer", "stack", "n", "q"});
  EXPECT_TRUE(td.contains(q));
  EXPECT_EQ(td.get(q).sizes(), c10::IntArrayRef({3, 2}));
  EXPECT_TRUE(at::equal(td.get(q).select(1, 1), torch::arange(3, 6)));
  EXPECT_TRUE(at::equal(td.get(q, fallback), td.get(q)));

  // A nested dict inside the elements: a lazy stack of them.
  const NestedKey n({"outer", "stack", "n"});
  EXPECT_TRUE(td.contains(n));
  const LazyStackedTensorDict inner = td.get_lazy_stack(n);
  EXPECT_EQ(inner.stack_dim(), 1);
  EXPECT_EQ(inner.batch_size(), c10::IntArrayRef({3, 2}));
  EXPECT_TRUE(inner.tensordicts()[1].get("q").is_same(
      stack.tensordicts()[1].get({"n", "q"})));
  ASSERT_TRUE(td[n].is_lazy_stack());
  EXPECT_TRUE(td[n].lazy_stack().tensordicts()[0].is_same(
      stack.tensordicts()[0].get_tensordict("n")));
  EXPECT_THROWS_EXACTLY(
      td.get(n), c10::TypeError, "the entry 'n' is a TensorDict, not a Tensor");

  // One element lacks it, none has it, or a leaf stands in the way inside
  // the elements: contains is false, get with a default gives the default,
  // and get throws what the stack's own get throws.
  const NestedKey z({"outer", "stack", "z"});
  const NestedKey nope({"outer", "stack", "nope"});
  const NestedKey under_leaf({"outer", "stack", "y", "deeper"});
  for (const NestedKey& key : {z, nope, under_leaf}) {
    EXPECT_FALSE(td.contains(key)) << key;
    EXPECT_TRUE(td.get(key, fallback).is_same(fallback)) << key;
    EXPECT_EQ(td.find(key), nullptr) << key;
  }
  EXPECT_THROWS_EXACTLY(
      td.get(z),
      tensordict::KeyError,
      "key \"z\" not found in LazyStackedTensorDict with keys ['n', 'y']");
  EXPECT_THROWS_EXACTLY(
      td[nope],
      tensordict::KeyError,
      "key \"nope\" not found in LazyStackedTensorDict with keys ['n', 'y']");
  EXPECT_THROWS_EXACTLY(
      td.get(under_leaf),
      tensordict::KeyError,
      "'y' is a Tensor, not a tensordict, so it has no entry 'deeper'.");
  EXPECT_THROWS_WITH(
      td.select({y}),
      c10::NotImplementedError,
      "select: ('outer', 'stack', 'y') is inside a lazy stack");
}

TEST(LazyStackEntryTest, SetThroughAStackOneLevelDownWritesEachElement) {
  TensorDict td = make_deep_holder();
  const LazyStackedTensorDict stack = td.get_lazy_stack({"outer", "stack"});
  td.set({"outer", "stack", "w"}, torch::arange(24).view({3, 2, 4}));
  EXPECT_TRUE(td.contains({"outer", "stack", "w"}));
  EXPECT_TRUE(at::equal(
      stack.tensordicts()[1].get("w"),
      torch::arange(24).view({3, 2, 4}).select(1, 1)));
  // Into the elements' nested dicts, and into new levels there.
  td.set({"outer", "stack", "n", "r"}, torch::ones({3, 2}));
  td.set({"outer", "stack", "m", "s"}, torch::zeros({3, 2, 5}));
  EXPECT_TRUE(
      at::equal(stack.tensordicts()[0].get({"n", "r"}), torch::ones({3})));
  EXPECT_EQ(
      stack.tensordicts()[1].get({"m", "s"}).sizes(), c10::IntArrayRef({3, 5}));
  EXPECT_TRUE(td.contains({"outer", "stack", "m", "s"}));
  EXPECT_THROWS_WITH(
      td.set({"outer", "stack", "v"}, torch::zeros({3, 3})),
      c10::Error,
      "does not have 2 items at that dim");
  EXPECT_FALSE(td.contains({"outer", "stack", "v"}));
}

TEST(LazyStackEntryTest, MemmapRoundTripKeepsTheStackAndPythonsLayout) {
  TempDir dir;
  const TensorDict td = make_holder();
  const TensorDict saved = td.memmap(tensordict::MemmapOptions(dir.str()));
  EXPECT_TRUE(saved["stack"].is_lazy_stack());
  EXPECT_TRUE(tensordict::equal(saved, td));
  EXPECT_TRUE(std::filesystem::exists(dir / "stack/1/z.memmap"));
  const Json meta = Json::parse(read_text(dir / "stack/meta.json"));
  EXPECT_EQ(meta["_type"], "<class 'tensordict._lazy.LazyStackedTensorDict'>");
  EXPECT_EQ(meta["stack_dim"], 1);
  const Json root = Json::parse(read_text(dir / "meta.json"));
  EXPECT_EQ(root["stack"]["type"], "LazyStackedTensorDict");
  const TensorDict loaded = TensorDict::load_memmap(dir.str());
  ASSERT_TRUE(loaded["stack"].is_lazy_stack());
  EXPECT_EQ(loaded.get_lazy_stack("stack").stack_dim(), 1);
  EXPECT_TRUE(tensordict::equal(loaded, td));
  EXPECT_TRUE(loaded.get_lazy_stack("stack").tensordicts()[1].contains("z"));
}

TEST(LazyStackEntryTest, ConsolidateRoundTripsTheStack) {
  const TensorDict td = make_holder();
  const TensorDict packed = td.consolidate();
  EXPECT_TRUE(packed.is_consolidated());
  ASSERT_TRUE(packed["stack"].is_lazy_stack());
  EXPECT_TRUE(tensordict::equal(packed, td));
  const at::Tensor bytes = tensordict::consolidated_bytes(td);
  const TensorDict back = tensordict::from_consolidated_bytes(bytes);
  ASSERT_TRUE(back["stack"].is_lazy_stack());
  EXPECT_EQ(back.get_lazy_stack("stack").stack_dim(), 1);
  EXPECT_TRUE(tensordict::equal(back, td));
}

TEST(LazyStackEntryTest, ConsolidatedStackMembersMustBeItsElements) {
  const TensorDict td = make_holder();
  // Rename element "1" to "7" in the metadata and rebuild the buffer.
  const at::Tensor bytes = tensordict::consolidated_bytes(td);
  const auto* data = static_cast<const char*>(bytes.const_data_ptr());
  std::string text(data, static_cast<size_t>(bytes.numel()));
  size_t at = text.find("\"1\":{\"cls\"");
  if (at == std::string::npos) {
    at = text.find("\"1\": {\"cls\"");
  }
  ASSERT_NE(at, std::string::npos);
  text[at + 1] = '7';
  const at::Tensor edited =
      torch::from_blob(
          text.data(), {static_cast<int64_t>(text.size())}, torch::kUInt8)
          .clone();
  EXPECT_THROWS_WITH(
      tensordict::from_consolidated_bytes(edited),
      c10::Error,
      "the members of a lazy stack must be its elements \"0\" to \"1\", "
      "found \"7\"");
}

// --- a lazy stack at the root: memmap family and consolidate -----------------

namespace {

using tensordict::ConsolidateOptions;
using tensordict::LoadMemmapOptions;
using tensordict::MemmapOptions;
using tensordict::MemoryMappedTensor;
using tensordict::testing::expect_td_equal;
namespace fs = std::filesystem;

// make_elements() stacked at dim 1 under the name "s".
LazyStackedTensorDict make_root_stack() {
  return lazy_stack(make_elements(), 1, "s");
}

void expect_stack_equal(
    const LazyStackedTensorDict& a, const LazyStackedTensorDict& b) {
  EXPECT_EQ(a.stack_dim(), b.stack_dim());
  EXPECT_EQ(a.stack_dim_name(), b.stack_dim_name());
  EXPECT_EQ(a.batch_size(), b.batch_size());
  ASSERT_EQ(a.tensordicts().size(), b.tensordicts().size());
  for (size_t i = 0; i < a.tensordicts().size(); ++i) {
    SCOPED_TRACE("element " + std::to_string(i));
    expect_td_equal(a.tensordicts()[i], b.tensordicts()[i]);
  }
}

}  // namespace

TEST(LazyStackMemmapTest, MemmapWritesPythonsLayoutAndReturnsAMappedStack) {
  TempDir dir;
  const LazyStackedTensorDict stack = make_root_stack();
  const std::string prefix = dir / "ls";
  const LazyStackedTensorDict saved = stack.memmap(prefix);
  EXPECT_FALSE(saved.is_same(stack));
  EXPECT_FALSE(stack.is_memmap());
  EXPECT_TRUE(saved.is_memmap());
  EXPECT_EQ(saved.saved_path(), prefix);
  EXPECT_TRUE(saved.at(0).is_locked());
  EXPECT_EQ(
      MemoryMappedTensor::filename(saved.at(1).get("r")),
      prefix + "/1/r.memmap");
  expect_stack_equal(saved, stack);
  EXPECT_EQ(
      read_text(prefix + "/meta.json"),
      "{\"_type\":\"<class 'tensordict._lazy.LazyStackedTensorDict'>\","
      "\"_format_version\":1,\"_class\":\"tensordict:LazyStackedTensorDict\","
      "\"stack_dim\":1,\"stack_dim_name\":\"s\"}");
  EXPECT_EQ(
      tree_of(prefix),
      (std::vector<std::string>{
          "0",
          "0/a.memmap",
          "0/meta.json",
          "0/n",
          "0/n/meta.json",
          "0/n/x.memmap",
          "0/n/y0.memmap",
          "0/only0.memmap",
          "0/r.memmap",
          "1",
          "1/a.memmap",
          "1/meta.json",
          "1/n",
          "1/n/meta.json",
          "1/n/x.memmap",
          "1/r.memmap",
          "meta.json"}));

  const LazyStackedTensorDict loaded = LazyStackedTensorDict::load(prefix);
  expect_stack_equal(loaded, stack);
  EXPECT_FALSE(loaded.is_memmap());  // as Python: a load is not memmapped
  EXPECT_EQ(loaded.saved_path(), prefix);
  EXPECT_EQ(
      MemoryMappedTensor::filename(loaded.at(0).get({"n", "x"})),
      prefix + "/0/n/x.memmap");
  // The free function is the member.
  // (Two statements: the order of a call's arguments is unspecified.)
  const LazyStackedTensorDict freed =
      tensordict::memmap(stack, MemmapOptions(dir / "free"));
  expect_stack_equal(freed, LazyStackedTensorDict::load_memmap(dir / "free"));
}

TEST(LazyStackMemmapTest, LoadMemmapRefusesADictAndTheDictLoaderAStack) {
  TempDir dir;
  (void)make_root_stack().memmap(dir / "ls");
  (void)make_elements()[0].memmap(dir / "td");
  EXPECT_THROWS_WITH(
      (void)LazyStackedTensorDict::load_memmap(dir / "td"),
      c10::ValueError,
      "holds a TensorDict, not a lazy stack: load it with "
      "TensorDict::load_memmap");
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(dir / "ls"),
      c10::Error,
      "holds a lazy stack (LazyStackedTensorDict, 2 elements)");
  EXPECT_THROWS_WITH(
      (void)LazyStackedTensorDict::load_memmap(dir / "missing"),
      c10::Error,
      "no meta.json");
}

TEST(LazyStackMemmapTest, MemmapInPlaceMapsEveryElementAndLocksThem) {
  TempDir dir;
  const LazyStackedTensorDict expected = make_root_stack();
  LazyStackedTensorDict stack =
      lazy_stack({expected.at(0).clone(), expected.at(1).clone()}, 1, "s");
  const TensorDict first = stack.at(0);
  LazyStackedTensorDict& same = stack.memmap_(dir / "ls");
  EXPECT_TRUE(same.is_same(stack));
  EXPECT_TRUE(stack.at(0).is_same(first));  // the elements themselves
  EXPECT_TRUE(stack.is_memmap());
  EXPECT_TRUE(first.is_locked());
  EXPECT_EQ(stack.device(), c10::Device(c10::kCPU));
  EXPECT_EQ(stack.saved_path(), dir / "ls");
  EXPECT_EQ(
      MemoryMappedTensor::filename(first.get({"n", "y0"})),
      dir / "ls/0/n/y0.memmap");
  expect_stack_equal(stack, expected);
  expect_stack_equal(LazyStackedTensorDict::load_memmap(dir / "ls"), expected);
  // Writing into a leaf writes the file.
  stack.at(1).get("a").fill_(7);
  EXPECT_TRUE(torch::equal(
      LazyStackedTensorDict::load_memmap(dir / "ls").at(1).get("a"),
      torch::full({3, 2}, 7.0F)));

  // Without a prefix: anonymous shared memory, no saved path.
  LazyStackedTensorDict shared = lazy_stack(make_elements());
  shared.memmap_();
  EXPECT_TRUE(shared.is_memmap());
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(shared.at(0).get("a")));
  EXPECT_FALSE(MemoryMappedTensor::filename(shared.at(0).get("a")));
  EXPECT_FALSE(shared.saved_path());
}

TEST(LazyStackMemmapTest, MemmapLikeWritesZerosOfTheSameShapes) {
  TempDir dir;
  const LazyStackedTensorDict stack = make_root_stack();
  const LazyStackedTensorDict like = stack.memmap_like(dir / "like");
  EXPECT_TRUE(like.is_memmap());
  EXPECT_EQ(like.stack_dim(), 1);
  EXPECT_EQ(like.stack_dim_name(), "s");
  for (size_t i = 0; i < 2; ++i) {
    for (const NestedKey& key :
         stack.at(static_cast<int64_t>(i)).keys(true, true)) {
      const at::Tensor source = stack.at(static_cast<int64_t>(i)).get(key);
      const at::Tensor zeros = like.at(static_cast<int64_t>(i)).get(key);
      EXPECT_EQ(zeros.sizes(), source.sizes()) << key;
      EXPECT_EQ(zeros.scalar_type(), source.scalar_type()) << key;
      EXPECT_TRUE(torch::equal(zeros, torch::zeros_like(source))) << key;
    }
  }
  expect_stack_equal(LazyStackedTensorDict::load_memmap(dir / "like"), like);
  EXPECT_TRUE(fs::exists(dir / "like/1/r.memmap"));
}

TEST(LazyStackMemmapTest, SaveToAnArchiveLoadsTheStackBack) {
  TempDir dir;
  const LazyStackedTensorDict stack = make_root_stack();
  const std::string path = dir / "ls.tdz";
  const LazyStackedTensorDict saved = stack.save(path);
  EXPECT_TRUE(fs::is_regular_file(path));
  expect_stack_equal(saved, stack);
  EXPECT_FALSE(saved.saved_path());  // an archive has no directory
  expect_stack_equal(LazyStackedTensorDict::load(path), stack);
  // Only the archive is left, no staging directory.
  EXPECT_EQ(tree_of(dir.str()), std::vector<std::string>{"ls.tdz"});
  EXPECT_THROWS_WITH(
      (void)stack.save(MemmapOptions(path).existsok(false)),
      c10::Error,
      "A file already exists at");
}

TEST(LazyStackMemmapTest, AsyncVariantsReturnWhatTheSyncOnesDo) {
  TempDir dir;
  const LazyStackedTensorDict stack = make_root_stack();
  expect_stack_equal(stack.memmap_async(dir / "a").get(), stack);
  expect_stack_equal(stack.save_async(dir / "b").get(), stack);
  const LazyStackedTensorDict like = stack.memmap_like_async(dir / "c").get();
  EXPECT_TRUE(torch::equal(like.at(0).get("a"), torch::zeros({3, 2})));
  LazyStackedTensorDict copy =
      lazy_stack({stack.at(0).clone(), stack.at(1).clone()}, 1, "s");
  const LazyStackedTensorDict done = copy.memmap_async_(dir / "d").get();
  EXPECT_TRUE(done.is_same(copy));
  EXPECT_EQ(copy.saved_path(), dir / "d");
  expect_stack_equal(LazyStackedTensorDict::load_memmap(dir / "d"), stack);
}

TEST(LazyStackMemmapTest, LoadMemmapInPlaceChecksTheSavedStackFirst) {
  TempDir dir;
  const LazyStackedTensorDict stack = make_root_stack();
  (void)stack.memmap(dir / "ls");
  LazyStackedTensorDict target = lazy_stack(
      {TensorDict({{"a", torch::zeros({3, 2})}}, {3}),
       TensorDict({{"a", torch::zeros({3, 2})}}, {3})},
      1);
  const TensorDict first = target.at(0);
  LazyStackedTensorDict& same = target.load_memmap_(dir / "ls");
  EXPECT_TRUE(same.is_same(target));
  EXPECT_TRUE(target.at(0).is_same(first));
  EXPECT_TRUE(torch::equal(first.get("a"), stack.at(0).get("a")));
  EXPECT_TRUE(torch::equal(target.at(1).get("r"), stack.at(1).get("r")));
  EXPECT_EQ(
      MemoryMappedTensor::filename(first.get("only0")),
      dir / "ls/0/only0.memmap");

  // A stack that does not fit is refused before any element changes.
  LazyStackedTensorDict three = lazy_stack(
      {TensorDict({}, {3}), TensorDict({}, {3}), TensorDict({}, {3})}, 1);
  EXPECT_THROWS_WITH(
      three.load_(dir / "ls"),
      c10::ValueError,
      "Cannot load 2 stacked tensordicts into a stack of 3 tensordicts.");
  EXPECT_EQ(three.at(0).num_keys(), 0U);
  LazyStackedTensorDict dim0 =
      lazy_stack({TensorDict({}, {3}), TensorDict({}, {3})}, 0);
  EXPECT_THROWS_WITH(
      dim0.load_memmap_(dir / "ls"),
      c10::ValueError,
      "with stack dim 1 into a stack of stack dim 0");
  EXPECT_EQ(dim0.at(1).num_keys(), 0U);
  // A damaged element is found before the first element is loaded.
  LazyStackedTensorDict fresh =
      lazy_stack({TensorDict({}, {3}), TensorDict({}, {3})}, 1);
  fs::remove(dir / "ls/1/meta.json");
  EXPECT_THROWS_WITH(
      fresh.load_memmap_(dir / "ls"), c10::Error, "no meta.json in");
  EXPECT_EQ(fresh.at(0).num_keys(), 0U);
}

TEST(LazyStackMemmapTest, MemmapRefreshRereadsTheStacksDirectory) {
  TempDir dir;
  const std::string prefix = dir / "ls";
  LazyStackedTensorDict saved = make_root_stack().memmap(prefix);
  // Another process saves new values and a new key over it.
  std::vector<TensorDict> next = make_elements();
  for (TensorDict& element : next) {
    element.set("extra", torch::full({3}, 5));
  }
  (void)lazy_stack(next, 1, "s").memmap(prefix);
  EXPECT_FALSE(saved.at(1).contains("extra"));
  LazyStackedTensorDict& same = saved.memmap_refresh_();
  EXPECT_TRUE(same.is_same(saved));
  EXPECT_TRUE(torch::equal(saved.at(1).get("extra"), torch::full({3}, 5)));
  EXPECT_TRUE(saved.is_memmap());
  EXPECT_TRUE(saved.at(0).is_locked());

  EXPECT_THROWS_WITH(
      make_root_stack().memmap_refresh_(),
      c10::Error,
      "memmap_refresh_ needs a lazy stack memmapped to a directory");
  // A load is not memmapped (as in Python), so it cannot refresh.
  LazyStackedTensorDict loaded = LazyStackedTensorDict::load_memmap(prefix);
  EXPECT_THROWS_WITH(
      loaded.memmap_refresh_(), c10::Error, "memmap_refresh_ needs");
}

TEST(LazyStackMemmapTest, ATensorclassOverAStackSavesOneDirectoryDown) {
  TempDir dir;
  const std::string prefix = dir / "tc";
  LazyStackedTensorDict stack = make_root_stack();
  stack.set_python_class("<class 'envs.Step'>");
  LazyStackedTensorDict saved = stack.memmap(prefix);
  EXPECT_EQ(saved.python_class(), "<class 'envs.Step'>");
  EXPECT_EQ(
      read_text(prefix + "/meta.json"), "{\"_type\":\"<class 'envs.Step'>\"}");
  EXPECT_TRUE(fs::exists(prefix + "/_tensordict/1/r.memmap"));
  EXPECT_EQ(saved.saved_path(), prefix);
  const LazyStackedTensorDict loaded = LazyStackedTensorDict::load(prefix);
  EXPECT_EQ(loaded.python_class(), "<class 'envs.Step'>");
  expect_stack_equal(loaded, stack);
  saved.at(0).get("a").fill_(3);
  LazyStackedTensorDict plain =
      lazy_stack({TensorDict({}, {3}), TensorDict({}, {3})}, 1);
  plain.load_memmap_(prefix);
  EXPECT_TRUE(torch::equal(plain.at(0).get("a"), torch::full({3, 2}, 3.0F)));
  saved.memmap_refresh_();
  EXPECT_TRUE(torch::equal(saved.at(0).get("a"), torch::full({3, 2}, 3.0F)));
}

TEST(LazyStackMemmapTest, AnOverwriteInPlaceIsSwappedInWhole) {
  TempDir dir;
  const std::string prefix = dir / "ls";
  (void)make_root_stack().memmap(prefix);
  const ino_t before = inode_of(prefix);
  LazyStackedTensorDict stack = lazy_stack(
      {TensorDict({{"b", torch::ones({3})}}, {3}),
       TensorDict({{"b", torch::ones({3})}}, {3})},
      1);
  stack.memmap_(prefix);
  EXPECT_NE(inode_of(prefix), before);
  EXPECT_EQ(stack.saved_path(), prefix);  // the final path, not the staged one
  EXPECT_EQ(
      MemoryMappedTensor::filename(stack.at(1).get("b")),
      prefix + "/1/b.memmap");
  EXPECT_EQ(
      tree_of(prefix),
      (std::vector<std::string>{
          "0",
          "0/b.memmap",
          "0/meta.json",
          "1",
          "1/b.memmap",
          "1/meta.json",
          "meta.json"}));
  // Beside it, the old tree, kept as the spare of the next overwrite.
  std::vector<std::string> top;
  for (const auto& entry : fs::directory_iterator(dir.str())) {
    top.push_back(entry.path().filename().string());
  }
  std::sort(top.begin(), top.end());
  ASSERT_EQ(top.size(), 2U);
  EXPECT_EQ(top[0].rfind(".ls.tmp-" + std::to_string(::getpid()) + "-", 0), 0U)
      << top[0];
  EXPECT_EQ(top[1], "ls");
  // existsok(false) refuses the existing files before touching anything.
  LazyStackedTensorDict other = lazy_stack(
      {TensorDict({{"b", torch::zeros({3})}}, {3}),
       TensorDict({{"b", torch::zeros({3})}}, {3})},
      1);
  EXPECT_THROWS_WITH(
      other.memmap_(MemmapOptions(prefix).existsok(false)),
      c10::Error,
      "already exists");
  EXPECT_FALSE(other.is_memmap());
  EXPECT_FALSE(other.at(0).is_locked());
  expect_stack_equal(LazyStackedTensorDict::load_memmap(prefix), stack);
}

TEST(LazyStackMemmapTest, ARefusedSaveTouchesNothingAndChangesNoElement) {
  TempDir dir;
  const std::string prefix = dir / "ls";
  // Element 1 holds a key that would collide with meta.json's "shape".
  LazyStackedTensorDict stack = lazy_stack(
      {TensorDict({{"a", torch::ones({3})}}, {3}),
       TensorDict(
           {{"a", torch::ones({3})}, {"shape", torch::ones({3})}}, {3})});
  const at::Tensor before = stack.at(0).get("a");
  EXPECT_THROWS_WITH(
      stack.memmap_(prefix), c10::Error, "would collide with the 'shape'");
  EXPECT_TRUE(stack.at(0).get("a").is_same(before));
  EXPECT_FALSE(stack.at(0).is_locked());
  EXPECT_THROWS_WITH(
      (void)stack.memmap_like(prefix), c10::Error, "would collide");
  EXPECT_THROWS_WITH(
      (void)stack.save(dir / "ls.tdz"), c10::Error, "would collide");
  EXPECT_EQ(tree_of(dir.str()), std::vector<std::string>{});
}

TEST(LazyStackMemmapTest, AFreshSaveThatFailsMidwayRemovesEverythingItWrote) {
  TempDir dir;
  // One leaf of 4 MiB against a file size limit of 1 MiB.
  const TensorDict small({{"x", torch::arange(16)}}, {16});
  const TensorDict big(
      {{"x", torch::arange(16)}, {"big", torch::randn({16, 1 << 16})}}, {16});
  const LazyStackedTensorDict stack = lazy_stack({small, big});
  using Write = std::function<void(const std::string&)>;
  const std::vector<std::pair<std::string, Write>> writes = {
      {"memmap", [&](const std::string& p) { (void)stack.memmap(p); }},
      {"threaded memmap",
       [&](const std::string& p) {
         (void)stack.memmap(MemmapOptions(p).num_threads(2));
       }},
      {"memmap_",
       [&](const std::string& p) {
         LazyStackedTensorDict copy = lazy_stack({small.clone(), big.clone()});
         const at::Tensor x = copy.at(0).get("x");
         try {
           copy.memmap_(p);
         } catch (...) {
           // No element changed: the leaves are the ones before the save.
           if (!copy.at(0).get("x").is_same(x) || copy.at(0).is_locked()) {
             throw std::runtime_error("memmap_ changed an element");
           }
           throw;
         }
       }},
      {"memmap_like",
       [&](const std::string& p) { (void)stack.memmap_like(p); }},
      {"archive", [&](const std::string& p) { (void)stack.save(p + ".tdz"); }},
  };
  for (const auto& entry : writes) {
    // Not a structured binding: C++17 lambdas cannot capture one (clang
    // says so).
    const auto& write = entry.second;
    SCOPED_TRACE(entry.first);
    const std::string message = run_with_file_size_limit(
        [&] { write(dir / "missing/parents/ls"); }, rlim_t{1} << 20);
    EXPECT_NE(message.find("File too large"), std::string::npos) << message;
    EXPECT_NE(message.find("big"), std::string::npos) << message;
    // Nothing is left: not the prefix, not its parents, no hidden sibling.
    EXPECT_EQ(tree_of(dir.str()), std::vector<std::string>{});
  }
  expect_stack_equal(stack.memmap(dir / "ls"), stack);
}

TEST(LazyStackConsolidateTest, ConsolidateAtTheRootKeepsTheStack) {
  const LazyStackedTensorDict stack = make_root_stack();
  EXPECT_FALSE(stack.is_consolidated());
  EXPECT_FALSE(stack.consolidated_storage().defined());
  const LazyStackedTensorDict packed = stack.consolidate();
  EXPECT_TRUE(packed.is_consolidated());
  expect_stack_equal(packed, stack);
  EXPECT_TRUE(packed.at(1).is_locked());
  // One storage for both elements, in order: element 0's leaves first.
  const at::Tensor storage = packed.consolidated_storage();
  EXPECT_TRUE(storage.defined());
  const auto* bytes = storage.storage().unsafeGetStorageImpl();
  EXPECT_EQ(packed.at(1).get("r").storage().unsafeGetStorageImpl(), bytes);
  EXPECT_LT(packed.at(0).get("a").data_ptr(), packed.at(1).get("a").data_ptr());
  EXPECT_TRUE(packed.consolidate().is_same(packed));
  // Two elements consolidated apart do not make a consolidated stack.
  const LazyStackedTensorDict apart =
      lazy_stack({stack.at(0).consolidate(), stack.at(1).consolidate()}, 1);
  EXPECT_FALSE(apart.is_consolidated());
}

TEST(LazyStackConsolidateTest, AFileHoldsPythonsRootLevelAndLoadsBack) {
  TempDir dir;
  const std::string path = dir / "stack.bin";
  const LazyStackedTensorDict stack = make_root_stack();
  const LazyStackedTensorDict packed =
      stack.consolidate(ConsolidateOptions().filename(path));
  expect_stack_equal(packed, stack);
  const std::string text = read_text(path);
  int64_t length = 0;
  std::memcpy(&length, text.data() + text.size() - 8, 8);
  const Json meta = Json::parse(text.substr(text.size() - 8 - length, length));
  EXPECT_EQ(meta["cls"], "LazyStackedTensorDict");
  EXPECT_EQ(
      meta["cls_metadata"],
      Json::parse(R"({"stack_dim": 1, "stack_dim_name": "s",
                      "is_locked": false})"));
  EXPECT_EQ(
      meta["0"]["leaves"]["a"],
      Json::parse(R"(["torch.float32", [3, 2], 0, 24, 0])"));
  EXPECT_EQ(meta["1"]["cls"], "TensorDict");

  const LazyStackedTensorDict loaded =
      LazyStackedTensorDict::from_consolidated(path);
  EXPECT_TRUE(loaded.is_consolidated());
  // As Python's from_consolidated, each level lists its tensors before its
  // nested dicts (Python: ['a', 'r', 'only0', 'n'] for element 0), so the
  // values are compared key by key.
  EXPECT_EQ(loaded.stack_dim(), stack.stack_dim());
  EXPECT_EQ(loaded.stack_dim_name(), stack.stack_dim_name());
  ASSERT_EQ(loaded.tensordicts().size(), stack.tensordicts().size());
  EXPECT_EQ(
      loaded.at(0).keys(), (std::vector<NestedKey>{"a", "r", "only0", "n"}));
  for (size_t i = 0; i < stack.tensordicts().size(); ++i) {
    const TensorDict want = stack.tensordicts()[i];
    const TensorDict got = loaded.tensordicts()[i];
    const auto keys = want.keys(
        /*include_nested=*/true,
        /*leaves_only=*/true,
        /*sort=*/true);
    ASSERT_EQ(got.keys(true, true, true), keys) << "element " << i;
    for (const NestedKey& key : keys) {
      EXPECT_TRUE(torch::equal(got.get(key), want.get(key)))
          << "element " << i << " " << key;
    }
  }
  EXPECT_THROWS_WITH(
      (void)TensorDict::from_consolidated(path),
      c10::Error,
      "load a lazy stack at the root with "
      "LazyStackedTensorDict::from_consolidated");
  (void)stack.at(0).consolidate(ConsolidateOptions().filename(dir / "td.bin"));
  EXPECT_THROWS_WITH(
      (void)LazyStackedTensorDict::from_consolidated(dir / "td.bin"),
      c10::ValueError,
      "holds a TensorDict, not a lazy stack: load it with "
      "TensorDict::from_consolidated");
  EXPECT_THROWS_WITH(
      (void)stack.consolidate(ConsolidateOptions().filename(dir.str())),
      c10::Error,
      "is a directory");
}

}  // namespace lazy_stack_test
