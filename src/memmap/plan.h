#pragma once

// The plan of a save: every key checked, every file named, every meta.json
// text built, before a file is touched. A sink then writes the plan: into
// directories (memmap/directory_sink.h) or into one archive
// (memmap/archive_sink.h). See NOTE [Memmap layout].

#include <ATen/core/Tensor.h>
#include <c10/util/FunctionRef.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/walk.h"
#include "tensordict/fwd.h"
#include "tensordict/options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

class StagedTree;

/// One save's plan: `plan_dict` checks every key and decides every file
/// and directory, `mark_memmapped` flags the planned dicts once a sink has
/// written them. Planning is a `walk` (see NOTE [Walking the tree]); the
/// hooks below are its visitor, with one open level per dict being
/// planned. Planning creates, writes and removes nothing (it looks at the
/// files already there, for existsok(false) and leaves saved in place).
class SavePlan : public WalkVisitor {
 public:
  /// A leaf to write: `path` is its file (empty: anonymous shared memory),
  /// `result` the tensor the saved dict holds, set while planning when no
  /// bytes need writing, else by the sink.
  struct LeafJob {
    at::Tensor source;
    std::string path;
    std::string link_source;  // the file `path` becomes a second name of
    std::string what;
    ImplPtr dest;
    std::string dest_key;
    at::Tensor result;
  };
  /// A meta.json to write, children before parents.
  struct MetaJob {
    std::string path;
    std::string content;
  };
  /// A directory to create (its parents too for a root).
  struct Directory {
    std::string path;
    bool is_root = false;
  };

  /// `like`: size files without copying data; `inplace`: the destination
  /// dicts are the sources (memmap_).
  SavePlan(const MemmapOptions& options, bool like, bool inplace);
  SavePlan(const SavePlan&) = delete;
  SavePlan& operator=(const SavePlan&) = delete;
  ~SavePlan();

  /// Plans into `tree` (its `dir()` is the root to plan into): the files
  /// of a staged tree are this save's own, and their final names are where
  /// the tree is swapped in. Without a tree, paths are final.
  void stage_into(const StagedTree& tree) {
    staged_ = &tree;
  }
  /// Queues `dir` to be created (its parents too for a root) and, in
  /// place, its meta.json removed. See NOTE [Interrupted saves].
  void prepare_directory(const std::string& dir, bool is_root);
  /// Plans `src`, whose key is `path` (empty at the root), into directory
  /// `dir` (empty: anonymous shared memory), filling `dest` (an empty dict,
  /// or `src` itself in place).
  void plan_dict(
      const TensorDict& src,
      const TensorDict& dest,
      const std::string& dir,
      KeyPath path,
      bool is_root);
  /// Queues a meta.json to write after those already planned.
  void add_meta(std::string path, std::string content);
  /// Marks the planned dicts memmapped to their (final) directories.
  void mark_memmapped();
  /// Lists the files planned: `meta(path, content)` per meta.json,
  /// `leaf(path, source)` per leaf file (an empty leaf has none). An
  /// archive streams them into one zip (memmap/archive_sink.cpp).
  void for_each_planned_file(
      c10::function_ref<void(const std::string&, const std::string&)> meta,
      c10::function_ref<void(const std::string&, const at::Tensor&)> leaf)
      const;
  /// Returns the file or directory name of `key` (encoded, checked for
  /// reserved names, unsafe names and length); throws naming `full_key`.
  std::string checked_name(
      std::string_view key, const KeyPath& full_key, bool is_collection) const;

  /// Returns the options the plan was made with.
  const MemmapOptions& options() const noexcept {
    return options_;
  }
  /// True for memmap_like: leaves are sized, not copied.
  bool like() const noexcept {
    return like_;
  }
  /// Returns the leaves planned, in order (the sink fills their results).
  std::vector<LeafJob>& leaves() noexcept {
    return leaves_;
  }
  /// Returns the meta.json files planned, children before parents.
  const std::vector<MetaJob>& metas() const noexcept {
    return metas_;
  }
  /// Returns the directories planned, parents before children.
  const std::vector<Directory>& directories() const noexcept {
    return directories_;
  }
  /// Returns the bytes of all leaves, for progress reports.
  int64_t total_bytes() const noexcept {
    return total_bytes_;
  }

  // The walk hooks: `leave_dict` finishes the innermost open level (its
  // meta.json); the others plan one of its entries, `enter_dict` opening
  // the entry's own level.
  bool enter_dict(const KeyPath& path, const TensorDict& dict);
  void leave_dict(const KeyPath& path, const TensorDict& dict);
  bool enter_lazy_stack(
      const KeyPath& path, const LazyStackedTensorDict& stack);
  void leave_lazy_stack(
      const KeyPath& path, const LazyStackedTensorDict& stack);
  void leaf(const KeyPath& path, const at::Tensor& tensor);
  void non_tensor(const KeyPath& path, const Value& value);

 private:
  struct Level;

  void open_level(
      const TensorDict& src, TensorDict dest, std::string dir, bool is_root);
  std::string entry_name(const KeyPath& path, bool is_collection);
  bool staged() const noexcept;
  std::string final_path(const std::string& path) const;

  const MemmapOptions& options_;
  bool like_;
  bool inplace_;
  const StagedTree* staged_ = nullptr;
  int64_t total_bytes_ = 0;
  std::vector<LeafJob> leaves_;
  std::vector<MetaJob> metas_;
  std::vector<Level> levels_;  // the dicts being planned, root first
  std::vector<Directory> directories_;
  std::vector<std::pair<ImplPtr, std::string>> memmapped_;
};

/// Returns the bytes that a sink writes for the leaf `tensor`, as Python's
/// `_tensor_chunks` gives them: on the CPU, contiguous, conjugation and
/// negation resolved; `tensor` itself (no copy) when it already is.
at::Tensor leaf_bytes(const at::Tensor& tensor);

/// Plans `stack` as the root `root` of a save into `plan`: element i in
/// `<root>/<i>` (in `<root>/_tensordict/<i>` for a Python tensorclass,
/// whose class goes into the root's meta.json), and the stack's meta.json;
/// an empty `root` (shared memory) plans the elements only. Returns the
/// dicts the plan fills, one per element: the elements themselves when
/// `inplace`.
std::vector<TensorDict> plan_lazy_stack_root(
    SavePlan& plan,
    const LazyStackedTensorDict& stack,
    const std::string& root,
    const MemmapOptions& options,
    bool inplace);

}  // namespace detail
TENSORDICT_END_NAMESPACE
