#!/usr/bin/env python3
"""Times Python tensordict's td.map on the work of map_benchmark.cpp.

Writes {"results": [{"name": op, "python_us": median microseconds}, ...]}
to the path given as the first argument. Keep the workload in step with the
C++ file: 100,000 items (x float32 [16], y int64), `process` below, chunksize
0 and 1000, 1 and 2 worker processes. td.map pickles `process`, so it lives
at module level, and the worker processes re-import this file, so the work
runs under the __main__ guard.
"""

import json
import sys
import timeit
import warnings

import torch
from tensordict import TensorDict

ITEMS = 100_000


def process(chunk):
    x = chunk["x"]
    return chunk.empty().set("z", (x.sin() * x.cos()).sum(-1) + chunk["y"])


def time_us(fn, repeats):
    if repeats > 1:
        fn()  # warm up
    runs = sorted(timeit.repeat(fn, number=1, repeat=repeats))
    return runs[len(runs) // 2] * 1e6


def main(out_path):
    # One file descriptor per shared tensor (the default strategy) runs out
    # of descriptors with 100,000 chunks in flight.
    torch.multiprocessing.set_sharing_strategy("file_system")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    # map warns that its default seeding will change; the seeds do not
    # matter here.
    warnings.simplefilter("ignore", FutureWarning)
    td = TensorDict(
        x=torch.randn(ITEMS, 16), y=torch.arange(ITEMS), batch_size=[ITEMS]
    )
    results = []
    for chunksize in (0, 1000):
        for workers in (1, 2):
            op = f"map_chunk{chunksize}_w{workers}"
            # One element at a time is slow (about 3 ms per element: one
            # pickled round trip each): one timed run, no warm-up (each call
            # starts its own pool anyway).
            repeats = 1 if chunksize == 0 else 5
            # With chunksize 0, the 100,000 results come back as 100,000
            # shared-memory mappings, past Linux's default vm.max_map_count
            # (65530): map fails with ENOMEM. Python's way out is `out` in
            # shared memory, which the workers fill in place; it also spares
            # Python the 100,000-way stack the C++ side does.
            out = (
                td.empty().set("z", torch.zeros(ITEMS)).share_memory_()
                if chunksize == 0
                else None
            )
            us = time_us(
                lambda: td.map(
                    process,
                    num_workers=workers,
                    chunksize=chunksize,
                    out=out,
                    generator=torch.Generator(),
                ),
                repeats,
            )
            results.append({"name": op, "python_us": us})
            print(f"{op}: {us / 1e3:.1f} ms", file=sys.stderr)
    with open(out_path, "w") as f:
        json.dump({"results": results}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
