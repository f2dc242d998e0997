// Saving: TensorDict::memmap and friends. A save is planned first (every
// directory created, every leaf file and meta.json decided, every key
// checked), then the leaf files are written, possibly by several threads,
// then the meta.json files, children before parents. See NOTE [Memmap layout].

#include "memmap/writer.h"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/python_class.h"
#include "core/tensor_dict_impl.h"
#include "io/atomic_file.h"
#include "io/file_io.h"
#include "io/format.h"
#include "memmap/archive.h"
#include "tensordict/errors.h"
#include "tensordict/memmap.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

namespace {

// The longest file name most file systems take (NAME_MAX).
constexpr size_t kMaxFileName = 255;

// Members of a dict's meta.json that are not entries: a key spelled like
// one would be lost (Python) or misread, so it is refused.
constexpr const char* kReservedKeys[] = {
    "shape", "device", "_type", "_format_version", "_class", "_names"};

// dump_json, naming the entry whose text is not UTF-8.
std::string dump_checked(
    const Json& value, bool spaced, bool ascii, const KeyPath& path) {
  try {
    return dump_json(value, spaced, ascii);
  } catch (c10::Error& e) {
    TORCH_RETHROW(e, "while saving ", describe(path));
  }
}

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

// Prepares a leaf's bytes: on the CPU, contiguous, conj/neg resolved.
at::Tensor leaf_bytes(const at::Tensor& tensor) {
  if (tensor.is_cpu() && !tensor.is_conj() && !tensor.is_neg() &&
      tensor.is_contiguous()) {
    return tensor;  // its bytes as they are, without a dispatched op
  }
  at::Tensor t = tensor.detach();
  if (!t.device().is_cpu()) {
    t = t.cpu();
  }
  return t.resolve_conj().resolve_neg().contiguous();
}

}  // namespace

void append_member(Json& object, std::string key, Json value) {
  static_cast<Json::object_t::Container&>(object.get_ref<Json::object_t&>())
      .emplace_back(std::move(key), std::move(value));
}

Json leaf_meta(
    std::string device, c10::IntArrayRef shape, c10::ScalarType dtype) {
  Json entry = Json::object();
  auto& members =
      static_cast<Json::object_t::Container&>(entry.get_ref<Json::object_t&>());
  members.reserve(4);
  members.emplace_back("device", std::move(device));
  members.emplace_back("shape", shape.vec());
  members.emplace_back("dtype", dtype_name(dtype));
  members.emplace_back("is_nested", false);
  return entry;
}

Json format_members(const char* class_id) {
  Json members = Json::object();
  members["_format_version"] = kMemmapFormatVersion;
  members["_class"] = class_id;
  return members;
}

struct SavePlan::LeafJob {
  at::Tensor source;
  std::string path;         // empty: anonymous shared memory
  std::string link_source;  // the file `path` becomes a second name of
  std::string what;
  ImplPtr dest;
  std::string dest_key;
  at::Tensor result;
  bool created = false;  // written in place, where no file was
};

struct SavePlan::MetaJob {
  std::string path;
  std::string content;
};

void SavePlan::add_meta(std::string path, std::string content) {
  metas_.push_back({std::move(path), std::move(content)});
}

SavePlan::SavePlan(const MemmapOptions& options, bool like, bool inplace)
    : options_(options), like_(like), inplace_(inplace) {}

SavePlan::~SavePlan() = default;

std::string SavePlan::begin(const std::string& prefix) {
  std::string root = prefix;
  while (root.size() > 1 && root.back() == '/') {
    root.pop_back();
  }
  std::string name = root.substr(root.find_last_of('/') + 1);
  TORCH_CHECK_VALUE(
      !options_.atomic() || !prefix.empty(),
      "atomic(true) needs a prefix to write the directory to");
  if (root.empty() || name.empty() || name == "." || name == "..") {
    TORCH_CHECK_VALUE(
        !options_.atomic(),
        "atomic(true) cannot replace ",
        prefix,
        ": name the directory itself");
    return prefix;
  }
  remove_stale_siblings(root);
  PathKind kind = path_kind(root);
  if (options_.atomic()) {
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
          options_.existsok(), prefix, " is not empty and existsok is false");
      TORCH_CHECK(
          path_kind(join_path(root, "meta.json")) == PathKind::kFile,
          "Refusing to replace ",
          prefix,
          " with atomic(true): it is not empty and holds no saved tensordict "
          "(no meta.json).");
    }
  } else if (
      kind != PathKind::kMissing &&
      (!options_.existsok() || !holds_only_a_save(root, 0))) {
    return prefix;
  }
  // See NOTE [Failed saves]: a fresh save is staged too, so that a failure
  // leaves nothing at the prefix.
  fresh_ = kind == PathKind::kMissing;
  final_root_ = root;
  staging_root_ = SpareTrees::instance().take(root);
  reuses_spare_ = !staging_root_.empty();
  if (reuses_spare_ && !options_.keep_spare()) {
    try {
      remove_tree(staging_root_);
    } catch (const c10::Error&) {
      // Kept, for the exit to remove.
      SpareTrees::instance().put(root, staging_root_);
    }
    reuses_spare_ = false;
  }
  if (!reuses_spare_) {
    staging_root_ = temporary_sibling(root, "tmp");
  }
  return staging_root_;
}

std::string SavePlan::final_path(const std::string& path) const {
  if (staging_root_.empty() ||
      path.compare(0, staging_root_.size(), staging_root_) != 0) {
    return path;
  }
  return final_root_ + path.substr(staging_root_.size());
}

void SavePlan::prepare_directory(const std::string& dir, bool is_root) {
  // Planning touches no file, so that a key refused while planning leaves
  // an earlier save in the same place intact; run() creates the
  // directories, parents first.
  directories_.emplace_back(dir, is_root);
}

std::string SavePlan::checked_name(
    std::string_view key, const KeyPath& full_key, bool is_collection) const {
  for (const char* reserved : kReservedKeys) {
    TORCH_CHECK(
        key != reserved,
        "cannot save ",
        describe(full_key),
        ": the key '",
        key,
        "' would collide with the '",
        reserved,
        "' member of meta.json; rename it first");
  }
  std::string name;
  if (options_.robust_key()) {
    name = encode_key(key);
  } else {
    TORCH_CHECK(
        is_safe_legacy_key(key, is_collection) && !key.empty(),
        "cannot save ",
        describe(full_key),
        " with robust_key(false): the key is not a safe file name (it is "
        "empty, '.', '..', starts with a drive letter such as 'C:', or holds "
        "'/', '\\\\' or a NUL); use robust_key(true)");
    name = std::string(key);
  }
  const size_t length = name.size() + (is_collection ? 0 : 7);
  TORCH_CHECK(
      length <= kMaxFileName,
      "cannot save ",
      describe(full_key),
      ": its file name would be ",
      length,
      " bytes long, more than the ",
      kMaxFileName,
      " that file systems accept");
  return name;
}

struct SavePlan::Level {
  const TensorDictImpl* src = nullptr;  // null for a lazy stack
  TensorDict dest;
  // A lazy stack entry's level: its elements' destinations, in order.
  std::vector<TensorDict> stack_elements;
  std::string dir;         // empty: anonymous shared memory
  std::string fields_dir;  // `dir`, or its _tensordict for a tensorclass
  Json meta = Json::object();
  std::unordered_set<std::string> names;  // file names taken
};

void SavePlan::plan_dict(
    const TensorDict& src,
    const TensorDict& dest,
    const std::string& dir,
    KeyPath path,
    bool is_root) {
  open_level(src, dest, dir, is_root);
  walk(*src.unsafeGetImpl(), *this, path);
  leave_dict(path, src);
}

void SavePlan::open_level(
    const TensorDict& src, TensorDict dest, std::string dir, bool is_root) {
  Level& level = levels_.emplace_back();
  level.src = src.unsafeGetImpl();
  level.dest = std::move(dest);
  level.dir = std::move(dir);
  level.fields_dir = level.dir;
  // Room for an entry per key and the members leave_dict adds.
  level.meta.get_ref<Json::object_t&>().reserve(level.src->nodes().size() + 8);
  if (!level.dir.empty()) {
    prepare_directory(level.dir, is_root);
    // A Python tensorclass keeps its fields one directory down.
    if (!level.src->python_class.empty()) {
      level.fields_dir = join_path(level.dir, "_tensordict");
      prepare_directory(level.fields_dir, /*is_root=*/false);
    }
  }
}

std::string SavePlan::entry_name(const KeyPath& path, bool is_collection) {
  Level& level = levels_.back();
  if (level.dir.empty()) {
    return "";
  }
  std::string name = checked_name(path.back(), path, is_collection);
  const std::string file = is_collection ? name : name + ".memmap";
  TORCH_CHECK(
      level.names.insert(file).second,
      "cannot save ",
      path.to_string(),
      ": its file name '",
      file,
      "' is taken by another entry");
  return name;
}

bool SavePlan::enter_lazy_stack(
    const KeyPath& path, const LazyStackedTensorDict& stack) {
  const std::string name = entry_name(path, /*is_collection=*/true);
  const std::string& cls = stack.python_class();
  append_member(
      levels_.back().meta,
      std::string(path.back()),
      {{"type", cls.empty() ? "LazyStackedTensorDict" : class_name_of(cls)}});
  const std::string parent_dir = levels_.back().fields_dir;
  Level& level = levels_.emplace_back();  // invalidates references into levels_
  if (!name.empty()) {
    level.dir = join_path(parent_dir, name);
    prepare_directory(level.dir, /*is_root=*/false);
  }
  level.fields_dir = level.dir;
  // A Python tensorclass over a lazy stack keeps the stack one directory
  // down, as for a dict.
  if (!level.dir.empty() && !cls.empty()) {
    level.fields_dir = join_path(level.dir, "_tensordict");
    prepare_directory(level.fields_dir, /*is_root=*/false);
  }
  return true;
}

void SavePlan::leave_lazy_stack(
    const KeyPath& path, const LazyStackedTensorDict& stack) {
  Level level = std::move(levels_.back());
  levels_.pop_back();
  if (!inplace_) {
    LazyStackedTensorDict dest = lazy_stack(
        level.stack_elements, stack.stack_dim(), stack.stack_dim_name());
    if (!stack.python_class().empty()) {
      dest.set_python_class(stack.python_class());
    }
    levels_.back().dest.unsafeGetImpl()->append(
        std::string(path.back()), Value(std::move(dest)));
  }
  if (level.dir.empty()) {
    return;
  }
  const bool spaced = options_.json_style() == JsonStyle::kSpaced;
  add_meta(
      join_path(level.fields_dir, "meta.json"),
      dump_checked(lazy_stack_meta(stack), spaced, spaced, path));
  if (!stack.python_class().empty()) {
    Json class_meta = Json::object();
    class_meta["_type"] = stack.python_class();
    add_meta(
        join_path(level.dir, "meta.json"),
        dump_checked(class_meta, spaced, spaced, path));
  }
}

Json lazy_stack_meta(const LazyStackedTensorDict& stack) {
  Json meta = Json::object();
  meta["_type"] = kLazyStackType;
  meta.update(format_members("tensordict:LazyStackedTensorDict"));
  meta["stack_dim"] = stack.stack_dim();
  if (const auto& name = stack.stack_dim_name()) {
    meta["stack_dim_name"] = *name;
  } else {
    meta["stack_dim_name"] = nullptr;
  }
  return meta;
}

bool SavePlan::enter_dict(const KeyPath& path, const TensorDict& dict) {
  if (levels_.back().src == nullptr) {
    // An element of the lazy stack being planned: directory "0", "1", ...
    Level& stack_level = levels_.back();
    const TensorDictImpl& impl = *dict.unsafeGetImpl();
    TensorDict dest = dict;
    if (!inplace_) {
      dest =
          make_tensordict(impl.batch_size, c10::Device(c10::kCPU), impl.names);
      dest.unsafeGetImpl()->python_class = impl.python_class;
      stack_level.stack_elements.push_back(dest);
    }
    std::string dir =
        stack_level.dir.empty()
            ? ""
            : join_path(stack_level.fields_dir, std::string(path.back()));
    open_level(dict, std::move(dest), std::move(dir), /*is_root=*/false);
    return true;
  }
  const std::string name = entry_name(path, /*is_collection=*/true);
  Level& parent = levels_.back();
  const std::string key(path.back());
  const TensorDictImpl& impl = *dict.unsafeGetImpl();
  TensorDict dest = dict;
  if (!inplace_) {
    dest = make_tensordict(impl.batch_size, c10::Device(c10::kCPU), impl.names);
    dest.unsafeGetImpl()->python_class = impl.python_class;
    parent.dest.unsafeGetImpl()->append(key, dest);
  }
  const std::string& cls = impl.python_class;
  append_member(
      parent.meta,
      key,
      {{"type", cls.empty() ? "TensorDict" : class_name_of(cls)}});
  std::string dir = name.empty() ? "" : join_path(parent.fields_dir, name);
  open_level(dict, std::move(dest), std::move(dir), /*is_root=*/false);
  return true;
}

void SavePlan::leave_dict(const KeyPath& path, const TensorDict& /*dict*/) {
  Level level = std::move(levels_.back());
  levels_.pop_back();
  TensorDictImpl& out = *level.dest.unsafeGetImpl();
  if (inplace_) {
    out.device = c10::Device(c10::kCPU);
  }
  memmapped_.emplace_back(ImplPtr::reclaim_copy(&out), level.dir);
  if (level.dir.empty()) {
    return;
  }
  const TensorDictImpl& impl = *level.src;
  Json& meta = level.meta;
  meta["shape"] = impl.batch_size;
  meta["device"] = "cpu";
  meta["_type"] = kTensorDictType;
  meta.update(format_members("tensordict:TensorDict"));
  if (!impl.names.empty()) {
    Json names_json = Json::array();
    for (const auto& n : impl.names) {
      names_json.push_back(n ? Json(*n) : Json(nullptr));
    }
    meta["_names"] = std::move(names_json);
  }
  const bool spaced = options_.json_style() == JsonStyle::kSpaced;
  add_meta(
      join_path(level.fields_dir, "meta.json"),
      dump_checked(meta, spaced, spaced, path));
  if (!impl.python_class.empty()) {
    Json class_meta = Json::object();
    class_meta["_type"] = impl.python_class;
    add_meta(
        join_path(level.dir, "meta.json"),
        dump_checked(class_meta, spaced, spaced, path));
  }
}

void SavePlan::non_tensor(const KeyPath& path, const Value& value) {
  const std::string name = entry_name(path, /*is_collection=*/true);
  Level& level = levels_.back();
  const std::string key(path.back());
  if (!inplace_) {
    level.dest.unsafeGetImpl()->append(key, value);
  }
  if (name.empty()) {
    return;
  }
  const std::string dir = join_path(level.fields_dir, name);
  prepare_directory(dir, /*is_root=*/false);
  append_member(level.meta, key, {{"type", value.type_name()}});
  add_meta(
      join_path(dir, "meta.json"),
      non_tensor_meta(value, options_.json_style(), path));
}

std::string non_tensor_meta(
    const Value& value, JsonStyle style, const KeyPath& path) {
  Json meta = Json::object();
  const bool ascii = style == JsonStyle::kSpaced;
  if (value.is_non_tensor_data()) {
    meta["_type"] = kNonTensorDataType;
    meta["data"] = value.non_tensor_data().data();
    meta["_metadata"] = nullptr;
    meta["_is_non_tensor"] = true;
    return dump_checked(meta, /*spaced=*/ascii, ascii, path);
  }
  meta["_type"] = kNonTensorStackType;
  meta.update(format_members("tensordict:NonTensorStack"));
  meta["stack_dim"] = 0;
  // Python writes the device the stack was built with, which its loader
  // leaves unset: null, also for stacks that a dict moved to its device.
  meta["device"] = nullptr;
  meta["data"] = value.non_tensor_stack().tolist();
  // Python writes a stack's meta.json compact in both styles.
  return dump_checked(meta, /*spaced=*/false, ascii, path);
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

void SavePlan::leaf(const KeyPath& path, const at::Tensor& tensor) {
  const std::string name = entry_name(path, /*is_collection=*/false);
  Level& level = levels_.back();
  const std::string key(path.back());
  const std::string what = path.to_string();
  TORCH_CHECK(
      !tensor.is_nested(),
      "cannot save ",
      what,
      ": nested tensors are not supported by memmap yet");
  TORCH_CHECK(
      tensor.layout() == c10::kStrided,
      "cannot save ",
      what,
      ": only strided tensors can be memory-mapped, got layout ",
      tensor.layout());
  TORCH_CHECK(
      is_saveable_dtype(tensor.scalar_type()),
      "cannot save ",
      what,
      ": Python tensordict cannot load the dtype ",
      dtype_name(tensor.scalar_type()));
  LeafJob job;
  job.source = tensor;
  job.path = name.empty() ? "" : join_path(level.fields_dir, name + ".memmap");
  job.what = what;
  job.dest = ImplPtr::reclaim_copy(level.dest.unsafeGetImpl());
  job.dest_key = key;
  if (job.path.empty() && !like_ && !inplace_ &&
      MemoryMappedTensor::is_memmap(tensor)) {
    // memmap() without a prefix of a leaf that is already mapped (a file or
    // shared memory) keeps it, as Python does: `td.memmap().memmap()`
    // returns the same tensors.
    job.result = tensor;
  } else if (const auto backing = mapped_filename(tensor)) {
    const std::string final_file = final_path(job.path);
    if (!job.path.empty() && same_file(*backing, final_file) &&
        tensor.is_contiguous() && tensor.storage_offset() == 0 && !like_) {
      // Already this very file (memmap_ again, or a reloaded dict saved
      // in place): nothing to write, but a staged tree needs its name.
      job.result = tensor;
      if (final_file != job.path) {
        job.link_source = final_file;
      }
    } else {
      TORCH_CHECK(
          options_.copy_existing() || like_,
          "A filename was provided but the tensor already has a file "
          "associated (",
          *backing,
          "). To copy the tensor onto the new location, pass "
          "copy_existing(true). (",
          what,
          ")");
    }
  }
  // existsok(false) refuses an existing file while planning, before any
  // file is written or removed (write_leaf_file checks it again). A staged
  // tree holds only this process's files (a reused spare's).
  TORCH_CHECK(
      options_.existsok() || !staging_root_.empty() || job.path.empty() ||
          job.result.defined() || tensor.numel() == 0 ||
          path_kind(job.path) == PathKind::kMissing,
      "The file ",
      job.path,
      " already exists (",
      what,
      "); pass existsok(true) to overwrite it.");
  if (!inplace_) {
    job.dest->append(key, tensor);
  }
  total_bytes_ += static_cast<int64_t>(tensor.nbytes());
  leaves_.push_back(std::move(job));
  append_member(
      level.meta,
      key,
      leaf_meta(tensor.device().str(), tensor.sizes(), tensor.scalar_type()));
}

void SavePlan::write_leaf(LeafJob& job) {
  if (!job.link_source.empty()) {
    if (reuses_spare_) {
      ready_spare_file(job.path, 0, /*keep=*/false);
    }
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
    if (!like_) {
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
  if (reuses_spare_) {
    ready_spare_file(job.path, src.nbytes(), /*keep=*/true);
  }
  // In place, a leaf file this save creates is removed if it fails; a
  // staged tree goes whole.
  job.created =
      staging_root_.empty() && path_kind(job.path) == PathKind::kMissing;
  try {
    const at::Tensor bytes = like_ ? at::Tensor() : leaf_bytes(src);
    // A null source (memmap_like) writes zeros.
    job.result = write_leaf_file(
        job.path,
        like_ ? nullptr : bytes.data_ptr(),
        src.scalar_type(),
        src.sizes(),
        job.what,
        LeafFileOptions()
            // A staged tree is this save's own: only a reused spare has
            // files in it already.
            .existsok(options_.existsok() || !staging_root_.empty())
            .durable(options_.durable()));
  } catch (c10::Error& e) {
    TORCH_RETHROW(e, "while saving ", job.what);
  }
}

void SavePlan::run() {
  if (staging_root_.empty()) {
    try {
      write_all();
    } catch (...) {
      undo_in_place();
      throw;
    }
    return;
  }
  // The missing parents of a fresh save, created by write_all: removed
  // again if it fails.
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
    write_all();
    swap_in();
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

void SavePlan::undo_in_place() noexcept {
  // The files are removed, deepest first, by name: a directory this save
  // created goes whole; in the directories that were there, the leaf files
  // it created and the meta.json files it wrote. An existing leaf file it
  // overwrote stays, and without its meta.json the directory does not load
  // (see NOTE [Interrupted saves]).
  try {
    for (size_t i = 0; i < metas_written_ && i < metas_.size(); ++i) {
      remove_file(metas_[i].path);
    }
    for (const auto& job : leaves_) {
      if (job.created) {
        remove_file(job.path);
      }
    }
    for (auto dir = created_dirs_.rbegin(); dir != created_dirs_.rend();
         ++dir) {
      remove_tree(*dir);
    }
  } catch (...) {  // NOLINT(bugprone-empty-catch): the first error counts
  }
}

void SavePlan::swap_in() {
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
  for (const auto& job : leaves_) {
    relocate_mapped_filename(job.result, staging_root_, final_root_);
  }
  for (auto& entry : memmapped_) {
    entry.second = final_path(entry.second);
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
    // The new save is in place; the old tree is a hidden sibling that the
    // next save at this prefix removes.
  }
}

void SavePlan::trim_spare() {
  // What the plan writes: any other entry of the spare goes, so that the
  // swapped-in tree holds what a fresh save would.
  std::unordered_set<std::string> dirs;
  std::unordered_set<std::string> files;
  for (const auto& entry : directories_) {
    dirs.insert(entry.first);
  }
  for (const auto& meta : metas_) {
    files.insert(meta.path);
  }
  for (const auto& job : leaves_) {
    if (!job.path.empty() &&
        (job.source.numel() > 0 || !job.link_source.empty())) {
      files.insert(job.path);
    }
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

void SavePlan::write_all() {
  const bool in_place = staging_root_.empty();
  if (reuses_spare_) {
    trim_spare();
  }
  for (const auto& [dir, is_root] : directories_) {
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
        options_.durable());
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
  auto finish = [&](LeafJob& job) {
    write_leaf(job);
    if (options_.progress()) {
      std::lock_guard<std::mutex> lock(progress_mutex);
      done_bytes += static_cast<int64_t>(job.source.nbytes());
      options_.progress()(done_bytes, total_bytes_);
    }
  };
  const size_t threads = std::min<size_t>(
      static_cast<size_t>(std::max<int64_t>(options_.num_threads(), 1)),
      leaves_.size());
  if (threads <= 1) {
    for (auto& job : leaves_) {
      finish(job);
    }
  } else {
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto worker = [&] {
      while (!failed.load()) {
        const size_t i = next.fetch_add(1);
        if (i >= leaves_.size()) {
          return;
        }
        try {
          finish(leaves_[i]);
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
  for (auto& job : leaves_) {
    Node* node = job.dest->find(job.dest_key);
    TORCH_INTERNAL_ASSERT(node != nullptr);
    node->value = Value(job.result);
  }
  // Children's meta.json files were planned before their parents'.
  for (const auto& meta : metas_) {
    if (in_place || options_.durable()) {
      write_file_atomically(meta.path, meta.content, options_.durable());
    } else {
      // No reader looks into a staged tree, and a failed save removes it
      // whole: written over, without a temporary and a rename.
      write_whole_file(meta.path, meta.content);
    }
    ++metas_written_;
  }
}

void SavePlan::for_each_planned_file(
    c10::function_ref<void(const std::string&, const std::string&)> meta,
    c10::function_ref<void(const std::string&, const at::Tensor&)> leaf) const {
  for (const auto& job : metas_) {
    meta(job.path, job.content);
  }
  for (const auto& job : leaves_) {
    if (!job.path.empty() && job.source.numel() > 0) {
      leaf(job.path, job.source);
    }
  }
}

void SavePlan::mark_memmapped() {
  for (auto& [impl, dir] : memmapped_) {
    impl->memmap.is_memmap = true;
    impl->memmap.prefix = dir;
  }
}

TensorDict save_dict(
    const TensorDict& td,
    const MemmapOptions& options,
    bool like,
    bool inplace) {
  const TensorDictImpl& impl = *td.unsafeGetImpl();
  TORCH_CHECK(
      !(inplace && impl.shared),
      "memmap and shared memory are mutually exclusive features.");
  TensorDict dest = td;
  if (!inplace) {
    dest = make_tensordict(impl.batch_size, c10::Device(c10::kCPU), impl.names);
    dest.unsafeGetImpl()->python_class = impl.python_class;
  }
  SavePlan plan(options, like, inplace);
  const std::string root = plan.begin(options.prefix());
  plan.plan_dict(td, dest, root, KeyPath(), /*is_root=*/true);
  plan.run();
  dest.lock_();
  plan.mark_memmapped();
  return dest;
}

}  // namespace detail

TensorDict TensorDict::memmap(const MemmapOptions& options) const {
  if (detail::writes_archive(options, detail::SaveKind::kMemmap)) {
    return detail::save_archive(  // NOTE [Memmap archives]
        *this,
        options,
        /*like=*/false);
  }
  return detail::save_dict(*this, options, /*like=*/false, /*inplace=*/false);
}

std::future<TensorDict> TensorDict::memmap_async(
    const MemmapOptions& options) const {
  TensorDict self = *this;
  return std::async(
      std::launch::async, [self, options] { return self.memmap(options); });
}

std::future<TensorDict> TensorDict::memmap_async_(
    const MemmapOptions& options) {
  TensorDict self = *this;
  return std::async(std::launch::async, [self, options]() mutable {
    self.memmap_(options);
    return self;
  });
}

std::future<TensorDict> TensorDict::memmap_like_async(
    const MemmapOptions& options) const {
  TensorDict self = *this;
  return std::async(std::launch::async, [self, options] {
    return self.memmap_like(options);
  });
}

std::future<TensorDict> TensorDict::save_async(
    const MemmapOptions& options) const {
  return memmap_async(options);
}

TensorDict TensorDict::dumps(const MemmapOptions& options) const {
  return memmap(options);
}

TensorDict& TensorDict::memmap_(const MemmapOptions& options) {
  (void)detail::writes_archive(options, detail::SaveKind::kMemmapInPlace);
  detail::save_dict(*this, options, /*like=*/false, /*inplace=*/true);
  return *this;
}

TensorDict TensorDict::memmap_like(const MemmapOptions& options) const {
  if (detail::writes_archive(options, detail::SaveKind::kMemmapLike)) {
    return detail::save_archive(*this, options, /*like=*/true);
  }
  return detail::save_dict(*this, options, /*like=*/true, /*inplace=*/false);
}

TensorDict TensorDict::save(const MemmapOptions& options) const {
  return memmap(options);
}

bool TensorDict::is_memmap() const noexcept {
  return impl_->memmap.is_memmap;
}

std::optional<std::string> TensorDict::saved_path() const {
  if (impl_->memmap.prefix.empty()) {
    return std::nullopt;
  }
  return impl_->memmap.prefix;
}

namespace {

// The directory holding a memmapped dict's entries.
std::string fields_directory(const detail::TensorDictImpl& impl) {
  return impl.python_class.empty()
             ? impl.memmap.prefix
             : detail::join_path(impl.memmap.prefix, "_tensordict");
}

// Adds `entry` under `key` to the meta.json in `dir`, keeping its style:
// Python re-reads and rewrites the file too, so that entries another
// process added survive.
void add_meta_entry(
    const std::string& dir, const std::string& key, Json entry) {
  const std::string path = detail::join_path(dir, "meta.json");
  const std::string text = detail::read_small_file(path, int64_t{1} << 30);
  Json meta = detail::parse_meta_json(text, 1 << 20, path);
  meta[key] = std::move(entry);
  const bool spaced = text.find("\": ") != std::string::npos;
  detail::write_file_atomically(
      path, detail::dump_json(meta, spaced, spaced), false);
}

}  // namespace

at::Tensor TensorDict::make_memmap(
    const NestedKey& key, c10::IntArrayRef shape, c10::ScalarType dtype) {
  TORCH_CHECK(
      impl_->memmap.is_memmap && !impl_->memmap.prefix.empty(),
      "make_memmap needs a dict memmapped to a directory (is_memmap() and "
      "saved_path()); ",
      key.to_string(),
      " cannot be added to this one");
  TORCH_CHECK_VALUE(
      detail::is_saveable_dtype(dtype),
      "make_memmap: Python tensordict cannot load the dtype ",
      detail::dtype_name(dtype));
  MemmapOptions naming;  // default key encoding, for checked_name
  detail::SavePlan plan(naming, /*like=*/true, /*inplace=*/true);
  const detail::KeyPath full(key);
  // The deepest existing level, and the names of the levels to create.
  detail::TensorDictImpl* level = impl_.get();
  size_t depth = 0;
  for (; depth + 1 < key.size(); ++depth) {
    const std::string part(key[depth]);
    const detail::Node* node = level->find(part);
    if (node == nullptr) {
      break;
    }
    TENSORDICT_CHECK_KEY(
        node->value.is_tensordict(),
        "make_memmap: ",
        key.to_string(),
        " walks through the entry '",
        part,
        "', which is not a tensordict");
    level = node->value.tensordict().unsafeGetImpl();
  }
  const std::string last(key[key.size() - 1]);
  TORCH_CHECK(
      depth + 1 < key.size() || level->find(last) == nullptr,
      "make_memmap: the key ",
      key.to_string(),
      " already exists");
  TORCH_CHECK_VALUE(
      shape.size() >= level->batch_size.size() &&
          shape.slice(0, level->batch_size.size()) ==
              c10::IntArrayRef(level->batch_size),
      "make_memmap: the shape ",
      shape,
      " of ",
      key.to_string(),
      " does not start with the batch size ",
      c10::IntArrayRef(level->batch_size));
  // The files: new directories and the leaf first, then the new levels'
  // meta.json files, deepest first, and last the one rewrite of an existing
  // meta.json that makes them part of the tree, so that a kill leaves the
  // old tree or the new one.
  std::vector<std::string> new_dirs;
  std::string dir = fields_directory(*level);
  for (size_t i = depth; i + 1 < key.size(); ++i) {
    dir = detail::join_path(
        dir, plan.checked_name(key[i], full, /*is_collection=*/true));
    new_dirs.push_back(dir);
  }
  const std::string file = detail::join_path(
      dir, plan.checked_name(last, full, /*is_collection=*/false) + ".memmap");
  // On an error, what was created goes again: the first new directory
  // (holding the rest), or the leaf file. The existing meta.json is
  // rewritten last, so until then the tree is the old one.
  const std::string created = new_dirs.empty() ? file : new_dirs.front();
  const bool was_missing =
      detail::path_kind(created) == detail::PathKind::kMissing;
  at::Tensor tensor;
  try {
    for (const auto& new_dir : new_dirs) {
      detail::ensure_directory(new_dir, false, false, false);
    }
    tensor = MemoryMappedTensor::empty(shape, dtype, file);
    Json entry = detail::leaf_meta("cpu", shape, dtype);
    std::string entry_key = last;
    for (size_t i = new_dirs.size(); i-- > 0;) {
      Json meta = Json::object();
      meta[entry_key] = std::move(entry);
      meta["shape"] = level->batch_size;
      meta["device"] = "cpu";
      meta["_type"] = detail::kTensorDictType;
      meta.update(detail::format_members("tensordict:TensorDict"));
      detail::write_file_atomically(
          detail::join_path(new_dirs[i], "meta.json"),
          detail::dump_json(meta, false, false),
          false);
      entry = {{"type", "TensorDict"}};
      entry_key = std::string(key[depth + i]);
    }
    add_meta_entry(fields_directory(*level), entry_key, std::move(entry));
  } catch (...) {
    try {
      if (was_missing) {
        detail::remove_tree(created);
      }
    } catch (...) {  // NOLINT(bugprone-empty-catch): the first error counts
    }
    throw;
  }
  // The dicts, as the files now say.
  for (size_t i = 0; i < new_dirs.size(); ++i) {
    TensorDict child = detail::make_tensordict(
        level->batch_size, c10::Device(c10::kCPU), level->names);
    detail::TensorDictImpl* child_impl = child.unsafeGetImpl();
    child_impl->memmap.prefix = new_dirs[i];
    child_impl->memmap.is_memmap = true;
    child_impl->locked = level->locked;
    if (level->locked) {
      child_impl->lock_parents.emplace_back(
          detail::ImplPtr::reclaim_copy(level));
    }
    level->append(std::string(key[depth + i]), child);
    level = child_impl;
  }
  level->append(last, tensor);
  return tensor;
}

TENSORDICT_END_NAMESPACE
