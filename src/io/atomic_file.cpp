// Replacing a file whole: a temporary name, then one rename. See
// io/atomic_file.h.

#include "io/atomic_file.h"

#include <c10/util/Exception.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "io/file_io.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

AtomicFile::AtomicFile(
    std::string path, std::string temp, mode_t mode, std::string what)
    : path_(std::move(path)), temp_(std::move(temp)), what_(std::move(what)) {
  fd_ = ::open(
      temp_.c_str(),
      O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
      mode);
  TORCH_CHECK(
      fd_ >= 0,
      "could not create ",
      temp_,
      " to write ",
      what_,
      ": ",
      std::strerror(errno));
}

AtomicFile AtomicFile::beside(
    const std::string& path, mode_t mode, std::string what) {
  remove_stale_siblings(path);
  return AtomicFile(
      path, temporary_sibling(path, "tmp"), mode, std::move(what));
}

AtomicFile AtomicFile::suffixed(
    const std::string& path, mode_t mode, std::string what) {
  static std::atomic<uint64_t> counter{0};
  std::string temp = path + ".tmp-" + std::to_string(::getpid()) + "-" +
                     std::to_string(counter.fetch_add(1));
  return AtomicFile(path, std::move(temp), mode, std::move(what));
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)),
      temp_(std::move(other.temp_)),
      what_(std::move(other.what_)),
      fd_(std::exchange(other.fd_, -1)),
      committed_(std::exchange(other.committed_, true)) {}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    discard();
  }
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) {
    (void)::close(std::exchange(fd_, -1));
  }
  (void)::unlink(temp_.c_str());
}

void AtomicFile::write(const void* data, size_t nbytes) {
  TORCH_INTERNAL_ASSERT(fd_ >= 0, "AtomicFile::write after commit");
  const WriteProgress done = write_fully(fd_, data, nbytes);
  TORCH_CHECK(
      done.written == nbytes,
      "could not write ",
      temp_,
      " (",
      what_,
      ", ",
      done.written,
      " of ",
      nbytes,
      " bytes written): ",
      done.reason());
}

void AtomicFile::commit(bool durable) {
  TORCH_INTERNAL_ASSERT(!committed_, "AtomicFile committed twice");
  try {
    TORCH_CHECK(
        !durable || ::fsync(fd_) == 0,
        "could not fsync ",
        temp_,
        " (",
        what_,
        "): ",
        std::strerror(errno));
    // Even when close fails (a failed write-back), the descriptor is gone.
    const int closed = ::close(std::exchange(fd_, -1));
    TORCH_CHECK(
        closed == 0,
        "could not close ",
        temp_,
        " (",
        what_,
        "): ",
        std::strerror(errno));
    rename_path(temp_, path_);
  } catch (...) {
    discard();
    committed_ = true;  // nothing left to remove
    throw;
  }
  committed_ = true;
  if (durable) {
    fsync_parent_directory(path_);
  }
}

void write_file_atomically(
    const std::string& path, std::string_view content, bool durable) {
  AtomicFile file = AtomicFile::suffixed(path, 0666, path);
  file.write(content.data(), content.size());
  file.commit(durable);
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
