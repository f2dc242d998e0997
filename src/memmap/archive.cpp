// Memmap archives: pack_memmap, unpack_memmap, is_memmap_archive, the
// archive side of TensorDict::memmap/save and of load_memmap. See NOTE
// [Memmap archives] in tensordict/archive.h.
//
// NOTE [Archive CRCs]
// unpack_memmap checks the CRC-32 of every entry it extracts. A load checks
// the CRC-32 of every meta.json and of every compressed leaf (both are read
// whole anyway). A stored leaf is mapped, not read: checking its CRC would
// read every page of the archive on load and defeat the lazy mapping, so it
// is not checked, as in Python (whose `load_memmap` does not either, and
// whose `refresh_archive_checksums` exists because `mode="r+"` writes make
// the CRCs stale). The structure (bounds, overlaps, names) is always
// checked; see NOTE [Zip reader].

#include "memmap/archive.h"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <c10/util/FunctionRef.h>
#include <c10/util/accumulate.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "core/tensor_dict_impl.h"
#include "io/atomic_file.h"
#include "io/format.h"
#include "io/zip.h"
#include "memmap/writer.h"
#include "tensordict/archive.h"
#include "tensordict/memmap.h"
#include "tensordict/tensor_dict.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

constexpr const char* kMetaJson = "meta.json";

std::string archive_label(const std::string& path) {
  return c10::str("archive '", path, "'");
}

class FileSystemFiles final : public TreeFiles {
 public:
  PathKind kind(const std::string& path) const override {
    return path_kind(path);
  }
  std::string read_small(
      const std::string& path, int64_t max_bytes) const override {
    return read_small_file(path, max_bytes);
  }
  std::optional<at::Tensor> map_leaf(
      const std::string& path,
      c10::ScalarType dtype,
      c10::IntArrayRef shape,
      MapMode mode,
      const EntryName& what) const override {
    return map_tensor_file_if_exists(path, dtype, shape, mode, what);
  }
  bool is_archive() const override {
    return false;
  }
};

// An archive mapped once; leaves are views into the mapping.
class ArchiveFiles final : public TreeFiles {
 public:
  ArchiveFiles(std::string root, MapMode mode)
      : root_(std::move(root)), label_(archive_label(root_)), mode_(mode) {
    mapping_ =
        map_whole_file(root_, /*writable=*/mode == MapMode::kReadWrite, label_);
    const auto* data = static_cast<const unsigned char*>(mapping_.data_ptr());
    for (ZipEntry& entry :
         parse_zip(data, static_cast<uint64_t>(mapping_.numel()), label_)) {
      if (entry.is_directory()) {
        add_directory(entry.name.substr(0, entry.name.size() - 1));
        continue;
      }
      const size_t slash = entry.name.rfind('/');
      add_directory(
          slash == std::string::npos ? "" : entry.name.substr(0, slash));
      std::string name = entry.name;
      files_.emplace(std::move(name), std::move(entry));
    }
    for (const auto& [name, entry] : files_) {
      TORCH_CHECK(
          dirs_.count(name) == 0,
          label_,
          ": '",
          name,
          "' is both a file and a directory");
    }
  }

  PathKind kind(const std::string& path) const override {
    const std::optional<std::string> name = entry_name(path);
    if (!name) {
      return PathKind::kMissing;
    }
    if (dirs_.count(*name) != 0) {
      return PathKind::kDirectory;
    }
    return files_.count(*name) != 0 ? PathKind::kFile : PathKind::kMissing;
  }

  std::string read_small(
      const std::string& path, int64_t max_bytes) const override {
    const ZipEntry& entry = file(path);
    TORCH_CHECK(
        entry.size <= static_cast<uint64_t>(max_bytes),
        label_,
        ": entry '",
        entry.name,
        "' has ",
        entry.size,
        " bytes, more than the ",
        max_bytes,
        " accepted (LoadMemmapOptions::max_meta_bytes)");
    const std::vector<unsigned char> bytes =
        zip_entry_bytes(data(), entry, label_);
    return std::string(bytes.begin(), bytes.end());
  }

  std::optional<at::Tensor> map_leaf(
      const std::string& path,
      c10::ScalarType dtype,
      c10::IntArrayRef shape,
      MapMode /*mode*/,
      const EntryName& what) const override {
    const std::optional<std::string> name = entry_name(path);
    const auto it = name ? files_.find(*name) : files_.end();
    if (it == files_.end()) {
      return std::nullopt;
    }
    const ZipEntry& entry = it->second;
    const int64_t itemsize = static_cast<int64_t>(c10::elementSize(dtype));
    const uint64_t nbytes =
        static_cast<uint64_t>(c10::multiply_integers(shape)) *
        static_cast<uint64_t>(itemsize);
    TORCH_CHECK(
        entry.size >= nbytes,
        label_,
        ": entry '",
        entry.name,
        "' of ",
        what,
        " has ",
        entry.size,
        " bytes, but its shape ",
        shape,
        " of ",
        dtype_name(dtype),
        " needs ",
        nbytes);
    const auto options = at::TensorOptions().dtype(dtype);
    if (entry.method != kZipStored) {
      TORCH_CHECK(
          mode_ != MapMode::kReadWrite,
          "cannot load ",
          label_,
          " with mode r+: entry '",
          entry.name,
          "' is compressed, so in-place writes cannot reach the file. "
          "Re-save the archive without compression to make it writable.");
      at::Tensor bytes = take_inflated(entry.name);
      if (!bytes.defined()) {
        bytes = inflate(entry);
      }
      if (nbytes == 0) {
        return at::empty(shape, options);
      }
      return bytes.narrow(0, 0, static_cast<int64_t>(nbytes))
          .view(dtype)
          .view(shape);
    }
    if (nbytes == 0) {
      return at::empty(shape, options);
    }
    if (entry.data_offset % static_cast<uint64_t>(itemsize) != 0) {
      // An archive written by another zip tool, without alignment.
      TORCH_CHECK(
          mode_ != MapMode::kReadWrite,
          "cannot load ",
          label_,
          " with mode r+: the payload of entry '",
          entry.name,
          "' is not aligned (the archive was likely written by another zip "
          "tool), so it must be copied. Re-save it with tensordict.");
      at::Tensor tensor = at::empty(shape, options);
      std::memcpy(tensor.data_ptr(), data() + entry.data_offset, nbytes);
      return tensor;
    }
    // A view sharing the mapping's storage: no copy, and the mapping lives
    // as long as any leaf does.
    return mapping_
        .narrow(
            0,
            static_cast<int64_t>(entry.data_offset),
            static_cast<int64_t>(nbytes))
        .view(dtype)
        .view(shape);
  }

  bool is_archive() const override {
    return true;
  }

  void prefetch_compressed(
      const std::string& dir, int64_t num_threads) const override {
    if (num_threads < 2 || mode_ == MapMode::kReadWrite) {
      return;
    }
    const std::optional<std::string> scope = entry_name(dir);
    if (!scope) {
      return;
    }
    const std::string prefix = scope->empty() ? "" : *scope + "/";
    const std::string suffix = ".memmap";
    std::vector<const ZipEntry*> entries;
    for (const auto& [name, entry] : files_) {
      if (entry.method == kZipDeflated && entry.size > 0 &&
          name.size() > prefix.size() + suffix.size() &&
          name.compare(0, prefix.size(), prefix) == 0 &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) ==
              0) {
        entries.push_back(&entry);
      }
    }
    if (entries.size() < 2) {
      return;
    }
    // Largest first, so that one large leaf does not start last.
    std::sort(entries.begin(), entries.end(), [](auto* a, auto* b) {
      return a->size > b->size;
    });
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t i = next.fetch_add(1); i < entries.size();
           i = next.fetch_add(1)) {
        at::Tensor bytes;
        try {
          bytes = inflate(*entries[i]);
        } catch (const std::exception&) {
          continue;  // its map_leaf inflates it again and throws with its key
        }
        std::lock_guard<std::mutex> lock(inflated_mutex_);
        inflated_[entries[i]->name] = std::move(bytes);
      }
    };
    const size_t threads =
        std::min(static_cast<size_t>(num_threads), entries.size());
    std::vector<std::thread> pool;
    pool.reserve(threads - 1);
    try {
      for (size_t t = 1; t < threads; ++t) {
        pool.emplace_back(worker);
      }
    } catch (const std::system_error&) {
      // Fewer threads than asked (a process limit): the others do the work.
    }
    worker();
    for (auto& thread : pool) {
      thread.join();
    }
  }

 private:
  // The whole uncompressed payload of a deflated `entry`, CRC-checked.
  at::Tensor inflate(const ZipEntry& entry) const {
    check_zip_entry_readable(entry, label_);
    at::Tensor bytes = at::empty(
        {static_cast<int64_t>(entry.size)},
        at::TensorOptions().dtype(at::kByte));
    zip_entry_bytes_into(
        data(), entry, label_, static_cast<unsigned char*>(bytes.data_ptr()));
    return bytes;
  }

  // The payload `prefetch_compressed` inflated for `name`, given up so that
  // its memory goes with the leaf; undefined if there is none.
  at::Tensor take_inflated(const std::string& name) const {
    std::lock_guard<std::mutex> lock(inflated_mutex_);
    const auto it = inflated_.find(name);
    if (it == inflated_.end()) {
      return {};
    }
    at::Tensor bytes = std::move(it->second);
    inflated_.erase(it);
    return bytes;
  }

  const unsigned char* data() const {
    return static_cast<const unsigned char*>(mapping_.data_ptr());
  }

  // The entry name of `path`, which must be the root or below it.
  std::optional<std::string> entry_name(const std::string& path) const {
    if (path == root_) {
      return std::string();
    }
    if (path.size() > root_.size() + 1 &&
        path.compare(0, root_.size(), root_) == 0 &&
        path[root_.size()] == '/') {
      return path.substr(root_.size() + 1);
    }
    return std::nullopt;
  }

  const ZipEntry& file(const std::string& path) const {
    const std::optional<std::string> name = entry_name(path);
    const auto it = name ? files_.find(*name) : files_.end();
    TORCH_CHECK(
        it != files_.end(),
        label_,
        " has no entry '",
        name.value_or(path),
        "'");
    return it->second;
  }

  void add_directory(std::string name) {
    while (dirs_.insert(name).second && !name.empty()) {
      const size_t slash = name.rfind('/');
      name = slash == std::string::npos ? "" : name.substr(0, slash);
    }
  }

  std::string root_;
  std::string label_;
  MapMode mode_;
  at::Tensor mapping_;
  std::map<std::string, ZipEntry> files_;
  std::set<std::string> dirs_;
  mutable std::mutex inflated_mutex_;
  mutable std::map<std::string, at::Tensor> inflated_;
};

// A read-only mapping of a whole file, for packing.
class SourceFile {
 public:
  explicit SourceFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    TORCH_CHECK(
        fd_ >= 0, "cannot open ", path, " to pack it: ", std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      TORCH_CHECK(false, "cannot pack ", path, ": not a regular file");
    }
    size_ = static_cast<uint64_t>(st.st_size);
    if (size_ > 0) {
      void* address =
          ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, /*offset=*/0);
      if (address == MAP_FAILED) {
        const int err = errno;
        ::close(fd_);
        TORCH_CHECK(false, "cannot map ", path, ": ", std::strerror(err));
      }
      data_ = static_cast<const unsigned char*>(address);
    }
  }
  SourceFile(const SourceFile&) = delete;
  SourceFile& operator=(const SourceFile&) = delete;
  ~SourceFile() {
    if (data_ != nullptr) {
      ::munmap(const_cast<unsigned char*>(data_), size_);
    }
    ::close(fd_);
  }
  const unsigned char* data() const {
    return data_;
  }
  uint64_t size() const {
    return size_;
  }

 private:
  std::string path_;
  int fd_ = -1;
  const unsigned char* data_ = nullptr;
  uint64_t size_ = 0;
};

// The files of a memmap directory, in Python's order: meta.json first, then
// the other files by name, then each sub-directory's. Symlinks and special
// files are refused.
void list_files(
    const std::string& dir,
    const std::string& rel,
    std::vector<std::pair<std::string, std::string>>& out) {
  std::vector<std::pair<std::string, PathKind>> entries = list_directory(dir);
  std::sort(entries.begin(), entries.end());
  std::vector<std::string> dirs;
  std::vector<std::string> others;
  for (const auto& [name, kind] : entries) {
    const std::string path = join_path(dir, name);
    TORCH_CHECK(
        kind == PathKind::kFile || kind == PathKind::kDirectory,
        "cannot pack ",
        path,
        ": ",
        kind == PathKind::kSymlink ? "it is a symlink" : "it is a special file",
        "; a memmap directory holds only files and directories");
    if (kind == PathKind::kDirectory) {
      dirs.push_back(name);
    } else if (name == kMetaJson) {
      out.emplace_back(path, rel + name);
    } else {
      others.push_back(name);
    }
  }
  for (const std::string& name : others) {
    out.emplace_back(join_path(dir, name), rel + name);
  }
  for (const std::string& name : dirs) {
    list_files(join_path(dir, name), rel + name + "/", out);
  }
}

std::string real_path(const std::string& path) {
  char* resolved = ::realpath(path.c_str(), nullptr);
  TORCH_CHECK(
      resolved != nullptr, "cannot resolve ", path, ": ", std::strerror(errno));
  std::string out(resolved);
  std::free(resolved);  // NOLINT(cppcoreguidelines-no-malloc)
  return out;
}

std::pair<std::string, std::string> split_parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) {
    return {".", path};
  }
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

uint16_t compression_method(const std::string& compression) {
  std::string name = compression;  // case-blind, as Python's
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) {
    return static_cast<char>(std::tolower(c));
  });
  if (name == "deflate" || name == "deflated") {
    return kZipDeflated;
  }
  TORCH_CHECK_VALUE(
      name == "stored" || name.empty(),
      "unknown compression '",
      compression,
      "'; expected \"stored\" or \"deflate\" (bzip2 and lzma are not "
      "supported here)");
  return kZipStored;
}

bool is_leaf_entry(const std::string& name) {
  return name.size() >= 7 && name.compare(name.size() - 7, 7, ".memmap") == 0;
}

// Where an archive write goes: the file a symlink points to, checked
// before anything is written.
struct ArchiveTarget {
  std::string path;  // as the caller named it, for errors
  std::string file;  // the file replaced (a symlink followed)
  PathKind kind = PathKind::kMissing;
  bool exists = false;
  struct stat old {};
};

ArchiveTarget resolve_target(const std::string& archive_path) {
  ArchiveTarget target;
  target.path = archive_path;
  target.file = archive_path;
  if (path_kind(target.file) == PathKind::kSymlink) {
    target.file = real_path(target.file);  // the file it points to is replaced
  }
  target.kind = path_kind(target.file);
  TORCH_CHECK(
      target.kind == PathKind::kMissing || target.kind == PathKind::kFile,
      "cannot write an archive at ",
      archive_path,
      ": it is an existing ",
      target.kind == PathKind::kDirectory ? "directory" : "non-regular file");
  const auto parent = split_parent(target.file).first;
  TORCH_CHECK(
      path_kind(parent) != PathKind::kMissing,
      "cannot write the archive ",
      archive_path,
      ": its directory ",
      parent,
      " does not exist");
  target.exists = target.kind == PathKind::kFile &&
                  ::stat(target.file.c_str(), &target.old) == 0;
  TORCH_CHECK(
      !target.exists || ::access(target.file.c_str(), W_OK) == 0,
      "Cannot overwrite ",
      archive_path,
      ": the file is not writable.");
  return target;
}

// Writes an archive through a temporary sibling of `target.file`, renamed
// over it once complete: `fill` adds the entries. On any error the
// temporary file is removed and `target` is left as it was.
void write_archive(
    const ArchiveTarget& target,
    bool durable,
    c10::function_ref<void(ZipWriter&)> fill) {
  AtomicFile file =
      AtomicFile::beside(target.file, 0666, "the archive " + target.path);
  if (target.exists) {
    (void)::fchmod(file.fd(), target.old.st_mode & 07777);
  }
  ZipWriter writer(file.fd(), file.temp_path());
  fill(writer);
  writer.finish();
  file.commit(durable);
}

// Writes the files of `prefix` into the archive `archive_path` through a
// temporary sibling renamed over it.
void pack_directory(
    const std::string& prefix,
    const std::string& archive_path,
    const PackMemmapOptions& options) {
  TORCH_CHECK(
      path_kind(join_path(prefix, kMetaJson)) == PathKind::kFile,
      prefix,
      " does not look like a memory-mapped tensordict directory (no "
      "meta.json found).");
  const uint16_t method = compression_method(options.compression());
  TORCH_CHECK(
      options.compresslevel() >= -1 && options.compresslevel() <= 9,
      "compresslevel must be -1 (the default) or 0-9, got ",
      options.compresslevel());
  std::vector<std::pair<std::string, std::string>> files;
  list_files(prefix, "", files);
  const ArchiveTarget target = resolve_target(archive_path);
  const auto [parent, name] = split_parent(target.file);
  const std::string resolved = join_path(real_path(parent), name);
  const std::string resolved_prefix = real_path(prefix);
  bool aliased = resolved.compare(
                     0, resolved_prefix.size() + 1, resolved_prefix + "/") == 0;
  for (size_t i = 0;
       !aliased && target.kind == PathKind::kFile && i < files.size();
       ++i) {
    aliased = same_file(files[i].first, target.file);
  }
  TORCH_CHECK(
      !aliased,
      "The archive path ",
      archive_path,
      " must be outside the source directory ",
      prefix,
      " and must not alias a source file.");
  write_archive(target, options.durable(), [&](ZipWriter& writer) {
    for (const auto& [path, entry] : files) {
      const SourceFile source(path);
      const bool is_leaf = is_leaf_entry(entry);
      writer.add(
          entry,
          source.data(),
          source.size(),
          is_leaf ? method : kZipStored,
          options.compresslevel(),
          /*align=*/is_leaf);
    }
  });
}

// The bytes of a leaf as Python's `_tensor_chunks` streams them: on the
// CPU, contiguous, conjugation and negation resolved.
at::Tensor streamed_leaf_bytes(const at::Tensor& tensor) {
  if (tensor.is_cpu() && !tensor.is_conj() && !tensor.is_neg() &&
      tensor.is_contiguous()) {
    return tensor;
  }
  at::Tensor t = tensor.detach();
  if (!t.device().is_cpu()) {
    t = t.cpu();
  }
  return t.resolve_conj().resolve_neg().contiguous();
}

// One entry of an archive written from a dict: a meta.json or a leaf.
struct PlannedEntry {
  const std::string* meta = nullptr;
  at::Tensor leaf;
};

// The planned files by directory, for Python's entry order (see
// list_files): meta.json, the other files by name, then each
// sub-directory's.
struct PlannedDirectory {
  std::map<std::string, PlannedEntry> files;
  std::map<std::string, PlannedDirectory> dirs;

  void insert(const std::string& name, size_t start, PlannedEntry entry) {
    const size_t slash = name.find('/', start);
    if (slash == std::string::npos) {
      const std::string file = name.substr(start);
      TORCH_CHECK(
          dirs.count(file) == 0 && files.emplace(file, std::move(entry)).second,
          "cannot write the archive entry '",
          name,
          "': another entry has that name");
      return;
    }
    const std::string dir = name.substr(start, slash - start);
    TORCH_CHECK(
        files.count(dir) == 0,
        "cannot write the archive entry '",
        name,
        "': '",
        dir,
        "' is also a file");
    dirs[dir].insert(name, slash + 1, std::move(entry));
  }

  void list(
      const std::string& rel,
      std::vector<std::pair<std::string, const PlannedEntry*>>& out) const {
    const auto meta = files.find(kMetaJson);
    if (meta != files.end()) {
      out.emplace_back(rel + kMetaJson, &meta->second);
    }
    for (const auto& [name, entry] : files) {
      if (name != kMetaJson) {
        out.emplace_back(rel + name, &entry);
      }
    }
    for (const auto& [name, dir] : dirs) {
      dir.list(rel + name + "/", out);
    }
  }
};

// The missing directories that creating `dir` with its parents makes,
// deepest first.
std::vector<std::string> missing_directories(std::string dir) {
  std::vector<std::string> missing;
  while (!dir.empty() && dir != "/" && dir != "." &&
         path_kind(dir) == PathKind::kMissing) {
    missing.push_back(dir);
    dir = split_parent(dir).first;
  }
  return missing;
}

}  // namespace

const TreeFiles& file_system_files() {
  static const FileSystemFiles files;
  return files;
}

std::unique_ptr<TreeFiles> open_archive_files(
    const std::string& prefix, MapMode mode) {
  struct stat st {};
  if (::stat(prefix.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return nullptr;
  }
  return std::make_unique<ArchiveFiles>(prefix, mode);
}

bool is_archive_path(const std::string& prefix) {
  const std::string suffix = kArchiveSuffix;
  return prefix.size() > suffix.size() &&
         prefix.compare(prefix.size() - suffix.size(), suffix.size(), suffix) ==
             0;
}

bool writes_archive(const MemmapOptions& options, SaveKind kind) {
  const bool has_compression = !options.compression().empty();
  if (kind == SaveKind::kMemmapInPlace) {
    TORCH_CHECK_VALUE(
        !options.archive().value_or(false),
        "memmap_ writes a directory, not an archive: use memmap or save to "
        "write ",
        options.prefix(),
        " as an archive");
    TORCH_CHECK_VALUE(
        !has_compression,
        "compression is only supported when writing a memmap archive "
        "(memmap or save with archive(true) or a '.tdz' prefix); memmap_ "
        "writes a directory");
    return false;
  }
  const bool archive =
      options.archive().value_or(is_archive_path(options.prefix()));
  if (!archive) {
    TORCH_CHECK_VALUE(
        !has_compression,
        "compression is only supported when writing a memmap archive (pass "
        "archive(true) or use a '.tdz' prefix)");
    return false;
  }
  TORCH_CHECK_VALUE(
      !options.prefix().empty(),
      "A path is required to write a memmap archive.");
  TORCH_CHECK_VALUE(
      !has_compression || kind != SaveKind::kMemmapLike,
      "memmap_like writes an archive to write into, which needs stored "
      "payloads: compression '",
      options.compression(),
      "' is not supported there");
  (void)compression_method(options.compression());
  return true;
}

namespace {

// Writes the archive at `options.prefix()` of the tree `plan_tree` plans
// into a SavePlan below the given root (see NOTE [Memmap archives]).
void write_tree_archive(
    const MemmapOptions& options,
    bool like,
    c10::function_ref<void(SavePlan&, const std::string&)> plan_tree) {
  const std::string& path = options.prefix();
  const PathKind kind = path_kind(path);
  TORCH_CHECK(
      kind != PathKind::kDirectory,
      "Cannot write an archive at ",
      path,
      ": it is an existing directory.");
  TORCH_CHECK(
      kind == PathKind::kMissing || options.existsok(),
      "A file already exists at ",
      path,
      ", cannot save the tensordict there. Set existsok=True to overwrite.");
  // Planning checks every key and builds every meta.json without touching
  // a file; the paths it plans lie below `path`, used as a root name only.
  // It plans as memmap_like does (Python stages the tree with memmap_like),
  // so a leaf mapped from another file needs no copy_existing: the archive
  // is a new file anyway.
  const uint16_t method = compression_method(options.compression());
  MemmapOptions plan_options = options;
  plan_options.existsok(true).atomic(false).num_threads(0);
  SavePlan plan(plan_options, /*like=*/true, /*inplace=*/false);
  plan_tree(plan, path);
  PlannedDirectory root;
  int64_t total_bytes = 0;
  const auto entry_of = [&](const std::string& file) {
    TORCH_INTERNAL_ASSERT(
        file.size() > path.size() + 1 &&
        file.compare(0, path.size(), path) == 0);
    return file.substr(path.size() + 1);
  };
  plan.for_each_planned_file(
      [&](const std::string& file, const std::string& content) {
        root.insert(entry_of(file), 0, PlannedEntry{&content, at::Tensor()});
      },
      [&](const std::string& file, const at::Tensor& leaf) {
        total_bytes += static_cast<int64_t>(leaf.nbytes());
        root.insert(entry_of(file), 0, PlannedEntry{nullptr, leaf});
      });
  std::vector<std::pair<std::string, const PlannedEntry*>> entries;
  root.list("", entries);

  // As Python, the missing parents are created; they are removed again if
  // the write fails, so that a failed save leaves nothing.
  const std::vector<std::string> created =
      missing_directories(split_parent(path).first);
  try {
    ensure_directory(
        split_parent(path).first,
        /*parents=*/true,
        /*allow_symlink=*/true,
        options.durable());
    const ArchiveTarget target = resolve_target(path);
    write_archive(target, options.durable(), [&](ZipWriter& writer) {
      int64_t done_bytes = 0;
      for (const auto& [name, entry] : entries) {
        if (entry->meta != nullptr) {
          writer.add(
              name,
              reinterpret_cast<const unsigned char*>(entry->meta->data()),
              entry->meta->size(),
              kZipStored,
              /*level=*/-1,
              /*align=*/false);
          continue;
        }
        const uint64_t nbytes = entry->leaf.nbytes();
        try {
          if (like) {
            // memmap_like: a zero-filled leaf, written without a buffer.
            writer.add(name, nullptr, nbytes, kZipStored, -1, /*align=*/true);
          } else {
            const at::Tensor bytes = streamed_leaf_bytes(entry->leaf);
            writer.add(
                name,
                static_cast<const unsigned char*>(bytes.const_data_ptr()),
                nbytes,
                method,
                /*level=*/-1,
                /*align=*/true);
          }
        } catch (c10::Error& e) {
          TORCH_RETHROW(e, "while writing the archive entry '", name, "'");
        }
        done_bytes += static_cast<int64_t>(nbytes);
        if (options.progress()) {
          options.progress()(done_bytes, total_bytes);
        }
      }
    });
  } catch (...) {
    for (const std::string& dir : created) {  // deepest first
      (void)::rmdir(dir.c_str());
    }
    throw;
  }
}

}  // namespace

TensorDict save_archive(
    const TensorDict& td, const MemmapOptions& options, bool like) {
  write_tree_archive(
      options, like, [&](SavePlan& plan, const std::string& root) {
        const TensorDictImpl& impl = *td.unsafeGetImpl();
        const TensorDict dest = make_tensordict(
            impl.batch_size, c10::Device(c10::kCPU), impl.names);
        plan.plan_dict(td, dest, root, KeyPath(), /*is_root=*/true);
      });
  // As Python: the result is the archive loaded; memmap_like's maps it
  // shared (mode r+), so that writes into its leaves reach the archive.
  return TensorDict::load_memmap(
      options.prefix(),
      LoadMemmapOptions().mode(like ? MapMode::kReadWrite : MapMode::kAuto));
}

LazyStackedTensorDict save_archive(
    const LazyStackedTensorDict& stack,
    const MemmapOptions& options,
    bool like) {
  write_tree_archive(
      options, like, [&](SavePlan& plan, const std::string& root) {
        (void)plan_lazy_stack_root(
            plan, stack, root, options, /*inplace=*/false);
      });
  LoadedTree tree = load_memmap_any(
      options.prefix(),
      LoadMemmapOptions().mode(like ? MapMode::kReadWrite : MapMode::kAuto));
  auto* loaded = std::get_if<LazyStackedTensorDict>(&tree);
  TORCH_INTERNAL_ASSERT(loaded != nullptr);
  return *loaded;
}

std::vector<std::string> archive_crc_problems(const std::string& path) {
  const std::string label = archive_label(path);
  const at::Tensor mapping = map_whole_file(path, /*writable=*/false, label);
  const auto* data = static_cast<const unsigned char*>(mapping.data_ptr());
  std::vector<std::string> problems;
  for (const ZipEntry& entry :
       parse_zip(data, static_cast<uint64_t>(mapping.numel()), label)) {
    if (entry.is_directory()) {
      continue;
    }
    if (entry.method == kZipStored) {
      const std::string mismatch = crc_mismatch(
          label,
          entry,
          crc32_update(0, data + entry.data_offset, entry.compressed_size));
      if (!mismatch.empty()) {
        problems.push_back(
            mismatch +
            " (after writes through a shared mapping, "
            "refresh_archive_checksums updates the CRCs)");
      }
      continue;
    }
    try {
      (void)zip_entry_bytes(data, entry, label);
    } catch (const c10::Error& e) {
      problems.push_back(e.msg());
    }
  }
  return problems;
}

}  // namespace detail

std::string pack_memmap(
    const std::string& prefix,
    const std::string& archive_path,
    const PackMemmapOptions& options) {
  detail::pack_directory(prefix, archive_path, options);
  return archive_path;
}

std::string unpack_memmap(
    const std::string& archive_path, const std::string& prefix) {
  const std::string label = detail::archive_label(archive_path);
  const at::Tensor mapping =
      detail::map_whole_file(archive_path, /*writable=*/false, label);
  const auto* data = static_cast<const unsigned char*>(mapping.data_ptr());
  const std::vector<detail::ZipEntry> entries =
      detail::parse_zip(data, static_cast<uint64_t>(mapping.numel()), label);
  TORCH_CHECK(
      std::any_of(
          entries.begin(),
          entries.end(),
          [](const detail::ZipEntry& e) { return e.name == "meta.json"; }),
      archive_path,
      " is not a memory-mapped tensordict archive (no top-level meta.json).");
  detail::ensure_directory(
      prefix, /*parents=*/true, /*allow_symlink=*/true, /*durable=*/false);
  for (const detail::ZipEntry& entry : entries) {
    // Each directory below the prefix is created (or checked) one part at a
    // time, refusing symlinks, so no entry is written outside the prefix.
    const size_t end =
        entry.is_directory() ? entry.name.size() - 1 : entry.name.rfind('/');
    std::string dir = prefix;
    size_t start = 0;
    while (end != std::string::npos && start < end) {
      size_t stop = entry.name.find('/', start);
      stop = std::min(stop, end);
      dir = detail::join_path(dir, entry.name.substr(start, stop - start));
      detail::ensure_directory(
          dir, /*parents=*/false, /*allow_symlink=*/false, /*durable=*/false);
      start = stop + 1;
    }
    if (entry.is_directory()) {
      continue;
    }
    const std::string path = detail::join_path(prefix, entry.name);
    if (entry.method == detail::kZipStored) {
      const unsigned char* bytes = data + entry.data_offset;
      const std::string mismatch = detail::crc_mismatch(
          label, entry, detail::crc32_update(0, bytes, entry.size));
      TORCH_CHECK(mismatch.empty(), mismatch);
      detail::write_file_atomically(
          path,
          std::string_view(reinterpret_cast<const char*>(bytes), entry.size),
          /*durable=*/false);
    } else {
      const std::vector<unsigned char> bytes =
          detail::zip_entry_bytes(data, entry, label);
      detail::write_file_atomically(
          path,
          std::string_view(
              reinterpret_cast<const char*>(bytes.data()), bytes.size()),
          /*durable=*/false);
    }
  }
  return prefix;
}

std::string refresh_archive_checksums(const std::string& archive_path) {
  const std::string label = detail::archive_label(archive_path);
  struct stat st {};
  TORCH_CHECK_VALUE(
      ::stat(archive_path.c_str(), &st) == 0 && S_ISREG(st.st_mode),
      archive_path,
      " is not a memory-mapped tensordict archive.");
  const at::Tensor mapping =
      detail::map_whole_file(archive_path, /*writable=*/false, label);
  const auto* data = static_cast<const unsigned char*>(mapping.data_ptr());
  const auto size = static_cast<uint64_t>(mapping.numel());
  const std::vector<detail::ZipEntry> entries =
      detail::parse_zip(data, size, label);
  TORCH_CHECK_VALUE(
      std::any_of(
          entries.begin(),
          entries.end(),
          [](const detail::ZipEntry& e) { return e.name == "meta.json"; }),
      archive_path,
      " is not a memory-mapped tensordict archive.");
  // Where the bytes after each entry's payload end (the next local header
  // or the central directory): a data descriptor must lie before it.
  std::vector<uint64_t> starts;
  uint64_t central = size;
  for (const detail::ZipEntry& entry : entries) {
    starts.push_back(entry.header_offset);
    central = std::min(central, entry.central_offset);
  }
  starts.push_back(central);
  std::sort(starts.begin(), starts.end());
  const int fd = ::open(archive_path.c_str(), O_RDWR | O_CLOEXEC);
  TORCH_CHECK(
      fd >= 0,
      "Cannot refresh the checksums of ",
      archive_path,
      ": ",
      errno == EACCES || errno == EROFS ? "the file is not writable"
                                        : std::strerror(errno));
  const auto put_crc = [&](uint64_t offset, uint32_t crc) {
    unsigned char bytes[4];
    for (int i = 0; i < 4; ++i) {
      bytes[i] = static_cast<unsigned char>((crc >> (8 * i)) & 0xff);
    }
    TORCH_CHECK(
        ::pwrite(fd, bytes, 4, static_cast<off_t>(offset)) == 4,
        "could not write to ",
        archive_path,
        ": ",
        std::strerror(errno));
  };
  try {
    for (const detail::ZipEntry& entry : entries) {
      if (entry.is_directory()) {
        continue;
      }
      // A compressed entry cannot have been written in place.
      const uint32_t crc =
          entry.method == detail::kZipStored
              ? detail::crc32_update(
                    0, data + entry.data_offset, entry.compressed_size)
              : entry.crc;
      if ((entry.flags & 0x8) == 0) {
        put_crc(entry.header_offset + 14, crc);
      } else {
        // The CRC is in the data descriptor after the payload, after its
        // optional signature.
        uint64_t at = entry.data_offset + entry.compressed_size;
        const uint64_t limit = *std::upper_bound(
            starts.begin(), starts.end(), entry.header_offset);
        if (limit - at >= 8 && data[at] == 'P' && data[at + 1] == 'K' &&
            data[at + 2] == 7 && data[at + 3] == 8) {
          at += 4;
        }
        TORCH_CHECK(
            limit - at >= 4,
            label,
            ": entry '",
            entry.name,
            "' has no room for its data descriptor (",
            limit - at,
            " bytes before the next record, expected at least 4)");
        put_crc(at, crc);
      }
      put_crc(entry.central_offset + 16, crc);
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return archive_path;
}

bool is_memmap_archive(const std::string& path) {
  try {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return false;
    }
    const at::Tensor mapping = detail::map_whole_file(
        path, /*writable=*/false, detail::archive_label(path));
    const std::vector<detail::ZipEntry> entries = detail::parse_zip(
        static_cast<const unsigned char*>(mapping.data_ptr()),
        static_cast<uint64_t>(mapping.numel()),
        detail::archive_label(path));
    return std::any_of(
        entries.begin(), entries.end(), [](const detail::ZipEntry& e) {
          return e.name == "meta.json";
        });
  } catch (const c10::Error&) {
    return false;
  }
}

TENSORDICT_END_NAMESPACE
