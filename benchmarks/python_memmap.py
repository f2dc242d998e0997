#!/usr/bin/env python3
"""Times Python tensordict and torch.save/load on the work of memmap_benchmark.cpp.

Writes {"results": [{"name": op, "python_us": median microseconds}, ...]} to
the path given as the first argument. Keep the workloads in step with the C++
file:
  a) 256 MiB: 16 float32 leaves of [1024, 4096] and 500 of [1024], batch [1024]
  b) 10,000 float32 leaves of [256] (1 KiB each) in 100 sub-dicts, batch [256]
  c) 512 float32 leaves of [1024] in 8 sub-dicts
  d) 100,000 x 3 x 64 x 64 uint8 images, memory-mapped: gather 256 random rows
Files go under $TENSORDICT_BENCH_DIR, by default /dev/shm when it is writable
(else the system temp directory): the benchmark measures the libraries, not
the disk.
"""

import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import torch
from tensordict import TensorDict

SAVE_THREADS = 2  # as kSaveThreads in memmap_benchmark.cpp


def make_workload(batch, groups, per_group, leaf_shape):
    td = TensorDict(batch_size=batch)
    leaves = []
    for g in range(groups):
        for i in range(per_group):
            t = torch.randn(leaf_shape)
            td[f"x{i}" if groups == 1 else (f"g{g}", f"x{i}")] = t
            leaves.append(t)
    return td, leaves


def workload_a():
    td, leaves = make_workload([1024], 1, 16, [1024, 4096])
    for i in range(500):
        t = torch.randn(1024)
        td[f"s{i}"] = t
        leaves.append(t)
    return td, leaves


def time_us(fn, setup=None, min_time=1.0, min_runs=3, max_runs=200):
    """Median per-call time in microseconds; `setup` runs untimed before each call."""
    runs = []
    started = time.perf_counter()
    while len(runs) < min_runs or (time.perf_counter() - started < min_time and len(runs) < max_runs):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs) * 1e6


def time_fast_us(fn, min_time=0.5):
    """Median over batches for calls far below a millisecond."""
    fn()
    number = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        if time.perf_counter() - t0 >= 0.02:
            break
        number *= 2
    runs = []
    started = time.perf_counter()
    while len(runs) < 5 or time.perf_counter() - started < min_time:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - t0) / number)
    return statistics.median(runs) * 1e6


def main(out_path):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    base = os.environ.get("TENSORDICT_BENCH_DIR") or (
        "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    )
    root = os.path.join(base, f"tensordict_memmap_bench_py_{os.getpid()}")
    os.makedirs(root)
    results = []

    def record(name, us):
        results.append({"name": name, "python_us": us})
        print(f"python {name:22s} {us:12.1f} us", file=sys.stderr)

    try:
        a, a_leaves = workload_a()
        b, _ = make_workload([256], 100, 100, [256])
        c, _ = make_workload([1024], 8, 64, [1024])
        where = os.path.join(root, "tree")

        def fresh():
            shutil.rmtree(where, ignore_errors=True)

        record("save_256MiB", time_us(lambda: a.memmap(where, num_threads=0), fresh))
        record("save_256MiB_2threads", time_us(lambda: a.memmap(where, num_threads=SAVE_THREADS), fresh))
        record("save_10k_1KiB", time_us(lambda: b.memmap(where, num_threads=0), fresh))

        pt = os.path.join(root, "leaves.pt")
        record("torch_save_256MiB", time_us(lambda: torch.save(a_leaves, pt)))
        record("torch_load_256MiB", time_us(lambda: torch.load(pt, weights_only=True)))
        os.remove(pt)

        for name, td in [("load_256MiB", a), ("load_10k_1KiB", b), ("load_512_leaves", c)]:
            fresh()
            td.memmap(where)
            record(name, time_us(lambda: TensorDict.load_memmap(where)))
        fresh()

        rows = 100_000
        images = TensorDict(
            {"pixels": torch.empty(rows, 3, 64, 64, dtype=torch.uint8)}, batch_size=[rows]
        ).memmap_like(os.path.join(root, "images"))
        pixels = images["pixels"]
        for start in range(0, rows, 10_000):
            pixels[start : start + 10_000] = torch.randint(0, 256, (10_000, 3, 64, 64), dtype=torch.uint8)
        index = torch.randint(0, rows, (256,))
        record("gather_256_rows", time_fast_us(lambda: images[index]))
    finally:
        shutil.rmtree(root, ignore_errors=True)

    with open(out_path, "w") as f:
        json.dump({"results": results}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
