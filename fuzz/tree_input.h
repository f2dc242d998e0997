#pragma once

// Turns one fuzzer input into a small directory tree, so that the targets
// reading memmap directories can be fed mutated trees. The input format is
// plain text that libFuzzer's mutations and the dictionary handle well:
//
//   === meta.json
//   {"_type": ..., "a": {"dtype": "torch.float32", "shape": [2]}}
//   === a.memmap
//   <raw bytes>
//   === sub/meta.json
//   ...
//
// Each "=== <relative path>" line (at the start or after a newline) begins a
// file whose content runs to the next such line. An input that does not start
// with "=== " is the root meta.json alone. Paths are sanitised (no "..", no
// absolute paths, bounded depth), so a tree never escapes its directory.

#include <cstddef>
#include <cstdint>
#include <string>

namespace tensordict::fuzz {

/// A per-process scratch directory (under /dev/shm when it exists: writing
/// a tree per input to a disk would dominate the run).
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  /// Empties the directory and returns the path of a fresh, empty `tree`
  /// directory inside it.
  std::string fresh_tree();
  /// Returns the path of a file `name` inside the directory.
  [[nodiscard]] std::string file(const std::string& name) const;

 private:
  std::string root_;
};

/// Writes the tree `data` describes (see above) into the empty directory
/// `dir`. Parts whose path is unsafe are skipped.
void write_tree(const uint8_t* data, size_t size, const std::string& dir);

/// Writes `size` bytes at `data` to `path`, replacing it.
void write_file(const std::string& path, const uint8_t* data, size_t size);

}  // namespace tensordict::fuzz
