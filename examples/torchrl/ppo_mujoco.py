"""TorchRL's PPO MuJoCo learner on Hopper-v5, collected by C++ or by TorchRL.

The learner is TorchRL 0.14.1's own continuous-control PPO example
(``sota-implementations/ppo``: ``ppo_mujoco.py``, ``utils_mujoco.py``,
``config_mujoco.yaml``) with its configuration:

- actor: ``ProbabilisticActor`` with a ``TanhNormal`` (``tanh_loc=False``,
  bounded by the action spec), its ``loc`` from a 2x64 ``MLP`` with tanh
  activations (orthogonal init, gain 1, zero biases) and a state-independent
  scale (``AddStateIndependentNormalScale``, ``scale_lb=1e-8``);
  critic: a 2x64 tanh ``MLP`` ``ValueOperator`` (orthogonal init, gain 0.01);
- ``GAE(gamma=0.99, lmbda=0.95, average_gae=False)``;
  ``ClipPPOLoss(clip_epsilon=0.2, loss_critic_type="l2", entropy_coeff=0.0,
  critic_coeff=0.25, normalize_advantage=True)``;
- two Adam optimizers (actor, critic), lr 3e-4, eps 1e-5, the lr annealed
  linearly to 0 over the run; 2,048 frames a batch, 10 epochs over it in
  minibatches of 64 drawn without replacement, 1M frames; one env.

Only the collection differs between the two modes:

  --collector cpp      ``tensordict_cpp.Collector(env="Hopper-v5", policy=<.pt2>)``:
                       the C++ Hopper-v5 (envs/mujoco, gymnasium's to the bit)
                       and the actor exported with ``tensordict_cpp.export``,
                       stepped on C++ threads in this process with the GIL
                       released; after every batch's updates the weights go
                       to it with ``update_policy_weights_``.
  --collector torchrl  TorchRL's ``Collector`` on ``GymEnv("Hopper-v5")``
                       with the same (Python) actor.

Observation normalization. TorchRL's example puts ``VecNorm(decay=0.99999,
eps=1e-2)``, ``ClipTransform(-10, 10)`` and ``DoubleToFloat`` on the env,
which updates the running statistics at every step inside the env. The C++
env has no Python transforms to run, and the statistics must be the same
in the collector and in the learner, so here the same normalization is the
first layer of the actor and of the critic (one ``ObservationNorm`` module
shared by both): ``((obs - loc) / scale).clamp(-10, 10).float()``, with
``loc`` and ``scale`` float64 buffers. The buffers travel with the exported
package and with every ``update_policy_weights_`` (the exporter counts
buffers among the weights), so C++ always normalizes with the learner's
statistics. They are VecNorm's running sums (``decay`` applied once per
frame, VecNorm's formula for the scale), updated once per batch after the
PPO epochs, from that batch's raw observations. Holding them fixed during
a batch's epochs keeps the PPO ratio exact: the log-probs the collector
stored were computed with the statistics the loss then uses. The first
batch is collected with ``loc=0, scale=1``. The batches keep the raw
float64 observations; the torchrl mode uses the very same actor, critic
and normalization (no VecNorm on the env), so the two modes differ only in
who collects.

The C++ Hopper-v5 comes from the env library ``envs/mujoco`` built against
the installed wheel (``libtensordict_mujoco.so``; see envs/mujoco/README.md)
and loaded with ``tensordict_cpp.load_env_library``: ``--env-library PATH``
or the ``TENSORDICT_MUJOCO_LIBRARY`` environment variable, else the
package's own (``tensordict_cpp.mujoco_env_library()``, in a package built
with mujoco), unless ``Hopper-v5`` is already registered.

The score is the mean return of the last 20 finished training episodes
(the stochastic policy, as collected); the first batch after which it is
at least ``--target`` (1,500) gives the frames and the wall-clock to the
target. Training goes on to ``--total-frames`` unless ``--stop-at-target``.
At the end the deterministic policy (TorchRL's
``ExplorationType.DETERMINISTIC``: the TanhNormal's deterministic sample)
is evaluated on ``--eval-episodes`` episodes of the same kind of env (the
C++ env through ``tensordict_cpp.envs.CppEnv``, or ``GymEnv``), as
TorchRL's example evaluates at its ``test_interval`` (1M frames). One JSON line per batch goes to
``--log`` and one summary JSON line to stdout. Run it in the TorchRL
virtual environment (``build/torchrl-venv/bin/python``).

  python examples/torchrl/ppo_mujoco.py --env-library build-mujoco/libtensordict_mujoco.so
  python examples/torchrl/ppo_mujoco.py --collector torchrl
  python examples/torchrl/ppo_mujoco.py --smoke --env-library ...   # 3 batches of 1,024
  python examples/torchrl/ppo_mujoco.py --collect-only 20 ...      # collection alone

``--smoke`` trains 3 batches of 1,024 frames and checks the loop: the batch
layout (keys, shapes, dtypes, actions in the box), finite losses, the
collected log-probs equal to the learner's actor's on the same actions
(so the weights and the normalization statistics reached the collector),
the statistics moved, and one weight update per batch. Exit 77 (skipped)
when the C++ Hopper-v5 cannot be loaded because no library was built.

``--collect-only N`` does no training: it times N batches of collection
(after an untimed first one) with the weights pushed after each, in
wall-clock and in CPU seconds of the process (the C++ threads included),
which on a loaded machine is the fairer measure.

Results (Hopper-v5, seed 0, one env, one torch thread, ``nice -n 19`` on
a shared 2-core machine with builds running; details in the PPO section
of docs/environments.md):

- C++ collection, seed 0: the mean return of the last 20 training
  episodes reached 1,500 after 288,768 frames, 1,992 s wall-clock (71 s
  of export, 296 s of collection); after 1M frames 2,467 (best 3,019),
  the deterministic policy 3,579 to 3,590 on 5 episodes.
- C++ collection, seed 1: not reached; the return settled near 600 (best
  670 in 1M frames); the TorchRL run sat on a like plateau for 500k.
- TorchRL's GymEnv, seed 0, same learner: near 600 until about 500k
  frames, then 1,500 after 632,832 frames, 3,912 s wall-clock (2,473 s
  of collection).
- Collection alone costs 8 to 10.5 times less CPU a frame in C++ (5,308
  against 672 frames per CPU second side by side in training; 4,664
  against 442 with ``--collect-only 5``, 2 runs each).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections import deque

import torch
from tensordict import TensorDict
from tensordict.nn import AddStateIndependentNormalScale, TensorDictModule
from torch import nn
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement
from torchrl.envs import ExplorationType, set_exploration_type
from torchrl.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

SKIP = 77
ENV = "Hopper-v5"
OBS_DIM, ACT_DIM = 11, 3  # Hopper-v5: observation float64 [11], action Box(-1, 1, (3,))


class ObservationNorm(nn.Module):
    """VecNorm + ClipTransform(-10, 10) + DoubleToFloat as a module.

    ``loc`` and ``scale`` are buffers (exported and pushed with the
    weights); the running sums behind them are plain attributes, which the
    learner alone keeps.
    """

    def __init__(self, size: int, decay: float = 0.99999, eps: float = 1e-2):
        super().__init__()
        self.register_buffer("loc", torch.zeros(size, dtype=torch.float64))
        self.register_buffer("scale", torch.ones(size, dtype=torch.float64))
        self.decay, self.eps = decay, eps
        self._sum = torch.zeros(size, dtype=torch.float64)
        self._ssq = torch.zeros(size, dtype=torch.float64)
        self._count = 0.0

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return ((observation - self.loc) / self.scale).clamp(-10.0, 10.0).to(torch.float32)

    @torch.no_grad()
    def update(self, observation: torch.Tensor) -> None:
        """Adds a batch's raw observations, ``[T, size]`` or ``[N, T, size]``
        in time order, as VecNorm would have, one step (of N envs) at a time:
        the sums decay once per step."""
        obs = observation.reshape(-1, *observation.shape[-2:]).to(torch.float64)
        steps = obs.shape[-2]
        weight = self.decay ** torch.arange(steps - 1, -1, -1, dtype=torch.float64)
        self._sum = self._sum * self.decay**steps + (weight[:, None] * obs).sum((0, 1))
        self._ssq = self._ssq * self.decay**steps + (weight[:, None] * obs.pow(2)).sum((0, 1))
        self._count = self._count * self.decay**steps + obs.shape[0] * float(weight.sum())
        mean = self._sum / self._count
        std = (self._ssq / self._count - mean.pow(2)).clamp_min(self.eps).sqrt()
        # In place: the loss module's and the collector's views see them.
        self.loc.copy_(mean)
        self.scale.copy_(std.clamp_min(self.eps))


def make_actor_and_critic():
    """utils_mujoco.make_ppo_models_state, with the normalization in front."""
    norm = ObservationNorm(OBS_DIM)
    policy_mlp = MLP(in_features=OBS_DIM, out_features=ACT_DIM, num_cells=[64, 64],
                     activation_class=nn.Tanh)
    for layer in policy_mlp.modules():
        if isinstance(layer, nn.Linear):
            nn.init.orthogonal_(layer.weight, 1.0)
            layer.bias.data.zero_()
    policy_net = nn.Sequential(norm, policy_mlp,
                               AddStateIndependentNormalScale(ACT_DIM, scale_lb=1e-8))
    actor = ProbabilisticActor(
        TensorDictModule(policy_net, in_keys=["observation"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        out_keys=["action"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": -torch.ones(ACT_DIM), "high": torch.ones(ACT_DIM),
                             "tanh_loc": False},
        return_log_prob=True,
        default_interaction_type=ExplorationType.RANDOM,
    )
    value_mlp = MLP(in_features=OBS_DIM, out_features=1, num_cells=[64, 64],
                    activation_class=nn.Tanh)
    for layer in value_mlp.modules():
        if isinstance(layer, nn.Linear):
            nn.init.orthogonal_(layer.weight, 0.01)
            layer.bias.data.zero_()
    critic = ValueOperator(nn.Sequential(norm, value_mlp), in_keys=["observation"])
    return actor, critic, norm


# -- collectors ---------------------------------------------------------------


def ensure_cpp_env(library: str | None) -> None:
    import tensordict_cpp

    if ENV in tensordict_cpp.registered_envs():
        return
    if not library:
        # The package's own MuJoCo env library, when it was built with one
        # (a mujoco of another version is refused here, naming both).
        try:
            library = tensordict_cpp.mujoco_env_library()
        except (AttributeError, ImportError) as error:
            print(f"SKIPPED: the installed tensordict_cpp does not register {ENV} ({error}), "
                  "and no --env-library (or TENSORDICT_MUJOCO_LIBRARY) was given; build "
                  "envs/mujoco against the wheel (envs/mujoco/README.md)", file=sys.stderr)
            sys.exit(SKIP)
    if not os.path.isfile(library):
        print(f"SKIPPED: no env library at {library}", file=sys.stderr)
        sys.exit(SKIP)
    try:
        tensordict_cpp.load_env_library(library)
    except ValueError as error:
        if "NumpyGenerator" in str(error):  # a wheel older than the envs
            print(f"SKIPPED: {error}", file=sys.stderr)
            sys.exit(SKIP)
        raise


def make_cpp_collector(args, actor, package):
    import tensordict_cpp

    # The package's batch dim is dynamic: the collector runs it on its own
    # batch of sub-envs.
    example = TensorDict(observation=torch.zeros(4, OBS_DIM, dtype=torch.float64), batch_size=[4])
    tensordict_cpp.export(actor, example, package)
    return tensordict_cpp.Collector(
        ENV,
        package,
        frames_per_batch=args.frames_per_batch,
        total_frames=args.total_frames,
        num_envs=args.num_envs,
        num_threads=args.num_threads,
        seed=args.seed,
    )


def make_gym_env(seed: int, num_envs: int = 1):
    from torchrl.envs import GymEnv

    if num_envs > 1:
        env = GymEnv(ENV, device="cpu", num_envs=num_envs)
    else:
        env = GymEnv(ENV, device="cpu")
    env.set_seed(seed)
    return env


def make_torchrl_collector(args, actor):
    from torchrl.collectors import Collector

    return Collector(
        create_env_fn=make_gym_env(args.seed, args.num_envs),
        policy=actor,
        frames_per_batch=args.frames_per_batch,
        total_frames=args.total_frames,
        device="cpu",
        storing_device="cpu",
        max_frames_per_traj=-1,
    )


# -- checks of --smoke --------------------------------------------------------


def check_batch(args, batch, actor, log_prob_key):
    steps = args.frames_per_batch // args.num_envs
    want = [steps] if args.num_envs == 1 else [args.num_envs, steps]
    assert list(batch.batch_size) == want, f"batch size {list(batch.batch_size)}, expected {want}"
    for key, dtype, shape in [
        ("observation", torch.float64, [OBS_DIM]),
        ("action", torch.float32, [ACT_DIM]),
        (log_prob_key, torch.float32, []),
        (("next", "observation"), torch.float64, [OBS_DIM]),
        (("next", "reward"), torch.float32, [1]),
        (("next", "done"), torch.bool, [1]),
        (("next", "terminated"), torch.bool, [1]),
        (("next", "truncated"), torch.bool, [1]),
        (("collector", "traj_ids"), torch.int64, []),
    ]:
        value = batch.get(key, None)
        assert value is not None, f"the batch has no {key!r}: {batch}"
        assert value.dtype == dtype, f"{key!r} is {value.dtype}, expected {dtype}"
        assert list(value.shape) == want + shape, f"{key!r} has shape {list(value.shape)}"
    action = batch["action"]
    assert torch.isfinite(action).all() and action.abs().max() <= 1.0, "an action left the box"
    assert torch.equal(batch["next", "done"],
                       batch["next", "terminated"] | batch["next", "truncated"])
    # The collected log-probs are the learner's actor's on the same actions:
    # its weights and its normalization statistics, as the collector used.
    with torch.no_grad():
        lp = actor.get_dist(batch.select("observation")).log_prob(action)
    err = (lp - batch[log_prob_key]).abs().max().item()
    assert err < 1e-3, f"{log_prob_key} differs from the actor's by {err}"
    return err


# -- the learner ----------------------------------------------------------------


def train(args, collector, actor, critic, norm, out):
    advantage = GAE(gamma=0.99, lmbda=0.95, value_network=critic, average_gae=False)
    loss_module = ClipPPOLoss(
        actor_network=actor,
        critic_network=critic,
        clip_epsilon=0.2,
        loss_critic_type="l2",
        entropy_coeff=0.0,
        critic_coeff=0.25,
        normalize_advantage=True,
    )
    log_prob_key = loss_module.tensor_keys.sample_log_prob
    actor_optim = torch.optim.Adam(actor.parameters(), lr=args.lr, eps=1e-5)
    critic_optim = torch.optim.Adam(critic.parameters(), lr=args.lr, eps=1e-5)
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(args.frames_per_batch),
                                    sampler=SamplerWithoutReplacement(),
                                    batch_size=args.mini_batch_size)
    num_mini_batches = args.frames_per_batch // args.mini_batch_size
    total_updates = ((args.total_frames // args.frames_per_batch) * args.ppo_epochs
                     * num_mini_batches)

    returns = deque(maxlen=args.window)
    running = None
    frames = updates = pushes = 0
    best = -math.inf
    to_target = None
    collect_time = learn_time = collect_cpu = 0.0
    start = tick = time.perf_counter()
    cpu_tick = time.process_time()
    for i, batch in enumerate(collector):
        collect_time += time.perf_counter() - tick
        # CPU time of the whole process (the C++ threads included): on a
        # loaded machine, what the collection cost, where wall-clock also
        # counts the waits for a core.
        collect_cpu += time.process_time() - cpu_tick
        frames += batch.numel()
        if args.collect_only:
            # Collection alone, weights pushed after each batch; the first
            # batch (start-up) is not timed.
            if i == 0:
                collect_time = collect_cpu = 0.0
                frames = 0
            if args.collector == "cpp":
                collector.update_policy_weights_(TensorDict.from_module(actor))
            else:
                collector.update_policy_weights_()
            if i == args.collect_only:
                break
            tick, cpu_tick = time.perf_counter(), time.process_time()
            continue

        # Episode returns, following each env's row across batches.
        rows = batch.reshape(-1, batch.shape[-1])
        reward = rows["next", "reward"].squeeze(-1)
        done = rows["next", "done"].squeeze(-1)
        if running is None:
            running = torch.zeros(rows.shape[0], dtype=torch.float64)
        finished = []
        for t in range(rows.shape[-1]):
            running += reward[:, t]
            for e in done[:, t].nonzero().flatten().tolist():
                finished.append(running[e].item())
                running[e] = 0.0
        returns.extend(finished)
        mean_return = sum(returns) / len(returns) if returns else float("nan")
        if len(returns) == returns.maxlen:
            best = max(best, mean_return)

        lp_err = check_batch(args, batch, actor, log_prob_key) if args.smoke else None

        # TorchRL's ppo_mujoco.py: GAE, then minibatches without replacement,
        # per epoch; the lr annealed per update.
        learn_start = time.perf_counter()
        sums = {"loss_objective": 0.0, "loss_critic": 0.0, "loss_entropy": 0.0}
        n = 0
        for _ in range(args.ppo_epochs):
            with torch.no_grad():
                advantage(batch)
            buffer.extend(batch.reshape(-1))
            for minibatch in buffer:
                alpha = 1.0 - updates / total_updates
                for group in actor_optim.param_groups + critic_optim.param_groups:
                    group["lr"] = args.lr * alpha
                updates += 1
                losses = loss_module(minibatch)
                actor_loss = losses["loss_objective"] + losses["loss_entropy"]
                critic_loss = losses["loss_critic"]
                actor_loss.backward()
                critic_loss.backward()
                actor_optim.step()
                critic_optim.step()
                actor_optim.zero_grad()
                critic_optim.zero_grad()
                for key in sums:
                    sums[key] += losses[key].item()
                n += 1
        means = {key: value / n for key, value in sums.items()}
        if args.smoke:
            assert all(math.isfinite(v) for v in means.values()), f"a loss is not finite: {means}"
        # New statistics from this batch, then the weights (and the
        # statistics, buffers of the actor) to the collector.
        norm.update(batch["observation"])
        if args.collector == "cpp":
            collector.update_policy_weights_(TensorDict.from_module(actor))
        else:
            collector.update_policy_weights_()
        pushes += 1
        learn_time += time.perf_counter() - learn_start
        elapsed = time.perf_counter() - start

        if (to_target is None and len(returns) == returns.maxlen
                and mean_return >= args.target):
            to_target = {"frames": frames, "seconds": round(elapsed, 1),
                         "collect_seconds": round(collect_time, 1),
                         "collect_cpu_seconds": round(collect_cpu, 1)}
        record = {"batch": i, "frames": frames, "mean_return": round(mean_return, 1),
                  "episodes": len(finished),
                  "batch_returns": [round(r, 1) for r in finished],
                  "seconds": round(elapsed, 1), "collect_seconds": round(collect_time, 2),
                  "collect_cpu_seconds": round(collect_cpu, 2),
                  "learn_seconds": round(learn_time, 1),
                  "loadavg": round(os.getloadavg()[0], 2),
                  **{k: round(v, 5) for k, v in means.items()}}
        if lp_err is not None:
            record["log_prob_max_err"] = lp_err
        if args.log:
            with open(args.log, "a") as f:
                f.write(json.dumps(record) + "\n")
        print(f"frames {frames:>8}  mean return (last {len(returns)}) {mean_return:7.1f}  "
              f"{elapsed:7.1f} s (collect {collect_time:6.1f} s)  "
              f"obj {means['loss_objective']:+.4f} critic {means['loss_critic']:.4f}",
              file=sys.stderr, flush=True)
        if to_target is not None and args.stop_at_target:
            break
        tick, cpu_tick = time.perf_counter(), time.process_time()
    elapsed = time.perf_counter() - start
    if args.collect_only:
        out.update({"collect_only_batches": i, "frames": frames,
                    "collect_seconds": round(collect_time, 2),
                    "collect_cpu_seconds": round(collect_cpu, 2),
                    "frames_per_second_collect": round(frames / max(collect_time, 1e-9), 1),
                    "frames_per_cpu_second_collect": round(frames / max(collect_cpu, 1e-9), 1)})
        return

    if args.smoke:
        assert pushes == i + 1
        if args.collector == "cpp":
            # Each push is used from the next batch on: the last is pending.
            assert collector.policy_version == pushes - 1, collector.policy_version
        assert not torch.equal(norm.scale, torch.ones_like(norm.scale)), "statistics never moved"
        # The loss module runs the very statistics the collector got.
        for name, buf in loss_module.named_buffers():
            if name.endswith(".loc"):
                assert torch.equal(buf, norm.loc), f"the loss module's {name} is stale"
    out.update({
        "frames": frames,
        "batches": i + 1,
        "final_mean_return": round(mean_return, 1),
        "best_mean_return": round(best, 1) if best > -math.inf else None,
        "reached": to_target is not None,
        "to_target": to_target,
        "seconds": round(elapsed, 1),
        "collect_seconds": round(collect_time, 1),
        "collect_cpu_seconds": round(collect_cpu, 1),
        "learn_seconds": round(learn_time, 1),
        "frames_per_second_collect": round(frames / max(collect_time, 1e-9), 1),
        "frames_per_cpu_second_collect": round(frames / max(collect_cpu, 1e-9), 1),
    })


def evaluate(args, actor, episodes):
    """The deterministic policy on fresh envs of the kind collected from."""
    if episodes <= 0:
        return None
    if args.collector == "cpp":
        from tensordict_cpp.envs import CppEnv

        env = CppEnv(ENV, 1)
        env.set_seed(args.seed + 10_000)
    else:
        env = make_gym_env(args.seed + 10_000)
    results = []
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        for _ in range(episodes):
            rollout = env.rollout(1000, actor, break_when_any_done=True)
            results.append(rollout["next", "reward"].sum().item())
    return [round(r, 1) for r in results]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collector", choices=["cpp", "torchrl"], default="cpp")
    parser.add_argument("--env-library", default=os.environ.get("TENSORDICT_MUJOCO_LIBRARY"),
                        help="libtensordict_mujoco.so to load when the installed "
                             "tensordict_cpp does not register Hopper-v5")
    parser.add_argument("--total-frames", type=int, default=1_000_000)
    parser.add_argument("--frames-per-batch", type=int, default=2048)
    parser.add_argument("--mini-batch-size", type=int, default=64)
    parser.add_argument("--ppo-epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--num-envs", type=int, default=1)
    parser.add_argument("--num-threads", type=int, default=1, help="C++ collector threads")
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--target", type=float, default=1500.0)
    parser.add_argument("--window", type=int, default=20,
                        help="finished training episodes the mean return is taken over")
    parser.add_argument("--stop-at-target", action="store_true")
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log", help="appends one JSON line per batch")
    parser.add_argument("--collect-only", type=int, default=0, metavar="N",
                        help="no training: time N batches of collection (after one "
                             "untimed batch), the weights pushed after each")
    parser.add_argument("--smoke", action="store_true",
                        help="3 batches of 1,024 frames; checks the layout, the losses, the "
                             "log-probs and the weight pushes")
    args = parser.parse_args()
    if args.smoke:
        args.frames_per_batch, args.total_frames, args.eval_episodes = 1024, 3 * 1024, 0
    if args.collect_only:
        args.total_frames = (args.collect_only + 1) * args.frames_per_batch
        args.eval_episodes = 0
    if args.frames_per_batch % args.num_envs:
        parser.error("--frames-per-batch must be a multiple of --num-envs")
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.torch_threads)

    actor, critic, norm = make_actor_and_critic()
    out = {"collector": args.collector, "env": ENV, "seed": args.seed,
           "num_envs": args.num_envs, "torch_threads": args.torch_threads,
           "total_frames": args.total_frames, "target": args.target, "window": args.window}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        if args.collector == "cpp":
            ensure_cpp_env(args.env_library)
            collector = make_cpp_collector(args, actor, os.path.join(tmp, "actor.pt2"))
            out["num_threads"] = args.num_threads
        else:
            collector = make_torchrl_collector(args, actor)
        out["setup_seconds"] = round(time.perf_counter() - start, 1)
        try:
            train(args, collector, actor, critic, norm, out)
        finally:
            collector.shutdown()
    if args.log:
        with open(args.log, "a") as f:
            f.write(json.dumps({"summary": out}) + "\n")
    out["eval_returns"] = evaluate(args, actor, args.eval_episodes)
    print(json.dumps(out), flush=True)
    if args.smoke or args.collect_only:
        if args.smoke:
            print("smoke: layout, finite losses, log-probs and weight pushes checked",
                  file=sys.stderr)
        return 0
    return 0 if out["reached"] else 1


if __name__ == "__main__":
    sys.exit(main())
