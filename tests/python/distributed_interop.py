#!/usr/bin/env python3
"""A Python rank (real tensordict + torch.distributed, Gloo) and a C++ rank in
one process group, both directions.

Usage: distributed_interop.py DISTRIBUTED_TEST_BINARY

The C++ side is tests/distributed_test.cpp run as a rank (TD_DIST_SCENARIO
py_recv / py_send / py_class); this script is the other rank and builds the same dicts
(sample() mirrors the C++ sample()). Per-leaf messages use Python's wire, so
the C++ rank passes checked(false).
"""

import os
import socket
import subprocess
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from tensordict import NonTensorData, TensorClass, TensorDict


class Step(TensorClass):
    """The C++ Step of tests/distributed_test.cpp."""

    obs: torch.Tensor
    action: torch.Tensor
    task: str


def make_step(fill, task):
    return Step(
        obs=torch.arange(12, dtype=torch.float32).reshape(4, 3) + fill,
        action=torch.arange(4) + int(fill),
        task=task,
        batch_size=[4],
    )


def sample(fill, with_values=True):
    def v(dtype, shape):
        n = 1
        for s in shape:
            n *= s
        t = torch.arange(1, 1 + n, dtype=torch.float64).reshape(shape)
        t = t + fill if with_values else torch.zeros(shape, dtype=torch.float64)
        if dtype is torch.bool:
            return (t.remainder(2) == 0) if with_values else torch.zeros(shape, dtype=torch.bool)
        return t.to(dtype)

    td = TensorDict(batch_size=[4])
    td["zeta"] = v(torch.float32, [4, 3])
    td["nested", "b"] = v(torch.int32, [4])
    td["nested", "a"] = v(torch.float64, [4, 2, 2])
    td["alpha"] = v(torch.bool, [4, 5])
    td["half"] = v(torch.float16, [4])
    td["bf16"] = v(torch.bfloat16, [4, 2])
    td["i8"] = v(torch.int8, [4])
    td["u8"] = v(torch.uint8, [4])
    td["i16"] = v(torch.int16, [4])
    td["i64"] = v(torch.int64, [4, 1])
    td["c64"] = v(torch.complex64, [4])
    td["label"] = NonTensorData("sent" if with_values else "kept", batch_size=[4])
    return td


def reducible(fill):
    td = TensorDict(batch_size=[3])
    td["x"] = torch.full((3, 2), float(fill))
    td["n", "y"] = torch.full((3,), int(fill))
    return td


def check_equal(got, want, what):
    for key in want.keys(True, True):
        g, w = got.get(key), want.get(key)
        if isinstance(w, torch.Tensor):
            assert g.dtype == w.dtype and g.shape == w.shape and torch.equal(g, w), (
                f"{what}: {key} differs: {g} vs {w}"
            )


def python_sends(rank):
    td = sample(3)
    td.send(1 - rank)
    td.isend(1 - rank, init_tag=5, pseudo_rand=True)
    td.init_remote(dst=1 - rank)
    td.broadcast(src=rank)
    r = reducible(3)
    r.all_reduce()
    check_equal(r, reducible(4), "all_reduce with C++")


def python_receives(rank):
    want = sample(4)
    got = sample(0, with_values=False)
    got.recv(1 - rank)
    check_equal(got, want, "recv from C++")
    got = sample(0, with_values=False)
    got.irecv(1 - rank, init_tag=5, pseudo_rand=True)
    check_equal(got, want, "irecv(pseudo_rand) from C++")
    remote = TensorDict.from_remote_init(src=1 - rank)
    check_equal(remote, want, "from_remote_init from C++")
    assert remote["label"] == "sent", remote["label"]
    b = TensorDict().broadcast(src=1 - rank)
    check_equal(b, want, "broadcast from C++")
    assert b["label"] == "sent"
    r = reducible(3)
    r.all_reduce()
    check_equal(r, reducible(4), "all_reduce with C++")


def python_class(rank):
    # A tensorclass on this end, a C++ TensorClass on the other.
    peer = 1 - rank
    step = make_step(0.5, "reach")
    step.send(peer)
    step.init_remote(dst=peer)
    step.broadcast(src=rank)
    got = make_step(0, "kept")
    got.recv(peer)
    want = make_step(1.5, "")
    assert torch.equal(got.obs, want.obs) and torch.equal(got.action, want.action), got
    assert got.task == "kept", got.task


def run(binary, scenario, python_rank, python_side):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               WORLD_SIZE="2", RANK=str(1 - python_rank),
               TD_DIST_SCENARIO=scenario, TD_DIST_TIMEOUT="60")
    child = subprocess.Popen([binary], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=python_rank,
            world_size=2, timeout=timedelta(seconds=60))
        python_side(python_rank)
        dist.destroy_process_group()
        out, _ = child.communicate(timeout=120)
    except BaseException:
        child.kill()
        print(child.communicate()[0])
        raise
    print(out, end="")
    assert child.returncode == 0, f"the C++ rank failed ({scenario})"
    print(f"ok: {scenario} (Python rank {python_rank})")


def main(binary):
    run(binary, "py_recv", 0, python_sends)
    run(binary, "py_send", 1, python_receives)
    run(binary, "py_class", 0, python_class)


if __name__ == "__main__":
    main(sys.argv[1])
