// A five-minute tour of TensorDict: build, nest, read, write, lock, print.
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <iostream>

using namespace tensordict::indexing;
using tensordict::NestedKey;
using tensordict::TensorDict;

int main() {
  torch::manual_seed(0);
  // A batch of 4 transitions: tensors share the leading batch dim.
  TensorDict td(
      {{"obs", torch::randn({4, 3})},
       {"action", torch::randint(0, 5, {4}, torch::kLong)},
       {"next",
        {{"obs", torch::randn({4, 3})}, {"reward", torch::ones({4, 1})}}},
       {"task", "reach"}},
      /*batch_size=*/{4});
  std::cout << "A TensorDict of batch size [4]:\n" << td << "\n\n";

  // Nested keys reach into sub-dicts; set() creates missing levels.
  td.set({"next", "done"}, torch::zeros({4}, torch::kBool));
  td.set({"info", "step"}, torch::arange(4));
  std::cout << "keys(include_nested, leaves_only, sort):\n";
  for (const NestedKey& key :
       td.keys(/*include_nested=*/true, /*leaves_only=*/true, /*sort=*/true)) {
    std::cout << "  " << key << "\n";
  }
  std::cout << "reward sum: " << td.get({"next", "reward"}).sum().item<float>()
            << ", task: " << td.get_non_tensor("task") << "\n\n";

  // Handles alias, clone() is deep.
  TensorDict alias = td;
  TensorDict deep = td.clone();
  alias.set_("obs", torch::zeros({4, 3}));
  std::cout << std::boolalpha
            << "after writing through an alias: td.obs is zero: "
            << td.get("obs").eq(0).all().item<bool>()
            << ", the clone is untouched: "
            << !deep.get("obs").eq(0).all().item<bool>() << "\n\n";

  // The batch size can grow when every entry fits.
  TensorDict grid({{"x", torch::zeros({2, 3, 5})}}, /*batch_size=*/{2});
  grid.set_batch_size({2, 3});
  grid.set_names({"rows", "cols"});
  std::cout << "grid with named dims:\n" << grid << "\n\n";

  // Flatten nested keys into one level and back.
  std::cout << "flatten_keys(\"/\"):\n" << td.flatten_keys("/") << "\n\n";

  // Locking forbids adding keys but allows in-place writes.
  td.lock_();
  try {
    td.set("new", torch::zeros({4}));
  } catch (const c10::Error& e) {
    std::cout << "locked: " << e.msg() << "\n";
  }
  td.set_("action", torch::full({4}, 2, torch::kLong));
  td.unlock_();

  // It behaves like one tensor over its batch dims: index, reshape, stack.
  TensorDict firsts = td.index({Slice(0, 2)});
  std::cout << "td.index({Slice(0, 2)}) has batch size " << firsts.batch_size()
            << "; td.index({0}).get(\"obs\") has shape "
            << td.index({0}).get("obs").sizes() << "\n";
  TensorDict pair = tensordict::stack({td, td.clone()}, /*dim=*/0);
  std::cout << "stack of two: batch size " << pair.batch_size()
            << ", reshape to [8]: " << pair.reshape({8}).batch_size() << "\n";
  TensorDict doubled = td.exclude({"task"}).apply(
      [](const at::Tensor& t) { return t.is_floating_point() ? t * 2 : t; });
  std::cout << "apply(x * 2): reward sum "
            << doubled.get({"next", "reward"}).sum().item<float>()
            << ", mean over the batch of next.reward: "
            << td.get_tensordict("next")
                   .exclude({"done"})
                   .mean()
                   .get("reward")
                   .item<float>()
            << "\n\n";

  // Writing at an index of an empty dict allocates what is missing.
  TensorDict buffer({3});
  for (int64_t step = 0; step < 3; ++step) {
    buffer.index_put_({step}, TensorDict({{"x", torch::full({2}, step)}}, {}));
  }
  std::cout << "preallocated buffer:\n" << buffer << "\n\n";

  // Comparisons give bool dicts.
  std::cout << std::boolalpha << "td == deep everywhere? " << (td == deep).all()
            << "; equal(deep, deep.clone()): "
            << tensordict::equal(deep, deep.clone()) << "\n";
  return 0;
}
