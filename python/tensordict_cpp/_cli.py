"""The console scripts: ``tensordict-cpp`` runs the CLI binary installed in
the package (bin/tensordict: info, verify, dump, copy) and
``tensordict-cpp-worker`` the TorchRL worker (bin/torchrl_worker), each with
torch's libraries on the loader's path (the binaries link libtorch but run
without Python)."""

from __future__ import annotations

import os
import sys


def _binary(name: str = "tensordict") -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", name)


def main() -> None:
    """``tensordict-cpp``: the CLI."""
    _exec("tensordict", "tensordict-cpp")


def worker_main() -> None:
    """``tensordict-cpp-worker``: the TorchRL worker. With ``--env-library``
    naming the package's MuJoCo env library (``mujoco_env_library()``), the
    installed mujoco is checked first (its version the library's) and its
    libmujoco and gymnasium's model files are passed to the worker."""
    _exec("torchrl_worker", "tensordict-cpp-worker", _mujoco_environment)


def _env_libraries(args) -> list:
    out = []
    for i, arg in enumerate(args):
        if arg == "--env-library" and i + 1 < len(args):
            out.append(args[i + 1])
        elif arg.startswith("--env-library="):
            out.append(arg.split("=", 1)[1])
    return out


def _mujoco_environment(env: dict) -> None:
    from . import _mujoco

    if not any(_mujoco.is_bundled(path) for path in _env_libraries(sys.argv[1:])):
        return
    try:
        _mujoco.check_mujoco()
    except (ImportError, ValueError) as error:
        sys.exit(f"tensordict-cpp-worker: {error}")
    import mujoco

    mujoco_dir = os.path.dirname(os.path.abspath(mujoco.__file__))
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (mujoco_dir, env.get("LD_LIBRARY_PATH", "")) if p
    )
    # check_mujoco set it in this process (from gymnasium) unless given.
    if os.environ.get("TENSORDICT_MUJOCO_ASSETS"):
        env["TENSORDICT_MUJOCO_ASSETS"] = os.environ["TENSORDICT_MUJOCO_ASSETS"]


def _exec(name: str, command: str, prepare=None) -> None:
    # Importing the package checks torch's version before the binary, which
    # is linked against one torch, is started.
    import tensordict_cpp
    import torch

    binary = _binary(name)
    if tensordict_cpp.torch_version is None or not os.path.isfile(binary):
        sys.exit(
            f"{command}: no binary at {binary}: install the package "
            f"(pip install --no-build-isolation --no-deps ./python)"
        )
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (torch_lib, env.get("LD_LIBRARY_PATH", "")) if p
    )
    if prepare is not None:
        prepare(env)
    os.execve(binary, [command, *sys.argv[1:]], env)


if __name__ == "__main__":
    main()
