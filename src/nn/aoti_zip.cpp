// The zip integrity check of AOTInductor packages; see nn/aoti_zip.h.

#include "nn/aoti_zip.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

TENSORDICT_BEGIN_NAMESPACE
namespace nn {
namespace aoti_internal {
namespace {

constexpr uint32_t kEndOfCentralDirectory = 0x06054b50;
constexpr uint32_t kZip64EndLocator = 0x07064b50;
constexpr uint32_t kZip64End = 0x06064b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr size_t kEndSize = 22;
constexpr size_t kZip64LocatorSize = 20;
constexpr size_t kZip64EndSize = 56;
constexpr size_t kCentralSize = 46;
constexpr size_t kLocalSize = 30;
constexpr size_t kMaxComment = 0xffff;
// Far above any package (a model has a handful of files), far below what
// would make the checker's own memory a problem.
constexpr uint64_t kMaxEntries = 1 << 20;

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) {
      c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    }
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

uint64_t read_le(const unsigned char* p, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i) {
    value |= static_cast<uint64_t>(p[i]) << (8 * i);
  }
  return value;
}

class ZipFile {
 public:
  explicit ZipFile(const std::string& path) : path_(path) {
    in_.open(path, std::ios::binary);
    TORCH_CHECK(in_.good(), "AOTI package '", path, "': cannot open the file");
    in_.seekg(0, std::ios::end);
    const std::streamoff end = in_.tellg();
    TORCH_CHECK(end >= 0, "AOTI package '", path, "': cannot read the file");
    size_ = static_cast<uint64_t>(end);
  }

  uint64_t size() const {
    return size_;
  }

  // Reads `bytes` at `offset`, which the caller has checked against size().
  std::vector<unsigned char> read(uint64_t offset, uint64_t bytes) {
    std::vector<unsigned char> data(bytes);
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(
        reinterpret_cast<char*>(data.data()),
        static_cast<std::streamsize>(bytes));
    TORCH_CHECK(
        in_.good() || (bytes == 0),
        "AOTI package '",
        path_,
        "': reading ",
        bytes,
        " bytes at offset ",
        offset,
        " failed");
    return data;
  }

  uint32_t crc(uint64_t offset, uint64_t bytes) {
    constexpr uint64_t kChunk = 1 << 20;
    std::vector<unsigned char> buffer(
        static_cast<size_t>(std::min(bytes, kChunk)));
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    uint32_t crc = 0;
    while (bytes > 0) {
      const uint64_t n = std::min(bytes, kChunk);
      in_.read(
          reinterpret_cast<char*>(buffer.data()),
          static_cast<std::streamsize>(n));
      TORCH_CHECK(
          in_.good(), "AOTI package '", path_, "': reading an entry failed");
      crc = crc32_update(crc, buffer.data(), static_cast<size_t>(n));
      bytes -= n;
    }
    return crc;
  }

  const std::string& path() const {
    return path_;
  }

 private:
  std::string path_;
  std::ifstream in_;
  uint64_t size_ = 0;
};

struct Directory {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t entries = 0;
};

// Finds the end-of-central-directory record (and its zip64 form) from the
// end of the file; the comment length must reach the file's end exactly.
Directory find_directory(ZipFile& zip) {
  const std::string& path = zip.path();
  TORCH_CHECK(
      zip.size() >= kEndSize,
      "AOTI package '",
      path,
      "' is not a zip archive: it has ",
      zip.size(),
      " bytes, fewer than a zip's end record (22); is the file truncated?");
  const uint64_t tail = std::min<uint64_t>(zip.size(), kEndSize + kMaxComment);
  const uint64_t tail_start = zip.size() - tail;
  const std::vector<unsigned char> data = zip.read(tail_start, tail);
  for (uint64_t i = tail - kEndSize + 1; i-- > 0;) {
    const unsigned char* p = data.data() + i;
    if (read_le(p, 4) != kEndOfCentralDirectory ||
        i + kEndSize + read_le(p + 20, 2) != tail) {
      continue;
    }
    Directory dir;
    dir.entries = read_le(p + 10, 2);
    dir.size = read_le(p + 12, 4);
    dir.offset = read_le(p + 16, 4);
    const uint64_t end_offset = tail_start + i;
    if (dir.entries == 0xffff || dir.size == 0xffffffff ||
        dir.offset == 0xffffffff) {
      TORCH_CHECK(
          end_offset >= kZip64LocatorSize,
          "AOTI package '",
          path,
          "': zip64 archive without its locator");
      const std::vector<unsigned char> locator =
          zip.read(end_offset - kZip64LocatorSize, kZip64LocatorSize);
      TORCH_CHECK(
          read_le(locator.data(), 4) == kZip64EndLocator,
          "AOTI package '",
          path,
          "': zip64 archive without its locator");
      const uint64_t record = read_le(locator.data() + 8, 8);
      TORCH_CHECK(
          record <= zip.size() && zip.size() - record >= kZip64EndSize,
          "AOTI package '",
          path,
          "': the zip64 end record at ",
          record,
          " lies outside the file (",
          zip.size(),
          " bytes)");
      const std::vector<unsigned char> end = zip.read(record, kZip64EndSize);
      TORCH_CHECK(
          read_le(end.data(), 4) == kZip64End,
          "AOTI package '",
          path,
          "': bad zip64 end record signature");
      dir.entries = read_le(end.data() + 32, 8);
      dir.size = read_le(end.data() + 40, 8);
      dir.offset = read_le(end.data() + 48, 8);
    }
    TORCH_CHECK(
        dir.offset <= end_offset && dir.size <= end_offset - dir.offset,
        "AOTI package '",
        path,
        "': its central directory (",
        dir.size,
        " bytes at offset ",
        dir.offset,
        ") lies outside the file (",
        zip.size(),
        " bytes); is the file truncated or corrupted?");
    TORCH_CHECK(
        dir.entries <= kMaxEntries,
        "AOTI package '",
        path,
        "': ",
        dir.entries,
        " entries, more than the ",
        kMaxEntries,
        " a package may have");
    return dir;
  }
  TORCH_CHECK(
      false,
      "AOTI package '",
      path,
      "' is not a zip archive: no end-of-central-directory record; is the "
      "file truncated?");
  return Directory{};
}

// Rejects names that would extract outside the package's directory.
void check_entry_name(const std::string& path, const std::string& name) {
  bool bad = name.empty() || name.front() == '/' ||
             name.find('\\') != std::string::npos ||
             name.find('\0') != std::string::npos;
  size_t start = 0;
  while (!bad && start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) {
      end = name.size();
    }
    bad = name.compare(start, end - start, "..") == 0;
    start = end + 1;
  }
  TORCH_CHECK(
      !bad,
      "AOTI package '",
      path,
      "': the entry name '",
      name,
      "' would be extracted outside the package directory");
}

}  // namespace

uint32_t crc32_update(uint32_t crc, const unsigned char* data, size_t size) {
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) {
    crc = kCrcTable[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  }
  return ~crc;
}

void check_zip_integrity(const std::string& path) {
  ZipFile zip(path);
  const Directory dir = find_directory(zip);
  const std::vector<unsigned char> central = zip.read(dir.offset, dir.size);
  uint64_t pos = 0;
  for (uint64_t index = 0; index < dir.entries; ++index) {
    TORCH_CHECK(
        dir.size - pos >= kCentralSize &&
            read_le(central.data() + pos, 4) == kCentralHeader,
        "AOTI package '",
        path,
        "': central directory entry ",
        index,
        " of ",
        dir.entries,
        " is malformed; is the file corrupted?");
    const unsigned char* p = central.data() + pos;
    const uint64_t method = read_le(p + 10, 2);
    const uint32_t crc = static_cast<uint32_t>(read_le(p + 16, 4));
    uint64_t compressed = read_le(p + 20, 4);
    uint64_t uncompressed = read_le(p + 24, 4);
    const uint64_t name_len = read_le(p + 28, 2);
    const uint64_t extra_len = read_le(p + 30, 2);
    const uint64_t comment_len = read_le(p + 32, 2);
    uint64_t local = read_le(p + 42, 4);
    TORCH_CHECK(
        dir.size - pos - kCentralSize >= name_len + extra_len + comment_len,
        "AOTI package '",
        path,
        "': central directory entry ",
        index,
        " runs past the directory's end");
    const std::string name(
        reinterpret_cast<const char*>(p + kCentralSize), name_len);
    check_entry_name(path, name);
    // Zip64 sizes and offset, in that order, for the fields set to ~0.
    const unsigned char* extra = p + kCentralSize + name_len;
    for (uint64_t e = 0; e + 4 <= extra_len;) {
      const uint64_t id = read_le(extra + e, 2);
      const uint64_t len = read_le(extra + e + 2, 2);
      TORCH_CHECK(
          e + 4 + len <= extra_len,
          "AOTI package '",
          path,
          "': entry '",
          name,
          "' has a malformed extra field");
      if (id == 1) {
        uint64_t at = e + 4;
        for (uint64_t* field : {&uncompressed, &compressed, &local}) {
          if (*field == 0xffffffff) {
            TORCH_CHECK(
                at + 8 <= e + 4 + len,
                "AOTI package '",
                path,
                "': entry '",
                name,
                "' has a short zip64 field");
            *field = read_le(extra + at, 8);
            at += 8;
          }
        }
      }
      e += 4 + len;
    }
    TORCH_CHECK(
        method == 0 && compressed == uncompressed,
        "AOTI package '",
        path,
        "': entry '",
        name,
        "' is compressed (method ",
        method,
        "); torch writes packages uncompressed, so it was repacked or is "
        "corrupted");
    TORCH_CHECK(
        local <= dir.offset && dir.offset - local >= kLocalSize,
        "AOTI package '",
        path,
        "': entry '",
        name,
        "' has its header at offset ",
        local,
        ", outside the data area (",
        dir.offset,
        " bytes)");
    const std::vector<unsigned char> header = zip.read(local, kLocalSize);
    TORCH_CHECK(
        read_le(header.data(), 4) == kLocalHeader,
        "AOTI package '",
        path,
        "': entry '",
        name,
        "' has no local header at offset ",
        local,
        "; is the file corrupted?");
    const uint64_t local_name_len = read_le(header.data() + 26, 2);
    const uint64_t data_start =
        local + kLocalSize + local_name_len + read_le(header.data() + 28, 2);
    // The extractor may go by either name: they must agree.
    TORCH_CHECK(
        local_name_len == name_len &&
            local_name_len <= dir.offset - local - kLocalSize &&
            zip.read(local + kLocalSize, name_len) ==
                std::vector<unsigned char>(name.begin(), name.end()),
        "AOTI package '",
        path,
        "': entry '",
        name,
        "' has another name in its local header; is the file corrupted?");
    TORCH_CHECK(
        data_start <= dir.offset && compressed <= dir.offset - data_start,
        "AOTI package '",
        path,
        "': entry '",
        name,
        "' (",
        compressed,
        " bytes at offset ",
        data_start,
        ") runs past the data area (",
        dir.offset,
        " bytes); is the file truncated?");
    const uint32_t actual = zip.crc(data_start, compressed);
    TORCH_CHECK(
        actual == crc,
        "AOTI package '",
        path,
        "': entry '",
        name,
        "' is corrupted: its CRC-32 is ",
        actual,
        ", but the archive records ",
        crc);
    pos += kCentralSize + name_len + extra_len + comment_len;
  }
}

}  // namespace aoti_internal
}  // namespace nn
TENSORDICT_END_NAMESPACE
