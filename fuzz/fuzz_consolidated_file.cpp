// libFuzzer target: the consolidated-file reader
// (TensorDict::from_consolidated) over the input written as a file.

#include <cstddef>
#include <cstdint>
#include <exception>

#include "tensordict/consolidate.h"
#include "tensordict/tensordict.h"
#include "tree_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tensordict::fuzz::ScratchDir scratch;
  const std::string path = scratch.file("td.consolidated");
  tensordict::fuzz::write_file(path, data, size);
  try {
    const tensordict::TensorDict td =
        tensordict::TensorDict::from_consolidated(path);
    (void)td.numel();
  } catch (const std::exception&) {
  }
  return 0;
}
