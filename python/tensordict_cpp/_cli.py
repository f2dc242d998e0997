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
    """``tensordict-cpp-worker``: the TorchRL worker."""
    _exec("torchrl_worker", "tensordict-cpp-worker")


def _exec(name: str, command: str) -> None:
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
    os.execve(binary, [command, *sys.argv[1:]], env)


if __name__ == "__main__":
    main()
