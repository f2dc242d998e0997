#pragma once

/// @file
/// TensorDictParams: a TensorDict whose tensors are registered as the
/// parameters and buffers of a torch::nn::Module, Python's
/// `tensordict.nn.TensorDictParams`.
//
// NOTE [TensorDictParams registration]
// libtorch refuses a "." in a parameter name, so a nested level becomes a
// child module named after its key, holding that level's tensors: the
// names `named_parameters()` gives are then Python's ("0.weight" for the
// entry ("0", "weight")). A key holding "." or an empty key cannot be
// registered and is refused. Within a level, the level's own tensors come
// before its nested levels' (Python lists the leaves in the dict's order).
//
// The module and the dict hold the same tensors (one TensorImpl each), so
// an optimizer step on `parameters()` changes the dict, and `to(device or
// dtype)`, which libtorch does with `set_data`, moves the dict's tensors
// too. `set` on a registered key keeps the registered tensor and makes it
// alias the new value (`set_data`), so an optimizer built before still
// sees it (Python registers a new Parameter instead).

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <iosfwd>
#include <memory>

#include "tensordict/options.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE

/// A module whose parameters and buffers are the tensors of a TensorDict:
/// what Python's `TensorDictParams(td)` and `TensorDict.from_module(module,
/// as_module=True)` return. The dict is wrapped, not copied: its leaves are
/// replaced in place by the registered tensors (see NOTE [TensorDictParams
/// registration]). Without `no_convert`, float16/32/64 tensors become
/// parameters (leaves requiring grad) and all others buffers, as in Python.
/// With `no_convert`, a leaf tensor that requires grad (C++ has no
/// `nn.Parameter` type to tell) is a parameter and every other tensor a
/// buffer. Non-tensor entries are kept in the dict but not registered.
///
/// Example:
/// ```
///   auto params = std::make_shared<TensorDictParams>(
///       TensorDict::from_module(*model).clone());
///   torch::optim::SGD opt(params->parameters(), /*lr=*/0.1);
///   register_module("params", params);   // names "params.0.weight", ...
/// ```
class TENSORDICT_API TensorDictParams : public torch::nn::Module {
 public:
  /// Wraps `params`, registering its tensors; throws ValueError on a key
  /// that cannot be a parameter name (holding "." or empty), naming it.
  explicit TensorDictParams(
      TensorDict params, const TensorDictParamsOptions& options = {});

  /// Returns the module's parameters and buffers as a TensorDictParams:
  /// Python's `TensorDict.from_module(module, as_module=True)`. The
  /// module's parameters are parameters and its buffers buffers; with
  /// `use_state_dict`, the leaves are detached and all are buffers, as in
  /// Python. A TensorDictParams module returns itself.
  static std::shared_ptr<TensorDictParams> from_module(
      const torch::nn::Module& module, const FromModuleOptions& options = {});

  /// Returns the wrapped dict (a handle: changes to its leaves' values are
  /// the module's; see `set` for new entries).
  const TensorDict& tensordict() const noexcept {
    return params_;
  }
  /// Returns the tensor at `key`; throws KeyError if missing.
  at::Tensor get(const NestedKey& key) const;
  /// Sets the tensor at `key` and registers it. A new key is converted as
  /// the constructor does; an existing one keeps its registered tensor,
  /// whose data becomes `value`'s. Throws ValueError on a key that cannot
  /// be a parameter name, and if `value` would change a parameter into a
  /// buffer or back.
  TensorDictParams& set(const NestedKey& key, const at::Tensor& value);
  /// Returns true if the tensors were registered without conversion.
  bool no_convert() const noexcept {
    return no_convert_;
  }

  /// Moves and casts the tensors (libtorch's `Module::to`) and records the
  /// device in the dict, if it has one.
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false)
      override;
  /// Casts the tensors (libtorch's `Module::to`).
  void to(torch::Dtype dtype, bool non_blocking = false) override;
  /// Moves the tensors (libtorch's `Module::to`) and records the device in
  /// the dict, if it has one.
  void to(torch::Device device, bool non_blocking = false) override;

  /// Prints Python's repr: `TensorDictParams(params=TensorDict(...))`.
  void pretty_print(std::ostream& stream) const override;

 private:
  struct FromModuleTag {};
  TensorDictParams(
      FromModuleTag,
      TensorDict params,
      const torch::nn::Module& module,
      bool use_state_dict);

  void set_dict_device(torch::Device device);

  TensorDict params_;
  bool no_convert_ = false;
};

TENSORDICT_END_NAMESPACE
