// The package file of an AOTIModule; see nn/aoti_zip.h. The parsing is
// io/zip.h's (see NOTE [Zip reader]) and the spec entries' nn/aoti_spec.h's;
// this maps the file.

#include "nn/aoti_zip.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "io/file_io.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

AotiPackageFiles read_package_file(
    const std::string& path, const std::string& model_name) {
  const std::string label = c10::str("AOTI package '", path, "'");
  TORCH_CHECK(
      ::access(path.c_str(), R_OK) == 0,
      label,
      ": cannot open the file: ",
      std::strerror(errno));
  const at::Tensor mapping = map_whole_file(path, /*writable=*/false, label);
  return read_package_files(
      static_cast<const unsigned char*>(mapping.data_ptr()),
      static_cast<uint64_t>(mapping.numel()),
      label,
      model_name);
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
