#pragma once

/// @file
/// Memory-mapped storage: MemoryMappedTensor, the options of the memmap family
/// of TensorDict methods, and loaders for whatever a directory holds.
//
// NOTE [Memmap layout]
// `td.memmap(prefix)` writes the directory layout of Python tensordict 0.15
// (format version 1): each dict is a directory with a `meta.json` naming its
// entries, each tensor leaf a raw little-endian `<key>.memmap` file holding
// exactly numel * itemsize bytes (none for zero-element leaves), each nested
// dict, NonTensorData or NonTensorStack a sub-directory. Key names are
// encoded for the file system as Python's `robust_key` does. Python loads
// what we write and we load what it writes, bit for bit.
//
// Guarantees beyond Python's (each has a test):
// - Files are untrusted: a leaf file shorter than its shape needs, a missing
//   non-empty leaf or sub-directory, an unknown dtype, a negative or
//   overflowing shape, oversized or too deeply nested JSON and JSON of the
//   wrong type are errors that name the nested key; Python zero-extends short
//   files and silently drops missing entries.
// - No key makes a path leave the prefix, nothing is written or read through
//   a symlink below the prefix, and keys that would collide with meta.json's
//   own members (`shape`, `device`, `_type`, `_format_version`, `_class`,
//   `_names`) are refused when writing (Python loses them silently).
// - In each directory `meta.json` is written last, atomically (a temporary
//   file renamed over it), after the directories below it, and an existing
//   `meta.json` is removed before anything else is rewritten: an interrupted
//   save never loads as a complete one. `durable(true)` also fsyncs the data
//   files and directories, so the guarantee survives a power loss.
// - A save over a directory that holds a complete save and nothing else is
//   written beside it and swapped in atomically: a kill leaves the old save
//   or the new one (Python writes in place; so do we when other files are
//   there). A fresh save is written beside its prefix and renamed in. See
//   NOTE [Crash-safe overwrite] in src/io/staged_tree.cpp.
// - A save that throws midway (disk full, a file size limit, an I/O error,
//   a writer thread's exception) removes what it wrote, and `existsok(false)`
//   refuses existing files before writing or removing anything. See NOTE
//   [Failed saves] in src/io/staged_tree.cpp.
// - `append_memmap` follows Python's files, and its recovery tensordict
//   main's rule (newer than 0.15.3's, which it refines); loads apply the
//   rule to a killed append's temporaries (Python's loads ignore them). See
//   NOTE [Appending rows] in src/memmap/append.cpp.
//
// Differences from Python, for C++'s sake:
// - Loading keeps the order of meta.json (Python moves nested collections
//   after the leaves).
// - `memmap_like` over an existing leaf file keeps its bytes, as Python
//   does: a file at least as long as the leaf needs is mapped as it is (its
//   old values, reinterpreted in the new dtype), a shorter one is extended
//   with zeros. New files hold zeros.
// - Pickled non-tensor values (`other.pickle`, `pickle.pkl`) are read by a
//   restricted unpickler that executes nothing: numpy arrays and scalars,
//   tuples, lists, dicts, str, bytes, numbers, None and torch.Size; any
//   other class or opcode is an error naming it and the key, unless
//   `skip_pickle(true)` drops the entry. A NonTensorData array that spans
//   its parent's batch dims loads as a tensor leaf; any other value as its
//   JSON form (tuples and torch.Size as lists, arrays as nested lists,
//   numpy scalars as numbers, int keys as strings, bytes as a JSON binary).
//   Saving writes that JSON (a tensor leaf as a `.memmap` file, bytes as
//   the list of their values), so what JSON cannot hold does not round-trip
//   as Python wrote it: Python reads back a tensor, a list or a number.
//   See docs/pickled_values.md.
// - A lazy stack nested inside a dict loads as a LazyStackedTensorDict
//   entry, as in Python; one that is an element of another lazy stack is
//   made dense (a lazy stack's elements are TensorDicts).
// - Python's `return_early=True` is a method of its own returning a
//   `std::future`: `memmap_async`, `memmap_async_`, `memmap_like_async` and
//   `save_async`.
// - Python's `share_non_tensor` (non-tensor values shared between processes
//   through a multiprocessing manager) has no C++ counterpart: threads share
//   the dict itself.
// - `memmap()` without a prefix keeps leaves that are already mapped (to a
//   file or to shared memory), as Python does, so `td.memmap().memmap()`
//   returns the same tensors.
// - A directory whose root is a NonTensorData or NonTensorStack loads with
//   `NonTensorData::load_memmap` / `NonTensorStack::load_memmap`. One whose
//   root is a lazy stack loads, as in Python, with the free
//   `tensordict::load_memmap` (Python's `tensordict.load_memmap`), which
//   returns a variant of TensorDict and LazyStackedTensorDict, or with
//   `LazyStackedTensorDict::load_memmap`; `TensorDict::load_memmap` cannot
//   return a stack and refuses it rather than copy it into memory (Python's
//   `TensorDict.load_memmap` returns the stack). A lazy stack at the root has
//   the members of the save family too (`memmap`, `memmap_`, `memmap_like`,
//   `load_memmap_`, `memmap_refresh_`, ...), with the same guarantees.
// - `MemmapOptions::atomic` (Python's `atomic=True`) swaps the new tree in
//   with one rename (renameat2 RENAME_EXCHANGE) where Python renames the old
//   tree aside first, leaving a moment without the prefix; a leaf already
//   mapped to the prefix's files is linked, not copied, so it needs no
//   `copy_existing`; `durable(true)` also syncs the files (Python's are
//   not); it works with `memmap_async` (Python refuses `return_early`).
// - `LoadMemmapOptions::num_threads` inflates the deflated leaves of a
//   `.tdz` archive on that many threads; a directory's leaves (and an
//   archive's stored ones) are mapped, not read, so it changes nothing for
//   them (Python reads them on its threads).
//
// The same tree packed into one zip file (`save("x.tdz")`, `pack_memmap`)
// loads with the same functions: see NOTE [Memmap archives] in
// tensordict/archive.h.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tensordict/lazy_stack.h"
#include "tensordict/options.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE

/// Options of `MemoryMappedTensor::from_tensor`, named as Python's keyword
/// arguments.
///
/// Example: `FromTensorOptions("/tmp/a.memmap").existsok(true)`, or just
/// the file name.
struct TENSORDICT_API FromTensorOptions {
  /// Copies into `filename`; an empty name means anonymous shared memory.
  FromTensorOptions(
      std::string filename = {})  // NOLINT(google-explicit-constructor)
      : filename_(std::move(filename)) {}
  /// Same, for a literal.
  FromTensorOptions(
      const char* filename)  // NOLINT(google-explicit-constructor)
      : filename_(filename) {}

  /// The file to write (created if missing); empty: anonymous shared memory.
  TENSORDICT_ARG(std::string, filename);
  /// Reuse the file if it exists; when false an existing file is an error.
  TENSORDICT_ARG(bool, existsok) = false;
  /// Copy a tensor already backed by another file; when false that is an
  /// error (a tensor backed by this same file is returned as is).
  TENSORDICT_ARG(bool, copy_existing) = false;
  /// Copy the values; when false the file holds zeros.
  TENSORDICT_ARG(bool, copy_data) = true;
};

/// Options of `MemoryMappedTensor::from_storage`, named as Python's keyword
/// arguments.
///
/// Example: `FromStorageOptions().dtype(at::kFloat).shape({2, 3})`
struct TENSORDICT_API FromStorageOptions {
  /// The dtype to read the storage as; Python reads an untyped storage as
  /// int64 by default, and so does this.
  TENSORDICT_ARG(c10::ScalarType, dtype) = c10::kLong;
  /// The shape of the result (one size may be -1); unset: 1-D.
  TENSORDICT_ARG(std::optional<std::vector<int64_t>>, shape);
  /// The storage's file, when the caller wants it checked: a storage mapped
  /// from another file is an error.
  TENSORDICT_ARG(std::string, filename);
};

/// Tensors backed by a file (or by anonymous shared memory), as Python's
/// `MemoryMappedTensor`. The tensors are plain `at::Tensor`s whose storage is
/// the mapping: writing into them writes the file (unless it was mapped
/// copy-on-write), and the mapping lives as long as a tensor uses it.
///
/// A mapped file must not be truncated by another process while mapped:
/// reading past the new end raises SIGBUS, as with any mmap.
///
/// Example:
/// ```
///   auto t = MemoryMappedTensor::from_tensor(torch::arange(4),
///   "/tmp/a.memmap"); MemoryMappedTensor::filename(t);   // "/tmp/a.memmap"
///   auto u = MemoryMappedTensor::from_tensor(
///       t, FromTensorOptions("/tmp/b.memmap").copy_existing(true));
/// ```
class TENSORDICT_API MemoryMappedTensor {
 public:
  MemoryMappedTensor() = delete;

  /// Copies `tensor` into `options.filename()` and returns the mapped
  /// tensor, as Python's `from_tensor(input, filename=..., existsok=...,
  /// copy_existing=..., copy_data=...)`. Throws if the file exists and
  /// `existsok` is false, if it is a symlink, or if `tensor` is already
  /// backed by another file and `copy_existing` is false (a tensor backed
  /// by this same file is returned as is).
  [[nodiscard]] static at::Tensor from_tensor(
      const at::Tensor& tensor, const FromTensorOptions& options = {});
  /// Returns a mapped tensor of uninitialized (in practice zero) values.
  [[nodiscard]] static at::Tensor empty(
      c10::IntArrayRef shape,
      c10::ScalarType dtype = c10::kFloat,
      const std::string& filename = {},
      bool existsok = false);
  /// Returns a mapped tensor of zeros.
  [[nodiscard]] static at::Tensor zeros(
      c10::IntArrayRef shape,
      c10::ScalarType dtype = c10::kFloat,
      const std::string& filename = {},
      bool existsok = false);
  /// Returns a mapped tensor of ones.
  [[nodiscard]] static at::Tensor ones(
      c10::IntArrayRef shape,
      c10::ScalarType dtype = c10::kFloat,
      const std::string& filename = {},
      bool existsok = false);
  /// Returns a mapped tensor filled with `value`.
  [[nodiscard]] static at::Tensor full(
      c10::IntArrayRef shape,
      const c10::Scalar& value,
      c10::ScalarType dtype = c10::kFloat,
      const std::string& filename = {},
      bool existsok = false);
  /// Maps an existing file as a tensor of `shape` and `dtype` (no copy).
  /// Throws if the file is missing, a symlink, or shorter than the shape
  /// needs; a longer file is fine.
  [[nodiscard]] static at::Tensor from_filename(
      const std::string& filename,
      c10::ScalarType dtype,
      c10::IntArrayRef shape,
      MapMode mode = MapMode::kAuto);
  /// Views `storage` (no copy) as a tensor of `options.dtype()` and
  /// `options.shape()`, as Python's `from_storage`: writes to the result
  /// change the storage, and a storage mapped from a file (by this class or
  /// by torch's `from_file`) keeps reporting it through `filename`. Only
  /// whole elements are viewed (trailing bytes are left out, as in Python).
  /// Throws on a storage not on the CPU, a shape whose element count is not
  /// the storage's, and a `filename` other than the storage's file.
  /// Differs from Python: a `filename` cannot be attached to a storage that
  /// is not mapped from a file (there is nothing to map it again from), and
  /// there is no `index` (index the result).
  [[nodiscard]] static at::Tensor from_storage(
      const c10::Storage& storage, const FromStorageOptions& options = {});
  /// Returns the file that backs `tensor` (views too), or nothing.
  static std::optional<std::string> filename(const at::Tensor& tensor);
  /// Returns true if `tensor` is backed by a memmap file or by the anonymous
  /// shared memory of this class.
  static bool is_memmap(const at::Tensor& tensor);
};

/// Loads whatever the directory holds: a TensorDict (Python tensorclasses
/// load as TensorDicts that remember their class, see
/// `TensorDict::python_class`) or a LazyStackedTensorDict. Throws like
/// `TensorDict::load_memmap`.
[[nodiscard]] TENSORDICT_API LoadedTree load_memmap_any(
    const std::string& prefix, const LoadMemmapOptions& options = {});

/// Loads whatever the directory holds, as Python's module-level
/// `tensordict.load_memmap` (and `TensorDict.load_memmap`, which returns a
/// lazy stack too): a TensorDict or a LazyStackedTensorDict, mapped, never
/// copied. Same as `load_memmap_any`; throws like `TensorDict::load_memmap`.
///
/// Example:
/// ```
///   LoadedTree tree = tensordict::load_memmap("/data/run");
///   if (auto* stack = std::get_if<LazyStackedTensorDict>(&tree)) { ... }
/// ```
[[nodiscard]] TENSORDICT_API LoadedTree
load_memmap(const std::string& prefix, const LoadMemmapOptions& options = {});

/// Same as the free `load_memmap` (Python's `tensordict.load`).
[[nodiscard]] TENSORDICT_API LoadedTree
load(const std::string& prefix, const LoadMemmapOptions& options = {});

/// Returns the tree of files and directories under `path` as Python's
/// `tensordict.utils.print_directory_tree` does: with `display_metadata`, a
/// first line "Directory size: 508.00 B"; then the directory's name and a
/// "/", its entries four spaces further in, recursively. Entries are sorted
/// by name (Python lists them in the file system's order). Python also logs
/// each line; print the result instead.
[[nodiscard]] TENSORDICT_API std::string print_directory_tree(
    const std::string& path,
    const std::string& indent = "",
    bool display_metadata = true);

/// Checks every file of a memmap tree against its meta.json without
/// stopping at the first problem: returns one line per problem (the nested
/// key, the path and what is wrong), empty when the tree loads.
[[nodiscard]] TENSORDICT_API std::vector<std::string> verify_memmap(
    const std::string& prefix, const LoadMemmapOptions& options = {});

/// Saves a lazy stack in Python's layout (one sub-directory per element)
/// and returns it backed by the files: `stack.memmap(options)`.
TENSORDICT_API LazyStackedTensorDict
memmap(const LazyStackedTensorDict& stack, const MemmapOptions& options);

/// Appends `rows` to the tensordict saved at `prefix` along its first batch
/// dim, growing its leaf files in place, as Python's
/// `tensordict.append_memmap`: the rows need the saved keys, classes,
/// dtypes and trailing shapes, and a batch size that differs in its first
/// dim only; a non-tensor entry stays as saved and the rows must hold its
/// value. Everything is checked before a file is written, and an error puts
/// the files back. A killed append leaves the old rows or the new: loads
/// finish or drop it by tensordict main's rule (see the NOTE), and the next
/// append does so on disk first. One writer at a time. Throws
/// `c10::ValueError` for rows that do not fit, a lazy stack, a
/// NonTensorStack or a prefix that is not a directory. See NOTE [Appending
/// rows] in src/memmap/append.cpp.
///
/// Example: `append_memmap("/data/run", TensorDict({{"a", torch::ones({2,
/// 3})}}, {2}));`
TENSORDICT_API void append_memmap(
    const std::string& prefix, const TensorDict& rows);

/// Encodes a key as a file or directory name the way Python's
/// `_encode_key_for_filesystem(key, robust=True)` does: `%XX` for the
/// characters file systems reject, `%` for "", `%2E` for "." and "..".
TENSORDICT_API std::string encode_key_for_filesystem(std::string_view key);

TENSORDICT_END_NAMESPACE
