#!/usr/bin/env python3
"""Safetensors files, both ways, with the installed tensordict and safetensors.

1. Python writes every case of `cases()` with `tensordict.to_safetensors`
   into WORK/python/<case>.safetensors, and plain files (no tensordict
   metadata, dotted names, as a Hugging Face checkpoint) with
   `safetensors.torch.save_file` into WORK/python/plain_<name>.safetensors.
2. C++ (safetensors_interop) loads each file and writes what it read into
   WORK/cpp/<case>.loaded.json; then it builds the same cases itself and
   writes WORK/cpp/<case>.safetensors with `to_safetensors`.
3. Python compares the C++ dumps with its own view of the case (for plain
   files, with what `tensordict.from_safetensors` loads); loads every C++
   file with `tensordict.from_safetensors` and with
   `safetensors.torch.load_file` and compares both with the case; and
   compares the C++ file byte for byte with its own.
4. Damaged files (truncated, overlapping or out-of-bounds offsets, a huge
   header length, an unknown dtype, ...) are refused by C++ with the
   expected message, and by the safetensors package too.

usage: safetensors_interop.py SAFETENSORS_INTEROP_BINARY WORK_DIR
"""

import json
import os
import struct
import subprocess
import sys

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    TensorDict,
    from_safetensors,
    lazy_stack,
    to_safetensors,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interop_cases  # noqa: E402
from interop_view import dump  # noqa: E402

DTYPES = [
    "float64", "float32", "float16", "bfloat16", "int8", "uint8", "int16",
    "int32", "int64", "uint16", "uint32", "uint64", "complex64",
    "float8_e4m3fn", "float8_e5m2", "bool",
]


def cases():
    """The cases, built exactly as safetensors_interop.cpp builds them."""
    out = {}
    out["basic"] = interop_cases.basic()
    out["dtypes"] = interop_cases.dtypes(DTYPES)
    out["names"] = interop_cases.named()
    out["empty_leaf"] = interop_cases.empty_leaf()
    scalar = TensorDict(
        {
            "x": torch.tensor(3.5),
            "meta": NonTensorData(7),
            "ratio": NonTensorData(0.1),
            "text": NonTensorData('h\u00e9llo "q"\n'),
        }
    )
    scalar.set_non_tensor("obj", {"k": [1, "two", None]})
    out["scalar"] = scalar
    out["noncontiguous"] = TensorDict(
        {
            "t": torch.arange(6, dtype=torch.int32).reshape(3, 2).t(),
            "s": torch.arange(12, dtype=torch.float64).reshape(3, 4)[:, 0:4:2],
        }
    )
    out["deep"] = interop_cases.deep()
    out["lazy_stack"] = interop_cases.lazy_stack_entry(
        TensorDict({"y": torch.arange(6.0, 12.0).reshape(3, 2)}, [3])
    )
    out["lazy_root"] = lazy_stack(
        [
            TensorDict(
                {"obs": torch.zeros(4), "sub": {"r": torch.arange(4)}}, [4]
            ),
            TensorDict(
                {"obs": torch.ones(4), "sub": {"r": torch.arange(4, 8)}}, [4]
            ),
        ],
        0,
    )
    return out


def plain_files():
    """Checkpoints without tensordict metadata: name -> (tensors, metadata)."""
    g = torch.Generator().manual_seed(0)
    model = {
        "layers.0.weight": torch.randn(4, 3, generator=g),
        "layers.0.bias": torch.randn(4, generator=g),
        "layers.1.weight": torch.randn(2, 4, generator=g).to(torch.bfloat16),
        "head.scale": torch.tensor([True, False]),
        "embed": torch.arange(10, dtype=torch.int64).reshape(5, 2),
        "empty": torch.zeros(0, 3, dtype=torch.float16),
    }
    return {
        "plain_model": (model, {"format": "pt"}),
        "plain_no_metadata": ({"w": torch.ones(3), "a.b.c": torch.zeros(2, 2)}, None),
    }


def flat_leaves(td):
    """The tensors of a case by safetensors name, as to_safetensors names them."""
    if isinstance(td, LazyStackedTensorDict):
        return {".".join(k) if isinstance(k, tuple) else k: td.get(k).contiguous()
                for k in td.keys(True, True)}
    return {(".".join(k) if isinstance(k, tuple) else k): v
            for k, v in td.items(True, True)}


def header_length(data):
    return struct.unpack("<Q", data[:8])[0]


def damaged_files(directory):
    """(name, bytes, expected C++ message) of files no reader may accept."""
    path = os.path.join(directory, "plain_no_metadata.safetensors")
    with open(path, "rb") as f:
        good = f.read()
    n = header_length(good)
    header = json.loads(good[8:8 + n])

    def with_header(obj, data=None, pad=True):
        text = json.dumps(obj, separators=(",", ":")).encode()
        if pad:
            text += b" " * (-len(text) % 8)
        return struct.pack("<Q", len(text)) + text + (good[8 + n:] if data is None else data)

    out = [
        ("empty", b"", "expected at least 8 bytes (the header length), found 0"),
        ("short_length", good[:5], "expected at least 8 bytes"),
        ("truncated_header", good[:8 + n // 2], "bytes follow it"),
        ("truncated_data", good[:-1], "but the data region holds"),
        ("trailing_bytes", good + b"\0" * 8, "bytes no tensor covers"),
        ("huge_header_length", struct.pack("<Q", 1 << 40) + good[8:],
         "more than the limit of 100000000"),
        ("bad_json", struct.pack("<Q", 8) + b'{"a":  ,' + good[8 + n:], "is not valid JSON"),
        ("not_an_object", with_header([1, 2]), "must hold a JSON object"),
    ]
    bad_dtype = json.loads(json.dumps(header))
    bad_dtype["w"]["dtype"] = "F7"
    out.append(("unknown_dtype", with_header(bad_dtype), "dtype 'F7' is unknown"))
    overlap = json.loads(json.dumps(header))
    first, second = sorted(
        (k for k in overlap if k != "__metadata__"),
        key=lambda k: overlap[k]["data_offsets"][0])
    overlap[second]["data_offsets"][0] -= 4
    overlap[second]["data_offsets"][1] -= 4
    out.append(("overlap", with_header(overlap), "(they overlap)"))
    bounds = json.loads(json.dumps(header))
    bounds[second]["data_offsets"][1] += 4
    bounds[second]["shape"] = [bounds[second]["shape"][0] + 1]
    out.append(("out_of_bounds", with_header(bounds), "holds"))
    negative = json.loads(json.dumps(header))
    negative[first]["shape"] = [-1]
    out.append(("negative_shape", with_header(negative), '"shape"'))
    size = json.loads(json.dumps(header))
    size[first]["shape"] = [1]
    out.append(("size_mismatch", with_header(size), "needs"))
    meta = json.loads(json.dumps(header))
    meta["__metadata__"] = {"k": 1}
    out.append(("metadata_not_string", with_header(meta), "must be a string"))
    return out


def main() -> int:
    binary, work = sys.argv[1], sys.argv[2]
    py_dir, cpp_dir, bad_dir = interop_cases.fresh_dirs(work, "python", "cpp", "bad")
    all_cases = cases()
    for name, td in all_cases.items():
        to_safetensors(td, os.path.join(py_dir, name + ".safetensors"))
    plains = plain_files()
    for name, (tensors, metadata) in plains.items():
        save_file(tensors, os.path.join(py_dir, name + ".safetensors"), metadata=metadata)
    if not interop_cases.run_cpp(binary, py_dir, cpp_dir):
        return 1
    failures = 0

    def fail(message):
        nonlocal failures
        print("FAIL", message)
        failures += 1

    for name, td in all_cases.items():
        message = interop_cases.cpp_view_mismatch(cpp_dir, name, dump(td))
        if message is not None:
            fail(message)
            continue
        path = os.path.join(cpp_dir, name + ".safetensors")
        loaded = from_safetensors(path)
        if dump(loaded) != dump(td):
            fail(f"{name}: tensordict reads the C++ file as\n{dump(loaded)}\n"
                 f"expected\n{dump(td)}")
            continue
        flat = load_file(path)
        want = flat_leaves(td)
        if sorted(flat) != sorted(want) or any(
                flat[k].dtype != want[k].dtype or not torch.equal(flat[k], want[k])
                for k in want):
            fail(f"{name}: safetensors.torch.load_file reads the C++ file as "
                 f"{ {k: (v.dtype, list(v.shape)) for k, v in flat.items()} }")
            continue
        message = interop_cases.bytes_mismatch(
            name, path, os.path.join(py_dir, name + ".safetensors"), slice(600))
        if message is not None:
            fail(message)
            continue
        print(f"ok {name}: tensordict and safetensors read the C++ file, "
              "byte-identical to Python's")

    for name in plains:
        message = interop_cases.cpp_view_mismatch(
            cpp_dir, name,
            dump(from_safetensors(os.path.join(py_dir, name + ".safetensors"))),
            what="plain file")
        if message is not None:
            fail(message)
            continue
        print(f"ok {name}: C++ reads the plain file as tensordict does")

    for name, data, message in damaged_files(py_dir):
        path = os.path.join(bad_dir, name + ".safetensors")
        with open(path, "wb") as f:
            f.write(data)
        result = subprocess.run([binary, "--load", path], capture_output=True, text=True)
        if result.returncode != 1 or message not in result.stdout:
            fail(f"{name}: C++ exits {result.returncode} and says "
                 f"{result.stdout!r}{result.stderr!r}, expected {message!r}")
            continue
        try:
            load_file(path)
        except (SafetensorError, Exception):  # the package refuses it too
            pass
        else:
            fail(f"{name}: safetensors.torch.load_file accepts the damaged file")
            continue
        print(f"ok {name}: refused ({result.stdout.strip()[:100]})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
