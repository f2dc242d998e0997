// Memmap archives read: the files of a `.tdz` as a load sees them,
// unpack_memmap, refresh_archive_checksums, is_memmap_archive and the CRC
// checks. Writing one is memmap/archive_sink.cpp. See NOTE [Memmap
// archives] in tensordict/archive.h.
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

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "io/atomic_file.h"
#include "io/format.h"
#include "io/mapped_zip.h"
#include "io/zip.h"
#include "memmap/archive.h"
#include "tensordict/archive.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

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

std::vector<std::string> archive_crc_problems(const std::string& path) {
  ZipVerifyPolicy policy;
  policy.stored_mismatch_hint =
      " (after writes through a shared mapping, "
      "refresh_archive_checksums updates the CRCs)";
  return MappedZip(path, archive_label(path)).verify(policy);
}

}  // namespace detail

std::string unpack_memmap(
    const std::string& archive_path, const std::string& prefix) {
  const detail::MappedZip zip(
      archive_path, detail::archive_label(archive_path));
  const std::vector<detail::ZipEntry>& entries = zip.entries();
  TORCH_CHECK(
      zip.has_entry("meta.json"),
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
      const std::string mismatch = zip.stored_crc_problem(entry);
      TORCH_CHECK(mismatch.empty(), mismatch);
      detail::write_file_atomically(
          path, zip.payload(entry), /*durable=*/false);
    } else {
      const std::vector<unsigned char> bytes = zip.bytes(entry);
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
  const detail::MappedZip zip(archive_path, label);
  const unsigned char* data = zip.data();
  const uint64_t size = zip.size();
  const std::vector<detail::ZipEntry>& entries = zip.entries();
  TORCH_CHECK_VALUE(
      zip.has_entry("meta.json"),
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
      if ((entry.flags & detail::kZipFlagDataDescriptor) == 0) {
        put_crc(entry.header_offset + detail::ZipLocalHeader::kCrc, crc);
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
      put_crc(entry.central_offset + detail::ZipCentralRecord::kCrc, crc);
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
    return detail::MappedZip(path, detail::archive_label(path))
        .has_entry("meta.json");
  } catch (const c10::Error&) {
    return false;
  }
}

TENSORDICT_END_NAMESPACE
