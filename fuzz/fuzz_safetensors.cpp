// libFuzzer target: the safetensors reader (from_safetensors_any) over the
// input written as a file: the header checks, the tensordict metadata and
// the plain-file key splitting.

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <variant>

#include "tensordict/safetensors.h"
#include "tensordict/tensordict.h"
#include "tree_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tensordict::fuzz::ScratchDir scratch;
  const std::string path = scratch.file("td.safetensors");
  tensordict::fuzz::write_file(path, data, size);
  try {
    const auto loaded = tensordict::from_safetensors_any(path);
    if (const auto* td = std::get_if<tensordict::TensorDict>(&loaded)) {
      // Read every leaf: a view past the mapping would fault here.
      for (const auto& value : td->values(
               /*include_nested=*/true,
               /*leaves_only=*/true)) {
        if (value.is_tensor() && value.tensor().numel() > 0) {
          (void)value.tensor().sum();
        }
      }
    }
  } catch (const std::exception&) {
  }
  return 0;
}
