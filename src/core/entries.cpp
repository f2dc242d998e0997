// Entry-level copies and walks for the floors above
// (tensordict/detail/entries.h): they read and write nodes directly, so
// they live beside the node table and the dict's state.

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
            !same_key(key.back(), node->key)) {
          return false;
        }
        for (size_t level = 0; level < path_.size(); ++level) {
          if (!same_key(path_[level], key[level])) {
            return false;
          }
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
