#pragma once

/// @file
/// The options of TensorDict's methods, structs whose setters chain
/// (TENSORDICT_ARG).

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensordict/nested_key.h"

/// Declares an option `name` of type `T` with a chaining setter
/// `name(value)` and a getter `name()`, as `TORCH_ARG` does.
#define TENSORDICT_ARG(T, name)                            \
 public:                                                   \
  inline auto name(const T& new_##name)->decltype(*this) { \
    this->name##_ = new_##name;                            \
    return *this;                                          \
  }                                                        \
  inline auto name(T&& new_##name)->decltype(*this) {      \
    this->name##_ = std::move(new_##name);                 \
    return *this;                                          \
  }                                                        \
  inline const T& name() const noexcept {                  \
    return this->name##_;                                  \
  }                                                        \
  inline T& name() noexcept {                              \
    return this->name##_;                                  \
  }                                                        \
                                                           \
 private:                                                  \
  T name##_

TENSORDICT_BEGIN_NAMESPACE

/// Names of the batch dims, one per dim; `std::nullopt` is an unnamed dim
/// (Python's `None`). An empty vector means the dict has no names.
using DimNames = std::vector<std::optional<std::string>>;

/// Options of `TensorDict::set`.
///
/// Example: `td.set("obs", t, SetOptions().inplace(true));`
struct TENSORDICT_API SetOptions {
  /// Copy into the existing tensor when the key exists (Python `inplace`).
  TENSORDICT_ARG(bool, inplace) = false;
  /// Move to the dict's device asynchronously when possible.
  TENSORDICT_ARG(bool, non_blocking) = false;
};

/// Options of `TensorDict::update`.
///
/// Example: `td.update(other, UpdateOptions().keys_to_update({{"a", "b"}}));`
struct TENSORDICT_API UpdateOptions {
  /// Copy values into existing tensors instead of replacing them.
  TENSORDICT_ARG(bool, inplace) = false;
  /// Clone the values before writing them.
  TENSORDICT_ARG(bool, clone) = false;
  /// Move to the dict's device asynchronously when possible.
  TENSORDICT_ARG(bool, non_blocking) = false;
  /// Only these keys (and what is below them) are updated; empty = all.
  TENSORDICT_ARG(std::vector<NestedKey>, keys_to_update);
};

/// Options of `TensorDict::from_dict`.
///
/// Example:
/// `TensorDict::from_dict(items, FromDictOptions().auto_batch_size(true))`
struct TENSORDICT_API FromDictOptions {
  /// The batch size; when unset it is inferred (auto_batch_size) or empty.
  TENSORDICT_ARG(std::optional<std::vector<int64_t>>, batch_size);
  /// Infer the batch size as the longest leading shape common to all
  /// entries, as Python's `auto_batch_size=True` does.
  TENSORDICT_ARG(bool, auto_batch_size) = false;
  /// Upper bound on the number of inferred batch dims.
  TENSORDICT_ARG(std::optional<int64_t>, batch_dims);
  /// The dict's device.
  TENSORDICT_ARG(std::optional<c10::Device>, device);
  /// The batch dims' names.
  TENSORDICT_ARG(DimNames, names);
};

/// Options of `TensorDict::apply` and `named_apply`.
///
/// Example: `td.apply(fn, ApplyOptions().batch_size({{4, 2}}))`
struct TENSORDICT_API ApplyOptions {
  /// The batch size of the result (default: this dict's).
  TENSORDICT_ARG(std::optional<std::vector<int64_t>>, batch_size);
  /// The dim names of the result (default: this dict's, when the batch size
  /// is unchanged).
  TENSORDICT_ARG(std::optional<DimNames>, names);
  /// Leave out nested dicts left with no entry. Unset (Python's default):
  /// leave out those the callback emptied, keep those that were empty.
  TENSORDICT_ARG(std::optional<bool>, filter_empty);
  /// The leaf passed for a key missing from another dict; when undefined, a
  /// missing key is a KeyError.
  TENSORDICT_ARG(at::Tensor, default_value);
  /// Call the callback on each top-level entry, nested TensorDicts and
  /// non-tensor data included, instead of recursing into nested dicts
  /// (Python's `call_on_nested=True`). Needs a callback over `Value`
  /// (see `TensorDict::apply`); a tensor callback throws ValueError.
  TENSORDICT_ARG(bool, call_on_nested) = false;
};

// --- reductions (src/tensor_dict/reduce.cpp) ---------------------------------

/// A reduction, for `TensorDict::reduce` (Python's `reduce=True`).
enum class ReduceOp {
  kSum,
  kMean,
  kStd,
  kVar,
  kProd,
  kAmax,
  kAmin,
  kMax,  // values only: the same as kAmax
  kMin,  // values only: the same as kAmin
  kAll,
  kAny,
};

/// Options of the reductions (`TensorDict::sum`, `mean`, `std`, ...).
///
/// Example: `td.mean(ReduceOptions().dim({0, 1}).keepdim(true))`
struct TENSORDICT_API ReduceOptions {
  /// The batch dims to reduce (negative counts from the end of the batch
  /// dims). Empty (the default, and Python's `dim=None` or `dim=()`):
  /// reduce every element of each leaf, batch dims and feature dims alike.
  TENSORDICT_ARG(std::vector<int64_t>, dim);
  /// Keep the reduced dims with size 1.
  TENSORDICT_ARG(bool, keepdim) = false;
  /// Bessel's correction of `std` and `var` (Python's `correction`).
  TENSORDICT_ARG(int64_t, correction) = 1;
};

// --- memory-mapped storage (include/tensordict/memmap.h) --------------------

/// How `load_memmap` maps leaf files, as Python's `mode` argument.
enum class MapMode {
  /// Shared (writes reach the file) when the file is writable, else
  /// copy-on-write. Python's `mode=None`.
  kAuto,
  /// Copy-on-write: in-place writes stay in memory. Python's `"r"`.
  kReadOnly,
  /// Shared: in-place writes reach the file; throws if it is read-only.
  /// Python's `"r+"`.
  kReadWrite,
};

/// The layout of the `meta.json` files a save writes. Both load.
enum class JsonStyle {
  /// `{"a":1}` with raw UTF-8: Python with the orjson backend.
  kCompact,
  /// `{"a": 1}` with `\uXXXX` escapes: Python's default (stdlib json); the
  /// files are then byte-identical to what Python 0.15 writes.
  kSpaced,
};

/// Called as a save progresses, with the bytes of leaf data written so far
/// and the total; called from the writing threads, one call at a time.
using MemmapProgress =
    std::function<void(int64_t done_bytes, int64_t total_bytes)>;

/// Options of `TensorDict::memmap`, `memmap_`, `memmap_like` and `save`.
///
/// Example: `td.memmap(MemmapOptions("/data/run").num_threads(4))`, or
/// `td.memmap("/data/run")`.
struct TENSORDICT_API MemmapOptions {
  /// Saves under `prefix`; an empty prefix keeps the leaves in anonymous
  /// shared memory and writes no file.
  MemmapOptions(std::string prefix = {})  // NOLINT(google-explicit-constructor)
      : prefix_(std::move(prefix)) {}
  /// Same, for a literal.
  MemmapOptions(const char* prefix)  // NOLINT(google-explicit-constructor)
      : prefix_(prefix) {}

  /// The directory to write; created with its parents when missing (the
  /// tree is written beside it and renamed in). A complete earlier save
  /// there is replaced atomically, unless the directory holds other files
  /// too (and `atomic` is false): then it is written in place.
  TENSORDICT_ARG(std::string, prefix);
  /// Leaf files are written by this many threads (0 or 1: the caller's).
  TENSORDICT_ARG(int64_t, num_threads) = 0;
  /// Reuse (overwrite) leaf files that already exist; when false an
  /// existing leaf file is an error.
  TENSORDICT_ARG(bool, existsok) = true;
  /// Copy leaves that are already backed by another memmap file; when false
  /// such a leaf is an error, as in Python.
  TENSORDICT_ARG(bool, copy_existing) = false;
  /// Encode keys for the file system as Python's `robust_key=True`; when
  /// false, keys are used as file names and must be safe ones.
  TENSORDICT_ARG(bool, robust_key) = true;
  /// Fsync data files, meta.json files and directories before returning.
  TENSORDICT_ARG(bool, durable) = false;
  /// The layout of the meta.json files.
  TENSORDICT_ARG(JsonStyle, json_style) = JsonStyle::kCompact;
  /// Progress of the leaf writes.
  TENSORDICT_ARG(MemmapProgress, progress);
  /// Python's `atomic=True`: write the tree next to `prefix` and put it in
  /// place once complete, so that an error or a kill leaves `prefix` as it
  /// was. Whatever `prefix` holds is replaced, so it must be missing, empty
  /// or hold a saved tensordict (a meta.json); with `existsok(false)` it
  /// must be missing or empty; a symlink's target is replaced. Throws
  /// without a prefix. See NOTE [Memmap layout] for how it differs from
  /// Python's.
  TENSORDICT_ARG(bool, atomic) = false;
  /// Write one archive file at `prefix` (a zip, see
  /// include/tensordict/archive.h) rather than a directory. Unset, Python's
  /// `None`: when `prefix` ends with ".tdz". `memmap_` writes a directory
  /// whatever the suffix and refuses `archive(true)`, as Python's has no
  /// `archive`.
  TENSORDICT_ARG(std::optional<bool>, archive);

 public:
  /// Whether `memmap` and `save` with these options write one archive file
  /// rather than a directory: `archive()` when set, else whether `prefix`
  /// ends with ".tdz". The one place the rule lives (the Python binding
  /// asks it too).
  [[nodiscard]] bool writes_archive() const;
  /// How an archive written by `memmap` or `save` stores the tensor
  /// payloads: "stored" (mapped without a copy; empty, the default, is the
  /// same) or "deflate" (smaller; each leaf loads by inflating a copy).
  /// Python also takes "bzip2" and "lzma", which are refused here. Throws
  /// (ValueError) without an archive, as Python, and for `memmap_like`,
  /// whose archive is written into.
  TENSORDICT_ARG(std::string, compression);
  /// Keep the tree an overwrite swaps out as the prefix's hidden spare
  /// (`.NAME.tmp-PID-N`), so that the next overwrite by this process
  /// writes into its files rather than removing them and creating new ones,
  /// which on some file systems (ext4 without a journal) costs several
  /// times the write itself. The spare takes the disk (on tmpfs, the
  /// memory) of one more copy between saves, as the swap needs at its peak
  /// anyway, and goes when the process exits normally. A spare file that is
  /// still mapped or open anywhere is replaced, not written over. False:
  /// the old tree is removed right after the swap, with any spare of this
  /// prefix. Python has no spare: it overwrites the files in place.
  TENSORDICT_ARG(bool, keep_spare) = true;
};

/// Options of `TensorDict::load_memmap` and `load_memmap_any`.
///
/// Example:
/// `TensorDict::load_memmap("/data/run",
/// LoadMemmapOptions().subpath({"next"}))`
struct TENSORDICT_API LoadMemmapOptions {
  /// Moves the leaves to this device; `c10::kMeta` reads only meta.json
  /// (shapes and dtypes, no file is opened).
  TENSORDICT_ARG(std::optional<c10::Device>, device);
  /// Loads the sub-tree at this key instead of the root.
  TENSORDICT_ARG(std::vector<std::string>, subpath);
  /// Expect keys encoded as Python's `robust_key=True` writes them, falling
  /// back to raw names written by tensordict before 0.13.
  TENSORDICT_ARG(bool, robust_key) = true;
  /// How leaf files are mapped.
  TENSORDICT_ARG(MapMode, mode) = MapMode::kAuto;
  /// Drop the non-tensor values Python pickled (`other.pickle`,
  /// `pickle.pkl`) unread. Without it they are read by a restricted
  /// unpickler that executes nothing and refuses any class but numpy
  /// arrays and scalars and torch.Size (see docs/pickled_values.md).
  TENSORDICT_ARG(bool, skip_pickle) = false;
  /// The largest pickle file of a non-tensor value read, in bytes.
  TENSORDICT_ARG(int64_t, max_pickle_bytes) = int64_t{1} << 30;
  /// The largest meta.json accepted, in bytes.
  TENSORDICT_ARG(int64_t, max_meta_bytes) = int64_t{64} << 20;
  /// The deepest JSON nesting and directory nesting accepted.
  TENSORDICT_ARG(int64_t, max_depth) = 128;
  /// Move the leaves to `device` asynchronously where the device allows it
  /// (Python's `non_blocking`); the caller synchronises before reading.
  TENSORDICT_ARG(bool, non_blocking) = false;
  /// Inflate the deflated leaves of a `.tdz` archive on this many threads
  /// before they load, as Python's `num_threads` (0 or 1: one at a time, as
  /// each loads). A directory's leaves, and an archive's stored ones, are
  /// mapped, not read, so it changes nothing for them.
  TENSORDICT_ARG(int64_t, num_threads) = 0;
};

// --- consolidate and nn::Module (include/tensordict/consolidate.h, module.h) -

/// Options of `TensorDict::consolidate`.
///
/// Example: `td.consolidate(ConsolidateOptions().filename("/data/td.bin"))`
struct TENSORDICT_API ConsolidateOptions {
  /// Map this file as the storage and write the metadata after the data, in
  /// Python's layout; an existing file is replaced. Empty: keep the storage
  /// in memory.
  TENSORDICT_ARG(std::string, filename);
  /// Copy the leaves with this many threads (0 or 1: the caller's).
  TENSORDICT_ARG(int64_t, num_threads) = 0;
  /// The device of the storage (default: the dict's, else the CPU). Only the
  /// CPU goes with `filename`.
  TENSORDICT_ARG(std::optional<c10::Device>, device);
  /// Put the storage in pinned memory (needs an accelerator).
  TENSORDICT_ARG(bool, pin_memory) = false;
  /// Put the storage in shared memory (CPU only).
  TENSORDICT_ARG(bool, share_memory) = false;
  /// With `filename`: fsync the file and its directory before returning.
  TENSORDICT_ARG(bool, durable) = false;
};

/// Options of `TensorDict::from_consolidated` and `from_consolidated_bytes`.
///
/// Example: `LoadConsolidatedOptions().max_meta_bytes(1 << 20)`
struct TENSORDICT_API LoadConsolidatedOptions {
  /// The largest metadata JSON accepted, in bytes.
  TENSORDICT_ARG(int64_t, max_meta_bytes) = int64_t{64} << 20;
  /// The deepest JSON nesting accepted.
  TENSORDICT_ARG(int64_t, max_depth) = 128;
};

/// Options of `TensorDict::to_module`.
///
/// Example: `params.to_module(*model, ToModuleOptions().inplace(true))`
struct TENSORDICT_API ToModuleOptions {
  /// Copy the values into the module's tensors (which keep their storage);
  /// when false, the module's tensors are made to alias the dict's.
  TENSORDICT_ARG(bool, inplace) = false;
  /// Return the module's previous tensors (Python's `return_swap`): with
  /// `inplace`, copies of their values; otherwise the tensors themselves,
  /// which `to_module` swaps back. When false, `to_module` returns an empty
  /// dict (Python returns None).
  TENSORDICT_ARG(bool, return_swap) = true;
};

/// Options of `TensorDict::from_module` and `TensorDictParams::from_module`:
/// Python's keyword arguments but `as_module`, whose C++ form is
/// `TensorDictParams::from_module` (a function returns one type).
///
/// Example: `TensorDict::from_module(*model, FromModuleOptions().lock(true))`
struct TENSORDICT_API FromModuleOptions {
  /// Read the tensors as the module's state dict holds them (Python's
  /// `use_state_dict`). libtorch modules have no state-dict hooks and no
  /// non-persistent buffers, so the one difference is Python's: the leaves
  /// are detached aliases, not the parameters themselves.
  TENSORDICT_ARG(bool, use_state_dict) = false;
  /// Lock the result (`TensorDict.from_module`'s default: unlocked).
  TENSORDICT_ARG(bool, lock) = false;
  /// Leave out the submodules that hold no tensor (a ReLU); when false,
  /// they get an empty dict.
  TENSORDICT_ARG(bool, filter_empty) = true;
};

/// Options of `TensorDictParams`: Python's keyword arguments.
///
/// Example: `TensorDictParams(td, TensorDictParamsOptions().lock(true))`
struct TENSORDICT_API TensorDictParamsOptions {
  /// Register the tensors as they are: a leaf that requires grad as a
  /// parameter, any other tensor as a buffer. When false, float16/32/64
  /// tensors become parameters (requiring grad) and the others buffers.
  TENSORDICT_ARG(bool, no_convert) = false;
  /// Lock the wrapped dict; writes through `TensorDictParams::set` still
  /// work.
  TENSORDICT_ARG(bool, lock) = false;
};

/// Options of `TensorDict::state_dict`: Python's keyword arguments
/// `prefix`, `keep_vars` and `flatten`, with Python's defaults. Python's
/// `destination` (an OrderedDict to fill) is the overload
/// `state_dict(destination, options)`.
///
/// Example: `td.state_dict(StateDictOptions().prefix("p.").keep_vars(true))`
struct TENSORDICT_API StateDictOptions {
  /// Prepended to every key of the state dict (the top-level keys only in
  /// the nested form). The root's metadata goes under the prefix without
  /// its trailing "." ("p" for "p."), as in Python.
  TENSORDICT_ARG(std::string, prefix);
  /// Return the dict's tensors as they are; when false, they are detached
  /// from autograd (aliases still: no copy).
  TENSORDICT_ARG(bool, keep_vars) = false;
  /// Join nested keys with "."; when false, nested dicts become nested
  /// StateDicts.
  TENSORDICT_ARG(bool, flatten) = true;
};

/// Options of `TensorDict::load_state_dict`: Python's keyword arguments
/// `strict`, `assign` and `from_flatten`, with Python's defaults.
///
/// Example:
/// `td.load_state_dict(sd, LoadStateDictOptions().from_flatten(true))`
struct TENSORDICT_API LoadStateDictOptions {
  /// Require the key sets to match (empty nested dicts excepted).
  TENSORDICT_ARG(bool, strict) = true;
  /// Replace the leaves by the state dict's tensors instead of copying the
  /// values into them.
  TENSORDICT_ARG(bool, assign) = false;
  /// Read the state dict as flat ("."-joined keys) when true, as nested
  /// when false; nullopt (Python's None) reads it as flat if it carries
  /// metadata and its keys are not the dict's.
  TENSORDICT_ARG(std::optional<bool>, from_flatten);
};

TENSORDICT_END_NAMESPACE
