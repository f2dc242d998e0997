// libFuzzer target: the restricted unpickler (src/io/pickle.h) that reads
// the non-tensor values Python tensordict pickles (`other.pickle`,
// `pickle.pkl`), and the plain-data reader of the distributed collectives.
// Every input is read by both, and an accepted value is converted to JSON
// and dumped, as the memmap loader and the CLI do: any crash, leak or
// sanitizer report is a bug; a refusal (c10::Error) is the expected outcome
// for most inputs.

#include <c10/util/Exception.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "io/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const tensordict::detail::PickledValue value =
        tensordict::detail::unpickle(bytes, "fuzz.pickle");
    (void)tensordict::detail::pickled_to_json(value, "fuzz.pickle").dump();
  } catch (const c10::Error&) {
  }
  try {
    (void)tensordict::detail::pickle_loads(bytes, "fuzz.pickle").dump();
  } catch (const c10::Error&) {
  }
  return 0;
}
