// The insertion-ordered table behind every dict level. See NOTE [Dict
// storage] in node_table.h.

#include "core/node_table.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <limits>

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

void NodeTable::insert_slot(size_t hash, int32_t pos) noexcept {
  const size_t mask = slots_.size() - 1;
  size_t i = hash & mask;
  while (slots_[i] >= 0) {
    i = (i + 1) & mask;
  }
  slots_[i] = pos;
}

void NodeTable::rebuild_slots(size_t capacity) {
  slots_.assign(capacity, -1);
  for (size_t pos = 0; pos < nodes_.size(); ++pos) {
    insert_slot(nodes_[pos].hash, static_cast<int32_t>(pos));
  }
}

void NodeTable::reserve(size_t n) {
  nodes_.reserve(n);
  size_t capacity = 8;
  while (capacity < 2 * n) {
    capacity *= 2;
  }
  if (capacity > slots_.size()) {
    rebuild_slots(capacity);
  }
}

void NodeTable::check_room() const {
  // Slots hold positions as int32_t.
  TORCH_CHECK(
      nodes_.size() < static_cast<size_t>(std::numeric_limits<int32_t>::max()),
      "a TensorDict level cannot hold more than ",
      std::numeric_limits<int32_t>::max(),
      " entries");
}

Node& NodeTable::index_last() {
  const Node& node = nodes_.back();
  if (2 * nodes_.size() > slots_.size()) {
    // Keep the table at most half full: double it and re-index.
    rebuild_slots(std::max<size_t>(8, 2 * slots_.size()));
  } else {
    insert_slot(node.hash, static_cast<int32_t>(nodes_.size() - 1));
  }
  return nodes_.back();
}

Node& NodeTable::append_hashed(std::string&& key, size_t hash, Value&& value) {
  TORCH_INTERNAL_ASSERT_DEBUG_ONLY(find(key) == nullptr);
  TORCH_INTERNAL_ASSERT_DEBUG_ONLY(hash == hash_key(key));
  check_room();
  nodes_.emplace_back(std::move(key), std::move(value), hash);
  return index_last();
}

Node& NodeTable::append_like(const Node& source, Value&& value) {
  TORCH_INTERNAL_ASSERT_DEBUG_ONLY(find(source.key) == nullptr);
  check_room();
  nodes_.emplace_back(source.key, std::move(value), source.hash);
  return index_last();
}

Value NodeTable::erase(std::string_view key) {
  Node* node = find(key);
  TORCH_INTERNAL_ASSERT(node != nullptr, "erasing a missing key");
  Value value = std::move(node->value);
  const auto pos = static_cast<int32_t>(node - nodes_.data());
  if (static_cast<size_t>(pos) + 1 == nodes_.size()) {
    // The last node: the slots are always what inserting the nodes in
    // order gives (appends and rebuild_slots both do), so no other node's
    // probe ran past this one's slot, and freeing it undoes its insertion
    // exactly. A collector drops the last keys of a dict every step.
    const size_t mask = slots_.size() - 1;
    size_t i = node->hash & mask;
    while (slots_[i] != pos) {
      i = (i + 1) & mask;
    }
    slots_[i] = -1;
    nodes_.pop_back();
    return value;
  }
  nodes_.erase(nodes_.begin() + pos);
  // Positions after the erased node shifted: re-index (erasing is rare).
  rebuild_slots(slots_.size());
  return value;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
