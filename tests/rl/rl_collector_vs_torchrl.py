#!/usr/bin/env python3
"""rl::Collector batches against TorchRL 0.14.1's Collector.

rl_interop runs rl::Collector on CartPole-v1 with 4 sub-envs, 40 frames a
batch, 200 frames in all, policy_version tracked and new weights given
after the second batch, and memmaps the batches and both sets of weights.
Here TorchRL's Collector runs the same: SerialEnv of 4 GymEnv("CartPole-v1"),
the equivalent policy (argmax one-hot of the same Linear), a PolicyVersion
transform, the same weight update. The batches must agree in batch size,
keys, dtypes and shapes (the sub-dicts' batch sizes too), in
("collector", "traj_ids") semantics (0..N-1 first, the next unused id after
a done step, in sub-env order, across batches), in policy_version (equal
tensors), and in the dynamics: a C++ step's next observation is the
gymnasium step of its observation and action.

usage: rl_collector_vs_torchrl.py RL_INTEROP WORK_DIR
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
from tensordict.nn import TensorDictModule

warnings.filterwarnings("ignore")

NUM_ENVS = 4
FRAMES = 40
TOTAL = 200


def fail(msg):
    sys.exit(f"FAIL: {msg}")


class ArgmaxPolicy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)

    def forward(self, observation):
        return torch.nn.functional.one_hot(self.linear(observation).argmax(-1), 2)


def set_weights(module, weights):
    with torch.no_grad():
        module.linear.weight.copy_(weights["module", "linear", "weight"])
        module.linear.bias.copy_(weights["module", "linear", "bias"])


def torchrl_batches(weights):
    from torchrl.collectors import Collector
    from torchrl.envs import GymEnv, SerialEnv
    from torchrl.envs.llm.transforms.policy_version import PolicyVersion

    net = ArgmaxPolicy()
    set_weights(net, weights[0])
    policy = TensorDictModule(net, ["observation"], ["action"])
    env = SerialEnv(NUM_ENVS, lambda: GymEnv("CartPole-v1"))
    env.set_seed(5)
    version = PolicyVersion(version_type="int")
    collector = Collector(
        env,
        policy,
        frames_per_batch=FRAMES,
        total_frames=TOTAL,
        track_policy_version=version,
    )
    out = []
    for batch in collector:
        out.append(batch.clone())
        if len(out) == 2:
            set_weights(net, weights[1])
            collector.update_policy_weights_()
    collector.shutdown()
    return out


def check_traj_ids(batches, who):
    current = list(range(NUM_ENVS))
    next_id = NUM_ENVS
    resets = 0
    for b, batch in enumerate(batches):
        ids = batch["collector", "traj_ids"]
        done = batch["next", "done"].squeeze(-1)
        for t in range(batch.batch_size[1]):
            for i in range(NUM_ENVS):
                if int(ids[i, t]) != current[i]:
                    fail(f"{who} batch {b} step {t} env {i}: traj_id "
                         f"{int(ids[i, t])}, expected {current[i]}")
            for i in range(NUM_ENVS):
                if done[i, t]:
                    current[i] = next_id
                    next_id += 1
                    resets += 1
        if batch["done"].any():
            fail(f"{who} batch {b}: a root is done (not reset)")
    if resets < 3:
        fail(f"{who}: only {resets} resets, too few to check traj_ids")
    return resets


def layout(td):
    out = {"": tuple(td.batch_size)}
    for key in td.keys(True, False):
        value = td.get(key)
        name = key if isinstance(key, str) else ".".join(key)
        if isinstance(value, torch.Tensor):
            out[name] = (tuple(value.shape), value.dtype)
        else:
            out[name] = ("dict", tuple(value.batch_size))
    return out


def main():
    exe, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    subprocess.run([exe, "collector", work], check=True)
    weights = [TensorDict.load_memmap(os.path.join(work, f"weights_{k}"))
               for k in (0, 1)]
    cpp = []
    while os.path.isdir(os.path.join(work, f"batch_{len(cpp)}")):
        cpp.append(TensorDict.load_memmap(os.path.join(work, f"batch_{len(cpp)}")))
    ref = torchrl_batches(weights)
    if len(cpp) != len(ref) or len(cpp) != TOTAL // FRAMES:
        fail(f"{len(cpp)} C++ batches, {len(ref)} TorchRL batches")

    for b, (c, r) in enumerate(zip(cpp, ref)):
        lc, lr = layout(c), layout(r)
        if lc != lr:
            fail(f"batch {b} layout differs:\nC++     {sorted(lc.items())}\n"
                 f"TorchRL {sorted(lr.items())}")
        for key in ("policy_version", ("next", "policy_version")):
            if not torch.equal(c[key], r[key]):
                fail(f"batch {b} {key}: C++ {c[key]} != TorchRL {r[key]}")
    check_traj_ids(cpp, "C++")
    check_traj_ids(ref, "TorchRL")

    # The dynamics: each C++ step is gymnasium's step of its root
    # observation (exact in float32 here, since the float64 state is not in
    # the batch: compare with a float32 tolerance) and action; the
    # policy's actions are the argmax of the Linear in force.
    env = gymnasium.make("CartPole-v1").unwrapped
    for b, c in enumerate(cpp):
        w = weights[0] if b < 2 else weights[1]
        net = ArgmaxPolicy()
        set_weights(net, w)
        if not torch.equal(net(c["observation"]), c["action"]):
            fail(f"batch {b}: actions are not the policy's")
        for i in range(NUM_ENVS):
            for t in range(c.batch_size[1]):
                env.state = c["observation"][i, t].double().numpy()
                obs, reward, terminated, _, _ = env.step(int(c["action"][i, t].argmax()))
                if not np.allclose(obs, c["next", "observation"][i, t].numpy(),
                                   rtol=0, atol=1e-6):
                    fail(f"batch {b} env {i} step {t}: next observation "
                         f"{c['next', 'observation'][i, t]} vs gymnasium {obs}")
                if bool(terminated) != bool(c["next", "terminated"][i, t]) and \
                        abs(obs[0]) < 2.39 and abs(obs[2]) < 0.2:
                    fail(f"batch {b} env {i} step {t}: terminated differs")
    print(f"OK: {len(cpp)} batches of {tuple(cpp[0].batch_size)} match TorchRL "
          f"0.14.1's layout, traj_ids and policy_version")


if __name__ == "__main__":
    main()
