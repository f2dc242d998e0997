#!/usr/bin/env python3
"""Times Python tensordict on the work of tensor_dict_benchmark.cpp.

Writes {"results": [{"name": op, "python_us": median microseconds}, ...]}
to the path given as the first argument. Keep the workload in step with the
C++ file: 100 float32 leaves of shape [64, 8] over three levels, batch [64].
The view ops run under torch.no_grad(), and their "_grad" twins with grad
mode on and leaves that require grad, as in the C++ file.
"""

import json
import sys
import timeit

import torch
from tensordict import TensorDict

BATCH = 64
LEAVES = 100


def leaf_key(i):
    name = f"leaf{i}"
    return (name,) if i % 3 == 0 else ("l1", name) if i % 3 == 1 else ("l1", "l2", name)


def make_td(leaves=LEAVES, requires_grad=False):
    td = TensorDict(batch_size=[BATCH])
    for i in range(leaves):
        td[leaf_key(i)] = torch.randn(BATCH, 8).requires_grad_(requires_grad)
    return td


def no_grad(fn):
    def run():
        with torch.no_grad():
            return fn()

    return run


def view_ops(td):
    return {
        "index_int": lambda: td[3],
        "index_slice": lambda: td[8:40:2],
        "unbind": lambda: td.unbind(0),
        "reshape": lambda: td.reshape(8, 8),
    }


def time_us(fn, min_time=0.2, repeats=5):
    """Median over `repeats` runs of the per-call time, in microseconds."""
    fn()  # warm up
    number, elapsed = 1, 0.0
    while True:  # calibrate like Google Benchmark: run long enough
        elapsed = timeit.timeit(fn, number=number)
        if elapsed >= min_time / repeats:
            break
        number *= 2
    runs = sorted(timeit.repeat(fn, number=number, repeat=repeats))
    return runs[len(runs) // 2] / number * 1e6


def main(out_path):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    td = make_td()
    other = make_td()
    mask = torch.arange(BATCH) % 3 == 0
    idx = torch.randint(0, BATCH, (32,))
    stack_tds = [make_td(20) for _ in range(8)]
    leaf = td["l1", "l2", "leaf5"]
    ops = {name: no_grad(fn) for name, fn in view_ops(td).items()}
    ops.update({f"{name}_grad": fn for name, fn in view_ops(make_td(requires_grad=True)).items()})
    ops.update({
        "index_mask": lambda: td[mask],
        "index_tensor": lambda: td[idx],
        "stack": lambda: torch.stack(stack_tds, 0),
        "cat": lambda: torch.cat(stack_tds, 0),
        "apply": lambda: td.apply(lambda x: x * 2),
        "to_float64": lambda: td.to(torch.float64),
        "clone": lambda: td.clone(),
        "get_nested": lambda: td.get(("l1", "l2", "leaf5")),
        "set_nested": lambda: td.set(("l1", "l2", "leaf5"), leaf),
        "update": lambda: td.update(other),
    })
    results = []
    for name, fn in ops.items():
        results.append({"name": name, "python_us": time_us(fn)})
        print(f"python {name:14s} {results[-1]['python_us']:10.2f} us", file=sys.stderr)
    with open(out_path, "w") as f:
        json.dump({"results": results}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
