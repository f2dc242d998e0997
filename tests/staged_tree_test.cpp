// Tests of src/io/atomic_file.h and src/io/staged_tree.h: replacing a file
// or a directory whole, on a real file system; and of the write loop of
// src/io/file_io.h that every writer of io/ goes through. Compiled on its own
// (not in a unity batch) and without <torch/torch.h>: it needs neither.

#include "io/staged_tree.h"

#include <c10/util/Exception.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "io/atomic_file.h"
#include "io/file_io.h"

namespace tensordict::testing {
namespace staged_tree_test {

using detail::AtomicFile;
using detail::PathKind;
using detail::StagedTree;
using detail::StagingOptions;

// A fresh directory per test, removed afterwards.
class Scratch {
 public:
  Scratch() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("tensordict_staged_tree_test_" + std::to_string(::getpid()) + "_" +
             info->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string operator/(const std::string& name) const {
    return (path_ / name).string();
  }

 private:
  std::filesystem::path path_;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The names in `dir`, sorted.
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string error_of(const std::function<void()>& statement) {
  try {
    statement();
  } catch (const c10::Error& e) {
    return e.msg();
  }
  return "(no error)";
}

TEST(AtomicFileTest, CommitReplacesTheFileAndLeavesNoTemporary) {
  Scratch dir;
  const std::string path = dir / "data.bin";
  write_text(path, "old");
  AtomicFile file = AtomicFile::beside(path, 0644, "the data");
  file.write("new bytes", 9);
  // Until the commit, readers see the old file, beside a hidden temporary.
  EXPECT_EQ(read_text(path), "old");
  EXPECT_EQ(names_in(dir / "").size(), 2U);
  EXPECT_EQ(read_text(file.temp_path()), "new bytes");
  file.commit(/*durable=*/true);
  EXPECT_EQ(read_text(path), "new bytes");
  EXPECT_EQ(names_in(dir / ""), std::vector<std::string>{"data.bin"});
  EXPECT_EQ(file.fd(), -1);
}

TEST(AtomicFileTest, DestroyedWithoutCommitKeepsTheOldFile) {
  Scratch dir;
  const std::string path = dir / "data.bin";
  write_text(path, "old");
  {
    AtomicFile file = AtomicFile::suffixed(path, 0644, "the data");
    file.write("half", 4);
    EXPECT_EQ(file.temp_path().rfind(path + ".tmp-", 0), 0U);
  }
  EXPECT_EQ(read_text(path), "old");
  EXPECT_EQ(names_in(dir / ""), std::vector<std::string>{"data.bin"});
}

TEST(AtomicFileTest, CreatesAMissingDestination) {
  Scratch dir;
  detail::write_file_atomically(dir / "meta.json", "{}", /*durable=*/false);
  EXPECT_EQ(read_text(dir / "meta.json"), "{}");
  EXPECT_EQ(names_in(dir / ""), std::vector<std::string>{"meta.json"});
}

TEST(AtomicFileTest, ThrowsNamingTheFileWhenTheDirectoryIsMissing) {
  Scratch dir;
  const std::string path = dir / "missing/data.bin";
  const std::string message =
      error_of([&] { (void)AtomicFile::beside(path, 0644, "the data"); });
  EXPECT_NE(message.find("could not create"), std::string::npos) << message;
  EXPECT_NE(message.find("to write the data"), std::string::npos) << message;
}

TEST(AtomicFileTest, RefusesATemporaryThatExistsAndLeavesIt) {
  Scratch dir;
  const std::string temp = dir / "taken";
  write_text(temp, "someone else's");
  const std::string message = error_of(
      [&] { AtomicFile file(dir / "data.bin", temp, 0644, "the data"); });
  EXPECT_NE(message.find("could not create " + temp), std::string::npos)
      << message;
  EXPECT_EQ(read_text(temp), "someone else's");
}

TEST(AtomicFileTest, BesideRemovesTheTemporaryOfAKilledWriter) {
  Scratch dir;
  const std::string path = dir / "data.bin";
  // No process has this id (above any pid_max), so its writer is gone.
  const std::string stale = dir / ".data.bin.tmp-2147483646-0";
  write_text(stale, "half");
  AtomicFile file = AtomicFile::beside(path, 0644, "the data");
  file.commit(/*durable=*/false);
  EXPECT_EQ(names_in(dir / ""), std::vector<std::string>{"data.bin"});
}

TEST(StagedTreeTest, AMissingPrefixIsStagedAndRenamedIntoPlace) {
  Scratch dir;
  const std::string prefix = dir / "a/b/save";
  StagedTree tree = StagedTree::begin(
      prefix, StagingOptions(), [](const std::string&) { return true; });
  ASSERT_TRUE(tree.staged());
  EXPECT_NE(tree.dir(), prefix);
  EXPECT_EQ(tree.final_root(), prefix);
  const std::string file = detail::join_path(tree.dir(), "x.memmap");
  EXPECT_EQ(tree.final_path(file), prefix + "/x.memmap");
  EXPECT_EQ(tree.final_path(dir / "elsewhere"), dir / "elsewhere");
  tree.write_and_commit([&] {
    detail::ensure_directory(tree.dir(), true, true, false);
    write_text(file, "leaf");
  });
  EXPECT_EQ(read_text(prefix + "/x.memmap"), "leaf");
  EXPECT_EQ(names_in(dir / "a/b"), std::vector<std::string>{"save"});
}

TEST(StagedTreeTest, AFailedWriteRemovesTheTreeAndTheParentsItMade) {
  Scratch dir;
  const std::string prefix = dir / "a/b/save";
  StagedTree tree = StagedTree::begin(
      prefix, StagingOptions(), [](const std::string&) { return true; });
  EXPECT_THROW(
      tree.write_and_commit([&] {
        detail::ensure_directory(tree.dir(), true, true, false);
        write_text(detail::join_path(tree.dir(), "x.memmap"), "leaf");
        throw std::runtime_error("disk full");
      }),
      std::runtime_error);
  EXPECT_EQ(detail::path_kind(dir / "a"), PathKind::kMissing);
}

TEST(StagedTreeTest, AnOverwriteSwapsTheTreeAndKeepsTheOldOneAsSpare) {
  Scratch dir;
  const std::string prefix = dir / "save";
  std::filesystem::create_directories(prefix);
  write_text(prefix + "/old.memmap", "old");
  const auto replaceable = [](const std::string&) { return true; };
  StagedTree first = StagedTree::begin(prefix, StagingOptions(), replaceable);
  ASSERT_TRUE(first.staged());
  EXPECT_FALSE(first.reuses_spare());
  first.write_and_commit([&] {
    detail::ensure_directory(first.dir(), true, true, false);
    write_text(detail::join_path(first.dir(), "new.memmap"), "new");
  });
  EXPECT_EQ(names_in(prefix), std::vector<std::string>{"new.memmap"});
  // The old tree is the hidden spare of the prefix ...
  const std::vector<std::string> siblings = names_in(dir / "");
  ASSERT_EQ(siblings.size(), 2U);
  const std::string spare = dir / siblings[0];  // '.' sorts first
  EXPECT_EQ(read_text(spare + "/old.memmap"), "old");
  // ... which the next overwrite writes into, keeping only what it plans.
  StagedTree second = StagedTree::begin(prefix, StagingOptions(), replaceable);
  ASSERT_TRUE(second.reuses_spare());
  EXPECT_EQ(second.dir(), spare);
  second.keep_only({}, {});
  EXPECT_TRUE(names_in(spare).empty());
  second.write_and_commit(
      [&] { write_text(detail::join_path(second.dir(), "v3.memmap"), "3"); });
  EXPECT_EQ(names_in(prefix), std::vector<std::string>{"v3.memmap"});
  EXPECT_EQ(read_text(spare + "/new.memmap"), "new");
}

TEST(StagedTreeTest, WithoutKeepSpareTheOldTreeGoes) {
  Scratch dir;
  const std::string prefix = dir / "save";
  std::filesystem::create_directories(prefix);
  write_text(prefix + "/old.memmap", "old");
  StagedTree tree = StagedTree::begin(
      prefix, StagingOptions().keep_spare(false), [](const std::string&) {
        return true;
      });
  tree.write_and_commit([&] {
    detail::ensure_directory(tree.dir(), true, true, false);
    write_text(detail::join_path(tree.dir(), "new.memmap"), "new");
  });
  EXPECT_EQ(names_in(dir / ""), std::vector<std::string>{"save"});
  EXPECT_EQ(names_in(prefix), std::vector<std::string>{"new.memmap"});
}

TEST(StagedTreeTest, APrefixThatMayNotBeReplacedIsWrittenInPlace) {
  Scratch dir;
  const std::string prefix = dir / "save";
  std::filesystem::create_directories(prefix);
  write_text(prefix + "/notes.txt", "mine");
  StagedTree tree = StagedTree::begin(
      prefix, StagingOptions(), [](const std::string&) { return false; });
  EXPECT_FALSE(tree.staged());
  EXPECT_EQ(tree.dir(), prefix);
  EXPECT_EQ(tree.final_path(prefix + "/x"), prefix + "/x");
}

TEST(StagedTreeTest, AtomicRefusesADirectoryThatHoldsNoSave) {
  Scratch dir;
  const std::string prefix = dir / "save";
  std::filesystem::create_directories(prefix);
  write_text(prefix + "/notes.txt", "mine");
  const std::string message = error_of([&] {
    (void)StagedTree::begin(
        prefix, StagingOptions().atomic(true), [](const std::string&) {
          return true;
        });
  });
  EXPECT_NE(
      message.find("Refusing to replace " + prefix + " with atomic(true)"),
      std::string::npos)
      << message;
  EXPECT_EQ(read_text(prefix + "/notes.txt"), "mine");
  const std::string no_prefix = error_of([&] {
    (void)StagedTree::begin(
        "", StagingOptions().atomic(true), [](const std::string&) {
          return true;
        });
  });
  EXPECT_NE(no_prefix.find("atomic(true) needs a prefix"), std::string::npos)
      << no_prefix;
}

TEST(WriteFullyTest, WritesAtAnOffsetWithoutMovingThePosition) {
  Scratch dir;
  const std::string path = dir / "file";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  const detail::WriteProgress head = detail::write_fully(fd, "abc", 3);
  const detail::WriteProgress tail =
      detail::write_fully(fd, "XY", 2, /*offset=*/6);
  const detail::WriteProgress next = detail::write_fully(fd, "d", 1);
  ::close(fd);
  EXPECT_EQ(head.written, 3u);
  EXPECT_EQ(tail.written, 2u);
  EXPECT_EQ(next.written, 1u);
  EXPECT_EQ(next.error, 0);
  // pwrite left the position after "abc", so "d" follows it; the gap
  // between "d" and "XY" reads as zeros.
  EXPECT_EQ(read_text(path), std::string("abcd\0\0XY", 8));
}

TEST(WriteFullyTest, StopsAtTheFailedCallAndKeepsItsErrno) {
  // /dev/full refuses every write with ENOSPC, as a full disk does.
  const int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    GTEST_SKIP() << "no /dev/full: " << std::strerror(errno);
  }
  const std::string data(4096, 'x');
  const detail::WriteProgress done =
      detail::write_fully(fd, data.data(), data.size());
  ::close(fd);
  EXPECT_EQ(done.written, 0u);
  EXPECT_EQ(done.error, ENOSPC);
  EXPECT_EQ(done.reason(), std::strerror(ENOSPC));
  EXPECT_EQ(detail::WriteProgress{}.reason(), "nothing written");
}

TEST(WriteFullyTest, ReportsTheErrorOfAReadOnlyDescriptor) {
  Scratch dir;
  const std::string path = dir / "file";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0666);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  // Read-only: both write and pwrite fail with EBADF, having written nothing.
  const detail::WriteProgress at_position = detail::write_fully(fd, "ab", 2);
  const detail::WriteProgress at_offset =
      detail::write_fully(fd, "ab", 2, /*offset=*/4);
  ::close(fd);
  EXPECT_EQ(at_position.written, 0u);
  EXPECT_EQ(at_position.error, EBADF);
  EXPECT_EQ(at_offset.written, 0u);
  EXPECT_EQ(at_offset.error, EBADF);
  EXPECT_EQ(read_text(path), "");
}

}  // namespace staged_tree_test
}  // namespace tensordict::testing
