#!/usr/bin/env python3
"""Times Python's tensorclass on the work of tensor_class_benchmark.cpp.

Writes {"results": [{"name": op, "python_us": median microseconds}, ...]}
to the path given as the first argument: a field read of a tensor_only
class, building a 10-field instance of batch size [64] (leaves [64, 8]),
and indexing it with an integer.
"""

import json
import os
import sys

import torch
from tensordict import tensorclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_tensor_dict import time_us  # noqa: E402

BATCH = 64


@tensorclass(tensor_only=True)
class Ten:
    f0: torch.Tensor
    f1: torch.Tensor
    f2: torch.Tensor
    f3: torch.Tensor
    f4: torch.Tensor
    f5: torch.Tensor
    f6: torch.Tensor
    f7: torch.Tensor
    f8: torch.Tensor
    f9: torch.Tensor


def main(out_path):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    leaves = {f"f{i}": torch.randn(BATCH, 8) for i in range(10)}
    ten = Ten(**leaves, batch_size=[BATCH])
    ops = {
        "tc_field_read": lambda: ten.f5,
        "tc_construct": lambda: Ten(**leaves, batch_size=[BATCH]),
        "tc_index": lambda: ten[3],
    }
    results = []
    for name, fn in ops.items():
        results.append({"name": name, "python_us": time_us(fn)})
        print(f"python {name:14s} {results[-1]['python_us']:10.3f} us", file=sys.stderr)
    with open(out_path, "w") as f:
        json.dump({"results": results}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
