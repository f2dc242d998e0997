// Serving a policy trained in Python: the C++ half of the README's
// "Serving a Python-trained model from C++". Make the package with
//
//   python3 - <<'PY'
//   import torch, tensordict_cpp
//   from torch import nn
//   from tensordict import TensorDict
//   from tensordict.nn import TensorDictModule as Mod, TensorDictSequential as
//   Seq policy = Seq(Mod(nn.Linear(3, 16), ["obs"], ["hidden"]),
//                Mod(nn.Linear(16, 2), ["hidden"], [("action", "mean")]))
//   example = TensorDict(obs=torch.randn(8, 3), batch_size=[8])
//   tensordict_cpp.export(policy, example, "policy.pt2",
//   weights_in_package=False)
//   TensorDict.from_module(policy).memmap("checkpoint")
//   PY
//
// then run `build/bin/serve policy.pt2 checkpoint`.

#include <tensordict/aoti.h>
#include <tensordict/memmap.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <atomic>
#include <iostream>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  using tensordict::TensorDict;
  if (argc < 3) {
    std::cerr << "usage: serve POLICY.pt2 CHECKPOINT_DIR\n";
    return 2;
  }
  // Two callers at a time, each on its own copy of the model.
  tensordict::nn::AOTIModule policy(
      argv[1], tensordict::nn::AOTIModuleOptions().num_runners(2));
  // The package holds no weights: they come from a memmapped checkpoint.
  const TensorDict checkpoint = TensorDict::load_memmap(argv[2]);
  policy->load_weights(checkpoint);

  // One call: the dict gets the out_keys, ("action", "mean") here.
  TensorDict td({{"obs", torch::randn({4, 3})}}, /*batch_size=*/{4});
  policy(td);
  std::cout << td << "\n";

  // Serving threads keep calling while new weights arrive; every call sees
  // either the old weights or the new ones.
  std::atomic<bool> stop{false};
  std::vector<std::thread> servers;
  for (int i = 0; i < 2; ++i) {
    servers.emplace_back([&] {
      while (!stop) {
        TensorDict request({{"obs", torch::randn({1, 3})}}, {1});
        policy(request);
      }
    });
  }
  const TensorDict updated =
      checkpoint.apply([](const at::Tensor& t) { return t * 0.5; });
  policy->load_weights(updated);  // a hot swap
  stop = true;
  for (auto& server : servers) {
    server.join();
  }
  std::cout << "weights: " << policy->weight_names().size() << " tensors\n";
  return 0;
}
