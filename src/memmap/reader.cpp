// Loading: TensorDict::load_memmap and friends. Every member of every
// meta.json is checked before it is used; see NOTE [Memmap layout].

#include "memmap/reader.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/python_class.h"
#include "core/tensor_dict_impl.h"
#include "core/walk.h"
#include "io/file_io.h"
#include "io/format.h"
#include "io/metadata_reader.h"
#include "io/pickle.h"
#include "memmap/append.h"
#include "memmap/archive.h"
#include "tensordict/errors.h"
#include "tensordict/memmap.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

// More lazy-stack elements than this would be a hostile directory.
constexpr int64_t kMaxStackElements = int64_t{1} << 24;

class Loader {
 public:
  /// With `problems`, entries that fail to load are recorded there and
  /// skipped instead of throwing (verify_memmap).
  /// `files`: where the files are read (a directory or an archive).
  explicit Loader(
      const LoadMemmapOptions& options,
      std::vector<std::string>* problems = nullptr,
      const TreeFiles& files = file_system_files())
      : options_(options), problems_(problems), files_(files) {
    meta_device_ = options.device() && options.device()->is_meta();
  }

  /// Reads the meta.json files of a killed append's new rows where Python's
  /// rule finishes it (see NOTE [Appending rows] in src/memmap/append.cpp);
  /// `prefix` is the root of the tree.
  void recover_appends(const std::string& prefix) {
    append_root_ = prefix;
  }

  Json read_meta(const std::string& dir) {
    std::string path = join_path(dir, "meta.json");
    if (append_root_) {
      std::string temporary = append_temporary(dir);
      if (files_.kind(temporary) == PathKind::kFile) {
        // Decided once, at the first temporary: a tree without any (every
        // tree but a killed append's) costs no walk.
        if (!append_forward_) {
          append_forward_ = append_rolls_forward(
              *append_root_, append_temporaries(*append_root_));
        }
        if (*append_forward_) {
          path = std::move(temporary);
        }
      }
    }
    const PathKind kind = files_.kind(path);
    TORCH_CHECK(
        kind != PathKind::kMissing,
        "no meta.json in ",
        dir,
        " (",
        describe(path_),
        "): not a memmap directory, or a save that did not complete");
    Json meta = parse_meta_json(
        files_.read_small(path, options_.max_meta_bytes()),
        options_.max_depth(),
        path);
    const auto version = meta.find("_format_version");
    if (version != meta.end() && version->is_number_integer()) {
      TORCH_CHECK(
          version->get<int64_t>() <= kMemmapFormatVersion,
          path,
          " was saved in the format version ",
          version->get<int64_t>(),
          ", but this version of tensordict reads the format versions up to ",
          kMemmapFormatVersion,
          ". Upgrade tensordict to load it.");
    }
    const auto type = meta.find("_type");
    TENSORDICT_CHECK_METADATA(
        MetadataReader(path, path_),
        type != meta.end() && type->is_string(),
        "it has no \"_type\" string naming the class saved");
    return meta;
  }

  // Loads any collection: a dict, a tensorclass, a lazy stack (handed to
  // `lazy` when given), a NonTensorData or a NonTensorStack.
  std::optional<Value> load_collection(
      const std::string& dir,
      c10::IntArrayRef parent_batch,
      int64_t depth,
      std::optional<LazyStackedTensorDict>* lazy = nullptr) {
    TORCH_CHECK(
        depth <= options_.max_depth(),
        "memmap directories nest deeper than ",
        options_.max_depth(),
        " levels at ",
        describe(path_),
        " (LoadMemmapOptions::max_depth)");
    Json meta = read_meta(dir);
    const std::string type = meta["_type"].get<std::string>();
    if (type == kTensorDictType || type == kTensorDictParamsType) {
      return Value(load_dict(dir, meta, depth));
    }
    if (type == kNonTensorDataType || type == kMetaDataType) {
      return load_non_tensor_data(dir, meta, parent_batch, depth);
    }
    if (type == kNonTensorStackType) {
      return load_non_tensor_stack(dir, meta, parent_batch);
    }
    if (type == kLazyStackType) {
      return lazy_stack_value(load_lazy_stack(dir, meta, depth), lazy);
    }
    return load_tensorclass(dir, meta, type, depth, lazy);
  }

  // A lazy stack: handed to `lazy` when given (the root of
  // load_memmap_any), else the entry itself.
  static std::optional<Value> lazy_stack_value(
      LazyStackedTensorDict stack, std::optional<LazyStackedTensorDict>* lazy) {
    if (lazy != nullptr) {
      *lazy = std::move(stack);
      return std::nullopt;
    }
    return Value(std::move(stack));
  }

  TensorDict load_dict(
      const std::string& dir, const Json& meta, int64_t depth) {
    const std::string meta_path = join_path(dir, "meta.json");
    const MetadataReader reader(meta_path, path_);
    const auto shape = meta.find("shape");
    const std::vector<int64_t> batch = shape == meta.end()
                                           ? std::vector<int64_t>{}
                                           : reader.shape(*shape, "shape");
    std::optional<c10::Device> device = options_.device();
    if (const auto saved = meta.find("device"); saved != meta.end()) {
      const std::optional<c10::Device> saved_device = reader.device(*saved);
      TORCH_CHECK(
          !saved_device || saved_device->is_cpu() || options_.device(),
          describe(path_),
          " in ",
          dir,
          " was saved from device ",
          saved->get<std::string>(),
          "; pass LoadMemmapOptions().device(...) to choose where it loads");
      device = device ? device : saved_device;
    }
    TensorDict result(batch, device);
    // As Python, which ignores a "_names" that is not a list.
    const auto names = meta.find("_names");
    if (names != meta.end() && names->is_array()) {
      result.set_names(reader.names(*names, batch.size(), "_names"));
    }
    if (!meta_device_) {
      mappings_.reserve(tensor_entries(meta), dir, path_);
    }
    for (const auto& [name, entry] : meta.items()) {
      if (!entry.is_object()) {
        continue;  // shape, device, _type and the version members
      }
      const PathPart part(path_, name);
      try {
        std::optional<Value> value = load_entry(
            dir, name, entry, MetadataReader(meta_path, path_), batch, depth);
        if (value) {
          result.set(NestedKey(std::string(name)), *value);
        }
      } catch (c10::Error& e) {
        if (problems_ == nullptr) {
          TORCH_RETHROW(e, "while loading ", path_.to_string(), " from ", dir);
        }
        problems_->push_back(path_.to_string() + " in " + dir + ": " + e.msg());
      }
    }
    if (!files_.is_archive()) {
      result.unsafeGetImpl()->memmap.prefix = dir;
    }
    return result;
  }

  LazyStackedTensorDict load_lazy_stack(
      const std::string& dir, const Json& meta, int64_t depth) {
    const std::string meta_path = join_path(dir, "meta.json");
    const MetadataReader reader(meta_path, path_);
    const int64_t stack_dim =
        reader.integer(reader.member(meta, "stack_dim"), "stack_dim");
    std::optional<std::string> stack_dim_name;
    if (const auto name = meta.find("stack_dim_name");
        name != meta.end() && !name->is_null()) {
      TENSORDICT_CHECK_METADATA(
          reader,
          name->is_string(),
          "\"stack_dim_name\" must be a string or null, found ",
          name->type_name());
      stack_dim_name = name->get<std::string>();
    }
    std::vector<TensorDict> elements;
    for (int64_t i = 0;; ++i) {
      TORCH_CHECK(
          i < kMaxStackElements,
          "the lazy stack at ",
          dir,
          " has more than ",
          kMaxStackElements,
          " elements");
      const std::string index = std::to_string(i);
      const std::string element_dir = join_path(dir, index);
      const PathKind kind = files_.kind(element_dir);
      if (kind == PathKind::kMissing) {
        break;
      }
      TORCH_CHECK(
          kind == PathKind::kDirectory,
          "refusing to load ",
          element_dir,
          ": element ",
          i,
          " of a lazy stack must be a directory, not a symlink or file");
      std::optional<LazyStackedTensorDict> nested;
      const PathPart part(path_, index);
      std::optional<Value> value =
          load_collection(element_dir, {}, depth + 1, &nested);
      if (nested) {
        elements.push_back(nested->contiguous());
      } else {
        TORCH_CHECK(
            value && value->is_tensordict(),
            "element ",
            i,
            " of the lazy stack at ",
            dir,
            " is not a tensordict");
        elements.push_back(value->tensordict());
      }
    }
    TORCH_CHECK(
        !elements.empty(),
        "the lazy stack at ",
        dir,
        " has no element directories (0/, 1/, ...)");
    return lazy_stack(elements, stack_dim, std::move(stack_dim_name));
  }

 private:
  // How many entries of a dict's meta.json are tensors (each one mapping).
  static int64_t tensor_entries(const Json& meta) {
    int64_t count = 0;
    for (const auto& entry : meta) {
      count += entry.is_object() && !entry.contains("type") ? 1 : 0;
    }
    return count;
  }

  std::optional<Value> load_entry(
      const std::string& dir,
      const std::string& name,
      const Json& entry,
      const MetadataReader& reader,
      c10::IntArrayRef batch,
      int64_t depth) {
    if (const auto type = entry.find("type"); type != entry.end()) {
      (void)reader.string(*type, "type");
      const std::string child_dir = resolve(dir, name, /*is_collection=*/true);
      const PathKind kind = files_.kind(child_dir);
      TORCH_CHECK(
          kind != PathKind::kMissing,
          "its directory ",
          child_dir,
          " is missing");
      TORCH_CHECK(
          kind == PathKind::kDirectory,
          "refusing to load ",
          child_dir,
          ": it must be a directory, not a symlink or a file");
      return load_collection(child_dir, batch, depth + 1);
    }
    TENSORDICT_CHECK_METADATA(
        reader,
        entry.contains("dtype") && entry.contains("shape"),
        "the entry has neither \"type\" (a nested collection) nor "
        "\"dtype\" and \"shape\" (a tensor): ",
        entry.dump().substr(0, 200));
    const c10::ScalarType dtype = reader.dtype(entry["dtype"]);
    const std::vector<int64_t> shape = reader.shape(entry["shape"], "shape");
    const auto nested = entry.find("is_nested");
    TENSORDICT_CHECK_METADATA(
        reader,
        nested == entry.end() || !reader.boolean(*nested, "is_nested"),
        "it is a nested tensor (is_nested: true), which this version "
        "cannot load");
    const int64_t nbytes = reader.checked_nbytes(shape, dtype);
    const auto options = at::TensorOptions().dtype(dtype);
    if (meta_device_) {
      return Value(at::empty(shape, options.device(c10::kMeta)));
    }
    const std::string file = resolve(dir, name, /*is_collection=*/false);
    std::optional<at::Tensor> mapped =
        files_.map_leaf(file, dtype, shape, options_.mode(), path_);
    if (!mapped) {
      TORCH_CHECK(
          nbytes == 0,
          describe(path_),
          ": its memmap file ",
          file,
          " is missing (meta.json says shape ",
          c10::IntArrayRef(shape),
          " of ",
          dtype_name(dtype),
          ")");
      // torch.from_file writes no file for an empty tensor.
      mapped = at::empty(shape, options);
    }
    at::Tensor tensor = *std::move(mapped);
    if (options_.device() && !options_.device()->is_cpu()) {
      tensor = tensor.to(*options_.device(), options_.non_blocking());
    }
    return Value(tensor);
  }

  // A NonTensorData below the root whose pickled value is a numpy array
  // that spans the parent's batch dims loads as a tensor leaf (Python's
  // `td.set(key, array)`); see docs/pickled_values.md.
  std::optional<Value> load_non_tensor_data(
      const std::string& dir,
      const Json& meta,
      c10::IntArrayRef parent_batch,
      int64_t depth) {
    const auto data = meta.find("data");
    if (data != meta.end()) {
      // Python stores no batch size: the value spans its parent's.
      return Value(NonTensorData(*data, parent_batch));
    }
    const std::string file = join_path(dir, "other.pickle");
    std::optional<PickledValue> fields = read_pickle(file);
    if (!fields) {
      return std::nullopt;
    }
    // Python pickles the non-tensor fields: {"data": value}.
    const PickledValue* value = nullptr;
    if (fields->kind == PickledValue::Kind::kDict) {
      for (size_t i = 0; i + 1 < fields->items.size(); i += 2) {
        const PickledValue& key = fields->items[i];
        if (key.kind == PickledValue::Kind::kStr && key.atom == "data") {
          value = &fields->items[i + 1];
        }
      }
    }
    TORCH_CHECK_VALUE(
        value != nullptr,
        describe(path_),
        ": ",
        file,
        " holds a ",
        pickled_kind_name(fields->kind),
        fields->kind == PickledValue::Kind::kDict ? " without the key 'data'"
                                                  : "",
        "; expected the dict {'data': value} Python writes");
    if (value->kind == PickledValue::Kind::kArray && depth > 0 &&
        value->array.dim() >= static_cast<int64_t>(parent_batch.size()) &&
        value->array.sizes()
            .slice(0, parent_batch.size())
            .equals(parent_batch)) {
      at::Tensor tensor = value->array;
      if (meta_device_) {
        return Value(
            at::empty(tensor.sizes(), tensor.options().device(c10::kMeta)));
      }
      if (options_.device() && !options_.device()->is_cpu()) {
        tensor = tensor.to(*options_.device(), options_.non_blocking());
      }
      return Value(tensor);
    }
    return Value(NonTensorData(pickled_json(*value, file), parent_batch));
  }

  std::optional<Value> load_non_tensor_stack(
      const std::string& dir, const Json& meta, c10::IntArrayRef parent_batch) {
    const std::string meta_path = join_path(dir, "meta.json");
    const MetadataReader reader(meta_path, path_);
    const Json* data = &reader.member(meta, "data");
    if (data->is_string()) {
      TENSORDICT_CHECK_METADATA(
          reader,
          data->get_ref<const std::string&>() == "pickle.pkl",
          "the NonTensorStack has the string \"",
          data->get_ref<const std::string&>(),
          "\" as data; expected a list or \"pickle.pkl\"");
      const std::string file = join_path(dir, "pickle.pkl");
      std::optional<PickledValue> list = read_pickle(file);
      if (!list) {
        return std::nullopt;
      }
      TORCH_CHECK_VALUE(
          list->kind == PickledValue::Kind::kList,
          describe(path_),
          ": ",
          file,
          " holds a ",
          pickled_kind_name(list->kind),
          "; expected the list of values Python writes");
      // As Python's NonTensorStack._from_list: every level of equal-length
      // lists (not tuples nor arrays) is a batch dim.
      int64_t dims = 0;
      std::vector<const PickledValue*> level{&*list};
      while (true) {
        bool uniform = !level.empty();
        for (const PickledValue* node : level) {
          uniform = uniform && node->kind == PickledValue::Kind::kList &&
                    node->items.size() == level.front()->items.size();
        }
        if (!uniform) {
          break;
        }
        ++dims;
        std::vector<const PickledValue*> next;
        for (const PickledValue* node : level) {
          for (const auto& item : node->items) {
            next.push_back(&item);
          }
        }
        if (next.empty()) {
          break;
        }
        level = std::move(next);
      }
      return finish_stack(
          dir, meta, reader, pickled_json(*list, file), dims, parent_batch);
    }
    TENSORDICT_CHECK_METADATA(
        reader,
        data->is_array(),
        "the NonTensorStack must hold a list as \"data\", found ",
        data->type_name());
    // As Python's NonTensorStack._from_list: every level of equal-length
    // lists is a batch dim.
    int64_t dims = 0;
    std::vector<const Json*> level{&*data};
    while (true) {
      bool uniform = !level.empty();
      for (const Json* node : level) {
        uniform = uniform && node->is_array() &&
                  node->size() == level.front()->size();
      }
      if (!uniform) {
        break;
      }
      ++dims;
      std::vector<const Json*> next;
      for (const Json* node : level) {
        for (const auto& item : *node) {
          next.push_back(&item);
        }
      }
      if (next.empty()) {
        break;
      }
      level = std::move(next);
    }
    return finish_stack(dir, meta, reader, *data, dims, parent_batch);
  }

  // A NonTensorStack of `dims` batch dims from its nested lists.
  Value finish_stack(
      const std::string& dir,
      const Json& meta,
      const MetadataReader& reader,
      const Json& data,
      int64_t dims,
      c10::IntArrayRef parent_batch) {
    TORCH_CHECK(
        dims >= static_cast<int64_t>(parent_batch.size()),
        "the NonTensorStack at ",
        dir,
        " has ",
        dims,
        " batch dims, but its parent has batch size ",
        parent_batch);
    std::optional<c10::Device> device;
    if (const auto dev = meta.find("device");
        dev != meta.end() && dev->is_string()) {
      device = reader.device(*dev);
    }
    return Value(
        NonTensorStack::from_list(data, std::max<int64_t>(dims, 1), device));
  }

  std::optional<Value> load_tensorclass(
      const std::string& dir,
      const Json& meta,
      const std::string& type,
      int64_t depth,
      std::optional<LazyStackedTensorDict>* lazy) {
    const std::string meta_path = join_path(dir, "meta.json");
    TENSORDICT_CHECK_METADATA(
        MetadataReader(meta_path, path_),
        !class_name_of(type).empty(),
        "\"_type\" names an unknown class '",
        type,
        "'");
    const std::string fields = join_path(dir, "_tensordict");
    const PathKind kind = files_.kind(fields);
    TORCH_CHECK(
        kind == PathKind::kDirectory,
        dir,
        " holds the class ",
        type,
        ", which is neither a tensordict class nor a tensorclass with a "
        "_tensordict directory (",
        describe(path_),
        ")");
    if (files_.kind(join_path(dir, "other.pickle")) != PathKind::kMissing &&
        !options_.skip_pickle()) {
      refuse_class_pickle(dir);
    }
    Json fields_meta = read_meta(fields);
    const std::string fields_type = fields_meta["_type"].get<std::string>();
    if (fields_type == kLazyStackType) {
      // Python's `Cls.lazy_stack(...)`: the class over a lazy stack.
      LazyStackedTensorDict stack =
          load_lazy_stack(fields, fields_meta, depth + 1);
      stack.set_python_class(type);
      return lazy_stack_value(std::move(stack), lazy);
    }
    TORCH_CHECK(
        fields_type == kTensorDictType || fields_type == kTensorDictParamsType,
        join_path(fields, "meta.json"),
        " holds a ",
        fields_type,
        ", but the fields of the tensorclass ",
        type,
        " must be a TensorDict or a LazyStackedTensorDict (",
        describe(path_),
        ")");
    TensorDict td = load_dict(fields, fields_meta, depth + 1);
    td.unsafeGetImpl()->python_class = type;
    if (!files_.is_archive()) {
      td.unsafeGetImpl()->memmap.prefix = dir;
    }
    return Value(std::move(td));
  }

  // A tensorclass's own pickled fields (Python's `_non_tensordict`
  // entries that JSON cannot hold, such as the classes from_pytree
  // records): C++ keeps no class-level fields, so they are refused.
  void refuse_class_pickle(const std::string& dir) const {
    TORCH_CHECK(
        false,
        describe(path_),
        ": the tensorclass fields stored in the Python pickle file ",
        join_path(dir, "other.pickle"),
        " are not read (a C++ tensorclass keeps no class-level fields). "
        "Pass LoadMemmapOptions().skip_pickle(true) to load the rest "
        "without them.");
  }

  // The non-tensor value Python pickled to `file`, read without executing
  // anything (see NOTE [Restricted unpickler] in src/io/pickle.h); none
  // with skip_pickle.
  std::optional<PickledValue> read_pickle(const std::string& file) {
    if (options_.skip_pickle()) {
      return std::nullopt;
    }
    const std::string bytes =
        files_.read_small(file, options_.max_pickle_bytes());
    try {
      return unpickle(bytes, file, options_.max_depth());
    } catch (const c10::Error& e) {
      refuse_pickle(e);
    }
  }

  // `value` as JSON, the errors naming the key.
  Json pickled_json(const PickledValue& value, const std::string& file) const {
    try {
      return pickled_to_json(value, file);
    } catch (const c10::Error& e) {
      refuse_pickle(e);
    }
  }

  // Rethrows a pickle's refusal as ValueError naming the key, with the way
  // around it.
  [[noreturn]] void refuse_pickle(const c10::Error& e) const {
    C10_THROW_ERROR(
        ValueError,
        c10::str(
            describe(path_),
            ": ",
            e.msg(),
            ". Pass LoadMemmapOptions().skip_pickle(true) to load the rest "
            "without it."));
  }

  // The path of entry `name` in `dir`, encoded as Python writes it, with
  // Python's fallback to the raw name of tensordict < 0.13.
  std::string resolve(
      const std::string& dir,
      const std::string& key,
      bool is_collection) const {
    const char* suffix = is_collection ? "" : ".memmap";
    if (options_.robust_key()) {
      const std::string encoded = encode_key(key);
      std::string path = join_path(dir, encoded + suffix);
      if (encoded != key && is_safe_legacy_key(key, is_collection) &&
          files_.kind(path) == PathKind::kMissing) {
        std::string legacy = join_path(dir, key + suffix);
        if (files_.kind(legacy) != PathKind::kMissing) {
          return legacy;
        }
      }
      return path;
    }
    TORCH_CHECK(
        is_safe_legacy_key(key, is_collection) && !key.empty(),
        path_.to_string(),
        " is not a safe file name, so it cannot be loaded with "
        "robust_key(false)");
    return join_path(dir, key + suffix);
  }

  const LoadMemmapOptions& options_;
  std::vector<std::string>* problems_;
  const TreeFiles& files_;
  KeyPath path_;  // the key being loaded; empty at the root
  bool meta_device_ = false;
  // The root whose killed append loads recover; none for an archive.
  std::optional<std::string> append_root_;
  std::optional<bool> append_forward_;
  MappingBudget mappings_;
};

// The directory of `options.subpath()` below `prefix`.
std::string subpath_dir(
    const std::string& prefix,
    const LoadMemmapOptions& options,
    const TreeFiles& files = file_system_files()) {
  std::string dir = prefix;
  for (const auto& part : options.subpath()) {
    std::string next =
        join_path(dir, options.robust_key() ? encode_key(part) : part);
    if (files.kind(next) == PathKind::kMissing &&
        is_safe_legacy_key(part, /*is_collection=*/true)) {
      const std::string legacy = join_path(dir, part);
      if (files.kind(legacy) == PathKind::kDirectory) {
        next = legacy;
      }
    }
    const PathKind kind = files.kind(next);
    TORCH_CHECK(
        kind == PathKind::kDirectory,
        "the subpath part '",
        part,
        "' names no saved tensordict below ",
        dir,
        kind == PathKind::kSymlink ? " (it is a symlink, which is refused)"
                                   : "");
    dir = std::move(next);
  }
  return dir;
}

// A saved tree opened for loading: the archive or the file system, the
// directory the options' subpath names, and a loader that reads it (with a
// killed append's rows recovered: only a directory can be appended to).
class OpenedTree {
 public:
  OpenedTree(
      const std::string& prefix,
      const LoadMemmapOptions& options,
      std::vector<std::string>* problems = nullptr)
      : archive_(open_archive_files(prefix, options.mode())),
        files_(archive_ ? *archive_ : file_system_files()),
        dir_(subpath_dir(prefix, options, files_)),
        loader_(options, problems, files_) {
    if (!archive_) {
      loader_.recover_appends(prefix);
    } else if (!(options.device() && options.device()->is_meta())) {
      archive_->prefetch_compressed(dir_, options.num_threads());
    }
  }

  const std::string& dir() const noexcept {
    return dir_;
  }
  Loader& loader() noexcept {
    return loader_;
  }

 private:
  std::unique_ptr<TreeFiles> archive_;
  const TreeFiles& files_;
  std::string dir_;
  Loader loader_;
};

}  // namespace
}  // namespace detail

LoadedTree load_memmap_any(
    const std::string& prefix, const LoadMemmapOptions& options) {
  detail::OpenedTree tree(prefix, options);
  const std::string& dir = tree.dir();
  std::optional<LazyStackedTensorDict> lazy;
  std::optional<Value> value = tree.loader().load_collection(dir, {}, 0, &lazy);
  if (lazy) {
    return *lazy;
  }
  TORCH_CHECK(
      value && value->is_tensordict(),
      dir,
      " holds a ",
      value ? value->type_name() : "pickled value",
      ", not a tensordict: load its parent directory",
      value && value->is_non_tensor()
          ? c10::str(", or load it with ", value->type_name(), "::load_memmap")
          : "");
  return value->tensordict();
}

namespace detail {

Value load_non_tensor_root(
    const std::string& prefix, const LoadMemmapOptions& options) {
  OpenedTree tree(prefix, options);
  const std::string& dir = tree.dir();
  std::optional<Value> value = tree.loader().load_collection(dir, {}, 0);
  TORCH_CHECK(
      value && value->is_non_tensor(),
      dir,
      " holds a ",
      value ? value->type_name() : "pickled value",
      ", not non-tensor data");
  return *value;
}

}  // namespace detail

std::vector<std::string> verify_memmap(
    const std::string& prefix, const LoadMemmapOptions& options) {
  std::vector<std::string> problems;
  try {
    detail::OpenedTree tree(prefix, options, &problems);
    std::optional<LazyStackedTensorDict> lazy;
    tree.loader().load_collection(tree.dir(), {}, 0, &lazy);
  } catch (const c10::Error& e) {
    problems.push_back(e.msg());
  }
  return problems;
}

TensorDict TensorDict::load_memmap(
    const std::string& prefix, const LoadMemmapOptions& options) {
  LoadedTree tree = load_memmap_any(prefix, options);
  if (auto* td = std::get_if<TensorDict>(&tree)) {
    return *td;
  }
  // Python returns the mapped stack; a TensorDict could only be a copy in
  // memory, which is never made silently.
  const auto& stack = std::get<LazyStackedTensorDict>(tree);
  C10_THROW_ERROR(
      Error,
      c10::str(
          prefix,
          " holds a lazy stack (LazyStackedTensorDict",
          stack.python_class().empty() ? "" : " of " + stack.python_class(),
          ", ",
          stack.tensordicts().size(),
          " elements), which TensorDict::load_memmap can only return as a copy "
          "in memory, no longer mapped. Load it mapped with the free "
          "tensordict::load_memmap, which returns it as Python's "
          "TensorDict.load_memmap does (or with "
          "LazyStackedTensorClass<T>::load_memmap), and call contiguous() on "
          "it for a dense copy."));
}

LoadedTree load_memmap(
    const std::string& prefix, const LoadMemmapOptions& options) {
  return load_memmap_any(prefix, options);
}

LoadedTree load(const std::string& prefix, const LoadMemmapOptions& options) {
  return load_memmap_any(prefix, options);
}

TensorDict TensorDict::load(
    const std::string& prefix, const LoadMemmapOptions& options) {
  return load_memmap(prefix, options);
}

TensorDict& TensorDict::load_(
    const std::string& prefix, const LoadMemmapOptions& options) {
  return load_memmap_(prefix, options);
}

// TensorDict::load_memmap_ and load_memmap into `out`: load_into.cpp.

TensorDict& TensorDict::memmap_refresh_() {
  TORCH_CHECK(
      impl_->memmap.is_memmap && !impl_->memmap.prefix.empty(),
      "memmap_refresh_ needs a dict memmapped to a directory (is_memmap() "
      "and saved_path()); this one is not");
  const std::string prefix = impl_->memmap.prefix;
  return load_memmap_(prefix);
}

TENSORDICT_END_NAMESPACE
