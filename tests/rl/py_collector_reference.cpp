// The C++ side of py_collector_test.py: rl::Collector run directly (no
// Python), whose batches tensordict_cpp.Collector must reproduce value for
// value with the same package, env, seeds and options.
//
//   py_collector_reference POLICY.pt2 ENV NUM_ENVS FRAMES BATCHES THREADS
//                          ENV_SEED TORCH_SEED OUT
//
// Seeds torch's default generator with TORCH_SEED (the policy samples from
// it) and the env with ENV_SEED, collects BATCHES batches and memmaps them
// as OUT/batch_<i>, in the collector's own layout ([NUM_ENVS, T]).

#include <tensordict/aoti.h>
#include <tensordict/memmap.h>
#include <tensordict/rl.h>
#include <torch/utils.h>

#include <cstdint>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 10) {
    std::cerr << "usage: py_collector_reference POLICY.pt2 ENV NUM_ENVS FRAMES "
                 "BATCHES THREADS ENV_SEED TORCH_SEED OUT\n";
    return 2;
  }
  namespace rl = tensordict::rl;
  try {
    const std::string out = argv[9];
    torch::manual_seed(std::stoull(argv[8]));
    rl::Collector collector(
        rl::make_env(argv[2], std::stoll(argv[3])),
        tensordict::nn::AOTIModule(argv[1]),
        rl::CollectorOptions(std::stoll(argv[4]))
            .num_threads(std::stoll(argv[6]))
            .seed(std::stoull(argv[7]))
            .return_same_td(false));
    const int64_t batches = std::stoll(argv[5]);
    for (int64_t i = 0; i < batches; ++i) {
      std::optional<tensordict::TensorDict> batch = collector.next();
      if (!batch) {
        std::cerr << "py_collector_reference: the collector ended early\n";
        return 1;
      }
      batch->memmap_(
          tensordict::MemmapOptions(out + "/batch_" + std::to_string(i)));
    }
    collector.shutdown();
    return 0;
  } catch (const c10::Error& e) {
    std::cerr << "py_collector_reference: " << e.what_without_backtrace()
              << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "py_collector_reference: " << e.what() << "\n";
    return 1;
  }
}
