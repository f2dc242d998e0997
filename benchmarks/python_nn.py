#!/usr/bin/env python3
"""Times Python's tensordict.nn.TensorDictSequential on the work of nn_benchmark.cpp.

Writes {"results": [{"name": op, "python_us": median microseconds}, ...]}
to the path given as the first argument. Keep the workload in step with the
C++ file: 3 Linear layers with ReLU between them (16 -> 64 -> 64 -> 4),
each a TensorDictModule, reading ("obs", "x") of batch 32 and writing
"hidden" and ("action", "logits") into the same dict, without grad, one
thread.
"""

import json
import sys
import timeit

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn


def time_us(fn, repeats=7, number=200):
    fn()  # warm up
    runs = sorted(timeit.repeat(fn, number=number, repeat=repeats))
    return runs[len(runs) // 2] / number * 1e6


def main(out_path):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    relu = nn.ReLU()
    policy = TensorDictSequential(
        TensorDictModule(nn.Linear(16, 64), [("obs", "x")], ["hidden"]),
        TensorDictModule(relu, ["hidden"], ["hidden"]),
        TensorDictModule(nn.Linear(64, 64), ["hidden"], ["hidden"]),
        TensorDictModule(relu, ["hidden"], ["hidden"]),
        TensorDictModule(nn.Linear(64, 4), ["hidden"], [("action", "logits")]),
    )
    td = TensorDict(obs=TensorDict(x=torch.randn(32, 16), batch_size=[32]), batch_size=[32])
    with torch.no_grad():
        results = [{"name": "nn_sequential", "python_us": time_us(lambda: policy(td))}]
    with open(out_path, "w") as f:
        json.dump({"results": results}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
