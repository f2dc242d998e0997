#pragma once

/// @file
/// Consolidated TensorDicts: every leaf in one uint8 storage, in memory, in a
/// file, or in a byte buffer sent over a network or a queue.
//
// NOTE [Consolidated layout]
// `td.consolidate()` visits the leaves depth first in insertion order (a
// nested dict's leaves come where the dict is) and appends each leaf's bytes
// to one uint8 storage, zero-padded to a multiple of 8 bytes, as Python
// tensordict 0.15 does. The metadata is Python's nested JSON object:
//
//   {"cls": "TensorDict",
//    "non_tensors": {key: [data, batch_size, device|null], ...},
//    "leaves": {key: ["torch.float32", shape, start, stop, pad], ...},
//    "cls_metadata": {"device": str|null, "names": [...],
//                     "batch_size": [...], "is_locked": bool},
//    <nested key>: {the same for a nested dict, or "cls": "NonTensorStack"
//                   with "cls_metadata": {"stack_dim", "stack_dim_name",
//                   "is_locked"}}, ...}
//
// where `stop - start` is the leaf's byte size plus its padding. A file (and
// the byte buffer of `consolidated_bytes`) holds the data region, then that
// JSON, then its length as a little-endian int64: Python's
// `TensorDict.from_consolidated` reads what `consolidate(filename)` writes
// here, and the reverse.
//
// Guarantees beyond Python's (each has a test):
// - Files and buffers are untrusted: the trailer length, every offset, size,
//   dtype, shape, batch size, device string and name is checked before use;
//   anything inconsistent is an error naming the key and what was expected,
//   never a crash or a read past the data.
// - Nested keys that would collide with the metadata's own members ("cls",
//   "non_tensors", "leaves", "cls_metadata", "size") are refused when
//   consolidating (Python silently loses them).
//
// Differences from Python, for C++'s sake:
// - Jagged nested tensors are not supported (an error names the key). A lazy
//   stack consolidates as an entry of a dict, its elements' leaves in the
//   storage and its stack dim in the metadata, as Python writes it; a lazy
//   stack at the root has `LazyStackedTensorDict::consolidate` and
//   `from_consolidated` (its metadata is that level, "cls":
//   "LazyStackedTensorDict"), and `TensorDict::from_consolidated` refuses
//   such a file; `from_consolidated_any` returns either root, as Python's
//   `TensorDict.from_consolidated` does.
// - A complex128 leaf whose offset is not a multiple of 16 cannot be viewed
//   and is refused when consolidating (Python fails when rebuilding it).

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <string>

#include "tensordict/options.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE

/// Returns a consolidated dict's storage, metadata and trailer as one CPU
/// uint8 tensor in the file layout of NOTE [Consolidated layout] (a copy),
/// consolidating first if needed. Throws like `TensorDict::consolidate`.
///
/// Example:
/// ```
///   at::Tensor bytes = consolidated_bytes(td);   // send bytes.data_ptr()
///   TensorDict back = from_consolidated_bytes(bytes);
/// ```
[[nodiscard]] TENSORDICT_API at::Tensor consolidated_bytes(
    const TensorDict& td);

/// Returns a lazy stack's consolidated storage, metadata (the root level of
/// class "LazyStackedTensorDict") and trailer as one CPU uint8 tensor: the
/// bytes `stack.consolidate(filename)` writes, and Python's
/// `lazy_td.consolidate(filename=...)` (a copy), consolidating first if
/// needed. Read them back with `LazyStackedTensorDict::
/// from_consolidated_bytes`. Throws like `LazyStackedTensorDict::
/// consolidate`.
[[nodiscard]] TENSORDICT_API at::Tensor consolidated_bytes(
    const LazyStackedTensorDict& stack);

/// Maps a file written by `consolidate(filename)` (here or by Python
/// tensordict) whatever its root holds: a TensorDict, or a
/// LazyStackedTensorDict for a stack's file, as Python's
/// `TensorDict.from_consolidated` returns either. The metadata is parsed
/// once. Throws like `TensorDict::from_consolidated`.
[[nodiscard]] TENSORDICT_API LoadedTree from_consolidated_any(
    const std::string& filename, const LoadConsolidatedOptions& options = {});

/// Rebuilds a dict from the bytes of `consolidated_bytes` or of a file
/// written by `consolidate(filename)`: the leaves are views of `bytes` (a
/// 1-dim CPU uint8 tensor; copied first when its data is not 8-byte
/// aligned). Throws with the key and what was expected on any
/// inconsistency.
[[nodiscard]] TENSORDICT_API TensorDict from_consolidated_bytes(
    const at::Tensor& bytes, const LoadConsolidatedOptions& options = {});

/// Same as the tensor form, for `size` bytes at `data`, which are copied.
[[nodiscard]] TENSORDICT_API TensorDict from_consolidated_bytes(
    const void* data, size_t size, const LoadConsolidatedOptions& options = {});

TENSORDICT_END_NAMESPACE
