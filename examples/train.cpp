// The seed's training loop in C++: a memmapped dataset served by
// TensorDictDataset and libtorch's data loader, a TensorDictSequential model
// that reads and writes the batches, a loss written as a TensorDictModule,
// backward and an optimizer step, and a checkpoint memmapped every few steps
// (Python's layout: `TensorDict.load_memmap(dir).to_module(model)` reads it
// there too) and reloaded into a fresh model at the end.
// Run: build/bin/train [DIRECTORY]

#include <tensordict/data_loader.h>
#include <tensordict/memmap.h>
#include <tensordict/nn.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

using tensordict::TensorDict;
using tensordict::TensorDictDataset;
using tensordict::nn::TensorDictModule;
using tensordict::nn::TensorDictSequential;

namespace {

TensorDictSequential make_model() {
  return TensorDictSequential(
      {TensorDictModule(torch::nn::Linear(4, 64), {{"obs", "x"}}, {"hidden"}),
       TensorDictModule(
           torch::nn::Functional(torch::tanh), {"hidden"}, {"hidden"}),
       TensorDictModule(torch::nn::Linear(64, 2), {"hidden"}, {"prediction"})});
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path dir =
      argc > 1 ? std::filesystem::path(argv[1])
               : std::filesystem::temp_directory_path() / "tensordict_train";
  std::filesystem::remove_all(dir);
  torch::manual_seed(0);

  // --- a dataset on disk: 4096 points and a smooth target to regress -------
  const at::Tensor x = torch::randn({4096, 4});
  const at::Tensor target = torch::stack(
      {torch::sin(x.sum(1)), x.select(1, 0) * x.select(1, 1) / 2}, 1);
  (void)TensorDict({{"obs", {{"x", x}}}, {"target", target}}, {4096})
      .memmap((dir / "data").string());
  const TensorDict dataset = TensorDict::load_memmap((dir / "data").string());
  auto loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
          TensorDictDataset(dataset),
          torch::data::DataLoaderOptions().batch_size(64));

  // --- the model, the loss and the optimizer --------------------------------
  TensorDictSequential model = make_model();
  TensorDictModule loss_module(
      [](const at::Tensor& prediction, const at::Tensor& target) {
        return torch::mse_loss(prediction, target);
      },
      {"prediction", "target"},
      {"loss"},
      // A new dict without batch dims: the loss is a scalar.
      tensordict::nn::TensorDictModuleOptions().inplace(
          tensordict::nn::InplaceMode::kFalse));
  torch::optim::Adam optimizer(
      model->parameters(), torch::optim::AdamOptions(3e-3));

  // --- the loop: the model reads and writes TensorDicts ---------------------
  const std::string checkpoint = (dir / "checkpoint").string();
  int64_t step = 0;
  double first_loss = 0;
  double last_loss = 0;
  for (int epoch = 0; epoch < 4; ++epoch) {
    for (TensorDict data : *loader) {
      data = model(data);  // writes hidden and prediction
      at::Tensor loss = loss_module(data).get("loss");
      loss.backward();
      optimizer.step();
      optimizer.zero_grad();
      last_loss = loss.item<double>();
      first_loss = step == 0 ? last_loss : first_loss;
      if (step % 64 == 0) {
        (void)TensorDict::from_module(*model).detach().memmap(checkpoint);
        std::printf(
            "step %4lld  loss %.4f  (checkpoint saved)\n",
            static_cast<long long>(step),
            last_loss);
      }
      ++step;
    }
  }
  (void)TensorDict::from_module(*model).detach().memmap(checkpoint);
  std::printf(
      "step %4lld  loss %.4f  (checkpoint saved)\n",
      static_cast<long long>(step),
      last_loss);

  // --- reload the checkpoint into a fresh model: same predictions -----------
  TensorDictSequential restored = make_model();
  TensorDict::load_memmap(checkpoint).to_module(*restored);
  torch::NoGradGuard no_grad;
  TensorDict batch = dataset.index({at::indexing::Slice(0, 256)});
  const at::Tensor expected = model(batch.copy()).get("prediction");
  const at::Tensor reloaded = restored(batch.copy()).get("prediction");
  const double full_loss =
      loss_module(restored(dataset.copy())).get("loss").item<double>();
  std::cout << "reloaded checkpoint: predictions "
            << (torch::allclose(expected, reloaded) ? "match" : "DIFFER")
            << ", loss on the whole dataset " << full_loss << "\n";
  if (!torch::allclose(expected, reloaded) || !(last_loss < first_loss / 2)) {
    std::cerr << "train: the loss did not go down or the checkpoint differs\n";
    return 1;
  }
  return 0;
}
