#pragma once

/// @file
/// LazyStackedTensorDict: a stack of TensorDicts kept as its elements, so the
/// elements may hold leaves of different shapes or different keys.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/intrusive_ptr.h>

#include <cstddef>
#include <cstdint>
#include <future>
#include <iosfwd>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tensordict/fwd.h"
#include "tensordict/nested_key.h"
#include "tensordict/options.h"

namespace at::indexing {
struct TensorIndex;
}  // namespace at::indexing

TENSORDICT_BEGIN_NAMESPACE

namespace detail {
class LazyStackedTensorDictImpl;
}  // namespace detail

/// A stack of TensorDicts along batch dim `stack_dim()` that keeps its
/// elements instead of stacking their leaves: the C++ form of Python's
/// `LazyStackedTensorDict`. The elements share one batch size and device,
/// but their leaves may differ in shape and their keys may differ.
///
/// A LazyStackedTensorDict is a cheap handle, like TensorDict: copying it
/// aliases the same stack, and `tensordicts()` returns the elements
/// themselves (handles), so writing into an element writes into the stack.
/// The list of elements and the stack dim are fixed at construction.
///
/// Reading: `keys()` lists the keys every element holds (in the first
/// element's order); `get(key)` stacks that leaf across the elements into a
/// new tensor (at::stack), `get_tensordict(key)` gives the lazy stack of the
/// nested dicts, and `contiguous()` stacks everything into a dense TensorDict.
///
/// Differences from Python, for C++'s sake:
/// - The elements must have the same batch size (Python accepts sizes of
///   the same length and reports -1 where they differ).
/// - `get` throws KeyError for a key that some element lacks (Python's
///   `get` returns None) and an error when the shapes differ (Python's
///   `as_padded_tensor`, `as_nested_tensor` and `as_list` are not ported).
/// - `index()` supports what gives one element or one lazy stack (see its
///   comment); the stack cannot grow or be written through (use the
///   elements).
///
/// Thread safety: like TensorDict, concurrent reads are safe; any write
/// (to an element) needs external synchronisation.
///
/// Example:
/// ```
///   LazyStackedTensorDict stack = lazy_stack(
///       {TensorDict({{"obs", torch::zeros({3})}, {"a", torch::ones({2})}}),
///        TensorDict({{"obs", torch::zeros({4})}, {"a", torch::ones({2})}})});
///   stack.batch_size();   // [2]
///   stack.get("a");       // a [2, 2] tensor
///   stack.at(1).get("obs");  // the second element's [4] tensor
/// ```
class TENSORDICT_API LazyStackedTensorDict {
 public:
  /// Stacks `tensordicts` (aliased) along batch dim `stack_dim`, in
  /// [-batch_dims - 1, batch_dims] of the elements. Throws an error if the
  /// list is empty, the devices or batch sizes differ, or `stack_dim` is out
  /// of range.
  /// `stack_dim_name` names the stack dim (Python's `stack_dim_name`).
  explicit LazyStackedTensorDict(
      std::vector<TensorDict> tensordicts,
      int64_t stack_dim = 0,
      std::optional<std::string> stack_dim_name = std::nullopt);

  /// Aliases `other`'s stack (a handle copy); nothing is copied.
  LazyStackedTensorDict(const LazyStackedTensorDict& other);
  /// Takes `other`'s handle; `other` may then only be assigned or destroyed.
  LazyStackedTensorDict(LazyStackedTensorDict&& other) noexcept;
  /// Makes this handle alias `other`'s stack; nothing is copied.
  LazyStackedTensorDict& operator=(const LazyStackedTensorDict& other) &;
  /// Takes `other`'s handle; `other` may then only be assigned or destroyed.
  LazyStackedTensorDict& operator=(LazyStackedTensorDict&& other) & noexcept;
  // `stack.index(...) = x` would silently assign to a temporary.
  LazyStackedTensorDict& operator=(const LazyStackedTensorDict& other) && =
      delete;
  LazyStackedTensorDict& operator=(LazyStackedTensorDict&& other) && = delete;
  ~LazyStackedTensorDict();

  /// Returns true if both handles point at the same stack.
  bool is_same(const LazyStackedTensorDict& other) const noexcept {
    return impl_ == other.impl_;
  }

  // --- structure ------------------------------------------------------------

  /// Returns the elements (handles aliasing the stacked dicts).
  const std::vector<TensorDict>& tensordicts() const& noexcept;
  /// Returns the elements of a temporary stack by value (still aliased).
  std::vector<TensorDict> tensordicts() const&&;
  /// Returns the batch dim along which the elements are stacked
  /// (non-negative).
  int64_t stack_dim() const noexcept;
  /// Returns the batch size: the elements' batch size with the number of
  /// elements inserted at `stack_dim()` (a view into the stack).
  c10::IntArrayRef batch_size() const& noexcept;
  /// Returns the batch size of a temporary stack by value.
  std::vector<int64_t> batch_size() const&&;
  /// Returns the number of batch dims (the elements' plus one).
  int64_t batch_dims() const noexcept;
  /// Returns the size of batch dim `dim` (negative counts from the end);
  /// throws IndexError when out of range.
  int64_t size(int64_t dim) const;
  /// Returns the batch size, as Python's `size()` (same as `batch_size()`,
  /// a view into the stack).
  c10::IntArrayRef size() const& noexcept;
  /// Returns the batch size of a temporary stack by value.
  std::vector<int64_t> size() const&&;
  /// Returns the number of top-level keys every element holds, like
  /// `TensorDict::num_keys()`; the number of elements is
  /// `tensordicts().size()`.
  size_t num_keys() const;
  /// Returns the device the elements share, or nullopt.
  std::optional<c10::Device> device() const noexcept;
  /// Returns the name of the stack dim, or nullopt.
  const std::optional<std::string>& stack_dim_name() const noexcept;
  /// Returns true if the elements have dim names (Python's `_has_names()`:
  /// a stack dim name alone does not count).
  bool has_names() const;
  /// Returns the elements' dim names (nullopt each when they have none)
  /// with `stack_dim_name()` inserted at the stack dim, as Python's `names`.
  DimNames names() const;
  /// Returns the `_type` string of the Python tensorclass this stack was
  /// loaded as ("<class 'module.Name'>", a tensorclass over a lazy stack,
  /// Python's `Cls.lazy_stack`), or "" for a plain stack; a save writes
  /// the tensorclass layout when it is set.
  const std::string& python_class() const noexcept;
  /// Sets the Python tensorclass the stack is saved as ("" for none);
  /// throws ValueError unless it reads "<class 'module.Name'>". Every
  /// handle of the stack sees it.
  LazyStackedTensorDict& set_python_class(std::string type_string);

  // --- indexing -------------------------------------------------------------

  /// Returns element `index` along the stack dim (negative counts from the
  /// end), aliased, as Python's `stack[i]` does for `stack_dim == 0`.
  /// Throws IndexError when out of range.
  TensorDict at(int64_t index) const;
  /// Indexes the stack as Python's `stack[idx]`, with the results torch
  /// gives on the dense stack (`contiguous().index(idx)`). The item landing
  /// on the stack dim decides the kind of result: an integer (or 0-dim
  /// integer tensor) returns that element indexed by the other items (the
  /// element itself, aliased, when there are none); a slice, a 1-D int64
  /// tensor or a 1-D bool mask returns the lazy stack of the selected
  /// elements, each indexed by the other items, stacked at the dim where
  /// torch puts the stack dim. Other items may be integers, slices, None,
  /// one Ellipsis and index tensors or masks, as in `TensorDict::index`. See
  /// NOTE [Lazy stack indexing]. Include <tensordict/indexing.h> to build
  /// indices.
  ///
  /// Throws IndexError for an index out of range, a mask of the wrong
  /// length or too many indices, and an error for what has no single-stack
  /// result: an empty selection, an index tensor on the stack dim that is
  /// not 1-D or comes with index tensors on other dims, index tensors on
  /// both sides of a sliced stack dim, a mask spanning the stack dim and
  /// another dim, and True/False indices.
  [[nodiscard]] std::variant<TensorDict, LazyStackedTensorDict> index(
      c10::ArrayRef<at::indexing::TensorIndex> indices) const;

  // --- reading --------------------------------------------------------------

  /// Returns the keys every element holds, in the first element's order,
  /// as Python's `LazyStackedTensorDict.keys()`. With `include_nested`, the
  /// common keys of nested dicts come right before the dict's own key; with
  /// `leaves_only`, only keys whose first element holds a tensor; with
  /// `sort`, ordered by the "."-joined key. Throws TypeError when a nested
  /// dict of the first element is not a dict in another element.
  std::vector<NestedKey> keys(
      bool include_nested = false,
      bool leaves_only = false,
      bool sort = false) const;
  /// Returns true if every element holds `key`, with a dict at every level
  /// above its last part.
  bool contains(const NestedKey& key) const noexcept;
  /// Returns the tensors at `key` stacked along the stack dim (a new
  /// tensor; dtypes promote as in at::stack). Throws KeyError if an element
  /// lacks the key, TypeError if an entry is not a tensor, and an error if
  /// the shapes differ.
  at::Tensor get(const NestedKey& key) const;
  /// Returns the lazy stack of the nested dicts at `key` (aliased), with
  /// the same stack dim and stack dim name. Throws KeyError if an element lacks
  /// the key, TypeError if an entry is not a dict, and an error if the nested
  /// batch sizes differ.
  LazyStackedTensorDict get_tensordict(const NestedKey& key) const;
  /// Returns a dense TensorDict (new tensors) holding every key the
  /// elements share, stacked along the stack dim, nested dicts recursively;
  /// non-tensor values become a NonTensorStack. It has `names()` when the
  /// elements have names. Keys that only some
  /// elements hold are dropped, as in Python. Throws an error naming the key
  /// if the shapes of a leaf differ, TypeError if its kinds differ.
  [[nodiscard]] TensorDict contiguous() const;

  // --- memory-mapped storage (src/memmap/save.cpp) --------------------------
  // The same members as TensorDict's, for a stack at the root: the directory
  // holds a meta.json with the stack dim and one sub-directory per element,
  // as Python writes it, and every guarantee of NOTE [Memmap layout] holds
  // (checked keys, a refused or failed save leaves nothing, an overwrite is
  // swapped in atomically).

  /// Writes the stack under `options.prefix()` (elements in "0/", "1/",
  /// ...; a tensorclass's stack in "_tensordict/") and returns a new stack
  /// on the CPU whose elements are locked and map the files (with an empty
  /// prefix, anonymous shared memory); `*this` is untouched. A prefix ending
  /// in ".tdz" writes one archive file instead and returns it loaded. Throws
  /// as `TensorDict::memmap`.
  [[nodiscard]] LazyStackedTensorDict memmap(
      const MemmapOptions& options = {}) const;
  /// Runs `memmap` on a background thread: Python's `return_early=True`.
  /// The stack must not change until the future is ready.
  [[nodiscard]] std::future<LazyStackedTensorDict> memmap_async(
      const MemmapOptions& options = {}) const;
  /// Writes the stack like `memmap`, then replaces every leaf of every
  /// element by its mapped tensor in place, moves the stack to the CPU and
  /// locks the elements. Throws as `TensorDict::memmap_`; on an error no
  /// element has changed.
  LazyStackedTensorDict& memmap_(const MemmapOptions& options = {});
  /// `memmap_` on another thread; the stack must not be used until the
  /// future (holding this stack) is ready.
  [[nodiscard]] std::future<LazyStackedTensorDict> memmap_async_(
      const MemmapOptions& options = {});
  /// Writes the layout of `memmap` with zero-filled leaf files (shapes and
  /// dtypes only) and returns the new stack mapping them.
  [[nodiscard]] LazyStackedTensorDict memmap_like(
      const MemmapOptions& options = {}) const;
  /// `memmap_like` on another thread.
  [[nodiscard]] std::future<LazyStackedTensorDict> memmap_like_async(
      const MemmapOptions& options = {}) const;
  /// Same as `memmap` (Python's `save`).
  LazyStackedTensorDict save(const MemmapOptions& options) const;
  /// Same as `memmap` (Python's `dumps`, an alias of `save`).
  LazyStackedTensorDict dumps(const MemmapOptions& options) const;
  /// `save` on another thread.
  [[nodiscard]] std::future<LazyStackedTensorDict> save_async(
      const MemmapOptions& options) const;
  /// Loads a directory (or `.tdz` archive) whose root is a lazy stack,
  /// written by `memmap` or by Python's `lazy_td.memmap(...)`: the leaves
  /// map the files, the elements are not locked. A Python tensorclass over
  /// a lazy stack loads with its class (`python_class()`). Throws ValueError
  /// when the root is not a lazy stack (load a dict with
  /// `TensorDict::load_memmap`), and as `TensorDict::load_memmap` on any
  /// inconsistency.
  [[nodiscard]] static LazyStackedTensorDict load_memmap(
      const std::string& prefix, const LoadMemmapOptions& options = {});
  /// Same as `load_memmap` (Python's `load`).
  [[nodiscard]] static LazyStackedTensorDict load(
      const std::string& prefix, const LoadMemmapOptions& options = {});
  /// Loads the lazy stack saved at `prefix` into this one, element by
  /// element, as `TensorDict::load_memmap_` loads a dict (memmapped
  /// elements stay memmapped). The saved stack must have as many elements
  /// and the same stack dim (ValueError otherwise, before anything is
  /// loaded); every meta.json is checked before the first element changes.
  LazyStackedTensorDict& load_memmap_(
      const std::string& prefix, const LoadMemmapOptions& options = {});
  /// Same as `load_memmap_` (Python's `load_`).
  LazyStackedTensorDict& load_(
      const std::string& prefix, const LoadMemmapOptions& options = {});
  /// Re-reads the stack's own directory (`saved_path()`), picking up what
  /// another process changed in its elements. Throws unless `is_memmap()`
  /// and the stack has a saved path. Python refuses every lazy stack here.
  LazyStackedTensorDict& memmap_refresh_();
  /// Returns true if every element is memmapped (Python raises when only
  /// some are; this returns false).
  bool is_memmap() const;
  /// Returns the directory holding the stack's meta.json when every element
  /// `i` was saved to or loaded from its sub-directory `i` there, else
  /// nullopt (Python's `saved_path` of a lazy stack is always None).
  std::optional<std::string> saved_path() const;

  // --- consolidate (src/consolidate/) ---------------------------------------
  // See NOTE [Consolidated layout] in tensordict/consolidate.h: a stack at
  // the root is a level of class "LazyStackedTensorDict" whose members "0",
  // "1", ... are its elements, as Python writes it.

  /// Copies every leaf of every element into one contiguous uint8 storage
  /// and returns a stack of locked elements viewing it; with
  /// `options.filename()`, the storage maps that file, laid out for
  /// `from_consolidated` (Python's `lazy_td.consolidate(filename=...)`).
  /// Returns `*this` if it is already consolidated and the options ask for
  /// no file, no other device and no shared or pinned memory. Throws as
  /// `TensorDict::consolidate`.
  [[nodiscard]] LazyStackedTensorDict consolidate(
      const ConsolidateOptions& options = {}) const;
  /// Returns true if every element is consolidated into one shared storage.
  bool is_consolidated() const;
  /// Returns that storage (the data region), or an undefined tensor.
  at::Tensor consolidated_storage() const;
  /// Maps a file written by `consolidate(filename)` here or by Python's
  /// `lazy_td.consolidate(filename=...)` whose root is a lazy stack,
  /// checked as `TensorDict::from_consolidated` checks it; throws naming
  /// `TensorDict::from_consolidated` when the root is a dict.
  [[nodiscard]] static LazyStackedTensorDict from_consolidated(
      const std::string& filename, const LoadConsolidatedOptions& options = {});
  /// Rebuilds a stack from the bytes of `consolidated_bytes(stack)` (see
  /// tensordict/consolidate.h) or of such a file: the leaves are views of
  /// `bytes` (a 1-dim CPU uint8 tensor, copied first when its data is not
  /// 8-byte aligned). Throws as `from_consolidated`, and naming
  /// `from_consolidated_bytes` when the root is a dict.
  [[nodiscard]] static LazyStackedTensorDict from_consolidated_bytes(
      const at::Tensor& bytes, const LoadConsolidatedOptions& options = {});

  // --- printing -------------------------------------------------------------

  /// Returns Python's repr in the form the print options select (see
  /// print_options.h): compact by default, detailed with
  /// `PrintOptions().compact(false)`. Where the compact form fails (an
  /// entry that is a dict in some elements only), returns the detailed
  /// form, as Python does.
  std::string repr() const;
  /// Returns Python's compact repr, whatever `compact` says in the print
  /// options: `LazyStackedTensorDict(batch_size=[2], stack_dim=0,
  /// fields={a: f32[-1]}, exclusive_fields={1: {b: i64[]}})`, with -1
  /// where the elements' shapes differ and the promoted dtype. Throws an
  /// error for an entry that is a dict in some elements only.
  std::string repr_compact() const;
  /// Returns Python's detailed repr (`set_printoptions(compact=False)`),
  /// whatever `compact` says in the print options: shared fields with -1
  /// where the elements' shapes differ, then each element's exclusive
  /// fields.
  std::string repr_detailed() const;

  /// Returns the implementation; not API.
  detail::LazyStackedTensorDictImpl* unsafeGetImpl() const noexcept {
    return impl_.get();
  }

 private:
  c10::intrusive_ptr<detail::LazyStackedTensorDictImpl> impl_;
};

/// Stacks `tensordicts` lazily along batch dim `dim` (Python's
/// `lazy_stack`): the elements are aliased, not copied. Throws like the
/// LazyStackedTensorDict constructor.
TENSORDICT_API LazyStackedTensorDict lazy_stack(
    const std::vector<TensorDict>& tensordicts,
    int64_t dim = 0,
    std::optional<std::string> stack_dim_name = std::nullopt);

/// Writes `stack.repr()`.
TENSORDICT_API std::ostream& operator<<(
    std::ostream& out, const LazyStackedTensorDict& stack);

TENSORDICT_END_NAMESPACE

// The class above needs TensorDict only declared, and Value (value.h) holds
// a LazyStackedTensorDict by value: defining this class before TensorDict's
// header finishes lets either header be included first.
#include "tensordict/tensor_dict.h"
