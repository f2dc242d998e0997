"""What consolidate_interop.py and safetensors_interop.py share: the cases
both build (interop_cases.h builds them the same way in C++), a fresh work
directory, the run of the C++ half, and the checks of what each side read
and wrote."""

import json
import os
import shutil
import subprocess

import torch
from tensordict import TensorDict, lazy_stack


def basic():
    """A few leaves, a nested dict and a string, batch [3]."""
    return TensorDict(
        {
            "a": torch.arange(3, dtype=torch.int32),
            "b": {"c": torch.ones(3, 2), "s": "hello"},
            "d": torch.tensor([True, False, True]),
        },
        batch_size=[3],
    )


def dtypes(names):
    """0..5 as [2, 3] in each dtype of `names`, in that order, batch [2]."""
    out = TensorDict(batch_size=[2])
    for name in names:
        out[name] = torch.arange(6).reshape(2, 3).to(getattr(torch, name))
    return out


def named(**kwargs):
    """Batch [2] named "b" and a nested dict of batch [2, 4]; `kwargs` go to
    TensorDict (a device)."""
    out = TensorDict(
        {
            "x": torch.arange(6, dtype=torch.float32).reshape(2, 3),
            "n": TensorDict({"y": torch.ones(2, 4, dtype=torch.float64)}, [2, 4]),
        },
        batch_size=[2],
        **kwargs,
    )
    out.names = ["b"]
    return out


def empty_leaf():
    """A leaf with no elements."""
    return TensorDict(
        {"e": torch.zeros(2, 0), "f": torch.arange(2, dtype=torch.int16)},
        batch_size=[2],
    )


def deep():
    """A leaf three levels down, batch [5]."""
    return TensorDict(
        {"l1": {"l2": {"l3": {"v": torch.arange(5, dtype=torch.int64)}}},
         "w": torch.arange(5, dtype=torch.uint8)},
        batch_size=[5],
    )


def lazy_stack_entry(second):
    """A lazy stack along dim 1 of two [3] dicts under "stack", and "x",
    batch [3, 2]; `second` is the second element."""
    first = TensorDict({"y": torch.arange(6.0).reshape(3, 2)}, [3])
    return TensorDict(
        {"stack": lazy_stack([first, second], 1), "x": torch.ones(3, 2)},
        batch_size=[3, 2],
    )


def fresh_dirs(work, *names):
    """Empties WORK and makes WORK/<name> for each name; returns their paths."""
    shutil.rmtree(work, ignore_errors=True)
    paths = [os.path.join(work, name) for name in names]
    for path in paths:
        os.makedirs(path)
    return paths


def run_cpp(binary, py_dir, cpp_dir):
    """Runs the C++ half on the two directories; True if it exits 0."""
    print("$", binary, py_dir, cpp_dir, flush=True)
    return subprocess.run([binary, py_dir, cpp_dir]).returncode == 0


def cpp_view_mismatch(cpp_dir, name, view, what="file"):
    """None if CPP_DIR/<name>.loaded.json, the view of what C++ read from
    the Python `what`, is `view`; else the failure's message."""
    expected = json.loads(json.dumps(view))
    with open(os.path.join(cpp_dir, name + ".loaded.json")) as f:
        cpp_view = json.load(f)
    if cpp_view == expected:
        return None
    return (f"{name}: C++ reads the Python {what} as\n{cpp_view}\n"
            f"expected\n{expected}")


def bytes_mismatch(name, cpp_path, py_path, shown):
    """None if the two files hold the same bytes; else the failure's
    message, with the `shown` slice of each."""
    with open(cpp_path, "rb") as f:
        cpp_bytes = f.read()
    with open(py_path, "rb") as f:
        py_bytes = f.read()
    if cpp_bytes == py_bytes:
        return None
    return (f"{name}: the C++ file differs from Python's\n"
            f"C++:    {cpp_bytes[shown]!r}\nPython: {py_bytes[shown]!r}")


def count_failures(cases, check, ok):
    """Runs `check(name, case)` (None if it passes, else why not) over the
    dict `cases`, printing FAIL and why, or ok and `ok`; returns how many
    failed."""
    failures = 0
    for name, case in cases.items():
        message = check(name, case)
        if message is not None:
            print("FAIL", message)
            failures += 1
        else:
            print(f"ok {name}: {ok}")
    return failures
