"""The torch check that runs before any compiled part of the package loads.

The engine (lib/libtensordict.so, the extension ``_C``, the CLI) is compiled
against one torch. Loaded next to another, the dynamic loader fails on a
missing symbol or, worse, binds to a symbol whose layout changed; so the
version ``import torch`` gives is compared, in Python, with the one recorded
at build time (``_build_info.py``), and a mismatch is an ImportError naming
both. The local part of a version (``+cpu``, ``+cu126``) is not compared: the
CPU and CUDA builds of one release share their C++ ABI.
"""

from __future__ import annotations

from typing import Optional


def public_version(version: str) -> str:
    """``"2.13.0+cpu"`` -> ``"2.13.0"``."""
    return version.split("+", 1)[0]


def mismatch_message(built: str, found: str) -> Optional[str]:
    """The error text when ``found`` (torch.__version__) cannot run a build
    made against ``built``, else None."""
    if public_version(built) == public_version(found):
        return None
    return (
        f"tensordict_cpp was built against torch {built}, but torch {found} is "
        f"imported: its compiled engine (tensordict_cpp._C, lib/libtensordict.so, "
        f"the tensordict-cpp CLI) only runs with torch {public_version(built)}. "
        f"Reinstall tensordict_cpp with this torch (pip install "
        f"--no-build-isolation --no-deps ./python) or install torch=="
        f"{public_version(built)}."
    )


def check_torch(built: str) -> None:
    """Imports torch and raises ImportError when its version differs from
    ``built``."""
    import torch

    message = mismatch_message(built, torch.__version__)
    if message is not None:
        raise ImportError(message)
