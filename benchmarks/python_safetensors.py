#!/usr/bin/env python3
"""Times Python on the work of safetensors_benchmark.cpp.

Writes {"results": [{"name": op, "python_us": median microseconds}, ...]}
to the path given as the first argument. The file is the C++ benchmark's,
byte for byte: 64 float32 zeros of [1024, 1024] named "layers.<i>.weight"
(256 MiB), written with tensordict.to_safetensors.

- safetensors_load_256MiB: safetensors.torch.load_file(path).
- safetensors_load_sum_256MiB: the same, then a sum over every weight.
"""

import json
import os
import shutil
import sys
import tempfile
import timeit

import torch
from safetensors.torch import load_file
from tensordict import TensorDict, to_safetensors


def time_us(fn, repeats=7, number=1):
    fn()  # warm up
    runs = sorted(timeit.repeat(fn, number=number, repeat=repeats))
    return runs[len(runs) // 2] / number * 1e6


def load_sum(path):
    total = 0.0
    for tensor in load_file(path).values():
        total += tensor.sum().item()
    return total


def main(out_path):
    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="tensordict_pybench_safetensors_")
    results = []
    try:
        td = TensorDict()
        for i in range(64):
            td["layers", str(i), "weight"] = torch.zeros(1024, 1024)
        path = os.path.join(work, "model.safetensors")
        to_safetensors(td, path)
        del td
        results.append(
            {"name": "safetensors_load_256MiB",
             "python_us": time_us(lambda: load_file(path))})
        results.append(
            {"name": "safetensors_load_sum_256MiB",
             "python_us": time_us(lambda: load_sum(path), repeats=5)})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with open(out_path, "w") as f:
        json.dump({"results": results}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
