// Resource limits of the readers of untrusted trees and files: hostile
// shapes, huge metadata, trees with more leaves than the process may map,
// and the regression inputs of the fuzzers in fuzz/ (each a crash the
// fuzzers found, kept so it stays fixed).

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "io/format.h"
#include "io/metadata_reader.h"
#include "support.h"
#include "tensordict/consolidate.h"

// Its own namespace, so that test files can share a unity batch.
namespace limits_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)
using tensordict::testing::TempDir;
using tensordict::testing::write_text;

const char* const kDictType = "<class 'tensordict._td.TensorDict'>";

// A meta.json of a dict with `members` (JSON text, comma-separated, may be
// empty) and batch size `shape`.
std::string dict_meta(const std::string& members, const std::string& shape) {
  std::string out = "{";
  out += members;
  if (!members.empty()) {
    out += ", ";
  }
  out += "\"shape\": " + shape + ", \"device\": \"cpu\", \"_type\": \"" +
         kDictType + "\"}";
  return out;
}

// A JSON list of `dims` sizes, all `size`.
std::string sizes(int dims, int64_t size) {
  std::string out = "[";
  for (int i = 0; i < dims; ++i) {
    out += (i == 0 ? "" : ", ") + std::to_string(size);
  }
  return out + "]";
}

// Meta.json members for `count` empty float32 leaves "k0", "k1", ...: empty
// leaves have no file, so a tree of them costs only its meta.json.
std::string empty_leaves(int64_t count) {
  std::string out;
  out.reserve(static_cast<size_t>(count) * 48);
  for (int64_t i = 0; i < count; ++i) {
    if (i != 0) {
      out += ",";
    }
    out += "\"k" + std::to_string(i) +
           "\":{\"dtype\":\"torch.float32\",\"shape\":[0]}";
  }
  return out;
}

// Restores the kernel's vm.max_map_count when a test lowered it.
struct MaxMapCountOverride {
  explicit MaxMapCountOverride(int64_t value) {
    tensordict::detail::set_max_map_count_for_testing(value);
  }
  ~MaxMapCountOverride() {
    tensordict::detail::set_max_map_count_for_testing(0);
  }
};

// A file of `size` bytes that holds no data blocks (a hole) but `tail` at
// its end.
void write_sparse(
    const std::string& path, int64_t size, const std::string& tail = "") {
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, size), 0);
  if (!tail.empty()) {
    ASSERT_EQ(
        ::pwrite(
            fd,
            tail.data(),
            tail.size(),
            size - static_cast<int64_t>(tail.size())),
        static_cast<ssize_t>(tail.size()));
  }
  ::close(fd);
}

// A meta.json object with a million members parses in linear time (the
// ordered object's own insert is linear in its size, which made this take
// hours); duplicate keys keep their first place and their last value, as
// nlohmann's parser does, below and above the hash index's threshold.
TEST(LimitsTest, MetaJsonWithAMillionMembersParses) {
  std::string text = "{";
  for (int i = 0; i < 1000000; ++i) {
    text +=
        (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  }
  text += "}";
  const Json parsed = tensordict::detail::parse_meta_json(text, 8, "big");
  ASSERT_EQ(parsed.size(), 1000000u);
  EXPECT_EQ(parsed.at("k999999").get<int>(), 999999);
  EXPECT_EQ(parsed.begin().key(), "k0");

  const Json small = tensordict::detail::parse_meta_json(
      R"({"a": 1, "b": [2, {"c": null}], "a": 3})", 8, "small");
  EXPECT_EQ(small.dump(), R"({"a":3,"b":[2,{"c":null}]})");
  std::string many = "{";
  for (int i = 0; i < 40; ++i) {
    many += "\"m" + std::to_string(i) + "\": " + std::to_string(i) + ", ";
  }
  many += "\"m3\": \"again\", \"m39\": -1}";
  const Json indexed = tensordict::detail::parse_meta_json(many, 8, "many");
  ASSERT_EQ(indexed.size(), 40u);
  EXPECT_EQ(indexed.at("m3"), "again");
  EXPECT_EQ(indexed.at("m39"), -1);
  EXPECT_EQ(std::next(indexed.begin(), 3).key(), "m3");

  // Nesting is bounded as before.
  EXPECT_THROWS_WITH(
      tensordict::detail::parse_meta_json(R"({"a": {"b": [1]}})", 2, "deep"),
      c10::Error,
      "deep nests JSON deeper than 2 levels (LoadMemmapOptions::max_depth)");
  EXPECT_NO_THROW(
      tensordict::detail::parse_meta_json(R"({"a": {"b": 1}})", 2, "ok"));
  EXPECT_THROWS_WITH(
      tensordict::detail::parse_meta_json(R"({"a": 1,})", 8, "bad"),
      c10::Error,
      "bad is not valid JSON: ");
}

// A tree of a million leaves is refused the same way (65530 is Linux's
// default limit); writing a million leaf entries would pass max_meta_bytes,
// so the test lowers the limit instead.
TEST(LimitsTest, TreeWithMoreLeavesThanMappingsIsRefusedBeforeMapping) {
  TempDir dir;
  write_text(dir / "meta.json", dict_meta(empty_leaves(5000), "[]"));
  const MaxMapCountOverride lowered(4000);
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(dir.str()),
      c10::Error,
      "(the root): the tree has at least 5000 memmap leaves, one memory "
      "mapping each, but only ");
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(dir.str()),
      c10::Error,
      "Raise the limit (sysctl -w vm.max_map_count=");
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(dir.str()),
      c10::Error,
      "or save the tree as one consolidated file "
      "(TensorDict::consolidate(filename)) and load that.");
  // verify_memmap reports the same refusal instead of throwing.
  const std::vector<std::string> problems = verify_memmap(dir.str());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("vm.max_map_count is 4000"), std::string::npos)
      << problems[0];
}

TEST(LimitsTest, MappingLimitCountsNestedDictsAndNamesTheKey) {
  // Below the quarter of the limit nothing is counted; past it, the load's
  // leaves must fit below the limit less what the process holds.
  const int64_t limit = tensordict::detail::mappings_in_use() +
                        tensordict::detail::MappingBudget::kMargin + 8;
  const int64_t leaves = limit / 4 + 1;
  TempDir dir;
  write_text(
      dir / "meta.json",
      dict_meta(
          "\"sub\": {\"type\": \"" + std::string(kDictType) + "\"}", "[]"));
  std::filesystem::create_directory(dir / "sub");
  write_text(dir / "sub/meta.json", dict_meta(empty_leaves(leaves), "[]"));
  const MaxMapCountOverride lowered(limit);
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(dir.str()),
      c10::Error,
      "(key 'sub'): the tree has at least " + std::to_string(leaves) +
          " memmap leaves");
  // The meta device maps nothing, so it is not limited.
  const TensorDict meta = TensorDict::load_memmap(
      dir.str(), LoadMemmapOptions().device(c10::Device(c10::kMeta)));
  EXPECT_EQ(meta.get_tensordict("sub").num_keys(), static_cast<size_t>(leaves));
}

TEST(LimitsTest, RealTreesKeepLoadingUnderTheMappingLimit) {
  TempDir dir;
  TensorDict td({4});
  for (int i = 0; i < 300; ++i) {
    td.set("leaf" + std::to_string(i), torch::full({4}, i));
  }
  (void)td.memmap(dir.str());
  const TensorDict back = TensorDict::load_memmap(dir.str());
  ASSERT_EQ(back.num_keys(), 300u);
  EXPECT_TRUE(back.get("leaf299").equal(torch::full({4}, 299)));
}

TEST(LimitsTest, SixtyFourDimShapesLoadAndSixtyFiveAreRefused) {
  TempDir dir;
  // 64 dims of size 1: one float32 element, a 4-byte file.
  write_text(
      dir / "meta.json",
      dict_meta(
          "\"x\": {\"dtype\": \"torch.float32\", \"shape\": " + sizes(64, 1) +
              "}",
          sizes(64, 1)));
  const float one = 1.0F;
  write_text(
      dir / "x.memmap", std::string(reinterpret_cast<const char*>(&one), 4));
  const TensorDict td = TensorDict::load_memmap(dir.str());
  EXPECT_EQ(td.batch_dims(), 64);
  EXPECT_EQ(td.get("x").dim(), 64);
  EXPECT_EQ(td.get("x").item<float>(), 1.0F);

  write_text(
      dir / "meta.json",
      dict_meta(
          "\"x\": {\"dtype\": \"torch.float32\", \"shape\": " + sizes(65, 1) +
              "}",
          "[]"));
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(dir.str()),
      c10::Error,
      "at key 'x': \"shape\" has 65 dims, more than 64");
  write_text(dir / "meta.json", dict_meta("", sizes(65, 1)));
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(dir.str()),
      c10::Error,
      "at the root: \"shape\" has 65 dims, more than 64");
}

TEST(LimitsTest, HostileShapesAreRefusedBeforeAnyAllocation) {
  TempDir dir;
  // 2^64 elements: the byte count overflows.
  write_text(
      dir / "meta.json",
      dict_meta(
          "\"x\": {\"dtype\": \"torch.float32\", \"shape\": " + sizes(64, 2) +
              "}",
          "[]"));
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(dir.str()),
      c10::Error,
      "at key 'x': shape [2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, "
      "2, "
      "2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, "
      "2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2] "
      "overflows a 64-bit byte count");
  // A terabyte claimed by a 4-byte file: compared with the file's size.
  write_text(
      dir / "meta.json",
      dict_meta(
          "\"x\": {\"dtype\": \"torch.float32\", \"shape\": [1000000, "
          "1000000]}",
          "[]"));
  write_text(dir / "x.memmap", std::string(4, '\0'));
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(dir.str()),
      c10::Error,
      "has 4 bytes, but its shape [1000000, 1000000] of torch.float32 needs "
      "4000000000000");
  // The same claim in a consolidated buffer: compared with the buffer.
  const std::string json =
      "{\"cls\": \"TensorDict\", \"cls_metadata\": {\"batch_size\": [], "
      "\"device\": null}, \"non_tensors\": {}, \"leaves\": {\"x\": "
      "[\"torch.float32\", [1000000, 1000000], 0, 8, 0]}}";
  std::string buffer(8, '\0');
  buffer += json;
  const int64_t length = static_cast<int64_t>(json.size());
  buffer.append(reinterpret_cast<const char*>(&length), 8);
  EXPECT_THROWS_WITH(
      from_consolidated_bytes(buffer.data(), buffer.size()),
      c10::Error,
      "at key 'x'");
}

TEST(LimitsTest, HugeMetaJsonIsRefusedWithoutReadingIt) {
  TempDir dir;
  write_sparse(dir / "meta.json", int64_t{4} << 30);
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(dir.str()),
      c10::Error,
      "has 4294967296 bytes, more than the limit of 67108864 "
      "(LoadMemmapOptions::max_meta_bytes)");
}

TEST(LimitsTest, HugeConsolidatedMetadataIsRefusedWithoutReadingIt) {
  TempDir dir;
  // A 4 GiB hole, then a trailer that claims all of it is metadata.
  const int64_t length = int64_t{4} << 30;
  std::string trailer(reinterpret_cast<const char*>(&length), 8);
  write_sparse(dir / "td.consolidated", length + 8, trailer);
  EXPECT_THROWS_WITH(
      TensorDict::from_consolidated(dir / "td.consolidated"),
      c10::Error,
      "the metadata has 4294967296 bytes, more than max_meta_bytes 67108864");
}

}  // namespace limits_test
