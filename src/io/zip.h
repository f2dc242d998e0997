#pragma once

// Zip archives: a reader of untrusted bytes (the archive is mapped by the
// caller and parsed in place) and a streaming writer of the layout Python
// tensordict's `.tdz` archives use. See NOTE [Zip reader] in zip_reader.cpp.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Zip compression methods that the reader and the writer know.
constexpr uint16_t kZipStored = 0;
/// Raw deflate (inflated through libtorch's miniz).
constexpr uint16_t kZipDeflated = 8;
/// The sentinel of a 32-bit field whose value is in a zip64 block.
constexpr uint64_t kZipMax32 = 0xffffffff;
/// The sentinel of a 16-bit count whose value is in the zip64 end record.
constexpr uint64_t kZipMax16 = 0xffff;
/// The general-purpose flag of names encoded as UTF-8.
constexpr uint16_t kZipFlagUtf8 = 0x800;
/// The general-purpose flag of an entry whose CRC and sizes follow its
/// payload in a data descriptor.
constexpr uint16_t kZipFlagDataDescriptor = 0x8;
/// The fixed part of a local file header, in bytes.
constexpr uint64_t kZipLocalHeaderSize = 30;

// Byte offsets of the fields of zip's fixed-size records (APPNOTE.TXT
// 4.3.7, 4.3.12, 4.3.14 to 4.3.16), from the record's 4-byte signature.
// Each enum sits in a struct of its record, so that one field name can
// serve several records and reads as `ZipCentralRecord::kCrc`.

/// Field offsets of the end of central directory record.
struct ZipEndRecord {
  enum Field : size_t {
    kDisk = 4,
    kDirectoryDisk = 6,
    kDiskEntries = 8,
    kEntries = 10,
    kDirectorySize = 12,
    kDirectoryOffset = 16,
    kCommentLength = 20,
  };
};
/// Field offsets of the zip64 end of central directory locator.
struct Zip64Locator {
  enum Field : size_t {
    kEndRecordDisk = 4,
    kEndRecordOffset = 8,
    kDisks = 16,
  };
};
/// Field offsets of the zip64 end of central directory record.
struct Zip64EndRecord {
  enum Field : size_t {
    kRecordSize = 4,
    kDisk = 16,
    kDirectoryDisk = 20,
    kDiskEntries = 24,
    kEntries = 32,
    kDirectorySize = 40,
    kDirectoryOffset = 48,
  };
};
/// Field offsets of a central directory file header.
struct ZipCentralRecord {
  enum Field : size_t {
    kFlags = 8,
    kMethod = 10,
    kCrc = 16,
    kCompressedSize = 20,
    kSize = 24,
    kNameLength = 28,
    kExtraLength = 30,
    kCommentLength = 32,
    kDisk = 34,
    kHeaderOffset = 42,
  };
};
/// Field offsets of a local file header.
struct ZipLocalHeader {
  enum Field : size_t {
    kFlags = 6,
    kMethod = 8,
    kCrc = 14,
    kCompressedSize = 18,
    kSize = 22,
    kNameLength = 26,
    kExtraLength = 28,
  };
};

/// One entry of a parsed archive; offsets are from the archive's start.
struct ZipEntry {
  std::string name;             // as stored: '/'-separated, checked for escapes
  uint64_t header_offset = 0;   // the local header
  uint64_t central_offset = 0;  // the central-directory record
  uint64_t data_offset = 0;     // the payload, after the local header
  uint64_t compressed_size = 0;
  uint64_t size = 0;  // uncompressed
  uint32_t crc = 0;
  uint16_t method = 0;
  uint16_t flags = 0;

  /// True for a directory entry (a name ending in '/').
  bool is_directory() const {
    return !name.empty() && name.back() == '/';
  }
};

/// What parse_zip checks beyond the structure.
struct ZipParseOptions {
  /// The most entries accepted.
  uint64_t max_entries = uint64_t{1} << 22;
};

/// Parses the zip archive held in `data` (`size` bytes) and returns its
/// entries in central-directory order. `label` names the archive in errors
/// ("archive '/x.tdz'"). Throws c10::Error, naming the archive and the entry
/// and saying what was expected and what was found, unless: the end record
/// is found within the last 64 KiB + 22 bytes; the central directory (zip64
/// or not) lies within the file, directly before its end record, and holds
/// exactly the declared entries; every zip64 field is consistent with the
/// 32-bit one it replaces; every local header matches its central record
/// (name, method, CRC and sizes); every payload lies within the data area
/// and no two entries overlap; no entry is encrypted or on another disk;
/// names are relative, without "..", ".", empty parts, backslashes or NUL,
/// valid for their encoding flag, and unique. CRCs are not checked here
/// (see zip_entry_bytes).
std::vector<ZipEntry> parse_zip(
    const unsigned char* data,
    uint64_t size,
    const std::string& label,
    const ZipParseOptions& options = {});

/// Returns the CRC-32 (zip's, IEEE 802.3) of `size` bytes, continuing `crc`.
uint32_t crc32_update(uint32_t crc, const unsigned char* data, size_t size);

/// The error for `entry` of the archive `label` whose bytes have the CRC-32
/// `crc`, or an empty string when it is the one the archive records.
std::string crc_mismatch(
    const std::string& label, const ZipEntry& entry, uint32_t crc);

/// Returns the uncompressed bytes of `entry` of the archive in `data`:
/// stored entries are copied, deflated ones inflated. Checks the CRC-32 and
/// the size; throws naming `label` and the entry.
std::vector<unsigned char> zip_entry_bytes(
    const unsigned char* data, const ZipEntry& entry, const std::string& label);

/// Throws, naming `label` and the entry, unless `entry` can be read: stored,
/// or deflated with a size that deflate can reach (a larger claim would
/// allocate memory for nothing). Call it before sizing a buffer by
/// `entry.size`.
void check_zip_entry_readable(const ZipEntry& entry, const std::string& label);

/// Writes the uncompressed bytes of `entry` (exactly `entry.size`) to `out`,
/// as zip_entry_bytes does without allocating: for a caller that inflates
/// straight into a tensor's storage, from any thread.
void zip_entry_bytes_into(
    const unsigned char* data,
    const ZipEntry& entry,
    const std::string& label,
    unsigned char* out);

/// Inflates the raw deflate stream `in` into exactly `out_size` bytes at
/// `out`; throws unless the stream ends exactly there with no trailing
/// input. `what` names the entry in errors.
void inflate_raw(
    const unsigned char* in,
    uint64_t in_size,
    unsigned char* out,
    uint64_t out_size,
    const std::string& what);

/// Returns `in` compressed as a raw deflate stream at `level` (-1: zlib's
/// default, 0-9).
std::vector<unsigned char> deflate_raw(
    const unsigned char* in, uint64_t in_size, int level);

/// Writes a zip archive to an open file descriptor, entry by entry, as
/// Python's `zipfile` does with `force_zip64=True`: each local header
/// carries a zip64 extra block with the sizes, and aligned entries a padding
/// block (id 0x6474, "td") that puts the payload on a 64-byte boundary.
/// Central-directory zip64 fields and the zip64 end records are written
/// when sizes, offsets or the entry count need them.
class ZipWriter {
 public:
  /// Writes to `fd` from its start; `path` names the file in errors. The
  /// descriptor stays the caller's.
  ZipWriter(int fd, std::string path);

  /// Appends an entry holding `size` bytes at `data` (null: `size` zero
  /// bytes, stored only): stored, or deflated when `method` is kZipDeflated
  /// (at `level`); `align` puts a stored payload on a 64-byte boundary.
  void add(
      std::string_view name,
      const unsigned char* data,
      uint64_t size,
      uint16_t method,
      int level,
      bool align);
  /// Writes the central directory and the end records.
  void finish();

 private:
  void write(const void* data, uint64_t size);

  struct Record {
    std::string name;
    std::string pad_extra;
    uint64_t header_offset;
    uint64_t compressed_size;
    uint64_t size;
    uint32_t crc;
    uint16_t method;
    uint16_t flags;
  };
  int fd_;
  std::string path_;
  uint64_t offset_ = 0;
  uint16_t dos_time_ = 0;
  uint16_t dos_date_ = 0;
  std::vector<Record> records_;
};

/// The payload alignment of stored `.memmap` entries, as Python's.
constexpr uint64_t kZipAlignment = 64;

}  // namespace detail
TENSORDICT_END_NAMESPACE
