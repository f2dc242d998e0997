#include "tensordict/nested_key.h"

#include <algorithm>
#include <ostream>

#include "core/key_path.h"
#include "tensordict/errors.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

void check_not_empty(size_t n) {
  TENSORDICT_CHECK_KEY(
      n > 0,
      "Only NestedKeys are supported: a key must be a string or a non-empty, "
      "possibly nested tuple of strings. Got key ().");
}

}  // namespace

void NestedKey::throw_null_key() {
  TORCH_CHECK_VALUE(false, "a NestedKey cannot be a null pointer");
  TORCH_INTERNAL_ASSERT(false);
}

void NestedKey::throw_empty_key() {
  check_not_empty(0);
  TORCH_INTERNAL_ASSERT(false);
}

NestedKey::NestedKey(const std::string& key)
    : NestedKey(std::string_view(key)) {}

NestedKey::NestedKey(std::string_view key) {
  auto storage = std::make_shared<std::string>(key);
  parts_.emplace_back(*storage);
  storage_ = std::move(storage);
}

NestedKey::NestedKey(const std::vector<std::string>& parts) {
  check_not_empty(parts.size());
  for (const std::string& part : parts) {
    parts_.emplace_back(part);
  }
  own_parts();
}

NestedKey NestedKey::from_parts(c10::ArrayRef<std::string_view> parts) {
  check_not_empty(parts.size());
  NestedKey result;
  result.parts_.append(parts.begin(), parts.end());
  result.own_parts();
  return result;
}

NestedKey NestedKey::child_of(
    const std::optional<NestedKey>& parent, std::string_view name) {
  return parent ? parent->child(name) : NestedKey(name);
}

void NestedKey::own_parts() {
  size_t total = 0;
  for (std::string_view part : parts_) {
    total += part.size();
  }
  auto storage = std::make_shared<std::string>();
  storage->reserve(total);
  for (std::string_view part : parts_) {
    storage->append(part);
  }
  size_t offset = 0;
  for (std::string_view& part : parts_) {
    const size_t n = part.size();
    part = std::string_view(storage->data() + offset, n);
    offset += n;
  }
  storage_ = std::move(storage);
}

NestedKey NestedKey::prefix(size_t n) const {
  TORCH_CHECK_INDEX(
      n >= 1 && n <= parts_.size(),
      "prefix length ",
      n,
      " is out of range for key ",
      to_string());
  NestedKey result;
  result.parts_.append(parts_.begin(), parts_.begin() + n);
  result.storage_ = storage_;
  return result;
}

NestedKey NestedKey::join(const NestedKey& child) const {
  NestedKey result;
  result.parts_.append(parts_.begin(), parts_.end());
  result.parts_.append(child.parts_.begin(), child.parts_.end());
  if (storage_ || child.storage_) {
    result.own_parts();
  }
  return result;
}

NestedKey NestedKey::child(std::string_view name) const {
  NestedKey result;
  result.parts_.append(parts_.begin(), parts_.end());
  result.parts_.push_back(name);
  result.own_parts();
  return result;
}

std::vector<std::string> NestedKey::to_vector() const {
  return std::vector<std::string>(parts_.begin(), parts_.end());
}

std::string NestedKey::join_parts(std::string_view separator) const {
  return detail::join_parts(parts_, separator);
}

std::string NestedKey::to_string() const {
  if (parts_.size() == 1) {
    return detail::python_repr(parts_[0]);
  }
  return "(" + detail::join_spelled(parts_, detail::python_repr) + ")";
}

bool NestedKey::operator==(const NestedKey& other) const noexcept {
  return std::equal(
      parts_.begin(), parts_.end(), other.parts_.begin(), other.parts_.end());
}

bool NestedKey::operator<(const NestedKey& other) const noexcept {
  // Lexicographic order of the "."-joined strings, without building them.
  auto next = [](const NestedKey& k, size_t& part, size_t& pos) -> int {
    while (part < k.parts_.size()) {
      if (pos < k.parts_[part].size()) {
        return static_cast<unsigned char>(k.parts_[part][pos++]);
      }
      ++part;
      pos = 0;
      if (part < k.parts_.size()) {
        return '.';
      }
    }
    return -1;
  };
  size_t pa = 0, ia = 0, pb = 0, ib = 0;
  while (true) {
    const int a = next(*this, pa, ia);
    const int b = next(other, pb, ib);
    if (a != b) {
      return a < b;
    }
    if (a < 0) {
      return false;
    }
  }
}

std::ostream& operator<<(std::ostream& out, const NestedKey& key) {
  return out << key.to_string();
}

TENSORDICT_END_NAMESPACE

size_t std::hash<tensordict::NestedKey>::operator()(
    const tensordict::NestedKey& key) const noexcept {
  size_t h = key.size();
  for (std::string_view part : key) {
    h ^= std::hash<std::string_view>{}(part) + 0x9e3779b97f4a7c15ULL +
         (h << 6) + (h >> 2);
  }
  return h;
}
