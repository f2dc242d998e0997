#pragma once

// The crash-safe replacement of a directory: a tree written beside its
// prefix and swapped in whole, and the spare trees that later overwrites
// write into. Knows directories and files only, no TensorDict. See NOTE
// [Crash-safe overwrite], NOTE [Spare trees] and NOTE [Failed saves] in
// io/staged_tree.cpp.

#include <c10/util/FunctionRef.h>

#include <cstddef>
#include <string>
#include <unordered_set>
#include <vector>

#include "tensordict/options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// What a StagedTree may do with the existing prefix.
///
/// Example: `StagingOptions().atomic(true).durable(true)`
struct StagingOptions {
  /// Stage whatever the prefix holds (Python's `atomic=True`): an empty
  /// directory, or one with a meta.json and other files.
  TENSORDICT_ARG(bool, atomic) = false;
  /// An existing prefix may be replaced; when false it is written in place
  /// so that its files can be refused.
  TENSORDICT_ARG(bool, existsok) = true;
  /// Keep the swapped-out tree as the prefix's spare.
  TENSORDICT_ARG(bool, keep_spare) = true;
  /// Fsync the parent directory after the swap.
  TENSORDICT_ARG(bool, durable) = false;
};

/// One replacement of the directory at a prefix. `begin` decides where the
/// new tree is written (`dir()`): the prefix itself (in place), or a hidden
/// sibling, this prefix's spare tree or a new one, that `write_and_commit`
/// swaps in. Not thread-safe; one save owns it.
///
/// Example:
///   StagedTree tree = StagedTree::begin(prefix, options, may_replace);
///   tree.write_and_commit([&] { write_files_into(tree.dir()); });
class StagedTree {
 public:
  /// Returns the tree for a save at `prefix`: staged when `prefix` is
  /// missing, or when `may_replace(prefix)` says it holds a complete save
  /// and nothing else (with `existsok`), or with `atomic`; in place
  /// otherwise. Removes the temporary siblings of killed saves. Throws,
  /// touching nothing, if `atomic` cannot be honoured (no prefix, a file,
  /// a directory holding files but no meta.json, or with `existsok` false
  /// a directory that is not empty).
  static StagedTree begin(
      const std::string& prefix,
      const StagingOptions& options,
      c10::function_ref<bool(const std::string&)> may_replace);

  /// True if the tree is written beside the prefix and swapped in.
  bool staged() const noexcept {
    return !staging_root_.empty();
  }
  /// Returns where to write: the staging root, or the prefix itself.
  const std::string& dir() const noexcept {
    return dir_;
  }
  /// Returns the staging root (empty in place).
  const std::string& staging_root() const noexcept {
    return staging_root_;
  }
  /// Returns the directory the staged tree replaces (empty in place).
  const std::string& final_root() const noexcept {
    return final_root_;
  }
  /// True if the staging root is an earlier save's spare tree, whose files
  /// are written over (see NOTE [Spare trees]).
  bool reuses_spare() const noexcept {
    return reuses_spare_;
  }
  /// Returns where `path`, below the staging root, ends up once swapped
  /// in; other paths as they are.
  std::string final_path(const std::string& path) const;
  /// Readies the file `path` of a reused spare tree to be written over
  /// with `nbytes`: shortened if longer, or removed when `keep` is false,
  /// when it is no regular file, has other names or is open elsewhere.
  /// Does nothing unless the tree reuses a spare.
  void ready_file(const std::string& path, size_t nbytes, bool keep) const;
  /// Removes every entry of a reused spare tree but the directories `dirs`
  /// and the regular files `files` (full paths), so that the swapped-in
  /// tree holds what a fresh save would. Does nothing unless the tree
  /// reuses a spare.
  void keep_only(
      const std::unordered_set<std::string>& dirs,
      const std::unordered_set<std::string>& files) const;
  /// Runs `write`, which fills `dir()`, then swaps the staged tree in: one
  /// rename for a fresh prefix, an exchange otherwise, the old tree then
  /// kept as the spare (or removed). On an error the staged tree goes
  /// whole, with the parents of a fresh prefix that `write` created, and
  /// the error is rethrown. Only for a staged tree.
  void write_and_commit(c10::function_ref<void()> write);

 private:
  StagedTree() = default;
  void commit();

  StagingOptions options_;
  std::string dir_;
  // A staged save: the tree is written under `staging_root_` and replaces
  // `final_root_`. Both empty: written in place.
  std::string final_root_;
  std::string staging_root_;
  // Nothing is at the prefix: the commit renames the tree into place.
  bool fresh_ = false;
  bool reuses_spare_ = false;
};

}  // namespace detail
TENSORDICT_END_NAMESPACE
