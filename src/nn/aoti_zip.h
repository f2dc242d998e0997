#pragma once

// The package file of an AOTIModule: its integrity checked and the entries
// its spec is read from, before libtorch extracts it and opens the shared
// library inside. See NOTE [Untrusted packages] in tensordict/aoti.h. The
// mapping and the CRC checks are io/mapped_zip.h's; read_package_file is
// defined in aoti_package_meta.cpp, next to the reading of the spec entries.

#include <string>

#include "nn/aoti_package_meta.h"
#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

// Returns the spec entries of model `model_name`
// (`<top>/data/aotinductor/<model>/`) of the package at `path`. Throws
// c10::Error, naming the file and the entry, unless `path` is a zip archive
// whose central directory, local headers and entry bounds are consistent
// with the file's size, whose entries are stored uncompressed (what torch
// writes), and whose every entry matches its CRC-32; also if the model has
// no metadata, or two metadata files that differ.
AotiPackageFiles read_package_file(
    const std::string& path, const std::string& model_name);

}  // namespace detail
TENSORDICT_END_NAMESPACE
