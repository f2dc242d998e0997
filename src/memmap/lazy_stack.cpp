// The load members of LazyStackedTensorDict (declared in the public
// include/tensordict/lazy_stack.h): a lazy stack at the root loaded in
// Python's layout by the engine of reader.cpp. Its save members are
// memmap/save.cpp's. See NOTE [Memmap layout].

#include <c10/util/Exception.h>

#include <future>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/lazy_stack_impl.h"
#include "core/tensor_dict_impl.h"
#include "io/file_io.h"
#include "io/format.h"
#include "tensordict/memmap.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

// The elements of a stack saved at a directory: "0", "1", ... in the
// directory itself, or in its "_tensordict" for a Python tensorclass.
constexpr const char* kFieldsDir = "_tensordict";

}  // namespace

}  // namespace detail

LazyStackedTensorDict LazyStackedTensorDict::load_memmap(
    const std::string& prefix, const LoadMemmapOptions& options) {
  LoadedTree tree = load_memmap_any(prefix, options);
  auto* stack = std::get_if<LazyStackedTensorDict>(&tree);
  TORCH_CHECK_VALUE(
      stack != nullptr,
      prefix,
      " holds a ",
      std::get<TensorDict>(tree).python_class().empty()
          ? std::string("TensorDict")
          : std::get<TensorDict>(tree).python_class(),
      ", not a lazy stack: load it with TensorDict::load_memmap (or "
      "load_memmap_any)");
  return *stack;
}

LazyStackedTensorDict LazyStackedTensorDict::load(
    const std::string& prefix, const LoadMemmapOptions& options) {
  return load_memmap(prefix, options);
}

LazyStackedTensorDict& LazyStackedTensorDict::load_memmap_(
    const std::string& prefix, const LoadMemmapOptions& options) {
  // Every meta.json is read first (a meta-device load maps no file): a tree
  // that does not fit is refused before the first element changes.
  const LazyStackedTensorDict saved = load_memmap(
      prefix, LoadMemmapOptions(options).device(c10::Device(c10::kMeta)));
  const size_t n = tensordicts().size();
  TORCH_CHECK_VALUE(
      saved.tensordicts().size() == n,
      "Cannot load ",
      saved.tensordicts().size(),
      " stacked tensordicts into a stack of ",
      n,
      " tensordicts.");
  TORCH_CHECK_VALUE(
      saved.stack_dim() == stack_dim(),
      "Cannot load the lazy stack saved at ",
      prefix,
      " with stack dim ",
      saved.stack_dim(),
      " into a stack of stack dim ",
      stack_dim(),
      ".");
  // Each element loads through TensorDict::load_memmap_, from the
  // sub-directory of the saved stack (a subpath, so archives work too).
  std::vector<std::string> base = options.subpath();
  if (!saved.python_class().empty()) {
    base.emplace_back(detail::kFieldsDir);
  }
  for (size_t i = 0; i < n; ++i) {
    std::vector<std::string> subpath = base;
    subpath.push_back(std::to_string(i));
    TensorDict element = tensordicts()[i];
    try {
      element.load_memmap_(prefix, LoadMemmapOptions(options).subpath(subpath));
    } catch (c10::Error& e) {
      TORCH_RETHROW(e, "while loading element ", i, " of the lazy stack");
    }
  }
  return *this;
}

LazyStackedTensorDict& LazyStackedTensorDict::load_(
    const std::string& prefix, const LoadMemmapOptions& options) {
  return load_memmap_(prefix, options);
}

LazyStackedTensorDict& LazyStackedTensorDict::memmap_refresh_() {
  const std::optional<std::string> path = saved_path();
  TORCH_CHECK(
      is_memmap() && path,
      "memmap_refresh_ needs a lazy stack memmapped to a directory "
      "(is_memmap() and saved_path()); this one is not");
  return load_memmap_(*path);
}

bool LazyStackedTensorDict::is_memmap() const {
  for (const TensorDict& element : tensordicts()) {
    if (!element.is_memmap()) {
      return false;
    }
  }
  return true;
}

std::optional<std::string> LazyStackedTensorDict::saved_path() const {
  // The elements know their directories; the stack's is their parent when
  // they are its "0", "1", ... in order.
  std::string parent;
  const std::vector<TensorDict>& elements = tensordicts();
  for (size_t i = 0; i < elements.size(); ++i) {
    const std::optional<std::string> path = elements[i].saved_path();
    const std::string suffix = "/" + std::to_string(i);
    if (!path || path->size() <= suffix.size() ||
        path->compare(path->size() - suffix.size(), suffix.size(), suffix) !=
            0) {
      return std::nullopt;
    }
    const std::string dir = path->substr(0, path->size() - suffix.size());
    if (i == 0) {
      parent = dir;
    } else if (dir != parent) {
      return std::nullopt;
    }
  }
  // A Python tensorclass keeps the stack one directory down.
  const std::string fields = std::string("/") + detail::kFieldsDir;
  if (!python_class().empty() && parent.size() > fields.size() &&
      parent.compare(parent.size() - fields.size(), fields.size(), fields) ==
          0) {
    parent.resize(parent.size() - fields.size());
  }
  return parent;
}

TENSORDICT_END_NAMESPACE
