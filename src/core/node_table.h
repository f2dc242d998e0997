#pragma once

// The entries of one dict level: an insertion-ordered table of named values.
// Not installed: only src/ sees it.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "tensordict/value.h"
#include "util/array_cache.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Returns the `Word` at `p` (any alignment): how the key hash and
/// same_key read a key a few bytes at a time.
template <typename Word>
Word load_word(const char* p) noexcept {
  Word word;
  std::memcpy(&word, p, sizeof(Word));
  return word;
}

/// Returns whether `a` and `b` hold the same bytes. Inline, reading a key
/// of up to 16 bytes as two overlapping words: a dict's keys are short
/// names, and memcmp's out-of-line size dispatch costs more than the
/// compare (a collector's step compares a few dozen keys).
inline bool same_key(std::string_view a, std::string_view b) noexcept {
  const size_t n = a.size();
  if (n != b.size()) {
    return false;
  }
  const char* p = a.data();
  const char* q = b.data();
  if (n > 16) {
    return std::memcmp(p, q, n) == 0;
  }
  if (n >= 8) {
    using W = uint64_t;
    return ((load_word<W>(p) ^ load_word<W>(q)) |
            (load_word<W>(p + n - 8) ^ load_word<W>(q + n - 8))) == 0;
  }
  if (n >= 4) {
    using W = uint32_t;
    return ((load_word<W>(p) ^ load_word<W>(q)) |
            (load_word<W>(p + n - 4) ^ load_word<W>(q + n - 4))) == 0;
  }
  // 0 to 3 bytes: the first, middle and last cover them all.
  return n == 0 ||
         (p[0] == q[0] && p[n / 2] == q[n / 2] && p[n - 1] == q[n - 1]);
}

/// One entry: its own name and its value.
struct Node {
  Node(std::string&& key_, Value&& value_, size_t hash_)
      : key(std::move(key_)), value(std::move(value_)), hash(hash_) {}
  Node(const std::string& key_, Value&& value_, size_t hash_)
      : key(key_), value(std::move(value_)), hash(hash_) {}

  std::string key;
  Value value;
  size_t hash = 0;  // of key, kept for the index
};

/// Iterates over a table's nodes in insertion order, yielding `Node*`, so
/// loops read `for (const auto& node : impl.nodes()) node->key`.
class NodeRange {
 public:
  /// Steps through contiguous nodes, dereferencing to `Node*`.
  class iterator {
   public:
    explicit iterator(Node* p) : p_(p) {}
    Node* operator*() const noexcept {
      return p_;
    }
    iterator& operator++() noexcept {
      ++p_;
      return *this;
    }
    bool operator!=(const iterator& other) const noexcept {
      return p_ != other.p_;
    }
    bool operator==(const iterator& other) const noexcept {
      return p_ == other.p_;
    }

   private:
    Node* p_;
  };
  /// Spans the nodes in [begin, end).
  NodeRange(Node* begin, Node* end) : begin_(begin), end_(end) {}
  /// Returns an iterator to the first node.
  iterator begin() const noexcept {
    return iterator(begin_);
  }
  /// Returns an iterator past the last node.
  iterator end() const noexcept {
    return iterator(end_);
  }
  /// Returns the number of nodes.
  size_t size() const noexcept {
    return static_cast<size_t>(end_ - begin_);
  }
  /// Returns whether there are no nodes.
  bool empty() const noexcept {
    return begin_ == end_;
  }

 private:
  Node* begin_;
  Node* end_;
};

// NOTE [Dict storage]
// Entries live contiguously in insertion order, and a flat open-addressing
// table of positions (linear probing, at most half full) finds them by key:
// building a dict costs one allocation for the nodes and one for the table,
// not several per entry, and a lookup hashes the key once and compares
// strings only on a hash match. Appending may move the nodes, so a Node* or
// Value& is valid only until the table's keys change. Erasing shifts the
// later nodes down and re-indexes every position; dicts rarely lose keys, so
// lookups and appends get the simple layout and erase pays.

/// The entries of one dict level, in insertion order, found by key. See
/// NOTE [Dict storage]. Not thread-safe; a Node* is invalidated by any change
/// of the keys.
///
/// Example:
///   NodeTable table;
///   table.append("obs", Value(at::zeros({3})));
///   table.find("obs")->value;  // the tensor; find("act") is null
class NodeTable {
 public:
  /// Returns the node named `key`, or null. Inline: every lookup of every
  /// source file goes through it.
  Node* find(std::string_view key) const noexcept {
    if (slots_.empty()) {
      return nullptr;
    }
    const size_t hash = hash_key(key);
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      const int32_t pos = slots_[i];
      if (pos < 0) {
        return nullptr;
      }
      const Node& node = nodes_[static_cast<size_t>(pos)];
      if (node.hash == hash && same_key(node.key, key)) {
        return const_cast<Node*>(&node);
      }
    }
  }
  /// Appends a node and returns it; the key must not exist yet.
  Node& append(std::string key, Value&& value) {
    const size_t hash = hash_key(key);
    return append_hashed(std::move(key), hash, std::move(value));
  }
  /// Appends a node named like `source` (a node of another table), reusing
  /// its hash: what a walk that rebuilds a level does for every entry. The
  /// key is copied once and the value moved once, straight into the node.
  Node& append_like(const Node& source, Value&& value);
  /// Removes the node named `key` and returns its value; it must exist.
  Value erase(std::string_view key);
  /// Makes room for `n` entries, so that appending up to `n` in all neither
  /// moves the nodes nor re-indexes them.
  void reserve(size_t n);
  /// Removes every node.
  void clear() noexcept {
    nodes_.clear();
    slots_.clear();
  }
  /// Returns the nodes in insertion order.
  NodeRange nodes() const noexcept {
    Node* data = const_cast<Node*>(nodes_.data());
    return NodeRange(data, data + nodes_.size());
  }
  /// Returns the number of nodes.
  size_t size() const noexcept {
    return nodes_.size();
  }
  /// Returns whether the table has no nodes.
  bool empty() const noexcept {
    return nodes_.empty();
  }
  /// Returns the number of index slots (a power of two, or 0 before the
  /// first append); tests use it to see rehashing happen.
  size_t slot_count() const noexcept {
    return slots_.size();
  }

 private:
  // A multiply-xorshift over the key's bytes read as at most a few words,
  // inline: a dict's keys are short names, and std::hash's out-of-line
  // byte loop cost more than the probe it feeds. Only this table reads it;
  // nothing stores it.
  static size_t hash_key(std::string_view key) noexcept {
    const char* p = key.data();
    const size_t n = key.size();
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
    if (n >= 8) {
      for (size_t i = 0; i + 8 < n; i += 8) {
        h = mix(h ^ load_word<uint64_t>(p + i));
      }
      // The last eight bytes, overlapping the word before when n is not a
      // multiple of eight; n itself is in h.
      h = mix(h ^ load_word<uint64_t>(p + n - 8));
    } else if (n >= 4) {
      h = mix(
          h ^ (load_word<uint32_t>(p) |
               (static_cast<uint64_t>(load_word<uint32_t>(p + n - 4)) << 32)));
    } else if (n > 0) {
      h = mix(
          h ^ (byte(p[0]) | (byte(p[n / 2]) << 8) | (byte(p[n - 1]) << 16)));
    }
    return static_cast<size_t>(h ^ (h >> 32));
  }
  static uint64_t byte(char c) noexcept {
    return static_cast<unsigned char>(c);
  }
  static uint64_t mix(uint64_t x) noexcept {
    x *= 0xbf58476d1ce4e5b9ULL;
    return x ^ (x >> 31);
  }
  // Appends a node whose key hashes to `hash`.
  Node& append_hashed(std::string&& key, size_t hash, Value&& value);
  // Checks that one more node fits the int32_t positions of the slots.
  void check_room() const;
  // Indexes the node just appended.
  Node& index_last();
  // Re-indexes every node into `capacity` slots (a power of two).
  void rebuild_slots(size_t capacity);
  // Puts position `pos` into the first free slot its hash probes to.
  void insert_slot(size_t hash, int32_t pos) noexcept;

  // Both arrays are recycled per thread: see NOTE [Recycled arrays].
  std::vector<Node, RecyclingAllocator<Node>> nodes_;
  // Node positions; -1 = empty; size 2^k.
  std::vector<int32_t, RecyclingAllocator<int32_t>> slots_;
};

}  // namespace detail
TENSORDICT_END_NAMESPACE
