// run_torchrl_worker over an rl::Collector: the hooks of the protocol layer
// (torchrl_worker.cpp) filled from the collector. A source of its own, so
// that a program serving other batch sources links no collector.

#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include "tensordict/rl.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

TorchRLWorkerStats run_torchrl_worker(
    Collector& collector,
    const TensorDict& weights,
    const TorchRLWorkerOptions& options) {
  TorchRLWorkerHooks hooks;
  hooks.next_batch = [&collector]() {
    std::optional<TensorDict> batch = collector.next();
    TORCH_CHECK_VALUE(
        batch.has_value(),
        "the collector ended (total_frames = ",
        collector.total_frames(),
        ") while the learner asked for another batch; serve the learner with "
        "total_frames = -1");
    // One sub-env: TorchRL's learner on an unbatched env expects [T].
    return squeeze_single_env(*batch);
  };
  hooks.weights = weights;
  hooks.apply_weights = [&collector](const TensorDict& received) {
    collector.update_policy_weights_(received);
  };
  hooks.set_seed = [&collector](int64_t seed) {
    collector.set_seed(static_cast<uint64_t>(seed));
    return seed;
  };
  return run_torchrl_worker(hooks, options);
}

TorchRLWorkerStats run_torchrl_worker(
    Collector& collector, const TorchRLWorkerOptions& options) {
  // The received weights arrive in a copy of the layout: real tensors of
  // its shapes and dtypes, on the CPU, where the wire delivers them.
  const TensorDict layout =
      collector.policy()->weights_layout().apply([](const at::Tensor& meta) {
        return at::zeros(
            meta.sizes(), at::TensorOptions().dtype(meta.scalar_type()));
      });
  return run_torchrl_worker(collector, layout, options);
}

}  // namespace rl
TENSORDICT_END_NAMESPACE
