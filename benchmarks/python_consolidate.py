#!/usr/bin/env python3
"""Times Python tensordict on the work of consolidate_benchmark.cpp.

Writes {"results": [{"name": op, "python_us": median microseconds}, ...]}
to the path given as the first argument. Keep the workloads in step with the
C++ file: 256 MiB in 100 float32 leaves; nn.Transformer() parameters (loaded;
python_memmap.py times their saves); 512
leaves of shape [64, 8] over three levels, batch [64].
"""

import json
import os
import shutil
import sys
import tempfile
import timeit

import torch
from tensordict import TensorDict

BIG_BYTES = 256 << 20


def time_us(fn, repeats=5, number=1):
    fn()  # warm up
    runs = sorted(timeit.repeat(fn, number=number, repeat=repeats))
    return runs[len(runs) // 2] / number * 1e6


def big_dict():
    td = TensorDict()
    per_leaf = BIG_BYTES // 100 // 4
    for i in range(100):
        key = f"leaf{i}" if i % 2 == 0 else ("nested", f"leaf{i}")
        td[key] = torch.randn(per_leaf)
    return td


def small_dict():
    td = TensorDict(batch_size=[64])
    for i in range(512):
        name = f"leaf{i}"
        key = name if i % 3 == 0 else ("l1", name) if i % 3 == 1 else ("l1", "l2", name)
        td[key] = torch.randn(64, 8)
    return td


def main(out_path):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    work = tempfile.mkdtemp(prefix="tensordict_pybench_")
    results = []
    try:
        big = big_dict()
        results.append(
            {"name": "consolidate_256MiB",
             "python_us": time_us(lambda: big.consolidate(num_threads=2))})
        del big

        model = torch.nn.Transformer()
        params = TensorDict.from_module(model)
        save_dir = os.path.join(work, "save")
        # Its saves are timed by python_memmap.py (save_transformer_*).
        params.memmap(save_dir, num_threads=2)
        results.append(
            {"name": "load_transformer",
             "python_us": time_us(lambda: TensorDict.load_memmap(save_dir), repeats=7)})

        small = small_dict()
        path = os.path.join(work, "td.bin")
        small.consolidate(filename=path)
        results.append(
            {"name": "from_consolidated_512",
             "python_us": time_us(lambda: TensorDict.from_consolidated(path), number=10)})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with open(out_path, "w") as f:
        json.dump({"results": results}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
