#!/usr/bin/env python3
"""Memmap interop, both ways, with the installed Python tensordict.

1. Python writes the corpus (memmap_corpus.py write).
2. C++ (memmap_interop) loads every tree, compares its canonical dump with
   Python's, writes each tree back, and compares the bytes with Python's.
3. Python loads every tree C++ wrote and compares it with the corpus
   (memmap_corpus.py check).

usage: run_memmap_interop.py MEMMAP_INTEROP_BINARY WORK_DIR
"""

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
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
    status = 0
    for step in steps:
        print("$", " ".join(step), flush=True)
        result = subprocess.run(step)
        if result.returncode != 0:
            status = 1
            if step[1] == corpus_script and step[2] == "write":
                break
    return status


if __name__ == "__main__":
    sys.exit(main())
