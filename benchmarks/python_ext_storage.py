#!/usr/bin/env python3
"""Times the C++ storage functions called from Python (tensordict_cpp, the
installed package) against Python tensordict's own on the same tree, in the
same run, conversions to and from tensordict.TensorDict included:

- python_ext_load_512_leaves: load a memmap tree of 512 leaves (16 nested
  dicts of 32 float32 [64, 16] leaves, written by Python):
  tensordict_cpp.load_memmap vs TensorDict.load_memmap;
- python_ext_save_10k_1KiB: save a TensorDict of 10,000 leaves of 1 KiB
  (100 nested dicts of 100 float32 [256] leaves) to a fresh directory:
  tensordict_cpp.save vs td.save (the directory is removed between runs,
  outside the timing);
- python_ext_from_consolidated_512: map a consolidated file of the 512-leaf
  tree (written by Python): tensordict_cpp.from_consolidated vs
  TensorDict.from_consolidated.

Medians of 9 runs (the loads: of many calls each), one intra-op thread.
Files go under $TENSORDICT_BENCH_DIR, by default /dev/shm when writable.
Writes {"results": [{"name", "python_us", "cpp_us", "python_over_cpp", ...}]}
to the path given as the first argument (report.py joins both columns).
"""

import gc
import json
import os
import shutil
import sys
import tempfile
import time
import timeit

import torch
from tensordict import TensorDict

import tensordict_cpp

REPEATS = 9


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def time_call_us(fn, number):
    fn()  # warm up (imports, page cache)
    return median(timeit.repeat(fn, number=number, repeat=REPEATS)) / number * 1e6


def tree(groups, leaves, shape):
    return TensorDict(
        {f"group{g}": {f"leaf{i}": torch.randn(shape) for i in range(leaves)}
         for g in range(groups)},
        batch_size=[],
    )


def check_same(a, b, what):
    assert sorted(a.keys(True, True)) == sorted(b.keys(True, True)), what
    for key in b.keys(True, True):
        assert torch.equal(a[key], b[key]), (what, key)


def time_load(base):
    td = tree(16, 32, (64, 16))
    prefix = os.path.join(base, "load512")
    td.memmap(prefix)
    check_same(tensordict_cpp.load_memmap(prefix), td, "load_memmap")
    number = 20
    py_us = time_call_us(lambda: TensorDict.load_memmap(prefix), number)
    cpp_us = time_call_us(lambda: tensordict_cpp.load_memmap(prefix), number)
    return {"name": "python_ext_load_512_leaves", "python_us": py_us, "cpp_us": cpp_us,
            "leaves": 512, "python_over_cpp": py_us / cpp_us}


def time_save(base):
    td = tree(100, 100, (256,))
    counter = [0]

    def one(save):
        counter[0] += 1
        prefix = os.path.join(base, f"save10k_{counter[0]}")
        gc.collect()
        start = time.perf_counter()
        out = save(prefix)
        elapsed = time.perf_counter() - start
        del out
        shutil.rmtree(prefix)
        return elapsed

    def python_save(prefix):
        return td.save(prefix)

    def cpp_save(prefix):
        return tensordict_cpp.save(td, prefix)

    check = cpp_save(os.path.join(base, "save10k_check"))
    check_same(TensorDict.load_memmap(os.path.join(base, "save10k_check")), td, "save")
    del check
    shutil.rmtree(os.path.join(base, "save10k_check"))
    one(python_save)
    one(cpp_save)
    # Alternated, so that a slow spell of the machine hits both sides.
    py, cpp = [], []
    for _ in range(REPEATS):
        py.append(one(python_save))
        cpp.append(one(cpp_save))
    py_us, cpp_us = median(py) * 1e6, median(cpp) * 1e6
    return {"name": "python_ext_save_10k_1KiB", "python_us": py_us, "cpp_us": cpp_us,
            "leaves": 10000, "python_over_cpp": py_us / cpp_us}


def time_from_consolidated(base):
    td = tree(16, 32, (64, 16))
    filename = os.path.join(base, "consolidated512.bin")
    td.consolidate(filename=filename)
    check_same(tensordict_cpp.from_consolidated(filename), td, "from_consolidated")
    number = 50
    py_us = time_call_us(lambda: TensorDict.from_consolidated(filename), number)
    cpp_us = time_call_us(lambda: tensordict_cpp.from_consolidated(filename), number)
    return {"name": "python_ext_from_consolidated_512", "python_us": py_us,
            "cpp_us": cpp_us, "leaves": 512, "python_over_cpp": py_us / cpp_us}


def main(out_path):
    torch.set_num_threads(1)
    root = os.environ.get("TENSORDICT_BENCH_DIR") or (
        "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir())
    base = tempfile.mkdtemp(prefix="python_ext_storage_", dir=root)
    try:
        results = [time_load(base), time_save(base), time_from_consolidated(base)]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    for r in results:
        print(json.dumps(r))
    with open(out_path, "w") as f:
        json.dump({"results": results}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
