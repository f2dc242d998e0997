"""A stock TorchRL PPO learner on CartPole-v1, fed by distributed workers.

The learner is TorchRL 0.14.1 as its documentation writes it: a
``ProbabilisticActor`` over an MLP, a value network, ``GAE``,
``ClipPPOLoss`` and a ``DistributedCollector(launcher="submitit_delayed")``
on Gloo. Only the workers change:

  --workers cpp     each worker is ``build/bin/torchrl_worker``: C++ envs, the
                    actor exported with ``tensordict_cpp.export``, weights
                    kept in sync by TorchRL's own weight-sync scheme;
  --workers python  each worker is TorchRL's own worker entry point
                    (``_distributed_init_delayed``), in a Python process.

It trains until the mean return of the last 20 finished training episodes
(the stochastic policy, as collected) reaches ``--target`` and prints one
JSON line with the wall-clock time, the frames and the frames/s. Run it in
the TorchRL virtual environment (``build/torchrl-venv/bin/python``).

  python examples/torchrl/ppo_cartpole.py --workers cpp --num-workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.collectors.distributed import DistributedCollector
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement
from torchrl.envs import GymEnv
from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def make_env():
    return GymEnv("CartPole-v1")


def make_actor_and_critic():
    actor_net = MLP(in_features=4, out_features=2, num_cells=[64, 64], activation_class=nn.Tanh)
    actor = ProbabilisticActor(
        TensorDictModule(actor_net, in_keys=["observation"], out_keys=["logits"]),
        in_keys=["logits"],
        out_keys=["action"],
        spec=make_env().action_spec,
        distribution_class=OneHotCategorical,
        return_log_prob=True,
    )
    critic = ValueOperator(
        MLP(in_features=4, out_features=1, num_cells=[64, 64], activation_class=nn.Tanh),
        in_keys=["observation"],
    )
    return actor, critic


def learner_host():
    # DistributedCollector binds its store to the address the host name
    # resolves to; the workers must reach the same address. Only loopback
    # is used here: anything else is refused rather than contacted.
    address = socket.gethostbyname(socket.gethostname())
    if not address.startswith("127."):
        sys.exit(
            f"ppo_cartpole: the host name resolves to {address}, not a loopback "
            "address; this example only runs its workers on this machine"
        )
    return address


def start_workers(args, world_size, tmp):
    host = learner_host()
    procs = []
    if args.workers == "cpp":
        import tensordict_cpp

        actor, _ = make_actor_and_critic()
        package = os.path.join(tmp, "actor.pt2")
        # A batch of 4 observations: the package's batch dim is dynamic, so
        # the worker's collector runs it on its own batch of envs.
        example = TensorDict(observation=torch.zeros(4, 4), batch_size=[4])
        tensordict_cpp.export(actor, example, package)
        for rank in range(1, world_size):
            cmd = [
                args.worker_binary,
                "--master", f"{host}:{args.tcp_port}",
                "--rank", str(rank),
                "--world-size", str(world_size),
                "--policy", package,
                "--env", "CartPole-v1",
                "--frames-per-batch", str(args.frames_per_batch // args.num_workers),
                "--sync",
            ]
            procs.append(subprocess.Popen(cmd))
    else:
        for rank in range(1, world_size):
            code = (
                "from torchrl.collectors.distributed.generic import _distributed_init_delayed\n"
                f"_distributed_init_delayed({rank}, 'gloo', {host!r}, {args.tcp_port}, {world_size})\n"
            )
            procs.append(subprocess.Popen([sys.executable, "-c", code]))
    return procs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", choices=["cpp", "python"], default="cpp")
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--frames-per-batch", type=int, default=2048)
    parser.add_argument("--max-frames", type=int, default=1_000_000)
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--tcp-port", type=int, default=29650)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker-binary",
                        default=os.path.join(ROOT, "build", "bin", "torchrl_worker"))
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    actor, critic = make_actor_and_critic()
    world_size = args.num_workers + 1
    with tempfile.TemporaryDirectory() as tmp:
        workers = start_workers(args, world_size, tmp)
        try:
            result = train(args, actor, critic)
        finally:
            for proc in workers:
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    print(json.dumps(result))
    return 0 if result["reached"] else 1


def train(args, actor, critic):
    collector = DistributedCollector(
        [make_env] * args.num_workers,
        actor,
        frames_per_batch=args.frames_per_batch,
        total_frames=args.max_frames,
        launcher="submitit_delayed",
        tcp_port=args.tcp_port,
        sync=True,
    )
    advantage = GAE(gamma=0.99, lmbda=0.95, value_network=critic, average_gae=True)
    loss_module = ClipPPOLoss(actor, critic, clip_epsilon=0.2, entropy_coeff=0.0,
                              critic_coeff=0.5, loss_critic_type="l2")
    optim = torch.optim.Adam(loss_module.parameters(), lr=3e-4)
    buffer = ReplayBuffer(storage=LazyTensorStorage(args.frames_per_batch),
                          sampler=SamplerWithoutReplacement(), batch_size=256)

    returns = deque(maxlen=20)
    running = None
    frames = 0
    start = time.perf_counter()
    collect_time = 0.0
    reached = False
    tick = time.perf_counter()
    for batch in collector:
        collect_time += time.perf_counter() - tick
        frames += batch.numel()
        # sync=True stacks one batch per worker: [workers, (envs,) T]. Each
        # row continues its worker's previous batch in time.
        rows = batch.reshape(-1, batch.shape[-1])
        reward = rows["next", "reward"].squeeze(-1)
        done = rows["next", "done"].squeeze(-1)
        if running is None:
            running = torch.zeros(rows.shape[0])
        for t in range(rows.shape[-1]):
            running += reward[:, t]
            for i in done[:, t].nonzero().flatten().tolist():
                returns.append(running[i].item())
                running[i] = 0.0
        mean_return = sum(returns) / len(returns) if returns else 0.0
        if len(returns) == returns.maxlen and mean_return >= args.target:
            reached = True
            break

        for _ in range(10):
            with torch.no_grad():
                advantage(batch)
            buffer.extend(batch.reshape(-1))
            for minibatch in buffer:
                losses = loss_module(minibatch)
                loss = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
                optim.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(loss_module.parameters(), 0.5)
                optim.step()
        collector.update_policy_weights_()
        print(f"frames {frames:>8}  mean return (last {len(returns)}) {mean_return:7.1f}",
              file=sys.stderr, flush=True)
        tick = time.perf_counter()
    elapsed = time.perf_counter() - start
    collector.shutdown()
    return {
        "workers": args.workers,
        "num_workers": args.num_workers,
        "reached": reached,
        "target": args.target,
        "mean_return": sum(returns) / max(len(returns), 1),
        "frames": frames,
        "seconds": round(elapsed, 1),
        "collect_seconds": round(collect_time, 1),
        "frames_per_second_collect": round(frames / max(collect_time, 1e-9), 1),
    }


if __name__ == "__main__":
    sys.exit(main())
