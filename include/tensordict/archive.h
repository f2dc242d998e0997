#pragma once

/// @file
/// Memmap archives (`.tdz`): a memmap directory packed into one zip file, as
/// Python tensordict 0.15's `pack_memmap`, `unpack_memmap`,
/// `refresh_archive_checksums`, `save("x.tdz")` and `memmap_like("x.tdz")`
/// write it.
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
// - `memmap`/`save` (and `memmap(stack, options)` for a lazy stack) with a
//   prefix ending in ".tdz" plan the tree as for a
//   directory (every key checked, every meta.json built, no file touched),
//   then stream each leaf's bytes straight into the zip: no directory is
//   staged. The result is the archive loaded (copy-on-write). An empty leaf
//   has no entry, as in a directory. The archive's bytes are Python's for
//   the same tree with `JsonStyle::kSpaced` (but for the zip timestamps).
// - `memmap_like("x.tdz")` writes a zero-filled archive (an existing one is
//   replaced, never reused) and returns it loaded with
//   `MapMode::kReadWrite`: writes into its leaves reach the archive.
// - `memmap_` takes a directory only, as Python's: "x.tdz" is a directory
//   name there (its leaves must each map a file of their own).
// - Loading maps the archive copy-on-write (Python's default `mode="r"`;
//   `MapMode::kAuto` is the same here): writes into the leaves stay in
//   memory. `MapMode::kReadWrite` (Python's `mode="r+"`) maps it shared:
//   writes reach the archive, whose CRCs then no longer match until
//   `refresh_archive_checksums` rewrites them. It needs a writable file and
//   stored, aligned payloads (as tensordict writes them).
// - Deflated leaves (Python's `compression="deflate"`) load by inflating a
//   copy, on `LoadMemmapOptions::num_threads` threads ahead of the load when
//   it is 2 or more (Python's `num_threads`); bzip2 and lzma entries are
//   refused with a message.
// - CRC-32s are checked for every entry `unpack_memmap` extracts, for every
//   meta.json and for every compressed leaf; a mapped leaf is not read when
//   it loads, so its CRC is not checked (as in Python). `tensordict verify
//   x.tdz` checks them all.
// - The zip is parsed as untrusted bytes: see NOTE [Zip reader] in
//   src/io/zip_reader.cpp for what is refused.
// - Writes go to a hidden temporary file beside the archive, renamed over
//   it once complete: a refused or failed write (`existsok(false)` is
//   checked before anything is written) leaves no file behind, an existing
//   archive untouched, and removes the parent directories it created.
// Differences from Python: `save`/`memmap` of a dict that is memmapped to
// a directory stream the dict's leaves, where Python packs that directory
// as it is (the same entries unless the directory holds other files or
// another meta.json style; a dict that no longer matches its directory
// is saved as it is in memory). `save`/`memmap` deflate the leaves with
// `MemmapOptions::compression("deflate")`, as `pack_memmap` does. bzip2 and
// lzma are not written or read.

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

/// Recomputes the CRC-32 of every stored entry of the archive
/// `archive_path` and writes it into the entry's local header (or data
/// descriptor) and central record, in place, and returns `archive_path`, as
/// Python's `refresh_archive_checksums`. Writes through a shared mapping
/// (`load_memmap` with `MapMode::kReadWrite`, or `memmap_like` of a `.tdz`)
/// leave the CRCs stale: `unpack_memmap`, `unzip` and Python's `zipfile`
/// then report the entry as corrupted; `load_memmap` does not check them.
/// Compressed entries keep their CRC (they cannot be written in place).
/// Throws (ValueError) if the file is not a memory-mapped archive, if it is
/// malformed (see NOTE [Zip reader]) or not writable.
TENSORDICT_API std::string refresh_archive_checksums(
    const std::string& archive_path);

/// Returns true if `path` is a regular file holding a zip archive with a
/// top-level meta.json, as Python's `is_memmap_archive`; false for a
/// directory, a missing path or any other file (a malformed zip too).
TENSORDICT_API bool is_memmap_archive(const std::string& path);

TENSORDICT_END_NAMESPACE
