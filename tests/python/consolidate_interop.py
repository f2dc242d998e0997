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
import shutil
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
import td_dump  # noqa: E402
from corpus_classes import CorpusInner  # noqa: E402
from interop_view import dump, dump_stack as _dump_stack  # noqa: E402


def cases():
    """The cases, built exactly as consolidate_interop.cpp builds them."""
    out = {}
    out["basic"] = TensorDict(
        {
            "a": torch.arange(3, dtype=torch.int32),
            "b": {"c": torch.ones(3, 2), "s": "hello"},
            "d": torch.tensor([True, False, True]),
        },
        batch_size=[3],
    )
    dtypes = TensorDict(batch_size=[2])
    for name in [
        "float64", "float32", "float16", "bfloat16", "int8", "uint8",
        "int16", "int32", "int64", "complex64", "bool",
    ]:
        dtypes[name] = torch.arange(6).reshape(2, 3).to(getattr(torch, name))
    out["dtypes"] = dtypes
    named = TensorDict(
        {
            "x": torch.arange(6, dtype=torch.float32).reshape(2, 3),
            "n": TensorDict({"y": torch.ones(2, 4, dtype=torch.float64)}, [2, 4]),
        },
        batch_size=[2],
        device="cpu",
    )
    named.names = ["b"]
    named.lock_()
    out["names_device_locked"] = named
    stacked = TensorDict({"x": torch.zeros(2, 2)}, batch_size=[2, 2])
    stacked["words"] = NonTensorStack(
        NonTensorStack("a", "b"), NonTensorStack("c", "d")
    )
    out["stack"] = stacked
    out["empty_leaf"] = TensorDict(
        {"e": torch.zeros(2, 0), "f": torch.arange(2, dtype=torch.int16)},
        batch_size=[2],
    )
    out["scalar"] = TensorDict({"x": torch.tensor(3.5), "meta": NonTensorData(7)})
    out["deep"] = TensorDict(
        {"l1": {"l2": {"l3": {"v": torch.arange(5, dtype=torch.int64)}}},
         "w": torch.arange(5, dtype=torch.uint8)},
        batch_size=[5],
    )
    # A lazy stack entry whose elements differ in keys and shapes.
    out["lazy_stack"] = TensorDict(
        {
            "stack": lazy_stack(
                [
                    TensorDict({"y": torch.arange(6.0).reshape(3, 2)}, [3]),
                    TensorDict(
                        {
                            "y": torch.arange(6.0, 12.0).reshape(3, 2),
                            "z": torch.arange(3, dtype=torch.int16).reshape(3, 1),
                        },
                        [3],
                    ),
                ],
                1,
            ),
            "x": torch.ones(3, 2),
        },
        batch_size=[3, 2],
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


def same_bytes(name, cpp_path, py_path):
    """True if the C++ file is byte-identical to Python's; prints if not."""
    with open(cpp_path, "rb") as f:
        cpp_bytes = f.read()
    with open(py_path, "rb") as f:
        py_bytes = f.read()
    if cpp_bytes != py_bytes:
        print(f"FAIL {name}: the C++ file differs from Python's\n"
              f"C++:    {cpp_bytes[-400:]!r}\nPython: {py_bytes[-400:]!r}")
    return cpp_bytes == py_bytes


def check_stacks(binary, py_dir, cpp_dir):
    """Step 3 for the lazy stacks at the root."""
    failures = 0
    for name, stack in stack_cases().items():
        expected = json.loads(json.dumps(dump_stack(stack)))
        with open(os.path.join(cpp_dir, name + ".loaded.json")) as f:
            cpp_view = json.load(f)
        if cpp_view != expected:
            print(f"FAIL {name}: C++ reads the Python file as\n{cpp_view}\n"
                  f"expected\n{expected}")
            failures += 1
            continue
        path = os.path.join(cpp_dir, name + ".bin")
        loaded = TensorDict.from_consolidated(path)
        if not isinstance(loaded, LazyStackedTensorDict):
            print(f"FAIL {name}: Python reads the C++ file as a "
                  f"{type(loaded).__name__}")
            failures += 1
            continue
        if dump_stack(loaded) != dump_stack(stack):
            print(f"FAIL {name}: Python reads the C++ file as\n"
                  f"{dump_stack(loaded)}\nexpected\n{dump_stack(stack)}")
            failures += 1
            continue
        if not same_bytes(name, path, os.path.join(py_dir, name + ".bin")):
            failures += 1
            continue
        # consolidated_bytes(stack): the same bytes, built in memory.
        if not same_bytes(
            name + " (consolidated_bytes)",
            os.path.join(cpp_dir, name + ".bytes.bin"),
            os.path.join(py_dir, name + ".bin"),
        ):
            failures += 1
            continue
        print(f"ok {name}: Python reads the C++ lazy stack, byte-identical")
    return failures


def main() -> int:
    binary, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    py_dir = os.path.join(work, "python")
    cpp_dir = os.path.join(work, "cpp")
    os.makedirs(py_dir)
    os.makedirs(cpp_dir)
    all_cases = cases()
    for name, td in all_cases.items():
        td.consolidate(filename=os.path.join(py_dir, name + ".bin"))
    for name, stack in stack_cases().items():
        stack.consolidate(filename=os.path.join(py_dir, name + ".bin"))
    print("$", binary, py_dir, cpp_dir, flush=True)
    if subprocess.run([binary, py_dir, cpp_dir]).returncode != 0:
        return 1
    failures = 0
    for name, td in all_cases.items():
        expected = json.loads(json.dumps(dump(td)))
        with open(os.path.join(cpp_dir, name + ".loaded.json")) as f:
            cpp_view = json.load(f)
        if cpp_view != expected:
            print(f"FAIL {name}: C++ reads the Python file as\n{cpp_view}\n"
                  f"expected\n{expected}")
            failures += 1
            continue
        path = os.path.join(cpp_dir, name + ".bin")
        loaded = TensorDict.from_consolidated(path)
        if dump(loaded) != dump(td):
            print(f"FAIL {name}: Python reads the C++ file as\n{dump(loaded)}\n"
                  f"expected\n{dump(td)}")
            failures += 1
            continue
        if not same_bytes(name, path, os.path.join(py_dir, name + ".bin")):
            failures += 1
            continue
        print(f"ok {name}: Python reads the C++ file, byte-identical")
    failures += check_stacks(binary, py_dir, cpp_dir)
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
