// libFuzzer target: a memmap directory (meta.json files and leaf files, see
// tree_input.h) loaded with load_memmap_any, then loaded again in place
// into a dict of the batch size it had. Errors are fine; crashes, leaks,
// hangs and unbounded allocations are not.

#include <cstddef>
#include <cstdint>
#include <exception>
#include <variant>

#include "tensordict/memmap.h"
#include "tensordict/tensordict.h"
#include "tree_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tensordict::fuzz::ScratchDir scratch;
  const std::string dir = scratch.fresh_tree();
  tensordict::fuzz::write_tree(data, size, dir);
  try {
    const tensordict::LoadedTree tree = tensordict::load_memmap_any(dir);
    if (const auto* td = std::get_if<tensordict::TensorDict>(&tree)) {
      tensordict::TensorDict into(td->batch_size());
      into.load_memmap_(dir);
    }
  } catch (const std::exception&) {
  }
  return 0;
}
