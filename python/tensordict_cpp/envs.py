"""C++ envs as TorchRL environments.

``CppEnv(name, num_envs, **kwargs)`` is a ``torchrl.envs.EnvBase`` over any
env registered with the C++ registry (``tensordict_cpp.registered_envs()``:
the built-ins, the envs of a library loaded with
``tensordict_cpp.load_env_library``, and those of an extension linked to
this package's libtensordict; Gymnasium's MuJoCo envs, ``"HalfCheetah-v5"``
and the others, load the package's MuJoCo env library when first named). Its batch size is ``[num_envs]``, its specs
are TorchRL's spec classes, ``_reset`` takes TorchRL's ``"_reset"`` mask,
``set_seed`` reseeds the C++ env, and every reset and step runs in C++ with
the GIL released, handing back TensorDicts over the C++ tensors (no numpy
in between). TorchRL's transforms, ``rollout``, ``check_env_specs`` and its
collectors take it as any other env.

Example::

    from tensordict_cpp.envs import CppEnv
    from torchrl.envs import TransformedEnv, StepCounter

    env = TransformedEnv(CppEnv("CartPole-v1", 16), StepCounter())
    rollout = env.rollout(100)

Keyword arguments go to the C++ env as JSON (TorchRL's names for the
built-ins: ``categorical_action_encoding``, ``max_episode_steps``); an
unknown or mistyped one raises ValueError naming the env, the argument and
the known ones.

Needs TorchRL (``import torchrl``); the rest of tensordict_cpp does not.
"""

from __future__ import annotations

import json

import torch
from tensordict import TensorDict

try:
    from torchrl.data import Bounded, Categorical, Composite, OneHot, Unbounded
    from torchrl.envs import EnvBase
except ImportError as error:  # pragma: no cover - depends on the install
    raise ImportError(
        "tensordict_cpp.envs needs TorchRL (pip install torchrl); the rest of "
        "tensordict_cpp works without it"
    ) from error

__all__ = ["CppEnv"]

_CPU = torch.device("cpu")


def _leaf_spec(spec: dict, batch: torch.Size, device):
    shape = torch.Size(batch) + torch.Size(spec["shape"])
    kind, dtype = spec["kind"], spec["dtype"]
    if kind == "Bounded":
        low = spec["low"].expand(shape).clone()
        high = spec["high"].expand(shape).clone()
        return Bounded(low=low, high=high, shape=shape, dtype=dtype, device=device)
    if kind == "Categorical":
        return Categorical(spec["n"], shape=shape, dtype=dtype, device=device)
    if kind == "OneHot":
        return OneHot(spec["n"], shape=shape, dtype=dtype, device=device)
    return Unbounded(shape=shape, dtype=dtype, device=device)


def _composite(entries, batch: torch.Size, device) -> Composite:
    out = Composite(shape=batch, device=device)
    for key, spec in entries:
        out[key if len(key) > 1 else key[0]] = _leaf_spec(spec, batch, device)
    return out


class CppEnv(EnvBase):
    """A registered C++ env as a TorchRL ``EnvBase`` (see the module docstring).

    Args:
        name: the registered env's name (``"CartPole-v1"``, ``"PointMass"``,
            or one a library registered).
        num_envs: sub-envs stepped together: the batch size is
            ``[num_envs]``.
        **kwargs: the env's keyword arguments (JSON values).
    """

    def __init__(self, name: str, num_envs: int = 1, **kwargs):
        from . import _C, _mujoco

        if not isinstance(name, str):
            raise TypeError(f"CppEnv: name must be a registered env's name, got {type(name).__name__}")
        _mujoco.ensure_env(name)
        impl = _C.Env(name, num_envs, json.dumps(kwargs))
        super().__init__(batch_size=torch.Size([num_envs]), device=torch.device("cpu"))
        self._impl = impl
        self._kwargs = dict(kwargs)
        batch = self.batch_size
        self.observation_spec = _composite(impl.observation_spec(), batch, self.device)
        action = _leaf_spec(impl.action_spec(), batch, self.device)
        self.action_spec = action
        self.reward_spec = _leaf_spec(impl.reward_spec(), batch, self.device)
        self.done_spec = _composite(impl.done_spec(), batch, self.device)
        # The C++ dicts come back without a device. TorchRL moves a dict
        # whose device is not the env's with .to(device), a rebuild of
        # every leaf each step (about a sixth of a rollout step): the
        # leaves are the env's CPU tensors, so the dicts are marked as CPU
        # instead, as TensorDict._new_unsafe marks them. Only flat dicts:
        # a nested key's sub-dicts would keep no device.
        self._mark_cpu = all(
            len(key) == 1 for key, _ in impl.observation_spec() + impl.done_spec()
        )

    @property
    def env_name(self) -> str:
        """The C++ env's name."""
        return self._impl.name

    @property
    def num_envs(self) -> int:
        """The number of sub-envs."""
        return self._impl.num_envs

    def _reset(self, tensordict=None, **kwargs):
        mask = None
        if tensordict is not None:
            mask = tensordict.get("_reset", None)
        return self._on_cpu(self._impl.reset(mask))

    def _step(self, tensordict):
        return self._on_cpu(self._impl.step(tensordict.get("action")))

    def _on_cpu(self, td):
        if self._mark_cpu:
            td._device = _CPU
        return td

    def rand_action(self, tensordict=None):
        """Writes a random action, uniform in ``action_spec``, into
        ``tensordict`` (a new one if None) and returns it, as EnvBase's
        does, drawing the same values from torch's generator: the env has
        one action leaf, so the leaf spec draws it, without EnvBase's
        Composite round trip (about 100 us a step of ``rollout`` with no
        policy)."""
        action = self.action_spec.rand()
        if tensordict is None:
            return TensorDict({"action": action}, batch_size=self.batch_size)
        tensordict.set("action", action)
        return tensordict

    def _set_seed(self, seed):
        self._impl.set_seed(int(seed) % (1 << 64) if seed is not None else 0)

    def __repr__(self) -> str:
        kwargs = "".join(f", {k}={v!r}" for k, v in self._kwargs.items())
        return f"CppEnv({self._impl.name!r}, {self._impl.num_envs}{kwargs})"
