#pragma once

// Private to the library: Python pickles read without running anything.
//
// Two readers share one opcode machine:
// - `pickle_loads`, plain data only (dict, list, tuple, str, int, float,
//   bool, None), for the pickles torch.distributed's *_object collectives
//   send (src/distributed/); `pickle_dumps` writes that subset.
// - `unpickle`, the restricted reader for the non-tensor values Python
//   tensordict pickles into a memmap tree (`other.pickle`, `pickle.pkl`):
//   plain data and bytes, plus numpy arrays and scalars of the dtypes numpy
//   and torch share, `torch.Size` and `collections.OrderedDict`.
//
// NOTE [Restricted unpickler]
// A pickle is a program for a stack machine whose GLOBAL opcodes import any
// name and whose REDUCE opcode calls it: loading one with Python's pickle
// runs whatever the file says. Here nothing is imported or called. GLOBAL
// and STACK_GLOBAL resolve only the names below, to a tag; REDUCE and BUILD
// accept only those tags with arguments of the expected kinds, and build
// the value themselves:
//   numpy.core.multiarray._reconstruct, numpy._core.multiarray._reconstruct
//     with numpy.ndarray, then BUILD with (version, shape, dtype,
//     is_fortran, raw bytes): an array (protocols 2 to 4);
//   numpy.core.numeric._frombuffer, numpy._core.numeric._frombuffer
//     (bytes, dtype, shape, order): an array (protocol 5);
//   numpy.dtype (descr, align, copy), then BUILD with (version, byte order,
//     None, None, None, elsize, alignment, flags): a dtype;
//   numpy.core.multiarray.scalar, numpy._core.multiarray.scalar
//     (dtype, raw bytes): a numpy scalar;
//   torch.Size (tuple of ints,); collections.OrderedDict (); and
//   _codecs.encode (str, "latin1"): bytes, as protocol 2 writes them.
// Every other name (os.system, builtins.eval, torch._utils...) and every
// other opcode (INST, OBJ, NEWOBJ, EXT*, PERSID, the out-of-band buffers,
// sets, protocol 0/1 text opcodes) is refused with its name, before
// anything else happens. The dtypes are bool, int8 to int64, uint8 to
// uint64, float16/32/64 and complex64/128, in either byte order (an array
// of the other order is byte-swapped), C or Fortran order; structured,
// sub-array, string, object and datetime dtypes are refused.
//
// The input is untrusted: every length is checked against the bytes left,
// integers wider than 64 bits, strings that are not UTF-8, a stack or memo
// used wrongly, an array whose bytes do not match its shape and dtype, a
// container that holds itself and nesting deeper than `max_depth` are
// errors (ValueError naming `what` and the byte offset), never a crash;
// shared (memoized) values are bounded in what they expand to.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

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

/// A Python value read by `unpickle`, with what JSON would lose kept apart.
struct PickledValue {
  /// The Python type the value had.
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kStr,
    kBytes,
    kList,
    kTuple,
    kDict,
    kSize,         // torch.Size
    kArray,        // numpy.ndarray
    kNumpyScalar,  // numpy.float32(1.5), numpy.int64(3), ...
  };
  Kind kind = Kind::kNone;
  /// The value of None, bool, int, float, str, bytes (a JSON binary) and
  /// of a numpy scalar that is not complex (a JSON number or bool).
  Json atom;
  /// An array's data (C-contiguous, native byte order, on the CPU); a
  /// numpy scalar's as a 0-dim tensor.
  at::Tensor array;
  /// The items of a list, tuple or torch.Size; a dict's keys and values,
  /// alternating, in the pickle's order.
  std::vector<PickledValue> items;
};

/// Returns the Python type name of `kind` ("numpy.ndarray", "tuple", ...).
const char* pickled_kind_name(PickledValue::Kind kind) noexcept;

/// Reads a pickle (protocols 2 to 5) of the values Python tensordict
/// pickles for non-tensor data, without executing anything; see NOTE
/// [Restricted unpickler]. Throws ValueError naming `what`, the byte offset
/// and the refused global, opcode or value.
PickledValue unpickle(
    std::string_view bytes, std::string_view what, int64_t max_depth = 64);

/// Returns `value` as JSON, as Python's `json.dumps` would write it where it
/// can: tuples and torch.Size are arrays, numpy arrays nested lists (their
/// `tolist()`), numpy scalars numbers, int, bool and None dict keys their
/// JSON text. Bytes, which `json.dumps` refuses, are a JSON binary. Throws
/// ValueError naming `what` for what JSON cannot hold: complex numbers, a
/// dict key of another type, two keys with one JSON text.
Json pickled_to_json(const PickledValue& value, std::string_view what);

}  // namespace detail
TENSORDICT_END_NAMESPACE
