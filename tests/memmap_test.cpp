// Tests of include/tensordict/memmap.h and the memmap methods of TensorDict.
// Python interop lives in tests/python (run_memmap_interop.py).

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace memmap_test {

using namespace tensordict;           // NOLINT(google-build-using-namespace)
using namespace tensordict::testing;  // NOLINT(google-build-using-namespace)
namespace fs = std::filesystem;

namespace {

TensorDict sample() {
  TensorDict td(
      {{"obs", torch::arange(12, torch::kFloat32).reshape({3, 4})},
       {"next",
        {{"reward", torch::tensor({1.5, -2.0, 3.25}, torch::kFloat64)},
         {"done", torch::tensor({true, false, true})}}},
       {"task", "reach"},
       {"empty", torch::zeros({3, 0})}},
      /*batch_size=*/{3});
  td.set("labels", NonTensorStack({"a", "b", "c"}));
  return td;
}

}  // namespace

// --- layout -----------------------------------------------------------------

TEST(MemmapTest, WritesPythonsLayoutWithCompactJson) {
  TempDir dir;
  TensorDict td = sample();
  td.set_names({"time"});
  (void)td.memmap(dir / "td");
  EXPECT_EQ(
      read_text(dir / "td/meta.json"),
      "{\"obs\":{\"device\":\"cpu\",\"shape\":[3,4],\"dtype\":\"torch."
      "float32\","
      "\"is_nested\":false},\"next\":{\"type\":\"TensorDict\"},\"task\":{"
      "\"type\":\"NonTensorData\"},\"empty\":{\"device\":\"cpu\",\"shape\":[3,"
      "0],\"dtype\":\"torch.float32\",\"is_nested\":false},\"labels\":{"
      "\"type\":"
      "\"NonTensorStack\"},\"shape\":[3],\"device\":\"cpu\",\"_type\":\"<class "
      "'tensordict._td.TensorDict'>\",\"_format_version\":1,\"_class\":"
      "\"tensordict:TensorDict\",\"_names\":[\"time\"]}");
  EXPECT_EQ(fs::file_size(dir / "td/obs.memmap"), 48u);
  EXPECT_EQ(fs::file_size(dir / "td/next/reward.memmap"), 24u);
  EXPECT_EQ(fs::file_size(dir / "td/next/done.memmap"), 3u);
  EXPECT_FALSE(fs::exists(dir / "td/empty.memmap"));  // no file for 0 elements
  EXPECT_EQ(
      read_text(dir / "td/task/meta.json"),
      "{\"_type\":\"<class 'tensordict.tensorclass.NonTensorData'>\",\"data\":"
      "\"reach\",\"_metadata\":null,\"_is_non_tensor\":true}");
  EXPECT_EQ(
      read_text(dir / "td/labels/meta.json"),
      "{\"_type\":\"<class 'tensordict.tensorclass.NonTensorStack'>\","
      "\"_format_version\":1,\"_class\":\"tensordict:NonTensorStack\","
      "\"stack_dim\":0,\"device\":null,\"data\":[\"a\",\"b\",\"c\"]}");
  // The raw bytes are the tensor's, little-endian.
  const std::string bytes = read_text(dir / "td/next/reward.memmap");
  EXPECT_EQ(
      std::memcmp(bytes.data(), td.get({"next", "reward"}).data_ptr(), 24), 0);
}

TEST(MemmapTest, SpacedStyleEscapesLikePythonsJsonModule) {
  TempDir dir;
  TensorDict td({{"é", torch::zeros({2})}, {"s", "日本\n"}}, {2});
  (void)td.memmap(MemmapOptions(dir / "td").json_style(JsonStyle::kSpaced));
  EXPECT_EQ(
      read_text(dir / "td/meta.json"),
      "{\"\\u00e9\": {\"device\": \"cpu\", \"shape\": [2], \"dtype\": "
      "\"torch.float32\", \"is_nested\": false}, \"s\": {\"type\": "
      "\"NonTensorData\"}, \"shape\": [2], \"device\": \"cpu\", \"_type\": "
      "\"<class 'tensordict._td.TensorDict'>\", \"_format_version\": 1, "
      "\"_class\": \"tensordict:TensorDict\"}");
  EXPECT_EQ(
      read_text(dir / "td/s/meta.json"),
      "{\"_type\": \"<class 'tensordict.tensorclass.NonTensorData'>\", "
      "\"data\": \"\\u65e5\\u672c\\n\", \"_metadata\": null, "
      "\"_is_non_tensor\": true}");
  EXPECT_TRUE(fs::exists(dir / "td/é.memmap"));
}

TEST(MemmapTest, EncodesKeysAsPythonsRobustKey) {
  EXPECT_EQ(encode_key_for_filesystem("a/b/c"), "a%2Fb%2Fc");
  EXPECT_EQ(
      encode_key_for_filesystem("key with spaces"), "key%20with%20spaces");
  EXPECT_EQ(encode_key_for_filesystem("100%"), "100%25");
  EXPECT_EQ(encode_key_for_filesystem("../outside"), "..%2Foutside");
  EXPECT_EQ(encode_key_for_filesystem(""), "%");
  EXPECT_EQ(encode_key_for_filesystem("."), "%2E");
  EXPECT_EQ(encode_key_for_filesystem(".."), "%2E%2E");
  EXPECT_EQ(encode_key_for_filesystem("é"), "é");
  EXPECT_EQ(encode_key_for_filesystem("a.b"), "a.b");
  EXPECT_EQ(encode_key_for_filesystem(std::string("\x7f\x01", 2)), "%7F%01");
}

TEST(MemmapTest, KeysNeverLeaveThePrefix) {
  TempDir dir;
  TensorDict td(
      {{"../escape", torch::ones({1})},
       {"..", {{"x", torch::ones({1})}}},
       {"", torch::ones({1})},
       {"/abs", torch::ones({1})}},
      {1});
  (void)td.memmap(dir / "td");
  EXPECT_TRUE(fs::exists(dir / "td/..%2Fescape.memmap"));
  EXPECT_TRUE(fs::exists(dir / "td/%2E%2E/x.memmap"));
  EXPECT_TRUE(fs::exists(dir / "td/%.memmap"));
  EXPECT_TRUE(fs::exists(dir / "td/%2Fabs.memmap"));
  EXPECT_FALSE(fs::exists(dir / "escape.memmap"));
  expect_td_equal(TensorDict::load_memmap(dir / "td"), td);
  EXPECT_THROWS_WITH(
      (void)td.memmap(MemmapOptions(dir / "raw").robust_key(false)),
      c10::Error,
      "is not a safe file name");
}

// Trees of tensordict < 0.13 name files by the raw key. Python's load
// (robust_key=True) falls back to the raw name when the encoded one is
// missing, and so does ours; the encoded name wins when both exist.
// Python 0.15: td.memmap(p, robust_key=False) writes 'a b.memmap',
// 'c%d.memmap' and 'n/e:f.memmap' for these keys.
TEST(MemmapTest, LoadFallsBackToRawFileNamesOfOldTrees) {
  TempDir dir;
  TensorDict td({2});
  td.set("a b", torch::ones({2}));
  td.set("c%d", torch::arange(2));
  td.set({"n", "ef:g"}, torch::tensor({3.5, 4.5}));
  (void)td.memmap(MemmapOptions(dir / "raw").robust_key(false));
  EXPECT_TRUE(fs::exists(dir / "raw/a b.memmap"));
  EXPECT_TRUE(fs::exists(dir / "raw/c%d.memmap"));
  EXPECT_TRUE(fs::exists(dir / "raw/n/ef:g.memmap"));
  EXPECT_FALSE(fs::exists(dir / "raw/a%20b.memmap"));
  expect_td_equal(TensorDict::load_memmap(dir / "raw"), td);
  expect_td_equal(
      TensorDict::load_memmap(
          dir / "raw", LoadMemmapOptions().robust_key(false)),
      td);
  // Both names present: the encoded file is the one read.
  (void)MemoryMappedTensor::from_tensor(
      torch::full({2}, 9.0F), dir / "raw/a%20b.memmap");
  EXPECT_TRUE(torch::equal(
      TensorDict::load_memmap(dir / "raw").get("a b"), torch::full({2}, 9.0)));
  // Neither present: the error names the encoded file Python writes.
  fs::remove(dir / "raw/a b.memmap");
  fs::remove(dir / "raw/a%20b.memmap");
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(dir / "raw"), c10::Error, "a%20b.memmap");
}

// --- round trips
// --------------------------------------------------------------

TEST(MemmapTest, MemmapReturnsALockedCopyBackedByFiles) {
  TempDir dir;
  TensorDict td = sample();
  TensorDict saved = td.memmap(dir / "td");
  expect_td_equal(saved, td);
  EXPECT_TRUE(saved.is_locked());
  EXPECT_TRUE(saved.is_memmap());
  EXPECT_FALSE(td.is_memmap());
  EXPECT_EQ(saved.saved_path(), dir / "td");
  EXPECT_EQ(
      MemoryMappedTensor::filename(saved.get("obs")), dir / "td/obs.memmap");
  // Writing into the mapped leaf writes the file.
  saved.get("obs").fill_(7);
  TensorDict loaded = TensorDict::load_memmap(dir / "td");
  EXPECT_TRUE(torch::equal(loaded.get("obs"), torch::full({3, 4}, 7.0)));
  EXPECT_FALSE(loaded.is_locked());
  EXPECT_FALSE(loaded.is_memmap());
  EXPECT_EQ(loaded.get_non_tensor("task"), "reach");
  EXPECT_EQ(
      loaded["task"].non_tensor_data().batch_size(), c10::IntArrayRef({3}));
  saved.unlock_();
  EXPECT_FALSE(saved.is_memmap());
}

TEST(MemmapTest, RoundTripsEveryDtypeBitForBit) {
  TempDir dir;
  std::vector<c10::ScalarType> dtypes = {
      torch::kBool,
      torch::kUInt8,
      torch::kInt8,
      torch::kInt16,
      torch::kInt32,
      torch::kInt64,
      torch::kFloat16,
      torch::kBFloat16,
      torch::kFloat32,
      torch::kFloat64,
      torch::kComplexFloat,
      torch::kComplexDouble};
  TensorDict td({}, {5});
  for (const auto dtype : dtypes) {
    td.set(c10::toString(dtype), (torch::randn({5, 2}) * 100).to(dtype));
  }
  td.set(
      "nan",
      torch::tensor(
          std::vector<float>{NAN, INFINITY, -INFINITY, -0.0f, 1e-40f}));
  (void)td.memmap(dir / "td");
  TensorDict loaded = TensorDict::load_memmap(dir / "td");
  for (const auto& [key, value] : td.items()) {
    const auto a = value.tensor().contiguous().view(torch::kUInt8);
    const auto b = loaded.get(key).contiguous().view(torch::kUInt8);
    EXPECT_TRUE(torch::equal(a, b)) << key;
    EXPECT_EQ(loaded.get(key).scalar_type(), value.tensor().scalar_type());
  }
}

TEST(MemmapTest, NonContiguousAndConjugateSourcesAreMaterialized) {
  TempDir dir;
  auto base = torch::arange(24, torch::kFloat32).reshape({4, 6});
  auto complex = torch::randn({4, 2}, torch::kComplexFloat);
  TensorDict td(
      {{"t", base.t().narrow(0, 0, 4)},
       {"expanded", torch::ones({1, 3}).expand({4, 3})},
       {"conj", complex.conj()},
       {"neg", torch::randn({4}).neg()}},
      {4});
  TensorDict loaded =
      TensorDict::load_memmap(*td.memmap(dir / "td").saved_path());
  expect_td_equal(loaded, td);
}

TEST(MemmapTest, MemmapInPlaceReplacesLeaves) {
  TempDir dir;
  TensorDict td = sample();
  TensorDict alias = td;
  td.memmap_(dir / "td");
  EXPECT_TRUE(alias.is_memmap());
  EXPECT_TRUE(alias.is_locked());
  EXPECT_TRUE(
      MemoryMappedTensor::filename(alias.get({"next", "reward"})).has_value());
  expect_td_equal(TensorDict::load_memmap(dir / "td"), sample());
  // Saving again to the same place reuses the files.
  td.memmap_(dir / "td");
  expect_td_equal(TensorDict::load_memmap(dir / "td"), sample());
}

TEST(MemmapTest, MemmapLikeKeepsTheBytesOfExistingFilesAsPython) {
  // Python 0.15.3:
  //   TensorDict({"a": torch.full((3,), 7.)}, [3]).memmap(d)
  //   TensorDict({"a": torch.zeros(3)}, [3]).memmap_like(d)["a"]  # [7, 7, 7]
  //   TensorDict.load_memmap(d)["a"]                              # [7, 7, 7]
  //   TensorDict({"a": torch.zeros(5)}, [5]).memmap_like(d)["a"]
  //   # [7, 7, 7, 0, 0] (grown with zeros)
  //   TensorDict({"a": torch.zeros(2)}, [2]).memmap_like(d)["a"]  # [7, 7]
  //   TensorDict({"b": torch.ones(3)}, [3]).memmap_like(d2)["b"]  # zeros
  TempDir dir;
  (void)TensorDict({{"a", torch::full({3}, 7.)}}, {3}).memmap(dir / "td");
  const TensorDict like =
      TensorDict({{"a", torch::zeros({3})}}, {3}).memmap_like(dir / "td");
  EXPECT_TRUE(torch::equal(like.get("a"), torch::full({3}, 7.)));
  EXPECT_TRUE(torch::equal(
      TensorDict::load_memmap(dir / "td").get("a"), torch::full({3}, 7.)));
  const TensorDict grown =
      TensorDict({{"a", torch::zeros({5})}}, {5}).memmap_like(dir / "td");
  EXPECT_TRUE(
      torch::equal(grown.get("a"), torch::tensor({7.F, 7.F, 7.F, 0.F, 0.F})));
  (void)TensorDict({{"a", torch::full({3}, 7.)}}, {3}).memmap(dir / "td");
  const TensorDict shrunk =
      TensorDict({{"a", torch::zeros({2})}}, {2}).memmap_like(dir / "td");
  EXPECT_TRUE(torch::equal(shrunk.get("a"), torch::full({2}, 7.)));
  EXPECT_TRUE(torch::equal(
      TensorDict::load_memmap(dir / "td").get("a"), torch::full({2}, 7.)));
  // A new prefix, and a leaf the old tree lacks, hold zeros.
  TensorDict td = sample();
  const TensorDict fresh = td.memmap_like(dir / "fresh");
  EXPECT_TRUE(torch::equal(fresh.get("obs"), torch::zeros({3, 4})));
  EXPECT_EQ(fresh.get({"next", "done"}).scalar_type(), torch::kBool);
  (void)TensorDict({{"a", torch::full({3}, 7.)}}, {3}).memmap(dir / "td");
  const TensorDict more =
      TensorDict({{"a", torch::zeros({3})}, {"b", torch::ones({3})}}, {3})
          .memmap_like(dir / "td");
  EXPECT_TRUE(torch::equal(more.get("a"), torch::full({3}, 7.)));
  EXPECT_TRUE(torch::equal(more.get("b"), torch::zeros({3})));
}

TEST(MemmapTest, WithoutPrefixLeavesLiveInSharedMemory) {
  TensorDict saved = sample().memmap();
  EXPECT_TRUE(saved.is_memmap());
  EXPECT_FALSE(saved.saved_path().has_value());
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(saved.get("obs")));
  EXPECT_FALSE(MemoryMappedTensor::filename(saved.get("obs")).has_value());
  expect_td_equal(saved, sample());
}

TEST(MemmapTest, ThreadsAndProgressWriteTheSameFiles) {
  TempDir dir;
  TensorDict td({}, {8});
  for (int i = 0; i < 40; ++i) {
    td.set("leaf" + std::to_string(i), torch::randn({8, 16}));
  }
  std::vector<int64_t> seen;
  std::mutex mutex;
  auto options = MemmapOptions(dir / "td")
                     .num_threads(4)
                     .progress([&](int64_t done, int64_t total) {
                       std::lock_guard<std::mutex> lock(mutex);
                       EXPECT_EQ(total, 40 * 8 * 16 * 4);
                       seen.push_back(done);
                     });
  (void)td.memmap(options);
  ASSERT_EQ(seen.size(), 40u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(seen.back(), 40 * 8 * 16 * 4);
  expect_td_equal(TensorDict::load_memmap(dir / "td"), td);
  auto future = td.memmap_async(MemmapOptions(dir / "async").durable(true));
  expect_td_equal(future.get(), td);
  expect_td_equal(TensorDict::load_memmap(dir / "async"), td);
}

TEST(MemmapTest, LoadOptions) {
  TempDir dir;
  (void)sample().memmap(dir / "td");
  TensorDict meta = TensorDict::load_memmap(
      dir / "td", LoadMemmapOptions().device(c10::Device(c10::kMeta)));
  EXPECT_TRUE(meta.get("obs").is_meta());
  EXPECT_EQ(meta.get("obs").sizes(), c10::IntArrayRef({3, 4}));
  TensorDict sub = TensorDict::load_memmap(
      dir / "td", LoadMemmapOptions().subpath({"next"}));
  EXPECT_TRUE(
      torch::equal(sub.get("reward"), sample().get({"next", "reward"})));
  // Copy-on-write: writes stay in memory.
  TensorDict cow = TensorDict::load_memmap(
      dir / "td", LoadMemmapOptions().mode(MapMode::kReadOnly));
  cow.get("obs").fill_(-1);
  EXPECT_TRUE(torch::equal(
      TensorDict::load_memmap(dir / "td").get("obs"), sample().get("obs")));
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(
          dir / "td", LoadMemmapOptions().subpath({"nope"})),
      c10::Error,
      "the subpath part 'nope' names no saved tensordict");
}

TEST(MemmapTest, LoadMemmapInPlaceAndRefresh) {
  TempDir dir;
  TensorDict saved = sample().memmap(dir / "td");
  TensorDict other = TensorDict::load_memmap(dir / "td");
  other.memmap_(dir / "td");  // memmapped to the same directory
  at::Tensor added = saved.make_memmap({"extra", "x"}, {3, 2}, torch::kInt32);
  added.fill_(5);
  EXPECT_TRUE(saved.is_locked());
  EXPECT_FALSE(other.contains({"extra", "x"}));
  other.memmap_refresh_();
  EXPECT_TRUE(other.is_memmap());
  EXPECT_TRUE(torch::equal(
      other.get({"extra", "x"}), torch::full({3, 2}, 5, torch::kInt32)));
  EXPECT_THROWS_WITH(
      (void)saved.make_memmap("obs", {3}), c10::Error, "already exists");
  EXPECT_THROWS_WITH(
      (void)sample().make_memmap("z", {3}),
      c10::Error,
      "needs a dict memmapped");
  EXPECT_THROWS_WITH(
      sample().memmap_refresh_(), c10::Error, "memmap_refresh_ needs");
}

TEST(MemmapTest, LazyStacksRoundTrip) {
  TempDir dir;
  auto stack = lazy_stack(
      {TensorDict({{"a", torch::ones({2})}}),
       TensorDict({{"a", torch::zeros({3})}})});
  (void)memmap(stack, dir / "ls");
  EXPECT_TRUE(fs::exists(dir / "ls/0/a.memmap"));
  EXPECT_TRUE(fs::exists(dir / "ls/1/a.memmap"));
  LoadedTree tree = load_memmap_any(dir / "ls");
  auto& loaded = std::get<LazyStackedTensorDict>(tree);
  EXPECT_EQ(loaded.tensordicts().size(), 2u);
  EXPECT_TRUE(torch::equal(loaded.at(1).get("a"), torch::zeros({3})));
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(dir / "ls"),
      c10::Error,
      "tensordict::load_memmap");
}

TEST(MemmapTest, LazyStackDimNamesRoundTrip) {
  TempDir dir;
  TensorDict element({{"a", torch::ones({3, 2})}}, {3}, std::nullopt, {"n"});
  auto stack = lazy_stack({element, element.clone()}, 1, "s");
  (void)memmap(stack, dir / "ls");
  EXPECT_NE(
      read_text(dir / "ls/meta.json").find("\"stack_dim_name\":\"s\""),
      std::string::npos);
  LoadedTree tree = load_memmap_any(dir / "ls");
  const auto& loaded = std::get<LazyStackedTensorDict>(tree);
  EXPECT_EQ(loaded.stack_dim(), 1);
  EXPECT_EQ(loaded.names(), (tensordict::DimNames{"n", "s"}));

  write_text(
      dir / "ls/meta.json",
      "{\"_type\": \"<class 'tensordict._lazy.LazyStackedTensorDict'>\", "
      "\"stack_dim\": 1, "
      "\"stack_dim_name\": 3}");
  EXPECT_THROWS_WITH(
      (void)load_memmap_any(dir / "ls"),
      c10::Error,
      "\"stack_dim_name\" must be a string or null, found number");
}

TEST(MemmapTest, TensorclassOverALazyStackRoundTrips) {
  // Python's `Cls.lazy_stack(...)`: the class at the root, the stack below.
  TempDir dir;
  auto stack = lazy_stack(
      {TensorDict({{"a", torch::ones({2})}}),
       TensorDict({{"a", torch::zeros({2})}})});
  stack.set_python_class("<class 'envs.Step'>");
  EXPECT_THROWS_WITH(
      stack.set_python_class("Step"), c10::ValueError, "<class 'module.Name'>");
  const auto saved = memmap(stack, dir / "ls");
  EXPECT_EQ(saved.python_class(), "<class 'envs.Step'>");
  EXPECT_EQ(
      read_text(dir / "ls/meta.json"), "{\"_type\":\"<class 'envs.Step'>\"}");
  EXPECT_TRUE(fs::exists(dir / "ls/_tensordict/1/a.memmap"));

  LoadedTree tree = load_memmap_any(dir / "ls");
  const auto& loaded = std::get<LazyStackedTensorDict>(tree);
  EXPECT_EQ(loaded.python_class(), "<class 'envs.Step'>");
  EXPECT_TRUE(torch::equal(loaded.at(1).get("a"), torch::zeros({2})));
  // TensorDict::load_memmap never copies it silently into memory.
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(dir / "ls"),
      c10::Error,
      "holds a lazy stack (LazyStackedTensorDict of <class 'envs.Step'>, 2 "
      "elements), which TensorDict::load_memmap can only return as a copy in "
      "memory, no longer mapped. Load it mapped with the free "
      "tensordict::load_memmap, which returns it as Python's "
      "TensorDict.load_memmap does");
  // Python 0.15.3: tensordict.load_memmap(d) (and TensorDict.load_memmap(d))
  // returns the LazyStackedTensorDict saved there; so does the free
  // load_memmap, mapped, and `load` alike.
  LoadedTree free_tree = tensordict::load_memmap(dir / "ls");
  const auto* free_stack = std::get_if<LazyStackedTensorDict>(&free_tree);
  ASSERT_NE(free_stack, nullptr);
  EXPECT_EQ(free_stack->python_class(), "<class 'envs.Step'>");
  EXPECT_TRUE(torch::equal(free_stack->at(1).get("a"), torch::zeros({2})));
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(free_stack->at(0).get("a")));
  EXPECT_TRUE(std::holds_alternative<LazyStackedTensorDict>(
      tensordict::load(dir / "ls")));
  EXPECT_TRUE(verify_memmap(dir / "ls").empty());

  // Any other collection under _tensordict is refused, never read as empty.
  write_text(
      dir / "ls/_tensordict/meta.json",
      "{\"_type\": \"<class 'tensordict.tensorclass.NonTensorStack'>\"}");
  EXPECT_THROWS_WITH(
      (void)load_memmap_any(dir / "ls"),
      c10::Error,
      "but the fields of the tensorclass <class 'envs.Step'> must be a "
      "TensorDict or a "
      "LazyStackedTensorDict");
}

TEST(MemmapTest, ALazyStackLoadsIntoANestedDictInPlaceAsThatStack) {
  // {"n": a lazy stack on disk}: a dense load stacks it; loading in place
  // replaces the nested dict by the mapped stack, as Python does.
  TempDir dir;
  TensorDict td({{"n", TensorDict({{"a", torch::zeros({2, 3})}}, {2})}}, {2});
  (void)td.memmap(dir / "td");
  fs::remove_all(dir / "td/n");
  (void)memmap(
      lazy_stack(
          {TensorDict({{"a", torch::ones({3})}}),
           TensorDict({{"a", torch::ones({3})}})}),
      dir / "td/n");
  EXPECT_TRUE(torch::equal(
      TensorDict::load_memmap(dir / "td").get({"n", "a"}),
      torch::ones({2, 3})));
  const TensorDict nested = td.get_tensordict("n");
  td.load_memmap_(dir / "td");
  const Value& n = td["n"];
  ASSERT_TRUE(n.is_lazy_stack());
  EXPECT_EQ(n.lazy_stack().tensordicts().size(), 2u);
  EXPECT_TRUE(
      MemoryMappedTensor::is_memmap(n.lazy_stack().tensordicts()[1].get("a")));
  EXPECT_TRUE(torch::equal(td.get({"n", "a"}), torch::ones({2, 3})));
  // The dict it replaced is left as it was.
  EXPECT_TRUE(torch::equal(nested.get("a"), torch::zeros({2, 3})));
}

TEST(MemmapTest, PythonClassRoundTrips) {
  TempDir dir;
  TensorDict td({{"x", torch::ones({2})}, {"y", "hi"}}, {2});
  td.set_python_class("<class '__main__.MyData'>");
  (void)td.memmap(dir / "tc");
  EXPECT_EQ(
      read_text(dir / "tc/meta.json"),
      "{\"_type\":\"<class '__main__.MyData'>\"}");
  EXPECT_TRUE(fs::exists(dir / "tc/_tensordict/x.memmap"));
  TensorDict loaded = TensorDict::load_memmap(dir / "tc");
  EXPECT_EQ(loaded.python_class(), "<class '__main__.MyData'>");
  expect_td_equal(loaded, td);
  EXPECT_THROWS_WITH(
      td.set_python_class("MyData"), c10::ValueError, "<class 'module.Name'>");
}

// tests/data/pickled_values: non-tensor values Python 0.15.3 pickled (see
// tests/data/README.md), read without executing anything.
TEST(MemmapPickleTest, LoadsTheValuesPythonPickled) {
  const std::string fixture =
      (fs::path(__FILE__).parent_path() / "data" / "pickled_values").string();
  TempDir dir;
  pack_memmap(fixture, dir / "tree.tdz");
  for (const std::string& path : {fixture, dir / "tree.tdz"}) {
    SCOPED_TRACE(path);
    TensorDict td = TensorDict::load_memmap(path);
    EXPECT_TRUE(torch::equal(td.get("obs"), torch::arange(2, torch::kFloat)));
    // np.arange(6, dtype=np.int16).reshape(2, 3) spans the batch [2]: a leaf
    EXPECT_TRUE(torch::equal(
        td.get("arr"), torch::arange(6, torch::kInt16).reshape({2, 3})));
    // np.array([0.5, 1.5, 2.5], dtype=np.float32) does not: its tolist()
    EXPECT_EQ(td.get_non_tensor("vec"), Json::parse("[0.5, 1.5, 2.5]"));
    // {"size": torch.Size([3, 4]), "pair": (1, "x"), 7: b"\x00\xff"}
    const Json meta = td.get_non_tensor("meta");
    EXPECT_EQ(meta["size"], Json::parse("[3, 4]"));
    EXPECT_EQ(meta["pair"], Json::parse(R"([1, "x"])"));
    EXPECT_EQ(meta["7"], Json::binary({0x00, 0xff}));
    // np.float32(2.25)
    EXPECT_EQ(td.get_non_tensor("scalar"), 2.25);
    // NonTensorStack(np.array([1, 2], dtype=np.uint8), (3, 4))
    const Value* stack = td.find("stack");
    ASSERT_NE(stack, nullptr);
    ASSERT_TRUE(stack->is_non_tensor_stack());
    EXPECT_EQ(stack->non_tensor_stack().batch_size(), c10::IntArrayRef({2}));
    EXPECT_EQ(
        stack->non_tensor_stack().tolist(), Json::parse("[[1, 2], [3, 4]]"));
  }
  // At the root, a NonTensorData stays one: the array as nested lists.
  EXPECT_EQ(
      NonTensorData::load_memmap(fixture + "/arr").data(),
      Json::parse("[[0, 1, 2], [3, 4, 5]]"));
  // skip_pickle drops them unread.
  const TensorDict skipped =
      TensorDict::load_memmap(fixture, LoadMemmapOptions().skip_pickle(true));
  EXPECT_EQ(skipped.keys().size(), 1U);
  EXPECT_TRUE(skipped.contains("obs"));
}

TEST(MemmapPickleTest, SavesWhatItReadAsJsonAndTensors) {
  const std::string fixture =
      (fs::path(__FILE__).parent_path() / "data" / "pickled_values").string();
  TempDir dir;
  (void)TensorDict::load_memmap(fixture).memmap(
      MemmapOptions(dir / "copy").copy_existing(true));
  EXPECT_FALSE(fs::exists(dir / "copy/meta/other.pickle"));
  const TensorDict td = TensorDict::load_memmap(dir / "copy");
  EXPECT_TRUE(torch::equal(
      td.get("arr"), torch::arange(6, torch::kInt16).reshape({2, 3})));
  EXPECT_TRUE(fs::exists(dir / "copy/arr.memmap"));
  // Bytes are written as the list of their values, JSON having no bytes.
  EXPECT_EQ(
      td.get_non_tensor("meta"),
      Json::parse(R"({"size": [3, 4], "pair": [1, "x"], "7": [0, 255]})"));
  EXPECT_EQ(td.get_non_tensor("vec"), Json::parse("[0.5, 1.5, 2.5]"));
  EXPECT_EQ(td.get_non_tensor("scalar"), 2.25);
}

TEST(MemmapPickleTest, APickleThatWouldRunCodeIsRefused) {
  const std::string fixture =
      (fs::path(__FILE__).parent_path() / "data" / "pickled_values").string();
  TempDir dir;
  fs::copy(fixture, dir / "tree", fs::copy_options::recursive);
  // pickle.dumps({"data": Evil()}, protocol=4), with Evil.__reduce__
  // returning (os.system, ("touch /tmp/pwned",)).
  const std::string hex =
      "80049535000000000000007d948c0464617461948c05706f736978948c0673797374"
      "656d9493948c10746f756368202f746d702f70776e65649485945294732e";
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(
        static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  write_text(dir / "tree/meta/other.pickle", bytes);
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(dir / "tree"),
      c10::ValueError,
      "key 'meta': invalid pickle in " + dir / "tree" +
          "/meta/other.pickle at byte 37: the global 'posix.system' is not "
          "allowed");
  EXPECT_NE(
      verify_memmap(dir / "tree").at(0).find("'posix.system' is not allowed"),
      std::string::npos);
  EXPECT_TRUE(TensorDict::load_memmap(
                  dir / "tree", LoadMemmapOptions().skip_pickle(true))
                  .contains("obs"));
}

TEST(MemmapTest, LoadsPythonsCommittedArtifact) {
  const std::string fixture =
      (fs::path(__FILE__).parent_path() / "data" / "mmap_example").string();
  TensorDict td = TensorDict::load_memmap(
      fixture, LoadMemmapOptions().mode(MapMode::kReadOnly));
  EXPECT_EQ(td.batch_size(), c10::IntArrayRef({2, 1}));
  EXPECT_EQ(td.get_tensordict("nested").batch_size(), c10::IntArrayRef({2, 1}));
  EXPECT_TRUE(torch::equal(
      td.get({"nested", "int64"}), torch::tensor({{1}, {2}}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(
      td.get({"nested", "bfloat16"}), torch::ones({2, 1}, torch::kBFloat16)));
  EXPECT_EQ(
      td.get_non_tensor({"nested", "string"}), Json::array({"a string!"}));
}

// --- MemoryMappedTensor
// ---------------------------------------------------------

TEST(MemoryMappedTensorTest, FactoriesMapFiles) {
  TempDir dir;
  auto t = MemoryMappedTensor::from_tensor(torch::arange(4), dir / "a.memmap");
  EXPECT_EQ(MemoryMappedTensor::filename(t), dir / "a.memmap");
  EXPECT_EQ(MemoryMappedTensor::filename(t.narrow(0, 1, 2)), dir / "a.memmap");
  EXPECT_TRUE(torch::equal(
      MemoryMappedTensor::from_filename(
          dir / "a.memmap", torch::kInt64, {2, 2}),
      torch::arange(4).reshape({2, 2})));
  EXPECT_TRUE(torch::equal(
      MemoryMappedTensor::zeros({3}, torch::kFloat32, dir / "z"),
      torch::zeros({3})));
  EXPECT_TRUE(torch::equal(
      MemoryMappedTensor::ones({3}, torch::kInt8, dir / "o"),
      torch::ones({3}, torch::kInt8)));
  EXPECT_TRUE(torch::equal(
      MemoryMappedTensor::full({2}, 2.5, torch::kFloat64, dir / "f"),
      torch::full({2}, 2.5, torch::kFloat64)));
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(MemoryMappedTensor::empty({2})));
  EXPECT_FALSE(MemoryMappedTensor::is_memmap(torch::ones({2})));
  // The same file is reused; another one needs copy_existing.
  EXPECT_TRUE(MemoryMappedTensor::from_tensor(t, dir / "a.memmap").is_same(t));
  EXPECT_THROWS_WITH(
      (void)MemoryMappedTensor::from_tensor(t, dir / "b.memmap"),
      c10::Error,
      "pass copy_existing=true");
  EXPECT_THROWS_WITH(
      (void)MemoryMappedTensor::from_tensor(torch::ones({2}), dir / "a.memmap"),
      c10::Error,
      "already exists");
  EXPECT_THROWS_WITH(
      (void)MemoryMappedTensor::from_filename(
          dir / "a.memmap", torch::kInt64, {5}),
      c10::Error,
      "has 32 bytes, but its shape [5] of torch.int64 needs 40");
}

TEST(MemoryMappedTensorTest, FromTensorTakesPythonsKeywordsAsOptions) {
  TempDir dir;
  const at::Tensor t =
      MemoryMappedTensor::from_tensor(torch::arange(4), dir / "a.memmap");
  // copy_existing=True: a tensor backed by another file is copied.
  const at::Tensor copy = MemoryMappedTensor::from_tensor(
      t, FromTensorOptions(dir / "b.memmap").copy_existing(true));
  EXPECT_EQ(MemoryMappedTensor::filename(copy), dir / "b.memmap");
  EXPECT_TRUE(torch::equal(copy, torch::arange(4)));
  // existsok=True: an existing file is reused.
  (void)MemoryMappedTensor::empty({4}, torch::kInt64, dir / "c.memmap");
  const at::Tensor reused = MemoryMappedTensor::from_tensor(
      torch::full({4}, 7, torch::kInt64),
      FromTensorOptions(dir / "c.memmap").existsok(true));
  EXPECT_TRUE(torch::equal(reused, torch::full({4}, 7, torch::kInt64)));
  EXPECT_TRUE(torch::equal(
      MemoryMappedTensor::from_filename(dir / "c.memmap", torch::kInt64, {4}),
      torch::full({4}, 7, torch::kInt64)));
  // copy_data=False: zeros of the tensor's shape and dtype.
  const at::Tensor zeros = MemoryMappedTensor::from_tensor(
      torch::ones({2, 3}, torch::kDouble),
      FromTensorOptions(dir / "z.memmap").copy_data(false));
  EXPECT_EQ(zeros.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(zeros.scalar_type(), torch::kDouble);
  EXPECT_TRUE(torch::equal(zeros, torch::zeros({2, 3}, torch::kDouble)));
  // No file name: anonymous shared memory.
  const at::Tensor shared = MemoryMappedTensor::from_tensor(torch::arange(3));
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(shared));
  EXPECT_FALSE(MemoryMappedTensor::filename(shared).has_value());
  EXPECT_TRUE(torch::equal(shared, torch::arange(3)));
  // empty and zeros are one factory: both start zeroed.
  EXPECT_TRUE(torch::equal(
      MemoryMappedTensor::empty({3}, torch::kFloat32, dir / "e"),
      torch::zeros({3})));
  EXPECT_THROWS_WITH(
      (void)MemoryMappedTensor::zeros({3}, torch::kFloat32, dir / "e"),
      c10::Error,
      "already exists");
}

// Python's spellings `save`, `load` and `load_` are the memmap family:
// the same files, the same results.
TEST(MemmapTest, SaveLoadAndLoadInPlaceAreTheMemmapFamily) {
  TempDir dir;
  const TensorDict td = sample();
  const TensorDict saved = td.save(MemmapOptions(dir / "saved"));
  (void)td.memmap(dir / "memmapped");
  expect_td_equal(saved, td);
  EXPECT_TRUE(saved.is_memmap());
  EXPECT_EQ(saved.saved_path(), dir / "saved");
  for (const std::string name :
       {"meta.json",
        "obs.memmap",
        "next/meta.json",
        "next/reward.memmap",
        "labels/meta.json"}) {
    EXPECT_EQ(
        read_text(dir / ("saved/" + name)),
        read_text(dir / ("memmapped/" + name)))
        << name;
  }
  const TensorDict loaded = TensorDict::load(dir / "saved");
  expect_td_equal(loaded, td);
  EXPECT_EQ(
      MemoryMappedTensor::filename(loaded.get("obs")),
      dir / "saved/obs.memmap");

  TensorDict target({3});
  target.set("obs", torch::zeros({3, 4}));
  target.set("mine", torch::ones({3}));
  EXPECT_EQ(&target.load_(dir / "saved"), &target);
  EXPECT_TRUE(torch::equal(target.get("obs"), td.get("obs")));
  EXPECT_EQ(
      MemoryMappedTensor::filename(target.get("obs")),
      dir / "saved/obs.memmap");
  EXPECT_EQ(target.get_non_tensor("task"), "reach");
  EXPECT_THROWS_WITH(
      (void)TensorDict::load(dir / "missing"), c10::Error, dir / "missing");
}

// from_storage views a storage without copying, as Python's does, and a
// file-backed storage (ours or torch's from_file) keeps its file.
TEST(MemoryMappedTensorTest, FromStorageViewsTheStorageAndKeepsItsFile) {
  TempDir dir;
  const std::string file = dir / "x.memmap";
  const at::Tensor source =
      MemoryMappedTensor::from_tensor(torch::arange(6, torch::kFloat32), file);
  at::Tensor x = MemoryMappedTensor::from_storage(
      source.storage(),
      FromStorageOptions().dtype(torch::kFloat32).shape({{2, 3}}));
  EXPECT_TRUE(
      torch::equal(x, torch::arange(6, torch::kFloat32).reshape({2, 3})));
  EXPECT_EQ(MemoryMappedTensor::filename(x), file);
  x.index_put_({1, 2}, 50.0F);
  EXPECT_EQ(source[5].item<float>(), 50.0F);  // the same memory
  EXPECT_EQ(
      MemoryMappedTensor::from_filename(file, torch::kFloat32, {6})[5]
          .item<float>(),
      50.0F);  // and the same file
  // -1 infers a size; the file check passes for the storage's own file.
  EXPECT_EQ(
      MemoryMappedTensor::from_storage(
          source.storage(),
          FromStorageOptions()
              .dtype(torch::kFloat32)
              .shape({{-1, 2}})
              .filename(file))
          .sizes(),
      at::IntArrayRef({3, 2}));

  // A storage torch mapped itself (Python's UntypedStorage.from_file).
  const at::Tensor by_torch = at::from_file(
      file, /*shared=*/true, /*size=*/24, at::TensorOptions().dtype(at::kByte));
  const at::Tensor y = MemoryMappedTensor::from_storage(
      by_torch.storage(), FromStorageOptions().dtype(torch::kFloat32));
  EXPECT_EQ(y.sizes(), at::IntArrayRef({6}));
  EXPECT_EQ(y[5].item<float>(), 50.0F);
  EXPECT_EQ(MemoryMappedTensor::filename(y), file);

  // Untyped storages read as int64 by default; trailing bytes are left out.
  const at::Tensor bytes = torch::zeros({20}, torch::kUInt8);
  bytes.narrow(0, 8, 1).fill_(7);
  const at::Tensor z = MemoryMappedTensor::from_storage(bytes.storage());
  EXPECT_EQ(z.scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(z, torch::tensor({0, 7}, torch::kLong)));
  EXPECT_EQ(MemoryMappedTensor::filename(z), std::nullopt);
}

TEST(MemoryMappedTensorTest, FromStorageRefusesWhatDoesNotFit) {
  TempDir dir;
  const at::Tensor source = MemoryMappedTensor::from_tensor(
      torch::arange(6, torch::kFloat32), dir / "x.memmap");
  EXPECT_THROWS_WITH(
      (void)MemoryMappedTensor::from_storage(
          source.storage(),
          FromStorageOptions().dtype(torch::kFloat32).shape({{4, 2}})),
      c10::ValueError,
      "from_storage: shape [4, 2] does not fit the storage: expected 6 "
      "elements of Float (24 bytes), the shape holds 8");
  EXPECT_THROWS_WITH(
      (void)MemoryMappedTensor::from_storage(
          source.storage(),
          FromStorageOptions().dtype(torch::kFloat32).shape({{-1, 4}})),
      c10::ValueError,
      "expected 6 elements of Float (24 bytes), the shape holds a multiple of "
      "4");
  EXPECT_THROWS_WITH(
      (void)MemoryMappedTensor::from_storage(
          source.storage(), FromStorageOptions().shape({{-1, -1}})),
      c10::ValueError,
      "only one size may be -1");
  EXPECT_THROWS_WITH(
      (void)MemoryMappedTensor::from_storage(
          source.storage(), FromStorageOptions().filename(dir / "other")),
      c10::Error,
      "the storage is mapped from " + (dir / "x.memmap") +
          ", not from the filename given (" + (dir / "other") + ")");
  EXPECT_THROWS_WITH(
      (void)MemoryMappedTensor::from_storage(
          torch::zeros({4}).storage(), FromStorageOptions().filename("a")),
      c10::ValueError,
      "filename a was given but the storage is not mapped from a file");
  EXPECT_THROWS_WITH(
      (void)MemoryMappedTensor::from_storage(
          torch::empty({4}, torch::kMeta).storage()),
      c10::ValueError,
      "expected a storage on the CPU");
  EXPECT_THROWS_WITH(
      (void)MemoryMappedTensor::from_storage(c10::Storage()),
      c10::ValueError,
      "from_storage needs a storage");
}

// Factories that fill their file reserve its blocks first: on a full file
// system they throw instead of raising SIGBUS through the mapping, and
// leave no file. `empty` stays sparse, as in Python.
TEST(MemoryMappedTensorTest, FillingFactoriesOnAFullFileSystemThrow) {
  TempDir dir;
  const tensordict::testing::SmallTmpfs disk(dir / "mnt", "1m");
  if (!disk.mounted()) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  }
  const at::Tensor big = torch::randn({2, 1 << 18});  // 2 MiB
  EXPECT_THROWS_WITH(
      (void)MemoryMappedTensor::from_tensor(big, disk / "a.memmap"),
      c10::Error,
      "No space left on device");
  EXPECT_THROWS_WITH(
      (void)MemoryMappedTensor::full(
          {1 << 19}, 1.0, torch::kFloat32, disk / "b.memmap"),
      c10::Error,
      "No space left on device");
  EXPECT_THROWS_WITH(
      (void)MemoryMappedTensor::ones(
          {1 << 19}, torch::kFloat32, disk / "c.memmap"),
      c10::Error,
      "No space left on device");
  const at::Tensor sparse =
      MemoryMappedTensor::empty({1 << 19}, torch::kFloat32, disk / "d.memmap");
  EXPECT_EQ(sparse.sizes(), at::IntArrayRef({1 << 19}));
  EXPECT_EQ(sparse.narrow(0, 0, 1024).sum().item<float>(), 0.0F);
  EXPECT_EQ(disk.entries(), std::vector<std::string>{"d.memmap"});
}

// --- untrusted files
// ------------------------------------------------------------

TEST(MemmapUntrustedTest, ShortLeafFileIsAnError) {
  TempDir dir;
  (void)sample().memmap(dir / "td");
  fs::resize_file(dir / "td/next/reward.memmap", 20);
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(dir / "td"),
      c10::Error,
      "the memmap file of ('next', 'reward') has 20 bytes, but its shape [3] "
      "of torch.float64 needs 24");
}

// What tensordict 0.16 and 0.17 make the rule (allow_pickle=False by
// default; a missing or short leaf file refused) holds here already: each
// is refused by default, naming the key in the message, for a directory and
// for an archive alike.
TEST(
    MemmapStorageRulesTest, PickleMissingAndShortLeavesAreRefusedNamingTheKey) {
  TempDir dir;
  (void)sample().memmap(dir / "td");
  auto message_of = [](const std::string& prefix) {
    try {
      (void)TensorDict::load_memmap(prefix);
    } catch (const c10::Error& e) {
      return std::string(e.msg());
    }
    return std::string("no error");
  };
  // A missing leaf file (0.17): the nested key and what meta.json says.
  fs::copy(dir / "td", dir / "missing", fs::copy_options::recursive);
  fs::remove(dir / "missing/next/reward.memmap");
  EXPECT_EQ(
      message_of(dir / "missing"),
      "key ('next', 'reward'): its memmap file " + dir / "missing" +
          "/next/reward.memmap is missing (meta.json says shape [3] of "
          "torch.float64)");
  // A short one (0.17).
  fs::copy(dir / "td", dir / "short", fs::copy_options::recursive);
  fs::resize_file(dir / "short/obs.memmap", 40);
  EXPECT_NE(
      message_of(dir / "short")
          .find("the memmap file of 'obs' has 40 bytes, but its shape [3, 4] "
                "of torch.float32 needs 48"),
      std::string::npos)
      << message_of(dir / "short");
  // The same two in archives packed from those directories.
  pack_memmap(dir / "missing", dir / "missing.tdz");
  EXPECT_NE(
      message_of(dir / "missing.tdz")
          .find("key ('next', 'reward'): its memmap file "),
      std::string::npos)
      << message_of(dir / "missing.tdz");
  pack_memmap(dir / "short", dir / "short.tdz");
  EXPECT_NE(
      message_of(dir / "short.tdz")
          .find("entry 'obs.memmap' of 'obs' has 40 bytes, but its shape "
                "[3, 4] of torch.float32 needs 48"),
      std::string::npos)
      << message_of(dir / "short.tdz");
  // Damaged pickled values: refused, naming the key, unless skipped, for a
  // NonTensorData (other.pickle) and a NonTensorStack (pickle.pkl).
  fs::copy(dir / "td", dir / "pickled", fs::copy_options::recursive);
  write_text(
      dir / "pickled/task/meta.json",
      "{\"_type\": \"<class 'tensordict.tensorclass.NonTensorData'>\", "
      "\"_metadata\": null}");
  write_text(dir / "pickled/task/other.pickle", "\x80\x04");
  EXPECT_EQ(
      message_of(dir / "pickled"),
      "key 'task': invalid pickle in " + dir / "pickled" +
          "/task/other.pickle at byte 2: the pickle ends before STOP. Pass "
          "LoadMemmapOptions().skip_pickle(true) to load the rest without "
          "it.");
  fs::remove_all(dir / "pickled/task");
  (void)TensorDict({{"labels", NonTensorStack({"a", "b", "c"})}}, {3})
      .memmap(dir / "stack");
  Json stack_meta = Json::parse(read_text(dir / "stack/labels/meta.json"));
  stack_meta["data"] = "pickle.pkl";
  write_text(dir / "stack/labels/meta.json", stack_meta.dump());
  write_text(dir / "stack/labels/pickle.pkl", "\x80\x04");
  EXPECT_NE(
      message_of(dir / "stack").find("key 'labels': invalid pickle in "),
      std::string::npos)
      << message_of(dir / "stack");
  EXPECT_FALSE(TensorDict::load_memmap(
                   dir / "stack", LoadMemmapOptions().skip_pickle(true))
                   .contains("labels"));
}

TEST(MemmapUntrustedTest, LongerLeafFileIsFine) {
  TempDir dir;
  (void)sample().memmap(dir / "td");
  fs::resize_file(dir / "td/obs.memmap", 49);
  expect_td_equal(TensorDict::load_memmap(dir / "td"), sample());
}

TEST(MemmapUntrustedTest, MissingEntriesAreErrors) {
  TempDir dir;
  (void)sample().memmap(dir / "td");
  fs::remove(dir / "td/obs.memmap");
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(dir / "td"),
      c10::Error,
      "is missing (meta.json says shape [3, 4] of torch.float32)");
  fs::remove_all(dir / "td/next");
  const auto problems = verify_memmap(dir / "td");
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("'obs'"), std::string::npos);
  EXPECT_NE(problems[1].find("'next'"), std::string::npos);
  EXPECT_NE(problems[1].find("is missing"), std::string::npos);
}

TEST(MemmapUntrustedTest, BadMetaJsonIsAClearError) {
  TempDir dir;
  (void)sample().memmap(dir / "td");
  const std::string meta = dir / "td/next/meta.json";
  const std::string good = read_text(meta);
  auto expect_error = [&](const std::string& text, const std::string& message) {
    write_text(meta, text);
    EXPECT_THROWS_WITH(
        (void)TensorDict::load_memmap(dir / "td"), c10::Error, message);
  };
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  expect_error("{not json", "is not valid JSON");
  expect_error("[1, 2]", "must hold a JSON object, found array");
  expect_error(
      replace("\"torch.float64\"", "\"torch.float128\""),
      "unknown dtype 'torch.float128'");
  expect_error(
      replace(
          "\"shape\":[3],\"dtype\":\"torch.float64\"",
          "\"shape\":[-3],\"dtype\":\"torch.float64\""),
      "must hold non-negative integers, found -3");
  expect_error(
      replace(
          "\"shape\":[3],\"dtype\":\"torch.float64\"",
          "\"shape\":[4611686018427387904,4],\"dtype\":\"torch.float64\""),
      "overflows a 64-bit byte count");
  expect_error(
      replace(
          "\"shape\":[3],\"dtype\":\"torch.float64\"",
          "\"shape\":\"3\",\"dtype\":\"torch.float64\""),
      "must be a list of sizes, found string");
  expect_error(
      replace("\"dtype\":\"torch.float64\"", "\"dtype\":7"),
      "\"dtype\" must be a string, found number");
  expect_error(
      replace("\"is_nested\":false", "\"is_nested\":true"),
      "is a nested tensor");
  expect_error(
      replace(",\"_type\":\"<class 'tensordict._td.TensorDict'>\"", ""),
      "has no \"_type\" string");
  expect_error(
      replace("\"_format_version\":1", "\"_format_version\":2"),
      "format version 2");
  expect_error(
      std::string(200, '[') + std::string(200, ']'),
      "nests JSON deeper than 128 levels");
  write_text(meta, good);
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(
          dir / "td", LoadMemmapOptions().max_meta_bytes(16)),
      c10::Error,
      "more than the limit of 16");
}

TEST(MemmapUntrustedTest, MetadataRefusalsNameTheFileAndTheKey) {
  TempDir dir;
  TensorDict td(
      {{"a", torch::ones({2, 3})}, {"n", {{"b", torch::ones({2, 3})}}}},
      {2, 3});
  td.set_names({"x", "y"});
  (void)td.memmap(dir / "d");
  const std::string meta = dir / "d/meta.json";
  const std::string good = read_text(meta);
  auto with = [&](const std::string& path,
                  const std::string& from,
                  const std::string& to) {
    std::string text = read_text(path);
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    write_text(path, text.replace(at, from.size(), to));
  };
  // Repeated dim names: the same rule and text as the consolidated "names".
  with(meta, "\"_names\":[\"x\",\"y\"]", "\"_names\":[\"x\",\"x\"]");
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(dir / "d"),
      c10::Error,
      "invalid metadata in " + meta +
          " at the root: \"_names\" repeats the dim name 'x'");
  write_text(meta, good);
  // A leaf of a nested dict: its own meta.json and its full key.
  const std::string nested_meta = dir / "d/n/meta.json";
  with(
      nested_meta,
      "\"dtype\":\"torch.float32\"",
      "\"dtype\":\"torch.float33\"");
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(dir / "d"),
      c10::Error,
      "invalid metadata in " + nested_meta +
          " at key ('n', 'b'): unknown dtype 'torch.float33'");
  with(
      nested_meta,
      "\"dtype\":\"torch.float33\"",
      "\"dtype\":\"torch.float32\"");
  with(nested_meta, "\"is_nested\":false", "\"is_nested\":0");
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(dir / "d"),
      c10::Error,
      "at key ('n', 'b'): \"is_nested\" must be a boolean, found number");
}

TEST(MemmapUntrustedTest, FuzzedMetaJsonNeverCrashes) {
  TempDir dir;
  (void)sample().memmap(dir / "td");
  const std::string meta = dir / "td/meta.json";
  const std::string good = read_text(meta);
  std::mt19937 rng(1234);
  int loaded = 0;
  for (int i = 0; i < 300; ++i) {
    std::string text = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0:
          text[at] = static_cast<char>(rng() % 128);
          break;
        case 1:
          text.erase(at, 1 + rng() % 8);
          break;
        default:
          text.insert(at, 1, "0123456789-[]{}\",:e"[rng() % 19]);
      }
      if (text.empty()) {
        text = "{";
      }
    }
    write_text(meta, text);
    try {
      TensorDict td = TensorDict::load_memmap(dir / "td");
      ++loaded;
    } catch (const c10::Error&) {
    }
  }
  EXPECT_LT(loaded, 300);
}

TEST(MemmapUntrustedTest, PickleSidecarsNameTheKey) {
  TempDir dir;
  (void)sample().memmap(dir / "td");
  write_text(
      dir / "td/task/meta.json",
      "{\"_type\": \"<class 'tensordict.tensorclass.NonTensorData'>\", "
      "\"_metadata\": null}");
  write_text(dir / "td/task/other.pickle", "\x80\x04");
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(dir / "td"),
      c10::Error,
      "key 'task': invalid pickle in ");
  TensorDict td = TensorDict::load_memmap(
      dir / "td", LoadMemmapOptions().skip_pickle(true));
  EXPECT_FALSE(td.contains("task"));
  EXPECT_TRUE(td.contains("obs"));
}

TEST(MemmapUntrustedTest, SymlinksAreRefused) {
  TempDir dir;
  (void)sample().memmap(dir / "td");
  fs::create_directories(dir / "elsewhere");
  // Reading a leaf through a symlink.
  fs::rename(dir / "td/obs.memmap", dir / "elsewhere/obs.memmap");
  fs::create_symlink(dir / "elsewhere/obs.memmap", dir / "td/obs.memmap");
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(dir / "td"),
      c10::Error,
      "through the symlink");
  // Writing a leaf through a symlink.
  EXPECT_THROWS_WITH(
      (void)sample().memmap(dir / "td"),
      c10::Error,
      "Refusing to write memory-mapped tensor through symlink");
  // Writing into a symlinked nested directory.
  TempDir other;
  fs::create_directories(other / "td");
  fs::create_symlink(dir / "elsewhere", other / "td/next");
  EXPECT_THROWS_WITH(
      (void)sample().memmap(other / "td"),
      c10::Error,
      "Refusing to write a memmap directory through the symlink");
  EXPECT_FALSE(fs::exists(dir / "elsewhere/reward.memmap"));
}

TEST(MemmapUntrustedTest, ReservedKeysAreRefusedWhenWriting) {
  TempDir dir;
  for (const char* key :
       {"shape", "device", "_type", "_format_version", "_class", "_names"}) {
    TensorDict td({{key, torch::ones({1})}}, {1});
    EXPECT_THROWS_WITH(
        (void)td.memmap(dir / "td"),
        c10::Error,
        std::string("the key '") + key + "' would collide with the '" + key +
            "' member of meta.json");
  }
  TensorDict nested({{"a", {{"shape", torch::ones({1})}}}}, {1});
  EXPECT_THROWS_WITH(
      (void)nested.memmap(dir / "n"),
      c10::Error,
      "cannot save key ('a', 'shape')");
  // A refused save leaves an earlier one in the same place loadable.
  (void)sample().memmap(dir / "kept");
  TensorDict bad = sample();
  bad.set({"next", "_type"}, torch::ones({3}));
  EXPECT_THROWS_WITH(
      (void)bad.memmap(dir / "kept"), c10::Error, "would collide");
  expect_td_equal(TensorDict::load_memmap(dir / "kept"), sample());
}

TEST(MemmapUntrustedTest, ExistsokFalseRefusesExistingFiles) {
  TempDir dir;
  (void)sample().memmap(dir / "td");
  EXPECT_THROWS_WITH(
      (void)sample().memmap(MemmapOptions(dir / "td").existsok(false)),
      c10::Error,
      "already exists");
  // The refusal came before anything was written or removed: the old save
  // still loads, with its values.
  expect_td_equal(TensorDict::load_memmap(dir / "td"), sample());
  // Also where the existing file is a nested leaf, and in place of memmap_.
  TensorDict other = sample();
  other.set("zzz", torch::ones({3}));
  EXPECT_THROWS_WITH(
      (void)other.memmap(MemmapOptions(dir / "td").existsok(false)),
      c10::Error,
      "already exists");
  EXPECT_THROWS_WITH(
      other.memmap_(MemmapOptions(dir / "td").existsok(false)),
      c10::Error,
      "already exists");
  EXPECT_FALSE(fs::exists(dir / "td/zzz.memmap"));
  EXPECT_FALSE(other.is_memmap());
  expect_td_equal(TensorDict::load_memmap(dir / "td"), sample());
  // A fresh prefix, or new keys only, are fine.
  expect_td_equal(
      sample().memmap(MemmapOptions(dir / "new").existsok(false)), sample());
}

TEST(MemmapUntrustedTest, CopyExistingIsNeededToCopyAMappedLeaf) {
  TempDir dir;
  TensorDict saved = sample().memmap(dir / "a");
  EXPECT_THROWS_WITH(
      (void)saved.memmap(dir / "b"), c10::Error, "pass copy_existing(true)");
  expect_td_equal(
      saved.memmap(MemmapOptions(dir / "c").copy_existing(true)), sample());
}

// The crash-safety tests live in tests/crash_safety_test.cpp.

TEST(MemmapUntrustedTest, MoreRefusalsNameWhatIsWrong) {
  TempDir dir;
  // Writing.
  TensorDict long_key({{std::string(300, 'k'), torch::ones({1})}}, {1});
  EXPECT_THROWS_WITH(
      (void)long_key.memmap(dir / "a"),
      c10::Error,
      "its file name would be 307 bytes long, more than the 255");
  TensorDict taken(
      {{"x", torch::ones({1})}, {"x.memmap", {{"y", torch::ones({1})}}}}, {1});
  EXPECT_THROWS_WITH(
      (void)taken.memmap(dir / "b"),
      c10::Error,
      "its file name 'x.memmap' is taken by another entry");
  TensorDict fp8({{"f", torch::ones({1}).to(torch::kFloat8_e4m3fn)}}, {1});
  EXPECT_THROWS_WITH(
      (void)fp8.memmap(dir / "c"),
      c10::Error,
      "Python tensordict cannot load the dtype torch.float8_e4m3fn");
  // Reading.
  TensorDict named({{"a", torch::ones({2})}}, {2});
  named.set_names({"n"});
  (void)named.memmap(dir / "d");
  const std::string meta = dir / "d/meta.json";
  const std::string good = read_text(meta);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    write_text(meta, text);
  };
  with("\"_names\":[\"n\"]", "\"_names\":[\"n\",\"m\"]");
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(dir / "d"),
      c10::Error,
      "\"_names\" has 2 names for 1 batch dims");
  with("\"device\":\"cpu\",\"_type\"", "\"device\":\"cuda:0\",\"_type\"");
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(dir / "d"),
      c10::Error,
      "was saved from device cuda:0; pass LoadMemmapOptions().device");
  with("\"device\":\"cpu\",\"_type\"", "\"device\":\"toaster\",\"_type\"");
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(dir / "d"),
      c10::Error,
      "\"device\" is not a device: 'toaster'");
  // A sub-collection that is a file, a stack with string data, an empty
  // lazy stack.
  (void)sample().memmap(dir / "e");
  fs::remove_all(dir / "e/next");
  write_text(dir / "e/next", "not a directory");
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(dir / "e"),
      c10::Error,
      "it must be a directory, not a symlink or a file");
  (void)sample().memmap(dir / "f");
  write_text(
      dir / "f/labels/meta.json",
      "{\"_type\":\"<class "
      "'tensordict.tensorclass.NonTensorStack'>\",\"data\":\"x\"}");
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(dir / "f"),
      c10::Error,
      "has the string \"x\" as data; expected a list or \"pickle.pkl\"");
  fs::create_directories(dir / "g");
  write_text(
      dir / "g/meta.json",
      "{\"_type\": \"<class 'tensordict._lazy.LazyStackedTensorDict'>\", "
      "\"stack_dim\": 0}");
  EXPECT_THROWS_WITH(
      (void)load_memmap_any(dir / "g"),
      c10::Error,
      "has no element directories (0/, 1/, ...)");
  write_text(dir / "g/meta.json", "{\"_type\": \"<class 'builtins.object'>\"}");
  EXPECT_THROWS_WITH(
      (void)load_memmap_any(dir / "g"),
      c10::Error,
      "which is neither a tensordict class nor a tensorclass");
}

TEST(MemmapTest, MemmapWithoutPrefixKeepsMappedLeavesAsPython) {
  // Python: td0 = td.memmap(); td1 = td0.memmap(); td0["a"] is td1["a"].
  const TensorDict td({{"a", torch::zeros({3})}}, {3});
  const TensorDict td0 = td.memmap();
  const TensorDict td1 = td0.memmap();
  EXPECT_TRUE(td0.get("a").is_same(td1.get("a")));
  EXPECT_FALSE(td0.is_same(td1));
  TempDir dir;
  const TensorDict on_disk = td.memmap(dir.str());
  EXPECT_TRUE(on_disk.memmap().get("a").is_same(on_disk.get("a")));
  // A plain tensor is still copied into shared memory.
  EXPECT_FALSE(td.memmap().get("a").is_same(td.get("a")));
}

TEST(MemmapTest, AliasesAndReturnEarlyForms) {
  TempDir dir;
  const TensorDict td({{"a", torch::arange(4)}}, {4});
  const TensorDict dumped = td.dumps(dir / "dumps");
  EXPECT_TRUE(dumped.is_memmap());
  TensorDict target({{"a", torch::zeros({4}, torch::kLong)}}, {4});
  target.load_(dir / "dumps");
  EXPECT_TRUE(torch::equal(target.get("a"), td.get("a")));
  const TensorDict like = td.memmap_like_async(dir / "like").get();
  EXPECT_EQ(like.get("a").sum().item<int64_t>(), 0);
  EXPECT_TRUE(std::filesystem::exists(dir / "like/a.memmap"));
  const TensorDict saved = td.save_async(dir / "saved").get();
  EXPECT_TRUE(torch::equal(saved.get("a"), td.get("a")));
  TensorDict inplace = td.clone();
  const TensorDict done = inplace.memmap_async_(dir / "inplace").get();
  EXPECT_TRUE(done.is_same(inplace));
  EXPECT_TRUE(inplace.is_memmap());
  EXPECT_EQ(inplace.saved_path(), std::optional<std::string>(dir / "inplace"));
  const TensorDict loaded = TensorDict::load_memmap(
      dir / "saved", LoadMemmapOptions().non_blocking(true));
  EXPECT_TRUE(torch::equal(loaded.get("a"), td.get("a")));
}

TEST(MemmapTest, PrintDirectoryTreeFollowsPython) {
  TempDir dir;
  const std::string root = dir / "pdt";
  (void)TensorDict(
      {{"a", torch::zeros({3})}, {"b", {{"c", torch::ones({3, 2})}}}}, {3})
      .memmap(root);
  uintmax_t total = 0;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) {
      total += entry.file_size();
    }
  }
  char size[64];
  std::snprintf(size, sizeof(size), "%.2f B", static_cast<double>(total));
  // Python: print_directory_tree(root) logs these lines (its entries in the
  // file system's order; ours sorted).
  EXPECT_EQ(
      print_directory_tree(root),
      std::string("Directory size: ") + size +
          "\npdt/\n    a.memmap\n    b/\n        c.memmap\n        meta.json"
          "\n    meta.json");
  EXPECT_EQ(
      print_directory_tree(
          root + "/a.memmap", "> ", /*display_metadata=*/false),
      "> a.memmap");
}

namespace {

// Threaded saves: many small leaves, nested, so writer threads interleave.
TensorDict many_leaves() {
  TensorDict td({}, {4});
  for (int i = 0; i < 24; ++i) {
    td.set(
        {"group" + std::to_string(i % 3), "leaf" + std::to_string(i)},
        torch::full({4, 8}, i, torch::kFloat32));
  }
  return td;
}

}  // namespace

// One leaf of a threaded save cannot be written: every writer thread
// stops, the save throws that leaf's error and writes no meta.json.
TEST(MemmapTest, AThreadedSaveThatFailsThrowsTheLeafsErrorAndLoadsNothing) {
  TempDir dir;
  const std::string root = dir / "td";
  fs::create_directories(root + "/group1");
  write_text(root + "/group1/leaf13.memmap", "in the way");
  EXPECT_THROWS_WITH(
      (void)many_leaves().memmap(
          MemmapOptions(root).num_threads(4).existsok(false)),
      c10::Error,
      "leaf13.memmap already exists");
  EXPECT_FALSE(fs::exists(root + "/meta.json"));
  EXPECT_FALSE(fs::exists(root + "/group1/meta.json"));
}

// memmap_async hands the save's error to whoever waits on the future.
TEST(MemmapTest, MemmapAsyncCarriesTheSavesErrorInItsFuture) {
  TempDir dir;
  const std::string root = dir / "td";
  fs::create_directories(root + "/group1");
  write_text(root + "/group1/leaf13.memmap", "in the way");
  auto future = many_leaves().memmap_async(
      MemmapOptions(root).num_threads(2).existsok(false));
  EXPECT_THROWS_WITH(
      (void)future.get(), c10::Error, "leaf13.memmap already exists");
}

// Saves only read their source, so several may run on one dict at once,
// each with its own writer threads; then an in-place save of a clone.
TEST(MemmapTest, ConcurrentThreadedSavesOfOneDictWriteTheSameData) {
  TempDir dir;
  const TensorDict td = many_leaves();
  auto first = td.memmap_async(MemmapOptions(dir / "first").num_threads(2));
  auto second = td.memmap_async(MemmapOptions(dir / "second").num_threads(3));
  auto like = td.memmap_like_async(MemmapOptions(dir / "like").num_threads(2));
  const TensorDict direct =
      td.memmap(MemmapOptions(dir / "direct").num_threads(2));
  expect_td_equal(first.get(), td);
  expect_td_equal(second.get(), td);
  expect_td_equal(like.get(), td.apply([](const at::Tensor& t) {
    return torch::zeros_like(t);
  }));
  expect_td_equal(direct, td);
  for (const char* name : {"first", "second", "direct"}) {
    expect_td_equal(TensorDict::load_memmap(dir / name), td);
  }
  TensorDict inplace = td.clone();
  (void)inplace.memmap_async_(MemmapOptions(dir / "inplace").num_threads(3))
      .get();
  EXPECT_TRUE(inplace.is_memmap());
  expect_td_equal(TensorDict::load_memmap(dir / "inplace"), td);
}

// --- append_memmap
// --------------------------------------------------------------

namespace {

TensorDict append_sample(int64_t rows, float start) {
  return TensorDict(
      {{"obs",
        torch::arange(rows * 4, torch::kFloat32).reshape({rows, 4}) + start},
       {"next",
        {{"reward", torch::full({rows}, start, torch::kFloat64)},
         {"done", torch::ones({rows}, torch::kBool)}}},
       {"task", "reach"},
       {"empty", torch::zeros({rows, 0})}},
      /*batch_size=*/{rows});
}

// Every file below `dir` with its bytes.
std::map<std::string, std::string> files_of(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) {
      out[fs::relative(entry.path(), dir).string()] =
          read_text(entry.path().string());
    }
  }
  return out;
}

ino_t inode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

}  // namespace

TEST(MemmapAppendTest, AppendMemmapGrowsTheSavedFilesInPlace) {
  TempDir dir;
  const std::string prefix = dir / "td";
  const TensorDict first = append_sample(3, 0);
  const TensorDict rows = append_sample(2, 100);
  (void)first.memmap(prefix);
  const ino_t obs = inode(prefix + "/obs.memmap");
  append_memmap(prefix, rows);
  const TensorDict loaded = TensorDict::load_memmap(prefix);
  expect_td_equal(loaded, cat({first, rows}));
  EXPECT_EQ(loaded.batch_size(), c10::IntArrayRef({5}));
  EXPECT_EQ(inode(prefix + "/obs.memmap"), obs);
  EXPECT_FALSE(fs::exists(prefix + "/.meta.json.append.tmp"));
  EXPECT_FALSE(fs::exists(prefix + "/next/.meta.json.append.tmp"));
  // meta.json is rewritten as Python's json.dumps writes it.
  EXPECT_NE(
      read_text(prefix + "/meta.json").find("\"shape\": [5, 4]"),
      std::string::npos);
  // Again, and onto a tensorclass's fields.
  append_memmap(prefix, rows);
  expect_td_equal(TensorDict::load_memmap(prefix), cat({first, rows, rows}));
  TensorDict tc = append_sample(3, 0);
  tc.set_python_class("<class 'envs.Step'>");
  (void)tc.memmap(dir / "tc");
  TensorDict tc_rows = rows.copy();
  tc_rows.set_python_class("<class 'envs.Step'>");
  append_memmap(dir / "tc", tc_rows);
  const TensorDict tc_loaded = TensorDict::load_memmap(dir / "tc");
  EXPECT_EQ(tc_loaded.python_class(), "<class 'envs.Step'>");
  expect_td_equal(tc_loaded, cat({first, rows}));
  // The rows' own non-tensor value may be a stack of equal values.
  TensorDict stacked = append_sample(2, 7);
  stacked.set("task", NonTensorStack({"reach", "reach"}));
  append_memmap(dir / "tc", [&] {
    stacked.set_python_class("<class 'envs.Step'>");
    return stacked;
  }());
  EXPECT_EQ(TensorDict::load_memmap(dir / "tc").batch_size()[0], 7);
}

TEST(MemmapAppendTest, AppendMemmapRefusesRowsThatDoNotFitBeforeWriting) {
  TempDir dir;
  const std::string prefix = dir / "td";
  (void)append_sample(3, 0).memmap(prefix);
  const auto before = files_of(prefix);
  TensorDict wrong_dtype = append_sample(2, 0);
  wrong_dtype.set({"next", "reward"}, torch::zeros({2}, torch::kFloat32));
  EXPECT_THROWS_WITH(
      append_memmap(prefix, wrong_dtype),
      c10::ValueError,
      "Cannot append rows of dtype torch.float32 and shape (2,) to the entry "
      "('next', 'reward'), of dtype torch.float64 and shape (3,).");
  TensorDict wrong_shape = append_sample(2, 0);
  wrong_shape.set("obs", torch::zeros({2, 5}));
  EXPECT_THROWS_WITH(
      append_memmap(prefix, wrong_shape), c10::ValueError, "and shape (2, 5)");
  TensorDict missing = append_sample(2, 0);
  missing.del_("obs");
  EXPECT_THROWS_WITH(
      append_memmap(prefix, missing),
      c10::ValueError,
      "Cannot append rows with the keys ['empty', 'next', 'task'] to the "
      "saved tensordict, which has the keys ['empty', 'next', 'obs', "
      "'task'].");
  TensorDict other_task = append_sample(2, 0);
  other_task.set_non_tensor("task", "grasp");
  EXPECT_THROWS_WITH(
      append_memmap(prefix, other_task),
      c10::ValueError,
      "the saved non-tensor value \"reach\" stays as it is, so the rows must "
      "hold the same value, not \"grasp\".");
  TensorDict classed = append_sample(2, 0);
  classed.set_python_class("<class 'envs.Step'>");
  EXPECT_THROWS_WITH(
      append_memmap(prefix, classed),
      c10::ValueError,
      "Cannot append a <class 'envs.Step'> to the saved tensordict, a "
      "TensorDict.");
  EXPECT_THROWS_WITH(
      append_memmap(prefix, TensorDict({{"obs", torch::zeros({4})}}, {})),
      c10::ValueError,
      "which the saved tensordict (batch size torch.Size([3])) and the rows "
      "(batch size torch.Size([])) must both have.");
  EXPECT_THROWS_WITH(
      append_memmap(dir / "nothing", append_sample(2, 0)),
      c10::ValueError,
      "is not one. An archive cannot grow");
  EXPECT_EQ(files_of(prefix), before);
  // A lazy stack and a NonTensorStack cannot grow.
  (void)memmap(
      lazy_stack({append_sample(3, 0), append_sample(3, 1)}), dir / "ls");
  EXPECT_THROWS_WITH(
      append_memmap(dir / "ls", append_sample(2, 0)),
      c10::ValueError,
      "a LazyStackedTensorDict");
  TensorDict labelled = append_sample(3, 0);
  labelled.set("labels", NonTensorStack({"a", "b", "c"}));
  (void)labelled.memmap(dir / "labelled");
  TensorDict more = append_sample(2, 0);
  more.set("labels", NonTensorStack({"d", "e"}));
  EXPECT_THROWS_WITH(
      append_memmap(dir / "labelled", more),
      c10::ValueError,
      "a NonTensorStack: a stack of non-tensor values cannot grow.");
}

// A tree of 3 rows at `prefix`, 2 rows appended, and the meta.json files
// from before and after the append: writing some of them back makes what
// an append killed midway leaves.
class MemmapKilledAppendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    (void)first.memmap(prefix);
    old_top = read_text(prefix + "/meta.json");
    old_next = read_text(prefix + "/next/meta.json");
    append_memmap(prefix, rows);
    new_top = read_text(prefix + "/meta.json");
    new_next = read_text(prefix + "/next/meta.json");
  }

  TempDir dir;
  const std::string prefix = dir / "td";
  const TensorDict first = append_sample(3, 0);
  const TensorDict rows = append_sample(2, 100);
  std::string old_top;
  std::string old_next;
  std::string new_top;
  std::string new_next;
};

TEST_F(
    MemmapKilledAppendTest,
    AKilledAppendLoadsAsTheOldRowsOrTheNewByPythonsRule) {
  // Killed before the top meta.json was replaced: the temporaries (the top
  // one maybe incomplete) are dropped, whatever the leaf files hold.
  write_text(prefix + "/meta.json", old_top);
  write_text(prefix + "/next/meta.json", old_next);
  write_text(prefix + "/.meta.json.append.tmp", new_top.substr(0, 10));
  write_text(prefix + "/next/.meta.json.append.tmp", new_next);
  auto on_disk = files_of(prefix);
  expect_td_equal(TensorDict::load_memmap(prefix), first);
  EXPECT_TRUE(verify_memmap(prefix).empty());
  EXPECT_EQ(files_of(prefix), on_disk);  // a load writes nothing

  // Killed after: the temporaries finish the append.
  write_text(prefix + "/meta.json", new_top);
  fs::remove(prefix + "/.meta.json.append.tmp");
  expect_td_equal(TensorDict::load_memmap(prefix), cat({first, rows}));
  expect_td_equal(
      TensorDict::load_memmap(prefix, LoadMemmapOptions().subpath({"next"})),
      cat({first, rows}).get_tensordict("next"));
  TensorDict into = append_sample(5, 0);
  into.load_memmap_(prefix);
  expect_td_equal(into, cat({first, rows}));

  // The next append applies the rule on disk first.
  append_memmap(prefix, rows);
  EXPECT_FALSE(fs::exists(prefix + "/next/.meta.json.append.tmp"));
  expect_td_equal(TensorDict::load_memmap(prefix), cat({first, rows, rows}));

  // And a save over the directory does not keep a stale temporary.
  write_text(prefix + "/next/.meta.json.append.tmp", old_next);
  (void)first.memmap(prefix);
  expect_td_equal(TensorDict::load_memmap(prefix), first);
}

TEST_F(
    MemmapKilledAppendTest,
    AKilledAppendRollsForwardOnlyWhenEveryTemporaryHoldsTheTopRows) {
  // No top temporary, but the nested one holds 5 rows where the top
  // meta.json holds 3 (an append's leftover whose top temporary went): the
  // temporary is removed, not renamed in. 0.15.3's rule renamed it.
  write_text(prefix + "/meta.json", old_top);
  write_text(prefix + "/next/meta.json", old_next);
  write_text(prefix + "/next/.meta.json.append.tmp", new_next);
  auto on_disk = files_of(prefix);
  expect_td_equal(TensorDict::load_memmap(prefix), first);
  EXPECT_EQ(files_of(prefix), on_disk);  // a load writes nothing
  append_memmap(prefix, rows);
  EXPECT_FALSE(fs::exists(prefix + "/next/.meta.json.append.tmp"));
  expect_td_equal(TensorDict::load_memmap(prefix), cat({first, rows}));

  // A temporary that cannot be read counts as another row count: all are
  // removed, and the levels then disagree, which the load names.
  write_text(prefix + "/meta.json", new_top);
  write_text(prefix + "/next/meta.json", old_next);
  write_text(prefix + "/next/.meta.json.append.tmp", new_next.substr(0, 12));
  EXPECT_THROWS_WITH(
      (void)TensorDict::load_memmap(prefix), c10::Error, "'next'");
  EXPECT_THROWS_WITH(append_memmap(prefix, rows), c10::Error, "'next'");
  EXPECT_FALSE(fs::exists(prefix + "/next/.meta.json.append.tmp"));

  // A tensorclass's top is `_tensordict/meta.json`: its rows decide.
  TensorDict tc = append_sample(3, 0);
  tc.set_python_class("<class 'envs.Step'>");
  const std::string tc_prefix = dir / "tc";
  (void)tc.memmap(tc_prefix);
  const std::string tc_old_next =
      read_text(tc_prefix + "/_tensordict/next/meta.json");
  TensorDict tc_rows = rows.copy();
  tc_rows.set_python_class("<class 'envs.Step'>");
  append_memmap(tc_prefix, tc_rows);
  const std::string tc_new_next =
      read_text(tc_prefix + "/_tensordict/next/meta.json");
  write_text(tc_prefix + "/_tensordict/next/meta.json", tc_old_next);
  write_text(
      tc_prefix + "/_tensordict/next/.meta.json.append.tmp", tc_new_next);
  expect_td_equal(TensorDict::load_memmap(tc_prefix), cat({first, rows}));
  append_memmap(tc_prefix, tc_rows);
  EXPECT_FALSE(
      fs::exists(tc_prefix + "/_tensordict/next/.meta.json.append.tmp"));
  expect_td_equal(TensorDict::load_memmap(tc_prefix), cat({first, rows, rows}));
}

// --- load_memmap into `out` (Python's `out=`) and load_memmap_ -------------

TEST(MemmapTest, LoadMemmapIntoOutKeepsNestedDictsAndRemovesStaleKeys) {
  TempDir dir;
  // Python 0.15: keys ['a', ('nested', 'b'), ('nested', 'c')], the nested
  // dict kept, `a` a MemoryMappedTensor, `out` neither locked nor memmapped.
  const TensorDict src(
      {{"a", torch::ones({3})},
       {"nested",
        TensorDict({{"b", torch::ones({3})}, {"c", torch::ones({3, 2})}}, {3})},
       {"s", "hello"}},
      {3});
  (void)src.memmap(dir / "td");
  TensorDict out(
      {{"a", torch::zeros({3})},
       {"z", torch::zeros({3})},
       {"nested",
        TensorDict({{"b", torch::zeros({3})}, {"y", torch::zeros({3})}}, {3})},
       {"s", torch::zeros({3})}},
      {3});
  out.set_names({"x"});
  const TensorDict nested = out.get_tensordict("nested");
  const TensorDict got = TensorDict::load_memmap(dir / "td", out);
  EXPECT_TRUE(got.is_same(out));
  EXPECT_EQ(
      out.keys(/*include_nested=*/true, /*leaves_only=*/true),
      (std::vector<NestedKey>{"a", {"nested", "b"}, {"nested", "c"}}));
  EXPECT_TRUE(out.get_tensordict("nested").is_same(nested));
  EXPECT_FALSE(nested.contains("y"));
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(out.get("a")));
  EXPECT_TRUE(torch::equal(out.get({"nested", "c"}), torch::ones({3, 2})));
  EXPECT_EQ(out.get_non_tensor("s"), Json("hello"));
  EXPECT_FALSE(out.is_locked());
  EXPECT_FALSE(out.is_memmap());
  EXPECT_EQ(out.names(), (DimNames{"x"}));  // kept, as in Python
  EXPECT_EQ(out.saved_path(), std::optional<std::string>(dir / "td"));
  // A subpath loads that dict.
  TensorDict sub({{"b", torch::zeros({3})}, {"c", torch::zeros({3})}}, {3});
  (void)TensorDict::load_memmap(
      dir / "td", sub, LoadMemmapOptions().subpath({"nested"}));
  EXPECT_EQ(sub.keys(), (std::vector<NestedKey>{"b", "c"}));
  EXPECT_TRUE(torch::equal(sub.get("c"), torch::ones({3, 2})));
}

TEST(MemmapTest, LoadMemmapInPlaceRemovesTheKeysTheDirectoryLacks) {
  // Python's load_memmap_ example: ['a'] and MemoryMappedTensor([1, 1, 1]).
  TempDir dir;
  (void)TensorDict({{"a", torch::ones({3})}}).save(dir / "td");
  TensorDict td({{"a", torch::zeros({3})}, {"b", torch::zeros({3})}});
  EXPECT_EQ(&td.load_memmap_(dir / "td"), &td);
  EXPECT_EQ(td.keys(), (std::vector<NestedKey>{"a"}));
  EXPECT_TRUE(torch::equal(td.get("a"), torch::ones({3})));
  // A memmapped dict is lifted from its lock and stays memmapped.
  TensorDict mapped =
      TensorDict({{"a", torch::zeros({3})}, {"z", torch::zeros({3})}})
          .memmap(dir / "other");
  mapped.load_memmap_(dir / "td");
  EXPECT_EQ(mapped.keys(), (std::vector<NestedKey>{"a"}));
  EXPECT_TRUE(mapped.is_memmap());
  EXPECT_TRUE(mapped.is_locked());
}

TEST(MemmapTest, LoadMemmapIntoOutChecksEverythingBeforeWriting) {
  TempDir dir;
  const TensorDict src(
      {{"a", torch::ones({2})},
       {"n", TensorDict({{"b", torch::ones({2, 3})}}, {2, 3})}},
      {2});
  (void)src.memmap(dir / "td");
  auto untouched = [] {
    return TensorDict(
        {{"a", torch::zeros({2})},
         {"n", TensorDict({{"b", torch::zeros({2, 4})}}, {2, 4})},
         {"k", torch::zeros({2})}},
        {2});
  };
  // A nested dict of another batch size: Python writes `a` and then fails.
  TensorDict out = untouched();
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(dir / "td", out),
      c10::ValueError,
      "cannot load a tensordict saved with batch size [2, 3] into a dict of "
      "batch size [2, 4] at 'n'");
  expect_td_equal(out, untouched());
  TensorDict five({{"a", torch::zeros({5})}}, {5});
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(dir / "td", five),
      c10::ValueError,
      "saved with batch size [2] into a dict of batch size [5]");
  // Python's device rule.
  TensorDict on_cpu({{"a", torch::zeros({2})}}, {2}, c10::Device(c10::kCPU));
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(
          dir / "td",
          on_cpu,
          LoadMemmapOptions().device(c10::Device(c10::kMeta))),
      c10::ValueError,
      "Cannot load a tensordict on device meta into a tensordict on device "
      "cpu.");
  // A locked dict (Python's error; load_memmap_ lifts the lock instead).
  TensorDict locked = untouched();
  locked.lock_();
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(dir / "td", locked),
      c10::Error,
      "Cannot modify locked TensorDict");
  // A lazy stack at the root cannot become `out`.
  (void)memmap(
      lazy_stack(
          {TensorDict({{"a", torch::ones({3})}}),
           TensorDict({{"a", torch::ones({4})}})}),
      dir / "ls");
  TensorDict into({{"a", torch::zeros({2})}}, {2});
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(dir / "ls", into),
      c10::ValueError,
      "holds a lazy stack, which cannot be loaded into a TensorDict in place");
  EXPECT_TRUE(torch::equal(into.get("a"), torch::zeros({2})));
}

TEST(MemmapTest, ANestedLazyStackLoadsIntoOutWhenItsCountFits) {
  // {"s": a lazy stack of 3 dicts along dim 1 of [2, 3]} on disk.
  TempDir dir;
  std::vector<TensorDict> elements;
  for (int64_t i = 0; i < 3; ++i) {
    elements.push_back(TensorDict({{"b", torch::full({2, i + 1}, i)}}, {2}));
  }
  TensorDict src({{"a", torch::ones({2})}}, {2});
  src.set("s", Value(lazy_stack(elements, /*stack_dim=*/1)));
  (void)src.memmap(dir / "td");
  EXPECT_TRUE(fs::exists(dir / "td/s/2/b.memmap"));
  // Python: "Cannot load 3 stacked tensordicts into a stack of 4
  // tensordicts.", before anything is written here.
  TensorDict four(
      {{"a", torch::zeros({2})},
       {"s", TensorDict({{"q", torch::zeros({2, 4})}}, {2, 4})}},
      {2});
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(dir / "td", four),
      c10::ValueError,
      "Cannot load 3 stacked tensordicts into a stack of 4 tensordicts at "
      "'s'.");
  EXPECT_TRUE(torch::equal(four.get("a"), torch::zeros({2})));
  // Three: the nested dict is replaced by the mapped stack.
  TensorDict three(
      {{"a", torch::zeros({2})},
       {"s", TensorDict({{"q", torch::zeros({2, 3})}}, {2, 3})}},
      {2});
  (void)TensorDict::load_memmap(dir / "td", three);
  const Value& s = three["s"];
  ASSERT_TRUE(s.is_lazy_stack());
  const auto& loaded = s.lazy_stack().tensordicts();
  ASSERT_EQ(loaded.size(), 3u);
  EXPECT_EQ(s.lazy_stack().stack_dim(), 1);
  EXPECT_TRUE(torch::equal(loaded[2].get("b"), torch::full({2, 3}, 2)));
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(loaded[2].get("b")));
  EXPECT_TRUE(torch::equal(three.get("a"), torch::ones({2})));
}

TEST(MemmapTest, ANestedLazyStackLoadsIntoTheElementsOfALazyStackOut) {
  // Python 0.15: a new stack whose elements are out's dicts, loaded into
  // ("q", which the tree lacks, removed; "b" a MemoryMappedTensor).
  TempDir dir;
  std::vector<TensorDict> elements;
  for (int64_t i = 0; i < 3; ++i) {
    elements.push_back(TensorDict({{"b", torch::full({2, i + 1}, i)}}, {2}));
  }
  TensorDict src({{"a", torch::ones({2})}}, {2});
  src.set("s", Value(lazy_stack(elements, /*stack_dim=*/1, "t")));
  src.memmap(dir / "td");
  auto make_out = [] {
    std::vector<TensorDict> dicts;
    for (int64_t i = 0; i < 3; ++i) {
      dicts.push_back(TensorDict(
          {{"b", torch::zeros({2, i + 1})}, {"q", torch::zeros({2})}}, {2}));
    }
    TensorDict out({{"a", torch::zeros({2})}}, {2});
    out.set("s", Value(lazy_stack(dicts, /*stack_dim=*/1)));
    return std::make_pair(out, dicts);
  };
  auto [out, dicts] = make_out();
  (void)TensorDict::load_memmap(dir / "td", out);
  const Value loaded = out["s"];  // the stack lives as long as this Value
  const LazyStackedTensorDict& s = loaded.lazy_stack();
  ASSERT_EQ(s.tensordicts().size(), 3u);
  EXPECT_EQ(s.stack_dim(), 1);
  EXPECT_EQ(s.stack_dim_name(), std::optional<std::string>("t"));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(s.tensordicts()[i].is_same(dicts[i])) << i;
    EXPECT_EQ(dicts[i].keys(), (std::vector<NestedKey>{"b"})) << i;
    EXPECT_TRUE(MemoryMappedTensor::is_memmap(dicts[i].get("b"))) << i;
    EXPECT_TRUE(torch::equal(
        dicts[i].get("b"),
        torch::full({2, static_cast<int64_t>(i) + 1}, static_cast<int64_t>(i))))
        << i;
  }
  EXPECT_TRUE(torch::equal(out.get("a"), torch::ones({2})));

  // A locked element is refused before anything is written.
  auto [locked_out, locked_dicts] = make_out();
  locked_dicts[1].lock_();
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(dir / "td", locked_out),
      c10::Error,
      "Cannot modify locked TensorDict");
  EXPECT_TRUE(torch::equal(locked_out.get("a"), torch::zeros({2})));
  EXPECT_TRUE(locked_dicts[0].contains("q"));
  EXPECT_FALSE(MemoryMappedTensor::is_memmap(locked_dicts[0].get("b")));

  // A stack along another dim is replaced by the loaded one.
  std::vector<TensorDict> across;
  for (int64_t i = 0; i < 2; ++i) {
    across.push_back(TensorDict({{"b", torch::zeros({3})}}, {3}));
  }
  TensorDict other({{"a", torch::zeros({2})}}, {2});
  other.set("s", Value(lazy_stack(across, /*stack_dim=*/0)));
  (void)TensorDict::load_memmap(dir / "td", other);
  EXPECT_EQ(other["s"].lazy_stack().stack_dim(), 1);
  EXPECT_FALSE(other["s"].lazy_stack().tensordicts()[0].is_same(across[0]));
  EXPECT_TRUE(torch::equal(
      other["s"].lazy_stack().tensordicts()[2].get("b"),
      torch::full({2, 3}, int64_t{2})));
}

}  // namespace memmap_test
