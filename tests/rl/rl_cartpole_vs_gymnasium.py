#!/usr/bin/env python3
"""rl::CartPoleEnv against gymnasium 1.4.0's CartPole-v1, step by step.

rl_interop writes a trace of 6 sub-envs over 3,000 steps (two balance the
pole until the 500-step time limit, four act at random and terminate).
For every step, gymnasium's env (gymnasium.make: TimeLimit included) is
put in the C++ state before the step (env.unwrapped.state) and stepped
with the same action; its observation, reward, terminated and truncated
and its float64 state after must equal the C++ ones. Two sub-envs are
also stepped through TorchRL's GymEnv("CartPole-v1") with the one-hot
action, whose ("next", ...) entries must equal the C++ ones, dtypes and
shapes included.

usage: rl_cartpole_vs_gymnasium.py RL_INTEROP WORK_DIR
"""

import os
import shutil
import subprocess
import sys
import warnings

import gymnasium
import numpy as np
import torch
from tensordict import TensorDict

warnings.filterwarnings("ignore")


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def main():
    exe, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    subprocess.run([exe, "cartpole", work], check=True)
    trace = TensorDict.load_memmap(os.path.join(work, "cartpole"))
    steps, num_envs = trace.batch_size
    if trace["state_before"].dtype != torch.float64:
        fail(f"state dtype {trace['state_before'].dtype}")

    terminations = truncations = 0
    for i in range(num_envs):
        env = gymnasium.make("CartPole-v1")
        env.reset(seed=i)
        new_episode = False
        for t in range(steps):
            if new_episode:
                env.reset()
            env.unwrapped.state = trace["state_before"][t, i].numpy().copy()
            action = int(trace["action"][t, i].argmax())
            if trace["action"][t, i].sum() != 1:
                fail(f"step {t} env {i}: action {trace['action'][t, i]} is not one-hot")
            obs, reward, terminated, truncated, _ = env.step(action)
            where = f"step {t} env {i}"
            if not np.array_equal(obs, trace["observation"][t, i].numpy()):
                fail(f"{where}: observation {obs} != C++ {trace['observation'][t, i]}")
            if obs.dtype != np.float32:
                fail(f"{where}: gymnasium observation dtype {obs.dtype}")
            state = np.asarray(env.unwrapped.state, dtype=np.float64)
            if not np.array_equal(state, trace["state_after"][t, i].numpy()):
                fail(f"{where}: state {state!r} != C++ {trace['state_after'][t, i].numpy()!r}")
            if float(reward) != float(trace["reward"][t, i, 0]):
                fail(f"{where}: reward {reward} != C++ {trace['reward'][t, i]}")
            if bool(terminated) != bool(trace["terminated"][t, i, 0]):
                fail(f"{where}: terminated {terminated} != C++")
            if bool(truncated) != bool(trace["truncated"][t, i, 0]):
                fail(f"{where}: truncated {truncated} != C++")
            if bool(trace["done"][t, i, 0]) != (bool(terminated) or bool(truncated)):
                fail(f"{where}: done is not terminated | truncated")
            terminations += bool(terminated)
            truncations += bool(truncated)
            new_episode = bool(terminated) or bool(truncated)
    if truncations < 4 or terminations < 100:
        fail(f"the trace exercised too little: {truncations} truncations, "
             f"{terminations} terminations")

    # Through TorchRL's GymEnv: the one-hot action and the ("next", ...)
    # layout of a single env.
    from torchrl.envs import GymEnv

    for i in (0, 2):
        genv = GymEnv("CartPole-v1")
        genv.set_seed(0)
        td = genv.reset()
        for t in range(1200):
            genv._env.unwrapped.state = trace["state_before"][t, i].numpy().copy()
            td["action"] = trace["action"][t, i].clone()
            td = genv.step(td)
            nxt = td["next"]
            for key, want_shape, want_dtype in (
                ("observation", (4,), torch.float32),
                ("reward", (1,), torch.float32),
                ("done", (1,), torch.bool),
                ("terminated", (1,), torch.bool),
                ("truncated", (1,), torch.bool),
            ):
                got = nxt[key]
                want = trace[key][t, i]
                if got.shape != want_shape or got.dtype != want_dtype:
                    fail(f"TorchRL {key} {got.shape} {got.dtype}")
                if want.shape != got.shape or want.dtype != got.dtype:
                    fail(f"C++ {key} {want.shape} {want.dtype} vs TorchRL {got.shape} {got.dtype}")
                if not torch.equal(got, want):
                    fail(f"TorchRL step {t} env {i}: {key} {got} != C++ {want}")
            if nxt["done"].item():
                td = genv.reset()
            else:
                from torchrl.envs.utils import step_mdp
                td = step_mdp(td)
    print(f"OK: {steps} steps x {num_envs} sub-envs equal gymnasium's "
          f"({terminations} terminations, {truncations} truncations); "
          "2 x 1200 steps equal TorchRL GymEnv's")


if __name__ == "__main__":
    main()
