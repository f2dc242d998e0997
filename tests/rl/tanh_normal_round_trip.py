"""The ``tanh_round_trip`` part of probabilistic_interop.py: the TanhNormal
actor of TorchRL's PPO MuJoCo recipe round-trips through the exporter.

The actor is the one mujoco_benchmark.cpp and python_mujoco.py run on
HalfCheetah-v5: the float64 observation (17) cast to float32, TorchRL's MLP
17 -> 64 -> 64 -> 12 with Tanh, NormalParamExtractor, a ProbabilisticActor
with TanhNormal (the env's Box bounds, [-1, 1], as tensors) and
return_log_prob. ``tensordict_cpp.export`` compiles it; C++ loads it with
nn::AOTIModule (probabilistic_interop's ``log_prob`` command), runs it
deterministically, builds the distribution from its head on the parameters
it computed, and writes the log-prob of actions chosen here, the
deterministic sample and the mode, then a seeded random run. Checked:

- the distribution is TanhNormal, and the parameters (loc, scale) equal the
  eager actor's to 1e-5 (the compiled MLP may round differently);
- the log-probs of the same actions (samples of the Python actor, 0,
  +-0.5, +-0.999 and the bounds +-1, which TorchRL's safe tanh clamps):
  equal Python's distribution on C++'s parameters to 1e-6 (relative 1e-6),
  and the eager Python actor's ``get_dist(td).log_prob`` to 1e-4 (its
  parameters differ by the compiled MLP's rounding, which the tanh's
  Jacobian near the bounds magnifies);
- the deterministic sample equals Python's on C++'s parameters exactly, and
  the eager actor's deterministic action to 1e-5; the mode raises on both
  sides (TanhNormal has no analytic mode in TorchRL 0.14.1);
- a seeded random run: the action equals Python's draw from C++'s
  parameters under the same seed, and its log-prob Python's log_prob of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import torch

SEED = 5
BATCH = 6
OBS = 17
ACT = 6


def _actor():
    from tensordict.nn import NormalParamExtractor, TensorDictModule
    from torchrl.modules import MLP, ProbabilisticActor, TanhNormal

    class ToFloat(torch.nn.Module):
        def forward(self, x):
            return x.float()

    torch.manual_seed(7)
    net = torch.nn.Sequential(
        ToFloat(),
        MLP(in_features=OBS, out_features=2 * ACT, num_cells=[64, 64],
            activation_class=torch.nn.Tanh),
        NormalParamExtractor(),
    )
    return ProbabilisticActor(
        TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        out_keys=["action"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": -torch.ones(ACT), "high": torch.ones(ACT)},
        return_log_prob=True,
    )


def run_tanh_round_trip(exe, workdir, compare, check, tensor_json, tensor_from):
    import tensordict_cpp
    from tensordict import TensorDict
    from tensordict.nn import InteractionType, set_interaction_type

    actor = _actor()
    head = actor.module[-1]
    example = TensorDict({"observation": torch.randn(BATCH, OBS, dtype=torch.float64)},
                         batch_size=[BATCH])
    path = os.path.join(workdir, "tanh_round_trip.pt2")
    start = time.time()
    tensordict_cpp.export(actor, example, path)
    print(f"tanh_round_trip: exported in {time.time() - start:.0f} s")

    gen = torch.Generator().manual_seed(11)
    obs = torch.randn(BATCH, OBS, dtype=torch.float64, generator=gen)
    td = TensorDict({"observation": obs}, batch_size=[BATCH])
    with torch.no_grad():
        eager = actor(td.clone())  # random: samples of the actor itself
        eager_dist = actor.get_dist(td.clone())
    # The actions: [4, BATCH, ACT], the first the actor's own samples.
    edges = torch.tensor([0.0, 0.5, -0.5, 0.999, -0.999, 1.0, -1.0])
    fill = edges.repeat((3 * BATCH * ACT) // len(edges) + 1)[: 3 * BATCH * ACT]
    actions = torch.cat([eager["action"].unsqueeze(0), fill.reshape(3, BATCH, ACT)])
    in_path = os.path.join(workdir, "tanh_round_trip_in.json")
    out_path = os.path.join(workdir, "tanh_round_trip_out.json")
    with open(in_path, "w") as f:
        json.dump({"inputs": {"observation": tensor_json(obs)}, "batch": BATCH, "seed": SEED,
                   "actions": tensor_json(actions)}, f)
    subprocess.run([exe, "log_prob", path, in_path, out_path], check=True, timeout=300)
    with open(out_path) as f:
        got = json.load(f)

    check("tanh_round_trip.distribution", got["distribution"] == "TanhNormal", got["distribution"])
    # Parameters: compiled vs eager.
    with torch.no_grad():
        params = actor.module[0](td.clone())
    for key in ("loc", "scale"):
        compare(f"tanh_round_trip.{key}", params[key], got["params"][key], atol=1e-5)
    cpp_params = TensorDict({k: tensor_from(got["params"][k]) for k in ("loc", "scale")},
                            batch_size=[BATCH])
    dist = head.get_dist(cpp_params)
    with torch.no_grad():
        # Log-probs of the same actions.
        compare("tanh_round_trip.log_prob(given params)", dist.log_prob(actions),
                got["log_prob"], atol=1e-6)
        compare("tanh_round_trip.log_prob(actor)", eager_dist.log_prob(actions),
                got["log_prob"], atol=1e-4)
        lp = tensor_from(got["log_prob"])
        worst_given = (lp - dist.log_prob(actions)).abs().max().item()
        worst_actor = (lp - eager_dist.log_prob(actions)).abs().max().item()
        check("tanh_round_trip.log_prob finite", bool(torch.isfinite(lp).all()), f"{lp}")
        # Deterministic sample and mode.
        compare("tanh_round_trip.deterministic_sample(given params)",
                dist.deterministic_sample, got["deterministic_sample"], atol=0.0)
        with set_interaction_type(InteractionType.DETERMINISTIC):
            eager_det = actor(td.clone())["action"]
        compare("tanh_round_trip.deterministic_action", eager_det,
                got["deterministic_action"], atol=1e-5)
        try:
            mode = dist.mode
        except Exception as e:  # the error is what is compared
            mode = e
        compare("tanh_round_trip.mode", mode, got["mode"])
        # A seeded random run.
        torch.manual_seed(SEED)
        expected_action = head._dist_sample(dist, InteractionType.RANDOM)
        compare("tanh_round_trip.random.action(given params)", expected_action,
                got["random"]["action"], atol=0.0)
        cpp_action = tensor_from(got["random"]["action"])
        compare("tanh_round_trip.random.action_log_prob(given params)",
                dist.log_prob(cpp_action), got["random"]["action_log_prob"], atol=1e-6)
    print(f"tanh_round_trip: {actions.numel() // ACT} actions; max |log_prob diff| "
          f"{worst_given:.2e} on C++'s parameters, {worst_actor:.2e} against the eager actor")
