#!/usr/bin/env python3
"""`.tdz` archive interop, both ways, with the installed Python tensordict.

1. Python writes archives of the sample: ``save("py.tdz")``, ``pack_memmap``
   of a directory, and a deflated ``pack_memmap``.
2. C++ (archive_interop) loads them (a leaf must be an aligned view into the
   mapping), unpacks two with ``unpack_memmap``, and writes ``cpp.tdz``
   (``save``), ``cpp_packed.tdz`` (``pack_memmap``) and ``cpp_deflate.tdz``.
3. Python loads every C++ archive with ``TensorDict.load_memmap``, checks
   them with ``zipfile`` (CRCs) and the payload alignment, unpacks them with
   ``unpack_memmap``, and loads the directories C++ unpacked.

usage: run_archive_interop.py ARCHIVE_INTEROP_BINARY WORK_DIR
"""

import os
import shutil
import subprocess
import sys
import zipfile

import torch
from tensordict import (
    is_memmap_archive,
    NonTensorData,
    pack_memmap,
    TensorDict,
    unpack_memmap,
)


def sample() -> TensorDict:
    return TensorDict(
        a=torch.arange(12, dtype=torch.float32).reshape(3, 4),
        nested=TensorDict(
            b=torch.tensor([1, 2, 3]),
            c=torch.tensor([True, False, True]),
            batch_size=[3],
        ),
        half=torch.ones(3, 2, dtype=torch.float16),
        bf=torch.arange(3, dtype=torch.bfloat16),
        text=NonTensorData("hello", batch_size=[3]),
        batch_size=[3],
    )


def compare(what: str, got) -> int:
    want = sample()
    problems = []
    if got.batch_size != want.batch_size:
        problems.append(f"batch size {got.batch_size}, expected {want.batch_size}")
    keys = set(want.keys(True, True))
    if set(got.keys(True, True)) != keys:
        problems.append(f"keys {sorted(map(str, got.keys(True, True)))}")
    for key in keys:
        value, expected = got.get(key), want.get(key)
        if value.dtype != expected.dtype or not torch.equal(
            torch.as_tensor(value), expected
        ):
            problems.append(f"{key} differs: {value} vs {expected}")
    text = got.get("text", None)
    text = getattr(text, "data", text)
    if text != "hello":
        problems.append(f"text is {text!r}")
    print(f"{what}: {'ok' if not problems else 'FAILED ' + '; '.join(problems)}")
    return len(problems)


def check_archive(path: str) -> int:
    problems = 0
    if not is_memmap_archive(path):
        print(f"{path}: not an archive for Python")
        problems += 1
    with zipfile.ZipFile(path) as zf:
        bad = zf.testzip()
        if bad is not None:
            print(f"{path}: bad CRC for {bad}")
            problems += 1
        with open(path, "rb") as f:
            for info in zf.infolist():
                if not info.filename.endswith(".memmap"):
                    continue
                if info.compress_type != zipfile.ZIP_STORED:
                    continue
                f.seek(info.header_offset + 26)
                name_len = int.from_bytes(f.read(2), "little")
                extra_len = int.from_bytes(f.read(2), "little")
                offset = info.header_offset + 30 + name_len + extra_len
                if offset % 64:
                    print(f"{path}: {info.filename} payload at {offset}, not aligned")
                    problems += 1
    return problems


def main() -> int:
    binary, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    td = sample()
    td.save(os.path.join(work, "py.tdz"))
    td.memmap(os.path.join(work, "py_dir"))
    pack_memmap(os.path.join(work, "py_dir"), os.path.join(work, "py_packed.tdz"))
    pack_memmap(
        os.path.join(work, "py_dir"),
        os.path.join(work, "py_deflate.tdz"),
        compression="deflate",
    )
    print("$", binary, work, flush=True)
    status = subprocess.run([binary, work]).returncode
    if status != 0:
        return 1
    problems = 0
    for name in ("cpp.tdz", "cpp_packed.tdz", "cpp_deflate.tdz"):
        path = os.path.join(work, name)
        problems += check_archive(path)
        problems += compare(f"load_memmap({name})", TensorDict.load_memmap(path))
        out = unpack_memmap(path, os.path.join(work, name + ".unpacked_by_py"))
        problems += compare(f"unpack_memmap({name})", TensorDict.load_memmap(out))
    for name in ("py_unpacked_by_cpp", "py_deflate_unpacked_by_cpp"):
        problems += compare(name, TensorDict.load_memmap(os.path.join(work, name)))
    return 0 if problems == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
