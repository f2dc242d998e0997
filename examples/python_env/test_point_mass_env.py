#!/usr/bin/env python3
"""Drives the C++ point-mass env from Python for 1,000 steps.

A random policy (seeded) acts in the C++ env (point_mass_env, built from
point_mass_env.cpp) and in the pure-Python reference (reference.py) side by
side; every step's dict (observation, action and the "next" entries) must
agree, and the resets (partial, on "_reset") too. Then the rollout is
stacked with torch.stack in Python, memmapped from C++ (the module's
`memmap`, the GIL released) and loaded back with Python's
TensorDict.load_memmap, which must give the same rollout.

usage: test_point_mass_env.py MODULE_DIR WORK_DIR
"""

import os
import shutil
import sys

import torch
from tensordict import TensorDict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, sys.argv[1])
import point_mass_env  # noqa: E402
import reference  # noqa: E402

NUM_ENVS = 16
STEPS = 1000


def same(a, b, what, step):
    if a.dtype != b.dtype or a.shape != b.shape or not torch.equal(a, b):
        sys.exit(f"step {step}: {what} differs:\nC++    {a}\nPython {b}")


def main():
    work = sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    gen = torch.Generator().manual_seed(0)
    env = point_mass_env.PointMassEnv(NUM_ENVS, seed=42, max_steps=50)
    ref = reference.PointMassEnv(NUM_ENVS, seed=42, max_steps=50)
    td = env.reset()
    ref_td = ref.reset()
    if type(td) is not TensorDict or td.batch_size != torch.Size([NUM_ENVS]):
        sys.exit(f"reset gave {type(td)} {td.batch_size}")
    same(td["observation"], ref_td["observation"], "reset observation", -1)
    rollout = []
    resets = 0
    for t in range(STEPS):
        action = torch.rand(NUM_ENVS, 2, generator=gen) * 2.4 - 1.2
        td["action"] = action
        ref_td["action"] = action.clone()
        td = env.step(td)
        ref_td = ref.step(ref_td)
        for key in ref_td.keys(True, True):
            same(td[key], ref_td[key], key, t)
        if td["next", "observation"].data_ptr() == ref_td["next", "observation"].data_ptr():
            sys.exit("the C++ env returned the reference's tensor")
        rollout.append(td)
        td = reference.step_mdp(td)
        ref_td = reference.step_mdp(ref_td)
        done = td["done"]
        if done.any():
            resets += int(done.sum())
            td["_reset"] = done.clone()
            ref_td["_reset"] = done.clone()
            td = env.reset(td)
            ref_td = ref.reset(ref_td)
            if "_reset" in td.keys():
                sys.exit("reset kept _reset")
            for key in ref_td.keys(True, True):
                same(td[key], ref_td[key], f"reset {key}", t)
    if resets == 0:
        sys.exit("no episode ended: the test did not exercise resets")

    stacked = torch.stack(rollout, dim=0)
    if stacked.batch_size != torch.Size([STEPS, NUM_ENVS]):
        sys.exit(f"stacked batch size {stacked.batch_size}")
    prefix = os.path.join(work, "rollout")
    point_mass_env.memmap(stacked, prefix)
    loaded = TensorDict.load_memmap(prefix)
    if loaded.batch_size != stacked.batch_size:
        sys.exit(f"loaded batch size {loaded.batch_size}")
    for key in stacked.keys(True, True):
        same(loaded[key], stacked[key], f"memmapped {key}", STEPS)
    print(
        f"point_mass_env: {STEPS} steps of {NUM_ENVS} envs match the Python reference "
        f"({resets} episode resets); the memmapped rollout loads in Python"
    )


if __name__ == "__main__":
    main()
