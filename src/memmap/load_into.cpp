// Loading a saved tree into an existing dict: TensorDict::load_memmap with
// `out` and TensorDict::load_memmap_, Python's `load_memmap(prefix,
// out=...)` and `load_memmap_`. The tree is loaded on its own first (the
// loader in reader.cpp), checked against the target, and only then merged
// in, so that a tree that does not load or does not fit leaves the target as
// it was (Python writes entries as it reads them, and stops half way).

#include <c10/util/Exception.h>

#include <string>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "core/tensor_dict_impl.h"
#include "core/walk.h"
#include "tensordict/errors.h"
#include "tensordict/lazy_stack.h"
#include "tensordict/memmap.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

// "" at the root, else " at ('a', 'b')" for error messages.
std::string at_key(const std::vector<std::string>& path) {
  return path.empty() ? std::string() : " at " + NestedKey(path).to_string();
}

// A lazy stack saved where `out` holds a lazy stack along the same dim is
// loaded into its elements, as Python's (which loads into
// `out.unbind(stack_dim)`): they stay the same dicts.
bool loads_element_wise(const Value& saved, const Value& existing) {
  return saved.is_lazy_stack() && existing.is_lazy_stack() &&
         saved.lazy_stack().stack_dim() == existing.lazy_stack().stack_dim();
}

// Throws, before anything is written, if `loaded` cannot be merged into
// `out`: a batch size that differs at a dict `out` keeps (a lazy stack's
// elements included), a locked dict, or a lazy stack whose element count
// differs from the dict or stack it replaces (Python's check).
void check_fits(
    const TensorDict& loaded,
    const TensorDict& out,
    std::vector<std::string>& path) {
  TORCH_CHECK(
      !out.is_locked(),
      kLockError,
      path.empty() ? "" : " (the nested dict" + at_key(path) + ")");
  TORCH_CHECK_VALUE(
      out.batch_size() == loaded.batch_size(),
      "cannot load a tensordict saved with batch size ",
      loaded.batch_size(),
      " into a dict of batch size ",
      out.batch_size(),
      at_key(path));
  for (const NestedKey& key : loaded.keys()) {
    const Value* existing = out.find(key);
    if (existing == nullptr) {
      continue;
    }
    const Value* value = loaded.find(key);
    path.push_back(key.to_vector().front());
    if (value->is_tensordict() && existing->is_tensordict()) {
      check_fits(value->tensordict(), existing->tensordict(), path);
    } else if (
        value->is_lazy_stack() &&
        (existing->is_tensordict() || existing->is_lazy_stack())) {
      const LazyStackedTensorDict& stack = value->lazy_stack();
      const c10::IntArrayRef batch = existing->is_tensordict()
                                         ? existing->tensordict().batch_size()
                                         : existing->lazy_stack().batch_size();
      const int64_t dim = stack.stack_dim();
      const int64_t saved = static_cast<int64_t>(stack.tensordicts().size());
      const int64_t have =
          dim < static_cast<int64_t>(batch.size()) ? batch[dim] : -1;
      TORCH_CHECK_VALUE(
          have == saved,
          "Cannot load ",
          saved,
          " stacked tensordicts into a stack of ",
          have < 0 ? c10::str("no dim ", dim, " (batch size ", batch, ")")
                   : c10::str(have),
          " tensordicts",
          at_key(path),
          ".");
      if (loads_element_wise(*value, *existing)) {
        // Same dim, same count: the elements pair up.
        const auto& into = existing->lazy_stack().tensordicts();
        for (size_t i = 0; i < into.size(); ++i) {
          path.push_back(std::to_string(i));
          check_fits(stack.tensordicts()[i], into[i], path);
          path.pop_back();
        }
      }
    }
    path.pop_back();
  }
}

// Writes `loaded` into `out`: a dict `out` holds where `loaded` has a dict is
// kept and loaded into (with the saved Python class and directory), and so
// are the elements of a lazy stack (see loads_element_wise); any other
// entry is replaced or added, and the keys the tree lacks are removed.
void merge(const TensorDict& loaded, TensorDict out);

void merge_dict(const TensorDict& loaded, const TensorDict& into) {
  merge(loaded, into);
  into.unsafeGetImpl()->python_class = loaded.unsafeGetImpl()->python_class;
}

void merge(const TensorDict& loaded, TensorDict out) {
  std::unordered_set<std::string> kept;
  for (const NestedKey& key : loaded.keys()) {
    kept.insert(key.to_vector().front());
    const Value* value = loaded.find(key);
    const Value* existing = out.find(key);
    if (existing != nullptr && existing->is_tensordict() &&
        value->is_tensordict()) {
      merge_dict(value->tensordict(), existing->tensordict());
      continue;
    }
    if (existing != nullptr && loads_element_wise(*value, *existing)) {
      const LazyStackedTensorDict& saved = value->lazy_stack();
      const std::vector<TensorDict> into = existing->lazy_stack().tensordicts();
      for (size_t i = 0; i < into.size(); ++i) {
        merge_dict(saved.tensordicts()[i], into[i]);
      }
      // A new stack of the same dicts, named as saved (Python's too).
      LazyStackedTensorDict stack =
          lazy_stack(into, saved.stack_dim(), saved.stack_dim_name());
      stack.set_python_class(saved.python_class());
      out.set(key, Value(std::move(stack)));
      continue;
    }
    out.set(key, *value);
  }
  for (const NestedKey& key : out.keys()) {
    if (kept.count(key.to_vector().front()) == 0) {
      out.del_(key);
    }
  }
  out.unsafeGetImpl()->memmap.prefix = loaded.unsafeGetImpl()->memmap.prefix;
}

}  // namespace
}  // namespace detail

TensorDict TensorDict::load_memmap(
    const std::string& prefix,
    TensorDict& out,
    const LoadMemmapOptions& options) {
  LoadMemmapOptions opts = options;
  if (const std::optional<c10::Device> device = out.device()) {
    if (const auto& asked = options.device()) {
      // An unindexed device ("cuda") matches any index of its type.
      TORCH_CHECK_VALUE(
          asked->type() == device->type() &&
              (!asked->has_index() || !device->has_index() ||
               asked->index() == device->index()),
          "Cannot load a tensordict on device ",
          *asked,
          " into a tensordict on device ",
          *device,
          ".");
    }
    opts.device(*device);
  }
  TORCH_CHECK(!out.is_locked(), detail::kLockError);
  LoadedTree tree = load_memmap_any(prefix, opts);
  const auto* loaded = std::get_if<TensorDict>(&tree);
  TORCH_CHECK_VALUE(
      loaded != nullptr,
      prefix,
      " holds a lazy stack, which cannot be loaded into a TensorDict in "
      "place (Python returns a new LazyStackedTensorDict instead of `out`); "
      "load it with load_memmap_any");
  std::vector<std::string> path;
  detail::check_fits(*loaded, out, path);
  detail::merge(*loaded, out);
  return out;
}

TensorDict& TensorDict::load_memmap_(
    const std::string& prefix, const LoadMemmapOptions& options) {
  const bool was_locked = impl_->locked;
  const bool was_memmap = impl_->memmap.is_memmap;
  if (was_locked) {
    unlock_();
  }
  try {
    TensorDict self = *this;
    (void)load_memmap(prefix, self, options);
  } catch (...) {
    if (was_locked) {
      lock_();
    }
    throw;
  }
  if (was_locked || was_memmap) {
    lock_();
  }
  if (was_memmap) {
    detail::for_each_dict(*impl_, [](detail::TensorDictImpl& impl) {
      impl.memmap.is_memmap = true;
    });
  }
  return *this;
}

TENSORDICT_END_NAMESPACE
