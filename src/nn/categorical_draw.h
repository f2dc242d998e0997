// A categorical head's step without its distribution object: NOTE [A
// categorical head without its distribution] in distributions.cpp.

#pragma once

#include "tensordict/distributions.h"

TENSORDICT_BEGIN_NAMESPACE
namespace nn::detail {

/// Which distribution a categorical head builds from its logits.
enum class CategoricalHead {
  kCategorical,             // indices
  kOneHotCategorical,       // TorchRL's: one-hot int64
  kTorchOneHotCategorical,  // torch's: one-hot in the logits' dtype
};

/// A drawn sample and its log-probability (undefined unless asked).
struct CategoricalDraw {
  at::Tensor sample;
  at::Tensor log_prob;
};

/// Returns what `from_logits(logits)`, then `sample()` and (with
/// `with_log_prob`) `log_prob(sample)` return for `head`: the same draws
/// from `generator`, the same values, the same errors. Returns nullopt,
/// drawing nothing, where the loops do not apply to `logits` (NOTE [Loops
/// for small CPU parameters]).
std::optional<CategoricalDraw> draw_from_logits(
    const at::Tensor& logits,
    CategoricalHead head,
    bool with_log_prob,
    const std::optional<at::Generator>& generator);

}  // namespace nn::detail
TENSORDICT_END_NAMESPACE
