"""The wheel end to end: `pip wheel ./python` builds tensordict_cpp with the
C++ engine inside, a fresh virtual environment installs it, and then

- the package imports, records the torch it was built against, and its
  extension tensordict_cpp._C loads a tree Python tensordict wrote into a real
  tensordict.TensorDict, equal to Python's own load;
- an outside CMake project finds the library through
  tensordict_cpp.cmake_prefix_path, builds, runs on the same tree, and writes
  one that Python loads;
- the console script tensordict-cpp runs info, verify, dump and copy;
- with another torch version (simulated: torch.__version__ patched before
  the import), importing tensordict_cpp._C raises ImportError naming both
  versions, and the shared objects are never loaded.

usage: test_wheel.py BUILD_PYTHON SOURCE_DIR WHEEL_BUILD_DIR WORK_DIR CMAKE CXX
                     ENGINE_DIR BUILD_TYPE WERROR
BUILD_PYTHON has torch and scikit-build-core; the venv is made from it with
--system-site-packages, so it reuses the pinned torch. ENGINE_DIR,
BUILD_TYPE and WERROR are the settings scripts/install-deps.sh builds
WHEEL_BUILD_DIR with (the engine shared with the build tree through ccache),
so the build is incremental.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import zipfile

BUILD_PYTHON, SOURCE_DIR, WHEEL_BUILD_DIR, WORK, CMAKE, CXX = sys.argv[1:7]
ENGINE_DIR, BUILD_TYPE, WERROR = sys.argv[7:10]
# The Python whose mujoco wheel the package's MuJoCo env library is built
# against (install-deps.sh names TorchRL's venv, as here).
MUJOCO_PYTHON = sys.argv[10] if len(sys.argv) > 10 else BUILD_PYTHON
failures = []
passed = 0


def check(ok, what):
    global passed
    print(("ok:     " if ok else "FAILED: ") + what, flush=True)
    if ok:
        passed += 1
    else:
        failures.append(what)


def run(cmd, **kwargs):
    print("+ " + " ".join(cmd), flush=True)
    result = subprocess.run(cmd, text=True, capture_output=True, **kwargs)
    if result.returncode != 0:
        print(result.stdout[-4000:], result.stderr[-4000:], sep="\n", flush=True)
    return result


def must(cmd, **kwargs):
    result = run(cmd, **kwargs)
    if result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)} exited with {result.returncode}")
    return result


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2"))

# 1. The wheel, built in the persistent build tree (incremental), with
# install-deps.sh's generator and settings for it.
dist = os.path.join(WORK, "dist")
cache = os.path.join(WHEEL_BUILD_DIR, "CMakeCache.txt")
if os.path.exists(cache):
    with open(cache) as f:
        if "CMAKE_GENERATOR:INTERNAL=Unix Makefiles\n" not in f.read():
            # Configured with Ninja before the engine was shared: CMake
            # cannot switch generators in place (install-deps.sh does the same).
            shutil.rmtree(WHEEL_BUILD_DIR)
must([BUILD_PYTHON, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
      "--disable-pip-version-check", os.path.join(SOURCE_DIR, "python"), "-w", dist,
      "-C", f"build-dir={WHEEL_BUILD_DIR}", "-C", f"cmake.build-type={BUILD_TYPE}",
      "-C", "install.strip=true", "-C", f"cmake.define.TENSORDICT_WERROR={WERROR}",
      "-C", f"cmake.define.TENSORDICT_ENGINE_BINARY_DIR={ENGINE_DIR}",
      "-C", f"cmake.define.TENSORDICT_WHEEL_MUJOCO_PYTHON={MUJOCO_PYTHON}"],
     env=dict(env, CMAKE_GENERATOR="Unix Makefiles", CXX=CXX))
wheels = glob.glob(os.path.join(dist, "tensordict_cpp-*.whl"))
check(len(wheels) == 1, f"one wheel built (found {wheels})")
wheel = wheels[0]
with zipfile.ZipFile(wheel) as archive:
    infos = {info.filename: info for info in archive.infolist()}
    names = set(infos)
    entry_points = next(
        (archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt")), "")
    metadata = next(
        (archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA")), "")
for expected in ["tensordict_cpp/__init__.py", "tensordict_cpp/_export.py",
                 "tensordict_cpp/_build_info.py", "tensordict_cpp/lib/libtensordict.so",
                 "tensordict_cpp/include/tensordict/tensordict.h",
                 "tensordict_cpp/include/tensordict/python.h",
                 "tensordict_cpp/include/tensordict/detail/ops.h",
                 "tensordict_cpp/lib/cmake/TensorDict/TensorDictConfig.cmake",
                 "tensordict_cpp/lib/cmake/TensorDict/TensorDictConfigVersion.cmake",
                 "tensordict_cpp/lib/cmake/TensorDict/TensorDictTargets.cmake",
                 "tensordict_cpp/lib/cmake/TensorDict/TensorDictPython.cmake",
                 "tensordict_cpp/bin/tensordict",
                 "tensordict_cpp/bin/torchrl_worker",
                 "tensordict_cpp/envs.py",
                 "tensordict_cpp/include/tensordict/rl/env_kit.h",
                 "tensordict_cpp/include/tensordict/third_party/nlohmann/json.hpp"]:
    check(expected in names, f"the wheel holds {expected}")
check(any(n.startswith("tensordict_cpp/_C.") and n.endswith(".so") for n in names),
      "the wheel holds the extension tensordict_cpp/_C.*.so")
check(not any(n.startswith("tensordict_cpp/lib/libtensordict.so.") for n in names),
      "the library is packed once (no versioned copies of libtensordict.so)")
cli = infos.get("tensordict_cpp/bin/tensordict")
check(cli is not None and (cli.external_attr >> 16) & 0o111 != 0,
      "bin/tensordict is executable in the wheel")
check("tensordict-cpp = tensordict_cpp._cli:main" in entry_points,
      f"the console script tensordict-cpp is declared (entry points: {entry_points!r})")
check("tensordict-cpp-worker = tensordict_cpp._cli:worker_main" in entry_points,
      f"the console script tensordict-cpp-worker is declared (entry points: {entry_points!r})")
check("Requires-Dist: torch" not in metadata,
      "the metadata names no torch for pip to resolve")

# 2. A fresh virtual environment that reuses the pinned torch.
venv = os.path.join(WORK, "venv")
must([BUILD_PYTHON, "-m", "venv", "--system-site-packages", venv])
py = os.path.join(venv, "bin", "python")
# --ignore-installed: the Python the venv is made from may have a
# tensordict_cpp of the same version, which pip would take as installed.
must([py, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed",
      "--disable-pip-version-check", wheel])
site = must([py, "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"]).stdout.strip()
package_dir = os.path.join(site, "tensordict_cpp")

# A tree written by Python tensordict, read by everything below.
tree = os.path.join(WORK, "python_tree")
must([py, "-c", f"""
import torch
from tensordict import TensorDict
td = TensorDict({{"a": torch.arange(6, dtype=torch.float32).reshape(3, 2),
                  "nested": {{"b": torch.arange(3)}}}}, batch_size=[3])
td.memmap({tree!r})
"""])

# 3. The package and its extension.
result = run([py, "-c", f"""
import json, os, sys, torch, tensordict
import tensordict_cpp
import tensordict_cpp._C as C
loaded = C.load_memmap({tree!r})
expected = tensordict.TensorDict.load_memmap({tree!r})
try:
    C.load_memmap({os.path.join(WORK, "missing")!r})
    missing_error = ""
except Exception as e:
    missing_error = type(e).__name__ + ": " + str(e)
print(json.dumps(dict(
    file=tensordict_cpp.__file__,
    cmake_prefix_path=tensordict_cpp.cmake_prefix_path,
    recorded=tensordict_cpp.torch_version,
    torch=torch.__version__,
    compiled=C.TORCH_VERSION,
    type=type(loaded).__module__ + "." + type(loaded).__name__,
    batch_size=list(loaded.batch_size),
    keys=sorted(map(str, loaded.keys(include_nested=True, leaves_only=True))),
    equal=bool((loaded == expected).all()),
    dtypes=[str(loaded["a"].dtype), str(loaded["nested", "b"].dtype)],
    missing_error=missing_error)))
"""])
check(result.returncode == 0, "tensordict_cpp and tensordict_cpp._C import in the venv")
if result.returncode == 0:
    info = json.loads(result.stdout.strip().splitlines()[-1])
    check(info["file"].startswith(package_dir),
          f"the venv's own install is imported ({info['file']})")
    check(info["cmake_prefix_path"] == package_dir,
          f"cmake_prefix_path is the package directory ({info['cmake_prefix_path']})")
    check(info["recorded"] == info["torch"],
          f"the recorded torch {info['recorded']} is the one imported ({info['torch']})")
    check(info["torch"].startswith(info["compiled"]),
          f"_C was compiled against torch {info['compiled']} ({info['torch']} imported)")
    check(info["type"] == "tensordict._td.TensorDict",
          f"_C.load_memmap returns a tensordict.TensorDict ({info['type']})")
    check(info["batch_size"] == [3] and info["equal"]
          and info["keys"] == ["('nested', 'b')", "a"]
          and info["dtypes"] == ["torch.float32", "torch.int64"],
          f"_C.load_memmap equals Python's load_memmap ({info})")
    check("missing" in info["missing_error"],
          f"a missing tree is an error naming it ({info['missing_error']!r})")

# 3b. The storage functions, each way against Python tensordict's own
# writers and readers, on a tree with nested dicts and a string.
result = run([py, "-c", f"""
import os, torch, tensordict
from tensordict import TensorDict
import tensordict_cpp
work = {WORK!r}
td = TensorDict({{"obs": torch.randn(4, 3), "action": torch.arange(4),
                  "next": {{"reward": torch.rand(4, 1, dtype=torch.float64),
                            "done": torch.zeros(4, 1, dtype=torch.bool)}},
                  "tag": "run-7"}}, batch_size=[4])
def same(a, b, what):
    assert type(a) is TensorDict, (what, type(a))
    assert a.batch_size == b.batch_size, (what, a.batch_size)
    keys = sorted(map(str, a.keys(True, True)))
    assert keys == sorted(map(str, b.keys(True, True))), (what, a, b)
    assert (a.exclude("tag") == b.exclude("tag")).all(), what
    assert a["tag"] == b["tag"] == "run-7", (what, a["tag"])
    for key in b.exclude("tag").keys(True, True):
        assert a[key].dtype == b[key].dtype, (what, key)
    print("same:", what)
same(tensordict_cpp.memmap(td, os.path.join(work, "m_cpp")), td, "C++ memmap's result")
same(TensorDict.load_memmap(os.path.join(work, "m_cpp")), td, "C++ memmap, Python load")
td.memmap(os.path.join(work, "m_py"))
same(tensordict_cpp.load_memmap(os.path.join(work, "m_py")), td, "Python memmap, C++ load")
consolidated = tensordict_cpp.consolidate(td, os.path.join(work, "c_cpp.bin"))
same(consolidated, td, "C++ consolidate's result")
same(tensordict.from_consolidated(os.path.join(work, "c_cpp.bin")), td,
     "C++ consolidate, Python from_consolidated")
td.consolidate(filename=os.path.join(work, "c_py.bin"))
same(tensordict_cpp.from_consolidated(os.path.join(work, "c_py.bin")), td,
     "Python consolidate, C++ from_consolidated")
plain = td.exclude("tag")
tensordict_cpp.to_safetensors(plain, os.path.join(work, "s_cpp.safetensors"))
loaded = tensordict.from_safetensors(os.path.join(work, "s_cpp.safetensors"))
assert (loaded == plain).all() and loaded.batch_size == plain.batch_size, loaded
tensordict.to_safetensors(plain, os.path.join(work, "s_py.safetensors"))
loaded = tensordict_cpp.from_safetensors(os.path.join(work, "s_py.safetensors"))
assert type(loaded) is TensorDict and (loaded == plain).all(), loaded
assert loaded.batch_size == plain.batch_size, loaded
print("same: safetensors both ways")
try:
    tensordict_cpp.from_consolidated(os.path.join(work, "s_py.safetensors"))
except RuntimeError as e:
    assert "s_py.safetensors" in str(e), e
    print("refused:", str(e).splitlines()[0])
else:
    raise AssertionError("a safetensors file loaded as a consolidated one")
"""])
check(result.returncode == 0,
      "memmap, consolidate and safetensors round trips between C++ (tensordict_cpp) "
      "and Python tensordict give equal dicts, and a wrong file is refused by name")

# 4. An outside CMake project through tensordict_cpp.cmake_prefix_path.
prefix = must([py, "-c", "import tensordict_cpp, torch; "
               "print(tensordict_cpp.cmake_prefix_path + ';' + torch.utils.cmake_prefix_path)"]
              ).stdout.strip()
consumer_build = os.path.join(WORK, "consumer")
must([CMAKE, "-S", os.path.join(SOURCE_DIR, "tests", "wheel", "consumer"), "-B", consumer_build,
      f"-DCMAKE_PREFIX_PATH={prefix}", f"-DCMAKE_CXX_COMPILER={CXX}",
      "-DCMAKE_BUILD_TYPE=Release", f"-DTENSORDICT_EXPECTED_PREFIX={package_dir}"])
must([CMAKE, "--build", consumer_build, "-j2"])
cpp_tree = os.path.join(WORK, "cpp_tree")
result = run([os.path.join(consumer_build, "wheel_consumer"), tree, cpp_tree])
check(result.returncode == 0 and "wheel_consumer: ok" in result.stdout,
      "the consumer linked to the wheel's library runs on Python's tree")
result = run([py, "-c", f"""
import torch
from tensordict import TensorDict
td = TensorDict.load_memmap({cpp_tree!r})
assert torch.equal(td["from_cpp"], torch.arange(3, dtype=torch.float64)), td["from_cpp"]
assert torch.equal(td["nested", "b"], torch.arange(3)), td["nested", "b"]
"""])
check(result.returncode == 0, "Python loads the tree the consumer wrote, with its values")

# 5. The console script.
script = os.path.join(venv, "bin", "tensordict-cpp")
result = run([script, "info", tree])
check(result.returncode == 0 and "nested" in result.stdout and "int64" in result.stdout,
      f"tensordict-cpp info lists the tree ({result.stdout.strip()[:400]!r})")
result = run([script, "verify", tree])
check(result.returncode == 0, "tensordict-cpp verify accepts Python's tree")
result = run([script, "dump", tree])
try:
    dumped = json.loads(result.stdout)
except ValueError:
    dumped = None
check(result.returncode == 0 and dumped is not None, "tensordict-cpp dump prints JSON")
copied = os.path.join(WORK, "copied_tree")
result = run([script, "copy", tree, copied])
check(result.returncode == 0, "tensordict-cpp copy writes a copy")
result = run([py, "-c", f"""
from tensordict import TensorDict
assert (TensorDict.load_memmap({copied!r}) == TensorDict.load_memmap({tree!r})).all()
"""])
check(result.returncode == 0, "the copy loads in Python equal to the original")
result = run([script, "info", os.path.join(WORK, "missing")])
check(result.returncode != 0 and "missing" in result.stderr,
      f"tensordict-cpp info on a missing path fails naming it ({result.stderr.strip()!r})")

# The TorchRL worker's console script and the env registry, from the venv
# alone: the worker explains its usage (exit 2) and refuses a library that
# does not load (exit 1, naming it).
worker = os.path.join(venv, "bin", "tensordict-cpp-worker")
result = run([worker])
check(result.returncode == 2 and "usage: torchrl_worker" in result.stderr,
      f"tensordict-cpp-worker runs the worker binary ({result.stderr.strip()[:200]!r})")
result = run([worker, "--master", "127.0.0.1:1", "--rank", "1", "--world-size", "2",
              "--policy", "missing.pt2", "--env", "CartPole-v1", "--frames-per-batch", "8",
              "--env-library", "/nonexistent/libenvs.so"])
check(result.returncode == 1 and "cannot load '/nonexistent/libenvs.so'" in result.stderr,
      f"the worker refuses an env library that does not load ({result.stderr.strip()[:300]!r})")
result = run([py, "-c", """
import torch, tensordict_cpp
assert tensordict_cpp.registered_envs() == ["CartPole-v1", "PointMass"], tensordict_cpp.registered_envs()
try:
    tensordict_cpp.load_env_library("/nonexistent/libenvs.so")
except ValueError as e:
    assert "cannot load" in str(e), e
else:
    raise AssertionError("a missing library was accepted")
"""])
check(result.returncode == 0, f"registered_envs and load_env_library from the venv ({result.stderr[-300:]!r})")

# 5b. The MuJoCo envs: in the package exactly when MUJOCO_PYTHON has
# mujoco 4.0.0, never with a libmujoco of its own. Where the venv imports
# mujoco: the envs load by name (Collector, here up to its policy check,
# since CppEnv needs TorchRL), libmujoco comes from the mujoco package, and
# a mujoco of another version (simulated: mujoco.__version__ patched) is
# refused before the library loads, naming both versions, by the package
# and by the worker's console script.
build_mujoco = run([MUJOCO_PYTHON, "-c", "import importlib.metadata as m; print(m.version('mujoco'))"])
has_mujoco = build_mujoco.returncode == 0 and build_mujoco.stdout.strip() == "4.0.0"
if has_mujoco and run([py, "-c", "import mujoco"]).returncode != 0:
    # The venv's own mujoco (the system Python has none): the package loads
    # the library against whichever mujoco its Python imports.
    must([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          "mujoco==4.0.0"])
mujoco_lib = "tensordict_cpp/lib/libtensordict_mujoco.so"
check((mujoco_lib in names) == has_mujoco,
      f"the wheel holds {mujoco_lib} exactly when {MUJOCO_PYTHON} has mujoco 4.0.0 "
      f"({has_mujoco})")
check(not any("libmujoco" in n for n in names), "the wheel carries no libmujoco")
recorded_mujoco = must([py, "-c", "import tensordict_cpp._build_info as b; "
                        "print(repr((b.MUJOCO_VERSION, b.MUJOCO_SKIPPED)))"]).stdout.strip()
check(recorded_mujoco == "('4.0.0', '')" if has_mujoco
      else recorded_mujoco.startswith("('', ") and "mujoco" in recorded_mujoco,
      f"the package records the mujoco it was built with, or why not ({recorded_mujoco})")
venv_mujoco = run([py, "-c", "import mujoco"]).returncode == 0
if has_mujoco and venv_mujoco:
    result = run([py, "-c", f"""
import os, tensordict_cpp
path = tensordict_cpp.mujoco_env_library()
assert path == os.path.join({package_dir!r}, "lib", "libtensordict_mujoco.so"), path
assert "HalfCheetah-v5" not in tensordict_cpp.registered_envs()
try:
    tensordict_cpp.Collector(env="HalfCheetah-v5", policy="/nonexistent/actor.pt2",
                             frames_per_batch=8)
except FileNotFoundError:
    pass
envs = tensordict_cpp.registered_envs()
for name in ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5"):
    assert name in envs, envs
with open("/proc/self/maps") as maps:
    libmujoco = {{line.split()[-1] for line in maps if "libmujoco.so" in line}}
import mujoco
expected = os.path.realpath(os.path.join(os.path.dirname(mujoco.__file__), "libmujoco.so.4.0.0"))
assert {{os.path.realpath(p) for p in libmujoco}} == {{expected}}, (libmujoco, expected)
print("loaded by name")
"""])
    check(result.returncode == 0 and "loaded by name" in result.stdout,
          "Collector(env='HalfCheetah-v5') loads the package's MuJoCo envs, with the mujoco "
          "package's libmujoco")
    result = run([py, "-c", """
import mujoco, tensordict_cpp
mujoco.__version__ = "3.3.7"
try:
    tensordict_cpp.Collector(env="Hopper-v5", policy="/nonexistent/actor.pt2",
                             frames_per_batch=8)
except ValueError as e:
    print(e)
with open("/proc/self/maps") as maps:
    assert "libtensordict_mujoco" not in maps.read(), "the library was loaded"
assert "Hopper-v5" not in tensordict_cpp.registered_envs()
"""])
    check(result.returncode == 0 and "built against mujoco 4.0.0" in result.stdout
          and "installed mujoco is 3.3.7" in result.stdout,
          f"a mujoco of another version is refused before the library loads, naming both "
          f"({result.stdout.strip()[-300:]!r})")
    library = must([py, "-c", "import tensordict_cpp; print(tensordict_cpp.mujoco_env_library())"]
                   ).stdout.strip()
    worker_args = ["--master", "127.0.0.1:1", "--rank", "1", "--world-size", "2",
                   "--policy", "missing.pt2", "--env", "Hopper-v5", "--frames-per-batch", "8",
                   "--verbose", "--env-library", library]
    # The console script's function in a process whose mujoco is patched (a
    # sitecustomize importing mujoco would recurse: glfw starts Python).
    result = run([py, "-c", "import sys, mujoco; mujoco.__version__ = '3.3.7'; "
                  "sys.argv = ['tensordict-cpp-worker'] + sys.argv[1:]; "
                  "from tensordict_cpp._cli import worker_main; worker_main()", *worker_args])
    check(result.returncode != 0 and "3.3.7" in result.stderr and "4.0.0" in result.stderr,
          f"tensordict-cpp-worker refuses the MuJoCo library with another mujoco, naming both "
          f"({result.stderr.strip()[-300:]!r})")
    # With the right one, the worker (no Python inside) loads it: libmujoco
    # from mujoco's folder, which the console script passes. It stops at
    # the missing policy (or, without gymnasium, at the model files).
    result = run([worker, *worker_args])
    check(result.returncode == 1 and "registered Ant-v5 HalfCheetah-v5 Hopper-v5 Walker2d-v5"
          in result.stderr,
          f"tensordict-cpp-worker --env-library loads the MuJoCo library "
          f"({result.stderr.strip()[-300:]!r})")
else:
    print(f"skipped: the MuJoCo envs by name ({MUJOCO_PYTHON} has mujoco 4.0.0: "
          f"{has_mujoco}; the venv imports mujoco: {venv_mujoco})", flush=True)

# 6. Another torch (simulated): the check runs before anything compiled loads.
result = run([py, "-c", """
import sys, torch
torch.__version__ = "2.99.1+cu999"
try:
    import tensordict_cpp._C
except ImportError as e:
    print(e)
else:
    sys.exit("imported")
with open("/proc/self/maps") as maps:
    mapped = maps.read()
assert "tensordict_cpp._C" not in sys.modules, "the extension module was imported"
assert "libtensordict" not in mapped and "/tensordict_cpp/_C" not in mapped, "an engine .so is mapped"
"""])
result2 = run([py, "-c", """
import torch
torch.__version__ = torch.__version__.split("+")[0] + "+cu126"
import tensordict_cpp._C
print("loaded with", torch.__version__)
"""])
check(result2.returncode == 0 and "+cu126" in result2.stdout,
      "a torch of the same release with another local part (+cu126) is accepted")
recorded = must([py, "-c", "import tensordict_cpp; print(tensordict_cpp.torch_version)"]
                ).stdout.strip()
check(result.returncode == 0 and "2.99.1+cu999" in result.stdout and recorded in result.stdout,
      f"a mismatched torch is an ImportError naming both versions, nothing loaded "
      f"({result.stdout.strip()!r})")
# The console script checks before it starts the binary (linked against
# one torch): a sitecustomize simulates the other torch in its process.
fake = os.path.join(WORK, "other_torch")
os.makedirs(fake, exist_ok=True)
with open(os.path.join(fake, "sitecustomize.py"), "w") as f:
    f.write("import torch\ntorch.__version__ = '2.99.1+cu999'\n")
result = run([script, "info", tree], env=dict(os.environ, PYTHONPATH=fake))
check(result.returncode != 0 and "2.99.1+cu999" in result.stderr
      and recorded in result.stderr and "TensorDict batch_size" not in result.stdout,
      f"tensordict-cpp refuses a mismatched torch before running the CLI "
      f"({result.stderr.strip().splitlines()[-1:]!r})")

print(f"{passed} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
