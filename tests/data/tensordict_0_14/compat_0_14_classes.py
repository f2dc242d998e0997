"""The tensorclass of the tensordict 0.14 fixtures (make_fixtures.py).

In a module of its own so that the ``_type`` in meta.json reads
``<class 'compat_0_14_classes.Step'>`` whichever script imports it;
tests/compat_0_14_test.cpp declares a C++ struct with the same string and
tests/python/compat_0_14_interop.py imports this module to compare.
"""

from __future__ import annotations

import torch

from tensordict import tensorclass


@tensorclass
class Step:
    obs: torch.Tensor
    reward: torch.Tensor
    task: str
