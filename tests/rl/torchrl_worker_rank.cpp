// A worker rank for torchrl_worker_test.py: rl::run_torchrl_worker over a
// batch source in the layout of TorchRL's Collector on GymEnv("CartPole-v1")
// with the policy TensorDictModule(nn.Linear(4, 2), ["observation"],
// ["action"]). Its values are checkable from Python:
// - "observation" and ("next", "observation") are torch.randn draws from a
//   CPU generator seeded by the last seed the learner set (0 at start), so
//   set_seed is visible in the next batch;
// - "action" = observation @ weight.T + bias with the weights the learner
//   sent last, so weight updates are visible in the next batch;
// - ("next", "reward") is 1, the flags are false, ("collector", "traj_ids")
//   is the batch's index (0, 1, ...).
// The seed reported back to the learner is the seed + 1000, so that the
// learner can tell it came from this hook.
//
// Usage: torchrl_worker_rank HOST:PORT RANK WORLD_SIZE FRAMES LAYOUT_FILE
//        [IDLE_TIMEOUT_MS [sync]]
// Prints the stats on success; on an error prints "torchrl_worker_rank:
// <message>" to stderr and exits with 1.

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <tensordict/rl.h>

#include <fstream>
#include <iostream>
#include <string>

using tensordict::NestedKey;
using tensordict::TensorDict;

int main(int argc, char** argv) {
  if (argc < 6) {
    std::cerr << "usage: torchrl_worker_rank HOST:PORT RANK WORLD_SIZE FRAMES "
                 "LAYOUT_FILE [IDLE_TIMEOUT_MS [sync]]\n";
    return 2;
  }
  try {
    const std::string master = argv[1];
    const size_t colon = master.rfind(':');
    TORCH_CHECK(colon != std::string::npos, "expected HOST:PORT, got ", master);
    const int64_t frames = std::stoll(argv[4]);
    const std::string layout_file = argv[5];
    namespace rl = tensordict::rl;
    rl::TorchRLWorkerOptions options(
        master.substr(0, colon),
        std::stoi(master.substr(colon + 1)),
        std::stoi(argv[2]),
        std::stoi(argv[3]));
    options.frames_per_batch(frames).timeout(std::chrono::seconds(20));
    if (argc > 6) {
      options.idle_timeout(std::chrono::milliseconds(std::stoll(argv[6])));
    }
    options.sync(argc > 7 && std::string(argv[7]) == "sync");
    options.verbose(std::getenv("TORCHRL_WORKER_VERBOSE") != nullptr);

    at::Tensor weight = at::zeros({2, 4});
    at::Tensor bias = at::zeros({2});
    at::Generator generator = at::detail::createCPUGenerator(0);
    int64_t batches = 0;
    bool layout_written = false;

    rl::TorchRLWorkerHooks hooks;
    hooks.weights = TensorDict(
        {{"module", {{"bias", at::zeros({2})}, {"weight", at::zeros({2, 4})}}}},
        /*batch_size=*/{});
    hooks.apply_weights = [&](const TensorDict& w) {
      weight.copy_(w.get({"module", "weight"}));
      bias.copy_(w.get({"module", "bias"}));
    };
    hooks.set_seed = [&](int64_t seed) {
      generator = at::detail::createCPUGenerator(static_cast<uint64_t>(seed));
      return seed + 1000;
    };
    hooks.next_batch = [&]() {
      at::Tensor obs = at::randn({frames, 4}, generator);
      at::Tensor next_obs = at::randn({frames, 4}, generator);
      at::Tensor flag = at::zeros({frames, 1}, at::kBool);
      TensorDict batch(
          {{"action", at::addmm(bias, obs, weight.t())},
           {"collector",
            {{"traj_ids", at::full({frames}, batches, at::kLong)}}},
           {"done", flag.clone()},
           {"next",
            {{"done", flag.clone()},
             {"observation", next_obs},
             {"reward", at::ones({frames, 1})},
             {"terminated", flag.clone()},
             {"truncated", flag.clone()}}},
           {"observation", obs},
           {"terminated", flag.clone()},
           {"truncated", flag.clone()}},
          /*batch_size=*/{frames});
      ++batches;
      if (!layout_written) {
        std::ofstream out(layout_file);
        for (const NestedKey& key : batch.keys(
                 /*include_nested=*/true,
                 /*leaves_only=*/true,
                 /*sort=*/true)) {
          const at::Tensor t = batch.get(key);
          out << key.join_parts(".") << "|" << c10::toString(t.scalar_type())
              << "|" << t.sizes() << "\n";
        }
        layout_written = true;
      }
      return batch;
    };
    const rl::TorchRLWorkerStats stats = rl::run_torchrl_worker(hooks, options);
    std::cout << "batches=" << stats.batches << " frames=" << stats.frames
              << " weight_updates=" << stats.weight_updates
              << " weights_refused=" << stats.weights_refused
              << " seeds=" << stats.seeds << std::endl;
    return 0;
  } catch (const c10::Error& e) {
    std::cerr << "torchrl_worker_rank: " << e.what_without_backtrace()
              << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "torchrl_worker_rank: " << e.what() << std::endl;
    return 1;
  }
}
