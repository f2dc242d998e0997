#pragma once

// The integrity check of a `.pt2` package (a zip archive) before libtorch
// extracts it and opens the shared library inside. See NOTE [Untrusted
// packages] in tensordict/aoti.h.

#include <cstddef>
#include <cstdint>
#include <string>

#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE
namespace nn {
namespace aoti_internal {

// Throws c10::Error, naming the file and the entry, unless `path` is a zip
// archive whose central directory, local headers and entry bounds are
// consistent with the file's size, whose entries are stored uncompressed
// (what torch writes), and whose every entry matches its CRC-32.
void check_zip_integrity(const std::string& path);

// Returns the CRC-32 (zip's, IEEE 802.3) of `size` bytes, continuing `crc`.
uint32_t crc32_update(uint32_t crc, const unsigned char* data, size_t size);

}  // namespace aoti_internal
}  // namespace nn
TENSORDICT_END_NAMESPACE
