#pragma once

/// @file
/// NonTensorData and NonTensorStack: JSON values held by a TensorDict,
/// one for the whole batch or one per element.

#include <c10/core/Device.h>
#include <c10/util/ArrayRef.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tensordict/fwd.h"
#include "tensordict/options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// A string or null handed to a non-tensor setter by code that has no JSON
/// header: the text's bytes, or no data for null.
struct TextArg {
  TextArg(std::nullptr_t /*null*/) noexcept {}
  TextArg(const char* text) noexcept
      : data(text), size(text == nullptr ? 0 : std::strlen(text)) {}
  TextArg(const std::string& text) noexcept
      : data(text.data()), size(text.size()) {}

  const char* data = nullptr;  // null = JSON null
  size_t size = 0;
};

/// True for what a TextArg takes: string literals, `const char*`,
/// `std::string` and `nullptr`. Overloads taking text are templates on it so
/// that a literal `0` stays a number: as a plain `const char*` overload it
/// would be a null pointer, a better match than `Json`.
template <typename T>
inline constexpr bool is_text_v =
    std::is_same_v<std::decay_t<T>, const char*> ||
    std::is_same_v<std::decay_t<T>, char*> ||
    std::is_same_v<std::decay_t<T>, std::string> || std::is_null_pointer_v<T>;

}  // namespace detail

/// One JSON-like value shared by every element of a batch: Python's
/// `NonTensorData`. Strings, numbers, lists and objects live beside tensors
/// this way, and the memmap format stores them as JSON.
///
/// A value type: copies are independent (unlike TensorDict, a handle). The
/// value itself is shared between copies and never modified in place, so a
/// copy costs one reference count, and this header needs only
/// `<nlohmann/json_fwd.hpp>`: include `<tensordict/json.h>` to build a value
/// from JSON or to read `data()`.
///
/// Example:
/// ```
///   NonTensorData label("cat", /*batch_size=*/{4});
///   label.data();   // "cat"
/// ```
class TENSORDICT_API NonTensorData {
 public:
  /// Makes a null value (Python's None) with no batch dims.
  NonTensorData();
  /// Makes a value with the given batch size (default: no batch dims) and
  /// dim names (Python's `names`; empty: none). Throws ValueError unless
  /// `names` is empty or has one name per batch dim, none twice, as
  /// TensorDict checks them (Python's NonTensorData keeps any list
  /// unchecked).
  NonTensorData(
      Json data,
      c10::IntArrayRef batch_size = {},
      std::optional<c10::Device> device = std::nullopt,
      DimNames names = {});
  /// Makes a string value from a literal, `const char*` or `std::string`, or
  /// null from `nullptr` or a null `const char*`; needs no JSON header.
  template <typename Text, std::enable_if_t<detail::is_text_v<Text>, int> = 0>
  NonTensorData(
      const Text& text,
      c10::IntArrayRef batch_size = {},
      std::optional<c10::Device> device = std::nullopt,
      DimNames names = {})
      : NonTensorData(
            detail::TextArg(text), batch_size, device, std::move(names)) {}
  /// Makes a string (or null) value; what the template above calls.
  NonTensorData(
      detail::TextArg text,
      c10::IntArrayRef batch_size,
      std::optional<c10::Device> device,
      DimNames names = {});

  /// Copies (sharing the value).
  NonTensorData(const NonTensorData& other) = default;
  /// Copies (sharing the value).
  NonTensorData& operator=(const NonTensorData& other) = default;
  /// Moves; the moved-from object still holds the value, so it stays valid.
  NonTensorData(NonTensorData&& other) noexcept;
  /// Moves; the moved-from object still holds the value, so it stays valid.
  NonTensorData& operator=(NonTensorData&& other) noexcept;
  /// Destroys.
  ~NonTensorData() = default;

  /// Returns the value (never modified in place: copies share it).
  const Json& data() const noexcept {
    return *data_;
  }
  /// Returns the batch size.
  c10::IntArrayRef batch_size() const noexcept {
    return batch_size_;
  }
  /// Returns the device, if one was given.
  std::optional<c10::Device> device() const noexcept {
    return device_;
  }
  /// Replaces the batch size; the value is the same for every element. Dim
  /// names follow the dims they name, as Python's: the names of dropped
  /// trailing dims go, new trailing dims have none.
  void set_batch_size(c10::IntArrayRef batch_size);
  /// Replaces the device.
  void set_device(std::optional<c10::Device> device) noexcept {
    device_ = device;
  }
  /// Returns Python's repr:
  /// `NonTensorData(data=..., batch_size=torch.Size([...]), device=None)`.
  std::string repr() const;

  /// Returns the dim names given to the constructor (Python's `names`), or
  /// one null name per batch dim. A saved directory holds no names, as
  /// Python's: a loaded value has none.
  DimNames names() const;
  /// Returns the value repeated over the batch dims as nested lists, or the
  /// value itself with no batch dims (Python's `tolist()`).
  Json tolist() const;
  /// Returns a NonTensorStack holding the value once per batch element, or,
  /// with no batch dims, this NonTensorData itself, as Python's
  /// `maybe_to_stack()` (include <tensordict/value.h> to use the result).
  /// The stack has no dim names, as Python's.
  Value maybe_to_stack() const;
  /// Returns the slices along batch dim `dim`, each holding the same value
  /// (Python's `unbind`), with the names of the other dims, as Python's;
  /// throws IndexError when `dim` is out of range.
  std::vector<NonTensorData> unbind(int64_t dim = 0) const;
  /// Returns the value for key "data", as Python's `get("data")`; throws
  /// KeyError for any other key (Python returns None).
  Json get(std::string_view key) const;
  /// Returns the value for key "data", else `default_value`, as Python's
  /// `get(key, default)`.
  Json get(std::string_view key, Json default_value) const;
  /// Replaces the value for key "data", as Python's `set("data", value)`;
  /// throws KeyError for any other key (NonTensorData has no other field).
  NonTensorData& set(std::string_view key, Json value);
  /// Same, with Python's `inplace` and `non_blocking`: the value is
  /// replaced either way (a value is never modified in place, and copies
  /// keep theirs) and never moves between devices. Unlike Python, whose
  /// memmapped NonTensorData is locked and refuses `set`, a value saved to a
  /// directory is replaced in memory only: `memmap_refresh_` reads the
  /// saved one back.
  NonTensorData& set(
      std::string_view key, Json value, const SetOptions& options);
  /// Makes a NonTensorData of `td`'s batch size and device holding
  /// `non_tensordict["data"]`, as Python's tensorclass
  /// `from_tensordict(td, non_tensordict={"data": ...})`; throws KeyError
  /// without "data" and ValueError if `td` holds any entry.
  static NonTensorData from_tensordict(
      const TensorDict& td, const Json& non_tensordict);
  /// Returns a state dict with no entries whose metadata carries the value,
  /// as Python's: `metadata()[""]` holds the batch size, the device, the
  /// type "NonTensorData" and `non_tensor_fields` `{"data": value,
  /// "_metadata": null, "_is_non_tensor": true}` (Python's `_non_tensor`).
  StateDict state_dict() const;
  /// Restores what the metadata of the root (`metadata()[""]`) holds, as
  /// Python's: its batch size and device, and the value when it carries
  /// one (`state_dict()`'s); a state dict without metadata changes nothing.
  /// With `strict`, an entry is a KeyError (Python's "Key 'x' wasn't
  /// expected in the state-dict."); without, entries are ignored.
  NonTensorData& load_state_dict(
      const StateDict& state_dict, bool strict = true);

  // --- memmap -------------------------------------------------------------
  // A directory whose root is non-tensor data holds only its meta.json, as
  // Python writes it. Without a prefix there is nothing to write and the
  // value is returned as is. Include <tensordict/memmap.h>.

  /// Writes the value's directory at `options.prefix()` and returns a copy.
  NonTensorData memmap(const MemmapOptions& options = {}) const;
  /// Writes the value's directory; the value stays as it is.
  NonTensorData& memmap_(const MemmapOptions& options = {});
  /// Same as `memmap`: there are no leaves to size.
  NonTensorData memmap_like(const MemmapOptions& options = {}) const;
  /// Same as `memmap` (Python's `save`).
  NonTensorData save(const MemmapOptions& options) const;
  /// Same as `memmap` (Python's `dumps`, an alias of `save`).
  NonTensorData dumps(const MemmapOptions& options) const;
  /// Runs `memmap` on another thread: Python's `memmap(...,
  /// return_early=True)`. The future throws what `memmap` throws.
  [[nodiscard]] std::future<NonTensorData> memmap_async(
      const MemmapOptions& options = {}) const;
  /// `memmap_` on another thread: Python's `memmap_(...,
  /// return_early=True)`. The future holds this value once it is saved;
  /// the value must not be used until then.
  [[nodiscard]] std::future<NonTensorData> memmap_async_(
      const MemmapOptions& options = {});
  /// `memmap_like` on another thread: Python's `memmap_like(...,
  /// return_early=True)`.
  [[nodiscard]] std::future<NonTensorData> memmap_like_async(
      const MemmapOptions& options = {}) const;
  /// `save` on another thread: Python's `save(..., return_early=True)`.
  [[nodiscard]] std::future<NonTensorData> save_async(
      const MemmapOptions& options) const;
  /// Loads a directory whose root is a NonTensorData (written by `memmap`
  /// or by Python); throws naming the directory if it holds anything else.
  /// The directory holds no batch size (nor does Python's): the result has
  /// none.
  static NonTensorData load_memmap(
      const std::string& prefix, const LoadMemmapOptions& options = {});
  /// Python's `load_memmap(prefix, out=out)`: replaces `out`'s value by the
  /// saved one and returns `out`, whose batch size, device and names stay
  /// (the directory holds none). Throws as `load_memmap`, leaving `out` as
  /// it was.
  static NonTensorData& load_memmap(
      const std::string& prefix,
      NonTensorData& out,
      const LoadMemmapOptions& options = {});
  /// Same as `load_memmap` (Python's `load`).
  static NonTensorData load(
      const std::string& prefix, const LoadMemmapOptions& options = {});
  /// Replaces the value by the one saved at `prefix`, keeping the batch
  /// size, device and names (`load_memmap(prefix, *this)`, as Python's).
  NonTensorData& load_memmap_(
      const std::string& prefix, const LoadMemmapOptions& options = {});
  /// Same as `load_memmap_` (Python's `load_`).
  NonTensorData& load_(
      const std::string& prefix, const LoadMemmapOptions& options = {});
  /// Re-reads the value from the directory it was saved to or loaded from
  /// (by `memmap`, `memmap_` or `load_memmap`); throws, as Python, when
  /// there is none.
  NonTensorData& memmap_refresh_();

  /// Compares data, batch size and device.
  bool operator==(const NonTensorData& other) const;
  /// Compares data, batch size and device.
  bool operator!=(const NonTensorData& other) const {
    return !(*this == other);
  }

 private:
  // Never null; shared by copies, so copying needs no complete Json.
  std::shared_ptr<const Json> data_;
  std::vector<int64_t> batch_size_;
  std::optional<c10::Device> device_;
  // One per batch dim, or empty for none.
  DimNames names_;
  // The directory of the last memmap or load; null when none.
  std::shared_ptr<const std::string> saved_path_;
};

/// One JSON-like value per batch element: Python's `NonTensorStack`.
///
/// Values are kept flat in row-major order over the batch dims, so a stack of
/// batch size [2, 3] holds six values; `tolist()` gives them back as nested
/// lists, as Python's `NonTensorStack.tolist()` does. A value type whose
/// values are shared between copies and replaced, never modified in place,
/// when the batch size grows: copies are cheap and need no complete Json.
///
/// Example:
/// ```
///   NonTensorStack words({"a", "b", "c"});        // batch size [3]
///   words.tolist();                              // ["a", "b", "c"]
///   NonTensorStack::from_list({{1, 2}, {3, 4}}, 2);  // batch size [2, 2]
/// ```
class TENSORDICT_API NonTensorStack {
 public:
  /// Makes an empty stack of batch size [0].
  NonTensorStack();
  /// Makes a one-dim stack of the given values.
  NonTensorStack(
      std::vector<Json> values,
      std::optional<c10::Device> device = std::nullopt);
  /// Makes a stack from flat row-major values and its batch size; throws
  /// ValueError unless `values.size()` is the batch size's element count.
  NonTensorStack(
      std::vector<Json> values,
      c10::IntArrayRef batch_size,
      std::optional<c10::Device> device = std::nullopt);
  /// Builds a stack from nested lists that are `batch_dims` deep; throws
  /// ValueError if the lists are ragged or too shallow.
  static NonTensorStack from_list(
      const Json& nested,
      int64_t batch_dims = 1,
      std::optional<c10::Device> device = std::nullopt);

  /// Copies (sharing the value).
  NonTensorStack(const NonTensorStack& other) = default;
  /// Copies (sharing the value).
  NonTensorStack& operator=(const NonTensorStack& other) = default;
  /// Moves; the moved-from object still holds the value, so it stays valid.
  NonTensorStack(NonTensorStack&& other) noexcept;
  /// Moves; the moved-from object still holds the value, so it stays valid.
  NonTensorStack& operator=(NonTensorStack&& other) noexcept;
  /// Destroys.
  ~NonTensorStack() = default;

  /// Returns the flat, row-major values.
  const std::vector<Json>& values() const noexcept {
    return *values_;
  }
  /// Returns the value of one element by flat row-major position (checked).
  const Json& at(int64_t flat_index) const;
  /// Returns the values as nested lists following the batch dims.
  Json tolist() const;
  /// Returns the batch size.
  c10::IntArrayRef batch_size() const noexcept {
    return batch_size_;
  }
  /// Returns the device, if one was given.
  std::optional<c10::Device> device() const noexcept {
    return device_;
  }
  /// Replaces the device.
  void set_device(std::optional<c10::Device> device) noexcept {
    device_ = device;
  }
  /// Grows the batch size by repeating values along new trailing dims, or
  /// keeps it; throws unless `batch_size` starts with the current one or the
  /// current one starts with it (then nothing changes).
  void set_batch_size(c10::IntArrayRef batch_size);
  /// Returns Python's repr:
  /// `NonTensorStack(\n    [...],\n    batch_size=...,\n    device=None)`.
  std::string repr() const;

  /// Returns one null name per batch dim (Python's `names`).
  DimNames names() const;
  /// Returns the stack itself (Python's `maybe_to_stack()` keeps a stack).
  NonTensorStack maybe_to_stack() const {
    return *this;
  }
  /// Returns the slices along batch dim `dim` (Python's `unbind`): a
  /// NonTensorData per element of a one-dim stack, else NonTensorStacks.
  /// Include <tensordict/value.h> to use the result.
  std::vector<Value> unbind(int64_t dim = 0) const;
  /// Returns an empty state dict, as Python's.
  StateDict state_dict() const;
  /// Accepts an empty state dict, as Python's; throws for a non-empty one.
  NonTensorStack& load_state_dict(const StateDict& state_dict);

  // --- memmap (see NonTensorData) -------------------------------------------

  /// Writes the stack's directory at `options.prefix()` and returns a copy.
  NonTensorStack memmap(const MemmapOptions& options = {}) const;
  /// Writes the stack's directory; the stack stays as it is.
  NonTensorStack& memmap_(const MemmapOptions& options = {});
  /// Same as `memmap`: there are no leaves to size.
  NonTensorStack memmap_like(const MemmapOptions& options = {}) const;
  /// Same as `memmap` (Python's `save`).
  NonTensorStack save(const MemmapOptions& options) const;
  /// Same as `memmap` (Python's `dumps`).
  NonTensorStack dumps(const MemmapOptions& options) const;
  /// Loads a directory whose root is a NonTensorStack; throws naming the
  /// directory if it holds anything else.
  static NonTensorStack load_memmap(
      const std::string& prefix, const LoadMemmapOptions& options = {});
  /// Same as `load_memmap` (Python's `load`).
  static NonTensorStack load(
      const std::string& prefix, const LoadMemmapOptions& options = {});
  /// Replaces the stack by the one saved at `prefix`.
  NonTensorStack& load_memmap_(
      const std::string& prefix, const LoadMemmapOptions& options = {});
  /// Same as `load_memmap_` (Python's `load_`).
  NonTensorStack& load_(
      const std::string& prefix, const LoadMemmapOptions& options = {});
  /// Re-reads the stack from the directory it was saved to or loaded from;
  /// throws, as Python, when there is none.
  NonTensorStack& memmap_refresh_();

  /// Compares values, batch size and device.
  bool operator==(const NonTensorStack& other) const;
  /// Compares values, batch size and device.
  bool operator!=(const NonTensorStack& other) const {
    return !(*this == other);
  }

 private:
  // Never null; shared by copies, so copying needs no complete Json.
  std::shared_ptr<const std::vector<Json>> values_;
  std::vector<int64_t> batch_size_;
  std::optional<c10::Device> device_;
  // The directory of the last memmap or load; null when none.
  std::shared_ptr<const std::string> saved_path_;
};

/// Formats a JSON value as Python's `str()` of the same object would
/// (`None`, `True`, `'text'` inside containers, bare text at top level).
TENSORDICT_API std::string python_str(const Json& value);

TENSORDICT_END_NAMESPACE
