#pragma once

// The work behind the `tensordict` command-line tool, kept in a library so
// that tests can call it: reading a memmap directory, a `.tdz` archive or a
// consolidated file,
// the canonical dump, a human-readable listing, and copying a tree.

#include <iosfwd>
#include <string>
#include <vector>

#include "tensordict/memmap.h"

namespace tensordict::tools {

/// Loads what `path` names: a memmap directory or a `.tdz` archive (a
/// ".tdz" name, or a zip with a meta.json: `load_memmap_any`), or any other
/// file as a consolidated file (`from_consolidated_any`, a dict or a lazy
/// stack, which checks its content and says what does not fit).
LoadedTree load_any(const std::string& path);

/// Checks what `path` names without stopping at the first problem where it
/// can: `verify_memmap` for a directory; for an archive, `verify_memmap`
/// and then every entry's CRC-32; for a consolidated file, the one
/// error `from_consolidated` gives, if any. Returns one line per problem.
std::vector<std::string> verify_any(const std::string& path);

/// Returns the canonical dump of a loaded tree (the form
/// tests/python/td_dump.py documents): `{"batch_size", ["names"],
/// ["stack_dim"], ["class"], "entries"}`, entries sorted by key, each a
/// tensor (dtype, shape, sha256 of its little-endian bytes) or a non-tensor
/// value.
Json dump_tree(const LoadedTree& tree);

/// Writes a listing of a tree: keys, kinds, dtypes, shapes, bytes, batch
/// sizes and non-tensor values.
void print_info(
    std::ostream& out, const std::string& path, const LoadedTree& tree);

/// Loads `source` (a directory or an archive) and saves it again under
/// `destination`, an archive if it ends with ".tdz" (legacy key names come
/// out encoded); `progress` is called as leaves are written.
void copy_tree(
    const std::string& source,
    const std::string& destination,
    const MemmapProgress& progress = {});

}  // namespace tensordict::tools
