#pragma once

// Where a memmap load reads its files (a directory, or a `.tdz` archive),
// and the archive side of TensorDict::memmap. See NOTE [Memmap archives] in
// tensordict/archive.h.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

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
};

/// The file system.
const TreeFiles& file_system_files();

/// Opens `prefix` as an archive if it is a regular file (or a symlink to
/// one), mapped as `mode` asks; returns null for anything else (a directory
/// loads as before). Throws if the archive is malformed.
std::unique_ptr<TreeFiles> open_archive_files(
    const std::string& prefix, MapMode mode);

/// True if `prefix` names an archive to write: it ends with ".tdz".
bool is_archive_path(const std::string& prefix);

/// `td.memmap(options)` for an archive prefix: writes the archive and
/// returns it loaded (leaves are views into its mapping).
TensorDict save_archive(const TensorDict& td, const MemmapOptions& options);

}  // namespace detail
TENSORDICT_END_NAMESPACE
