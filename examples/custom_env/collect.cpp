// The first door: a C++ program collects the user's env with rl::Collector.
//
//   collect_corridor [LIBRARY]
//
// With LIBRARY, the env comes from that shared library
// (rl::load_env_library); without, it was linked into this program. Prints
// the frames and episodes collected; exits 1 with the error otherwise.

#include <tensordict/json.h>
#include <tensordict/rl.h>
#include <torch/torch.h>

#include <iostream>

namespace rl = tensordict::rl;

// Pushes towards the goal: right when the goal (observation[2]) is ahead.
struct TowardsGoalImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& observation) {
    const torch::Tensor ahead =
        (observation.select(-1, 2) > observation.select(-1, 0))
            .to(torch::kLong);
    return torch::one_hot(ahead, 2);
  }
};
TORCH_MODULE(TowardsGoal);

int main(int argc, char** argv) {
  try {
    if (argc > 1) {
      for (const std::string& name : rl::load_env_library(argv[1])) {
        std::cout << "registered " << name << "\n";
      }
    }
    auto env =
        rl::make_env("Corridor-v0", 4, tensordict::Json{{"max_steps", 50}});
    rl::Collector collector(
        env,
        tensordict::nn::TensorDictModule(
            TowardsGoal(), {"observation"}, {"action"}),
        rl::CollectorOptions(64).total_frames(640).num_threads(2).seed(0));
    int64_t frames = 0;
    int64_t episodes = 0;
    for (tensordict::TensorDict& batch : collector) {
      frames += batch.numel();
      episodes += batch.get({"next", "done"}).sum().item<int64_t>();
    }
    std::cout << "frames=" << frames << " episodes=" << episodes << std::endl;
    return frames == 640 && episodes > 0 ? 0 : 1;
  } catch (const c10::Error& e) {
    std::cerr << "collect_corridor: " << e.what_without_backtrace()
              << std::endl;
    return 1;
  }
}
