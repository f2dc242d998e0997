// The load members of NonTensorData and NonTensorStack: a non-tensor value
// loaded on its own, as the root of a directory (Python's
// NonTensorData.load_memmap). One body serves both classes; their save
// members are memmap/save.cpp's.

#include "tensordict/non_tensor.h"

#include <c10/util/Exception.h>

#include <future>
#include <memory>
#include <string>
#include <type_traits>

#include "memmap/reader.h"
#include "tensordict/memmap.h"

TENSORDICT_BEGIN_NAMESPACE
namespace {

// The directory `load_memmap(prefix, options)` reads.
std::shared_ptr<const std::string> loaded_directory(
    const std::string& prefix, const LoadMemmapOptions& options) {
  std::string dir = prefix;
  for (const std::string& part : options.subpath()) {
    dir += "/" + part;
  }
  return std::make_shared<const std::string>(std::move(dir));
}

// Loads a directory whose root must be a `T` (NonTensorData or
// NonTensorStack).
template <typename T>
T load_root(const std::string& prefix, const LoadMemmapOptions& options) {
  constexpr bool kData = std::is_same_v<T, NonTensorData>;
  const Value value = detail::load_non_tensor_root(prefix, options);
  TORCH_CHECK(
      kData ? value.is_non_tensor_data() : value.is_non_tensor_stack(),
      prefix,
      " holds a ",
      value.type_name(),
      ", not a ",
      kData ? "NonTensorData" : "NonTensorStack",
      ": load it with ",
      value.type_name(),
      "::load_memmap");
  if constexpr (kData) {
    return value.non_tensor_data();
  } else {
    return value.non_tensor_stack();
  }
}

}  // namespace

// --- NonTensorData

NonTensorData NonTensorData::load_memmap(
    const std::string& prefix, const LoadMemmapOptions& options) {
  NonTensorData out = load_root<NonTensorData>(prefix, options);
  out.saved_path_ = loaded_directory(prefix, options);
  return out;
}

NonTensorData& NonTensorData::load_memmap(
    const std::string& prefix,
    NonTensorData& out,
    const LoadMemmapOptions& options) {
  // Loaded whole first, so that an error leaves `out` as it was.
  const NonTensorData loaded = load_memmap(prefix, options);
  out.data_ = loaded.data_;
  out.saved_path_ = loaded.saved_path_;
  return out;
}

NonTensorData NonTensorData::load(
    const std::string& prefix, const LoadMemmapOptions& options) {
  return load_memmap(prefix, options);
}

NonTensorData& NonTensorData::load_memmap_(
    const std::string& prefix, const LoadMemmapOptions& options) {
  return load_memmap(prefix, *this, options);
}

NonTensorData& NonTensorData::load_(
    const std::string& prefix, const LoadMemmapOptions& options) {
  return load_memmap_(prefix, options);
}

NonTensorData& NonTensorData::memmap_refresh_() {
  TORCH_CHECK(
      saved_path_ != nullptr,
      "Cannot refresh a NonTensorData that is not memory mapped or has no "
      "path associated.");
  // The directory stores no batch dims (nor does Python's): keep ours.
  data_ = load_memmap(*saved_path_).data_;
  return *this;
}

// --- NonTensorStack

NonTensorStack NonTensorStack::load_memmap(
    const std::string& prefix, const LoadMemmapOptions& options) {
  NonTensorStack out = load_root<NonTensorStack>(prefix, options);
  out.saved_path_ = loaded_directory(prefix, options);
  return out;
}

NonTensorStack NonTensorStack::load(
    const std::string& prefix, const LoadMemmapOptions& options) {
  return load_memmap(prefix, options);
}

NonTensorStack& NonTensorStack::load_memmap_(
    const std::string& prefix, const LoadMemmapOptions& options) {
  *this = load_memmap(prefix, options);
  return *this;
}

NonTensorStack& NonTensorStack::load_(
    const std::string& prefix, const LoadMemmapOptions& options) {
  return load_memmap_(prefix, options);
}

NonTensorStack& NonTensorStack::memmap_refresh_() {
  TORCH_CHECK(
      saved_path_ != nullptr,
      "Cannot refresh a NonTensorStack that is not memory mapped or has no "
      "path associated.");
  *this = load_memmap(*saved_path_);
  return *this;
}

TENSORDICT_END_NAMESPACE
