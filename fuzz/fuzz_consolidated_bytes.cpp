// libFuzzer target: from_consolidated_bytes over the input as the byte
// buffer (data region, JSON metadata, little-endian int64 length).

#include <cstddef>
#include <cstdint>
#include <exception>

#include "tensordict/consolidate.h"
#include "tensordict/tensordict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tensordict::TensorDict td =
        tensordict::from_consolidated_bytes(data, size);
    (void)td.numel();
  } catch (const std::exception&) {
  }
  return 0;
}
