#!/usr/bin/env python3
"""vmap ensembles, C++ against Python's torch.vmap on the same weights.

1. Python builds ensembles (an MLP and a small conv net), stacks the members'
   parameters with tensordict, runs ``torch.vmap`` over
   ``params.to_module(module)`` with shared and with per-member inputs, and
   memmaps weights, inputs and outputs to WORK_DIR/py.
2. C++ (vmap_interop) loads them, runs ``functional_call_vmap`` (batched and
   loop), checks its outputs against Python's, and memmaps its own outputs
   to WORK_DIR/cpp.
3. Python loads what C++ wrote and compares again.

usage: vmap_interop.py VMAP_INTEROP_BINARY WORK_DIR
"""

import os
import shutil
import subprocess
import sys

import torch
from tensordict import TensorDict
from torch import nn

MEMBERS = 4


def make_mlp() -> nn.Module:
    return nn.Sequential(
        nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 10)
    )


def make_conv() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(4, 2, 3, stride=2),
        nn.Flatten(),
    )


def ensemble_call(module, params_stack, x, in_dim):
    """The seed's form: vmap over a function that swaps params in."""

    def call(params, x):
        with params.to_module(module):
            return module(x)

    return torch.vmap(call, (0, in_dim))(params_stack, x)


def case(make, shared_shape, batched_shape) -> TensorDict:
    members = [make() for _ in range(MEMBERS)]
    params_stack = torch.stack(
        [TensorDict.from_module(m).detach().clone() for m in members]
    )
    shell = make()
    x = torch.randn(shared_shape)
    xb = torch.randn(batched_shape)
    with torch.no_grad():
        out = ensemble_call(shell, params_stack, x, None)
        out_batched = ensemble_call(shell, params_stack, xb, 0)
        # The members themselves agree with the vmapped shell.
        for i, member in enumerate(members):
            torch.testing.assert_close(out[i], member(x))
    return TensorDict(
        {
            "params": params_stack,
            "x": x,
            "x_batched": xb,
            "out": out,
            "out_batched": out_batched,
        },
        batch_size=[],
    )


def main() -> int:
    binary, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    torch.manual_seed(0)
    written = TensorDict(
        {
            "mlp": case(make_mlp, (8, 16), (MEMBERS, 8, 16)),
            "conv": case(make_conv, (5, 3, 8, 8), (MEMBERS, 5, 3, 8, 8)),
        },
        batch_size=[],
    )
    written.memmap(os.path.join(work, "py"))
    subprocess.run(
        [binary, os.path.join(work, "py"), os.path.join(work, "cpp")], check=True
    )
    cpp = TensorDict.load_memmap(os.path.join(work, "cpp"))
    for name in ("mlp", "conv"):
        for key in ("out", "out_batched"):
            torch.testing.assert_close(cpp[name, key], written[name, key])
    print("vmap_interop: C++ and Python agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
