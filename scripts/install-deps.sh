#!/usr/bin/env bash
# Installs what building and testing TensorDict needs, and nothing twice.
#  - Debian packages: gtest, Google Benchmark, nlohmann-json, ccache, clang-format,
#    gloo's headers, doxygen. With APT_ONLY=1 (what `make docs` uses) the
#    script stops after them.
#  - Python: torch==2.13.0 (the CPU wheel; always pinned, or pip pulls GBs of CUDA
#    packages) together with tensordict, matplotlib and safetensors (the
#    Python safetensors readers of the interop tests and `make bench`), so pip
#    never re-resolves torch.
#    With CXX_ONLY=1 (what `make demo` uses) the script installs only what
#    configuring and compiling the C++ project needs: the Debian packages of
#    BUILD_APT_PACKAGES and torch==2.13.0, then stops; the tools, the Python
#    packages of the tests, tensordict_cpp and the TorchRL environment below
#    are left for `make build`/`make test`.
#  - TorchRL 0.14.1, gymnasium, mujoco 4.0.0 and EnvPool 1.2.5 with
#    treevalue (the peer of `make bench`'s env rows, through TorchRL's
#    EnvPool wrapper) in a virtual environment of the build tree
#    (TORCHRL_VENV), for the torchrl-labelled tests, examples/torchrl and the
#    benchmarks.
#  - the project's package python/ (tensordict_cpp, with the C++ engine),
#    built with scikit-build-core into the same Python.
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
# doxygen: the API reference (make docs, docs/Doxyfile); no graphviz, the
# reference draws no graphs.
# What `cmake` needs to configure the project and compile the library and
# the quickstart (`make demo`) ...
BUILD_APT_PACKAGES=(nlohmann-json3-dev libgloo-dev ccache)
# ... what the tests and the other examples add (the configure step builds
# the tests only where it finds gtest, and the benchmarks only where it
# finds Google Benchmark; the python_env example wants Python's headers) ...
TEST_BUILD_APT_PACKAGES=(libgtest-dev libgmock-dev libbenchmark-dev python3-dev)
# ... and what the other targets add: clang-format (format-check), valgrind
# (bench: callgrind, and the header the benchmarks compile against), clang-14
# (fuzz) and doxygen (docs).
TOOL_APT_PACKAGES=(clang-format valgrind clang-14 libclang-rt-14-dev doxygen)
APT_PACKAGES=("${BUILD_APT_PACKAGES[@]}")
if [ "${CXX_ONLY:-0}" != 1 ]; then
  APT_PACKAGES+=("${TEST_BUILD_APT_PACKAGES[@]}" "${TOOL_APT_PACKAGES[@]}")
fi

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

# The API reference reads the headers only: no Python, no build.
if [ "${APT_ONLY:-0}" = 1 ]; then
  exit 0
fi

PYTHON=${PYTHON:-python3}

# The C++ build needs torch alone (its CMake package and libtorch).
if [ "${CXX_ONLY:-0}" = 1 ]; then
  if ! "$PYTHON" - <<PY 2>/dev/null
import importlib.metadata as m, sys
sys.exit(0 if m.version("torch").split("+")[0] == "$TORCH_VERSION" else 1)
PY
  then
    # Pinned literally, as below.
    echo "install-deps: pip install torch==2.13.0"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check torch==2.13.0
  fi
  exit 0
fi

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

# TorchRL 0.14.1 and gymnasium for the torchrl-labelled tests and the
# examples of tensordict/rl.h. TorchRL pins tensordict 0.14.x, which would
# downgrade the tensordict above: it gets a virtual environment of its own in
# the build tree, made with --system-site-packages so that it reuses the
# pinned torch (about 65 MB). torch==2.13.0 is named in the same command, so
# pip never resolves torch on its own. mujoco 4.0.0 (its wheel carries the
# libmujoco and headers envs/mujoco links) and gymnasium's MuJoCo extras are
# what envs/mujoco's tests compare with, and the mujoco the package below
# builds its MuJoCo env library against (never in the system Python). Made
# before the package: a venv with --system-site-packages sees the package
# once it is installed.
TORCHRL_VENV=${TORCHRL_VENV:-$ROOT/build/torchrl-venv}
if ! "$TORCHRL_VENV/bin/python" - <<'PY' 2>/dev/null
import importlib.metadata as m, sys
ok = (m.version("torchrl") == "0.14.1" and m.version("gymnasium") == "1.4.0"
      and m.version("envpool") == "1.2.5" and m.version("treevalue")
      and m.version("mujoco") == "4.0.0"
      and m.version("torch").split("+")[0] == "2.13.0")
sys.exit(0 if ok else 1)
PY
then
  echo "install-deps: TorchRL virtual environment in $TORCHRL_VENV"
  "$PYTHON" -m venv --system-site-packages "$TORCHRL_VENV"
  "$TORCHRL_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    torch==2.13.0 torchrl==0.14.1 "gymnasium[mujoco]==1.4.0" mujoco==4.0.0 \
    envpool==1.2.5 treevalue
fi

# The project's Python package (python/: the exporter, and the C++ engine
# built by scikit-build-core: libtensordict.so, headers, CMake config, the
# extension tensordict_cpp._C, the CLI and the MuJoCo env library of
# envs/mujoco, built against the mujoco wheel of TorchRL's venv above and
# loaded where a mujoco is installed), rebuilt and reinstalled only when
# its sources or torch changed: the installed package records a hash of
# the sources it was built from and the torch it was built against
# (tensordict_cpp/_build_info.py). The build tree (WHEEL_BUILD_DIR) persists,
# so a reinstall recompiles only what changed (ccache serves the rest).
# --no-build-isolation --no-deps: pip must not resolve torch, and the engine
# must be compiled against the torch installed here.
# The engine is not compiled a second time after `make`'s build tree compiled
# it (or before: whichever comes first, the other one is served): the wheel
# builds it in WHEEL_ENGINE_DIR, a sibling of the build tree, with the build
# tree's generator (Unix Makefiles), build type (WHEEL_BUILD_TYPE) and
# -Werror (WHEEL_WERROR), so each object's compile command is the build
# tree's, byte for byte, and ccache hits (python/CMakeLists.txt says why).
# The defaults are the Makefile's (build, RelWithDebInfo, -Werror). The
# compiler is CMake's default, c++, as for the build tree (scikit-build-core
# would take Python's g++, and ccache hashes the compiler's name), unless CXX
# names one for both. install.strip: the debug info of RelWithDebInfo stays
# out of the installed package (scikit-build-core strips only Release).
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WHEEL_BUILD_DIR=${WHEEL_BUILD_DIR:-$ROOT/build/wheel}
WHEEL_ENGINE_DIR=${WHEEL_ENGINE_DIR:-$ROOT/build-wheel-engine}
WHEEL_BUILD_TYPE=${WHEEL_BUILD_TYPE:-RelWithDebInfo}
WHEEL_WERROR=${WHEEL_WERROR:-ON}
SCIKIT_BUILD_CORE_VERSION=1.1.0
if ! "$PYTHON" - <<PY 2>/dev/null
import importlib.metadata as m, sys
sys.exit(0 if m.version("scikit-build-core") == "$SCIKIT_BUILD_CORE_VERSION" else 1)
PY
then
  echo "install-deps: pip install scikit-build-core==$SCIKIT_BUILD_CORE_VERSION"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check \
    "scikit-build-core==$SCIKIT_BUILD_CORE_VERSION"
fi
SOURCE_HASH=$("$PYTHON" - "$ROOT" <<'PY'
import hashlib, os, sys
root = sys.argv[1]
digest = hashlib.sha256()
paths = ["CMakeLists.txt"]
for top in ("cmake", "include", "src", "tools", "python", os.path.join("envs", "mujoco")):
    for folder, dirs, files in os.walk(os.path.join(root, top)):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "build")
                         and not d.endswith(".egg-info"))
        paths += [os.path.relpath(os.path.join(folder, f), root) for f in sorted(files)
                  if not f.endswith(".pyc")]
for path in paths:
    digest.update(path.encode() + b"\0")
    with open(os.path.join(root, path), "rb") as f:
        digest.update(hashlib.sha256(f.read()).digest())
print(digest.hexdigest())
PY
)
# The mujoco the package's MuJoCo env library is built against (TorchRL's
# venv, checked above to hold 4.0.0).
MUJOCO_VERSION=$("$TORCHRL_VENV/bin/python" -c \
  'import importlib.metadata as m; print(m.version("mujoco"))')
if ! "$PYTHON" - "$SOURCE_HASH" "$MUJOCO_VERSION" <<'PY' 2>/dev/null
import importlib.metadata as m, importlib.util, os, sys
# The package's location only: importing it would import torch.
spec = importlib.util.find_spec("tensordict_cpp")
info = {}
with open(os.path.join(os.path.dirname(spec.origin), "_build_info.py")) as f:
    exec(f.read(), info)
# A package built before TorchRL's venv had its mujoco lacks its MuJoCo envs.
ok = (info["SOURCE_HASH"] == sys.argv[1]
      and info["TORCH_VERSION"].split("+")[0] == m.version("torch").split("+")[0]
      and info.get("MUJOCO_VERSION") == sys.argv[2])
sys.exit(0 if ok else 1)
PY
then
  # A wheel tree configured with another generator (Ninja, scikit-build-core's
  # default, used before the engine was shared) is removed: CMake refuses to
  # switch generators in place, and its engine objects are not reused.
  if [ -e "$WHEEL_BUILD_DIR/CMakeCache.txt" ] \
     && ! grep -qx 'CMAKE_GENERATOR:INTERNAL=Unix Makefiles' "$WHEEL_BUILD_DIR/CMakeCache.txt"; then
    echo "install-deps: removing $WHEEL_BUILD_DIR (configured with another generator)"
    rm -rf "$WHEEL_BUILD_DIR"
  fi
  echo "install-deps: pip install --no-build-isolation --no-deps ./python" \
       "(the engine in $WHEEL_ENGINE_DIR, from ccache where the build tree compiled it)"
  CMAKE_GENERATOR="Unix Makefiles" CXX=${CXX:-c++} CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-2} \
    "$PYTHON" -m pip install --quiet \
    --disable-pip-version-check --no-build-isolation --no-deps \
    -C build-dir="$WHEEL_BUILD_DIR" -C cmake.build-type="$WHEEL_BUILD_TYPE" \
    -C install.strip=true \
    -C cmake.define.TENSORDICT_WERROR="$WHEEL_WERROR" \
    -C cmake.define.TENSORDICT_ENGINE_BINARY_DIR="$WHEEL_ENGINE_DIR" \
    -C cmake.define.TENSORDICT_SOURCE_HASH="$SOURCE_HASH" \
    -C cmake.define.TENSORDICT_WHEEL_MUJOCO_PYTHON="$TORCHRL_VENV/bin/python" "$ROOT/python"
fi

