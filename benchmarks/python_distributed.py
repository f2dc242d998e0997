#!/usr/bin/env python3
"""Times Python tensordict on the work of distributed_benchmark.cpp.

Two processes in one Gloo group on loopback; rank 0 sends, rank 1 receives
and acks each dict with a one-element tensor, as the C++ benchmark does.
Writes {"results": [{"name": op, "python_us": median microseconds}, ...]}
to the path given as the first argument. Keep the workloads in step with
the C++ file: 100 float32 leaves [64, 8]; 64 float32 leaves [2**20] (256 MiB).
"""

import json
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from tensordict import TensorDict

# As distributed_benchmark.cpp: more rounds for the small dicts.
SMALL_ITERATIONS = 200
LARGE_ITERATIONS = 20


def many_leaves(n, shape):
    return TensorDict({f"leaf{1000 + i}": torch.randn(shape) for i in range(n)})


def bench(rank, iterations, send, recv):
    ack = torch.zeros(1)
    times = []
    for _ in range(iterations + 2):  # two warm-up rounds
        if rank == 0:
            start = time.perf_counter()
            send()
            dist.recv(ack, src=1, tag=999999)
            times.append(time.perf_counter() - start)
        else:
            recv()
            dist.send(torch.ones(1), dst=0, tag=999999)
    return statistics.median(times[2:]) * 1e6 if rank == 0 else None


def worker(rank, port, out_path):
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2
    )
    results = []
    for name, n, shape, iterations in (
        ("dist_100_leaves", 100, (64, 8), SMALL_ITERATIONS),
        ("dist_256MiB", 64, (1 << 20,), LARGE_ITERATIONS),
    ):
        out, into = many_leaves(n, shape), many_leaves(n, shape)
        us = bench(rank, iterations, lambda: out.send(1), lambda: into.recv(0))
        results.append({"name": name, "python_us": us})
        out_c, into_c = out.consolidate(), into.consolidate()
        us = bench(
            rank,
            iterations,
            lambda: out_c.send(1, consolidated=True),
            lambda: into_c.recv(0, consolidated=True),
        )
        results.append({"name": name + "_consolidated", "python_us": us})
    dist.destroy_process_group()
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({"results": results}, f, indent=1)


def main(out_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(port, out_path), nprocs=2, join=True)


if __name__ == "__main__":
    main(sys.argv[1])
