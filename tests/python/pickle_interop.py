#!/usr/bin/env python3
"""Non-tensor values Python pickled, read by the C++ command-line tool.

The installed Python tensordict writes trees whose NonTensorData and
NonTensorStack values JSON cannot hold, so it pickles them (`other.pickle`,
`pickle.pkl`): numpy arrays of every dtype numpy and torch share (C and
Fortran order, both byte orders), numpy scalars, tuples, dicts with int
keys, bytes and torch.Size. `tensordict dump` reads each tree, as a
directory and as a `.tdz` archive, without executing anything, and its
output must equal what Python loads:
- an array that spans the batch dims is a tensor leaf (dtype, shape and the
  sha256 of its C-order bytes);
- any other value is its JSON form: tuples and torch.Size as lists, arrays
  as `tolist()`, numpy scalars as numbers, int keys as strings, bytes as
  nlohmann's binary ({"bytes": [...], "subtype": null}).
`tensordict copy` of the directory writes JSON and tensor leaves (bytes as
the list of their values), which Python loads without pickle: the arrays as
tensors, the rest as that JSON.
Then a tree holding a value whose `__reduce__` calls os.system to create a
marker file: `dump`, `info` and `verify` must refuse it, naming the key and
`posix.system`, and the marker must never appear. A truncated and a garbage
pickle must be errors (exit status 2), not crashes.

usage: pickle_interop.py TENSORDICT_CLI WORK_DIR
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import warnings

import numpy as np
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict, pack_memmap

warnings.simplefilter("ignore", FutureWarning)

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "float16", "float32", "float64", "complex64",
          "complex128"]


def expected_json(value):
    """The JSON the C++ reader gives for a pickled value."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):  # torch.Size is a tuple
        return [expected_json(v) for v in value]
    if isinstance(value, bytes):
        return {"bytes": list(value), "subtype": None}
    if isinstance(value, dict):
        return {json.dumps(k) if not isinstance(k, str) else k:
                expected_json(v) for k, v in value.items()}
    return value


def cases():
    """name -> (tree, {key: array leaf} , {key: JSON value})."""
    out = {}
    arrays = {}
    td = TensorDict({"obs": torch.zeros(2, 3)}, batch_size=[2])
    for name in DTYPES:
        a = (np.arange(6) % 3).astype(name).reshape(2, 3)
        arrays[name] = a
        td[name] = NonTensorData(a)
    arrays["fortran"] = np.asfortranarray(
        np.arange(6, dtype=np.float32).reshape(2, 3))
    td["fortran"] = NonTensorData(arrays["fortran"])
    arrays["big_endian"] = np.arange(4, dtype=">i8").reshape(2, 2)
    td["big_endian"] = NonTensorData(arrays["big_endian"])
    values = {
        "vector": np.array([0.5, 1.5, 2.5], dtype=np.float32),
        "matrix": np.arange(6, dtype=np.uint8).reshape(3, 2),
        "scalar_f4": np.float32(2.25),
        "scalar_u8": np.uint64(2**64 - 1),
        "mixed": {"size": torch.Size([3, 4]), "pair": (1, "x"),
                  7: b"\x00\xff", "arr": np.arange(2, dtype=np.int32),
                  "nested": {"t": (None, True, 1.5)}},
        "tuple_with_bytes": (b"abc", 2),
    }
    for key, value in values.items():
        td[key] = NonTensorData(value)
    td["stack"] = NonTensorStack(np.array([1, 2], dtype=np.int16), (3, 4))
    expected = {key: expected_json(v) for key, v in values.items()}
    expected["stack"] = [[1, 2], [3, 4]]
    out["values"] = (td, arrays, expected)
    return out


def run_cli(cli, *args):
    return subprocess.run([cli, *args], capture_output=True, text=True,
                          timeout=120)


def check_tree(cli, path, arrays, expected):
    failures = []
    result = run_cli(cli, "dump", path)
    if result.returncode != 0:
        return [f"{path}: dump failed ({result.returncode}): {result.stderr}"]
    entries = {tuple(e["key"]): e
               for e in json.loads(result.stdout)["entries"]}
    for key, array in arrays.items():
        entry = entries.get((key,))
        c_order = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("="))
        want = {
            "kind": "tensor",
            "dtype": str(torch.from_numpy(c_order).dtype),
            "shape": list(array.shape),
            "sha256": hashlib.sha256(c_order.tobytes()).hexdigest(),
        }
        got = {k: entry.get(k) for k in want} if entry else None
        if got != want:
            failures.append(f"{path}: {key}: {got} != {want}")
    for key, value in expected.items():
        entry = entries.get((key,))
        if entry is None or entry.get("value") != value:
            failures.append(f"{path}: {key}: {entry} != {value}")
    return failures


class Evil:
    """A value whose unpickling would run a shell command."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def check_refusals(cli, work):
    failures = []
    marker = os.path.join(work, "MARKER")
    evil = os.path.join(work, "evil")
    TensorDict({"obs": torch.zeros(2), "evil": NonTensorData(Evil(marker))},
               batch_size=[2]).memmap(evil)
    if os.path.exists(marker):
        return [f"{marker} exists before the test"]
    evil_tdz = os.path.join(work, "evil.tdz")
    pack_memmap(evil, evil_tdz)
    for command in ("dump", "info", "verify"):
        for path in (evil, evil_tdz):
            result = run_cli(cli, command, path)
            text = result.stdout + result.stderr
            if result.returncode == 0 or result.returncode < 0:
                failures.append(f"{command} {path}: exit {result.returncode}")
            if "key 'evil'" not in text or \
                    "the global 'posix.system' is not allowed" not in text:
                failures.append(f"{command} {path}: {text!r}")
    if os.path.exists(marker):
        failures.append(f"{marker} was created: the pickle ran")
    # Damaged pickles: errors, never a crash (a negative exit status).
    base = os.path.join(work, "damaged")
    TensorDict({"d": NonTensorData({1: "x"})}, batch_size=[]).memmap(base)
    with open(os.path.join(base, "d", "other.pickle"), "rb") as f:
        good = f.read()
    for name, data in (("truncated", good[: len(good) // 2]),
                       ("garbage", b"\x80\x04" + os.urandom(64))):
        path = os.path.join(work, name)
        shutil.copytree(base, path)
        with open(os.path.join(path, "d", "other.pickle"), "wb") as f:
            f.write(data)
        result = run_cli(cli, "dump", path)
        if result.returncode != 2 or "key 'd'" not in result.stderr:
            failures.append(
                f"{name}: exit {result.returncode}: {result.stderr!r}")
    return failures


def saved_json(value):
    """What C++ writes for a value it read as `value` (bytes: a list)."""
    if isinstance(value, dict) and set(value) == {"bytes", "subtype"}:
        return value["bytes"]
    if isinstance(value, dict):
        return {k: saved_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [saved_json(v) for v in value]
    return value


def check_copy(cli, path, arrays, expected):
    """`tensordict copy` saves what it read as JSON and tensor leaves, which
    Python loads without pickle."""
    copy = path + ".copy"
    result = run_cli(cli, "copy", path, copy)
    if result.returncode != 0:
        return [f"copy {path}: {result.stderr}"]
    if any(f.endswith((".pickle", ".pkl")) for _, _, files in os.walk(copy)
           for f in files):
        return [f"copy {path}: a pickle was written"]
    td = TensorDict.load_memmap(copy, allow_pickle=False)
    failures = []
    for key, array in arrays.items():
        got = td.get(key)
        want = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("="))
        if not isinstance(got, torch.Tensor) or \
                not np.array_equal(got.numpy(), want):
            failures.append(f"copy {path}: {key}: {got!r} != {want!r}")
    for key, value in expected.items():
        got = td[key]
        if got != saved_json(value):
            failures.append(f"copy {path}: {key}: {got!r} != {value!r}")
    return failures


def main() -> int:
    cli, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    failures = []
    for name, (td, arrays, expected) in cases().items():
        path = os.path.join(work, name)
        td.memmap(path)
        td.save(path + ".tdz")
        for tree in (path, path + ".tdz"):
            failures += check_tree(cli, tree, arrays, expected)
        failures += check_copy(cli, path, arrays, expected)
    failures += check_refusals(cli, work)
    for failure in failures:
        print(failure)
    print(f"pickle_interop: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
