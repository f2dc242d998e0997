// from_consolidated and from_consolidated_bytes: the reading side of NOTE
// [Consolidated layout] in tensordict/consolidate.h. The file or buffer is
// untrusted: its trailer, then every member of its metadata, is checked
// before it is used.

#include <ATen/ops/empty.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "consolidate/layout.h"
#include "core/python_class.h"
#include "core/tensor_dict_impl.h"
#include "io/file_io.h"
#include "io/format.h"
#include "io/metadata_reader.h"
#include "tensordict/consolidate.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

at::Tensor leaf_view(
    const at::Tensor& storage,
    int64_t start,
    c10::ScalarType dtype,
    c10::IntArrayRef shape) {
  // A TensorImpl over the storage directly: no dispatch per leaf.
  const int64_t itemsize = static_cast<int64_t>(c10::elementSize(dtype));
  c10::SmallVector<int64_t, 6> strides(shape.size(), 1);
  for (size_t i = shape.size(); i > 1; --i) {
    strides[i - 2] = strides[i - 1] * std::max<int64_t>(shape[i - 1], 1);
  }
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      c10::Storage(storage.storage()),
      storage.key_set(),
      caffe2::TypeMeta::fromScalarType(dtype));
  impl->set_sizes_and_strides(shape, strides);
  impl->set_storage_offset((storage.storage_offset() + start) / itemsize);
  return at::Tensor(std::move(impl));
}

namespace {

// Rebuilds a dict from its metadata, each leaf a view of the data region.
// Every member is checked through a MetadataReader before it is used.
class Reader {
 public:
  Reader(const at::Tensor& data, int64_t max_depth)
      : data_(data),
        data_size_(data.numel()),
        base_(reinterpret_cast<uintptr_t>(data.const_data_ptr())),
        max_depth_(max_depth) {}

  TensorDict read_dict(
      const Json& meta,
      const MetadataReader& at,
      c10::IntArrayRef parent_batch,
      int64_t depth) const {
    TENSORDICT_CHECK_METADATA(
        at, depth <= max_depth_, "nesting deeper than ", max_depth_);
    const std::string& cls = at.string(at.member(meta, "cls"), "cls");
    // Python names a nested tensorclass's level by its class: it loads as
    // a dict that remembers the class, as a memmap load does.
    const bool tensorclass = !detail::class_name_of(cls).empty();
    TENSORDICT_CHECK_METADATA(
        at,
        cls == "TensorDict" || tensorclass,
        "class '",
        cls,
        "' is not supported; expected 'TensorDict' or a tensorclass",
        cls == "LazyStackedTensorDict"
            ? " (load a lazy stack at the root with "
              "LazyStackedTensorDict::from_consolidated, or "
              "from_consolidated_bytes for bytes)"
            : "");
    const Json& cls_metadata = at.member(meta, "cls_metadata");
    at.expect_object(cls_metadata, "cls_metadata");
    std::vector<int64_t> batch =
        at.shape(at.member(cls_metadata, "batch_size"), "batch_size");
    at.expect_batch_prefix(batch, parent_batch, "batch size");
    const std::optional<c10::Device> device =
        at.device(at.member(cls_metadata, "device"));
    DimNames names;
    if (const auto it = cls_metadata.find("names"); it != cls_metadata.end()) {
      names = at.names(*it, batch.size(), "names");
    }
    bool locked = false;
    if (const auto it = cls_metadata.find("is_locked");
        it != cls_metadata.end()) {
      locked = at.boolean(*it, "is_locked");
    }

    TensorDict result = make_tensordict(batch, device, std::move(names));
    TensorDictImpl& impl = *result.unsafeGetImpl();
    if (tensorclass) {
      impl.python_class = cls;
    }

    const Json& non_tensors = at.member(meta, "non_tensors");
    at.expect_object(non_tensors, "non_tensors");
    const Json& leaves = at.member(meta, "leaves");
    at.expect_object(leaves, "leaves");
    // Every entry is one of these (meta's own members include 4 reserved).
    impl.reserve(non_tensors.size() + leaves.size() + meta.size());
    for (auto it = non_tensors.begin(); it != non_tensors.end(); ++it) {
      const MetadataReader child = at.child(it.key());
      append(impl, it.key(), read_non_tensor(it.value(), child, batch), child);
    }

    for (auto it = leaves.begin(); it != leaves.end(); ++it) {
      const MetadataReader child = at.child(it.key());
      at::Tensor leaf = read_leaf(it.value(), child);
      child.expect_batch_prefix(leaf.sizes(), batch, "shape");
      TENSORDICT_CHECK_METADATA(
          child,
          !device || *device == data_.device(),
          "the dict's device is ",
          device->str(),
          " but the data is on ",
          data_.device().str());
      append(impl, it.key(), std::move(leaf), child);
    }

    for (auto it = meta.begin(); it != meta.end(); ++it) {
      const std::string& name = it.key();
      const Json& entry = it.value();
      if (is_reserved_member(name)) {
        continue;
      }
      const MetadataReader child = at.child(name);
      TENSORDICT_CHECK_METADATA(
          child,
          entry.is_object(),
          "expected the metadata object of a nested dict, found ",
          entry.type_name());
      const auto cls_it = entry.find("cls");
      const std::string* entry_cls =
          cls_it != entry.end() && cls_it->is_string()
              ? &cls_it->get_ref<const std::string&>()
              : nullptr;
      if (entry_cls != nullptr && *entry_cls == "NonTensorStack") {
        append(impl, name, read_stack(entry, child, batch, depth + 1), child);
      } else if (
          entry_cls != nullptr && *entry_cls == "LazyStackedTensorDict") {
        append(
            impl, name, read_lazy_stack(entry, child, batch, depth + 1), child);
      } else {
        append(impl, name, read_dict(entry, child, batch, depth + 1), child);
      }
    }
    impl.consolidated.storage = data_;
    if (locked) {
      result.lock_();
    }
    return result;
  }

  // A lazy stack, at the root or as an entry: its stack dim in cls_metadata
  // and its elements as members "0", "1", ..., each a dict.
  LazyStackedTensorDict read_lazy_stack(
      const Json& meta,
      const MetadataReader& at,
      c10::IntArrayRef parent_batch,
      int64_t depth) const {
    TENSORDICT_CHECK_METADATA(
        at, depth <= max_depth_, "nesting deeper than ", max_depth_);
    const Json& cls_metadata = at.member(meta, "cls_metadata");
    at.expect_object(cls_metadata, "cls_metadata");
    const int64_t stack_dim =
        at.integer(at.member(cls_metadata, "stack_dim"), "stack_dim");
    std::optional<std::string> stack_dim_name;
    if (const auto it = cls_metadata.find("stack_dim_name");
        it != cls_metadata.end() && !it->is_null()) {
      stack_dim_name = at.string(*it, "stack_dim_name");
    }
    for (const char* member : {"leaves", "non_tensors"}) {
      const Json& entries = at.member(meta, member);
      at.expect_object(entries, member);
      TENSORDICT_CHECK_METADATA(
          at,
          entries.empty(),
          "a lazy stack holds its entries in its elements, but its \"",
          member,
          "\" is not empty");
    }
    // Members "0".."n-1", in any order; anything else is an error.
    std::vector<std::pair<const std::string*, const Json*>> elements;
    for (auto it = meta.begin(); it != meta.end(); ++it) {
      if (is_reserved_member(it.key())) {
        continue;
      }
      elements.emplace_back(&it.key(), &it.value());
    }
    std::vector<const std::pair<const std::string*, const Json*>*> ordered(
        elements.size(), nullptr);
    for (const auto& element : elements) {
      const std::string& name = *element.first;
      size_t index = 0;
      const bool digits = !name.empty() && name.size() < 10 &&
                          std::all_of(name.begin(), name.end(), [](char c) {
                            return c >= '0' && c <= '9';
                          });
      if (digits) {
        index = std::stoul(name);
      }
      TENSORDICT_CHECK_METADATA(
          at,
          digits && index < ordered.size() && ordered[index] == nullptr &&
              (name == "0" || name[0] != '0'),
          "the members of a lazy stack must be its elements \"0\" to \"",
          elements.size() - 1,
          "\", found \"",
          name,
          "\"");
      ordered[index] = &element;
    }
    TENSORDICT_CHECK_METADATA(
        at, !ordered.empty(), "a lazy stack needs at least one element");
    std::vector<TensorDict> dicts;
    dicts.reserve(ordered.size());
    for (const auto* element : ordered) {
      const MetadataReader child = at.child(*element->first);
      dicts.push_back(read_dict(*element->second, child, {}, depth + 1));
    }
    std::optional<LazyStackedTensorDict> stack;
    try {
      stack.emplace(std::move(dicts), stack_dim, std::move(stack_dim_name));
    } catch (const c10::Error& e) {
      at.fail(e.msg());
    }
    at.expect_batch_prefix(stack->batch_size(), parent_batch, "batch size");
    return *stack;
  }

 private:
  at::Tensor read_leaf(const Json& entry, const MetadataReader& at) const {
    TENSORDICT_CHECK_METADATA(
        at,
        entry.is_array() && (entry.size() == 5 || entry.size() == 6),
        "expected [dtype, shape, start, stop, pad], got ",
        entry.dump().substr(0, 200));
    TENSORDICT_CHECK_METADATA(
        at,
        entry.size() == 5 && at.path().back().rfind("<NJT", 0) != 0,
        "jagged nested tensors are not supported");
    const c10::ScalarType dtype = at.dtype(entry[0]);
    const std::vector<int64_t> shape = at.shape(entry[1], "shape");
    const int64_t start = at.integer(entry[2], "start");
    const int64_t stop = at.integer(entry[3], "stop");
    const int64_t pad = at.integer(entry[4], "pad");
    const int64_t nbytes = at.checked_nbytes(shape, dtype);
    TENSORDICT_CHECK_METADATA(
        at,
        start >= 0 && start <= stop && stop <= data_size_,
        "byte range [",
        start,
        ", ",
        stop,
        ") is not within the ",
        data_size_,
        " bytes of data");
    TENSORDICT_CHECK_METADATA(
        at,
        pad >= 0 && pad < kAlignment,
        "pad ",
        pad,
        " is not in [0, ",
        kAlignment,
        ")");
    TENSORDICT_CHECK_METADATA(
        at,
        stop - start >= nbytes,
        "shape ",
        c10::IntArrayRef(shape),
        " ",
        dtype_name(dtype),
        " needs ",
        nbytes,
        " bytes, but its byte range [",
        start,
        ", ",
        stop,
        ") holds ",
        stop - start);
    const auto itemsize = static_cast<uint64_t>(c10::elementSize(dtype));
    TENSORDICT_CHECK_METADATA(
        at,
        (base_ + static_cast<uint64_t>(start)) % itemsize == 0,
        dtype_name(dtype),
        " data at byte ",
        start,
        " is not aligned to its item size ",
        itemsize);
    return leaf_view(data_, start, dtype, shape);
  }

  Value read_non_tensor(
      const Json& entry,
      const MetadataReader& at,
      c10::IntArrayRef parent_batch) const {
    TENSORDICT_CHECK_METADATA(
        at,
        entry.is_array() && entry.size() == 3,
        "expected [data, batch_size, device], got ",
        entry.dump().substr(0, 200));
    std::vector<int64_t> batch = at.shape(entry[1], "batch_size");
    at.expect_batch_prefix(batch, parent_batch, "batch size");
    return NonTensorData(entry[0], batch, at.device(entry[2]));
  }

  // Reads a NonTensorStack level: elements "0".."n-1", as non-tensors at the
  // last dim or as nested stack levels.
  void read_stack_values(
      const Json& meta,
      const MetadataReader& at,
      int64_t depth,
      std::vector<int64_t>& sizes,
      size_t dim,
      std::vector<Json>& values,
      std::optional<c10::Device>& device) const {
    TENSORDICT_CHECK_METADATA(
        at,
        meta.is_object(),
        "expected the metadata object of a stacked element, found ",
        meta.type_name());
    TENSORDICT_CHECK_METADATA(
        at, depth <= max_depth_, "nesting deeper than ", max_depth_);
    TENSORDICT_CHECK_METADATA(
        at,
        at.string(at.member(meta, "cls"), "cls") == "NonTensorStack",
        "expected class 'NonTensorStack' for a stacked element");
    const Json& cls_metadata = at.member(meta, "cls_metadata");
    at.expect_object(cls_metadata, "cls_metadata");
    if (const auto it = cls_metadata.find("stack_dim");
        it != cls_metadata.end()) {
      TENSORDICT_CHECK_METADATA(
          at,
          at.integer(*it, "stack_dim") == 0,
          "only stack_dim 0 is supported, got ",
          it->dump());
    }
    const Json& non_tensors = at.member(meta, "non_tensors");
    at.expect_object(non_tensors, "non_tensors");
    const Json& leaves = at.member(meta, "leaves");
    TENSORDICT_CHECK_METADATA(
        at,
        leaves.is_object() && leaves.empty(),
        "a NonTensorStack holds no tensor leaves");
    int64_t n = 0;
    bool nested = false;
    for (auto it = meta.begin(); it != meta.end(); ++it) {
      if (!is_reserved_member(it.key())) {
        nested = true;
        ++n;
      }
    }
    TENSORDICT_CHECK_METADATA(
        at,
        !(nested && !non_tensors.empty()),
        "a NonTensorStack level mixes elements and nested stacks");
    if (!nested) {
      n = static_cast<int64_t>(non_tensors.size());
    }
    if (sizes.size() <= dim) {
      TENSORDICT_CHECK_METADATA(
          at,
          sizes.size() < MetadataReader::kMaxDims,
          "more than ",
          MetadataReader::kMaxDims,
          " dims");
      sizes.push_back(n);
    } else {
      TENSORDICT_CHECK_METADATA(
          at,
          sizes[dim] == n,
          "stacked elements have different sizes (",
          sizes[dim],
          " and ",
          n,
          ")");
    }
    for (int64_t i = 0; i < n; ++i) {
      const std::string name = std::to_string(i);
      const MetadataReader child = at.child(name);
      if (nested) {
        const auto it = meta.find(name);
        TENSORDICT_CHECK_METADATA(
            child, it != meta.end(), "missing stacked element '", name, "'");
        read_stack_values(
            *it, child, depth + 1, sizes, dim + 1, values, device);
        continue;
      }
      const auto it = non_tensors.find(name);
      TENSORDICT_CHECK_METADATA(
          child,
          it != non_tensors.end(),
          "missing stacked element '",
          name,
          "'");
      TENSORDICT_CHECK_METADATA(
          child,
          it->is_array() && it->size() == 3,
          "expected [data, batch_size, device], got ",
          it->dump().substr(0, 200));
      TENSORDICT_CHECK_METADATA(
          child,
          child.shape((*it)[1], "batch_size").empty(),
          "stacked non-tensor elements must have batch size []");
      TENSORDICT_CHECK_METADATA(
          child,
          dim + 1 == sizes.size(),
          "stacked elements have different numbers of dims");
      device = child.device((*it)[2]);
      values.push_back((*it)[0]);
    }
  }

  Value read_stack(
      const Json& meta,
      const MetadataReader& at,
      c10::IntArrayRef parent_batch,
      int64_t depth) const {
    std::vector<int64_t> sizes;
    std::vector<Json> values;
    std::optional<c10::Device> device;
    read_stack_values(meta, at, depth, sizes, 0, values, device);
    at.expect_batch_prefix(sizes, parent_batch, "batch size");
    return NonTensorStack(std::move(values), sizes, device);
  }

  static void append(
      TensorDictImpl& impl,
      const std::string& name,
      Value value,
      const MetadataReader& at) {
    TENSORDICT_CHECK_METADATA(
        at, impl.find(name) == nullptr, "the key appears twice");
    impl.append(name, std::move(value));
  }

  at::Tensor data_;
  int64_t data_size_;
  uintptr_t base_;
  int64_t max_depth_;
};

// A whole file or buffer split into its data region and its metadata.
struct SplitConsolidated {
  at::Tensor data;
  Json meta;
};

// Splits a whole file or buffer, checking the trailer.
SplitConsolidated split_consolidated(
    const at::Tensor& bytes,
    const std::string& source,
    const LoadConsolidatedOptions& options) {
  const int64_t size = bytes.numel();
  TORCH_CHECK(
      size >= kTrailerBytes,
      "invalid consolidated data in ",
      source,
      ": expected at least 8 bytes (the metadata length), got ",
      size);
  const auto* raw = static_cast<const uint8_t*>(bytes.const_data_ptr());
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) {
    length |= static_cast<uint64_t>(raw[size - kTrailerBytes + i]) << (8 * i);
  }
  TORCH_CHECK(
      length <= static_cast<uint64_t>(size - kTrailerBytes),
      "invalid consolidated data in ",
      source,
      ": the trailer gives a metadata length of ",
      length,
      " bytes, but only ",
      size - kTrailerBytes,
      " bytes precede it");
  TORCH_CHECK(
      length <= static_cast<uint64_t>(options.max_meta_bytes()),
      "invalid consolidated data in ",
      source,
      ": the metadata has ",
      length,
      " bytes, more than max_meta_bytes ",
      options.max_meta_bytes());
  const int64_t data_size = size - kTrailerBytes - static_cast<int64_t>(length);
  const std::string_view text(
      reinterpret_cast<const char*>(raw + data_size), length);
  Json meta = parse_meta_json(
      text, options.max_depth(), "the consolidated metadata of " + source);
  return {bytes.narrow(0, 0, data_size), std::move(meta)};
}

// Rebuilds the dict of a whole file or buffer.
TensorDict read_consolidated(
    const at::Tensor& bytes,
    const std::string& source,
    const LoadConsolidatedOptions& options) {
  const SplitConsolidated split = split_consolidated(bytes, source, options);
  const Reader reader(split.data, options.max_depth());
  return reader.read_dict(
      split.meta, MetadataReader(source, KeyPath()), /*parent_batch=*/{}, 0);
}

}  // namespace

TensorDict read_consolidated_parts(
    const at::Tensor& storage,
    const Json& metadata,
    const std::string& source,
    const LoadConsolidatedOptions& options) {
  TORCH_CHECK_VALUE(
      metadata.is_object(),
      "invalid consolidated metadata from ",
      source,
      ": expected an object, got ",
      metadata.type_name());
  const Reader reader(storage, options.max_depth());
  return reader.read_dict(
      metadata, MetadataReader(source, KeyPath()), /*parent_batch=*/{}, 0);
}

namespace {

int64_t file_size(const std::string& filename) {
  struct stat st {};
  TORCH_CHECK(
      ::stat(filename.c_str(), &st) == 0,
      "from_consolidated: cannot read ",
      filename,
      ": ",
      std::strerror(errno));
  TORCH_CHECK(
      S_ISREG(st.st_mode),
      "from_consolidated: ",
      filename,
      " is not a regular file");
  return static_cast<int64_t>(st.st_size);
}

// The whole file `filename`, mapped read-only.
at::Tensor map_consolidated_file(const std::string& filename) {
  TORCH_CHECK(
      detail::path_kind(filename) != detail::PathKind::kSymlink,
      "from_consolidated: refusing to read ",
      filename,
      " through a symlink");
  const int64_t size = detail::file_size(filename);
  TORCH_CHECK(
      size >= detail::kTrailerBytes,
      "invalid consolidated data in ",
      filename,
      ": expected at least 8 bytes (the metadata length), got ",
      size);
  const at::Tensor whole = detail::map_tensor_file(
      filename,
      c10::kByte,
      {size},
      MapMode::kReadOnly,
      "the consolidated file");
  detail::forget_mapped_filename(whole);
  return whole;
}

// Rebuilds the lazy stack at the root of a whole file or buffer.
LazyStackedTensorDict read_consolidated_stack(
    const at::Tensor& bytes,
    const std::string& source,
    const LoadConsolidatedOptions& options,
    const char* dict_loader) {
  const SplitConsolidated split = split_consolidated(bytes, source, options);
  const MetadataReader at(source, KeyPath());
  TORCH_CHECK_VALUE(
      split.meta.is_object(),
      "invalid consolidated data in ",
      source,
      ": the metadata is not an object");
  const auto cls = split.meta.find("cls");
  TORCH_CHECK_VALUE(
      cls != split.meta.end() && cls->is_string() &&
          cls->get_ref<const std::string&>() == "LazyStackedTensorDict",
      source,
      " holds a ",
      cls != split.meta.end() && cls->is_string()
          ? cls->get<std::string>()
          : std::string("tree of no known class"),
      ", not a lazy stack: load it with ",
      dict_loader);
  const Reader reader(split.data, options.max_depth());
  return reader.read_lazy_stack(split.meta, at, /*parent_batch=*/{}, 0);
}

// `bytes` checked as from_consolidated_bytes takes them: a 1-dim CPU uint8
// tensor, copied when its data is not aligned for every leaf dtype.
at::Tensor checked_buffer(const at::Tensor& bytes) {
  TORCH_CHECK_TYPE(
      bytes.defined() && bytes.scalar_type() == c10::kByte && bytes.dim() == 1,
      "from_consolidated_bytes expects a 1-dim uint8 tensor, got ",
      bytes.defined() ? bytes.toString() : std::string("an undefined tensor"),
      bytes.defined() ? " of shape " + c10::str(bytes.sizes()) : "");
  TORCH_CHECK_VALUE(
      bytes.is_cpu(),
      "from_consolidated_bytes expects CPU bytes, got device ",
      bytes.device().str());
  at::Tensor data = bytes.contiguous();
  if (reinterpret_cast<uintptr_t>(data.const_data_ptr()) % kAlignment != 0) {
    data = data.clone();
  }
  return data;
}

}  // namespace
}  // namespace detail

TensorDict TensorDict::from_consolidated(
    const std::string& filename, const LoadConsolidatedOptions& options) {
  return detail::read_consolidated(
      detail::map_consolidated_file(filename), filename, options);
}

LazyStackedTensorDict LazyStackedTensorDict::from_consolidated(
    const std::string& filename, const LoadConsolidatedOptions& options) {
  return detail::read_consolidated_stack(
      detail::map_consolidated_file(filename),
      filename,
      options,
      "TensorDict::from_consolidated");
}

LoadedTree from_consolidated_any(
    const std::string& filename, const LoadConsolidatedOptions& options) {
  // The metadata is parsed once; its root's class picks the reader, which
  // checks everything else as from_consolidated does.
  const detail::SplitConsolidated split = detail::split_consolidated(
      detail::map_consolidated_file(filename), filename, options);
  const detail::Reader reader(split.data, options.max_depth());
  const detail::MetadataReader at(filename, detail::KeyPath());
  const auto cls =
      split.meta.is_object() ? split.meta.find("cls") : split.meta.end();
  if (split.meta.is_object() && cls != split.meta.end() && cls->is_string() &&
      cls->get_ref<const std::string&>() == "LazyStackedTensorDict") {
    return reader.read_lazy_stack(split.meta, at, /*parent_batch=*/{}, 0);
  }
  return reader.read_dict(split.meta, at, /*parent_batch=*/{}, 0);
}

LazyStackedTensorDict LazyStackedTensorDict::from_consolidated_bytes(
    const at::Tensor& bytes, const LoadConsolidatedOptions& options) {
  return detail::read_consolidated_stack(
      detail::checked_buffer(bytes),
      "the byte buffer",
      options,
      "from_consolidated_bytes");
}

TensorDict from_consolidated_bytes(
    const at::Tensor& bytes, const LoadConsolidatedOptions& options) {
  return detail::read_consolidated(
      detail::checked_buffer(bytes), "the byte buffer", options);
}

TensorDict from_consolidated_bytes(
    const void* data, size_t size, const LoadConsolidatedOptions& options) {
  TORCH_CHECK_VALUE(
      size <= static_cast<size_t>(INT64_MAX),
      "buffer of ",
      size,
      " bytes is too large");
  at::Tensor bytes = at::empty(
      {static_cast<int64_t>(size)}, at::TensorOptions().dtype(c10::kByte));
  if (size > 0) {
    std::memcpy(bytes.data_ptr(), data, size);
  }
  return detail::read_consolidated(bytes, "the byte buffer", options);
}

TENSORDICT_END_NAMESPACE
