#pragma once

/// @file
/// The few distributions a TorchRL actor samples from: torch.distributions'
/// Categorical and Normal, TorchRL's OneHotCategorical, TanhNormal and
/// Delta, and `make_distribution`, which builds one from its Python class
/// name. libtorch's C++ API has no distributions; these follow the Python
/// formulas op for op, so that log-probs, modes and deterministic samples
/// equal Python's, and draw from the at:: generators with the same ops as
/// Python, so that `torch::manual_seed` reproduces Python's samples. The
/// modules that sample them are in <tensordict/probabilistic.h>. Opt-in:
/// not included by <tensordict/tensordict.h>.

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensordict/export.h"
#include "tensordict/fwd.h"
#include "tensordict/options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace nn {

/// A probability distribution over tensors (Python's
/// `torch.distributions.Distribution`). Shapes are torch's: a sample of
/// `sample(shape)` has `shape + batch_shape + event_shape`, a log-prob
/// `shape + batch_shape`. Immutable after construction; safe to share
/// between threads (sampling draws from the generator given, or from the
/// default one, under its lock).
///
/// Example: `Normal(loc, scale).log_prob(x)`
class TENSORDICT_API Distribution {
 public:
  /// Destroys the distribution (its tensors are shared, not owned alone).
  virtual ~Distribution();

  /// Returns the Python class name ("Categorical", "TanhNormal", ...).
  virtual std::string name() const = 0;
  /// Returns the batch shape.
  const std::vector<int64_t>& batch_shape() const noexcept {
    return batch_shape_;
  }
  /// Returns the event shape.
  const std::vector<int64_t>& event_shape() const noexcept {
    return event_shape_;
  }

  /// Draws a sample of `sample_shape + batch_shape + event_shape` without
  /// gradients, from `generator` or the default generator.
  virtual at::Tensor sample(
      c10::IntArrayRef sample_shape = {},
      std::optional<at::Generator> generator = std::nullopt) const = 0;
  /// Returns true if `rsample` is defined (Python's `has_rsample`).
  virtual bool has_rsample() const noexcept {
    return false;
  }
  /// Draws a reparameterized sample (gradients flow to the parameters).
  /// Throws c10::NotImplementedError where `has_rsample()` is false.
  virtual at::Tensor rsample(
      c10::IntArrayRef sample_shape = {},
      std::optional<at::Generator> generator = std::nullopt) const;
  /// Returns the log-density (or log-mass) of `value`. Throws
  /// c10::ValueError for a value outside the support (an index out of
  /// range) or of a shape that does not broadcast.
  virtual at::Tensor log_prob(const at::Tensor& value) const = 0;
  /// Returns the mode; throws where Python's distribution raises.
  virtual at::Tensor mode() const;
  /// Returns the mean; throws c10::NotImplementedError where Python's
  /// distribution has no closed form.
  virtual at::Tensor mean() const;
  /// Returns the deterministic sample: Python's `deterministic_sample` where
  /// the distribution has one, else the fallback of NOTE [Interaction type].
  virtual at::Tensor deterministic_sample() const;
  /// Returns the entropy; throws c10::NotImplementedError where torch has
  /// none.
  virtual at::Tensor entropy() const;
  /// Returns true for discrete distributions whose support can be
  /// enumerated (Python's `has_enumerate_support`): their deterministic
  /// fallback is the mode.
  virtual bool has_enumerate_support() const noexcept {
    return false;
  }

 protected:
  /// Sets the shapes.
  Distribution(
      std::vector<int64_t> batch_shape, std::vector<int64_t> event_shape);
  /// Returns `sample_shape + batch_shape + event_shape`.
  std::vector<int64_t> extended_shape(c10::IntArrayRef sample_shape) const;
  /// Replaces the shapes (for constructors that compute them).
  void set_shapes(
      std::vector<int64_t> batch_shape, std::vector<int64_t> event_shape);

 private:
  std::vector<int64_t> batch_shape_;
  std::vector<int64_t> event_shape_;
};

/// torch.distributions.Categorical: an index in [0, K) per batch element,
/// from `logits` (normalized by logsumexp) or `probs` (normalized by their
/// sum) over the last dim. Samples are int64. Its mean is NaN, as torch's.
///
/// Example: `Categorical::from_logits(logits).sample({10})`
class TENSORDICT_API Categorical : public Distribution {
 public:
  /// Builds from unnormalized log-probabilities; throws c10::ValueError if
  /// `logits` has no dim or is not floating point.
  static std::shared_ptr<Categorical> from_logits(const at::Tensor& logits);
  /// Builds from nonnegative weights; throws c10::ValueError as above.
  static std::shared_ptr<Categorical> from_probs(const at::Tensor& probs);

  /// Returns "Categorical".
  std::string name() const override {
    return "Categorical";
  }
  /// Draws int64 indices with torch.multinomial, as torch does.
  at::Tensor sample(
      c10::IntArrayRef sample_shape = {},
      std::optional<at::Generator> generator = std::nullopt) const override;
  /// Returns the log-probability of the int64 indices `value`; throws
  /// c10::ValueError for a non-integer value or an index out of [0, K).
  at::Tensor log_prob(const at::Tensor& value) const override;
  /// Returns the most probable index (int64).
  at::Tensor mode() const override;
  /// Returns NaN of the batch shape, as torch does.
  at::Tensor mean() const override;
  /// Returns the entropy over the last dim.
  at::Tensor entropy() const override;
  /// Returns true: the deterministic fallback is the mode.
  bool has_enumerate_support() const noexcept override {
    return true;
  }
  /// Returns the normalized logits.
  const at::Tensor& logits() const noexcept {
    return logits_;
  }
  /// Returns the normalized probabilities. Differs from Python in cost
  /// only: where loops made the logits (small CPU parameters without
  /// autograd) they are computed at each call, as Python computes them
  /// lazily, rather than stored.
  at::Tensor probs() const;
  /// Returns the number of categories.
  int64_t num_events() const noexcept {
    return num_events_;
  }

 protected:
  /// Builds from normalized logits and probs.
  Categorical(at::Tensor logits, at::Tensor probs);
  /// Draws one index per batch element into `out` by loops (see
  /// distributions.cpp) as torch.multinomial draws them; returns false,
  /// drawing nothing, where the loops do not apply to the parameters.
  bool draw_indices(
      int64_t* out, const std::optional<at::Generator>& generator) const;
  /// Returns the log-probabilities of `index`, one in-range index per batch
  /// element, read off the logits by a loop; throws c10::ValueError naming
  /// `shape` (the value's) for an index out of [0, K).
  at::Tensor gather_log_prob(
      const int64_t* index, c10::IntArrayRef shape) const;

 private:
  at::Tensor logits_;
  at::Tensor probs_;  // undefined where probs() computes them
  int64_t num_events_;
};

/// TorchRL's OneHotCategorical (torchrl.modules): a Categorical whose
/// samples, mode and deterministic sample are one-hot int64 tensors over the
/// last dim, and whose `log_prob` takes a one-hot value (its argmax). As in
/// TorchRL, the batch shape is the parameters' without the last dim and the
/// event shape is empty; a last dim of size 1 is squeezed first; the mode
/// marks every maximal entry. With `torch_semantics`, it is
/// torch.distributions.OneHotCategorical instead: samples and mode in the
/// parameters' dtype, event shape [K], mean = probs.
///
/// Example: `OneHotCategorical::from_logits(logits).mode()`
class TENSORDICT_API OneHotCategorical : public Categorical {
 public:
  /// Builds from logits; see Categorical::from_logits.
  static std::shared_ptr<OneHotCategorical> from_logits(
      const at::Tensor& logits, bool torch_semantics = false);
  /// Builds from probs; see Categorical::from_probs.
  static std::shared_ptr<OneHotCategorical> from_probs(
      const at::Tensor& probs, bool torch_semantics = false);

  /// Returns "OneHotCategorical".
  std::string name() const override {
    return "OneHotCategorical";
  }
  /// Draws one-hot samples (int64, or the parameters' dtype for torch's).
  at::Tensor sample(
      c10::IntArrayRef sample_shape = {},
      std::optional<at::Generator> generator = std::nullopt) const override;
  /// Returns the log-probability of the one-hot `value` (its argmax along
  /// the last dim); throws c10::ValueError if its last dim is not K.
  at::Tensor log_prob(const at::Tensor& value) const override;
  /// Returns the one-hot mode (TorchRL's: every maximal entry marked).
  at::Tensor mode() const override;
  /// Returns NaN (TorchRL's, as Categorical) or probs (torch's).
  at::Tensor mean() const override;
  /// Returns the mode.
  at::Tensor deterministic_sample() const override;

 private:
  OneHotCategorical(at::Tensor logits, at::Tensor probs, bool torch_semantics);
  bool torch_semantics_;
};

/// torch.distributions.Normal with `loc` and `scale` (broadcast together).
///
/// Example: `Normal(loc, scale).rsample()`
class TENSORDICT_API Normal : public Distribution {
 public:
  /// Builds from `loc` and `scale`; throws c10::ValueError if they do not
  /// broadcast or are not floating point.
  Normal(const at::Tensor& loc, const at::Tensor& scale);

  /// Returns "Normal".
  std::string name() const override {
    return "Normal";
  }
  /// Draws with at::normal(loc, scale), without gradients.
  at::Tensor sample(
      c10::IntArrayRef sample_shape = {},
      std::optional<at::Generator> generator = std::nullopt) const override;
  /// Returns true.
  bool has_rsample() const noexcept override {
    return true;
  }
  /// Returns loc + eps * scale, eps standard normal.
  at::Tensor rsample(
      c10::IntArrayRef sample_shape = {},
      std::optional<at::Generator> generator = std::nullopt) const override;
  /// Returns the log-density; throws c10::ValueError for a shape that does not
  /// broadcast.
  at::Tensor log_prob(const at::Tensor& value) const override;
  /// Returns loc.
  at::Tensor mode() const override;
  /// Returns loc.
  at::Tensor mean() const override;
  /// Returns 0.5 + 0.5 log(2 pi) + log(scale).
  at::Tensor entropy() const override;
  /// Returns the broadcast location.
  const at::Tensor& loc() const noexcept {
    return loc_;
  }
  /// Returns the broadcast scale.
  const at::Tensor& scale() const noexcept {
    return scale_;
  }

 private:
  at::Tensor loc_;
  at::Tensor scale_;
};

/// Options of `TanhNormal`: TorchRL 0.14.1's keyword arguments and defaults.
///
/// Example: `TanhNormalOptions().high(at::scalar_tensor(2.0))`
struct TENSORDICT_API TanhNormalOptions {
  /// Sets TorchRL's defaults: low = -1, high = 1 (float32 scalars).
  TanhNormalOptions();
  /// The lower bound (a number or a tensor broadcasting with loc).
  TENSORDICT_ARG(at::Tensor, low);
  /// The upper bound; must exceed `low` everywhere.
  TENSORDICT_ARG(at::Tensor, high);
  /// The dims summed in log_prob; nullopt is TorchRL's `min(1, loc.dim())`.
  TENSORDICT_ARG(std::optional<int64_t>, event_dims);
  /// Rescale loc as `tanh(loc / upscale) * upscale` first.
  TENSORDICT_ARG(bool, tanh_loc) = false;
  /// The factor of `tanh_loc`.
  TENSORDICT_ARG(double, upscale) = 5.0;
  /// Clamp tanh to [-1 + eps, 1 - eps] (eps the dtype's resolution) so the
  /// transform stays invertible (TorchRL's SafeTanhTransform).
  TENSORDICT_ARG(bool, safe_tanh) = true;
};

/// TorchRL's TanhNormal: a Normal (independent over `event_dims` trailing
/// dims) pushed through tanh, then affinely onto [low, high] when the
/// bounds are not the default [-1, 1]. As in TorchRL 0.14.1, `mode()`
/// throws (no analytic mode), `mean()` throws c10::NotImplementedError (a
/// module averages samples instead), and `deterministic_sample()` is the
/// transformed loc.
/// Differs from TorchRL in gradients only: the safe tanh is a clamp here,
/// so `rsample` gives a zero gradient where tanh saturates, where TorchRL's
/// custom backward passes `1 - y^2`.
///
/// Example:
/// `TanhNormal(loc, scale, TanhNormalOptions().low(at::scalar_tensor(-2.)))`
class TENSORDICT_API TanhNormal : public Distribution {
 public:
  /// Builds the distribution; throws c10::Error (TorchRL's RuntimeError
  /// text) if `high <= low` anywhere, c10::ValueError for shapes that do
  /// not broadcast or event_dims out of range.
  TanhNormal(
      const at::Tensor& loc,
      const at::Tensor& scale,
      const TanhNormalOptions& options = {});

  /// Returns "TanhNormal".
  std::string name() const override {
    return "TanhNormal";
  }
  /// Draws from the base Normal and transforms, without gradients.
  at::Tensor sample(
      c10::IntArrayRef sample_shape = {},
      std::optional<at::Generator> generator = std::nullopt) const override;
  /// Returns true.
  bool has_rsample() const noexcept override {
    return true;
  }
  /// Draws a reparameterized base sample and transforms it.
  at::Tensor rsample(
      c10::IntArrayRef sample_shape = {},
      std::optional<at::Generator> generator = std::nullopt) const override;
  /// Returns the log-density of `value` summed over the event dims; throws
  /// c10::ValueError for NaN or a shape that does not fit.
  at::Tensor log_prob(const at::Tensor& value) const override;
  /// Throws c10::Error: TanhNormal has no analytic mode (TorchRL's text).
  at::Tensor mode() const override;
  /// Throws c10::NotImplementedError: no closed form (TorchRL's text).
  at::Tensor mean() const override;
  /// Returns the transformed loc.
  at::Tensor deterministic_sample() const override;

 private:
  at::Tensor transform(const at::Tensor& x) const;
  std::shared_ptr<Normal> base_;
  at::Tensor low_;
  at::Tensor high_;
  bool affine_;
  bool safe_tanh_;
  int64_t event_dims_;
};

/// TorchRL's Delta: all mass at `param`. `log_prob` is +inf where a value
/// equals param within `atol + rtol * |param|` (over the event dims), -inf
/// elsewhere; samples, mode, mean and deterministic sample are param. The
/// event shape is param's last dim unless shapes are given.
///
/// Example: `Delta(param).log_prob(param)`  // +inf
class TENSORDICT_API Delta : public Distribution {
 public:
  /// Builds from `param`; throws c10::ValueError if `batch_shape +
  /// event_shape` is given and differs from param's shape.
  explicit Delta(
      const at::Tensor& param,
      double atol = 1e-6,
      double rtol = 1e-6,
      std::vector<int64_t> batch_shape = {},
      std::vector<int64_t> event_shape = {});

  /// Returns "Delta".
  std::string name() const override {
    return "Delta";
  }
  /// Returns param expanded to `sample_shape + param.shape` (a view).
  at::Tensor sample(
      c10::IntArrayRef sample_shape = {},
      std::optional<at::Generator> generator = std::nullopt) const override;
  /// Returns true.
  bool has_rsample() const noexcept override {
    return true;
  }
  /// Returns param expanded, with its gradient.
  at::Tensor rsample(
      c10::IntArrayRef sample_shape = {},
      std::optional<at::Generator> generator = std::nullopt) const override;
  /// Returns +inf where `value` matches param, -inf elsewhere; throws
  /// c10::ValueError for a value that param does not expand to.
  at::Tensor log_prob(const at::Tensor& value) const override;
  /// Returns param.
  at::Tensor mode() const override;
  /// Returns param.
  at::Tensor mean() const override;
  /// Returns param.
  at::Tensor deterministic_sample() const override;

 private:
  at::Tensor param_;
  double atol_;
  double rtol_;
};

/// Named tensor arguments of a distribution: its parameters read from a
/// dict ("logits", "loc", ...) and tensor-valued keyword arguments ("low").
using DistributionTensors = std::map<std::string, at::Tensor>;

/// Builds a distribution from its Python class name, its keyword arguments
/// (a JSON object of numbers, booleans and null) and its tensor arguments.
/// Accepts the bare class name or any module path Python uses for it
/// ("Categorical", "torch.distributions.Categorical",
/// "torch.distributions.categorical.Categorical", "TanhNormal",
/// "torchrl.modules.TanhNormal",
/// "torchrl.modules.distributions.continuous.TanhNormal", ...;
/// "torch.distributions[.one_hot_categorical].OneHotCategorical" is torch's
/// variant, any other OneHotCategorical TorchRL's). Throws c10::ValueError
/// naming the class if it is unknown, naming the argument if a keyword is
/// unknown, missing, given twice or of the wrong type.
TENSORDICT_API std::shared_ptr<Distribution> make_distribution(
    const std::string& class_name,
    const Json& kwargs,
    const DistributionTensors& tensors);

}  // namespace nn
TENSORDICT_END_NAMESPACE
