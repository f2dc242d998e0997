// Replacing a directory without a window in which it is missing or half
// written: the tree is staged beside its prefix and swapped in. See
// io/staged_tree.h.

#include "io/staged_tree.h"

#include <c10/util/Exception.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "io/file_io.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

namespace {

// NOTE [Crash-safe overwrite]: a save over a directory that holds a complete
// save (a meta.json) and nothing else is written into a hidden sibling,
// `.<name>.tmp-<pid>-<n>`, then swapped with it in one rename (renameat2
// RENAME_EXCHANGE), and the old tree, now under the sibling's name, is kept
// as the staging tree of the next overwrite (NOTE [Spare trees]). A reader
// sees the old save until the swap and the new one after it; a kill leaves
// at worst a hidden sibling, which loading never looks at and the next save
// at the same prefix removes once its process is gone.
// Where the file system cannot exchange, the old tree is renamed aside
// first (`.<name>.old-<pid>-<n>`), leaving a window of two renames in which
// the prefix is missing. Leaves that already are this prefix's files
// (memmap_ again) get a second name in the new tree (a hard link), not a
// copy. A fresh save (no prefix yet) is staged the same way and renamed
// into place. `atomic(true)` (Python's `atomic=True`) stages whatever the
// prefix holds: an empty directory, or a directory with a meta.json and
// other files, which are then replaced. Without it, a directory that also
// holds other files is written in place, as Python does, keeping those
// files: only there can a kill leave the old save unloadable (see NOTE
// [Interrupted saves]). So are existsok(false) (it must see the existing
// files to refuse them, and refuses them before writing anything), an
// existing empty directory (it may be a mount point) and a prefix that is
// a symlink.
//
// NOTE [Failed saves]: a save that throws midway (disk full, a file size
// limit, an I/O error, an exception in a writer thread) removes what it
// wrote: a staged tree goes whole, with the parents of a fresh prefix it
// created; in place, the directories and leaf files it created and the
// meta.json files it wrote. Only the leaf files it overwrote in place stay,
// in directories whose meta.json is gone.

// NOTE [Spare trees]: the old tree that an overwrite swaps out is not
// removed but kept as the spare of its prefix, and the next overwrite of the
// same prefix by the same process writes its staged tree into it: over the
// files it has (their inodes and page-cache pages), creating only what is
// missing and removing what the new save does not have, before the swap as
// always. Removing a tree and creating the next one costs more than writing
// the data: every inode is freed and allocated again (on ext4 without a
// journal each allocation scans past the inodes freed in the last minutes),
// and every page of data is freed and allocated again, where Python's
// in-place overwrite reuses both. So between two saves the prefix has one
// hidden sibling, `.<name>.tmp-<pid>-<n>`, holding the save before the
// current one, as the swap needs for a moment anyway: the disk (or, on
// tmpfs, memory) that an overwrite needs at its peak stays in use. Bounds:
// one spare per prefix and process, removed when the process exits
// normally (atexit), when a save at that prefix fails, and, once the
// process is gone (killed), by the next save at that prefix as any stale
// sibling; `keep_spare(false)` removes the old tree at once instead. A
// file of the spare that anyone still has open or mapped (an earlier save's
// result, a load, in this process or another) is replaced by a new file
// rather than written over, so such a mapping keeps its data as before: a
// write lease (F_SETLEASE) is refused while another descriptor or mapping
// holds the file. Kernels that do not count read-only opens (built without
// IMA) see only the writable ones: there a read-only mapping of the save
// two overwrites back can see the newer bytes, as any mapping does under
// Python's in-place overwrite.

// The spare trees of this process (NOTE [Spare trees]), by final prefix.
class SpareTrees {
 public:
  static SpareTrees& instance() {
    // Never destroyed: the atexit handler uses it after static destructors
    // may have run.
    static SpareTrees* const spares = [] {
      auto* created = new SpareTrees();
      std::atexit([] { instance().remove_all(); });
      return created;
    }();
    return *spares;
  }

  // Takes the spare of `root` made by this process, if it is still a
  // directory; an empty string otherwise.
  std::string take(const std::string& root) {
    std::string path;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = spares_.begin(); it != spares_.end(); ++it) {
        if (it->root == root && it->pid == ::getpid()) {
          path = std::move(it->path);
          spares_.erase(it);
          break;
        }
      }
    }
    if (!path.empty() && path_kind(path) != PathKind::kDirectory) {
      return std::string();
    }
    return path;
  }

  // Keeps `path` as the spare of `root`, removing an older one.
  void put(const std::string& root, std::string path) {
    std::string older;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& spare : spares_) {
        if (spare.root == root && spare.pid == ::getpid()) {
          older = std::exchange(spare.path, std::move(path));
          break;
        }
      }
      if (older.empty()) {
        spares_.push_back({root, std::move(path), ::getpid()});
      }
    }
    remove_quietly(older);
  }

 private:
  struct Spare {
    std::string root;
    std::string path;
    pid_t pid;  // a forked child leaves its parent's spares alone
  };

  static void remove_quietly(const std::string& path) noexcept {
    if (!path.empty()) {
      std::error_code ignored;  // best effort: a stale sibling later
      std::filesystem::remove_all(path, ignored);
    }
  }

  void remove_all() noexcept {
    std::vector<Spare> spares;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      spares.swap(spares_);
    }
    for (const auto& spare : spares) {
      if (spare.pid == ::getpid()) {
        remove_quietly(spare.path);
      }
    }
  }

  std::mutex mutex_;
  std::vector<Spare> spares_;
};

// Readies the file `path` of a spare tree for write_leaf_file to write
// `nbytes` over (NOTE [Spare trees]): shortened to `nbytes` if longer, or
// removed when `keep` is false (the name is to be a hard link), when it is
// not a regular file, when it has other names, or when anyone else has it
// open for writing.
void ready_spare_file(const std::string& path, size_t nbytes, bool keep) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ENOENT) {
    return;
  }
  bool reuse = false;
  if (fd >= 0) {
    struct stat st {};
    // A second name (memmap_ links the files it keeps) is a file of the
    // saved tree too: writing over it would change the save.
    reuse = keep && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            st.st_nlink == 1 && ::fcntl(fd, F_SETLEASE, F_WRLCK) == 0;
    if (reuse) {
      ::fcntl(fd, F_SETLEASE, F_UNLCK);
      reuse = static_cast<uint64_t>(st.st_size) <= nbytes ||
              ::ftruncate(fd, static_cast<off_t>(nbytes)) == 0;
    }
    ::close(fd);
  }
  if (!reuse) {
    remove_tree(path);
  }
}
}  // namespace

StagedTree StagedTree::begin(
    const std::string& prefix,
    const StagingOptions& options,
    c10::function_ref<bool(const std::string&)> may_replace) {
  StagedTree tree;
  tree.options_ = options;
  tree.dir_ = prefix;
  std::string root = prefix;
  while (root.size() > 1 && root.back() == '/') {
    root.pop_back();
  }
  std::string name = root.substr(root.find_last_of('/') + 1);
  TORCH_CHECK_VALUE(
      !tree.options_.atomic() || !prefix.empty(),
      "atomic(true) needs a prefix to write the directory to");
  if (root.empty() || name.empty() || name == "." || name == "..") {
    TORCH_CHECK_VALUE(
        !tree.options_.atomic(),
        "atomic(true) cannot replace ",
        prefix,
        ": name the directory itself");
    return tree;
  }
  remove_stale_siblings(root);
  PathKind kind = path_kind(root);
  if (tree.options_.atomic()) {
    if (kind == PathKind::kSymlink) {
      // As Python: the directory the symlink points to is replaced.
      std::error_code error;
      const auto target = std::filesystem::canonical(root, error);
      TORCH_CHECK(
          !error,
          "atomic(true): cannot resolve the symlink ",
          prefix,
          ": ",
          error.message());
      root = target.string();
      remove_stale_siblings(root);
      kind = path_kind(root);
    }
    TORCH_CHECK(
        kind == PathKind::kMissing || kind == PathKind::kDirectory,
        prefix,
        " exists and is not a directory");
    if (kind == PathKind::kDirectory && !list_directory(root).empty()) {
      TORCH_CHECK(
          tree.options_.existsok(),
          prefix,
          " is not empty and existsok is false");
      TORCH_CHECK(
          path_kind(join_path(root, "meta.json")) == PathKind::kFile,
          "Refusing to replace ",
          prefix,
          " with atomic(true): it is not empty and holds no saved tensordict "
          "(no meta.json).");
    }
  } else if (
      kind != PathKind::kMissing &&
      (!tree.options_.existsok() || !may_replace(root))) {
    return tree;
  }
  // See NOTE [Failed saves]: a fresh save is staged too, so that a failure
  // leaves nothing at the prefix.
  tree.fresh_ = kind == PathKind::kMissing;
  tree.final_root_ = root;
  tree.staging_root_ = SpareTrees::instance().take(root);
  tree.reuses_spare_ = !tree.staging_root_.empty();
  if (tree.reuses_spare_ && !tree.options_.keep_spare()) {
    try {
      remove_tree(tree.staging_root_);
    } catch (const c10::Error&) {
      // Kept, for the exit to remove.
      SpareTrees::instance().put(root, tree.staging_root_);
    }
    tree.reuses_spare_ = false;
  }
  if (!tree.reuses_spare_) {
    tree.staging_root_ = temporary_sibling(root, "tmp");
  }
  tree.dir_ = tree.staging_root_;
  return tree;
}

std::string StagedTree::final_path(const std::string& path) const {
  if (staging_root_.empty() ||
      path.compare(0, staging_root_.size(), staging_root_) != 0) {
    return path;
  }
  return final_root_ + path.substr(staging_root_.size());
}

void StagedTree::ready_file(
    const std::string& path, size_t nbytes, bool keep) const {
  if (reuses_spare_) {
    ready_spare_file(path, nbytes, keep);
  }
}

void StagedTree::keep_only(
    const std::unordered_set<std::string>& dirs,
    const std::unordered_set<std::string>& files) const {
  if (!reuses_spare_) {
    return;
  }
  std::vector<std::string> pending{staging_root_};
  while (!pending.empty()) {
    const std::string dir = std::move(pending.back());
    pending.pop_back();
    for (const auto& [name, kind] : list_directory(dir)) {
      std::string path = join_path(dir, name);
      if (kind == PathKind::kDirectory && dirs.count(path) != 0) {
        pending.push_back(std::move(path));
      } else if (kind != PathKind::kFile || files.count(path) == 0) {
        remove_tree(path);
      }
    }
  }
}

void StagedTree::write_and_commit(c10::function_ref<void()> write) {
  TORCH_INTERNAL_ASSERT(staged(), "write_and_commit needs a staged tree");
  // The missing parents of a fresh save, created by `write`: removed again
  // if it fails.
  std::vector<std::string> parents;
  if (fresh_) {
    for (std::string dir = staging_root_;;) {
      const size_t slash = dir.find_last_of('/');
      if (slash == std::string::npos || slash == 0) {
        break;
      }
      dir.resize(slash);
      if (path_kind(dir) != PathKind::kMissing) {
        break;
      }
      parents.push_back(dir);
    }
  }
  try {
    write();
    commit();
  } catch (...) {
    try {
      remove_tree(staging_root_);
      for (const auto& parent : parents) {  // deepest first
        ::rmdir(parent.c_str());
      }
    } catch (...) {  // NOLINT(bugprone-empty-catch): the first error counts
    }
    throw;
  }
}

void StagedTree::commit() {
  if (fresh_) {
    // Nothing was at the prefix: one rename puts the tree there (and fails
    // if a directory that is not empty appeared meanwhile).
    rename_path(staging_root_, final_root_);
  }
  const std::string old_tree =
      fresh_ ? std::string() : exchange_directories(staging_root_, final_root_);
  if (options_.durable()) {
    fsync_parent_directory(final_root_);
  }
  if (old_tree.empty()) {
    return;
  }
  if (options_.keep_spare()) {
    SpareTrees::instance().put(final_root_, old_tree);
    return;
  }
  try {
    remove_tree(old_tree);
  } catch (const c10::Error&) {
    // The new tree is in place; the old one is a hidden sibling that the
    // next save at this prefix removes.
  }
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
