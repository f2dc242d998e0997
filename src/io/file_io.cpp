#include "io/file_io.h"

#include <ATen/MapAllocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/key_path.h"
#include "util/python_spelling.h"
#include "util/shared_memory.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

std::ostream& operator<<(std::ostream& out, const EntryName& name) {
  if (name.path_ != nullptr) {
    return out << name.path_->to_string();
  }
  return out << name.text_;
}

namespace {

std::string errno_text(int err) {
  return std::strerror(err);
}

// Closes a file descriptor when it goes out of scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  int get() const noexcept {
    return fd_;
  }
  // Closes now, reporting the error (close can report a failed write-back).
  void close(const std::string& path) {
    const int fd = std::exchange(fd_, -1);
    TORCH_CHECK(
        ::close(fd) == 0, "could not close ", path, ": ", errno_text(errno));
  }

 private:
  int fd_;
};

// The context of a file mapping: the DataPtr deleter unmaps it. The path is
// kept so that MemoryMappedTensor::filename can report it, unless the file
// holds many tensors (see forget_mapped_filename).
struct FileMapping {
  void* address = nullptr;
  size_t length = 0;
  std::string path;
  bool holds_many_tensors = false;
};

void delete_file_mapping(void* context) {
  auto* mapping = static_cast<FileMapping*>(context);
  if (mapping->address != nullptr) {
    ::munmap(mapping->address, mapping->length);
  }
  delete mapping;
}

FileMapping* file_mapping_of(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage()) {
    return nullptr;
  }
  const c10::DataPtr& ptr = tensor.storage().data_ptr();
  if (ptr.get_deleter() != &delete_file_mapping) {
    return nullptr;
  }
  return static_cast<FileMapping*>(ptr.get_context());
}

void write_all(
    int fd, const char* data, size_t nbytes, const std::string& path) {
  const WriteProgress done = write_fully(fd, data, nbytes, /*offset=*/0);
  TORCH_CHECK(
      done.written == nbytes,
      "could not write ",
      path,
      " (",
      done.written,
      " of ",
      nbytes,
      " bytes written): ",
      done.reason());
}

std::atomic<uint64_t> temp_counter{0};

// A contiguous tensor over a whole storage, built without the dispatcher:
// loading thousands of leaves should cost little more than the mmap calls.
at::Tensor tensor_over(
    c10::Storage storage, c10::ScalarType dtype, c10::IntArrayRef shape) {
  auto tensor = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage),
      c10::DispatchKeySet(c10::DispatchKey::CPU),
      c10::scalarTypeToTypeMeta(dtype));
  tensor.unsafeGetTensorImpl()->set_sizes_contiguous(shape);
  return tensor;
}

// The directory part of `path` ("." for a bare name, "/" for a top-level
// path) and its last component.
std::pair<std::string, std::string> split_path(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) {
    return {".", path};
  }
  return {path.substr(0, std::max<size_t>(slash, 1)), path.substr(slash + 1)};
}

// True unless `pid` is known not to run (a pid we may not signal runs).
bool process_runs(long pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH);
}

}  // namespace

std::string join_path(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (!out.empty() && out.back() != '/') {
    out += '/';
  }
  out += name;
  return out;
}

PathKind path_kind(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    TORCH_CHECK(
        errno == ENOENT || errno == ENOTDIR,
        "could not inspect ",
        path,
        ": ",
        errno_text(errno));
    return PathKind::kMissing;
  }
  if (S_ISLNK(st.st_mode)) {
    return PathKind::kSymlink;
  }
  if (S_ISDIR(st.st_mode)) {
    return PathKind::kDirectory;
  }
  if (S_ISREG(st.st_mode)) {
    return PathKind::kFile;
  }
  return PathKind::kOther;
}

namespace {

// Maps the first bytes of the open file `fd` (`path`) as a tensor of
// `shape` and `dtype`. With `check_file`, first checks that the file is
// regular and long enough; a file this process just wrote needs no check.
at::Tensor map_open_file(
    int fd,
    const std::string& path,
    c10::ScalarType dtype,
    c10::IntArrayRef shape,
    bool writable,
    bool check_file,
    const EntryName& what) {
  const int64_t numel = c10::multiply_integers(shape);
  const size_t nbytes = static_cast<size_t>(numel) * c10::elementSize(dtype);
  struct stat st {};
  TORCH_CHECK(
      !check_file || ::fstat(fd, &st) == 0,
      "could not inspect ",
      path,
      ": ",
      errno_text(errno));
  TORCH_CHECK(
      !check_file || S_ISREG(st.st_mode),
      "the memmap file of ",
      what,
      " (",
      path,
      ") is not a regular file");
  TORCH_CHECK(
      !check_file || static_cast<uint64_t>(st.st_size) >= nbytes,
      "the memmap file of ",
      what,
      " has ",
      st.st_size,
      " bytes, but its shape ",
      shape,
      " of ",
      dtype_name(dtype),
      " needs ",
      nbytes,
      " (",
      path,
      ")");
  auto* mapping = new FileMapping();
  mapping->path = path;
  if (nbytes > 0) {
    void* address = ::mmap(
        nullptr,
        nbytes,
        PROT_READ | PROT_WRITE,
        writable ? MAP_SHARED : MAP_PRIVATE,
        fd,
        0);
    if (address == MAP_FAILED) {
      const int err = errno;
      delete mapping;
      TORCH_CHECK(
          false, "could not map ", path, " (", what, "): ", errno_text(err));
    }
    mapping->address = address;
    mapping->length = nbytes;
  }
  c10::DataPtr data(
      mapping->address, mapping, &delete_file_mapping, c10::Device(c10::kCPU));
  c10::Storage storage(
      c10::Storage::use_byte_size_t(),
      nbytes,
      std::move(data),
      /*allocator=*/nullptr,
      /*resizable=*/false);
  return tensor_over(std::move(storage), dtype, shape);
}

}  // namespace

std::optional<at::Tensor> map_tensor_file_if_exists(
    const std::string& path,
    c10::ScalarType dtype,
    c10::IntArrayRef shape,
    MapMode mode,
    const EntryName& what) {
  // Opening is the check: no lstat() or access() first, which would cost
  // two more system calls per leaf. O_NOFOLLOW refuses a final symlink and
  // map_open_file anything but a regular file.
  bool writable = mode != MapMode::kReadOnly;
  int fd_raw = ::open(
      path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
  if (fd_raw < 0 && mode == MapMode::kAuto &&
      (errno == EACCES || errno == EROFS)) {
    // Python's mode None: what cannot be written is mapped read-only.
    writable = false;
    fd_raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  }
  if (fd_raw < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return std::nullopt;
    }
    TORCH_CHECK(
        err != ELOOP,
        "refusing to read the memmap file of ",
        what,
        " through the symlink ",
        path);
    TORCH_CHECK(
        !((err == EACCES || err == EROFS) && mode == MapMode::kReadWrite),
        "cannot map the memmap file of ",
        what,
        " for writing (mode r+): ",
        path,
        " is not writable");
    TORCH_CHECK(
        false,
        "cannot open the memmap file of ",
        what,
        " (",
        path,
        "): ",
        errno_text(err));
  }
  FileDescriptor fd(fd_raw);
  return map_open_file(
      fd.get(), path, dtype, shape, writable, /*check_file=*/true, what);
}

at::Tensor map_tensor_file(
    const std::string& path,
    c10::ScalarType dtype,
    c10::IntArrayRef shape,
    MapMode mode,
    const EntryName& what) {
  std::optional<at::Tensor> tensor =
      map_tensor_file_if_exists(path, dtype, shape, mode, what);
  TORCH_CHECK(
      tensor.has_value(),
      "cannot open the memmap file of ",
      what,
      " (",
      path,
      "): ",
      errno_text(ENOENT));
  return *std::move(tensor);
}

at::Tensor shared_memory_tensor(c10::IntArrayRef shape, c10::ScalarType dtype) {
  const int64_t numel = c10::multiply_integers(shape);
  const size_t nbytes = static_cast<size_t>(numel) * c10::elementSize(dtype);
  // torch's "file_descriptor" sharing strategy: a fresh name, created
  // exclusively and unlinked at once, with the fd kept for other processes.
  const int flags = at::ALLOCATOR_MAPPED_SHAREDMEM |
                    at::ALLOCATOR_MAPPED_EXCLUSIVE |
                    at::ALLOCATOR_MAPPED_KEEPFD | at::ALLOCATOR_MAPPED_UNLINK;
  c10::Storage storage(
      c10::Storage::use_byte_size_t(),
      nbytes,
      at::MapAllocator::makeDataPtr(
          at::NewProcessWideShmHandle(),
          flags,
          std::max<size_t>(nbytes, 1),
          nullptr),
      /*allocator=*/nullptr,
      /*resizable=*/false);
  return tensor_over(std::move(storage), dtype, shape);
}

std::optional<std::string> mapped_filename(const at::Tensor& tensor) {
  const FileMapping* mapping = file_mapping_of(tensor);
  if (mapping == nullptr || mapping->holds_many_tensors) {
    return std::nullopt;
  }
  return mapping->path;
}

void forget_mapped_filename(const at::Tensor& tensor) {
  FileMapping* mapping = file_mapping_of(tensor);
  TORCH_INTERNAL_ASSERT(mapping != nullptr, "not a file mapping");
  mapping->holds_many_tensors = true;
}

bool is_mapped(const at::Tensor& tensor) {
  if (file_mapping_of(tensor) != nullptr) {
    return true;
  }
  return tensor_is_shared(tensor);
}

at::Tensor write_leaf_file(
    const std::string& path,
    const void* data,
    c10::ScalarType dtype,
    c10::IntArrayRef shape,
    std::string_view what,
    const LeafFileOptions& options) {
  const bool zeros = data == nullptr;
  const size_t nbytes = static_cast<size_t>(c10::multiply_integers(shape)) *
                        c10::elementSize(dtype);
  // Read-write, so the descriptor that wrote the file also maps it.
  int fd_raw = ::open(
      path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
  bool existed = false;
  if (fd_raw < 0 && errno == EEXIST) {
    existed = true;
    TORCH_CHECK(
        path_kind(path) != PathKind::kSymlink,
        "Refusing to write memory-mapped tensor through symlink ",
        path,
        " (",
        what,
        ")");
    TORCH_CHECK(
        options.existsok(),
        "The file ",
        path,
        " already exists (",
        what,
        "); pass existsok(true) to overwrite it.");
    fd_raw = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  }
  TORCH_CHECK(
      fd_raw >= 0,
      "could not create the memmap file of ",
      what,
      " (",
      path,
      "): ",
      errno_text(errno));
  FileDescriptor fd(fd_raw);
  // A file O_EXCL just created is a new regular file; only an existing one
  // needs checking (a FIFO or device must not be written to or mapped).
  struct stat st {};
  TORCH_CHECK(
      !existed || (::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode)),
      "the memmap file of ",
      what,
      " (",
      path,
      ") is not a regular file");
  // A file this call created goes again if it cannot be filled and mapped
  // (a full disk, a file size limit): a failed write leaves nothing.
  try {
    if (zeros) {
      // Truncating first drops old bytes, so the file reads as zeros.
      TORCH_CHECK(
          (!existed || ::ftruncate(fd.get(), 0) == 0) &&
              ::ftruncate(fd.get(), static_cast<off_t>(nbytes)) == 0,
          "could not size ",
          path,
          " to ",
          nbytes,
          " bytes: ",
          errno_text(errno));
      if (options.preallocate()) {
        // posix_fallocate returns the error instead of setting errno.
        const int error =
            ::posix_fallocate(fd.get(), 0, static_cast<off_t>(nbytes));
        TORCH_CHECK(
            error == 0,
            "could not reserve ",
            nbytes,
            " bytes for ",
            path,
            " (",
            what,
            "): ",
            errno_text(error));
      }
    } else {
      write_all(fd.get(), static_cast<const char*>(data), nbytes, path);
    }
    if (options.durable()) {
      TORCH_CHECK(
          ::fsync(fd.get()) == 0,
          "could not sync ",
          path,
          ": ",
          errno_text(errno));
    }
    // The file now holds at least nbytes (a longer one keeps its length).
    at::Tensor mapped = map_open_file(
        fd.get(),
        path,
        dtype,
        shape,
        /*writable=*/true,
        /*check_file=*/false,
        what);
    fd.close(path);
    return mapped;
  } catch (...) {
    if (!existed) {
      ::unlink(path.c_str());
    }
    throw;
  }
}

void ensure_directory(
    const std::string& path, bool parents, bool allow_symlink, bool durable) {
  PathKind kind = path_kind(path);
  if (kind == PathKind::kMissing) {
    if (parents) {
      const size_t slash = path.find_last_of('/');
      if (slash != std::string::npos && slash > 0) {
        ensure_directory(
            path.substr(0, slash),
            /*parents=*/true,
            /*allow_symlink=*/true,
            durable);
      }
    }
    if (::mkdir(path.c_str(), 0777) == 0) {
      if (durable) {
        fsync_parent_directory(path);
      }
      return;
    }
    TORCH_CHECK(
        errno == EEXIST,
        "could not create the directory ",
        path,
        ": ",
        errno_text(errno));
    kind = path_kind(path);
  }
  if (kind == PathKind::kSymlink) {
    TORCH_CHECK(
        allow_symlink,
        "Refusing to write a memmap directory through the symlink ",
        path);
    struct stat st {};
    TORCH_CHECK(
        ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode),
        path,
        " is a symlink to something that is not a directory");
    return;
  }
  TORCH_CHECK(
      kind == PathKind::kDirectory,
      "cannot write a memmap directory at ",
      path,
      ": a file of another kind is there");
}

void remove_file(const std::string& path) {
  TORCH_CHECK(
      ::unlink(path.c_str()) == 0 || errno == ENOENT,
      "could not remove ",
      path,
      ": ",
      errno_text(errno));
}

std::string WriteProgress::reason() const {
  return error != 0 ? errno_text(error) : std::string("nothing written");
}

WriteProgress write_fully(
    int fd, const void* data, size_t nbytes, int64_t offset) noexcept {
  constexpr size_t kChunk = size_t{1} << 30;
  const char* bytes = static_cast<const char*>(data);
  WriteProgress done;
  while (done.written < nbytes) {
    const size_t n = std::min(kChunk, nbytes - done.written);
    const ssize_t wrote =
        offset < 0 ? ::write(fd, bytes + done.written, n)
                   : ::pwrite(
                         fd,
                         bytes + done.written,
                         n,
                         static_cast<off_t>(
                             offset + static_cast<int64_t>(done.written)));
    if (wrote < 0 && errno == EINTR) {
      continue;
    }
    if (wrote <= 0) {
      done.error = wrote < 0 ? errno : 0;
      break;
    }
    done.written += static_cast<size_t>(wrote);
  }
  return done;
}

void write_whole_file(const std::string& path, std::string_view content) {
  const int fd_raw = ::open(
      path.c_str(),
      O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
      0666);
  TORCH_CHECK(fd_raw >= 0, "could not create ", path, ": ", errno_text(errno));
  FileDescriptor fd(fd_raw);
  write_all(fd.get(), content.data(), content.size(), path);
  fd.close(path);
}

std::string read_small_file(const std::string& path, int64_t max_bytes) {
  const int fd_raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd_raw < 0) {
    const int err = errno;
    TORCH_CHECK(err != ELOOP, "refusing to read through the symlink ", path);
    TORCH_CHECK(false, "cannot open ", path, ": ", errno_text(err));
  }
  FileDescriptor fd(fd_raw);
  struct stat st {};
  TORCH_CHECK(
      ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode),
      path,
      " is not a regular file");
  TORCH_CHECK(
      st.st_size <= max_bytes,
      path,
      " has ",
      st.st_size,
      " bytes, more than the limit of ",
      max_bytes,
      " (LoadMemmapOptions::max_meta_bytes)");
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(
        fd.get(),
        out.data() + done,
        out.size() - done,
        static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    TORCH_CHECK(n >= 0, "could not read ", path, ": ", errno_text(errno));
    if (n == 0) {
      break;  // shrank meanwhile: parse what is there
    }
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

void fsync_directory(const std::string& path) {
  const int fd_raw = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  TORCH_CHECK(
      fd_raw >= 0,
      "could not open the directory ",
      path,
      ": ",
      errno_text(errno));
  FileDescriptor fd(fd_raw);
  TORCH_CHECK(
      ::fsync(fd.get()) == 0,
      "could not sync the directory ",
      path,
      ": ",
      errno_text(errno));
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {};
  struct stat sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void fsync_parent_directory(const std::string& path) {
  fsync_directory(split_path(path).first);
}

std::vector<std::pair<std::string, PathKind>> list_directory(
    const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, PathKind>> out;
  std::error_code error;
  for (fs::directory_iterator it(path, error), end; !error && it != end;
       it.increment(error)) {
    const fs::file_type type = it->symlink_status(error).type();
    PathKind kind = PathKind::kOther;
    if (type == fs::file_type::regular) {
      kind = PathKind::kFile;
    } else if (type == fs::file_type::directory) {
      kind = PathKind::kDirectory;
    } else if (type == fs::file_type::symlink) {
      kind = PathKind::kSymlink;
    }
    out.emplace_back(it->path().filename().string(), kind);
  }
  TORCH_CHECK(
      !error, "could not list the directory ", path, ": ", error.message());
  return out;
}

std::string temporary_sibling(const std::string& path, std::string_view tag) {
  const auto [dir, name] = split_path(path);
  return join_path(
      dir,
      "." + name + "." + std::string(tag) + "-" + std::to_string(::getpid()) +
          "-" + std::to_string(temp_counter.fetch_add(1)));
}

void remove_stale_siblings(const std::string& path) {
  const auto [dir, name] = split_path(path);
  std::vector<std::pair<std::string, PathKind>> entries;
  try {
    entries = list_directory(dir);
  } catch (const c10::Error&) {
    return;  // an unreadable parent: nothing to clean, and not the save's job
  }
  for (const auto& item : entries) {
    const std::string& entry = item.first;
    for (const char* tag : {".tmp-", ".old-"}) {
      const std::string start = "." + name + tag;
      if (entry.size() <= start.size() ||
          entry.compare(0, start.size(), start) != 0) {
        continue;
      }
      // `<pid>-<n>`: a name of another shape is not ours and stays.
      const std::string rest = entry.substr(start.size());
      const size_t dash = rest.find('-');
      if (dash == 0 || dash == std::string::npos ||
          rest.find_first_not_of("0123456789-") != std::string::npos) {
        continue;
      }
      const long pid = std::strtol(rest.substr(0, dash).c_str(), nullptr, 10);
      if (!process_runs(pid)) {
        std::error_code ignored;  // cleaning up is best effort
        std::filesystem::remove_all(join_path(dir, entry), ignored);
      }
    }
  }
}

void remove_tree(const std::string& path) {
  std::error_code error;
  std::filesystem::remove_all(path, error);
  TORCH_CHECK(!error, "could not remove ", path, ": ", error.message());
}

void rename_path(const std::string& from, const std::string& to) {
  TORCH_CHECK(
      ::rename(from.c_str(), to.c_str()) == 0,
      "could not rename ",
      from,
      " to ",
      to,
      ": ",
      errno_text(errno));
}

std::string exchange_directories(
    const std::string& replacement, const std::string& current) {
#if defined(SYS_renameat2)
  // glibc before 2.28 has no wrapper; the system call is older (Linux 3.15).
  constexpr unsigned kRenameExchange = 1U << 1;  // RENAME_EXCHANGE
  if (::syscall(
          SYS_renameat2,
          AT_FDCWD,
          replacement.c_str(),
          AT_FDCWD,
          current.c_str(),
          kRenameExchange) == 0) {
    return replacement;
  }
  const int err = errno;
  TORCH_CHECK(
      err == EINVAL || err == ENOSYS || err == ENOTSUP,
      "could not exchange ",
      replacement,
      " and ",
      current,
      ": ",
      errno_text(err));
#endif
  // Between these two renames `current` is missing: the one window this
  // fallback cannot close. See NOTE [Crash-safe overwrite].
  const std::string aside = temporary_sibling(current, "old");
  rename_path(current, aside);
  rename_path(replacement, current);
  return aside;
}

bool hard_link(const std::string& target, const std::string& link) {
  return ::link(target.c_str(), link.c_str()) == 0;
}

void sync_mapping(const at::Tensor& tensor) {
  const FileMapping* mapping = file_mapping_of(tensor);
  TORCH_INTERNAL_ASSERT(mapping != nullptr, "not a file mapping");
  TORCH_CHECK(
      mapping->length == 0 ||
          ::msync(mapping->address, mapping->length, MS_SYNC) == 0,
      "could not write back ",
      mapping->path,
      ": ",
      errno_text(errno));
  const int fd_raw =
      ::open(mapping->path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  TORCH_CHECK(
      fd_raw >= 0, "could not open ", mapping->path, ": ", errno_text(errno));
  FileDescriptor fd(fd_raw);
  TORCH_CHECK(
      ::fsync(fd.get()) == 0,
      "could not sync ",
      mapping->path,
      ": ",
      errno_text(errno));
}

void relocate_mapped_filename(
    const at::Tensor& tensor,
    std::string_view from_dir,
    std::string_view to_dir) {
  FileMapping* mapping = file_mapping_of(tensor);
  if (mapping == nullptr || mapping->path.size() <= from_dir.size() ||
      mapping->path.compare(0, from_dir.size(), from_dir) != 0 ||
      mapping->path[from_dir.size()] != '/') {
    return;
  }
  mapping->path = std::string(to_dir) + mapping->path.substr(from_dir.size());
}

at::Tensor map_whole_file(
    const std::string& path, bool writable, const EntryName& what) {
  const int fd_raw =
      ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (fd_raw < 0) {
    const int err = errno;
    TORCH_CHECK(
        !(writable && (err == EACCES || err == EROFS)),
        "cannot map ",
        what,
        " for writing (mode r+): ",
        path,
        " is not writable");
    TORCH_CHECK(
        false, "cannot open ", what, " (", path, "): ", errno_text(err));
  }
  FileDescriptor fd(fd_raw);
  struct stat st {};
  TORCH_CHECK(
      ::fstat(fd.get(), &st) == 0,
      "could not inspect ",
      path,
      ": ",
      errno_text(errno));
  TORCH_CHECK(S_ISREG(st.st_mode), what, " (", path, ") is not a regular file");
  const std::vector<int64_t> shape{static_cast<int64_t>(st.st_size)};
  at::Tensor tensor = map_open_file(
      fd.get(), path, c10::kByte, shape, writable, /*check_file=*/false, what);
  forget_mapped_filename(tensor);
  return tensor;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
