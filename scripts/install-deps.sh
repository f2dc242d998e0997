#!/usr/bin/env bash
# Installs what building and testing TensorDict needs, and nothing twice.
#  - Debian packages: gtest, Google Benchmark, nlohmann-json, ccache, clang-format,
#    gloo's headers.
#  - Python: torch==2.13.0 (the CPU wheel; always pinned, or pip pulls GBs of CUDA
#    packages) together with tensordict, so pip never re-resolves torch.
set -euo pipefail

TORCH_VERSION=2.13.0
# ccache speeds up rebuilds; clang-format checks the layout (make format-check).
# valgrind: callgrind and its client-request header, for the instruction counts
# of `make bench` (benchmarks/instructions.py).
# libgloo-dev: only the headers that c10d's ProcessGroupGloo.hpp includes (the
# torch wheel ships the symbols but not gloo's headers); never linked.
# clang-14 + libclang-rt-14-dev: `-fsanitize=fuzzer` (libclang_rt.fuzzer) for
# the fuzz targets; Debian's gcc has no libFuzzer.
APT_PACKAGES=(libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev ccache clang-format
              libgloo-dev valgrind clang-14 libclang-rt-14-dev)

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
m.version("tensordict"); m.version("matplotlib")
sys.exit(0 if ok else 1)
PY
then
  # Pinned literally: torch must never be resolved by pip on its own.
  echo "install-deps: pip install torch==2.13.0 tensordict matplotlib"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check \
    torch==2.13.0 tensordict matplotlib
fi
