#!/usr/bin/env python3
"""Times the crossing of pybind11 extensions (tensordict/python.h).

1. C++ -> Python of a dict of 100 leaves over 3 levels (the
   python_casters test module's hundred_leaves: 4 leaves at the root, 4
   dicts of 4 leaves each holding 4 dicts of 5 leaves, batch size [8])
   against Python's own TensorDict(dict_of_tensors, batch_size) on the same
   tensors (a nested dict of them): op "python_ext_to_python", Python/C++
   ratio and microseconds per leaf.
2. The C++ point-mass env's step round trip from Python (dict in, step,
   dict out) against the pure-Python tensordict env of reference.py doing
   the same step: op "python_ext_env_step".

Medians of 7 runs of many calls, one intra-op thread. Writes
{"results": [{"name", "python_us", "cpp_us", ...}]} to the path given as
the first argument; report.py shows both sides (the C++ side is timed from
Python here, so it carries its own "cpp_us"). The modules are looked up in
the build tree: TENSORDICT_BUILD_DIR (default build/).
"""

import json
import os
import sys
import timeit

import torch
from tensordict import TensorDict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("TENSORDICT_BUILD_DIR", os.path.join(ROOT, "build"))
sys.path.insert(0, os.path.join(BUILD, "tests", "python", "python_casters"))
sys.path.insert(0, os.path.join(BUILD, "examples", "python_env"))
sys.path.insert(0, os.path.join(ROOT, "examples", "python_env"))

import point_mass_env  # noqa: E402
import python_casters  # noqa: E402
import reference  # noqa: E402

REPEATS = 7


def time_us(fn, number):
    fn()  # warm up
    runs = sorted(timeit.repeat(fn, number=number, repeat=REPEATS))
    return runs[len(runs) // 2] / number * 1e6


def as_plain_dict(td):
    return {k: (as_plain_dict(v) if isinstance(v, TensorDict) else v) for k, v in td.items()}


def time_conversion():
    cpp_td = python_casters.hundred_leaves()  # a Python TensorDict of the C++ leaves
    leaves = len(list(cpp_td.keys(True, True)))
    assert leaves == 100, leaves
    number = 2000
    # convert_many takes the dict (one Python -> C++ conversion per call),
    # then converts it back `number` times: time the loop only.
    once = time_us(lambda: python_casters.convert_many(cpp_td, 1), 200)
    many = time_us(lambda: python_casters.convert_many(cpp_td, number), 1) / number
    cpp_us = many
    plain = as_plain_dict(cpp_td)
    py_us = time_us(lambda: TensorDict(plain, batch_size=[8]), 500)
    return {
        "name": "python_ext_to_python",
        "python_us": py_us,
        "cpp_us": cpp_us,
        "cpp_call_round_trip_us": once,
        "leaves": leaves,
        "cpp_us_per_leaf": cpp_us / leaves,
        "python_us_per_leaf": py_us / leaves,
        "python_over_cpp": py_us / cpp_us,
    }


def time_env_step(num_envs=16):
    env = point_mass_env.PointMassEnv(num_envs, seed=1, max_steps=10**9)
    ref = reference.PointMassEnv(num_envs, seed=1, max_steps=10**9)
    action = torch.zeros(num_envs, 2)
    td = env.reset()
    td["action"] = action
    ref_td = ref.reset()
    ref_td["action"] = action
    cpp_us = time_us(lambda: env.step(td), 2000)
    py_us = time_us(lambda: ref.step(ref_td), 2000)
    return {
        "name": "python_ext_env_step",
        "python_us": py_us,
        "cpp_us": cpp_us,
        "num_envs": num_envs,
        "python_over_cpp": py_us / cpp_us,
    }


def main(out_path):
    torch.set_num_threads(1)
    results = [time_conversion(), time_env_step()]
    for r in results:
        print(json.dumps(r))
    with open(out_path, "w") as f:
        json.dump({"results": results}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
