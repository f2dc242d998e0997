#!/usr/bin/env python3
"""Trees of tensordict 0.14, re-saved by C++, load in Python 0.15 unchanged.

1. C++ (the Compat014Test cases of unit_tests) loads every fixture of
   tests/data/tensordict_0_14 (written by tensordict 0.14.3) and saves it
   again under WORK_DIR (TENSORDICT_COMPAT_0_14_OUT).
2. The installed Python tensordict (0.15) loads each 0.14 fixture and the
   C++ copy, and compares them: classes, batch sizes, dim names, keys in
   order, dtypes, shapes and values of every leaf, non-tensor data, the
   stack dims of lazy stacks and the tensorclass.

usage: compat_0_14_interop.py UNIT_TESTS_BINARY WORK_DIR
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "data", "tensordict_0_14")
sys.path.insert(0, FIXTURES)

import torch  # noqa: E402

import tensordict  # noqa: E402
from tensordict import (  # noqa: E402
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    TensorDictBase,
)

from compat_0_14_classes import Step  # noqa: E402

# fixture name -> (name of the C++ copy, how Python loads the fixture)
TREES = {
    "nested": ("nested", tensordict.load_memmap),
    "lazy_nested": ("lazy_nested", tensordict.load_memmap),
    "lazy_root": ("lazy_root", tensordict.load_memmap),
    "tensorclass": ("tensorclass", tensordict.load_memmap),
    "non_tensor_data": ("non_tensor_data", tensordict.load_memmap),
    "non_tensor_stack": ("non_tensor_stack", tensordict.load_memmap),
    "replay_buffer": ("replay_buffer", tensordict.load_memmap),
    "consolidated.td": ("consolidated", TensorDict.from_consolidated),
}


class Mismatch(Exception):
    pass


def check(ok: bool, path: str, what: str) -> None:
    if not ok:
        raise Mismatch(f"{path}: {what}")


def compare(want, got, path: str) -> None:
    """Raises Mismatch at the first difference between two loaded trees."""
    if isinstance(want, torch.Tensor) and not is_non_tensor(want):
        check(isinstance(got, torch.Tensor), path, f"{type(got)} is no tensor")
        check(want.dtype == got.dtype, path, f"dtype {got.dtype} != {want.dtype}")
        check(want.shape == got.shape, path, f"shape {got.shape} != {want.shape}")
        check(torch.equal(want, got), path, f"values {got} != {want}")
        return
    check(type(want) is type(got), path, f"class {type(got)} != {type(want)}")
    check(
        want.batch_size == got.batch_size,
        path,
        f"batch size {got.batch_size} != {want.batch_size}",
    )
    if isinstance(want, NonTensorData):
        check(want.data == got.data, path, f"data {got.data!r} != {want.data!r}")
        return
    if isinstance(want, NonTensorStack):
        check(
            want.tolist() == got.tolist(),
            path,
            f"data {got.tolist()!r} != {want.tolist()!r}",
        )
        return
    if isinstance(want, LazyStackedTensorDict):
        check(
            want.stack_dim == got.stack_dim,
            path,
            f"stack dim {got.stack_dim} != {want.stack_dim}",
        )
        check(
            len(want.tensordicts) == len(got.tensordicts),
            path,
            f"{len(got.tensordicts)} elements != {len(want.tensordicts)}",
        )
        for i, (w, g) in enumerate(zip(want.tensordicts, got.tensordicts)):
            compare(w, g, f"{path}[{i}]")
        return
    if not isinstance(want, TensorDictBase):  # a tensorclass
        check(
            want.task == got.task, path, f"task {got.task!r} != {want.task!r}"
        )
        compare(want._tensordict, got._tensordict, f"{path}._tensordict")
        return
    check(want.names == got.names, path, f"names {got.names} != {want.names}")
    want_keys = memmap_load_order(want)
    got_keys = list(got.keys())
    check(want_keys == got_keys, path, f"keys {got_keys} != {want_keys}")
    for key in want_keys:
        compare(want._get_str(key, None), got._get_str(key, None), f"{path}.{key}")


def memmap_load_order(td) -> list:
    """The key order Python's load_memmap gives a dict saved in `td`'s order.

    It lists a dict's tensors first, then its nested collections (non-tensor
    data included), whatever order meta.json has; `from_consolidated` keeps
    the stored order. The C++ copies are read with load_memmap, so the order
    to expect is this one for every fixture (C++ checks its own order).
    """
    keys = list(td.keys())
    leaves = [
        key
        for key in keys
        if not tensordict.is_tensor_collection(td._get_str(key, None))
    ]
    return leaves + [key for key in keys if key not in leaves]


def is_non_tensor(value) -> bool:
    return isinstance(value, (NonTensorData, NonTensorStack))


def main() -> int:
    binary, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, TENSORDICT_COMPAT_0_14_OUT=work)
    step = [binary, "--gtest_filter=Compat014Test.*"]
    print("$", "TENSORDICT_COMPAT_0_14_OUT=" + work, " ".join(step), flush=True)
    if subprocess.run(step, env=env).returncode != 0:
        print("the C++ round trips failed")
        return 1
    print(f"Python tensordict {tensordict.__version__} compares the C++ copies")
    failures = 0
    for name, (copy, load) in TREES.items():
        try:
            want = load(os.path.join(FIXTURES, name))
            got = tensordict.load_memmap(os.path.join(work, copy))
            compare(want, got, name)
        except Exception as error:  # noqa: BLE001 (report every tree)
            print(f"FAIL {name}: {type(error).__name__}: {error}")
            failures += 1
        else:
            print(f"ok   {name}")
    # The tensorclass came back as the Python class, not as a dict.
    step_copy = tensordict.load_memmap(os.path.join(work, "tensorclass"))
    if not isinstance(step_copy, Step):
        print(f"FAIL tensorclass: loaded as {type(step_copy)}, not Step")
        failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
