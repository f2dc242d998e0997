// Tests of crash safety: a save over a complete save is written beside it
// and swapped in (NOTE [Crash-safe overwrite] in src/io/staged_tree.cpp),
// consolidate(filename) renames a complete file over the old one, a save
// that fails midway removes what it wrote (NOTE [Failed saves]), and a
// process killed at random points of every writing operation (append_memmap
// too) leaves the old data or the new, never a mix.
//
// The kill test runs a few rounds per operation here; `make stress` runs it
// long (TENSORDICT_KILL_ROUNDS rounds per operation).

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace crash_safety_test {

using namespace tensordict;           // NOLINT(google-build-using-namespace)
using namespace tensordict::testing;  // NOLINT(google-build-using-namespace)
namespace fs = std::filesystem;

namespace {

constexpr int64_t kBatch = 16;

// A dict of `leaves` leaves in three nested groups plus one at the root,
// float32, int64 and float64, with values drawn from `seed`.
TensorDict make_data(int seed, int leaves, int64_t width) {
  torch::manual_seed(seed);
  TensorDict td({}, {kBatch});
  for (int i = 0; i < leaves; ++i) {
    const NestedKey key(
        {"group" + std::to_string(i % 3), "leaf" + std::to_string(i)});
    td.set(
        key,
        i % 4 == 3 ? torch::randint(0, 1 << 20, {kBatch, width}, torch::kInt64)
                   : torch::randn({kBatch, width}));
  }
  td.set("top", torch::randn({kBatch, 3}, torch::kFloat64));
  return td;
}

// True if both dicts hold the same keys (in any order: consolidate puts
// leaves first), batch sizes, dtypes, shapes and values (bit for bit).
bool same_data(const TensorDict& a, const TensorDict& b) {
  std::map<std::string, Value> va;
  std::map<std::string, Value> vb;
  for (const auto& key : a.keys(/*include_nested=*/true)) {
    va.emplace(key.to_string(), a[key]);
  }
  for (const auto& key : b.keys(/*include_nested=*/true)) {
    vb.emplace(key.to_string(), b[key]);
  }
  if (a.batch_size() != b.batch_size() || va.size() != vb.size()) {
    return false;
  }
  for (const auto& [key, value] : va) {
    const auto other = vb.find(key);
    if (other == vb.end() || value.kind() != other->second.kind()) {
      return false;
    }
    if (value.is_tensor()) {
      const at::Tensor& x = value.tensor();
      const at::Tensor& y = other->second.tensor();
      if (x.scalar_type() != y.scalar_type() || x.sizes() != y.sizes() ||
          !torch::equal(x, y)) {
        return false;
      }
    }
  }
  return true;
}

// The hidden entries (temporaries of saves) of `dir`.
std::vector<std::string> hidden_entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name[0] == '.') {
      out.push_back(name);
    }
  }
  return out;
}

// Checks that the hidden entries of `dir` are spare trees (NOTE [Spare
// trees] in src/io/staged_tree.cpp), `.<name>.tmp-<pid>-<n>`, at most one per
// name: what a successful overwrite leaves. The pid is this process's
// unless `any_process` (a child that overwrote and exited without running
// its atexit handlers leaves its spare to the next save at that prefix).
void expect_only_spares(const std::string& dir, bool any_process = false) {
  std::map<std::string, int> per_name;
  const std::string mark =
      any_process ? ".tmp-" : ".tmp-" + std::to_string(::getpid()) + "-";
  for (const auto& entry : hidden_entries(dir)) {
    const size_t at = entry.find(mark);
    ASSERT_NE(at, std::string::npos) << entry << " in " << dir;
    EXPECT_EQ(++per_name[entry.substr(0, at)], 1) << entry << " in " << dir;
  }
}

bool starts_with(const std::string& text, const std::string& start) {
  return text.compare(0, start.size(), start) == 0;
}

// Returns the pid of a process that has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

}  // namespace

// --- overwrites
// ---------------------------------------------------------------

TEST(CrashSafetyTest, AnOverwriteSwapsInTheNewTreeAndOldMappingsStayValid) {
  TempDir dir;
  const std::string prefix = dir / "td";
  const TensorDict old_data = make_data(1, 6, 8);
  const TensorDict new_data = make_data(2, 6, 8);
  TensorDict first = old_data.memmap(prefix);
  const ino_t old_dir = inode_of(prefix);
  TensorDict second = new_data.memmap(prefix);
  // A new directory took the name; the old one's files stay mapped.
  EXPECT_NE(inode_of(prefix), old_dir);
  expect_td_equal(first, old_data);
  expect_td_equal(second, new_data);
  expect_td_equal(TensorDict::load_memmap(prefix), new_data);
  expect_only_spares(dir.str());
  // The returned dict names the prefix's files, not the temporary's.
  EXPECT_EQ(second.saved_path(), prefix);
  EXPECT_EQ(second.get_tensordict("group1").saved_path(), prefix + "/group1");
  EXPECT_EQ(
      MemoryMappedTensor::filename(second.get({"group0", "leaf3"})),
      prefix + "/group0/leaf3.memmap");
  second.memmap_refresh_();
  expect_td_equal(second, new_data);
  // memmap_ again on the mapped dict: the new tree links the same files.
  const ino_t leaf = inode_of(prefix + "/group0/leaf3.memmap");
  TensorDict again = TensorDict::load_memmap(prefix);
  again.memmap_(prefix);
  EXPECT_EQ(inode_of(prefix + "/group0/leaf3.memmap"), leaf);
  EXPECT_EQ(
      MemoryMappedTensor::filename(again.get({"group0", "leaf3"})),
      prefix + "/group0/leaf3.memmap");
  expect_td_equal(TensorDict::load_memmap(prefix), new_data);
  expect_only_spares(dir.str());
}

TEST(CrashSafetyTest, AnOverwriteWritesOverTheSpareTreeUnlessItIsMapped) {
  TempDir dir;
  const std::string prefix = dir / "td";
  const std::string leaf = prefix + "/group0/leaf3.memmap";
  const TensorDict a = make_data(1, 6, 8);
  const TensorDict b = make_data(2, 6, 8);
  const TensorDict c = make_data(3, 6, 8);
  a.memmap(prefix);  // the results are dropped: nothing maps the files
  const ino_t a_leaf = inode_of(leaf);
  b.memmap(prefix);
  // a's tree is the spare, the one hidden entry.
  EXPECT_EQ(hidden_entries(dir.str()).size(), 1U);
  expect_only_spares(dir.str());
  c.memmap(prefix);
  EXPECT_EQ(inode_of(leaf), a_leaf);  // c was written over a's files
  expect_td_equal(TensorDict::load_memmap(prefix), c);
  EXPECT_EQ(hidden_entries(dir.str()).size(), 1U);
  // A file that a load still maps is replaced, not written over: `held`
  // keeps c's data when its tree is reused two saves later.
  const TensorDict held = TensorDict::load_memmap(prefix);
  a.memmap(prefix);
  b.memmap(prefix);
  expect_td_equal(held, c);
  EXPECT_NE(inode_of(leaf), a_leaf);
  expect_td_equal(TensorDict::load_memmap(prefix), b);
  expect_only_spares(dir.str());
}

TEST(CrashSafetyTest, AReusedSpareTreeHoldsWhatAFreshSaveWrites) {
  TempDir dir;
  const std::string prefix = dir / "td";
  const TensorDict big = make_data(1, 9, 8);
  big.memmap(prefix);
  big.memmap(prefix);  // big's first tree is now the spare
  // Fewer keys, a shorter leaf, a new key, an empty leaf (no file) and a
  // leaf where a directory was.
  TensorDict small({}, {kBatch});
  small.set({"group0", "leaf0"}, torch::randn({kBatch, 2}));
  small.set("group1", torch::arange(kBatch));
  small.set({"new", "x"}, torch::ones({kBatch, 3}, torch::kInt32));
  small.set("empty", torch::zeros({kBatch, 0}));
  small.memmap(prefix);
  expect_td_equal(TensorDict::load_memmap(prefix), small);
  EXPECT_EQ(
      fs::file_size(prefix + "/group0/leaf0.memmap"),
      static_cast<uintmax_t>(kBatch * 2 * 4));
  const std::string fresh = dir / "fresh";
  small.memmap(fresh);
  auto listing = [](const std::string& root) {
    std::vector<std::pair<std::string, uintmax_t>> out;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      out.emplace_back(
          fs::relative(entry.path(), root).string(),
          entry.is_regular_file() ? entry.file_size() : 0);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(listing(prefix), listing(fresh));
  // memmap_ of a loaded dict links its files into the spare tree.
  TensorDict loaded = TensorDict::load_memmap(prefix);
  loaded.memmap_(prefix);
  expect_td_equal(TensorDict::load_memmap(prefix), small);
  EXPECT_EQ(listing(prefix), listing(fresh));
  loaded = TensorDict();
  // The spare now shares its files with the save (hard links): the next
  // overwrite replaces them, so the save (now the spare) keeps its data.
  big.memmap(prefix);
  expect_td_equal(TensorDict::load_memmap(prefix), big);
  const auto hidden = hidden_entries(dir.str());
  ASSERT_EQ(hidden.size(), 1U);
  expect_td_equal(TensorDict::load_memmap(dir.str() + "/" + hidden[0]), small);
  expect_only_spares(dir.str());
}

TEST(CrashSafetyTest, KeepSpareFalseRemovesTheOldTreeAtOnce) {
  TempDir dir;
  const std::string prefix = dir / "td";
  const TensorDict a = make_data(1, 6, 8);
  const TensorDict b = make_data(2, 6, 8);
  a.memmap(prefix);
  b.memmap(MemmapOptions(prefix).keep_spare(false));
  EXPECT_TRUE(hidden_entries(dir.str()).empty());
  expect_td_equal(TensorDict::load_memmap(prefix), b);
  a.memmap(prefix);  // keeps b's tree as the spare
  ASSERT_EQ(hidden_entries(dir.str()).size(), 1U);
  // The spare is not written over: it goes, and so does the tree swapped
  // out.
  const ino_t a_leaf = inode_of(prefix + "/group0/leaf3.memmap");
  b.memmap(MemmapOptions(prefix).keep_spare(false));
  EXPECT_TRUE(hidden_entries(dir.str()).empty());
  EXPECT_NE(inode_of(prefix + "/group0/leaf3.memmap"), a_leaf);
  expect_td_equal(TensorDict::load_memmap(prefix), b);
}

TEST(CrashSafetyTest, AFreshSaveWithExistsokFalseWritesOverItsOwnSpare) {
  TempDir dir;
  const std::string prefix = dir / "td";
  const TensorDict a = make_data(1, 6, 8);
  a.memmap(prefix);
  a.memmap(prefix);  // a spare of `prefix` now exists
  fs::remove_all(prefix);
  // The prefix is missing, so this is a fresh save: the spare's files are
  // this process's own, not "existing files" to refuse.
  const TensorDict b = make_data(2, 6, 8);
  b.memmap(MemmapOptions(prefix).existsok(false));
  expect_td_equal(TensorDict::load_memmap(prefix), b);
  EXPECT_TRUE(hidden_entries(dir.str()).empty());
  // Over a save, existsok(false) still refuses, touching nothing.
  EXPECT_THROWS_WITH(
      a.memmap(MemmapOptions(prefix).existsok(false)),
      c10::Error,
      "already exists");
  expect_td_equal(TensorDict::load_memmap(prefix), b);
}

namespace {

// True if a write lease on a file is refused while another descriptor has
// it open read-only: then the writer sees read-only mappings of a spare
// (NOTE [Spare trees] in src/io/staged_tree.cpp).
bool kernel_counts_read_opens(const std::string& dir) {
  const std::string path = dir + "/probe";
  write_text(path, "x");
  const int reader = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const int writer = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  const bool refused = ::fcntl(writer, F_SETLEASE, F_WRLCK) != 0;
  if (!refused) {
    ::fcntl(writer, F_SETLEASE, F_UNLCK);
  }
  ::close(writer);
  ::close(reader);
  fs::remove(path);
  return refused;
}

}  // namespace

TEST(CrashSafetyTest, AReadOnlyLoadKeepsItsDataWhenItsTreeIsReused) {
  TempDir dir;
  if (!kernel_counts_read_opens(dir.str())) {
    GTEST_SKIP() << "this kernel does not count read-only opens";
  }
  const std::string prefix = dir / "td";
  const TensorDict a = make_data(1, 6, 8);
  const TensorDict b = make_data(2, 6, 8);
  const TensorDict c = make_data(3, 6, 8);
  a.memmap(prefix);
  const TensorDict held = TensorDict::load_memmap(
      prefix, LoadMemmapOptions().mode(MapMode::kReadOnly));
  b.memmap(prefix);  // a's tree is the spare
  c.memmap(prefix);  // c goes into a's tree, except the files `held` maps
  expect_td_equal(held, a);
  expect_td_equal(TensorDict::load_memmap(prefix), c);
}

TEST(CrashSafetyTest, AProcessThatExitsRemovesItsSpares) {
  TempDir dir;
  const std::string prefix = dir / "td";
  const TensorDict a = make_data(1, 6, 8);
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      a.memmap(prefix);
      a.memmap(prefix);
      std::exit(hidden_entries(dir.str()).size() == 1 ? 0 : 2);
    } catch (...) {
      std::exit(3);
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);  // the child had its spare
  EXPECT_TRUE(hidden_entries(dir.str()).empty());
  expect_td_equal(TensorDict::load_memmap(prefix), a);
}

TEST(CrashSafetyTest, ThreadedDurableAndLikeOverwritesSwapToo) {
  TempDir dir;
  const std::string prefix = dir / "td";
  const TensorDict old_data = make_data(1, 9, 8);
  const TensorDict new_data = make_data(2, 9, 8);
  old_data.memmap(prefix);
  ino_t before = inode_of(prefix);
  TensorDict saved =
      new_data.memmap(MemmapOptions(prefix).num_threads(3).durable(true));
  EXPECT_NE(inode_of(prefix), before);
  expect_td_equal(TensorDict::load_memmap(prefix), new_data);
  EXPECT_TRUE(starts_with(
      *MemoryMappedTensor::filename(saved.get("top")), prefix + "/"));
  before = inode_of(prefix);
  TensorDict like = new_data.memmap_like(prefix);
  EXPECT_NE(inode_of(prefix), before);
  // The swapped-in tree keeps the bytes of the one it replaces, as Python's
  // memmap_like keeps existing files.
  EXPECT_TRUE(torch::equal(like.get("top"), new_data.get("top")));
  EXPECT_TRUE(torch::equal(
      TensorDict::load_memmap(prefix).get("top"), new_data.get("top")));
  expect_only_spares(dir.str());
}

TEST(CrashSafetyTest, ADirectoryWithOtherFilesIsWrittenInPlaceKeepingThem) {
  TempDir dir;
  const std::string prefix = dir / "td";
  (void)make_data(1, 3, 4).memmap(prefix);
  write_text(prefix + "/notes.txt", "mine");
  const ino_t before = inode_of(prefix);
  const TensorDict new_data = make_data(2, 3, 4);
  new_data.memmap(prefix);
  EXPECT_EQ(inode_of(prefix), before);
  EXPECT_EQ(tensordict::testing::read_text(prefix + "/notes.txt"), "mine");
  expect_td_equal(TensorDict::load_memmap(prefix), new_data);
}

TEST(
    CrashSafetyTest, StaleTemporariesAreIgnoredAndRemovedOnceTheirOwnerIsGone) {
  TempDir dir;
  const std::string prefix = dir / "td";
  const TensorDict old_data = make_data(1, 3, 4);
  old_data.memmap(prefix);
  const std::string dead =
      dir / (".td.tmp-" + std::to_string(dead_pid()) + "-0");
  const std::string dead_aside =
      dir / (".td.old-" + std::to_string(dead_pid()) + "-3");
  const std::string alive =
      dir / (".td.tmp-" + std::to_string(::getpid()) + "-999");
  const std::string foreign = dir / ".td.tmp-notours";
  for (const auto& stale : {dead, dead_aside, alive, foreign}) {
    fs::create_directories(stale + "/group0");
    write_text(stale + "/meta.json", "{broken");
  }
  // Loading never looks at the siblings.
  expect_td_equal(TensorDict::load_memmap(prefix), old_data);
  (void)make_data(2, 3, 4).memmap(prefix);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(dead_aside));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_TRUE(fs::exists(foreign));
  expect_td_equal(TensorDict::load_memmap(prefix), make_data(2, 3, 4));
}

TEST(CrashSafetyTest, ASymlinkedPrefixAndExistsokFalseAreWrittenInPlace) {
  TempDir dir;
  (void)make_data(1, 3, 4).memmap(dir / "real");
  fs::create_directory_symlink(dir / "real", dir / "link");
  const TensorDict new_data = make_data(2, 3, 4);
  new_data.memmap(dir / "link");
  EXPECT_TRUE(fs::is_symlink(dir / "link"));
  expect_td_equal(TensorDict::load_memmap(dir / "real"), new_data);
  EXPECT_THROWS_WITH(
      new_data.memmap(MemmapOptions(dir / "real").existsok(false)),
      c10::Error,
      "already exists");
}

TEST(CrashSafetyTest, ALazyStackOverwriteSwapsToo) {
  TempDir dir;
  const std::string prefix = dir / "stack";
  const TensorDict a = make_data(1, 3, 4);
  const TensorDict b = make_data(2, 3, 4);
  (void)memmap(lazy_stack({a, b}, 0), prefix);
  const ino_t before = inode_of(prefix);
  LazyStackedTensorDict saved = memmap(lazy_stack({b, a}, 0), prefix);
  EXPECT_NE(inode_of(prefix), before);
  EXPECT_EQ(saved.tensordicts()[1].saved_path(), prefix + "/1");
  auto loaded = load_memmap_any(prefix);
  ASSERT_TRUE(std::holds_alternative<LazyStackedTensorDict>(loaded));
  expect_td_equal(std::get<LazyStackedTensorDict>(loaded).tensordicts()[0], b);
  expect_only_spares(dir.str());
}

TEST(CrashSafetyTest, MakeMemmapAddsALevelWithOneMetaJsonRewrite) {
  TempDir dir;
  const std::string prefix = dir / "td";
  const TensorDict old_data = make_data(1, 3, 4);
  TensorDict saved = old_data.memmap(prefix);
  at::Tensor made =
      saved.make_memmap({"group1", "new", "deep", "x"}, {kBatch, 2}, at::kInt);
  made.fill_(7);
  TensorDict expected = old_data.clone();
  expected.set(
      {"group1", "new", "deep", "x"}, torch::full({kBatch, 2}, 7, at::kInt));
  expect_td_equal(TensorDict::load_memmap(prefix), expected);
  expect_td_equal(saved, expected);
  EXPECT_EQ(
      saved.get_tensordict({"group1", "new"}).saved_path(),
      prefix + "/group1/new");
}

TEST(CrashSafetyTest, ConsolidateRenamesACompleteFileOverTheOldOne) {
  TempDir dir;
  const std::string file = dir / "td.bin";
  const TensorDict old_data = make_data(1, 3, 4);
  const TensorDict new_data = make_data(2, 3, 4);
  TensorDict first = old_data.consolidate(ConsolidateOptions().filename(file));
  const ino_t before = inode_of(file);
  TensorDict second =
      new_data.consolidate(ConsolidateOptions().filename(file).durable(true));
  EXPECT_NE(inode_of(file), before);
  EXPECT_TRUE(same_data(first, old_data));  // the old file stays mapped
  EXPECT_TRUE(same_data(second, new_data));
  EXPECT_TRUE(same_data(TensorDict::from_consolidated(file), new_data));
  EXPECT_TRUE(hidden_entries(dir.str()).empty());
}

// --- failed saves
// -------------------------------------------------------------

namespace {

// make_data with one leaf of 4 MiB.
TensorDict big_data(int seed) {
  TensorDict td = make_data(seed, 6, 64);
  td.set({"group1", "big"}, torch::randn({kBatch, 1 << 16}));
  return td;
}

constexpr rlim_t kFileLimit = rlim_t{1} << 20;

}  // namespace

TEST(CrashSafetyTest, AFreshSaveThatFailsMidwayRemovesEverythingItWrote) {
  TempDir dir;
  const TensorDict data = big_data(1);
  using Write = std::function<void(const std::string&)>;
  const std::vector<std::pair<std::string, Write>> writes = {
      {"memmap", [&](const std::string& p) { data.memmap(p); }},
      {"threaded memmap",
       [&](const std::string& p) {
         data.memmap(MemmapOptions(p).num_threads(3));
       }},
      {"durable memmap",
       [&](const std::string& p) {
         data.memmap(MemmapOptions(p).durable(true));
       }},
      {"atomic memmap",
       [&](const std::string& p) {
         data.memmap(MemmapOptions(p).atomic(true));
       }},
      {"memmap_",
       [&](const std::string& p) {
         TensorDict copy = data.clone();
         copy.memmap_(p);
       }},
      {"memmap_like", [&](const std::string& p) { (void)data.memmap_like(p); }},
      {"lazy stack memmap",
       [&](const std::string& p) {
         (void)memmap(lazy_stack({data, data}, 0), MemmapOptions(p));
       }},
  };
  for (const auto& entry : writes) {
    // Not a structured binding: C++17 lambdas cannot capture one (clang
    // says so).
    const auto& write = entry.second;
    SCOPED_TRACE(entry.first);
    const std::string message = run_with_file_size_limit(
        [&] { write(dir / "missing/parents/td"); }, kFileLimit);
    EXPECT_NE(message.find("File too large"), std::string::npos) << message;
    EXPECT_NE(message.find("big"), std::string::npos) << message;
    // Nothing is left: not the prefix, not its parents, no hidden sibling.
    EXPECT_EQ(tree_of(dir.str()), std::vector<std::string>{});
  }
  // The data is fine without the limit.
  expect_td_equal(
      TensorDict::load_memmap(data.memmap(dir / "td").saved_path().value()),
      data);
}

TEST(CrashSafetyTest, AFailedSaveInPlaceRemovesWhatItCreatedAndKeepsTheRest) {
  TempDir dir;
  const std::string prefix = dir / "td";
  fs::create_directories(prefix + "/group1");
  write_text(prefix + "/notes.txt", "mine");
  write_text(prefix + "/group1/notes.txt", "mine too");
  const std::vector<std::string> before = tree_of(prefix);
  const TensorDict data = big_data(1);
  for (const int threads : {0, 3}) {
    SCOPED_TRACE(threads);
    const std::string message = run_with_file_size_limit(
        [&] { data.memmap(MemmapOptions(prefix).num_threads(threads)); },
        kFileLimit);
    EXPECT_NE(message.find("File too large"), std::string::npos) << message;
    EXPECT_EQ(tree_of(prefix), before);
  }
}

TEST(CrashSafetyTest, AFailedOverwriteKeepsTheOldSave) {
  TempDir dir;
  const std::string prefix = dir / "td";
  const TensorDict old_data = make_data(1, 6, 64);
  old_data.memmap(prefix);
  const std::vector<std::string> before = tree_of(dir.str());
  for (const bool atomic : {false, true}) {
    const std::string message = run_with_file_size_limit(
        [&] { (void)big_data(2).memmap(MemmapOptions(prefix).atomic(atomic)); },
        kFileLimit);
    EXPECT_NE(message.find("File too large"), std::string::npos) << message;
    EXPECT_EQ(tree_of(dir.str()), before);
    expect_td_equal(TensorDict::load_memmap(prefix), old_data);
  }
}

TEST(CrashSafetyTest, AFailedMakeMemmapOrConsolidateLeavesNoFile) {
  TempDir dir;
  const std::string prefix = dir / "td";
  const TensorDict old_data = make_data(1, 6, 64);
  TensorDict saved = old_data.memmap(prefix);
  const std::vector<std::string> before = tree_of(dir.str());
  for (const NestedKey& key :
       {NestedKey("x"),
        NestedKey({"group1", "x"}),
        NestedKey({"n", "m", "x"})}) {
    SCOPED_TRACE(key.to_string());
    const std::string message = run_with_file_size_limit(
        [&] {
          (void)saved.make_memmap(key, {kBatch, 1 << 16});
        },
        kFileLimit);
    EXPECT_NE(message.find("File too large"), std::string::npos) << message;
    EXPECT_EQ(tree_of(dir.str()), before);
    expect_td_equal(TensorDict::load_memmap(prefix), old_data);
  }
  const std::string message = run_with_file_size_limit(
      [&] {
        (void)big_data(2).consolidate(
            ConsolidateOptions().filename(dir / "td.bin"));
      },
      kFileLimit);
  EXPECT_NE(message.find("File too large"), std::string::npos) << message;
  EXPECT_EQ(tree_of(dir.str()), before);
}

// A real full file system: a 4 MiB tmpfs, where the machine lets us mount
// one (root, outside a locked-down container).
TEST(CrashSafetyTest, ASaveOntoAFullFileSystemLeavesNothingOrTheOldSave) {
  TempDir dir;
  const std::string mnt = dir / "mnt";
  fs::create_directories(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=4m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root): "
                 << std::strerror(errno);
  }
  struct Unmount {
    std::string path;
    ~Unmount() {
      ::umount2(path.c_str(), MNT_DETACH);
    }
  } unmount{mnt};
  TensorDict data = make_data(1, 6, 64);
  data.set("big", torch::randn({kBatch, 5 << 14}));  // 5 MiB
  for (const int threads : {0, 3}) {
    EXPECT_THROWS_WITH(
        data.memmap(MemmapOptions(mnt + "/a/td").num_threads(threads)),
        c10::Error,
        "No space left on device");
    EXPECT_EQ(tree_of(mnt), std::vector<std::string>{});
  }
  const TensorDict small = make_data(2, 6, 64);
  small.memmap(mnt + "/td");
  const std::vector<std::string> before = tree_of(mnt);
  EXPECT_THROWS_WITH(
      data.memmap(mnt + "/td"), c10::Error, "No space left on device");
  EXPECT_EQ(tree_of(mnt), before);
  expect_td_equal(TensorDict::load_memmap(mnt + "/td"), small);
  // In the mount point itself (it cannot be renamed): in place, cleaned up.
  EXPECT_THROWS_WITH(
      data.memmap(MemmapOptions(mnt).num_threads(2)),
      c10::Error,
      "No space left on device");
  EXPECT_EQ(tree_of(mnt), before);
}

// --- atomic (Python's atomic=True)
// ---------------------------------------------

TEST(
    CrashSafetyTest, AtomicReplacesWhatThePrefixHoldsOrRefusesTouchingNothing) {
  TempDir dir;
  const std::string prefix = dir / "td";
  const TensorDict old_data = make_data(1, 3, 4);
  const TensorDict new_data = make_data(2, 3, 4);
  old_data.memmap(prefix);
  write_text(prefix + "/notes.txt", "mine");
  // Without atomic, other files keep the save in place; with it, the whole
  // directory is replaced, as in Python.
  const ino_t before = inode_of(prefix);
  TensorDict saved = new_data.memmap(MemmapOptions(prefix).atomic(true));
  EXPECT_NE(inode_of(prefix), before);
  EXPECT_FALSE(fs::exists(prefix + "/notes.txt"));
  EXPECT_EQ(saved.saved_path(), prefix);
  expect_td_equal(TensorDict::load_memmap(prefix), new_data);
  expect_only_spares(dir.str());

  // Refusals touch nothing.
  const std::string other = dir / "other";
  fs::create_directories(other);
  write_text(other + "/notes.txt", "mine");
  EXPECT_THROWS_WITH(
      new_data.memmap(MemmapOptions(other).atomic(true)),
      c10::Error,
      "Refusing to replace " + other +
          " with atomic(true): it is not empty and holds no saved tensordict "
          "(no meta.json).");
  EXPECT_THROWS_WITH(
      new_data.memmap(MemmapOptions(prefix).atomic(true).existsok(false)),
      c10::Error,
      prefix + " is not empty and existsok is false");
  write_text(dir / "file", "x");
  EXPECT_THROWS_WITH(
      new_data.memmap(MemmapOptions(dir / "file").atomic(true)),
      c10::Error,
      "exists and is not a directory");
  EXPECT_THROWS_WITH(
      new_data.memmap(MemmapOptions().atomic(true)),
      c10::ValueError,
      "atomic(true) needs a prefix to write the directory to");
  EXPECT_EQ(tensordict::testing::read_text(other + "/notes.txt"), "mine");
  expect_td_equal(TensorDict::load_memmap(prefix), new_data);

  // An empty directory, a fresh prefix and a symlink's target.
  const std::string empty = dir / "empty";
  fs::create_directories(empty);
  expect_td_equal(
      new_data.memmap(MemmapOptions(empty).atomic(true).existsok(false)),
      new_data);
  expect_td_equal(
      new_data.memmap(MemmapOptions(dir / "fresh/td").atomic(true)), new_data);
  fs::create_directory_symlink(prefix, dir / "link");
  old_data.memmap(MemmapOptions(dir / "link").atomic(true));
  EXPECT_TRUE(fs::is_symlink(dir / "link"));
  expect_td_equal(TensorDict::load_memmap(prefix), old_data);
  expect_only_spares(dir.str());
  // load_memmap takes Python's num_threads.
  expect_td_equal(
      TensorDict::load_memmap(prefix, LoadMemmapOptions().num_threads(4)),
      old_data);
}

// --- the kill test
// ------------------------------------------------------------

namespace {

// The writing operations the kill test interrupts.
enum class Op {
  kFreshSave,
  kOverwrite,
  kThreadedOverwrite,
  kSpareOverwrite,  // two overwrites: the second writes over the spare tree
  kMemmapInPlace,
  kMakeMemmap,
  kConsolidate,
  kAppend,
};
constexpr Op kOps[] = {
    Op::kFreshSave,
    Op::kOverwrite,
    Op::kThreadedOverwrite,
    Op::kSpareOverwrite,
    Op::kMemmapInPlace,
    Op::kMakeMemmap,
    Op::kConsolidate,
    Op::kAppend};

const char* op_name(Op op) {
  switch (op) {
    case Op::kFreshSave:
      return "fresh_save";
    case Op::kOverwrite:
      return "overwrite";
    case Op::kThreadedOverwrite:
      return "threaded_overwrite";
    case Op::kSpareOverwrite:
      return "spare_overwrite";
    case Op::kMemmapInPlace:
      return "memmap_";
    case Op::kMakeMemmap:
      return "make_memmap";
    case Op::kConsolidate:
      return "consolidate_file";
    case Op::kAppend:
      return "append_memmap";
  }
  return "?";
}

// What the kill test saw for one operation.
struct Outcomes {
  int rounds = 0;
  int old_data = 0;
  int new_data = 0;
  int refused = 0;   // a fresh save that does not load: "no meta.json"
  int finished = 0;  // the child was done before the kill
  std::vector<std::string> failures;
};

// Sets up the state before an operation, runs it (in a child), and loads
// and classifies what is left.
class KillRig {
 public:
  explicit KillRig(std::string dir)
      : dir_(std::move(dir)),
        old_(make_data(1, 24, 1024)),
        new_(make_data(2, 24, 1024)),
        rows_(cat(std::vector<TensorDict>(8, make_data(3, 24, 1024)))),
        extra_(torch::randn({kBatch, 64})) {}

  // Puts the state before round `round` of `op` on disk, and computes the
  // data the operation writes.
  void prepare(Op op, int round) {
    const std::string target = path(op);
    fs::remove_all(target);
    expected_ = new_;
    if (op == Op::kFreshSave) {
      return;
    }
    if (op == Op::kConsolidate) {
      (void)old_.consolidate(ConsolidateOptions().filename(target));
      return;
    }
    TensorDict saved = old_.memmap(target);
    if (op == Op::kMemmapInPlace) {
      mapped_ = TensorDict::load_memmap(target);
      mapped_.unlock_();
      if (round % 2 == 0) {  // the dict mapped at the prefix, grown
        expected_ = old_.clone();
        expected_.set("extra", extra_);
      }
    } else if (op == Op::kMakeMemmap) {
      mapped_ = saved;
      expected_ = old_.clone();
      expected_.set(made_key(round), torch::zeros({kBatch, 5}, at::kFloat));
    } else if (op == Op::kAppend) {
      expected_ = cat({old_, rows_});
    }
  }

  // The operation itself (runs in the child).
  void run(Op op, int round) {
    const std::string target = path(op);
    switch (op) {
      case Op::kFreshSave:
      case Op::kOverwrite:
        new_.memmap(target);
        return;
      case Op::kThreadedOverwrite:
        new_.memmap(MemmapOptions(target).num_threads(3));
        return;
      case Op::kSpareOverwrite:
        // The child's first overwrite leaves it a spare tree (the parent's
        // are not the child's), which the second writes over.
        old_.memmap(target);
        new_.memmap(target);
        return;
      case Op::kMemmapInPlace:
        if (round % 2 == 0) {
          mapped_.set("extra", extra_);
          mapped_.memmap_(target);
        } else {
          TensorDict copy = new_.clone();
          copy.memmap_(target);
        }
        return;
      case Op::kMakeMemmap:
        (void)mapped_.make_memmap(made_key(round), {kBatch, 5}, at::kFloat);
        return;
      case Op::kConsolidate:
        (void)new_.consolidate(ConsolidateOptions().filename(target));
        return;
      case Op::kAppend:
        append_memmap(target, rows_);
        return;
    }
  }

  // Loads what `op` left and counts it; `finished`: the child completed.
  void check(Op op, bool finished, Outcomes& out) {
    ++out.rounds;
    out.finished += finished ? 1 : 0;
    const std::string target = path(op);
    try {
      const TensorDict loaded = op == Op::kConsolidate
                                    ? TensorDict::from_consolidated(target)
                                    : TensorDict::load_memmap(target);
      if (same_data(loaded, expected_)) {
        ++out.new_data;
        return;
      }
      if (op != Op::kFreshSave && !finished && same_data(loaded, old_)) {
        ++out.old_data;
        return;
      }
      out.failures.push_back(
          std::string(op_name(op)) +
          (finished ? ": finished, but the new data does not load"
                    : ": loads neither the old data nor the new"));
    } catch (const c10::Error& e) {
      const std::string msg = e.msg();
      if (op == Op::kFreshSave && !finished &&
          msg.find("no meta.json") != std::string::npos) {
        ++out.refused;
        return;
      }
      out.failures.push_back(std::string(op_name(op)) + ": " + msg);
    }
  }

  std::string path(Op op) const {
    return dir_ + "/" + op_name(op) + (op == Op::kConsolidate ? ".bin" : "");
  }

 private:
  static NestedKey made_key(int round) {
    return round % 2 == 0 ? NestedKey({"group1", "fresh", "x"})
                          : NestedKey("added");
  }

  std::string dir_;
  TensorDict old_;
  TensorDict new_;
  // Appended by append_memmap: 8x the saved rows, so that most of the
  // operation's time is the append itself, not the child's start and exit.
  TensorDict rows_;
  at::Tensor extra_;
  TensorDict expected_;
  TensorDict mapped_;
};

// Runs `op` in a child and kills it after `delay_us` (never, if negative);
// returns true if the child completed the operation first. A child that
// throws exits with 3, which fails the round.
bool run_and_kill(KillRig& rig, Op op, int round, int64_t delay_us) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork failed";
    return false;
  }
  if (pid == 0) {
    try {
      rig.run(op, round);
    } catch (const c10::Error& e) {
      std::fprintf(stderr, "%s: %s\n", op_name(op), e.msg().c_str());
      ::_exit(3);
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  if (delay_us >= 0) {
    ::usleep(static_cast<useconds_t>(delay_us));
    ::kill(pid, SIGKILL);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 3)
      << op_name(op) << " threw in the child";
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Kills `rounds` runs of each operation at random points spread over its
// duration (measured first, fork included) and checks what loads; prints a
// summary and returns the outcomes, in kOps order.
std::vector<Outcomes> kill_test(const std::string& dir, int rounds) {
  KillRig rig(dir);
  std::mt19937_64 rng(42);
  std::vector<Outcomes> all;
  for (Op op : kOps) {
    // The median of five complete runs: the machine may be busy.
    std::vector<int64_t> durations;
    for (int i = 0; i < 5; ++i) {
      rig.prepare(op, i);
      const auto start = std::chrono::steady_clock::now();
      EXPECT_TRUE(run_and_kill(rig, op, i, /*delay_us=*/-1)) << op_name(op);
      durations.push_back(std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::steady_clock::now() - start)
                              .count());
    }
    std::sort(durations.begin(), durations.end());
    const int64_t duration_us = durations[2];
    Outcomes out;
    for (int round = 0; round < rounds; ++round) {
      rig.prepare(op, round);
      // Kills that come after the end check that the op is complete.
      const auto delay =
          static_cast<int64_t>(rng() % static_cast<uint64_t>(duration_us + 1));
      const bool finished = run_and_kill(rig, op, round, delay);
      rig.check(op, finished, out);
    }
    // One more complete run cleans up what the killed ones left.
    rig.prepare(op, 0);
    EXPECT_TRUE(run_and_kill(rig, op, 0, /*delay_us=*/-1));
    Outcomes last;
    rig.check(op, /*finished=*/true, last);
    EXPECT_TRUE(last.failures.empty()) << last.failures[0];
    std::printf(
        "[ kill ] %-18s %4d rounds over %6lld us: %4d old, %4d new, "
        "%4d refused (%d finished first), %zu failures\n",
        op_name(op),
        out.rounds,
        static_cast<long long>(duration_us),
        out.old_data,
        out.new_data,
        out.refused,
        out.finished,
        out.failures.size());
    all.push_back(std::move(out));
  }
  expect_only_spares(dir, /*any_process=*/true);
  return all;
}

void expect_no_failures(const std::vector<Outcomes>& all, int rounds) {
  for (const auto& out : all) {
    EXPECT_EQ(out.rounds, rounds);
    EXPECT_EQ(out.old_data + out.new_data + out.refused, rounds);
    for (const auto& failure : out.failures) {
      ADD_FAILURE() << failure;
    }
  }
}

}  // namespace

TEST(CrashSafetyTest, AKilledWriteLeavesTheOldDataOrTheNew) {
  TempDir dir;
  constexpr int kRounds = 8;
  expect_no_failures(kill_test(dir.str(), kRounds), kRounds);
}

// `make stress`: TENSORDICT_KILL_ROUNDS rounds per operation; skipped
// without it.
TEST(CrashSafetyStressTest, ManyKilledWritesLeaveTheOldDataOrTheNew) {
  const char* rounds_text = std::getenv("TENSORDICT_KILL_ROUNDS");
  if (rounds_text == nullptr) {
    GTEST_SKIP() << "set TENSORDICT_KILL_ROUNDS (make stress)";
  }
  const int rounds = std::max(1, std::atoi(rounds_text));
  TempDir dir;
  expect_no_failures(kill_test(dir.str(), rounds), rounds);
}

}  // namespace crash_safety_test
