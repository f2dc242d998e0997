#pragma once

/// @file
/// Safetensors files: `to_safetensors` and `from_safetensors`, byte-compatible
/// with Python tensordict 0.15's functions of the same names and with the
/// `safetensors` package.
//
// NOTE [Safetensors and tensordict]
// Each tensor is saved under its nested key joined with ".", the names a
// model's state_dict uses. The structure (each level's batch size and dim
// names, the stack dim of each lazy stack, the Python tensorclass of each
// level, the non-tensor values) is one JSON string under the key
// "tensordict" of the file's `__metadata__`, as Python writes it:
//
//   {"version": 1, "root": {"batch_size": [...], "names": [...] | null,
//    ["stack_dim": int,] ["class": "<class 'm.Cls'>",]
//    "keys": {key: {"tensor": "a.b"} | {"non_tensor": <JSON>}
//                  | {"td": <level>}, ...}}}
//
// `to_safetensors` writes the same bytes as Python's for the same dict (the
// tests compare them). Any other safetensors file (a checkpoint from the
// Hugging Face Hub) loads as a nested dict with an empty batch size, each
// name split on ".", keys in sorted name order, as Python loads it.
//
// Loading maps the file privately (copy-on-write) and each leaf is a view
// of the mapping, which lives as long as a leaf does: no bytes are copied,
// and writing into a leaf never changes the file. A leaf whose bytes are not
// aligned to its item size (files from other writers; the safetensors
// package always aligns them) is copied instead. A symlink is followed (the
// Hub's cache is made of them). A file must not be truncated while mapped:
// reading past the new end raises SIGBUS, as with any mmap.
//
// The file is untrusted and checked as the safetensors crate checks it,
// with errors naming the tensor and what was expected and found: an 8-byte
// header length within the file and at most 100 MB; a JSON object in UTF-8;
// `__metadata__` an object of strings; each tensor a known dtype, a shape of
// non-negative sizes whose byte size is its offsets' span; the tensors
// sorted by offset start at 0, neither overlap nor leave holes, and end at
// the end of the file. The tensordict JSON is checked member by member.
//
// Differences from Python, for C++'s sake:
// - A name with an empty part ("a..b", ".a", "a.") in a file without
//   tensordict metadata is refused (Python makes a key ""), and so is a
//   name that is both a tensor and the prefix of another ("a" and "a.b";
//   Python fails on it too, with a less direct message).
// - A tensor named twice in the tensordict metadata is refused (Python
//   loads two copies); C++ would alias one mapping.
// - Python's UnbatchedTensor has no C++ counterpart: an entry marked
//   "unbatched" is refused with its key.
// - A tensorclass level loads as a TensorDict (or lazy stack) that
//   remembers its class (`python_class()`), as a memmap load does; Python
//   needs the class imported.
// - A lazy stack inside a lazy stack loads with dense elements (Python's
//   unbind also makes them dense).
// - `from_safetensors` returns a TensorDict; a file whose root is a lazy
//   stack loads with `from_safetensors_any`.
// - A lazy stack may have at most as many elements as the file has bytes
//   (or 65536 in a smaller file): each element is a dict, and a few bytes of
//   metadata must not ask for billions of them.

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "tensordict/lazy_stack.h"
#include "tensordict/options.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE

/// Options of `from_safetensors`, named as Python's keyword arguments.
///
/// Example: `from_safetensors(path, FromSafetensorsOptions().device(dev))`
struct TENSORDICT_API FromSafetensorsOptions {
  /// Moves the leaves to this device, which is also the result's device;
  /// nullopt keeps them on the CPU (as views of the file) with no device.
  TENSORDICT_ARG(std::optional<c10::Device>, device);
  /// The deepest nesting of the tensordict metadata accepted.
  TENSORDICT_ARG(int64_t, max_depth) = 128;
};

/// Saves `td` to the safetensors file `path` (see NOTE [Safetensors and
/// tensordict]), written beside it and renamed over it, so a reader never
/// sees half a file. Non-contiguous leaves are saved contiguous, leaves on
/// another device through the CPU. Throws ValueError if two keys join to
/// the same name ("a.b" and ("a", "b")), TypeError for a dtype safetensors
/// has no name for (complex128, ...), a non-strided leaf, a NonTensorStack
/// or a lazy stack whose elements have different keys; an error if the file
/// cannot be written (the temporary file is removed).
TENSORDICT_API void to_safetensors(
    const TensorDict& td, const std::string& path);

/// Saves the lazy stack `stack` as `to_safetensors(const TensorDict&, ...)`
/// does; it loads back with `from_safetensors_any`.
TENSORDICT_API void to_safetensors(
    const LazyStackedTensorDict& stack, const std::string& path);

/// Loads a safetensors file: with its tensordict structure if Python or
/// `to_safetensors` wrote it, else as a nested dict split on "." (see
/// NOTE [Safetensors and tensordict]). Leaves are views of a private
/// mapping of the file (copies when moved to `options.device()`, or when a
/// leaf is misaligned). Throws if the file cannot be read or is not a valid
/// safetensors file (the message names the tensor and what is wrong), if
/// its metadata has a version other than 1, if a tensor of the file is not
/// in its metadata, or if its root is a lazy stack (use
/// `from_safetensors_any`).
[[nodiscard]] TENSORDICT_API TensorDict from_safetensors(
    const std::string& path, const FromSafetensorsOptions& options = {});

/// Loads a safetensors file as `from_safetensors` does, whatever its root:
/// a TensorDict or a LazyStackedTensorDict.
[[nodiscard]] TENSORDICT_API LoadedTree from_safetensors_any(
    const std::string& path, const FromSafetensorsOptions& options = {});

TENSORDICT_END_NAMESPACE
