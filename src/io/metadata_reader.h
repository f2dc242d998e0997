#pragma once

// One reader for untrusted JSON metadata: the meta.json files of a memmap
// directory and the metadata of a consolidated file or buffer. Every accessor
// checks the type and bounds of what it reads before anything is allocated,
// and every refusal starts with one prefix naming the file and the nested
// key: "invalid metadata in <file> at <key>: <what is wrong>".

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/key_path.h"
#include "tensordict/fwd.h"
#include "tensordict/options.h"

/// Throws, through `reader`'s prefix, unless `cond` holds. The message
/// arguments are only evaluated when the check fails (they may dump JSON).
#define TENSORDICT_CHECK_METADATA(reader, cond, ...) \
  do {                                               \
    if (C10_UNLIKELY(!(cond))) {                     \
      (reader).fail(__VA_ARGS__);                    \
    }                                                \
  } while (false)

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Reads members of untrusted JSON metadata at one nested key of one file.
/// A reader is cheap to copy: it keeps views of the file's name and of the
/// key's parts (a KeyPath), which the caller keeps alive.
///
/// Example:
/// ```
///   MetadataReader reader(path, KeyPath());
///   const std::vector<int64_t> batch =
///       reader.shape(reader.member(meta, "shape"), "shape");
///   const MetadataReader leaf = reader.child("obs");
/// ```
class MetadataReader {
 public:
  /// The most batch or leaf dims accepted (torch's own limit on tensor
  /// dims): a bound for hostile shapes before anything is allocated.
  static constexpr size_t kMaxDims = 64;

  /// Reads metadata of `file` (a path, or a phrase such as "the byte
  /// buffer") at `path` (empty: the root); both must outlive the reader.
  MetadataReader(std::string_view file, KeyPath path)
      : file_(file), path_(std::move(path)) {}

  /// Returns a reader at the entry `name` below this one, in the same file;
  /// `name` must outlive it.
  [[nodiscard]] MetadataReader child(std::string_view name) const {
    MetadataReader out = *this;
    out.path_.push(name);
    return out;
  }

  /// The file, as given.
  [[nodiscard]] std::string_view file() const {
    return file_;
  }
  /// The nested key; empty at the root.
  [[nodiscard]] const KeyPath& path() const {
    return path_;
  }
  /// The start of every refusal: "invalid metadata in <file> at <key>: ".
  [[nodiscard]] std::string prefix() const;

  /// Throws c10::Error: the prefix, then `args`.
  template <typename... Args>
  [[noreturn]] void fail(const Args&... args) const {
    fail_with(c10::str(args...));
  }

  /// Returns the member `name` of `object`; throws if it is missing.
  /// `object` must be a JSON object.
  [[nodiscard]] const Json& member(const Json& object, const char* name) const;
  /// Throws unless `value` is a JSON object; `what` names it.
  void expect_object(const Json& value, const char* what) const;
  /// Returns `value` as a string; throws if it is not one.
  [[nodiscard]] const std::string& string(
      const Json& value, const char* what) const;
  /// Returns `value` as a bool; throws if it is not one.
  [[nodiscard]] bool boolean(const Json& value, const char* what) const;
  /// Returns `value` as an int64; throws if it is not an integer in range.
  [[nodiscard]] int64_t integer(const Json& value, const char* what) const;
  /// Returns `value` as a shape: a list of at most kMaxDims non-negative
  /// integers. Throws otherwise.
  [[nodiscard]] std::vector<int64_t> shape(
      const Json& value, const char* what) const;
  /// Returns the dtype Python spells `value` ("torch.float32"); throws if
  /// it is not a string or names no dtype Python saves.
  [[nodiscard]] c10::ScalarType dtype(const Json& value) const;
  /// Returns the device `value` names; null and "None" are no device.
  /// Throws if it is neither a string nor null, or names no device.
  [[nodiscard]] std::optional<c10::Device> device(const Json& value) const;
  /// Returns the dim names in `value`, a list of `batch_dims` strings or
  /// nulls without repeats; null, or only nulls, is no names. Throws
  /// otherwise; `what` names the member.
  [[nodiscard]] DimNames names(
      const Json& value, size_t batch_dims, const char* what) const;
  /// Returns the byte size of a `shape` tensor of `dtype`; throws if it
  /// overflows an int64.
  [[nodiscard]] int64_t checked_nbytes(
      c10::IntArrayRef shape, c10::ScalarType dtype) const;
  /// Throws unless `sizes` starts with `batch`; `what` names the sizes.
  void expect_batch_prefix(
      c10::IntArrayRef sizes, c10::IntArrayRef batch, const char* what) const;

 private:
  [[noreturn]] void fail_with(const std::string& message) const;

  std::string_view file_;
  KeyPath path_;
};

/// Keeps one load's memory mappings under the kernel's `vm.max_map_count`:
/// every memmap leaf is one mapping, and past the limit mmap fails (or,
/// for mappings made by others later, the process dies). A loader reserves
/// each dict's leaves before it maps them, so a tree with too many leaves is
/// refused up front with what to do about it.
///
/// Example:
/// ```
///   MappingBudget budget;
///   budget.reserve(leaf_count, dir, path);  // throws past the limit
/// ```
class MappingBudget {
 public:
  /// Mappings left for the rest of the process (torch, the allocator,
  /// threads' stacks, later loads) when a tree is checked.
  static constexpr int64_t kMargin = 1024;

  /// Counts `leaves` more mappings for the dict in `dir` at `path`; throws
  /// if the load's total no longer fits below `vm.max_map_count`, less the
  /// mappings the process holds and kMargin. The process's mappings are
  /// only counted once the load reserves more than a quarter of the limit,
  /// so small trees pay nothing for the check.
  void reserve(int64_t leaves, const std::string& dir, const KeyPath& path);

 private:
  int64_t reserved_ = 0;
  int64_t limit_ = -1;  // -1: not read yet
};

/// The memory mappings the process holds (lines of /proc/self/maps; 0 when
/// it cannot be read).
int64_t mappings_in_use();

/// Test hook: when positive, MappingBudget uses `value` instead of
/// /proc/sys/vm/max_map_count; 0 restores reading it.
void set_max_map_count_for_testing(int64_t value);

}  // namespace detail
TENSORDICT_END_NAMESPACE
