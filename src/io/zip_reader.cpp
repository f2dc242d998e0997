// The zip reader (a parser of untrusted bytes), CRC-32 and raw inflate and
// deflate; see io/zip.h.
//
// NOTE [Zip reader]
// An archive is a file anyone can hand us: every offset, size and count in
// it is checked before it is used, with checked arithmetic, against the
// mapped bytes. The archive must be one zip file as a zip writer produces
// it: no data before the first entry's claimed offsets (the central
// directory ends exactly at the end record, or at the zip64 end record when
// there is one), no gaps that hide a second directory, one disk. Zip64 is
// read as Python's `zipfile` writes it (the end record and locator, and
// the extra block 0x0001 in central and local headers); a zip64 value must
// agree with the 32-bit field it stands for unless that field holds its
// sentinel. Names must stay inside the extraction directory. CRC-32 policy
// is the caller's: `zip_entry_bytes` checks it, mapped views do not (see
// NOTE [Archive CRCs] in src/memmap/archive_files.cpp).
//
// Deflate comes from the miniz that libtorch_cpu.so bundles and exports
// (mz_inflateInit2, mz_inflate, mz_inflateEnd and the deflate family):
// libtorch ships no miniz header, so the few prototypes and the mz_stream
// struct are declared below, matching miniz 2.x/3.x's ABI (PyTorch bundles
// third_party/miniz-3.0.2; the layout has not changed since miniz 1.x).

#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "io/zip.h"
#include "util/utf8.h"

extern "C" {
// miniz.h: `typedef unsigned long mz_ulong;` and `struct mz_stream_s`.
typedef unsigned long tensordict_mz_ulong;  // NOLINT(modernize-use-using)
struct tensordict_mz_stream {
  const unsigned char* next_in;
  unsigned int avail_in;
  tensordict_mz_ulong total_in;
  unsigned char* next_out;
  unsigned int avail_out;
  tensordict_mz_ulong total_out;
  char* msg;
  void* state;
  void* (*zalloc)(void* opaque, size_t items, size_t size);
  void (*zfree)(void* opaque, void* address);
  void* opaque;
  int data_type;
  tensordict_mz_ulong adler;
  tensordict_mz_ulong reserved;
};
int mz_inflateInit2(tensordict_mz_stream* stream, int window_bits);
int mz_inflate(tensordict_mz_stream* stream, int flush);
int mz_inflateEnd(tensordict_mz_stream* stream);
int mz_deflateInit2(
    tensordict_mz_stream* stream,
    int level,
    int method,
    int window_bits,
    int mem_level,
    int strategy);
int mz_deflate(tensordict_mz_stream* stream, int flush);
int mz_deflateEnd(tensordict_mz_stream* stream);
}

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

// miniz.h constants.
constexpr int kMzOk = 0;
constexpr int kMzStreamEnd = 1;
constexpr int kMzBufError = -5;
constexpr int kMzNoFlush = 0;
constexpr int kMzSyncFlush = 2;
constexpr int kMzFinish = 4;
constexpr int kMzDeflated = 8;
constexpr int kMzRawWindowBits = -15;
constexpr int kMzMemLevel = 9;

constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kCentralSignature = 0x02014b50;
constexpr uint32_t kLocalSignature = 0x04034b50;
constexpr uint64_t kEndSize = 22;
constexpr uint64_t kZip64LocatorSize = 20;
constexpr uint64_t kZip64EndSize = 56;
constexpr uint64_t kCentralSize = 46;
constexpr uint64_t kMaxComment = 0xffff;
constexpr uint16_t kFlagEncrypted = 0x1;
constexpr uint16_t kFlagStrongEncryption = 0x40;

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

// Refuses names that would leave the extraction directory or that two
// systems could read differently.
void check_entry_name(
    const std::string& label, const std::string& name, uint16_t flags) {
  const char* problem = nullptr;
  if (name.empty()) {
    problem = "is empty";
  } else if (name.front() == '/') {
    problem = "is absolute";
  } else if (name.find('\\') != std::string::npos) {
    problem = "holds a backslash";
  } else if (name.find('\0') != std::string::npos) {
    problem = "holds a NUL byte";
  } else if (
      (flags & kZipFlagUtf8) != 0
          ? !detail::utf8_valid(name)
          : !std::all_of(name.begin(), name.end(), [](char c) {
              return static_cast<unsigned char>(c) < 0x80;
            })) {
    problem = (flags & kZipFlagUtf8) != 0
                  ? "is flagged UTF-8 but is not valid UTF-8"
                  : "holds non-ASCII bytes without the UTF-8 flag (cp437 "
                    "names are not supported)";
  } else {
    // A trailing '/' marks a directory; every other part must be a name.
    const size_t end = name.back() == '/' ? name.size() - 1 : name.size();
    size_t start = 0;
    while (problem == nullptr && start <= end) {
      size_t stop = name.find('/', start);
      if (stop == std::string::npos || stop > end) {
        stop = end;
      }
      const std::string_view part(name.data() + start, stop - start);
      if (part.empty()) {
        problem = "has an empty path component";
      } else if (part == "..") {
        problem = "has a '..' component";
      } else if (part == ".") {
        problem = "has a '.' component";
      }
      start = stop + 1;
    }
  }
  TORCH_CHECK(
      problem == nullptr,
      label,
      ": the entry name '",
      name.substr(0, 200),
      "' would be extracted outside the directory it is unpacked to, or "
      "read differently by another tool: it ",
      problem);
}

struct ZipDirectory {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t entries = 0;
  uint64_t end = 0;  // where the directory must end
};

ZipDirectory find_directory(
    const unsigned char* data, uint64_t size, const std::string& label) {
  TORCH_CHECK(
      size >= kEndSize,
      label,
      " is not a zip archive: it has ",
      size,
      " bytes, fewer than a zip end record (22); is the file truncated?");
  const uint64_t tail = std::min(size, kEndSize + kMaxComment);
  const uint64_t tail_start = size - tail;
  for (uint64_t i = tail - kEndSize + 1; i-- > 0;) {
    const unsigned char* p = data + tail_start + i;
    if (read_le(p, 4) != kEndSignature ||
        i + kEndSize + read_le(p + ZipEndRecord::kCommentLength, 2) != tail) {
      continue;
    }
    const uint64_t end_offset = tail_start + i;
    TORCH_CHECK(
        read_le(p + ZipEndRecord::kDisk, 2) == 0 &&
            read_le(p + ZipEndRecord::kDirectoryDisk, 2) == 0,
        label,
        ": the end record names disk ",
        read_le(p + ZipEndRecord::kDisk, 2),
        " (directory on disk ",
        read_le(p + ZipEndRecord::kDirectoryDisk, 2),
        "); multi-disk archives are not supported, expected disk 0");
    TORCH_CHECK(
        read_le(p + ZipEndRecord::kDiskEntries, 2) ==
            read_le(p + ZipEndRecord::kEntries, 2),
        label,
        ": the end record counts ",
        read_le(p + ZipEndRecord::kDiskEntries, 2),
        " entries on this disk but ",
        read_le(p + ZipEndRecord::kEntries, 2),
        " in all; expected the same number");
    ZipDirectory dir;
    dir.entries = read_le(p + ZipEndRecord::kEntries, 2);
    dir.size = read_le(p + ZipEndRecord::kDirectorySize, 4);
    dir.offset = read_le(p + ZipEndRecord::kDirectoryOffset, 4);
    dir.end = end_offset;
    const bool has_locator =
        end_offset >= kZip64LocatorSize &&
        read_le(data + end_offset - kZip64LocatorSize, 4) ==
            kZip64LocatorSignature;
    if (has_locator) {
      const unsigned char* locator = data + end_offset - kZip64LocatorSize;
      TORCH_CHECK(
          read_le(locator + Zip64Locator::kEndRecordDisk, 4) == 0 &&
              read_le(locator + Zip64Locator::kDisks, 4) == 1,
          label,
          ": the zip64 locator names disk ",
          read_le(locator + Zip64Locator::kEndRecordDisk, 4),
          " of ",
          read_le(locator + Zip64Locator::kDisks, 4),
          "; expected disk 0 of 1");
      const uint64_t record =
          read_le(locator + Zip64Locator::kEndRecordOffset, 8);
      const uint64_t locator_offset = end_offset - kZip64LocatorSize;
      TORCH_CHECK(
          record <= locator_offset &&
              locator_offset - record >= kZip64EndSize &&
              read_le(data + record, 4) == kZip64EndSignature,
          label,
          ": the zip64 locator points to offset ",
          record,
          ", where no zip64 end record lies (expected one ending at ",
          locator_offset,
          ")");
      const unsigned char* z = data + record;
      const uint64_t record_size = read_le(z + Zip64EndRecord::kRecordSize, 8);
      TORCH_CHECK(
          record_size >= kZip64EndSize - 12 &&
              record_size == locator_offset - record - 12,
          label,
          ": the zip64 end record at ",
          record,
          " says it has ",
          record_size,
          " bytes after its size field, but ",
          locator_offset - record - 12,
          " lie before the locator");
      TORCH_CHECK(
          read_le(z + Zip64EndRecord::kDisk, 4) == 0 &&
              read_le(z + Zip64EndRecord::kDirectoryDisk, 4) == 0,
          label,
          ": the zip64 end record names another disk; expected disk 0");
      const uint64_t on_disk = read_le(z + Zip64EndRecord::kDiskEntries, 8);
      const uint64_t entries = read_le(z + Zip64EndRecord::kEntries, 8);
      const uint64_t cd_size = read_le(z + Zip64EndRecord::kDirectorySize, 8);
      const uint64_t cd_offset =
          read_le(z + Zip64EndRecord::kDirectoryOffset, 8);
      TORCH_CHECK(
          on_disk == entries,
          label,
          ": the zip64 end record counts ",
          on_disk,
          " entries on this disk but ",
          entries,
          " in all");
      // A 32-bit field that is not its sentinel must agree with zip64's.
      const auto agree = [&](uint64_t narrow,
                             uint64_t sentinel,
                             uint64_t wide,
                             const char* what) {
        TORCH_CHECK(
            narrow == sentinel || narrow == wide,
            label,
            ": the end record gives the ",
            what,
            " as ",
            narrow,
            " but the zip64 end record as ",
            wide,
            "; expected the same value or ",
            sentinel);
      };
      agree(dir.entries, kZipMax16, entries, "entry count");
      agree(dir.size, kZipMax32, cd_size, "central directory size");
      agree(dir.offset, kZipMax32, cd_offset, "central directory offset");
      dir.entries = entries;
      dir.size = cd_size;
      dir.offset = cd_offset;
      dir.end = record;
    }
    TORCH_CHECK(
        dir.offset <= dir.end && dir.size == dir.end - dir.offset,
        label,
        ": the central directory is ",
        dir.size,
        " bytes at offset ",
        dir.offset,
        ", but it must end at offset ",
        dir.end,
        " where the end record lies; is the file truncated, or has data "
        "been prepended?");
    return dir;
  }
  TORCH_CHECK(
      false,
      label,
      " is not a zip archive: no end-of-central-directory record in its "
      "last ",
      tail,
      " bytes; is the file truncated?");
  return ZipDirectory{};
}

// Reads the zip64 extra block of a header: for each field holding its
// 32-bit sentinel, in order, the 8-byte value. Throws if a needed value is
// missing or the extra area is malformed.
void read_zip64_extra(
    const unsigned char* extra,
    uint64_t extra_len,
    const std::vector<uint64_t*>& fields,
    const std::string& label,
    const std::string& name,
    const char* where) {
  bool seen = false;
  uint64_t e = 0;
  while (extra_len - e >= 4) {
    const uint64_t id = read_le(extra + e, 2);
    const uint64_t len = read_le(extra + e + 2, 2);
    TORCH_CHECK(
        len <= extra_len - e - 4,
        label,
        ": entry '",
        name,
        "' has a malformed extra field in its ",
        where,
        " (block 0x",
        std::hex,
        id,
        std::dec,
        " of ",
        len,
        " bytes, only ",
        extra_len - e - 4,
        " left)");
    if (id == 1) {
      TORCH_CHECK(
          !seen,
          label,
          ": entry '",
          name,
          "' has two zip64 extra blocks in its ",
          where);
      seen = true;
      uint64_t at = 0;
      for (uint64_t* field : fields) {
        if (*field != kZipMax32) {
          continue;
        }
        TORCH_CHECK(
            at + 8 <= len,
            label,
            ": entry '",
            name,
            "' has a zip64 extra block of ",
            len,
            " bytes in its ",
            where,
            ", too short for the sizes and offsets it must hold");
        *field = read_le(extra + e + 4 + at, 8);
        at += 8;
      }
    }
    e += 4 + len;
  }
  for (const uint64_t* field : fields) {
    TORCH_CHECK(
        seen || *field != kZipMax32,
        label,
        ": entry '",
        name,
        "' has a 32-bit size or offset set to 0xffffffff in its ",
        where,
        " but no zip64 extra block giving the value");
  }
}

}  // namespace

uint32_t crc32_update(uint32_t crc, const unsigned char* data, size_t size) {
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) {
    crc = kCrcTable[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  }
  return ~crc;
}

std::vector<ZipEntry> parse_zip(
    const unsigned char* data,
    uint64_t size,
    const std::string& label,
    const ZipParseOptions& options) {
  const ZipDirectory dir = find_directory(data, size, label);
  TORCH_CHECK(
      dir.entries <= options.max_entries &&
          dir.entries <= dir.size / kCentralSize,
      label,
      ": the end record counts ",
      dir.entries,
      " entries, but the central directory has room for ",
      dir.size / kCentralSize,
      " (and at most ",
      options.max_entries,
      " are accepted)");
  std::vector<ZipEntry> entries;
  entries.reserve(dir.entries);
  std::unordered_set<std::string> names;
  const unsigned char* central = data + dir.offset;
  uint64_t pos = 0;
  for (uint64_t index = 0; index < dir.entries; ++index) {
    TORCH_CHECK(
        dir.size - pos >= kCentralSize &&
            read_le(central + pos, 4) == kCentralSignature,
        label,
        ": central directory record ",
        index,
        " of ",
        dir.entries,
        " at offset ",
        dir.offset + pos,
        " is malformed (no signature PK\\1\\2 or too short); is the file "
        "corrupted?");
    const unsigned char* p = central + pos;
    ZipEntry entry;
    entry.central_offset = dir.offset + pos;
    entry.flags =
        static_cast<uint16_t>(read_le(p + ZipCentralRecord::kFlags, 2));
    entry.method =
        static_cast<uint16_t>(read_le(p + ZipCentralRecord::kMethod, 2));
    entry.crc = static_cast<uint32_t>(read_le(p + ZipCentralRecord::kCrc, 4));
    entry.compressed_size = read_le(p + ZipCentralRecord::kCompressedSize, 4);
    entry.size = read_le(p + ZipCentralRecord::kSize, 4);
    const uint64_t name_len = read_le(p + ZipCentralRecord::kNameLength, 2);
    const uint64_t extra_len = read_le(p + ZipCentralRecord::kExtraLength, 2);
    const uint64_t comment_len =
        read_le(p + ZipCentralRecord::kCommentLength, 2);
    uint64_t disk = read_le(p + ZipCentralRecord::kDisk, 2);
    entry.header_offset = read_le(p + ZipCentralRecord::kHeaderOffset, 4);
    TORCH_CHECK(
        dir.size - pos - kCentralSize >= name_len + extra_len + comment_len,
        label,
        ": central directory record ",
        index,
        " (",
        name_len + extra_len + comment_len,
        " bytes of name, extra and comment) runs past the directory's end");
    entry.name.assign(
        reinterpret_cast<const char*>(p + kCentralSize), name_len);
    check_entry_name(label, entry.name, entry.flags);
    TORCH_CHECK(
        names.insert(entry.name).second,
        label,
        ": the entry name '",
        entry.name,
        "' appears twice; expected unique names");
    TORCH_CHECK(
        (entry.flags & (kFlagEncrypted | kFlagStrongEncryption)) == 0,
        label,
        ": entry '",
        entry.name,
        "' is encrypted, which is not supported");
    if (disk == kZipMax16) {
      disk = 0;  // a zip64 disk number would follow; only disk 0 is read
    }
    TORCH_CHECK(
        disk == 0,
        label,
        ": entry '",
        entry.name,
        "' starts on disk ",
        disk,
        "; expected disk 0");
    read_zip64_extra(
        p + kCentralSize + name_len,
        extra_len,
        {&entry.size, &entry.compressed_size, &entry.header_offset},
        label,
        entry.name,
        "central directory record");
    TORCH_CHECK(
        entry.method != kZipStored || entry.compressed_size == entry.size,
        label,
        ": entry '",
        entry.name,
        "' is stored uncompressed, but its compressed size (",
        entry.compressed_size,
        ") differs from its size (",
        entry.size,
        ")");
    // The local header must lie in the data area and agree with the record.
    TORCH_CHECK(
        entry.header_offset <= dir.offset &&
            dir.offset - entry.header_offset >= kZipLocalHeaderSize,
        label,
        ": entry '",
        entry.name,
        "' has its local header at offset ",
        entry.header_offset,
        ", outside the data area (the first ",
        dir.offset,
        " bytes)");
    const unsigned char* local = data + entry.header_offset;
    TORCH_CHECK(
        read_le(local, 4) == kLocalSignature,
        label,
        ": entry '",
        entry.name,
        "' has no local header (PK\\3\\4) at offset ",
        entry.header_offset,
        "; is the file corrupted?");
    const uint16_t local_flags =
        static_cast<uint16_t>(read_le(local + ZipLocalHeader::kFlags, 2));
    const uint64_t local_method = read_le(local + ZipLocalHeader::kMethod, 2);
    const uint64_t local_name_len =
        read_le(local + ZipLocalHeader::kNameLength, 2);
    const uint64_t local_extra_len =
        read_le(local + ZipLocalHeader::kExtraLength, 2);
    const uint64_t room =
        dir.offset - entry.header_offset - kZipLocalHeaderSize;
    TORCH_CHECK(
        local_name_len == name_len && local_name_len <= room &&
            std::memcmp(
                local + kZipLocalHeaderSize, p + kCentralSize, name_len) == 0,
        label,
        ": entry '",
        entry.name,
        "' has another name in its local header (",
        local_name_len,
        " bytes at offset ",
        entry.header_offset + kZipLocalHeaderSize,
        "); expected the central directory's");
    TORCH_CHECK(
        local_method == entry.method && (local_flags & kFlagEncrypted) == 0 &&
            (local_flags & kZipFlagDataDescriptor) ==
                (entry.flags & kZipFlagDataDescriptor),
        label,
        ": entry '",
        entry.name,
        "' has method ",
        local_method,
        " and flags 0x",
        std::hex,
        local_flags,
        " in its local header but method ",
        std::dec,
        entry.method,
        " and flags 0x",
        std::hex,
        entry.flags,
        std::dec,
        " in the central directory");
    TORCH_CHECK(
        local_extra_len <= room - local_name_len,
        label,
        ": entry '",
        entry.name,
        "' has a local extra field of ",
        local_extra_len,
        " bytes running past the data area");
    entry.data_offset = entry.header_offset + kZipLocalHeaderSize +
                        local_name_len + local_extra_len;
    if ((local_flags & kZipFlagDataDescriptor) == 0) {
      uint64_t local_size = read_le(local + ZipLocalHeader::kSize, 4);
      uint64_t local_compressed =
          read_le(local + ZipLocalHeader::kCompressedSize, 4);
      const auto local_crc =
          static_cast<uint32_t>(read_le(local + ZipLocalHeader::kCrc, 4));
      read_zip64_extra(
          local + kZipLocalHeaderSize + local_name_len,
          local_extra_len,
          {&local_size, &local_compressed},
          label,
          entry.name,
          "local header");
      TORCH_CHECK(
          local_crc == entry.crc && local_size == entry.size &&
              local_compressed == entry.compressed_size,
          label,
          ": entry '",
          entry.name,
          "' has CRC-32 ",
          local_crc,
          ", size ",
          local_size,
          " and compressed size ",
          local_compressed,
          " in its local header, but ",
          entry.crc,
          ", ",
          entry.size,
          " and ",
          entry.compressed_size,
          " in the central directory");
    }
    TORCH_CHECK(
        entry.data_offset <= dir.offset &&
            entry.compressed_size <= dir.offset - entry.data_offset,
        label,
        ": entry '",
        entry.name,
        "' (",
        entry.compressed_size,
        " bytes at offset ",
        entry.data_offset,
        ") runs past the data area (",
        dir.offset,
        " bytes); is the file truncated?");
    entries.push_back(std::move(entry));
    pos += kCentralSize + name_len + extra_len + comment_len;
  }
  TORCH_CHECK(
      pos == dir.size,
      label,
      ": the central directory holds ",
      dir.size,
      " bytes but its ",
      dir.entries,
      " records use ",
      pos,
      "; expected no bytes left over");
  // No two entries may share bytes.
  std::vector<const ZipEntry*> by_offset;
  by_offset.reserve(entries.size());
  for (const ZipEntry& entry : entries) {
    by_offset.push_back(&entry);
  }
  std::sort(
      by_offset.begin(),
      by_offset.end(),
      [](const ZipEntry* a, const ZipEntry* b) {
        return a->header_offset < b->header_offset;
      });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const ZipEntry& prev = *by_offset[i - 1];
    const ZipEntry& next = *by_offset[i];
    const uint64_t prev_end = prev.data_offset + prev.compressed_size;
    TORCH_CHECK(
        next.header_offset >= prev_end,
        label,
        ": entries '",
        prev.name,
        "' (bytes ",
        prev.header_offset,
        " to ",
        prev_end,
        ") and '",
        next.name,
        "' (header at ",
        next.header_offset,
        ") overlap; expected each entry's bytes to be its own");
  }
  return entries;
}

void inflate_raw(
    const unsigned char* in,
    uint64_t in_size,
    unsigned char* out,
    uint64_t out_size,
    const std::string& what) {
  tensordict_mz_stream stream{};
  TORCH_CHECK(
      mz_inflateInit2(&stream, kMzRawWindowBits) == kMzOk,
      "could not start inflating ",
      what);
  uint64_t in_done = 0;
  uint64_t out_done = 0;
  unsigned char overflow = 0;
  int status = kMzOk;
  const char* problem = nullptr;
  while (true) {
    const uint64_t in_chunk = std::min<uint64_t>(in_size - in_done, UINT_MAX);
    const uint64_t out_chunk =
        std::min<uint64_t>(out_size - out_done, UINT_MAX);
    stream.next_in = in + in_done;
    stream.avail_in = static_cast<unsigned int>(in_chunk);
    // Past the expected size, one scratch byte detects an oversized stream.
    stream.next_out = out_chunk > 0 ? out + out_done : &overflow;
    stream.avail_out = out_chunk > 0 ? static_cast<unsigned int>(out_chunk) : 1;
    status = mz_inflate(&stream, kMzSyncFlush);
    in_done += in_chunk - stream.avail_in;
    const uint64_t produced =
        (out_chunk > 0 ? out_chunk : 1) - stream.avail_out;
    if (out_chunk == 0 && produced > 0) {
      problem = "inflates to more bytes than the entry's size";
      break;
    }
    out_done += produced;
    if (status == kMzStreamEnd) {
      break;
    }
    if (status != kMzOk && status != kMzBufError) {
      problem = "is not a valid deflate stream";
      break;
    }
    const uint64_t consumed = in_chunk - stream.avail_in;
    if (status == kMzBufError && consumed == 0 && produced == 0) {
      problem = in_done == in_size
                    ? "ends before its deflate stream does (truncated)"
                    : "makes no progress (corrupted deflate stream)";
      break;
    }
  }
  mz_inflateEnd(&stream);
  TORCH_CHECK(problem == nullptr, what, " ", problem);
  TORCH_CHECK(
      out_done == out_size,
      what,
      " inflates to ",
      out_done,
      " bytes; expected ",
      out_size);
  TORCH_CHECK(
      in_done == in_size,
      what,
      " has ",
      in_size - in_done,
      " bytes after the end of its deflate stream; expected none");
}

std::vector<unsigned char> deflate_raw(
    const unsigned char* in, uint64_t in_size, int level) {
  tensordict_mz_stream stream{};
  TORCH_CHECK(
      mz_deflateInit2(
          &stream, level, kMzDeflated, kMzRawWindowBits, kMzMemLevel, 0) ==
          kMzOk,
      "could not start deflating (level ",
      level,
      ")");
  std::vector<unsigned char> out(
      static_cast<size_t>(std::max<uint64_t>(in_size / 2, 1024)));
  uint64_t in_done = 0;
  uint64_t out_done = 0;
  while (true) {
    if (out_done == out.size()) {
      out.resize(out.size() * 2);
    }
    const uint64_t in_chunk = std::min<uint64_t>(in_size - in_done, UINT_MAX);
    const uint64_t out_chunk =
        std::min<uint64_t>(out.size() - out_done, UINT_MAX);
    stream.next_in = in + in_done;
    stream.avail_in = static_cast<unsigned int>(in_chunk);
    stream.next_out = out.data() + out_done;
    stream.avail_out = static_cast<unsigned int>(out_chunk);
    const bool last = in_done + in_chunk == in_size;
    const int status = mz_deflate(&stream, last ? kMzFinish : kMzNoFlush);
    in_done += in_chunk - stream.avail_in;
    out_done += out_chunk - stream.avail_out;
    if (status == kMzStreamEnd) {
      break;
    }
    if (status != kMzOk && status != kMzBufError) {
      mz_deflateEnd(&stream);
      TORCH_CHECK(false, "deflate failed with miniz status ", status);
    }
  }
  mz_deflateEnd(&stream);
  out.resize(out_done);
  return out;
}

std::string crc_mismatch(
    const std::string& label, const ZipEntry& entry, uint32_t crc) {
  if (crc == entry.crc) {
    return std::string();
  }
  return c10::str(
      label,
      ": entry '",
      entry.name,
      "' is corrupted: its CRC-32 is ",
      crc,
      " but the archive records ",
      entry.crc);
}

void check_zip_entry_readable(const ZipEntry& entry, const std::string& label) {
  const std::string what = c10::str(label, ": entry '", entry.name, "'");
  if (entry.method == kZipStored) {
    TORCH_INTERNAL_ASSERT(entry.compressed_size == entry.size);  // parse_zip
    return;
  }
  TORCH_CHECK(
      entry.method == kZipDeflated,
      what,
      " uses compression method ",
      entry.method,
      entry.method == 12   ? " (bzip2)"
      : entry.method == 14 ? " (lzma)"
                           : "",
      "; only stored (0) and deflate (8) entries can be read. Re-pack it "
      "with compression='deflate' or uncompressed.");
  // A deflate stream expands at most about 1032:1.
  TORCH_CHECK(
      entry.size / 1032 <= entry.compressed_size + 1,
      what,
      " claims ",
      entry.size,
      " bytes from ",
      entry.compressed_size,
      " compressed, more than deflate can expand to");
}

void zip_entry_bytes_into(
    const unsigned char* data,
    const ZipEntry& entry,
    const std::string& label,
    unsigned char* out) {
  check_zip_entry_readable(entry, label);
  const std::string what = c10::str(label, ": entry '", entry.name, "'");
  if (entry.method == kZipStored) {
    if (entry.size > 0) {
      std::memcpy(out, data + entry.data_offset, entry.size);
    }
  } else {
    inflate_raw(
        data + entry.data_offset, entry.compressed_size, out, entry.size, what);
  }
  const std::string mismatch = crc_mismatch(
      label, entry, crc32_update(0, out, static_cast<size_t>(entry.size)));
  TORCH_CHECK(mismatch.empty(), mismatch);
}

std::vector<unsigned char> zip_entry_bytes(
    const unsigned char* data,
    const ZipEntry& entry,
    const std::string& label) {
  check_zip_entry_readable(entry, label);
  std::vector<unsigned char> out(static_cast<size_t>(entry.size));
  zip_entry_bytes_into(data, entry, label, out.data());
  return out;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
