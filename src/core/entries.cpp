// Entry-level copies and refills for the floors above
// (tensordict/detail/entries.h): they write nodes directly, so they live
// beside the node table and the dict's state.

#include "tensordict/detail/entries.h"

#include <c10/util/SmallVector.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "core/tensor_dict_impl.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

namespace {

// Whether values checked in a dict like `a` fit `b` unchecked.
bool same_frame(const TensorDictImpl& a, const TensorDictImpl& b) {
  return a.batch_size == b.batch_size && a.device == b.device &&
         a.names.empty() && b.names.empty();
}

// merge_entries' recursion, with the key of the level being copied.
class EntryMerge {
 public:
  explicit EntryMerge(EntrySkip skip) : skip_(skip) {}

  void copy(const TensorDictImpl& from, TensorDictImpl& to) {
    to.reserve(to.nodes().size() + from.nodes().size());
    for (const Node* node : from.nodes()) {
      path_.push_back(node->key);
      if (!skip_(path_)) {
        Node* there = to.find(node->key);
        if (node->value.is_tensordict()) {
          copy_dict(*node, there, to);
        } else if (there != nullptr) {
          there->value = node->value;
        } else {
          to.append_like(*node, Value(node->value));
        }
      }
      path_.pop_back();
    }
  }

 private:
  void copy_dict(const Node& node, Node* there, TensorDictImpl& to) {
    const TensorDict& source = node.value.tensordict();
    const bool merge = there != nullptr && there->value.is_tensordict();
    TensorDict made = merge ? there->value.tensordict() : empty_like(source);
    copy(*source.unsafeGetImpl(), *made.unsafeGetImpl());
    if (merge || made.is_empty()) {
      return;
    }
    if (there != nullptr) {
      there->value = Value(std::move(made));
    } else {
      to.append_like(node, Value(std::move(made)));
    }
  }

  EntrySkip skip_;
  c10::SmallVector<std::string_view, 8> path_;
};

// NOTE [Refilling a dict in place]
// A dict refilled with the entries its previous contents came from (the
// collector's roots take turns: rl/step_mdp.cpp) has its keys in the order
// a new dict would, so each node takes its new value in place. The fill
// walks what EntryMerge walks, in the same order; a node is either the
// next one of its dict (a key placed first) or one placed before it in
// this fill (a key of a later source merged over an earlier one's); the
// nodes left over at the end of a dict are dropped. Any other shape gives
// up: a key missing or in another order, a dict where a tensor was or the
// reverse (a value of a later source over a dict this fill went into
// included), a dict that would be left empty, a dict held elsewhere or not
// plain (TensorDictImpl::is_plain_and_unshared).
class EntryRefill {
 public:
  bool fill(const TensorDictImpl& from, TensorDictImpl& to, EntrySkip skip) {
    const size_t level = level_of(to);
    for (const Node* node : from.nodes()) {
      path_.push_back(node->key);
      const bool ok = skip(path_) || put(*node, to, level, skip);
      path_.pop_back();
      if (!ok) {
        return false;
      }
    }
    return true;
  }

  // Drops the nodes of every dict filled past those the fill put there.
  void trim() {
    for (const Level& level : levels_) {
      while (level.dict->nodes().size() > level.placed) {
        const NodeRange nodes = level.dict->nodes();
        const std::string key = (*nodes.begin())[nodes.size() - 1].key;
        level.dict->erase(key);
      }
    }
  }

 private:
  struct Level {
    TensorDictImpl* dict;
    size_t placed;  // nodes [0, placed) hold their new values
  };

  size_t level_of(TensorDictImpl& dict) {
    for (size_t i = 0; i < levels_.size(); ++i) {
      if (levels_[i].dict == &dict) {
        return i;
      }
    }
    levels_.push_back({&dict, 0});
    return levels_.size() - 1;
  }

  bool put(const Node& node, TensorDictImpl& to, size_t level, EntrySkip skip) {
    const NodeRange nodes = to.nodes();
    Node* const first = *nodes.begin();
    const size_t placed = levels_[level].placed;
    Node* there = nullptr;
    bool merged = false;
    if (placed < nodes.size() && first[placed].key == node.key) {
      there = first + placed;
      ++levels_[level].placed;
    } else {
      // A key placed before in this fill, or none: the nodes placed are
      // few, and their hashes are kept (no hashing of the key).
      for (size_t i = 0; i < placed && there == nullptr; ++i) {
        if (first[i].hash == node.hash && first[i].key == node.key) {
          there = first + i;
        }
      }
      if (there == nullptr) {
        return false;
      }
      merged = true;
    }
    if (node.value.is_tensor() && there->value.is_tensor()) {
      // The tensor handle alone: the variant's assignment costs a visit.
      there->value.replace_tensor(node.value.tensor());
      return true;
    }
    if (!node.value.is_tensordict()) {
      if (merged && there->value.is_tensordict()) {
        // A value of a later source over a dict this fill went into:
        // replacing it would free a dict `levels_` still names.
        return false;
      }
      there->value = node.value;
      return true;
    }
    if (!there->value.is_tensordict()) {
      return false;
    }
    const TensorDictImpl& source = *node.value.tensordict().unsafeGetImpl();
    TensorDictImpl& target = *there->value.tensordict().unsafeGetImpl();
    if (!merged &&
        !(target.is_plain_and_unshared() && same_frame(target, source))) {
      return false;
    }
    const size_t child = level_of(target);
    return fill(source, target, skip) && levels_[child].placed > 0;
  }

  c10::SmallVector<std::string_view, 8> path_;
  c10::SmallVector<Level, 4> levels_;
};

// match_leaf_order's recursion.
class LeafOrderMatch {
 public:
  LeafOrderMatch(
      c10::ArrayRef<NestedKey> order,
      c10::ArrayRef<size_t> slots,
      const at::Tensor** values)
      : order_(order), slots_(slots), values_(values) {}

  bool matches(const TensorDictImpl& impl) {
    for (const Node* node : impl.nodes()) {
      if (node->value.is_tensordict()) {
        path_.push_back(node->key);
        const bool ok = matches(*node->value.tensordict().unsafeGetImpl());
        path_.pop_back();
        if (!ok) {
          return false;
        }
      } else if (node->value.is_tensor()) {
        if (pos_ >= order_.size()) {
          return false;
        }
        const NestedKey& key = order_[pos_];
        if (key.size() != path_.size() + 1 ||
            !std::equal(path_.begin(), path_.end(), key.begin()) ||
            key.back() != node->key) {
          return false;
        }
        values_[slots_[pos_]] = &node->value.tensor();
        ++pos_;
      } else if (node->value.is_lazy_stack()) {
        return false;
      }
    }
    return true;
  }

  bool complete() const {
    return pos_ == order_.size();
  }

 private:
  c10::ArrayRef<NestedKey> order_;
  c10::ArrayRef<size_t> slots_;
  const at::Tensor** values_;
  c10::SmallVector<std::string_view, 8> path_;
  size_t pos_ = 0;
};

}  // namespace

bool merge_entries(
    const TensorDict& from, const TensorDict& to, EntrySkip skip) {
  TensorDictImpl& target = *to.unsafeGetImpl();
  if (!same_frame(*from.unsafeGetImpl(), target)) {
    return false;
  }
  EntryMerge(skip).copy(*from.unsafeGetImpl(), target);
  return true;
}

bool refill_entries(const TensorDict& to, c10::ArrayRef<EntrySource> sources) {
  TensorDictImpl& target = *to.unsafeGetImpl();
  if (!target.is_plain_and_unshared()) {
    return false;
  }
  for (const EntrySource& source : sources) {
    if (!same_frame(*source.dict.unsafeGetImpl(), target)) {
      return false;
    }
  }
  EntryRefill refill;
  for (const EntrySource& source : sources) {
    if (!refill.fill(*source.dict.unsafeGetImpl(), target, source.skip)) {
      return false;
    }
  }
  refill.trim();
  return true;
}

bool match_leaf_order(
    const TensorDict& td,
    c10::ArrayRef<NestedKey> order,
    c10::ArrayRef<size_t> slots,
    const at::Tensor** values) {
  TORCH_INTERNAL_ASSERT(order.size() == slots.size());
  LeafOrderMatch match(order, slots, values);
  return match.matches(*td.unsafeGetImpl()) && match.complete();
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
