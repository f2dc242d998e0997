"""Gymnasium's MuJoCo locomotion envs (``HalfCheetah-v5``, ``Hopper-v5``,
``Walker2d-v5``, ``Ant-v5``), the env library envs/mujoco that the package
carries as ``lib/libtensordict_mujoco.so`` when it was built against the
``mujoco`` wheel they are written for, the building Python's or that of the
Python the CMake variable ``TENSORDICT_WHEEL_MUJOCO_PYTHON`` names
(``_build_info.MUJOCO_VERSION``; ``MUJOCO_SKIPPED`` says why not).

The library links that wheel's ``libmujoco.so.<version>`` by name and never
carries it: the installed ``mujoco`` package provides it. So it is loaded
only through here, which first

- imports ``mujoco`` (loading its libmujoco, which the library then finds
  wherever that package is installed);
- refuses a ``mujoco`` of another version than the one the library was built
  against, naming both, before anything is loaded;
- puts gymnasium's model files in ``TENSORDICT_MUJOCO_ASSETS`` (the
  environment variable the envs read; left alone when already set), from the
  gymnasium found without importing it.

``CppEnv``, ``Collector`` and ``load_env_library`` (given this library's
path) load it on first need; ``mujoco_env_library()`` returns its path for
the worker's ``--env-library`` (the ``tensordict-cpp-worker`` console script
then puts mujoco's folder on the loader's path).
"""

from __future__ import annotations

import importlib.util
import os
import threading

#: The envs the library registers.
ENV_NAMES = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5")

_LOCK = threading.Lock()


def _build_info():
    from . import _build_info

    return _build_info


def library_path() -> str:
    """The bundled library's path (whether or not the file exists)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "libtensordict_mujoco.so")


def package_dir(name: str) -> str | None:
    """The folder of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def gymnasium_assets() -> str | None:
    """gymnasium's MuJoCo model folder, or None without gymnasium."""
    gymnasium = package_dir("gymnasium")
    if gymnasium is None:
        return None
    assets = os.path.join(gymnasium, "envs", "mujoco", "assets")
    return assets if os.path.isdir(assets) else None


def _unavailable() -> str | None:
    """Why the package has no MuJoCo envs, or None when it has them."""
    info = _build_info()
    built = getattr(info, "MUJOCO_VERSION", "")
    if not built:
        why = getattr(info, "MUJOCO_SKIPPED", "") or "built before the package carried them"
        return (
            f"this tensordict_cpp has no MuJoCo envs ({why}); rebuild it where the "
            f"building Python, or the Python named by the CMake variable "
            f"TENSORDICT_WHEEL_MUJOCO_PYTHON, has mujoco==4.0.0, or build envs/mujoco "
            f"and pass its library to load_env_library"
        )
    if not os.path.isfile(library_path()):
        return f"this tensordict_cpp records MuJoCo envs, but {library_path()} is missing"
    return None


def check_mujoco() -> str:
    """Imports ``mujoco`` and returns the bundled library's path; raises
    ImportError without the package or the mujoco package, ValueError for a
    mujoco of another version than the library's, naming both."""
    why = _unavailable()
    if why is not None:
        raise ImportError(why)
    built = _build_info().MUJOCO_VERSION
    try:
        import mujoco
    except ImportError as error:
        raise ImportError(
            f"tensordict_cpp's MuJoCo envs need the mujoco package (pip install "
            f"mujoco=={built}): {error}"
        ) from error
    installed = getattr(mujoco, "__version__", "unknown")
    if installed != built:
        raise ValueError(
            f"tensordict_cpp's MuJoCo env library ({library_path()}) was built against "
            f"mujoco {built}, but the installed mujoco is {installed} "
            f"({os.path.dirname(mujoco.__file__)}); install mujoco=={built}, or rebuild "
            f"tensordict_cpp with mujoco {installed}"
        )
    assets = gymnasium_assets()
    if assets is not None and not os.environ.get("TENSORDICT_MUJOCO_ASSETS"):
        os.environ["TENSORDICT_MUJOCO_ASSETS"] = assets
    return library_path()


def load() -> list:
    """Checks (``check_mujoco``) and loads the bundled library; returns the
    names it registered (the same on every call)."""
    from . import _C

    with _LOCK:
        return _C.load_env_library(check_mujoco())


def ensure_env(name) -> None:
    """Loads the bundled library when ``name`` is one of its envs and is not
    registered yet (a library loaded by hand may have registered it);
    otherwise does nothing, leaving an unknown name to the registry's
    error."""
    if not isinstance(name, str) or name not in ENV_NAMES:
        return
    from . import _C

    if name in _C.registered_envs():
        return
    try:
        load()
    except ImportError as error:
        raise ValueError(f"env '{name}' is one of the MuJoCo envs: {error}") from error


def is_bundled(path) -> bool:
    """True if ``path`` is the bundled library."""
    try:
        return os.path.samefile(os.fspath(path), library_path())
    except (OSError, TypeError):
        return False
