"""The point-mass env of point_mass_env.cpp in pure Python with tensordict.

The same rules, the same order of float32 operations and the same
splitmix64 resets, so a rollout matches the C++ env's step by step. Used by
test_point_mass_env.py (the check) and benchmarks/python_extension.py (the
pure-Python side of the step round trip).
"""

import torch
from tensordict import TensorDict

MASK64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def unit(h):
    # float32 arithmetic as in C++: (h >> 40) / 2**23 - 1, both exact.
    return float(torch.tensor(h >> 40, dtype=torch.float32) / float(1 << 23) - 1.0)


class PointMassEnv:
    def __init__(self, num_envs, seed=0, max_steps=50):
        self.num_envs = num_envs
        self.seed = seed
        self.max_steps = max_steps
        self.position = torch.zeros(num_envs, 2)
        self.velocity = torch.zeros(num_envs, 2)
        self.steps = torch.zeros(num_envs, 1, dtype=torch.int64)
        self.episodes = [0] * num_envs

    def reset(self, td=None):
        mask = None
        if td is not None and "_reset" in td.keys():
            mask = td["_reset"].reshape(self.num_envs).to(torch.bool)
        for i in range(self.num_envs):
            if mask is not None and not bool(mask[i]):
                continue
            h = splitmix64((splitmix64(self.seed ^ (i << 32)) + self.episodes[i]) & MASK64)
            self.episodes[i] += 1
            self.position[i, 0] = unit(h)
            self.position[i, 1] = unit(splitmix64(h))
            self.velocity[i] = 0.0
            self.steps[i, 0] = 0
        out = td.exclude("_reset") if td is not None else TensorDict(batch_size=[self.num_envs])
        flags = torch.zeros(self.num_envs, 1, dtype=torch.bool)
        if td is not None and mask is not None and "done" in td.keys():
            keep = mask.logical_not().unsqueeze(-1)
            done = td["done"].logical_and(keep)
            out["terminated"] = td["terminated"].logical_and(keep)
            out["truncated"] = td["truncated"].logical_and(keep)
        else:
            done = flags
            out["terminated"] = flags.clone()
            out["truncated"] = flags.clone()
        out["done"] = done
        out["observation"] = torch.cat([self.position, self.velocity], -1)
        return out

    def step(self, td):
        action = td["action"].clamp(-1.0, 1.0)
        self.velocity = self.velocity * 0.9 + action * 0.1
        self.position = self.position + self.velocity * 0.1
        self.steps = self.steps + 1
        distance = self.position.pow(2).sum(-1, keepdim=True).sqrt()
        terminated = distance.gt(1.5).logical_or(distance.lt(0.05))
        truncated = self.steps.ge(self.max_steps)
        td["next", "observation"] = torch.cat([self.position, self.velocity], -1)
        td["next", "reward"] = distance.neg()
        td["next", "done"] = terminated.logical_or(truncated)
        td["next", "terminated"] = terminated
        td["next", "truncated"] = truncated
        return td


def step_mdp(td):
    """TorchRL's step_mdp: the "next" entries become the next root."""
    nxt = td.get("next")
    return TensorDict(
        {
            "observation": nxt["observation"],
            "done": nxt["done"],
            "terminated": nxt["terminated"],
            "truncated": nxt["truncated"],
        },
        batch_size=td.batch_size,
    )
