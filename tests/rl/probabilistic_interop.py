"""C++ distributions and exported actors against torch.distributions/TorchRL.

Run by the TorchRL virtual environment's Python (TorchRL 0.14.1, tensordict
0.14.3):

    probabilistic_interop.py EXE WORKDIR [dists] [actors] [tanh_round_trip]

``dists``: builds fixed parameters, computes each distribution's log_prob,
mode, mean, deterministic sample (tensordict's rule), entropy and a seeded
random draw in Python, has EXE compute the same with
``tensordict::nn::make_distribution`` and compares them (1e-6; the errors
Python raises must be raised by C++ too).

``actors``: exports a CartPole PPO actor (TorchRL's OneHotCategorical), a
TanhNormal actor and a bare tensordict ProbabilisticTensorDictModule with
``tensordict_cpp.export``, runs them in C++ under each interaction type and
compares with Python (see probabilistic_actors.py): given the same
parameters, actions exactly and log-probs to 1e-6; against the eager actor,
discrete actions exactly, continuous ones and log-probs to 1e-5.

``tanh_round_trip`` (a test of its own, exporter_tanh_normal): the
TanhNormal actor of the MuJoCo benchmark, exported; C++'s log-probs of the
same actions, its parameters, deterministic sample and mode against Python's
(see tanh_normal_round_trip.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

warnings.filterwarnings("ignore")

FAILURES: list = []


def tensor_json(t: torch.Tensor) -> dict:
    t = t.detach()
    return {
        "dtype": str(t.dtype).replace("torch.", ""),
        "shape": list(t.shape),
        # JSON has no NaN or infinity: they travel as strings.
        "data": [v if v == v and abs(v) != float("inf") else str(v)
                 for v in t.to(torch.float64).reshape(-1).tolist()],
    }


def tensor_from(spec: dict) -> torch.Tensor:
    dtype = getattr(torch, spec["dtype"])
    data = [float(v) for v in spec["data"]]
    return torch.tensor(data, dtype=torch.float64).reshape(spec["shape"]).to(dtype)


def check(name: str, ok: bool, detail: str = "") -> None:
    if not ok:
        FAILURES.append(f"{name}: {detail}")


def compare(name: str, expected, got: dict, atol: float = 1e-6) -> None:
    if isinstance(expected, Exception):
        check(name, "error" in got, f"Python raised {expected!r}, C++ returned {got}")
        return
    if "error" in got:
        check(name, False, f"C++ raised {got['error']!r}, Python returned {expected}")
        return
    value = tensor_from(got)
    check(name, value.dtype == expected.dtype, f"dtype {value.dtype} vs {expected.dtype}")
    check(name, value.shape == expected.shape, f"shape {list(value.shape)} vs {list(expected.shape)}")
    if value.shape == expected.shape:
        ok = torch.allclose(
            value.to(torch.float64), expected.to(torch.float64), rtol=1e-6, atol=atol, equal_nan=True
        )
        check(name, ok, f"\n{value}\nvs\n{expected}")


def attempt(fn):
    try:
        return fn()
    except Exception as e:  # the error is what is compared
        return e


# --- distributions -----------------------------------------------------------


def dist_cases():
    import torch.distributions as D
    from torchrl.modules import OneHotCategorical, TanhNormal
    from torchrl.modules.distributions import Delta

    g = torch.Generator().manual_seed(1234)
    randn = lambda *s: torch.randn(*s, generator=g)  # noqa: E731

    cases = []

    def add(name, cls, cls_name, tensors, kwargs, value, sample_shape=(3,)):
        cases.append(
            dict(name=name, cls=cls, cls_name=cls_name, tensors=tensors, kwargs=kwargs,
                 value=value, sample_shape=list(sample_shape), seed=len(cases) + 10)
        )

    logits = randn(4, 5)
    add("categorical_logits", D.Categorical, "torch.distributions.Categorical",
        {"logits": logits}, {}, torch.tensor([0, 4, 2, 1]))
    probs = torch.rand(2, 3, generator=g) + 0.1
    add("categorical_probs", D.Categorical, "torch.distributions.categorical.Categorical",
        {"probs": probs}, {}, torch.tensor([[2, 0], [1, 1]]), sample_shape=(2, 2))
    add("categorical_bad_index", D.Categorical, "Categorical",
        {"logits": logits}, {}, torch.tensor([0, 5, 2, 1]))
    oh_logits = randn(4, 3)
    add("onehot_torchrl", OneHotCategorical, "torchrl.modules.distributions.discrete.OneHotCategorical",
        {"logits": oh_logits}, {}, torch.nn.functional.one_hot(torch.tensor([0, 2, 1, 1]), 3))
    tied = torch.tensor([[1.0, 3.0, 3.0], [0.5, 0.5, 0.1]])
    add("onehot_torchrl_ties", OneHotCategorical, "OneHotCategorical",
        {"logits": tied}, {}, torch.tensor([[0, 1, 0], [1, 0, 0]]))
    add("onehot_torch", D.OneHotCategorical, "torch.distributions.OneHotCategorical",
        {"probs": probs}, {}, torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]))
    loc, scale = randn(3, 2), torch.rand(3, 2, generator=g) + 0.2
    add("normal", D.Normal, "torch.distributions.Normal",
        {"loc": loc, "scale": scale}, {}, randn(3, 2))
    add("normal_number_scale", D.Normal, "Normal",
        {"loc": loc}, {"scale": 0.5}, randn(4, 3, 2), sample_shape=())
    tloc, tscale = randn(4, 3), torch.rand(4, 3, generator=g) + 0.1
    add("tanh_normal", TanhNormal, "torchrl.modules.TanhNormal",
        {"loc": tloc, "scale": tscale}, {}, torch.tanh(randn(4, 3)) * 0.99)
    add("tanh_normal_bounds", TanhNormal, "torchrl.modules.distributions.continuous.TanhNormal",
        {"loc": tloc, "scale": tscale}, {"low": -2.0, "high": 3}, torch.rand(4, 3, generator=g) * 4.9 - 1.95)
    low = torch.tensor([-1.0, 0.0, -5.0])
    high = torch.tensor([1.0, 2.0, 5.0])
    add("tanh_normal_tensor_bounds", TanhNormal, "TanhNormal",
        {"loc": tloc, "scale": tscale, "low": low, "high": high},
        {"tanh_loc": True, "upscale": 3.0}, low + (high - low) * torch.rand(4, 3, generator=g))
    add("tanh_normal_event0_unsafe", TanhNormal, "TanhNormal",
        {"loc": tloc, "scale": tscale}, {"event_dims": 0, "safe_tanh": False},
        torch.tanh(randn(4, 3)) * 0.9)
    sat = torch.tensor([[12.0, -12.0, 0.0]])
    add("tanh_normal_saturated", TanhNormal, "TanhNormal",
        {"loc": sat, "scale": torch.full((1, 3), 0.1)}, {}, torch.tensor([[1.0, -1.0, 0.5]]))
    param = randn(2, 3)
    value = param.clone()
    value[1, 2] += 1.0
    add("delta", Delta, "torchrl.modules.distributions.continuous.Delta",
        {"param": param}, {"atol": 1e-5}, value)
    return cases


def python_dist_results(case) -> dict:
    from tensordict.nn import InteractionType, ProbabilisticTensorDictModule

    kwargs = dict(case["kwargs"])
    dist = case["cls"](**case["tensors"], **kwargs)
    sampler = ProbabilisticTensorDictModule(
        in_keys=["x"], out_keys=["y"], distribution_class=case["cls"]
    )
    out = {
        "log_prob": attempt(lambda: dist.log_prob(case["value"])),
        "mode": attempt(lambda: dist.mode),
        "mean": attempt(lambda: dist.mean),
        "deterministic": attempt(
            lambda: sampler._dist_sample(dist, InteractionType.DETERMINISTIC)
        ),
        "entropy": attempt(lambda: dist.entropy()),
    }
    torch.manual_seed(case["seed"])
    shape = torch.Size(case["sample_shape"])
    out["sample"] = attempt(
        lambda: dist.rsample(shape) if dist.has_rsample else dist.sample(shape)
    )
    return out


def run_dists(exe: str, workdir: str) -> None:
    cases = dist_cases()
    spec = [
        {
            "name": c["name"],
            "class": c["cls_name"],
            "kwargs": c["kwargs"],
            "tensors": {k: tensor_json(v) for k, v in c["tensors"].items()},
            "value": tensor_json(c["value"]),
            "sample_shape": c["sample_shape"],
            "seed": c["seed"],
        }
        for c in cases
    ]
    cases_path = os.path.join(workdir, "dist_cases.json")
    out_path = os.path.join(workdir, "dist_results.json")
    with open(cases_path, "w") as f:
        json.dump(spec, f)
    subprocess.run([exe, "dists", cases_path, out_path], check=True, timeout=120)
    with open(out_path) as f:
        got = json.load(f)
    for case in cases:
        name = case["name"]
        result = got.get(name, {})
        check(name, "error" not in result, f"C++ could not build it: {result.get('error')}")
        if "error" in result:
            continue
        expected = python_dist_results(case)
        for field, value in expected.items():
            compare(f"{name}.{field}", value, result[field])
    print(f"dists: {len(cases)} cases compared")


def main() -> int:
    exe, workdir = sys.argv[1], sys.argv[2]
    parts = sys.argv[3:] or ["dists", "actors"]
    os.makedirs(workdir, exist_ok=True)
    if "dists" in parts:
        run_dists(exe, workdir)
    if "actors" in parts:
        from probabilistic_actors import run_actors

        run_actors(exe, workdir, compare, check, tensor_json, tensor_from)
    if "tanh_round_trip" in parts:
        from tanh_normal_round_trip import run_tanh_round_trip

        run_tanh_round_trip(exe, workdir, compare, check, tensor_json, tensor_from)
    if FAILURES:
        print(f"{len(FAILURES)} mismatches:")
        for failure in FAILURES:
            print("  " + failure)
        return 1
    print("all equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
