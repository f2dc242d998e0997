#!/usr/bin/env python3
"""TensorClass memmap interop, both ways, with the installed Python tensordict.

1. Python saves a TcTrajectory and a TcCounts (tensorclass_interop_classes.py)
   and writes the detailed repr of each.
2. C++ (tensorclass_interop) loads them as its registered structs, checks
   every field and the repr, then saves structs of its own.
3. Python loads what C++ saved: the classes must be the Python tensorclasses
   and every field must hold what C++ wrote.

C++ also saves a lazy stack with ``memmap_``, adds a field to a saved
instance with ``make_memmap``, and writes the order of ``fields()``, which
must be that of ``dataclasses.fields``; it reads Python's
``consolidate(filename=...)`` with ``from_consolidated``.

Both sides also save a TcInner over a lazy stack of differently shaped
elements (Python's ``TcInner.lazy_stack``) for the other to load, and a
TensorDict holding a tensorclass entry, which must load with its class.
C++ also saves ``to_tensordict(retain_none=True)``, whose unset fields
Python must read as None entries.

Python also writes its state dicts (flat and nested) of that TcTrajectory as
JSON (py_state_dict.json): C++ must build the same keys, tensors and
metadata (`_type`, `_non_tensor`) from its struct, and load Python's state
dicts into a struct of its own. And it records what its strict and
non-strict loads do (py_strict_loads.json): C++ must load, or refuse with
Python's KeyError, the same way.

usage: tensorclass_interop.py TENSORCLASS_INTEROP_BINARY WORK_DIR
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tensordict import LazyStackedTensorDict, TensorDict, set_printoptions  # noqa: E402
from tensorclass_interop_classes import TcCounts, TcInner, TcTrajectory  # noqa: E402


def describe_state_dict(sd) -> dict:
    """A state dict as JSON: keys, tensors and metadata in their order."""
    out = {"keys": list(sd.keys()), "tensors": {}, "nested": {}, "metadata": []}
    for key, value in sd.items():
        if isinstance(value, dict):
            out["nested"][key] = describe_state_dict(value)
        else:
            out["tensors"][key] = {
                "dtype": str(value.dtype),
                "shape": list(value.shape),
                "values": value.flatten().tolist(),
            }
    for prefix, md in sd._metadata.items():
        entry = {
            "batch_size": list(md["batch_size"]),
            "device": None if md["device"] is None else str(md["device"]),
        }
        if "_type" in md:
            entry["_type"] = md["_type"]
            entry["_non_tensor"] = md["_non_tensor"]
        out["metadata"].append([prefix, entry])
    return out


def strict_load_target(with_mask: bool) -> TcTrajectory:
    """The instance each strict-load case loads into (tensorclass_interop.cpp
    builds the same one)."""
    return TcTrajectory(
        obs=torch.zeros(4, 3),
        action=torch.zeros(4, dtype=torch.int64),
        inner=TcInner(x=torch.zeros(4, 2), tag="none", batch_size=[4]),
        task="none",
        mask=torch.zeros(4, dtype=torch.int64) if with_mask else None,
        batch_size=[4],
    )


def write_strict_loads(work: str, traj: TcTrajectory) -> None:
    """Python's load_state_dict outcomes (py_strict_loads.json): an entry
    for a field the target leaves unset, a set field the state dict lacks,
    and from_flatten=False on a flat state dict, strict or not."""
    source = traj.clone()
    source.mask = torch.ones(4, dtype=torch.int64)
    with_mask = source.state_dict()
    # From `source`: a state dict saying None for the mask the target holds
    # makes Python fail (it writes NonTensorData(None) into the tensor in
    # place), where C++ unsets the field.
    without_obs = source.state_dict()
    del without_obs["obs"]
    cases = [
        ("unset mask, strict", with_mask, False, True, None),
        ("unset mask, not strict", with_mask, False, False, None),
        ("held mask, strict", with_mask, True, True, None),
        ("no obs, strict", without_obs, True, True, None),
        ("flat as nested, strict", traj.state_dict(), False, True, False),
        ("flat as nested, not strict", traj.state_dict(), False, False, False),
    ]
    out = []
    for name, sd, target_mask, strict, from_flatten in cases:
        target = strict_load_target(target_mask)
        case = {
            "name": name,
            "state_dict": describe_state_dict(sd),
            "target_mask": target_mask,
            "strict": strict,
            "from_flatten": from_flatten,
        }
        try:
            target.load_state_dict(sd, strict=strict, from_flatten=from_flatten)
            case["outcome"] = {
                "obs": target.obs.flatten().tolist(),
                "inner.x": target.inner.x.flatten().tolist(),
                "task": target.task,
                "mask": None if target.mask is None else target.mask.tolist(),
            }
        except KeyError as e:
            case["outcome"] = {"KeyError": e.args[0]}
        out.append(case)
    with open(os.path.join(work, "py_strict_loads.json"), "w") as f:
        json.dump(out, f)


def write(work: str) -> None:
    traj = TcTrajectory(
        obs=torch.arange(12, dtype=torch.float32).reshape(4, 3),
        action=torch.arange(4) * 2,
        inner=TcInner(x=torch.full((4, 2), 3.0), tag="grip", batch_size=[4]),
        task="reach",
        batch_size=[4],
    )
    traj.memmap(os.path.join(work, "py_traj"))
    traj.consolidate(filename=os.path.join(work, "py_consolidated.bin"))
    with open(os.path.join(work, "py_state_dict.json"), "w") as f:
        json.dump(
            {
                "flat": describe_state_dict(traj.state_dict()),
                "nested": describe_state_dict(traj.state_dict(flatten=False)),
            },
            f,
        )
    write_strict_loads(work, traj)
    # A tensorclass over a lazy stack whose elements differ in shape.
    TcInner.lazy_stack(
        [
            TcInner(x=torch.ones(2, 3), tag="a", batch_size=[2]),
            TcInner(x=torch.zeros(2, 4), tag="b", batch_size=[2]),
        ]
    ).memmap(os.path.join(work, "py_lazy"))
    # A TensorDict with a tensorclass entry.
    TensorDict(
        x=torch.arange(4.0),
        step=TcInner(x=torch.full((4, 2), 5.0), tag="entry", batch_size=[4]),
        batch_size=[4],
    ).memmap(os.path.join(work, "py_td_entry"))
    counts = TcCounts(step=7, ratio=0.25, done=True, batch_size=[])
    counts.memmap(os.path.join(work, "py_counts"))
    with set_printoptions(compact=False):
        with open(os.path.join(work, "py_traj_repr.txt"), "w") as f:
            f.write(repr(traj))
        with open(os.path.join(work, "py_counts_repr.txt"), "w") as f:
            f.write(repr(counts))
    # The default, compact form.
    with open(os.path.join(work, "py_traj_repr_compact.txt"), "w") as f:
        f.write(repr(traj))
    with open(os.path.join(work, "py_counts_repr_compact.txt"), "w") as f:
        f.write(repr(counts))


def check(work: str) -> list:
    errors = []

    def expect(cond: bool, what: str) -> None:
        if not cond:
            errors.append(what)

    traj = TcTrajectory.load_memmap(os.path.join(work, "cpp_traj"))
    expect(type(traj) is TcTrajectory, f"cpp_traj loads as {type(traj)}")
    expect(type(traj.inner) is TcInner, f"cpp_traj.inner loads as {type(traj.inner)}")
    expect(traj.batch_size == torch.Size([2]), f"batch size {traj.batch_size}")
    expect(
        torch.equal(traj.obs, torch.tensor([[0.5, 1.5], [2.5, 3.5]])),
        f"obs {traj.obs}",
    )
    expect(traj.action.dtype == torch.int64, f"action dtype {traj.action.dtype}")
    expect(torch.equal(traj.action, torch.tensor([5, 6])), f"action {traj.action}")
    expect(torch.equal(traj.inner.x, torch.zeros(2, 1)), f"inner.x {traj.inner.x}")
    expect(traj.inner.tag == "cpp-tag", f"inner.tag {traj.inner.tag!r}")
    expect(traj.task == "from C++", f"task {traj.task!r}")
    expect(traj.note == "a note", f"note {traj.note!r}")
    expect(traj.mask is None, f"mask {traj.mask!r}")

    lazy = TcInner.load_memmap(os.path.join(work, "cpp_lazy"))
    expect(type(lazy) is TcInner, f"cpp_lazy loads as {type(lazy)}")
    expect(
        isinstance(lazy._tensordict, LazyStackedTensorDict),
        f"cpp_lazy holds a {type(lazy._tensordict)}",
    )
    expect(lazy.batch_size == torch.Size([2, 1]), f"cpp_lazy batch size {lazy.batch_size}")
    expect(torch.equal(lazy[0].x, torch.full((1, 2), 1.5)), f"cpp_lazy[0].x {lazy[0].x}")
    expect(torch.equal(lazy[1].x, torch.full((1, 5), 2.5)), f"cpp_lazy[1].x {lazy[1].x}")
    expect(lazy[1].tag == "second", f"cpp_lazy[1].tag {lazy[1].tag!r}")

    holder = TensorDict.load_memmap(os.path.join(work, "cpp_td_entry"))
    entry = holder.get("traj")
    expect(type(entry) is TcTrajectory, f"cpp_td_entry['traj'] loads as {type(entry)}")
    expect(type(entry.inner) is TcInner, f"cpp_td_entry['traj'].inner is {type(entry.inner)}")
    expect(entry.task == "from C++", f"cpp_td_entry['traj'].task {entry.task!r}")
    expect(
        torch.equal(holder["y"], torch.tensor([1, 2])), f"cpp_td_entry['y'] {holder['y']}"
    )

    plain = TensorDict.load_memmap(os.path.join(work, "cpp_retain_none"))
    expect(type(plain) is TensorDict, f"cpp_retain_none loads as {type(plain)}")
    expect(
        sorted(plain.keys()) == ["action", "inner", "mask", "note", "obs", "task"],
        f"cpp_retain_none keys {sorted(plain.keys())}",
    )
    expect(plain.get("mask").data is None, f"cpp_retain_none mask {plain.get('mask')!r}")
    expect(plain.get("note").data == "a note", f"cpp_retain_none note {plain.get('note')!r}")

    inplace = TcInner.load_memmap(os.path.join(work, "cpp_lazy_inplace"))
    expect(type(inplace) is TcInner, f"cpp_lazy_inplace loads as {type(inplace)}")
    expect(
        isinstance(inplace._tensordict, LazyStackedTensorDict),
        f"cpp_lazy_inplace holds a {type(inplace._tensordict)}",
    )
    expect(
        torch.equal(inplace[0].x, torch.full((1, 3), 4.5)),
        f"cpp_lazy_inplace[0].x {inplace[0].x}",
    )
    expect(inplace[1].tag == "too", f"cpp_lazy_inplace[1].tag {inplace[1].tag!r}")

    made = TcTrajectory.load_memmap(os.path.join(work, "cpp_made"))
    expect(type(made) is TcTrajectory, f"cpp_made loads as {type(made)}")
    expect(
        made.mask is not None and torch.equal(made.mask, torch.tensor([7, 8])),
        f"cpp_made.mask {made.mask!r}",
    )
    expect(made.note == "a note", f"cpp_made.note {made.note!r}")

    with open(os.path.join(work, "cpp_fields.json")) as f:
        cpp_fields = json.load(f)
    for cls in (TcTrajectory, TcInner, TcCounts):
        names = [field.name for field in dataclasses.fields(cls)]
        expect(
            cpp_fields[cls.__name__] == names,
            f"{cls.__name__}::fields() {cpp_fields[cls.__name__]}, Python {names}",
        )

    counts = TcCounts.load_memmap(os.path.join(work, "cpp_counts"))
    expect(type(counts) is TcCounts, f"cpp_counts loads as {type(counts)}")
    expect(counts.step == 11 and type(counts.step) is int, f"step {counts.step!r}")
    expect(counts.ratio == 0.5 and type(counts.ratio) is float, f"ratio {counts.ratio!r}")
    expect(counts.done is False, f"done {counts.done!r}")
    return errors


def main() -> int:
    binary, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    write(work)
    print("$", binary, work, flush=True)
    if subprocess.run([binary, work]).returncode != 0:
        return 1
    errors = check(work)
    for error in errors:
        print("Python check failed:", error)
    print("tensorclass interop:", "FAILED" if errors else "ok")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
