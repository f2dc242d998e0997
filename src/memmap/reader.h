#pragma once

// What the loader offers the rest of memmap/ beyond the public load
// members. See NOTE [Memmap layout].

#include <string>

#include "tensordict/fwd.h"
#include "tensordict/options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Loads the root NonTensorData or NonTensorStack of a directory
/// (src/memmap/reader.cpp); throws naming the directory otherwise.
Value load_non_tensor_root(
    const std::string& prefix, const LoadMemmapOptions& options);

}  // namespace detail
TENSORDICT_END_NAMESPACE
