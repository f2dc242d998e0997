#pragma once

/// @file
/// vmap over stacked parameters: run one module once for a whole ensemble,
/// the C++ form of Python's
//
//   def call(params, x):
//       with params.to_module(module):
//           return module(x)
//   torch.vmap(call, (0, None))(params_stack, x)
//
// NOTE [vmap from C++]
// libtorch has no public C++ vmap, but it ships functorch's machinery, which
// is what Python's `torch.vmap` drives: push a vmap layer on the dynamic
// layer stack, wrap each batched argument in a BatchedTensor (a tensor that
// hides one dim and dispatches through batching rules), call the function
// once, take the batch dim back out of the result and pop the layer. We do
// the same from C++ (src/nn/vmap.cpp); a guard pops the layer on every path,
// exceptions included.
//
// Swapping batched parameters into a module cannot go through `to_module`:
// that makes the module's tensors alias the dict's data (`set_data`), and a
// BatchedTensor is a different kind of tensor whose data cannot be shared
// that way. A libtorch layer computes with its members (`Linear::weight`),
// so for the layers libtorch ships (Linear, Bilinear, Conv*d,
// ConvTranspose*d, BatchNorm*d, InstanceNorm*d, LayerNorm, GroupNorm,
// Embedding, EmbeddingBag, PReLU, RNNCell, LSTMCell, GRUCell) the member
// handles are replaced for the call and restored after it. Containers and
// modules that hold no tensors of their own (Sequential, ReLU, your own
// modules built from those layers) need nothing. A module that registers
// tensors of its own type is not reachable that way: it runs as a loop over
// the members with `ScopedModuleSwap`, with the same results (see
// VmapMode). A batched call that throws is never re-run as a loop unless
// VmapMode::kBatchedThenLoop asks for it.

#include <ATen/core/Tensor.h>
#include <c10/util/FunctionRef.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "tensordict/options.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE

/// How random ops behave inside vmap (Python's `randomness` argument).
enum class VmapRandomness {
  /// A random op throws (Python's default, "error").
  kError,
  /// Every member draws the same numbers ("same").
  kSame,
  /// Every member draws its own numbers ("different").
  kDifferent,
};

/// How `vmap` and `functional_call_vmap` run the function. No mode but
/// kBatchedThenLoop runs the function twice for one call.
enum class VmapMode {
  /// Batched; a loop when the module holds tensors vmap cannot swap (see
  /// NOTE [vmap from C++]), decided before anything runs. Errors of the
  /// batched call propagate, as Python's `torch.vmap` raises them.
  kAuto,
  /// Batched only: a module vmap cannot swap is an error.
  kBatched,
  /// A loop over the members, stacking the results: the reference the
  /// batched path must match, and a way around ops vmap cannot batch.
  kLoop,
  /// Batched, and when the batched call throws a `c10::Error` (say, an op
  /// vmap cannot batch), the function runs again as a loop: side effects of
  /// the function happen twice, and the loop's result or error is what you
  /// get. Other exceptions propagate at once. C++ only: ask for it when
  /// the function is safe to re-run; `VmapOptions::path_taken` tells which
  /// path gave the result.
  kBatchedThenLoop,
};

/// The path that gave a `vmap` or `functional_call_vmap` result.
enum class VmapPath {
  kBatched,
  kLoop,
};
/// Where `VmapOptions::path_taken` writes the path (a name, so that the
/// option's setter takes the pointer itself as const).
using VmapPathOut = VmapPath*;

/// Options of `vmap` and `functional_call_vmap`. Python's positional
/// `in_dims`/`out_dims` and keyword `randomness` become chained setters.
///
/// Example: `VmapOptions().in_dims({0, std::nullopt}).out_dim(1)`
struct TENSORDICT_API VmapOptions {
  /// The dim of each input that indexes the members, or `std::nullopt` for
  /// an input every member sees whole (Python's `None`). Empty means every
  /// input is shared. For `functional_call_vmap` these are the inputs only:
  /// the stacked parameters are always mapped over their dim 0.
  TENSORDICT_ARG(std::vector<std::optional<int64_t>>, in_dims);
  /// Where the members' dim goes in the result (Python's `out_dims`).
  TENSORDICT_ARG(int64_t, out_dim) = 0;
  /// How random ops behave (Python's `randomness`).
  TENSORDICT_ARG(VmapRandomness, randomness) = VmapRandomness::kError;
  /// Batched, loop, or batched then a loop on error (see VmapMode).
  TENSORDICT_ARG(VmapMode, mode) = VmapMode::kAuto;
  /// When set, receives the path that gave the result, written before the
  /// call returns; a call that throws does not write it. The pointee must
  /// outlive the call.
  TENSORDICT_ARG(VmapPathOut, path_taken) = nullptr;
};

/// A function that `vmap` runs: it gets one (batched) tensor per input and
/// returns one tensor.
using VmapFunction =
    c10::function_ref<at::Tensor(const std::vector<at::Tensor>& inputs)>;

/// Runs `fn` once over a batch, as Python's `torch.vmap(fn, in_dims)(*inputs)`:
/// each input with an in_dim is split along it, the others are shared, and
/// the per-member results come back stacked at `out_dim`. At least one input
/// must be mapped, and all mapped inputs must agree on the batch size.
/// Throws if they do not, or if an in_dim or `out_dim` is out of range.
///
/// Example:
/// ```
///   // w: [8, 4, 3] (eight weights), x: [10, 3] shared -> [8, 10, 4]
///   at::Tensor y = tensordict::vmap(
///       [](const std::vector<at::Tensor>& in) {
///         return in[1].matmul(in[0].t());
///       },
///       {w, x},
///       VmapOptions().in_dims({0, std::nullopt}));
/// ```
[[nodiscard]] TENSORDICT_API at::Tensor vmap(
    VmapFunction fn,
    const std::vector<at::Tensor>& inputs,
    const VmapOptions& options);

/// Runs `module` once over an ensemble: `params_stack` holds the members'
/// parameters and buffers stacked along dim 0 (`stack` of
/// `TensorDict::from_module` dicts), `forward` calls the module on the
/// inputs, and the result holds one output per member along `out_dim`. The
/// module's own tensors are back in place when this returns or throws.
///
/// Throws if `params_stack` has no batch dim, if a key of the module is
/// missing or extra, or a leaf's shape or dtype is not the module's with the
/// members' dim in front (naming the key); if a mapped input's size at its
/// in_dim is not the number of members; and what `forward` throws.
/// Gradients reach `params_stack`'s tensors, as in Python; only a module
/// run through `ScopedModuleSwap` (a loop over a module vmap cannot swap
/// into) sends them to the module's own parameters instead. Not thread safe
/// for one module: it swaps the module's tensors, as `ScopedModuleSwap`
/// does.
///
/// Example:
/// ```
///   TensorDict params = TensorDict::from_module(*model);
///   TensorDict params_stack = tensordict::stack({params, params});
///   at::Tensor y = tensordict::functional_call_vmap(
///       *model, params_stack, {x},
///       [&](const std::vector<at::Tensor>& in) { return model->forward(in[0]);
///       });
///   // x: [10, 3], Linear(3, 4) -> y: [2, 10, 4]
/// ```
[[nodiscard]] TENSORDICT_API at::Tensor functional_call_vmap(
    torch::nn::Module& module,
    const TensorDict& params_stack,
    const std::vector<at::Tensor>& inputs,
    VmapFunction forward,
    const VmapOptions& options = {});

/// Calls `model->forward(input)` over the ensemble `params_stack`: the
/// one-input form of `functional_call_vmap` for a module holder
/// (`torch::nn::Linear`, `torch::nn::Sequential`, your own
/// `TORCH_MODULE`). Throws as that does.
///
/// Example: `functional_call_vmap(model, params_stack, x)` is `[2, 10, 4]`
/// for `Linear(3, 4)`, two members and `x` of shape `[10, 3]`.
template <class ModuleHolder>
[[nodiscard]] at::Tensor functional_call_vmap(
    ModuleHolder& model,
    const TensorDict& params_stack,
    const at::Tensor& input,
    const VmapOptions& options = {}) {
  return functional_call_vmap(
      *model,
      params_stack,
      {input},
      [&](const std::vector<at::Tensor>& inputs) {
        return model->forward(inputs[0]);
      },
      options);
}

TENSORDICT_END_NAMESPACE
