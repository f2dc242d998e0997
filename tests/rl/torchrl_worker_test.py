"""A stock TorchRL 0.14.1 DistributedCollector learner with one C++ worker.

Usage: torchrl_worker_test.py WORKER_EXE WORK_DIR

The learner is TorchRL's own (launcher="submitit_delayed", Gloo); only the
host it finds is pinned to loopback. The worker is torchrl_worker_rank (see
its header comment for the values its batches hold). Checks:
1. the worker's batch layout (keys, dtypes, shapes) equals a local TorchRL
   Collector batch on the same env and policy;
2. every batch's values: the initial weights, a weights update visible in
   the next batch, a refused (NaN) update that raises on the learner and
   keeps the old weights, set_seed visible in the next batch, then a clean
   shutdown with the worker's counts;
3. sync=True with two C++ workers (world size 3): stacked batches and
   blocking weight sends;
4. a learner that goes away: the worker exits with a clear error, in time;
5. a learner that stays silent: the worker ends at its idle timeout.
Every wait is bounded; all traffic stays on 127.0.0.1.
"""

import functools
import os
import random
import socket
import subprocess
import sys
import time

# Loopback only: TorchRL's learner binds its stores to
# gethostbyname(gethostname()), and Gloo picks the interface below.
socket.gethostname = lambda: "localhost"
os.environ["GLOO_SOCKET_IFNAME"] = "lo"

import torch  # noqa: E402
from tensordict.nn import TensorDictModule  # noqa: E402
from torchrl.collectors import Collector  # noqa: E402
from torchrl.collectors.distributed import DistributedCollector  # noqa: E402
from torchrl.envs import GymEnv  # noqa: E402

FRAMES = 8
BATCHES = 5
WORKER_WAIT_S = 60


def free_base_port():
    """A port p such that p, p + 1 and p + 2 are free on 127.0.0.1 (the
    process group's store, the collector store, the weight store)."""
    for _ in range(200):
        base = random.randint(20000, 60000)
        socks = []
        try:
            for port in (base, base + 1, base + 2):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no three consecutive free ports")


def make_policy():
    torch.manual_seed(0)
    return TensorDictModule(
        torch.nn.Linear(4, 2), in_keys=["observation"], out_keys=["action"]
    )


def make_collector(port, policy, total_frames, sync=False, workers=1):
    return DistributedCollector(
        [functools.partial(GymEnv, "CartPole-v1")] * workers,
        policy,
        frames_per_batch=FRAMES * workers,
        total_frames=total_frames,
        launcher="submitit_delayed",
        backend="gloo",
        tcp_port=port,
        sync=sync,
    )


def start_worker(
    exe, port, layout_file, idle_timeout_ms=None, sync=False, rank=1, world_size=2
):
    args = [exe, f"127.0.0.1:{port}", str(rank), str(world_size), str(FRAMES)]
    args.append(layout_file)
    if idle_timeout_ms is not None or sync:
        args.append(str(idle_timeout_ms or 600_000))
    if sync:
        args.append("sync")
    return subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(proc, what):
    try:
        out, err = proc.communicate(timeout=WORKER_WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{what}: the worker did not exit in time\n{err}")
    return proc.returncode, out, err


DTYPES = {torch.float32: "Float", torch.int64: "Long", torch.bool: "Bool"}


def check_layout(layout_file, policy):
    local = Collector(
        GymEnv("CartPole-v1"),
        policy=policy,
        frames_per_batch=FRAMES,
        total_frames=-1,
        split_trajs=False,
        return_same_td=True,
    )
    for batch in local:
        break
    expected = sorted(
        f"{'.'.join(k) if isinstance(k, tuple) else k}|"
        f"{DTYPES[batch.get(k).dtype]}|{list(batch.get(k).shape)}"
        for k in batch.keys(True, True)
    )
    local.shutdown()
    with open(layout_file) as f:
        got = sorted(line.strip() for line in f if line.strip())
    assert got == expected, f"layout differs:\nC++:   {got}\nTorchRL: {expected}"
    return len(got)


def expected_action(obs, policy):
    with torch.no_grad():
        return obs @ policy.module.weight.T + policy.module.bias


def test_protocol(exe, work_dir):
    port = free_base_port()
    layout_file = os.path.join(work_dir, "layout.txt")
    policy = make_policy()
    worker = start_worker(exe, port, layout_file)
    collector = make_collector(port, policy, FRAMES * BATCHES)
    gen = torch.Generator().manual_seed(0)
    weights_now = [p.detach().clone() for p in policy.parameters()]
    seen = 0
    try:
        for i, data in enumerate(collector):
            assert data.batch_size == torch.Size([FRAMES]), data.batch_size
            obs = torch.randn(FRAMES, 4, generator=gen)
            next_obs = torch.randn(FRAMES, 4, generator=gen)
            assert torch.equal(data["observation"], obs), f"batch {i}: observation"
            assert torch.equal(data["next", "observation"], next_obs), i
            assert (data["collector", "traj_ids"] == i).all(), f"batch {i}: order"
            assert (data["next", "reward"] == 1).all()
            assert not data["done"].any() and not data["next", "truncated"].any()
            with torch.no_grad():
                w, b = weights_now
                want = obs @ w.T + b
            torch.testing.assert_close(data["action"], want, msg=f"batch {i}: action")
            seen += 1
            with torch.no_grad():
                if i == 0:
                    # An update: the next batch's actions use it.
                    policy.module.weight.mul_(-2).add_(0.25)
                    policy.module.bias.fill_(3.0)
                    collector.update_policy_weights_()
                elif i == 1:
                    # NaN weights: refused by the worker, named, and the
                    # learner raises; the worker keeps the weights it had.
                    good = policy.module.weight.clone()
                    policy.module.weight[0, 0] = float("nan")
                    try:
                        collector.update_policy_weights_()
                    except RuntimeError as e:
                        msg = str(e)
                        assert "refused" in msg and "('module', 'weight')" in msg, msg
                        assert "NaN or infinity" in msg, msg
                    else:
                        raise AssertionError("NaN weights were not refused")
                    policy.module.weight.copy_(good)
                elif i == 2:
                    # set_seed: the hook's seed comes back; the next batch
                    # draws from the new seed. Then another update.
                    new_seed = collector.set_seed(7)
                    assert new_seed == 1007, new_seed
                    gen = torch.Generator().manual_seed(7)
                    policy.module.weight.fill_(0.5)
                    policy.module.bias.fill_(-1.0)
                    collector.update_policy_weights_()
            weights_now = [p.detach().clone() for p in policy.parameters()]
    finally:
        collector.shutdown()
    assert seen == BATCHES, seen
    rc, out, err = finish(worker, "protocol")
    assert rc == 0, f"worker failed ({rc}):\n{err}"
    counts = (
        f"batches={BATCHES} frames={BATCHES * FRAMES} weight_updates=3 "
        "weights_refused=1 seeds=1"
    )
    assert out.strip() == counts, out
    leaves = check_layout(layout_file, make_policy())
    print(f"protocol: {seen} batches checked, layout of {leaves} leaves equal, {out.strip()}")


def test_sync(exe, work_dir):
    """sync=True with two C++ workers: the learner stacks their batches
    ([2, FRAMES]) and sends weights with blocking sends; no worker reports
    "done"."""
    port = free_base_port()
    policy = make_policy()
    workers = [
        start_worker(
            exe,
            port,
            os.path.join(work_dir, f"layout_sync_{rank}.txt"),
            sync=True,
            rank=rank,
            world_size=3,
        )
        for rank in (1, 2)
    ]
    collector = make_collector(port, policy, FRAMES * 2 * 3, sync=True, workers=2)
    gen = torch.Generator().manual_seed(0)
    try:
        for i, data in enumerate(collector):
            assert data.batch_size == torch.Size([2, FRAMES]), data.batch_size
            obs = torch.randn(FRAMES, 4, generator=gen)
            torch.randn(FRAMES, 4, generator=gen)
            for w in range(2):  # both workers draw from seed 0
                assert torch.equal(data["observation"][w], obs), f"sync {i}, {w}"
                torch.testing.assert_close(
                    data["action"][w], expected_action(obs, policy), msg=f"sync {i}"
                )
            with torch.no_grad():
                policy.module.bias.add_(1.0)
            collector.update_policy_weights_()
    finally:
        collector.shutdown()
    for rank, worker in zip((1, 2), workers):
        rc, out, err = finish(worker, f"sync rank {rank}")
        assert rc == 0, f"worker {rank} failed ({rc}):\n{err}"
        assert out.strip() == (
            f"batches=3 frames={3 * FRAMES} weight_updates=4 weights_refused=0 "
            "seeds=0"
        ), out
    print(f"sync: 3 batches of 2 workers checked, {out.strip()} each")


def learner_child(port, mode):
    """A learner process that goes away after one batch, or stays silent."""
    policy = make_policy()
    collector = make_collector(port, policy, FRAMES * BATCHES)
    if mode == "dies":
        for _ in collector:
            break
        os._exit(0)  # no shutdown: the stores and the group vanish
    time.sleep(WORKER_WAIT_S)
    os._exit(0)


def run_with_child(exe, work_dir, mode, idle_timeout_ms):
    port = free_base_port()
    layout_file = os.path.join(work_dir, f"layout_{mode}.txt")
    worker = start_worker(exe, port, layout_file, idle_timeout_ms)
    child = subprocess.Popen(
        [sys.executable, __file__, "--learner", str(port), mode],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    start = time.monotonic()
    try:
        rc, out, err = finish(worker, mode)
    finally:
        child.kill()
        child.communicate()
    return rc, err, time.monotonic() - start


def test_learner_goes_away(exe, work_dir):
    rc, err, took = run_with_child(exe, work_dir, "dies", 600_000)
    assert rc == 1, f"rc {rc}: {err}"
    assert "went away" in err and "TorchRL worker rank 1" in err, err
    print(f"learner gone: the worker exited in {took:.1f} s: {err.strip().splitlines()[-1]}")


def test_learner_silent(exe, work_dir):
    rc, err, took = run_with_child(exe, work_dir, "silent", 3000)
    assert rc == 1, f"rc {rc}: {err}"
    assert "no instruction from the learner" in err and "idle_timeout" in err, err
    print(f"learner silent: the worker exited in {took:.1f} s: {err.strip().splitlines()[-1]}")


def main():
    if sys.argv[1] == "--learner":
        learner_child(int(sys.argv[2]), sys.argv[3])
        return
    exe, work_dir = sys.argv[1], sys.argv[2]
    os.makedirs(work_dir, exist_ok=True)
    test_protocol(exe, work_dir)
    test_sync(exe, work_dir)
    test_learner_goes_away(exe, work_dir)
    test_learner_silent(exe, work_dir)
    print("OK")


if __name__ == "__main__":
    main()
