#pragma once

// Shared test helpers: exception-message assertions, dict equality and
// temporary directories and files.

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

/// Asserts that `statement` throws `error_type` whose message (without the
/// backtrace) contains `substring`.
#define EXPECT_THROWS_WITH(statement, error_type, substring)             \
  do {                                                                   \
    bool tensordict_test_thrown = false;                                 \
    try {                                                                \
      (void)(statement);                                                 \
    } catch (const error_type& e) {                                      \
      tensordict_test_thrown = true;                                     \
      EXPECT_NE(std::string(e.msg()).find(substring), std::string::npos) \
          << "message was: " << e.msg();                                 \
    } catch (const std::exception& e) {                                  \
      ADD_FAILURE() << "threw the wrong type: " << e.what();             \
      tensordict_test_thrown = true;                                     \
    }                                                                    \
    EXPECT_TRUE(tensordict_test_thrown) << #statement " did not throw";  \
  } while (false)

/// Asserts that `statement` throws `error_type` with exactly `message`.
#define EXPECT_THROWS_EXACTLY(statement, error_type, message)           \
  do {                                                                  \
    bool tensordict_test_thrown = false;                                \
    try {                                                               \
      (void)(statement);                                                \
    } catch (const error_type& e) {                                     \
      tensordict_test_thrown = true;                                    \
      EXPECT_EQ(std::string(e.msg()), std::string(message));            \
    } catch (const std::exception& e) {                                 \
      ADD_FAILURE() << "threw the wrong type: " << e.what();            \
      tensordict_test_thrown = true;                                    \
    }                                                                   \
    EXPECT_TRUE(tensordict_test_thrown) << #statement " did not throw"; \
  } while (false)

namespace tensordict::testing {

/// A float32 tensor of `values`.
inline at::Tensor f32(std::vector<float> values) {
  return torch::tensor(values, torch::kFloat);
}

/// Asserts equal shapes and values within `tol` (absolute).
inline void expect_close(
    const at::Tensor& a, const at::Tensor& b, double tol = 1e-6) {
  ASSERT_EQ(a.sizes(), b.sizes());
  EXPECT_TRUE(torch::allclose(a, b, /*rtol=*/0, /*atol=*/tol)) << a << "\nvs\n"
                                                               << b;
}

/// Checks batch size, keys (in order), kinds and values, recursively.
inline void expect_td_equal(const TensorDict& a, const TensorDict& b) {
  EXPECT_EQ(a.batch_size(), b.batch_size());
  const auto ka = a.keys(/*include_nested=*/true);
  const auto kb = b.keys(/*include_nested=*/true);
  ASSERT_EQ(ka.size(), kb.size());
  for (size_t i = 0; i < ka.size(); ++i) {
    EXPECT_EQ(ka[i], kb[i]);
    const Value va = a[ka[i]];
    const Value vb = b[kb[i]];
    ASSERT_EQ(va.kind(), vb.kind()) << ka[i];
    if (va.is_tensor()) {
      EXPECT_EQ(va.tensor().scalar_type(), vb.tensor().scalar_type()) << ka[i];
      EXPECT_TRUE(torch::equal(va.tensor(), vb.tensor())) << ka[i];
    } else if (va.is_non_tensor()) {
      EXPECT_EQ(va.non_tensor(), vb.non_tensor()) << ka[i];
    }
  }
  EXPECT_TRUE(equal(a, b));
}

/// Returns the prefixes of a state dict's metadata, in order.
inline std::vector<std::string> metadata_keys(const StateDict& sd) {
  std::vector<std::string> out;
  for (const auto& item : sd.metadata()) {
    out.push_back(item.first);
  }
  return out;
}

/// A fresh, empty directory named after the running test (and process),
/// removed with everything in it when the object goes away.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("tensordict_test_") +
                       std::to_string(::getpid()) + "_" +
                       info->test_suite_name() + "_" + info->name();
    std::replace(name.begin(), name.end(), '/', '_');  // parameterized tests
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  /// Returns the path of `name` inside the directory.
  std::string operator/(const std::string& name) const {
    return (path_ / name).string();
  }
  /// Returns the directory's path.
  std::string str() const {
    return path_.string();
  }

 private:
  std::filesystem::path path_;
};

/// A tmpfs of `size` (such as "4m") mounted on a fresh directory, unmounted
/// when the object goes away: a real full file system. `mounted()` is false
/// where the machine does not let the test mount one (not root, or a
/// locked-down container); such tests skip.
class SmallTmpfs {
 public:
  SmallTmpfs(const std::string& where, const std::string& size) : path_(where) {
    std::filesystem::create_directories(path_);
    mounted_ =
        ::mount("tmpfs", path_.c_str(), "tmpfs", 0, ("size=" + size).c_str()) ==
        0;
  }
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;
  ~SmallTmpfs() {
    if (mounted_) {
      ::umount2(path_.c_str(), MNT_DETACH);
    }
  }
  /// Whether the tmpfs is there.
  bool mounted() const {
    return mounted_;
  }
  /// Returns the path of `name` inside the mount.
  std::string operator/(const std::string& name) const {
    return path_ + "/" + name;
  }
  /// Returns the names below the mount point, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& entry :
         std::filesystem::recursive_directory_iterator(path_)) {
      out.push_back(
          std::filesystem::relative(entry.path(), path_).generic_string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::string path_;
  bool mounted_ = false;
};

/// Runs `write` in a forked child whose files cannot grow past
/// `limit_bytes` (writes then fail with EFBIG, as on a full disk, without
/// one) and returns the message it threw, or "finished" if it did not.
inline std::string run_with_file_size_limit(
    const std::function<void()>& write, rlim_t limit_bytes) {
  int fds[2];
  if (::pipe(fds) != 0) {
    ADD_FAILURE() << "pipe failed";
    return {};
  }
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    // The parent's OpenMP workers do not exist in the child: a parallel
    // region here would wait for them forever (seen under ASan).
    at::set_num_threads(1);
    const struct rlimit limit { limit_bytes, limit_bytes };
    ::setrlimit(RLIMIT_FSIZE, &limit);
    std::signal(SIGXFSZ, SIG_IGN);
    std::string message = "finished";
    try {
      write();
    } catch (const c10::Error& e) {
      message = e.what_without_backtrace();
    } catch (const std::exception& e) {
      message = std::string("not a c10::Error: ") + e.what();
    }
    size_t done = 0;
    while (done < message.size()) {
      const ssize_t n =
          ::write(fds[1], message.data() + done, message.size() - done);
      if (n <= 0) {
        break;
      }
      done += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string message;
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::read(fds[0], buffer, sizeof(buffer))) > 0) {
    message.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return message;
}

/// Returns the bytes of a file (empty if it cannot be read).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

/// Replaces the bytes of a file.
inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

/// Every file and directory below `dir`, relative to it, sorted (empty if
/// `dir` is missing).
inline std::vector<std::string> tree_of(const std::string& dir) {
  std::vector<std::string> out;
  if (!std::filesystem::exists(dir)) {
    return out;
  }
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    out.push_back(std::filesystem::relative(entry.path(), dir).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// The inode number of `path` (fails the test if it cannot be stat'ed).
inline ino_t inode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

}  // namespace tensordict::testing
