#pragma once

// Where a memmap load reads its files (a directory, or a `.tdz` archive).
// Writing an archive is memmap/archive_sink.h. See NOTE [Memmap archives]
// in tensordict/archive.h.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/file_io.h"
#include "tensordict/fwd.h"
#include "tensordict/options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// The files a load reads, by path: the file system, or the entries of an
/// archive (paths then start with the archive's own path).
class TreeFiles {
 public:
  virtual ~TreeFiles() = default;
  /// What `path` names, as path_kind.
  virtual PathKind kind(const std::string& path) const = 0;
  /// The whole small file `path`, as read_small_file.
  virtual std::string read_small(
      const std::string& path, int64_t max_bytes) const = 0;
  /// The leaf stored at `path`, as map_tensor_file_if_exists.
  virtual std::optional<at::Tensor> map_leaf(
      const std::string& path,
      c10::ScalarType dtype,
      c10::IntArrayRef shape,
      MapMode mode,
      const EntryName& what) const = 0;
  /// True for an archive: the loaded dicts get no saved path.
  virtual bool is_archive() const = 0;
  /// Inflates the deflated leaves below `dir` on `num_threads` threads
  /// ahead of the `map_leaf` calls that take them, as Python's
  /// `load_memmap(num_threads=n)` does; nothing for a directory, for fewer
  /// than two threads or fewer than two such leaves. A leaf that fails here
  /// is inflated again by its `map_leaf`, which throws naming its key.
  virtual void prefetch_compressed(
      const std::string& /*dir*/, int64_t /*num_threads*/) const {}
};

/// The file system.
const TreeFiles& file_system_files();

/// Opens `prefix` as an archive if it is a regular file (or a symlink to
/// one), mapped as `mode` asks; returns null for anything else (a directory
/// loads as before). Throws if the archive is malformed.
std::unique_ptr<TreeFiles> open_archive_files(
    const std::string& prefix, MapMode mode);

/// True if `prefix` names an archive to write: it ends with ".tdz".
TENSORDICT_API bool is_archive_path(const std::string& prefix);

/// Checks the CRC-32 of every entry of the archive `path` (the structure
/// too, see NOTE [Zip reader]) without stopping at the first bad entry, as
/// Python's `zipfile.testzip` but listing them all: one line per problem,
/// empty when every entry is intact. For `tensordict verify`.
TENSORDICT_API std::vector<std::string> archive_crc_problems(
    const std::string& path);

}  // namespace detail
TENSORDICT_END_NAMESPACE
