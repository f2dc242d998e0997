#!/usr/bin/env python3
"""Counts the instructions of the per-leaf ops under callgrind.

Usage: instructions.py BENCHMARK_BINARY OUT_JSON

Runs `BENCHMARK_BINARY --instructions` under callgrind with instrumentation
off until the binary turns it on; the binary dumps callgrind's counters once
per op (benchmarks/instructions.h). Writes {"results": [{"name": op,
"cpp_instructions": per call, "raw_instructions": per call}, ...]} and
prints a table. Counts do not depend on the machine's load; compare them
between commits to see a hot path grow.
"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile


def read_dump(path):
    prefix = "desc: Trigger: Client Request: "
    label, total = None, None
    with open(path) as f:
        for line in f:
            if line.startswith(prefix):
                label = line[len(prefix) :].strip()
            elif line.startswith("summary: "):
                total = int(line.split()[1])
    return label, total


def main(binary, out_path):
    with tempfile.TemporaryDirectory() as tmp:
        out_file = os.path.join(tmp, "callgrind.out")
        print("instructions.py: counting under callgrind (about 2 minutes)", file=sys.stderr)
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                "--callgrind-out-file=" + out_file,
                binary,
                "--instructions",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        counts = {}
        for path in glob.glob(out_file + "*"):
            label, total = read_dump(path)
            match = re.fullmatch(r"(\S+)/(\w+) runs=(\d+)", label or "")
            if match is None or total is None:
                continue
            op, side, runs = match.group(1), match.group(2), int(match.group(3))
            counts.setdefault(op, {})[side] = total // runs
    if not counts:
        sys.exit("instructions.py: callgrind wrote no per-op dumps")
    results = [
        {
            "name": op,
            "cpp_instructions": sides.get("cpp"),
            "raw_instructions": sides.get("raw"),
        }
        for op, sides in counts.items()
    ]
    with open(out_path, "w") as f:
        json.dump({"results": results}, f, indent=1)
    width = max(len(r["name"]) for r in results)
    print(f"{'op':{width}s} {'C++ instr':>12s} {'raw instr':>12s} {'C++/raw':>8s}")
    for r in results:
        cpp, raw = r["cpp_instructions"], r["raw_instructions"]
        ratio = f"{cpp / raw:8.2f}" if cpp and raw else " " * 8
        print(f"{r['name']:{width}s} {cpp or 0:12d} {raw or 0:12d} {ratio}")


if __name__ == "__main__":
    main(*sys.argv[1:])
