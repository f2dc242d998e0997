#pragma once

// The archive sink of a save: a SavePlan streamed into one `.tdz` file. See
// NOTE [Memmap archives] in tensordict/archive.h.

#include <c10/util/FunctionRef.h>

#include <string>

#include "memmap/plan.h"
#include "tensordict/options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Which save reads `MemmapOptions::archive` and `compression`.
enum class SaveKind { kMemmap, kMemmapLike, kMemmapInPlace };

/// True if the `kind` save with `options` writes an archive: `archive()`
/// when set, else a ".tdz" prefix (never for `memmap_`). Throws
/// (ValueError), before anything is written, for an archive without a
/// prefix, a compression without an archive or for `memmap_like`, an
/// unknown compression, and `archive(true)` for `memmap_`.
bool writes_archive(const MemmapOptions& options, SaveKind kind);

/// Writes the archive at `options.prefix()` of the tree that `plan_tree`
/// plans into a SavePlan below the root it is given (zeros for `like`),
/// through an AtomicFile: a failure leaves the old archive (or none) and
/// removes the parents it created.
void write_tree_archive(
    const MemmapOptions& options,
    bool like,
    c10::function_ref<void(SavePlan&, const std::string&)> plan_tree);

}  // namespace detail
TENSORDICT_END_NAMESPACE
