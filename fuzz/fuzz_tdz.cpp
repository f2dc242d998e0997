// libFuzzer target: the zip reader of `.tdz` memmap archives over the input
// written as a file: is_memmap_archive, load_memmap (every leaf read, so a
// view outside the mapping would be caught) and unpack_memmap (CRCs,
// inflate, names).

#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>

#include "tensordict/archive.h"
#include "tensordict/tensordict.h"
#include "tree_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tensordict::fuzz::ScratchDir scratch;
  const std::string path = scratch.file("td.tdz");
  tensordict::fuzz::write_file(path, data, size);
  (void)tensordict::is_memmap_archive(path);
  try {
    const tensordict::TensorDict td = tensordict::TensorDict::load_memmap(path);
    for (const auto& key : td.keys(
             /*include_nested=*/true,
             /*leaves_only=*/true)) {
      const tensordict::Value* value = td.find(key);
      if (value != nullptr && value->is_tensor()) {
        (void)value->tensor().to(at::kDouble).sum().item<double>();
      }
    }
  } catch (const std::exception&) {
  }
  const std::string out = scratch.file("unpacked");
  try {
    (void)tensordict::unpack_memmap(path, out);
  } catch (const std::exception&) {
  }
  std::error_code ignored;
  std::filesystem::remove_all(out, ignored);
  return 0;
}
