// A TanhNormal head's step without its distribution object: NOTE [A
// TanhNormal head without its distribution] in distributions.cpp.

#pragma once

#include "tensordict/distributions.h"

TENSORDICT_BEGIN_NAMESPACE
namespace nn::detail {

/// A drawn TanhNormal sample and its log-probability (undefined unless
/// asked).
struct TanhNormalDraw {
  at::Tensor sample;
  at::Tensor log_prob;
};

/// Returns what `TanhNormal(loc, scale, options)`, then `rsample()` and
/// (with `with_log_prob`) `log_prob(sample)` return: the same checks and
/// errors, the same draw from `generator` and the same sample, the
/// log-prob to rounding. Returns nullopt, drawing nothing, where the loops
/// do not apply (NOTE [Loops for small CPU parameters]; bounds of another
/// shape than a trailing part of loc's).
std::optional<TanhNormalDraw> draw_tanh_normal(
    const at::Tensor& loc,
    const at::Tensor& scale,
    const TanhNormalOptions& options,
    bool with_log_prob,
    const std::optional<at::Generator>& generator);

}  // namespace nn::detail
TENSORDICT_END_NAMESPACE
