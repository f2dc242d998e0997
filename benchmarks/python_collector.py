#!/usr/bin/env python3
"""Times tensordict_cpp.Collector (the C++ collector inside Python) against
TorchRL 0.14.1's own Collector, in the same process, on the same actor.

The actor is the CartPole PPO actor of examples/torchrl (as in
python_torchrl.py): an MLP 4 -> 64 -> 64 -> 2 with Tanh, then a
OneHotCategorical ProbabilisticActor with return_log_prob, sampling
(ExplorationType.RANDOM, both collectors' default). TorchRL runs it in
Python; tensordict_cpp.Collector runs the same actor exported with
tensordict_cpp.export (one AOTInductor package, compiled once here). One
intra-op thread on both sides; each batch is a fresh TensorDict on both
sides (TorchRL's default clones, ours allocates new buffers).

Rows (microseconds per batch; "python_us" is TorchRL's, "cpp_us" ours,
both timed from Python, with frames/s and their ratio beside them):
  python_collector_cartpole         Collector(GymEnv("CartPole-v1"), actor,
                                    frames_per_batch=256) vs
                                    tensordict_cpp.Collector("CartPole-v1",
                                    package, frames_per_batch=256)
  python_collector_cartpole_16envs  GymEnv("CartPole-v1", num_envs=16)
                                    (gymnasium's vectorized env) vs
                                    num_envs=16, num_threads=1;
                                    frames_per_batch=1024

Each side: one warm-up batch, then batches until at least 7 and 3 s,
the median per batch. TorchRL must be importable (it pins tensordict
0.14.x): run with another Python, this script starts itself again with the
TorchRL venv's (TENSORDICT_BUILD_DIR/torchrl-venv), which sees the
installed tensordict_cpp through the system site-packages.

Writes {"results": [{"name", "python_us", "cpp_us", ...}]} to the path
given as the first argument.
"""

import json
import os
import statistics
import sys
import tempfile
import time

MIN_BATCHES = 7
MIN_SECONDS = 3.0


def reexec_in_venv():
    try:
        import torchrl  # noqa: F401
        return
    except ImportError:
        pass
    build = os.environ.get("TENSORDICT_BUILD_DIR", "build")
    python = os.path.join(build, "torchrl-venv", "bin", "python")
    if not os.path.exists(python):
        sys.exit(f"python_collector.py: TorchRL is not importable and {python} does not exist "
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


def time_iterator(it, frames_per_batch):
    next(it)  # warm up: resets, lazy inits, first buffers
    times = []
    start = time.perf_counter()
    while len(times) < MIN_BATCHES or time.perf_counter() - start < MIN_SECONDS:
        tick = time.perf_counter()
        batch = next(it)
        times.append(time.perf_counter() - tick)
        assert batch.numel() == frames_per_batch, (batch.shape, frames_per_batch)
    return statistics.median(times) * 1e6, len(times), batch


def main(out_path):
    reexec_in_venv()
    import torch
    from tensordict import TensorDict
    from torchrl.collectors import Collector
    from torchrl.envs import GymEnv

    import tensordict_cpp

    torch.set_num_threads(1)
    torch.manual_seed(0)
    actor = make_actor(GymEnv("CartPole-v1").action_spec)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        package = os.path.join(tmp, "actor.pt2")
        example = TensorDict(observation=torch.zeros(4, 4), batch_size=[4])
        tensordict_cpp.export(actor, example, package)
        for name, num_envs, frames in (
            ("python_collector_cartpole", 1, 256),
            ("python_collector_cartpole_16envs", 16, 1024),
        ):
            env = GymEnv("CartPole-v1") if num_envs == 1 else GymEnv("CartPole-v1", num_envs=num_envs)
            theirs = Collector(env, actor, frames_per_batch=frames, total_frames=-1)
            with torch.no_grad():
                python_us, python_runs, tb = time_iterator(iter(theirs), frames)
            theirs.shutdown()
            ours = tensordict_cpp.Collector("CartPole-v1", package, frames_per_batch=frames,
                                            num_envs=num_envs, num_threads=1)
            cpp_us, cpp_runs, ob = time_iterator(iter(ours), frames)
            ours.shutdown()
            # Same layout on both sides, or the comparison is void.
            assert tb.batch_size == ob.batch_size, (tb.batch_size, ob.batch_size)
            assert set(tb.keys(True, True)) == set(ob.keys(True, True)), (
                set(tb.keys(True, True)) ^ set(ob.keys(True, True)))
            row = {
                "name": name,
                "python_us": python_us,
                "cpp_us": cpp_us,
                "frames_per_batch": frames,
                "num_envs": num_envs,
                "python_frames_per_s": frames / python_us * 1e6,
                "cpp_frames_per_s": frames / cpp_us * 1e6,
                "ratio": python_us / cpp_us,
                "python_runs": python_runs,
                "cpp_runs": cpp_runs,
            }
            print(f"{name}: TorchRL {row['python_frames_per_s']:,.0f} frames/s, "
                  f"tensordict_cpp {row['cpp_frames_per_s']:,.0f} frames/s, "
                  f"{row['ratio']:.1f}x", file=sys.stderr)
            results.append(row)
    with open(out_path, "w") as f:
        json.dump({"results": results}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
