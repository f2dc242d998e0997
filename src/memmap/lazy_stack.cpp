// The memmap members of LazyStackedTensorDict (declared in the public
// include/tensordict/lazy_stack.h): a lazy stack at the root saved and
// loaded in Python's layout by the engines of writer.cpp and reader.cpp.
// See NOTE [Memmap layout].

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
#include "memmap/archive.h"
#include "memmap/writer.h"
#include "tensordict/memmap.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

// The elements of a stack saved at a directory: "0", "1", ... in the
// directory itself, or in its "_tensordict" for a Python tensorclass.
constexpr const char* kFieldsDir = "_tensordict";

// Saves `stack` as the root of a tree (the body of memmap, memmap_ and
// memmap_like): one SavePlan, so a lazy stack gets the crash safety of any
// save (planned first, staged beside the prefix, swapped in, removed on an
// error). Returns the new stack, or `stack` itself in place.
LazyStackedTensorDict save_lazy_stack(
    const LazyStackedTensorDict& stack,
    const MemmapOptions& options,
    bool like,
    bool inplace) {
  const std::vector<TensorDict>& elements = stack.tensordicts();
  if (inplace) {
    for (const TensorDict& element : elements) {
      TORCH_CHECK(
          !element.unsafeGetImpl()->shared,
          "memmap and shared memory are mutually exclusive features.");
    }
  }
  SavePlan plan(options, like, inplace);
  const std::string root = plan.begin(options.prefix());
  std::vector<TensorDict> dests =
      plan_lazy_stack_root(plan, stack, root, options, inplace);
  plan.run();
  for (TensorDict& dest : dests) {
    dest.lock_();
  }
  plan.mark_memmapped();
  if (inplace) {
    stack.unsafeGetImpl()->device = c10::Device(c10::kCPU);
    return stack;
  }
  LazyStackedTensorDict out =
      lazy_stack(dests, stack.stack_dim(), stack.stack_dim_name());
  out.set_python_class(stack.python_class());
  return out;
}

}  // namespace

std::vector<TensorDict> plan_lazy_stack_root(
    SavePlan& plan,
    const LazyStackedTensorDict& stack,
    const std::string& root,
    const MemmapOptions& options,
    bool inplace) {
  const bool tensorclass = !stack.python_class().empty();
  std::string dir = root;
  if (!root.empty()) {
    plan.prepare_directory(root, /*is_root=*/true);
    if (tensorclass) {
      dir = join_path(root, kFieldsDir);
      plan.prepare_directory(dir, /*is_root=*/false);
    }
  }
  const std::vector<TensorDict>& elements = stack.tensordicts();
  std::vector<TensorDict> dests;
  dests.reserve(elements.size());
  for (size_t i = 0; i < elements.size(); ++i) {
    const TensorDictImpl& impl = *elements[i].unsafeGetImpl();
    TensorDict dest = elements[i];
    if (!inplace) {
      dest =
          make_tensordict(impl.batch_size, c10::Device(c10::kCPU), impl.names);
      dest.unsafeGetImpl()->python_class = impl.python_class;
    }
    const std::string index = std::to_string(i);
    KeyPath path;
    path.push(index);
    plan.plan_dict(
        elements[i],
        dest,
        dir.empty() ? "" : join_path(dir, index),
        path,
        /*is_root=*/false);
    dests.push_back(std::move(dest));
  }
  if (!dir.empty()) {
    const bool spaced = options.json_style() == JsonStyle::kSpaced;
    plan.add_meta(
        join_path(dir, "meta.json"),
        dump_json(lazy_stack_meta(stack), spaced, spaced));
    if (tensorclass) {
      Json class_meta = Json::object();
      class_meta["_type"] = stack.python_class();
      plan.add_meta(
          join_path(root, "meta.json"), dump_json(class_meta, spaced, spaced));
    }
  }
  return dests;
}

}  // namespace detail

LazyStackedTensorDict memmap(
    const LazyStackedTensorDict& stack, const MemmapOptions& options) {
  return stack.memmap(options);
}

LazyStackedTensorDict LazyStackedTensorDict::memmap(
    const MemmapOptions& options) const {
  if (detail::writes_archive(options, detail::SaveKind::kMemmap)) {
    return detail::save_archive(  // NOTE [Memmap archives]
        *this,
        options,
        /*like=*/false);
  }
  return detail::save_lazy_stack(
      *this, options, /*like=*/false, /*inplace=*/false);
}

std::future<LazyStackedTensorDict> LazyStackedTensorDict::memmap_async(
    const MemmapOptions& options) const {
  LazyStackedTensorDict self = *this;
  return std::async(
      std::launch::async, [self, options] { return self.memmap(options); });
}

LazyStackedTensorDict& LazyStackedTensorDict::memmap_(
    const MemmapOptions& options) {
  (void)detail::writes_archive(options, detail::SaveKind::kMemmapInPlace);
  (void)detail::save_lazy_stack(
      *this, options, /*like=*/false, /*inplace=*/true);
  return *this;
}

std::future<LazyStackedTensorDict> LazyStackedTensorDict::memmap_async_(
    const MemmapOptions& options) {
  LazyStackedTensorDict self = *this;
  return std::async(std::launch::async, [self, options]() mutable {
    self.memmap_(options);
    return self;
  });
}

LazyStackedTensorDict LazyStackedTensorDict::memmap_like(
    const MemmapOptions& options) const {
  if (detail::writes_archive(options, detail::SaveKind::kMemmapLike)) {
    return detail::save_archive(*this, options, /*like=*/true);
  }
  return detail::save_lazy_stack(
      *this, options, /*like=*/true, /*inplace=*/false);
}

std::future<LazyStackedTensorDict> LazyStackedTensorDict::memmap_like_async(
    const MemmapOptions& options) const {
  LazyStackedTensorDict self = *this;
  return std::async(std::launch::async, [self, options] {
    return self.memmap_like(options);
  });
}

LazyStackedTensorDict LazyStackedTensorDict::save(
    const MemmapOptions& options) const {
  return memmap(options);
}

LazyStackedTensorDict LazyStackedTensorDict::dumps(
    const MemmapOptions& options) const {
  return memmap(options);
}

std::future<LazyStackedTensorDict> LazyStackedTensorDict::save_async(
    const MemmapOptions& options) const {
  return memmap_async(options);
}

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
