// The front door of every save: the memmap, memmap_, memmap_like, save,
// dumps and *_async members of TensorDict, LazyStackedTensorDict,
// NonTensorData and NonTensorStack (and so TensorClass's, which call them)
// expand from one list below and land in one function per root kind, which
// plans the tree (memmap/plan.h) and hands the plan to a sink: the
// directory sink (memmap/directory_sink.h) or the archive sink
// (memmap/archive_sink.h). Also make_memmap. See NOTE [Memmap layout].

#include <c10/util/Exception.h>

#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/lazy_stack_impl.h"
#include "core/tensor_dict_impl.h"
#include "io/atomic_file.h"
#include "io/file_io.h"
#include "io/format.h"
#include "io/staged_tree.h"
#include "memmap/archive_sink.h"
#include "memmap/directory_sink.h"
#include "memmap/meta.h"
#include "memmap/plan.h"
#include "tensordict/errors.h"
#include "tensordict/lazy_stack.h"
#include "tensordict/memmap.h"
#include "tensordict/non_tensor.h"
#include "tensordict/tensor_dict.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

// A new dict of `td`'s shape on the CPU, for a save that is not in place.
TensorDict empty_like_on_cpu(const TensorDict& td) {
  const TensorDictImpl& impl = *td.unsafeGetImpl();
  return make_tensordict(impl.batch_size, c10::Device(c10::kCPU), impl.names);
}

// How an archive save is returned: loaded, as Python does; memmap_like's
// maps it shared (mode r+), so that writes into its leaves reach the file.
LoadMemmapOptions reload_options(bool like) {
  return LoadMemmapOptions().mode(like ? MapMode::kReadWrite : MapMode::kAuto);
}

// Saves `td` (TensorDict's memmap, memmap_ and memmap_like).
TensorDict save(
    const TensorDict& td, const MemmapOptions& options, SaveKind kind) {
  const bool like = kind == SaveKind::kMemmapLike;
  const bool inplace = kind == SaveKind::kMemmapInPlace;
  if (writes_archive(options, kind)) {  // NOTE [Memmap archives]
    write_tree_archive(
        options, like, [&](SavePlan& plan, const std::string& root) {
          plan.plan_dict(
              td, empty_like_on_cpu(td), root, KeyPath(), /*is_root=*/true);
        });
    return TensorDict::load_memmap(options.prefix(), reload_options(like));
  }
  const TensorDictImpl& impl = *td.unsafeGetImpl();
  TORCH_CHECK(
      !(inplace && impl.shared),
      "memmap and shared memory are mutually exclusive features.");
  TensorDict dest = td;
  if (!inplace) {
    dest = empty_like_on_cpu(td);
    dest.unsafeGetImpl()->python_class = impl.python_class;
  }
  SavePlan plan(options, like, inplace);
  StagedTree tree = stage_directory(options);
  plan.stage_into(tree);
  plan.plan_dict(td, dest, tree.dir(), KeyPath(), /*is_root=*/true);
  write_directory(plan, tree);
  dest.lock_();
  plan.mark_memmapped();
  return dest;
}

// Saves `stack` as the root of a tree: one SavePlan, so a lazy stack gets
// the crash safety of any save (planned first, staged beside the prefix,
// swapped in, removed on an error). Returns the new stack, or `stack`
// itself in place.
LazyStackedTensorDict save(
    const LazyStackedTensorDict& stack,
    const MemmapOptions& options,
    SaveKind kind) {
  const bool like = kind == SaveKind::kMemmapLike;
  const bool inplace = kind == SaveKind::kMemmapInPlace;
  if (writes_archive(options, kind)) {  // NOTE [Memmap archives]
    write_tree_archive(
        options, like, [&](SavePlan& plan, const std::string& root) {
          (void)plan_lazy_stack_root(
              plan, stack, root, options, /*inplace=*/false);
        });
    LoadedTree tree = load_memmap_any(options.prefix(), reload_options(like));
    auto* loaded = std::get_if<LazyStackedTensorDict>(&tree);
    TORCH_INTERNAL_ASSERT(loaded != nullptr);
    return *loaded;
  }
  if (inplace) {
    for (const TensorDict& element : stack.tensordicts()) {
      TORCH_CHECK(
          !element.unsafeGetImpl()->shared,
          "memmap and shared memory are mutually exclusive features.");
    }
  }
  SavePlan plan(options, like, inplace);
  StagedTree tree = stage_directory(options);
  plan.stage_into(tree);
  std::vector<TensorDict> dests =
      plan_lazy_stack_root(plan, stack, tree.dir(), options, inplace);
  write_directory(plan, tree);
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

// Saves a root NonTensorData or NonTensorStack; returns the directory it
// is now mapped from, or null when the options name none.
std::shared_ptr<const std::string> save(
    const Value& value, const MemmapOptions& options) {
  save_non_tensor_root(value, options);
  if (options.prefix().empty()) {
    return nullptr;
  }
  return std::make_shared<const std::string>(options.prefix());
}

}  // namespace
}  // namespace detail

// NOTE [One list of save members]: every saveable class declares the same
// save members, and each member is one of four shapes: a save returning the
// result (COPY), a save into the object itself (IN_PLACE), and those two on
// another thread (ASYNC, ASYNC_IN_PLACE, naming the member they run). The
// list says which member is which; a class's style says how a shape is
// spelled for it: a handle (TensorDict, LazyStackedTensorDict) saves through
// `detail::save` and aliases itself into the thread; a value
// (NonTensorData, NonTensorStack) saves into itself and keeps the saved
// path. NonTensorStack has no async members.
#define TENSORDICT_SAVE_MEMBERS(X, Class, style)  \
  X(Class, style, memmap, COPY, kMemmap)          \
  X(Class, style, memmap_like, COPY, kMemmapLike) \
  X(Class, style, save, COPY, kMemmap)            \
  X(Class, style, dumps, COPY, kMemmap)           \
  X(Class, style, memmap_, IN_PLACE, kMemmapInPlace)
#define TENSORDICT_ASYNC_SAVE_MEMBERS(X, Class, style)   \
  X(Class, style, memmap_async, ASYNC, memmap)           \
  X(Class, style, memmap_like_async, ASYNC, memmap_like) \
  X(Class, style, save_async, ASYNC, memmap)             \
  X(Class, style, memmap_async_, ASYNC_IN_PLACE, memmap_)

#define TENSORDICT_DEFINE_SAVE(Class, style, name, shape, arg) \
  TENSORDICT_SAVE_##style##_##shape(Class, name, arg)

#define TENSORDICT_SAVE_HANDLE_COPY(Class, name, kind)           \
  Class Class::name(const MemmapOptions& options) const {        \
    return detail::save(*this, options, detail::SaveKind::kind); \
  }
#define TENSORDICT_SAVE_HANDLE_IN_PLACE(Class, name, kind)      \
  Class& Class::name(const MemmapOptions& options) {            \
    (void)detail::save(*this, options, detail::SaveKind::kind); \
    return *this;                                               \
  }
#define TENSORDICT_SAVE_HANDLE_ASYNC(Class, name, member)              \
  std::future<Class> Class::name(const MemmapOptions& options) const { \
    return std::async(std::launch::async, [self = *this, options] {    \
      return self.member(options);                                     \
    });                                                                \
  }
// The handle copy aliases `*this`: the thread saves into the same object.
#define TENSORDICT_SAVE_HANDLE_ASYNC_IN_PLACE(Class, name, member)       \
  std::future<Class> Class::name(const MemmapOptions& options) {         \
    return std::async(                                                   \
        std::launch::async, [self = *this, options]() mutable -> Class { \
          self.member(options);                                          \
          return self;                                                   \
        });                                                              \
  }
#define TENSORDICT_SAVE_VALUE_COPY(Class, name, kind)     \
  Class Class::name(const MemmapOptions& options) const { \
    Class out = *this;                                    \
    out.memmap_(options);                                 \
    return out;                                           \
  }
#define TENSORDICT_SAVE_VALUE_IN_PLACE(Class, name, kind) \
  Class& Class::name(const MemmapOptions& options) {      \
    if (auto dir = detail::save(Value(*this), options)) { \
      saved_path_ = std::move(dir);                       \
    }                                                     \
    return *this;                                         \
  }
#define TENSORDICT_SAVE_VALUE_ASYNC(Class, name, member) \
  TENSORDICT_SAVE_HANDLE_ASYNC(Class, name, member)
// A value is not a handle: the thread saves `*this` itself, which must
// outlive the future.
#define TENSORDICT_SAVE_VALUE_ASYNC_IN_PLACE(Class, name, member)      \
  std::future<Class> Class::name(const MemmapOptions& options) {       \
    return std::async(std::launch::async, [this, options]() -> Class { \
      return member(options);                                          \
    });                                                                \
  }

TENSORDICT_SAVE_MEMBERS(TENSORDICT_DEFINE_SAVE, TensorDict, HANDLE)
TENSORDICT_ASYNC_SAVE_MEMBERS(TENSORDICT_DEFINE_SAVE, TensorDict, HANDLE)
TENSORDICT_SAVE_MEMBERS(TENSORDICT_DEFINE_SAVE, LazyStackedTensorDict, HANDLE)
TENSORDICT_ASYNC_SAVE_MEMBERS(
    TENSORDICT_DEFINE_SAVE, LazyStackedTensorDict, HANDLE)
TENSORDICT_SAVE_MEMBERS(TENSORDICT_DEFINE_SAVE, NonTensorData, VALUE)
TENSORDICT_ASYNC_SAVE_MEMBERS(TENSORDICT_DEFINE_SAVE, NonTensorData, VALUE)
TENSORDICT_SAVE_MEMBERS(TENSORDICT_DEFINE_SAVE, NonTensorStack, VALUE)

#undef TENSORDICT_SAVE_VALUE_ASYNC_IN_PLACE
#undef TENSORDICT_SAVE_VALUE_ASYNC
#undef TENSORDICT_SAVE_VALUE_IN_PLACE
#undef TENSORDICT_SAVE_VALUE_COPY
#undef TENSORDICT_SAVE_HANDLE_ASYNC_IN_PLACE
#undef TENSORDICT_SAVE_HANDLE_ASYNC
#undef TENSORDICT_SAVE_HANDLE_IN_PLACE
#undef TENSORDICT_SAVE_HANDLE_COPY
#undef TENSORDICT_DEFINE_SAVE
#undef TENSORDICT_ASYNC_SAVE_MEMBERS
#undef TENSORDICT_SAVE_MEMBERS

LazyStackedTensorDict memmap(
    const LazyStackedTensorDict& stack, const MemmapOptions& options) {
  return stack.memmap(options);
}

bool TensorDict::is_memmap() const noexcept {
  return impl_->memmap.is_memmap;
}

std::optional<std::string> TensorDict::saved_path() const {
  if (impl_->memmap.prefix.empty()) {
    return std::nullopt;
  }
  return impl_->memmap.prefix;
}

namespace {

// The directory holding a memmapped dict's entries.
std::string fields_directory(const detail::TensorDictImpl& impl) {
  return impl.python_class.empty()
             ? impl.memmap.prefix
             : detail::join_path(impl.memmap.prefix, "_tensordict");
}

// Adds `entry` under `key` to the meta.json in `dir`, keeping its style:
// Python re-reads and rewrites the file too, so that entries another
// process added survive.
void add_meta_entry(
    const std::string& dir, const std::string& key, Json entry) {
  const std::string path = detail::join_path(dir, "meta.json");
  const std::string text = detail::read_small_file(path, int64_t{1} << 30);
  Json meta = detail::parse_meta_json(text, 1 << 20, path);
  meta[key] = std::move(entry);
  const bool spaced = text.find("\": ") != std::string::npos;
  detail::write_file_atomically(
      path, detail::dump_json(meta, spaced, spaced), false);
}

}  // namespace

at::Tensor TensorDict::make_memmap(
    const NestedKey& key, c10::IntArrayRef shape, c10::ScalarType dtype) {
  TORCH_CHECK(
      impl_->memmap.is_memmap && !impl_->memmap.prefix.empty(),
      "make_memmap needs a dict memmapped to a directory (is_memmap() and "
      "saved_path()); ",
      key.to_string(),
      " cannot be added to this one");
  TORCH_CHECK_VALUE(
      detail::is_saveable_dtype(dtype),
      "make_memmap: Python tensordict cannot load the dtype ",
      detail::dtype_name(dtype));
  MemmapOptions naming;  // default key encoding, for checked_name
  detail::SavePlan plan(naming, /*like=*/true, /*inplace=*/true);
  const detail::KeyPath full(key);
  // The deepest existing level, and the names of the levels to create.
  detail::TensorDictImpl* level = impl_.get();
  size_t depth = 0;
  for (; depth + 1 < key.size(); ++depth) {
    const std::string part(key[depth]);
    const detail::Node* node = level->find(part);
    if (node == nullptr) {
      break;
    }
    TENSORDICT_CHECK_KEY(
        node->value.is_tensordict(),
        "make_memmap: ",
        key.to_string(),
        " walks through the entry '",
        part,
        "', which is not a tensordict");
    level = node->value.tensordict().unsafeGetImpl();
  }
  const std::string last(key[key.size() - 1]);
  TORCH_CHECK(
      depth + 1 < key.size() || level->find(last) == nullptr,
      "make_memmap: the key ",
      key.to_string(),
      " already exists");
  TORCH_CHECK_VALUE(
      shape.size() >= level->batch_size.size() &&
          shape.slice(0, level->batch_size.size()) ==
              c10::IntArrayRef(level->batch_size),
      "make_memmap: the shape ",
      shape,
      " of ",
      key.to_string(),
      " does not start with the batch size ",
      c10::IntArrayRef(level->batch_size));
  // The files: new directories and the leaf first, then the new levels'
  // meta.json files, deepest first, and last the one rewrite of an existing
  // meta.json that makes them part of the tree, so that a kill leaves the
  // old tree or the new one.
  std::vector<std::string> new_dirs;
  std::string dir = fields_directory(*level);
  for (size_t i = depth; i + 1 < key.size(); ++i) {
    dir = detail::join_path(
        dir, plan.checked_name(key[i], full, /*is_collection=*/true));
    new_dirs.push_back(dir);
  }
  const std::string file = detail::join_path(
      dir, plan.checked_name(last, full, /*is_collection=*/false) + ".memmap");
  // On an error, what was created goes again: the first new directory
  // (holding the rest), or the leaf file. The existing meta.json is
  // rewritten last, so until then the tree is the old one.
  const std::string created = new_dirs.empty() ? file : new_dirs.front();
  const bool was_missing =
      detail::path_kind(created) == detail::PathKind::kMissing;
  at::Tensor tensor;
  try {
    for (const auto& new_dir : new_dirs) {
      detail::ensure_directory(new_dir, false, false, false);
    }
    tensor = MemoryMappedTensor::empty(shape, dtype, file);
    Json entry = detail::leaf_meta("cpu", shape, dtype);
    std::string entry_key = last;
    for (size_t i = new_dirs.size(); i-- > 0;) {
      Json meta = Json::object();
      meta[entry_key] = std::move(entry);
      meta["shape"] = level->batch_size;
      meta["device"] = "cpu";
      meta["_type"] = detail::kTensorDictType;
      meta.update(detail::format_members("tensordict:TensorDict"));
      detail::write_file_atomically(
          detail::join_path(new_dirs[i], "meta.json"),
          detail::dump_json(meta, false, false),
          false);
      entry = {{"type", "TensorDict"}};
      entry_key = std::string(key[depth + i]);
    }
    add_meta_entry(fields_directory(*level), entry_key, std::move(entry));
  } catch (...) {
    try {
      if (was_missing) {
        detail::remove_tree(created);
      }
    } catch (...) {  // NOLINT(bugprone-empty-catch): the first error counts
    }
    throw;
  }
  // The dicts, as the files now say.
  for (size_t i = 0; i < new_dirs.size(); ++i) {
    TensorDict child = detail::make_tensordict(
        level->batch_size, c10::Device(c10::kCPU), level->names);
    detail::TensorDictImpl* child_impl = child.unsafeGetImpl();
    child_impl->memmap.prefix = new_dirs[i];
    child_impl->memmap.is_memmap = true;
    child_impl->locked = level->locked;
    if (level->locked) {
      child_impl->lock_parents.emplace_back(
          detail::ImplPtr::reclaim_copy(level));
    }
    level->append(std::string(key[depth + i]), child);
    level = child_impl;
  }
  level->append(last, tensor);
  return tensor;
}

TENSORDICT_END_NAMESPACE
