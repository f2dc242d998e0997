#!/usr/bin/env bash
# Installs what building and testing TensorDict needs, and nothing twice.
#  - Debian packages: gtest, Google Benchmark, nlohmann-json, ccache, clang-format,
#    gloo's headers.
#  - Python: torch==2.13.0 (the CPU wheel; always pinned, or pip pulls GBs of CUDA
#    packages) together with tensordict, matplotlib and safetensors (the
#    Python safetensors readers of the interop tests and `make bench`), so pip
#    never re-resolves torch.
#  - TorchRL 0.14.1 and gymnasium in a virtual environment of the build tree
#    (TORCHRL_VENV), for the torchrl-labelled tests and examples/torchrl.
set -euo pipefail

TORCH_VERSION=2.13.0
# ccache speeds up rebuilds; clang-format checks the layout (make format-check).
# valgrind: callgrind and its client-request header, for the instruction counts
# of `make bench` (benchmarks/instructions.py).
# libgloo-dev: only the headers that c10d's ProcessGroupGloo.hpp includes (the
# torch wheel ships the symbols but not gloo's headers); never linked.
# python3-dev: Python's headers for the pybind11 extensions (tensordict/python.h,
# tensordict_add_python_module) when Debian's python3 is the one with torch;
# pybind11 itself comes from torch's wheel (torch/include/pybind11).
# clang-14 + libclang-rt-14-dev: `-fsanitize=fuzzer` (libclang_rt.fuzzer) for
# the fuzz targets; Debian's gcc has no libFuzzer.
APT_PACKAGES=(libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev ccache clang-format
              libgloo-dev valgrind clang-14 libclang-rt-14-dev python3-dev)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' \
    || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "install-deps: apt-get install ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" - <<PY 2>/dev/null
import importlib.metadata as m, sys
ok = m.version("torch").split("+")[0] == "$TORCH_VERSION"
m.version("tensordict"); m.version("matplotlib"); m.version("safetensors")
sys.exit(0 if ok else 1)
PY
then
  # Pinned literally: torch must never be resolved by pip on its own.
  echo "install-deps: pip install torch==2.13.0 tensordict matplotlib safetensors"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check \
    torch==2.13.0 tensordict matplotlib safetensors
fi

# The project's own exporter (python/tensordict_cpp), reinstalled only when
# the installed copy differs from the source tree. --no-deps: pip must not
# resolve torch.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if ! "$PYTHON" - "$ROOT/python/tensordict_cpp" <<'PY' 2>/dev/null
import filecmp, os, sys, importlib.util
spec = importlib.util.find_spec("tensordict_cpp")
src = sys.argv[1]
names = sorted(n for n in os.listdir(src) if n.endswith(".py"))
ok = spec is not None and spec.origin is not None and all(
    filecmp.cmp(os.path.join(src, n), os.path.join(os.path.dirname(spec.origin), n), shallow=False)
    for n in names)
sys.exit(0 if ok else 1)
PY
then
  echo "install-deps: pip install --no-build-isolation --no-deps ./python"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check \
    --no-build-isolation --no-deps "$ROOT/python"
fi

# TorchRL 0.14.1 and gymnasium for the torchrl-labelled tests and the
# examples of tensordict/rl.h. TorchRL pins tensordict 0.14.x, which would
# downgrade the tensordict above: it gets a virtual environment of its own in
# the build tree, made with --system-site-packages so that it reuses the
# pinned torch (about 65 MB). torch==2.13.0 is named in the same command, so
# pip never resolves torch on its own.
TORCHRL_VENV=${TORCHRL_VENV:-$ROOT/build/torchrl-venv}
if ! "$TORCHRL_VENV/bin/python" - <<'PY' 2>/dev/null
import importlib.metadata as m, sys
ok = (m.version("torchrl") == "0.14.1" and m.version("gymnasium") == "1.4.0"
      and m.version("torch").split("+")[0] == "2.13.0")
sys.exit(0 if ok else 1)
PY
then
  echo "install-deps: TorchRL virtual environment in $TORCHRL_VENV"
  "$PYTHON" -m venv --system-site-packages "$TORCHRL_VENV"
  "$TORCHRL_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    torch==2.13.0 torchrl==0.14.1 gymnasium==1.4.0
fi
