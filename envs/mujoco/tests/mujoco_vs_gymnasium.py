"""tensordict_mujoco's envs against gymnasium 1.4.0 on the same mujoco,
bit for bit.

For each env, keyword arguments and seed: sub-env i of the C++ env seeded
s runs beside gymnasium's `gym.make(name, **kwargs)` reset with
`seed=s + i`, both fed the same random float32 actions (drawn inside the
action Box); a done sub-env is reset (gymnasium's `reset()` without a seed,
continuing its stream). Every observation, x_velocity, reward (the float64
gymnasium returns, and the float32 "reward" TorchRL's GymEnv stores),
terminated and truncated must be equal, and so must the observation of
every reset.

Usage: mujoco_vs_gymnasium.py MUJOCO_ROLLOUT WORK_DIR
"""

import json
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np

CASES = [
    # (env, kwargs, seeds, steps[, sub-envs]): HalfCheetah never terminates,
    # so 1,100 steps cross its 1,000-step truncation.
    ("HalfCheetah-v5", {}, [0, 7, 123], 1100),
    ("HalfCheetah-v5", {"exclude_current_positions_from_observation": False,
                        "ctrl_cost_weight": 0.3, "reset_noise_scale": 0.5,
                        "forward_reward_weight": 2.0, "frame_skip": 3}, [5], 300),
    ("Hopper-v5", {}, [0, 7, 123], 1000),
    ("Hopper-v5", {"terminate_when_unhealthy": False, "healthy_reward": 0.5,
                   "healthy_z_range": [0.9, "inf"], "healthy_angle_range": [-0.1, 0.1],
                   "healthy_state_range": [-50.0, 50.0],
                   "max_episode_steps": 300}, [3], 700),
    ("Walker2d-v5", {}, [0, 7, 123], 1000),
    ("Walker2d-v5", {"exclude_current_positions_from_observation": False,
                     "healthy_z_range": [0.9, 1.9]}, [11], 400),
    ("Ant-v5", {}, [0, 7, 123], 1000),
    ("Ant-v5", {"include_cfrc_ext_in_observation": False, "main_body": "torso",
                "contact_force_range": [-0.5, 0.5], "contact_cost_weight": 1e-3,
                "healthy_z_range": [0.3, 1.0]}, [2], 400),
    # Sub-env i of seed s is gymnasium's seed s + i for larger i too.
    ("Hopper-v5", {}, [2**31], 300, 8),
    ("HalfCheetah-v5", {}, [99], 100, 8),
]


def gym_kwargs(kwargs):
    out = {}
    for key, value in kwargs.items():
        if key == "max_episode_steps":
            out[key] = value
        elif isinstance(value, list):
            out[key] = tuple(float(v) for v in value)
        else:
            out[key] = value
    return out


def run(binary, work, name, kwargs, seed, steps, num_envs):
    envs = [gym.make(name, **gym_kwargs(kwargs)) for _ in range(num_envs)]
    space = envs[0].action_space
    nu = space.shape[0]
    rng = np.random.default_rng(seed + 1000)
    actions = rng.uniform(space.low, space.high, size=(steps, num_envs, nu)).astype(np.float32)
    actions = np.clip(actions, space.low, space.high)
    path = os.path.join(work, f"{name}_{seed}")
    actions.tofile(path + ".actions")
    cmd = [binary, name, str(num_envs), str(seed), str(steps), str(nu),
           path + ".actions", path + ".out", json.dumps(kwargs)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    raw = open(path + ".out", "rb").read()
    pos = 0

    def take(dtype, shape):
        nonlocal pos
        count = int(np.prod(shape))
        arr = np.frombuffer(raw, dtype=dtype, count=count, offset=pos).reshape(shape)
        pos += count * np.dtype(dtype).itemsize
        return arr

    obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
    dim = obs[0].shape[0]
    where = f"{name} {kwargs} seed {seed}"

    def same(a, b):
        a = np.atleast_1d(np.asarray(a, dtype=np.float64))
        b = np.atleast_1d(np.asarray(b, dtype=np.float64))
        return a.shape == b.shape and np.array_equal(a.view(np.uint64), b.view(np.uint64))

    got = take(np.float64, (num_envs, dim))
    take(np.float64, (num_envs,))
    for i in range(num_envs):
        if obs[i].dtype != np.float64 or not same(got[i], obs[i]):
            sys.exit(f"{where}: sub-env {i}'s first reset differs:\n{got[i]}\n{obs[i]}")
    resets = terminations = truncations = 0
    for t in range(steps):
        next_obs = take(np.float64, (num_envs, dim))
        x_velocity = take(np.float64, (num_envs,))
        reward = take(np.float32, (num_envs,))
        reward64 = take(np.float64, (num_envs,))
        terminated = take(np.uint8, (num_envs,))
        truncated = take(np.uint8, (num_envs,))
        after = take(np.float64, (num_envs, dim))
        for i, env in enumerate(envs):
            o, r, term, trunc, info = env.step(actions[t, i])
            checks = [
                ("observation", same(next_obs[i], o)),
                ("x_velocity", same(x_velocity[i], info["x_velocity"])),
                ("reward", np.float32(r).view(np.uint32) == reward[i].view(np.uint32)),
                ("float64 reward", type(r) in (float, np.float64) and same(reward64[i], r)),
                ("terminated", bool(terminated[i]) == bool(term)),
                ("truncated", bool(truncated[i]) == bool(trunc)),
            ]
            for key, ok in checks:
                if not ok:
                    sys.exit(
                        f"{where}: step {t}, sub-env {i}: {key} differs: C++ obs {next_obs[i]}, "
                        f"x_velocity {x_velocity[i]!r}, reward {reward[i]!r} ({reward64[i]!r}), terminated "
                        f"{terminated[i]}, truncated {truncated[i]}; gymnasium obs {o}, "
                        f"x_velocity {info['x_velocity']!r}, reward {r!r} "
                        f"(float32 {np.float32(r)!r}), terminated {term}, truncated {trunc}")
            terminations += bool(term)
            truncations += bool(trunc)
            if term or trunc:
                o, _ = env.reset()
                resets += 1
            if not same(after[i], o):
                sys.exit(f"{where}: step {t}, sub-env {i}: the observation after the reset "
                         f"differs:\n{after[i]}\n{o}")
    if pos != len(raw):
        sys.exit(f"{where}: {len(raw) - pos} bytes left over in the C++ output")
    return resets, terminations, truncations


def main():
    binary, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    for name, kwargs, seeds, steps, *rest in CASES:
        num_envs = rest[0] if rest else 2
        for seed in seeds:
            resets, terms, truncs = run(binary, work, name, kwargs, seed, steps, num_envs)
            print(f"{name} {kwargs} seed {seed}: {steps} steps x {num_envs} sub-envs bit for bit "
                  f"({resets} resets: {terms} terminated, {truncs} truncated)")


if __name__ == "__main__":
    main()
