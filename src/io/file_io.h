#pragma once

// The POSIX layer of memmap: files, mappings and directories, each checked
// so that nothing below a prefix is followed through a symlink and every
// failure says which file and why.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensordict/options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Returns `dir + "/" + name`.
std::string join_path(std::string_view dir, std::string_view name);

/// What a path names, without following a final symlink.
enum class PathKind { kMissing, kFile, kDirectory, kSymlink, kOther };

class KeyPath;

/// Names an entry in error messages: a phrase, or a key path that is only
/// rendered when a message is built (a load maps thousands of leaves and
/// throws for none of them).
class EntryName {
 public:
  /// A phrase, kept as a view: it must outlive the name.
  EntryName(std::string_view text) : text_(text) {}    // NOLINT: implicit
  EntryName(const char* text) : text_(text) {}         // NOLINT: implicit
  EntryName(const std::string& text) : text_(text) {}  // NOLINT: implicit
  /// A key path, kept by reference: it must outlive the name.
  EntryName(const KeyPath& path) : path_(&path) {}  // NOLINT: implicit

  /// Writes the phrase, or the key path as KeyPath::to_string spells it.
  friend std::ostream& operator<<(std::ostream& out, const EntryName& name);

 private:
  std::string_view text_;
  const KeyPath* path_ = nullptr;
};

/// Returns what `path` names (lstat); throws on errors other than ENOENT.
PathKind path_kind(const std::string& path);

/// Maps the first `nbytes` of the regular file `path` and returns a tensor
/// of `shape` and `dtype` over them. Throws if the file is missing, is a
/// symlink or is shorter than `nbytes`; `what` names the entry in messages.
at::Tensor map_tensor_file(
    const std::string& path,
    c10::ScalarType dtype,
    c10::IntArrayRef shape,
    MapMode mode,
    const EntryName& what);

/// Same as map_tensor_file, but returns nullopt when `path` does not exist.
std::optional<at::Tensor> map_tensor_file_if_exists(
    const std::string& path,
    c10::ScalarType dtype,
    c10::IntArrayRef shape,
    MapMode mode,
    const EntryName& what);

/// Makes a tensor of `shape` and `dtype` in anonymous shared memory.
at::Tensor shared_memory_tensor(c10::IntArrayRef shape, c10::ScalarType dtype);

/// Returns the file a tensor's storage maps, if it maps one of ours and
/// that file is the tensor's own.
std::optional<std::string> mapped_filename(const at::Tensor& tensor);

/// Marks the file mapped by `tensor` as a file of many tensors (a
/// consolidated file): `mapped_filename` no longer reports it, so its views
/// save like any tensor, as the plain tensors of Python's
/// `from_consolidated` do. The mapping itself is unchanged.
void forget_mapped_filename(const at::Tensor& tensor);

/// Returns true if the tensor's storage is one of our file mappings or
/// anonymous shared memory.
bool is_mapped(const at::Tensor& tensor);

/// Options of write_leaf_file.
///
/// Example: `LeafFileOptions().existsok(true).durable(true)`
struct LeafFileOptions {
  /// Reuse a file that already exists; when false it is an error.
  TENSORDICT_ARG(bool, existsok) = false;
  /// Fsync the file before mapping it.
  TENSORDICT_ARG(bool, durable) = false;
  /// With a null `data`, reserve the file's blocks before mapping it, so a
  /// full disk is an error here rather than a SIGBUS when the mapping is
  /// first written. Costs nothing when the caller fills the whole file.
  TENSORDICT_ARG(bool, preallocate) = false;
};

/// Writes a leaf file and maps it: creates `path` (refusing a symlink, and
/// an existing file unless `options.existsok()`), writes the bytes of a
/// `shape` tensor of `dtype` from `data`, or with a null `data` only sizes
/// the file (sparse zeros), then returns the file mapped read-write. A file
/// longer than the data keeps its length, as in Python. `what` names the
/// entry in messages.
at::Tensor write_leaf_file(
    const std::string& path,
    const void* data,
    c10::ScalarType dtype,
    c10::IntArrayRef shape,
    std::string_view what,
    const LeafFileOptions& options = {});

/// Creates the directory `path` if missing (with its parents when
/// `parents`); throws if it is a symlink (unless `allow_symlink`) or not a
/// directory.
void ensure_directory(
    const std::string& path, bool parents, bool allow_symlink, bool durable);

/// Removes the file `path` if it exists.
void remove_file(const std::string& path);

/// How far `write_fully` got: every byte, or those before a call failed.
struct WriteProgress {
  /// The bytes written.
  size_t written = 0;
  /// The failed call's errno; 0 when a call returned having written nothing.
  int error = 0;
  /// Returns why the write stopped short, for a message: the errno's text,
  /// or "nothing written".
  std::string reason() const;
};

/// Writes the `nbytes` at `data` to `fd`: with pwrite at `offset` (the
/// descriptor's position is left alone), or with write at the position
/// when `offset` is negative. Retries EINTR and short writes, and moves at
/// most 1 GiB a call (Linux moves at most about 2 GiB); it stops early only
/// when a call fails, and leaves the message to the caller, who knows what
/// the file is.
WriteProgress write_fully(
    int fd, const void* data, size_t nbytes, int64_t offset = -1) noexcept;

/// Writes `content` as the whole file `path`, created or truncated in place
/// (not through a symlink): for files no reader looks at yet.
void write_whole_file(const std::string& path, std::string_view content);

/// Reads a whole small file (not through a symlink); throws if it is
/// larger than `max_bytes`.
std::string read_small_file(const std::string& path, int64_t max_bytes);

/// Fsyncs a directory so that entries created in it survive a power loss.
void fsync_directory(const std::string& path);

/// True if the two paths name the same file (device and inode).
bool same_file(const std::string& a, const std::string& b);

/// Fsyncs the directory holding `path`, so that its entry survives a power
/// loss.
void fsync_parent_directory(const std::string& path);

/// Returns the entries of the directory `path` (without "." and ".."), each
/// with what it names (not following symlinks); throws if it cannot be read.
std::vector<std::pair<std::string, PathKind>> list_directory(
    const std::string& path);

/// Returns an unused name for a hidden sibling of `path` in the same
/// directory: `.<name>.<tag>-<pid>-<n>`, `pid` being this process's.
/// See NOTE [Crash-safe overwrite].
std::string temporary_sibling(const std::string& path, std::string_view tag);

/// Removes the hidden siblings `.<name>.tmp-<pid>-<n>` and
/// `.<name>.old-<pid>-<n>` of `path` left by a process that no longer runs.
void remove_stale_siblings(const std::string& path);

/// Removes `path` and, for a directory, everything below it, without
/// following symlinks. Nothing happens if it is missing.
void remove_tree(const std::string& path);

/// Renames `from` to `to`, replacing a file (or an empty directory) there.
void rename_path(const std::string& from, const std::string& to);

/// Puts `replacement` in place of the directory `current` in one atomic
/// step (renameat2 with RENAME_EXCHANGE) and returns where the old tree
/// went (the name `replacement` had). Where the kernel or file system
/// cannot exchange, renames `current` aside to a hidden `old` sibling, then
/// `replacement` onto `current`, and returns the aside name.
std::string exchange_directories(
    const std::string& replacement, const std::string& current);

/// Makes `link` a second name of the file `target`; false if the file system
/// refuses (the caller then copies).
bool hard_link(const std::string& target, const std::string& link);

/// Writes the dirty pages of the file `tensor` maps to its file and fsyncs
/// it; throws if `tensor` maps no file of ours.
void sync_mapping(const at::Tensor& tensor);

/// Makes the file mapping of `tensor` report its file under `to_dir`
/// instead of `from_dir` (the directory was renamed); other tensors are left
/// alone.
void relocate_mapped_filename(
    const at::Tensor& tensor,
    std::string_view from_dir,
    std::string_view to_dir);

/// Maps the whole regular file `path` (following a symlink) as a flat
/// uint8 tensor: shared when `writable` (throws if the file cannot be
/// written), else copy-on-write. The mapping is marked as a file of many
/// tensors (see forget_mapped_filename); `what` names it in messages.
at::Tensor map_whole_file(
    const std::string& path, bool writable, const EntryName& what);

}  // namespace detail
TENSORDICT_END_NAMESPACE
