// Model parameters as a TensorDict: an ensemble of modules run through one
// module at once with vmap over their stacked parameters (checked against a
// loop that swaps each member's parameters in), a checkpoint written with
// memmap and loaded onto a fresh model (whole, or one submodule from its
// sub-directory), and a consolidated copy sent as one byte buffer.
// Run: build/bin/ensemble [DIRECTORY]

#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <filesystem>
#include <iostream>
#include <vector>

namespace {

torch::nn::Sequential make_model() {
  return torch::nn::Sequential(
      torch::nn::Linear(4, 8), torch::nn::ReLU(), torch::nn::Linear(8, 2));
}

}  // namespace

int main(int argc, char** argv) {
  using tensordict::ConsolidateOptions;
  using tensordict::LoadMemmapOptions;
  using tensordict::ScopedModuleSwap;
  using tensordict::TensorDict;
  using tensordict::ToModuleOptions;
  const std::string dir =
      argc > 1
          ? argv[1]
          : (std::filesystem::temp_directory_path() / "tensordict_ensemble")
                .string();
  torch::manual_seed(0);
  torch::NoGradGuard no_grad;

  // --- ensemble: stack the parameters of five models, run one shell ---------
  std::vector<torch::nn::Sequential> members;
  std::vector<TensorDict> params;
  for (int i = 0; i < 5; ++i) {
    members.push_back(make_model());
    params.push_back(TensorDict::from_module(*members.back()));
  }
  // Keys "0" and "2" (the ReLU holds nothing), batch size [5].
  const TensorDict stacked = tensordict::stack(params);
  std::cout << "stacked parameters: " << stacked.keys(true, true).size()
            << " leaves, batch size " << stacked.batch_size() << "\n";

  // One call for the whole ensemble: vmap over the members' dim of
  // `stacked`, `x` shared by all (Python: vmap(call, (0, None))).
  auto shell = make_model();
  const at::Tensor x = torch::randn({3, 4});
  const at::Tensor outputs =
      tensordict::functional_call_vmap(shell, stacked, x);
  std::cout << "ensemble output: " << outputs.sizes() << "\n";
  // The check: a loop swapping each member's parameters into the shell.
  for (int64_t i = 0; i < stacked.size(0); ++i) {
    ScopedModuleSwap swap(stacked.index({i}), *shell);  // restored at scope end
    const bool same = torch::allclose(shell->forward(x), outputs[i]) &&
                      torch::allclose(outputs[i], members[i]->forward(x));
    std::cout << "member " << i << ": vmap output matches: " << same << "\n";
  }

  // --- checkpoint: memmap the parameters, load them onto a fresh model ----
  (void)TensorDict::from_module(*members[0]).memmap(dir);
  auto fresh = make_model();
  (void)TensorDict::load_memmap(dir).to_module(
      *fresh, ToModuleOptions().inplace(true));
  std::cout << "fresh model matches member 0: "
            << torch::allclose(fresh->forward(x), members[0]->forward(x))
            << "\n";
  // Only the first layer, from its sub-directory.
  torch::nn::Linear first(4, 8);
  (void)TensorDict::load_memmap(dir, LoadMemmapOptions().subpath({"0"}))
      .to_module(*first, ToModuleOptions().inplace(true));
  std::cout << "first layer restored: "
            << torch::equal(
                   first->weight,
                   members[0][0]->as<torch::nn::Linear>()->weight)
            << "\n";

  // --- one buffer: consolidate, serialize, rebuild -----------------------
  const at::Tensor bytes = tensordict::consolidated_bytes(stacked);
  const TensorDict received = tensordict::from_consolidated_bytes(bytes);
  std::cout << "sent " << bytes.numel() << " bytes; received dict equals: "
            << tensordict::equal(received, stacked) << "\n";

  // The state-dict form, flat "0.weight" keys as in Python.
  const tensordict::StateDict sd = TensorDict::from_module(*fresh).state_dict();
  std::cout << "state dict keys:";
  for (const auto& key : sd.keys()) {
    std::cout << " " << key;
  }
  std::cout << "\n";
  std::filesystem::remove_all(dir);
  return 0;
}
