// Tests of include/tensordict/safetensors.h: to_safetensors,
// from_safetensors and the checks of untrusted files. Files written and read
// by Python (tensordict and the safetensors package) are tested in
// tests/python (safetensors_interop.py).

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace safetensors_test {

using namespace tensordict;           // NOLINT(google-build-using-namespace)
using namespace tensordict::testing;  // NOLINT(google-build-using-namespace)
namespace fs = std::filesystem;

namespace {

// A file of `header` (JSON, unpadded) and `data`.
std::string file_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<char>((length >> (8 * i)) & 0xFF);
  }
  return out + header + data;
}

// {"a": int8 [3], "b": float [2, 2]}, without tensordict metadata.
std::string plain_file() {
  std::string data(3 + 16, '\0');
  const int8_t a[3] = {1, -2, 3};
  const float b[4] = {1.5F, 2.5F, 3.5F, 4.5F};
  std::memcpy(data.data(), b, 16);
  std::memcpy(data.data() + 16, a, 3);
  return file_bytes(
      R"({"b":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("a":{"dtype":"I8","shape":[3],"data_offsets":[16,19]}})",
      data);
}

TensorDict sample() {
  TensorDict td(
      {{"obs", torch::arange(6, torch::kFloat32).reshape({2, 3})},
       {"next",
        {{"reward", torch::tensor({1.5, -2.0}, torch::kFloat64)},
         {"done", torch::tensor({true, false})}}},
       {"task", "reach"}},
      /*batch_size=*/{2});
  td.set_non_tensor("steps", Json(7));
  td.set(
      "bf",
      torch::arange(4, torch::kFloat32).reshape({2, 2}).to(torch::kBFloat16));
  td.set("empty", torch::zeros({2, 0}, torch::kInt16));
  td.set("u8", torch::arange(2, torch::kUInt8));
  td.set("i64", torch::arange(2, torch::kInt64));
  td.set("half", torch::ones({2}, torch::kHalf));
  td.set("c64", torch::ones({2}, torch::kComplexFloat));
  // Non-contiguous: saved contiguous, read back equal.
  td.set("t", torch::arange(6, torch::kInt32).reshape({3, 2}).t());
  return td;
}

void expect_load_error(const std::string& path, const std::string& message) {
  EXPECT_THROWS_WITH(from_safetensors(path), c10::Error, message);
}

}  // namespace

TEST(SafetensorsTest, RoundTripKeepsValuesShapesDtypesAndStructure) {
  TempDir dir;
  TensorDict td = sample();
  td.set_names({"batch"});
  to_safetensors(td, dir / "td.safetensors");
  const TensorDict back = from_safetensors(dir / "td.safetensors");
  expect_td_equal(td, back);
  EXPECT_EQ(back.names(), td.names());
  EXPECT_EQ(back.get_non_tensor("task"), "reach");
  EXPECT_EQ(back.get_non_tensor("steps"), 7);
  EXPECT_EQ(back.get("bf").scalar_type(), torch::kBFloat16);
  EXPECT_EQ(back.get("t").sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_FALSE(back.device().has_value());
  // Keys keep their order.
  EXPECT_EQ(back.keys(), td.keys());
}

TEST(SafetensorsTest, LeavesAreViewsOfOnePrivateMapping) {
  TempDir dir;
  const std::string path = dir / "td.safetensors";
  to_safetensors(
      TensorDict({{"a", torch::ones({4})}, {"b", torch::zeros({2, 2})}}), path);
  const std::string before = read_text(path);
  TensorDict back = from_safetensors(path);
  at::Tensor a = back.get("a");
  EXPECT_TRUE(a.storage().is_alias_of(back.get("b").storage()));
  EXPECT_FALSE(MemoryMappedTensor::filename(a).has_value());
  a.fill_(5);  // copy-on-write: the file keeps its bytes
  EXPECT_EQ(read_text(path), before);
  EXPECT_TRUE(torch::equal(from_safetensors(path).get("a"), torch::ones({4})));
}

TEST(SafetensorsTest, WritesTheBytesPythonWrites) {
  // Python: to_safetensors(TensorDict({"x": torch.zeros(3, 2)}, [3],
  // names=["t"]), path).
  TempDir dir;
  TensorDict td({{"x", torch::zeros({3, 2})}}, {3});
  td.set_names({"t"});
  to_safetensors(td, dir / "x.safetensors");
  const std::string header =
      R"({"__metadata__":{"tensordict":"{\"version\": 1, \"root\": )"
      R"({\"batch_size\": [3], \"names\": [\"t\"], \"keys\": {\"x\": )"
      R"({\"tensor\": \"x\"}}}}"},"x":{"dtype":"F32","shape":[3,2],)"
      R"("data_offsets":[0,24]}} )";
  EXPECT_EQ(header.size() % 8, 0U);
  EXPECT_EQ(
      read_text(dir / "x.safetensors"),
      file_bytes(header, std::string(24, '\0')));
}

TEST(SafetensorsTest, TensorsAreSortedWidestDtypeFirstThenByName) {
  TempDir dir;
  to_safetensors(
      TensorDict(
          {{"z", torch::zeros({1}, torch::kBool)},
           {"b", torch::zeros({1}, torch::kFloat64)},
           {"a", torch::zeros({1}, torch::kFloat64)},
           {"h", torch::zeros({1}, torch::kBFloat16)}}),
      dir / "s.safetensors");
  const std::string text = read_text(dir / "s.safetensors");
  const size_t a = text.find(R"("a":{)");
  const size_t b = text.find(R"("b":{)");
  const size_t h = text.find(R"("h":{)");
  const size_t z = text.find(R"("z":{)");
  EXPECT_LT(a, b);
  EXPECT_LT(b, h);
  EXPECT_LT(h, z);
  EXPECT_NE(
      text.find(R"("a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]})"),
      std::string::npos);
}

TEST(SafetensorsTest, PlainFileLoadsAsNestedDictSplitOnDots) {
  TempDir dir;
  std::string data(16, '\0');
  const float w[2] = {1.0F, 2.0F};
  const float bias[2] = {3.0F, 4.0F};
  std::memcpy(data.data(), w, 8);
  std::memcpy(data.data() + 8, bias, 8);
  write_text(
      dir / "m.safetensors",
      file_bytes(
          R"({"__metadata__":{"format":"pt"},)"
          R"("layers.0.weight":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
          R"("head":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
          data));
  const TensorDict td = from_safetensors(dir / "m.safetensors");
  EXPECT_TRUE(td.batch_size().empty());
  // Sorted by name, as Python's safe_open lists them.
  EXPECT_EQ(td.keys()[0].back(), "head");
  EXPECT_TRUE(torch::equal(
      td.get({"layers", "0", "weight"}), torch::tensor({1.0F, 2.0F})));
  EXPECT_TRUE(torch::equal(td.get("head"), torch::tensor({3.0F, 4.0F})));
}

TEST(SafetensorsTest, PlainFileNamesMustSplitIntoAPlainTree) {
  TempDir dir;
  const std::string path = dir / "m.safetensors";
  write_text(
      path,
      file_bytes(
          R"({"a..b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
          std::string(1, '\0')));
  expect_load_error(path, "the tensor name 'a..b' has an empty part");
  write_text(
      path,
      file_bytes(
          R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
          R"("a.b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
          std::string(2, '\0')));
  expect_load_error(path, "the tensor 'a.b' is below the tensor 'a'");
  std::string deep = "a";
  for (int i = 0; i < 200; ++i) {
    deep += ".a";
  }
  write_text(
      path,
      file_bytes(
          "{\"" + deep +
              R"(":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
          std::string(1, '\0')));
  expect_load_error(path, "nests deeper than 128 levels");
}

TEST(SafetensorsTest, MisalignedTensorIsCopiedWithTheRightValues) {
  TempDir dir;
  // A header of 61 bytes: the data starts at byte 69, not 4-aligned.
  const std::string header =
      R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}       )";
  ASSERT_EQ((header.size() + 8) % 4, 1U);
  std::string data(8, '\0');
  const float x[2] = {0.25F, -8.0F};
  std::memcpy(data.data(), x, 8);
  write_text(dir / "u.safetensors", file_bytes(header, data));
  const at::Tensor loaded = from_safetensors(dir / "u.safetensors").get("x");
  EXPECT_TRUE(torch::equal(loaded, torch::tensor({0.25F, -8.0F})));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(loaded.data_ptr()) % 4, 0U);
}

TEST(SafetensorsTest, LazyStackRootLoadsWithFromSafetensorsAny) {
  TempDir dir;
  const std::string path = dir / "s.safetensors";
  LazyStackedTensorDict stack(
      {TensorDict(
           {{"a", torch::zeros({3})}, {"n", {{"b", torch::ones({3, 2})}}}},
           {3}),
       TensorDict(
           {{"a", torch::ones({3})}, {"n", {{"b", torch::zeros({3, 2})}}}},
           {3})},
      /*stack_dim=*/1);
  to_safetensors(stack, path);
  EXPECT_THROWS_WITH(
      from_safetensors(path), c10::Error, "load it with from_safetensors_any");
  const auto loaded = from_safetensors_any(path);
  ASSERT_TRUE(std::holds_alternative<LazyStackedTensorDict>(loaded));
  const LazyStackedTensorDict& back = std::get<LazyStackedTensorDict>(loaded);
  EXPECT_EQ(back.stack_dim(), 1);
  EXPECT_EQ(back.batch_size(), (std::vector<int64_t>{3, 2}));
  expect_td_equal(back.contiguous(), stack.contiguous());
}

TEST(SafetensorsTest, LazyStackEntryAndPythonClassRoundTrip) {
  TempDir dir;
  const std::string path = dir / "s.safetensors";
  TensorDict td({{"x", torch::ones({2})}}, {2});
  td.set(
      "stack",
      LazyStackedTensorDict(
          {TensorDict({{"y", torch::zeros({3})}}, {}),
           TensorDict({{"y", torch::ones({3})}}, {})}));
  td.set_python_class("<class 'mod.Data'>");
  to_safetensors(td, path);
  const TensorDict back = from_safetensors(path);
  EXPECT_EQ(back.python_class(), "<class 'mod.Data'>");
  ASSERT_TRUE(back["stack"].is_lazy_stack());
  EXPECT_TRUE(torch::equal(
      back.get_lazy_stack("stack").get("y"),
      torch::stack({torch::zeros({3}), torch::ones({3})})));
}

TEST(SafetensorsTest, DeviceOptionSetsTheDictsDevice) {
  TempDir dir;
  to_safetensors(sample(), dir / "d.safetensors");
  const TensorDict td = from_safetensors(
      dir / "d.safetensors",
      FromSafetensorsOptions().device(c10::Device("cpu")));
  ASSERT_TRUE(td.device().has_value());
  EXPECT_EQ(*td.device(), c10::Device("cpu"));
}

TEST(SafetensorsTest, SaveRefusesWhatTheFormatCannotHold) {
  TempDir dir;
  const std::string path = dir / "bad.safetensors";
  EXPECT_THROWS_WITH(
      to_safetensors(
          TensorDict({{"c", torch::ones({1}, torch::kComplexDouble)}}), path),
      c10::TypeError,
      "Cannot save the tensor at ('c',) as safetensors: the format has no "
      "dtype");
  EXPECT_THROWS_EXACTLY(
      to_safetensors(
          TensorDict(
              {{"a.b", torch::ones({1})}, {"a", {{"b", torch::ones({1})}}}}),
          path),
      c10::ValueError,
      "Two keys of the tensordict have the safetensors name 'a.b'.");
  TensorDict words({}, {2});
  words.set("w", NonTensorStack::from_list(Json::parse(R"(["a","b"])"), 1));
  EXPECT_THROWS_EXACTLY(
      to_safetensors(words, path),
      c10::TypeError,
      "Cannot save the non-tensor stack at ('w',) as safetensors: only single "
      "JSON values are supported.");
  EXPECT_THROWS_EXACTLY(
      to_safetensors(
          LazyStackedTensorDict(
              {TensorDict({{"a", torch::ones({1})}}),
               TensorDict({{"a", torch::ones({1})}, {"b", torch::ones({1})}})}),
          path),
      c10::TypeError,
      "Cannot save the lazy stack at the root as safetensors: its entries have "
      "different keys. Give every entry the same keys first.");
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir.str()));
}

TEST(SafetensorsTest, SaveReplacesAFileAndLeavesNoTemporary) {
  TempDir dir;
  const std::string path = dir / "r.safetensors";
  write_text(path, "old");
  to_safetensors(TensorDict({{"a", torch::ones({2})}}), path);
  EXPECT_TRUE(torch::equal(from_safetensors(path).get("a"), torch::ones({2})));
  EXPECT_EQ(
      std::distance(
          fs::directory_iterator(dir.str()), fs::directory_iterator()),
      1);
  EXPECT_THROWS_WITH(
      to_safetensors(TensorDict(), dir / "missing/r.safetensors"),
      c10::Error,
      "could not create");
}

TEST(SafetensorsTest, TruncatedFilesAreRefused) {
  TempDir dir;
  const std::string path = dir / "t.safetensors";
  write_text(path, "");
  expect_load_error(
      path, "expected at least 8 bytes (the header length), found 0");
  const std::string good = plain_file();
  write_text(path, good.substr(0, 20));
  expect_load_error(
      path, "the header length is 111 bytes, but only 12 bytes follow it");
  write_text(path, good.substr(0, good.size() - 1));
  expect_load_error(
      path,
      "tensor 'a' ends at byte 19 of the data, but the data region holds 18 "
      "bytes");
  write_text(path, good + "x");
  expect_load_error(
      path, "the tensors cover 19 bytes of data, but the file holds 20");
  expect_load_error(
      dir / "missing.safetensors", "cannot open the safetensors file");
}

TEST(SafetensorsTest, HugeHeaderLengthIsRefusedBeforeReading) {
  TempDir dir;
  const std::string path = dir / "h.safetensors";
  std::string bytes = plain_file();
  const uint64_t huge = uint64_t{1} << 62;
  std::memcpy(bytes.data(), &huge, 8);
  write_text(path, bytes);
  expect_load_error(
      path,
      "the header length is 4611686018427387904 bytes, more than the limit of "
      "100000000");
}

TEST(SafetensorsTest, HeaderMustBeAJsonObjectOfValidEntries) {
  TempDir dir;
  const std::string path = dir / "j.safetensors";
  auto check = [&](const std::string& header,
                   const std::string& data,
                   const std::string& message) {
    write_text(path, file_bytes(header, data));
    expect_load_error(path, message);
  };
  check("{\"a\":", "", "is not valid JSON");
  check("[1, 2]", "", "must hold a JSON object, found array");
  check(
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}\xff",
      std::string(4, '\0'),
      "is not valid JSON");
  check(
      R"({"a":{"dtype":"Q8","shape":[1],"data_offsets":[0,1]}})",
      std::string(1, '\0'),
      "at key 'a': dtype 'Q8' is unknown; expected one of BOOL");
  check(
      R"({"a":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})",
      std::string(1, '\0'),
      "dtype 'F4' is not supported");
  check(
      R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
      std::string(4, '\0'),
      "at key 'a': \"shape\"");
  check(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})",
      std::string(4, '\0'),
      "at key 'a': shape [2] of F32 needs 8 bytes, but \"data_offsets\" [0, 4] "
      "hold 4");
  check(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})",
      std::string(4, '\0'),
      "end before they begin");
  check(
      R"({"a":{"dtype":"F32","shape":[1]}})",
      "",
      "at key 'a': \"data_offsets\" is missing");
  check(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})",
      "",
      "\"data_offsets\" must be a list [begin, end]");
  check(R"({"a":[1]})", "", "at key 'a': expected an object");
  check(
      R"({"__metadata__":{"k":1}})",
      "",
      "the \"__metadata__\" value of 'k' must be a string, found number");
  check(
      R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4]}})",
      "",
      "overflow");
  check(
      R"({"a":{"dtype":"F32","shape":[0,1099511627776,1099511627776],"data_offsets":[0,0]}})",
      "",
      "has strides that overflow a 64-bit count");
}

TEST(SafetensorsTest, OffsetsMustCoverTheDataWithoutOverlapsOrHoles) {
  struct Case {
    const char* header;
    size_t data_bytes;
    const char* error;
  };
  const Case cases[] = {
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12,
       "tensor 'b' starts at byte 4 of the data, but the previous tensor 'a' "
       "ends at 8 (they overlap)"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
       12,
       "tensor 'b' starts at byte 8 of the data, but the previous tensor 'a' "
       "ends at 4 (a hole no tensor covers)"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8,
       "tensor 'a' starts at byte 4 of the data, but the first tensor must "
       "start at 0"},
      // A name given twice: its later entry is the one read.
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
       R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8,
       "tensor 'a' starts at byte 4 of the data, but the first tensor must "
       "start at 0"},
  };
  TempDir dir;
  const std::string path = dir / "o.safetensors";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.header);
    write_text(path, file_bytes(c.header, std::string(c.data_bytes, '\0')));
    expect_load_error(path, c.error);
  }
}

TEST(SafetensorsTest, TensordictMetadataIsChecked) {
  TempDir dir;
  const std::string path = dir / "m.safetensors";
  const std::string tensor =
      R"("x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  auto write = [&](const std::string& metadata) {
    std::string escaped;
    for (const char c : metadata) {
      if (c == '"' || c == '\\') {
        escaped += '\\';
      }
      escaped += c;
    }
    write_text(
        path,
        file_bytes(
            R"({"__metadata__":{"tensordict":")" + escaped + "\"}," + tensor +
                "}",
            std::string(4, '\0')));
  };
  write(R"({"version": 2, "root": {}})");
  EXPECT_THROWS_WITH(
      from_safetensors(path),
      c10::ValueError,
      "its tensordict metadata has version 2, and this version of tensordict "
      "reads version 1.");
  write(
      R"({"version": 1, "root": {"batch_size": [], "names": null, "keys": {}}})");
  EXPECT_THROWS_WITH(
      from_safetensors(path),
      c10::ValueError,
      "The tensors ['x'] of " + path + " are not in its tensordict metadata.");
  write(
      R"({"version": 1, "root": {"batch_size": [], "names": null, "keys": {"x": {"tensor": "y"}}}})");
  expect_load_error(path, "at key 'x': the tensor 'y' is not in the file");
  write(
      R"({"version": 1, "root": {"batch_size": [], "names": null, "keys": {"x": {"tensor": "x", "unbatched": true}}}})");
  expect_load_error(path, "UnbatchedTensor, which C++ does not support");
  write(
      R"({"version": 1, "root": {"batch_size": [2], "names": null, "keys": {"x": {"tensor": "x"}}}})");
  expect_load_error(path, "at key 'x'");
  write(
      R"({"version": 1, "root": {"batch_size": [], "names": null, "keys": {"x": {"tensor": "x"}, "z": {"tensor": "x"}}}})");
  expect_load_error(path, "at key 'z': the tensor 'x' is named by two keys");
  write(
      R"({"version": 1, "root": {"batch_size": [], "names": null, "keys": {"x": {"tensor": "x"}, "s": {"td": 3}}}})");
  expect_load_error(path, "at key 's': \"td\" must be an object, found number");
  write(
      R"({"version": 1, "root": {"batch_size": [1], "names": null, "stack_dim": 3, "keys": {}}})");
  expect_load_error(path, "\"stack_dim\" 3 is not a dim of the batch size [1]");
  write(
      R"({"version": 1, "root": {"batch_size": [1000000000000], "names": null, "stack_dim": 0, "keys": {}}})");
  expect_load_error(
      path, "a lazy stack of 1000000000000 elements is more than a file of");
}

TEST(SafetensorsTest, RandomlyDamagedFilesNeverCrash) {
  TempDir dir;
  const std::string source = dir / "good.safetensors";
  TensorDict td = sample();
  td.set(
      "stack",
      LazyStackedTensorDict({TensorDict({{"y", torch::zeros({2})}}),
                             TensorDict({{"y", torch::ones({2})}})})
          .contiguous());
  to_safetensors(td, source);
  const std::string good = read_text(source);
  std::mt19937 rng(0);
  const std::string path = dir / "bad.safetensors";
  int refused = 0;
  for (int i = 0; i < 300; ++i) {
    std::string bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const size_t at = rng() % std::min<size_t>(bytes.size(), 600);
      bytes[at] = static_cast<char>(rng() % 256);
    }
    if (rng() % 8 == 0) {
      bytes.resize(rng() % bytes.size());
    }
    write_text(path, bytes);
    try {
      (void)from_safetensors_any(path);
    } catch (const c10::Error&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
}

}  // namespace safetensors_test
