#pragma once

// Memmap archives (`.tdz`): a memmap directory packed into one zip file, as
// Python tensordict 0.15's `pack_memmap`, `unpack_memmap` and
// `save("x.tdz")` write it.
//
// NOTE [Memmap archives]
// The entries of an archive are the files of a memmap directory (see NOTE
// [Memmap layout] in memmap.h): `meta.json` first at every level, then the
// other files by name, then the sub-directories. Tensor payloads
// (`*.memmap`) are stored uncompressed and start on a 64-byte boundary (a
// padding block, id 0x6474, in the local header's extra field), every
// header carries zip64 sizes, so `TensorDict::load_memmap("x.tdz")` maps the
// archive once and each leaf is a view into that mapping, without a copy.
// `unzip` gives back the directory.
// - Loading maps the archive copy-on-write (Python's default `mode="r"`):
//   writes into the leaves stay in memory. `MapMode::kReadWrite` maps it
//   shared: writes reach the archive, whose CRCs then no longer match.
// - Deflated leaves (Python's `compression="deflate"`) load by inflating a
//   copy; bzip2 and lzma entries are refused with a message.
// - CRC-32s are checked for every entry `unpack_memmap` extracts, for every
//   meta.json and for every compressed leaf; a mapped leaf is not read when
//   it loads, so its CRC is not checked (as in Python).
// - The zip is parsed as untrusted bytes: see NOTE [Zip reader] in
//   src/io/zip_reader.cpp for what is refused.
// - Writes go to a hidden temporary file beside the archive, renamed over
//   it once complete: a refused or failed write leaves no file behind and
//   an existing archive untouched.

#include <string>

#include "tensordict/export.h"
#include "tensordict/options.h"

TENSORDICT_BEGIN_NAMESPACE

/// Options of `pack_memmap`, named as Python's keyword arguments.
///
/// Example: `pack_memmap("/data/run", "/data/run.tdz",
/// PackMemmapOptions().compression("deflate"))`
struct TENSORDICT_API PackMemmapOptions {
  /// How tensor payloads are stored: "stored" (the default, mappable) or
  /// "deflate" (smaller; leaves load by inflating a copy).
  TENSORDICT_ARG(std::string, compression) = "stored";
  /// The deflate level, 0-9; -1 is zlib's default.
  TENSORDICT_ARG(int, compresslevel) = -1;
  /// Fsync the archive and its directory before returning.
  TENSORDICT_ARG(bool, durable) = false;
};

/// The file suffix that makes `TensorDict::save`/`memmap` write an archive
/// and that Python recognises.
constexpr const char* kArchiveSuffix = ".tdz";

/// Packs the memmap directory `prefix` into the archive `archive_path` and
/// returns `archive_path`, as Python's `pack_memmap(prefix, archive_path)`.
/// An existing file there is replaced atomically (a symlink is followed).
/// Throws if `prefix` has no meta.json, holds a symlink or a special file,
/// if the archive would lie inside `prefix`, or if an existing archive is
/// not writable; nothing is written then.
TENSORDICT_API std::string pack_memmap(
    const std::string& prefix,
    const std::string& archive_path,
    const PackMemmapOptions& options = {});

/// Extracts the archive `archive_path` into the directory `prefix` (created
/// with its parents if missing; existing files are replaced) and returns
/// `prefix`, as Python's `unpack_memmap`. Checks every entry's CRC-32.
/// Throws if the file is not a memmap archive, is malformed (see NOTE [Zip
/// reader]) or if a path inside `prefix` is a symlink.
TENSORDICT_API std::string unpack_memmap(
    const std::string& archive_path, const std::string& prefix);

/// Returns true if `path` is a regular file holding a zip archive with a
/// top-level meta.json, as Python's `is_memmap_archive`; false for a
/// directory, a missing path or any other file (a malformed zip too).
TENSORDICT_API bool is_memmap_archive(const std::string& path);

TENSORDICT_END_NAMESPACE
