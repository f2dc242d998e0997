// Planning a save: every key checked, every file and directory named,
// every meta.json text built, before any file is written. See
// memmap/plan.h and NOTE [Memmap layout].

#include "memmap/plan.h"

#include <c10/util/Exception.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/python_class.h"
#include "core/tensor_dict_impl.h"
#include "io/file_io.h"
#include "io/format.h"
#include "io/staged_tree.h"
#include "memmap/meta.h"
#include "tensordict/errors.h"
#include "tensordict/lazy_stack.h"
#include "tensordict/memmap.h"
#include "tensordict/value.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

namespace {

// The longest file name most file systems take (NAME_MAX).
constexpr size_t kMaxFileName = 255;

// Members of a dict's meta.json that are not entries: a key spelled like
// one would be lost (Python) or misread, so it is refused.
constexpr const char* kReservedKeys[] = {
    "shape", "device", "_type", "_format_version", "_class", "_names"};

}  // namespace

SavePlan::SavePlan(const MemmapOptions& options, bool like, bool inplace)
    : options_(options), like_(like), inplace_(inplace) {}

SavePlan::~SavePlan() = default;

void SavePlan::add_meta(std::string path, std::string content) {
  metas_.push_back({std::move(path), std::move(content)});
}

bool SavePlan::staged() const noexcept {
  return staged_ != nullptr && staged_->staged();
}

std::string SavePlan::final_path(const std::string& path) const {
  return staged_ == nullptr ? path : staged_->final_path(path);
}

void SavePlan::prepare_directory(const std::string& dir, bool is_root) {
  // Planning touches no file, so that a key refused while planning leaves
  // an earlier save in the same place intact; the sink creates the
  // directories, parents first.
  directories_.push_back({dir, is_root});
}

std::string SavePlan::checked_name(
    std::string_view key, const KeyPath& full_key, bool is_collection) const {
  for (const char* reserved : kReservedKeys) {
    TORCH_CHECK(
        key != reserved,
        "cannot save ",
        describe(full_key),
        ": the key '",
        key,
        "' would collide with the '",
        reserved,
        "' member of meta.json; rename it first");
  }
  std::string name;
  if (options_.robust_key()) {
    name = encode_key(key);
  } else {
    TORCH_CHECK(
        is_safe_legacy_key(key, is_collection) && !key.empty(),
        "cannot save ",
        describe(full_key),
        " with robust_key(false): the key is not a safe file name (it is "
        "empty, '.', '..', starts with a drive letter such as 'C:', or holds "
        "'/', '\\\\' or a NUL); use robust_key(true)");
    name = std::string(key);
  }
  const size_t length = name.size() + (is_collection ? 0 : 7);
  TORCH_CHECK(
      length <= kMaxFileName,
      "cannot save ",
      describe(full_key),
      ": its file name would be ",
      length,
      " bytes long, more than the ",
      kMaxFileName,
      " that file systems accept");
  return name;
}

struct SavePlan::Level {
  const TensorDictImpl* src = nullptr;  // null for a lazy stack
  TensorDict dest;
  // A lazy stack entry's level: its elements' destinations, in order.
  std::vector<TensorDict> stack_elements;
  std::string dir;         // empty: anonymous shared memory
  std::string fields_dir;  // `dir`, or its _tensordict for a tensorclass
  Json meta = Json::object();
  std::unordered_set<std::string> names;  // file names taken
};

void SavePlan::plan_dict(
    const TensorDict& src,
    const TensorDict& dest,
    const std::string& dir,
    KeyPath path,
    bool is_root) {
  open_level(src, dest, dir, is_root);
  walk(*src.unsafeGetImpl(), *this, path);
  leave_dict(path, src);
}

void SavePlan::open_level(
    const TensorDict& src, TensorDict dest, std::string dir, bool is_root) {
  Level& level = levels_.emplace_back();
  level.src = src.unsafeGetImpl();
  level.dest = std::move(dest);
  level.dir = std::move(dir);
  level.fields_dir = level.dir;
  // Room for an entry per key and the members leave_dict adds.
  level.meta.get_ref<Json::object_t&>().reserve(level.src->nodes().size() + 8);
  if (!level.dir.empty()) {
    prepare_directory(level.dir, is_root);
    // A Python tensorclass keeps its fields one directory down.
    if (!level.src->python_class.empty()) {
      level.fields_dir = join_path(level.dir, "_tensordict");
      prepare_directory(level.fields_dir, /*is_root=*/false);
    }
  }
}

std::string SavePlan::entry_name(const KeyPath& path, bool is_collection) {
  Level& level = levels_.back();
  if (level.dir.empty()) {
    return "";
  }
  std::string name = checked_name(path.back(), path, is_collection);
  const std::string file = is_collection ? name : name + ".memmap";
  TORCH_CHECK(
      level.names.insert(file).second,
      "cannot save ",
      path.to_string(),
      ": its file name '",
      file,
      "' is taken by another entry");
  return name;
}

bool SavePlan::enter_lazy_stack(
    const KeyPath& path, const LazyStackedTensorDict& stack) {
  const std::string name = entry_name(path, /*is_collection=*/true);
  const std::string& cls = stack.python_class();
  append_member(
      levels_.back().meta,
      std::string(path.back()),
      {{"type", cls.empty() ? "LazyStackedTensorDict" : class_name_of(cls)}});
  const std::string parent_dir = levels_.back().fields_dir;
  Level& level = levels_.emplace_back();  // invalidates references into levels_
  if (!name.empty()) {
    level.dir = join_path(parent_dir, name);
    prepare_directory(level.dir, /*is_root=*/false);
  }
  level.fields_dir = level.dir;
  // A Python tensorclass over a lazy stack keeps the stack one directory
  // down, as for a dict.
  if (!level.dir.empty() && !cls.empty()) {
    level.fields_dir = join_path(level.dir, "_tensordict");
    prepare_directory(level.fields_dir, /*is_root=*/false);
  }
  return true;
}

void SavePlan::leave_lazy_stack(
    const KeyPath& path, const LazyStackedTensorDict& stack) {
  Level level = std::move(levels_.back());
  levels_.pop_back();
  if (!inplace_) {
    LazyStackedTensorDict dest = lazy_stack(
        level.stack_elements, stack.stack_dim(), stack.stack_dim_name());
    if (!stack.python_class().empty()) {
      dest.set_python_class(stack.python_class());
    }
    levels_.back().dest.unsafeGetImpl()->append(
        std::string(path.back()), Value(std::move(dest)));
  }
  if (level.dir.empty()) {
    return;
  }
  const bool spaced = options_.json_style() == JsonStyle::kSpaced;
  add_meta(
      join_path(level.fields_dir, "meta.json"),
      dump_checked(lazy_stack_meta(stack), spaced, spaced, path));
  if (!stack.python_class().empty()) {
    Json class_meta = Json::object();
    class_meta["_type"] = stack.python_class();
    add_meta(
        join_path(level.dir, "meta.json"),
        dump_checked(class_meta, spaced, spaced, path));
  }
}

bool SavePlan::enter_dict(const KeyPath& path, const TensorDict& dict) {
  if (levels_.back().src == nullptr) {
    // An element of the lazy stack being planned: directory "0", "1", ...
    Level& stack_level = levels_.back();
    const TensorDictImpl& impl = *dict.unsafeGetImpl();
    TensorDict dest = dict;
    if (!inplace_) {
      dest =
          make_tensordict(impl.batch_size, c10::Device(c10::kCPU), impl.names);
      dest.unsafeGetImpl()->python_class = impl.python_class;
      stack_level.stack_elements.push_back(dest);
    }
    std::string dir =
        stack_level.dir.empty()
            ? ""
            : join_path(stack_level.fields_dir, std::string(path.back()));
    open_level(dict, std::move(dest), std::move(dir), /*is_root=*/false);
    return true;
  }
  const std::string name = entry_name(path, /*is_collection=*/true);
  Level& parent = levels_.back();
  const std::string key(path.back());
  const TensorDictImpl& impl = *dict.unsafeGetImpl();
  TensorDict dest = dict;
  if (!inplace_) {
    dest = make_tensordict(impl.batch_size, c10::Device(c10::kCPU), impl.names);
    dest.unsafeGetImpl()->python_class = impl.python_class;
    parent.dest.unsafeGetImpl()->append(key, dest);
  }
  const std::string& cls = impl.python_class;
  append_member(
      parent.meta,
      key,
      {{"type", cls.empty() ? "TensorDict" : class_name_of(cls)}});
  std::string dir = name.empty() ? "" : join_path(parent.fields_dir, name);
  open_level(dict, std::move(dest), std::move(dir), /*is_root=*/false);
  return true;
}

void SavePlan::leave_dict(const KeyPath& path, const TensorDict& /*dict*/) {
  Level level = std::move(levels_.back());
  levels_.pop_back();
  TensorDictImpl& out = *level.dest.unsafeGetImpl();
  if (inplace_) {
    out.device = c10::Device(c10::kCPU);
  }
  memmapped_.emplace_back(ImplPtr::reclaim_copy(&out), level.dir);
  if (level.dir.empty()) {
    return;
  }
  const TensorDictImpl& impl = *level.src;
  Json& meta = level.meta;
  meta["shape"] = impl.batch_size;
  meta["device"] = "cpu";
  meta["_type"] = kTensorDictType;
  meta.update(format_members("tensordict:TensorDict"));
  if (!impl.names.empty()) {
    Json names_json = Json::array();
    for (const auto& n : impl.names) {
      names_json.push_back(n ? Json(*n) : Json(nullptr));
    }
    meta["_names"] = std::move(names_json);
  }
  const bool spaced = options_.json_style() == JsonStyle::kSpaced;
  add_meta(
      join_path(level.fields_dir, "meta.json"),
      dump_checked(meta, spaced, spaced, path));
  if (!impl.python_class.empty()) {
    Json class_meta = Json::object();
    class_meta["_type"] = impl.python_class;
    add_meta(
        join_path(level.dir, "meta.json"),
        dump_checked(class_meta, spaced, spaced, path));
  }
}

void SavePlan::non_tensor(const KeyPath& path, const Value& value) {
  const std::string name = entry_name(path, /*is_collection=*/true);
  Level& level = levels_.back();
  const std::string key(path.back());
  if (!inplace_) {
    level.dest.unsafeGetImpl()->append(key, value);
  }
  if (name.empty()) {
    return;
  }
  const std::string dir = join_path(level.fields_dir, name);
  prepare_directory(dir, /*is_root=*/false);
  append_member(level.meta, key, {{"type", value.type_name()}});
  add_meta(
      join_path(dir, "meta.json"),
      non_tensor_meta(value, options_.json_style(), path));
}

void SavePlan::leaf(const KeyPath& path, const at::Tensor& tensor) {
  const std::string name = entry_name(path, /*is_collection=*/false);
  Level& level = levels_.back();
  const std::string key(path.back());
  const std::string what = path.to_string();
  TORCH_CHECK(
      !tensor.is_nested(),
      "cannot save ",
      what,
      ": nested tensors are not supported by memmap yet");
  TORCH_CHECK(
      tensor.layout() == c10::kStrided,
      "cannot save ",
      what,
      ": only strided tensors can be memory-mapped, got layout ",
      tensor.layout());
  TORCH_CHECK(
      is_saveable_dtype(tensor.scalar_type()),
      "cannot save ",
      what,
      ": Python tensordict cannot load the dtype ",
      dtype_name(tensor.scalar_type()));
  LeafJob job;
  job.source = tensor;
  job.path = name.empty() ? "" : join_path(level.fields_dir, name + ".memmap");
  job.what = what;
  job.dest = ImplPtr::reclaim_copy(level.dest.unsafeGetImpl());
  job.dest_key = key;
  if (job.path.empty() && !like_ && !inplace_ &&
      MemoryMappedTensor::is_memmap(tensor)) {
    // memmap() without a prefix of a leaf that is already mapped (a file or
    // shared memory) keeps it, as Python does: `td.memmap().memmap()`
    // returns the same tensors.
    job.result = tensor;
  } else if (const auto backing = mapped_filename(tensor)) {
    const std::string final_file = final_path(job.path);
    if (!job.path.empty() && same_file(*backing, final_file) &&
        tensor.is_contiguous() && tensor.storage_offset() == 0 && !like_) {
      // Already this very file (memmap_ again, or a reloaded dict saved
      // in place): nothing to write, but a staged tree needs its name.
      job.result = tensor;
      if (final_file != job.path) {
        job.link_source = final_file;
      }
    } else {
      TORCH_CHECK(
          options_.copy_existing() || like_,
          "A filename was provided but the tensor already has a file "
          "associated (",
          *backing,
          "). To copy the tensor onto the new location, pass "
          "copy_existing(true). (",
          what,
          ")");
    }
  }
  // existsok(false) refuses an existing file while planning, before any
  // file is written or removed (write_leaf_file checks it again). A staged
  // tree holds only this process's files (a reused spare's).
  TORCH_CHECK(
      options_.existsok() || staged() || job.path.empty() ||
          job.result.defined() || tensor.numel() == 0 ||
          path_kind(job.path) == PathKind::kMissing,
      "The file ",
      job.path,
      " already exists (",
      what,
      "); pass existsok(true) to overwrite it.");
  if (!inplace_) {
    job.dest->append(key, tensor);
  }
  total_bytes_ += static_cast<int64_t>(tensor.nbytes());
  leaves_.push_back(std::move(job));
  append_member(
      level.meta,
      key,
      leaf_meta(tensor.device().str(), tensor.sizes(), tensor.scalar_type()));
}

void SavePlan::for_each_planned_file(
    c10::function_ref<void(const std::string&, const std::string&)> meta,
    c10::function_ref<void(const std::string&, const at::Tensor&)> leaf) const {
  for (const auto& job : metas_) {
    meta(job.path, job.content);
  }
  for (const auto& job : leaves_) {
    if (!job.path.empty() && job.source.numel() > 0) {
      leaf(job.path, job.source);
    }
  }
}

at::Tensor leaf_bytes(const at::Tensor& tensor) {
  if (tensor.is_cpu() && !tensor.is_conj() && !tensor.is_neg() &&
      tensor.is_contiguous()) {
    return tensor;  // its bytes as they are, without a dispatched op
  }
  at::Tensor t = tensor.detach();
  if (!t.device().is_cpu()) {
    t = t.cpu();
  }
  return t.resolve_conj().resolve_neg().contiguous();
}

void SavePlan::mark_memmapped() {
  for (auto& [impl, dir] : memmapped_) {
    impl->memmap.is_memmap = true;
    impl->memmap.prefix = final_path(dir);
  }
}

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
      dir = join_path(root, "_tensordict");
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
TENSORDICT_END_NAMESPACE
