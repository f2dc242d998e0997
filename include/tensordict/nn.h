#pragma once

// Modules that read and write TensorDicts: the C++ form of Python's
// `tensordict.nn`. Not included by <tensordict/tensordict.h>: it includes
// libtorch's module headers, which a user of dicts alone does not need.
//
// NOTE [Module names as in Python]
// Python registers the module a TensorDictModule wraps as its child
// `module`, and the modules of a TensorDictSequential in an `nn.ModuleList`
// named `module`, so a sequence's parameters are named
// `module.0.module.weight`. libtorch forbids dots in a child's name, so the
// sequence here registers a `torch::nn::ModuleList` named `module` as well:
// `named_parameters()`, `TensorDict::from_module` and `to_module` then see
// the same names in both languages, and weights saved by one load into the
// other without renaming.

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensordict/errors.h"
#include "tensordict/export.h"
#include "tensordict/nested_key.h"
#include "tensordict/options.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
namespace nn {

/// Input tensors of a dispatch call, keyed by in_key: `{{"obs", t}}`.
using TensorInputs = std::vector<std::pair<NestedKey, at::Tensor>>;

/// The interface every module that reads `in_keys` from a TensorDict and
/// writes `out_keys` implements (Python's `TensorDictModuleBase`), so that a
/// TensorDictSequential can chain modules of any kind. Derive from it,
/// call `set_keys` in the constructor and override
/// `forward(TensorDict, TensorDict)`; a derived class that overrides only
/// that overload adds `using TensorDictModuleBase::forward;` so the
/// one-argument form stays visible.
///
/// `forward` is the bare computation. The call operators add what Python's
/// `__call__` adds: the out-key selection of `select_out_keys`, and the
/// dispatch from tensors. Holders (`TensorDictModule`,
/// `TensorDictSequential`, `AnyTensorDictModule`) call through them.
///
/// Example:
/// ```
///   struct Doubler : TensorDictModuleBase {
///     Doubler() { set_keys({"x"}, {"y"}); }
///     using TensorDictModuleBase::forward;
///     TensorDict forward(TensorDict td, TensorDict out) override {
///       return out.set("y", td.get("x") * 2);
///     }
///   };
/// ```
class TENSORDICT_API TensorDictModuleBase : public torch::nn::Module {
 public:
  /// Makes a module with no keys; `name` is what `name()` and error
  /// messages show.
  explicit TensorDictModuleBase(std::string name = "TensorDictModuleBase");
  ~TensorDictModuleBase() override;

  /// Reads the inputs from `td`, writes the outputs into it and returns
  /// it (Python's default, `inplace=True`). Calls `forward(td, td)`.
  virtual TensorDict forward(TensorDict td);
  /// Reads the inputs from `td`, writes the outputs into `out` and returns
  /// `out` (Python's `tensordict_out`). Throws KeyError for a missing input.
  virtual TensorDict forward(TensorDict td, TensorDict out) = 0;

  /// Runs `forward(td)`, then drops the outputs `select_out_keys` left out.
  TensorDict operator()(TensorDict td);
  /// Runs `forward(td, out)`, then drops the outputs `select_out_keys` left
  /// out of `out`.
  TensorDict operator()(TensorDict td, TensorDict out);
  /// Calls the module on tensors, as Python's `module(obs=t)`: the inputs
  /// go into a dict with no batch dims, and the result holds the tensors
  /// of `out_keys()` in order ("_" excluded). Throws KeyError if an input
  /// key is not one of `in_keys()`, or if an in_key is not given.
  std::vector<at::Tensor> operator()(
      std::initializer_list<std::pair<NestedKey, at::Tensor>> inputs);
  /// The dispatch call of `operator()` with the inputs in a vector.
  std::vector<at::Tensor> dispatch(const TensorInputs& inputs);

  /// Returns the keys the module reads, in order.
  const std::vector<NestedKey>& in_keys() const noexcept {
    return in_keys_;
  }
  /// Returns the keys the module writes, those `select_out_keys` chose.
  const std::vector<NestedKey>& out_keys() const noexcept {
    return out_keys_;
  }
  /// Returns all the keys the module writes, before `select_out_keys`.
  const std::vector<NestedKey>& out_keys_source() const noexcept {
    return out_keys_source_;
  }
  /// Keeps only `keys` of the outputs in what a call returns; the module
  /// still computes all of them. Returns this module. Throws ValueError,
  /// naming the key, if one is not in `out_keys()`.
  virtual TensorDictModuleBase& select_out_keys(
      const std::vector<NestedKey>& keys);
  /// Undoes `select_out_keys`; returns this module.
  virtual TensorDictModuleBase& reset_out_keys();

 protected:
  /// Sets the keys the module reads and writes (and resets any selection).
  void set_keys(
      std::vector<NestedKey> in_keys, std::vector<NestedKey> out_keys);
  /// Sets the selected out_keys without the call-time filtering (for
  /// modules whose forward applies the selection itself).
  void set_selected_out_keys(std::vector<NestedKey> keys);
  /// Returns true once `select_out_keys` chose keys.
  bool has_selected_out_keys() const noexcept {
    return selected_;
  }

 private:
  TensorDict drop_unselected(TensorDict out) const;

  std::vector<NestedKey> in_keys_;
  std::vector<NestedKey> out_keys_source_;
  std::vector<NestedKey> out_keys_;
  bool selected_ = false;
  bool filter_in_call_ = false;
};

/// A `torch::nn::ModuleHolder` over a TensorDictModuleBase subclass with
/// its call operators, so `policy(td)`, `policy->in_keys()` and `*policy`
/// work as for libtorch's own modules. Derive a holder for a module of your
/// own from it, as `TORCH_MODULE` would.
///
/// Example: `class Doubler : public TensorDictModuleHolder<DoublerImpl> {
/// using TensorDictModuleHolder::TensorDictModuleHolder; };`
template <class Impl>
class TensorDictModuleHolder : public torch::nn::ModuleHolder<Impl> {
  static_assert(
      std::is_base_of_v<TensorDictModuleBase, Impl>,
      "TensorDictModuleHolder holds TensorDictModuleBase subclasses");

 public:
  /// Makes an empty holder.
  TensorDictModuleHolder(std::nullptr_t)  // NOLINT(google-explicit-constructor)
      : torch::nn::ModuleHolder<Impl>(nullptr) {}
  /// Holds `module` (shared, not copied).
  TensorDictModuleHolder(  // NOLINT(google-explicit-constructor)
      std::shared_ptr<Impl> module)
      : torch::nn::ModuleHolder<Impl>(std::move(module)) {}

  /// Runs the module on `td`, writing into it; returns what the module
  /// returns (`td` for the modules of this header). See
  /// `TensorDictModuleBase::operator()`.
  TensorDict operator()(TensorDict td) {
    return (*this->get())(std::move(td));
  }
  /// Runs the module on `td`, writing into `out`; returns `out`.
  TensorDict operator()(TensorDict td, TensorDict out) {
    return (*this->get())(std::move(td), std::move(out));
  }
  /// Calls the module on tensors keyed by in_key; returns the tensors of
  /// its out_keys, in order.
  std::vector<at::Tensor> operator()(
      std::initializer_list<std::pair<NestedKey, at::Tensor>> inputs) {
    return (*this->get())(inputs);
  }
};

/// A holder of any TensorDictModuleBase: what TensorDictSequential holds,
/// so that TensorDictModule, TensorDictSequential and modules of your own
/// sit side by side. Converts implicitly from any holder of a
/// TensorDictModuleBase subclass and from a `std::shared_ptr` to one; the
/// module is shared, not copied.
///
/// Example: `AnyTensorDictModule any = TensorDictModule(fn, {"a"}, {"b"});`
class AnyTensorDictModule
    : public TensorDictModuleHolder<TensorDictModuleBase> {
 public:
  /// Makes an empty holder.
  AnyTensorDictModule(std::nullptr_t)  // NOLINT(google-explicit-constructor)
      : TensorDictModuleHolder(nullptr) {}
  /// Holds `module`.
  template <
      class T,
      std::enable_if_t<std::is_base_of_v<TensorDictModuleBase, T>, int> = 0>
  AnyTensorDictModule(  // NOLINT(google-explicit-constructor)
      std::shared_ptr<T> module)
      : TensorDictModuleHolder(
            std::shared_ptr<TensorDictModuleBase>(std::move(module))) {}
  /// Holds the module of `holder`.
  template <
      class T,
      std::enable_if_t<std::is_base_of_v<TensorDictModuleBase, T>, int> = 0>
  AnyTensorDictModule(  // NOLINT(google-explicit-constructor)
      const torch::nn::ModuleHolder<T>& holder)
      : TensorDictModuleHolder(
            std::shared_ptr<TensorDictModuleBase>(holder.ptr())) {}
};

}  // namespace nn
TENSORDICT_END_NAMESPACE
