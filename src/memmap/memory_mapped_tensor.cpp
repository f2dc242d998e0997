// MemoryMappedTensor: tensors over files or anonymous shared memory.

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <string>

#include "io/file_io.h"
#include "io/format.h"
#include "tensordict/memmap.h"

TENSORDICT_BEGIN_NAMESPACE

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
  at::Tensor result =
      empty(tensor.sizes(), tensor.scalar_type(), filename, options.existsok());
  if (options.copy_data() && result.numel() > 0) {
    result.copy_(tensor.detach());
  }
  return result;
}

// New files (sized, never written) and anonymous shared memory both start
// zeroed, so `empty` and `zeros` are one factory.
at::Tensor MemoryMappedTensor::empty(
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
  if (c10::multiply_integers(shape) == 0) {
    return at::empty(shape, at::TensorOptions().dtype(dtype));
  }
  return detail::write_leaf_file(
      filename,
      /*data=*/nullptr,
      dtype,
      shape,
      filename,
      detail::LeafFileOptions().existsok(existsok));
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
  at::Tensor result = empty(shape, dtype, filename, existsok);
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
