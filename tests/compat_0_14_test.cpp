// Trees written by Python tensordict 0.14.3 (the version TorchRL 0.14 pins)
// load in C++ with their exact values, and what C++ saves of them loads back
// equal. The fixtures are committed under tests/data/tensordict_0_14 and
// were made by make_fixtures.py there; its README.md says what 0.14 writes
// differently from 0.15 (no dim names, no _format_version, compact JSON).
//
// With TENSORDICT_COMPAT_0_14_OUT set, the round trips save under that
// directory (one entry per fixture, same name) and keep the copies for
// tests/python/compat_0_14_interop.py, where Python 0.15 loads them.

#include <cstdlib>
#include <filesystem>
#include <string>

#include "support.h"

namespace compat_0_14_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)
using tensordict::testing::expect_td_equal;
using tensordict::testing::read_text;
using tensordict::testing::TempDir;
namespace fs = std::filesystem;

namespace {

struct Step : TensorClass<Step> {
  TENSORDICT_FIELDS(Step, obs, reward, (std::string, task))
};
TENSORDICT_PYTHON_CLASS(Step, "<class 'compat_0_14_classes.Step'>");

std::string fixture(const std::string& name) {
  return (fs::path(__FILE__).parent_path() / "data" / "tensordict_0_14" / name)
      .string();
}

// Where a round trip saves `name`: under TENSORDICT_COMPAT_0_14_OUT when the
// Python interop test asks for the copies, else in the test's temp dir.
std::string resave_path(const TempDir& dir, const std::string& name) {
  const char* out = std::getenv("TENSORDICT_COMPAT_0_14_OUT");
  if (out == nullptr || *out == '\0') {
    return dir / name;
  }
  fs::create_directories(out);
  const fs::path path = fs::path(out) / name;
  fs::remove_all(path);
  return path.string();
}

at::Tensor arange_as(int64_t n, c10::ScalarType dtype) {
  return torch::arange(n, torch::TensorOptions().dtype(dtype));
}

void expect_tensor(
    const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  EXPECT_EQ(got.scalar_type(), want.scalar_type()) << what;
  EXPECT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_TRUE(torch::equal(got, want))
      << what << ": got " << got << ", want " << want;
}

// The nested fixture as make_fixtures.py's nested() builds it, checked
// value by value (shared by the load and the round trip).
void expect_nested(const TensorDict& td) {
  EXPECT_EQ(td.batch_size(), c10::IntArrayRef({2, 3}));
  // 0.14 does not save dim names (0.15 writes "_names"): the tree was named
  // ["env", "time"] in Python, and Python 0.14 loads it unnamed too.
  EXPECT_FALSE(td.has_names());
  EXPECT_EQ(
      td.keys(),
      (std::vector<NestedKey>{
          "f32",
          "f64",
          "i64",
          "flag",
          "bf16",
          "u8",
          "empty",
          "a key/with space",
          "sub",
          "empty_sub",
          "note",
          "words"}));
  expect_tensor(
      td.get("f32"), arange_as(6, torch::kFloat32).reshape({2, 3}) / 4, "f32");
  expect_tensor(
      td.get("f64"),
      arange_as(6, torch::kFloat64).reshape({2, 3}) - 2.5,
      "f64");
  expect_tensor(
      td.get("i64"),
      arange_as(12, torch::kInt64).reshape({2, 3, 2}) * -3,
      "i64");
  expect_tensor(
      td.get("flag"),
      torch::tensor({true, false, true, false, false, true}).reshape({2, 3}),
      "flag");
  expect_tensor(
      td.get("bf16"),
      (arange_as(6, torch::kFloat32).reshape({2, 3}) / 2).to(torch::kBFloat16),
      "bf16");
  EXPECT_EQ(td.get("bf16")[1][2].item<float>(), 2.5F);
  expect_tensor(
      td.get("u8"),
      (arange_as(6, torch::kInt64) + 250).to(torch::kUInt8).reshape({2, 3}),
      "u8");
  EXPECT_EQ(td.get("u8")[1][2].item<int64_t>(), 255);
  expect_tensor(td.get("empty"), torch::zeros({2, 3, 0}), "empty");
  expect_tensor(
      td.get("a key/with space"),
      arange_as(6, torch::kInt32).reshape({2, 3}),
      "a key/with space");

  const TensorDict sub = td.get_tensordict("sub");
  EXPECT_EQ(sub.batch_size(), c10::IntArrayRef({2, 3}));
  EXPECT_FALSE(sub.has_names());
  expect_tensor(
      td.get({"sub", "x"}),
      arange_as(24, torch::kFloat32).reshape({2, 3, 4}),
      "sub.x");
  EXPECT_EQ(
      td.get_tensordict({"sub", "deeper"}).batch_size(),
      c10::IntArrayRef({2, 3}));
  expect_tensor(
      td.get({"sub", "deeper", "y"}),
      arange_as(6, torch::kInt16).reshape({2, 3}),
      "sub.deeper.y");
  const Value label = td[{"sub", "label"}];
  ASSERT_TRUE(label.is_non_tensor_data());
  EXPECT_EQ(label.non_tensor_data().data(), Json("hello"));
  EXPECT_EQ(label.non_tensor_data().batch_size(), c10::IntArrayRef({2, 3}));

  const TensorDict empty_sub = td.get_tensordict("empty_sub");
  EXPECT_EQ(empty_sub.batch_size(), c10::IntArrayRef({2, 3}));
  EXPECT_TRUE(empty_sub.keys().empty());

  const Value note = td["note"];
  ASSERT_TRUE(note.is_non_tensor_data());
  EXPECT_EQ(
      note.non_tensor_data().data(),
      Json::parse(R"({"lr": 0.5, "tags": ["a", "b"]})"));
  EXPECT_EQ(note.non_tensor_data().batch_size(), c10::IntArrayRef({2, 3}));

  const Value words = td["words"];
  ASSERT_TRUE(words.is_non_tensor_stack());
  EXPECT_EQ(words.non_tensor_stack().batch_size(), c10::IntArrayRef({2, 3}));
  EXPECT_EQ(
      words.non_tensor_stack().tolist(),
      Json::parse(R"([["a", "b", "c"], ["d", "e", "f"]])"));
}

void expect_lazy_nested(const TensorDict& td) {
  EXPECT_EQ(td.batch_size(), c10::IntArrayRef({2}));
  EXPECT_EQ(td.keys(), (std::vector<NestedKey>{"stack", "count"}));
  expect_tensor(td.get("count"), torch::tensor({2, 2}), "count");
  ASSERT_TRUE(td["stack"].is_lazy_stack());
  const LazyStackedTensorDict stack = td.get_lazy_stack("stack");
  EXPECT_EQ(stack.stack_dim(), 0);
  EXPECT_EQ(stack.batch_size(), c10::IntArrayRef({2}));
  ASSERT_EQ(stack.tensordicts().size(), 2U);
  const TensorDict first = stack.at(0);
  const TensorDict second = stack.at(1);
  EXPECT_EQ(first.batch_size(), c10::IntArrayRef({}));
  EXPECT_EQ(first.keys(), (std::vector<NestedKey>{"obs", "id"}));
  expect_tensor(
      first.get("obs"), arange_as(3, torch::kFloat32), "stack[0].obs");
  expect_tensor(first.get("id"), torch::tensor(0), "stack[0].id");
  EXPECT_EQ(second.keys(), (std::vector<NestedKey>{"obs", "id", "extra"}));
  expect_tensor(
      second.get("obs"), arange_as(5, torch::kFloat32) + 10, "stack[1].obs");
  expect_tensor(second.get("id"), torch::tensor(1), "stack[1].id");
  expect_tensor(
      second.get("extra"), torch::ones({2}, torch::kFloat64), "stack[1].extra");
  // The common key stacks through the lazy stack; the ragged one does not.
  EXPECT_TRUE(td.contains({"stack", "id"}));
  EXPECT_FALSE(td.contains({"stack", "extra"}));
  expect_tensor(td.get({"stack", "id"}), torch::tensor({0, 1}), "stack.id");
}

void expect_lazy_root(const LazyStackedTensorDict& stack) {
  EXPECT_EQ(stack.stack_dim(), 1);
  EXPECT_EQ(stack.batch_size(), c10::IntArrayRef({2, 3}));
  EXPECT_FALSE(stack.has_names());
  ASSERT_EQ(stack.tensordicts().size(), 3U);
  for (int64_t i = 0; i < 3; ++i) {
    const TensorDict element = stack.at(i);
    const std::string what = "lazy_root[" + std::to_string(i) + "]";
    EXPECT_EQ(element.batch_size(), c10::IntArrayRef({2})) << what;
    EXPECT_EQ(element.keys(), (std::vector<NestedKey>{"a", "m"})) << what;
    expect_tensor(
        element.get("a"), arange_as(4, torch::kInt64).reshape({2, 2}), what);
    EXPECT_EQ(element.get_tensordict("m").batch_size(), c10::IntArrayRef({2}));
    expect_tensor(
        element.get({"m", "b"}),
        torch::full({2, 1}, static_cast<double>(i), torch::kFloat32),
        what + ".m.b");
  }
  // Stacked along dim 1: a's [2, 2] leaves become [2, 3, 2].
  expect_tensor(
      stack.get("a"),
      torch::stack(
          std::vector<at::Tensor>(
              3, arange_as(4, torch::kInt64).reshape({2, 2})),
          1),
      "lazy_root.a");
}

void expect_step(const Step& step) {
  EXPECT_EQ(step.batch_size(), c10::IntArrayRef({4}));
  expect_tensor(
      step.obs(), arange_as(8, torch::kFloat32).reshape({4, 2}), "step.obs");
  expect_tensor(
      step.reward(), torch::tensor({0.0F, 1.0F, -1.0F, 0.5F}), "step.reward");
  EXPECT_EQ(step.task(), "reach");
}

void expect_replay_buffer(const TensorDict& td) {
  EXPECT_EQ(td.batch_size(), c10::IntArrayRef({6}));
  EXPECT_EQ(
      td.keys(),
      (std::vector<NestedKey>{"observation", "action", "done", "next"}));
  EXPECT_EQ(
      td.get_tensordict("next").keys(),
      (std::vector<NestedKey>{"observation", "reward"}));
  EXPECT_EQ(td.get_tensordict("next").batch_size(), c10::IntArrayRef({6}));
  // Rows 0-3 were written after memmap_like; rows 4 and 5 stay zero.
  at::Tensor observation = torch::zeros({6, 3});
  at::Tensor action = torch::zeros({6, 2}, torch::kInt64);
  at::Tensor done = torch::zeros({6, 1}, torch::kBool);
  at::Tensor next_observation = torch::zeros({6, 3});
  at::Tensor reward = torch::zeros({6, 1});
  for (int64_t i = 0; i < 4; ++i) {
    observation[i] = arange_as(3, torch::kFloat32) + i;
    action[i] = torch::tensor({i, -i});
    done[i][0] = i == 3;
    next_observation[i] = arange_as(3, torch::kFloat32) + i + 1;
    reward[i][0] = static_cast<double>(i) / 2;
  }
  expect_tensor(td.get("observation"), observation, "observation");
  expect_tensor(td.get("action"), action, "action");
  expect_tensor(td.get("done"), done, "done");
  expect_tensor(
      td.get({"next", "observation"}), next_observation, "next.observation");
  expect_tensor(td.get({"next", "reward"}), reward, "next.reward");
}

void expect_consolidated(const TensorDict& td) {
  EXPECT_EQ(td.batch_size(), c10::IntArrayRef({2}));
  // 0.14 keeps dim names in a consolidated file (not in a memmap tree).
  EXPECT_EQ(td.names(), (DimNames{"env"}));
  EXPECT_EQ(td.get_tensordict("b").names(), (DimNames{"env"}));
  // In the file's order: leaves, then non-tensors, then nested dicts.
  EXPECT_EQ(td.keys(), (std::vector<NestedKey>{"a", "h", "b"}));
  EXPECT_EQ(
      td.get_tensordict("b").keys(), (std::vector<NestedKey>{"s", "c", "d"}));
  expect_tensor(
      td.get("a"), arange_as(6, torch::kFloat32).reshape({2, 3}), "a");
  EXPECT_EQ(td.get_tensordict("b").batch_size(), c10::IntArrayRef({2}));
  expect_tensor(
      td.get({"b", "c"}), arange_as(4, torch::kInt64).reshape({2, 2}), "b.c");
  expect_tensor(td.get({"b", "d"}), torch::tensor({true, false}), "b.d");
  const Value s = td[{"b", "s"}];
  ASSERT_TRUE(s.is_non_tensor_data());
  EXPECT_EQ(s.non_tensor_data().data(), Json("text"));
  EXPECT_EQ(s.non_tensor_data().batch_size(), c10::IntArrayRef({2}));
  expect_tensor(td.get("h"), arange_as(2, torch::kFloat64), "h");
}

TEST(Compat014Test, NestedTreeLoadsWithEveryDtypeAndNonTensor) {
  const std::string path = fixture("nested");
  const TensorDict td = TensorDict::load_memmap(path);
  expect_nested(td);
  // The key with "/" and spaces sits in one file, encoded as 0.15 does.
  EXPECT_TRUE(fs::exists(fs::path(path) / "a%20key%2Fwith%20space.memmap"));
  // The zero-element leaf has no file, as 0.15 writes it too.
  EXPECT_FALSE(fs::exists(fs::path(path) / "empty.memmap"));
  // The same through load_memmap_any.
  const LoadedTree any = load_memmap_any(path);
  ASSERT_TRUE(std::holds_alternative<TensorDict>(any));
  expect_td_equal(std::get<TensorDict>(any), td);
}

TEST(Compat014Test, NestedTreeRoundTrips) {
  TempDir dir;
  const TensorDict td = TensorDict::load_memmap(fixture("nested"));
  const std::string out = resave_path(dir, "nested");
  (void)td.memmap(MemmapOptions(out).copy_existing(true));
  const TensorDict back = TensorDict::load_memmap(out);
  expect_nested(back);
  expect_td_equal(back, td);
  EXPECT_TRUE(fs::exists(fs::path(out) / "a%20key%2Fwith%20space.memmap"));
}

TEST(Compat014Test, NestedLazyStackLoadsAndRoundTrips) {
  TempDir dir;
  const TensorDict td = TensorDict::load_memmap(fixture("lazy_nested"));
  expect_lazy_nested(td);
  const std::string out = resave_path(dir, "lazy_nested");
  (void)td.memmap(MemmapOptions(out).copy_existing(true));
  const TensorDict back = TensorDict::load_memmap(out);
  expect_lazy_nested(back);
}

TEST(Compat014Test, LazyStackAtTheRootLoadsAndRoundTrips) {
  TempDir dir;
  const std::string path = fixture("lazy_root");
  const LoadedTree tree = load_memmap_any(path);
  ASSERT_TRUE(std::holds_alternative<LazyStackedTensorDict>(tree));
  const auto& stack = std::get<LazyStackedTensorDict>(tree);
  expect_lazy_root(stack);
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(path),
      c10::Error,
      "holds a lazy stack (LazyStackedTensorDict");

  const std::string out = resave_path(dir, "lazy_root");
  (void)memmap(stack, MemmapOptions(out).copy_existing(true));
  const LoadedTree back = load_memmap_any(out);
  ASSERT_TRUE(std::holds_alternative<LazyStackedTensorDict>(back));
  const auto& back_stack = std::get<LazyStackedTensorDict>(back);
  expect_lazy_root(back_stack);
  for (int64_t i = 0; i < 3; ++i) {
    expect_td_equal(back_stack.at(i), stack.at(i));
  }
}

TEST(Compat014Test, TensorClassLoadsAsTheDeclaredStructAndRoundTrips) {
  TempDir dir;
  const std::string path = fixture("tensorclass");
  const Step step = Step::load_memmap(path);
  expect_step(step);
  // Untyped, the dict remembers the Python class.
  const TensorDict untyped = TensorDict::load_memmap(path);
  EXPECT_EQ(untyped.python_class(), "<class 'compat_0_14_classes.Step'>");
  EXPECT_EQ(untyped.get_non_tensor("task"), Json("reach"));

  const std::string out = resave_path(dir, "tensorclass");
  (void)step.memmap(MemmapOptions(out).copy_existing(true));
  EXPECT_EQ(read_text(out + "/meta.json"), read_text(path + "/meta.json"));
  const Step back = Step::load_memmap(out);
  expect_step(back);
  EXPECT_EQ(
      TensorDict::load_memmap(out).python_class(),
      "<class 'compat_0_14_classes.Step'>");
}

TEST(Compat014Test, NonTensorDataAtTheRootLoadsAndRoundTrips) {
  TempDir dir;
  const NonTensorData data =
      NonTensorData::load_memmap(fixture("non_tensor_data"));
  EXPECT_EQ(data.data(), Json("a string at the root"));
  // Its meta.json has no batch size (0.15's neither): saved with batch [3],
  // it loads with [] in Python too.
  EXPECT_EQ(data.batch_size(), c10::IntArrayRef({}));
  EXPECT_THROWS_WITH(
      (void)NonTensorStack::load_memmap(fixture("non_tensor_data")),
      c10::Error,
      "non_tensor_data");

  const std::string out = resave_path(dir, "non_tensor_data");
  (void)data.memmap(out);
  const NonTensorData back = NonTensorData::load_memmap(out);
  EXPECT_EQ(back, data);
  EXPECT_EQ(back.data(), Json("a string at the root"));
  EXPECT_EQ(back.batch_size(), c10::IntArrayRef({}));
}

TEST(Compat014Test, NonTensorStackAtTheRootLoadsAndRoundTrips) {
  TempDir dir;
  const NonTensorStack stack =
      NonTensorStack::load_memmap(fixture("non_tensor_stack"));
  EXPECT_EQ(stack.batch_size(), c10::IntArrayRef({4}));
  EXPECT_EQ(stack.tolist(), Json::parse(R"([1, "two", {"three": 3.0}, null])"));
  EXPECT_TRUE(stack.at(0).is_number_integer());
  EXPECT_TRUE(stack.at(2)["three"].is_number_float());

  const std::string out = resave_path(dir, "non_tensor_stack");
  (void)stack.memmap(out);
  const NonTensorStack back = NonTensorStack::load_memmap(out);
  EXPECT_EQ(back, stack);
  EXPECT_EQ(back.tolist(), stack.tolist());
}

TEST(Compat014Test, ReplayBufferStorageLoadsAndRoundTrips) {
  TempDir dir;
  const TensorDict td = TensorDict::load_memmap(fixture("replay_buffer"));
  expect_replay_buffer(td);
  const std::string out = resave_path(dir, "replay_buffer");
  (void)td.memmap(MemmapOptions(out).copy_existing(true));
  const TensorDict back = TensorDict::load_memmap(out);
  expect_replay_buffer(back);
  expect_td_equal(back, td);
}

TEST(Compat014Test, ConsolidatedFileLoadsAndRoundTrips) {
  TempDir dir;
  const std::string path = fixture("consolidated.td");
  const TensorDict td = TensorDict::from_consolidated(path);
  expect_consolidated(td);
  EXPECT_TRUE(td.is_consolidated());

  // Saved as a memmap directory (what the interop test loads in Python).
  const std::string out = resave_path(dir, "consolidated");
  (void)td.memmap(MemmapOptions(out).copy_existing(true));
  const TensorDict back = TensorDict::load_memmap(out);
  expect_consolidated(back);
  expect_td_equal(back, td);

  // And consolidated again into a file of C++'s own.
  const std::string file = dir / "again.td";
  (void)td.consolidate(ConsolidateOptions().filename(file));
  const TensorDict again = TensorDict::from_consolidated(file);
  expect_consolidated(again);
  expect_td_equal(again, td);
}

}  // namespace
}  // namespace compat_0_14_test
