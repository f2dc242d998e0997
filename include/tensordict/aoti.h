#pragma once

/// @file
/// Running AOTInductor packages (`.pt2`, made by torch.export and
/// `torch._inductor.aoti_compile_and_package`) as TensorDict modules: a
/// TensorDict in, a TensorDict out. Opt-in, not included by
/// <tensordict/tensordict.h>; libtorch's package loader stays out of this
/// header (it is held through a pointer to an incomplete type).
//
// NOTE [Package contract]
// A package's inputs are keyword tensors, one per in_key, named by joining a
// nested key with "_" (as `tensordict.nn.dispatch` does), and its outputs a
// tuple in out_keys order: the form of tensordict's and TorchRL's export
// tutorials, and of `tensordict_cpp.export` (python/tensordict_cpp). The
// keys come from the package's user metadata (`tensordict.in_keys`,
// `tensordict.out_keys`: JSON lists of strings or lists of strings) or else
// from the caller. `tensordict_cpp.export` also writes `tensordict.spec`:
// the batch size (with its dynamic range), each input's dtype, trailing
// shape and device, and where the weights are. A package reads its inputs
// with the sizes and strides it was compiled for and, unless the process
// sets AOTI_RUNTIME_CHECK_INPUTS, does not check them: a wrong one fails
// inside generated code or reads out of bounds. So every call is checked
// before the package runs, against tensordict.spec and against the input
// checks AOTInductor compiles into every package (`check_input_<i>`, read
// from the wrapper source the package carries): dtype, rank, each size or
// its range, and the device, with errors that name the nested key; an
// input is laid out with the strides the package reads. A package with
// neither is refused. Without tensordict.spec, the dynamic dims take
// torch.export's range (which starts at 2), and weights can be loaded only
// into a package that holds some (their shapes are then known).
//
// NOTE [Untrusted packages]
// A package holds a shared library that loading runs: only load packages
// whose origin you trust. What is checked is integrity, not intent: the zip
// structure and every entry's CRC-32 (libtorch's reader skips CRCs, so a
// flipped byte in the library would otherwise be loaded and executed), the
// metadata's types and values, the device and the torch version, each
// before the library is opened.

// NOTE [Probabilistic packages]
// `tensordict_cpp.export` of a ProbabilisticTensorDictModule/Sequential
// (TorchRL's ProbabilisticActor) compiles the deterministic part, which
// writes the distribution's parameters, and records the distribution in the
// metadata (`tensordict.probabilistic`, metadata format "2"): its class and
// keyword arguments, which keys hold its parameters, the sample key,
// return_log_prob, the log-prob key and the default interaction type. The
// module rebuilds that head (tensordict/probabilistic.h), so a call writes
// the parameters, the action and its log-prob as the Python actor does,
// following the thread's interaction type (`SetInteractionType`). Its
// out_keys are the package's outputs, then the sample and log-prob keys.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tensordict/export.h"
#include "tensordict/nested_key.h"
#include "tensordict/nn.h"
#include "tensordict/options.h"
#include "tensordict/pack.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
namespace nn {

class ProbabilisticTensorDictModuleImpl;

// pack and PackLayout moved to tensordict/pack.h (namespace tensordict),
// next to the dict they pack; these keep the old spelling working.
using ::tensordict::pack;
using ::tensordict::PackLayout;

/// How an AOTIModule loads its package.
///
/// Example: `AOTIModule p("p.pt2", AOTIModuleOptions().num_runners(4));`
struct TENSORDICT_API AOTIModuleOptions {
  /// The model's name inside the package (AOTInductor's default).
  TENSORDICT_ARG(std::string, model_name) = "model";
  /// The CUDA device index for a CUDA package; -1 is the current device.
  TENSORDICT_ARG(c10::DeviceIndex, device_index) = -1;
  /// How many copies of the model may run at once: one per caller thread
  /// that should not wait for another.
  TENSORDICT_ARG(size_t, num_runners) = 1;
};

/// Runs an AOTInductor package as a TensorDict module (see NOTE [Package
/// contract]): `forward` reads the in_keys from the dict, checks them
/// against the package's metadata, runs the package and writes the
/// out_keys into the dict (or into `out`). It sits in a
/// TensorDictSequential like any TensorDictModuleBase.
///
/// Thread safety: `forward` may be called from many threads at once (with
/// `num_runners` > 1 they run in parallel). `load_weights` may run
/// concurrently with them: each call sees the old weights or the new ones,
/// never a mix (the new ones go to the package's inactive buffer, which is
/// then swapped in under the package's exclusive lock).
///
/// Example:
/// ```
///   tensordict::nn::AOTIModule policy("policy.pt2");
///   TensorDict out = policy(td);   // td gets the out_keys
/// ```
class TENSORDICT_API AOTIModuleImpl : public TensorDictModuleBase {
 public:
  /// Loads the package at `path`, with keys from its metadata. Throws
  /// c10::Error if the file is not an intact package, if its metadata is
  /// malformed or has no keys, if neither tensordict.spec nor compiled
  /// input checks say what it takes, or if it was built for a device this
  /// process lacks or by another torch version.
  explicit AOTIModuleImpl(
      const std::string& path,
      const AOTIModuleOptions& options = AOTIModuleOptions());
  /// Loads the package at `path` with the given keys, for packages without
  /// key metadata (exported by hand). Throws as above, and if the keys
  /// differ from the package's metadata or do not name its inputs.
  AOTIModuleImpl(
      const std::string& path,
      std::vector<NestedKey> in_keys,
      std::vector<NestedKey> out_keys,
      const AOTIModuleOptions& options = AOTIModuleOptions());
  ~AOTIModuleImpl() override;

  using TensorDictModuleBase::forward;
  /// Runs the package on the in_keys of `td` and writes the out_keys into
  /// `out`; returns `out`. The outputs are new tensors. Throws KeyError for
  /// a missing input, c10::TypeError for a dtype, c10::ValueError for a
  /// shape, device or batch size the package does not take, or strides it
  /// reads that the input cannot be laid out in (each before the package
  /// runs), c10::Error if the weights are not loaded.
  TensorDict forward(TensorDict td, TensorDict out) override;

  /// Runs the package on its flat inputs, in `input_names()` order, without
  /// any check: the raw loader call, for comparisons. Throws c10::Error if
  /// the weights are not loaded.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs);

  /// Replaces every weight of the package with the tensors of `weights`,
  /// keyed like `TensorDict::from_module(module)` of the exported module
  /// (nested or flattened with "."); returns once the new weights are in
  /// use. The tensors are copied. Throws KeyError, naming the key, if one
  /// is missing or is not a weight of the package, and c10::TypeError or
  /// c10::ValueError for a dtype or shape that differs from the current
  /// weight's; the weights in use are then unchanged. The module's part of
  /// the weights contract (NOTE [Weights contract] in tensordict/nn.h), so
  /// a TensorDictSequential's `load_weights` reaches it.
  void load_weights(const TensorDict& weights) override;
  /// Returns the package's weights as `load_weights` takes them (names
  /// split at the dots), from its tensordict.spec or the weights it holds:
  /// meta tensors of their shapes and dtypes. Throws c10::Error naming a
  /// weight whose shape is unknown (a package without tensordict.spec
  /// whose weights are outside it: no weights can be loaded into it).
  TensorDict weights_layout() const override;

  /// Returns the names `load_weights` expects, sorted.
  std::vector<std::string> weight_names() const;
  /// Returns the package's keyword input names, in the order `run` takes.
  const std::vector<std::string>& input_names() const noexcept;
  /// Returns the package's metadata (user and AOTInductor entries).
  const std::unordered_map<std::string, std::string>& metadata() const noexcept;
  /// Returns the device the package runs on.
  c10::Device device() const noexcept;
  /// Returns the range of the dynamic batch dim (dim 0), if any; an
  /// unbounded maximum is nullopt.
  std::optional<std::pair<int64_t, std::optional<int64_t>>> batch_range() const;
  /// Returns the package path.
  const std::string& path() const noexcept;
  /// Returns the distribution head of a package exported from a
  /// probabilistic module (see NOTE [Probabilistic packages]), or null.
  std::shared_ptr<ProbabilisticTensorDictModuleImpl> probabilistic_head()
      const noexcept;
  /// Returns an independent copy: the package loaded again from `path()`,
  /// with its own runners and weights, holding a copy of the weights in use
  /// (those of the last `load_weights`), the same keys and selection. A
  /// shared loader would let `load_weights` on one change the other, which
  /// a clone (a target network) must not. Throws c10::Error if `device` is
  /// not the package's (a package runs where it was compiled for), or if
  /// the file changed since it was loaded.
  std::shared_ptr<torch::nn::Module> clone(
      const std::optional<c10::Device>& device = std::nullopt) const override;

 private:
  struct State;
  void init(
      std::optional<std::vector<NestedKey>> in_keys,
      std::optional<std::vector<NestedKey>> out_keys,
      const AOTIModuleOptions& options);
  void check_inputs_agree();
  void init_weights(bool weights_in_package);
  std::unique_ptr<State> state_;
};

/// The holder of an AOTIModuleImpl: `AOTIModule policy("p.pt2");
/// policy(td)`, `policy->in_keys()`.
class AOTIModule : public TensorDictModuleHolder<AOTIModuleImpl> {
 public:
  using TensorDictModuleHolder::TensorDictModuleHolder;
  /// Loads the package at `path`; see AOTIModuleImpl.
  explicit AOTIModule(
      const std::string& path,
      const AOTIModuleOptions& options = AOTIModuleOptions())
      : TensorDictModuleHolder(
            std::make_shared<AOTIModuleImpl>(path, options)) {}
  /// Loads the package at `path` with the given keys; see AOTIModuleImpl.
  AOTIModule(
      const std::string& path,
      std::vector<NestedKey> in_keys,
      std::vector<NestedKey> out_keys,
      const AOTIModuleOptions& options = AOTIModuleOptions())
      : TensorDictModuleHolder(std::make_shared<AOTIModuleImpl>(
            path, std::move(in_keys), std::move(out_keys), options)) {}
};

}  // namespace nn
TENSORDICT_END_NAMESPACE
