// libFuzzer target: the zip reader of `.tdz` memmap archives over the input
// written as a file: is_memmap_archive, load_memmap (every leaf read, so a
// view outside the mapping would be caught), unpack_memmap (CRCs, inflate,
// names), then refresh_archive_checksums (which writes into the file: every
// offset it writes at must lie inside it) and a load of the result.

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
  try {
    const auto before = std::filesystem::file_size(path);
    (void)tensordict::refresh_archive_checksums(path);
    if (std::filesystem::file_size(path) != before) {
      __builtin_trap();  // it may only rewrite CRC fields in place
    }
    (void)tensordict::unpack_memmap(path, out);
  } catch (const std::exception&) {
  }
  std::filesystem::remove_all(out, ignored);
  return 0;
}
