// Dimension names: reading, setting, refining and renaming them, and
// handing them down to nested dicts, which share their parent's leading
// dims and so its names for those dims.

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/tensor_dict_impl.h"
#include "core/walk.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

bool all_unnamed(const DimNames& names) {
  return std::all_of(
      names.begin(), names.end(), [](const auto& n) { return !n; });
}

namespace {

// Names the leading dims of `impl` as its parent's `names` say; returns
// false, changing nothing, when neither has names.
bool inherit_names(TensorDictImpl& impl, const DimNames& names) {
  if (names.empty() && impl.names.empty()) {
    return false;
  }
  DimNames merged(impl.batch_size.size());
  for (size_t i = 0; i < merged.size(); ++i) {
    if (i < names.size()) {
      merged[i] = names[i];
    } else if (i < impl.names.size()) {
      merged[i] = impl.names[i];
    }
  }
  if (all_unnamed(merged)) {
    merged.clear();
  }
  impl.names = std::move(merged);
  return true;
}

}  // namespace

void propagate_names(TensorDictImpl& child, const DimNames& names) {
  // Each nested dict inherits from its parent, until neither has names.
  struct Propagate : WalkVisitor {
    std::vector<const DimNames*> parents;  // the names of the dicts entered

    bool enter_dict(const KeyPath& /*path*/, const TensorDict& dict) {
      TensorDictImpl& impl = *dict.unsafeGetImpl();
      if (!inherit_names(impl, *parents.back())) {
        return false;
      }
      parents.push_back(&impl.names);
      return true;
    }
    void leave_dict(const KeyPath& /*path*/, const TensorDict& /*dict*/) {
      parents.pop_back();
    }
  } propagate;
  if (!inherit_names(child, names)) {
    return;
  }
  propagate.parents.push_back(&child.names);
  KeyPath path;
  walk(child, propagate, path);
}

namespace {

// Python's checks on `td.names = names`: one name per batch dim, no name
// twice.
void check_dim_names(const DimNames& names, size_t batch_dims) {
  if (names.empty()) {
    return;
  }
  TORCH_CHECK_VALUE(
      names.size() == batch_dims,
      "the length of the dimension names must equate the tensordict "
      "batch_dims attribute. Got ",
      names_repr(names),
      " for batch_dims ",
      batch_dims,
      ".");
  std::unordered_set<std::string_view> seen;
  for (const auto& name : names) {
    TORCH_CHECK_VALUE(
        !name || seen.insert(*name).second,
        "Some dimension names are non-unique: ",
        names_repr(names),
        ".");
  }
}

}  // namespace
}  // namespace detail

using detail::TensorDictImpl;

DimNames TensorDict::names() const {
  if (impl_->names.empty()) {
    return DimNames(impl_->batch_size.size());
  }
  return impl_->names;
}

bool TensorDict::has_names() const noexcept {
  return !impl_->names.empty();
}

void TensorDict::set_names(const DimNames& names) {
  detail::check_dim_names(names, impl_->batch_size.size());
  impl_->names = detail::all_unnamed(names) ? DimNames{} : names;
  for (const auto& node : impl_->nodes()) {
    if (node->value.is_tensordict()) {
      TensorDictImpl& child = *node->value.tensordict().unsafeGetImpl();
      if (impl_->names.empty()) {
        // Clearing names clears the shared dims of nested dicts too.
        const size_t shared_dims = impl_->batch_size.size();
        for (size_t i = 0; i < child.names.size() && i < shared_dims; ++i) {
          child.names[i].reset();
        }
        if (detail::all_unnamed(child.names)) {
          child.names.clear();
        }
      }
      detail::propagate_names(child, impl_->names);
    }
  }
}

TensorDict& TensorDict::refine_names(const DimNames& names) {
  const size_t ndim = impl_->batch_size.size();
  // Expand "..." into as many unnamed dims as it covers.
  DimNames wanted;
  size_t ellipsis = 0;
  for (const auto& name : names) {
    ellipsis += name && *name == "...";
  }
  TORCH_CHECK_VALUE(
      ellipsis <= 1, "refine_names: at most one '...' is allowed");
  TORCH_CHECK_VALUE(
      names.size() - ellipsis <= ndim,
      "refine_names: got ",
      names.size() - ellipsis,
      " names for ",
      ndim,
      " batch dims");
  for (const auto& name : names) {
    if (name && *name == "...") {
      const size_t skip = ndim - (names.size() - 1);
      for (size_t i = 0; i < skip; ++i) {
        wanted.emplace_back(std::nullopt);
      }
    } else {
      wanted.push_back(name);
    }
  }
  TORCH_CHECK_VALUE(
      wanted.size() == ndim,
      "refine_names: got ",
      wanted.size(),
      " names for ",
      ndim,
      " batch dims");
  const DimNames current = this->names();
  DimNames refined = current;
  for (size_t i = 0; i < ndim; ++i) {
    if (!wanted[i]) {
      continue;
    }
    TORCH_CHECK(
        !current[i] || *current[i] == *wanted[i],
        "refine_names: cannot coerce TensorDict names ",
        detail::names_repr(current),
        " with ",
        detail::names_repr(wanted),
        ".");
    refined[i] = wanted[i];
  }
  set_names(refined);
  return *this;
}

TensorDict TensorDict::rename(const DimNames& names) const {
  TensorDict result = copy();
  result.set_names(names);
  return result;
}

TensorDict TensorDict::rename_by_map(
    const std::map<std::string, std::string>& old_to_new) const {
  DimNames current = names();
  std::string missing;  // the names not found, quoted, comma-separated
  for (const auto& [from, to] : old_to_new) {
    auto it = std::find(current.begin(), current.end(), from);
    if (it == current.end()) {
      missing += (missing.empty() ? "" : ", ") + detail::python_repr(from);
      continue;
    }
    *it = to;
  }
  TORCH_CHECK_VALUE(
      missing.empty(),
      "Some names to be renamed were not part of the tensordict names: [",
      missing,
      "] vs ",
      detail::names_repr(this->names()),
      ".");
  return rename(current);
}

TensorDict& TensorDict::rename_(const DimNames& names) {
  set_names(names);
  return *this;
}

TENSORDICT_END_NAMESPACE
