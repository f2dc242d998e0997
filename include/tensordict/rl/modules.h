#pragma once

/// @file
/// TorchRL's modules in C++: `MLP`. Part of <tensordict/rl.h>.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "tensordict/export.h"
#include "tensordict/nn.h"
#include "tensordict/options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

/// Options of `MLP` (TorchRL's `torchrl.modules.MLP` keyword arguments).
///
/// Example: `MLPOptions(4, 2).num_cells({64, 64}).activation("ReLU")`
struct TENSORDICT_API MLPOptions {
  /// Sets the input and output sizes.
  MLPOptions(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  /// Size of the input's last dim.
  TENSORDICT_ARG(int64_t, in_features);
  /// Size of the output's last dim.
  TENSORDICT_ARG(int64_t, out_features);
  /// Width of each hidden layer; empty gives one linear layer. Unlike
  /// Python, the depth is its length (no `depth` argument, no default of 32
  /// cells).
  TENSORDICT_ARG(std::vector<int64_t>, num_cells);
  /// The activation's torch.nn class name: "Tanh" (TorchRL's default),
  /// "ReLU" or "ELU".
  TENSORDICT_ARG(std::string, activation) = "Tanh";
  /// Applies the activation after the last layer too.
  TENSORDICT_ARG(bool, activate_last_layer) = false;
  /// Gives the last layer a bias.
  TENSORDICT_ARG(bool, bias_last_layer) = true;
};

/// TorchRL's `MLP`: Linear layers with an activation between them, named
/// as Python's nn.Sequential names them ("0.weight", "0.bias", "2.weight",
/// ...), so a TorchRL MLP's state_dict loads into it.
///
/// NOTE [Small-batch MLP] An actor stepping a few envs calls its MLP on a
/// few rows, where each at:: op costs more than its arithmetic. Without an
/// autograd graph to record, a float32 CPU input of at most
/// `kLoopRows` rows is evaluated by plain loops (one pass, no
/// allocation but the output); otherwise, and whenever gradients are
/// recorded, by torch's `linear` and activation ops, as Python's MLP. The
/// loops sum in another order than BLAS and take tanh within a few ulps:
/// the two agree to 1e-5 relative, not to the bit. Without gradients, a
/// 2-D CPU input of more rows writes its hidden layers into buffers kept
/// per thread (at most `kMaxReusedBytes` each; NOTE [Hidden layers in
/// reused buffers] in mlp.cpp): the same ops, the same output to the bit.
///
/// Example: `rl::MLP actor(rl::MLPOptions(4, 2).num_cells({64, 64}));`
class TENSORDICT_API MLPImpl : public torch::nn::Module {
 public:
  /// The most rows the loops of NOTE [Small-batch MLP] take.
  static constexpr int64_t kLoopRows = 4;
  /// The largest hidden layer, in bytes, written into a reused buffer.
  static constexpr int64_t kMaxReusedBytes = int64_t{1} << 20;
  /// Builds the layers, initialized as torch.nn.Linear does. Throws
  /// ValueError for a size < 1 or an unknown activation.
  explicit MLPImpl(MLPOptions options);
  /// Returns the output, [..., out_features], for an input
  /// [..., in_features].
  at::Tensor forward(const at::Tensor& input);
  /// Returns the options.
  const MLPOptions& options() const noexcept {
    return options_;
  }
  /// Prints as Python's MLP repr.
  void pretty_print(std::ostream& stream) const override;

 private:
  at::Tensor forward_loops(const at::Tensor& input) const;
  at::Tensor forward_reusing(const at::Tensor& input) const;
  MLPOptions options_;
  int activation_;
  // The registered layers' parameters (the same tensors).
  std::vector<at::Tensor> weights_;
  std::vector<at::Tensor> biases_;
  int64_t widest_hidden_ = 0;
};

/// A holder of `MLPImpl`, as TORCH_MODULE makes.
class MLP : public torch::nn::ModuleHolder<MLPImpl> {
 public:
  using torch::nn::ModuleHolder<MLPImpl>::ModuleHolder;
};

}  // namespace rl
TENSORDICT_END_NAMESPACE
