#!/usr/bin/env python3
"""Interop corpus of memmap trees written by Python tensordict.

Usage:
    memmap_corpus.py write OUTDIR
    memmap_corpus.py check [--no-files] CPP_OUTDIR EXPECTED_DIR

``write`` saves every case with the installed tensordict and writes, in OUTDIR:

- ``<case>/``: the memmap tree, as ``.memmap()`` (or ``.save()``/``.memmap_()``)
  writes it;
- ``<case>.expected.json``: its canonical dump (td_dump.py), computed from the
  tree loaded back with Python, after checking that it equals the dump of the
  in-memory object;
- ``<case>.files.json``: ``{"files": {relative POSIX path: {"size": int,
  "sha256": hex}}}`` for every file of the tree, meta.json included, so that
  the C++ tests can compare the bytes they write with Python's;
- ``index.json``: ``{"tensordict": version, "torch": version, "cases": [{"name",
  "root", "description", "json_style", "extension"}, ...]}``. ``root`` is
  "TensorDict", "LazyStackedTensorDict" or "tensorclass"; ``json_style`` is
  "json" (stdlib, ``{"a": 1}`` with ASCII escapes) or "orjson" (compact, raw
  UTF-8); ``extension`` marks dtypes beyond the required set (uint16/32/64,
  complex32), which ``check`` reports as skipped when the C++ side lacks them.

``check`` loads every case of EXPECTED_DIR/index.json from CPP_OUTDIR (trees
written by the C++ library) with the installed Python tensordict, read-only
and without pickle, and compares its dump with ``<case>.expected.json``. It
also compares the set of file paths in the tree with ``<case>.files.json``
(not the bytes), because Python falls back to unencoded file names when the
encoded one is missing and would hide a key-encoding bug; ``--no-files`` skips
that. It prints one line per mismatch, ``case: key: what differs``, and exits
1 on any mismatch or missing case.

Checking the corpus against itself (``check OUT OUT``) must pass.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import sys
import warnings
from typing import Any, Callable

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import torch  # noqa: E402

import tensordict  # noqa: E402
from tensordict import (  # noqa: E402
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
)
from tensordict import _utils_key_json  # noqa: E402

import corpus_classes  # noqa: E402
import td_dump  # noqa: E402
from corpus_classes import CorpusInner, CorpusOuter  # noqa: E402

# --- case registry -------------------------------------------------------------


class Case:
    def __init__(self, name, description, build, json_style, api, extension):
        self.name = name
        self.description = description
        self.build = build
        self.json_style = json_style
        self.api = api
        self.extension = extension


CASES: list[Case] = []


def case(
    name: str,
    description: str,
    *,
    json_style: str = "json",
    api: str = "memmap",
    extension: bool = False,
) -> Callable:
    """Registers a builder; ``api`` is how the tree is written:
    "memmap", "save", "memmap_" (in place) or "memmap_threads" (num_threads=2).
    """
    assert name.replace("_", "").isalnum() and name.isascii(), name

    def register(build):
        CASES.append(Case(name, description, build, json_style, api, extension))
        return build

    return register


# --- values -------------------------------------------------------------------

INF = math.inf
NAN = math.nan

_SAME_WIDTH_INT = {
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.float32: torch.int32,
    torch.float64: torch.int64,
}

# Quiet NaNs with a payload bit and with the sign bit set, as signed integers of
# the same width: a reader or writer that canonicalizes NaNs changes the bytes.
_NAN_BITS = {
    torch.float16: [0x7E01, -0x0200],
    torch.bfloat16: [0x7FC1, -0x0040],
    torch.float32: [0x7FC00001, -0x00400000],
    torch.float64: [0x7FF8000000000001, -(2**51)],
}


def int_values(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    info = torch.iinfo(dtype)
    edge = [info.min, info.min + 1, 0, 1, info.max - 1, info.max]
    if info.min < 0:
        edge += [-1, -2]
    return {
        "edge": torch.tensor(edge, dtype=dtype),
        "random": torch.randint(info.min, info.max, (2, 3, 4), dtype=dtype),
        "scalar": torch.tensor(info.min, dtype=dtype),
    }


def float_values(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    fi = torch.finfo(dtype)
    edge = torch.tensor(
        [
            NAN,
            INF,
            -INF,
            0.0,
            -0.0,
            1.0,
            -1.5,
            fi.max,
            -fi.max,
            fi.tiny,
            fi.tiny / 4,
            fi.eps,
        ],
        dtype=dtype,
    )
    nan_bits = torch.tensor(_NAN_BITS[dtype], dtype=_SAME_WIDTH_INT[dtype]).view(dtype)
    return {
        "edge": torch.cat([edge, nan_bits]),
        "random": torch.randn(2, 3, 4, dtype=torch.float32).mul(100).to(dtype),
        "scalar": torch.tensor(-INF, dtype=dtype),
    }


def complex_values(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    part = torch.float32 if dtype == torch.complex64 else torch.float64
    real = float_values(part)["edge"]
    return {
        "edge": torch.complex(real, real.roll(1)),
        "random": torch.randn(2, 3, 4, dtype=dtype),
        "scalar": torch.complex(
            torch.tensor(NAN, dtype=part), torch.tensor(-0.0, dtype=part)
        ),
    }


def bool_values() -> dict[str, torch.Tensor]:
    return {
        "edge": torch.tensor([True, False, False, True]),
        "random": torch.rand(2, 3, 4) > 0.5,
        "scalar": torch.tensor(True),
    }


def values_for(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    if dtype == torch.bool:
        return bool_values()
    if dtype.is_complex:
        return complex_values(dtype)
    if dtype.is_floating_point:
        return float_values(dtype)
    return int_values(dtype)


REQUIRED_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def leaf(*shape, dtype=torch.float32) -> torch.Tensor:
    return (
        torch.randn(*shape).to(dtype)
        if dtype != torch.bool
        else torch.rand(*shape) > 0.5
    )


# --- cases: dtypes --------------------------------------------------------------


def _dtype_case(dtype):
    def build():
        return TensorDict(values_for(dtype), batch_size=[])

    return build


for _dtype in REQUIRED_DTYPES:
    case(
        f"dtype_{dtype_name(_dtype)}",
        f"{dtype_name(_dtype)} leaves: edge values (extremes"
        + (
            ", NaN with payload/sign, inf, -0.0, subnormal"
            if _dtype.is_floating_point
            else ""
        )
        + (", NaN/inf parts" if _dtype.is_complex else "")
        + "), random [2,3,4], 0-dim",
    )(_dtype_case(_dtype))


@case("dtype_all_batch2", "every required dtype in one tree, batch [2], leaves [2,3]")
def _():
    return TensorDict(
        {
            dtype_name(d): values_for(d)["random"][:, 0, :3].contiguous()
            for d in REQUIRED_DTYPES
        },
        batch_size=[2],
    )


@case(
    "dtype_uint16_uint32_uint64",
    "wide unsigned ints (extension): 0, max, values above the signed max",
    extension=True,
)
def _():
    return TensorDict(
        {
            "u16": torch.tensor([0, 1, 2**15, 2**16 - 1], dtype=torch.uint16),
            "u32": torch.tensor([0, 1, 2**31, 2**32 - 1], dtype=torch.uint32),
            "u64": torch.tensor([0, 1, 2**63, 2**64 - 1], dtype=torch.uint64),
        },
        batch_size=[4],
    )


@case("dtype_complex32", "complex32 (chalf) leaf (extension)", extension=True)
def _():
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", UserWarning
        )  # "ComplexHalf support is experimental"
        return TensorDict(
            {"c": torch.randn(2, 3, dtype=torch.complex64).to(torch.complex32)}, [2]
        )


# --- cases: structure and keys ---------------------------------------------------


@case("nested_3_levels", "leaves at every level of a 3-level nesting, batch [2,3]")
def _():
    return TensorDict(
        {
            "top": leaf(2, 3),
            "l1": {
                "x": leaf(2, 3, 4, dtype=torch.int64),
                "l2": {
                    "y": leaf(2, 3, dtype=torch.bool),
                    "l3": {"z": leaf(2, 3, 5, dtype=torch.float64), "s": "deep"},
                },
            },
            "after": leaf(2, 3, dtype=torch.int32),
        },
        batch_size=[2, 3],
    )


@case(
    "nested_longer_batch",
    "nested dicts with batch sizes longer than the parent's: [2] > [2,3] > [2,3,4]",
)
def _():
    inner = TensorDict({"z": leaf(2, 3, 4, 2)}, batch_size=[2, 3, 4])
    mid = TensorDict({"y": leaf(2, 3), "inner": inner}, batch_size=[2, 3])
    return TensorDict({"x": leaf(2, 7), "mid": mid}, batch_size=[2])


@case(
    "keys_special",
    'keys with / space % . : < > | ? * " \\ tab DEL, as leaves and as directories',
)
def _():
    return TensorDict(
        {
            "a/b": leaf(2),
            "with space": leaf(2),
            "100%": leaf(2),
            "%": leaf(2),
            "%2F": leaf(2),
            "x.y": leaf(2),
            "a..b": leaf(2),
            "trailing.": leaf(2),
            ".hidden": leaf(2),
            'c:o<l>o|n?s*"q"\\b': leaf(2),
            "tab\there\x7f": leaf(2),
            "..%2F..": leaf(2),
            "dir/with/slashes": {"leaf": leaf(2), "also space": leaf(2)},
            "sp ace dir": {"x y": leaf(2), "s": "in a spaced dir"},
            "50%": {"y%": leaf(2)},
        },
        batch_size=[2],
    )


@case("keys_dots", 'keys ".", ".." and "..." as leaves and directories')
def _():
    return TensorDict(
        {
            ".": leaf(2),
            "...": leaf(2),
            "..": {".": leaf(2), "..": {"x": leaf(2)}, "...": "three dots"},
            "d": {".": {"..": leaf(2)}},
        },
        batch_size=[2],
    )


@case("keys_empty", 'the empty key "" as a leaf, a directory and a non-tensor')
def _():
    return TensorDict(
        {
            "": {"": leaf(2), "x": leaf(2)},
            "leafdir": {"": leaf(2, 3, dtype=torch.int64)},
            "nt": {"": NonTensorData("under the empty key")},
        },
        batch_size=[2],
    )


_UNICODE_KEYS = {
    "é": lambda: leaf(2),
    "日本": lambda: {"語": leaf(2), "é": leaf(2)},
    "🙂": lambda: leaf(2),
    "e\u0301": lambda: leaf(2),  # decomposed é: a different key from "é"
    "Ωmega≈": lambda: "unicode value: héllo 日本 🙂",
}


@case(
    "keys_unicode",
    "non-ASCII keys (é, 日本, non-BMP emoji, combining mark), stdlib JSON escapes",
)
def _():
    return TensorDict({k: v() for k, v in _UNICODE_KEYS.items()}, batch_size=[2])


@case(
    "keys_unicode_orjson",
    "the keys_unicode tree written with orjson (raw UTF-8 in meta.json)",
    json_style="orjson",
)
def _():
    return TensorDict({k: v() for k, v in _UNICODE_KEYS.items()}, batch_size=[2])


@case(
    "keys_reserved_like",
    'keys named like meta.json members: "_format_version", "_class", "_names",'
    ' "type", "dtype", "device_"',
)
def _():
    return TensorDict(
        {
            "_format_version": leaf(2),
            "_class": leaf(2, dtype=torch.int64),
            "_names": leaf(2, dtype=torch.bool),
            "type": leaf(2),
            "dtype": {"is_nested": leaf(2)},
            "device_": "cpu",
        },
        batch_size=[2],
    )


# --- cases: shapes -----------------------------------------------------------------


@case(
    "zero_element_leaves",
    "zero-element leaves [0], [3,0], [0,4], [2,0,5] of several dtypes (no files)",
)
def _():
    return TensorDict(
        {
            "f32_0": torch.empty(0),
            "i64_3x0": torch.empty(3, 0, dtype=torch.int64),
            "bool_0x4": torch.empty(0, 4, dtype=torch.bool),
            "bf16_2x0x5": torch.empty(2, 0, 5, dtype=torch.bfloat16),
            "c128_0": torch.empty(0, dtype=torch.complex128),
            "sub": {"empty": torch.empty(0, 0), "full": leaf(3)},
        },
        batch_size=[],
    )


@case(
    "batch_0d", "batch [] with 0-dim leaves of several dtypes, a 1-D leaf and a string"
)
def _():
    return TensorDict(
        {
            "f": torch.tensor(3.5),
            "i": torch.tensor(-7),
            "b": torch.tensor(False),
            "h": torch.tensor(0.25, dtype=torch.float16),
            "c": torch.tensor(1 - 2j, dtype=torch.complex64),
            "v": leaf(5),
            "s": "scalar batch",
            "sub": {"x": torch.tensor(1, dtype=torch.uint8)},
        },
        batch_size=[],
    )


@case("batch_1d_size1", "batch [1]")
def _():
    return TensorDict(
        {"x": leaf(1), "y": leaf(1, 3), "sub": {"z": leaf(1, 2, 2)}}, batch_size=[1]
    )


@case("batch_2d", "batch [2,3] with leaves [2,3] and [2,3,4]")
def _():
    return TensorDict(
        {"x": leaf(2, 3), "y": leaf(2, 3, 4, dtype=torch.int16)}, batch_size=[2, 3]
    )


@case("batch_3d", "batch [2,3,4] with a nested dict")
def _():
    return TensorDict(
        {"x": leaf(2, 3, 4), "sub": {"y": leaf(2, 3, 4, 2, dtype=torch.int8)}},
        batch_size=[2, 3, 4],
    )


@case(
    "batch_zero_first", "batch [0]: zero-size batch, leaves [0] and [0,5], nested [0]"
)
def _():
    return TensorDict(
        {"x": torch.empty(0), "y": torch.empty(0, 5), "sub": {"z": torch.empty(0, 2)}},
        batch_size=[0],
    )


@case("batch_zero_middle", "batch [2,0,3]: zero-size middle dim, nested dict")
def _():
    return TensorDict(
        {
            "x": torch.empty(2, 0, 3),
            "y": torch.empty(2, 0, 3, 4, dtype=torch.int64),
            "sub": {"z": torch.empty(2, 0, 3)},
        },
        batch_size=[2, 0, 3],
    )


@case(
    "dim_names",
    'dim names ["time", "env"] (version-1 _names), inherited by a nested dict',
)
def _():
    return TensorDict(
        {"obs": leaf(2, 3, 4), "sub": {"r": leaf(2, 3)}},
        batch_size=[2, 3],
        names=["time", "env"],
    )


@case("dim_names_partial", 'dim names with unnamed dims [null, "x", null]')
def _():
    return TensorDict(
        {"a": leaf(2, 3, 1)}, batch_size=[2, 3, 1], names=[None, "x", None]
    )


@case("dim_names_orjson", "dim names written with orjson", json_style="orjson")
def _():
    return TensorDict({"a": leaf(4, 2), "s": "named"}, batch_size=[4], names=["batch"])


@case("large_leaf", "one 1 MiB float32 leaf [512,512] and an odd-sized uint8 leaf")
def _():
    return TensorDict(
        {
            "big": torch.randn(512, 512),
            "odd": torch.randint(0, 256, (4099,), dtype=torch.uint8),
        },
        [],
    )


@case(
    "noncontiguous_sources",
    "sources that are transposed, expanded, strided, offset, conj and neg views",
)
def _():
    base = torch.arange(60, dtype=torch.float32).view(3, 4, 5)
    c = torch.randn(3, 4, dtype=torch.complex64)
    return TensorDict(
        {
            "transposed": base[0].t(),
            "expanded": torch.arange(3).expand(3, 4, 3).transpose(1, 2),
            "expanded_scalar": torch.tensor(7.0).expand(3, 2),
            "step_slice": base[:, ::2, 1::3],
            "offset": base[1:, 1, :4],
            "permuted": base.permute(2, 0, 1)[:3],
            "conj": c.conj(),
            "neg": torch.randn(3, 2)._neg_view(),
            "channels_last": torch.randn(3, 2, 4, 5).contiguous(
                memory_format=torch.channels_last
            ),
            "bool_strided": (torch.rand(3, 8) > 0.5)[:, ::3],
        },
        batch_size=[],
    )


# --- cases: non-tensor data ---------------------------------------------------------


@case(
    "non_tensor_scalars",
    "NonTensorData str (empty, unicode, escapes), int64 extremes, floats, bools, None",
)
def _():
    return TensorDict(
        {
            "str": "hello",
            "str_empty": NonTensorData(""),
            "str_unicode": "héllo 日本 🙂",
            "str_escapes": 'quote " backslash \\ newline \n tab \t',
            "int_zero": NonTensorData(0),
            "int_neg": NonTensorData(-7),
            "int_max": NonTensorData(2**63 - 1),
            "int_min": NonTensorData(-(2**63)),
            "float": NonTensorData(1.5),
            "float_neg": NonTensorData(-0.25),
            "float_tenth": NonTensorData(0.1),
            "float_big": NonTensorData(1e300),
            "float_integral": NonTensorData(2.0),
            "true": NonTensorData(True),
            "false": NonTensorData(False),
            "none": NonTensorData(None),
        },
        batch_size=[],
    )


@case(
    "non_tensor_containers",
    "NonTensorData lists and dicts: mixed, nested, empty, tuple (read back as list)",
)
def _():
    return TensorDict(
        {
            "list": NonTensorData([1, "two", 3.0, None, True]),
            "dict": NonTensorData(
                {
                    "alpha": 1,
                    "beta": [1, 2, {"gamma": None}],
                    "delta": {"x": "y", "z": []},
                    "é": "ü",
                }
            ),
            "empty_list": NonTensorData([]),
            "empty_dict": NonTensorData({}),
            "nested_list": NonTensorData([[1, 2], [3], []]),
            "tuple": NonTensorData((1, "a")),
            "fixture_style": NonTensorData(["a string!"]),
        },
        batch_size=[],
    )


@case("non_tensor_batched", "NonTensorData under batch [2,3] and in a nested dict")
def _():
    return TensorDict(
        {
            "x": leaf(2, 3),
            "s": "shared",
            "sub": {"n": NonTensorData(42), "d": NonTensorData({"k": [1, 2]})},
        },
        batch_size=[2, 3],
    )


@case(
    "non_tensor_stack_1d",
    "NonTensorStack 1-D of strings, of mixed scalars, of dicts (compact meta.json)",
)
def _():
    return TensorDict(
        {
            "strs": NonTensorStack("a", "b", "c"),
            "mixed": NonTensorStack(1, 2.5, None),
            "dicts": NonTensorStack({"i": 0}, {"i": 1, "j": "x"}, {}),
            "x": leaf(3),
        },
        batch_size=[3],
    )


@case(
    "non_tensor_stack_2d", "NonTensorStack 2-D [2,3] at the root and in a nested dict"
)
def _():
    def grid(tag):
        return NonTensorStack(
            *(NonTensorStack(*(f"{tag}{i}{j}" for j in range(3))) for i in range(2))
        )

    return TensorDict(
        {"grid": grid("g"), "sub": {"grid": grid("h")}, "x": leaf(2, 3)},
        batch_size=[2, 3],
    )


# --- cases: lazy stacks --------------------------------------------------------------


@case(
    "lazy_stack_root",
    "lazy stack at the root, stack_dim 0, 3 elements with nested dicts and strings",
)
def _():
    return LazyStackedTensorDict(
        *(
            TensorDict(
                {
                    "a": leaf(4),
                    "b": {"c": leaf(4, 2, dtype=torch.int64)},
                    "s": f"elem{i}",
                },
                [4],
            )
            for i in range(3)
        ),
        stack_dim=0,
    )


@case(
    "lazy_stack_hetero_shapes",
    "lazy stack at the root, stack_dim 1, leaf shapes differ per element",
)
def _():
    return LazyStackedTensorDict(
        TensorDict({"obs": leaf(4, 2), "r": leaf(4)}, [4]),
        TensorDict({"obs": leaf(4, 5), "r": leaf(4)}, [4]),
        stack_dim=1,
    )


@case("lazy_stack_diff_keys", "lazy stack whose elements have different keys")
def _():
    return LazyStackedTensorDict(
        TensorDict({"common": leaf(3), "only0": leaf(3, dtype=torch.int64)}, [3]),
        TensorDict({"common": leaf(3), "only1": {"deep": leaf(3)}, "s": "one"}, [3]),
        TensorDict({"common": leaf(3)}, [3]),
        stack_dim=0,
    )


@case("lazy_stack_0d_elements", "lazy stack of 0-dim tensordicts (batch [2])")
def _():
    return LazyStackedTensorDict(
        TensorDict({"v": torch.tensor(1.0)}, []),
        TensorDict({"v": torch.tensor(2.0)}, []),
        stack_dim=0,
    )


@case("lazy_stack_names", "lazy stack with named element dims and a stack_dim_name")
def _():
    return LazyStackedTensorDict(
        *(TensorDict({"a": leaf(3, 2)}, [3], names=["n"]) for _ in range(2)),
        stack_dim=1,
        stack_dim_name="s",
    )


@case(
    "lazy_stack_nested",
    "TensorDict holding a lazy stack (stack_dim 1) next to plain leaves",
)
def _():
    stack = LazyStackedTensorDict(
        TensorDict({"a": leaf(3), "x": leaf(3, 2)}, [3]),
        TensorDict({"a": leaf(3), "x": leaf(3, 4)}, [3]),
        stack_dim=1,
    )
    return TensorDict({"stack": stack, "plain": leaf(3)}, batch_size=[3])


@case(
    "lazy_stack_orjson",
    "lazy stack with strings, written with orjson",
    json_style="orjson",
)
def _():
    return LazyStackedTensorDict(
        TensorDict({"a": leaf(2), "s": "zéro"}, [2]),
        TensorDict({"a": leaf(2), "s": "un"}, [2]),
        stack_dim=0,
    )


# --- cases: tensorclasses ------------------------------------------------------------


def _outer(batch):
    return CorpusOuter(
        x=leaf(*batch, 3),
        label="outer label",
        maybe=None,
        note=None,
        inner=CorpusInner(
            y=leaf(*batch, dtype=torch.int64), tag="inner tag", batch_size=batch
        ),
        batch_size=batch,
    )


@case(
    "tensorclass_root",
    "tensorclass root: tensor, str, None and nested tensorclass fields, batch [2]",
)
def _():
    return _outer([2])


@case(
    "tensorclass_none_fields",
    "tensorclass root with every optional field None, batch []",
)
def _():
    return CorpusOuter(x=torch.tensor([1.0, 2.0]), label="", batch_size=[])


@case("tensorclass_in_td", "TensorDict holding a tensorclass next to a leaf")
def _():
    return TensorDict({"tc": _outer([2, 3]), "other": leaf(2)}, batch_size=[2])


@case("tensorclass_orjson", "tensorclass root written with orjson", json_style="orjson")
def _():
    return _outer([3])


# --- cases: mixed, and writing APIs --------------------------------------------------


def _rl_like():
    return TensorDict(
        {
            "obs": leaf(5, 4),
            "action": torch.randint(0, 3, (5,)),
            "reward": leaf(5, 1),
            "done": torch.zeros(5, 1, dtype=torch.bool),
            "next": {
                "obs": leaf(5, 4),
                "reward": leaf(5, 1),
                "done": torch.ones(5, 1, dtype=torch.bool),
            },
            "info": "episode 1",
        },
        batch_size=[5],
    )


@case(
    "mixed_rl_like",
    "an RL-style rollout: obs/action/reward/done, next dict, string info",
)
def _():
    return _rl_like()


@case(
    "mixed_orjson",
    "the RL-style rollout plus a NonTensorStack, written with orjson",
    json_style="orjson",
)
def _():
    td = _rl_like()
    td["tags"] = NonTensorStack(*(f"t{i}" for i in range(5)))
    return td


@case(
    "fixture_like",
    "the layout of the mmap_example fixture: batch [2,1], nested int64/bfloat16/string",
)
def _():
    return TensorDict(
        {
            "nested": TensorDict(
                {
                    "int64": torch.tensor([[1], [2]]),
                    "string": NonTensorData(["a string!"]),
                    "bfloat16": torch.ones(2, 1, dtype=torch.bfloat16),
                },
                batch_size=[2, 1],
            )
        },
        batch_size=[2, 1],
    )


@case("api_save", "written with td.save() instead of td.memmap()", api="save")
def _():
    return TensorDict({"a": leaf(2, 2), "sub": {"b": leaf(2)}}, [2])


@case(
    "api_memmap_inplace",
    "written with td.memmap_(num_threads=2) in place",
    api="memmap_",
)
def _():
    return TensorDict(
        {f"k{i}": leaf(3, i + 1) for i in range(6)} | {"sub": {"s": "x"}}, [3]
    )


@case(
    "api_memmap_threads", "written with td.memmap(num_threads=2)", api="memmap_threads"
)
def _():
    return TensorDict({f"k{i}": leaf(2, i) for i in range(8)}, [2])


# --- writing -------------------------------------------------------------------------


@contextlib.contextmanager
def json_backend(name: str):
    """Writes meta.json with the given backend, restoring the previous one."""
    previous = _utils_key_json.get_json_backend().__name__
    with warnings.catch_warnings():
        # set_json_backend is deprecated (removal in 0.17) but still the switch.
        warnings.simplefilter("ignore", DeprecationWarning)
        tensordict.utils.set_json_backend(name)
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            tensordict.utils.set_json_backend(previous)


def list_files(root: str) -> dict[str, dict]:
    files = {}
    for dirpath, _, filenames in os.walk(root):
        for filename in filenames:
            path = os.path.join(dirpath, filename)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            with open(path, "rb") as f:
                data = f.read()
            files[rel] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return dict(sorted(files.items()))


def _json_style_of(path: str) -> str:
    with open(os.path.join(path, "meta.json"), "rb") as f:
        text = f.read().decode("utf-8")
    return "json" if '": ' in text else "orjson"


def write_case(c: Case, outdir: str) -> dict:
    torch.manual_seed(0)
    obj = c.build()
    kind = td_dump.root_kind(obj)
    in_memory = td_dump.dump(obj)
    dest = os.path.join(outdir, c.name)
    if os.path.exists(dest):
        shutil.rmtree(dest)
    with json_backend(c.json_style):
        if c.api == "memmap":
            obj.memmap(dest)
        elif c.api == "save":
            obj.save(dest)
        elif c.api == "memmap_":
            obj.memmap_(dest, num_threads=2)
        elif c.api == "memmap_threads":
            obj.memmap(dest, num_threads=2)
        else:
            raise ValueError(c.api)
    files = list_files(dest)
    style = _json_style_of(dest)
    if style != c.json_style:
        raise AssertionError(
            f"{c.name}: meta.json is in the {style} style, expected {c.json_style}"
        )
    loaded = td_dump.dump(td_dump.load_tree(dest, kind))
    differences = td_dump.diff(in_memory, loaded)
    if differences:
        raise AssertionError(
            f"{c.name}: the loaded tree differs from the object saved:\n  "
            + "\n  ".join(differences)
        )
    with open(
        os.path.join(outdir, f"{c.name}.expected.json"), "w", encoding="utf-8"
    ) as f:
        f.write(td_dump.to_json(loaded))
    with open(os.path.join(outdir, f"{c.name}.files.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps({"files": files}, indent=1, ensure_ascii=False) + "\n")
    return {
        "name": c.name,
        "root": kind,
        "description": c.description,
        "json_style": c.json_style,
        "extension": c.extension,
    }


def write(outdir: str) -> int:
    os.makedirs(outdir, exist_ok=True)
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    index = {
        "tensordict": tensordict.__version__,
        "torch": torch.__version__,
        "cases": [write_case(c, outdir) for c in CASES],
    }
    with open(os.path.join(outdir, "index.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(index, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(CASES)} cases to {outdir}")
    return 0


# --- checking ------------------------------------------------------------------------


def check_case(
    entry: dict, cpp_dir: str, expected_dir: str, check_files: bool
) -> list[str]:
    name = entry["name"]
    path = os.path.join(cpp_dir, name)
    with open(os.path.join(expected_dir, f"{name}.expected.json"), "rb") as f:
        expected = json.loads(f.read())
    problems = []
    try:
        actual = td_dump.dump(td_dump.load_tree(path, entry["root"]))
    except Exception as e:  # any failure to load is a mismatch, reported per case
        return [f"load failed: {type(e).__name__}: {e}".replace("\n", " ")]
    problems += td_dump.diff(expected, actual)
    if check_files:
        with open(os.path.join(expected_dir, f"{name}.files.json"), "rb") as f:
            want = set(json.loads(f.read())["files"])
        got = set(list_files(path))
        problems += [f"file {p!r}: missing" for p in sorted(want - got)]
        problems += [f"file {p!r}: unexpected" for p in sorted(got - want)]
    return problems


def check(cpp_dir: str, expected_dir: str, check_files: bool = True) -> int:
    with open(os.path.join(expected_dir, "index.json"), "rb") as f:
        index = json.loads(f.read())
    ok = failed = skipped = 0
    for entry in index["cases"]:
        name = entry["name"]
        refused = os.path.join(cpp_dir, f"{name}.refused")
        if os.path.exists(refused):
            # The C++ writer refuses some trees on purpose (keys that collide
            # with meta.json members); the interop driver checked its reason.
            with open(refused, encoding="utf-8") as f:
                print(f"{name}: skipped (C++ refused to save it: {f.read().strip()})")
            skipped += 1
            continue
        if not os.path.isdir(os.path.join(cpp_dir, name)):
            if entry.get("extension"):
                print(f"{name}: skipped (extension case not written)")
                skipped += 1
            else:
                print(f"{name}: missing directory {os.path.join(cpp_dir, name)}")
                failed += 1
            continue
        problems = check_case(entry, cpp_dir, expected_dir, check_files)
        for problem in problems:
            print(f"{name}: {problem}")
        if problems:
            failed += 1
        else:
            ok += 1
    summary = f"{ok} cases ok"
    if skipped:
        summary += f", {skipped} skipped"
    if failed:
        summary += f", {failed} failed"
    print(summary)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    args = argv[1:]
    check_files = "--no-files" not in args
    args = [a for a in args if a != "--no-files"]
    if len(args) == 2 and args[0] == "write":
        return write(args[1])
    if len(args) == 3 and args[0] == "check":
        return check(args[1], args[2], check_files)
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
