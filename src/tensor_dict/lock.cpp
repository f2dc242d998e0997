// Locking: lock_/unlock_ and the lock graph, Python's record of which locked
// dicts hold which, so a nested dict stays locked while a locked parent
// holds it.

#include <algorithm>

#include "detail/tensor_dict_impl.h"

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

// Locks `impl` and every dict below it, recording each parent in its
// children's lock graph.
void lock_impl(const ImplPtr& impl) {
  impl->locked = true;
  for (const auto& node : impl->nodes()) {
    if (node->value.is_tensordict()) {
      TensorDictImpl* child = node->value.tensordict().unsafeGetImpl();
      child->lock_parents.emplace_back(impl);
      lock_impl(ImplPtr::reclaim_copy(child));
    }
  }
}

// Clears the lock, and the state that only a locked dict may have.
void clear_lock(TensorDictImpl& impl) {
  // As in Python, an unlocked dict is no longer marked shared (its tensors
  // stay in shared memory).
  impl.locked = false;
  impl.shared = false;
  impl.memmap.is_memmap = false;
}

// Drops `impl`, and every dead or unlocked parent, from its children's lock
// graphs, and unlocks the children no locked dict holds any more.
void unlock_children(TensorDictImpl& impl) {
  for (const auto& node : impl.nodes()) {
    if (!node->value.is_tensordict()) {
      continue;
    }
    TensorDictImpl& child = *node->value.tensordict().unsafeGetImpl();
    auto& parents = child.lock_parents;
    parents.erase(
        std::remove_if(
            parents.begin(),
            parents.end(),
            [&](const auto& weak) {
              auto parent = weak.lock();
              return !parent || parent.get() == &impl || !parent->locked;
            }),
        parents.end());
    if (parents.empty() && child.locked) {
      clear_lock(child);
      unlock_children(child);
    }
  }
}

}  // namespace
}  // namespace detail

TensorDict& TensorDict::lock_() {
  if (!impl_->locked) {
    detail::lock_impl(impl_);
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
