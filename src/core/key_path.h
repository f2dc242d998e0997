#pragma once

// The key of the entry a walk is at, as borrowed parts: what the walk engine
// (core/walk.h) and the file formats (io/) share, so that io/ names entries
// without seeing a TensorDict.

#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <string>
#include <string_view>

#include "tensordict/nested_key.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Returns `parts` joined by `separator` ("a.b" for "."), with one
/// allocation: NestedKey::join_parts and KeyPath::joined both spell it so.
template <typename Parts>
std::string join_parts(const Parts& parts, std::string_view separator) {
  size_t size = 0;
  for (const auto& part : parts) {
    size += std::string_view(part).size() + separator.size();
  }
  std::string out;
  out.reserve(size);
  bool first = true;
  for (const auto& part : parts) {
    if (!first) {
      out += separator;
    }
    first = false;
    out += part;
  }
  return out;
}

/// The key of the entry a walk is at, kept as a stack of parts borrowed
/// from the dicts being walked. Pushing and popping allocate nothing;
/// `key()` makes an owning NestedKey on demand. Valid while those dicts'
/// keys do not change.
class KeyPath {
 public:
  /// Starts at the root.
  KeyPath() = default;
  /// Starts at `key`, borrowing its parts.
  explicit KeyPath(const NestedKey& key) : parts_(key.begin(), key.end()) {}
  /// Enters entry `part` of the current dict.
  void push(std::string_view part) {
    parts_.push_back(part);
  }
  /// Leaves the innermost entry.
  void pop() noexcept {
    parts_.pop_back();
  }
  /// Returns true at the root (no entry entered).
  bool empty() const noexcept {
    return parts_.empty();
  }
  /// Returns the number of parts.
  size_t size() const noexcept {
    return parts_.size();
  }
  /// Returns the innermost part: the entry's name in its own dict.
  std::string_view back() const noexcept {
    return parts_.back();
  }
  /// Returns the parts, root first.
  c10::ArrayRef<std::string_view> parts() const noexcept {
    return parts_;
  }
  /// Returns the path as an owning key; the path must not be empty.
  NestedKey key() const {
    return NestedKey::from_parts(parts_);
  }
  /// Returns the key of entry `name` inside the dict the path names.
  NestedKey child(std::string_view name) const {
    c10::SmallVector<std::string_view, 8> parts(parts_);
    parts.push_back(name);
    return NestedKey::from_parts(parts);
  }
  /// Returns the parts joined by `separator` ("a.b" for "."): what
  /// `key().join_parts(separator)` gives, with one allocation.
  std::string joined(std::string_view separator) const {
    return join_parts(parts_, separator);
  }
  /// Returns the key as Python prints it, or "" at the root.
  std::string to_string() const {
    return parts_.empty() ? std::string() : key().to_string();
  }

 private:
  c10::SmallVector<std::string_view, 8> parts_;
};

/// Pushes a part onto a KeyPath for the lifetime of the scope.
class PathPart {
 public:
  PathPart(KeyPath& path, std::string_view part) : path_(path) {
    path_.push(part);
  }
  PathPart(const PathPart&) = delete;
  PathPart& operator=(const PathPart&) = delete;
  ~PathPart() {
    path_.pop();
  }

 private:
  KeyPath& path_;
};

}  // namespace detail
TENSORDICT_END_NAMESPACE
