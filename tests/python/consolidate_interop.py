#!/usr/bin/env python3
"""Consolidated files, both ways, with the installed Python tensordict.

1. Python writes every case of `cases()` with `consolidate(filename=...)`
   into WORK/python/<case>.bin.
2. C++ (consolidate_interop) loads each file with `from_consolidated` and
   writes its own dump into WORK/cpp/<case>.loaded.json; then it builds the
   same cases itself and writes WORK/cpp/<case>.bin with
   `consolidate(filename)`.
3. Python compares the C++ dumps with its own, loads every C++ file with
   `TensorDict.from_consolidated`, compares it with the case, and compares
   the file byte for byte with its own.
   `stack_cases()`, lazy stacks at the root, go the same way through
   `LazyStackedTensorDict::from_consolidated` and `consolidate(filename)`
   in C++: Python loads the C++ files as LazyStackedTensorDict with the same
   stack dim and values, byte-identical to its own, and so are the bytes
   `consolidated_bytes(stack)` builds in memory (WORK/cpp/<case>.bytes.bin);
   C++ reads Python's file back through `from_consolidated_bytes` too.
4. The command-line tool reads every Python file of `cases()`: `dump` gives the canonical
   dump of tests/python/td_dump.py, `verify` passes; a truncated copy fails
   `verify` with the file's name.

usage: consolidate_interop.py CONSOLIDATE_INTEROP_BINARY WORK_DIR [CLI]
"""

import json
import os
import subprocess
import sys

import torch
from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    lazy_stack,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interop_cases  # noqa: E402
import td_dump  # noqa: E402
from corpus_classes import CorpusInner  # noqa: E402
from interop_view import dump, dump_stack as _dump_stack  # noqa: E402


def cases():
    """The cases, built exactly as consolidate_interop.cpp builds them."""
    out = {}
    out["basic"] = interop_cases.basic()
    out["dtypes"] = interop_cases.dtypes([
        "float64", "float32", "float16", "bfloat16", "int8", "uint8",
        "int16", "int32", "int64", "complex64", "bool",
    ])
    named = interop_cases.named(device="cpu")
    named.lock_()
    out["names_device_locked"] = named
    stacked = TensorDict({"x": torch.zeros(2, 2)}, batch_size=[2, 2])
    stacked["words"] = NonTensorStack(
        NonTensorStack("a", "b"), NonTensorStack("c", "d")
    )
    out["stack"] = stacked
    out["empty_leaf"] = interop_cases.empty_leaf()
    out["scalar"] = TensorDict({"x": torch.tensor(3.5), "meta": NonTensorData(7)})
    out["deep"] = interop_cases.deep()
    # A lazy stack entry whose elements differ in keys and shapes.
    out["lazy_stack"] = interop_cases.lazy_stack_entry(
        TensorDict(
            {
                "y": torch.arange(6.0, 12.0).reshape(3, 2),
                "z": torch.arange(3, dtype=torch.int16).reshape(3, 1),
            },
            [3],
        )
    )
    # A nested tensorclass: its level is named by its class, which C++ keeps
    # when reading and writes back (byte-identical files).
    out["tensorclass"] = TensorDict(
        {"x": torch.ones(2, 3),
         "tc": CorpusInner(y=torch.arange(2), tag="t", batch_size=[2])},
        batch_size=[2],
    )
    return out


def stack_cases():
    """Lazy stacks at the root, built exactly as consolidate_interop.cpp builds them."""
    out = {}
    out["root_stack"] = lazy_stack(
        [
            TensorDict(
                {
                    "y": torch.arange(6.0).reshape(3, 2),
                    "n": {"w": torch.arange(3, dtype=torch.int16)},
                },
                [3],
            ),
            TensorDict(
                {
                    "y": torch.arange(6.0, 12.0).reshape(3, 2),
                    "z": torch.arange(3, dtype=torch.int16).reshape(3, 1),
                    "s": "text",
                },
                [3],
            ),
        ],
        1,
    )
    out["root_stack_named"] = LazyStackedTensorDict.lazy_stack(
        [
            TensorDict({"x": torch.arange(4, dtype=torch.float64)}, [4], names=["b"]),
            TensorDict({"x": torch.ones(4, dtype=torch.float64)}, [4], names=["b"]),
        ],
        dim=0,
        stack_dim_name="s",
    )
    return out


def dump_stack(stack):
    """The view of a lazy stack at the root, with its dim's name."""
    return _dump_stack(stack, with_name=True)


def bytes_mismatch(name, cpp_path, py_path):
    """None if the C++ file is byte-identical to Python's; else why not."""
    return interop_cases.bytes_mismatch(
        name, cpp_path, py_path, slice(-400, None))


def check_case(name, case, py_dir, cpp_dir):
    """Step 3 for a case of `cases()` or a lazy stack of `stack_cases()`:
    None if it passes; else why not."""
    is_stack = isinstance(case, LazyStackedTensorDict)
    view = dump_stack if is_stack else dump
    message = interop_cases.cpp_view_mismatch(cpp_dir, name, view(case))
    if message is not None:
        return message
    path = os.path.join(cpp_dir, name + ".bin")
    loaded = TensorDict.from_consolidated(path)
    if isinstance(loaded, LazyStackedTensorDict) != is_stack:
        return f"{name}: Python reads the C++ file as a {type(loaded).__name__}"
    if view(loaded) != view(case):
        return (f"{name}: Python reads the C++ file as\n{view(loaded)}\n"
                f"expected\n{view(case)}")
    py_path = os.path.join(py_dir, name + ".bin")
    message = bytes_mismatch(name, path, py_path)
    if message is None and is_stack:
        # consolidated_bytes(stack): the same bytes, built in memory.
        message = bytes_mismatch(
            name + " (consolidated_bytes)",
            os.path.join(cpp_dir, name + ".bytes.bin"),
            py_path,
        )
    return message


def main() -> int:
    binary, work = sys.argv[1], sys.argv[2]
    py_dir, cpp_dir = interop_cases.fresh_dirs(work, "python", "cpp")
    all_cases = cases()
    for name, td in all_cases.items():
        td.consolidate(filename=os.path.join(py_dir, name + ".bin"))
    for name, stack in stack_cases().items():
        stack.consolidate(filename=os.path.join(py_dir, name + ".bin"))
    if not interop_cases.run_cpp(binary, py_dir, cpp_dir):
        return 1
    failures = interop_cases.count_failures(
        all_cases,
        lambda name, td: check_case(name, td, py_dir, cpp_dir),
        "Python reads the C++ file, byte-identical",
    )
    failures += interop_cases.count_failures(
        stack_cases(),
        lambda name, stack: check_case(name, stack, py_dir, cpp_dir),
        "Python reads the C++ lazy stack, byte-identical",
    )
    if len(sys.argv) > 3:
        failures += check_cli(sys.argv[3], py_dir, all_cases)
    return 1 if failures else 0


def check_cli(cli, py_dir, all_cases):
    """Step 4: the CLI's dump and verify of the Python files."""
    failures = 0
    for name, td in all_cases.items():
        path = os.path.join(py_dir, name + ".bin")
        result = subprocess.run([cli, "dump", path], capture_output=True, text=True)
        expected = td_dump.dump(td)
        if result.returncode != 0 or json.loads(result.stdout) != expected:
            print(f"FAIL {name}: `tensordict dump` gives\n{result.stdout}"
                  f"{result.stderr}expected\n{td_dump.to_json(expected)}")
            failures += 1
            continue
        result = subprocess.run([cli, "verify", path], capture_output=True, text=True)
        if result.returncode != 0 or result.stdout != f"{path}: ok\n":
            print(f"FAIL {name}: `tensordict verify` says\n{result.stdout}")
            failures += 1
            continue
        print(f"ok {name}: the CLI dumps and verifies the Python file")
    # A file cut short: verify names it and fails, and nothing crashes.
    source = os.path.join(py_dir, "basic.bin")
    cut = os.path.join(py_dir, "cut.bin")
    with open(source, "rb") as f:
        data = f.read()
    with open(cut, "wb") as f:
        f.write(data[: len(data) // 2])
    result = subprocess.run([cli, "verify", cut], capture_output=True, text=True)
    if result.returncode != 1 or cut not in result.stdout:
        print(f"FAIL cut: `tensordict verify` of a truncated file exits "
              f"{result.returncode} and says\n{result.stdout}{result.stderr}")
        failures += 1
    else:
        print(f"ok cut: verify reports {result.stdout.strip()!r}")
    return failures


if __name__ == "__main__":
    sys.exit(main())
