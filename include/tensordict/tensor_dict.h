#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/FunctionRef.h>
#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensordict/fwd.h"
#include "tensordict/nested_key.h"
#include "tensordict/non_tensor.h"
#include "tensordict/options.h"

namespace at::indexing {
struct TensorIndex;
} // namespace at::indexing

TENSORDICT_BEGIN_NAMESPACE

/// An ordered dictionary of tensors, nested TensorDicts and non-tensor values
/// that share leading batch dims: the C++ form of Python's `TensorDict`.
///
/// A TensorDict is a cheap handle, like `at::Tensor`: copying it aliases the
/// same dict, so `td.get_tensordict("sub").set("x", t)` writes into `td`.
/// `clone()` is deep, `copy()` copies the structure and aliases the leaves,
/// `is_same()` compares identity. A default-constructed TensorDict is a valid
/// empty dict with no batch dims. Like `at::Tensor`, a `const TensorDict&`
/// does not make the dict read-only (const is shallow).
///
/// Entries keep insertion order. Lookup is a hash lookup per key part and
/// reading an existing key allocates nothing.
///
/// Batch size: every tensor's leading dims equal the batch size; a nested
/// dict's (or non-tensor's) batch size starts with it. Device: optional; when
/// set, every tensor written is moved there and nested dicts share it.
///
/// Errors follow Python's kinds: `tensordict::KeyError` for keys,
/// `c10::ValueError`, `c10::TypeError`, `c10::IndexError`, and `c10::Error`
/// (Python's `RuntimeError`) for batch-size and lock violations.
///
/// Differences from Python, for C++'s sake:
/// - `get(key)` returns a tensor and throws KeyError when the key is missing
///   (Python returns None); `get_tensordict`, `get_non_tensor` and
///   `operator[]` (any entry, as a `Value`) cover the other kinds.
/// - Error messages name the full nested key, not only its last part.
/// - `set_` refuses a value whose dtype cannot be cast safely into the
///   entry's (`c10::canCast`), where Python would silently truncate.
/// - Setting a nested dict whose batch size does not start with the parent's
///   is an error even when the nested dict is empty.
/// - `repr()` prints Python's detailed form (`set_printoptions(compact=False)`).
///
/// Thread safety: like `at::Tensor`, concurrent reads are safe; any write
/// needs external synchronisation.
///
/// Example:
/// ```
///   TensorDict td({{"obs", torch::zeros({4, 3})},
///                  {"next", {{"reward", torch::ones({4})}}},
///                  {"task", "reach"}},
///                 /*batch_size=*/{4});
///   td.get({"next", "reward"});   // a [4] tensor
///   td.get_non_tensor("task");    // "reach"
/// ```
class TENSORDICT_API TensorDict {
 public:
  /// Makes an empty dict with no batch dims.
  TensorDict();
  /// Makes an empty dict; throws ValueError if `names` does not fit.
  explicit TensorDict(
      c10::IntArrayRef batch_size,
      std::optional<c10::Device> device = std::nullopt,
      const DimNames& names = {});
  /// Makes an empty dict; the form `TensorDict({4, 3})` resolves here.
  explicit TensorDict(
      std::initializer_list<int64_t> batch_size,
      std::optional<c10::Device> device = std::nullopt,
      const DimNames& names = {});
  /// Makes a dict from key/value pairs. Values may be tensors, nested dicts,
  /// nested key/value lists (which become dicts of the same batch size),
  /// numbers (0-dim tensors, which must then fit the batch size), strings
  /// and JSON values (non-tensor data). Throws on batch-size mismatches.
  TensorDict( // NOLINT(google-explicit-constructor)
      std::initializer_list<Item> items,
      c10::IntArrayRef batch_size = {},
      std::optional<c10::Device> device = std::nullopt,
      const DimNames& names = {});
  /// Same as the initializer-list form, for items built at run time.
  TensorDict(
      const std::vector<Item>& items,
      c10::IntArrayRef batch_size = {},
      std::optional<c10::Device> device = std::nullopt,
      const DimNames& names = {});

  TensorDict(const TensorDict& other);
  TensorDict(TensorDict&& other) noexcept;
  TensorDict& operator=(const TensorDict& other) &;
  TensorDict& operator=(TensorDict&& other) & noexcept;
  // `td.index(...) = x` would silently assign to a temporary: use index_put_.
  TensorDict& operator=(const TensorDict& other) && = delete;
  TensorDict& operator=(TensorDict&& other) && = delete;
  ~TensorDict();

  /// Builds a dict from key/value pairs like the constructor, inferring the
  /// batch size when `options.auto_batch_size()` is set; nested lists get
  /// their own inferred batch size first.
  [[nodiscard]] static TensorDict from_dict(
      const std::vector<Item>& items,
      const FromDictOptions& options = {});
  /// Makes a dict with no batch dims where every key holds `value`.
  [[nodiscard]] static TensorDict fromkeys(
      const std::vector<NestedKey>& keys,
      const at::Tensor& value);
  /// Makes a dict with no batch dims where every key holds the 0-dim tensor
  /// of `value` (int64 for integers, the default dtype for floats).
  [[nodiscard]] static TensorDict fromkeys(
      const std::vector<NestedKey>& keys,
      const c10::Scalar& value = 0);

  // --- identity -------------------------------------------------------------

  /// Returns true if both handles point at the same dict.
  bool is_same(const TensorDict& other) const noexcept {
    return impl_ == other.impl_;
  }
  /// Returns a deep copy: new dicts and new tensor storage all the way down.
  [[nodiscard]] TensorDict clone() const;
  /// Returns a shallow copy: new dicts (nested ones too), same tensors.
  [[nodiscard]] TensorDict copy() const;

  // --- batch size, device, names --------------------------------------------

  /// Returns the batch size (a view into the dict).
  c10::IntArrayRef batch_size() const& noexcept;
  /// Returns the batch size of a temporary dict by value.
  std::vector<int64_t> batch_size() const&&;
  /// Same as `batch_size()`.
  c10::IntArrayRef shape() const& noexcept {
    return batch_size();
  }
  /// Same as `batch_size()`, by value.
  std::vector<int64_t> shape() const&& {
    return std::move(*this).batch_size();
  }
  /// Sets the batch size: shrinking always fits; growing is checked against
  /// every entry, and nested dicts with fewer dims grow along. Names are cut
  /// or padded with unnamed dims. Throws if an entry does not fit.
  void set_batch_size(c10::IntArrayRef batch_size);
  /// Returns the number of batch dims.
  int64_t batch_dims() const noexcept;
  /// Same as `batch_dims()`.
  int64_t ndim() const noexcept {
    return batch_dims();
  }
  /// Returns the number of batch elements (1 with no batch dims).
  int64_t numel() const noexcept;
  /// Returns the size of batch dim `dim` (negative counts from the end);
  /// throws IndexError when out of range.
  int64_t size(int64_t dim) const;
  /// Returns the device, or nullopt when leaves may live anywhere.
  std::optional<c10::Device> device() const noexcept;

  /// Returns the dim names, or an empty vector when the dict has none.
  DimNames names() const;
  /// Returns true if any batch dim is named.
  bool has_names() const noexcept;
  /// Sets the dim names (empty clears them) and propagates them to nested
  /// dicts; throws ValueError on a length mismatch or a repeated name.
  void set_names(const DimNames& names);
  /// Refines the names in place, as Python's `TensorDict.refine_names` does
  /// (torch's Tensor version returns a new tensor instead): unnamed dims take
  /// the given names, named dims must match, and "..." stands for the dims
  /// it skips. Throws ValueError on a bad length, an error on a conflict.
  TensorDict& refine_names(const DimNames& names);
  /// Returns a shallow copy with these names (one per batch dim).
  [[nodiscard]] TensorDict rename(const DimNames& names) const;
  /// Returns a shallow copy where each dim named like a key of `old_to_new`
  /// takes the mapped name (Python's `rename(old=new)`); throws ValueError
  /// if a name is not present.
  [[nodiscard]] TensorDict rename_by_map(
      const std::map<std::string, std::string>& old_to_new) const;
  /// Renames the dims in place (see `set_names`).
  TensorDict& rename_(const DimNames& names);

  // --- reading --------------------------------------------------------------

  /// Returns the tensor at `key`. Throws KeyError if the key is missing
  /// (listing the keys present at that level) or walks through a leaf, and
  /// TypeError if the entry is not a tensor.
  at::Tensor get(const NestedKey& key) const;
  /// Returns the tensor at `key`, or `default_value` when the key is missing.
  at::Tensor get(const NestedKey& key, const at::Tensor& default_value) const;
  /// Returns the nested dict at `key` (aliasing it); throws like `get`.
  TensorDict get_tensordict(const NestedKey& key) const;
  /// Returns the entry at `key`, whatever its kind; throws KeyError.
  Value operator[](const NestedKey& key) const;
  /// Returns a pointer to the entry at `key`, or null if there is none.
  /// The pointer is valid until the entry is removed or replaced.
  const Value* find(const NestedKey& key) const& noexcept;
  const Value* find(const NestedKey& key) const&& = delete;
  /// Returns true if `key` names an entry (of any kind).
  bool contains(const NestedKey& key) const noexcept;
  /// Returns the entry at `key`, first setting it to `default_value` when
  /// missing.
  Value setdefault(const NestedKey& key, const Value& default_value);
  /// Returns the JSON data of the non-tensor entry at `key` (a list following
  /// the batch dims for a NonTensorStack); throws KeyError or TypeError.
  Json get_non_tensor(const NestedKey& key) const;
  /// Returns the non-tensor data at `key`, or `default_value` if missing.
  Json get_non_tensor(const NestedKey& key, const Json& default_value) const;
  /// Returns true if the entry at `key` is NonTensorData or NonTensorStack;
  /// throws KeyError if it is missing.
  bool is_non_tensor(const NestedKey& key) const;

  // --- writing --------------------------------------------------------------

  /// Sets `key` to `value`, creating missing nested dicts. Moves the tensor
  /// to the dict's device. Throws if the leading dims do not match the batch
  /// size, if the dict is locked (unless writing in place), or if the key
  /// walks through a leaf.
  TensorDict& set(
      const NestedKey& key,
      const at::Tensor& value,
      const SetOptions& options = {});
  /// Sets `key` to a nested dict (aliased, or moved to this dict's device).
  TensorDict& set(
      const NestedKey& key,
      const TensorDict& value,
      const SetOptions& options = {});
  /// Sets `key` to any entry kind.
  TensorDict& set(
      const NestedKey& key,
      const Value& value,
      const SetOptions& options = {});
  /// Sets `key` to non-tensor data shared by the whole batch.
  TensorDict& set_non_tensor(const NestedKey& key, const Json& value);
  /// Copies `value` into the existing tensor at `key` (Python's `set_`):
  /// throws KeyError if missing, and an error if the shape does not fit or
  /// the dtype cannot be cast safely. Allowed on locked dicts.
  TensorDict& set_(const NestedKey& key, const at::Tensor& value);
  /// Merges `other` into this dict: nested dicts are merged recursively,
  /// other entries replaced (or copied into, with `inplace`).
  TensorDict& update(const TensorDict& other, const UpdateOptions& options = {});
  /// Copies every entry of `other` into the existing entries (Python's
  /// `update_`); throws KeyError if one is missing.
  TensorDict& update_(
      const TensorDict& other,
      const std::vector<NestedKey>& keys_to_update = {});
  /// Renames an entry (it moves to the end of its dict, as in Python);
  /// throws KeyError if `old_key` is missing or, with `safe`, if `new_key`
  /// exists.
  TensorDict& rename_key_(
      const NestedKey& old_key,
      const NestedKey& new_key,
      bool safe = false);
  /// Removes and returns the entry at `key`; throws KeyError if missing.
  Value pop(const NestedKey& key);
  /// Removes and returns the entry at `key`, or `default_value` if missing.
  Value pop(const NestedKey& key, const Value& default_value);
  /// Removes the entry at `key`; throws KeyError if missing.
  TensorDict& del_(const NestedKey& key);
  /// Removes every entry; throws if the dict is locked.
  TensorDict& clear();

  // --- structure ------------------------------------------------------------

  /// Returns a dict with the same batch size, device and names and no
  /// entries; with `recurse`, nested dicts are kept, empty.
  [[nodiscard]] TensorDict empty(bool recurse = false) const;
  /// Returns a new dict holding only `keys` (leaves aliased). With `strict`,
  /// a missing key is a KeyError; otherwise it is skipped.
  [[nodiscard]] TensorDict select(
      const std::vector<NestedKey>& keys,
      bool strict = true) const;
  /// Returns a new dict without `keys` (missing keys are ignored).
  [[nodiscard]] TensorDict exclude(const std::vector<NestedKey>& keys) const;
  /// Returns the keys in insertion order. With `include_nested`, the keys of
  /// nested dicts come right before the dict's own key, as in Python; with
  /// `leaves_only`, only tensors; with `sort`, ordered by the "."-joined key.
  std::vector<NestedKey> keys(
      bool include_nested = false,
      bool leaves_only = false,
      bool sort = false) const;
  /// Returns the values in the order of `keys(...)`.
  std::vector<Value> values(
      bool include_nested = false,
      bool leaves_only = false,
      bool sort = false) const;
  /// Returns key/value pairs in the order of `keys(...)`.
  std::vector<std::pair<NestedKey, Value>> items(
      bool include_nested = false,
      bool leaves_only = false,
      bool sort = false) const;
  /// Returns the number of entries at the top level.
  size_t size() const noexcept;
  /// Returns true if there are no entries at the top level.
  bool is_empty() const noexcept;
  /// Returns a flat dict whose keys are the nested keys joined by
  /// `separator`; throws KeyError if two keys collide.
  [[nodiscard]] TensorDict flatten_keys(std::string_view separator = ".") const;
  /// Returns the inverse of `flatten_keys`: keys are split on `separator`
  /// into nested dicts; throws KeyError if an entry clashes with a dict.
  [[nodiscard]] TensorDict unflatten_keys(
      std::string_view separator = ".") const;
  /// Returns a copy with every tensor moved to `device` (the dict's device
  /// becomes `device`).
  [[nodiscard]] TensorDict to(c10::Device device, bool non_blocking = false)
      const;

  // --- indexing (src/tensor_dict/indexing.cpp) -----------------------------
  // Include <tensordict/indexing.h> to build indices; it has the table of
  // Python index expressions and their C++ spelling.

  /// Indexes the batch dims of every entry, as `td[idx]` in Python: integers,
  /// `Slice`, `Ellipsis`, `None`, bool masks and int64 index tensors. Feature
  /// dims are untouched. Returns views wherever torch returns views; batch
  /// size and names follow torch's rules. Throws IndexError when the index
  /// reaches past the batch dims.
  [[nodiscard]] TensorDict index(
      c10::ArrayRef<at::indexing::TensorIndex> indices) const;
  /// Writes `value` into the indexed part of every entry (Python's
  /// `td[idx] = value`). Keys of `value` missing here are first allocated as
  /// zeros of shape batch size + the value's feature dims (lazy
  /// preallocation); non-tensor values become a NonTensorStack.
  TensorDict& index_put_(
      c10::ArrayRef<at::indexing::TensorIndex> indices,
      const TensorDict& value);
  /// Writes a scalar into the indexed part of every tensor.
  TensorDict& index_put_(
      c10::ArrayRef<at::indexing::TensorIndex> indices,
      const c10::Scalar& value);
  /// Writes a tensor (broadcast over each entry's feature dims) into the
  /// indexed part of every tensor.
  TensorDict& index_put_(
      c10::ArrayRef<at::indexing::TensorIndex> indices,
      const at::Tensor& value);

  /// Writes a key/value list, made into a dict of the indexed batch size.
  TensorDict& index_put_(
      c10::ArrayRef<at::indexing::TensorIndex> indices,
      std::initializer_list<Item> items);
  /// Picks each leaf from this dict where `condition` (batch-shaped,
  /// broadcast over feature dims) is true, else from `other`.
  [[nodiscard]] TensorDict where(
      const at::Tensor& condition,
      const TensorDict& other) const;
  /// Picks each element from this dict where `condition` is true, else
  /// `other`.
  [[nodiscard]] TensorDict where(
      const at::Tensor& condition,
      const c10::Scalar& other) const;
  /// Returns a copy with `value` where the batch-shaped `mask` is true.
  [[nodiscard]] TensorDict masked_fill(
      const at::Tensor& mask,
      const c10::Scalar& value) const;
  /// Writes `value` where the batch-shaped `mask` is true, in place.
  TensorDict& masked_fill_(const at::Tensor& mask, const c10::Scalar& value);
  /// Returns the elements where `mask` (exactly the batch shape) is true,
  /// flattened into one batch dim.
  [[nodiscard]] TensorDict masked_select(const at::Tensor& mask) const;
  /// Gathers along batch dim `dim` as torch.gather, with an index of the
  /// batch's rank; feature dims come along whole.
  [[nodiscard]] TensorDict gather(int64_t dim, const at::Tensor& index) const;
  /// Pads the batch dims with `value`; `pad_sizes` lists (before, after)
  /// pairs starting at the last batch dim, as torch.nn.functional.pad.
  [[nodiscard]] TensorDict pad(
      c10::IntArrayRef pad_sizes,
      const c10::Scalar& value = 0) const;

  // --- shape ops over the batch dims (src/tensor_dict/shape.cpp) ------------
  // Each returns a new dict; leaves are views where torch's op gives views.
  // Nested dicts with longer batch sizes keep their extra dims after the
  // transformed ones, as in Python.

  /// Returns a view with batch size `shape` (one -1 is inferred); throws if
  /// a leaf cannot be viewed so.
  [[nodiscard]] TensorDict view(c10::IntArrayRef shape) const;
  /// Returns the dict with batch size `shape` (one -1 is inferred), copying
  /// leaves only when needed.
  [[nodiscard]] TensorDict reshape(c10::IntArrayRef shape) const;
  /// Flattens batch dims `start_dim`..`end_dim` into one.
  [[nodiscard]] TensorDict flatten(int64_t start_dim = 0, int64_t end_dim = -1)
      const;
  /// Splits batch dim `dim` into `sizes`.
  [[nodiscard]] TensorDict unflatten(int64_t dim, c10::IntArrayRef sizes) const;
  /// Removes every batch dim of size 1.
  [[nodiscard]] TensorDict squeeze() const;
  /// Removes batch dim `dim` if its size is 1 (else returns the same shape).
  [[nodiscard]] TensorDict squeeze(int64_t dim) const;
  /// Inserts a batch dim of size 1 at `dim` (in [-ndim-1, ndim]).
  [[nodiscard]] TensorDict unsqueeze(int64_t dim) const;
  /// Reorders the batch dims.
  [[nodiscard]] TensorDict permute(c10::IntArrayRef dims) const;
  /// Swaps two batch dims.
  [[nodiscard]] TensorDict transpose(int64_t dim0, int64_t dim1) const;
  /// Broadcasts to batch size `shape` (new leading dims allowed); views.
  [[nodiscard]] TensorDict expand(c10::IntArrayRef shape) const;
  /// Broadcasts to the batch size of `other`.
  [[nodiscard]] TensorDict expand_as(const TensorDict& other) const;
  /// Same as `expand`.
  [[nodiscard]] TensorDict broadcast_to(c10::IntArrayRef shape) const;
  /// Tiles the batch dims `repeats` times (one count per batch dim).
  [[nodiscard]] TensorDict repeat(c10::IntArrayRef repeats) const;
  /// Repeats each element `repeats` times along batch dim `dim`.
  [[nodiscard]] TensorDict repeat_interleave(int64_t repeats, int64_t dim) const;
  /// Reverses the order along the given batch dims.
  [[nodiscard]] TensorDict flip(c10::IntArrayRef dims) const;
  /// Rolls along batch dims, as torch.roll.
  [[nodiscard]] TensorDict roll(c10::IntArrayRef shifts, c10::IntArrayRef dims)
      const;
  /// Returns the slice [start, start + length) of batch dim `dim`; a view.
  [[nodiscard]] TensorDict narrow(int64_t dim, int64_t start, int64_t length)
      const;
  /// Splits along batch dim `dim` into its elements; views.
  [[nodiscard]] std::vector<TensorDict> unbind(int64_t dim = 0) const;
  /// Splits along batch dim `dim` into pieces of `split_size` (the last one
  /// may be shorter); views.
  [[nodiscard]] std::vector<TensorDict> split(int64_t split_size, int64_t dim = 0)
      const;
  /// Splits along batch dim `dim` into pieces of the given sizes; views.
  [[nodiscard]] std::vector<TensorDict> split(
      c10::IntArrayRef split_sizes,
      int64_t dim = 0) const;
  /// Splits along batch dim `dim` into `chunks` pieces, as torch.chunk.
  [[nodiscard]] std::vector<TensorDict> chunk(int64_t chunks, int64_t dim = 0)
      const;

  // --- apply (src/tensor_dict/apply.cpp) -------------------------------------

  /// The compiled form of `apply` and `named_apply`: `fn(key, leaves)` gets
  /// the nested key and one leaf from this dict then each of `others`.
  [[nodiscard]] TensorDict apply_impl(
      c10::function_ref<at::Tensor(const NestedKey&, c10::ArrayRef<at::Tensor>)>
          fn,
      c10::ArrayRef<TensorDict> others,
      const ApplyOptions& options) const;

  /// Returns a dict of `fn(leaf)` for every tensor; an undefined result drops
  /// the entry. Non-tensor data is kept.
  ///
  /// Example: `td.apply([](const at::Tensor& t) { return t * 2; })`
  template <typename Fn>
  [[nodiscard]] TensorDict apply(Fn&& fn, const ApplyOptions& options = {})
      const {
    return apply_impl(
        [&](const NestedKey&, c10::ArrayRef<at::Tensor> leaves) {
          return fn(leaves[0]);
        },
        {},
        options);
  }
  /// Returns a dict of `fn(leaf, other_leaf)`, leaves matched by key. A key
  /// missing from `other` uses `options.default_value()` or throws KeyError.
  template <typename Fn>
  [[nodiscard]] TensorDict apply(
      Fn&& fn,
      const TensorDict& other,
      const ApplyOptions& options = {}) const {
    return apply_impl(
        [&](const NestedKey&, c10::ArrayRef<at::Tensor> leaves) {
          return fn(leaves[0], leaves[1]);
        },
        other,
        options);
  }
  /// Like `apply`, but `fn(key, leaf)` also sees the leaf's nested key.
  template <typename Fn>
  [[nodiscard]] TensorDict named_apply(
      Fn&& fn,
      const ApplyOptions& options = {}) const {
    return apply_impl(
        [&](const NestedKey& key, c10::ArrayRef<at::Tensor> leaves) {
          return fn(key, leaves[0]);
        },
        {},
        options);
  }
  /// Writes `fn(leaf)` into every tensor in place (results must fit).
  template <typename Fn>
  TensorDict& apply_(Fn&& fn) {
    apply_inplace_impl([&](const NestedKey&, c10::ArrayRef<at::Tensor> leaves) {
      return fn(leaves[0]);
    });
    return *this;
  }
  /// The compiled form of `apply_`.
  void apply_inplace_impl(
      c10::function_ref<at::Tensor(const NestedKey&, c10::ArrayRef<at::Tensor>)>
          fn);

  // --- device, dtype, memory (src/tensor_dict/convert.cpp) ------------------

  // --- arithmetic and comparison (src/tensor_dict/math.cpp) -----------------

  // --- reductions (src/tensor_dict/reduce.cpp) ------------------------------

  // --- locking --------------------------------------------------------------

  /// Locks the dict and its nested dicts: keys can no longer be added,
  /// removed or renamed; in-place writes still work.
  TensorDict& lock_();
  /// Unlocks the dict and its nested dicts; throws if a locked dict still
  /// holds this one.
  TensorDict& unlock_();
  /// Returns true if the dict is locked.
  bool is_locked() const noexcept;

  // --- comparison and printing ----------------------------------------------

  /// Compares leaf by leaf: a dict of bool tensors. Throws KeyError if the
  /// key sets differ.
  [[nodiscard]] TensorDict operator==(const TensorDict& other) const;
  /// Compares leaf by leaf: a dict of bool tensors.
  [[nodiscard]] TensorDict operator!=(const TensorDict& other) const;
  /// Compares every leaf to a scalar: a dict of bool tensors.
  [[nodiscard]] TensorDict operator==(const c10::Scalar& other) const;
  /// Compares every leaf to a scalar: a dict of bool tensors.
  [[nodiscard]] TensorDict operator!=(const c10::Scalar& other) const;
  /// Returns true if every element of every tensor is true (non-zero).
  bool all() const;
  /// Returns true if any element of any tensor is true (non-zero).
  bool any() const;
  /// Returns the detailed repr of Python's `TensorDict`.
  std::string repr() const;

  /// Returns the implementation; not API.
  detail::TensorDictImpl* unsafeGetImpl() const noexcept {
    return impl_.get();
  }
  /// Wraps an implementation; not API.
  explicit TensorDict(c10::intrusive_ptr<detail::TensorDictImpl> impl);

 private:
  c10::intrusive_ptr<detail::TensorDictImpl> impl_;
};

// --- combining (src/tensor_dict/stack.cpp) -----------------------------------

/// Returns true if `a` and `b` have the same keys (with the same kinds),
/// batch sizes, and equal values (`torch.equal` per tensor).
TENSORDICT_API bool equal(const TensorDict& a, const TensorDict& b);

/// Writes `td.repr()`.
TENSORDICT_API std::ostream& operator<<(std::ostream& out, const TensorDict& td);

TENSORDICT_END_NAMESPACE

#include "tensordict/value.h"
