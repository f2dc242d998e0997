#pragma once

/// @file
/// C++ actors for TorchRL learners: batched environments and a collector
/// whose batches have exactly the layout TorchRL 0.14.1's `Collector` gives,
/// so that a stock Python TorchRL learner trains on them. Opt-in, not
/// included by <tensordict/tensordict.h>.
//
// One header per concern (as torch/nn.h sits over its module headers):
// rl/spec.h, rl/env.h, rl/env_kit.h (the env author's kit), rl/modules.h,
// rl/collector.h, rl/torchrl_worker.h, rl/numpy_random.h.

#include "tensordict/rl/collector.h"
#include "tensordict/rl/env.h"
#include "tensordict/rl/env_kit.h"
#include "tensordict/rl/modules.h"
#include "tensordict/rl/numpy_random.h"
#include "tensordict/rl/spec.h"
#include "tensordict/rl/torchrl_worker.h"
