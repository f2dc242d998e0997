// The zip integrity check of AOTInductor packages; see nn/aoti_zip.h. The
// parsing is io/zip.h's (see NOTE [Zip reader]); this adds what a package
// needs: every entry stored, every CRC-32 checked.

#include "nn/aoti_zip.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "io/file_io.h"
#include "io/zip.h"

TENSORDICT_BEGIN_NAMESPACE
namespace nn {
namespace aoti_internal {

uint32_t crc32_update(uint32_t crc, const unsigned char* data, size_t size) {
  return tensordict::detail::crc32_update(crc, data, size);
}

void check_zip_integrity(const std::string& path) {
  const std::string label = c10::str("AOTI package '", path, "'");
  TORCH_CHECK(
      ::access(path.c_str(), R_OK) == 0,
      label,
      ": cannot open the file: ",
      std::strerror(errno));
  const at::Tensor mapping =
      tensordict::detail::map_whole_file(path, /*writable=*/false, label);
  const auto* data = static_cast<const unsigned char*>(mapping.data_ptr());
  tensordict::detail::ZipParseOptions options;
  // Far above any package (a model has a handful of files).
  options.max_entries = uint64_t{1} << 20;
  const std::vector<tensordict::detail::ZipEntry> entries =
      tensordict::detail::parse_zip(
          data, static_cast<uint64_t>(mapping.numel()), label, options);
  for (const tensordict::detail::ZipEntry& entry : entries) {
    TORCH_CHECK(
        entry.method == tensordict::detail::kZipStored,
        label,
        ": entry '",
        entry.name,
        "' is compressed (method ",
        entry.method,
        "); torch writes packages uncompressed, so it was repacked or is "
        "corrupted");
    const uint32_t actual = tensordict::detail::crc32_update(
        0, data + entry.data_offset, static_cast<size_t>(entry.size));
    TORCH_CHECK(
        actual == entry.crc,
        label,
        ": entry '",
        entry.name,
        "' is corrupted: its CRC-32 is ",
        actual,
        ", but the archive records ",
        entry.crc);
  }
}

}  // namespace aoti_internal
}  // namespace nn
TENSORDICT_END_NAMESPACE
