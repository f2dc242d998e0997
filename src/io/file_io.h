#pragma once

// The POSIX layer of memmap: files, mappings and directories, each checked
// so that nothing below a prefix is followed through a symlink and every
// failure says which file and why.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tensordict/options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Returns `dir + "/" + name`.
std::string join_path(std::string_view dir, std::string_view name);

/// What a path names, without following a final symlink.
enum class PathKind { kMissing, kFile, kDirectory, kSymlink, kOther };

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
    std::string_view what);

/// Same as map_tensor_file, but returns nullopt when `path` does not exist.
std::optional<at::Tensor> map_tensor_file_if_exists(
    const std::string& path,
    c10::ScalarType dtype,
    c10::IntArrayRef shape,
    MapMode mode,
    std::string_view what);

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

/// Replaces `path` with `content` atomically: a temporary file in the same
/// directory, renamed over it. `durable` fsyncs the file and the directory.
void write_file_atomically(
    const std::string& path, std::string_view content, bool durable);

/// Reads a whole small file (not through a symlink); throws if it is
/// larger than `max_bytes`.
std::string read_small_file(const std::string& path, int64_t max_bytes);

/// Fsyncs a directory so that entries created in it survive a power loss.
void fsync_directory(const std::string& path);

/// True if the two paths name the same file (device and inode).
bool same_file(const std::string& a, const std::string& b);

}  // namespace detail
TENSORDICT_END_NAMESPACE
