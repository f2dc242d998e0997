#pragma once

// The directory sink: writes a SavePlan into directories, in place or
// through a StagedTree. See NOTE [Crash-safe overwrite] in
// io/staged_tree.cpp.

#include <string>

#include "io/staged_tree.h"
#include "memmap/plan.h"
#include "tensordict/fwd.h"
#include "tensordict/options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Begins the directory tree of a save at `options.prefix()`: staged when
/// the prefix is missing or holds a complete save and nothing else (or
/// with `atomic`), in place otherwise. Throws as StagedTree::begin.
StagedTree stage_directory(const MemmapOptions& options);

/// Writes everything `plan` planned into `tree`: the directories, the leaf
/// files (on `num_threads` threads), then the meta.json files, children
/// before parents, and swaps a staged tree in. On an error, removes what it
/// wrote (see NOTE [Failed saves]) and rethrows.
void write_directory(SavePlan& plan, StagedTree& tree);

/// Writes the directory of a root NonTensorData or NonTensorStack at
/// `options.prefix()` (nothing without a prefix).
void save_non_tensor_root(const Value& value, const MemmapOptions& options);

}  // namespace detail
TENSORDICT_END_NAMESPACE
