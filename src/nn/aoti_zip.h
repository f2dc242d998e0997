#pragma once

// The package file of an AOTIModule: its integrity checked and the entries
// its spec is read from, before libtorch extracts it and opens the shared
// library inside. See NOTE [Untrusted packages] in tensordict/aoti.h.

#include <string>

#include "nn/aoti_spec.h"
#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

// Returns the spec entries of model `model_name` of the package at `path`
// (see read_package_files). Throws c10::Error, naming the file and the
// entry, unless `path` is a zip archive whose central directory, local
// headers and entry bounds are consistent with the file's size, whose
// entries are stored uncompressed (what torch writes), and whose every
// entry matches its CRC-32.
AotiPackageFiles read_package_file(
    const std::string& path, const std::string& model_name);

}  // namespace detail
TENSORDICT_END_NAMESPACE
