#!/usr/bin/env python3
"""Checks that the C++ TensorDict prints what Python's tensordict prints.

Usage: test_parity.py PATH/TO/repr_cases

repr_cases (repr_cases.cpp) prints one JSON object:

    {"repr": {case: str, ...}, "compact": {case: str, ...},
     "options": {case: str, ...}, "keys": {case: [key, ...], ...},
     "errors": {case: str, ...}}

"repr" holds the detailed reprs (``set_printoptions(compact=False)``),
"compact" the same cases with the default options (the compact form), and
"options" a dict and a lazy stack printed under other print options.

This script builds the same cases with the installed ``tensordict`` package
and compares every string exactly, printing a unified diff for each mismatch.
It exits non-zero if any case differs or is missing on either side.

Cases left out on purpose, because the C++ library deliberately differs (see
the class comment of TensorDict in include/tensordict/tensor_dict.h):

- Errors raised for nested keys: C++ names the full nested key (and appends
  "(while looking up ('a', 'b'))" to a missing-key error), Python only the
  last part.
- ``get`` of a missing key: Python's ``TensorDict.get`` returns None; the
  missing-key cases use ``td[key]`` on the Python side, which raises the
  KeyError that C++'s ``get`` copies.
- ``set_`` with a dtype that cannot be cast safely: C++ refuses it, Python
  silently truncates.
- Setting an empty nested dict (or non-tensor data) whose batch size does not
  start with the parent's: an error in C++, accepted by Python.
"""

from __future__ import annotations

import difflib
import json
import subprocess
import sys

import torch

import tensordict
from tensordict import NonTensorData, NonTensorStack, TensorDict, lazy_stack


def zeros(*shape, dtype=torch.float32, device=None):
    return torch.zeros(*shape, dtype=dtype, device=device)


# --- repr cases ----------------------------------------------------------------


def repr_cases() -> dict[str, str]:
    out = {}

    out["empty"] = repr(TensorDict())

    out["empty_batch"] = repr(TensorDict(batch_size=[2, 3]))

    td = TensorDict(
        {
            "f32": zeros(4, 3),
            "f64": zeros(4, dtype=torch.float64),
            "f16": zeros(4, dtype=torch.float16),
            "bf16": zeros(4, dtype=torch.bfloat16),
            "i64": zeros(4, dtype=torch.int64),
            "i32": zeros(4, 2, dtype=torch.int32),
            "i16": zeros(4, dtype=torch.int16),
            "i8": zeros(4, dtype=torch.int8),
            "u8": zeros(4, dtype=torch.uint8),
            "flag": zeros(4, 2, dtype=torch.bool),
            "c64": zeros(4, 1, dtype=torch.complex64),
            "c128": zeros(4, dtype=torch.complex128),
        },
        batch_size=[4],
    )
    out["dtypes"] = repr(td)

    td = TensorDict(
        {
            "obs": zeros(4, 3),
            "next": {
                "reward": zeros(4, 1),
                "done": zeros(4, 1, dtype=torch.bool),
                "info": {"count": zeros(4, dtype=torch.int64)},
            },
        },
        batch_size=[4],
    )
    out["nested"] = repr(td)

    td = TensorDict({"x": zeros(2)}, batch_size=[2])
    td["sub"] = TensorDict({"y": zeros(2, 5, 3)}, batch_size=[2, 5])
    out["nested_deeper_batch"] = repr(td)

    td = TensorDict({"x": zeros(2)}, batch_size=[2])
    td["sub"] = TensorDict(batch_size=[2])
    td["deep"] = TensorDict({"inner": TensorDict(batch_size=[2])}, batch_size=[2])
    out["empty_nested"] = repr(td)

    td = TensorDict()
    td["s"] = "text"
    td["spaces"] = "with spaces and 'quotes'"
    td["blank"] = ""
    td["multiline"] = "line1\nline2"
    td["unicode"] = "h\u00e9llo \u2713"
    out["non_tensor_strings"] = repr(td)

    td = TensorDict()
    td["int"] = NonTensorData(data=3)
    td["neg"] = NonTensorData(data=-7)
    td["big"] = NonTensorData(data=12345678901234)
    td["zero"] = NonTensorData(data=0)
    td["half"] = NonTensorData(data=2.5)
    td["tenth"] = NonTensorData(data=0.1)
    td["one"] = NonTensorData(data=1.0)
    td["negzero"] = NonTensorData(data=-0.0)
    td["small"] = NonTensorData(data=0.0001)
    out["non_tensor_numbers"] = repr(td)

    td = TensorDict()
    td["e15"] = NonTensorData(data=1e15)
    td["e16"] = NonTensorData(data=1e16)
    td["e_5"] = NonTensorData(data=1e-5)
    td["e_7"] = NonTensorData(data=2.5e-7)
    td["mixed"] = NonTensorData(data=[123456.789, 1.5e300, -3.25e-10])
    out["non_tensor_float_format"] = repr(td)

    td = TensorDict()
    td["list"] = NonTensorData(data=[1, 2])
    td["empty_list"] = NonTensorData(data=[])
    td["nested_list"] = NonTensorData(data=[[1, "a"], [True, None], 2.5])
    td["quotes"] = NonTensorData(
        data=["it's", 'say "hi"', "both ' and \"", "tab\there"]
    )
    td["obj"] = NonTensorData(data={"k": [1, 2]})
    td["unsorted_obj"] = NonTensorData(data={"b": 1, "a": 2, "_": 3})
    td["empty_obj"] = NonTensorData(data={})
    td["nested_obj"] = NonTensorData(
        data={"a": {"b": None}, "c": "it's", "d": [False, 1.5]}
    )
    out["non_tensor_containers"] = repr(td)

    # Python's repr escapes non-printable characters inside containers.
    td = TensorDict()
    td["escapes"] = NonTensorData(
        data=["back\\slash", "cr\r", "bell\x07", "del\x7f", "zw\u200b", "caf\u00e9"]
    )
    out["non_tensor_string_escapes"] = repr(td)

    td = TensorDict()
    td["none"] = NonTensorData(data=None)
    td["yes"] = NonTensorData(data=True)
    td["no"] = NonTensorData(data=False)
    out["non_tensor_null_bool"] = repr(td)

    td = TensorDict({"t": zeros(3)}, batch_size=[3])
    td["s"] = "text"
    td["sub", "n"] = NonTensorData(data=5)
    out["non_tensor_batched"] = repr(td)

    td = TensorDict({"t": zeros(3)}, batch_size=[3])
    td["st"] = NonTensorStack("x", "y", "z")
    td["sub", "nums"] = NonTensorStack(1, 2, 3)
    td["sub", "deeper", "words"] = NonTensorStack("it's", "b", "c")
    out["non_tensor_stack"] = repr(td)

    td = TensorDict(
        {"a": zeros(2, 3), "n": {"x": zeros(2)}}, batch_size=[2], device="cpu"
    )
    td["s"] = "hi"
    td["n", "st"] = NonTensorStack("p", "q")
    out["device_cpu"] = repr(td)

    td = TensorDict(
        {"a": zeros(4, 2), "n": {"x": zeros(4)}}, batch_size=[4], device="meta"
    )
    td["s"] = "hi"
    td["st"] = NonTensorStack("x", "y", "z", "w")
    out["device_meta"] = repr(td)

    td = TensorDict(
        {"a": zeros(2, 3, 4), "n": {"x": zeros(2, 3)}},
        batch_size=[2, 3],
        names=["x", "y"],
    )
    out["names"] = repr(td)

    td = TensorDict(
        {
            "b": zeros(2),
            "a": zeros(2),
            "B": zeros(2),
            "_x": zeros(2),
            "a1": zeros(2),
            "A_": zeros(2),
            "10": zeros(2),
            "9": zeros(2),
            "nested": {"z": zeros(2), "Z": zeros(2), "m": zeros(2)},
        },
        batch_size=[2],
    )
    out["sorted_keys"] = repr(td)

    # The compact form keeps a level on one line up to 80 columns (80 here,
    # 81 in wrap_81); columns count code points, not UTF-8 bytes.
    for name, n in (("wrap_80", 24), ("wrap_81", 25)):
        td = TensorDict(
            {"k" * n: zeros(2, 3), "b": zeros(2, 4, dtype=torch.int64)},
            batch_size=[2],
        )
        out[name] = repr(td)
    td = TensorDict(
        {"\u00e9" * 24: zeros(2, 3), "b": zeros(2, 4, dtype=torch.int64)},
        batch_size=[2],
    )
    out["wrap_80_unicode"] = repr(td)
    for name, n in (("wrap_nested_80", 12), ("wrap_nested_81", 13)):
        td = TensorDict(
            {
                "outer": {
                    "k" * n: zeros(2, 3),
                    "inner": {
                        "x" * n: zeros(2, 4, dtype=torch.int64),
                        "y": zeros(2, 1, 1, 1),
                    },
                },
                "zz": zeros(2),
            },
            batch_size=[2],
        )
        out[name] = repr(td)

    td = TensorDict({f"key_number_{i}": zeros(4, i) for i in range(8)}, batch_size=[4])
    out["wrap_long"] = repr(td)

    td = TensorDict(
        {
            "nested_level_one": {f"key_{i}": zeros(4, i) for i in range(6)},
            "other": {
                "deeper": {f"k{i}": zeros(4, 3, dtype=torch.int8) for i in range(9)}
            },
            "z": zeros(4),
        },
        batch_size=[4],
    )
    out["wrap_deep"] = repr(td)

    # A tensor off the cpu in a dict without a device: "@meta".
    td = TensorDict(
        {"a": zeros(2, 3, device="meta"), "n": {"x": zeros(2)}}, batch_size=[2]
    )
    out["tensor_device_no_dict_device"] = repr(td)

    out.update(lazy_cases())
    return out


def lazy_cases() -> dict[str, str]:
    out = {}

    a = TensorDict(
        {
            "x": zeros(3, dtype=torch.int32),
            "y": zeros(4),
            "n": {"q": zeros(2)},
            "s": "hi",
            "only_a": zeros(1),
        }
    )
    b = TensorDict(
        {
            "x": zeros(5),
            "y": zeros(4),
            "n": {"q": zeros(2, 1)},
            "s": "ho",
            "only_b": {"deep": zeros(2)},
        }
    )
    out["lazy_exclusive"] = repr(lazy_stack([a, b]))

    member = TensorDict({"x": zeros(3, 2)}, batch_size=[3])
    out["lazy_stack_dim1"] = repr(lazy_stack([member, member.clone()], dim=1))

    out["lazy_ragged_rank"] = repr(
        lazy_stack([TensorDict({"x": zeros(3)}), TensorDict({"x": zeros(3, 2)})])
    )

    # The last element holding a non-tensor names the entry.
    out["lazy_mixed_tensor_first"] = repr(
        lazy_stack(
            [
                TensorDict({"x": zeros(3)}),
                TensorDict({"x": NonTensorData(data="s")}),
                TensorDict({"x": NonTensorData(data=3)}),
            ]
        )
    )
    out["lazy_mixed_str_first"] = repr(
        lazy_stack([TensorDict({"x": "s"}), TensorDict({"x": zeros(3)})])
    )

    out["lazy_promoted"] = repr(
        lazy_stack(
            [
                TensorDict({"a": zeros(2, dtype=torch.int64)}),
                TensorDict({"a": zeros(2, dtype=torch.float16)}),
            ]
        )
    )

    out["lazy_device_cpu"] = repr(
        lazy_stack(
            [
                TensorDict({"x": zeros(3)}, device="cpu"),
                TensorDict({"x": zeros(3)}, device="cpu"),
            ]
        )
    )

    nested = TensorDict({"a": zeros(2, 1)}, batch_size=[2])
    out["lazy_nested_extra_dims"] = repr(
        lazy_stack([TensorDict({"n": nested}), TensorDict({"n": nested.clone()})])
    )

    out["lazy_nested_common"] = repr(
        lazy_stack(
            [
                TensorDict({"n": {"a": zeros(1), "b": zeros(2)}}),
                TensorDict({"n": {"a": zeros(1)}}),
            ]
        )
    )

    st = TensorDict(
        {"a": zeros(2, 1), "s": NonTensorStack("a", "b")}, batch_size=[2]
    )
    out["lazy_non_tensor_stack"] = repr(lazy_stack([st, st.clone()]))

    common = {f"long_key_name_{i}": zeros(3) for i in range(4)}
    out["lazy_wrap_exclusive"] = repr(
        lazy_stack(
            [
                TensorDict(
                    {**common, **{f"exclusive_number_{i}": zeros(2) for i in range(3)}}
                ),
                TensorDict(
                    {**common, **{f"other_exclusive_{i}": zeros(2) for i in range(5)}}
                ),
            ]
        )
    )

    out["lazy_short_exclusive"] = repr(
        lazy_stack(
            [TensorDict({"a": zeros(1)}), TensorDict({"a": zeros(1), "bb": zeros(1)})]
        )
    )

    # A dict in some elements only: the compact form fails and the repr
    # falls back to the detailed one.
    out["lazy_mixed_dict"] = repr(
        lazy_stack([TensorDict({"x": {"a": zeros(1)}}), TensorDict({"x": zeros(3)})])
    )

    return out


def compact_only_cases() -> dict[str, str]:
    # Python's detailed repr raises here (it stacks the leaves).
    out = {}
    out["lazy_devices"] = repr(
        lazy_stack(
            [TensorDict({"x": zeros(3)}), TensorDict({"x": zeros(3, device="meta")})]
        )
    )
    return out


# --- print options cases -------------------------------------------------------


def options_dict() -> TensorDict:
    return TensorDict(
        {"b": zeros(2), "a": {"y": zeros(2, 3, dtype=torch.int64), "x": "text"}},
        batch_size=[2],
        device="cpu",
    )


OPTIONS_CASES = {
    "insertion": {"sort_keys": None},
    "no_dtype": {"show_dtype": False},
    "no_batch_size": {"show_batch_size": False},
    "no_device": {"show_device": False},
    "detailed_insertion": {"compact": False, "sort_keys": None},
    "detailed_no_batch_size_no_device": {
        "compact": False,
        "show_batch_size": False,
        "show_device": False,
    },
}


def options_cases() -> dict[str, str]:
    out = {}
    td = options_dict()
    for name, options in OPTIONS_CASES.items():
        with tensordict.set_printoptions(**options):
            out[name] = repr(td)
            out[name + "_lazy"] = repr(lazy_stack([td, td.clone()]))
    return out


# --- keys cases ----------------------------------------------------------------


def keys_dict() -> TensorDict:
    td = TensorDict(
        {
            "b": zeros(3),
            "a": {"z": zeros(3), "y": "text", "x": {"w": zeros(3, 2)}},
            "s": "str",
            "e": TensorDict(batch_size=[3]),
            "A": zeros(3),
        },
        batch_size=[3],
    )
    td["a", "st"] = NonTensorStack("p", "q", "r")
    return td


def key_json(key):
    return key if isinstance(key, str) else list(key)


def keys_cases() -> dict[str, list]:
    out = {}
    td = keys_dict()
    for nested in (False, True):
        for leaves in (False, True):
            for sort in (False, True):
                name = f"nested{int(nested)}_leaves{int(leaves)}_sort{int(sort)}"
                keys = td.keys(include_nested=nested, leaves_only=leaves, sort=sort)
                out[name] = [key_json(k) for k in keys]
    return out


# --- error cases ---------------------------------------------------------------


def ab() -> TensorDict:
    return TensorDict({"a": zeros(4), "b": zeros(4)}, batch_size=[4])


def locked_ab() -> TensorDict:
    return ab().lock_()


def _flatten(items):
    TensorDict(items, batch_size=[4]).flatten_keys()


def _refine():
    td = TensorDict(batch_size=[2, 3], names=["x", None])
    td.refine_names("y", "z")


def _set_names():
    td = TensorDict(batch_size=[2, 3])
    td.names = ["x"]


def _missing_unsorted():
    td = TensorDict({"b": zeros(4), "B": zeros(4), "a": zeros(4)}, batch_size=[4])
    td["zz"]


ERROR_CASES = {
    "lock_set_new_key": lambda: locked_ab().set("c", zeros(4)),
    "lock_del": lambda: locked_ab().del_("a"),
    "lock_pop": lambda: locked_ab().pop("a"),
    "lock_rename_key": lambda: locked_ab().rename_key_("a", "c"),
    "batch_mismatch": lambda: ab().set("c", zeros(3)),
    "batch_mismatch_2d": lambda: ab().set("a", zeros(5, 4)),
    "batch_mismatch_constructor": lambda: TensorDict({"x": zeros(3)}, batch_size=[4]),
    # Python's get() returns None for a missing key; td[key] raises.
    "missing_key": lambda: ab()["zz"],
    "missing_key_empty": lambda: TensorDict()["zz"],
    "missing_key_unsorted": _missing_unsorted,
    "names_length": lambda: TensorDict(batch_size=[2, 3], names=["x"]),
    "names_length_set": _set_names,
    "names_non_unique": lambda: TensorDict(batch_size=[2, 3], names=["x", "x"]),
    "refine_names_conflict": _refine,
    "flatten_keys_collision_leaf_last": lambda: _flatten(
        {"a": {"b": zeros(4)}, "a.b": zeros(4)}
    ),
    "flatten_keys_collision_nested_last": lambda: _flatten(
        {"a.b": zeros(4), "a": {"b": zeros(4)}}
    ),
    "rename_key_safe_existing": lambda: ab().rename_key_("a", "b", safe=True),
}


def error_message(f) -> str:
    try:
        f()
    except KeyError as e:
        # str(KeyError) wraps the message in quotes; the message is args[0].
        return str(e.args[0])
    except Exception as e:  # noqa: BLE001 - any Python error kind is a case
        return str(e)
    raise AssertionError("did not raise")


def errors_cases() -> dict[str, str]:
    out = {}
    for name, f in ERROR_CASES.items():
        try:
            out[name] = error_message(f)
        except AssertionError:
            out[name] = "<Python raised no error>"
    return out


# --- comparison ----------------------------------------------------------------


def visible(text: str) -> str:
    # Marks the non-printable characters other than newlines, so that a diff
    # shows them (a raw BEL or zero-width space would be invisible). The mark
    # is not a Python escape, which would hide the difference between a raw
    # character and its escaped form.
    return "".join(
        c if c == "\n" or c.isprintable() else f"<U+{ord(c):04X}>" for c in text
    )


def as_text(value) -> str:
    if isinstance(value, str):
        return visible(value)
    # Key lists: one key per line so that the diff points at the key.
    return "\n".join(json.dumps(k) for k in value)


def compare(section: str, cpp: dict, py: dict) -> tuple[int, int]:
    passed = failed = 0
    for name in list(py) + [n for n in cpp if n not in py]:
        label = f"{section}/{name}"
        if name not in cpp:
            print(f"FAIL {label}: missing from the C++ output")
            failed += 1
            continue
        if name not in py:
            print(f"FAIL {label}: missing from the Python cases")
            failed += 1
            continue
        if cpp[name] == py[name]:
            print(f"ok   {label}")
            passed += 1
            continue
        failed += 1
        print(f"FAIL {label}")
        diff = difflib.unified_diff(
            as_text(py[name]).splitlines(keepends=True),
            as_text(cpp[name]).splitlines(keepends=True),
            fromfile=f"python/{label}",
            tofile=f"cpp/{label}",
        )
        lines = list(diff)
        for line in lines:
            sys.stdout.write(line if line.endswith("\n") else line + "\n")
        if not lines:
            print(f"  python: {py[name]!r}\n  cpp:    {cpp[name]!r}")
    return passed, failed


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} PATH/TO/repr_cases", file=sys.stderr)
        return 2
    run = subprocess.run([argv[1]], capture_output=True, text=True, check=False)
    if run.returncode != 0:
        print(f"{argv[1]} exited with {run.returncode}:\n{run.stderr}")
        return 1
    cpp = json.loads(run.stdout)

    with tensordict.set_printoptions(compact=False):
        py = {
            "repr": repr_cases(),
            "keys": keys_cases(),
            "errors": errors_cases(),
        }
    # Python's default options: the compact form.
    py["compact"] = {**repr_cases(), **compact_only_cases()}
    py["options"] = options_cases()

    passed = failed = 0
    for section in ("repr", "compact", "options", "keys", "errors"):
        p, f = compare(section, cpp.get(section, {}), py[section])
        passed += p
        failed += f
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
