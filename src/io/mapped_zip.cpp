#include "io/mapped_zip.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <utility>

#include "io/file_io.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

MappedZip::MappedZip(
    const std::string& path, std::string label, const ZipParseOptions& options)
    : label_(std::move(label)) {
  mapping_ = map_whole_file(path, /*writable=*/false, label_);
  data_ = static_cast<const unsigned char*>(mapping_.data_ptr());
  size_ = static_cast<uint64_t>(mapping_.numel());
  entries_ = parse_zip(data_, size_, label_, options);
}

MappedZip::MappedZip(
    const unsigned char* data,
    uint64_t size,
    std::string label,
    const ZipParseOptions& options)
    : data_(data), size_(size), label_(std::move(label)) {
  entries_ = parse_zip(data_, size_, label_, options);
}

bool MappedZip::has_entry(std::string_view name) const {
  return std::any_of(
      entries_.begin(), entries_.end(), [&](const ZipEntry& entry) {
        return entry.name == name;
      });
}

std::string_view MappedZip::payload(const ZipEntry& entry) const {
  // parse_zip put every payload within the archive.
  return std::string_view(
      reinterpret_cast<const char*>(data_ + entry.data_offset),
      static_cast<size_t>(entry.compressed_size));
}

std::string MappedZip::stored_crc_problem(const ZipEntry& entry) const {
  TORCH_INTERNAL_ASSERT(entry.method == kZipStored);
  return crc_mismatch(
      label_,
      entry,
      crc32_update(0, data_ + entry.data_offset, entry.compressed_size));
}

std::vector<unsigned char> MappedZip::bytes(const ZipEntry& entry) const {
  return zip_entry_bytes(data_, entry, label_);
}

std::vector<std::string> MappedZip::verify(
    const ZipVerifyPolicy& policy) const {
  std::vector<std::string> problems;
  for (const ZipEntry& entry : entries_) {
    if (policy.skip_directories && entry.is_directory()) {
      continue;
    }
    if (entry.method == kZipStored) {
      const std::string mismatch = stored_crc_problem(entry);
      if (!mismatch.empty()) {
        problems.push_back(mismatch + policy.stored_mismatch_hint);
      }
      continue;
    }
    if (!policy.stored_only_reason.empty()) {
      problems.push_back(c10::str(
          label_,
          ": entry '",
          entry.name,
          "' is compressed (method ",
          entry.method,
          "); ",
          policy.stored_only_reason));
      continue;
    }
    try {
      (void)bytes(entry);
    } catch (const c10::Error& e) {
      problems.push_back(e.msg());
    }
  }
  return problems;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
