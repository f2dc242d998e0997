#!/usr/bin/env python3
"""Merges the C++ (Google Benchmark JSON) and Python timings into a report.

Usage: report.py OUT_DIR CPP_JSON [PYTHON_JSON ...]

C++ benchmarks are named <op>/cpp and <op>/raw (the baseline); each Python
file holds {"results": [{"name": op, "python_us": ...}, ...]}; a Python
result may carry its own "cpp_us" (the C++ side of a pybind11 extension,
timed from Python: python_extension.py), which joins the C++ column. Prints a table
(op, C++ us, raw us, Python us, C++/raw, Python/C++, and C++/raw in
instructions where OUT_DIR/instructions.json, from instructions.py, has the
op, and C++/raw paired where the op has an <op>/paired row: the median of
per-pair CPU-time ratios, benchmarks/paired.h), writes OUT_DIR/report.json
as {"results": [{"name", "cpp_us", "raw_us", "python_us",
"cpp_instructions", "raw_instructions", "paired_cpp_over_raw",
"split_inner_ratio", "split_rest_ratio"}, ...]} (the last two from an
<op>/<part>_split row: C++/raw of a part both sides call and of the rest) and
draws OUT_DIR/report.png (bars on a log scale). A C++ benchmark run with
repetitions counts by its median. Below the table: frames/s of the C++ rows
whose Python result carries an env engine's ("envpool_frames_per_s",
python_mujoco.py; also per CPU second where it has "envpool_frames_per_cpu_s"), and the 1 -> 2 thread speed-up of ops with an
"<op>_2threads" twin.
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
    python_cpp = {}
    python_rows = {}
    for path in python_paths:
        with open(path) as f:
            for r in json.load(f)["results"]:
                if r["name"] in python:
                    sys.exit(f"report.py: op {r['name']!r} timed by two Python scripts")
                python[r["name"]] = r["python_us"]
                python_rows[r["name"]] = r
                if r.get("cpp_us") is not None:
                    python_cpp[r["name"]] = r["cpp_us"]
    timings = {}
    cpu_us = {}
    paired = {}
    split = {}
    repeated = set()
    for bench in cpp["benchmarks"]:
        # A benchmark run with repetitions is reported by its median (its
        # other aggregates are left out).
        if bench.get("run_type") == "aggregate":
            if bench.get("aggregate_name") != "median":
                continue
            name = bench["run_name"]
            repeated.add(name)
        else:
            name = bench["name"]
            if name in repeated:
                continue
        # "<op>/<side>", maybe followed by "/min_time:...", "/real_time".
        op, side = name.split("/")[:2]
        if side == "paired":
            paired[op] = bench.get("cpp_over_raw")
            continue
        if side.endswith("_split"):
            split[op] = (bench.get("inner_ratio"), bench.get("rest_ratio"))
            continue
        timings.setdefault(op, {})[side] = to_us(bench)
        if "cpu_time" in bench:
            scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[bench["time_unit"]]
            cpu_us[(op, side)] = bench["cpu_time"] * scale
    for op, cpp_us in python_cpp.items():
        timings.setdefault(op, {})["cpp"] = cpp_us
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
                "paired_cpp_over_raw": paired.get(op),
                "split_inner_ratio": split.get(op, (None, None))[0],
                "split_rest_ratio": split.get(op, (None, None))[1],
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
        f" {'C++/raw':>10s} {'Py/C++':>10s} {'instr C/r':>10s} {'paired C/r':>10s}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r['name']:{width}s} {fmt(r['cpp_us'])} {fmt(r['raw_us'])} {fmt(r['python_us'])}"
            f" {fmt(ratio(r['cpp_us'], r['raw_us']))} {fmt(ratio(r['python_us'], r['cpp_us']))}"
            f" {fmt(ratio(r['cpp_instructions'], r['raw_instructions']))}"
            f" {fmt(r['paired_cpp_over_raw'])}"
        )
    peers(results, python_rows, cpu_us)
    draw(results, os.path.join(out_dir, "report.png"))


def peers(results, python_rows, cpu_us):
    """Frames/s of the rows a Python script times against an env engine
    (EnvPool, "envpool_frames_per_s") beside the C++ row's, and the
    speed-up of each op that has a "<op>_2threads" twin."""
    rows = []
    for r in results:
        peer = python_rows.get(r["name"], {})
        # Wall-clock frames/s, as the peer's (Google Benchmark's
        # items_per_second is per CPU second).
        # And per CPU second, where both sides have it.
        if peer.get("envpool_frames_per_s") and peer.get("frames_per_batch") and r["cpp_us"]:
            frames = peer["frames_per_batch"]
            cpp = frames / r["cpp_us"] * 1e6
            cpu = cpu_us.get((r["name"], "cpp"))
            cpp_cpu = frames / cpu * 1e6 if cpu else None
            rows.append((r["name"], cpp, peer["envpool_frames_per_s"], cpp_cpu,
                         peer.get("envpool_frames_per_cpu_s")))
    if rows:
        print()
        print(f"{'op':30s} {'C++ frames/s':>13s} {'EnvPool fr/s':>13s} {'C++/EnvPool':>12s}"
              f" {'per CPU s':>10s}")
        for name, cpp, envpool, cpp_cpu, envpool_cpu in rows:
            per_cpu = cpp_cpu / envpool_cpu if cpp_cpu and envpool_cpu else None
            print(f"{name:30s} {cpp:13,.0f} {envpool:13,.0f} {cpp / envpool:12.2f}"
                  f" {format(per_cpu, '10.2f') if per_cpu else ' ' * 9 + '-'}")
    twins = [(r["name"], r["cpp_us"], timings_of(results, r["name"] + "_2threads"))
             for r in results if r["cpp_us"]]
    twins = [t for t in twins if t[2]]
    if twins:
        print()
        print(f"{'op':30s} {'1 thread us':>12s} {'2 threads us':>13s} {'speed-up':>9s}")
        for name, one, two in twins:
            print(f"{name:30s} {one:12.0f} {two:13.0f} {one / two:9.2f}")


def timings_of(results, name):
    for r in results:
        if r["name"] == name:
            return r["cpp_us"]
    return None


def draw(results, path):
    """One row per op: raw, C++ and Python side by side on a log scale, with
    the two ratios written beside the row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in results if r["cpp_us"]]
    sides = [
        ("raw_us", "raw baseline (ATen calls, or syscalls)", "#9e9e9e"),
        ("cpp_us", "C++ TensorDict", "#1f77b4"),
        ("python_us", "Python tensordict", "#ff7f0e"),
    ]
    bar = 0.27
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(rows) + 1.6))
    for k, (field, label, color) in enumerate(sides):
        placed = [(i + (k - 1) * bar, r[field]) for i, r in enumerate(rows) if r[field]]
        ax.barh([y for y, _ in placed], [x for _, x in placed], bar, label=label, color=color)
    ax.set_xscale("log")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r["name"] for r in rows], fontsize=9)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # first op on top
    ax.grid(axis="x", which="major", alpha=0.3)
    ax.set_xlabel("microseconds per op (log scale; shorter is faster)")
    for i, r in enumerate(rows):
        notes = []
        if r["raw_us"]:
            notes.append(f"C++/raw {r['cpp_us'] / r['raw_us']:.2f}")
        if r["python_us"]:
            notes.append(f"Py/C++ {r['python_us'] / r['cpp_us']:.1f}")
        ax.text(1.01, i, "   ".join(notes), transform=ax.get_yaxis_transform(), va="center", fontsize=8)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.6 / len(rows) - 0.02), ncol=3, fontsize=9)
    ax.set_title("TensorDict C++ against its raw baseline and Python tensordict (same run)")
    fig.savefig(path, dpi=110, bbox_inches="tight")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
