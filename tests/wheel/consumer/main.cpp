// Links the wheel's libtensordict.so through find_package(TensorDict):
// loads the tree Python tensordict wrote (argv[1]), checks it, and saves it
// again with one more entry under argv[2] for Python to check.
#include <ATen/ops/arange.h>
#include <tensordict/memmap.h>
#include <tensordict/tensordict.h>

#include <exception>
#include <iostream>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: wheel_consumer PYTHON_TREE OUT_TREE\n";
    return 2;
  }
  try {
    auto td = tensordict::TensorDict::load_memmap(argv[1]);
    // The tree holds "a" = arange(6).reshape(3, 2) float32 and
    // ("nested", "b") = arange(3) int64, batch size [3].
    if (td.batch_size() != c10::IntArrayRef{3} ||
        td.get("a").sum().item<double>() != 15.0 ||
        td.get({"nested", "b"}).sum().item<int64_t>() != 3) {
      std::cerr << "FAILED: unexpected tree " << td << "\n";
      return 1;
    }
    td.set("from_cpp", at::arange(3, at::kDouble));
    // The leaves map Python's files: copied into the new tree.
    td.memmap(tensordict::MemmapOptions(argv[2]).copy_existing(true));
  } catch (const std::exception& e) {
    std::cerr << "FAILED: " << e.what() << "\n";
    return 1;
  }
  std::cout << "wheel_consumer: ok\n";
  return 0;
}
