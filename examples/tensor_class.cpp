// TensorClass in one minute: a typed struct whose fields live in a
// TensorDict, so it indexes, reshapes, stacks and saves like one.
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <filesystem>
#include <iostream>

using namespace tensordict;
using namespace tensordict::indexing;

// A bare name is a tensor field; (Type, name) declares any other kind.
struct Goal : TensorClass<Goal> {
  TENSORDICT_FIELDS(Goal, position)
};

struct Trajectory : TensorClass<Trajectory> {
  TENSORDICT_FIELDS(
      Trajectory,
      obs,
      action,
      (Goal, goal),
      (std::string, task),
      (std::optional<at::Tensor>, reward))  // optional: may be None
};

int main() {
  Trajectory traj(
      {{"obs", torch::randn({4, 3})},
       {"action", torch::arange(4)},
       {"goal", Goal({{"position", torch::zeros({4, 2})}}, {4})},
       {"task", "reach"}},
      /*batch_size=*/{4});

  // Typed getters and setters; the setter checks the batch dims.
  at::Tensor obs = traj.obs();
  std::string task = traj.task();
  std::cout << "obs " << obs.sizes() << ", task " << task
            << ", reward set: " << traj.reward().has_value() << "\n";
  traj.set_reward(torch::ones({4}));

  // Every op returns a Trajectory.
  Trajectory first = traj.index({0});
  Trajectory pairs = traj.reshape({2, 2});
  Trajectory both = stack(std::vector<Trajectory>{traj, traj});
  std::cout << "first.obs " << first.obs().sizes() << ", pairs batch "
            << pairs.batch_size() << ", stacked goal "
            << both.goal().position().sizes() << "\n\n";
  std::cout << first << "\n";

  // A state dict is keyed by field names; `task` goes in its metadata.
  StateDict sd = traj.state_dict();
  Trajectory restored = traj.clone().zero_();
  restored.load_state_dict(sd);
  std::cout << "\nstate dict keys: " << sd.keys().size()
            << ", restored equal: " << equal(restored, traj) << "\n";

  // Saving and loading keep the type. Register the Python class string
  // (TENSORDICT_PYTHON_CLASS) to save in Python's tensorclass layout.
  const auto dir =
      std::filesystem::temp_directory_path() / "tensor_class_example";
  std::filesystem::remove_all(dir);
  (void)traj.memmap(MemmapOptions(dir.string()));
  Trajectory loaded = Trajectory::load_memmap(dir.string());
  std::cout << "\nloaded task: " << loaded.task() << "\n";
  std::filesystem::remove_all(dir);
  return 0;
}
