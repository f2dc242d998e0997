// MemoryMappedTensor: tensors over files or anonymous shared memory.

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <string>

#include "memmap/file_io.h"
#include "memmap/meta_json.h"
#include "tensordict/memmap.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

// A new mapped tensor of `shape`: zeros in a new (or reused) file, or in
// anonymous shared memory when `filename` is empty.
at::Tensor new_mapped(
    c10::IntArrayRef shape,
    c10::ScalarType dtype,
    const std::string& filename,
    bool existsok) {
  for (const int64_t size : shape) {
    TORCH_CHECK_VALUE(size >= 0, "negative size in shape ", shape);
  }
  if (filename.empty()) {
    return detail::shared_memory_tensor(shape, dtype);
  }
  const int64_t numel = c10::multiply_integers(shape);
  if (numel == 0) {
    return at::empty(shape, at::TensorOptions().dtype(dtype));
  }
  return detail::write_leaf_file(
      filename,
      nullptr,
      dtype,
      shape,
      existsok,
      /*zeros=*/true,
      /*durable=*/false,
      filename);
}

} // namespace

at::Tensor MemoryMappedTensor::from_tensor(
    const at::Tensor& tensor,
    const std::string& filename,
    bool existsok,
    bool copy_existing,
    bool copy_data) {
  TORCH_CHECK_VALUE(tensor.defined(), "from_tensor needs a defined tensor");
  if (const auto backing = detail::mapped_filename(tensor)) {
    if (!filename.empty() && detail::same_file(*backing, filename)) {
      return tensor;
    }
    TORCH_CHECK(
        copy_existing,
        "A filename was provided but the tensor already has a file "
        "associated (",
        *backing,
        "). To copy the tensor onto the new location, pass "
        "copy_existing=true.");
  }
  at::Tensor result =
      new_mapped(tensor.sizes(), tensor.scalar_type(), filename, existsok);
  if (copy_data && result.numel() > 0) {
    result.copy_(tensor.detach());
  }
  return result;
}

at::Tensor MemoryMappedTensor::empty(
    c10::IntArrayRef shape,
    c10::ScalarType dtype,
    const std::string& filename,
    bool existsok) {
  return new_mapped(shape, dtype, filename, existsok);
}

at::Tensor MemoryMappedTensor::zeros(
    c10::IntArrayRef shape,
    c10::ScalarType dtype,
    const std::string& filename,
    bool existsok) {
  // New files and shared memory start zeroed.
  return new_mapped(shape, dtype, filename, existsok);
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
  at::Tensor result = new_mapped(shape, dtype, filename, existsok);
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

std::optional<std::string> MemoryMappedTensor::filename(
    const at::Tensor& tensor) {
  return detail::mapped_filename(tensor);
}

bool MemoryMappedTensor::is_memmap(const at::Tensor& tensor) {
  return detail::is_mapped(tensor);
}

std::string encode_key_for_filesystem(std::string_view key) {
  return detail::encode_key(key);
}

TENSORDICT_END_NAMESPACE
