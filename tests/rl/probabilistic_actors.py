"""The ``actors`` part of probabilistic_interop.py: TorchRL ProbabilisticActors
exported with tensordict_cpp.export, run by nn::AOTIModule, compared with the
Python actor.

Three small packages (each compiles in 10 to 60 s): a CartPole PPO actor
(MLP -> logits -> TorchRL's OneHotCategorical, return_log_prob), a
continuous actor (MLP -> NormalParamExtractor -> loc, scale -> TanhNormal
with tensor bounds, return_log_prob) and a bare tensordict
ProbabilisticTensorDictModule (Normal, dict in_keys mapping the arguments to
other keys, default interaction type "random", a custom log-prob key).

For each interaction type (unset, deterministic, mode, mean, random with a
seed) C++ writes the parameters, the action and the log-prob. Checked:

- the keys, dtypes and shapes are the Python actor's;
- the parameters equal the eager actor's to 1e-5 (the compiled MLP may round
  differently from eager);
- given the parameters C++ computed, the action is exactly what Python's
  distribution gives (deterministic sample, mode, or the seeded draw), and
  the log-prob equals Python's ``log_prob`` of the C++ action to 1e-6;
- the action and log-prob equal the eager Python actor's (discrete actions
  exactly, continuous ones to 1e-5), and the Python actor's ``log_prob`` of
  the C++ action equals the C++ log-prob to 1e-5;
- where Python raises (TanhNormal's mode), C++ raises too.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time

import torch

SEED = 3
BATCH = 8


def _cartpole_actor():
    from tensordict.nn import TensorDictModule
    from torchrl.data import OneHot
    from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor

    torch.manual_seed(0)
    mlp = MLP(in_features=4, out_features=2, num_cells=[32, 32], activation_class=torch.nn.Tanh)
    return ProbabilisticActor(
        TensorDictModule(mlp, in_keys=["observation"], out_keys=["logits"]),
        in_keys=["logits"],
        spec=OneHot(2),
        distribution_class=OneHotCategorical,
        return_log_prob=True,
    ), {"observation": 4}


def _tanh_actor():
    from tensordict.nn import NormalParamExtractor, TensorDictModule
    from torchrl.modules import MLP, ProbabilisticActor, TanhNormal

    torch.manual_seed(1)
    net = torch.nn.Sequential(
        MLP(in_features=3, out_features=4, num_cells=[16], activation_class=torch.nn.Tanh),
        NormalParamExtractor(),
    )
    return ProbabilisticActor(
        TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": torch.tensor([-2.0, -1.0]), "high": torch.tensor([2.0, 0.5])},
        return_log_prob=True,
    ), {"observation": 3}


def _bare_module():
    from tensordict.nn import ProbabilisticTensorDictModule

    return ProbabilisticTensorDictModule(
        in_keys={"loc": "mu", "scale": "sigma"},
        out_keys=["sample"],
        distribution_class=torch.distributions.Normal,
        return_log_prob=True,
        log_prob_key="lp",
        default_interaction_type="random",
    ), {"mu": 2, "sigma": 2}


def _python_run(actor, inputs, interaction):
    from tensordict import TensorDict
    from tensordict.nn import set_interaction_type

    td = TensorDict(dict(inputs), batch_size=[BATCH])
    ctx = contextlib.nullcontext() if interaction == "default" else set_interaction_type(interaction)
    try:
        with ctx, torch.no_grad():
            torch.manual_seed(SEED)
            actor(td)
    except Exception as e:  # the error is what is compared
        return e
    return td


def _head_sample(head, dist, interaction):
    """What Python's head draws from `dist`, under the same seed as C++."""
    from tensordict.nn import InteractionType

    kind = head.default_interaction_type if interaction == "default" else InteractionType(interaction)
    torch.manual_seed(SEED)
    try:
        return head._dist_sample(dist, kind)
    except Exception as e:
        return e


def _check_actor(name, actor, features, exe, workdir, compare, check, tensor_json, tensor_from):
    import tensordict_cpp
    from tensordict import TensorDict
    from tensordict.nn import ProbabilisticTensorDictModule

    example = TensorDict(
        {key: torch.randn(BATCH, n) for key, n in features.items()}, batch_size=[BATCH]
    )
    path = os.path.join(workdir, f"{name}.pt2")
    start = time.time()
    tensordict_cpp.export(actor, example, path)
    print(f"{name}: exported in {time.time() - start:.0f} s")

    gen = torch.Generator().manual_seed(42)
    # Positive inputs: the bare Normal reads its scale from one.
    inputs = {key: torch.rand(BATCH, n, generator=gen) + 0.1 for key, n in features.items()}
    in_path = os.path.join(workdir, f"{name}_in.json")
    out_path = os.path.join(workdir, f"{name}_out.json")
    with open(in_path, "w") as f:
        json.dump({"inputs": {k: tensor_json(v) for k, v in inputs.items()}, "batch": BATCH,
                   "seed": SEED}, f)
    subprocess.run([exe, "actor", path, in_path, out_path], check=True, timeout=300)
    with open(out_path) as f:
        got = json.load(f)

    head = actor if isinstance(actor, ProbabilisticTensorDictModule) else actor.module[-1]
    expected_keys = [k if isinstance(k, str) else ".".join(k) for k in actor.out_keys]
    if head is actor:
        # The package returns the parameters it was given, then the head's keys.
        expected_keys = list(actor.in_keys) + expected_keys
    check(f"{name}.out_keys", got["out_keys"] == expected_keys, f"{got['out_keys']} vs {expected_keys}")
    check(f"{name}.in_keys", got["in_keys"] == list(features), f"{got['in_keys']}")
    params = [k for k in head.in_keys]
    sample_key = head.dist_sample_keys[0]
    lp_key = head.log_prob_key
    discrete = "Categorical" in head.distribution_class.__name__
    worst = {"params": 0.0, "lp_given_params": 0.0, "lp_vs_actor": 0.0}

    for interaction in ["default", "deterministic", "mode", "mean", "random"]:
        tag = f"{name}[{interaction}]"
        result = got[interaction]
        eager = _python_run(actor, inputs, interaction)
        if isinstance(eager, Exception):
            check(tag, "error" in result, f"Python raised {eager!r}, C++ returned {list(result)}")
            continue
        if discrete and interaction == "mean":
            # The mean of a categorical is NaN: no action to compare.
            continue
        if "error" in result:
            check(tag, False, f"C++ raised {result['error']}")
            continue
        # The parameters: compiled vs eager.
        for key in params:
            compare(f"{tag}.{key}", eager.get(key), result[key], atol=1e-5)
            diff = (tensor_from(result[key]) - eager.get(key)).abs().max().item()
            worst["params"] = max(worst["params"], diff)
        # Given C++'s parameters, Python's distribution gives the same action
        # and log-prob.
        cpp_params = TensorDict({k: tensor_from(result[k]) for k in params}, batch_size=[BATCH])
        dist = head.get_dist(cpp_params)
        action = tensor_from(result[sample_key])
        expected_action = _head_sample(head, dist, interaction)
        if isinstance(expected_action, Exception):
            check(tag, False, f"Python's head raised {expected_action!r}")
            continue
        compare(f"{tag}.{sample_key}(given params)", expected_action.detach(), result[sample_key], atol=0.0)
        lp = tensor_from(result[lp_key])
        expected_lp = dist.log_prob(action)
        compare(f"{tag}.{lp_key}(given params)", expected_lp, result[lp_key], atol=1e-6)
        worst["lp_given_params"] = max(worst["lp_given_params"], (lp - expected_lp).abs().max().item())
        # Against the eager actor itself.
        if discrete:
            compare(f"{tag}.{sample_key}", eager.get(sample_key), result[sample_key], atol=0.0)
        else:
            compare(f"{tag}.{sample_key}", eager.get(sample_key), result[sample_key], atol=1e-5)
        eager_lp = actor.get_dist(eager.select(*features)).log_prob(action)
        compare(f"{tag}.{lp_key}(actor log_prob)", eager_lp, result[lp_key], atol=1e-5)
        worst["lp_vs_actor"] = max(worst["lp_vs_actor"], (lp - eager_lp).abs().max().item())
    print(f"{name}: max |diff| {worst}")


def _refusals(workdir, check):
    """TorchRL actors the exporter must refuse before compiling anything."""
    import tensordict_cpp
    from tensordict import TensorDict
    from tensordict.nn import TensorDictModule
    from torchrl.data import Bounded
    from torchrl.modules import ProbabilisticActor, TanhNormal

    example = TensorDict({"observation": torch.randn(4, 3)}, batch_size=[4])
    path = os.path.join(workdir, "refused.pt2")

    def expect(error, text, actor):
        try:
            tensordict_cpp.export(actor, example, path)
        except error as e:
            check(f"refusal {text!r}", text in str(e), f"message {str(e)!r}")
            return
        check(f"refusal {text!r}", False, "nothing raised")

    loc = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["loc"])
    expect(ValueError, "has safe=True", ProbabilisticActor(
        loc, in_keys=["loc"], distribution_class=TanhNormal,
        distribution_kwargs={"scale": 1.0}, spec=Bounded(-1, 1, shape=(2,)), safe=True))
    expect(TypeError, "cannot export the distribution keyword argument 'scale' of type", ProbabilisticActor(
        loc, in_keys=["loc"], distribution_class=TanhNormal,
        distribution_kwargs={"scale": torch.ones_like}))


def run_actors(exe, workdir, compare, check, tensor_json, tensor_from):
    _refusals(workdir, check)
    for name, make in [
        ("cartpole_onehot", _cartpole_actor),
        ("tanh_normal", _tanh_actor),
        ("bare_normal", _bare_module),
    ]:
        actor, features = make()
        _check_actor(name, actor, features, exe, workdir, compare, check, tensor_json, tensor_from)
