// The zip writer of `.tdz` archives; see io/zip.h. The layout follows
// Python's `zipfile` under `force_zip64=True`, with tensordict's padding
// block, so that both read what the other writes.

#include <c10/util/Exception.h>

#include <algorithm>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include "io/file_io.h"
#include "io/zip.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

constexpr uint16_t kZip64Version = 45;
constexpr uint16_t kUnix = 3;
constexpr uint16_t kPadExtraId = 0x6474;  // "td"
constexpr uint64_t kZip64LocalExtraSize = 20;
// Python's zipfile.writestr: rw-r--r-- without the file-type bits.
constexpr uint32_t kPermissions644 = 0644;
constexpr uint64_t kZeroBlock = uint64_t{1} << 20;

void put_le(std::string& out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) {
    out += static_cast<char>((value >> (8 * i)) & 0xff);
  }
}

}  // namespace

ZipWriter::ZipWriter(int fd, std::string path)
    : fd_(fd), path_(std::move(path)) {
  // MS-DOS date and time of the local clock, as zipfile's time.localtime().
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  const int year = std::max(local.tm_year + 1900, 1980);
  dos_time_ = static_cast<uint16_t>(
      (local.tm_hour << 11) | (local.tm_min << 5) | (local.tm_sec / 2));
  dos_date_ = static_cast<uint16_t>(
      ((year - 1980) << 9) | ((local.tm_mon + 1) << 5) | local.tm_mday);
}

void ZipWriter::write(const void* data, uint64_t size) {
  static_assert(sizeof(size_t) == sizeof(uint64_t), "a 64-bit size_t");
  const WriteProgress done = write_fully(fd_, data, static_cast<size_t>(size));
  TORCH_CHECK(
      done.written == size,
      "could not write the archive ",
      path_,
      " (",
      offset_ + done.written,
      " bytes written): ",
      done.reason());
  offset_ += size;
}

void ZipWriter::add(
    std::string_view name,
    const unsigned char* data,
    uint64_t size,
    uint16_t method,
    int level,
    bool align) {
  TORCH_CHECK(
      name.size() <= kZipMax16,
      "the archive entry name '",
      name.substr(0, 200),
      "...' is longer than a zip allows (65535 bytes)");
  Record record;
  record.name = std::string(name);
  record.header_offset = offset_;
  record.size = size;
  record.method = method;
  record.flags =
      std::all_of(
          name.begin(),
          name.end(),
          [](char c) { return static_cast<unsigned char>(c) < 0x80; })
          ? 0
          : kZipFlagUtf8;
  // A null `data` is `size` zero bytes (memmap_like), streamed from a
  // small block rather than held in memory.
  static const std::vector<unsigned char> zeros(kZeroBlock, 0);
  if (data == nullptr) {
    TORCH_INTERNAL_ASSERT(method == kZipStored);
    record.crc = 0;
    for (uint64_t done = 0; done < size; done += kZeroBlock) {
      record.crc = crc32_update(
          record.crc,
          zeros.data(),
          std::min<uint64_t>(kZeroBlock, size - done));
    }
  } else {
    record.crc = crc32_update(0, data, static_cast<size_t>(size));
  }
  std::vector<unsigned char> compressed;
  const unsigned char* payload = data;
  if (method == kZipDeflated) {
    compressed = deflate_raw(data, size, level);
    payload = compressed.data();
    record.compressed_size = compressed.size();
  } else {
    TORCH_CHECK(
        method == kZipStored,
        "cannot write compression method ",
        method,
        "; only stored (0) and deflate (8)");
    record.compressed_size = size;
  }
  if (align && method == kZipStored) {
    const uint64_t payload_start =
        offset_ + kZipLocalHeaderSize + name.size() + 4 + kZip64LocalExtraSize;
    const uint64_t pad =
        (kZipAlignment - payload_start % kZipAlignment) % kZipAlignment;
    put_le(record.pad_extra, kPadExtraId, 2);
    put_le(record.pad_extra, pad, 2);
    record.pad_extra.append(static_cast<size_t>(pad), '\0');
  }
  std::string header;
  put_le(header, 0x04034b50, 4);
  put_le(header, kZip64Version, 2);
  put_le(header, record.flags, 2);
  put_le(header, method, 2);
  put_le(header, dos_time_, 2);
  put_le(header, dos_date_, 2);
  put_le(header, record.crc, 4);
  put_le(header, kZipMax32, 4);  // sizes in the zip64 block
  put_le(header, kZipMax32, 4);
  put_le(header, name.size(), 2);
  put_le(header, record.pad_extra.size() + kZip64LocalExtraSize, 2);
  header += name;
  header += record.pad_extra;
  put_le(header, 1, 2);
  put_le(header, 16, 2);
  put_le(header, record.size, 8);
  put_le(header, record.compressed_size, 8);
  write(header.data(), header.size());
  TORCH_INTERNAL_ASSERT(
      !align || method != kZipStored || offset_ % kZipAlignment == 0);
  if (payload == nullptr) {
    for (uint64_t done = 0; done < size; done += kZeroBlock) {
      write(zeros.data(), std::min<uint64_t>(kZeroBlock, size - done));
    }
  } else {
    write(payload, record.compressed_size);
  }
  records_.push_back(std::move(record));
}

void ZipWriter::finish() {
  const uint64_t cd_offset = offset_;
  std::string central;
  for (const Record& record : records_) {
    const bool big_size = record.size > kZipMax32;
    const bool big_compressed = record.compressed_size > kZipMax32;
    const bool big_offset = record.header_offset > kZipMax32;
    std::string extra;
    if (big_size || big_compressed || big_offset) {
      std::string values;
      if (big_size) {
        put_le(values, record.size, 8);
      }
      if (big_compressed) {
        put_le(values, record.compressed_size, 8);
      }
      if (big_offset) {
        put_le(values, record.header_offset, 8);
      }
      put_le(extra, 1, 2);
      put_le(extra, values.size(), 2);
      extra += values;
    }
    extra += record.pad_extra;
    put_le(central, 0x02014b50, 4);
    put_le(central, (kUnix << 8) | kZip64Version, 2);
    put_le(central, kZip64Version, 2);
    put_le(central, record.flags, 2);
    put_le(central, record.method, 2);
    put_le(central, dos_time_, 2);
    put_le(central, dos_date_, 2);
    put_le(central, record.crc, 4);
    put_le(central, big_compressed ? kZipMax32 : record.compressed_size, 4);
    put_le(central, big_size ? kZipMax32 : record.size, 4);
    put_le(central, record.name.size(), 2);
    put_le(central, extra.size(), 2);
    put_le(central, 0, 2);  // comment
    put_le(central, 0, 2);  // disk
    put_le(central, 0, 2);  // internal attributes
    put_le(central, uint64_t{kPermissions644} << 16, 4);
    put_le(central, big_offset ? kZipMax32 : record.header_offset, 4);
    central += record.name;
    central += extra;
  }
  const uint64_t count = records_.size();
  const uint64_t cd_size = central.size();
  std::string end;
  if (count > kZipMax16 || cd_offset > kZipMax32 || cd_size > kZipMax32) {
    const uint64_t record_offset = cd_offset + cd_size;
    put_le(end, 0x06064b50, 4);
    put_le(end, 44, 8);
    put_le(end, kZip64Version, 2);
    put_le(end, kZip64Version, 2);
    put_le(end, 0, 4);
    put_le(end, 0, 4);
    put_le(end, count, 8);
    put_le(end, count, 8);
    put_le(end, cd_size, 8);
    put_le(end, cd_offset, 8);
    put_le(end, 0x07064b50, 4);
    put_le(end, 0, 4);
    put_le(end, record_offset, 8);
    put_le(end, 1, 4);
  }
  put_le(end, 0x06054b50, 4);
  put_le(end, 0, 2);
  put_le(end, 0, 2);
  put_le(end, std::min(count, kZipMax16), 2);
  put_le(end, std::min(count, kZipMax16), 2);
  put_le(end, std::min(cd_size, kZipMax32), 4);
  put_le(end, std::min(cd_offset, kZipMax32), 4);
  put_le(end, 0, 2);
  central += end;
  write(central.data(), central.size());
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
