#!/usr/bin/env python3
"""Exports the AOTInductor test packages for tests/aoti_test.cpp, once per build.

Each package comes with inputs and the outputs of Python's eager module on
them, memmapped next to it, so the C++ test compares its outputs with
Python's. Packages stay tiny: compilation dominates (seconds each).

- module.pt2: a TensorDictModule exported by hand the tutorials' way
  (keyword inputs, no tensordict metadata): the C++ caller gives the keys.
- sequential.pt2: a TensorDictSequential with nested keys and
  select_out_keys, through tensordict_cpp.export with a dynamic batch.
- weights_outside.pt2: an MLP whose weights are left out of the package,
  with an unbounded dynamic batch; two weight sets (a, b) and the eager
  outputs for each.
- static.pt2: a TensorDictModule with a static batch size.
- strided.pt2: a pointwise TensorDictModule exported the tutorials' way from
  a transposed example input: its kernels index the input with the
  example's strides, so a contiguous input must be laid out as those.
- probabilistic.pt2: a ProbabilisticTensorDictSequential (linear -> logits
  -> torch.distributions.Categorical, return_log_prob) of this Python's
  tensordict, with its outputs under the default (deterministic) interaction
  type and under "random" with a seed.
- cuda_device.pt2, other_torch.pt2, ...: sequential.pt2 with its metadata
  edited, to be refused; sequential_no_spec.pt2: sequential.pt2 without
  its tensordict metadata (what a hand export of it gives); probabilistic_*.pt2: probabilistic.pt2 with its
  tensordict.probabilistic edited, to be refused.

usage: aoti_packages.py PYTHON_PACKAGE_DIR OUT_DIR
"""

import json
import os
import shutil
import sys
import time
import zipfile

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn

sys.path.insert(0, sys.argv[1])
import tensordict_cpp  # noqa: E402  (the source tree's, not an installed one)

OUT = sys.argv[2]
TIMES = {}


def save(td: TensorDict, name: str) -> None:
    td.memmap(os.path.join(OUT, name))


def timed(name, fn):
    start = time.perf_counter()
    path = fn()
    TIMES[name] = round(time.perf_counter() - start, 2)
    return path


def module_package() -> None:
    torch.manual_seed(0)
    module = TensorDictModule(nn.Linear(3, 4), in_keys=["obs"], out_keys=["action"])
    obs = torch.randn(4, 3)
    ep = torch.export.export(module, args=(), kwargs={"obs": obs})
    path = os.path.join(OUT, "module.pt2")
    timed(
        "module.pt2",
        lambda: torch._inductor.aoti_compile_and_package(ep, package_path=path),
    )
    inputs = TensorDict({"obs": torch.randn(4, 3)}, batch_size=[4])
    with torch.no_grad():
        expected = module(inputs.clone())
    save(inputs, "module_inputs")
    save(expected, "module_expected")


def sequential_package() -> None:
    torch.manual_seed(1)
    seq = TensorDictSequential(
        TensorDictModule(
            nn.Linear(5, 6), in_keys=[("obs", "x")], out_keys=[("hidden", "h")]
        ),
        TensorDictModule(
            lambda h, y: torch.tanh(h) * y.sum(-1, keepdim=True),
            in_keys=[("hidden", "h"), ("obs", "y")],
            out_keys=[("hidden", "g")],
        ),
        TensorDictModule(
            nn.Linear(6, 2), in_keys=[("hidden", "g")], out_keys=[("out", "action")]
        ),
    )
    seq.select_out_keys(("out", "action"), ("hidden", "h"))
    example = TensorDict(
        {"obs": {"x": torch.randn(8, 5), "y": torch.randn(8, 2).double().float()}},
        batch_size=[8],
    )
    path = os.path.join(OUT, "sequential.pt2")
    timed(
        "sequential.pt2",
        lambda: tensordict_cpp.export(
            seq, example, path, dynamic_batch=True, batch_range=(1, 64)
        ),
    )
    for batch in (1, 5, 64):
        inputs = TensorDict(
            {"obs": {"x": torch.randn(batch, 5), "y": torch.randn(batch, 2)}},
            batch_size=[batch],
        )
        with torch.no_grad():
            expected = seq(inputs.clone())
        save(inputs, f"sequential_inputs_{batch}")
        save(expected.select(("out", "action"), ("hidden", "h")), f"sequential_expected_{batch}")


def weights_outside_package() -> None:
    torch.manual_seed(2)
    mlp = TensorDictModule(
        nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)),
        in_keys=["obs"],
        out_keys=["value"],
    )
    example = TensorDict({"obs": torch.randn(6, 4)}, batch_size=[6])
    path = os.path.join(OUT, "weights_outside.pt2")
    timed(
        "weights_outside.pt2",
        lambda: tensordict_cpp.export(
            mlp, example, path, dynamic_batch=True, weights_in_package=False
        ),
    )
    inputs = TensorDict({"obs": torch.randn(6, 4)}, batch_size=[6])
    weights_a = TensorDict.from_module(mlp).detach().clone()
    weights_b = weights_a.apply(lambda t: torch.randn_like(t) * 3)
    for name, weights in (("a", weights_a), ("b", weights_b)):
        with weights.to_module(mlp), torch.no_grad():
            expected = mlp(inputs.clone())
        save(weights, f"weights_{name}")
        save(expected.select("value"), f"weights_outside_expected_{name}")
    save(inputs, "weights_outside_inputs")


PROBABILISTIC_SEED = 5


def probabilistic_package() -> None:
    from tensordict.nn import (
        ProbabilisticTensorDictModule,
        ProbabilisticTensorDictSequential,
        set_interaction_type,
    )

    torch.manual_seed(6)
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(nn.Linear(4, 3), in_keys=["observation"], out_keys=["logits"]),
        ProbabilisticTensorDictModule(
            in_keys=["logits"],
            out_keys=["action"],
            distribution_class=torch.distributions.Categorical,
            return_log_prob=True,
        ),
    )
    example = TensorDict({"observation": torch.randn(6, 4)}, batch_size=[6])
    path = os.path.join(OUT, "probabilistic.pt2")
    timed("probabilistic.pt2", lambda: tensordict_cpp.export(actor, example, path))
    inputs = TensorDict({"observation": torch.randn(5, 4)}, batch_size=[5])
    keys = ("logits", "action", "action_log_prob")
    with torch.no_grad():
        save(actor(inputs.clone()).select(*keys), "probabilistic_expected")
        with set_interaction_type("random"):
            torch.manual_seed(PROBABILISTIC_SEED)
            save(actor(inputs.clone()).select(*keys), "probabilistic_expected_random")
    save(inputs, "probabilistic_inputs")


def rewrite(src: str, dst: str, edit=None, extra=None, only="", drop="") -> None:
    """Copies package `src` to `dst`, editing the model's metadata files
    (those whose name ends with `only` + "_metadata.json"), leaving out the
    entries whose name ends with `drop`."""
    with zipfile.ZipFile(os.path.join(OUT, src)) as zin, zipfile.ZipFile(
        os.path.join(OUT, dst), "w", zipfile.ZIP_STORED
    ) as zout:
        for info in zin.infolist():
            if drop and info.filename.endswith(drop):
                continue
            data = zin.read(info.filename)
            if edit is not None and info.filename.endswith(only + "_metadata.json"):
                meta = json.loads(data)
                edit(meta)
                data = json.dumps(meta).encode()
            zout.writestr(info.filename, data)
        for name, data in (extra or {}).items():
            zout.writestr(name, data)


def static_package() -> None:
    torch.manual_seed(3)
    module = TensorDictModule(nn.Linear(2, 2), in_keys=["obs"], out_keys=["out"])
    example = TensorDict({"obs": torch.randn(3, 2)}, batch_size=[3])
    path = os.path.join(OUT, "static.pt2")
    timed(
        "static.pt2",
        lambda: tensordict_cpp.export(module, example, path, dynamic_batch=False),
    )
    with torch.no_grad():
        expected = module(example.clone())
    save(example, "static_inputs")
    save(expected.select("out"), "static_expected")


def strided_package() -> None:
    def pointwise(obs):
        return torch.tanh(obs) * 2 + obs.cumsum(-1)

    module = TensorDictModule(pointwise, in_keys=["obs"], out_keys=["action"])
    torch.manual_seed(7)
    example = torch.randn(3, 5).t()  # [5, 3] with strides (1, 5)
    ep = torch.export.export(module, args=(), kwargs={"obs": example})
    path = os.path.join(OUT, "strided.pt2")
    timed(
        "strided.pt2",
        lambda: torch._inductor.aoti_compile_and_package(ep, package_path=path),
    )
    inputs = TensorDict({"obs": torch.randn(5, 3)}, batch_size=[5])
    with torch.no_grad():
        expected = module(inputs.clone())
    save(inputs, "strided_inputs")
    save(expected.select("action"), "strided_expected")


def pack_golden() -> None:
    """Python's pack() of a nested dict: C++ must give the same columns."""
    torch.manual_seed(4)
    td = TensorDict(
        {
            "v": torch.randn(5, 3),
            "p": torch.randn(5),
            "nested": {"stress": torch.randn(5, 3, 3), "deep": {"a": torch.randn(5, 2)}},
            "b": torch.randn(5, 1),
        },
        batch_size=[5],
    )
    flat, layout = td.pack()
    flat0, layout0 = td.pack(0)
    save(td, "pack_input")
    save(TensorDict({"flat": flat, "flat0": flat0}, batch_size=[]), "pack_expected")
    with open(os.path.join(OUT, "pack_layout.json"), "w") as f:
        json.dump(
            {
                "keys": [_key(k) for k in layout.keys],
                "shapes": [list(s) for s in layout.shapes],
                "offsets": list(layout.offsets),
                "numel": layout.numel,
                "dim": layout.dim,
                "dim0": layout0.dim,
                "nested": [[_key(k), list(b)] for k, b, _ in layout.nested],
            },
            f,
        )


def _key(key):
    return [key] if isinstance(key, str) else list(key)


def derived_packages() -> None:
    """Packages that must be refused: metadata edited after export."""

    def device(meta):
        meta["AOTI_DEVICE_KEY"] = "cuda"

    def torch_version(meta):
        spec = json.loads(meta["tensordict.spec"])
        spec["torch"] = "2.99.0+cpu"
        meta["tensordict.spec"] = json.dumps(spec)

    def format_version(meta):
        meta["tensordict.format"] = "9"

    def bad_keys(meta):
        meta["tensordict.in_keys"] = "[1, 2]"

    def bad_spec(meta):
        meta["tensordict.spec"] = '{"torch": "2.13.0", "batch_size": [-1'

    def no_tensordict_metadata(meta):
        for key in [key for key in meta if key.startswith("tensordict.")]:
            del meta[key]

    rewrite("weights_outside.pt2", "weights_outside_no_spec.pt2", no_tensordict_metadata)
    rewrite("sequential.pt2", "sequential_no_spec.pt2", no_tensordict_metadata)
    rewrite("module.pt2", "module_no_checks.pt2", drop=".wrapper.cpp")
    rewrite("sequential.pt2", "two_metadata.pt2", bad_keys, only="wrapper")

    def spec_disagrees(meta):
        spec = json.loads(meta["tensordict.spec"])
        spec["inputs"][0]["shape"] = [6]
        meta["tensordict.spec"] = json.dumps(spec)

    rewrite("sequential.pt2", "spec_disagrees.pt2", spec_disagrees)
    rewrite("sequential.pt2", "cuda_device.pt2", device)
    rewrite("sequential.pt2", "other_torch.pt2", torch_version)
    rewrite("sequential.pt2", "future_format.pt2", format_version)
    rewrite("sequential.pt2", "bad_keys.pt2", bad_keys)
    rewrite("sequential.pt2", "bad_spec.pt2", bad_spec)
    rewrite("sequential.pt2", "escaping_entry.pt2", extra={"a/../../escaped": b"x"})

    def probabilistic(edit):
        def apply(meta):
            head = json.loads(meta["tensordict.probabilistic"])
            edit(head)
            meta["tensordict.probabilistic"] = json.dumps(head)

        return apply

    def format_1(meta):
        meta["tensordict.format"] = "1"

    def no_head(meta):
        del meta["tensordict.probabilistic"]

    edits = {
        "unknown_class": probabilistic(
            lambda h: h.update(distribution_class="torch.distributions.Beta")
        ),
        "list_kwarg": probabilistic(lambda h: h.update(distribution_kwargs={"x": [1]})),
        "unknown_kwarg": probabilistic(
            lambda h: h.update(distribution_kwargs={"temperature": 1.0})
        ),
        "unknown_key": probabilistic(lambda h: h.update(in_keys=["nope"])),
        "median": probabilistic(lambda h: h.update(default_interaction_type="median")),
        "short_tensor": probabilistic(
            lambda h: h.update(
                distribution_tensor_kwargs={
                    "probs": {"dtype": "torch.float32", "shape": [3], "data": [1.0]}
                }
            )
        ),
        "format_1": format_1,
        "no_head": no_head,
    }
    for name, edit in edits.items():
        rewrite("probabilistic.pt2", f"probabilistic_{name}.pt2", edit)


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    module_package()
    sequential_package()
    weights_outside_package()
    static_package()
    strided_package()
    probabilistic_package()
    pack_golden()
    derived_packages()
    with open(os.path.join(OUT, "compile_times.json"), "w") as f:
        json.dump(TIMES, f, indent=1)
    print("compile times (s):", TIMES)


if __name__ == "__main__":
    main()
