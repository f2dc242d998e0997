#!/usr/bin/env python3
"""The refusals of tensordict_cpp.export, before anything is compiled.

usage: test_export.py PYTHON_PACKAGE_DIR
"""

import sys

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

sys.path.insert(0, sys.argv[1])
import tensordict_cpp  # noqa: E402  (the source tree's)


def expect_raises(error, text, fn):
    try:
        fn()
    except error as e:
        assert text in str(e), f"message {str(e)!r} lacks {text!r}"
        return
    raise AssertionError(f"no {error.__name__} raised (expected {text!r})")


def probabilistic_refusals():
    from tensordict.nn import ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential

    def actor(dist, **kwargs):
        return ProbabilisticTensorDictSequential(
            TensorDictModule(nn.Linear(3, 4), in_keys=["obs"], out_keys=["concentration1"]),
            ProbabilisticTensorDictModule(
                in_keys=["concentration1"], out_keys=["action"], distribution_class=dist,
                **kwargs,
            ),
        )

    td = TensorDict({"obs": torch.randn(4, 3)}, batch_size=[4])
    expect_raises(
        ValueError, "has no C++ counterpart",
        lambda: tensordict_cpp.export(actor(torch.distributions.Beta), td, "x.pt2"),
    )
    expect_raises(
        TypeError, "cannot export the distribution keyword argument 'concentration0'",
        lambda: tensordict_cpp.export(
            actor(torch.distributions.Normal,
                  distribution_kwargs={"concentration0": torch.ones_like}),
            td, "x.pt2",
        ),
    )


def main():
    probabilistic_refusals()
    module = TensorDictModule(nn.Linear(3, 4), in_keys=["obs"], out_keys=["action"])
    td = TensorDict({"obs": torch.randn(4, 3)}, batch_size=[4])
    expect_raises(
        TypeError, "example must be a TensorDict",
        lambda: tensordict_cpp.export(module, {"obs": torch.randn(4, 3)}, "x.pt2"),
    )
    expect_raises(
        ValueError, "at least 2",
        lambda: tensordict_cpp.export(module, td[:1], "x.pt2"),
    )
    expect_raises(
        ValueError, "at least one batch dim",
        lambda: tensordict_cpp.export(
            module, TensorDict({"obs": torch.randn(3)}, batch_size=[]), "x.pt2"
        ),
    )
    odd = TensorDictModule(nn.Identity(), in_keys=["obs-1"], out_keys=["out"])
    expect_raises(
        ValueError, "is not a Python identifier",
        lambda: tensordict_cpp.export(
            odd, TensorDict({"obs-1": torch.randn(4, 3)}, batch_size=[4]), "x.pt2"
        ),
    )
    twice = TensorDictModule(
        lambda a, b: a + b, in_keys=[("a", "b"), "a_b"], out_keys=["out"]
    )
    expect_raises(
        ValueError, "repeated argument names",
        lambda: tensordict_cpp.export(
            twice,
            TensorDict({"a": {"b": torch.randn(4)}, "a_b": torch.randn(4)}, batch_size=[4]),
            "x.pt2",
        ),
    )
    expect_raises(
        KeyError, "no tensor at input key",
        lambda: tensordict_cpp.export(
            module, TensorDict({"other": torch.randn(4, 3)}, batch_size=[4]), "x.pt2"
        ),
    )
    print("test_export: all refusals checked")


if __name__ == "__main__":
    main()
