"""A stock TorchRL PPO learner on CartPole-v1, fed by tensordict_cpp.Collector.

The learner is the one of ppo_cartpole.py (TorchRL 0.14.1 as its
documentation writes it: a ``ProbabilisticActor`` over an MLP, a value
network, ``GAE``, ``ClipPPOLoss``); only the collector differs: instead of
distributed workers in other processes, ``tensordict_cpp.Collector`` runs
the C++ CartPole envs and the actor exported with ``tensordict_cpp.export``
on C++ threads inside this process, the GIL released while it collects. No
processes, no ports. After each round of updates the new weights go to the
collector with ``update_policy_weights_(TensorDict.from_module(actor))``;
the next batch is collected with them.

It trains until the mean return of the last 20 finished training episodes
(the stochastic policy, as collected) reaches ``--target`` and prints one
JSON line with the wall-clock time, the frames and the frames/s of
collection. Run it in the TorchRL virtual environment
(``build/torchrl-venv/bin/python``), with tensordict_cpp installed
(``make deps`` installs it; the venv sees it through the system
site-packages).

  python examples/torchrl/ppo_inprocess.py --num-envs 8 --num-threads 2
  python examples/torchrl/ppo_inprocess.py --smoke     # 3 batches, no target
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import deque

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.data import LazyTensorStorage, OneHot, ReplayBuffer
from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement
from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

import tensordict_cpp


def make_actor_and_critic():
    actor_net = MLP(in_features=4, out_features=2, num_cells=[64, 64], activation_class=nn.Tanh)
    actor = ProbabilisticActor(
        TensorDictModule(actor_net, in_keys=["observation"], out_keys=["logits"]),
        in_keys=["logits"],
        out_keys=["action"],
        spec=OneHot(2),  # GymEnv("CartPole-v1").action_spec
        distribution_class=OneHotCategorical,
        return_log_prob=True,
    )
    critic = ValueOperator(
        MLP(in_features=4, out_features=1, num_cells=[64, 64], activation_class=nn.Tanh),
        in_keys=["observation"],
    )
    return actor, critic


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--num-threads", type=int, default=2)
    parser.add_argument("--frames-per-batch", type=int, default=2048)
    parser.add_argument("--max-frames", type=int, default=1_000_000)
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true",
                        help="train on 3 small batches, check that the weights reach the "
                             "collector, no target")
    args = parser.parse_args()
    if args.smoke:
        args.frames_per_batch, args.max_frames = 512, 3 * 512
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    actor, critic = make_actor_and_critic()
    with tempfile.TemporaryDirectory() as tmp:
        package = os.path.join(tmp, "actor.pt2")
        # The package's batch dim is dynamic: the collector runs it on its
        # own batch of envs.
        example = TensorDict(observation=torch.zeros(4, 4), batch_size=[4])
        tensordict_cpp.export(actor, example, package)
        collector = tensordict_cpp.Collector(
            "CartPole-v1",
            package,
            frames_per_batch=args.frames_per_batch,
            total_frames=args.max_frames,
            num_envs=args.num_envs,
            num_threads=args.num_threads,
            seed=args.seed,
        )
        result = train(args, collector, actor, critic)
    print(json.dumps(result))
    if args.smoke:
        return 0
    return 0 if result["reached"] else 1


def train(args, collector, actor, critic):
    advantage = GAE(gamma=0.99, lmbda=0.95, value_network=critic, average_gae=True)
    loss_module = ClipPPOLoss(actor, critic, clip_epsilon=0.2, entropy_coeff=0.0,
                              critic_coeff=0.5, loss_critic_type="l2")
    optim = torch.optim.Adam(loss_module.parameters(), lr=3e-4)
    buffer = ReplayBuffer(storage=LazyTensorStorage(collector.requested_frames_per_batch),
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
        # [num_envs, T] (or [T] for one env): each row goes on from the
        # same env's row of the previous batch.
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
        if not args.smoke and len(returns) == returns.maxlen and mean_return >= args.target:
            reached = True
            break

        if args.smoke:
            # The collected log-probs are the exported actor's: its current
            # weights, as the learner holds them.
            with torch.no_grad():
                lp = actor.get_dist(batch.select("observation")).log_prob(batch["action"])
            key = next(k for k in batch.keys() if k.endswith("log_prob"))
            assert torch.allclose(lp, batch[key], atol=1e-5), f"{key} is not the actor's"
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
        collector.update_policy_weights_(TensorDict.from_module(actor))
        print(f"frames {frames:>8}  mean return (last {len(returns)}) {mean_return:7.1f}",
              file=sys.stderr, flush=True)
        tick = time.perf_counter()
    elapsed = time.perf_counter() - start
    collector.shutdown()
    return {
        "collector": "tensordict_cpp.Collector",
        "num_envs": args.num_envs,
        "num_threads": args.num_threads,
        "reached": reached,
        "target": args.target,
        "mean_return": sum(returns) / max(len(returns), 1),
        "frames": frames,
        "policy_version": collector.policy_version,
        "seconds": round(elapsed, 1),
        "collect_seconds": round(collect_time, 1),
        "frames_per_second_collect": round(frames / max(collect_time, 1e-9), 1),
    }


if __name__ == "__main__":
    sys.exit(main())
