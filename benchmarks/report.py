#!/usr/bin/env python3
"""Merges the C++ (Google Benchmark JSON) and Python timings into a report.

Usage: report.py OUT_DIR CPP_JSON [PYTHON_JSON ...]

C++ benchmarks are named <op>/cpp and <op>/raw (the baseline); each Python
file holds {"results": [{"name": op, "python_us": ...}, ...]}. Prints a table
(op, C++ us, raw us, Python us, C++/raw, Python/C++, and C++/raw in
instructions where OUT_DIR/instructions.json, from instructions.py, has the
op), writes OUT_DIR/report.json as {"results": [{"name", "cpp_us", "raw_us",
"python_us", "cpp_instructions", "raw_instructions"}, ...]} and draws
OUT_DIR/report.png (bars on a log scale).
"""

import json
import os
import sys


def to_us(bench):
    # A benchmark that records its median round (noisy loopback transfers)
    # is reported by it, as the Python side reports medians.
    if "median_us" in bench:
        return bench["median_us"]
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[bench["time_unit"]]
    return bench["real_time"] * scale


def main(out_dir, cpp_path, *python_paths):
    with open(cpp_path) as f:
        cpp = json.load(f)
    python = {}
    for path in python_paths:
        with open(path) as f:
            for r in json.load(f)["results"]:
                if r["name"] in python:
                    sys.exit(f"report.py: op {r['name']!r} timed by two Python scripts")
                python[r["name"]] = r["python_us"]
    timings = {}
    for bench in cpp["benchmarks"]:
        if bench.get("run_type") == "aggregate":
            continue
        # "<op>/<side>", maybe followed by "/min_time:...", "/real_time".
        op, side = bench["name"].split("/")[:2]
        timings.setdefault(op, {})[side] = to_us(bench)
    instructions = {}
    instructions_path = os.path.join(out_dir, "instructions.json")
    if os.path.exists(instructions_path):
        with open(instructions_path) as f:
            instructions = {r["name"]: r for r in json.load(f)["results"]}
    results = []
    for op, sides in timings.items():
        counted = instructions.get(op, {})
        results.append(
            {
                "name": op,
                "cpp_us": sides.get("cpp"),
                "raw_us": sides.get("raw"),
                "python_us": python.get(op),
                "cpp_instructions": counted.get("cpp_instructions"),
                "raw_instructions": counted.get("raw_instructions"),
            }
        )
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "report.json"), "w") as f:
        json.dump({"results": results}, f, indent=1)

    def fmt(x, spec="10.2f"):
        return format(x, spec) if x is not None else " " * 9 + "-"

    def ratio(a, b):
        return a / b if a is not None and b else None

    width = max([14] + [len(r["name"]) for r in results])
    header = (
        f"{'op':{width}s} {'C++ us':>10s} {'raw us':>10s} {'Python us':>10s}"
        f" {'C++/raw':>10s} {'Py/C++':>10s} {'instr C/r':>10s}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r['name']:{width}s} {fmt(r['cpp_us'])} {fmt(r['raw_us'])} {fmt(r['python_us'])}"
            f" {fmt(ratio(r['cpp_us'], r['raw_us']))} {fmt(ratio(r['python_us'], r['cpp_us']))}"
            f" {fmt(ratio(r['cpp_instructions'], r['raw_instructions']))}"
        )
    draw(results, os.path.join(out_dir, "report.png"))


def draw(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["name"] for r in results]
    width = 0.27
    fig, ax = plt.subplots(figsize=(max(8, len(names) * 0.9), 4.5))
    for k, (field, label) in enumerate(
        [("raw_us", "raw ATen loop"), ("cpp_us", "C++ TensorDict"), ("python_us", "Python tensordict")]
    ):
        xs = [i + (k - 1) * width for i in range(len(names))]
        ys = [r[field] or 0 for r in results]
        ax.bar(xs, ys, width, label=label)
    ax.set_yscale("log")
    ax.set_ylabel("microseconds per op (log)")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30, ha="right")
    ax.legend()
    ax.set_title("TensorDict C++ vs raw baseline vs Python tensordict")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
