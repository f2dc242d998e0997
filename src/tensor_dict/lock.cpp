// Locking: lock_/unlock_ and the lock graph, Python's record of which locked
// dicts hold which, so a nested dict stays locked while a locked parent
// holds it.

#include <algorithm>

#include "core/tensor_dict_impl.h"
#include "core/walk.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

const char* const kLockError =
    "Cannot modify locked TensorDict. For in-place modification, consider "
    "using the `set_()` method and make sure the key is present.";

void check_unlocked(const TensorDictImpl& impl) {
  TORCH_CHECK(!impl.locked, kLockError);
}

namespace {

bool has_locked_parent(const TensorDictImpl& impl) {
  for (const auto& weak : impl.lock_parents) {
    auto parent = weak.lock();
    if (parent && parent->locked) {
      return true;
    }
  }
  return false;
}

// Locks `root` and every dict below it, recording each parent in its
// children's lock graph.
void lock_impl(TensorDictImpl& root) {
  for_each_dict(root, [](TensorDictImpl& impl) {
    impl.locked = true;
    for (const auto& node : impl.nodes()) {
      if (node->value.is_tensordict()) {
        node->value.tensordict().unsafeGetImpl()->lock_parents.emplace_back(
            ImplPtr::reclaim_copy(&impl));
      } else if (node->value.is_lazy_stack()) {
        for (const TensorDict& element :
             node->value.lazy_stack().tensordicts()) {
          element.unsafeGetImpl()->lock_parents.emplace_back(
              ImplPtr::reclaim_copy(&impl));
        }
      }
    }
  });
}

// Clears the lock, and the state that only a locked dict may have.
void clear_lock(TensorDictImpl& impl) {
  // As in Python, an unlocked dict is no longer marked shared (its tensors
  // stay in shared memory).
  impl.locked = false;
  impl.shared = false;
  impl.memmap.is_memmap = false;
}

// Unlocks, below `impl` (just unlocked), the dicts no locked dict holds any
// more, dropping every dead or unlocked parent from the lock graphs it
// passes; a dict still held stays locked, with all below it.
void unlock_children(TensorDictImpl& impl) {
  TORCH_INTERNAL_ASSERT(!impl.locked);
  struct Unlock : WalkVisitor {
    bool enter_dict(const KeyPath& /*path*/, const TensorDict& dict) {
      TensorDictImpl& child = *dict.unsafeGetImpl();
      auto& parents = child.lock_parents;
      parents.erase(
          std::remove_if(
              parents.begin(),
              parents.end(),
              [](const auto& weak) {
                auto parent = weak.lock();
                return !parent || !parent->locked;
              }),
          parents.end());
      if (!parents.empty() || !child.locked) {
        return false;
      }
      clear_lock(child);
      return true;
    }
  } unlock;
  KeyPath path;
  walk(impl, unlock, path);
}

}  // namespace
}  // namespace detail

TensorDict& TensorDict::lock_() {
  if (!impl_->locked) {
    detail::lock_impl(*impl_);
  }
  return *this;
}

TensorDict& TensorDict::unlock_() {
  TORCH_CHECK(
      !detail::has_locked_parent(*impl_),
      "Cannot unlock a tensordict that is part of a locked graph. Unlock the "
      "root tensordict first. If the tensordict is part of multiple graphs, "
      "group the graphs under a common tensordict an unlock this root.");
  impl_->lock_parents.clear();
  if (impl_->locked) {
    detail::clear_lock(*impl_);
    detail::unlock_children(*impl_);
  }
  return *this;
}

bool TensorDict::is_locked() const noexcept {
  return impl_->locked;
}

TENSORDICT_END_NAMESPACE
