"""The ``tensordict-cpp`` console script: runs the CLI binary installed in the
package (bin/tensordict: info, verify, dump, copy), with torch's libraries on
the loader's path (the binary links libtorch but runs without Python)."""

from __future__ import annotations

import os
import sys


def _binary() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "tensordict")


def main() -> None:
    # Importing the package checks torch's version before the binary, which
    # is linked against one torch, is started.
    import tensordict_cpp
    import torch

    binary = _binary()
    if tensordict_cpp.torch_version is None or not os.path.isfile(binary):
        sys.exit(
            f"tensordict-cpp: no CLI binary at {binary}: install the package "
            f"(pip install --no-build-isolation --no-deps ./python)"
        )
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (torch_lib, env.get("LD_LIBRARY_PATH", "")) if p
    )
    os.execve(binary, ["tensordict-cpp", *sys.argv[1:]], env)


if __name__ == "__main__":
    main()
