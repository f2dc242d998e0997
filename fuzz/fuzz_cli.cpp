// libFuzzer target: the CLI's verify, dump and info (tools/inspect.h) over
// a memmap tree from the input (tree_input.h), or over a consolidated file
// when the input starts with "CONSOLIDATED\n".

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "inspect.h"
#include "tree_input.h"

namespace {

constexpr char kFileMarker[] = "CONSOLIDATED\n";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tensordict::fuzz::ScratchDir scratch;
  std::string path = scratch.fresh_tree();
  const size_t marker = sizeof(kFileMarker) - 1;
  if (size >= marker && std::memcmp(data, kFileMarker, marker) == 0) {
    path = scratch.file("td.consolidated");
    tensordict::fuzz::write_file(path, data + marker, size - marker);
  } else {
    tensordict::fuzz::write_tree(data, size, path);
  }
  try {
    (void)tensordict::tools::verify_any(path);
    const tensordict::LoadedTree tree = tensordict::tools::load_any(path);
    (void)tensordict::tools::dump_tree(tree).dump();
    std::ostringstream listing;
    tensordict::tools::print_info(listing, path, tree);
  } catch (const std::exception&) {
  }
  return 0;
}
