// MemoryMappedTensor: tensors over files or anonymous shared memory.

#include <ATen/MapAllocator.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <filesystem>
#include <string>

#include "io/file_io.h"
#include "io/format.h"
#include "tensordict/memmap.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

// A tensor over a new (or reused) file of `shape`, zeroed, or anonymous
// shared memory without a name. `preallocate` reserves the blocks of a
// file the caller is about to fill, so a full disk throws here instead of
// raising SIGBUS in the copy through the mapping.
at::Tensor file_tensor(
    c10::IntArrayRef shape,
    c10::ScalarType dtype,
    const std::string& filename,
    bool existsok,
    bool preallocate) {
  for (const int64_t size : shape) {
    TORCH_CHECK_VALUE(size >= 0, "negative size in shape ", shape);
  }
  if (filename.empty()) {
    return detail::shared_memory_tensor(shape, dtype);
  }
  if (c10::multiply_integers(shape) == 0) {
    return at::empty(shape, at::TensorOptions().dtype(dtype));
  }
  return detail::write_leaf_file(
      filename,
      /*data=*/nullptr,
      dtype,
      shape,
      filename,
      detail::LeafFileOptions().existsok(existsok).preallocate(preallocate));
}

}  // namespace

at::Tensor MemoryMappedTensor::from_tensor(
    const at::Tensor& tensor, const FromTensorOptions& options) {
  TORCH_CHECK_VALUE(tensor.defined(), "from_tensor needs a defined tensor");
  const std::string& filename = options.filename();
  if (const auto backing = detail::mapped_filename(tensor)) {
    if (!filename.empty() && detail::same_file(*backing, filename)) {
      return tensor;
    }
    TORCH_CHECK(
        options.copy_existing(),
        "A filename was provided but the tensor already has a file "
        "associated (",
        *backing,
        "). To copy the tensor onto the new location, pass "
        "copy_existing=true.");
  }
  at::Tensor result = file_tensor(
      tensor.sizes(),
      tensor.scalar_type(),
      filename,
      options.existsok(),
      /*preallocate=*/options.copy_data());
  if (options.copy_data() && result.numel() > 0) {
    result.copy_(tensor.detach());
  }
  return result;
}

// New files (sized, never written) and anonymous shared memory both start
// zeroed, so `empty` and `zeros` are one factory. Their files stay sparse,
// as Python's do: a dataset laid out with memmap_like takes disk space only
// as it is filled.
at::Tensor MemoryMappedTensor::empty(
    c10::IntArrayRef shape,
    c10::ScalarType dtype,
    const std::string& filename,
    bool existsok) {
  return file_tensor(shape, dtype, filename, existsok, /*preallocate=*/false);
}

at::Tensor MemoryMappedTensor::zeros(
    c10::IntArrayRef shape,
    c10::ScalarType dtype,
    const std::string& filename,
    bool existsok) {
  return empty(shape, dtype, filename, existsok);
}

at::Tensor MemoryMappedTensor::ones(
    c10::IntArrayRef shape,
    c10::ScalarType dtype,
    const std::string& filename,
    bool existsok) {
  return full(shape, 1, dtype, filename, existsok);
}

at::Tensor MemoryMappedTensor::full(
    c10::IntArrayRef shape,
    const c10::Scalar& value,
    c10::ScalarType dtype,
    const std::string& filename,
    bool existsok) {
  at::Tensor result =
      file_tensor(shape, dtype, filename, existsok, /*preallocate=*/true);
  result.fill_(value);
  return result;
}

at::Tensor MemoryMappedTensor::from_filename(
    const std::string& filename,
    c10::ScalarType dtype,
    c10::IntArrayRef shape,
    MapMode mode) {
  for (const int64_t size : shape) {
    TORCH_CHECK_VALUE(size >= 0, "negative size in shape ", shape);
  }
  return detail::map_tensor_file(filename, dtype, shape, mode, filename);
}

namespace {

// The file torch's own MapAllocator (at::from_file, Python's
// UntypedStorage.from_file) mapped `storage` from, if it did.
std::optional<std::string> torch_mapped_filename(const c10::Storage& storage) {
  if (!storage) {
    return std::nullopt;
  }
  const at::MapAllocator* allocator =
      at::MapAllocator::fromDataPtr(storage.data_ptr());
  // Shared memory (a name under /dev/shm, no file) is not a file.
  if (allocator == nullptr ||
      (allocator->flags() & at::ALLOCATOR_MAPPED_SHAREDMEM) != 0 ||
      allocator->filename() == nullptr || *allocator->filename() == '\0') {
    return std::nullopt;
  }
  return std::filesystem::absolute(allocator->filename()).string();
}

// The same file, or (once it is gone) the same path.
bool same_path(const std::string& a, const std::string& b) {
  return detail::same_file(a, b) ||
         std::filesystem::absolute(a).lexically_normal() ==
             std::filesystem::absolute(b).lexically_normal();
}

}  // namespace

at::Tensor MemoryMappedTensor::from_storage(
    const c10::Storage& storage, const FromStorageOptions& options) {
  TORCH_CHECK_VALUE(storage, "from_storage needs a storage, got none");
  TORCH_CHECK_VALUE(
      storage.device().is_cpu(),
      "from_storage: expected a storage on the CPU (Python's device None or "
      "\"cpu\"), got one on ",
      storage.device().str());
  const c10::ScalarType dtype = options.dtype();
  const int64_t itemsize = static_cast<int64_t>(c10::elementSize(dtype));
  const int64_t elements = static_cast<int64_t>(storage.nbytes()) / itemsize;
  at::Tensor result = at::empty({0}, at::TensorOptions().dtype(dtype))
                          .set_(storage, /*storage_offset=*/0, {elements}, {1});
  if (options.shape()) {
    const std::vector<int64_t>& shape = *options.shape();
    int64_t known = 1;
    int inferred = 0;
    for (const int64_t size : shape) {
      TORCH_CHECK_VALUE(
          size >= -1,
          "from_storage: negative size in shape ",
          c10::IntArrayRef(shape));
      if (size == -1) {
        ++inferred;
      } else {
        known *= size;
      }
    }
    TORCH_CHECK_VALUE(
        inferred <= 1,
        "from_storage: only one size may be -1, got ",
        c10::IntArrayRef(shape));
    TORCH_CHECK_VALUE(
        inferred == 1 ? (known != 0 && elements % known == 0)
                      : known == elements,
        "from_storage: shape ",
        c10::IntArrayRef(shape),
        " does not fit the storage: expected ",
        elements,
        " elements of ",
        c10::toString(dtype),
        " (",
        storage.nbytes(),
        " bytes), the shape holds ",
        inferred == 1 ? "a multiple of " : "",
        known);
    result = result.view(shape);
  }
  if (!options.filename().empty()) {
    const std::optional<std::string> backing = filename(result);
    TORCH_CHECK_VALUE(
        backing.has_value(),
        "from_storage: filename ",
        options.filename(),
        " was given but the storage is not mapped from a file");
    TORCH_CHECK(
        same_path(*backing, options.filename()),
        "from_storage: the storage is mapped from ",
        *backing,
        ", not from the filename given (",
        options.filename(),
        ")");
  }
  return result;
}

std::optional<std::string> MemoryMappedTensor::filename(
    const at::Tensor& tensor) {
  if (auto ours = detail::mapped_filename(tensor)) {
    return ours;
  }
  if (tensor.defined() && tensor.has_storage()) {
    return torch_mapped_filename(tensor.storage());
  }
  return std::nullopt;
}

bool MemoryMappedTensor::is_memmap(const at::Tensor& tensor) {
  return detail::is_mapped(tensor);
}

std::string encode_key_for_filesystem(std::string_view key) {
  return detail::encode_key(key);
}

TENSORDICT_END_NAMESPACE
