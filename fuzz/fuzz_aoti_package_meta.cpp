// libFuzzer target: the AOTI package-spec reader
// (src/nn/aoti_package_meta.h), which reads a `.pt2` package's metadata,
// tensordict.spec, tensordict.probabilistic and the input checks of its
// wrapper source before any library is loaded. The first byte picks the
// form of the rest:
// - even: parts split at NUL bytes: the metadata JSON, the wrapper source,
//   the call spec's inputs and its outputs (the last three optional);
// - odd: a whole package (a zip archive), read as AOTIModule reads a file.

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "nn/aoti_package_meta.h"

namespace {

void read_parts(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (parts.size() < 3) {
    const size_t end = text.find('\0', start);
    if (end == std::string::npos) {
      break;
    }
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  parts.push_back(text.substr(start));
  tensordict::detail::AotiPackageFiles files;
  files.metadata_json = parts[0];
  if (parts.size() > 1) {
    files.wrapper_source = parts[1];
    try {
      (void)tensordict::detail::parse_input_checks(parts[1], "fuzz.pt2");
    } catch (const std::exception&) {
    }
  }
  std::vector<std::string> names;
  if (parts.size() > 2) {
    try {
      names = tensordict::detail::parse_input_names(parts[2], "fuzz.pt2");
    } catch (const std::exception&) {
    }
  }
  if (parts.size() > 3) {
    try {
      (void)tensordict::detail::parse_output_count(parts[3], "fuzz.pt2");
    } catch (const std::exception&) {
    }
  }
  try {
    const tensordict::detail::AotiPackageSpec spec =
        tensordict::detail::read_package_spec(
            files, "fuzz.pt2", std::nullopt, std::nullopt);
    (void)tensordict::detail::match_inputs(spec, names, "fuzz");
  } catch (const std::exception&) {
  }
}

void read_zip(const uint8_t* data, size_t size) {
  try {
    const tensordict::detail::AotiPackageFiles files =
        tensordict::detail::read_package_files(data, size, "fuzz.pt2", "model");
    (void)tensordict::detail::read_package_spec(
        files, "fuzz.pt2", std::nullopt, std::nullopt);
  } catch (const std::exception&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  if ((data[0] & 1) == 0) {
    read_parts(std::string(reinterpret_cast<const char*>(data + 1), size - 1));
  } else {
    read_zip(data + 1, size - 1);
  }
  return 0;
}
