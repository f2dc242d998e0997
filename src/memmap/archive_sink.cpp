// Memmap archives written: the archive sink of a save (a SavePlan
// streamed into one zip through an AtomicFile) and pack_memmap. See NOTE
// [Memmap archives] in tensordict/archive.h.

#include "memmap/archive_sink.h"

#include <c10/util/Exception.h>
#include <c10/util/FunctionRef.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "io/atomic_file.h"
#include "io/file_io.h"
#include "io/zip.h"
#include "memmap/archive.h"
#include "memmap/plan.h"
#include "tensordict/archive.h"
#include "tensordict/memmap.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

constexpr const char* kMetaJson = "meta.json";

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

}  // namespace detail

bool MemmapOptions::writes_archive() const {
  return archive_.value_or(detail::is_archive_path(prefix_));
}

namespace detail {

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
  if (!options.writes_archive()) {
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
            const at::Tensor bytes = leaf_bytes(entry->leaf);
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

}  // namespace detail

std::string pack_memmap(
    const std::string& prefix,
    const std::string& archive_path,
    const PackMemmapOptions& options) {
  detail::pack_directory(prefix, archive_path, options);
  return archive_path;
}

TENSORDICT_END_NAMESPACE
