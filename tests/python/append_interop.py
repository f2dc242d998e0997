#!/usr/bin/env python3
"""append_memmap, both ways, with the installed Python tensordict.

1. Python saves a tree of 3 rows three times (WORK/py_base, WORK/py_tree,
   WORK/py_tree_py), the 2 rows to append (WORK/py_rows), and the canonical
   dump of the 5 rows it expects (WORK/expected.json).
2. C++ (memmap_interop append) appends the rows to WORK/py_tree, a tree
   Python wrote, and saves WORK/py_base again itself as WORK/cpp_tree.
3. Python appends the same rows to WORK/py_tree_py: every file must be byte
   for byte the one C++ wrote in WORK/py_tree, and WORK/py_tree must load in
   Python as the 5 rows. Then Python appends the rows to WORK/cpp_tree, a
   tree C++ wrote.
4. C++ (memmap_interop append-check) loads WORK/cpp_tree and compares its
   dump with WORK/expected.json.
5. Trees a killed append left (made by hand from Python's files): a nested
   temporary holding more rows than the top meta.json (removed by the rule
   of tensordict main), and one left after the top meta.json was replaced
   (renamed in). C++ (memmap_interop append-to) recovers each and appends
   the rows; each must then be byte for byte what Python's own append
   writes to the tree the rule gives, and load in Python as those rows.

usage: append_interop.py MEMMAP_INTEROP_BINARY WORK_DIR
"""

import json
import os
import shutil
import subprocess
import sys

import torch
import tensordict
from tensordict import TensorDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import td_dump  # noqa: E402


def rows(n: int, start: float) -> TensorDict:
    return TensorDict(
        obs=torch.arange(n * 4, dtype=torch.float32).reshape(n, 4) + start,
        ids=torch.arange(n * 2, dtype=torch.int64).reshape(n, 2) * 7,
        next=TensorDict(
            reward=torch.full((n,), start, dtype=torch.float64),
            done=torch.arange(n) % 2 == 0,
            batch_size=[n],
        ),
        task="reach",
        empty=torch.zeros(n, 0),
        batch_size=[n],
    )


def files(root: str) -> dict:
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


def run(step) -> None:
    print("$", " ".join(step), flush=True)
    subprocess.run(step, check=True)


def main() -> int:
    binary, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    p = lambda name: os.path.join(work, name)  # noqa: E731
    base, new = rows(3, 0.0), rows(2, 100.0)
    for name in ("py_base", "py_tree", "py_tree_py"):
        tensordict.save(base, p(name))
    tensordict.save(new, p("py_rows"))
    expected = td_dump.dump(torch.cat([base, new]))
    with open(p("expected.json"), "w") as f:
        f.write(td_dump.to_json(expected))

    run([binary, "append", p("py_base"), p("py_tree"), p("py_rows"), p("cpp_tree")])

    problems = 0
    tensordict.append_memmap(p("py_tree_py"), new)
    by_cpp, by_python = files(p("py_tree")), files(p("py_tree_py"))
    if by_cpp != by_python:
        problems += 1
        for name in sorted(set(by_cpp) | set(by_python)):
            if by_cpp.get(name) != by_python.get(name):
                print(f"C++ append wrote {name} unlike Python:")
                print("  C++:   ", by_cpp.get(name, b"<missing>")[:300])
                print("  Python:", by_python.get(name, b"<missing>")[:300])
    loaded = td_dump.dump(td_dump.load_tree(p("py_tree")))
    if loaded != expected:
        problems += 1
        print("Python loads the tree C++ appended to as", td_dump.to_json(loaded))

    tensordict.append_memmap(p("cpp_tree"), new)
    loaded = td_dump.dump(td_dump.load_tree(p("cpp_tree")))
    if loaded != expected:
        problems += 1
        print("Python loads the C++ tree it appended to as", td_dump.to_json(loaded))
    run([binary, "append-check", p("cpp_tree"), p("expected.json")])

    # 5. A stale nested temporary (5 rows) beside a top meta.json of 3 rows:
    # removed, so the append starts from the 3 saved rows.
    tensordict.save(base, p("killed_stale"))
    shutil.copy(
        os.path.join(p("py_tree_py"), "next", "meta.json"),
        os.path.join(p("killed_stale"), "next", ".meta.json.append.tmp"),
    )
    tensordict.save(base, p("killed_stale_py"))
    # Killed after the top meta.json was replaced: the nested temporary
    # finishes the first append, then the second one goes on top of it.
    shutil.copytree(p("py_tree_py"), p("killed_forward"))
    shutil.copytree(p("py_tree_py"), p("killed_forward_py"))
    shutil.copy(
        os.path.join(p("py_tree_py"), "next", "meta.json"),
        os.path.join(p("killed_forward"), "next", ".meta.json.append.tmp"),
    )
    shutil.copy(
        os.path.join(p("py_base"), "next", "meta.json"),
        os.path.join(p("killed_forward"), "next", "meta.json"),
    )
    for name, want in (
        ("killed_stale", torch.cat([base, new])),
        ("killed_forward", torch.cat([base, new, new])),
    ):
        run([binary, "append-to", p(name), p("py_rows")])
        tensordict.append_memmap(p(name + "_py"), new)
        by_cpp, by_python = files(p(name)), files(p(name + "_py"))
        if by_cpp != by_python:
            problems += 1
            print(f"{name}: C++ recovered and appended unlike Python's append:",
                  sorted(n for n in set(by_cpp) | set(by_python)
                         if by_cpp.get(n) != by_python.get(n)))
        loaded = td_dump.dump(td_dump.load_tree(p(name)))
        if loaded != td_dump.dump(want):
            problems += 1
            print(f"Python loads {name} after the C++ recovery as",
                  td_dump.to_json(loaded))
    print(f"append interop: {problems} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
