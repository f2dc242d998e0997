// consolidate, from_consolidated and the byte-buffer form; see NOTE
// [Consolidated layout] in tensordict/consolidate.h. Metadata read from a
// file or a buffer is checked member by member before it is used.

#include "tensordict/consolidate.h"

#include <ATen/ops/empty.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>
#include <c10/util/safe_numerics.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "detail/format.h"
#include "detail/shared_memory.h"
#include "detail/tensor_dict_impl.h"
#include "memmap/file_io.h"
#include "memmap/meta_json.h"
#include "tensordict/errors.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

constexpr int64_t kAlignment = 8;
constexpr int64_t kTrailerBytes = 8;

// Members of a level's metadata object that are not nested keys.
bool is_reserved_member(std::string_view key) {
  return key == "cls" || key == "non_tensors" || key == "leaves" ||
      key == "cls_metadata" || key == "size";
}

Json device_json(const std::optional<c10::Device>& device) {
  return device ? Json(device->str()) : Json(nullptr);
}

Json names_json(const TensorDictImpl& impl) {
  Json names = Json::array();
  for (size_t i = 0; i < impl.batch_size.size(); ++i) {
    if (!impl.names.empty() && impl.names[i]) {
      names.push_back(*impl.names[i]);
    } else {
      names.push_back(nullptr);
    }
  }
  return names;
}

// One tensor leaf to copy into the storage.
struct LeafCopy {
  at::Tensor source;
  int64_t start = 0;
  int64_t nbytes = 0;
  int64_t pad = 0;
};

// --- writing the metadata ------------------------------------------------------

Json level_json(const char* cls, Json cls_metadata) {
  Json meta = Json::object();
  meta["cls"] = cls;
  meta["non_tensors"] = Json::object();
  meta["leaves"] = Json::object();
  meta["cls_metadata"] = std::move(cls_metadata);
  return meta;
}

void check_nested_name(const std::string& name, const NestedKey& key) {
  TORCH_CHECK(
      !is_reserved_member(name),
      "cannot consolidate ",
      describe(key),
      ": a nested entry named '",
      name,
      "' would collide with a member of the consolidated metadata (cls, "
      "non_tensors, leaves, cls_metadata, size); rename it");
}

// A NonTensorStack of batch size [n, ...] is stored as Python stores it: a
// level per stacked dim, the elements of the last one as non-tensors.
Json stack_json(
    const NonTensorStack& stack,
    size_t dim,
    size_t flat_begin,
    bool locked) {
  Json cls_metadata = Json::object();
  cls_metadata["stack_dim"] = 0;
  cls_metadata["stack_dim_name"] = nullptr;
  cls_metadata["is_locked"] = locked;
  Json meta = level_json("NonTensorStack", std::move(cls_metadata));
  const auto sizes = stack.batch_size();
  const int64_t n = sizes[dim];
  size_t inner = 1;
  for (size_t d = dim + 1; d < sizes.size(); ++d) {
    inner *= static_cast<size_t>(sizes[d]);
  }
  for (int64_t i = 0; i < n; ++i) {
    const std::string name = std::to_string(i);
    const size_t begin = flat_begin + static_cast<size_t>(i) * inner;
    if (dim + 1 == sizes.size()) {
      meta["non_tensors"][name] = Json::array(
          {stack.values()[begin], Json::array(), device_json(stack.device())});
    } else {
      meta[name] = stack_json(stack, dim + 1, begin, locked);
    }
  }
  return meta;
}

Json build_metadata(
    const TensorDictImpl& impl,
    const std::optional<NestedKey>& prefix,
    std::vector<LeafCopy>& leaves,
    int64_t& offset) {
  Json cls_metadata = Json::object();
  cls_metadata["device"] = device_json(impl.device);
  cls_metadata["names"] = names_json(impl);
  cls_metadata["batch_size"] = impl.batch_size;
  cls_metadata["is_locked"] = impl.locked;
  Json meta = level_json("TensorDict", std::move(cls_metadata));
  for (const Node* node : impl.nodes()) {
    const NestedKey key = child_key(prefix, node->key);
    const Value& value = node->value;
    switch (value.kind()) {
      case Value::Kind::kTensor: {
        const at::Tensor& t = value.tensor();
        TORCH_CHECK(
            t.layout() == c10::kStrided && !t.is_nested(),
            "cannot consolidate ",
            describe(key),
            ": only strided tensors can be consolidated, got layout ",
            t.layout());
        TORCH_CHECK(
            is_saveable_dtype(t.scalar_type()),
            "cannot consolidate ",
            describe(key),
            ": dtype ",
            t.scalar_type(),
            " has no name Python tensordict can read");
        const int64_t itemsize = static_cast<int64_t>(t.element_size());
        TORCH_CHECK(
            offset % itemsize == 0,
            "cannot consolidate ",
            describe(key),
            ": its ",
            dtype_name(t.scalar_type()),
            " data would start at byte ",
            offset,
            ", not a multiple of its item size ",
            itemsize,
            ", and could not be viewed (Python cannot rebuild it either); "
            "move it before the leaves whose sizes are not multiples of ",
            itemsize,
            " bytes");
        const int64_t nbytes = t.numel() * itemsize;
        const int64_t pad = (kAlignment - nbytes % kAlignment) % kAlignment;
        meta["leaves"][node->key] = Json::array(
            {dtype_name(t.scalar_type()),
             t.sizes().vec(),
             offset,
             offset + nbytes + pad,
             pad});
        leaves.push_back(LeafCopy{t, offset, nbytes, pad});
        offset += nbytes + pad;
        break;
      }
      case Value::Kind::kTensorDict:
        check_nested_name(node->key, key);
        meta[node->key] = build_metadata(
            *value.tensordict().unsafeGetImpl(), key, leaves, offset);
        break;
      case Value::Kind::kNonTensorData: {
        const NonTensorData& data = value.non_tensor_data();
        meta["non_tensors"][node->key] = Json::array(
            {data.data(), data.batch_size().vec(), device_json(data.device())});
        break;
      }
      case Value::Kind::kNonTensorStack: {
        check_nested_name(node->key, key);
        const NonTensorStack& stack = value.non_tensor_stack();
        TORCH_CHECK(
            !stack.batch_size().empty(),
            "cannot consolidate ",
            describe(key),
            ": a NonTensorStack needs at least one batch dim");
        meta[node->key] = stack_json(stack, 0, 0, impl.locked);
        break;
      }
    }
  }
  return meta;
}

// --- copying the leaves ----------------------------------------------------------

void copy_leaf(const LeafCopy& leaf, const at::Tensor& storage) {
  if (leaf.nbytes > 0) {
    const at::Tensor& src = leaf.source;
    if (storage.is_cpu() && src.is_cpu() && src.is_contiguous()) {
      std::memcpy(
          static_cast<uint8_t*>(storage.data_ptr()) + leaf.start,
          static_cast<const uint8_t*>(src.const_data_ptr()),
          static_cast<size_t>(leaf.nbytes));
    } else {
      const at::Tensor flat =
          src.contiguous().reshape({-1}).view(c10::kByte);
      storage.narrow(0, leaf.start, leaf.nbytes).copy_(flat);
    }
  }
  if (leaf.pad > 0) {
    if (storage.is_cpu()) {
      std::memset(
          static_cast<uint8_t*>(storage.data_ptr()) + leaf.start + leaf.nbytes,
          0,
          static_cast<size_t>(leaf.pad));
    } else {
      storage.narrow(0, leaf.start + leaf.nbytes, leaf.pad).zero_();
    }
  }
}

void copy_leaves(
    const std::vector<LeafCopy>& leaves,
    const at::Tensor& storage,
    int64_t num_threads,
    int64_t total) {
  if (num_threads <= 1 || leaves.size() < 2 || !storage.is_cpu()) {
    for (const LeafCopy& leaf : leaves) {
      copy_leaf(leaf, storage);
    }
    return;
  }
  // Chunks of consecutive leaves of about equal byte size, one per thread.
  const int64_t target = std::max<int64_t>(1, (total + num_threads - 1) / num_threads);
  std::vector<std::pair<size_t, size_t>> chunks;
  size_t begin = 0;
  int64_t bytes = 0;
  for (size_t i = 0; i < leaves.size(); ++i) {
    bytes += leaves[i].nbytes + leaves[i].pad;
    if (bytes >= target || i + 1 == leaves.size()) {
      chunks.emplace_back(begin, i + 1);
      begin = i + 1;
      bytes = 0;
    }
  }
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(chunks.size());
  threads.reserve(chunks.size());
  for (size_t c = 0; c < chunks.size(); ++c) {
    threads.emplace_back([&, c] {
      try {
        for (size_t i = chunks[c].first; i < chunks[c].second; ++i) {
          copy_leaf(leaves[i], storage);
        }
      } catch (...) {
        errors[c] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  for (const auto& error : errors) {
    if (error) {
      std::rethrow_exception(error);
    }
  }
}

// --- building dicts of views ---------------------------------------------------

at::Tensor leaf_view(
    const at::Tensor& storage,
    int64_t start,
    c10::ScalarType dtype,
    c10::IntArrayRef shape) {
  // A TensorImpl over the storage directly: no dispatch per leaf.
  const int64_t itemsize = static_cast<int64_t>(c10::elementSize(dtype));
  std::vector<int64_t> strides(shape.size(), 1);
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

// Rebuilds `impl`'s structure over `storage` by walking the same leaves in
// the same order as build_metadata.
TensorDict views_like(
    const TensorDictImpl& impl,
    const at::Tensor& storage,
    const std::vector<LeafCopy>& leaves,
    size_t& next,
    bool keep_device) {
  std::optional<c10::Device> device;
  if (keep_device && impl.device) {
    device = storage.device();
  }
  TensorDict result = make_tensordict(impl.batch_size, device, impl.names);
  TensorDictImpl& out = *result.unsafeGetImpl();
  out.reserve(impl.nodes().size());
  for (const Node* node : impl.nodes()) {
    const Value& value = node->value;
    switch (value.kind()) {
      case Value::Kind::kTensor: {
        const LeafCopy& leaf = leaves[next++];
        out.append(
            node->key,
            leaf_view(
                storage,
                leaf.start,
                leaf.source.scalar_type(),
                leaf.source.sizes()));
        break;
      }
      case Value::Kind::kTensorDict:
        out.append(
            node->key,
            views_like(
                *value.tensordict().unsafeGetImpl(),
                storage,
                leaves,
                next,
                keep_device));
        break;
      case Value::Kind::kNonTensorData: {
        NonTensorData data = value.non_tensor_data();
        if (device) {
          data.set_device(device);
        }
        out.append(node->key, std::move(data));
        break;
      }
      case Value::Kind::kNonTensorStack: {
        NonTensorStack stack = value.non_tensor_stack();
        if (device) {
          stack.set_device(device);
        }
        out.append(node->key, std::move(stack));
        break;
      }
    }
  }
  out.consolidated_storage = storage;
  return result;
}

void mark_consolidated(TensorDictImpl& impl, const at::Tensor& storage) {
  impl.consolidated_storage = storage;
  for (const Node* node : impl.nodes()) {
    if (node->value.is_tensordict()) {
      mark_consolidated(*node->value.tensordict().unsafeGetImpl(), storage);
    }
  }
}

bool all_leaves_in(const TensorDictImpl& impl, const c10::StorageImpl* storage) {
  for (const Node* node : impl.nodes()) {
    const Value& value = node->value;
    if (value.is_tensor()) {
      const at::Tensor& t = value.tensor();
      if (!t.has_storage() || t.storage().unsafeGetStorageImpl() != storage) {
        return false;
      }
    } else if (value.is_tensordict()) {
      const TensorDictImpl& child = *value.tensordict().unsafeGetImpl();
      if (!child.consolidated_storage.defined() ||
          !all_leaves_in(child, storage)) {
        return false;
      }
    }
  }
  return true;
}

void write_trailer(uint8_t* dst, const std::string& json) {
  std::memcpy(dst, json.data(), json.size());
  const auto length = static_cast<uint64_t>(json.size());
  for (int i = 0; i < 8; ++i) { // little-endian whatever the host
    dst[json.size() + i] = static_cast<uint8_t>(length >> (8 * i));
  }
}

// --- reading untrusted metadata ----------------------------------------------

// Checks untrusted metadata; the message arguments are only evaluated when
// the check fails (they may dump JSON).
#define TD_READER_CHECK(cond, key, ...) \
  if (C10_UNLIKELY(!(cond))) {           \
    fail(key, __VA_ARGS__);              \
  }

class Reader {
 public:
  Reader(const at::Tensor& data, std::string source, int64_t max_depth)
      : data_(data),
        data_size_(data.numel()),
        base_(reinterpret_cast<uintptr_t>(data.const_data_ptr())),
        source_(std::move(source)),
        max_depth_(max_depth) {}

  TensorDict read_dict(
      const Json& meta,
      const std::optional<NestedKey>& key,
      c10::IntArrayRef parent_batch,
      int64_t depth) {
    TD_READER_CHECK(meta.is_object(), key, "expected a JSON object, got ", type(meta));
    TD_READER_CHECK(depth <= max_depth_, key, "nesting deeper than ", max_depth_);
    const std::string cls = member_string(meta, "cls", key);
    TD_READER_CHECK(
        cls == "TensorDict",
        key,
        "class '",
        cls,
        "' is not supported; expected 'TensorDict'",
        cls == "LazyStackedTensorDict" ? " (lazy stacks cannot be loaded)"
                                       : "");
    const Json& cls_metadata = member(meta, "cls_metadata", key);
    TD_READER_CHECK(
        cls_metadata.is_object(),
        key,
        "'cls_metadata' must be an object, got ",
        type(cls_metadata));
    std::vector<int64_t> batch =
        int_list(member(cls_metadata, "batch_size", key), key, "batch_size");
    check_prefix(batch, parent_batch, key, "batch size");
    std::optional<c10::Device> device =
        parse_device(member(cls_metadata, "device", key), key);
    DimNames names;
    if (const auto it = cls_metadata.find("names"); it != cls_metadata.end()) {
      names = parse_names(*it, batch.size(), key);
    }
    bool locked = false;
    if (const auto it = cls_metadata.find("is_locked");
        it != cls_metadata.end()) {
      TD_READER_CHECK(it->is_boolean(), key, "'is_locked' must be a boolean");
      locked = it->get<bool>();
    }

    TensorDict result = make_tensordict(batch, device, std::move(names));
    TensorDictImpl& impl = *result.unsafeGetImpl();

    const Json& non_tensors = member(meta, "non_tensors", key);
    TD_READER_CHECK(
        non_tensors.is_object(),
        key,
        "'non_tensors' must be an object, got ",
        type(non_tensors));
    for (auto it = non_tensors.begin(); it != non_tensors.end(); ++it) {
      const std::string& name = it.key();
      const Json& entry = it.value();
      const NestedKey child = child_key(key, name);
      append(impl, name, read_non_tensor(entry, child, batch), child);
    }

    const Json& leaves = member(meta, "leaves", key);
    TD_READER_CHECK(
        leaves.is_object(), key, "'leaves' must be an object, got ", type(leaves));
    for (auto it = leaves.begin(); it != leaves.end(); ++it) {
      const std::string& name = it.key();
      const Json& entry = it.value();
      const NestedKey child = child_key(key, name);
      at::Tensor leaf = read_leaf(entry, child);
      check_prefix(leaf.sizes(), batch, child, "shape");
      if (device) {
        TD_READER_CHECK(
            *device == data_.device(),
            child,
            "the dict's device is ",
            device->str(),
            " but the data is on ",
            data_.device().str());
      }
      append(impl, name, std::move(leaf), child);
    }

    for (auto it = meta.begin(); it != meta.end(); ++it) {
      const std::string& name = it.key();
      const Json& entry = it.value();
      if (is_reserved_member(name)) {
        continue;
      }
      const NestedKey child = child_key(key, name);
      TD_READER_CHECK(
          entry.is_object(),
          child,
          "expected the metadata object of a nested dict, got ",
          type(entry));
      const auto cls_it = entry.find("cls");
      if (cls_it != entry.end() && cls_it->is_string() &&
          cls_it->get_ref<const std::string&>() == "NonTensorStack") {
        append(impl, name, read_stack(entry, child, batch, depth + 1), child);
      } else {
        append(impl, name, read_dict(entry, child, batch, depth + 1), child);
      }
    }
    impl.consolidated_storage = data_;
    if (locked) {
      result.lock_();
    }
    return result;
  }

 private:
  template <typename... Args>
  [[noreturn]] void fail(
      const std::optional<NestedKey>& key,
      const Args&... args) const {
    TORCH_CHECK(
        false,
        "invalid consolidated metadata in ",
        source_,
        " at ",
        describe(key),
        ": ",
        args...);
  }

  static std::string type(const Json& value) {
    return value.type_name();
  }

  const Json& member(
      const Json& object,
      const char* name,
      const std::optional<NestedKey>& key) const {
    const auto it = object.find(name);
    TD_READER_CHECK(it != object.end(), key, "missing member '", name, "'");
    return *it;
  }

  std::string member_string(
      const Json& object,
      const char* name,
      const std::optional<NestedKey>& key) const {
    const Json& value = member(object, name, key);
    TD_READER_CHECK(
        value.is_string(),
        key,
        "'",
        name,
        "' must be a string, got ",
        type(value));
    return value.get<std::string>();
  }

  int64_t integer(
      const Json& value,
      const std::optional<NestedKey>& key,
      const char* what) const {
    TD_READER_CHECK(
        value.is_number_integer(),
        key,
        what,
        " must be an integer, got ",
        value.dump());
    if (value.is_number_unsigned()) {
      TD_READER_CHECK(
          value.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX),
          key,
          what,
          " ",
          value.dump(),
          " is out of range");
    }
    return value.get<int64_t>();
  }

  std::vector<int64_t> int_list(
      const Json& value,
      const std::optional<NestedKey>& key,
      const char* what) const {
    TD_READER_CHECK(
        value.is_array(),
        key,
        what,
        " must be a list of integers, got ",
        type(value));
    TD_READER_CHECK(
        value.size() <= kMaxDims,
        key,
        what,
        " has ",
        value.size(),
        " dims, more than ",
        kMaxDims);
    std::vector<int64_t> out;
    out.reserve(value.size());
    for (const Json& item : value) {
      const int64_t v = integer(item, key, what);
      TD_READER_CHECK(v >= 0, key, what, " ", value.dump(), " has a negative size");
      out.push_back(v);
    }
    return out;
  }

  void check_prefix(
      c10::IntArrayRef sizes,
      c10::IntArrayRef batch,
      const std::optional<NestedKey>& key,
      const char* what) const {
    const bool ok = sizes.size() >= batch.size() &&
        std::equal(batch.begin(), batch.end(), sizes.begin());
    TD_READER_CHECK(
        ok,
        key,
        what,
        " ",
        sizes,
        " does not start with the batch size ",
        batch);
  }

  std::optional<c10::Device> parse_device(
      const Json& value,
      const std::optional<NestedKey>& key) const {
    if (value.is_null()) {
      return std::nullopt;
    }
    TD_READER_CHECK(
        value.is_string(),
        key,
        "device must be a string or null, got ",
        type(value));
    const auto& text = value.get_ref<const std::string&>();
    try {
      return c10::Device(text);
    } catch (const c10::Error&) {
      TD_READER_CHECK(false, key, "invalid device string '", text, "'");
    }
    return std::nullopt;
  }

  DimNames parse_names(
      const Json& value,
      size_t batch_dims,
      const std::optional<NestedKey>& key) const {
    if (value.is_null()) {
      return {};
    }
    TD_READER_CHECK(value.is_array(), key, "names must be a list, got ", type(value));
    TD_READER_CHECK(
        value.size() == batch_dims,
        key,
        "names ",
        value.dump(),
        " do not match the ",
        batch_dims,
        " batch dims");
    DimNames names;
    bool any = false;
    for (const Json& name : value) {
      if (name.is_null()) {
        names.emplace_back(std::nullopt);
      } else {
        TD_READER_CHECK(
            name.is_string(),
            key,
            "a dim name must be a string or null, got ",
            name.dump());
        names.emplace_back(name.get<std::string>());
        any = true;
      }
    }
    if (!any) {
      return {};
    }
    for (size_t i = 0; i < names.size(); ++i) {
      for (size_t j = i + 1; j < names.size(); ++j) {
        TD_READER_CHECK(
            !(names[i] && names[j] && *names[i] == *names[j]),
            key,
            "dim name '",
            *names[i],
            "' is repeated");
      }
    }
    return names;
  }

  at::Tensor read_leaf(const Json& entry, const NestedKey& key) const {
    TD_READER_CHECK(
        entry.is_array() && (entry.size() == 5 || entry.size() == 6),
        key,
        "expected [dtype, shape, start, stop, pad], got ",
        entry.dump().substr(0, 200));
    TD_READER_CHECK(
        entry.size() == 5 && key.back().rfind("<NJT", 0) != 0,
        key,
        "jagged nested tensors are not supported");
    TD_READER_CHECK(
        entry[0].is_string(),
        key,
        "dtype must be a string, got ",
        entry[0].dump());
    const auto& dtype_text = entry[0].get_ref<const std::string&>();
    const std::optional<c10::ScalarType> dtype = cached_dtype(dtype_text);
    TD_READER_CHECK(dtype.has_value(), key, "unknown dtype '", dtype_text, "'");
    const std::vector<int64_t> shape = int_list(entry[1], key, "shape");
    const int64_t start = integer(entry[2], key, "start");
    const int64_t stop = integer(entry[3], key, "stop");
    const int64_t pad = integer(entry[4], key, "pad");
    const auto itemsize = static_cast<uint64_t>(c10::elementSize(*dtype));
    uint64_t nbytes = itemsize;
    for (const int64_t size : shape) {
      TD_READER_CHECK(
          !c10::mul_overflows(nbytes, static_cast<uint64_t>(size), &nbytes) &&
              nbytes <= static_cast<uint64_t>(INT64_MAX),
          key,
          "shape ",
          entry[1].dump(),
          " overflows a 64-bit byte count");
    }
    TD_READER_CHECK(
        start >= 0 && start <= stop && stop <= data_size_,
        key,
        "byte range [",
        start,
        ", ",
        stop,
        ") is not within the ",
        data_size_,
        " bytes of data");
    TD_READER_CHECK(pad >= 0 && pad < kAlignment, key, "pad ", pad, " is not in [0, 8)");
    TD_READER_CHECK(
        static_cast<uint64_t>(stop - start) >= nbytes,
        key,
        "shape ",
        entry[1].dump(),
        " ",
        dtype_text,
        " needs ",
        nbytes,
        " bytes, but its byte range [",
        start,
        ", ",
        stop,
        ") holds ",
        stop - start);
    TD_READER_CHECK(
        (base_ + static_cast<uint64_t>(start)) % itemsize == 0,
        key,
        dtype_text,
        " data at byte ",
        start,
        " is not aligned to its item size ",
        itemsize);
    return leaf_view(data_, start, *dtype, shape);
  }

  Value read_non_tensor(
      const Json& entry,
      const NestedKey& key,
      c10::IntArrayRef parent_batch) const {
    TD_READER_CHECK(
        entry.is_array() && entry.size() == 3,
        key,
        "expected [data, batch_size, device], got ",
        entry.dump().substr(0, 200));
    std::vector<int64_t> batch = int_list(entry[1], key, "batch_size");
    check_prefix(batch, parent_batch, key, "batch size");
    return NonTensorData(entry[0], batch, parse_device(entry[2], key));
  }

  // Reads a NonTensorStack level: elements "0".."n-1", as non-tensors at the
  // last dim or as nested stack levels.
  void read_stack_values(
      const Json& meta,
      const NestedKey& key,
      int64_t depth,
      std::vector<int64_t>& sizes,
      size_t dim,
      std::vector<Json>& values,
      std::optional<c10::Device>& device) const {
    TD_READER_CHECK(meta.is_object(), key, "expected a JSON object, got ", type(meta));
    TD_READER_CHECK(depth <= max_depth_, key, "nesting deeper than ", max_depth_);
    TD_READER_CHECK(
        member_string(meta, "cls", key) == "NonTensorStack",
        key,
        "expected class 'NonTensorStack' for a stacked element");
    const Json& cls_metadata = member(meta, "cls_metadata", key);
    TD_READER_CHECK(cls_metadata.is_object(), key, "'cls_metadata' must be an object");
    if (const auto it = cls_metadata.find("stack_dim");
        it != cls_metadata.end()) {
      TD_READER_CHECK(
          integer(*it, key, "stack_dim") == 0,
          key,
          "only stack_dim 0 is supported, got ",
          it->dump());
    }
    const Json& non_tensors = member(meta, "non_tensors", key);
    TD_READER_CHECK(non_tensors.is_object(), key, "'non_tensors' must be an object");
    const Json& leaves = member(meta, "leaves", key);
    TD_READER_CHECK(
        leaves.is_object() && leaves.empty(),
        key,
        "a NonTensorStack holds no tensor leaves");
    int64_t n = 0;
    bool nested = false;
    for (auto it = meta.begin(); it != meta.end(); ++it) {
      if (!is_reserved_member(it.key())) {
        nested = true;
        ++n;
      }
    }
    TD_READER_CHECK(
        !(nested && !non_tensors.empty()),
        key,
        "a NonTensorStack level mixes elements and nested stacks");
    if (!nested) {
      n = static_cast<int64_t>(non_tensors.size());
    }
    if (sizes.size() <= dim) {
      TD_READER_CHECK(sizes.size() < kMaxDims, key, "more than ", kMaxDims, " dims");
      sizes.push_back(n);
    } else {
      TD_READER_CHECK(
          sizes[dim] == n,
          key,
          "stacked elements have different sizes (",
          sizes[dim],
          " and ",
          n,
          ")");
    }
    for (int64_t i = 0; i < n; ++i) {
      const std::string name = std::to_string(i);
      const NestedKey child = key.child(name);
      if (nested) {
        const auto it = meta.find(name);
        TD_READER_CHECK(it != meta.end(), child, "missing stacked element '", name, "'");
        read_stack_values(
            *it, child, depth + 1, sizes, dim + 1, values, device);
        continue;
      }
      const auto it = non_tensors.find(name);
      TD_READER_CHECK(
          it != non_tensors.end(), child, "missing stacked element '", name, "'");
      TD_READER_CHECK(
          it->is_array() && it->size() == 3,
          child,
          "expected [data, batch_size, device], got ",
          it->dump().substr(0, 200));
      TD_READER_CHECK(
          int_list((*it)[1], child, "batch_size").empty(),
          child,
          "stacked non-tensor elements must have batch size []");
      if (dim + 1 != sizes.size()) {
        TD_READER_CHECK(false, child, "stacked elements have different numbers of dims");
      }
      device = parse_device((*it)[2], child);
      values.push_back((*it)[0]);
    }
  }

  Value read_stack(
      const Json& meta,
      const NestedKey& key,
      c10::IntArrayRef parent_batch,
      int64_t depth) const {
    std::vector<int64_t> sizes;
    std::vector<Json> values;
    std::optional<c10::Device> device;
    read_stack_values(meta, key, depth, sizes, 0, values, device);
    check_prefix(sizes, parent_batch, key, "batch size");
    return NonTensorStack(std::move(values), sizes, device);
  }

  // dtype_from_name builds a string per candidate: remember the few names
  // a file uses.
  std::optional<c10::ScalarType> cached_dtype(const std::string& name) const {
    for (const auto& [known, dtype] : dtype_cache_) {
      if (known == name) {
        return dtype;
      }
    }
    const std::optional<c10::ScalarType> dtype = dtype_from_name(name);
    if (dtype && dtype_cache_.size() < 64) {
      dtype_cache_.emplace_back(name, *dtype);
    }
    return dtype;
  }

  void append(
      TensorDictImpl& impl,
      const std::string& name,
      Value value,
      const NestedKey& key) const {
    TD_READER_CHECK(impl.find(name) == nullptr, key, "the key appears twice");
    impl.append(name, std::move(value));
  }

  at::Tensor data_;
  int64_t data_size_;
  uintptr_t base_;
  std::string source_;
  int64_t max_depth_;
  mutable std::vector<std::pair<std::string, c10::ScalarType>> dtype_cache_;
};

// Splits a whole file or buffer into its data region and metadata, checking
// the trailer, and rebuilds the dict.
TensorDict read_consolidated(
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
  const Json meta = parse_meta_json(
      text, options.max_depth(), "the consolidated metadata of " + source);
  Reader reader(bytes.narrow(0, 0, data_size), source, options.max_depth());
  return reader.read_dict(meta, std::nullopt, {}, 0);
}

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

} // namespace

TensorDict move_consolidated(
    const TensorDict& td,
    c10::Device device,
    bool non_blocking) {
  const TensorDictImpl& root = *td.unsafeGetImpl();
  const at::Tensor& storage = root.consolidated_storage;
  const at::Tensor moved = storage.to(device, non_blocking);
  const int64_t base = storage.storage_offset();
  // Each leaf keeps its byte offset, sizes and strides over the new storage.
  auto rebuild = [&](const auto& self, const TensorDictImpl& impl) -> TensorDict {
    TensorDict result = make_tensordict(impl.batch_size, device, impl.names);
    TensorDictImpl& out = *result.unsafeGetImpl();
    for (const Node* node : impl.nodes()) {
      const Value& value = node->value;
      if (value.is_tensor()) {
        const at::Tensor& t = value.tensor();
        const int64_t itemsize = static_cast<int64_t>(t.element_size());
        const int64_t byte_offset =
            moved.storage_offset() + t.storage_offset() * itemsize - base;
        TORCH_INTERNAL_ASSERT(byte_offset % itemsize == 0);
        at::Tensor leaf = at::empty({0}, moved.options().dtype(t.scalar_type()));
        leaf.set_(moved.storage(), byte_offset / itemsize, t.sizes(), t.strides());
        out.append(node->key, std::move(leaf));
      } else if (value.is_tensordict()) {
        out.append(node->key, self(self, *value.tensordict().unsafeGetImpl()));
      } else if (value.is_non_tensor_data()) {
        NonTensorData data = value.non_tensor_data();
        data.set_device(device);
        out.append(node->key, std::move(data));
      } else {
        NonTensorStack stack = value.non_tensor_stack();
        stack.set_device(device);
        out.append(node->key, std::move(stack));
      }
    }
    out.consolidated_storage = moved;
    return result;
  };
  TensorDict result = rebuild(rebuild, root);
  if (root.locked) {
    result.lock_();
  }
  return result;
}

} // namespace detail

TensorDict TensorDict::consolidate(const ConsolidateOptions& options) const {
  if (is_consolidated() && options.filename().empty() &&
      !options.share_memory() && !options.pin_memory() &&
      (!options.device() ||
       *options.device() == impl_->consolidated_storage.device())) {
    return *this;
  }
  std::vector<detail::LeafCopy> leaves;
  int64_t total = 0;
  const Json metadata =
      detail::build_metadata(*impl_, std::nullopt, leaves, total);

  const bool to_file = !options.filename().empty();
  c10::Device device = options.device().value_or(
      impl_->device.value_or(c10::Device(c10::kCPU)));
  TORCH_CHECK(
      !to_file || device.is_cpu(),
      "consolidate: device and filename are mutually exclusive arguments "
      "(the file is mapped on the CPU, got device ",
      device.str(),
      ")");
  if (to_file) {
    device = c10::Device(c10::kCPU);
  }

  at::Tensor storage;
  if (to_file) {
    const std::string json = detail::dump_json(
        metadata, /*spaced=*/true, /*ascii=*/true);
    const int64_t file_bytes =
        total + static_cast<int64_t>(json.size()) + detail::kTrailerBytes;
    const std::string& path = options.filename();
    // A larger existing file would keep its tail and hide the trailer; a new
    // file also leaves the old one intact for dicts that map it.
    TORCH_CHECK(
        detail::path_kind(path) != detail::PathKind::kDirectory,
        "consolidate: ",
        path,
        " is a directory");
    detail::remove_file(path);
    const at::Tensor whole = detail::write_leaf_file(
        path,
        nullptr,
        c10::kByte,
        {file_bytes},
        /*existsok=*/true,
        /*zeros=*/true,
        /*durable=*/false,
        "the consolidated file");
    detail::write_trailer(
        static_cast<uint8_t*>(whole.data_ptr()) + total, json);
    storage = whole.narrow(0, 0, total);
  } else if (options.share_memory() && device.is_cpu()) {
    storage = detail::shared_memory_tensor({total}, c10::kByte);
  } else {
    storage = at::empty(
        {total},
        at::TensorOptions().dtype(c10::kByte).device(device).pinned_memory(
            options.pin_memory()));
  }
  detail::copy_leaves(leaves, storage, options.num_threads(), total);

  size_t next = 0;
  TensorDict result = detail::views_like(
      *impl_,
      storage,
      leaves,
      next,
      /*keep_device=*/impl_->device.has_value() || options.device().has_value());
  if (options.device() && !impl_->device) {
    result.unsafeGetImpl()->device = storage.device();
    // Nested dicts share the root's device.
    for (const auto& value : result.values(/*include_nested=*/true)) {
      if (value.is_tensordict()) {
        value.tensordict().unsafeGetImpl()->device = storage.device();
      }
    }
  }
  result.lock_();
  return result;
}

bool TensorDict::is_consolidated() const {
  const at::Tensor& storage = impl_->consolidated_storage;
  if (!storage.defined()) {
    return false;
  }
  return detail::all_leaves_in(*impl_, storage.storage().unsafeGetStorageImpl());
}

at::Tensor TensorDict::consolidated_storage() const {
  return is_consolidated() ? impl_->consolidated_storage : at::Tensor();
}

TensorDict TensorDict::from_consolidated(
    const std::string& filename,
    const LoadConsolidatedOptions& options) {
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
      filename, c10::kByte, {size}, MapMode::kReadOnly, "the consolidated file");
  return detail::read_consolidated(whole, filename, options);
}

at::Tensor consolidated_bytes(const TensorDict& td) {
  const TensorDict cons = td.is_consolidated() ? td : td.consolidate();
  const detail::TensorDictImpl& impl = *cons.unsafeGetImpl();
  // The metadata of the dict as it is now (batch sizes, names, lock).
  std::vector<detail::LeafCopy> leaves;
  int64_t total = 0;
  const Json metadata = detail::build_metadata(impl, std::nullopt, leaves, total);
  const std::string json =
      detail::dump_json(metadata, /*spaced=*/true, /*ascii=*/true);
  at::Tensor out = at::empty(
      {total + static_cast<int64_t>(json.size()) + detail::kTrailerBytes},
      at::TensorOptions().dtype(c10::kByte));
  // A dict loaded from Python's file may list its leaves in another order
  // than their bytes, so each leaf is copied to its new offset.
  detail::copy_leaves(leaves, out, 0, total);
  detail::write_trailer(static_cast<uint8_t*>(out.data_ptr()) + total, json);
  return out;
}

TensorDict from_consolidated_bytes(
    const at::Tensor& bytes,
    const LoadConsolidatedOptions& options) {
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
  if (reinterpret_cast<uintptr_t>(data.const_data_ptr()) % detail::kAlignment != 0) {
    data = data.clone();
  }
  return detail::read_consolidated(data, "the byte buffer", options);
}

TensorDict from_consolidated_bytes(
    const void* data,
    size_t size,
    const LoadConsolidatedOptions& options) {
  TORCH_CHECK_VALUE(
      size <= static_cast<size_t>(INT64_MAX), "buffer of ", size, " bytes is too large");
  at::Tensor bytes = at::empty(
      {static_cast<int64_t>(size)}, at::TensorOptions().dtype(c10::kByte));
  if (size > 0) {
    std::memcpy(bytes.data_ptr(), data, size);
  }
  return detail::read_consolidated(bytes, "the byte buffer", options);
}

TENSORDICT_END_NAMESPACE
