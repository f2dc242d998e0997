// consolidate and consolidated_bytes: the writing side of NOTE
// [Consolidated layout] in tensordict/consolidate.h.

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "consolidate/layout.h"
#include "core/tensor_dict_impl.h"
#include "core/walk.h"
#include "io/atomic_file.h"
#include "io/file_io.h"
#include "io/format.h"
#include "tensordict/consolidate.h"
#include "util/huge_pages.h"
#include "util/python_spelling.h"
#include "util/shared_memory.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

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

// --- writing the metadata ---------------------------------------------

Json level_json(const char* cls, Json cls_metadata) {
  Json meta = Json::object();
  meta["cls"] = cls;
  meta["non_tensors"] = Json::object();
  meta["leaves"] = Json::object();
  meta["cls_metadata"] = std::move(cls_metadata);
  return meta;
}

void check_nested_name(const KeyPath& path) {
  TORCH_CHECK(
      !is_reserved_member(path.back()),
      "cannot consolidate ",
      describe(path),
      ": a nested entry named '",
      path.back(),
      "' would collide with a member of the consolidated metadata (cls, "
      "non_tensors, leaves, cls_metadata, size); rename it");
}

// A lazy stack's cls_metadata: its stack dim and the lock of its elements.
Json stack_cls_metadata(const LazyStackedTensorDict& stack) {
  Json cls_metadata = Json::object();
  cls_metadata["stack_dim"] = stack.stack_dim();
  cls_metadata["stack_dim_name"] =
      stack.stack_dim_name() ? Json(*stack.stack_dim_name()) : Json(nullptr);
  cls_metadata["is_locked"] =
      stack.tensordicts().front().unsafeGetImpl()->locked;
  return cls_metadata;
}

// A NonTensorStack of batch size [n, ...] is stored as Python stores it: a
// level per stacked dim, the elements of the last one as non-tensors.
Json stack_json(
    const NonTensorStack& stack, size_t dim, size_t flat_begin, bool locked) {
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

// Walks a dict into the metadata of NOTE [Consolidated layout], one JSON
// object per open level, and lists its leaves in walk order, which is the
// order of their bytes.
class MetadataBuilder : public WalkVisitor {
 public:
  explicit MetadataBuilder(const TensorDictImpl& root) {
    // Python writes "TensorDict" at the root even for a tensorclass.
    open(root, /*nested=*/false);
    KeyPath path;
    walk(root, *this, path);
  }
  // A lazy stack at the root: its level, then its elements "0", "1", ...
  // as for a lazy stack entry.
  explicit MetadataBuilder(const LazyStackedTensorDict& root) {
    levels_.push_back(
        level_json("LazyStackedTensorDict", stack_cls_metadata(root)));
    const std::vector<TensorDict>& elements = root.tensordicts();
    const std::vector<std::string> names = element_names(elements.size());
    KeyPath path;
    for (size_t i = 0; i < elements.size(); ++i) {
      const PathPart part(path, names[i]);
      open(*elements[i].unsafeGetImpl(), /*nested=*/true);
      walk(*elements[i].unsafeGetImpl(), *this, path);
      leave_dict(path, elements[i]);
    }
  }

  // The metadata of the root.
  const Json& metadata() const {
    return levels_.front();
  }
  std::vector<LeafCopy> leaves;
  int64_t total = 0;  // the bytes of the leaves, padding included

  bool enter_dict(const KeyPath& path, const TensorDict& dict) {
    check_nested_name(path);
    open(*dict.unsafeGetImpl(), /*nested=*/true);
    return true;
  }
  void leave_dict(const KeyPath& path, const TensorDict& /*dict*/) {
    Json level = std::move(levels_.back());
    levels_.pop_back();
    levels_.back()[std::string(path.back())] = std::move(level);
  }
  // A lazy stack is a level of its own whose members "0", "1", ... are its
  // elements, as Python writes it.
  bool enter_lazy_stack(
      const KeyPath& path, const LazyStackedTensorDict& stack) {
    check_nested_name(path);
    levels_.push_back(
        level_json("LazyStackedTensorDict", stack_cls_metadata(stack)));
    return true;
  }
  void leave_lazy_stack(
      const KeyPath& path, const LazyStackedTensorDict& stack) {
    leave_dict(path, stack.tensordicts().front());
  }
  void leaf(const KeyPath& path, const at::Tensor& t) {
    TORCH_CHECK(
        t.layout() == c10::kStrided && !t.is_nested(),
        "cannot consolidate ",
        describe(path),
        ": only strided tensors can be consolidated, got layout ",
        t.layout());
    TORCH_CHECK(
        is_saveable_dtype(t.scalar_type()),
        "cannot consolidate ",
        describe(path),
        ": dtype ",
        t.scalar_type(),
        " has no name Python tensordict can read");
    const int64_t itemsize = static_cast<int64_t>(t.element_size());
    TORCH_CHECK(
        total % itemsize == 0,
        "cannot consolidate ",
        describe(path),
        ": its ",
        dtype_name(t.scalar_type()),
        " data would start at byte ",
        total,
        ", not a multiple of its item size ",
        itemsize,
        ", and could not be viewed (Python cannot rebuild it either); "
        "move it before the leaves whose sizes are not multiples of ",
        itemsize,
        " bytes");
    const int64_t nbytes = t.numel() * itemsize;
    const int64_t pad = (kAlignment - nbytes % kAlignment) % kAlignment;
    levels_.back()["leaves"][std::string(path.back())] = Json::array(
        {dtype_name(t.scalar_type()),
         t.sizes().vec(),
         total,
         total + nbytes + pad,
         pad});
    leaves.push_back(LeafCopy{t, total, nbytes, pad});
    total += nbytes + pad;
  }
  void non_tensor(const KeyPath& path, const Value& value) {
    Json& level = levels_.back();
    const std::string key(path.back());
    if (value.is_non_tensor_data()) {
      const NonTensorData& data = value.non_tensor_data();
      level["non_tensors"][key] = Json::array(
          {data.data(), data.batch_size().vec(), device_json(data.device())});
      return;
    }
    check_nested_name(path);
    const NonTensorStack& stack = value.non_tensor_stack();
    TORCH_CHECK(
        !stack.batch_size().empty(),
        "cannot consolidate ",
        describe(path),
        ": a NonTensorStack needs at least one batch dim");
    // A stack records the lock state of the dict holding it.
    const bool locked = level["cls_metadata"]["is_locked"].get<bool>();
    level[key] = stack_json(stack, 0, 0, locked);
  }

 private:
  // A nested tensorclass's level is named by its class, as Python names it
  // (and reads it back as that class).
  void open(const TensorDictImpl& impl, bool nested) {
    Json cls_metadata = Json::object();
    cls_metadata["device"] = device_json(impl.device);
    cls_metadata["names"] = names_json(impl);
    cls_metadata["batch_size"] = impl.batch_size;
    cls_metadata["is_locked"] = impl.locked;
    levels_.push_back(level_json(
        nested && !impl.python_class.empty() ? impl.python_class.c_str()
                                             : "TensorDict",
        std::move(cls_metadata)));
  }

  std::vector<Json> levels_;  // the open levels, root first
};

// --- copying the leaves -----------------------------------------------

void copy_leaf(const LeafCopy& leaf, const at::Tensor& storage) {
  if (leaf.nbytes > 0) {
    const at::Tensor& src = leaf.source;
    if (storage.is_cpu() && src.is_cpu() && src.is_contiguous()) {
      std::memcpy(
          static_cast<uint8_t*>(storage.data_ptr()) + leaf.start,
          static_cast<const uint8_t*>(src.const_data_ptr()),
          static_cast<size_t>(leaf.nbytes));
    } else {
      const at::Tensor flat = src.contiguous().reshape({-1}).view(c10::kByte);
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
  const int64_t target =
      std::max<int64_t>(1, (total + num_threads - 1) / num_threads);
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

// --- building dicts of views -------------------------------------------

// Rebuilds `impl`'s structure over `storage`, its leaves in the order of
// MetadataBuilder's from `leaves[next]` on (`next` moves past them). Each dict
// keeps a device only if `keep_device` (then the storage's); a dict on that
// device moves its non-tensor values there.
TensorDict views_like(
    const TensorDictImpl& impl,
    const at::Tensor& storage,
    const std::vector<LeafCopy>& leaves,
    bool keep_device,
    size_t& next) {
  auto make_dict = [&](const TensorDictImpl& level) {
    std::optional<c10::Device> device;
    if (keep_device && level.device) {
      device = storage.device();
    }
    TensorDict dict = make_tensordict(level.batch_size, device, level.names);
    dict.unsafeGetImpl()->consolidated.storage = storage;
    return dict;
  };
  auto view = [&](const at::Tensor& /*source*/) {
    const LeafCopy& leaf = leaves[next++];
    return leaf_view(
        storage, leaf.start, leaf.source.scalar_type(), leaf.source.sizes());
  };
  return rebuild(impl, make_dict, view, /*move_non_tensors=*/true);
}

void write_trailer(uint8_t* dst, const std::string& json) {
  std::memcpy(dst, json.data(), json.size());
  const auto length = static_cast<uint64_t>(json.size());
  for (int i = 0; i < 8; ++i) {  // little-endian whatever the host
    dst[json.size() + i] = static_cast<uint8_t>(length >> (8 * i));
  }
}

}  // namespace
}  // namespace detail

namespace detail {
namespace {

// Allocates the storage of a consolidate where the options ask (a file, a
// shared, pinned or huge-page buffer, a device; else `own_device` or the
// CPU) and copies the leaves `built` lists into it. A file is written as a
// hidden sibling and renamed in once complete. Returns the data region.
at::Tensor write_storage(
    const MetadataBuilder& built,
    const ConsolidateOptions& options,
    const std::optional<c10::Device>& own_device) {
  const int64_t total = built.total;

  const bool to_file = !options.filename().empty();
  c10::Device device =
      options.device().value_or(own_device.value_or(c10::Device(c10::kCPU)));
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
  std::optional<AtomicFile> file;  // the file being written, until renamed
  if (to_file) {
    const std::string json =
        dump_json(built.metadata(), /*spaced=*/true, /*ascii=*/true);
    const int64_t file_bytes =
        total + static_cast<int64_t>(json.size()) + kTrailerBytes;
    const std::string& path = options.filename();
    TORCH_CHECK(
        path_kind(path) != PathKind::kDirectory,
        "consolidate: ",
        path,
        " is a directory");
    // Written as a hidden sibling and renamed over `path` once complete, so
    // a kill leaves the old file or the new one, never a truncated one; the
    // old file also stays intact for the dicts that map it. A killed
    // write's sibling is removed here once its process is gone.
    file.emplace(AtomicFile::beside(path, 0666, "the consolidated file"));
    // Mapped through its name (write_leaf_file takes the file the
    // AtomicFile created); a file too large for the disk throws here and
    // the AtomicFile removes it.
    const at::Tensor whole = write_leaf_file(
        file->temp_path(),
        /*data=*/nullptr,
        c10::kByte,
        {file_bytes},
        "the consolidated file",
        LeafFileOptions().existsok(true).preallocate(true));
    forget_mapped_filename(whole);
    write_trailer(static_cast<uint8_t*>(whole.data_ptr()) + total, json);
    storage = whole.narrow(0, 0, total);
  } else if (options.share_memory() && device.is_cpu()) {
    storage = shared_memory_tensor({total}, c10::kByte);
  } else if (device.is_cpu() && !options.pin_memory()) {
    storage = huge_page_bytes(total);
  } else {
    storage = at::empty(
        {total},
        at::TensorOptions()
            .dtype(c10::kByte)
            .device(device)
            .pinned_memory(options.pin_memory()));
  }
  copy_leaves(built.leaves, storage, options.num_threads(), total);
  if (file) {
    if (options.durable()) {
      sync_mapping(storage);
    }
    file->commit(options.durable());
  }

  return storage;
}

}  // namespace
}  // namespace detail

TensorDict TensorDict::consolidate(const ConsolidateOptions& options) const {
  if (is_consolidated() && options.filename().empty() &&
      !options.share_memory() && !options.pin_memory() &&
      (!options.device() ||
       *options.device() == impl_->consolidated.storage.device())) {
    return *this;
  }
  const detail::MetadataBuilder built(*impl_);
  const at::Tensor storage =
      detail::write_storage(built, options, impl_->device);
  size_t next = 0;
  TensorDict result = detail::views_like(
      *impl_,
      storage,
      built.leaves,
      /*keep_device=*/impl_->device.has_value() || options.device().has_value(),
      next);
  if (options.device() && !impl_->device) {
    // Nested dicts share the root's device.
    detail::for_each_dict(
        *result.unsafeGetImpl(),
        [&](detail::TensorDictImpl& dict) { dict.device = storage.device(); });
  }
  result.lock_();
  return result;
}

bool TensorDict::is_consolidated() const {
  const at::Tensor& storage = impl_->consolidated.storage;
  if (!storage.defined()) {
    return false;
  }
  bool dicts = true;
  detail::for_each_dict(*impl_, [&](const detail::TensorDictImpl& dict) {
    dicts = dicts && dict.consolidated.storage.defined();
  });
  const c10::StorageImpl* bytes = storage.storage().unsafeGetStorageImpl();
  return dicts && detail::all_tensors(*impl_, [&](const at::Tensor& t) {
           return t.has_storage() &&
                  t.storage().unsafeGetStorageImpl() == bytes;
         });
}

at::Tensor TensorDict::consolidated_storage() const {
  return is_consolidated() ? impl_->consolidated.storage : at::Tensor();
}

LazyStackedTensorDict LazyStackedTensorDict::consolidate(
    const ConsolidateOptions& options) const {
  if (is_consolidated() && options.filename().empty() &&
      !options.share_memory() && !options.pin_memory() &&
      (!options.device() ||
       *options.device() == consolidated_storage().device())) {
    return *this;
  }
  const detail::MetadataBuilder built(*this);
  const at::Tensor storage = detail::write_storage(built, options, device());
  // The elements' leaves follow one another in the storage, in the order
  // the metadata lists them.
  size_t next = 0;
  std::vector<TensorDict> elements;
  elements.reserve(tensordicts().size());
  for (const TensorDict& element : tensordicts()) {
    TensorDict views = detail::views_like(
        *element.unsafeGetImpl(),
        storage,
        built.leaves,
        /*keep_device=*/device().has_value() || options.device().has_value(),
        next);
    if (options.device() && !device()) {
      detail::for_each_dict(
          *views.unsafeGetImpl(), [&](detail::TensorDictImpl& dict) {
            dict.device = storage.device();
          });
    }
    views.lock_();
    elements.push_back(std::move(views));
  }
  LazyStackedTensorDict result(
      std::move(elements), stack_dim(), stack_dim_name());
  result.set_python_class(python_class());
  return result;
}

bool LazyStackedTensorDict::is_consolidated() const {
  const at::Tensor storage = tensordicts().front().consolidated_storage();
  if (!storage.defined()) {
    return false;
  }
  const c10::StorageImpl* bytes = storage.storage().unsafeGetStorageImpl();
  for (const TensorDict& element : tensordicts()) {
    const at::Tensor own = element.consolidated_storage();
    if (!own.defined() || own.storage().unsafeGetStorageImpl() != bytes) {
      return false;
    }
  }
  return true;
}

at::Tensor LazyStackedTensorDict::consolidated_storage() const {
  return is_consolidated() ? tensordicts().front().consolidated_storage()
                           : at::Tensor();
}

namespace detail {

ConsolidatedParts consolidated_parts(const TensorDict& td) {
  const TensorDictImpl& impl = *td.unsafeGetImpl();
  MetadataBuilder built(impl);
  const at::Tensor& current = impl.consolidated.storage;
  bool in_place = td.is_consolidated() && current.numel() == built.total;
  for (const LeafCopy& leaf : built.leaves) {
    if (!in_place) {
      break;
    }
    in_place = leaf.source.is_contiguous() &&
               leaf.source.storage_offset() * leaf.source.element_size() -
                       current.storage_offset() ==
                   leaf.start;
  }
  if (in_place) {
    return {current, built.metadata()};
  }
  at::Tensor storage = at::empty(
      {built.total},
      at::TensorOptions()
          .dtype(c10::kByte)
          .device(impl.device.value_or(c10::Device(c10::kCPU))));
  copy_leaves(built.leaves, storage, 0, built.total);
  return {storage, built.metadata()};
}

}  // namespace detail

namespace detail {
namespace {

// The data region, metadata and trailer of what `built` describes, in a new
// CPU buffer.
at::Tensor bytes_of(const MetadataBuilder& built) {
  const int64_t total = built.total;
  const std::string json =
      dump_json(built.metadata(), /*spaced=*/true, /*ascii=*/true);
  at::Tensor out = at::empty(
      {total + static_cast<int64_t>(json.size()) + kTrailerBytes},
      at::TensorOptions().dtype(c10::kByte));
  // A dict loaded from Python's file may list its leaves in another order
  // than their bytes, so each leaf is copied to its new offset.
  copy_leaves(built.leaves, out, 0, total);
  write_trailer(static_cast<uint8_t*>(out.data_ptr()) + total, json);
  return out;
}

}  // namespace
}  // namespace detail

at::Tensor consolidated_bytes(const TensorDict& td) {
  const TensorDict cons = td.is_consolidated() ? td : td.consolidate();
  // The metadata of the dict as it is now (batch sizes, names, lock).
  return detail::bytes_of(detail::MetadataBuilder(*cons.unsafeGetImpl()));
}

at::Tensor consolidated_bytes(const LazyStackedTensorDict& stack) {
  // The metadata of the stack as it is now (its elements' locks included),
  // as `consolidate(filename)` writes it; the leaves are copied straight
  // into the buffer.
  return detail::bytes_of(detail::MetadataBuilder(stack));
}

TENSORDICT_END_NAMESPACE
