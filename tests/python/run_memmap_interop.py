#!/usr/bin/env python3
"""Memmap interop, both ways, with the installed Python tensordict.

1. Python writes the corpus (memmap_corpus.py write).
2. C++ (memmap_interop) loads every tree, compares its canonical dump with
   Python's, writes each tree back, and compares the bytes with Python's.
3. Python loads every tree C++ wrote and compares it with the corpus
   (memmap_corpus.py check).

4. Lazy stacks at the root, through the save family: Python writes every
   lazy-stack case of the corpus with `memmap_`, `memmap_like` and
   `save("x.tdz")` (lazy-write); C++ (memmap_interop lazy-root) loads each
   with LazyStackedTensorDict::load_memmap, compares its dump, writes the
   same three with its members and compares the bytes of the directories;
   Python loads what C++ wrote and finds a LazyStackedTensorDict with the
   same stack dim and values (lazy-check).

usage: run_memmap_interop.py MEMMAP_INTEROP_BINARY WORK_DIR
       run_memmap_interop.py lazy-write PY_DIR
       run_memmap_interop.py lazy-check PY_DIR CPP_DIR
"""

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


# The save-family members a lazy stack at the root is written with, each to
# its own directory (or archive) below the case's.
LAZY_APIS = ("memmap_", "memmap_like", "save.tdz")


def lazy_write(py_dir: str) -> int:
    """Step 4, Python's half: each lazy-stack case written three ways."""
    import json

    import torch

    sys.path.insert(0, HERE)
    import memmap_corpus
    import td_dump

    cases = []
    for case in memmap_corpus.CASES:
        torch.manual_seed(0)
        if td_dump.root_kind(case.build()) != "LazyStackedTensorDict":
            continue
        for api in LAZY_APIS:
            torch.manual_seed(0)
            obj = case.build()
            path = os.path.join(py_dir, case.name, api)
            with memmap_corpus.json_backend(case.json_style):
                if api == "memmap_":
                    obj.memmap_(path)
                elif api == "memmap_like":
                    obj.memmap_like(path)
                else:
                    obj.save(path)
            loaded = td_dump.load_tree(path, "LazyStackedTensorDict")
            with open(path + ".expected.json", "w", encoding="utf-8") as f:
                f.write(td_dump.to_json(td_dump.dump(loaded)))
            if api != "save.tdz":
                with open(path + ".files.json", "w", encoding="utf-8") as f:
                    json.dump({"files": memmap_corpus.list_files(path)}, f)
        cases.append({"name": case.name, "json_style": case.json_style})
    with open(os.path.join(py_dir, "index.json"), "w", encoding="utf-8") as f:
        json.dump({"cases": cases}, f)
    print(f"wrote {len(cases)} lazy stacks, each with {', '.join(LAZY_APIS)}")
    return 0 if cases else 1


def lazy_check(py_dir: str, cpp_dir: str) -> int:
    """Step 4, the last part: Python loads every lazy stack C++ wrote."""
    import json

    from tensordict import LazyStackedTensorDict, TensorDict

    sys.path.insert(0, HERE)
    import memmap_corpus
    import td_dump

    with open(os.path.join(py_dir, "index.json"), encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    failed = 0
    for case in cases:
        for api in LAZY_APIS:
            name = f"{case['name']}/{api}"
            path = os.path.join(cpp_dir, case["name"], api)
            with open(os.path.join(py_dir, name + ".expected.json"), "rb") as f:
                expected = json.loads(f.read())
            problems = []
            try:
                loaded = TensorDict.load_memmap(path)
                if not isinstance(loaded, LazyStackedTensorDict):
                    problems.append(f"loads as {type(loaded).__name__}")
                else:
                    problems += td_dump.diff(expected, td_dump.dump(loaded))
            except Exception as e:  # a failure to load is a mismatch
                problems.append(f"load failed: {type(e).__name__}: {e}")
            if api != "save.tdz" and os.path.isdir(path):
                with open(os.path.join(py_dir, name + ".files.json"), "rb") as f:
                    want = set(json.loads(f.read())["files"])
                got = set(memmap_corpus.list_files(path))
                problems += [f"file {p!r}: missing" for p in sorted(want - got)]
                problems += [f"file {p!r}: unexpected" for p in sorted(got - want)]
            for problem in problems:
                print(f"{name}: {problem}")
            failed += 1 if problems else 0
    print(f"Python loads the lazy stacks C++ wrote: {failed} failed")
    return 1 if failed else 0


def main() -> int:
    if sys.argv[1] == "lazy-write":
        return lazy_write(sys.argv[2])
    if sys.argv[1] == "lazy-check":
        return lazy_check(sys.argv[2], sys.argv[3])
    binary, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    corpus = os.path.join(work, "python")
    written = os.path.join(work, "cpp")
    os.makedirs(written)
    corpus_script = os.path.join(HERE, "memmap_corpus.py")
    steps = [
        [sys.executable, corpus_script, "write", corpus],
        [binary, corpus, written],
        [sys.executable, corpus_script, "check", written, corpus],
    ]
    lazy_py = os.path.join(work, "lazy_python")
    lazy_cpp = os.path.join(work, "lazy_cpp")
    os.makedirs(lazy_cpp)
    steps += [
        [sys.executable, __file__, "lazy-write", lazy_py],
        [binary, "lazy-root", lazy_py, lazy_cpp],
        [sys.executable, __file__, "lazy-check", lazy_py, lazy_cpp],
    ]
    status = 0
    for step in steps:
        print("$", " ".join(step), flush=True)
        result = subprocess.run(step)
        if result.returncode != 0:
            status = 1
            if step[1] == corpus_script and step[2] == "write":
                break
            if step[1:3] == [__file__, "lazy-write"]:
                break
    return status


if __name__ == "__main__":
    sys.exit(main())
