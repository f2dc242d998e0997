// step_mdp into a dict the caller owns: the collector's roots take turns
// (NOTE [step_mdp into a spare root] in step_mdp.cpp).

#pragma once

#include "tensordict/rl.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

/// Makes `spare` what `step_mdp(td, options)` returns, in place, and
/// returns true; returns false when it cannot (a key `spare` lacks, another
/// order, a dict where a tensor was, `spare` or one of its dicts held
/// elsewhere, locked, shared, memmapped or consolidated).
/// After false, `spare` holds a mix of old and new values: drop it.
bool step_mdp_into(
    const TensorDict& td, const StepMdpOptions& options, TensorDict& spare);

}  // namespace rl
TENSORDICT_END_NAMESPACE
