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
#include <c10/util/accumulate.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "io/format.h"
#include "io/zip.h"
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
      const std::vector<unsigned char> bytes =
          zip_entry_bytes(data(), entry, label_);
      at::Tensor tensor = at::empty(shape, options);
      if (nbytes > 0) {
        std::memcpy(tensor.data_ptr(), bytes.data(), nbytes);
      }
      return tensor;
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

 private:
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
  uint16_t method = kZipStored;
  if (options.compression() == "deflate" ||
      options.compression() == "deflated") {
    method = kZipDeflated;
  } else {
    TORCH_CHECK(
        options.compression() == "stored" || options.compression().empty(),
        "unknown compression '",
        options.compression(),
        "'; expected \"stored\" or \"deflate\" (bzip2 and lzma are not "
        "supported here)");
  }
  TORCH_CHECK(
      options.compresslevel() >= -1 && options.compresslevel() <= 9,
      "compresslevel must be -1 (the default) or 0-9, got ",
      options.compresslevel());
  std::vector<std::pair<std::string, std::string>> files;
  list_files(prefix, "", files);
  std::string target = archive_path;
  if (path_kind(target) == PathKind::kSymlink) {
    target = real_path(target);  // the file it points to is replaced
  }
  const PathKind target_kind = path_kind(target);
  TORCH_CHECK(
      target_kind == PathKind::kMissing || target_kind == PathKind::kFile,
      "cannot write an archive at ",
      archive_path,
      ": it is an existing ",
      target_kind == PathKind::kDirectory ? "directory" : "non-regular file");
  const auto [parent, name] = split_parent(target);
  TORCH_CHECK(
      path_kind(parent) != PathKind::kMissing,
      "cannot write the archive ",
      archive_path,
      ": its directory ",
      parent,
      " does not exist");
  const std::string resolved = join_path(real_path(parent), name);
  const std::string resolved_prefix = real_path(prefix);
  bool aliased = resolved.compare(
                     0, resolved_prefix.size() + 1, resolved_prefix + "/") == 0;
  for (size_t i = 0;
       !aliased && target_kind == PathKind::kFile && i < files.size();
       ++i) {
    aliased = same_file(files[i].first, target);
  }
  TORCH_CHECK(
      !aliased,
      "The archive path ",
      archive_path,
      " must be outside the source directory ",
      prefix,
      " and must not alias a source file.");
  struct stat old {};
  const bool exists =
      target_kind == PathKind::kFile && ::stat(target.c_str(), &old) == 0;
  TORCH_CHECK(
      !exists || ::access(target.c_str(), W_OK) == 0,
      "Cannot overwrite ",
      archive_path,
      ": the file is not writable.");
  remove_stale_siblings(target);
  const std::string temp = temporary_sibling(target, "tmp");
  const int fd = ::open(
      temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
  TORCH_CHECK(
      fd >= 0,
      "cannot create the archive ",
      archive_path,
      " (temporary file ",
      temp,
      "): ",
      std::strerror(errno));
  bool closed = false;
  try {
    if (exists) {
      (void)::fchmod(fd, old.st_mode & 07777);
    }
    ZipWriter writer(fd, temp);
    for (const auto& [path, entry] : files) {
      const SourceFile source(path);
      const bool is_leaf = entry.size() >= 7 &&
                           entry.compare(entry.size() - 7, 7, ".memmap") == 0;
      writer.add(
          entry,
          source.data(),
          source.size(),
          is_leaf ? method : kZipStored,
          options.compresslevel(),
          /*align=*/is_leaf);
    }
    writer.finish();
    TORCH_CHECK(
        !options.durable() || ::fsync(fd) == 0,
        "could not fsync the archive ",
        temp,
        ": ",
        std::strerror(errno));
    closed = true;  // even when close fails, the descriptor is released
    TORCH_CHECK(
        ::close(fd) == 0,
        "could not close the archive ",
        temp,
        ": ",
        std::strerror(errno));
  } catch (...) {
    if (!closed) {
      (void)::close(fd);
    }
    (void)::unlink(temp.c_str());
    throw;
  }
  try {
    rename_path(temp, target);
  } catch (...) {
    (void)::unlink(temp.c_str());
    throw;
  }
  if (options.durable()) {
    fsync_parent_directory(target);
  }
}

// Removes a directory tree when it goes out of scope.
class TreeRemover {
 public:
  explicit TreeRemover(std::string path) : path_(std::move(path)) {}
  TreeRemover(const TreeRemover&) = delete;
  TreeRemover& operator=(const TreeRemover&) = delete;
  ~TreeRemover() {
    try {
      remove_tree(path_);
    } catch (...) {  // NOLINT(bugprone-empty-catch): best effort
    }
  }

 private:
  std::string path_;
};

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

TensorDict save_archive(const TensorDict& td, const MemmapOptions& options) {
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
  const auto parent = split_parent(path).first;
  ensure_directory(
      parent, /*parents=*/true, /*allow_symlink=*/true, options.durable());
  remove_stale_siblings(path);
  // The tree is staged as a directory beside the archive, then packed.
  const std::string staging = temporary_sibling(path, "tmp");
  {
    const TreeRemover remover(staging);
    MemmapOptions staged = options;
    staged.prefix(staging).durable(false);
    (void)td.memmap(staged);
    pack_directory(
        staging, path, PackMemmapOptions().durable(options.durable()));
  }
  return TensorDict::load_memmap(path);
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
      const uint32_t crc = detail::crc32_update(0, bytes, entry.size);
      TORCH_CHECK(
          crc == entry.crc,
          label,
          ": entry '",
          entry.name,
          "' is corrupted: its CRC-32 is ",
          crc,
          " but the archive records ",
          entry.crc);
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
