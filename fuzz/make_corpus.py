#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer targets.

Usage: make_corpus.py BUILD_DIR

Into BUILD_DIR/corpus/<target>/ (existing inputs are kept, so the corpus the
fuzzer grew survives):

- fuzz_meta_tree and fuzz_cli: every tree of tests/python/memmap_corpus.py
  (written by Python tensordict), the same trees written again by the C++
  library (``BUILD_DIR/bin/tensordict copy``, when built), packed in the
  "=== <path>" form of fuzz/tree_input.h; fuzz_cli also gets the
  consolidated files below, prefixed with "CONSOLIDATED\\n".
- fuzz_consolidated_file and fuzz_consolidated_bytes: consolidated files
  written by Python's ``consolidate(filename=...)`` (a file and the byte
  buffer share one layout).
- fuzz_safetensors: safetensors files written by Python tensordict's
  ``to_safetensors`` and, when the ``safetensors`` package is installed, by
  ``safetensors.torch.save_file`` (dotted names, no tensordict metadata).
- fuzz_tdz: `.tdz` archives written by Python (``save("x.tdz")``, a
  deflated ``pack_memmap``, a ``memmap_like`` archive written into without
  ``refresh_archive_checksums`` (stale CRCs), and a zip written by
  ``zipfile`` to an unseekable stream, whose entries have data descriptors).
- fuzz_aoti_package_meta: AOTI package specs in the target's two forms (see
  fuzz/fuzz_aoti_package_meta.cpp): the metadata of a tutorial package, of a
  ``tensordict_cpp.export`` package and of a probabilistic one, with input
  checks in the form AOTInductor generates them and the call specs torch's
  pytree writes; and the same as small zip packages.
- fuzz_pickle: pickles of the values Python tensordict pickles for
  non-tensor data (numpy arrays of every dtype torch shares, in both byte
  orders and C and Fortran order, numpy scalars, torch.Size, tuples, dicts
  with int keys, bytes, OrderedDict), in protocols 2 to 5, the
  ``other.pickle`` files of a tree Python wrote, and pickles that name
  other globals (which must be refused).

Files larger than the fuzzers' -max_len are left out.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

MAX_LEN = 65536
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def pack_tree(root: str) -> bytes | None:
    """Packs a directory as fuzz/tree_input.h reads it: meta.json first."""
    files = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            files.append(os.path.relpath(path, root))
    files.sort(key=lambda rel: (rel != "meta.json", rel))
    out = bytearray()
    for rel in files:
        with open(os.path.join(root, rel), "rb") as f:
            data = f.read()
        if out:
            out += b"\n"
        out += b"=== " + rel.encode() + b"\n" + data
    return bytes(out) if 0 < len(out) <= MAX_LEN else None


def save(corpus: str, data: bytes | None) -> None:
    if data is None:
        return
    os.makedirs(corpus, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(corpus, name), "wb") as f:
        f.write(data)


def python_trees(scratch: str) -> list[str]:
    out = os.path.join(scratch, "python")
    subprocess.run(
        [sys.executable, os.path.join(ROOT, "tests/python/memmap_corpus.py"),
         "write", out],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return sorted(
        os.path.join(out, name) for name in os.listdir(out)
        if os.path.isdir(os.path.join(out, name)))


def cpp_trees(build: str, sources: list[str], scratch: str) -> list[str]:
    cli = os.path.join(build, "bin", "tensordict")
    if not os.access(cli, os.X_OK):
        return []
    out = []
    for source in sources:
        dest = os.path.join(scratch, "cpp", os.path.basename(source))
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
        done = subprocess.run([cli, "copy", source, dest], env=env,
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        if done.returncode == 0:
            out.append(dest)
    return out


def consolidated_files(scratch: str) -> list[str]:
    import torch
    from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict

    cases = {
        "flat": TensorDict(a=torch.arange(6.0).reshape(2, 3),
                           b=torch.ones(2, dtype=torch.int64), batch_size=[2]),
        "nested": TensorDict(
            a=torch.zeros(3, dtype=torch.bool),
            sub=TensorDict(c=torch.arange(3, dtype=torch.int16),
                           d=torch.randn(3, 2, dtype=torch.complex64),
                           batch_size=[3]),
            batch_size=[3], names=["t"]),
        "non_tensor": TensorDict(x=torch.ones(2, dtype=torch.bfloat16),
                                 label=NonTensorData("hello", batch_size=[2]),
                                 batch_size=[2]),
        "lazy": TensorDict(
            stack=LazyStackedTensorDict(
                TensorDict(a=torch.ones(2)), TensorDict(a=torch.zeros(2)),
                stack_dim=0),
            batch_size=[]),
        "empty": TensorDict(),
        "locked": TensorDict(a=torch.arange(4, dtype=torch.uint8),
                             batch_size=[4]).lock_(),
    }
    out = []
    for name, td in cases.items():
        path = os.path.join(scratch, name + ".consolidated")
        try:
            td.consolidate(filename=path)
        except Exception as error:  # a case this tensordict cannot write
            print(f"make_corpus: skipped {name}: {error}", file=sys.stderr)
            continue
        out.append(path)
    return out


def safetensors_files(scratch: str) -> list[str]:
    import torch
    from tensordict import LazyStackedTensorDict, TensorDict, to_safetensors

    cases = {
        "nested": TensorDict(
            a=torch.arange(3, dtype=torch.int32),
            sub=TensorDict(b=torch.ones(3, 2, dtype=torch.bfloat16),
                           c=torch.tensor([True, False, True]),
                           batch_size=[3]),
            note="hello", batch_size=[3], names=["t"]),
        "empty_leaf": TensorDict(e=torch.zeros(2, 0), f=torch.arange(2.0),
                                 batch_size=[2]),
        "lazy": LazyStackedTensorDict(
            TensorDict(a=torch.ones(2)), TensorDict(a=torch.zeros(2)),
            stack_dim=0),
        "empty": TensorDict(),
    }
    out = []
    for name, td in cases.items():
        path = os.path.join(scratch, name + ".safetensors")
        try:
            to_safetensors(td, path)
        except Exception as error:  # a case this tensordict cannot write
            print(f"make_corpus: skipped {name}: {error}", file=sys.stderr)
            continue
        out.append(path)
    try:
        from safetensors.torch import save_file
    except ImportError:
        return out
    path = os.path.join(scratch, "plain.safetensors")
    save_file({"layers.0.weight": torch.ones(4, 3),
               "layers.0.bias": torch.zeros(4, dtype=torch.float16),
               "head": torch.arange(5, dtype=torch.int64)},
              path, metadata={"format": "pt"})
    out.append(path)
    return out


def tdz_archives(scratch: str) -> list[str]:
    """`.tdz` archives written by Python: stored (aligned) and deflated."""
    import torch
    from tensordict import NonTensorData, TensorDict, pack_memmap

    td = TensorDict(
        a=torch.arange(6.0).reshape(2, 3),
        sub=TensorDict(b=torch.ones(2, dtype=torch.int64), batch_size=[2]),
        label=NonTensorData("hello", batch_size=[2]),
        batch_size=[2],
    )
    out = []
    stored = os.path.join(scratch, "stored.tdz")
    td.save(stored)
    out.append(stored)
    directory = os.path.join(scratch, "tdz_dir")
    td.memmap(directory)
    deflated = os.path.join(scratch, "deflated.tdz")
    pack_memmap(directory, deflated, compression="deflate")
    out.append(deflated)
    stale = os.path.join(scratch, "stale.tdz")
    like = td.memmap_like(stale)
    like["a"] += 1
    del like
    out.append(stale)
    # zipfile puts the CRCs and sizes in data descriptors (flag 0x8) when it
    # cannot seek back to the local header.
    import zipfile

    class Unseekable:
        def __init__(self, raw):
            self.raw = raw

        def write(self, data):
            return self.raw.write(data)

        def flush(self):
            self.raw.flush()

    described = os.path.join(scratch, "descriptor.tdz")
    with open(described, "wb") as raw:
        with zipfile.ZipFile(Unseekable(raw), "w") as zf:
            for root, _, files in sorted(os.walk(directory)):
                for name in sorted(files, key=lambda n: (n != "meta.json", n)):
                    path = os.path.join(root, name)
                    with open(path, "rb") as f:
                        zf.writestr(os.path.relpath(path, directory), f.read())
    out.append(described)
    return out


def _input_check(index: int, dtype: str, sizes, strides) -> str:
    """One check_input_<index> in the form torch 2.13's AOTInductor writes:
    sizes are ints or (low, high) ranges, strides ints or None."""
    v = f"arg{index}_1"
    lines = [
        f"AOTI_NOINLINE static void check_input_{index}(",
        "    AtenTensorHandle* input_handles",
        ") {",
        f"    ConstantHandle {v} = ConstantHandle(input_handles[{index}]);",
        f"    int32_t {v}_dtype;",
        f"    int32_t {v}_expected_dtype = aoti_torch_dtype_{dtype}();",
        f"    if ({v}_expected_dtype != {v}_dtype) {{",
        "        throw std::runtime_error(std::move(ss).str());",
        "    }",
        f"    auto {v}_size = {v}.sizes();",
    ]
    for dim, size in enumerate(sizes):
        if isinstance(size, int):
            lines += [f"    if ({size} != {v}_size[{dim}]) {{", "    }"]
        else:
            lines += [f"    if ({v}_size[{dim}] < {size[0]}) {{", "    }"]
            lines += [f"    if ({v}_size[{dim}] > {size[1]}) {{", "    }"]
    lines.append(f"    auto {v}_stride = {v}.strides();")
    for dim, stride in enumerate(strides):
        if stride is not None:
            lines += [f"    if ({stride} != {v}_stride[{dim}]) {{", "    }"]
    lines += [
        f"    int32_t {v}_expected_device_type = 0;",
        f"    if ({v}_expected_device_type != {v}_device_type) {{",
        "    }",
        "}",
        "",
    ]
    return "\n".join(lines)


def aoti_specs() -> list[bytes]:
    """Spec inputs for fuzz_aoti_package_meta, in its parts form and as zips."""
    import io
    import json
    import zipfile

    import torch
    from torch.utils import _pytree as pytree

    t = torch.zeros(1)
    cpu = {"AOTI_DEVICE_KEY": "cpu", "AOTI_PLATFORM": "linux", "AOTI_CPU_ISA": "AVX2"}
    version = torch.__version__
    spec = {
        "format": "1", "torch": version, "batch_size": [-1], "batch_min": 1,
        "batch_max": 64,
        "inputs": [
            {"key": ["obs", "x"], "name": "obs_x", "dtype": "torch.float32",
             "shape": [5], "device": "cpu"},
            {"key": ["obs", "y"], "name": "obs_y", "dtype": "torch.float32",
             "shape": [2], "device": "cpu"},
        ],
        "weights_prefix": "module.",
        "weights": {"module.0.weight": {"dtype": "torch.float32", "shape": [6, 5]}},
        "weights_in_package": True,
    }
    exported = dict(cpu)
    exported.update({
        "tensordict.format": "1",
        "tensordict.in_keys": json.dumps([["obs", "x"], ["obs", "y"]]),
        "tensordict.out_keys": json.dumps([["out", "action"]]),
        "tensordict.spec": json.dumps(spec),
    })
    head = {
        "distribution_class": "torch.distributions.categorical.Categorical",
        "distribution_kwargs": {"validate_args": None},
        "distribution_tensor_kwargs": {
            "probs": {"dtype": "torch.float32", "shape": [3], "data": [0.2, 0.3, 0.5]}
        },
        "dist_keys": ["logits"], "in_keys": ["logits"], "out_key": "action",
        "return_log_prob": True, "log_prob_key": None,
        "default_interaction_type": "deterministic",
    }
    probabilistic = dict(cpu)
    probabilistic.update({
        "tensordict.format": "2",
        "tensordict.in_keys": json.dumps(["observation"]),
        "tensordict.out_keys": json.dumps(["logits"]),
        "tensordict.probabilistic": json.dumps(head),
    })
    tutorial = dict(cpu)
    tutorial.update({
        "tensordict.in_keys": json.dumps(["obs"]),
        "tensordict.out_keys": json.dumps(["action"]),
    })
    two = _input_check(0, "float32", [(2, 64), 5], [5, 1]) + _input_check(
        1, "float32", [(2, 64), 2], [2, 1]
    )
    one = _input_check(0, "float32", [4, 3], [1, 4])

    def call_spec(names, outputs):
        inputs = pytree.treespec_dumps(
            pytree.tree_flatten(((), {name: t for name in names}))[1]
        )
        outs = pytree.treespec_dumps(pytree.tree_flatten(tuple([t] * outputs))[1])
        return inputs, outs

    cases = [
        (exported, two, ["obs_x", "obs_y"], 1),
        (probabilistic, _input_check(0, "float32", [(2, 64), 4], [4, 1]),
         ["observation"], 1),
        (tutorial, one, ["obs"], 1),
    ]
    out = []
    for meta, wrapper, names, outputs in cases:
        ins, outs = call_spec(names, outputs)
        parts = [json.dumps(meta), wrapper, ins, outs]
        out.append(b"\x00" + "\x00".join(parts).encode())
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as zf:
            zf.writestr("m/data/aotinductor/model/x.wrapper_metadata.json", json.dumps(meta))
            zf.writestr("m/data/aotinductor/model/x.wrapper.cpp", wrapper)
            zf.writestr("m/archive_format", "pt2")
        out.append(b"\x01" + buffer.getvalue())
    return out


def pickles() -> list[bytes]:
    """Seeds for fuzz_pickle (numpy and torch imported only here)."""
    import collections
    import pickle

    import numpy as np
    import torch

    values = [
        {"data": {"k": (1, 2), 3: b"xy", "f": 2.5, "n": None, "t": True}},
        {"data": [2**64 - 1, -(2**63), "text", [], {}, ()]},
        torch.Size([3, 4]),
        collections.OrderedDict([("z", 1), ("a", 2)]),
        [np.float32(1.5), np.int64(-3), np.bool_(True), np.complex64(1j)],
        np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3)),
        np.arange(3, dtype=">f8"),
        np.zeros((2, 0, 3)),
        np.array(["a"]),  # refused: a unicode dtype
        {1, 2},  # refused: a set
        complex(1, 2),  # refused: builtins.complex
    ]
    for name in ("b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8",
                 "f2", "f4", "f8", "c8", "c16"):
        values.append({"data": np.arange(4).astype(name).reshape(2, 2)})
    out = []
    for value in values:
        for protocol in (2, 4, 5):
            out.append(pickle.dumps(value, protocol=protocol))
    return out


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    build = sys.argv[1]
    corpus = os.path.join(build, "corpus")
    scratch = tempfile.mkdtemp(prefix="tensordict-corpus-")
    try:
        py = python_trees(scratch)
        trees = py + cpp_trees(build, py, scratch)
        for tree in trees:
            packed = pack_tree(tree)
            save(os.path.join(corpus, "fuzz_meta_tree"), packed)
            save(os.path.join(corpus, "fuzz_cli"), packed)
        files = consolidated_files(scratch)
        for path in files:
            with open(path, "rb") as f:
                data = f.read()
            if len(data) > MAX_LEN:
                continue
            for target in ("fuzz_consolidated_file", "fuzz_consolidated_bytes"):
                save(os.path.join(corpus, target), data)
            save(os.path.join(corpus, "fuzz_cli"), b"CONSOLIDATED\n" + data)
        for path in safetensors_files(scratch):
            with open(path, "rb") as f:
                data = f.read()
            if len(data) <= MAX_LEN:
                save(os.path.join(corpus, "fuzz_safetensors"), data)
        for path in tdz_archives(scratch):
            with open(path, "rb") as f:
                save(os.path.join(corpus, "fuzz_tdz"), f.read())
        for data in aoti_specs():
            save(os.path.join(corpus, "fuzz_aoti_package_meta"), data)
        for data in pickles():
            save(os.path.join(corpus, "fuzz_pickle"), data)
        for target in sorted(os.listdir(corpus)):
            count = len(os.listdir(os.path.join(corpus, target)))
            print(f"make_corpus: {target}: {count} inputs")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
