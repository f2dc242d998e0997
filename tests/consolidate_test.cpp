// Tests of include/tensordict/consolidate.h: consolidate, from_consolidated
// and the byte-buffer form. Files written and read by Python live in
// tests/python (run_consolidate_interop.py).

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace consolidate_test {

using namespace tensordict;           // NOLINT(google-build-using-namespace)
using namespace tensordict::testing;  // NOLINT(google-build-using-namespace)
namespace fs = std::filesystem;

namespace {

// {"a": int32 [3], "b": {"c": float [3, 2], "s": "hello"}, "d": bool [3]}
TensorDict sample() {
  return TensorDict(
      {{"a", torch::arange(3, torch::kInt32)},
       {"b", {{"c", torch::ones({3, 2})}, {"s", "hello"}}},
       {"d", torch::tensor({true, false, true})}},
      /*batch_size=*/{3});
}

const c10::StorageImpl* storage_of(const at::Tensor& t) {
  return t.storage().unsafeGetStorageImpl();
}

std::vector<uint8_t> to_vector(const at::Tensor& bytes) {
  const auto* p = bytes.data_ptr<uint8_t>();
  return std::vector<uint8_t>(p, p + bytes.numel());
}

// The metadata JSON of a file or buffer, as text.
std::string metadata_text(const std::string& bytes) {
  int64_t length = 0;
  std::memcpy(&length, bytes.data() + bytes.size() - 8, 8);
  return bytes.substr(bytes.size() - 8 - length, length);
}

// Replaces the metadata of `bytes` (data, json, length) with `json`.
at::Tensor with_metadata(const at::Tensor& bytes, const std::string& json) {
  const std::string old = metadata_text(std::string(
      reinterpret_cast<const char*>(bytes.data_ptr()), bytes.numel()));
  const int64_t data_size =
      bytes.numel() - 8 - static_cast<int64_t>(old.size());
  at::Tensor out = torch::empty(
      {data_size + static_cast<int64_t>(json.size()) + 8}, torch::kUInt8);
  auto* p = out.data_ptr<uint8_t>();
  std::memcpy(p, bytes.data_ptr(), data_size);
  std::memcpy(p + data_size, json.data(), json.size());
  const int64_t length = static_cast<int64_t>(json.size());
  std::memcpy(p + data_size + json.size(), &length, 8);
  return out;
}

}  // namespace

TEST(ConsolidateTest, LeavesShareOneStorageWithPythonOffsets) {
  const TensorDict td = sample();
  const TensorDict c = td.consolidate();
  EXPECT_TRUE(c.is_consolidated());
  EXPECT_FALSE(td.is_consolidated());
  EXPECT_TRUE(c.is_locked());
  expect_td_equal(c, td);
  const at::Tensor storage = c.consolidated_storage();
  ASSERT_TRUE(storage.defined());
  EXPECT_EQ(storage.scalar_type(), torch::kUInt8);
  // a: 12 bytes + 4 pad, b.c: 24 bytes, d: 3 bytes + 5 pad (Python's
  // depth-first order: the nested leaf sits between a and d).
  EXPECT_EQ(storage.numel(), 48);
  const auto* base = static_cast<const uint8_t*>(storage.data_ptr());
  EXPECT_EQ(static_cast<const uint8_t*>(c.get("a").data_ptr()), base);
  EXPECT_EQ(
      static_cast<const uint8_t*>(c.get({"b", "c"}).data_ptr()), base + 16);
  EXPECT_EQ(static_cast<const uint8_t*>(c.get("d").data_ptr()), base + 40);
  for (const auto& leaf : c.values(true, true)) {
    EXPECT_EQ(storage_of(leaf.tensor()), storage_of(storage));
  }
  EXPECT_TRUE(c.get_tensordict("b").is_consolidated());
  EXPECT_EQ(c.get_non_tensor({"b", "s"}), "hello");
  // The padding is zeroed.
  EXPECT_EQ(base[12] + base[13] + base[14] + base[15], 0);
  EXPECT_EQ(base[43] + base[47], 0);
}

TEST(ConsolidateTest, ConsolidatingTwiceReturnsTheSameDict) {
  const TensorDict c = sample().consolidate();
  EXPECT_TRUE(c.consolidate().is_same(c));
  EXPECT_TRUE(c.consolidate(ConsolidateOptions().device(c10::Device(c10::kCPU)))
                  .is_same(c));
}

TEST(ConsolidateTest, AConsolidatedDictStillGoesToANewFile) {
  TempDir dir;
  const TensorDict c = sample().consolidate();
  const TensorDict in_file =
      c.consolidate(ConsolidateOptions().filename(dir / "again.bin"));
  EXPECT_FALSE(in_file.is_same(c));
  // The leaves map the file, as views: no leaf has a file of its own.
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(in_file.get("d")));
  EXPECT_EQ(MemoryMappedTensor::filename(in_file.get("d")), std::nullopt);
  EXPECT_TRUE(torch::equal(
      TensorDict::from_consolidated(dir / "again.bin").get("d"),
      sample().get("d")));
}

TEST(ConsolidateTest, DeviceOptionPutsTheStorageThere) {
  const TensorDict meta = sample().consolidate(
      ConsolidateOptions().device(c10::Device(c10::kMeta)));
  EXPECT_TRUE(meta.is_consolidated());
  EXPECT_EQ(meta.consolidated_storage().device().type(), c10::kMeta);
  EXPECT_EQ(meta.device(), c10::Device(c10::kMeta));
  EXPECT_EQ(meta.get_tensordict("b").device(), c10::Device(c10::kMeta));
  EXPECT_EQ(meta.get({"b", "c"}).storage_offset(), 4);  // byte 16 of float32
}

TEST(ConsolidateTest, NonContiguousAndEmptyLeavesAreCopied) {
  const at::Tensor base = torch::arange(12, torch::kFloat).reshape({2, 6});
  TensorDict td(
      {{"strided", base.index({torch::indexing::Slice(), 1})},
       {"t", base.t().contiguous().t()},
       {"empty", torch::zeros({2, 0})},
       {"scalar_batch", torch::full({2}, 7, torch::kInt64)}},
      {2});
  const TensorDict c = td.consolidate();
  expect_td_equal(c, td);
  EXPECT_TRUE(c.get("strided").is_contiguous());
  EXPECT_EQ(c.get("empty").sizes(), (std::vector<int64_t>{2, 0}));
  EXPECT_TRUE(c.is_consolidated());
}

TEST(ConsolidateTest, ThreadsGiveTheSameBytes) {
  TensorDict td({}, {4});
  for (int i = 0; i < 40; ++i) {
    td.set("k" + std::to_string(i), torch::randn({4, i + 1}));
  }
  const TensorDict one = td.consolidate();
  const TensorDict many = td.consolidate(ConsolidateOptions().num_threads(4));
  EXPECT_TRUE(
      torch::equal(one.consolidated_storage(), many.consolidated_storage()));
  expect_td_equal(many, td);
}

TEST(ConsolidateTest, ReplacingALeafEndsConsolidation) {
  TensorDict c = sample().consolidate();
  c.unlock_();
  c.set("a", torch::zeros({3}, torch::kInt32));
  EXPECT_FALSE(c.is_consolidated());
  EXPECT_FALSE(c.consolidated_storage().defined());
}

TEST(ConsolidateTest, InPlaceWritesKeepConsolidation) {
  TensorDict c = sample().consolidate();
  c.set_("a", torch::full({3}, 9, torch::kInt32));
  EXPECT_TRUE(c.is_consolidated());
  EXPECT_EQ(c.consolidated_storage().index({0}).item<int>(), 9);
}

TEST(ConsolidateTest, ShareMemoryPutsTheStorageInSharedMemory) {
  const TensorDict c =
      sample().consolidate(ConsolidateOptions().share_memory(true));
  EXPECT_TRUE(c.is_consolidated());
  EXPECT_TRUE(MemoryMappedTensor::is_memmap(c.consolidated_storage()));
  expect_td_equal(c, sample());
}

TEST(ConsolidateTest, ToDeviceMovesOneBuffer) {
  const TensorDict c = sample().consolidate();
  const TensorDict moved = c.to(c10::Device(c10::kCPU));
  EXPECT_TRUE(moved.is_consolidated());
  EXPECT_EQ(moved.device(), c10::Device(c10::kCPU));
  expect_td_equal(moved, sample());
  // The leaves are rebuilt over the one storage that was moved (on the CPU,
  // `to` of the storage aliases it, as for any tensor).
  for (const auto& leaf : moved.values(true, true)) {
    EXPECT_EQ(
        storage_of(leaf.tensor()), storage_of(moved.consolidated_storage()));
  }
  EXPECT_TRUE(moved.is_locked());
}

TEST(ConsolidateTest, ToMetaKeepsTheLayout) {
  const TensorDict c = sample().consolidate();
  const TensorDict meta = c.to(c10::Device(c10::kMeta));
  EXPECT_TRUE(meta.is_consolidated());
  EXPECT_EQ(meta.get({"b", "c"}).device().type(), c10::kMeta);
  EXPECT_EQ(meta.get({"b", "c"}).sizes(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(meta.get("d").storage_offset(), 40);
  EXPECT_EQ(meta.get_non_tensor({"b", "s"}), "hello");
}

TEST(ConsolidateTest, FileHasPythonLayoutAndLoadsBack) {
  TempDir dir;
  const std::string path = dir / "td.bin";
  const TensorDict c =
      sample().consolidate(ConsolidateOptions().filename(path));
  EXPECT_TRUE(c.is_consolidated());
  // Plain views of the file, as in Python: no leaf has a file of its own.
  EXPECT_EQ(MemoryMappedTensor::filename(c.get("a")), std::nullopt);
  const std::string bytes = read_text(path);
  EXPECT_EQ(
      metadata_text(bytes),
      "{\"cls\": \"TensorDict\", \"non_tensors\": {}, \"leaves\": {\"a\": "
      "[\"torch.int32\", [3], 0, 16, 4], \"d\": [\"torch.bool\", [3], 40, 48, "
      "5]}, \"cls_metadata\": {\"device\": null, \"names\": [null], "
      "\"batch_size\": [3], \"is_locked\": false}, \"b\": {\"cls\": "
      "\"TensorDict\", \"non_tensors\": {\"s\": [\"hello\", [3], null]}, "
      "\"leaves\": {\"c\": [\"torch.float32\", [3, 2], 16, 40, 0]}, "
      "\"cls_metadata\": {\"device\": null, \"names\": [null], \"batch_size\": "
      "[3], \"is_locked\": false}}}");
  EXPECT_EQ(bytes.size(), 48 + metadata_text(bytes).size() + 8);

  const TensorDict back = TensorDict::from_consolidated(path);
  EXPECT_TRUE(back.is_consolidated());
  EXPECT_FALSE(back.is_locked());
  // Python's order: non-tensors, leaves, then nested dicts.
  EXPECT_EQ(back.keys(), (std::vector<NestedKey>{"a", "d", "b"}));
  EXPECT_TRUE(torch::equal(back.get("a"), sample().get("a")));
  EXPECT_TRUE(torch::equal(back.get({"b", "c"}), torch::ones({3, 2})));
  EXPECT_EQ(back.get_non_tensor({"b", "s"}), "hello");
  // Copy-on-write: writes do not reach the file.
  back.get("a").fill_(5);
  EXPECT_EQ(read_text(path), bytes);
}

TEST(ConsolidateTest, ADictViewingAConsolidatedFileSavesAsAnOrdinaryCopy) {
  // Python saves these leaves without copy_existing: they are plain views of
  // one file, not memmap files of their own.
  TempDir dir;
  const std::string path = dir / "td.bin";
  const TensorDict written =
      sample().consolidate(ConsolidateOptions().filename(path));
  const TensorDict loaded = TensorDict::from_consolidated(path);
  for (const auto& [source, name] :
       {std::pair{written, "written"}, std::pair{loaded, "loaded"}}) {
    const std::string saved_dir = dir / name;
    const TensorDict saved = source.memmap(saved_dir);
    EXPECT_EQ(
        MemoryMappedTensor::filename(saved.get("a")), saved_dir + "/a.memmap");
    EXPECT_TRUE(equal(TensorDict::load_memmap(saved_dir), sample()));
  }
  // A memmap leaf keeps its file, and saving it elsewhere still asks for
  // copy_existing, as Python does.
  const TensorDict memmapped = loaded.memmap(dir / "first");
  EXPECT_THROW((void)memmapped.memmap(dir / "second"), c10::Error);
}

TEST(ConsolidateTest, FileReplacesALargerFile) {
  TempDir dir;
  const std::string path = dir / "td.bin";
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(100000, 'x');
  }
  (void)sample().consolidate(ConsolidateOptions().filename(path));
  const TensorDict back = TensorDict::from_consolidated(path);
  EXPECT_TRUE(torch::equal(back.get({"b", "c"}), torch::ones({3, 2})));
  EXPECT_TRUE(torch::equal(back.get("d"), sample().get("d")));
  EXPECT_LT(fs::file_size(path), 1000u);
}

TEST(ConsolidateTest, FileWithADeviceOtherThanCpuIsRefused) {
  TempDir dir;
  EXPECT_THROWS_WITH(
      sample().consolidate(ConsolidateOptions().filename(dir / "x").device(
          c10::Device(c10::kMeta))),
      c10::Error,
      "device and filename are mutually exclusive");
}

TEST(ConsolidateTest, NamesDeviceAndLockRoundTrip) {
  TensorDict td(
      {{"x", torch::randn({2, 3})},
       {"n", TensorDict({{"y", torch::ones({2, 4})}}, {2, 4})}},
      {2},
      c10::Device(c10::kCPU));
  td.set_names({"b"});
  td.lock_();
  const TensorDict back = from_consolidated_bytes(consolidated_bytes(td));
  EXPECT_TRUE(back.is_locked());
  EXPECT_EQ(back.device(), c10::Device(c10::kCPU));
  EXPECT_EQ(back.names(), (DimNames{"b"}));
  EXPECT_EQ(
      back.get_tensordict("n").batch_size(), (std::vector<int64_t>{2, 4}));
  EXPECT_TRUE(torch::equal(back.get("x"), td.get("x")));
}

TEST(ConsolidateTest, NonTensorStacksRoundTrip) {
  TensorDict td({{"x", torch::zeros({2, 2})}}, {2, 2});
  td.set(
      "words",
      NonTensorStack::from_list(Json::parse(R"([["a","b"],["c","d"]])"), 2));
  const TensorDict back = from_consolidated_bytes(consolidated_bytes(td));
  EXPECT_EQ(
      back.get_non_tensor("words"), Json::parse(R"([["a","b"],["c","d"]])"));
  EXPECT_EQ(
      back["words"].non_tensor_stack().batch_size(),
      (std::vector<int64_t>{2, 2}));
}

TEST(ConsolidateTest, ALazyStackEntryConsolidatesAndRoundTrips) {
  // Elements of different shapes: the stack cannot be made dense.
  const LazyStackedTensorDict stack = lazy_stack(
      {TensorDict({{"a", torch::arange(3.0)}}),
       TensorDict({{"a", torch::arange(4.0)}, {"b", torch::ones({2})}})});
  TensorDict td({{"x", torch::zeros({2})}, {"s", stack}}, {2});
  const TensorDict c = td.consolidate();
  EXPECT_TRUE(c.is_consolidated());
  const TensorDict back = from_consolidated_bytes(consolidated_bytes(td));
  ASSERT_TRUE(back["s"].is_lazy_stack());
  const auto& elements = back["s"].lazy_stack().tensordicts();
  ASSERT_EQ(elements.size(), 2u);
  EXPECT_TRUE(torch::equal(elements[1].get("a"), torch::arange(4.0)));
  EXPECT_TRUE(torch::equal(elements[1].get("b"), torch::ones({2})));
  TempDir dir;
  (void)td.consolidate(ConsolidateOptions().filename(dir / "td.bin"));
  const TensorDict file = TensorDict::from_consolidated(dir / "td.bin");
  EXPECT_TRUE(torch::equal(
      file["s"].lazy_stack().tensordicts()[0].get("a"), torch::arange(3.0)));
}

TEST(ConsolidateTest, ConsolidatedBytesOfALazyStackAreItsFileAndLoadBack) {
  // Elements whose shapes differ: the stack cannot be made dense.
  TensorDict a({{"x", torch::arange(6.0).reshape({2, 3})}}, {2});
  a.set({"n", "y"}, torch::tensor({1, 2}, torch::kInt64));
  TensorDict b({{"x", torch::arange(8.0).reshape({2, 4}) + 10}}, {2});
  b.set({"n", "y"}, torch::tensor({4, 5}, torch::kInt64));
  b.set("only_b", torch::ones({2}, torch::kBool));
  const LazyStackedTensorDict stack = lazy_stack({a, b}, 0, "s");
  ASSERT_FALSE(stack.is_consolidated());
  const at::Tensor bytes = consolidated_bytes(stack);
  EXPECT_EQ(bytes.scalar_type(), at::kByte);
  EXPECT_TRUE(bytes.is_cpu());
  // The bytes of `consolidate(filename)`, which Python writes too.
  TempDir dir;
  (void)stack.consolidate(ConsolidateOptions().filename(dir / "s.bin"));
  const std::string file = read_text(dir / "s.bin");
  ASSERT_EQ(static_cast<size_t>(bytes.numel()), file.size());
  EXPECT_EQ(
      std::string(
          static_cast<const char*>(bytes.const_data_ptr()), file.size()),
      file);
  // Consolidated already (its elements locked, as the metadata says): the
  // bytes of its file, in a buffer of their own.
  const LazyStackedTensorDict packed = stack.consolidate();
  const at::Tensor again = consolidated_bytes(packed);
  (void)packed.consolidate(ConsolidateOptions().filename(dir / "p.bin"));
  EXPECT_EQ(
      std::string(
          static_cast<const char*>(again.const_data_ptr()), again.numel()),
      read_text(dir / "p.bin"));
  EXPECT_NE(again.data_ptr(), packed.consolidated_storage().data_ptr());
  EXPECT_TRUE(torch::equal(
      again.narrow(0, 0, packed.consolidated_storage().numel()),
      packed.consolidated_storage()));

  const LazyStackedTensorDict back =
      LazyStackedTensorDict::from_consolidated_bytes(bytes);
  EXPECT_TRUE(back.is_consolidated());
  EXPECT_EQ(back.stack_dim(), 0);
  EXPECT_EQ(back.stack_dim_name(), "s");
  ASSERT_EQ(back.tensordicts().size(), 2u);
  EXPECT_TRUE(torch::equal(back.at(0).get("x"), a.get("x")));
  EXPECT_TRUE(torch::equal(back.at(1).get({"n", "y"}), b.get({"n", "y"})));
  EXPECT_TRUE(torch::equal(back.at(1).get("only_b"), b.get("only_b")));
  EXPECT_FALSE(back.at(0).contains("only_b"));
  // The leaves view the buffer: no copy.
  const auto* buffer = bytes.storage().unsafeGetStorageImpl();
  EXPECT_EQ(back.at(1).get("x").storage().unsafeGetStorageImpl(), buffer);

  // Each reader names the other for the other's root.
  EXPECT_THROWS_WITH(
      (void)from_consolidated_bytes(bytes),
      c10::Error,
      "load a lazy stack at the root with "
      "LazyStackedTensorDict::from_consolidated, or from_consolidated_bytes "
      "for bytes");
  EXPECT_THROWS_WITH(
      (void)LazyStackedTensorDict::from_consolidated_bytes(
          consolidated_bytes(a)),
      c10::ValueError,
      "the byte buffer holds a TensorDict, not a lazy stack: load it with "
      "from_consolidated_bytes");
  EXPECT_THROWS_WITH(
      (void)LazyStackedTensorDict::from_consolidated_bytes(
          torch::zeros({4}, torch::kFloat)),
      c10::TypeError,
      "from_consolidated_bytes expects a 1-dim uint8 tensor");
  EXPECT_THROWS_WITH(
      (void)LazyStackedTensorDict::from_consolidated_bytes(
          bytes.narrow(0, 0, bytes.numel() - 3)),
      c10::Error,
      "invalid consolidated data in the byte buffer");
}

// Python's TensorDict.from_consolidated returns whichever class the file's
// root holds:
//   stack = LazyStackedTensorDict(TensorDict(x=torch.zeros(2)),
//                                 TensorDict(x=torch.ones(3)))
//   stack.consolidate(filename="s.bin")
//   type(TensorDict.from_consolidated("s.bin"))  # LazyStackedTensorDict
TEST(ConsolidateTest, FromConsolidatedAnyReturnsTheRootTheFileHolds) {
  TempDir dir;
  TensorDict a({{"x", torch::arange(3.0)}});
  TensorDict b({{"x", torch::arange(4.0) + 10}});
  b.set({"n", "y"}, torch::tensor({4, 5}, torch::kInt64));
  (void)lazy_stack({a, b}, 0, "s")
      .consolidate(ConsolidateOptions().filename(dir / "s.bin"));
  (void)b.consolidate(ConsolidateOptions().filename(dir / "d.bin"));

  const LoadedTree stack = from_consolidated_any(dir / "s.bin");
  ASSERT_TRUE(std::holds_alternative<LazyStackedTensorDict>(stack));
  const LazyStackedTensorDict& got = std::get<LazyStackedTensorDict>(stack);
  EXPECT_TRUE(got.is_consolidated());
  EXPECT_EQ(got.stack_dim_name(), "s");
  ASSERT_EQ(got.tensordicts().size(), 2u);
  EXPECT_TRUE(torch::equal(got.at(0).get("x"), a.get("x")));
  EXPECT_TRUE(torch::equal(got.at(1).get({"n", "y"}), b.get({"n", "y"})));

  const LoadedTree dict = from_consolidated_any(dir / "d.bin");
  ASSERT_TRUE(std::holds_alternative<TensorDict>(dict));
  const TensorDict& td = std::get<TensorDict>(dict);
  EXPECT_TRUE(td.is_consolidated());
  EXPECT_TRUE(torch::equal(td.get("x"), b.get("x")));
  EXPECT_TRUE(torch::equal(td.get({"n", "y"}), b.get({"n", "y"})));

  // A file that is neither is refused as from_consolidated refuses it.
  write_text(dir / "bad.bin", "not a consolidated file");
  EXPECT_THROWS_WITH(
      (void)from_consolidated_any(dir / "bad.bin"),
      c10::Error,
      "invalid consolidated data in");
  EXPECT_THROWS_WITH(
      (void)from_consolidated_any(dir / "missing.bin"),
      c10::Error,
      "from_consolidated: cannot read");
}

TEST(ConsolidateTest, NestedKeysNamedLikeMetadataMembersAreRefused) {
  TensorDict td({{"leaves", {{"x", torch::zeros({1})}}}});
  EXPECT_THROWS_WITH(
      td.consolidate(),
      c10::Error,
      "cannot consolidate key 'leaves': a nested entry named 'leaves' would "
      "collide");
  // A tensor leaf of that name is fine: it lives under "leaves".
  TensorDict ok({{"leaves", torch::zeros({1})}});
  EXPECT_TRUE(ok.consolidate().is_consolidated());
}

TEST(ConsolidateTest, BytesRoundTripAndViewTheBuffer) {
  const at::Tensor bytes = consolidated_bytes(sample());
  const TensorDict back = from_consolidated_bytes(bytes);
  EXPECT_TRUE(torch::equal(back.get("a"), sample().get("a")));
  EXPECT_EQ(back.get("a").data_ptr(), bytes.data_ptr());
  const std::vector<uint8_t> raw = to_vector(bytes);
  const TensorDict copied = from_consolidated_bytes(raw.data(), raw.size());
  EXPECT_TRUE(torch::equal(copied.get({"b", "c"}), torch::ones({3, 2})));
  EXPECT_NE(copied.get("a").data_ptr(), static_cast<const void*>(raw.data()));
}

TEST(ConsolidateTest, MisalignedBufferIsCopied) {
  const at::Tensor bytes = consolidated_bytes(sample());
  at::Tensor shifted = torch::zeros({bytes.numel() + 1}, torch::kUInt8);
  shifted.narrow(0, 1, bytes.numel()).copy_(bytes);
  const TensorDict back =
      from_consolidated_bytes(shifted.narrow(0, 1, bytes.numel()));
  EXPECT_TRUE(torch::equal(back.get({"b", "c"}), torch::ones({3, 2})));
}

TEST(ConsolidateTest, BufferErrorsNameWhatWasExpected) {
  const at::Tensor bytes = consolidated_bytes(sample());
  EXPECT_THROWS_WITH(
      from_consolidated_bytes(bytes.narrow(0, 0, 5)),
      c10::Error,
      "expected at least 8 bytes (the metadata length), got 5");
  at::Tensor bad_length = bytes.clone();
  bad_length.narrow(0, bytes.numel() - 8, 8).fill_(0x7f);
  EXPECT_THROWS_WITH(
      from_consolidated_bytes(bad_length),
      c10::Error,
      "the trailer gives a metadata length of");
  EXPECT_THROWS_WITH(
      from_consolidated_bytes(torch::zeros({4}, torch::kFloat)),
      c10::TypeError,
      "expects a 1-dim uint8 tensor");

  const std::string leaf_prefix =
      R"({"cls": "TensorDict", "non_tensors": {}, "cls_metadata": {"device": null, "names": [null], "batch_size": [3], "is_locked": false}, "leaves": {"a": )";
  auto with_leaf = [&](const std::string& leaf) {
    return with_metadata(bytes, leaf_prefix + leaf + "}}");
  };
  const std::pair<const char*, const char*> bad_leaves[] = {
      {R"(["torch.int32", [3], 0, 4000, 4])",
       "at key 'a': byte range [0, 4000) is not within the 48 bytes of data"},
      {R"(["torch.int32", [30], 0, 16, 4])",
       "at key 'a': shape [30] torch.int32 needs 120 bytes, but its byte "
       "range [0, 16) holds 16"},
      {R"(["torch.int33", [3], 0, 16, 4])",
       "at key 'a': unknown dtype 'torch.int33'"},
      {R"(["torch.int32", [-3], 0, 16, 4])",
       "at key 'a': \"shape\" must hold non-negative integers, found -3"},
      {R"(["torch.int32", [4294967296, 4294967296, 4], 0, 16, 4])",
       "overflows a 64-bit byte count"},
      {R"(["torch.int32", [4], 0, 16, 4])",
       "at key 'a': shape [4] does not start with the batch size [3]"},
      {R"(["torch.float64", [3], 4, 28, 0])",
       "torch.float64 data at byte 4 is not aligned to its item size 8"},
      {R"(["torch.int32", [3], 0, 16])",
       "expected [dtype, shape, start, stop, pad]"},
  };
  for (const auto& [leaf, error] : bad_leaves) {
    SCOPED_TRACE(leaf);
    EXPECT_THROWS_WITH(
        from_consolidated_bytes(with_leaf(leaf)), c10::Error, error);
  }
  EXPECT_THROWS_WITH(
      from_consolidated_bytes(
          with_metadata(bytes, R"({"cls": "LazyStackedTensorDict"})")),
      c10::Error,
      "at the root: class 'LazyStackedTensorDict' is not supported");
  EXPECT_THROWS_WITH(
      from_consolidated_bytes(with_metadata(bytes, "[1, 2]")),
      c10::Error,
      "the consolidated metadata of the byte buffer must hold a JSON object, "
      "found array");
  EXPECT_THROWS_WITH(
      from_consolidated_bytes(with_metadata(
          bytes,
          R"({"cls": "TensorDict", "non_tensors": {}, "leaves": {}, "cls_metadata": {"device": "gpu:x", "batch_size": []}})")),
      c10::Error,
      "\"device\" is not a device: 'gpu:x'");
}

TEST(ConsolidateTest, MetadataRefusalsNameTheSourceAndTheKey) {
  const at::Tensor bytes = consolidated_bytes(sample());
  const std::string level =
      R"({"cls": "TensorDict", "non_tensors": {}, "leaves": {}, "cls_metadata": {"device": null, "batch_size": [2, 3], "names": )";
  // The one prefix of every metadata refusal, here with repeated dim names
  // (the same rule and text as a memmap directory's "_names").
  EXPECT_THROWS_WITH(
      from_consolidated_bytes(with_metadata(bytes, level + R"(["x", "x"]}})")),
      c10::Error,
      "invalid metadata in the byte buffer at the root: \"names\" repeats "
      "the dim name 'x'");
  EXPECT_THROWS_WITH(
      from_consolidated_bytes(with_metadata(bytes, level + R"(["x"]}})")),
      c10::Error,
      "\"names\" has 1 names for 2 batch dims");
  EXPECT_THROWS_WITH(
      from_consolidated_bytes(with_metadata(bytes, level + R"([null, 3]}})")),
      c10::Error,
      "\"names\" must hold strings or null, found 3");
  // Names that are all null are no names.
  const TensorDict unnamed =
      from_consolidated_bytes(with_metadata(bytes, level + "[null, null]}}"));
  EXPECT_FALSE(unnamed.has_names());
  EXPECT_EQ(unnamed.batch_size(), (std::vector<int64_t>{2, 3}));
  EXPECT_THROWS_WITH(
      from_consolidated_bytes(with_metadata(
          bytes,
          R"({"cls": "TensorDict", "non_tensors": {}, "leaves": {}, "cls_metadata": {"device": null, "batch_size": [1, -1]}})")),
      c10::Error,
      "at the root: \"batch_size\" must hold non-negative integers, found -1");
  EXPECT_THROWS_WITH(
      from_consolidated_bytes(with_metadata(
          bytes, R"({"cls": "TensorDict", "non_tensors": {}, "leaves": {}})")),
      c10::Error,
      "invalid metadata in the byte buffer at the root: \"cls_metadata\" is "
      "missing");
}

TEST(ConsolidateTest, FromConsolidatedNamesTheFile) {
  TempDir dir;
  EXPECT_THROWS_WITH(
      TensorDict::from_consolidated(dir / "missing.bin"),
      c10::Error,
      "missing.bin");
  const std::string tiny = dir / "tiny.bin";
  {
    std::ofstream out(tiny, std::ios::binary);
    out << "abc";
  }
  EXPECT_THROWS_WITH(
      TensorDict::from_consolidated(tiny),
      c10::Error,
      "tiny.bin: expected at least 8 bytes (the metadata length), got 3");
}

// Random corruption of a valid buffer never crashes: it loads or throws
// c10::Error.
TEST(ConsolidateTest, FuzzedBuffersNeverCrash) {
  TensorDict td = sample();
  td.set(
      "words", NonTensorStack::from_list(Json::parse(R"(["x","y","z"])"), 1));
  td.set({"b", "e", "f"}, torch::randn({3, 5}, torch::kDouble));
  const at::Tensor bytes = consolidated_bytes(td);
  const int64_t n = bytes.numel();
  std::mt19937 rng(1234);
  int loaded = 0;
  int refused = 0;
  for (int round = 0; round < 3000; ++round) {
    at::Tensor copy = bytes.clone();
    auto* p = copy.data_ptr<uint8_t>();
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) {
      // Bias towards the metadata and trailer, where the structure is.
      const int64_t span = std::min<int64_t>(n, 700);
      const int64_t at = round % 3 == 0
                             ? static_cast<int64_t>(rng() % n)
                             : n - 1 - static_cast<int64_t>(rng() % span);
      p[at] = round % 2 == 0
                  ? static_cast<uint8_t>(rng())
                  : static_cast<uint8_t>("0123456789[]{},\"-"[rng() % 17]);
    }
    int64_t length = n;
    if (round % 5 == 0) {
      length = static_cast<int64_t>(rng() % n);
    }
    try {
      const TensorDict back =
          from_consolidated_bytes(copy.narrow(0, 0, length));
      // Whatever loaded must be readable.
      for (const auto& leaf : back.values(true, true)) {
        (void)leaf.tensor().sum();
      }
      ++loaded;
    } catch (const c10::Error&) {
      ++refused;
    }
  }
  EXPECT_EQ(loaded + refused, 3000);
  EXPECT_GT(refused, 100);
}

// Threaded copies into a file and into memory, of a nested dict whose
// leaves differ in size and dtype, give the serial bytes; two threaded
// consolidations of one dict may also run at once.
TEST(ConsolidateTest, ConcurrentThreadedConsolidationsGiveTheSerialBytes) {
  TempDir dir;
  TensorDict td({}, {4});
  for (int i = 0; i < 30; ++i) {
    td.set(
        {"g" + std::to_string(i % 4), "k" + std::to_string(i)},
        torch::randn({4, i + 1})
            .to(i % 2 == 0 ? torch::kFloat64 : torch::kInt16));
  }
  const TensorDict serial = td.consolidate();
  std::thread other([&] {
    const TensorDict again =
        td.consolidate(ConsolidateOptions().num_threads(3));
    EXPECT_TRUE(torch::equal(
        again.consolidated_storage(), serial.consolidated_storage()));
  });
  const TensorDict to_file = td.consolidate(
      ConsolidateOptions().filename(dir / "td.bin").num_threads(4));
  other.join();
  EXPECT_TRUE(torch::equal(
      to_file.consolidated_storage(), serial.consolidated_storage()));
  expect_td_equal(TensorDict::from_consolidated(dir / "td.bin"), td);
}

// A consolidated file on a full file system: the error names the file and
// the disk, nothing is left behind, and an old file keeps its bytes. (The
// file's blocks are reserved before it is mapped; writing a sparse mapping
// onto a full tmpfs raised SIGBUS.)
TEST(ConsolidateTest, ToAFullFileSystemThrowsAndLeavesTheOldFile) {
  TempDir dir;
  const tensordict::testing::SmallTmpfs disk(dir / "mnt", "4m");
  if (!disk.mounted()) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  }
  TensorDict small({4});
  small.set("x", torch::arange(16, torch::kFloat32).reshape({4, 4}));
  (void)small.consolidate(ConsolidateOptions().filename(disk / "td.bin"));
  const std::vector<std::string> before = disk.entries();
  const std::string old_bytes = read_text(disk / "td.bin");

  TensorDict big({4});
  big.set("x", torch::randn({4, 5 << 16}));  // 5 MiB
  big.set("nested", TensorDict({4}));
  big.set({"nested", "y"}, torch::ones({4, 3}));
  for (const int threads : {0, 2}) {
    for (const std::string name : {"td.bin", "new.bin"}) {
      try {
        (void)big.consolidate(
            ConsolidateOptions().filename(disk / name).num_threads(threads));
        ADD_FAILURE() << "consolidating 5 MiB onto a 4 MiB tmpfs succeeded";
      } catch (const c10::Error& e) {
        const std::string message = e.what_without_backtrace();
        EXPECT_NE(message.find("No space left on device"), std::string::npos)
            << message;
        EXPECT_NE(message.find("the consolidated file"), std::string::npos)
            << message;
      }
      EXPECT_EQ(disk.entries(), before);
    }
  }
  EXPECT_EQ(read_text(disk / "td.bin"), old_bytes);
  expect_td_equal(TensorDict::from_consolidated(disk / "td.bin"), small);
}

}  // namespace consolidate_test
