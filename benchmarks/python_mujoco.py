#!/usr/bin/env python3
"""Times Python's peers on the work of mujoco_benchmark.cpp: Gymnasium's
HalfCheetah-v5 and Hopper-v5 (mujoco 4.0.0), with and without a policy.

Rows (named as mujoco_benchmark.cpp's; the C++ side is there):
  mujoco_halfcheetah_16envs  python_us: TorchRL 0.14.1's Collector(
  mujoco_hopper_16envs       GymEnv("HalfCheetah-v5"), actor,
                             frames_per_batch=1024), microseconds per batch
                             of 1024 frames, with the C++ rows' actor:
                             the float64 observation cast to float32, MLP
                             obs -> 64 -> 64 -> 2 * act with Tanh,
                             NormalParamExtractor, a TanhNormal
                             ProbabilisticActor with return_log_prob,
                             sampling (the collector's default).
                             envpool_us: EnvPool 1.2.5's own sync step loop,
                             envpool.make("HalfCheetah-v5", env_type=
                             "gymnasium", num_envs=16, num_threads=1)
                             .step(actions), microseconds per step of the
                             16 sub-envs, no policy (EnvPool resets finished
                             envs inside its step), with envpool_frames_per_s
                             beside it; report.py sets it against the C++
                             collector's frames/s (policy included).
                             *_cpu_us: the same medians in process CPU time
                             (on a machine shared with other work, frames
                             per CPU second compare where wall-clock does
                             not).

Each side: one warm-up, then runs until at least MIN_RUNS and MIN_SECONDS;
the median, and how many runs it is the median of. One intra-op thread.
Runs in the TorchRL venv (restarting itself there, as python_collector.py
does); EnvPool and mujoco are installed there. Without gymnasium's MuJoCo
envs or EnvPool, the rows are left out, saying why. Writes
{"results": [...]} to argv[1].
"""

import json
import os
import statistics
import sys
import tempfile
import time
import warnings

MIN_RUNS = 7
MIN_SECONDS = 3.0
NUM_ENVS = 16
FRAMES = 1024

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_collector import reexec_in_venv  # noqa: E402


def median_us(fn, per_call, min_runs=MIN_RUNS):
    """Returns the median wall-clock and process CPU microseconds per call
    (the CPU time of every thread of the process: EnvPool's worker thread
    included), and the number of runs."""
    fn()
    times = []
    cpu_times = []
    start = time.perf_counter()
    while len(times) < min_runs or time.perf_counter() - start < MIN_SECONDS:
        tick = time.perf_counter()
        cpu_tick = time.process_time()
        fn()
        cpu_times.append((time.process_time() - cpu_tick) / per_call)
        times.append((time.perf_counter() - tick) / per_call)
    return statistics.median(times) * 1e6, statistics.median(cpu_times) * 1e6, len(times)


def make_actor(obs_dim, act_dim):
    from tensordict.nn import NormalParamExtractor, TensorDictModule
    from torch import nn
    from torchrl.modules import MLP, ProbabilisticActor, TanhNormal

    class ToFloat(nn.Module):
        def forward(self, x):
            return x.float()

    net = nn.Sequential(
        ToFloat(),
        MLP(in_features=obs_dim, out_features=2 * act_dim, num_cells=[64, 64],
            activation_class=nn.Tanh),
        NormalParamExtractor(),
    )
    return ProbabilisticActor(
        TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"], out_keys=["action"],
        distribution_class=TanhNormal, return_log_prob=True)


def main(out_path):
    reexec_in_venv()
    warnings.filterwarnings("ignore")
    # MuJoCo's default warning handler (gymnasium's half_cheetah.xml warns)
    # appends to MUJOCO_LOG.TXT in the working directory: not the source tree.
    out_path = os.path.abspath(out_path)
    scratch = tempfile.TemporaryDirectory()
    os.chdir(scratch.name)
    results = []
    try:
        import envpool
        import gymnasium
        import mujoco  # noqa: F401
        gymnasium.make("HalfCheetah-v5").close()
    except Exception as e:  # noqa: BLE001 - any missing piece skips the rows
        print(f"python_mujoco.py: skipped ({e!r})", file=sys.stderr)
        with open(out_path, "w") as f:
            json.dump({"results": results}, f)
        return
    import numpy as np
    import torch
    from torchrl.collectors import Collector
    from torchrl.envs import GymEnv

    torch.set_num_threads(1)
    for name, env_id in (("mujoco_halfcheetah_16envs", "HalfCheetah-v5"),
                         ("mujoco_hopper_16envs", "Hopper-v5")):
        # EnvPool's own loop: 100 steps of the 16 sub-envs a run, fixed
        # random actions in the Box.
        pool = envpool.make(env_id, env_type="gymnasium", num_envs=NUM_ENVS,
                            num_threads=1, seed=0)
        pool.reset()
        space = pool.action_space
        actions = np.random.default_rng(0).uniform(
            space.low, space.high, (NUM_ENVS, *space.shape)).astype(space.dtype)

        def pool_steps():
            for _ in range(100):
                pool.step(actions)

        envpool_us, envpool_cpu_us, envpool_runs = median_us(pool_steps, 100)
        pool.close()

        # TorchRL's Collector on GymEnv with the actor.
        torch.manual_seed(0)
        env = GymEnv(env_id)
        actor = make_actor(env.observation_spec["observation"].shape[-1],
                           env.action_spec.shape[-1])
        collector = Collector(env, actor, frames_per_batch=FRAMES, total_frames=-1)
        it = iter(collector)
        with torch.no_grad():
            python_us, python_cpu_us, python_runs = median_us(lambda: next(it), 1, min_runs=5)
        batch = next(it)
        assert batch.numel() == FRAMES, batch.shape
        collector.shutdown()

        row = {
            "name": name,
            "python_us": python_us,
            "python_runs": python_runs,
            "python_frames_per_s": FRAMES / python_us * 1e6,
            "frames_per_batch": FRAMES,
            "envpool_us": envpool_us,
            "envpool_runs": envpool_runs,
            "envpool_frames_per_s": NUM_ENVS / envpool_us * 1e6,
            "envpool_cpu_us": envpool_cpu_us,
            "envpool_frames_per_cpu_s": NUM_ENVS / envpool_cpu_us * 1e6,
            "python_cpu_us": python_cpu_us,
            "num_envs": NUM_ENVS,
        }
        print(f"{name}: TorchRL Collector(GymEnv) {row['python_frames_per_s']:,.0f} frames/s "
              f"(median of {python_runs}), EnvPool {row['envpool_frames_per_s']:,.0f} frames/s "
              f"(median of {envpool_runs}; ours: mujoco_benchmark.cpp)", file=sys.stderr)
        results.append(row)
    with open(out_path, "w") as f:
        json.dump({"results": results}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
