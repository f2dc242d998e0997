#!/usr/bin/env python3
"""Canonical dump of a tensordict tree, shared by Python and the C++ CLI.

``dump(obj)`` turns a loaded (or in-memory) TensorDict, LazyStackedTensorDict
or tensorclass into a JSON-able dict. ``tensordict dump PATH`` (C++) prints the
same form for a memmap directory, and the interop tests compare the two as
parsed JSON, never as text: member order, spacing and escapes do not matter.

Usage: td_dump.py PATH [TensorDict|LazyStackedTensorDict|tensorclass]
prints the dump of the memmap tree at PATH (root kind read from its meta.json
unless given).

The form
--------

::

    {
      "batch_size": [int, ...],
      "names": [str | null, ...],         only if the root has dim names
      "stack_dim": int,                   only if the root is a lazy stack
      "class": "<class 'module.Name'>",   only if the root is a tensorclass
      "entries": [entry, ...]
    }

    entry = {"key": [str, ...], "kind": "tensor", "dtype": "torch.float32",
             "shape": [int, ...], "sha256": "<64 lowercase hex digits>"}
          | {"key": [str, ...], "kind": "non_tensor", "value": <JSON value>}

Root members:

- ``batch_size`` is the root's batch size as Python reports it; for a lazy
  stack it includes the stacked dim.
- ``names`` is ``list(obj.names)`` (null for an unnamed dim), present only when
  Python says the root has names (``_has_names()``; for a tensorclass, its
  inner TensorDict). On disk these are the version-1 ``_names`` members; a
  lazy stack's are its elements' names with its ``stack_dim_name`` inserted at
  ``stack_dim``.
- ``stack_dim`` is the lazy stack's ``stack_dim``; ``class`` is
  ``str(type(obj))``, which equals the ``_type`` of the tensorclass meta.json.

Entries, one per leaf, sorted by ``key``:

- ``key`` lists the string components from the root down. Keys are compared
  as Python lists of str: component by component in code point order (which is
  UTF-8 byte order), a proper prefix first.
- A nested TensorDict has no entry of its own; its leaves appear under its key.
  So an empty nested TensorDict is invisible, and only the root batch size is
  compared.
- A lazy stack, at the root or nested, contributes the entries of its element
  ``i`` under one extra component ``str(i)``: element 1's leaf ``("a",)`` of a
  root stack is ``["1", "a"]``, and of a stack stored under ``"s"`` is
  ``["s", "1", "a"]``. A nested lazy stack's ``stack_dim`` is not recorded.
- A tensorclass, at the root or nested, contributes its fields as a
  TensorDict would, a nested tensorclass field as nested keys. A field whose
  value is None has no entry: Python stores nothing for it and the class
  default restores it on load.
- A tensor leaf: ``dtype`` is ``str(t.dtype)`` (``"torch.bfloat16"``),
  ``shape`` is ``list(t.shape)``, ``sha256`` hashes the tensor's bytes in C
  order, exactly as a ``.memmap`` file holds them: little-endian, bool as one
  byte 0/1, complex as (real, imag) pairs, a 0-dim tensor as one element, a
  conjugate or negative view resolved first. A zero-element tensor hashes
  ``b""`` (e3b0c442...b855).
- ``NonTensorData`` has ``value`` = its data, passed through JSON so that a
  tuple reads as a list; ``NonTensorStack`` has ``value`` = ``tolist()``
  (nested lists following its batch dims). Values are JSON-able without NaN
  or infinity; ``dump`` raises ValueError otherwise.

``to_json(d)`` is the text form written to ``*.expected.json`` (one entry per
line, UTF-8, no NaN). ``diff(expected, actual)`` lists the differences of two dumps,
comparing non-tensor values by type as well (1, 1.0 and true differ).

Nested (torch.nested) tensors and non-strided layouts are not covered and
raise TypeError.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import sys
from typing import Any

import torch

import tensordict
from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    TensorDictBase,
    is_tensorclass,
)

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    # Loading a tree that holds a corpus tensorclass needs its module importable.
    sys.path.insert(0, _HERE)

ROOT_KINDS = ("TensorDict", "LazyStackedTensorDict", "tensorclass")


def tensor_sha256(t: torch.Tensor) -> str:
    """Returns the sha256 hex digest of ``t``'s C-order bytes."""
    if t.is_nested or t.layout != torch.strided:
        raise TypeError(f"cannot hash a tensor with layout {t.layout}")
    t = t.detach().as_subclass(torch.Tensor).resolve_conj().resolve_neg()
    flat = t.contiguous().reshape(-1)
    if flat.numel() == 0:
        return hashlib.sha256(b"").hexdigest()
    if sys.byteorder != "little":
        raise RuntimeError("the dump format assumes a little-endian host")
    # Read the bytes straight from memory: bytes(storage) goes element by
    # element through Python and takes seconds on a 1 MiB leaf.
    data = flat.view(torch.uint8)
    return hashlib.sha256(ctypes.string_at(data.data_ptr(), data.numel())).hexdigest()


def _json_value(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise ValueError(f"non-tensor value {value!r} is not plain JSON: {e}") from e


def _is_user_tensorclass(obj: Any) -> bool:
    return is_tensorclass(obj) and not isinstance(obj, (NonTensorData, NonTensorStack))


def _collect(obj: Any, key: list[str], out: list[dict]) -> None:
    # NonTensorStack subclasses LazyStackedTensorDict and NonTensorData is a
    # tensorclass, so the non-tensor checks must come first.
    if isinstance(obj, NonTensorStack):
        out.append(
            {"key": key, "kind": "non_tensor", "value": _json_value(obj.tolist())}
        )
    elif isinstance(obj, NonTensorData):
        out.append({"key": key, "kind": "non_tensor", "value": _json_value(obj.data)})
    elif _is_user_tensorclass(obj):
        _collect(obj._tensordict, key, out)
        # Python 0.15 keeps only None here, but a non-None value would be
        # stored in the tensorclass meta.json, so it is part of the content.
        for name, value in obj._non_tensordict.items():
            if value is not None:
                out.append(
                    {
                        "key": key + [name],
                        "kind": "non_tensor",
                        "value": _json_value(value),
                    }
                )
    elif isinstance(obj, LazyStackedTensorDict):
        for i, element in enumerate(obj.tensordicts):
            _collect(element, key + [str(i)], out)
    elif isinstance(obj, TensorDictBase):
        for name in obj.keys():
            _collect(obj.get(name), key + [name], out)
    elif isinstance(obj, torch.Tensor):
        out.append(
            {
                "key": key,
                "kind": "tensor",
                "dtype": str(obj.dtype),
                "shape": list(obj.shape),
                "sha256": tensor_sha256(obj),
            }
        )
    elif obj is None:
        pass
    else:
        raise TypeError(f"cannot dump {type(obj).__name__} at key {key}")


def root_kind(obj: Any) -> str:
    """Returns the root kind of ``obj``, one of ROOT_KINDS."""
    if isinstance(obj, (NonTensorData, NonTensorStack)):
        raise TypeError(f"a {type(obj).__name__} cannot be a dump root")
    if _is_user_tensorclass(obj):
        return "tensorclass"
    if isinstance(obj, LazyStackedTensorDict):
        return "LazyStackedTensorDict"
    if isinstance(obj, TensorDictBase):
        return "TensorDict"
    raise TypeError(f"cannot dump {type(obj).__name__}")


def dump(obj: Any) -> dict:
    """Returns the canonical dump of ``obj`` (see the module docstring)."""
    kind = root_kind(obj)
    out: dict[str, Any] = {"batch_size": list(obj.batch_size)}
    named = obj._tensordict if kind == "tensorclass" else obj
    if named._has_names():
        out["names"] = list(named.names)
    if kind == "LazyStackedTensorDict":
        out["stack_dim"] = obj.stack_dim
    elif kind == "tensorclass":
        out["class"] = str(type(obj))
    entries: list[dict] = []
    _collect(obj, [], entries)
    entries.sort(key=lambda e: e["key"])
    for a, b in zip(entries, entries[1:]):
        if a["key"] == b["key"]:
            raise ValueError(f"two entries for key {a['key']}")
    out["entries"] = entries
    return out


def to_json(d: dict) -> str:
    """Returns the text form of a dump, as written to *.expected.json."""

    def text(value):
        return json.dumps(value, ensure_ascii=False, allow_nan=False)

    # One entry per line keeps the expected files readable and their diffs small.
    members = [f" {text(k)}: {text(v)}" for k, v in d.items() if k != "entries"]
    entries = ",\n".join(f"  {text(e)}" for e in d["entries"])
    members.append(f' "entries": [\n{entries}\n ]' if entries else ' "entries": []')
    return "{\n" + ",\n".join(members) + "\n}\n"


def load_tree(path: str, kind: str | None = None) -> Any:
    """Loads the memmap tree at ``path`` read-only, with the class for ``kind``.

    ``mode="r"`` maps the files copy-on-write, so that a file shorter than its
    meta.json says fails to load instead of being extended with zeros, and the
    tree is never modified. Pickle sidecars are refused: the C++ library must
    not need them.
    """
    # The corpus tensorclasses must be registered before any tree that holds
    # one, at the root or nested, can load.
    import corpus_classes  # noqa: F401

    if kind is None:
        with open(os.path.join(path, "meta.json"), "rb") as f:
            type_str = json.loads(f.read())["_type"]
        if type_str == str(TensorDict):
            kind = "TensorDict"
        elif type_str == str(LazyStackedTensorDict):
            kind = "LazyStackedTensorDict"
        else:
            kind = "tensorclass"
    kwargs = {"mode": "r", "allow_pickle": False}
    if kind == "TensorDict":
        obj = TensorDict.load_memmap(path, **kwargs)
    elif kind == "LazyStackedTensorDict":
        obj = LazyStackedTensorDict.load_memmap(path, **kwargs)
    elif kind == "tensorclass":
        obj = tensordict.load_memmap(path, **kwargs)
    else:
        raise ValueError(f"unknown root kind {kind!r}, expected one of {ROOT_KINDS}")
    if root_kind(obj) != kind:
        raise TypeError(f"{path} loads as {type(obj).__name__}, expected a {kind}")
    return obj


def _key_str(key: list[str]) -> str:
    return json.dumps(key, ensure_ascii=False)


def _canonical(value: Any) -> str:
    # Type-exact comparison: Python's == says 1 == 1.0 == True.
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def diff(expected: dict, actual: dict) -> list[str]:
    """Returns one line per difference between two dumps (empty if equal)."""
    lines = []
    for member in ("batch_size", "names", "stack_dim", "class"):
        e, a = expected.get(member), actual.get(member)
        if _canonical(e) != _canonical(a):
            lines.append(f"{member}: expected {_canonical(e)}, got {_canonical(a)}")
    want = {tuple(e["key"]): e for e in expected["entries"]}
    got = {tuple(e["key"]): e for e in actual["entries"]}
    for key in sorted(want.keys() | got.keys()):
        e, a = want.get(key), got.get(key)
        where = _key_str(list(key))
        if a is None:
            lines.append(f"{where}: missing ({e['kind']})")
        elif e is None:
            lines.append(f"{where}: unexpected {a['kind']} entry")
        else:
            for field in ("kind", "dtype", "shape", "sha256", "value"):
                if field in e or field in a:
                    ev, av = _canonical(e.get(field)), _canonical(a.get(field))
                    if ev != av:
                        lines.append(f"{where}: {field} expected {ev}, got {av}")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: td_dump.py PATH [" + "|".join(ROOT_KINDS) + "]", file=sys.stderr)
        return 2
    obj = load_tree(argv[1], argv[2] if len(argv) == 3 else None)
    sys.stdout.write(to_json(dump(obj)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
