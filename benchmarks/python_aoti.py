#!/usr/bin/env python3
"""Times Python on the work of aoti_benchmark.cpp.

Writes {"results": [{"name": op, "python_us": median microseconds}, ...]}
to the path given as the first argument:
- aoti_call: the eager TensorDictSequential of tests/python/aoti_packages.py
  (sequential.pt2's module; keep the two in step) on a TensorDict of batch 5;
- aoti_call_pt2: torch's own loader of the exported package,
  ``aoti_load_package(path)(obs_x=..., obs_y=...)``.
One intra-op thread, without grad. The package directory comes from
TENSORDICT_AOTI_PACKAGES (set by `make bench`); without it the script writes
no results.
"""

import json
import os
import sys
import timeit

import torch
from tensordict import TensorDict


def time_us(fn, repeats=7, number=200):
    fn()  # warm up
    runs = sorted(timeit.repeat(fn, number=number, repeat=repeats))
    return runs[len(runs) // 2] / number * 1e6


def main(out_path):
    torch.set_num_threads(1)
    results = []
    package_dir = os.environ.get("TENSORDICT_AOTI_PACKAGES")
    if package_dir:
        from tensordict.nn import TensorDictModule, TensorDictSequential
        from torch import nn

        torch.manual_seed(1)
        seq = TensorDictSequential(
            TensorDictModule(nn.Linear(5, 6), in_keys=[("obs", "x")], out_keys=[("hidden", "h")]),
            TensorDictModule(
                lambda h, y: torch.tanh(h) * y.sum(-1, keepdim=True),
                in_keys=[("hidden", "h"), ("obs", "y")],
                out_keys=[("hidden", "g")],
            ),
            TensorDictModule(nn.Linear(6, 2), in_keys=[("hidden", "g")], out_keys=[("out", "action")]),
        )
        seq.select_out_keys(("out", "action"), ("hidden", "h"))
        inputs = TensorDict.load_memmap(os.path.join(package_dir, "sequential_inputs_5")).clone()
        with torch.no_grad():
            results.append(
                {"name": "aoti_call", "python_us": time_us(lambda: seq(inputs.copy()))}
            )
            package = torch._inductor.aoti_load_package(
                os.path.join(package_dir, "sequential.pt2")
            )
            x, y = inputs.get(("obs", "x")), inputs.get(("obs", "y"))
            results.append(
                {"name": "aoti_call_pt2", "python_us": time_us(lambda: package(obs_x=x, obs_y=y))}
            )
    with open(out_path, "w") as f:
        json.dump({"results": results}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
