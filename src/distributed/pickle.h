#pragma once

// Private to src/distributed/: Python pickles of plain data.
//
// torch.distributed's *_object_list and *_object collectives pickle the
// object and send the bytes. Python tensordict sends the consolidated
// metadata that way: plain data only (dict, list, tuple, str, int, float,
// bool, None). This codec writes and reads exactly that subset, so a C++
// rank can talk to a Python rank without a Python interpreter.
//
// Reading is safe for untrusted bytes: only the opcodes that build plain
// data are accepted (no GLOBAL, REDUCE, BUILD, ...: nothing can name a
// class or call a function), and nesting, sizes and the memo are bounded.
// Tuples are read as JSON arrays; dict keys must be strings.

#include <cstdint>
#include <string>
#include <string_view>

#include "tensordict/fwd.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Returns a protocol-2 pickle of `value` (objects become dicts, arrays
/// lists) that Python's `pickle.loads` reads back as the same data.
std::string pickle_dumps(const Json& value);

/// Reads a pickle of plain data written by Python (protocols 2 to 5) or by
/// `pickle_dumps`. Throws ValueError naming `what` and the byte offset on
/// anything else: an opcode that is not plain data, a truncated stream,
/// nesting deeper than `max_depth`, or a non-string dict key.
Json pickle_loads(
    std::string_view bytes, std::string_view what, int64_t max_depth = 64);

}  // namespace detail
TENSORDICT_END_NAMESPACE
