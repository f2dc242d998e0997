#pragma once

// The one way a file is replaced whole: written under a temporary name in
// the same directory and renamed over the destination once complete, so a
// reader or a kill sees the old file or the new one, never a part of
// either. The memmap writer's meta.json files, archives, safetensors files
// and consolidated files all go through it.

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// A file being written under a temporary name that `commit` renames over
/// its destination. Destroyed without a commit (an error, an exception),
/// it closes and removes the temporary file, leaving the destination as it
/// was. Not thread-safe; one writer at a time.
///
/// Example:
///   AtomicFile file = AtomicFile::beside(path, 0666, "the archive");
///   file.write(bytes.data(), bytes.size());
///   file.commit(/*durable=*/true);
class AtomicFile {
 public:
  /// Creates `temp` (exclusively, never through a symlink) with the
  /// permission bits `mode` (less the umask) to replace `path` later; `what`
  /// names the file in errors. Throws if `temp` cannot be created.
  AtomicFile(std::string path, std::string temp, mode_t mode, std::string what);
  /// Creates the temporary as a hidden sibling of `path`,
  /// `.<name>.tmp-<pid>-<n>`, first removing the siblings that killed
  /// writers left (see temporary_sibling and remove_stale_siblings).
  static AtomicFile beside(
      const std::string& path, mode_t mode, std::string what);
  /// Creates the temporary as `<path>.tmp-<pid>-<n>`: for a meta.json,
  /// whose directory a save's checks look into by that name.
  static AtomicFile suffixed(
      const std::string& path, mode_t mode, std::string what);
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  AtomicFile& operator=(AtomicFile&&) = delete;
  /// Closes and removes the temporary file unless committed.
  ~AtomicFile();

  /// Returns the open descriptor of the temporary file (for a writer that
  /// writes through it, such as the zip writer); -1 once committed.
  int fd() const noexcept {
    return fd_;
  }
  /// Returns the temporary file's path (for a writer that opens it itself).
  const std::string& temp_path() const noexcept {
    return temp_;
  }
  /// Returns the destination.
  const std::string& path() const noexcept {
    return path_;
  }
  /// Appends `nbytes` bytes at the descriptor's position; throws naming the
  /// file on a short or failed write.
  void write(const void* data, size_t nbytes);
  /// Makes the file the destination: fsyncs it (`durable`), closes it,
  /// renames it over `path` and, `durable`, fsyncs the directory so the
  /// new name survives a power loss. Throws, removing the temporary file,
  /// if any step fails before the rename.
  void commit(bool durable);

 private:
  void discard() noexcept;

  std::string path_;
  std::string temp_;
  std::string what_;
  int fd_ = -1;
  bool committed_ = false;
};

/// Replaces `path` with `content` through an AtomicFile named
/// `<path>.tmp-<pid>-<n>`; `durable` fsyncs the file and the directory.
void write_file_atomically(
    const std::string& path, std::string_view content, bool durable);

}  // namespace detail
TENSORDICT_END_NAMESPACE
