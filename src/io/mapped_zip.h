#pragma once

// A zip archive file mapped read-only and parsed once: the one place that
// maps an archive, checks its structure (parse_zip) and checks the CRC-32
// of its entries, for `.tdz` CRC reports, unpack_memmap and the integrity
// check of AOTInductor packages.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/zip.h"
#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// What MappedZip::verify checks besides each entry's CRC-32.
struct ZipVerifyPolicy {
  /// Leave directory entries unchecked (their CRC is that of no bytes).
  bool skip_directories = true;
  /// Non-empty: a compressed entry is a problem, and this says why only
  /// stored ones are expected; empty: compressed entries are inflated and
  /// checked.
  std::string stored_only_reason;
  /// Appended to the CRC mismatch of a stored entry: what can cause it.
  std::string stored_mismatch_hint;
};

/// A zip archive, parsed on construction: a file mapped copy-on-write for as
/// long as this lives, or bytes the caller holds. Entries are read in place.
class MappedZip {
 public:
  /// Maps the regular file `path` and parses it. `label` names the archive
  /// in errors ("archive '/x.tdz'"). Throws c10::Error if the file cannot be
  /// mapped or is not a well-formed zip archive (see parse_zip).
  MappedZip(
      const std::string& path,
      std::string label,
      const ZipParseOptions& options = {});

  /// Parses the `size` bytes at `data`, an archive already in memory that
  /// the caller keeps alive and unchanged while this lives.
  MappedZip(
      const unsigned char* data,
      uint64_t size,
      std::string label,
      const ZipParseOptions& options = {});

  /// The entries, in central-directory order.
  const std::vector<ZipEntry>& entries() const {
    return entries_;
  }
  /// The archive's first byte.
  const unsigned char* data() const {
    return data_;
  }
  /// The archive's size in bytes.
  uint64_t size() const {
    return size_;
  }
  /// The name of the archive in errors.
  const std::string& label() const {
    return label_;
  }

  /// True when the archive holds an entry named `name` (as stored).
  bool has_entry(std::string_view name) const;

  /// The payload of `entry` as stored (compressed bytes for a deflated
  /// entry), unchecked.
  std::string_view payload(const ZipEntry& entry) const;

  /// The CRC-32 error of the stored `entry` (crc_mismatch's text), or an
  /// empty string when its payload matches the CRC the archive records.
  std::string stored_crc_problem(const ZipEntry& entry) const;

  /// The uncompressed bytes of `entry`, CRC-checked (see zip_entry_bytes);
  /// throws naming the archive and the entry.
  std::vector<unsigned char> bytes(const ZipEntry& entry) const;

  /// Reads every entry the policy covers and returns one message for each
  /// that fails, in entry order: a stored entry whose CRC-32 does not match,
  /// a compressed one that is refused by `policy` or cannot be inflated to
  /// bytes matching its CRC-32 and size. Empty when all are intact.
  std::vector<std::string> verify(const ZipVerifyPolicy& policy) const;

 private:
  at::Tensor mapping_;
  const unsigned char* data_ = nullptr;
  uint64_t size_ = 0;
  std::string label_;
  std::vector<ZipEntry> entries_;
};

}  // namespace detail
TENSORDICT_END_NAMESPACE
