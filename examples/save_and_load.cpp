// Saving a TensorDict as a memmap directory that Python tensordict can load
// (`tensordict.TensorDict.load_memmap(path)`), and loading it back without a
// copy. Run: build/bin/save_and_load [DIRECTORY]

#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <filesystem>
#include <iostream>

int main(int argc, char** argv) {
  using tensordict::MemmapOptions;
  using tensordict::TensorDict;
  const std::string prefix =
      argc > 1 ? argv[1]
               : (std::filesystem::temp_directory_path() / "tensordict_example")
                     .string();

  TensorDict rollout(
      {{"obs", torch::randn({100, 4})},
       {"next", {{"reward", torch::rand({100})}}},
       {"env", "CartPole-v1"}},
      /*batch_size=*/{100});

  // One directory, a meta.json per dict and a raw file per tensor.
  TensorDict saved = rollout.memmap(MemmapOptions(prefix).num_threads(2));
  std::cout << "saved to " << *saved.saved_path()
            << ", locked: " << saved.is_locked() << "\n";

  // Loading maps the files: nothing is read until a leaf is used.
  TensorDict loaded = TensorDict::load_memmap(prefix);
  std::cout << "reward[0:3] = " << loaded.get({"next", "reward"}).slice(0, 0, 3)
            << "\nenv = " << loaded.get_non_tensor("env") << "\n"
            << "same data: " << tensordict::equal(loaded, rollout) << "\n";

  // In-place writes to a loaded leaf reach the file.
  loaded.get("obs").index_put_({0}, 0.0);
  std::cout << "obs[0] after reload: "
            << TensorDict::load_memmap(prefix).get("obs")[0] << "\n";
  return 0;
}
