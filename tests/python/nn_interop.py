#!/usr/bin/env python3
"""tensordict::nn against Python's tensordict.nn on the same nested-key policy.

1. Names: the C++ policy's in_keys, out_keys, ``TensorDict::from_module``
   leaves and ``named_parameters()`` equal Python's for the same structure
   (a sequence of 3 modules, the last a nested sequence of 2).
2. Python to C++: Python memmaps ``TensorDict.from_module(policy)``, an input
   and its outputs; C++ loads the weights with ``load_memmap(...).to_module``,
   runs its policy and checks the outputs.
3. C++ to Python: C++ memmaps its weights, input and outputs; Python loads
   them with ``params.to_module(policy)`` and checks the outputs.

usage: nn_interop.py NN_INTEROP_BINARY WORK_DIR
"""

import json
import os
import shutil
import subprocess
import sys

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn


def make_policy() -> TensorDictSequential:
    return TensorDictSequential(
        TensorDictModule(nn.Linear(4, 16), [("obs", "x")], [("net", "hidden")]),
        TensorDictModule(nn.ReLU(), [("net", "hidden")], [("net", "hidden")]),
        TensorDictSequential(
            TensorDictModule(
                nn.Bilinear(16, 3, 8),
                [("net", "hidden"), ("obs", "goal")],
                [("net", "feat")],
            ),
            TensorDictModule(nn.Linear(8, 2), [("net", "feat")], [("action", "logits")]),
        ),
    )


def as_lists(keys):
    return [[key] if isinstance(key, str) else list(key) for key in keys]


def check_names(binary) -> bool:
    cpp = json.loads(subprocess.check_output([binary, "names"], text=True))
    policy = make_policy()
    python = {
        "in_keys": as_lists(policy.in_keys),
        "out_keys": as_lists(policy.out_keys),
        "from_module": list(
            TensorDict.from_module(policy).flatten_keys(".").keys()
        ),
        "named_parameters": [name for name, _ in policy.named_parameters()],
    }
    ok = True
    for field, expected in python.items():
        same = cpp[field] == expected
        print(f"{field}: {'matches' if same else 'DIFFERS'} Python"
              + ("" if same else f" (C++ {cpp[field]}, Python {expected})"))
        ok = ok and same
    return ok


def python_to_cpp(binary, work) -> bool:
    torch.manual_seed(3)
    policy = make_policy()
    td = TensorDict(
        obs=TensorDict(x=torch.randn(32, 4), goal=torch.randn(32, 3), batch_size=[32]),
        batch_size=[32],
    )
    with torch.no_grad():
        policy(td)
    params_dir = os.path.join(work, "py_params")
    io_dir = os.path.join(work, "py_io")
    TensorDict.from_module(policy).detach().memmap(params_dir)
    td.memmap(io_dir)
    result = subprocess.run([binary, "load", params_dir, io_dir])
    return result.returncode == 0


def cpp_to_python(binary, work) -> bool:
    params_dir = os.path.join(work, "cpp_params")
    io_dir = os.path.join(work, "cpp_io")
    subprocess.run([binary, "save", params_dir, io_dir], check=True)
    policy = make_policy()
    params = TensorDict.load_memmap(params_dir)
    io = TensorDict.load_memmap(io_dir)
    params.to_module(policy)
    td = io.select(("obs", "x"), ("obs", "goal")).clone()
    with torch.no_grad():
        policy(td)
    ok = True
    for key in policy.out_keys:
        same = torch.allclose(td[key], io[key], rtol=1e-5, atol=1e-6)
        print(f"{key}: C++ output {'matches' if same else 'DIFFERS from'} Python's")
        ok = ok and same
    return ok


def main() -> int:
    binary, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ok = check_names(binary)
    ok = python_to_cpp(binary, work) and ok
    ok = cpp_to_python(binary, work) and ok
    print("nn_interop:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
