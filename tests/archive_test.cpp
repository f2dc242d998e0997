// Tests of include/tensordict/archive.h: `.tdz` memmap archives, and of the
// zip reader behind them (src/io/zip.h).

#include "memmap/archive.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "io/zip.h"
#include "support.h"

namespace tensordict::testing {
namespace archive_test {

namespace fs = std::filesystem;

TensorDict sample() {
  TensorDict td({3});
  td.set("a", torch::arange(12, torch::kFloat32).reshape({3, 4}));
  td.set({"nested", "b"}, torch::tensor({1, 2, 3}, torch::kInt64));
  td.set({"nested", "c"}, torch::tensor({true, false, true}));
  td.set("half", torch::ones({3, 2}, torch::kFloat16));
  td.set("bytes", torch::tensor({1, 2, 3}, torch::kUInt8));
  td.set("text", NonTensorData("hello", {3}));
  return td;
}

uint32_t le32(const std::string& s, size_t at) {
  uint32_t v = 0;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}

void set_le(std::string& s, size_t at, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) {
    s[at + i] = static_cast<char>((value >> (8 * i)) & 0xff);
  }
}

// Offset of the end record (no comment).
size_t end_record(const std::string& s) {
  return s.size() - 22;
}

size_t central_offset(const std::string& s) {
  return le32(s, end_record(s) + 16);
}

// Offset of the central record of the entry named `name`.
size_t central_record(const std::string& s, const std::string& name) {
  size_t pos = central_offset(s);
  while (le32(s, pos) == 0x02014b50) {
    const size_t name_len = static_cast<uint8_t>(s[pos + 28]) |
                            (static_cast<uint8_t>(s[pos + 29]) << 8);
    const size_t extra_len = static_cast<uint8_t>(s[pos + 30]) |
                             (static_cast<uint8_t>(s[pos + 31]) << 8);
    if (s.compare(pos + 46, name_len, name) == 0 && name_len == name.size()) {
      return pos;
    }
    pos += 46 + name_len + extra_len;
  }
  ADD_FAILURE() << "no entry " << name;
  return 0;
}

std::vector<detail::ZipEntry> parse(const std::string& s) {
  return detail::parse_zip(
      reinterpret_cast<const unsigned char*>(s.data()), s.size(), "archive");
}

TEST(ArchiveTest, RoundTripKeepsValuesDtypesKeysAndBatchSize) {
  TempDir tmp;
  const TensorDict td = sample();
  const std::string path = tmp / "td.tdz";
  const TensorDict saved = td.save(path);
  EXPECT_TRUE(is_memmap_archive(path));
  EXPECT_TRUE(fs::is_regular_file(path));
  // Only the archive is left: the staging directory is gone.
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.str()), {}), 1);
  const TensorDict loaded = TensorDict::load_memmap(path);
  expect_td_equal(loaded, td);
  expect_td_equal(saved, td);
  EXPECT_EQ(loaded.batch_size(), c10::IntArrayRef({3}));
  EXPECT_EQ(loaded.get("half").dtype(), torch::kFloat16);
  EXPECT_EQ(loaded.get({"nested", "b"}).dtype(), torch::kInt64);
  EXPECT_FALSE(loaded.saved_path().has_value());
  // Subpaths read below the root of the archive too.
  const TensorDict nested =
      TensorDict::load_memmap(path, LoadMemmapOptions().subpath({"nested"}));
  EXPECT_TRUE(
      torch::equal(nested.get("b"), torch::tensor({1, 2, 3}, torch::kInt64)));
  // The meta device reads only meta.json.
  const TensorDict meta = TensorDict::load_memmap(
      path, LoadMemmapOptions().device(c10::Device(c10::kMeta)));
  EXPECT_TRUE(meta.get("a").is_meta());
}

// Python: td.memmap("x.tdz") writes an archive and td.memmap("x") a
// directory; archive=True/False overrides the suffix either way.
TEST(ArchiveTest, WritesArchiveIsTheSuffixUnlessArchiveIsSet) {
  EXPECT_TRUE(MemmapOptions("/data/run.tdz").writes_archive());
  EXPECT_FALSE(MemmapOptions("/data/run").writes_archive());
  EXPECT_FALSE(MemmapOptions("/data/run.tdz/").writes_archive());
  EXPECT_FALSE(MemmapOptions("/data/run.TDZ").writes_archive());
  EXPECT_FALSE(MemmapOptions("").writes_archive());
  EXPECT_TRUE(MemmapOptions("/data/run").archive(true).writes_archive());
  EXPECT_FALSE(MemmapOptions("/data/run.tdz").archive(false).writes_archive());
  // What the save does agrees with the answer.
  TempDir dir;
  const TensorDict td({{"a", torch::arange(4.0)}}, {4});
  (void)td.memmap(MemmapOptions(dir / "plain").archive(true));
  EXPECT_TRUE(std::filesystem::is_regular_file(dir / "plain"));
  (void)td.memmap(MemmapOptions(dir / "dir.tdz").archive(false));
  EXPECT_TRUE(std::filesystem::is_directory(dir / "dir.tdz"));
}

TEST(ArchiveTest, LayoutIsPythonsAlignedStoredZip64) {
  TempDir tmp;
  sample().save(tmp / "td.tdz");
  const std::string bytes = read_text(tmp / "td.tdz");
  const auto entries = parse(bytes);
  ASSERT_FALSE(entries.empty());
  EXPECT_EQ(entries.front().name, "meta.json");
  for (const auto& entry : entries) {
    EXPECT_EQ(entry.method, detail::kZipStored) << entry.name;
    if (entry.name.size() > 7 &&
        entry.name.compare(entry.name.size() - 7, 7, ".memmap") == 0) {
      EXPECT_EQ(entry.data_offset % 64, 0u) << entry.name;
    }
    // Local header: sizes in a zip64 block.
    EXPECT_EQ(le32(bytes, entry.header_offset + 18), 0xffffffffu);
  }
  // meta.json first at every level, before the sub-directories.
  std::vector<std::string> names;
  for (const auto& entry : entries) {
    names.push_back(entry.name);
  }
  const auto nested_meta =
      std::find(names.begin(), names.end(), "nested/meta.json");
  ASSERT_NE(nested_meta, names.end());
  EXPECT_EQ(*(nested_meta + 1), "nested/b.memmap");
}

TEST(ArchiveTest, LeavesAreViewsIntoOneMapping) {
  TempDir tmp;
  const std::string path = tmp / "td.tdz";
  sample().save(path);
  const TensorDict loaded = TensorDict::load_memmap(path);
  const at::Tensor a = loaded.get("a");
  const at::Tensor b = loaded.get({"nested", "b"});
  // One storage, the whole archive: the leaves are views into it.
  EXPECT_EQ(a.storage().data(), b.storage().data());
  EXPECT_EQ(a.storage().nbytes(), static_cast<size_t>(fs::file_size(path)));
  const auto* base = static_cast<const char*>(a.storage().data());
  const auto* ptr = static_cast<const char*>(a.data_ptr());
  EXPECT_GE(ptr, base);
  EXPECT_LE(ptr + a.nbytes(), base + a.storage().nbytes());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ptr) % 64, 0u);
  // Copy-on-write by default: writes stay in memory, the file is unchanged.
  const std::string before = read_text(path);
  a.add_(1);
  EXPECT_EQ(static_cast<const char*>(a.data_ptr()), ptr);
  EXPECT_EQ(read_text(path), before);
  EXPECT_TRUE(torch::equal(
      TensorDict::load_memmap(path).get("a"),
      torch::arange(12, torch::kFloat32).reshape({3, 4})));
  // Shared (r+): writes reach the archive.
  {
    const TensorDict shared = TensorDict::load_memmap(
        path, LoadMemmapOptions().mode(MapMode::kReadWrite));
    shared.get("a").fill_(7);
  }
  EXPECT_TRUE(TensorDict::load_memmap(path).get("a").eq(7).all().item<bool>());
}

TEST(ArchiveTest, PackAndUnpackRoundTrip) {
  TempDir tmp;
  const TensorDict td = sample();
  (void)td.memmap(tmp / "dir");
  EXPECT_EQ(pack_memmap(tmp / "dir", tmp / "packed.tdz"), tmp / "packed.tdz");
  expect_td_equal(TensorDict::load_memmap(tmp / "packed.tdz"), td);
  EXPECT_EQ(unpack_memmap(tmp / "packed.tdz", tmp / "out"), tmp / "out");
  expect_td_equal(TensorDict::load_memmap(tmp / "out"), td);
  EXPECT_EQ(read_text(tmp / "dir/a.memmap"), read_text(tmp / "out/a.memmap"));
  EXPECT_FALSE(is_memmap_archive(tmp / "dir"));
  EXPECT_FALSE(is_memmap_archive(tmp / "missing.tdz"));
  // Deflate: smaller, and it loads by inflating a copy.
  const TensorDict zeros(
      {{"z", torch::zeros({1000}, torch::kFloat32)}}, {1000});
  (void)zeros.memmap(tmp / "zeros");
  pack_memmap(
      tmp / "zeros",
      tmp / "zeros.tdz",
      PackMemmapOptions().compression("deflate"));
  EXPECT_LT(fs::file_size(tmp / "zeros.tdz"), 1000u);
  const TensorDict inflated = TensorDict::load_memmap(tmp / "zeros.tdz");
  expect_td_equal(inflated, zeros);
  unpack_memmap(tmp / "zeros.tdz", tmp / "zeros_out");
  expect_td_equal(TensorDict::load_memmap(tmp / "zeros_out"), zeros);
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(
          tmp / "zeros.tdz", LoadMemmapOptions().mode(MapMode::kReadWrite)),
      c10::Error,
      "is compressed");
  EXPECT_THROWS_WITH(
      pack_memmap(
          tmp / "dir", tmp / "x.tdz", PackMemmapOptions().compression("lzma")),
      c10::Error,
      "unknown compression 'lzma'");
}

TEST(ArchiveTest, LoadMemmapInflatesDeflatedLeavesOnNumThreads) {
  TempDir tmp;
  TensorDict td({64});
  for (int i = 0; i < 6; ++i) {
    td.set(
        {i % 2 == 0 ? "top" : "nested", "leaf" + std::to_string(i)},
        torch::arange(64 * 100, torch::kFloat32).reshape({64, 100}) * i);
  }
  td.set("empty", torch::zeros({64, 0}));
  td.set("text", NonTensorData("hello", {64}));
  td.save(MemmapOptions(tmp / "d.tdz").compression("deflate"));
  for (const int64_t threads : {0, 1, 2, 4, 16}) {
    SCOPED_TRACE(threads);
    const TensorDict loaded = TensorDict::load_memmap(
        tmp / "d.tdz", LoadMemmapOptions().num_threads(threads));
    expect_td_equal(loaded, td);
    // A copy, as with one thread: the leaves own their memory.
    EXPECT_TRUE(loaded.get({"top", "leaf0"}).is_contiguous());
    expect_td_equal(
        TensorDict::load_memmap(
            tmp / "d.tdz",
            LoadMemmapOptions().num_threads(threads).subpath({"nested"})),
        td.get_tensordict("nested"));
  }
  // Shapes only: nothing is inflated.
  const TensorDict meta = TensorDict::load_memmap(
      tmp / "d.tdz", LoadMemmapOptions().num_threads(4).device(c10::kMeta));
  EXPECT_TRUE(meta.get({"top", "leaf0"}).is_meta());

  // The leaves are inflated before the first one loads: spoil the payloads
  // after the prefetch, and every leaf still loads as written.
  const std::string path = tmp / "d.tdz";
  const std::string bytes = read_text(path);
  auto files = detail::open_archive_files(path, MapMode::kAuto);
  ASSERT_NE(files, nullptr);
  files->prefetch_compressed(path, 4);
  std::string spoiled = bytes;
  for (const detail::ZipEntry& entry : parse(bytes)) {
    if (entry.method == detail::kZipDeflated) {
      spoiled[entry.data_offset] =
          static_cast<char>(~spoiled[entry.data_offset]);
    }
  }
  {
    // Written in place: the archive's mapping sees the new bytes.
    std::FILE* f = std::fopen(path.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(
        std::fwrite(spoiled.data(), 1, spoiled.size(), f), spoiled.size());
    std::fclose(f);
  }
  const detail::EntryName what("the leaf");
  for (int i = 0; i < 6; ++i) {
    const std::string file =
        c10::str(path, i % 2 == 0 ? "/top/leaf" : "/nested/leaf", i, ".memmap");
    const auto leaf =
        files->map_leaf(file, at::kFloat, {64, 100}, MapMode::kAuto, what);
    ASSERT_TRUE(leaf.has_value()) << file;
    EXPECT_TRUE(torch::equal(
        *leaf,
        td.get({i % 2 == 0 ? "top" : "nested", "leaf" + std::to_string(i)})))
        << file;
  }
  // Taken once: a second read inflates the spoiled bytes and says so.
  EXPECT_THROWS_WITH(
      (void)files->map_leaf(
          path + "/top/leaf0.memmap",
          at::kFloat,
          {64, 100},
          MapMode::kAuto,
          what),
      c10::Error,
      "entry 'top/leaf0.memmap'");
  // Loads with threads name the spoiled leaf as a load with one thread does.
  for (const int64_t threads : {1, 4}) {
    SCOPED_TRACE(threads);
    EXPECT_THROWS_WITH(
        (void)TensorDict::load_memmap(
            path, LoadMemmapOptions().num_threads(threads)),
        c10::Error,
        "leaf");
  }
}

TEST(ArchiveTest, PackRefusesAnArchiveInsideItsSource) {
  TempDir tmp;
  (void)sample().memmap(tmp / "dir");
  EXPECT_THROWS_WITH(
      pack_memmap(tmp / "dir", tmp / "dir/nested/x.tdz"),
      c10::Error,
      "must be outside the source directory");
  EXPECT_FALSE(fs::exists(tmp / "dir/nested/x.tdz"));
  EXPECT_THROWS_WITH(
      pack_memmap(tmp / "nothing", tmp / "x.tdz"),
      c10::Error,
      "no meta.json found");
  fs::create_symlink(tmp / "dir/a.memmap", tmp / "dir/link.memmap");
  EXPECT_THROWS_WITH(
      pack_memmap(tmp / "dir", tmp / "x.tdz"), c10::Error, "symlink");
  EXPECT_FALSE(fs::exists(tmp / "x.tdz"));
}

TEST(ArchiveTest, SaveOverAnExistingArchiveIsCrashSafe) {
  TempDir tmp;
  const std::string path = tmp / "td.tdz";
  sample().save(path);
  const std::string old = read_text(path);
  // A refused save touches nothing.
  EXPECT_THROWS_WITH(
      TensorDict({{"x", torch::ones({2})}}, {})
          .save(MemmapOptions(path).existsok(false)),
      c10::Error,
      "A file already exists");
  EXPECT_EQ(read_text(path), old);
  // A failed save (a leaf that cannot be written) leaves the old archive
  // and no temporary file.
  TensorDict bad;
  bad.set("ok", torch::ones({2}));
  bad.set("shape", torch::ones({1}));  // collides with meta.json's own
  EXPECT_ANY_THROW((void)bad.save(path));
  EXPECT_EQ(read_text(path), old);
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.str()), {}), 1);
  // The mapping of a loaded archive survives a replacement of the file.
  const TensorDict loaded = TensorDict::load_memmap(path);
  TensorDict other;
  other.set("y", torch::full({4}, 2.0));
  other.save(path);
  expect_td_equal(loaded, sample());
  expect_td_equal(TensorDict::load_memmap(path), other);
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.str()), {}), 1);
  // A dict loaded from the archive saves over that same archive.
  (void)TensorDict::load_memmap(path).save(path);
  expect_td_equal(TensorDict::load_memmap(path), other);
  // A directory there is refused.
  fs::create_directories(tmp / "d.tdz");
  EXPECT_THROWS_WITH(
      other.save(tmp / "d.tdz"), c10::Error, "it is an existing directory");
}

TEST(ArchiveTest, TruncatedArchivesAreRefused) {
  TempDir tmp;
  sample().save(tmp / "td.tdz");
  const std::string bytes = read_text(tmp / "td.tdz");
  for (size_t size :
       {size_t{0}, size_t{10}, bytes.size() / 2, bytes.size() - 1}) {
    write_text(tmp / "cut.tdz", bytes.substr(0, size));
    EXPECT_THROWS_WITH(
        TensorDict::load_memmap(tmp / "cut.tdz"), c10::Error, "cut.tdz");
    EXPECT_FALSE(is_memmap_archive(tmp / "cut.tdz"));
  }
}

TEST(ArchiveTest, MalformedZipsAreRefusedWithExpectedVersusFound) {
  TempDir tmp;
  TensorDict td;
  td.set("a", torch::arange(4, torch::kInt32));
  td.set("b", torch::arange(4, torch::kInt32));
  td.save(tmp / "td.tdz");
  const std::string good = read_text(tmp / "td.tdz");
  ASSERT_NO_THROW(parse(good));
  {
    // A header pointing at another entry's header.
    std::string s = good;
    const size_t a = central_record(s, "a.memmap");
    const size_t b = central_record(s, "b.memmap");
    set_le(s, b + 42, le32(s, a + 42), 4);
    EXPECT_THROWS_WITH(parse(s), c10::Error, "another name in its local");
  }
  {
    // Two entries sharing bytes: a's payload, consistently in both
    // headers, grown over b's local header.
    std::string s = good;
    const auto entries = parse(s);
    const detail::ZipEntry* a = nullptr;
    const detail::ZipEntry* b = nullptr;
    for (const auto& entry : entries) {
      a = entry.name == "a.memmap" ? &entry : a;
      b = entry.name == "b.memmap" ? &entry : b;
    }
    ASSERT_TRUE(a != nullptr && b != nullptr);
    ASSERT_LT(a->header_offset, b->header_offset);
    const uint64_t size = b->header_offset - a->data_offset + 8;
    const size_t record = central_record(s, "a.memmap");
    set_le(s, record + 20, size, 4);
    set_le(s, record + 24, size, 4);
    set_le(s, a->data_offset - 16, size, 8);
    set_le(s, a->data_offset - 8, size, 8);
    EXPECT_THROWS_WITH(parse(s), c10::Error, "overlap");
  }
  {
    // A payload larger than the data area.
    std::string s = good;
    const size_t a = central_record(s, "a.memmap");
    set_le(s, a + 20, 1 << 20, 4);
    set_le(s, a + 24, 1 << 20, 4);
    EXPECT_ANY_THROW(parse(s));
  }
  {
    // A name that escapes.
    std::string s = good;
    const size_t a = central_record(s, "a.memmap");
    s.replace(a + 46, 8, "../a.mem");
    EXPECT_THROWS_WITH(parse(s), c10::Error, "'..' component");
    s.replace(a + 46, 8, "/a.memma");
    EXPECT_THROWS_WITH(parse(s), c10::Error, "is absolute");
    s.replace(a + 46, 8, "a\\memmap");
    EXPECT_THROWS_WITH(parse(s), c10::Error, "backslash");
    s.replace(a + 46, 8, std::string("a\0memmap", 8));
    EXPECT_THROWS_WITH(parse(s), c10::Error, "NUL");
    // Two entries of the same name, consistent in both headers.
    s.replace(a + 46, 8, "b.memmap");
    s.replace(le32(s, a + 42) + 30, 8, "b.memmap");
    EXPECT_THROWS_WITH(parse(s), c10::Error, "appears twice");
  }
  {
    // The central directory moved: it no longer ends at the end record.
    std::string s = good;
    set_le(s, end_record(s) + 16, central_offset(s) - 1, 4);
    EXPECT_THROWS_WITH(parse(s), c10::Error, "must end at offset");
  }
  {
    // More entries claimed than the directory holds.
    std::string s = good;
    set_le(s, end_record(s) + 8, 200, 2);
    set_le(s, end_record(s) + 10, 200, 2);
    EXPECT_ANY_THROW(parse(s));
  }
  {
    // A zip64 sentinel with no zip64 value in the central directory.
    std::string s = good;
    const size_t a = central_record(s, "a.memmap");
    set_le(s, a + 42, 0xffffffff, 4);
    EXPECT_THROWS_WITH(parse(s), c10::Error, "zip64");
  }
  {
    // A local zip64 size that disagrees with the central directory.
    std::string s = good;
    const auto entries = parse(s);
    const auto& entry = entries[1];
    // The zip64 block ends right before the payload: size then csize.
    set_le(s, entry.data_offset - 16, 99, 8);
    EXPECT_THROWS_WITH(parse(s), c10::Error, "in its local header, but");
  }
}

TEST(ArchiveTest, Zip64EndRecordsAreCheckedForConsistency) {
  // An archive with zip64 end records, built by the writer's own rules:
  // more than 65535 entries would be slow, so patch one in by hand.
  TempDir tmp;
  TensorDict td;
  td.set("a", torch::arange(4, torch::kInt32));
  td.save(tmp / "td.tdz");
  const std::string good = read_text(tmp / "td.tdz");
  const size_t end = end_record(good);
  const uint32_t count = static_cast<uint8_t>(good[end + 10]);
  const uint32_t cd_size = le32(good, end + 12);
  const uint32_t cd_offset = le32(good, end + 16);
  std::string zip64(56 + 20, '\0');
  set_le(zip64, 0, 0x06064b50, 4);
  set_le(zip64, 4, 44, 8);
  set_le(zip64, 12, 45, 2);
  set_le(zip64, 14, 45, 2);
  set_le(zip64, 24, count, 8);
  set_le(zip64, 32, count, 8);
  set_le(zip64, 40, cd_size, 8);
  set_le(zip64, 48, cd_offset, 8);
  set_le(zip64, 56, 0x07064b50, 4);
  set_le(zip64, 64, end, 8);
  set_le(zip64, 72, 1, 4);
  std::string s = good.substr(0, end) + zip64 + good.substr(end);
  set_le(s, s.size() - 22 + 16, 0xffffffff, 4);
  ASSERT_NO_THROW(parse(s));
  write_text(tmp / "z64.tdz", s);
  expect_td_equal(TensorDict::load_memmap(tmp / "z64.tdz"), td);
  // A zip64 count that disagrees with the 32-bit one.
  std::string lie = s;
  set_le(lie, end + 24, count + 1, 8);
  set_le(lie, end + 32, count + 1, 8);
  EXPECT_THROWS_WITH(parse(lie), c10::Error, "entry count");
  // A locator pointing elsewhere.
  lie = s;
  set_le(lie, end + 64, 3, 8);
  EXPECT_THROWS_WITH(parse(lie), c10::Error, "zip64 locator points");
}

TEST(ArchiveTest, UnpackChecksCrcs) {
  TempDir tmp;
  TensorDict td;
  td.set("a", torch::arange(16, torch::kInt32));
  td.save(tmp / "td.tdz");
  std::string s = read_text(tmp / "td.tdz");
  const auto entries = parse(s);
  for (const auto& entry : entries) {
    if (entry.name == "a.memmap") {
      s[entry.data_offset] ^= 1;
    }
  }
  write_text(tmp / "bad.tdz", s);
  EXPECT_THROWS_WITH(
      unpack_memmap(tmp / "bad.tdz", tmp / "out"),
      c10::Error,
      "'a.memmap' is corrupted: its CRC-32 is");
  // A mapped load does not read the payload, so it does not check it
  // (NOTE [Archive CRCs]); meta.json is checked.
  EXPECT_NO_THROW(TensorDict::load_memmap(tmp / "bad.tdz"));
  s = read_text(tmp / "td.tdz");
  for (const auto& entry : entries) {
    if (entry.name == "meta.json") {
      s[entry.data_offset + 1] ^= 1;
    }
  }
  write_text(tmp / "bad_meta.tdz", s);
  EXPECT_THROWS_WITH(
      TensorDict::load_memmap(tmp / "bad_meta.tdz"),
      c10::Error,
      "'meta.json' is corrupted");
}

TEST(ArchiveTest, UnpackRefusesSymlinksInTheDestination) {
  TempDir tmp;
  sample().save(tmp / "td.tdz");
  fs::create_directories(tmp / "out");
  fs::create_directories(tmp / "elsewhere");
  fs::create_directory_symlink(tmp / "elsewhere", tmp / "out/nested");
  EXPECT_THROWS_WITH(
      unpack_memmap(tmp / "td.tdz", tmp / "out"), c10::Error, "symlink");
  EXPECT_TRUE(fs::is_empty(tmp / "elsewhere"));
}

TEST(ArchiveTest, EveryFlippedByteLoadsOrThrowsNeverCrashes) {
  // Each byte of a small archive flipped in turn: the parse, the load (with
  // every leaf read, so a view past the mapping would crash) and the unpack
  // either succeed or throw c10::Error.
  TempDir tmp;
  TensorDict td;
  td.set("a", torch::arange(6, torch::kInt16));
  td.set({"n", "b"}, torch::ones({2}, torch::kFloat64));
  td.save(tmp / "td.tdz");
  const std::string good = read_text(tmp / "td.tdz");
  int refused = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0xa5);
    write_text(tmp / "bad.tdz", bad);
    try {
      const TensorDict loaded = TensorDict::load_memmap(tmp / "bad.tdz");
      for (const auto& key : loaded.keys(true, true)) {
        (void)loaded.get(key).to(torch::kDouble).sum().item<double>();
      }
      (void)unpack_memmap(tmp / "bad.tdz", tmp / "out");
    } catch (const c10::Error&) {
      ++refused;
    }
    fs::remove_all(tmp / "out");
  }
  // Payload bytes of leaves load (their CRC is not checked when mapped);
  // most header and directory bytes must be refused.
  EXPECT_GT(refused, static_cast<int>(good.size()) / 2);
}

TEST(ArchiveTest, InflateAndDeflateRoundTrip) {
  std::vector<unsigned char> data(100000);
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<unsigned char>((i * 7) % 13);
  }
  const auto packed = detail::deflate_raw(data.data(), data.size(), 6);
  EXPECT_LT(packed.size(), data.size());
  std::vector<unsigned char> out(data.size());
  detail::inflate_raw(
      packed.data(), packed.size(), out.data(), out.size(), "entry");
  EXPECT_EQ(out, data);
  // Too small an output, trailing bytes, and garbage are refused.
  std::vector<unsigned char> small(data.size() - 1);
  EXPECT_THROWS_WITH(
      detail::inflate_raw(
          packed.data(), packed.size(), small.data(), small.size(), "entry"),
      c10::Error,
      "more bytes");
  std::vector<unsigned char> trailing = packed;
  trailing.push_back(0);
  EXPECT_THROWS_WITH(
      detail::inflate_raw(
          trailing.data(), trailing.size(), out.data(), out.size(), "entry"),
      c10::Error,
      "after the end");
  std::vector<unsigned char> garbage(64, 0xff);
  EXPECT_ANY_THROW(detail::inflate_raw(
      garbage.data(), garbage.size(), out.data(), out.size(), "entry"));
  EXPECT_ANY_THROW(detail::inflate_raw(
      packed.data(), packed.size() / 2, out.data(), out.size(), "entry"));
}

// --- writing archives directly, memmap_like, refresh_archive_checksums ---

// The entry names of an archive, in order.
std::vector<std::string> entry_names(const std::string& path) {
  std::vector<std::string> names;
  for (const auto& entry : parse(read_text(path))) {
    names.push_back(entry.name);
  }
  return names;
}

// `bytes` with the DOS times and dates of every header zeroed, so that two
// archives written in different seconds compare.
std::string without_timestamps(std::string bytes) {
  for (const auto& entry : parse(bytes)) {
    set_le(bytes, entry.header_offset + 10, 0, 4);
    set_le(bytes, entry.central_offset + 12, 0, 4);
  }
  return bytes;
}

TEST(ArchiveTest, SaveStreamsLeavesWithoutStagingADirectory) {
  TempDir tmp;
  const std::string path = tmp / "sub/td.tdz";
  std::vector<std::vector<std::string>> seen;  // tmp/sub while writing
  const auto listing = [&] {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(tmp / "sub")) {
      names.push_back(
          entry.path().filename().string() + (entry.is_directory() ? "/" : ""));
    }
    return names;
  };
  int64_t last_done = 0;
  int64_t last_total = 0;
  const TensorDict td = sample();
  const TensorDict loaded =
      td.save(MemmapOptions(path).progress([&](int64_t done, int64_t total) {
        seen.push_back(listing());
        last_done = done;
        last_total = total;
      }));
  // One call per leaf file, each seeing only the temporary archive (no
  // staged directory), then the archive alone.
  ASSERT_EQ(seen.size(), 5u);
  for (const auto& names : seen) {
    ASSERT_EQ(names.size(), 1u);
    EXPECT_EQ(names[0].rfind(".td.tdz.tmp-", 0), 0u) << names[0];
  }
  EXPECT_EQ(last_done, last_total);
  EXPECT_EQ(last_total, 48 + 24 + 3 + 12 + 3);
  EXPECT_EQ(listing(), std::vector<std::string>{"td.tdz"});
  expect_td_equal(loaded, td);
  EXPECT_FALSE(loaded.saved_path().has_value());
}

TEST(ArchiveTest, SaveWritesPythonsEntryOrderAndMatchesPackedBytes) {
  TempDir tmp;
  TensorDict td({2});
  td.set("z", torch::ones({2}));
  td.set({"m", "y"}, torch::arange(2));
  td.set({"m", "b"}, torch::zeros({2, 3}));
  td.set("a", torch::full({2}, 3.0));
  td.set("empty", torch::ones({2, 0}));  // no file, so no entry
  td.set("meta", NonTensorData("x", {2}));
  const MemmapOptions spaced =
      MemmapOptions(tmp / "td.tdz").json_style(JsonStyle::kSpaced);
  (void)td.save(spaced);
  EXPECT_EQ(
      entry_names(tmp / "td.tdz"),
      (std::vector<std::string>{
          "meta.json",
          "a.memmap",
          "z.memmap",
          "m/meta.json",
          "m/b.memmap",
          "m/y.memmap",
          "meta/meta.json"}));
  // The same bytes as the directory of the same tree, packed.
  (void)td.memmap(MemmapOptions(tmp / "dir").json_style(JsonStyle::kSpaced));
  pack_memmap(tmp / "dir", tmp / "packed.tdz");
  EXPECT_EQ(
      without_timestamps(read_text(tmp / "td.tdz")),
      without_timestamps(read_text(tmp / "packed.tdz")));
  // Non-contiguous, negative-view and conjugate leaves are written as
  // their values.
  TensorDict views({2});
  views.set("t", torch::arange(6, torch::kFloat32).reshape({3, 2}).t());
  views.set("neg", torch::ones({2}, torch::kFloat32)._neg_view());
  views.set("conj", torch::complex(torch::ones({2}), torch::ones({2})).conj());
  (void)views.save(tmp / "views.tdz");
  const TensorDict back = TensorDict::load_memmap(tmp / "views.tdz");
  EXPECT_TRUE(torch::equal(back.get("t"), views.get("t").contiguous()));
  EXPECT_TRUE(torch::equal(back.get("neg"), -torch::ones({2})));
  EXPECT_TRUE(torch::equal(
      back.get("conj"), torch::complex(torch::ones({2}), -torch::ones({2}))));
}

TEST(ArchiveTest, SaveOfAMemmappedDictNeedsNoCopyExisting) {
  // Python stages an archive with memmap_like: a leaf mapped from another
  // file is streamed into the new archive.
  TempDir tmp;
  const TensorDict mapped = sample().memmap(tmp / "dir");
  const TensorDict saved = mapped.save(tmp / "td.tdz");
  expect_td_equal(saved, sample());
  expect_td_equal(TensorDict::load_memmap(tmp / "dir"), sample());
}

TEST(ArchiveTest, MemmapLikeWritesAZeroFilledWritableArchive) {
  TempDir tmp;
  const std::string path = tmp / "like.tdz";
  sample().save(path);  // replaced, never reused
  const TensorDict like = sample().memmap_like(path);
  const TensorDict want_td = sample();
  EXPECT_EQ(like.batch_size(), want_td.batch_size());
  for (const auto& key : want_td.keys(true, true)) {
    const Value& want = *want_td.find(key);
    if (!want.is_tensor()) {
      EXPECT_EQ(like.find(key)->non_tensor(), want.non_tensor());
      continue;
    }
    const at::Tensor got = like.get(key);
    EXPECT_EQ(got.sizes(), want.tensor().sizes()) << key;
    EXPECT_EQ(got.dtype(), want.tensor().dtype()) << key;
    EXPECT_TRUE(got.eq(0).all().item<bool>()) << key;
  }
  EXPECT_FALSE(like.is_locked());
  // Every entry is intact as written.
  EXPECT_TRUE(detail::archive_crc_problems(path).empty());
  // Writes reach the archive (its mapping is shared)...
  like.get("a").fill_(5);
  like.get({"nested", "b"}).copy_(torch::tensor({7, 8, 9}));
  const TensorDict reloaded = TensorDict::load_memmap(path);
  EXPECT_TRUE(reloaded.get("a").eq(5).all().item<bool>());
  EXPECT_TRUE(
      torch::equal(reloaded.get({"nested", "b"}), torch::tensor({7, 8, 9})));
  // ... and leave their CRCs stale, which unpack_memmap reports.
  EXPECT_THROWS_WITH(
      unpack_memmap(path, tmp / "out"),
      c10::Error,
      "entry 'a.memmap' is corrupted: its CRC-32 is");
  const auto problems = detail::archive_crc_problems(path);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("'a.memmap' is corrupted"), std::string::npos);
  EXPECT_NE(problems[1].find("'nested/b.memmap'"), std::string::npos);
  // refresh_archive_checksums rewrites them, in place.
  EXPECT_EQ(refresh_archive_checksums(path), path);
  EXPECT_TRUE(detail::archive_crc_problems(path).empty());
  fs::remove_all(tmp / "out");
  unpack_memmap(path, tmp / "out");
  const TensorDict unpacked = TensorDict::load_memmap(tmp / "out");
  EXPECT_TRUE(unpacked.get("a").eq(5).all().item<bool>());
  EXPECT_TRUE(
      torch::equal(unpacked.get({"nested", "b"}), torch::tensor({7, 8, 9})));
  // The mapping stays valid after the refresh: later writes still land.
  like.get("half").fill_(2);
  EXPECT_TRUE(
      TensorDict::load_memmap(path).get("half").eq(2).all().item<bool>());
}

TEST(ArchiveTest, MemmapLikeRefusesAnExistingArchiveWithoutExistsok) {
  TempDir tmp;
  const std::string path = tmp / "td.tdz";
  sample().save(path);
  const std::string old = read_text(path);
  EXPECT_THROWS_WITH(
      (void)sample().memmap_like(MemmapOptions(path).existsok(false)),
      c10::Error,
      "A file already exists at " + path +
          ", cannot save the tensordict there. Set existsok=True to "
          "overwrite.");
  EXPECT_EQ(read_text(path), old);
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.str()), {}), 1);
}

TEST(ArchiveTest, MemmapInPlaceWithATdzPrefixWritesADirectoryAsPython) {
  TempDir tmp;
  TensorDict td = sample();
  td.memmap_(tmp / "x.tdz");
  EXPECT_TRUE(fs::is_directory(tmp / "x.tdz"));
  EXPECT_TRUE(fs::exists(tmp / "x.tdz/meta.json"));
  EXPECT_TRUE(td.is_memmap());
  expect_td_equal(TensorDict::load_memmap(tmp / "x.tdz"), sample());
}

TEST(ArchiveTest, RefreshArchiveChecksumsRefusesWhatIsNotAnArchive) {
  TempDir tmp;
  EXPECT_THROWS_WITH(
      refresh_archive_checksums(tmp / "missing.tdz"),
      c10::ValueError,
      tmp / "missing.tdz" + " is not a memory-mapped tensordict archive.");
  (void)sample().memmap(tmp / "dir");
  EXPECT_THROWS_WITH(
      refresh_archive_checksums(tmp / "dir"),
      c10::ValueError,
      "is not a memory-mapped tensordict archive.");
  write_text(tmp / "junk.tdz", "not a zip at all, but long enough to parse");
  const std::string junk = read_text(tmp / "junk.tdz");
  EXPECT_ANY_THROW(refresh_archive_checksums(tmp / "junk.tdz"));
  EXPECT_EQ(read_text(tmp / "junk.tdz"), junk);
  // A zip without a top-level meta.json is left as it is.
  sample().save(tmp / "td.tdz");
  std::string bytes = read_text(tmp / "td.tdz");
  const auto entries = parse(bytes);
  // Rename meta.json to "meta.jsoN" in both headers.
  bytes[entries[0].header_offset + 30 + 8] = 'N';
  bytes[entries[0].central_offset + 46 + 8] = 'N';
  write_text(tmp / "renamed.tdz", bytes);
  EXPECT_THROWS_WITH(
      refresh_archive_checksums(tmp / "renamed.tdz"),
      c10::ValueError,
      "is not a memory-mapped tensordict archive.");
  EXPECT_EQ(read_text(tmp / "renamed.tdz"), bytes);
}

TEST(ArchiveTest, RefreshArchiveChecksumsFixesOnlyStaleCrcs) {
  TempDir tmp;
  const std::string path = tmp / "td.tdz";
  sample().save(path);
  const std::string intact = read_text(path);
  refresh_archive_checksums(path);
  EXPECT_EQ(read_text(path), intact);  // nothing was stale
  // A deflated leaf keeps its CRC; a stored one written in place gets its
  // new CRC in the local header and in the central record.
  (void)sample().memmap(tmp / "dir");
  pack_memmap(
      tmp / "dir",
      tmp / "mixed.tdz",
      PackMemmapOptions().compression("deflate"));
  const std::string mixed = read_text(tmp / "mixed.tdz");
  refresh_archive_checksums(tmp / "mixed.tdz");
  EXPECT_EQ(read_text(tmp / "mixed.tdz"), mixed);
  {
    const TensorDict shared = TensorDict::load_memmap(
        path, LoadMemmapOptions().mode(MapMode::kReadWrite));
    shared.get("bytes").fill_(9);
  }
  refresh_archive_checksums(path);
  const std::string refreshed = read_text(path);
  const auto entries = parse(refreshed);
  const auto it =
      std::find_if(entries.begin(), entries.end(), [](const auto& e) {
        return e.name == "bytes.memmap";
      });
  ASSERT_NE(it, entries.end());
  const uint32_t want = detail::crc32_update(
      0, reinterpret_cast<const unsigned char*>("\x09\x09\x09"), 3);
  EXPECT_EQ(it->crc, want);
  EXPECT_EQ(le32(refreshed, it->header_offset + 14), want);
  // Only those eight bytes changed.
  size_t changed = 0;
  for (size_t i = 0; i < intact.size(); ++i) {
    changed += intact[i] != refreshed[i] ? 1 : 0;
  }
  EXPECT_LE(changed, 3u + 8u);
}

TEST(ArchiveTest, ArchiveSaveFailingForAFileSizeLimitLeavesNothing) {
  TempDir tmp;
  TensorDict big = sample();
  big.set("big", torch::randn({3, 1 << 16}));  // 768 KiB
  constexpr rlim_t kLimit = 256 << 10;
  // A fresh save into missing directories: nothing is left, not even them.
  const std::string fresh = tmp / "new/deeper/td.tdz";
  std::string message =
      run_with_file_size_limit([&] { (void)big.save(fresh); }, kLimit);
  EXPECT_NE(message.find("could not write the archive"), std::string::npos)
      << message;
  EXPECT_NE(message.find("File too large"), std::string::npos) << message;
  EXPECT_NE(message.find("big.memmap"), std::string::npos) << message;
  EXPECT_TRUE(tree_of(tmp.str()).empty());
  // Over an existing archive: it stays as it was, and nothing is added.
  const std::string path = tmp / "td.tdz";
  sample().save(path);
  const std::string old = read_text(path);
  message = run_with_file_size_limit([&] { (void)big.save(path); }, kLimit);
  EXPECT_NE(message.find("File too large"), std::string::npos) << message;
  EXPECT_EQ(read_text(path), old);
  EXPECT_EQ(tree_of(tmp.str()), std::vector<std::string>{"td.tdz"});
  // memmap_like too.
  message =
      run_with_file_size_limit([&] { (void)big.memmap_like(path); }, kLimit);
  EXPECT_NE(message.find("File too large"), std::string::npos) << message;
  EXPECT_EQ(read_text(path), old);
  EXPECT_EQ(tree_of(tmp.str()), std::vector<std::string>{"td.tdz"});
  // Under the limit, the same save completes.
  message = run_with_file_size_limit(
      [&] { (void)sample().save(tmp / "small.tdz"); }, kLimit);
  EXPECT_EQ(message, "finished");
  expect_td_equal(TensorDict::load_memmap(tmp / "small.tdz"), sample());
}

TEST(ArchiveTest, RefusedArchiveSavesTouchNothing) {
  TempDir tmp;
  // A key refused while planning: nothing is created, not the parents.
  TensorDict bad;
  bad.set("shape", torch::ones({1}));
  EXPECT_THROWS_WITH(
      (void)bad.save(tmp / "a/b/td.tdz"), c10::Error, "would collide");
  EXPECT_TRUE(tree_of(tmp.str()).empty());
  // A file where the parent directory should be.
  write_text(tmp / "file", "x");
  EXPECT_ANY_THROW((void)sample().save(tmp / "file/td.tdz"));
  EXPECT_EQ(tree_of(tmp.str()), std::vector<std::string>{"file"});
}

TEST(ArchiveTest, ALazyStackRootIsWrittenAsAnArchive) {
  TempDir tmp;
  TensorDict first({2});
  first.set("a", torch::ones({2, 3}));
  TensorDict second({2});
  second.set("a", torch::zeros({2, 4}));
  second.set("b", torch::arange(2));
  const LazyStackedTensorDict stack = lazy_stack({first, second}, 0);
  const LazyStackedTensorDict saved = memmap(stack, tmp / "s.tdz");
  EXPECT_TRUE(fs::is_regular_file(tmp / "s.tdz"));
  EXPECT_TRUE(is_memmap_archive(tmp / "s.tdz"));
  EXPECT_EQ(
      entry_names(tmp / "s.tdz"),
      (std::vector<std::string>{
          "meta.json",
          "0/meta.json",
          "0/a.memmap",
          "1/meta.json",
          "1/a.memmap",
          "1/b.memmap"}));
  ASSERT_EQ(saved.tensordicts().size(), 2u);
  expect_td_equal(saved.tensordicts()[0], first);
  expect_td_equal(saved.tensordicts()[1], second);
  const LoadedTree loaded = load_memmap_any(tmp / "s.tdz");
  ASSERT_TRUE(std::holds_alternative<LazyStackedTensorDict>(loaded));
  expect_td_equal(
      std::get<LazyStackedTensorDict>(loaded).tensordicts()[1], second);
}

// The compression method of every entry of the archive `path`, by name.
std::vector<std::pair<std::string, uint16_t>> methods_of(
    const std::string& path) {
  std::vector<std::pair<std::string, uint16_t>> out;
  for (const auto& entry : parse(read_text(path))) {
    out.emplace_back(entry.name, entry.method);
  }
  return out;
}

TEST(ArchiveTest, SaveWithCompressionDeflatesTheLeavesAsPackMemmapDoes) {
  TempDir tmp;
  TensorDict td = sample();
  td.set("big", torch::zeros({3, 4096}));  // compresses well
  const std::string path = tmp / "c.tdz";
  const TensorDict saved = td.save(MemmapOptions(path).compression("Deflate"));
  expect_td_equal(saved, td);
  expect_td_equal(TensorDict::load_memmap(path), td);
  for (const auto& [name, method] : methods_of(path)) {
    const bool leaf =
        name.size() > 7 && name.compare(name.size() - 7, 7, ".memmap") == 0;
    EXPECT_EQ(method, leaf ? 8 : 0) << name;  // deflated, or stored
  }
  const std::string stored = tmp / "s.tdz";
  (void)td.save(stored);
  EXPECT_LT(fs::file_size(path), fs::file_size(stored) / 4);
  // The same bytes as packing the saved directory with the same method.
  (void)td.memmap(tmp / "dir");
  pack_memmap(
      tmp / "dir",
      tmp / "packed.tdz",
      PackMemmapOptions().compression("deflate"));
  EXPECT_EQ(
      without_timestamps(read_text(path)),
      without_timestamps(read_text(tmp / "packed.tdz")));
  // "stored" is the default spelled out.
  (void)td.save(MemmapOptions(tmp / "s2.tdz").compression("stored"));
  EXPECT_EQ(
      without_timestamps(read_text(tmp / "s2.tdz")),
      without_timestamps(read_text(stored)));
}

TEST(ArchiveTest, TheArchiveOptionDecidesTheLayoutAsPythons) {
  TempDir tmp;
  // archive(true) without the suffix writes a file, which loads.
  (void)sample().memmap(MemmapOptions(tmp / "plain").archive(true));
  EXPECT_TRUE(fs::is_regular_file(tmp / "plain"));
  EXPECT_TRUE(is_memmap_archive(tmp / "plain"));
  expect_td_equal(TensorDict::load_memmap(tmp / "plain"), sample());
  // archive(false) with the suffix writes a directory.
  (void)sample().memmap(MemmapOptions(tmp / "dir.tdz").archive(false));
  EXPECT_TRUE(fs::exists(tmp / "dir.tdz/meta.json"));
  expect_td_equal(TensorDict::load_memmap(tmp / "dir.tdz"), sample());
  // memmap_like too.
  const TensorDict like =
      sample().memmap_like(MemmapOptions(tmp / "like").archive(true));
  EXPECT_TRUE(is_memmap_archive(tmp / "like"));
  like.get("a").fill_(3);
  EXPECT_TRUE(
      TensorDict::load_memmap(tmp / "like").get("a").eq(3).all().item<bool>());
}

TEST(ArchiveTest, CompressionAndArchiveAreRefusedWhereTheyCannotApply) {
  TempDir tmp;
  TensorDict td = sample();
  EXPECT_THROWS_WITH(
      (void)td.memmap(MemmapOptions(tmp / "d").compression("deflate")),
      c10::ValueError,
      "compression is only supported when writing a memmap archive (pass "
      "archive(true) or use a '.tdz' prefix)");
  EXPECT_THROWS_WITH(
      (void)td.memmap_like(MemmapOptions(tmp / "l.tdz").compression("deflate")),
      c10::ValueError,
      "memmap_like writes an archive to write into, which needs stored "
      "payloads: compression 'deflate' is not supported there");
  EXPECT_THROWS_WITH(
      (void)td.save(MemmapOptions(tmp / "b.tdz").compression("bzip2")),
      c10::ValueError,
      "unknown compression 'bzip2'; expected \"stored\" or \"deflate\"");
  EXPECT_THROWS_WITH(
      (void)td.memmap(MemmapOptions().archive(true)),
      c10::ValueError,
      "A path is required to write a memmap archive.");
  EXPECT_THROWS_WITH(
      td.memmap_(MemmapOptions(tmp / "i.tdz").archive(true)),
      c10::ValueError,
      "memmap_ writes a directory, not an archive");
  EXPECT_THROWS_WITH(
      td.memmap_(MemmapOptions(tmp / "i").compression("deflate")),
      c10::ValueError,
      "compression is only supported when writing a memmap archive");
  EXPECT_FALSE(td.is_memmap());
  // Nothing was written.
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.str()), {}), 0);
}

TEST(ArchiveTest, ALazyStackMemmapLikeWritesAWritableArchive) {
  TempDir tmp;
  TensorDict first({2});
  first.set("a", torch::ones({2, 3}));
  TensorDict second({2});
  second.set("a", torch::ones({2, 4}));
  const LazyStackedTensorDict stack = lazy_stack({first, second}, 0);
  const LazyStackedTensorDict like = stack.memmap_like(tmp / "s.tdz");
  EXPECT_TRUE(is_memmap_archive(tmp / "s.tdz"));
  ASSERT_EQ(like.tensordicts().size(), 2u);
  EXPECT_TRUE(like.tensordicts()[1].get("a").eq(0).all().item<bool>());
  like.tensordicts()[1].get("a").fill_(4);
  const LoadedTree loaded = load_memmap_any(tmp / "s.tdz");
  ASSERT_TRUE(std::holds_alternative<LazyStackedTensorDict>(loaded));
  const auto& elements = std::get<LazyStackedTensorDict>(loaded).tensordicts();
  EXPECT_TRUE(elements[1].get("a").eq(4).all().item<bool>());
  EXPECT_EQ(elements[1].get("a").sizes(), (std::vector<int64_t>{2, 4}));
}

}  // namespace archive_test
}  // namespace tensordict::testing
