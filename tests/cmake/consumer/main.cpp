// Smoke test for an installed TensorDict: the headers must be found through
// the exported target, and the program must link and run against the
// installed library and its dependencies. Exits non-zero on any mismatch.
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <cstdint>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::cerr << "FAILED: " << what << "\n";
    ++failures;
  }
}

}  // namespace

int main() {
  try {
    tensordict::TensorDict td(
        {{"a", torch::ones({2, 3})},
         {"sub", {{"b", torch::zeros({2})}}},
         {"s", "text"}},
        /*batch_size=*/{2});

    check(td.batch_size() == c10::IntArrayRef{2}, "batch_size() == [2]");
    check(td.get("a").sum().item<float>() == 6.0F, "sum of 'a' == 6");
    check(
        td.get({"sub", "b"}).sum().item<float>() == 0.0F,
        "sum of ('sub', 'b') == 0");
    check(
        td.get_tensordict("sub").batch_size() == c10::IntArrayRef{2},
        "'sub' inherits batch_size [2]");
    check(td.get_non_tensor("s") == "text", "get_non_tensor('s') == \"text\"");

    const std::vector<tensordict::NestedKey> expected_keys = {"a", "sub", "s"};
    check(td.keys() == expected_keys, "keys() == ['a', 'sub', 's']");
    check(td.contains({"sub", "b"}), "contains(('sub', 'b'))");
    check(!td.contains("missing"), "!contains('missing')");
  } catch (const std::exception& e) {
    std::cerr << "FAILED: unexpected exception: " << e.what() << "\n";
    return 1;
  }

  if (failures != 0) {
    std::cerr << failures << " check(s) failed\n";
    return 1;
  }
  std::cout << "TensorDict consumer: all checks passed\n";
  return 0;
}
