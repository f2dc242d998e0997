"""``tensordict_cpp.Collector``: the C++ collector (``rl::Collector``) as a
TorchRL collector, in the Python process.

The env is one of the C++ envs (``"CartPole-v1"``, ``"PointMass"``), the
policy an AOTInductor package written by ``tensordict_cpp.export`` (a
TensorDictModule or TensorDictSequential, tensordict.nn's probabilistic
modules or TorchRL's ``ProbabilisticActor``). Collection runs on C++
threads with the GIL released; each batch is a real
``tensordict.TensorDict`` whose tensors are the C++ buffers (no copy).

What follows TorchRL 0.14.1's ``Collector``, and what does not:

- batches have its layout: ``[T]`` for one env (as on an unbatched
  ``GymEnv``), ``[num_envs, T]`` for several (as on a batched env), with
  ``("next", ...)``, ``("collector", "traj_ids")`` and the policy's
  outputs (``"logits"``, ``"action_log_prob"``, ...);
- each batch is a fresh TensorDict by default, as TorchRL's default
  (``return_same_td=False``) yields a clone: a batch stays valid after the
  next one is collected. ``return_same_td=True`` yields the same buffers,
  overwritten by every batch, as TorchRL's option does (each batch is a new
  Python TensorDict over them, not the same Python object; with several
  envs its leaves are the same tensor objects, with one env views of them);
- ``frames_per_batch`` is rounded up to a multiple of ``num_envs``;
  ``collector.frames_per_batch`` is then the steps per env and
  ``requested_frames_per_batch`` the frames of a batch, as TorchRL names
  them; ``total_frames`` is the value given (``float("inf")`` for -1) and
  ``len(collector)`` is ``ceil(total_frames / requested_frames_per_batch)``
  (a RuntimeError for an endless collector), as TorchRL's;
- the policy samples (``exploration_type="random"``, TorchRL's default)
  from torch's default generator: ``torch.manual_seed`` makes its actions
  reproducible, ``set_seed`` the env's resets;
- ``update_policy_weights_`` needs the weights (there is no Python policy
  to read them from): a ``TensorDict`` such as
  ``TensorDict.from_module(actor)`` (or its ``.data``), a dict of tensors
  (nested, or flat with "." keys) or the ``nn.Module`` itself. They are
  checked at once, key by key, against the weights the policy answers for
  (names, shapes, dtypes; a KeyError or ValueError names the key and the
  weights in use stay) and used from the next batch on.
- ``set_seed(seed)`` reseeds the C++ env (every sub-env resets at the next
  batch) and returns ``seed`` (TorchRL returns the seed its env derived).
"""

from __future__ import annotations

import json
import math
import os

__all__ = ["Collector"]


class Collector:
    """Collects batches from a C++ env with an exported policy, as TorchRL's
    ``Collector`` does (see the module docstring for the differences).

    Args:
        env: a registered C++ env's name (``"CartPole-v1"``, ``"PointMass"``,
            or one a library or extension registered; see
            ``tensordict_cpp.registered_envs()``), or one of Gymnasium's
            MuJoCo envs (``"HalfCheetah-v5"``, ``"Hopper-v5"``,
            ``"Walker2d-v5"``, ``"Ant-v5"``), whose library the package
            loads when first named.
        policy: path of a ``.pt2`` package written by
            ``tensordict_cpp.export`` (its batch dim dynamic, the default).
        frames_per_batch: frames (env steps) of a batch, rounded up to a
            multiple of ``num_envs``.
        total_frames: frames after which iteration ends (rounded up to a
            whole batch); -1 never ends.
        num_envs: sub-envs stepped together; the policy runs once per step
            on all of them.
        num_threads: C++ threads stepping the sub-envs (the calling thread
            is one of them).
        seed: seeds the env before the first reset.
        exploration_type: ``"random"`` (TorchRL's default), ``"mode"``,
            ``"mean"``, ``"deterministic"`` (or a TorchRL
            ``ExplorationType``), or None for the policy's own default.
        track_policy_version: stamps ``"policy_version"`` (int64, at the
            root and in ``"next"``) with the number of weight updates used,
            as TorchRL's ``track_policy_version=True``.
        reset_at_each_iter: resets every sub-env at the start of each batch.
        return_same_td: yields the same tensors every batch, overwritten.
        env_kwargs: the env's keyword arguments (JSON values), as TorchRL's
            env keyword arguments: ``{"categorical_action_encoding": True}``.

    Example::

        collector = tensordict_cpp.Collector(
            "CartPole-v1", "actor.pt2", frames_per_batch=2048,
            total_frames=100_000, num_envs=8, num_threads=2)
        for batch in collector:
            learn(batch)
            collector.update_policy_weights_(TensorDict.from_module(actor))
        collector.shutdown()
    """

    def __init__(
        self,
        env: str,
        policy,
        *,
        frames_per_batch: int,
        total_frames: int = -1,
        num_envs: int = 1,
        num_threads: int = 1,
        seed: int | None = None,
        exploration_type="random",
        track_policy_version: bool = False,
        reset_at_each_iter: bool = False,
        return_same_td: bool = False,
        env_kwargs: dict | None = None,
    ):
        from . import _C, _mujoco, torch_version

        # Batches are Python tensordict's TensorDicts, which the wheel does
        # not require (pip would resolve torch through it): without it, the
        # error comes here rather than at the first batch.
        try:
            import tensordict  # noqa: F401
        except ImportError as error:
            raise ImportError(
                f"tensordict_cpp.Collector yields Python tensordict's TensorDict "
                f"batches, and tensordict cannot be imported ({error}): install it "
                f"next to the torch this package was built for: pip install "
                f"tensordict torch=={torch_version.split('+')[0]}"
            ) from error

        # Gymnasium's MuJoCo envs: the package's library, loaded when first
        # named.
        _mujoco.ensure_env(env)
        # The argument checks are the C++ API's (make_env, rl::Collector,
        # the binding's types); what stays here is what only Python has: a
        # path-like policy, a missing file as FileNotFoundError, a negative
        # seed (C++ takes it unsigned), TorchRL's ExplorationType enum and
        # the keyword arguments as JSON.
        if not isinstance(policy, (str, os.PathLike)):
            raise TypeError(
                f"Collector: policy must be the path of a .pt2 package written by "
                f"tensordict_cpp.export, got {type(policy).__name__}"
            )
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ValueError(f"Collector: seed must be a non-negative int or None, got {seed!r}")
        if exploration_type is not None and not isinstance(exploration_type, str):
            # TorchRL's ExplorationType enum (C++ ignores the case).
            exploration_type = getattr(exploration_type, "name", str(exploration_type))
        path = os.fspath(policy)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Collector: no policy package at {path!r}")
        self._impl = _C.Collector(
            env,
            path,
            frames_per_batch=frames_per_batch,
            total_frames=total_frames,
            num_envs=num_envs,
            num_threads=num_threads,
            seed=seed,
            exploration_type=exploration_type,
            track_policy_version=track_policy_version,
            reset_at_each_iter=reset_at_each_iter,
            return_same_td=return_same_td,
            env_kwargs=json.dumps(dict(env_kwargs)) if env_kwargs else "",
        )

    # -- TorchRL's attributes -------------------------------------------------

    @property
    def total_frames(self):
        """The frames to collect, as given; ``float("inf")`` when endless."""
        total = self._impl.total_frames
        return math.inf if total < 0 else total

    @property
    def requested_frames_per_batch(self) -> int:
        """The frames of a batch: num_envs * frames_per_batch."""
        return self._impl.frames_per_batch

    @property
    def frames_per_batch(self) -> int:
        """Steps of each env per batch (TorchRL's attribute of that name)."""
        return self._impl.frames_per_batch // self._impl.num_envs

    @property
    def num_envs(self) -> int:
        """The number of sub-envs."""
        return self._impl.num_envs

    @property
    def frames(self) -> int:
        """Frames collected so far."""
        return self._impl.frames

    @property
    def policy_version(self) -> int:
        """Weight updates applied so far (what ``"policy_version"`` holds)."""
        return self._impl.policy_version

    @property
    def weight_names(self) -> list:
        """The policy's weight names, sorted ("." between the key parts)."""
        return list(self._impl.weight_names)

    def __len__(self) -> int:
        total = self._impl.total_frames
        if total > 0:
            return -(total // -self.requested_frames_per_batch)
        raise RuntimeError("Non-terminating collectors do not have a length")

    def __iter__(self):
        return self.iterator()

    def iterator(self):
        """Yields batches until total_frames were collected (or shutdown)."""
        impl = self._impl
        while True:
            batch = impl.next()
            if batch is None:
                return
            yield batch

    def next(self):
        """Returns the next batch, or None once the collector is done (as
        TorchRL's ``next``). After an error in the policy (a bad input, say)
        the next call tries that step again; after one in the env the
        collector refuses to go on."""
        return self._impl.next()

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Reseeds the env; every sub-env resets at the next batch. Returns
        ``seed``."""
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"set_seed: expected a non-negative int, got {seed!r}")
        return self._impl.set_seed(seed)

    def shutdown(self, timeout: float | None = None, close_env: bool = True) -> None:
        """Stops the C++ threads; iteration then ends. Idempotent."""
        self._impl.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    def update_policy_weights_(self, policy_or_weights=None, **kwargs) -> None:
        """Uses new weights from the next batch on.

        ``policy_or_weights`` is a TensorDict (``TensorDict.from_module(actor)``
        or its ``.data``), a dict of tensors (nested, or flat with "." keys)
        or the ``nn.Module`` whose weights to take, with the keys of
        ``TensorDict.from_module`` of the exported module. Raises KeyError
        for a missing or unknown key, ValueError for a shape or dtype that
        differs from the package's, naming the key; the weights in use are
        then unchanged.
        """
        import torch
        from tensordict import TensorDict, TensorDictBase

        weights = policy_or_weights
        if weights is None:
            weights = kwargs.pop("weights", kwargs.pop("policy", None))
        if weights is None:
            raise TypeError(
                "update_policy_weights_: the C++ collector has no Python policy to read "
                "weights from; pass TensorDict.from_module(actor) (or the actor)"
            )
        if isinstance(weights, torch.nn.Module):
            weights = TensorDict.from_module(weights).data
        elif isinstance(weights, dict):
            weights = TensorDict(weights, batch_size=[]).unflatten_keys(".")
        elif not isinstance(weights, TensorDictBase):
            raise TypeError(
                f"update_policy_weights_: expected a TensorDict, a dict of tensors or an "
                f"nn.Module, got {type(weights).__name__}"
            )
        if type(weights) is not TensorDict:
            # TensorDictParams and other kinds: a plain TensorDict of the
            # same tensors (the C++ side copies them anyway).
            weights = weights.to_tensordict()
        # Checked by the C++ collector against the layout its policy
        # answers for (keys, shapes, dtypes), before anything is staged.
        self._impl.update_policy_weights_(weights.detach())

    def __repr__(self):
        return (
            f"tensordict_cpp.Collector(env={self._impl.env_name!r}, "
            f"policy={self._impl.policy_path!r}, num_envs={self.num_envs}, "
            f"requested_frames_per_batch={self.requested_frames_per_batch}, "
            f"total_frames={self.total_frames}, frames={self.frames}, "
            f"policy_version={self.policy_version})"
        )
