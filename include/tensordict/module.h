#pragma once

/// @file
/// torch::nn::Module interop: `TensorDict::from_module`, `to_module` (both
/// declared in tensordict/tensor_dict.h) and a scoped guard, the C++ form of
/// Python's `with params.to_module(model): ...`.
//
// NOTE [Swapping module tensors]
// A libtorch module keeps each parameter twice: in its registry
// (`named_parameters`) and in a member (`Linear::weight`), two handles to
// one TensorImpl. Replacing the registry entry would not change what
// `forward` computes with, so `to_module` (without `inplace`) makes the
// module's own tensors alias the dict's data instead (`set_data`): the
// module then reads and writes the dict's storage, shapes and strides,
// while keeping its identity. So that gradients reach the dict's tensors,
// as in Python (where the dict's tensors become the parameters), a module
// tensor given a dict tensor that requires grad also takes that tensor's
// place in the autograd graph (its gradient edge): `forward` then records
// the dict's tensor, and `backward` fills the dict tensor's `grad` (or
// flows on through a dict tensor that is itself computed) and leaves the
// module's `grad` as it was. Run `backward` before the swap is undone, as
// Python's `with params.to_module(model):` block does: the graph saved the
// module's tensors, whose data the restore swaps back. A dict tensor that
// does not require grad leaves the module
// tensor a leaf with its own `requires_grad` (Python's module would then
// hold a tensor that does not). Swapping back restores the module's own
// tensors as leaves.

#include <ATen/core/Tensor.h>

#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE

/// Makes a module's parameters and buffers alias those of a dict for the
/// guard's lifetime, then restores the module's own tensors (see NOTE
/// [Swapping module tensors]). Throws like `TensorDict::to_module`, in which
/// case the module is left untouched.
///
/// Example:
/// ```
///   TensorDict stacked = stack({TensorDict::from_module(*a),
///                               TensorDict::from_module(*b)});
///   for (int64_t i = 0; i < 2; ++i) {
///     ScopedModuleSwap swap(stacked.index({i}), *model);
///     outputs.push_back(model->forward(x));   // with a's, then b's weights
///   }
/// ```
class TENSORDICT_API ScopedModuleSwap {
 public:
  /// Swaps `params` into `module`.
  ScopedModuleSwap(const TensorDict& params, torch::nn::Module& module);
  /// Restores the module's own tensors.
  ~ScopedModuleSwap();
  ScopedModuleSwap(const ScopedModuleSwap&) = delete;
  ScopedModuleSwap& operator=(const ScopedModuleSwap&) = delete;
  ScopedModuleSwap(ScopedModuleSwap&&) = delete;
  ScopedModuleSwap& operator=(ScopedModuleSwap&&) = delete;

  /// Returns the module's own tensors, as they will be restored.
  const TensorDict& originals() const noexcept {
    return originals_;
  }

 private:
  torch::nn::Module* module_;
  TensorDict originals_;
};

TENSORDICT_END_NAMESPACE
