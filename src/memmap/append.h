#pragma once

// The recovery side of append_memmap, shared with the loader and the
// directory sink. See NOTE [Appending rows] in memmap/append.cpp.

#include <string>
#include <vector>

#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// The temporary meta.json that an append writes in `dir`
/// (src/memmap/append.cpp; see NOTE [Appending rows]).
std::string append_temporary(const std::string& dir);

/// The directories below `prefix` (itself included) that hold an append
/// temporary.
std::vector<std::string> append_temporaries(const std::string& prefix);

/// True if the append temporaries in `dirs` (all of them below `prefix`),
/// left by a killed append, are to replace their meta.json files (the append
/// had replaced the top one, and every temporary has its rows), false if
/// they are to be removed. See NOTE [Appending rows].
bool append_rolls_forward(
    const std::string& prefix, const std::vector<std::string>& dirs);

/// Applies that rule on disk: renames or removes the temporaries.
void recover_append(const std::string& prefix);

}  // namespace detail
TENSORDICT_END_NAMESPACE
