// The C++ half of vmap_interop.py: loads the ensembles Python wrote (stacked
// weights, inputs and Python's torch.vmap outputs), runs
// functional_call_vmap on the same architectures, checks the outputs, and
// memmaps its own for Python to compare.
//
// usage: vmap_interop PYTHON_DIR CPP_DIR

#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <iostream>
#include <string>

using namespace tensordict;  // NOLINT(google-build-using-namespace)

namespace {

torch::nn::Sequential make_mlp() {
  return torch::nn::Sequential(
      torch::nn::Linear(16, 32),
      torch::nn::ReLU(),
      torch::nn::Linear(32, 32),
      torch::nn::Tanh(),
      torch::nn::Linear(32, 10));
}

torch::nn::Sequential make_conv() {
  return torch::nn::Sequential(
      torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).padding(1)),
      torch::nn::ReLU(),
      torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 2, 3).stride(2)),
      torch::nn::Flatten());
}

// Runs one case both ways and returns its outputs; false in `ok` when one
// differs from Python's.
TensorDict run_case(
    const std::string& name,
    const TensorDict& written,
    torch::nn::Sequential shell,
    bool& ok) {
  const TensorDict params = written.get_tensordict("params");
  TensorDict outputs;
  for (const VmapMode mode : {VmapMode::kBatched, VmapMode::kLoop}) {
    const char* mode_name = mode == VmapMode::kBatched ? "batched" : "loop";
    const at::Tensor out = functional_call_vmap(
        shell, params, written.get("x"), VmapOptions().mode(mode));
    const at::Tensor out_batched = functional_call_vmap(
        shell,
        params,
        written.get("x_batched"),
        VmapOptions().in_dims({0}).mode(mode));
    for (const auto& [key, value] :
         {std::pair{"out", out}, std::pair{"out_batched", out_batched}}) {
      const at::Tensor expected = written.get(key);
      const bool same = value.sizes() == expected.sizes() &&
                        torch::allclose(value, expected, 1e-5, 1e-6);
      std::cout << name << " " << key << " (" << mode_name
                << "): " << (same ? "matches" : "DIFFERS") << " Python\n";
      ok = ok && same;
    }
    if (mode == VmapMode::kBatched) {
      outputs.set("out", out);
      outputs.set("out_batched", out_batched);
    }
  }
  return outputs;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: vmap_interop PYTHON_DIR CPP_DIR\n";
    return 2;
  }
  torch::NoGradGuard no_grad;
  const TensorDict written = TensorDict::load_memmap(argv[1]);
  bool ok = true;
  TensorDict result;
  result.set(
      "mlp", run_case("mlp", written.get_tensordict("mlp"), make_mlp(), ok));
  result.set(
      "conv",
      run_case("conv", written.get_tensordict("conv"), make_conv(), ok));
  (void)result.memmap(argv[2]);
  return ok ? 0 : 1;
}
