"""The exporter: a TensorDict module to an AOTInductor ``.pt2`` package.

Design: a flat wrapper plus metadata, not a pytree registration.

An exported program's inputs and outputs are pytrees, and the package keeps
their spec as JSON (``get_call_spec()``). Registering TensorDict as a
serializable pytree node would put the dict's structure in that spec, but
then every C++ reader would have to parse and rebuild torch's pytree format,
which PyTorch declines to support in C++ and changes between releases; it
also ties the package to a tensordict class name and to how tensordict
flattens itself (batch size, device and names in the context). A flat
wrapper instead takes one keyword tensor per input key and returns a tuple
in ``out_keys`` order: the call spec stays the plain
``(args=(), kwargs={name: tensor})`` form that the tensordict and TorchRL
export tutorials already produce, so a package exported by hand the
tutorials' way runs in C++ too. What the flat form loses (keys, batch dims,
dtypes and trailing shapes to check, the output dict's batch size and
names, the dynamic batch range, where the weights are) is written as JSON
strings in the package's user metadata (``aot_inductor.metadata``), which
both the Python and the C++ loaders return verbatim.
"""

from __future__ import annotations

import json
import keyword
import os
from typing import Any, Iterable, Optional, Sequence, Tuple, Union

import torch
from torch import nn

# Bumped when the meaning of the metadata changes; the C++ loader refuses a
# format it does not know.
METADATA_FORMAT = "1"
# Format 1 plus ``tensordict.probabilistic``: the package of a probabilistic
# module. A build that reads only format 1 refuses it, rather than running
# the deterministic part alone and returning no action.
METADATA_FORMAT_PROBABILISTIC = "2"

# The distributions tensordict::nn::make_distribution rebuilds, by class
# name; the module must be torch.distributions' (Categorical, Normal,
# OneHotCategorical) or TorchRL's/tensordict's (the others, and TorchRL's
# OneHotCategorical).
_TORCH_DISTRIBUTIONS = {"Categorical", "OneHotCategorical", "Normal"}
_OTHER_DISTRIBUTIONS = {"OneHotCategorical", "TanhNormal", "Delta"}
_INTERACTION_TYPES = {"random", "mode", "mean", "deterministic"}

# The wrapper's attribute holding the user's module: every constant's fully
# qualified name in the package starts with it, and the C++ side strips it so
# that weights are named like ``TensorDict.from_module(module)`` keys.
_PREFIX = "module"

NestedKey = Union[str, Tuple[str, ...]]


def _as_tuple(key: NestedKey) -> Tuple[str, ...]:
    if isinstance(key, str):
        return (key,)
    key = tuple(key)
    if not key or not all(isinstance(part, str) for part in key):
        raise TypeError(f"a key must be a string or a tuple of strings, got {key!r}")
    return key


def _as_json_key(key: Tuple[str, ...]) -> Union[str, list]:
    return key[0] if len(key) == 1 else list(key)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype)


def _input_name(key: Tuple[str, ...]) -> str:
    # tensordict.nn.dispatch's convention: nested keys joined with "_".
    name = "_".join(key)
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(
            f"input key {key!r} gives the argument name {name!r}, which is not "
            "a Python identifier; rename the key to export it"
        )
    return name


def _make_flat_wrapper(
    module: nn.Module,
    in_keys: Sequence[Tuple[str, ...]],
    names: Sequence[str],
    out_keys: Sequence[Tuple[str, ...]],
    batch_dims: int,
) -> nn.Module:
    """Returns a module whose forward takes one keyword tensor per input key.

    torch.export reads the argument names from the signature, and dynamic
    shapes are given per argument name, so forward is generated with the
    names spelled out (a ``**kwargs`` forward is not exportable with
    dynamic shapes on torch 2.13).
    """
    from tensordict import TensorDict

    class _Flat(nn.Module):
        def __init__(self):
            super().__init__()
            setattr(self, _PREFIX, module)

        def _run(self, tensors):
            td = TensorDict(
                dict(zip(in_keys, tensors)),
                batch_size=tensors[0].shape[:batch_dims],
            )
            out = getattr(self, _PREFIX)(td)
            if out is None:
                out = td
            return tuple(out.get(key) for key in out_keys)

    args = ", ".join(names)
    source = f"def forward(self, {args}):\n    return self._run(({args},))\n"
    scope: dict = {}
    exec(source, scope)  # the names are checked identifiers
    _Flat.forward = scope["forward"]
    return _Flat()


class _Identity(nn.Module):
    """Returns copies of its inputs: the deterministic part of a bare
    ProbabilisticTensorDictModule, whose parameters are the package's
    inputs and outputs."""

    def forward(self, *tensors):
        out = tuple(t.clone() for t in tensors)
        return out[0] if len(out) == 1 else out


def _class_name(cls) -> str:
    name = f"{cls.__module__}.{cls.__qualname__}"
    module, _, bare = name.rpartition(".")
    from_torch = module == "torch.distributions" or module.startswith("torch.distributions.")
    ours = module.startswith(("torchrl.modules", "tensordict.nn"))
    if not ((from_torch and bare in _TORCH_DISTRIBUTIONS) or (ours and bare in _OTHER_DISTRIBUTIONS)):
        raise ValueError(
            f"the distribution class {name} has no C++ counterpart; tensordict::nn "
            "has torch.distributions' Categorical, OneHotCategorical and Normal and "
            "TorchRL's OneHotCategorical, TanhNormal and Delta"
        )
    return name


def _kwargs_json(kwargs) -> Tuple[dict, dict]:
    """Splits distribution_kwargs into JSON values and tensors, refusing the
    rest (callables, enums), which C++ could not rebuild."""
    import math

    plain, tensors = {}, {}
    for name, value in dict(kwargs or {}).items():
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu()
            if value.is_floating_point() and not torch.isfinite(value).all():
                raise ValueError(f"the distribution keyword argument {name!r} holds non-finite values")
            tensors[name] = {
                "dtype": _dtype_name(value.dtype),
                "shape": list(value.shape),
                "data": value.to(torch.float64).reshape(-1).tolist(),
            }
        elif value is None or isinstance(value, (bool, int, float)):
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"the distribution keyword argument {name!r} is {value}")
            plain[name] = value
        else:
            raise TypeError(
                f"cannot export the distribution keyword argument {name!r} of type "
                f"{type(value).__name__}: only numbers, booleans, None and tensors are "
                "carried to C++"
            )
    return plain, tensors


def _split_probabilistic(module: nn.Module):
    """Returns (deterministic part, tensordict.probabilistic metadata) for a
    ProbabilisticTensorDictModule/Sequential (TorchRL's ProbabilisticActor),
    or (module, None) for any other module."""
    from tensordict.nn import (
        ProbabilisticTensorDictModule,
        ProbabilisticTensorDictSequential,
        TensorDictModule,
        TensorDictSequential,
    )

    if isinstance(module, ProbabilisticTensorDictSequential):
        modules = list(module.module)
        head = modules[-1]
        if not isinstance(head, ProbabilisticTensorDictModule) or any(
            isinstance(m, (ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential))
            for m in modules[:-1]
        ):
            raise TypeError(
                "only a sequence ending in its one ProbabilisticTensorDictModule can be "
                "exported (composite distributions are not supported)"
            )
        if not modules[:-1]:
            raise ValueError("the probabilistic sequence has no module computing the parameters")
        # Same child names as the actor's (module.0, module.1, ...): weights
        # keep their TensorDict.from_module(actor) names.
        deterministic = TensorDictSequential(*modules[:-1])
    elif isinstance(module, ProbabilisticTensorDictModule):
        head = module
        deterministic = TensorDictModule(
            _Identity(), in_keys=list(head.in_keys), out_keys=list(head.in_keys)
        )
    else:
        return module, None

    if getattr(head, "safe", False):
        # TorchRL's SafeProbabilisticModule projects the sample onto its spec
        # after drawing it; C++ does not, so the actions could differ.
        raise ValueError(
            "the probabilistic module has safe=True (its samples are projected onto "
            "the action spec), which is not carried to C++; export it with safe=False"
        )
    sample_keys = list(head.dist_sample_keys)
    if len(sample_keys) != 1:
        raise ValueError(f"a probabilistic module with one sample key is supported, got {sample_keys}")
    if getattr(head, "num_samples", None) is not None:
        raise ValueError("num_samples is not supported by the C++ probabilistic module")
    interaction = str(getattr(head.default_interaction_type, "value", head.default_interaction_type))
    if interaction not in _INTERACTION_TYPES:
        raise ValueError(f"the default interaction type {interaction!r} is not supported in C++")
    kwargs, tensor_kwargs = _kwargs_json(head.distribution_kwargs)
    dist_keys = [key[-1] if isinstance(key, tuple) else key for key in head.dist_keys]
    return_log_prob = bool(head.return_log_prob)
    meta = {
        "distribution_class": _class_name(head.distribution_class),
        "distribution_kwargs": kwargs,
        "distribution_tensor_kwargs": tensor_kwargs,
        "dist_keys": dist_keys,
        "in_keys": [_as_json_key(_as_tuple(key)) for key in head.in_keys],
        "out_key": _as_json_key(_as_tuple(sample_keys[0])),
        "return_log_prob": return_log_prob,
        "log_prob_key": _as_json_key(_as_tuple(head.log_prob_key)) if return_log_prob else None,
        "default_interaction_type": interaction,
    }
    missing = [key for key in head.in_keys if _as_tuple(key) not in
               {_as_tuple(k) for k in deterministic.out_keys}]
    if missing:
        raise ValueError(
            f"the distribution reads {missing}, which the modules before it do not write"
        )
    return deterministic, meta


def _batch_range(ep, name: str) -> Tuple[int, Optional[int]]:
    """Reads the range torch.export settled on for dim 0 of input `name`."""
    for node in ep.graph.nodes:
        if node.op == "placeholder" and node.name == name:
            size = node.meta["val"].shape[0]
            if isinstance(size, int):
                return size, size
            ranges = ep.range_constraints.get(size.node.expr)
            if ranges is None:
                break
            lower = int(ranges.lower)
            # An unbounded range ends in sympy's infinity, which int() rejects
            # with one of several errors depending on the sympy version.
            try:
                upper = int(ranges.upper)
            except Exception:
                upper = None
            return lower, upper
    raise RuntimeError(f"torch.export lost the input {name!r}")


def _leaf_spec(tensor: torch.Tensor, batch_dims: int) -> dict:
    return {
        "dtype": _dtype_name(tensor.dtype),
        "shape": list(tensor.shape[batch_dims:]),
        "device": str(tensor.device),
    }


def export(
    module: nn.Module,
    example,
    path: Union[str, os.PathLike],
    dynamic_batch: bool = True,
    *,
    in_keys: Optional[Iterable[NestedKey]] = None,
    out_keys: Optional[Iterable[NestedKey]] = None,
    batch_range: Tuple[int, Optional[int]] = (1, None),
    weights_in_package: bool = True,
    inductor_configs: Optional[dict] = None,
) -> str:
    """Exports `module` (TensorDict in, TensorDict out) to a ``.pt2`` package.

    Args:
        module: a ``ProbabilisticTensorDictModule`` or
            ``ProbabilisticTensorDictSequential`` (TorchRL's
            ``ProbabilisticActor``): its deterministic part is compiled and
            its distribution recorded in the metadata, so the C++ module
            writes the action (and log-prob) as the actor does; a
            ``TensorDictModuleBase`` (keys are read from it) or any
            ``nn.Module`` mapping a TensorDict to a TensorDict (then the keys
            are the example's tensor leaves and the leaves the call adds or
            replaces, unless given).
        example: a TensorDict the module accepts; its batch size gives the
            batch dims, its leaves the dtypes, trailing shapes and devices the
            C++ side checks.
        path: where the package goes.
        dynamic_batch: make dim 0 of the batch dynamic (within
            ``batch_range``); needs an example batch of at least 2, since
            torch.export specializes sizes 0 and 1.
        in_keys, out_keys: override the module's keys.
        weights_in_package: with False, the parameters and buffers are left
            out of the package (``aot_inductor.package_constants_in_so``) and
            the C++ side loads them from a TensorDict keyed like
            ``TensorDict.from_module(module).flatten_keys(".")``.
        inductor_configs: merged into the configs given to AOTInductor.

    Returns the package path.
    """
    from tensordict import TensorDictBase

    # A probabilistic module: its deterministic part is compiled, its
    # distribution travels in the metadata (see NOTE [Probabilistic packages]
    # in tensordict/aoti.h).
    module, probabilistic = _split_probabilistic(module)
    if not isinstance(example, TensorDictBase):
        raise TypeError(f"example must be a TensorDict, got {type(example).__name__}")
    batch_dims = example.batch_dims
    if dynamic_batch and batch_dims == 0:
        raise ValueError("dynamic_batch needs an example with at least one batch dim")
    if dynamic_batch and example.batch_size[0] < 2:
        raise ValueError(
            "dynamic_batch needs an example whose batch size starts with at least "
            f"2 (torch.export specializes 0 and 1), got {list(example.batch_size)}"
        )

    if in_keys is None:
        in_keys = getattr(module, "in_keys", None)
    if in_keys is None:
        in_keys = [
            key
            for key in example.keys(include_nested=True, leaves_only=True)
            if isinstance(example.get(key), torch.Tensor)
        ]
    in_keys = [_as_tuple(key) for key in in_keys]
    names = [_input_name(key) for key in in_keys]
    if len(set(names)) != len(names):
        raise ValueError(f"input keys {in_keys} give repeated argument names {names}")
    for key in in_keys:
        if not isinstance(example.get(key, None), torch.Tensor):
            raise KeyError(f"the example has no tensor at input key {key!r}")

    inputs = {key: example.get(key) for key in in_keys}
    given = example.select(*in_keys).clone()
    given_leaves = {key: given.get(key) for key in in_keys}
    with torch.no_grad():
        eager = module(given)
    if eager is None:
        raise TypeError("the module returned None; it must return a TensorDict")

    if out_keys is None:
        out_keys = getattr(module, "out_keys", None)
    if out_keys is None:
        out_keys = [
            key
            for key in eager.keys(include_nested=True, leaves_only=True)
            if isinstance(eager.get(key), torch.Tensor)
            and eager.get(key) is not given_leaves.get(_as_tuple(key))
        ]
    out_keys = [_as_tuple(key) for key in out_keys]
    if not out_keys:
        raise ValueError("the module writes no output key")
    out_batch_dims = eager.batch_dims

    flat = _make_flat_wrapper(module, in_keys, names, out_keys, batch_dims)
    kwargs = {name: inputs[key] for name, key in zip(names, in_keys)}
    dynamic_shapes = None
    if dynamic_batch:
        low, high = batch_range
        batch = torch.export.Dim("batch", min=low, max=high) if high else torch.export.Dim("batch", min=low)
        dynamic_shapes = {name: {0: batch} for name in names}
    ep = torch.export.export(flat, args=(), kwargs=kwargs, dynamic_shapes=dynamic_shapes)

    batch_size = list(example.batch_size)
    if dynamic_batch:
        low, high = _batch_range(ep, names[0])
        batch_size[0] = -1
    else:
        low = high = None
    out_batch_size = list(eager.batch_size)
    if dynamic_batch and out_batch_dims and out_batch_size[0] == example.batch_size[0]:
        out_batch_size[0] = -1
    names_out = None
    if out_batch_dims and any(name is not None for name in eager.names):
        names_out = list(eager.names)

    spec = {
        "format": METADATA_FORMAT,
        "torch": torch.__version__,
        "batch_size": batch_size,
        "batch_min": low,
        "batch_max": high,
        "inputs": [
            {"key": _as_json_key(key), "name": name, **_leaf_spec(inputs[key], batch_dims)}
            for key, name in zip(in_keys, names)
        ],
        "outputs": [
            {"key": _as_json_key(key), **_leaf_spec(eager.get(key), out_batch_dims)}
            for key in out_keys
        ],
        "out_batch_size": out_batch_size,
        "out_names": names_out,
        "weights_prefix": _PREFIX + ".",
        # Shapes and dtypes the C++ side checks new weights against: the
        # package itself does not check them.
        "weights": {
            name: {"dtype": _dtype_name(t.dtype), "shape": list(t.shape)}
            for name, t in list(module.named_parameters())
            + list(module.named_buffers())
        },
        "weights_in_package": bool(weights_in_package),
    }
    metadata = {
        "tensordict.format": METADATA_FORMAT if probabilistic is None else METADATA_FORMAT_PROBABILISTIC,
        "tensordict.in_keys": json.dumps([_as_json_key(key) for key in in_keys]),
        "tensordict.out_keys": json.dumps([_as_json_key(key) for key in out_keys]),
        "tensordict.spec": json.dumps(spec),
    }
    if probabilistic is not None:
        metadata["tensordict.probabilistic"] = json.dumps(probabilistic)
    configs = {
        "aot_inductor.metadata": metadata,
        "aot_inductor.package_constants_in_so": bool(weights_in_package),
        # Inductor otherwise inlines small constants (e.g. a bias of 8 or
        # fewer elements) into the generated code, where no weight update can
        # reach them: a hot swap would then mix new weights with old biases.
        "always_keep_tensor_constants": True,
    }
    for key, value in (inductor_configs or {}).items():
        if key == "aot_inductor.metadata":
            configs[key] = {**value, **metadata}
        else:
            configs[key] = value
    return torch._inductor.aoti_compile_and_package(
        ep, package_path=os.fspath(path), inductor_configs=configs
    )
