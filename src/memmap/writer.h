#pragma once

// The save engine behind TensorDict::memmap, memmap_, memmap_like,
// make_memmap and the lazy-stack memmap. See NOTE [Memmap layout].

#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/FunctionRef.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/walk.h"
#include "tensordict/fwd.h"
#include "tensordict/options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Appends `key` to the JSON object `object` without searching it: for
/// keys known to be new, such as a dict's own. The ordered object copies
/// its members, values and all, when it grows: reserve it first.
void append_member(Json& object, std::string key, Json value);

/// A leaf's entry in its dict's meta.json, as Python writes it: `device`
/// is the source tensor's, which loading ignores.
Json leaf_meta(
    std::string device, c10::IntArrayRef shape, c10::ScalarType dtype);

/// The `_format_version` and `_class` members of a meta.json.
Json format_members(const char* class_id);

/// One save: `plan_dict` checks every key and decides every file (creating
/// the directories), `run` writes the leaves and then the meta.json files,
/// children before parents, and `mark_memmapped` flags the written dicts.
/// Planning is a `walk` (see NOTE [Walking the tree]); the hooks below are
/// its visitor, with one open level per dict being planned.
class SavePlan : public WalkVisitor {
 public:
  /// `like`: size files without copying data; `inplace`: the destination
  /// dicts are the sources (memmap_).
  SavePlan(const MemmapOptions& options, bool like, bool inplace);
  SavePlan(const SavePlan&) = delete;
  SavePlan& operator=(const SavePlan&) = delete;
  ~SavePlan();

  /// Returns the directory to plan the save at `prefix` into: `prefix`
  /// itself, or, when it is missing or holds a complete save and nothing
  /// else (or with `atomic`), a hidden sibling that `run` moves or swaps in
  /// once complete: this prefix's spare tree (NOTE [Spare trees]) or a new
  /// one. Removes the temporary siblings of killed saves. Throws,
  /// touching nothing, if `existsok` is false and `prefix` holds files, or
  /// if `atomic` cannot be honoured. See NOTE [Crash-safe overwrite].
  std::string begin(const std::string& prefix);
  /// Queues `dir` to be created by `run` if needed (its parents too for a
  /// root) and, in place, its meta.json removed. See NOTE [Interrupted
  /// saves].
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
  /// Writes everything planned; on an error, removes what it wrote (see
  /// NOTE [Failed saves]) and rethrows.
  void run();
  /// Marks the planned dicts memmapped to their directories.
  void mark_memmapped();
  /// Lists the files planned, without writing any: `meta(path, content)`
  /// per meta.json, `leaf(path, source)` per leaf file (an empty leaf has
  /// none). An archive streams them into one zip (src/memmap/archive.cpp).
  void for_each_planned_file(
      c10::function_ref<void(const std::string&, const std::string&)> meta,
      c10::function_ref<void(const std::string&, const at::Tensor&)> leaf)
      const;
  /// Returns the file or directory name of `key` (encoded, checked for
  /// reserved names, unsafe names and length); throws naming `full_key`.
  std::string checked_name(
      std::string_view key, const KeyPath& full_key, bool is_collection) const;

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
  struct LeafJob;
  struct MetaJob;
  struct Level;

  void open_level(
      const TensorDict& src, TensorDict dest, std::string dir, bool is_root);
  std::string entry_name(const KeyPath& path, bool is_collection);
  void write_leaf(LeafJob& job);
  void write_all();
  // Removes what an in-place write_all that threw had created.
  void undo_in_place() noexcept;
  // Where a planned path ends up once the staged tree is swapped in.
  std::string final_path(const std::string& path) const;
  void swap_in();
  // Removes the entries of a reused spare tree that the plan does not
  // write. See NOTE [Spare trees] in writer.cpp.
  void trim_spare();

  const MemmapOptions& options_;
  bool like_;
  bool inplace_;
  int64_t total_bytes_ = 0;
  std::vector<LeafJob> leaves_;
  std::vector<MetaJob> metas_;
  std::vector<Level> levels_;  // the dicts being planned, root first
  std::vector<std::pair<std::string, bool>> directories_;  // (dir, is_root)
  std::vector<std::pair<ImplPtr, std::string>> memmapped_;
  // A staged save: the tree is planned under `staging_root_` and replaces
  // `final_root_` at the end of `run`. Both empty: written in place.
  std::string final_root_;
  std::string staging_root_;
  // The staged tree is a fresh save: `run` renames it into place.
  bool fresh_ = false;
  // `staging_root_` is the spare tree of an earlier overwrite, written over
  // (NOTE [Spare trees]).
  bool reuses_spare_ = false;
  // What write_all created (in place: to remove if it fails).
  std::vector<std::string> created_dirs_;
  size_t metas_written_ = 0;
};

/// The meta.json content of a NonTensorData or NonTensorStack directory, in
/// Python's layout; `path` names the entry in errors.
std::string non_tensor_meta(
    const Value& value, JsonStyle style, const KeyPath& path);

/// Writes the directory of a root NonTensorData or NonTensorStack at
/// `options.prefix()` (nothing without a prefix).
void save_non_tensor_root(const Value& value, const MemmapOptions& options);

/// Loads the root NonTensorData or NonTensorStack of a directory
/// (src/memmap/reader.cpp); throws naming the directory otherwise.
Value load_non_tensor_root(
    const std::string& prefix, const LoadMemmapOptions& options);

/// The meta.json of a lazy stack's directory (Python's layout: the stack
/// dim and its name; the elements are the sub-directories 0, 1, ...).
Json lazy_stack_meta(const LazyStackedTensorDict& stack);

/// Plans `stack` as the root `root` of a save into `plan` (after
/// `plan.begin`): element i in `<root>/<i>` (in `<root>/_tensordict/<i>`
/// for a Python tensorclass, whose class goes into the root's meta.json),
/// and the stack's meta.json; an empty `root` (shared memory) plans the
/// elements only. Returns the dicts the plan fills, one per element: the
/// elements themselves when `inplace` (src/memmap/lazy_stack.cpp).
std::vector<TensorDict> plan_lazy_stack_root(
    SavePlan& plan,
    const LazyStackedTensorDict& stack,
    const std::string& root,
    const MemmapOptions& options,
    bool inplace);

/// The temporary meta.json that an append writes in `dir`
/// (src/memmap/append.cpp; see NOTE [Appending rows]).
std::string append_temporary(const std::string& dir);

/// The directories below `prefix` (itself included) that hold an append
/// temporary.
std::vector<std::string> append_temporaries(const std::string& prefix);

/// True if the append temporaries in `dirs` (all of them below `prefix`),
/// left by a killed append, are to replace their meta.json files (the append
/// had replaced the top one, and every temporary has its rows), false if
/// they are to be removed. See NOTE [Appending rows].
bool append_rolls_forward(
    const std::string& prefix, const std::vector<std::string>& dirs);

/// Applies that rule on disk: renames or removes the temporaries.
void recover_append(const std::string& prefix);

/// Saves `td` (the body of memmap, memmap_ and memmap_like).
TensorDict save_dict(
    const TensorDict& td,
    const MemmapOptions& options,
    bool like,
    bool inplace);

}  // namespace detail
TENSORDICT_END_NAMESPACE
