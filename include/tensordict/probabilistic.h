#pragma once

/// @file
/// Probabilistic modules: the interaction type that picks how a sample is
/// drawn, and Python's ProbabilisticTensorDictModule/Sequential, which turn
/// a dict's parameters into a distribution of <tensordict/distributions.h>
/// and write its sample. Opt-in: not included by <tensordict/tensordict.h>.
//
// NOTE [Interaction type]
// As tensordict.nn's `interaction_type()`: a thread-local value set by the
// RAII guard `SetInteractionType` (Python's `set_interaction_type` context
// manager), unset by default; a module then uses its own
// `default_interaction_type` ("deterministic" unless told). "deterministic"
// takes the distribution's `deterministic_sample()`; where Python's
// distribution has none (torch's Categorical and Normal), Python falls back
// on the mode for distributions with enumerable support and on the mean
// otherwise, and so does `Distribution::deterministic_sample()` here. "mean"
// on a distribution without a closed-form mean (TanhNormal) averages
// `n_empirical_estimate` samples, as Python does. tensordict 0.14.3 and
// 0.15.3 agree on all of this for these distributions (0.15 adds a fallback
// for an Independent over a distribution with a deterministic sample, and
// repeats deterministic values for `num_samples`, neither of which applies
// here). Not ported: "median".

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensordict/distributions.h"
#include "tensordict/export.h"
#include "tensordict/fwd.h"
#include "tensordict/nested_key.h"
#include "tensordict/nn.h"
#include "tensordict/options.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
namespace nn {

/// How a probabilistic module turns its distribution into a sample
/// (Python's `tensordict.nn.InteractionType`). See NOTE [Interaction type].
enum class InteractionType {
  /// A random sample (`rsample()` where the distribution has one).
  kRandom,
  /// The distribution's mode.
  kMode,
  /// The distribution's mean (or an estimate from samples).
  kMean,
  /// The distribution's deterministic sample, or its fallback.
  kDeterministic,
};

/// Returns Python's string for `type`: "random", "mode", "mean" or
/// "deterministic".
TENSORDICT_API const char* interaction_type_name(InteractionType type);
/// Parses Python's string for an interaction type, ignoring case as Python
/// does; throws c10::ValueError naming the string otherwise.
TENSORDICT_API InteractionType
interaction_type_from_string(const std::string& name);
/// Returns this thread's interaction type, or nullopt when none is set.
TENSORDICT_API std::optional<InteractionType> interaction_type() noexcept;

/// Sets this thread's interaction type for the guard's lifetime and restores
/// the previous one after (Python's `set_interaction_type`). Not copyable.
///
/// Example: `{ SetInteractionType guard(InteractionType::kRandom); actor(td);
/// }`
class TENSORDICT_API SetInteractionType {
 public:
  /// Sets `type` (nullopt unsets it) until the guard is destroyed.
  explicit SetInteractionType(std::optional<InteractionType> type) noexcept;
  /// Restores the interaction type the guard replaced.
  ~SetInteractionType();
  /// Not copyable: each guard restores once.
  SetInteractionType(const SetInteractionType&) = delete;
  /// Not assignable.
  SetInteractionType& operator=(const SetInteractionType&) = delete;

 private:
  std::optional<InteractionType> previous_;
};

/// Options of `ProbabilisticTensorDictModule`.
///
/// Example: `ProbabilisticTensorDictModuleOptions("TanhNormal")
///           .return_log_prob(true)`
struct TENSORDICT_API ProbabilisticTensorDictModuleOptions {
  /// Names the distribution class (see `make_distribution`).
  explicit ProbabilisticTensorDictModuleOptions(std::string distribution_class);
  /// The distribution's Python class name.
  TENSORDICT_ARG(std::string, distribution_class);
  /// Its keyword arguments, as the text of a JSON object ("{}" for none).
  TENSORDICT_ARG(std::string, distribution_kwargs) = "{}";
  /// Its tensor-valued keyword arguments (TanhNormal's low/high).
  TENSORDICT_ARG(DistributionTensors, distribution_tensor_kwargs);
  /// Also write the sample's log-probability.
  TENSORDICT_ARG(bool, return_log_prob) = false;
  /// Where the log-probability goes; nullopt is what TorchRL 0.14.1 writes
  /// by default (tensordict 0.14.3 and 0.15.3 alike): "<out_key>_log_prob".
  TENSORDICT_ARG(std::optional<NestedKey>, log_prob_key);
  /// The interaction type used while none is set (Python's default:
  /// deterministic).
  TENSORDICT_ARG(InteractionType, default_interaction_type) =
      InteractionType::kDeterministic;
  /// How many samples estimate the mean of a distribution without one.
  TENSORDICT_ARG(int64_t, n_empirical_estimate) = 1000;
};

/// The module of a ProbabilisticTensorDictModule holder; see there.
class TENSORDICT_API ProbabilisticTensorDictModuleImpl
    : public TensorDictModuleBase {
 public:
  /// Reads each distribution argument from its key (`dist_keys[i]` from
  /// `in_keys[i]`, as Python's dict in_keys {"loc": "param_loc"}) and writes
  /// the sample to `out_key`. Throws c10::ValueError if the key lists
  /// differ in length or are empty, or the class or a keyword is unknown.
  ProbabilisticTensorDictModuleImpl(
      std::vector<std::string> dist_keys,
      std::vector<NestedKey> in_keys,
      NestedKey out_key,
      ProbabilisticTensorDictModuleOptions options);
  /// The same with keys named like the arguments (Python's list in_keys).
  ProbabilisticTensorDictModuleImpl(
      const std::vector<std::string>& in_keys,
      NestedKey out_key,
      ProbabilisticTensorDictModuleOptions options);
  /// Out of line: the keyword arguments are held as JSON, which this header
  /// leaves incomplete.
  ~ProbabilisticTensorDictModuleImpl() override;

  using TensorDictModuleBase::forward;
  /// Builds the distribution from `td`, draws the sample the interaction
  /// type asks for and writes it (and the log-prob) into `out`; returns
  /// `out`. Throws KeyError naming a missing parameter key.
  TensorDict forward(TensorDict td, TensorDict out) override;
  /// Builds the distribution from the parameters in `td`; throws KeyError
  /// naming a missing key, c10::ValueError for bad parameters.
  std::shared_ptr<Distribution> get_dist(const TensorDict& td) const;
  /// Draws from `dist` as `type` asks (nullopt: this thread's interaction
  /// type, else the default): Python's `_dist_sample`.
  at::Tensor dist_sample(
      const Distribution& dist,
      std::optional<InteractionType> type = std::nullopt,
      std::optional<at::Generator> generator = std::nullopt) const;
  /// Returns the argument names, in in_keys order.
  const std::vector<std::string>& dist_keys() const noexcept {
    return dist_keys_;
  }
  /// Returns the key the log-probability goes to.
  const NestedKey& log_prob_key() const noexcept {
    return log_prob_key_;
  }
  /// Returns the options.
  const ProbabilisticTensorDictModuleOptions& options() const noexcept {
    return options_;
  }
  /// Prints `ProbabilisticTensorDictModule(in_keys=..., out_keys=...)`.
  void pretty_print(std::ostream& stream) const override;
  /// Returns a deep copy: the same distribution, keys and selection, its
  /// tensor keyword arguments copied (to `device` if given).
  std::shared_ptr<torch::nn::Module> clone(
      const std::optional<c10::Device>& device = std::nullopt) const override;

 private:
  std::vector<std::string> dist_keys_;
  NestedKey log_prob_key_;
  ProbabilisticTensorDictModuleOptions options_;
  std::unique_ptr<Json> kwargs_;
  // The distribution class, as probabilistic.cpp's DistKind.
  int kind_ = 0;
};

/// Samples a distribution whose parameters a dict holds (Python's
/// `tensordict.nn.ProbabilisticTensorDictModule`): out_keys are the sample
/// key and, with `return_log_prob`, the log-prob key. A holder: copies
/// share the module. Not ported: several sample keys, composite
/// distributions, `num_samples`, `cache_dist`, "median".
///
/// Example:
/// ```
///   ProbabilisticTensorDictModule head(
///       {"logits"}, "action",
///       ProbabilisticTensorDictModuleOptions("OneHotCategorical")
///           .return_log_prob(true));
///   head(td);   // td["action"], td["action_log_prob"]
/// ```
class ProbabilisticTensorDictModule
    : public TensorDictModuleHolder<ProbabilisticTensorDictModuleImpl> {
 public:
  using TensorDictModuleHolder::TensorDictModuleHolder;
  /// See ProbabilisticTensorDictModuleImpl's constructors.
  ProbabilisticTensorDictModule(
      const std::vector<std::string>& in_keys,
      NestedKey out_key,
      ProbabilisticTensorDictModuleOptions options)
      : TensorDictModuleHolder(
            std::make_shared<ProbabilisticTensorDictModuleImpl>(
                in_keys, std::move(out_key), std::move(options))) {}
  /// See ProbabilisticTensorDictModuleImpl's constructors.
  ProbabilisticTensorDictModule(
      std::vector<std::string> dist_keys,
      std::vector<NestedKey> in_keys,
      NestedKey out_key,
      ProbabilisticTensorDictModuleOptions options)
      : TensorDictModuleHolder(
            std::make_shared<ProbabilisticTensorDictModuleImpl>(
                std::move(dist_keys),
                std::move(in_keys),
                std::move(out_key),
                std::move(options))) {}
};

/// The module of a ProbabilisticTensorDictSequential holder; see there.
class TENSORDICT_API ProbabilisticTensorDictSequentialImpl
    : public TensorDictSequentialImpl {
 public:
  /// Chains `modules`; throws c10::TypeError if the last one is not a
  /// ProbabilisticTensorDictModule.
  explicit ProbabilisticTensorDictSequentialImpl(
      std::vector<AnyTensorDictModule> modules,
      TensorDictSequentialOptions options = {});
  /// Runs every module but the last on `td` (writing their outputs into
  /// it, as Python does) and returns the last one's distribution.
  std::shared_ptr<Distribution> get_dist(TensorDict td);
  /// Returns the probabilistic module at the end.
  ProbabilisticTensorDictModuleImpl& head() const noexcept {
    return *head_;
  }
  /// Returns a deep copy, a ProbabilisticTensorDictSequential of each
  /// module's `clone(device)`; see TensorDictSequentialImpl::clone.
  std::shared_ptr<torch::nn::Module> clone(
      const std::optional<c10::Device>& device = std::nullopt) const override;

 private:
  ProbabilisticTensorDictModuleImpl* head_;
};

/// A sequence ending in a probabilistic module (Python's
/// `ProbabilisticTensorDictSequential`, TorchRL's `ProbabilisticActor`):
/// the deterministic part computes the distribution's parameters, the last
/// module samples. Not ported: composite distributions.
///
/// Example:
/// ```
///   ProbabilisticTensorDictSequential actor({mlp, head});
///   { SetInteractionType random(InteractionType::kRandom); actor(td); }
/// ```
class ProbabilisticTensorDictSequential
    : public TensorDictModuleHolder<ProbabilisticTensorDictSequentialImpl> {
 public:
  using TensorDictModuleHolder::TensorDictModuleHolder;
  /// Chains `modules`; see ProbabilisticTensorDictSequentialImpl.
  explicit ProbabilisticTensorDictSequential(
      std::vector<AnyTensorDictModule> modules,
      TensorDictSequentialOptions options = {})
      : TensorDictModuleHolder(
            std::make_shared<ProbabilisticTensorDictSequentialImpl>(
                std::move(modules), std::move(options))) {}
};

}  // namespace nn
TENSORDICT_END_NAMESPACE
