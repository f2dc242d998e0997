#pragma once

/// @file
/// TensorDict, and the free functions over dicts (stack, cat, equal and
/// the arithmetic operators).

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/FunctionRef.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/ordered_dict.h>

#include <cstdint>
#include <future>
#include <initializer_list>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensordict/detail/ops.h"
#include "tensordict/fwd.h"
#include "tensordict/nested_key.h"
#include "tensordict/non_tensor.h"
#include "tensordict/options.h"

namespace at::indexing {
struct TensorIndex;
}  // namespace at::indexing

namespace torch::nn {
class Module;
}  // namespace torch::nn

TENSORDICT_BEGIN_NAMESPACE

class StateDict;    // tensordict/state_dict.h
struct MapOptions;  // tensordict/map.h
class MapIterator;  // tensordict/map.h
struct ValuesIndices;

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
/// - With grad mode off, view ops (index by integers and slices, reshape,
///   unbind, ...) build plain leaves' views without the dispatcher: same
///   storage, geometry and version counter as ATen's views, but not autograd
///   views (`is_view()` is false). See NOTE [Fast views] in
///   src/tensor_dict/fast_view.h and the README.
/// Printing: `repr()` and `operator<<` follow the print options
/// (print_options.h), as Python's repr does: by default the compact form,
/// `TensorDict(batch_size=[4], fields={a: {x: f32[]}, b: f32[3]})`;
/// `repr_compact()` and `repr_detailed()` ask for one form whatever the
/// options say.
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
  TensorDict(  // NOLINT(google-explicit-constructor)
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

  /// Aliases `other`'s dict (a handle copy); `clone()` copies the data.
  TensorDict(const TensorDict& other);
  /// Aliases `other`'s dict; `other` stays a valid handle to it.
  TensorDict(TensorDict&& other) noexcept;
  /// Makes this handle alias `other`'s dict; nothing is copied.
  TensorDict& operator=(const TensorDict& other) &;
  /// Swaps the two handles: `other` now refers to this handle's old dict.
  TensorDict& operator=(TensorDict&& other) & noexcept;
  // `td.index(...) = x` would silently assign to a temporary: use index_put_.
  TensorDict& operator=(const TensorDict& other) && = delete;
  TensorDict& operator=(TensorDict&& other) && = delete;
  ~TensorDict();

  /// Builds a dict from key/value pairs like the constructor, inferring the
  /// batch size when `options.auto_batch_size()` is set; nested lists get
  /// their own inferred batch size first.
  [[nodiscard]] static TensorDict from_dict(
      const std::vector<Item>& items, const FromDictOptions& options = {});
  /// Builds a dict from named tensors, such as `module->named_parameters()`
  /// or `named_buffers()` return: Python's
  /// `TensorDict.from_dict(dict(module.named_parameters()))`. Dotted names
  /// ("0.weight") stay flat keys, as in Python; `from_module` builds the
  /// nested form. The tensors are aliased, not copied.
  [[nodiscard]] static TensorDict from_dict(
      const torch::OrderedDict<std::string, at::Tensor>& tensors,
      const FromDictOptions& options = {});
  /// Makes a dict with no batch dims where every key holds `value`.
  [[nodiscard]] static TensorDict fromkeys(
      const std::vector<NestedKey>& keys, const at::Tensor& value);
  /// Makes a dict with no batch dims where every key holds the 0-dim tensor
  /// of `value` (int64 for integers, the default dtype for floats).
  [[nodiscard]] static TensorDict fromkeys(
      const std::vector<NestedKey>& keys, const c10::Scalar& value = 0);

  // --- identity -------------------------------------------------------------

  /// Returns true if both handles point at the same dict.
  bool is_same(const TensorDict& other) const noexcept;
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
  c10::IntArrayRef shape() const& noexcept;
  /// Same as `batch_size()`, by value.
  std::vector<int64_t> shape() const&&;
  /// Sets the batch size: shrinking always fits; growing is checked against
  /// every entry, and nested dicts with fewer dims grow along. Names are cut
  /// or padded with unnamed dims. Throws if an entry does not fit.
  void set_batch_size(c10::IntArrayRef batch_size);
  /// Returns the number of batch dims.
  int64_t batch_dims() const noexcept;
  /// Same as `batch_dims()`.
  int64_t ndim() const noexcept;
  /// Same as `batch_dims()` (Python's `dim()`).
  int64_t dim() const noexcept;
  /// Returns the number of batch elements (1 with no batch dims).
  int64_t numel() const noexcept;
  /// Returns the batch size, as Python's `td.size()` and at::Tensor's
  /// `sizes()` (a view into the dict; same as `batch_size()`). The number
  /// of entries is `num_keys()`.
  c10::IntArrayRef size() const& noexcept;
  /// Returns the batch size of a temporary dict by value.
  std::vector<int64_t> size() const&&;
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
  /// TypeError if the entry is not a tensor. A key that goes through a lazy
  /// stack entry (`{"stack", "obs"}`) gives the elements' tensors stacked,
  /// as `LazyStackedTensorDict::get` does.
  at::Tensor get(const NestedKey& key) const;
  /// Returns the tensor at `key`, or `default_value` when the key is missing.
  at::Tensor get(const NestedKey& key, const at::Tensor& default_value) const;
  /// Returns the nested dict at `key` (aliasing it); throws like `get`.
  TensorDict get_tensordict(const NestedKey& key) const;
  /// Returns the lazy stack entry at `key` (aliasing it), or, for a key
  /// that goes through a lazy stack, the lazy stack of the elements' nested
  /// dicts; throws like `get`.
  LazyStackedTensorDict get_lazy_stack(const NestedKey& key) const;
  /// Returns the entry at `key`, whatever its kind; throws KeyError. Through
  /// a lazy stack: its stacked tensor or lazy stack of nested dicts.
  Value operator[](const NestedKey& key) const;
  /// Returns a pointer to the entry stored at `key`, or null if there is
  /// none (also for keys that go through a lazy stack: nothing is stored
  /// there). The pointer is valid until the entry is removed or replaced.
  const Value* find(const NestedKey& key) const& noexcept;
  const Value* find(const NestedKey& key) const&& = delete;
  /// Returns true if `key` names an entry (of any kind), or, through a lazy
  /// stack, an entry every element holds.
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
      const NestedKey& key, const Value& value, const SetOptions& options = {});
  /// Sets `key` to non-tensor data shared by the whole batch.
  TensorDict& set_non_tensor(const NestedKey& key, const Json& value);
  /// Sets `key` to a string shared by the whole batch (null for `nullptr` or
  /// a null `const char*`); needs no JSON header.
  template <typename Text, std::enable_if_t<detail::is_text_v<Text>, int> = 0>
  TensorDict& set_non_tensor(const NestedKey& key, const Text& text) {
    return set_non_tensor_text(key, detail::TextArg(text));
  }
  /// Copies `value` into the existing tensor at `key` (Python's `set_`):
  /// throws KeyError if missing, and an error if the shape does not fit or
  /// the dtype cannot be cast safely. Allowed on locked dicts.
  TensorDict& set_(const NestedKey& key, const at::Tensor& value);
  /// Merges `other` into this dict: nested dicts are merged recursively,
  /// other entries replaced (or copied into, with `inplace`).
  TensorDict& update(
      const TensorDict& other, const UpdateOptions& options = {});
  /// Copies every entry of `other` into the existing entries (Python's
  /// `update_`); throws KeyError if one is missing.
  TensorDict& update_(
      const TensorDict& other,
      const std::vector<NestedKey>& keys_to_update = {});
  /// Renames an entry (it moves to the end of its dict, as in Python);
  /// throws KeyError if `old_key` is missing or, with `safe`, if `new_key`
  /// exists.
  TensorDict& rename_key_(
      const NestedKey& old_key, const NestedKey& new_key, bool safe = false);
  /// Removes and returns the entry at `key`; throws KeyError if missing.
  Value pop(const NestedKey& key);
  /// Removes and returns the entry at `key`, or `default_value` if missing.
  Value pop(const NestedKey& key, const Value& default_value);
  /// Removes and returns the last-inserted top-level entry as (key, value),
  /// Python's `popitem()`: throws the locked error on a locked dict and
  /// KeyError "popitem(): dictionary is empty" on an empty one.
  std::pair<std::string, Value> popitem();
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
      const std::vector<NestedKey>& keys, bool strict = true) const;
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
  /// Returns the number of entries at the top level (Python's
  /// `len(td.keys())`; `size()` is the batch size, as in Python).
  size_t num_keys() const noexcept;
  /// Returns true if there are no entries at the top level.
  bool is_empty() const noexcept;
  /// Returns a flat dict whose keys are the nested keys joined by
  /// `separator`; throws KeyError if two keys collide.
  [[nodiscard]] TensorDict flatten_keys(std::string_view separator = ".") const;
  /// Returns the inverse of `flatten_keys`: keys are split on `separator`
  /// into nested dicts; throws KeyError if an entry clashes with a dict.
  [[nodiscard]] TensorDict unflatten_keys(
      std::string_view separator = ".") const;
  /// Returns the entries as a nested list of Items, Python's `to_dict()`:
  /// tensors aliased, nested dicts as nested lists, NonTensorData as its
  /// JSON value, NonTensorStack as `tolist()`. An Item list, not a
  /// `std::map`, so key order survives and `from_dict(td.to_dict())` builds
  /// the dict again. Differs from Python: a lazy stack stays a
  /// LazyStackedTensorDict (Python densifies its leaves into new tensors).
  [[nodiscard]] std::vector<Item> to_dict() const;
  /// Returns a copy with every tensor moved to `device` (the dict's device
  /// becomes `device`).
  [[nodiscard]] TensorDict to(
      c10::Device device, bool non_blocking = false) const;
  /// Same as `to(c10::Device(type))`. Without it, `td.to(torch::kCPU)`
  /// would be ambiguous: a DeviceType converts to Device and to TensorOptions.
  [[nodiscard]] TensorDict to(
      c10::DeviceType type, bool non_blocking = false) const;
  /// Same as `to(c10::Device(device))` for a device string ("cpu",
  /// "cuda:1"), as Python's `td.to("cpu")`.
  [[nodiscard]] TensorDict to(
      const char* device, bool non_blocking = false) const;

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
      const at::Tensor& condition, const TensorDict& other) const;
  /// Picks each element from this dict where `condition` is true, else
  /// `other`.
  [[nodiscard]] TensorDict where(
      const at::Tensor& condition, const c10::Scalar& other) const;
  /// Returns a copy with `value` where the batch-shaped `mask` is true.
  [[nodiscard]] TensorDict masked_fill(
      const at::Tensor& mask, const c10::Scalar& value) const;
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
  /// Non-tensor entries hold null (Python's None) in the padded slots, so
  /// NonTensorData becomes a NonTensorStack. Throws ValueError on a bad
  /// number of pad sizes or a negative resulting size.
  [[nodiscard]] TensorDict pad(
      c10::IntArrayRef pad_sizes, const c10::Scalar& value = 0) const;

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
  [[nodiscard]] TensorDict flatten(
      int64_t start_dim = 0, int64_t end_dim = -1) const;
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
  [[nodiscard]] TensorDict repeat_interleave(
      int64_t repeats, int64_t dim) const;
  /// Reverses the order along the given batch dims.
  [[nodiscard]] TensorDict flip(c10::IntArrayRef dims) const;
  /// Rolls along batch dims, as torch.roll.
  [[nodiscard]] TensorDict roll(
      c10::IntArrayRef shifts, c10::IntArrayRef dims) const;
  /// Returns the slice [start, start + length) of batch dim `dim`; a view.
  [[nodiscard]] TensorDict narrow(
      int64_t dim, int64_t start, int64_t length) const;
  /// Splits along batch dim `dim` into its elements; views.
  [[nodiscard]] std::vector<TensorDict> unbind(int64_t dim = 0) const;
  /// Splits along batch dim `dim` into pieces of `split_size` (the last one
  /// may be shorter); views.
  [[nodiscard]] std::vector<TensorDict> split(
      int64_t split_size, int64_t dim = 0) const;
  /// Splits along batch dim `dim` into pieces of the given sizes; views.
  [[nodiscard]] std::vector<TensorDict> split(
      c10::IntArrayRef split_sizes, int64_t dim = 0) const;
  /// Splits along batch dim `dim` into `chunks` pieces, as torch.chunk.
  [[nodiscard]] std::vector<TensorDict> chunk(
      int64_t chunks, int64_t dim = 0) const;

  // --- apply (src/tensor_dict/apply.cpp) -------------------------------------
  // Two callback shapes, told apart by what the callback returns when given
  // tensors:
  // - over tensors: `at::Tensor fn(const at::Tensor&)`. The callback sees
  //   every tensor leaf, nested ones included; an undefined result drops the
  //   entry. Non-tensor entries are kept.
  // - over entries: `std::optional<Value> fn(const Value&)` (or returning
  //   `Value` or `TensorDict`, which cannot drop). Without
  //   `ApplyOptions::call_on_nested` it sees the same leaves as a tensor
  //   callback; with it, it is called once per top-level entry, nested
  //   TensorDicts and non-tensor data included, and is not called inside
  //   nested dicts (Python's `call_on_nested=True`). `std::nullopt` drops the
  //   entry. Results are checked against the result's batch size like `set`.
  // A callback taking `const Value&` but returning `at::Tensor` is a tensor
  // callback. The templates call compiled forms in
  // tensordict/detail/tensor_dict_inl.h.

  /// Returns a dict of `fn(leaf)` for every tensor, or of `fn(entry)` for a
  /// callback over `Value` (see above); an undefined tensor or `std::nullopt`
  /// drops the entry. Throws what `set` throws when a result does not fit
  /// the batch size.
  ///
  /// Example: `td.apply([](const at::Tensor& t) { return t * 2; })`
  template <typename Fn>
  [[nodiscard]] TensorDict apply(
      Fn&& fn, const ApplyOptions& options = {}) const;
  /// Returns a dict of `fn(leaf, other_leaf)` (or `fn(entry, other_entry)`),
  /// matched by key. A key missing from `other` uses
  /// `options.default_value()` or throws KeyError.
  template <typename Fn>
  [[nodiscard]] TensorDict apply(
      Fn&& fn, const TensorDict& other, const ApplyOptions& options = {}) const;
  /// Like `apply`, but `fn(key, leaf)` (or `fn(key, entry)`) also sees the
  /// nested key.
  template <typename Fn>
  [[nodiscard]] TensorDict named_apply(
      Fn&& fn, const ApplyOptions& options = {}) const;
  /// Writes `fn(leaf)` into every tensor in place (results must fit).
  template <typename Fn>
  TensorDict& apply_(Fn&& fn);

  // --- map (src/tensor_dict/map.cpp; include <tensordict/map.h>) -----------

  /// Runs `fn` on the chunks along `options.dim()` on worker threads and
  /// joins the results; see NOTE [Parallel map] in tensordict/map.h.
  template <typename Fn>
  auto map(Fn&& fn, const MapOptions& options) const;
  /// `map` with the default options.
  template <typename Fn>
  auto map(Fn&& fn) const;
  /// Like `map`, but yields the results one chunk at a time.
  template <typename Fn>
  [[nodiscard]] MapIterator map_iter(Fn&& fn, const MapOptions& options) const;
  /// `map_iter` with the default options.
  template <typename Fn>
  [[nodiscard]] MapIterator map_iter(Fn&& fn) const;

  // --- device, dtype, memory (src/tensor_dict/convert.cpp) ------------------
  // Python's dtype casts are named after Python types (`float()`,
  // `double()`, `int()`, `bool()`), which are C++ keywords; here they are
  // named after the dtype they give (`float32()`, `float64()`, `int32()`,
  // `boolean()`). `half()` and `bfloat16()` keep Python's names. Every cast
  // and move returns a new, unlocked dict that is not marked shared.

  /// Returns a copy with every tensor cast to `dtype` (integer and bool
  /// tensors too, as in Python); device, names and non-tensor data are kept.
  [[nodiscard]] TensorDict to(c10::ScalarType dtype) const;
  /// Returns a copy with every tensor moved and cast as `options` says
  /// (device and/or dtype); the dict's device becomes the options' device
  /// when it has one. Throws what `at::Tensor::to` throws.
  [[nodiscard]] TensorDict to(
      const at::TensorOptions& options, bool non_blocking = false) const;
  /// Returns a copy on the CPU (Python's `cpu()`); CPU leaves are aliased.
  [[nodiscard]] TensorDict cpu() const;
  /// Returns a copy on CUDA device `index` (the current one when nullopt),
  /// as Python's `cuda(device=None)`. Throws when CUDA is unavailable (no
  /// CUDA build or no GPU) and IndexError for an index out of range, even
  /// when the dict holds no tensor.
  [[nodiscard]] TensorDict cuda(
      std::optional<c10::DeviceIndex> index = std::nullopt,
      bool non_blocking = false) const;
  /// Returns a copy with every tensor in pinned memory; throws torch's error
  /// when no accelerator is available.
  [[nodiscard]] TensorDict pin_memory() const;
  /// Moves the storage of every CPU tensor into shared memory in place, so
  /// views taken before see the move; marks the dict and its nested dicts
  /// shared and locks them, as Python does. Leaves on other devices are
  /// left alone. Returns `*this`.
  TensorDict& share_memory_();
  /// Returns true if the dict is marked shared: after `share_memory_()`, or
  /// always on a CUDA device (Python's rule; a dict built from shared
  /// tensors is not marked).
  bool is_shared() const noexcept;
  /// Returns a copy whose tensors are detached from the autograd graph
  /// (they alias the same storage).
  [[nodiscard]] TensorDict detach() const;
  /// Detaches every tensor in place; returns `*this`.
  TensorDict& detach_();
  /// Sets `requires_grad` on every tensor; throws torch's error for a
  /// tensor that is not floating point or complex. Returns `*this`.
  TensorDict& requires_grad_(bool requires_grad = true);
  /// Returns a copy with every tensor contiguous (contiguous ones aliased).
  [[nodiscard]] TensorDict contiguous() const;
  /// Returns true if every tensor is contiguous (true for an empty dict).
  bool is_contiguous() const;
  /// Writes zero into every tensor; returns `*this`. Allowed when locked.
  TensorDict& zero_();
  /// Fills the tensor at `key`, or every tensor of the nested dict at `key`,
  /// with `value`; throws KeyError if the key is missing. Returns `*this`.
  TensorDict& fill_(const NestedKey& key, const c10::Scalar& value);
  /// Copies every leaf of `src` into the matching tensor of this dict, in
  /// place (torch's `copy_`: values broadcast, dtypes cast). The keys must
  /// match at every level: throws KeyError listing the keys that differ,
  /// TypeError if kinds differ, and an error if a value does not fit,
  /// before writing anything. Non-tensor values are replaced. Returns
  /// `*this`.
  TensorDict& copy_(const TensorDict& src, bool non_blocking = false);
  /// Returns a copy cast to float32 (Python's `float()`).
  [[nodiscard]] TensorDict float32() const;
  /// Returns a copy cast to float64 (Python's `double()`).
  [[nodiscard]] TensorDict float64() const;
  /// Returns a copy cast to float16 (Python's `half()`).
  [[nodiscard]] TensorDict half() const;
  /// Returns a copy cast to bfloat16 (Python's `bfloat16()`).
  [[nodiscard]] TensorDict bfloat16() const;
  /// Returns a copy cast to int32 (Python's `int()`).
  [[nodiscard]] TensorDict int32() const;
  /// Returns a copy cast to bool (Python's `bool()`).
  [[nodiscard]] TensorDict boolean() const;

  // --- arithmetic and comparison (src/tensor_dict/math.cpp) -----------------
  // Every op works leaf by leaf and returns a new dict (or, for the `_`
  // forms, writes into the leaves and returns `*this`). Non-tensor entries
  // are kept unchanged. Operands:
  // - a TensorDict: leaves matched by key; a key present in one dict only is
  //   a KeyError naming it. Batch sizes broadcast as torch shapes do, and
  //   both dicts are expanded to the common one.
  // - an at::Tensor: it broadcasts against the batch size (not the leaf
  //   shape), as in Python: the result's batch size is the broadcast shape,
  //   and the tensor is lined up with each leaf's leading dims, so `td + t`
  //   with batch [2, 3] and t [3] adds t[j] to every leaf[i][j]. Throws if it
  //   does not broadcast.
  // - a c10::Scalar: combined with every leaf, with torch's type promotion.
  // In-place forms cannot grow the batch size and write leaf by leaf: a
  // dtype error on one leaf (`int += 0.5`) leaves the earlier leaves written.
  // The ops, one entry each in TENSORDICT_DICT_MATH_OPS
  // (tensordict/detail/ops.h):
  // - `add`/`sub` (with `alpha`), `mul`, `div` (true division: integer
  //   leaves give floats, and `div_` takes floating leaves only), `pow`;
  // - the comparisons `lt`, `le`, `gt`, `ge` (a TensorDict or a scalar) and
  //   `logical_and`/`logical_or` (bool leaves);
  // - the unary ops `abs`, `neg`, `exp`, `expm1`, `log`, `log1p`, `sqrt`,
  //   `reciprocal`, `sigmoid`, `tanh`, `sin`, `cos`, `sign`, `floor`,
  //   `ceil`, `round` (halves to even), `trunc`: each returns a new dict of
  //   `torch.<op>(leaf)`, and its `_` form applies the op to every leaf in
  //   place (a floating op on an integer leaf throws there, as in torch);
  // - `clamp_min`/`clamp_max` with one bound.
  TENSORDICT_DICT_MATH_OPS(TENSORDICT_DETAIL_DICT_DECLARE)

  /// Same as `add_(other)`.
  TensorDict& operator+=(const TensorDict& other);
  /// Same as `add_(other)`.
  TensorDict& operator+=(const at::Tensor& other);
  /// Same as `add_(other)`.
  TensorDict& operator+=(const c10::Scalar& other);
  /// Same as `sub_(other)`.
  TensorDict& operator-=(const TensorDict& other);
  /// Same as `sub_(other)`.
  TensorDict& operator-=(const at::Tensor& other);
  /// Same as `sub_(other)`.
  TensorDict& operator-=(const c10::Scalar& other);
  /// Same as `mul_(other)`.
  TensorDict& operator*=(const TensorDict& other);
  /// Same as `mul_(other)`.
  TensorDict& operator*=(const at::Tensor& other);
  /// Same as `mul_(other)`.
  TensorDict& operator*=(const c10::Scalar& other);
  /// Same as `div_(other)`.
  TensorDict& operator/=(const TensorDict& other);
  /// Same as `div_(other)`.
  TensorDict& operator/=(const at::Tensor& other);
  /// Same as `div_(other)`.
  TensorDict& operator/=(const c10::Scalar& other);

  /// Same as `neg()`.
  [[nodiscard]] TensorDict operator-() const;

  /// Returns every leaf clamped to [min, max]; a missing bound is open.
  /// Throws if both are missing, as torch does.
  [[nodiscard]] TensorDict clamp(
      const std::optional<c10::Scalar>& min,
      const std::optional<c10::Scalar>& max = std::nullopt) const;
  /// Clamps every leaf to [min, max] in place; throws like `clamp`.
  TensorDict& clamp_(
      const std::optional<c10::Scalar>& min,
      const std::optional<c10::Scalar>& max = std::nullopt);

  // Ordering comparisons give dicts of bool leaves (non-tensor entries are
  // kept, as in Python). `lt`/`le`/`gt`/`ge` are torch's names: Python's
  // TensorDict only has the operators.

  /// Same as `lt(other)`.
  [[nodiscard]] TensorDict operator<(const TensorDict& other) const;
  /// Same as `lt(other)`.
  [[nodiscard]] TensorDict operator<(const c10::Scalar& other) const;
  /// Same as `le(other)`.
  [[nodiscard]] TensorDict operator<=(const TensorDict& other) const;
  /// Same as `le(other)`.
  [[nodiscard]] TensorDict operator<=(const c10::Scalar& other) const;
  /// Same as `gt(other)`.
  [[nodiscard]] TensorDict operator>(const TensorDict& other) const;
  /// Same as `gt(other)`.
  [[nodiscard]] TensorDict operator>(const c10::Scalar& other) const;
  /// Same as `ge(other)`.
  [[nodiscard]] TensorDict operator>=(const TensorDict& other) const;
  /// Same as `ge(other)`.
  [[nodiscard]] TensorDict operator>=(const c10::Scalar& other) const;

  /// Returns the logical not of every leaf (bool leaves); torch's op, which
  /// Python's TensorDict lacks.
  [[nodiscard]] TensorDict logical_not() const;

  // --- reductions (src/tensor_dict/reduce.cpp) ------------------------------
  // Each returns a new dict of one reduced tensor per leaf; non-tensor data
  // is kept (with the new batch size), and a NonTensorStack is an error, as
  // in Python. With `options.dim()` empty, every element of each leaf is
  // reduced and the result (nested dicts too) has batch size [] (with
  // `keepdim`: all ones, names kept). With dims, those batch dims of every
  // leaf are reduced; batch size and names lose them (or keep them as 1s
  // with `keepdim`), and nested dicts keep their extra batch dims. A dim
  // outside the batch dims is an IndexError; a repeated dim an error.
  // Python's `reduce=True` (one tensor across all leaves) is `reduce(op)`.
  // The ops, one entry each in TENSORDICT_DICT_REDUCE_OPS: `sum`, `mean`
  // (throws on integer leaves, as torch), `std` and `var` (with
  // `options.correction()`), `prod` (several dims are reduced one after the
  // other; Python reduces only the first dim of a tuple), `amax`, `amin`,
  // and `max`/`min`: with options, the values only, like `amax`/`amin`
  // (Python's `return_indices=False`); `max(dim)`/`min(dim)` below give
  // values and indices, as Python's `max(dim=...)`.
  TENSORDICT_DICT_REDUCE_OPS(TENSORDICT_DETAIL_DICT_DECLARE)
  /// Returns the maxima of every tensor leaf along batch dim `dim` and
  /// their indices, as Python's `td.max(dim=dim, keepdim=keepdim)` (a
  /// `torch.return_types.max`): two dicts of the batch size without `dim`
  /// (kept as 1 with `keepdim`), nested dicts alike; non-tensor data is
  /// left out of both, as in Python. Throws IndexError if `dim` is not a
  /// batch dim (Python's message), and torch's error for an empty dim.
  [[nodiscard]] ValuesIndices max(int64_t dim, bool keepdim = false) const;
  /// Returns the minima along batch dim `dim` and their indices, as
  /// Python's `td.min(dim=dim, keepdim=keepdim)`; throws like `max(dim)`.
  [[nodiscard]] ValuesIndices min(int64_t dim, bool keepdim = false) const;

  /// Returns whether all elements along batch dim `dim` are true, as a dict
  /// of bool leaves. Throws an error (Python's RuntimeError) if `dim` is not
  /// a batch dim.
  [[nodiscard]] TensorDict all(int64_t dim) const;
  /// Returns whether any element along batch dim `dim` is true; throws like
  /// `all(dim)`.
  [[nodiscard]] TensorDict any(int64_t dim) const;
  /// Reduces all the tensor leaves together into one tensor (Python's
  /// `reduce=True`). Without dims, the leaves are flattened and concatenated
  /// (torch's type promotion applies) and the result is 0-dim. With dims,
  /// the leaves are concatenated along the first one, so they must have the
  /// same number of dims, then reduced along all of them; dims count from
  /// the batch dims even when negative (Python counts a negative dim from the
  /// end of the leaves, and plans to switch). Throws ValueError when there
  /// is no tensor leaf.
  [[nodiscard]] at::Tensor reduce(
      ReduceOp op, const ReduceOptions& options = {}) const;

  // --- locking --------------------------------------------------------------

  /// Locks the dict and its nested dicts: keys can no longer be added,
  /// removed or renamed; in-place writes still work.
  TensorDict& lock_();
  /// Unlocks the dict and its nested dicts; throws if a locked dict still
  /// holds this one.
  TensorDict& unlock_();
  /// Returns true if the dict is locked.
  bool is_locked() const noexcept;

  // --- memory-mapped storage (src/memmap/) ---------------------------------
  // See NOTE [Memmap layout] in tensordict/memmap.h for the files written,
  // the guarantees and the differences from Python.
  // `memmap`, `memmap_like` and `save` are not [[nodiscard]]: a save for its
  // effect, `td.memmap(prefix);`, is their common use, as in Python. The
  // futures are: dropping one would drop the save's error.

  /// Writes the dict as a memmap directory under `options.prefix()` and
  /// returns a new locked dict on the CPU whose leaves map the files (with
  /// an empty prefix, anonymous shared memory); `*this` is untouched.
  /// Throws on reserved or unsafe keys, symlinks, existing files when
  /// `existsok` is false, and I/O errors, naming the key. A prefix ending in
  /// ".tdz" writes one archive file instead and returns it loaded (leaves
  /// are views into its mapping, the dict is not locked); see NOTE [Memmap
  /// archives] in tensordict/archive.h.
  TensorDict memmap(const MemmapOptions& options = {}) const;
  /// Runs `memmap` on a background thread: Python's `return_early=True`.
  /// The dict must not change until the future is ready.
  [[nodiscard]] std::future<TensorDict> memmap_async(
      const MemmapOptions& options = {}) const;
  /// Writes the dict like `memmap`, then replaces every leaf by its mapped
  /// tensor in place, moves the dict to the CPU and locks it.
  TensorDict& memmap_(const MemmapOptions& options = {});
  /// Writes the layout of `memmap` with zero-filled (sparse) leaf files:
  /// shapes and dtypes only, no data is copied.
  TensorDict memmap_like(const MemmapOptions& options = {}) const;
  /// Same as `memmap` (Python's `save`).
  TensorDict save(const MemmapOptions& options) const;
  /// Same as `memmap` (Python's `dumps`, an alias of `save`).
  TensorDict dumps(const MemmapOptions& options) const;
  /// `memmap_` on another thread: Python's `memmap_(return_early=True)`.
  /// The future holds this dict once it is memmapped; the dict must not be
  /// used until then.
  [[nodiscard]] std::future<TensorDict> memmap_async_(
      const MemmapOptions& options = {});
  /// `memmap_like` on another thread: Python's
  /// `memmap_like(return_early=True)`.
  [[nodiscard]] std::future<TensorDict> memmap_like_async(
      const MemmapOptions& options = {}) const;
  /// `save` on another thread: Python's `save(return_early=True)`.
  [[nodiscard]] std::future<TensorDict> save_async(
      const MemmapOptions& options) const;
  /// Loads a memmap directory written by `memmap` or by Python tensordict
  /// (format versions 0 and 1): leaves map their files (no copy); the
  /// result is not locked and `is_memmap()` is false, as in Python. A
  /// Python tensorclass loads as a dict that remembers its class
  /// (`python_class()`). Throws with the nested key and what was expected
  /// on any inconsistency; see NOTE [Memmap layout]. A regular file is read
  /// as a `.tdz` archive: mapped once, each leaf a view into the mapping.
  /// A directory whose root is a lazy stack is an error naming it, as a
  /// TensorDict cannot hold it: Python's `TensorDict.load_memmap` returns
  /// the stack, and so does the free `tensordict::load_memmap`
  /// (tensordict/memmap.h), whose result is a variant of both.
  [[nodiscard]] static TensorDict load_memmap(
      const std::string& prefix, const LoadMemmapOptions& options = {});
  /// Same as `load_memmap` (Python's `load`).
  [[nodiscard]] static TensorDict load(
      const std::string& prefix, const LoadMemmapOptions& options = {});
  /// Loads a memmap directory (or archive) into `out` and returns it, as
  /// Python's `load_memmap(prefix, out=out)`: `out`'s nested dicts are kept
  /// and loaded into, its other entries are replaced by the loaded ones (no
  /// storage is reused: to write into `out`'s tensors, use
  /// `out.update_(load_memmap(prefix))`), entries the tree lacks are
  /// removed, and new ones added. `out` keeps its batch size and dim names;
  /// a lazy stack saved where `out` has a dict replaces it. The leaves load
  /// on `out`'s device; another `options.device()` is a ValueError. Unlike
  /// Python, which writes as it reads, everything is loaded and checked
  /// first, so that on any error `out` is unchanged: a locked `out` (or
  /// nested dict it keeps), a batch size that differs from the saved one,
  /// a lazy stack whose element count differs from the dict it replaces
  /// (Python's ValueError), or a lazy stack at the root (Python returns a
  /// new stack instead of `out`; use the free `load_memmap`). A lazy stack
  /// `out` holds along the saved stack dim is loaded into element by element,
  /// as Python's: its element dicts are kept; along another dim it is replaced.
  static TensorDict load_memmap(
      const std::string& prefix,
      TensorDict& out,
      const LoadMemmapOptions& options = {});
  /// Loads a memmap directory into this dict, as Python's `load_memmap_`
  /// (`load_memmap(prefix, *this)`: keys the tree lacks are removed). The
  /// lock is lifted meanwhile and restored, and a memmapped dict stays
  /// memmapped (Python refuses a locked dict that is not memmapped).
  TensorDict& load_memmap_(
      const std::string& prefix, const LoadMemmapOptions& options = {});
  /// Same as `load_memmap_` (Python's `load_`).
  TensorDict& load_(
      const std::string& prefix, const LoadMemmapOptions& options = {});
  /// Re-reads the dict's own directory, picking up leaves that another
  /// process added with `make_memmap`. Throws unless `is_memmap()` and the
  /// dict was saved to a directory.
  TensorDict& memmap_refresh_();
  /// Returns true if the dict came from `memmap`/`memmap_` and has not been
  /// unlocked since.
  bool is_memmap() const noexcept;
  /// Returns the directory the dict was saved to or loaded from, if any.
  std::optional<std::string> saved_path() const;
  /// Adds a zero-filled leaf backed by a new file to a memmapped dict (the
  /// lock notwithstanding), creating missing nested dicts, and records it in
  /// meta.json. Throws if the dict is not memmapped to a directory or the
  /// key exists.
  at::Tensor make_memmap(
      const NestedKey& key,
      c10::IntArrayRef shape,
      c10::ScalarType dtype = c10::kFloat);
  /// Returns the `_type` string of the Python tensorclass this dict was
  /// loaded from ("<class 'module.Name'>"), or "" for a plain dict; a save
  /// writes the tensorclass layout when it is set.
  const std::string& python_class() const noexcept;
  /// Sets the Python tensorclass the dict is saved as ("" for none).
  TensorDict& set_python_class(std::string type_string);

  // --- consolidate, state_dict, nn::Module ---------------------------------
  // Include <tensordict/consolidate.h>, <tensordict/state_dict.h> or
  // <tensordict/module.h> for the types these use; see NOTE [Consolidated
  // layout] in tensordict/consolidate.h.

  /// Copies every leaf into one contiguous uint8 storage (each leaf padded
  /// to 8 bytes, as Python does) and returns a locked dict of views of it;
  /// with `options.filename()`, the storage maps that file, which is then
  /// laid out for `from_consolidated`. Returns `*this` if it is already
  /// consolidated and the options ask for no file, no other device and no
  /// shared or pinned memory (Python ignores them, with a warning). Throws on
  /// a nested key Python's layout cannot hold and on I/O errors, naming the
  /// key or the file. A CPU storage of 8 MiB or more is its own anonymous
  /// mapping, advised for transparent huge pages (filling it faults once per
  /// 2 MiB, not per 4 KiB: about 4x faster for fresh buffers), and cannot be
  /// resized. [[nodiscard]] unlike `memmap`: without a filename the result
  /// is the whole point; a file is written with `(void)td.consolidate(...)`.
  [[nodiscard]] TensorDict consolidate(
      const ConsolidateOptions& options = {}) const;
  /// Returns true if every tensor leaf is still a view into the storage of
  /// `consolidate` (or `from_consolidated`).
  bool is_consolidated() const;
  /// Returns the uint8 storage a consolidated dict's leaves view (the data
  /// region only, without the metadata); undefined if not consolidated.
  at::Tensor consolidated_storage() const;
  /// Maps a file written by `consolidate(filename)` here or by Python's
  /// `consolidate(filename=...)` copy-on-write and returns a consolidated
  /// dict of views of it. Every offset, size, dtype and shape is checked
  /// against the file; errors name the key and what was expected.
  [[nodiscard]] static TensorDict from_consolidated(
      const std::string& filename, const LoadConsolidatedOptions& options = {});

  /// Returns the leaves as Python's `state_dict` does: with `flatten`, one
  /// entry per leaf under its "."-joined key; otherwise nested. Batch size
  /// and device of every level go in `StateDict::metadata()`. Tensors are
  /// detached aliases (no copy). Throws KeyError if two flat keys collide.
  [[nodiscard]] StateDict state_dict(bool flatten = true) const;
  /// Returns the state dict with Python's keyword arguments (`prefix`,
  /// `keep_vars`, `flatten`) as options, the C++ form of
  /// `td.state_dict(prefix="p.", keep_vars=True)`. Throws as above.
  [[nodiscard]] StateDict state_dict(const StateDictOptions& options) const;
  /// Writes the entries and metadata of `state_dict(options)` into
  /// `destination` and returns it: Python's `state_dict(destination=...)`,
  /// to gather several dicts under their prefixes. An entry or level
  /// metadata already there under the same key is replaced, as in Python.
  StateDict& state_dict(
      StateDict& destination, const StateDictOptions& options = {}) const;
  /// Loads a state dict in the flat, nested or legacy (`__batch_size`,
  /// `__device`) form, detected as Python does. With `strict`, the key sets
  /// must match (the error lists the missing and unexpected keys); with
  /// `assign`, tensors replace the leaves instead of being copied into them.
  TensorDict& load_state_dict(
      const StateDict& state_dict, bool strict = true, bool assign = false);
  /// Loads a state dict with Python's keyword arguments as options:
  /// `from_flatten(true)` reads "."-joined keys as nested ones even without
  /// metadata (a module's named parameters), `from_flatten(false)` reads
  /// the state dict as nested. Throws as above.
  TensorDict& load_state_dict(
      const StateDict& state_dict, const LoadStateDictOptions& options);

  /// Returns a dict of the module's parameters and buffers keyed by their
  /// names, with one nested dict per child module that holds any (`"0"`,
  /// `"1"` for Sequential children); the leaves alias the module's tensors
  /// (detached aliases with `use_state_dict`). A TensorDictParams child
  /// gives its own dict. Python's `as_module=True` is
  /// `TensorDictParams::from_module` (tensordict/tensor_dict_params.h).
  [[nodiscard]] static TensorDict from_module(
      const torch::nn::Module& module, const FromModuleOptions& options = {});
  /// Writes the dict into `module`'s parameters and buffers, in place or
  /// (by default) making them alias the dict's tensors, and returns the
  /// module's previous tensors as a dict (copies of their values with
  /// `inplace`), which `to_module` writes back; an empty dict without
  /// `return_swap`. Throws if the structure does not match the module's,
  /// naming the key; the module is then untouched.
  TensorDict to_module(
      torch::nn::Module& module, const ToModuleOptions& options = {}) const;

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
  /// Returns Python's repr in the form the print options select: compact
  /// by default (see `repr_compact`), detailed with
  /// `PrintOptions().compact(false)`.
  std::string repr() const;
  /// Returns Python's compact repr, whatever `compact` says in the print
  /// options (which it otherwise follows):
  /// `TensorDict(batch_size=[3], fields={a: i64[2], b: {c: bool[]}, s: str})`,
  /// wrapped one entry per line where a level does not fit in 80 columns.
  std::string repr_compact() const;
  /// Returns Python's detailed repr (`set_printoptions(compact=False)`),
  /// whatever `compact` says in the print options: one
  /// `Tensor(shape=..., device=..., dtype=..., is_shared=...)` line per
  /// tensor and nested dicts in full.
  std::string repr_detailed() const;

  /// Returns the implementation; not API.
  detail::TensorDictImpl* unsafeGetImpl() const noexcept {
    return impl_.get();
  }
  /// Wraps an implementation; not API.
  explicit TensorDict(c10::intrusive_ptr<detail::TensorDictImpl> impl);

 private:
  // What the text overload of set_non_tensor calls, out of line so that the
  // caller needs no complete Json.
  TensorDict& set_non_tensor_text(const NestedKey& key, detail::TextArg text);

  c10::intrusive_ptr<detail::TensorDictImpl> impl_;
};

/// What `TensorDict::max(dim)` and `min(dim)` return: Python's
/// `torch.return_types.max`, with `values` and `indices` by name or, through
/// a structured binding, in that order: `auto [values, indices] =
/// td.max(0);`.
struct ValuesIndices {
  /// The reduced values, one leaf per tensor leaf.
  TensorDict values;
  /// The int64 indices of the values along the reduced dim.
  TensorDict indices;
};

// --- arithmetic operators (src/tensor_dict/math.cpp) ---
// Each is the method of the same meaning (`a + b` is `a.add(b)`); a scalar or
// tensor on the left combines with every leaf from the left, so `1 - td` is
// `1 - leaf` and `2 / td` is `2 / leaf`.

/// Returns `a.add(b)`.
[[nodiscard]] TENSORDICT_API TensorDict
operator+(const TensorDict& a, const TensorDict& b);
/// Returns `a.add(b)`.
[[nodiscard]] TENSORDICT_API TensorDict
operator+(const TensorDict& a, const at::Tensor& b);
/// Returns `a.add(b)`.
[[nodiscard]] TENSORDICT_API TensorDict
operator+(const TensorDict& a, const c10::Scalar& b);
/// Returns `a + leaf` for every leaf of `b`.
[[nodiscard]] TENSORDICT_API TensorDict
operator+(const at::Tensor& a, const TensorDict& b);
/// Returns `a + leaf` for every leaf of `b`.
[[nodiscard]] TENSORDICT_API TensorDict
operator+(const c10::Scalar& a, const TensorDict& b);
/// Returns `a.sub(b)`.
[[nodiscard]] TENSORDICT_API TensorDict
operator-(const TensorDict& a, const TensorDict& b);
/// Returns `a.sub(b)`.
[[nodiscard]] TENSORDICT_API TensorDict
operator-(const TensorDict& a, const at::Tensor& b);
/// Returns `a.sub(b)`.
[[nodiscard]] TENSORDICT_API TensorDict
operator-(const TensorDict& a, const c10::Scalar& b);
/// Returns `a - leaf` for every leaf of `b`.
[[nodiscard]] TENSORDICT_API TensorDict
operator-(const at::Tensor& a, const TensorDict& b);
/// Returns `a - leaf` for every leaf of `b`.
[[nodiscard]] TENSORDICT_API TensorDict
operator-(const c10::Scalar& a, const TensorDict& b);
/// Returns `a.mul(b)`.
[[nodiscard]] TENSORDICT_API TensorDict
operator*(const TensorDict& a, const TensorDict& b);
/// Returns `a.mul(b)`.
[[nodiscard]] TENSORDICT_API TensorDict
operator*(const TensorDict& a, const at::Tensor& b);
/// Returns `a.mul(b)`.
[[nodiscard]] TENSORDICT_API TensorDict
operator*(const TensorDict& a, const c10::Scalar& b);
/// Returns `a * leaf` for every leaf of `b`.
[[nodiscard]] TENSORDICT_API TensorDict
operator*(const at::Tensor& a, const TensorDict& b);
/// Returns `a * leaf` for every leaf of `b`.
[[nodiscard]] TENSORDICT_API TensorDict
operator*(const c10::Scalar& a, const TensorDict& b);
/// Returns `a.div(b)`.
[[nodiscard]] TENSORDICT_API TensorDict
operator/(const TensorDict& a, const TensorDict& b);
/// Returns `a.div(b)`.
[[nodiscard]] TENSORDICT_API TensorDict
operator/(const TensorDict& a, const at::Tensor& b);
/// Returns `a.div(b)`.
[[nodiscard]] TENSORDICT_API TensorDict
operator/(const TensorDict& a, const c10::Scalar& b);
/// Returns `a / leaf` for every leaf of `b`.
[[nodiscard]] TENSORDICT_API TensorDict
operator/(const at::Tensor& a, const TensorDict& b);
/// Returns `a / leaf` for every leaf of `b`.
[[nodiscard]] TENSORDICT_API TensorDict
operator/(const c10::Scalar& a, const TensorDict& b);

// --- combining (src/tensor_dict/stack.cpp) -----------------------------------

/// Stacks dicts along a new batch dim `dim` (in [-ndim-1, ndim]), as
/// `torch.stack` does on Python TensorDicts: one `at::stack` per leaf.
/// All batch sizes must be equal and the keys must match at every level;
/// nested dicts with longer batch sizes get the new dim at the same place.
/// Names are kept (the new dim unnamed) when all dicts share them; the
/// device is kept when all dicts share it. Non-tensor entries become a
/// NonTensorStack (even of equal values, as in Python). Throws an error
/// on an empty list or unequal batch sizes, KeyError listing the keys on
/// a key mismatch, TypeError when an entry's kind differs, IndexError when
/// `dim` is out of range.
[[nodiscard]] TENSORDICT_API TensorDict
stack(const std::vector<TensorDict>& tds, int64_t dim = 0);

/// Concatenates dicts along batch dim `dim`, as `torch.cat` does on Python
/// TensorDicts: one `at::cat` per leaf. Batch sizes must be equal except
/// along `dim` and the keys must match at every level. Names are the first
/// dict's (Python's rule); the device is kept when all dicts share it.
/// Equal NonTensorData values stay one NonTensorData; otherwise non-tensor
/// entries become a NonTensorStack. Throws like `stack`; ValueError on an
/// empty list.
[[nodiscard]] TENSORDICT_API TensorDict
cat(const std::vector<TensorDict>& tds, int64_t dim = 0);

/// Returns true if `a` and `b` have the same keys (with the same kinds),
/// batch sizes, and equal values (`torch.equal` per tensor).
TENSORDICT_API bool equal(const TensorDict& a, const TensorDict& b);

/// Returns true if `a` and `b` match as `equal` asks, except that tensors
/// are compared with `at::allclose(rtol, atol, equal_nan)` (torch's
/// defaults); tensors must still share dtype, shape and device.
TENSORDICT_API bool allclose(
    const TensorDict& a,
    const TensorDict& b,
    double rtol = 1e-5,
    double atol = 1e-8,
    bool equal_nan = false);

/// Python's `assert_allclose_td(actual, expected, rtol, atol, equal_nan)`
/// (alias `assert_close`): throws KeyError when the key sets differ, and
/// c10::Error "key ('x',) does not match, got mse = 0.0100" naming the
/// first tensor (in sorted key order) that is not close, or whose dtype or
/// shape differs. A nullopt tolerance is `torch.testing.assert_close`'s
/// default for the dtype. Non-tensor entries are not compared (as in
/// Python). Returns true.
TENSORDICT_API bool assert_allclose_td(
    const TensorDict& actual,
    const TensorDict& expected,
    std::optional<double> rtol = std::nullopt,
    std::optional<double> atol = std::nullopt,
    bool equal_nan = true);

/// Writes `td.repr()`.
TENSORDICT_API std::ostream& operator<<(
    std::ostream& out, const TensorDict& td);

TENSORDICT_END_NAMESPACE

// Value (an entry) and Item (a literal's entry) hold a TensorDict or a
// LazyStackedTensorDict, so they are defined after both; value.h includes
// this header for users who include value.h alone. Including any of the
// three headers gives every class.
#include "tensordict/lazy_stack.h"
#include "tensordict/value.h"
// The bodies of TensorDict's inline and template members.
#include "tensordict/detail/tensor_dict_inl.h"
