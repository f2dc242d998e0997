#pragma once

// The save engine behind TensorDict::memmap, memmap_, memmap_like,
// make_memmap and the lazy-stack memmap. See NOTE [Memmap layout].

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "detail/tensor_dict_impl.h"
#include "tensordict/fwd.h"
#include "tensordict/options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// The `_format_version` and `_class` members of a meta.json.
Json format_members(const char* class_id);

/// One save: `plan_dict` checks every key and decides every file (creating
/// the directories), `run` writes the leaves and then the meta.json files,
/// children before parents, and `mark_memmapped` flags the written dicts.
class SavePlan {
 public:
  /// `like`: size files without copying data; `inplace`: the destination
  /// dicts are the sources (memmap_).
  SavePlan(const MemmapOptions& options, bool like, bool inplace);
  SavePlan(const SavePlan&) = delete;
  SavePlan& operator=(const SavePlan&) = delete;
  ~SavePlan();

  /// Queues `dir` to be created by `run` if needed (its parents too for a
  /// root) and its meta.json removed. See NOTE [Interrupted saves].
  void prepare_directory(const std::string& dir, bool is_root);
  /// Plans `src` into directory `dir` (empty: anonymous shared memory),
  /// filling `dest` (an empty dict, or `src` itself in place).
  void plan_dict(
      const TensorDict& src,
      const TensorDict& dest,
      const std::string& dir,
      const std::optional<NestedKey>& key,
      bool is_root);
  /// Queues a meta.json to write after those already planned.
  void add_meta(std::string path, std::string content);
  /// Writes everything planned.
  void run();
  /// Marks the planned dicts memmapped to their directories.
  void mark_memmapped();
  /// Returns the file or directory name of `key` (encoded, checked for
  /// reserved names, unsafe names and length); throws naming `full_key`.
  std::string checked_name(
      const std::string& key,
      const std::optional<NestedKey>& full_key,
      bool is_collection) const;

 private:
  struct LeafJob;
  struct MetaJob;

  void plan_leaf(
      const at::Tensor& tensor,
      const TensorDict& dest,
      const std::string& key,
      const NestedKey& full,
      const std::string& dir,
      const std::string& name);
  void write_leaf(LeafJob& job);

  const MemmapOptions& options_;
  bool like_;
  bool inplace_;
  int64_t total_bytes_ = 0;
  std::vector<LeafJob> leaves_;
  std::vector<MetaJob> metas_;
  std::vector<std::pair<std::string, bool>> directories_;  // (dir, is_root)
  std::vector<std::pair<ImplPtr, std::string>> memmapped_;
};

/// Saves `td` (the body of memmap, memmap_ and memmap_like).
TensorDict save_dict(
    const TensorDict& td,
    const MemmapOptions& options,
    bool like,
    bool inplace);

}  // namespace detail
TENSORDICT_END_NAMESPACE
