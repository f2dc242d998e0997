#!/usr/bin/env python3
"""A Python rank (real tensordict + torch.distributed, Gloo) and a C++ rank in
one process group, both directions.

Usage: distributed_interop.py DISTRIBUTED_TEST_BINARY

The C++ side is tests/distributed_test.cpp run as a rank (TD_DIST_SCENARIO
py_recv / py_send / py_class / py_mixed); this script is the other rank and
builds the same dicts (sample() mirrors the C++ sample()). Both sides use
default options: the C++ ranks pick Python's wire toward a rank that did not
announce the checked one, and keep the checked wire between themselves
(py_mixed: C++ ranks 0 and 2, Python rank 1).
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
    peer = 1 - rank
    td = sample(3)
    td.send(peer)
    td.isend(peer)
    td.send(peer)
    td.isend(peer, init_tag=5, pseudo_rand=True)
    td.send(peer, consolidated=True)
    td.init_remote(dst=peer)
    td.broadcast(src=rank)
    r = reducible(3)
    r.all_reduce()
    check_equal(r, reducible(4), "all_reduce with C++")


def python_receives(rank):
    peer = 1 - rank
    want = sample(4)
    got = sample(0, with_values=False)
    assert got.recv(peer) == 10
    check_equal(got, want, "recv from C++")
    assert got["label"] == "kept"
    got = sample(0, with_values=False)
    got.irecv(peer)
    check_equal(got, want, "irecv from C++'s isend")
    got = sample(0, with_values=False)
    futures = got.irecv(peer, return_premature=True)
    for future in futures:
        future.wait()
    check_equal(got, want, "irecv(return_premature) from C++'s isend")
    got = sample(0, with_values=False)
    got.irecv(peer, init_tag=5, pseudo_rand=True)
    check_equal(got, want, "irecv(pseudo_rand) from C++")
    cons = sample(0, with_values=False).consolidate()
    cons.recv(peer, consolidated=True)
    check_equal(cons, want, "recv(consolidated) from C++")
    remote = TensorDict.from_remote_init(src=peer)
    check_equal(remote, want, "from_remote_init from C++")
    assert remote["label"] == "sent", remote["label"]
    b = TensorDict().broadcast(src=peer)
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
    # A C++ class names no class in its metadata: a TensorDict arrives.
    remote = Step.from_tensordict(TensorDict.from_remote_init(src=peer))
    want = make_step(2.5, "")
    assert torch.equal(remote.obs, want.obs), remote
    assert torch.equal(remote.action, want.action), remote
    assert remote.task == "sent", remote.task


def python_between_two_cpp_ranks(rank):
    # Rank 1 of three: C++ rank 0 sends to this rank, this rank sends to C++
    # rank 2, while the C++ ranks check each other (see py_mixed).
    assert rank == 1
    # The C++ ranks announced the checked wire in the group's own store
    # (before their Gloo connect, which this rank's connect waited for).
    store = dist.distributed_c10d._get_default_store()
    for cpp_rank in (0, 2):
        assert store.get(f"tensordict_cpp/checked_wire/{cpp_rank}") == b"tdcheck1"
    assert not store.check(["tensordict_cpp/checked_wire/1"])
    got = sample(0, with_values=False)
    got.recv(0)
    check_equal(got, sample(4), "recv from C++ rank 0")
    sample(3).isend(2)


def run(binary, scenario, python_rank, python_side, world=2):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    children = []
    for rank in range(world):
        if rank == python_rank:
            continue
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   WORLD_SIZE=str(world), RANK=str(rank),
                   TD_DIST_SCENARIO=scenario, TD_DIST_TIMEOUT="60")
        children.append(subprocess.Popen(
            [binary], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True))
    try:
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=python_rank,
            world_size=world, timeout=timedelta(seconds=60))
        python_side(python_rank)
        dist.destroy_process_group()
        outputs = [child.communicate(timeout=120)[0] for child in children]
    except BaseException:
        for child in children:
            child.kill()
            print(child.communicate()[0])
        raise
    for child, out in zip(children, outputs):
        print(out, end="")
        assert child.returncode == 0, f"a C++ rank failed ({scenario})"
    print(f"ok: {scenario} (Python rank {python_rank} of {world})")


def main(binary):
    run(binary, "py_recv", 0, python_sends)
    run(binary, "py_send", 1, python_receives)
    run(binary, "py_class", 0, python_class)
    run(binary, "py_mixed", 1, python_between_two_cpp_ranks, world=3)


if __name__ == "__main__":
    main(sys.argv[1])
