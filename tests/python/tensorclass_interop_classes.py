"""Tensorclasses of the TensorClass interop test (tensorclass_interop.py).

In a module of their own so that their ``_type`` in meta.json reads
``<class 'tensorclass_interop_classes.Name'>`` whichever script imports them;
tensorclass_interop.cpp registers the same strings for its C++ structs.
"""

from __future__ import annotations

from typing import Optional

import torch

from tensordict import tensorclass


@tensorclass
class TcInner:
    x: torch.Tensor
    tag: str


@tensorclass
class TcTrajectory:
    obs: torch.Tensor
    action: torch.Tensor
    inner: TcInner
    task: str
    note: Optional[str] = None
    mask: Optional[torch.Tensor] = None


@tensorclass(autocast=True)
class TcCounts:
    step: int
    ratio: float
    done: bool
