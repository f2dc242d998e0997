#!/usr/bin/env python3
"""`.tdz` archive interop, both ways, with the installed Python tensordict.

1. Python writes archives of the sample: ``save("py.tdz")``, ``pack_memmap``
   of a directory, and a deflated ``pack_memmap``.
2. C++ (archive_interop) loads them (a leaf must be an aligned view into the
   mapping), unpacks two with ``unpack_memmap``, and writes ``cpp.tdz``
   (``save``), ``cpp_packed.tdz`` (``pack_memmap``), ``cpp_deflate.tdz``,
   ``cpp_saved_deflate.tdz`` (``save`` with compression) and
   ``cpp_archive_flag`` (``archive(true)``, no suffix).
3. Python loads every C++ archive with ``TensorDict.load_memmap``, checks
   them with ``zipfile`` (CRCs) and the payload alignment, unpacks them with
   ``unpack_memmap``, and loads the directories C++ unpacked.
4. Stale CRCs both ways: Python writes into a ``memmap_like`` archive and
   into a zip with data descriptors; C++ ``unpack_memmap`` reports the bad
   CRC and ``refresh_archive_checksums`` fixes it (``zipfile.testzip``
   agrees). C++ writes into its own ``memmap_like`` archives; Python sees the
   values, ``testzip`` names the stale entry, and none after C++'s refresh.
5. ``save("x.tdz")`` in C++ (with Python's JSON spacing) gives Python's
   bytes for the same tree, but for the zip timestamps.
6. The ``tensordict`` CLI reads archives: info, verify (which reports stale
   CRCs), dump (the same as the directory's) and copy into an archive.

usage: run_archive_interop.py ARCHIVE_INTEROP_BINARY WORK_DIR TENSORDICT_CLI
"""

import io
import os
import shutil
import struct
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


def payload_offset(path: str, name: str) -> int:
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
    with open(path, "rb") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = struct.unpack("<2H", f.read(4))
    return info.header_offset + 30 + name_len + extra_len


def write_with_data_descriptors(directory: str, path: str) -> None:
    """Zips ``directory`` as ``zipfile`` does on an unseekable stream."""

    class Unseekable:
        def __init__(self, raw):
            self.raw = raw

        def write(self, data):
            return self.raw.write(data)

        def flush(self):
            self.raw.flush()

    with open(path, "wb") as raw:
        with zipfile.ZipFile(Unseekable(raw), "w") as zf:
            for root, _, files in sorted(os.walk(directory)):
                for name in sorted(files, key=lambda n: (n != "meta.json", n)):
                    file = os.path.join(root, name)
                    with open(file, "rb") as f:
                        zf.writestr(os.path.relpath(file, directory), f.read())


def without_timestamps(data: bytes) -> bytes:
    """The archive with every DOS time and date zeroed."""
    out = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for info in zf.infolist():
            out[info.header_offset + 10 : info.header_offset + 14] = bytes(4)
        pos = zf.start_dir
        for _ in zf.infolist():
            out[pos + 12 : pos + 16] = bytes(4)
            name_len, extra_len, comment_len = struct.unpack_from(
                "<3H", data, pos + 28
            )
            pos += 46 + name_len + extra_len + comment_len
    return bytes(out)


def check_stale_crcs(work: str) -> int:
    """Archives written through a shared mapping, refreshed or not by C++."""
    problems = 0
    for name, bad in (
        ("py_stale.tdz", None),
        ("py_descriptor.tdz", None),
        ("cpp_like.tdz", "a.memmap"),
        ("cpp_like_refreshed.tdz", None),
    ):
        path = os.path.join(work, name)
        with zipfile.ZipFile(path) as zf:
            got = zf.testzip()
        print(f"testzip({name}) = {got!r}, expected {bad!r}")
        problems += got != bad
    for name, a in (
        ("py_stale.tdz", torch.arange(12, dtype=torch.float32).reshape(3, 4) + 1),
        ("cpp_like.tdz", torch.full((3, 4), 5.0)),
        ("cpp_like_refreshed.tdz", torch.full((3, 4), 5.0)),
    ):
        loaded = TensorDict.load_memmap(os.path.join(work, name))
        if not torch.equal(loaded["a"], a):
            print(f"{name}: a is {loaded['a']}, expected {a}")
            problems += 1
    for name in ("cpp_like.tdz", "cpp_like_refreshed.tdz"):
        loaded = TensorDict.load_memmap(os.path.join(work, name))
        ok = torch.equal(loaded["nested", "b"], torch.tensor([7, 8, 9])) and bool(
            (loaded["half"] == 0).all()
        )
        print(f"{name} values: {'ok' if ok else 'FAILED'}")
        problems += not ok
    loaded = TensorDict.load_memmap(os.path.join(work, "py_descriptor.tdz"))
    if loaded["a"][0, 0].item() != 100.0:
        print(f"py_descriptor.tdz: a[0, 0] is {loaded['a'][0, 0]}, expected 100")
        problems += 1
    return problems


def check_bytes(work: str) -> int:
    with open(os.path.join(work, "py.tdz"), "rb") as f:
        py = without_timestamps(f.read())
    with open(os.path.join(work, "cpp_spaced.tdz"), "rb") as f:
        cpp = without_timestamps(f.read())
    same = py == cpp
    print(f"cpp_spaced.tdz == py.tdz but for timestamps: {same}")
    if not same:
        with zipfile.ZipFile(io.BytesIO(py)) as a, zipfile.ZipFile(io.BytesIO(cpp)) as b:
            for x, y in zip(a.infolist(), b.infolist()):
                if (x.filename, x.CRC, x.file_size) != (y.filename, y.CRC, y.file_size):
                    print(f"  python {x.filename} {x.file_size}: {a.read(x)[:200]!r}")
                    print(f"  c++    {y.filename} {y.file_size}: {b.read(y)[:200]!r}")
    return not same


def check_cli(cli: str, work: str) -> int:
    problems = 0

    def run(*args):
        result = subprocess.run([cli, *args], capture_output=True, text=True)
        return result.returncode, result.stdout + result.stderr

    archive = os.path.join(work, "py.tdz")
    status, out = run("info", archive)
    if status != 0 or f"{archive}: TensorDict batch_size=[3]" not in out:
        print(f"cli info {archive}: status {status}\n{out}")
        problems += 1
    if "\n  'a': tensor torch.float32 [3, 4] 48 bytes" not in out or "5 tensors" not in out:
        print(f"cli info does not list the 5 leaves, 'a' among them:\n{out}")
        problems += 1
    status, out = run("verify", archive)
    if status != 0 or out.strip() != f"{archive}: ok":
        print(f"cli verify {archive}: status {status}\n{out}")
        problems += 1
    stale = os.path.join(work, "cpp_like.tdz")
    status, out = run("verify", stale)
    if status != 1 or "entry 'a.memmap' is corrupted" not in out:
        print(f"cli verify {stale}: status {status}\n{out}")
        problems += 1
    status, dump_archive = run("dump", archive)
    status_dir, dump_dir = run("dump", os.path.join(work, "py_dir"))
    if status != 0 or status_dir != 0 or dump_archive != dump_dir:
        print(f"cli dump differs:\n{dump_archive}\n---\n{dump_dir}")
        problems += 1
    for source in (archive, os.path.join(work, "py_dir")):
        copy = source.rstrip("/") + ".cli_copy.tdz"
        status, out = run("copy", source, copy)
        if status != 0 or not is_memmap_archive(copy):
            print(f"cli copy {source} {copy}: status {status}\n{out}")
            problems += 1
            continue
        problems += compare(f"cli copy {os.path.basename(source)}", TensorDict.load_memmap(copy))
    junk = os.path.join(work, "junk.tdz")
    with open(junk, "wb") as f:
        f.write(b"PK\x03\x04 this is no archive")
    status, out = run("verify", junk)
    if status != 1 or "archive" not in out:
        print(f"cli verify {junk}: status {status}\n{out}")
        problems += 1
    print(f"cli: {'ok' if not problems else 'FAILED'}")
    return problems


def main() -> int:
    binary, work, cli = sys.argv[1], sys.argv[2], sys.argv[3]
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
    like = sample().memmap_like(os.path.join(work, "py_stale.tdz"))
    like["a"].copy_(sample()["a"] + 1)
    del like
    descriptor = os.path.join(work, "py_descriptor.tdz")
    write_with_data_descriptors(os.path.join(work, "py_dir"), descriptor)
    with open(descriptor, "r+b") as f:
        f.seek(payload_offset(descriptor, "a.memmap"))
        f.write(struct.pack("<f", 100.0))
    print("$", binary, work, flush=True)
    status = subprocess.run([binary, work]).returncode
    if status != 0:
        return 1
    problems = 0
    for name in (
        "cpp.tdz",
        "cpp_packed.tdz",
        "cpp_deflate.tdz",
        "cpp_saved_deflate.tdz",
        "cpp_archive_flag",
    ):
        path = os.path.join(work, name)
        problems += check_archive(path)
        problems += compare(f"load_memmap({name})", TensorDict.load_memmap(path))
        out = unpack_memmap(path, os.path.join(work, name + ".unpacked_by_py"))
        problems += compare(f"unpack_memmap({name})", TensorDict.load_memmap(out))
    # save(compression="deflate") deflates the leaves, as Python's: the
    # meta.json entries stay stored.
    with zipfile.ZipFile(os.path.join(work, "cpp_saved_deflate.tdz")) as zf:
        methods = {info.filename: info.compress_type for info in zf.infolist()}
    want = {
        name: zipfile.ZIP_DEFLATED if name.endswith(".memmap") else zipfile.ZIP_STORED
        for name in methods
    }
    if methods != want or not any(name.endswith(".memmap") for name in methods):
        print(f"cpp_saved_deflate.tdz: compression {methods}, want {want}")
        problems += 1
    for name in ("py_unpacked_by_cpp", "py_deflate_unpacked_by_cpp"):
        problems += compare(name, TensorDict.load_memmap(os.path.join(work, name)))
    stack = TensorDict.load_memmap(os.path.join(work, "cpp_stack.tdz"))
    ok = (
        type(stack).__name__ == "LazyStackedTensorDict"
        and torch.equal(stack[0]["a"], torch.ones(2, 3))
        and torch.equal(stack[1]["a"], torch.zeros(2, 4))
    )
    print(f"load_memmap(cpp_stack.tdz): {'ok' if ok else 'FAILED ' + repr(stack)}")
    problems += not ok
    problems += check_stale_crcs(work)
    problems += check_bytes(work)
    problems += check_cli(cli, work)
    return 0 if problems == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
