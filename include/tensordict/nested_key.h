#pragma once

/// @file
/// NestedKey, the key of every lookup: a string or a path of strings into
/// nested dicts.

#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <cstddef>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE

/// A key into a TensorDict: one string, or a path of strings into nested
/// dicts. The C++ form of Python's `NestedKey` (`str | tuple[NestedKey, ...]`).
///
/// Nested brace lists unravel as `tensordict.unravel_key` does:
/// `{"a", {"b", {"c"}}}` is the path `("a", "b", "c")`, and `{"a"}` is `"a"`.
/// An empty path is a KeyError.
///
/// Ownership: a key made from a `const char*` borrows the characters (string
/// literals are what this is for), so `td.get("obs")` and
/// `td.get({"next", "obs"})` allocate nothing. A key made from `std::string`
/// or `std::string_view` owns a copy. Copies of a key share that copy.
///
/// Example:
/// ```
///   NestedKey k = {"next", {"obs", "pixels"}};
///   k.size();        // 3
///   k.to_string();   // "('next', 'obs', 'pixels')"
/// ```
class TENSORDICT_API NestedKey {
 public:
  /// Makes a one-part key that borrows `key`; `key` must outlive the key.
  NestedKey(const char* key) {  // NOLINT(google-explicit-constructor)
    // This and the brace-list constructor are inline: a key is built for
    // every lookup, and out of line they cost more than the lookup itself.
    if (key == nullptr) {
      throw_null_key();
    }
    parts_.emplace_back(key);
  }
  /// Makes a one-part key that owns a copy of `key`.
  NestedKey(const std::string& key);  // NOLINT(google-explicit-constructor)
  /// Makes a one-part key that owns a copy of `key`.
  NestedKey(std::string_view key);  // NOLINT(google-explicit-constructor)
  /// Unravels nested parts into one path; throws KeyError if it is empty.
  NestedKey(std::initializer_list<NestedKey> parts) {
    bool any_owned = false;
    for (const NestedKey& part : parts) {
      parts_.append(part.parts_.begin(), part.parts_.end());
      any_owned = any_owned || part.storage_ != nullptr;
    }
    if (parts_.empty()) {
      throw_empty_key();
    }
    if (any_owned) {
      own_parts();
    }
  }
  /// Makes a path from its parts; throws KeyError if `parts` is empty.
  explicit NestedKey(const std::vector<std::string>& parts);
  /// Makes a path that owns a copy of `parts`; throws KeyError if `parts`
  /// is empty.
  static NestedKey from_parts(c10::ArrayRef<std::string_view> parts);
  /// Returns the key of entry `name` inside the dict `parent` names, or the
  /// one-part key `name` when `parent` is empty (the root). Owns its parts.
  static NestedKey child_of(
      const std::optional<NestedKey>& parent, std::string_view name);

  /// Returns the number of parts (1 for a plain string key).
  size_t size() const noexcept {
    return parts_.size();
  }
  /// Returns part `i` (unchecked).
  std::string_view operator[](size_t i) const noexcept {
    return parts_[i];
  }
  /// Returns the last part: the entry's name inside its own dict.
  std::string_view back() const noexcept {
    return parts_.back();
  }
  /// Iterates over the parts.
  const std::string_view* begin() const noexcept {
    return parts_.begin();
  }
  /// Iterates over the parts.
  const std::string_view* end() const noexcept {
    return parts_.end();
  }
  /// Returns the key made of the first `n` parts; `n` must be in [1, size()].
  NestedKey prefix(size_t n) const;
  /// Returns this key followed by `child`'s parts.
  NestedKey join(const NestedKey& child) const;
  /// Returns the key of entry `name` inside the dict this key names: this
  /// key followed by one more part (copied).
  NestedKey child(std::string_view name) const;
  /// Returns the parts as owned strings.
  std::vector<std::string> to_vector() const;
  /// Returns the parts joined by `separator` ("a.b.c" for ".").
  std::string join_parts(std::string_view separator = ".") const;
  /// Returns the key as Python prints it: `'a'` or `('a', 'b')`.
  std::string to_string() const;

  /// Compares part by part.
  bool operator==(const NestedKey& other) const noexcept;
  /// Compares part by part.
  bool operator!=(const NestedKey& other) const noexcept {
    return !(*this == other);
  }
  /// Orders as Python's `keys(sort=True)`: by the parts joined with ".".
  bool operator<(const NestedKey& other) const noexcept;

 private:
  NestedKey() = default;
  void own_parts();
  [[noreturn]] static void throw_null_key();
  [[noreturn]] static void throw_empty_key();

  // Up to four parts live inline: no allocation for typical nested keys.
  c10::SmallVector<std::string_view, 4> parts_;
  // Characters of owned parts; never mutated once built, so the views in
  // parts_ stay valid and copies can share it.
  std::shared_ptr<const std::string> storage_;
};

/// Writes `key.to_string()`.
TENSORDICT_API std::ostream& operator<<(
    std::ostream& out, const NestedKey& key);

TENSORDICT_END_NAMESPACE

/// Hashes a NestedKey, so that keys can index std::unordered_map.
template <>
struct std::hash<tensordict::NestedKey> {
  /// Returns a hash consistent with NestedKey's `==`.
  size_t operator()(const tensordict::NestedKey& key) const noexcept;
};
