#!/usr/bin/env python3
"""Times Python tensordict and torch.save/load on the work of memmap_benchmark.cpp.

Writes {"results": [{"name": op, "python_us": median microseconds}, ...]} to
the path given as the first argument. Keep the workloads in step with the C++
file:
  a) 256 MiB: 16 float32 leaves of [1024, 4096] and 500 of [1024], batch [1024]
  b) 10,000 float32 leaves of [256] (1 KiB each) in 100 sub-dicts, batch [256]
  c) 512 float32 leaves of [1024] in 8 sub-dicts
  d) 100,000 x 3 x 64 x 64 uint8 images, memory-mapped: gather 256 random rows
  e) the parameters of torch.nn.Transformer()
Files go under $TENSORDICT_BENCH_DIR, by default /dev/shm when it is writable
(else the system temp directory): the benchmark measures the libraries, not
the disk. The save rows of b) and e) are the exception: they run on a named
file system, as save_<work>_<fresh|overwrite>_<fs>, with the rules of NOTE
[Save rows] in memmap_benchmark.cpp (ext4: the system temp directory or
$TENSORDICT_BENCH_EXT4_DIR; tmpfs: /dev/shm; a directory on another file
system is skipped with a message).
"""

import ctypes
import ctypes.util
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
TRANSFORMER_SAVE_THREADS = 2  # as kTransformerSaveThreads

# statfs f_type of the file systems the save rows claim (ext2/3 share ext4's).
FS_MAGIC = {"ext4": 0xEF53, "tmpfs": 0x01021994}


def fs_type(path):
    """statfs(path).f_type (the first member of struct statfs on Linux)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    buf = ctypes.create_string_buffer(256)
    if libc.statfs(os.fsencode(path), buf) != 0:
        return None
    return ctypes.c_long.from_buffer(buf).value


def save_file_systems():
    """(name, base directory) of each file system the save rows run on."""
    claimed = [
        ("ext4", os.environ.get("TENSORDICT_BENCH_EXT4_DIR") or tempfile.gettempdir()),
        ("tmpfs", "/dev/shm"),
    ]
    found = []
    for name, base in claimed:
        if not (os.path.isdir(base) and os.access(base, os.W_OK)):
            print(f"python_memmap: skipping the *_{name} save rows: {base} is not a writable directory",
                  file=sys.stderr)
            continue
        kind = fs_type(base)
        if kind != FS_MAGIC[name]:
            print(f"python_memmap: skipping the *_{name} save rows: {base} is on a file system of type "
                  f"{kind if kind is None else hex(kind)}, not {name}", file=sys.stderr)
            continue
        found.append((name, base))
    return found


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
        print(f"python {name:32s} {us:12.1f} us", file=sys.stderr)

    try:
        a, a_leaves = workload_a()
        b, _ = make_workload([256], 100, 100, [256])
        c, _ = make_workload([1024], 8, 64, [1024])
        where = os.path.join(root, "tree")

        def fresh():
            shutil.rmtree(where, ignore_errors=True)

        record("save_256MiB", time_us(lambda: a.memmap(where, num_threads=0), fresh))
        record("save_256MiB_2threads", time_us(lambda: a.memmap(where, num_threads=SAVE_THREADS), fresh))

        # Fresh saves and overwrites, per file system (NOTE [Save rows]).
        params = TensorDict.from_module(torch.nn.Transformer())
        for fs_name, fs_base in save_file_systems():
            fs_root = os.path.join(fs_base, f"tensordict_save_bench_py_{os.getpid()}")
            try:
                for work, td, threads in [
                    ("save_transformer", params, TRANSFORMER_SAVE_THREADS),
                    ("save_10k_1KiB", b, 0),
                ]:
                    d = os.path.join(fs_root, work)

                    def save(td=td, d=d, threads=threads):
                        td.memmap(d, num_threads=threads)

                    def remove(d=d):
                        shutil.rmtree(d, ignore_errors=True)

                    remove()
                    record(f"{work}_fresh_{fs_name}", time_us(save, remove, min_time=2.0))
                    remove()
                    save()
                    record(f"{work}_overwrite_{fs_name}", time_us(save, min_time=2.0))
                    remove()
            finally:
                shutil.rmtree(fs_root, ignore_errors=True)

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
