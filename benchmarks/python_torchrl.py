#!/usr/bin/env python3
"""Times TorchRL 0.14.1's own Collector on the work of rl_benchmark.cpp.

Writes {"results": [{"name": op, "python_us": median microseconds per
batch}, ...]} to the path given as the first argument.

TorchRL pins tensordict 0.14.x, so it lives in the virtual environment of
the build tree (scripts/install-deps.sh); run with another Python, this
script starts itself again with that environment's.

The rows, kept in step with rl_benchmark.cpp:
  collector_cartpole_1env    Collector(GymEnv("CartPole-v1"), actor,
                             frames_per_batch=256)
  collector_cartpole_16envs  Collector(GymEnv("CartPole-v1", num_envs=16),
                             actor, frames_per_batch=1024): gymnasium's
                             vectorized env, 64 steps of 16 envs a batch
The actor is the CartPole PPO actor of examples/torchrl: an MLP 4 -> 64 ->
64 -> 2 with Tanh, then a OneHotCategorical ProbabilisticActor with
return_log_prob, sampling (ExplorationType.RANDOM, the collector's
default). One thread, no grad, as the C++ side.
"""

import json
import os
import statistics
import sys
import time


def reexec_in_venv():
    try:
        import torchrl  # noqa: F401
        return
    except ImportError:
        pass
    build = os.environ.get("TENSORDICT_BUILD_DIR", "build")
    python = os.path.join(build, "torchrl-venv", "bin", "python")
    if not os.path.exists(python):
        sys.exit(f"python_torchrl.py: TorchRL is not importable and {python} does not exist "
                 "(scripts/install-deps.sh makes it)")
    os.execv(python, [python, *sys.argv])


def make_actor(spec):
    from tensordict.nn import TensorDictModule
    from torch import nn
    from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor

    net = MLP(in_features=4, out_features=2, num_cells=[64, 64], activation_class=nn.Tanh)
    return ProbabilisticActor(
        TensorDictModule(net, in_keys=["observation"], out_keys=["logits"]),
        in_keys=["logits"], out_keys=["action"], spec=spec,
        distribution_class=OneHotCategorical, return_log_prob=True)


def time_batches(make_env, frames_per_batch, seconds=3.0, min_batches=5):
    from torchrl.collectors import Collector

    env = make_env()
    actor = make_actor(env.action_spec)
    collector = Collector(env, actor, frames_per_batch=frames_per_batch, total_frames=-1)
    times = []
    it = iter(collector)
    next(it)  # warm up: the first batch pays for the env's reset and lazy inits
    start = time.perf_counter()
    while len(times) < min_batches or time.perf_counter() - start < seconds:
        tick = time.perf_counter()
        batch = next(it)
        times.append(time.perf_counter() - tick)
        assert batch.numel() == frames_per_batch
    collector.shutdown()
    return statistics.median(times) * 1e6, len(times)


def main(out_path):
    reexec_in_venv()
    import torch
    from torchrl.envs import GymEnv

    torch.set_num_threads(1)
    torch.manual_seed(0)
    results = []
    with torch.no_grad():
        us, runs = time_batches(lambda: GymEnv("CartPole-v1"), 256)
        results.append({"name": "collector_cartpole_1env", "python_us": us, "runs": runs})
        us, runs = time_batches(lambda: GymEnv("CartPole-v1", num_envs=16), 1024)
        results.append({"name": "collector_cartpole_16envs", "python_us": us, "runs": runs})
    with open(out_path, "w") as f:
        json.dump({"results": results}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
