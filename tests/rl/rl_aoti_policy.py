#!/usr/bin/env python3
"""An AOTInductor package as rl::Collector's policy.

Exports an argmax policy (one-hot of the argmax of a Linear on
"observation", written to "action") with tensordict_cpp.export, its
weights left out of the package, plus two weight sets: a (the Linear's
own) and b (which always picks index 1). rl_interop then collects a batch
with weights a, has a weights dict with a key the package lacks refused,
stages b with update_policy_weights_ (AOTIModule::load_weights) and
collects again. The first batch's actions must be the eager policy's on
its observations with a, the second's all index 1, and policy_version
must count the update.

usage: rl_aoti_policy.py RL_INTEROP WORK_DIR PYTHON_PACKAGE_DIR
"""

import os
import shutil
import subprocess
import sys

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

sys.path.insert(0, sys.argv[3])
import tensordict_cpp  # noqa: E402  (the source tree's)


class ArgmaxPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 2)

    def forward(self, observation):
        return nn.functional.one_hot(self.linear(observation).argmax(-1), 2)


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def main():
    exe, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    torch.manual_seed(0)
    policy = TensorDictModule(ArgmaxPolicy(), ["observation"], ["action"])
    example = TensorDict({"observation": torch.randn(4, 4)}, batch_size=[4])
    tensordict_cpp.export(
        policy,
        example,
        os.path.join(work, "policy.pt2"),
        dynamic_batch=True,
        weights_in_package=False,
    )
    weights_a = TensorDict.from_module(policy).detach().clone()
    weights_b = weights_a.clone()
    weights_b["module", "linear", "weight"].zero_()
    weights_b["module", "linear", "bias"].copy_(torch.tensor([0.0, 1.0]))
    weights_a.memmap(os.path.join(work, "weights_a"))
    weights_b.memmap(os.path.join(work, "weights_b"))

    run = subprocess.run([exe, "aoti", work], capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"rl_interop aoti: {run.stdout}{run.stderr}")
    if "refused: update_policy_weights_: key ('module', 'extra') is not a " \
            "weight of the policy; its weights are module.linear.bias, " \
            "module.linear.weight" not in run.stdout:
        fail(f"the wrong weights were not refused as expected: {run.stdout}")

    first = TensorDict.load_memmap(os.path.join(work, "batch_0"))
    second = TensorDict.load_memmap(os.path.join(work, "batch_1"))
    for b in (first, second):
        if b.batch_size != torch.Size([4, 4]) or b["action"].dtype != torch.int64:
            fail(f"batch {b.batch_size} action {b['action'].dtype}")
    with torch.no_grad():
        expected = policy.module(first["observation"])
    if not torch.equal(first["action"], expected):
        fail("the first batch's actions are not the eager policy's with weights a")
    if not torch.equal(second["action"], torch.tensor([0, 1]).expand(4, 4, 2)):
        fail(f"the second batch's actions are not all index 1: {second['action']}")
    if not torch.equal(first["next", "policy_version"], torch.zeros(4, 4, dtype=torch.long)):
        fail("policy_version of the first batch")
    if not torch.equal(second["next", "policy_version"], torch.ones(4, 4, dtype=torch.long)):
        fail("policy_version of the second batch")
    print("OK: an AOTI package collects, and its weights are swapped between batches")


if __name__ == "__main__":
    main()
