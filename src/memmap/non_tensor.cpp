// The memmap members of NonTensorData and NonTensorStack: a non-tensor value
// saved or loaded on its own, as the root of a directory (Python's
// NonTensorData.memmap / load_memmap). One body serves both classes.

#include "tensordict/non_tensor.h"

#include <c10/util/Exception.h>

#include <future>
#include <memory>
#include <string>
#include <type_traits>

#include "memmap/writer.h"
#include "tensordict/memmap.h"

TENSORDICT_BEGIN_NAMESPACE
namespace {

// Saves `value` as the root of `options.prefix()`; returns the directory it
// is now mapped from, or null when the options name none.
std::shared_ptr<const std::string> save_root(
    const Value& value, const MemmapOptions& options) {
  detail::save_non_tensor_root(value, options);
  if (options.prefix().empty()) {
    return nullptr;
  }
  return std::make_shared<const std::string>(options.prefix());
}

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

NonTensorData NonTensorData::memmap(const MemmapOptions& options) const {
  NonTensorData out = *this;
  return out.memmap_(options);
}

NonTensorData& NonTensorData::memmap_(const MemmapOptions& options) {
  if (auto dir = save_root(Value(*this), options)) {
    saved_path_ = std::move(dir);
  }
  return *this;
}

NonTensorData NonTensorData::memmap_like(const MemmapOptions& options) const {
  return memmap(options);
}

NonTensorData NonTensorData::save(const MemmapOptions& options) const {
  return memmap(options);
}

NonTensorData NonTensorData::dumps(const MemmapOptions& options) const {
  return memmap(options);
}

std::future<NonTensorData> NonTensorData::memmap_async(
    const MemmapOptions& options) const {
  return std::async(std::launch::async, [self = *this, options] {
    return self.memmap(options);
  });
}

std::future<NonTensorData> NonTensorData::memmap_async_(
    const MemmapOptions& options) {
  return std::async(std::launch::async, [this, options]() -> NonTensorData {
    return memmap_(options);
  });
}

std::future<NonTensorData> NonTensorData::memmap_like_async(
    const MemmapOptions& options) const {
  return std::async(std::launch::async, [self = *this, options] {
    return self.memmap_like(options);
  });
}

std::future<NonTensorData> NonTensorData::save_async(
    const MemmapOptions& options) const {
  return memmap_async(options);
}

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

NonTensorStack NonTensorStack::memmap(const MemmapOptions& options) const {
  NonTensorStack out = *this;
  return out.memmap_(options);
}

NonTensorStack& NonTensorStack::memmap_(const MemmapOptions& options) {
  if (auto dir = save_root(Value(*this), options)) {
    saved_path_ = std::move(dir);
  }
  return *this;
}

NonTensorStack NonTensorStack::memmap_like(const MemmapOptions& options) const {
  return memmap(options);
}

NonTensorStack NonTensorStack::save(const MemmapOptions& options) const {
  return memmap(options);
}

NonTensorStack NonTensorStack::dumps(const MemmapOptions& options) const {
  return memmap(options);
}

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
