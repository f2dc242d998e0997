#!/usr/bin/env python3
"""Times Python's torch.vmap on the work of vmap_benchmark.cpp.

Writes {"results": [{"name": op, "python_us": median microseconds}, ...]}
to the path given as the first argument. Keep the workloads in step with the
C++ file: 8 MLPs 64 -> 256 -> 256 -> 10 on a shared input of batch 128
(vmap_ensemble) and 16 -> 32 -> 32 -> 4 on batch 16 (vmap_ensemble_small),
the members' parameters stacked with tensordict and swapped in with
to_module under torch.vmap (the README's ensemble form), without grad, one
thread.
"""

import json
import sys
import timeit

import torch
from tensordict import TensorDict
from torch import nn

MEMBERS = 8


def time_us(fn, repeats=7, number=20):
    fn()  # warm up
    runs = sorted(timeit.repeat(fn, number=number, repeat=repeats))
    return runs[len(runs) // 2] / number * 1e6


def make_mlp(inp, hidden, out):
    return nn.Sequential(
        nn.Linear(inp, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, out)
    )


def time_ensemble(inp, hidden, out, batch):
    params_stack = torch.stack(
        [TensorDict.from_module(make_mlp(inp, hidden, out)).detach() for _ in range(MEMBERS)]
    )
    shell = make_mlp(inp, hidden, out)
    x = torch.randn(batch, inp)

    def call(params, x):
        with params.to_module(shell):
            return shell(x)

    ensemble = torch.vmap(call, (0, None))
    with torch.no_grad():
        return time_us(lambda: ensemble(params_stack, x))


def main(out_path):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    results = [
        {"name": "vmap_ensemble", "python_us": time_ensemble(64, 256, 10, 128)},
        {"name": "vmap_ensemble_small", "python_us": time_ensemble(16, 32, 4, 16)},
    ]
    with open(out_path, "w") as f:
        json.dump({"results": results}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
