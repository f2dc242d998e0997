#!/usr/bin/env python3
"""Times the C++ envs from Python and TorchRL against EnvPool 1.2.5, the C++
vectorized-env engine TorchRL wraps, in the same process.

Rows (microseconds; "python_us" is the peer's, "cpp_us" ours):
  env_step_cartpole_16envs      EnvPool's own step loop from Python:
                                envpool.make("CartPole-v1", num_envs=16,
                                num_threads=1).step(actions), one step of
                                16 sub-envs (EnvPool resets finished ones
                                inside the step). Ours is rl_benchmark.cpp's
                                env_step_cartpole_16envs/cpp (C++, same
                                run of `make bench`), so this row carries
                                python_us only.
  torchrl_env_cartpole_16envs   TorchRL's rollout(1000, break_when_any_done=
                                False), per step of 16 sub-envs, over
                                TorchRL's MultiThreadedEnvWrapper around
                                that EnvPool env (python_us) vs over
                                tensordict_cpp.envs.CppEnv("CartPole-v1",
                                16) (cpp_us); "gym_us" is the same rollout
                                over GymEnv("CartPole-v1", num_envs=16).
  python_collector_cartpole_envpool_16envs
                                TorchRL's Collector over that
                                MultiThreadedEnvWrapper (python_us) vs
                                tensordict_cpp.Collector("CartPole-v1",
                                num_envs=16) (cpp_us), per batch of 1024
                                frames, with python_collector.py's actor
                                (MLP 4 -> 64 -> 64 -> 2, Tanh) under a
                                Categorical head, since EnvPool's CartPole
                                takes index actions (ours runs with
                                categorical_action_encoding=True; exported
                                once).

TorchRL 0.14.1's MultiThreadedEnv(16, "CartPole-v1") does not run here:
it makes its EnvPool env with env_type="gym" and converts the specs under
the "gym" backend, so it needs the old `gym` package, and with gym
installed it finds no conversion for the gymnasium spaces EnvPool 1.2.5
returns. The peer below is TorchRL's own wrapper, MultiThreadedEnvWrapper,
around envpool.make(..., env_type="gymnasium"), with its specs converted
under set_gym_backend("gymnasium") (a subclass overriding _make_specs, the
one method that names the backend); it also needs `treevalue`, which
install-deps.sh puts in the TorchRL venv.

Each side: one warm-up, then runs until at least 7 and 3 s; the median.
One intra-op thread. Runs in the TorchRL venv (restarting itself there,
as python_collector.py does). Writes {"results": [...]} to argv[1].
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_collector import reexec_in_venv, time_iterator  # noqa: E402


def median_us(fn, per_call):
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < MIN_RUNS or time.perf_counter() - start < MIN_SECONDS:
        tick = time.perf_counter()
        fn()
        times.append((time.perf_counter() - tick) / per_call)
    return statistics.median(times) * 1e6, len(times)


def make_categorical_actor(spec):
    from tensordict.nn import TensorDictModule
    from torch import nn
    from torchrl.modules import MLP, ProbabilisticActor

    import torch

    net = MLP(in_features=4, out_features=2, num_cells=[64, 64], activation_class=nn.Tanh)
    return ProbabilisticActor(
        TensorDictModule(net, in_keys=["observation"], out_keys=["logits"]),
        in_keys=["logits"], out_keys=["action"], spec=spec,
        distribution_class=torch.distributions.Categorical, return_log_prob=True)


def gymnasium_envpool_env(num_envs):
    """TorchRL's EnvPool wrapper over a gymnasium-typed EnvPool env."""
    import envpool
    from torchrl.envs.libs.envpool import MultiThreadedEnvWrapper
    from torchrl.envs.libs.gym import set_gym_backend

    class GymnasiumEnvPool(MultiThreadedEnvWrapper):
        def _make_specs(self, env):
            with set_gym_backend("gymnasium"):
                self.action_spec = self._get_action_spec()
                output = self._get_output_spec()
                self.observation_spec = output["full_observation_spec"]
                self.reward_spec = output["full_reward_spec"]
                self.done_spec = output["full_done_spec"]

    pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=num_envs,
                        num_threads=1, seed=0)
    return GymnasiumEnvPool(pool)


def main(out_path):
    reexec_in_venv()
    warnings.filterwarnings("ignore")
    import envpool
    import numpy as np
    import torch
    from tensordict import TensorDict
    from torchrl.collectors import Collector
    from torchrl.envs import GymEnv

    import tensordict_cpp
    from tensordict_cpp.envs import CppEnv

    torch.set_num_threads(1)
    results = []

    # EnvPool's own loop: 100 steps a run.
    pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=NUM_ENVS,
                        num_threads=1, seed=0)
    pool.reset()
    actions = (np.arange(NUM_ENVS) % 2).astype(np.int32)

    def pool_steps():
        for _ in range(100):
            pool.step(actions)

    us, runs = median_us(pool_steps, 100)
    results.append({"name": "env_step_cartpole_16envs", "python_us": us,
                    "python_runs": runs, "num_envs": NUM_ENVS})
    print(f"env_step_cartpole_16envs: EnvPool {NUM_ENVS / us * 1e6:,.0f} steps/s "
          f"(ours: rl_benchmark's env_step_cartpole_16envs/cpp)", file=sys.stderr)

    # TorchRL's rollout over three envs.
    steps = 1000
    rollouts = {}
    for side, env in (("cpp", CppEnv("CartPole-v1", NUM_ENVS)),
                      ("python", gymnasium_envpool_env(NUM_ENVS)),
                      ("gym", GymEnv("CartPole-v1", num_envs=NUM_ENVS))):
        env.set_seed(0)
        with torch.no_grad():
            rollouts[side] = median_us(
                lambda env=env: env.rollout(steps, break_when_any_done=False), steps)
        env.close()
    row = {"name": "torchrl_env_cartpole_16envs",
           "python_us": rollouts["python"][0], "cpp_us": rollouts["cpp"][0],
           "gym_us": rollouts["gym"][0], "runs": [r[1] for r in rollouts.values()],
           "ratio": rollouts["python"][0] / rollouts["cpp"][0]}
    results.append(row)
    print(f"torchrl_env_cartpole_16envs: rollout over CppEnv {row['ratio']:.2f}x "
          f"MultiThreadedEnvWrapper(EnvPool), "
          f"{row['gym_us'] / row['cpp_us']:.2f}x GymEnv(num_envs=16)", file=sys.stderr)

    # The collectors, same actor.
    frames = 1024
    torch.manual_seed(0)
    peer_env = gymnasium_envpool_env(NUM_ENVS)
    actor = make_categorical_actor(peer_env.action_spec[0])
    with tempfile.TemporaryDirectory() as tmp:
        package = os.path.join(tmp, "actor.pt2")
        example = TensorDict(observation=torch.zeros(4, 4), batch_size=[4])
        tensordict_cpp.export(actor, example, package)
        theirs = Collector(peer_env, actor, frames_per_batch=frames, total_frames=-1)
        with torch.no_grad():
            python_us, python_runs, _ = time_iterator(iter(theirs), frames)
        theirs.shutdown()
        ours = tensordict_cpp.Collector(
            "CartPole-v1", package, frames_per_batch=frames, num_envs=NUM_ENVS,
            num_threads=1, env_kwargs={"categorical_action_encoding": True})
        cpp_us, cpp_runs, _ = time_iterator(iter(ours), frames)
        ours.shutdown()
    row = {"name": "python_collector_cartpole_envpool_16envs", "python_us": python_us,
           "cpp_us": cpp_us, "python_runs": python_runs, "cpp_runs": cpp_runs,
           "ratio": python_us / cpp_us}
    results.append(row)
    print(f"python_collector_cartpole_envpool_16envs: tensordict_cpp.Collector "
          f"{row['ratio']:.1f}x TorchRL's Collector over EnvPool", file=sys.stderr)
    with open(out_path, "w") as f:
        json.dump({"results": results}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
