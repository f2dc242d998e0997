// to_safetensors and from_safetensors: see NOTE [Safetensors and tensordict]
// in tensordict/safetensors.h and NOTE [Safetensors layout] in
// io/safetensors_format.h.

#include "tensordict/safetensors.h"

#include <ATen/ops/empty.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#include <c10/util/StringUtil.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/key_path.h"
#include "io/atomic_file.h"
#include "io/file_io.h"
#include "io/format.h"
#include "io/metadata_reader.h"
#include "io/safetensors_format.h"
#include "tensordict/non_tensor.h"
#include "tensordict/value.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

// The key of the tensordict structure in `__metadata__`, and the version of
// the JSON document under it (Python's _METADATA_KEY and _FORMAT_VERSION).
constexpr const char* kMetadataKey = "tensordict";
constexpr int64_t kSafetensorsFormatVersion = 1;
// The most elements a lazy stack may have in a file smaller than this.
constexpr int64_t kMinStackLimit = 65536;

std::string join_dots(const std::vector<std::string>& parts) {
  return c10::Join(".", parts);
}

// Python's repr of a key tuple: ('a', 'b'), ('a',) for one part, or "the
// root" for none.
std::string key_repr(const std::vector<std::string>& parts) {
  if (parts.empty()) {
    return "the root";
  }
  return "(" + join_spelled(parts, python_repr) +
         (parts.size() == 1 ? ",)" : ")");
}

Json level_names(bool has_names, const DimNames& names) {
  if (!has_names) {
    return nullptr;
  }
  Json out = Json::array();
  for (const auto& name : names) {
    out.push_back(name ? Json(*name) : Json(nullptr));
  }
  return out;
}

// --- writing -----------------------------------------------------------------

// Python's _encode_level: the JSON of each level, and the leaves by name.
class Encoder {
 public:
  Json encode(const TensorDict& td, std::vector<std::string>& prefix) {
    Json level = Json::object();
    level["batch_size"] = td.batch_size().vec();
    level["names"] = level_names(td.has_names(), td.names());
    if (!td.python_class().empty()) {
      level["class"] = td.python_class();
    }
    Json& entries = level["keys"] = Json::object();
    for (const auto& [key, value] : td.items()) {
      prefix.emplace_back(key.back());
      entries[prefix.back()] = encode_value(value, prefix);
      prefix.pop_back();
    }
    return level;
  }

  Json encode(
      const LazyStackedTensorDict& stack, std::vector<std::string>& prefix) {
    check_same_keys(stack, prefix);
    Json level = Json::object();
    level["batch_size"] = stack.batch_size().vec();
    level["names"] = level_names(stack.has_names(), stack.names());
    level["stack_dim"] = stack.stack_dim();
    if (!stack.python_class().empty()) {
      level["class"] = stack.python_class();
    }
    Json& entries = level["keys"] = Json::object();
    const TensorDict& first = stack.tensordicts().front();
    for (const NestedKey& key : stack.keys()) {
      const std::string name(key.back());
      prefix.push_back(name);
      const Value value = first[name];
      if (value.is_tensor()) {
        entries[name] = encode_value(Value(stack.get(name)), prefix);
      } else if (value.is_tensordict()) {
        entries[name] =
            Json{{"td", encode(stack.get_tensordict(name), prefix)}};
      } else if (value.is_non_tensor()) {
        non_tensor_stack_error(prefix);
      } else {
        TORCH_CHECK_TYPE(
            false,
            "Cannot save the lazy stack at ",
            key_repr(prefix),
            " as safetensors: its elements hold lazy stacks themselves.");
      }
      prefix.pop_back();
    }
    return level;
  }

  std::vector<SafetensorsTensor>& tensors() {
    return tensors_;
  }
  const at::Tensor& data(const std::string& name) const {
    return data_.at(name);
  }

 private:
  [[noreturn]] static void non_tensor_stack_error(
      const std::vector<std::string>& key) {
    TORCH_CHECK_TYPE(
        false,
        "Cannot save the non-tensor stack at ",
        key_repr(key),
        " as safetensors: only single JSON values are supported.");
  }

  // Python's _drops_keys: a lazy stack whose elements have different keys
  // saves only the shared ones, so it is refused.
  static void check_same_keys(
      const LazyStackedTensorDict& stack,
      const std::vector<std::string>& prefix) {
    const auto& elements = stack.tensordicts();
    const auto sorted_keys = [](const TensorDict& td) {
      std::vector<std::string> out;
      for (const NestedKey& key : td.keys(/*include_nested=*/true)) {
        std::string joined;
        for (const std::string_view part : key) {
          joined += part;
          joined += '\0';
        }
        out.push_back(std::move(joined));
      }
      std::sort(out.begin(), out.end());
      return out;
    };
    const std::vector<std::string> first = sorted_keys(elements.front());
    for (size_t i = 1; i < elements.size(); ++i) {
      TORCH_CHECK_TYPE(
          sorted_keys(elements[i]) == first,
          "Cannot save the lazy stack at ",
          key_repr(prefix),
          " as safetensors: its entries have different keys. Give every "
          "entry the same keys first.");
    }
  }

  Json encode_value(const Value& value, std::vector<std::string>& prefix) {
    if (value.is_non_tensor_stack()) {
      non_tensor_stack_error(prefix);
    }
    if (value.is_non_tensor_data()) {
      return Json{{"non_tensor", value.non_tensor()}};
    }
    if (value.is_tensordict()) {
      return Json{{"td", encode(value.tensordict(), prefix)}};
    }
    if (value.is_lazy_stack()) {
      return Json{{"td", encode(value.lazy_stack(), prefix)}};
    }
    return Json{{"tensor", add_tensor(value.tensor(), prefix)}};
  }

  std::string add_tensor(
      const at::Tensor& tensor, const std::vector<std::string>& key) {
    TORCH_CHECK_TYPE(
        !tensor.is_nested() && tensor.layout() == c10::kStrided,
        "Cannot save the tensor at ",
        key_repr(key),
        " as safetensors: only dense tensors are supported, got layout ",
        tensor.layout(),
        tensor.is_nested() ? " (nested)." : ".");
    TORCH_CHECK_TYPE(
        safetensors_dtype_name(tensor.scalar_type()).has_value(),
        "Cannot save the tensor at ",
        key_repr(key),
        " as safetensors: the format has no dtype for ",
        tensor.scalar_type());
    std::string name = join_dots(key);
    TORCH_CHECK_VALUE(
        data_.find(name) == data_.end(),
        "Two keys of the tensordict have the safetensors name ",
        python_repr(name),
        ".");
    SafetensorsTensor entry;
    entry.name = name;
    entry.dtype = tensor.scalar_type();
    entry.shape = tensor.sizes().vec();
    tensors_.push_back(std::move(entry));
    data_.emplace(name, tensor.detach().cpu().contiguous());
    return name;
  }

  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, at::Tensor> data_;
};

// Writes the file through an AtomicFile, so that a failure or a kill
// leaves the old file (or none) at `path`.
void write_file(
    const std::string& path,
    const std::string& header,
    const std::vector<SafetensorsTensor>& tensors,
    const Encoder& encoder) {
  AtomicFile file = AtomicFile::beside(path, 0644, path);
  file.write(header.data(), header.size());
  for (const SafetensorsTensor& tensor : tensors) {
    const at::Tensor& data = encoder.data(tensor.name);
    file.write(
        data.const_data_ptr(), static_cast<size_t>(tensor.end - tensor.begin));
  }
  file.commit(/*durable=*/false);
}

template <typename Dict>
void save_safetensors(const Dict& td, const std::string& path) {
  Encoder encoder;
  std::vector<std::string> prefix;
  Json root = encoder.encode(td, prefix);
  Json document = Json::object();
  document["version"] = kSafetensorsFormatVersion;
  document["root"] = std::move(root);
  std::vector<SafetensorsTensor>& tensors = encoder.tensors();
  layout_safetensors(tensors);
  const std::string header = safetensors_header_bytes(
      tensors,
      {{kMetadataKey, dump_json(document, /*spaced=*/true, /*ascii=*/true)}});
  write_file(path, header, tensors, encoder);
}

// --- reading -----------------------------------------------------------------

// The file, mapped, and its checked header.
class SafetensorsFile {
 public:
  SafetensorsFile(const std::string& path, std::optional<c10::Device> device)
      : path_(path), device_(device) {
    char resolved[PATH_MAX];
    TORCH_CHECK(
        ::realpath(path.c_str(), resolved) != nullptr,
        "cannot open the safetensors file ",
        path,
        ": ",
        std::strerror(errno));
    struct stat st {};
    TORCH_CHECK(
        ::stat(resolved, &st) == 0,
        "cannot open the safetensors file ",
        path,
        ": ",
        std::strerror(errno));
    TORCH_CHECK(
        S_ISREG(st.st_mode),
        "cannot load ",
        path,
        ": it is not a regular file");
    const int64_t size = static_cast<int64_t>(st.st_size);
    TORCH_CHECK(
        size >= 8,
        "invalid safetensors file ",
        path,
        ": expected at least 8 bytes (the header length), found ",
        size);
    bytes_ = map_tensor_file(
        resolved,
        c10::kByte,
        {size},
        MapMode::kReadOnly,
        "the safetensors file");
    forget_mapped_filename(bytes_);
    header_ = parse_safetensors_header(
        static_cast<const uint8_t*>(bytes_.const_data_ptr()),
        static_cast<size_t>(size),
        path);
    for (const SafetensorsTensor& tensor : header_.tensors) {
      by_name_.emplace(tensor.name, &tensor);
    }
  }

  const std::string& path() const {
    return path_;
  }
  const std::optional<c10::Device>& device() const {
    return device_;
  }
  int64_t size() const {
    return bytes_.numel();
  }
  const SafetensorsHeader& header() const {
    return header_;
  }
  const SafetensorsTensor* find(const std::string& name) const {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
  }

  // The tensor's bytes as a view of the mapping, or a copy when they are
  // not aligned to its item size.
  at::Tensor leaf(const SafetensorsTensor& tensor) const {
    const int64_t start = header_.data_start + tensor.begin;
    const auto itemsize = static_cast<int64_t>(c10::elementSize(tensor.dtype));
    if (start % itemsize != 0) {
      at::Tensor out =
          at::empty(tensor.shape, at::TensorOptions().dtype(tensor.dtype));
      if (tensor.end > tensor.begin) {
        std::memcpy(
            out.data_ptr(),
            static_cast<const uint8_t*>(bytes_.const_data_ptr()) + start,
            static_cast<size_t>(tensor.end - tensor.begin));
      }
      return out;
    }
    // A TensorImpl over the storage directly: no dispatch per leaf.
    c10::SmallVector<int64_t, 6> strides(tensor.shape.size(), 1);
    for (size_t i = tensor.shape.size(); i > 1; --i) {
      strides[i - 2] =
          strides[i - 1] * std::max<int64_t>(tensor.shape[i - 1], 1);
    }
    auto impl = c10::make_intrusive<c10::TensorImpl>(
        c10::Storage(bytes_.storage()),
        bytes_.key_set(),
        caffe2::TypeMeta::fromScalarType(tensor.dtype));
    impl->set_sizes_and_strides(tensor.shape, strides);
    impl->set_storage_offset(start / itemsize);
    return at::Tensor(std::move(impl));
  }

 private:
  std::string path_;
  std::optional<c10::Device> device_;
  at::Tensor bytes_;
  SafetensorsHeader header_;
  std::unordered_map<std::string, const SafetensorsTensor*> by_name_;
};

// A file without tensordict metadata: each name split on ".", in sorted
// name order, as Python's from_safetensors does.
TensorDict load_plain(const SafetensorsFile& file, int64_t max_depth) {
  std::vector<const SafetensorsTensor*> tensors;
  for (const SafetensorsTensor& tensor : file.header().tensors) {
    tensors.push_back(&tensor);
  }
  std::sort(
      tensors.begin(),
      tensors.end(),
      [](const SafetensorsTensor* a, const SafetensorsTensor* b) {
        return a->name < b->name;
      });
  TensorDict td(c10::IntArrayRef{}, file.device());
  std::unordered_set<std::string_view> leaves;
  for (const SafetensorsTensor* tensor : tensors) {
    const std::string& name = tensor->name;
    std::vector<std::string> parts;
    size_t start = 0;
    while (true) {
      const size_t dot = name.find('.', start);
      parts.push_back(name.substr(start, dot - start));
      TORCH_CHECK(
          !parts.back().empty(),
          "cannot load ",
          file.path(),
          ": the tensor name ",
          python_repr(name),
          " has an empty part when split on \".\"");
      if (dot == std::string::npos) {
        break;
      }
      TORCH_CHECK(
          static_cast<int64_t>(parts.size()) < max_depth,
          "cannot load ",
          file.path(),
          ": the tensor name ",
          python_repr(name.substr(0, 200)),
          " nests deeper than ",
          max_depth,
          " levels (FromSafetensorsOptions::max_depth)");
      const std::string_view above(name.data(), dot);
      TORCH_CHECK(
          leaves.count(above) == 0,
          "cannot load ",
          file.path(),
          ": the tensor ",
          python_repr(name),
          " is below the tensor ",
          python_repr(above),
          " (a name is either a tensor or a nested dict)");
      start = dot + 1;
    }
    leaves.insert(name);
    td.set(NestedKey(std::move(parts)), file.leaf(*tensor));
  }
  return td;
}

// A file with tensordict metadata: Python's _decode_level, every member
// checked through a MetadataReader.
class Decoder {
 public:
  Decoder(const SafetensorsFile& file, int64_t max_depth)
      : file_(file), max_depth_(max_depth) {}

  Value decode(
      const Json& level,
      const MetadataReader& at,
      int64_t depth,
      bool in_stack) {
    TENSORDICT_CHECK_METADATA(
        at, depth <= max_depth_, "nesting deeper than ", max_depth_);
    at.expect_object(level, "td");
    const std::vector<int64_t> batch =
        at.shape(at.member(level, "batch_size"), "batch_size");
    const DimNames names =
        at.names(at.member(level, "names"), batch.size(), "names");
    std::optional<int64_t> stack_dim;
    if (const auto it = level.find("stack_dim");
        it != level.end() && !it->is_null()) {
      stack_dim = at.integer(*it, "stack_dim");
      TENSORDICT_CHECK_METADATA(
          at,
          *stack_dim >= 0 && *stack_dim < static_cast<int64_t>(batch.size()),
          "\"stack_dim\" ",
          *stack_dim,
          " is not a dim of the batch size ",
          c10::IntArrayRef(batch));
    }
    std::string cls;
    if (const auto it = level.find("class");
        it != level.end() && !it->is_null()) {
      cls = at.string(*it, "class");
    }
    TensorDict td(batch, file_.device());
    if (!names.empty()) {
      td.set_names(names);
    }
    const Json& keys = at.member(level, "keys");
    at.expect_object(keys, "keys");
    for (auto it = keys.begin(); it != keys.end(); ++it) {
      const MetadataReader child = at.child(it.key());
      TENSORDICT_CHECK_METADATA(
          child, !td.contains(it.key()), "the key appears twice");
      read_entry(td, it.key(), *it, child, depth, in_stack || stack_dim);
    }
    if (!stack_dim || in_stack) {
      if (!cls.empty()) {
        call(at, [&] { td.set_python_class(cls); });
      }
      return td;
    }
    // An unbind makes one dict per element: bounded by the file's size, so
    // that a few bytes of metadata cannot ask for billions of dicts.
    const int64_t count = batch[*stack_dim];
    TENSORDICT_CHECK_METADATA(
        at,
        count <= std::max<int64_t>(file_.size(), kMinStackLimit),
        "a lazy stack of ",
        count,
        " elements is more than a file of ",
        file_.size(),
        " bytes may hold");
    std::vector<TensorDict> elements = td.unbind(*stack_dim);
    TENSORDICT_CHECK_METADATA(
        at,
        !elements.empty(),
        "a lazy stack of no elements (size 0 at its stack dim ",
        *stack_dim,
        ") cannot be loaded");
    std::optional<std::string> stack_dim_name;
    if (!names.empty()) {
      stack_dim_name = names[*stack_dim];
    }
    std::optional<LazyStackedTensorDict> stack;
    call(at, [&] {
      stack.emplace(std::move(elements), *stack_dim, stack_dim_name);
      if (!cls.empty()) {
        stack->set_python_class(cls);
      }
    });
    return *stack;
  }

  // Throws unless every tensor of the file was used.
  void check_all_used() const {
    std::vector<std::string> missing;
    for (const SafetensorsTensor& tensor : file_.header().tensors) {
      if (used_.count(tensor.name) == 0) {
        missing.push_back(tensor.name);
      }
    }
    if (missing.empty()) {
      return;
    }
    const std::string list = sorted_list_repr({missing.begin(), missing.end()});
    TORCH_CHECK_VALUE(
        false,
        "The tensors ",
        list,
        " of ",
        file_.path(),
        " are not in its tensordict metadata.");
  }

 private:
  template <typename Fn>
  static void call(const MetadataReader& at, Fn&& fn) {
    try {
      fn();
    } catch (const c10::Error& e) {
      at.fail(e.msg());
    }
  }

  // Reads the entry `key` of a level into `td`.
  void read_entry(
      TensorDict& td,
      const std::string& key,
      const Json& entry,
      const MetadataReader& at,
      int64_t depth,
      bool in_stack) {
    TENSORDICT_CHECK_METADATA(
        at,
        entry.is_object() && entry.size() >= 1,
        "expected an object with \"tensor\", \"non_tensor\" or \"td\", "
        "found ",
        entry.dump().substr(0, 200));
    if (const auto it = entry.find("tensor"); it != entry.end()) {
      const std::string& name = at.string(*it, "tensor");
      if (const auto unbatched = entry.find("unbatched");
          unbatched != entry.end()) {
        TENSORDICT_CHECK_METADATA(
            at,
            !at.boolean(*unbatched, "unbatched"),
            "the tensor ",
            python_repr(name),
            " is a Python UnbatchedTensor, which C++ does not support");
      }
      const SafetensorsTensor* tensor = file_.find(name);
      TENSORDICT_CHECK_METADATA(
          at,
          tensor != nullptr,
          "the tensor ",
          python_repr(name),
          " is not in the file");
      TENSORDICT_CHECK_METADATA(
          at,
          used_.insert(name).second,
          "the tensor ",
          python_repr(name),
          " is named by two keys");
      const at::Tensor leaf = file_.leaf(*tensor);
      call(at, [&] { td.set(key, leaf); });
      return;
    }
    if (const auto it = entry.find("non_tensor"); it != entry.end()) {
      call(at, [&] { td.set_non_tensor(key, *it); });
      return;
    }
    const Value nested =
        decode(at.member(entry, "td"), at, depth + 1, in_stack);
    call(at, [&] { td.set(key, nested); });
  }

  const SafetensorsFile& file_;
  int64_t max_depth_;
  std::unordered_set<std::string> used_;
};

std::variant<TensorDict, LazyStackedTensorDict> load_safetensors(
    const std::string& path, const FromSafetensorsOptions& options) {
  const SafetensorsFile file(path, options.device());
  const std::string* metadata = nullptr;
  for (const auto& [key, value] : file.header().metadata) {
    if (key == kMetadataKey) {
      metadata = &value;
    }
  }
  if (metadata == nullptr) {
    return load_plain(file, options.max_depth());
  }
  const Json document = parse_meta_json(
      *metadata, options.max_depth(), "the tensordict metadata of " + path);
  const MetadataReader at(path, KeyPath());
  const Json* version = nullptr;
  if (const auto it = document.find("version"); it != document.end()) {
    version = &*it;
  }
  TORCH_CHECK_VALUE(
      version != nullptr && version->is_number_integer() &&
          version->get<int64_t>() == kSafetensorsFormatVersion,
      "Cannot load ",
      path,
      ": its tensordict metadata has version ",
      version == nullptr ? std::string("None") : version->dump(),
      ", and this version of tensordict reads version ",
      kSafetensorsFormatVersion,
      ".");
  Decoder decoder(file, options.max_depth());
  Value root = decoder.decode(
      at.member(document, "root"), at, /*depth=*/0, /*in_stack=*/false);
  decoder.check_all_used();
  if (root.is_lazy_stack()) {
    return root.lazy_stack();
  }
  return root.tensordict();
}

}  // namespace
}  // namespace detail

void to_safetensors(const TensorDict& td, const std::string& path) {
  detail::save_safetensors(td, path);
}

void to_safetensors(
    const LazyStackedTensorDict& stack, const std::string& path) {
  detail::save_safetensors(stack, path);
}

TensorDict from_safetensors(
    const std::string& path, const FromSafetensorsOptions& options) {
  auto loaded = detail::load_safetensors(path, options);
  TORCH_CHECK(
      std::holds_alternative<TensorDict>(loaded),
      "from_safetensors: the root of ",
      path,
      " is a lazy stack; load it with from_safetensors_any");
  return std::get<TensorDict>(std::move(loaded));
}

LoadedTree from_safetensors_any(
    const std::string& path, const FromSafetensorsOptions& options) {
  return detail::load_safetensors(path, options);
}

TENSORDICT_END_NAMESPACE
