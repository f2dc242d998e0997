"""Writes the tensordict 0.14 fixtures of tests/compat_0_14_test.cpp.

The trees in this folder were written by tensordict 0.14.3, the version
TorchRL 0.14 pins (``tensordict>=0.14.3,<0.15``), next to torch 2.13.0.
0.14.3's compiled extension loads against torch 2.13.0, so nothing fell back.
Regenerate them (the output is deterministic) with a venv that leaves the
system's tensordict 0.15.3 alone:

    python3 -m venv --system-site-packages /tmp/td014
    /tmp/td014/bin/pip install --no-deps tensordict==0.14.3
    /tmp/td014/bin/python tests/data/tensordict_0_14/make_fixtures.py

orjson (3.8.3 here) is installed, so 0.14.3 writes meta.json with orjson:
see README.md for what that and the rest change against 0.15.3.

usage: make_fixtures.py [--any-version] [OUT_DIR]
  OUT_DIR defaults to this script's folder; --any-version lets another
  tensordict write the same trees (how README.md's diff against 0.15.3 was
  made: python3 make_fixtures.py --any-version /tmp/td015).
"""

from __future__ import annotations

import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import tensordict  # noqa: E402
from tensordict import (  # noqa: E402
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
)

from compat_0_14_classes import Step  # noqa: E402

# The fixture directories and files this script owns (and replaces).
FIXTURES = (
    "nested",
    "lazy_nested",
    "lazy_root",
    "tensorclass",
    "non_tensor_data",
    "non_tensor_stack",
    "replay_buffer",
    "consolidated.td",
)


def nested() -> TensorDict:
    """Every dtype of the brief, nested tds, names, non-tensors, odd keys."""
    td = TensorDict(
        {
            "f32": torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4,
            "f64": torch.arange(6, dtype=torch.float64).reshape(2, 3) - 2.5,
            "i64": torch.arange(12, dtype=torch.int64).reshape(2, 3, 2) * -3,
            "flag": torch.tensor([[True, False, True], [False, False, True]]),
            "bf16": (torch.arange(6, dtype=torch.float32).reshape(2, 3) / 2).to(
                torch.bfloat16
            ),
            "u8": torch.arange(250, 256, dtype=torch.int64)
            .to(torch.uint8)
            .reshape(2, 3),
            "empty": torch.zeros(2, 3, 0),
            "a key/with space": torch.arange(6, dtype=torch.int32).reshape(2, 3),
            "sub": TensorDict(
                {
                    "x": torch.arange(24, dtype=torch.float32).reshape(2, 3, 4),
                    "deeper": TensorDict(
                        {"y": torch.arange(6, dtype=torch.int16).reshape(2, 3)},
                        batch_size=[2, 3],
                    ),
                    "label": NonTensorData("hello", batch_size=[2, 3]),
                },
                batch_size=[2, 3],
            ),
            "empty_sub": TensorDict({}, batch_size=[2, 3]),
            "note": NonTensorData({"lr": 0.5, "tags": ["a", "b"]}, batch_size=[2, 3]),
            "words": NonTensorStack(
                *[
                    NonTensorStack("a", "b", "c"),
                    NonTensorStack("d", "e", "f"),
                ]
            ),
        },
        batch_size=[2, 3],
    )
    td.names = ["env", "time"]
    return td


def lazy_nested() -> TensorDict:
    """A TensorDict holding a lazy stack of heterogeneous tds."""
    stack = LazyStackedTensorDict.lazy_stack(
        [
            TensorDict(
                {"obs": torch.arange(3, dtype=torch.float32), "id": torch.tensor(0)},
                batch_size=[],
            ),
            TensorDict(
                {
                    "obs": torch.arange(5, dtype=torch.float32) + 10,
                    "id": torch.tensor(1),
                    "extra": torch.ones(2, dtype=torch.float64),
                },
                batch_size=[],
            ),
        ],
        dim=0,
    )
    return TensorDict({"stack": stack, "count": torch.tensor([2, 2])}, batch_size=[2])


def lazy_root() -> LazyStackedTensorDict:
    """A lazy stack at the root, stacked along its second dim."""
    return LazyStackedTensorDict.lazy_stack(
        [
            TensorDict(
                {
                    "a": torch.arange(4, dtype=torch.int64).reshape(2, 2),
                    "m": TensorDict(
                        {"b": torch.full((2, 1), i, dtype=torch.float32)},
                        batch_size=[2],
                    ),
                },
                batch_size=[2],
            )
            for i in range(3)
        ],
        dim=1,
    )


def step() -> Step:
    return Step(
        obs=torch.arange(8, dtype=torch.float32).reshape(4, 2),
        reward=torch.tensor([0.0, 1.0, -1.0, 0.5]),
        task="reach",
        batch_size=[4],
    )


def non_tensor_data() -> NonTensorData:
    return NonTensorData("a string at the root", batch_size=[3])


def non_tensor_stack() -> NonTensorStack:
    return NonTensorStack(1, "two", {"three": 3.0}, None)


def replay_buffer(prefix: str) -> None:
    """What TorchRL's LazyMemmapStorage does: memmap_like, then fill rows."""
    capacity = 6
    transition = TensorDict(
        {
            "observation": torch.zeros(3, dtype=torch.float32),
            "action": torch.zeros(2, dtype=torch.int64),
            "done": torch.zeros(1, dtype=torch.bool),
            "next": TensorDict(
                {
                    "observation": torch.zeros(3, dtype=torch.float32),
                    "reward": torch.zeros(1, dtype=torch.float32),
                },
                batch_size=[],
            ),
        },
        batch_size=[],
    )
    storage = transition.expand(capacity).clone().memmap_like(prefix)
    for i in range(4):  # four of six rows written, as a partly filled buffer
        storage[i] = TensorDict(
            {
                "observation": torch.arange(3, dtype=torch.float32) + i,
                "action": torch.tensor([i, -i]),
                "done": torch.tensor([i == 3]),
                "next": TensorDict(
                    {
                        "observation": torch.arange(3, dtype=torch.float32) + i + 1,
                        "reward": torch.tensor([float(i) / 2]),
                    },
                    batch_size=[],
                ),
            },
            batch_size=[],
        )


def consolidated(path: str) -> None:
    td = TensorDict(
        {
            "a": torch.arange(6, dtype=torch.float32).reshape(2, 3),
            "b": TensorDict(
                {
                    "c": torch.arange(4, dtype=torch.int64).reshape(2, 2),
                    "d": torch.tensor([True, False]),
                    "s": NonTensorData("text", batch_size=[2]),
                },
                batch_size=[2],
            ),
            "h": torch.arange(2, dtype=torch.float64),
        },
        batch_size=[2],
    )
    # Unlike memmap, 0.14's consolidate keeps dim names (in cls_metadata).
    td.names = ["env"]
    td.consolidate(filename=path)


def main() -> int:
    args = sys.argv[1:]
    any_version = "--any-version" in args
    args = [arg for arg in args if arg != "--any-version"]
    if not any_version and not tensordict.__version__.startswith("0.14."):
        sys.exit(f"tensordict {tensordict.__version__} is not 0.14.x: see the docstring")
    out = args[0] if args else HERE
    os.makedirs(out, exist_ok=True)
    for name in FIXTURES:
        path = os.path.join(out, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
    nested().memmap(os.path.join(out, "nested"))
    lazy_nested().memmap(os.path.join(out, "lazy_nested"))
    lazy_root().memmap(os.path.join(out, "lazy_root"))
    step().memmap(os.path.join(out, "tensorclass"))
    non_tensor_data().memmap(os.path.join(out, "non_tensor_data"))
    non_tensor_stack().memmap(os.path.join(out, "non_tensor_stack"))
    replay_buffer(os.path.join(out, "replay_buffer"))
    consolidated(os.path.join(out, "consolidated.td"))
    print(f"tensordict {tensordict.__version__} wrote the fixtures under {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
