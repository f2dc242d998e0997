// The directory sink: a SavePlan written into directories, in place (with
// an undo log) or into a StagedTree that is swapped in. The leaf files are
// written first, possibly by several threads, then the meta.json files,
// children before parents. See NOTE [Crash-safe overwrite] and NOTE
// [Failed saves] in io/staged_tree.cpp.

#include "memmap/directory_sink.h"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/tensor_dict_impl.h"
#include "io/atomic_file.h"
#include "io/file_io.h"
#include "io/format.h"
#include "memmap/append.h"
#include "memmap/meta.h"
#include "tensordict/value.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

namespace {

// The deepest directory nesting looked at when deciding to stage.
constexpr int kMaxStagedDepth = 128;
// The largest meta.json read when deciding to stage.
constexpr int64_t kMaxStagedMetaBytes = int64_t{64} << 20;

bool is_digits(const std::string& name) {
  return !name.empty() &&
         name.find_first_not_of("0123456789") == std::string::npos;
}

// True if `dir` is a directory (not a symlink) holding a meta.json and only
// the entries a save writes: the leaf files and sub-directories its
// meta.json names (each such a directory in turn), a tensorclass's
// _tensordict, a lazy stack's numbered elements, and the temporaries of an
// interrupted meta.json write.
bool holds_only_a_save(const std::string& dir, int depth) {
  if (depth > kMaxStagedDepth || path_kind(dir) != PathKind::kDirectory) {
    return false;
  }
  try {
    const std::string meta_path = join_path(dir, "meta.json");
    if (path_kind(meta_path) != PathKind::kFile) {
      return false;
    }
    const Json meta = parse_meta_json(
        read_small_file(meta_path, kMaxStagedMetaBytes),
        kMaxStagedDepth,
        meta_path);
    std::unordered_set<std::string> names;
    for (const auto& item : meta.items()) {
      names.insert(item.key());
      names.insert(encode_key(item.key()));
    }
    const bool stack = meta.contains("stack_dim");
    constexpr std::string_view kLeafSuffix = ".memmap";
    for (const auto& [name, kind] : list_directory(dir)) {
      if (name == "meta.json" || name.rfind("meta.json.tmp-", 0) == 0 ||
          name == ".meta.json.append.tmp") {
        continue;
      }
      if (kind == PathKind::kFile && name.size() > kLeafSuffix.size() &&
          name.compare(
              name.size() - kLeafSuffix.size(),
              kLeafSuffix.size(),
              kLeafSuffix) == 0 &&
          names.count(name.substr(0, name.size() - kLeafSuffix.size())) != 0) {
        continue;
      }
      const bool named = names.count(name) != 0 || name == "_tensordict" ||
                         (stack && is_digits(name));
      if (kind == PathKind::kDirectory && named &&
          holds_only_a_save(join_path(dir, name), depth + 1)) {
        continue;
      }
      return false;
    }
    return true;
  } catch (const c10::Error&) {
    return false;  // unreadable: not known to be a save, so left in place
  }
}

// Writes one plan into one tree; keeps what it created in place, to
// remove it if the save fails.
class DirectorySink {
 public:
  DirectorySink(SavePlan& plan, const StagedTree& tree)
      : plan_(plan), tree_(tree) {}

  // Writes everything; in place, removes what it wrote if that fails.
  void run() {
    try {
      write_all();
    } catch (...) {
      if (!tree_.staged()) {
        undo_in_place();
      }
      throw;
    }
  }

 private:
  void write_leaf(size_t i);
  void write_all();
  // Removes what an in-place write_all that threw had created.
  void undo_in_place() noexcept;
  // Removes the entries of a reused spare tree that the plan does not
  // write. See NOTE [Spare trees] in io/staged_tree.cpp.
  void keep_planned_files();

  SavePlan& plan_;
  const StagedTree& tree_;
  // What write_all created (in place: to remove if it fails).
  std::vector<std::string> created_dirs_;
  std::vector<char> created_;  // per leaf: its file is new (written in place)
  size_t metas_written_ = 0;
};

void DirectorySink::keep_planned_files() {
  // What the plan writes: any other entry of the spare goes, so that the
  // swapped-in tree holds what a fresh save would.
  std::unordered_set<std::string> dirs;
  std::unordered_set<std::string> files;
  for (const auto& entry : plan_.directories()) {
    dirs.insert(entry.path);
  }
  for (const auto& meta : plan_.metas()) {
    files.insert(meta.path);
  }
  for (const auto& job : plan_.leaves()) {
    if (!job.path.empty() &&
        (job.source.numel() > 0 || !job.link_source.empty())) {
      files.insert(job.path);
    }
  }
  tree_.keep_only(dirs, files);
}

void DirectorySink::write_leaf(size_t i) {
  SavePlan::LeafJob& job = plan_.leaves()[i];
  if (!job.link_source.empty()) {
    tree_.ready_file(job.path, 0, /*keep=*/false);
    if (hard_link(job.link_source, job.path)) {
      return;
    }
    job.result = at::Tensor();  // no hard links here: copy the file
  }
  if (job.result.defined()) {
    return;
  }
  const at::Tensor& src = job.source;
  if (job.path.empty()) {
    job.result = shared_memory_tensor(src.sizes(), src.scalar_type());
    if (!plan_.like()) {
      job.result.copy_(src.detach());
    }
    return;
  }
  if (src.numel() == 0) {
    // Python (torch.from_file) writes no file for an empty tensor.
    job.result =
        at::empty(src.sizes(), at::TensorOptions().dtype(src.scalar_type()));
    return;
  }
  tree_.ready_file(job.path, src.nbytes(), /*keep=*/true);
  // In place, a leaf file this save creates is removed if it fails; a
  // staged tree goes whole.
  created_[i] = !tree_.staged() && path_kind(job.path) == PathKind::kMissing;
  try {
    // memmap_like keeps the bytes of the leaf file the prefix holds, as
    // Python does; in place, sizing the file keeps them, and a staged tree
    // copies them from the tree it replaces.
    std::string old_file;
    if (plan_.like() && tree_.staged()) {
      old_file = tree_.final_path(job.path);
      if (old_file == job.path || path_kind(old_file) != PathKind::kFile) {
        old_file.clear();
      } else if (path_kind(job.path) != PathKind::kMissing) {
        remove_file(job.path);  // a reused spare's stale file
      }
    }
    const at::Tensor bytes = plan_.like() ? at::Tensor() : leaf_bytes(src);
    // A null source (memmap_like) writes zeros.
    job.result = write_leaf_file(
        job.path,
        plan_.like() ? nullptr : bytes.data_ptr(),
        src.scalar_type(),
        src.sizes(),
        job.what,
        LeafFileOptions()
            // A staged tree is this save's own: only a reused spare has
            // files in it already.
            .existsok(plan_.options().existsok() || tree_.staged())
            .durable(plan_.options().durable()));
    if (!old_file.empty()) {
      const at::Tensor old_bytes =
          map_whole_file(old_file, /*writable=*/false, job.what);
      const size_t n =
          std::min(static_cast<size_t>(old_bytes.numel()), job.result.nbytes());
      if (n > 0) {
        std::memcpy(job.result.data_ptr(), old_bytes.const_data_ptr(), n);
      }
      if (plan_.options().durable()) {
        sync_mapping(job.result);
      }
    }
  } catch (c10::Error& e) {
    TORCH_RETHROW(e, "while saving ", job.what);
  }
}

void DirectorySink::write_all() {
  const bool in_place = !tree_.staged();
  if (tree_.reuses_spare()) {
    keep_planned_files();
  }
  for (const auto& [dir, is_root] : plan_.directories()) {
    if (in_place) {
      // Remembered, with its missing parents, to be removed on an error.
      std::vector<std::string> missing;
      for (std::string d = dir;
           !d.empty() && path_kind(d) == PathKind::kMissing;) {
        missing.push_back(d);
        const size_t slash = d.find_last_of('/');
        if (!is_root || slash == std::string::npos || slash == 0) {
          break;
        }
        d.resize(slash);
      }
      created_dirs_.insert(
          created_dirs_.end(), missing.rbegin(), missing.rend());
    }
    ensure_directory(
        dir,
        /*parents=*/is_root,
        /*allow_symlink=*/is_root,
        plan_.options().durable());
    if (in_place) {
      // NOTE [Interrupted saves]: without its meta.json a directory does
      // not load, so until this save writes it again, no reader can take a
      // half-rewritten directory for a complete one.
      remove_file(join_path(dir, "meta.json"));
      // A killed append's leftover would be read for the new meta.json.
      remove_file(append_temporary(dir));
    }
  }
  std::mutex progress_mutex;
  int64_t done_bytes = 0;
  std::vector<SavePlan::LeafJob>& leaves = plan_.leaves();
  created_.assign(leaves.size(), 0);
  auto finish = [&](size_t i) {
    write_leaf(i);
    const SavePlan::LeafJob& job = leaves[i];
    if (plan_.options().progress()) {
      std::lock_guard<std::mutex> lock(progress_mutex);
      done_bytes += static_cast<int64_t>(job.source.nbytes());
      plan_.options().progress()(done_bytes, plan_.total_bytes());
    }
  };
  const size_t threads = std::min<size_t>(
      static_cast<size_t>(std::max<int64_t>(plan_.options().num_threads(), 1)),
      leaves.size());
  if (threads <= 1) {
    for (size_t i = 0; i < leaves.size(); ++i) {
      finish(i);
    }
  } else {
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto worker = [&] {
      while (!failed.load()) {
        const size_t i = next.fetch_add(1);
        if (i >= leaves.size()) {
          return;
        }
        try {
          finish(i);
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) {
            error = std::current_exception();
          }
          failed = true;
        }
      }
    };
    std::vector<std::thread> pool;
    pool.reserve(threads - 1);
    for (size_t t = 1; t < threads; ++t) {
      pool.emplace_back(worker);
    }
    worker();
    for (auto& thread : pool) {
      thread.join();
    }
    if (error) {
      std::rethrow_exception(error);
    }
  }
  for (auto& job : leaves) {
    Node* node = job.dest->find(job.dest_key);
    TORCH_INTERNAL_ASSERT(node != nullptr);
    node->value = Value(job.result);
  }
  // Children's meta.json files were planned before their parents'.
  for (const auto& meta : plan_.metas()) {
    if (in_place || plan_.options().durable()) {
      write_file_atomically(meta.path, meta.content, plan_.options().durable());
    } else {
      // No reader looks into a staged tree, and a failed save removes it
      // whole: written over, without a temporary and a rename.
      write_whole_file(meta.path, meta.content);
    }
    ++metas_written_;
  }
}

void DirectorySink::undo_in_place() noexcept {
  // The files are removed, deepest first, by name: a directory this save
  // created goes whole; in the directories that were there, the leaf files
  // it created and the meta.json files it wrote. An existing leaf file it
  // overwrote stays, and without its meta.json the directory does not load
  // (see NOTE [Interrupted saves]).
  try {
    const auto& metas = plan_.metas();
    for (size_t i = 0; i < metas_written_ && i < metas.size(); ++i) {
      remove_file(metas[i].path);
    }
    const auto& leaves = plan_.leaves();
    for (size_t i = 0; i < leaves.size() && i < created_.size(); ++i) {
      if (created_[i] != 0) {
        remove_file(leaves[i].path);
      }
    }
    for (auto dir = created_dirs_.rbegin(); dir != created_dirs_.rend();
         ++dir) {
      remove_tree(*dir);
    }
  } catch (...) {  // NOLINT(bugprone-empty-catch): the first error counts
  }
}

}  // namespace

StagedTree stage_directory(const MemmapOptions& options) {
  return StagedTree::begin(
      options.prefix(),
      StagingOptions()
          .atomic(options.atomic())
          .existsok(options.existsok())
          .keep_spare(options.keep_spare())
          .durable(options.durable()),
      [](const std::string& dir) { return holds_only_a_save(dir, 0); });
}

void write_directory(SavePlan& plan, StagedTree& tree) {
  DirectorySink sink(plan, tree);
  if (!tree.staged()) {
    sink.run();
    return;
  }
  tree.write_and_commit([&] { sink.run(); });
  for (const auto& job : plan.leaves()) {
    relocate_mapped_filename(
        job.result, tree.staging_root(), tree.final_root());
  }
}

void save_non_tensor_root(const Value& value, const MemmapOptions& options) {
  const std::string& dir = options.prefix();
  if (dir.empty()) {
    return;  // no tensor to put in shared memory: nothing to write
  }
  const std::string content =
      non_tensor_meta(value, options.json_style(), KeyPath());
  const bool fresh = path_kind(dir) == PathKind::kMissing;
  ensure_directory(
      dir, /*parents=*/true, /*allow_symlink=*/true, options.durable());
  try {
    write_file_atomically(
        join_path(dir, "meta.json"), content, options.durable());
  } catch (...) {
    if (fresh) {
      ::rmdir(dir.c_str());  // see NOTE [Failed saves]
    }
    throw;
  }
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
