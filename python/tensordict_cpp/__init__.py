"""TensorDict for C++ from Python: the engine, its CMake package, its CLI and
the AOTInductor exporter.

``tensordict_cpp.export(module, example, path)`` writes a ``.pt2`` package
that ``tensordict::nn::AOTIModule`` runs from C++ with a TensorDict in and a
TensorDict out::

    policy = TensorDictSequential(...)
    example = TensorDict({"obs": torch.randn(8, 3)}, batch_size=[8])
    tensordict_cpp.export(policy, example, "policy.pt2")

and in C++::

    tensordict::nn::AOTIModule policy("policy.pt2");
    TensorDict out = policy(td);

An installed package (``pip install --no-build-isolation --no-deps
./python``) also carries the compiled engine:

- the C++ storage functions on Python's own ``tensordict.TensorDict``, from
  the extension ``tensordict_cpp._C``: ``load_memmap(prefix)`` (alias
  ``load``), ``memmap(td, prefix)`` and ``save(td, prefix)``,
  ``consolidate(td, filename)``, ``from_consolidated(filename)``,
  ``to_safetensors(td, path)`` and ``from_safetensors(path)``, named and
  called as Python tensordict's functions of the same names (the common
  keyword arguments too), reading and writing its own formats, with real
  ``tensordict.TensorDict`` (or ``LazyStackedTensorDict``) in and out;
- ``tensordict_cpp.Collector(env="CartPole-v1", policy="actor.pt2",
  frames_per_batch=..., env_kwargs={...})``: the C++ collector as a TorchRL
  collector in this process (C++ envs, an exported policy, threads without
  the GIL), yielding ``tensordict.TensorDict`` batches in TorchRL's layout;
- ``tensordict_cpp.registered_envs()`` and
  ``tensordict_cpp.load_env_library(path)``: the C++ env registry, which
  a user's extension linked to this package's libtensordict shares;
  ``tensordict_cpp.envs.CppEnv(name, num_envs, **kwargs)`` is any
  registered env as a TorchRL ``EnvBase`` (needs TorchRL);
- Gymnasium's MuJoCo envs (``HalfCheetah-v5``, ``Hopper-v5``,
  ``Walker2d-v5``, ``Ant-v5``) when the package was built with the
  ``mujoco`` wheel: ``Collector`` and ``CppEnv`` load their library on first
  use of one of the names (the installed ``mujoco`` must be the version it
  was built against, else ValueError naming both), and
  ``tensordict_cpp.mujoco_env_library()`` returns its path for the worker's
  ``--env-library``;
- ``tensordict_cpp.cmake_prefix_path``, for
  ``find_package(TensorDict)`` (with ``torch.utils.cmake_prefix_path``);
- the ``tensordict-cpp`` console script (``info``, ``verify``, ``dump``,
  ``copy``).

Importing the package checks that torch is the version the engine was
built against and raises ImportError naming both otherwise, before any
compiled code is loaded. The source tree (python/ on sys.path, as the
interop tests use it) has the exporter only.
"""

import os as _os

try:
    from . import _build_info
except ImportError:  # the source tree: no compiled engine
    _build_info = None

if _build_info is not None:
    from ._torch_check import check_torch as _check_torch

    _check_torch(_build_info.TORCH_VERSION)

from ._export import export, METADATA_FORMAT, METADATA_FORMAT_PROBABILISTIC  # noqa: E402

#: A CMake prefix holding lib/cmake/TensorDict: pass it in CMAKE_PREFIX_PATH
#: (with torch.utils.cmake_prefix_path) so that find_package(TensorDict) finds
#: the library inside this package. None in the source tree.
cmake_prefix_path = _os.path.dirname(_os.path.abspath(__file__)) if _build_info else None

#: The torch version the engine was compiled against (None in the source tree).
torch_version = _build_info.TORCH_VERSION if _build_info else None

# The C++ storage functions, from the extension (loaded on first use, so
# that the exporter alone never loads the engine).
_STORAGE_FUNCTIONS = (
    "load_memmap",
    "load",
    "memmap",
    "save",
    "consolidate",
    "from_consolidated",
    "to_safetensors",
    "from_safetensors",
)


# The in-process collector (tensordict_cpp/_collector.py over _C.Collector).
_ENGINE_CLASSES = ("Collector",)

# The C++ env registry: the registered names, and loading a library of envs
# (tensordict_cpp.envs.CppEnv makes any of them a TorchRL env).
_ENV_FUNCTIONS = ("registered_envs", "load_env_library")


def mujoco_env_library() -> str:
    """The path of the package's MuJoCo env library (HalfCheetah-v5,
    Hopper-v5, Walker2d-v5, Ant-v5), for the worker's ``--env-library``.

    Imports ``mujoco`` and checks it first: raises ImportError when the
    package was built without the library (saying why) or ``mujoco`` is not
    installed, ValueError when the installed ``mujoco`` is not the version
    the library was built against (naming both). ``Collector`` and
    ``CppEnv`` need no path: they load it when one of its envs is named.
    """
    if _build_info is None:
        raise ImportError(
            "tensordict_cpp.mujoco_env_library needs the compiled engine, which the "
            "source tree lacks: install the package (pip install --no-build-isolation "
            "--no-deps ./python)"
        )
    from . import _mujoco

    return _mujoco.check_mujoco()


def _load_env_library(path):
    """Loads a shared library of C++ envs (dlopen) and returns the names it
    registered; raises ValueError when it does not load or registers
    nothing. The package's own MuJoCo env library is checked first
    (``mujoco_env_library``)."""
    from . import _C, _mujoco

    if _mujoco.is_bundled(path):
        return _mujoco.load()
    return _C.load_env_library(_os.fspath(path))


def __getattr__(name):
    if name in _STORAGE_FUNCTIONS or name in _ENGINE_CLASSES or name in _ENV_FUNCTIONS:
        if _build_info is None:
            raise AttributeError(
                f"tensordict_cpp.{name} needs the compiled engine, which the source "
                f"tree lacks: install the package (pip install --no-build-isolation "
                f"--no-deps ./python)"
            )
        if name == "Collector":
            from ._collector import Collector

            return Collector
        if name == "load_env_library":
            return _load_env_library
        from . import _C

        return getattr(_C, name)
    raise AttributeError(f"module 'tensordict_cpp' has no attribute {name!r}")


__all__ = [
    "export",
    "METADATA_FORMAT",
    "METADATA_FORMAT_PROBABILISTIC",
    "cmake_prefix_path",
    "torch_version",
    "mujoco_env_library",
    *_STORAGE_FUNCTIONS,
    *_ENGINE_CLASSES,
    *_ENV_FUNCTIONS,
]
