"""A user's own C++ env through the installed wheel alone: a fresh virtual
environment (no system site-packages) holds the wheel test_wheel.py built,
torch==2.13.0, TorchRL 0.14.1 (with its tensordict 0.14.x) and gymnasium,
nothing else; no PYTHONPATH or LD_LIBRARY_PATH reaches it. Then

- examples/custom_env (an env never compiled into the library) builds its
  env library against tensordict_cpp.cmake_prefix_path and torch's prefix
  only, with no system nlohmann_json (the wheel ships the headers
  find_package(TensorDict) needs) and no CMake package registry;
- tensordict_cpp.Collector collects the env (load_env_library) with an
  actor whose torch OneHotCategorical samples float one-hots, and the same
  actor collects the built-in CartPole-v1, in a process that never imports
  TorchRL, with only the venv's and the example's tensordict files mapped;
  without tensordict (simulated), Collector is an ImportError saying what
  to install;
- TorchRL's check_env_specs passes on tensordict_cpp.envs.CppEnv over the
  env (from load_env_library) and over CartPole-v1, and the env rolls out;
- the console script tensordict-cpp-worker serves the env with
  --env-library to a stock TorchRL DistributedCollector learner (the checks
  of tests/rl/torchrl_worker_example_test.py: layouts, values, weight
  updates and refusals, seeds, a clean shutdown).

usage: test_doors.py BASE_PYTHON SOURCE_DIR DIST_DIR WORK_DIR CMAKE CXX
BASE_PYTHON makes the venv (the Python the wheel was built for); DIST_DIR
holds the one wheel (test_wheel.py's dist/, its fixture).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import textwrap
import time

BASE_PYTHON, SOURCE_DIR, DIST_DIR, WORK, CMAKE, CXX = sys.argv[1:7]
EXAMPLE = os.path.join(SOURCE_DIR, "examples", "custom_env")
RL_TESTS = os.path.join(SOURCE_DIR, "tests", "rl")
failures = []
passed = 0


def check(ok, what, detail=""):
    global passed
    print(("ok:     " if ok else "FAILED: ") + what, flush=True)
    if ok:
        passed += 1
    else:
        failures.append(what)
        if detail:
            print(detail[-6000:], flush=True)


def run(cmd, timeout=900, **kwargs):
    print("+ " + " ".join(cmd), flush=True)
    start = time.monotonic()
    result = subprocess.run(cmd, text=True, capture_output=True, timeout=timeout, **kwargs)
    print(f"  ({time.monotonic() - start:.1f} s, exit {result.returncode})", flush=True)
    return result


def must(cmd, **kwargs):
    result = run(cmd, **kwargs)
    if result.returncode != 0:
        print(result.stdout[-4000:], result.stderr[-4000:], sep="\n", flush=True)
        sys.exit(f"FAILED: {' '.join(cmd)} exited with {result.returncode}")
    return result


wheels = glob.glob(os.path.join(DIST_DIR, "tensordict_cpp-*.whl"))
if len(wheels) != 1:
    sys.exit(f"FAILED: expected one tensordict_cpp wheel in {DIST_DIR} (test_wheel.py "
             f"builds it), found {wheels}")
wheel = wheels[0]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)

# Nothing of a build tree or another environment: the venv's bin first on
# PATH, no Python or loader path from outside.
venv = os.path.join(WORK, "venv")
env = {k: v for k, v in os.environ.items()
       if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "LD_LIBRARY_PATH",
                    "LD_PRELOAD", "VIRTUAL_ENV", "CMAKE_PREFIX_PATH")}
env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
env["VIRTUAL_ENV"] = venv
env["GLOO_SOCKET_IFNAME"] = "lo"  # the learner and the worker talk on loopback
py = os.path.join(venv, "bin", "python")


def python(code, timeout=900):
    return run([py, "-c", textwrap.dedent(code)], env=env, timeout=timeout, cwd=WORK)


# 1. The fresh venv: the wheel next to torch (always pinned: pip must never
# resolve torch on its own) and TorchRL.
must([BASE_PYTHON, "-m", "venv", venv], env=env)
# --no-compile: byte-compiling torch's sources took most of the install.
must([py, "-m", "pip", "install", "--disable-pip-version-check", "--quiet", "--no-compile",
      "torch==2.13.0", "torchrl==0.14.1", "gymnasium==1.4.0", wheel], env=env)
result = run([py, "-m", "pip", "check"], env=env)
check(result.returncode == 0, "the venv's requirements are consistent (pip check)",
      result.stdout + result.stderr)
result = python("""
    import os, sys, sysconfig
    import tensordict_cpp
    site = sysconfig.get_path("platlib")
    assert tensordict_cpp.__file__.startswith(site), (tensordict_cpp.__file__, site)
    assert not sys.flags.no_site and sys.prefix != sys.base_prefix
    outside = [p for p in sys.path if p.startswith(sys.base_prefix) and "site-packages" in p]
    assert not outside, outside
    print(tensordict_cpp.cmake_prefix_path)
""")
check(result.returncode == 0, "the venv imports its own tensordict_cpp and no outside "
      "site-packages", result.stdout + result.stderr)
package_dir = result.stdout.strip().splitlines()[-1] if result.returncode == 0 else ""

# 2. The user's env, built against the wheel's prefix and torch's alone.
torch_prefix = must([py, "-c", "import torch; print(torch.utils.cmake_prefix_path)"],
                    env=env).stdout.strip()
build = os.path.join(WORK, "custom_env")
must([CMAKE, "-S", EXAMPLE, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
      f"-DCMAKE_CXX_COMPILER={CXX}", f"-DCMAKE_PREFIX_PATH={package_dir};{torch_prefix}",
      "-DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=TRUE",
      "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=FALSE", f"-DPython3_EXECUTABLE={py}"], env=env)
with open(os.path.join(build, "CMakeCache.txt")) as f:
    cache = f.read()
tensordict_dir = next((line.split("=", 1)[1] for line in cache.splitlines()
                       if line.startswith("TensorDict_DIR:")), "")
check(os.path.realpath(tensordict_dir) == os.path.realpath(
          os.path.join(package_dir, "lib", "cmake", "TensorDict")),
      f"find_package(TensorDict) finds the wheel's package ({tensordict_dir})")
# The env's library only: the doors below load it (the example's Python
# extension and program are built against the wheel by tests/rl's custom_env).
must([CMAKE, "--build", build, "--target", "corridor_env"], env=env)
library = os.path.join(build, "libcorridor_env.so")
check(os.path.isfile(library), f"the env's library is built ({library})")
# Every nlohmann header the compiler read is the wheel's (a system copy,
# which find_package was told to ignore, may be installed too).
json_headers = set()
for depfile in glob.glob(os.path.join(build, "**", "*.o.d"), recursive=True):
    with open(depfile) as f:
        for token in f.read().split():
            if "/nlohmann/" in token:
                json_headers.add(os.path.realpath(token))
outside = sorted(h for h in json_headers if not h.startswith(os.path.realpath(package_dir)))
check(json_headers and not outside,
      f"the env compiles with the wheel's nlohmann headers only ({len(json_headers)} read, "
      f"outside the wheel: {outside})")
# 3. tensordict_cpp.Collector: the user's env, and CartPole with a torch
# OneHotCategorical actor (float one-hots), without TorchRL.
actor = os.path.join(WORK, "onehot_actor.pt2")
result = python(f"""
    import sys, torch, tensordict_cpp
    from tensordict import TensorDict
    from tensordict.nn import (ProbabilisticTensorDictModule,
                               ProbabilisticTensorDictSequential, TensorDictModule)
    torch.manual_seed(0)
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(torch.nn.Linear(4, 2), ["observation"], ["logits"]),
        ProbabilisticTensorDictModule(
            in_keys=["logits"], out_keys=["action"], return_log_prob=True,
            distribution_class=torch.distributions.OneHotCategorical))
    tensordict_cpp.export(actor, TensorDict(observation=torch.zeros(4, 4), batch_size=[4]),
                          {actor!r})

    def float_one_hots(batch, what):
        action = batch["action"]
        assert action.dtype == torch.float32, (what, action.dtype)
        assert ((action == 0) | (action == 1)).all() and (action.sum(-1) == 1).all(), what
        assert batch["action_log_prob"].shape == action.shape[:-1], what
        assert not batch["action_log_prob"].isnan().any(), what

    collector = tensordict_cpp.Collector("CartPole-v1", {actor!r}, frames_per_batch=64,
                                         total_frames=128, num_envs=4, seed=0)
    batches = list(collector)
    assert [tuple(b.batch_size) for b in batches] == [(4, 16)] * 2, batches
    for b in batches:
        float_one_hots(b, "CartPole-v1")
        assert (b["next", "reward"] == 1).all()
    print("cartpole", sum(b.numel() for b in batches))

    assert "Corridor-v0" not in tensordict_cpp.registered_envs()
    assert tensordict_cpp.load_env_library({library!r}) == ["Corridor-v0"]
    assert "Corridor-v0" in tensordict_cpp.registered_envs(), tensordict_cpp.registered_envs()
    collector = tensordict_cpp.Collector(
        env="Corridor-v0", policy={actor!r}, frames_per_batch=32, total_frames=96,
        num_envs=4, seed=1, env_kwargs={{"max_steps": 5}})
    batches = list(collector)
    assert len(batches) == 3 and batches[0].batch_size == torch.Size([4, 8]), batches
    for b in batches:
        float_one_hots(b, "Corridor-v0")
    # max_steps=5: every sub-env that did not end earlier is truncated at step 5.
    ended = batches[0]["next", "done"][:, :5].squeeze(-1).any(-1)
    assert ended.all(), batches[0]["next", "done"]
    print("corridor", sum(b.numel() for b in batches))

    assert "torchrl" not in sys.modules, "tensordict_cpp.Collector imported TorchRL"
    with open("/proc/self/maps") as maps:
        mapped = {{line.split()[-1] for line in maps if "/" in line}}
    ours = sorted(p for p in mapped if "tensordict" in p or "corridor" in p)
    venv, build = {venv!r}, {build!r}
    stray = [p for p in ours if not (p.startswith(venv) or p.startswith(build))]
    assert not stray, stray
    print("mapped", ours)
""")
check(result.returncode == 0 and "cartpole 128" in result.stdout,
      "a torch OneHotCategorical actor collects CartPole-v1 (float one-hots, log-probs)",
      result.stdout + result.stderr)
check(result.returncode == 0 and "corridor 96" in result.stdout,
      "tensordict_cpp.Collector collects the user's env from its library, with "
      "env_kwargs, without TorchRL and with only the venv's engine mapped",
      result.stdout + result.stderr)

# The wheel requires no tensordict (pip would resolve torch through it):
# without it (simulated), Collector says what to install, before collecting.
result = python(f"""
    import sys
    sys.modules["tensordict"] = None
    import torch, tensordict_cpp
    try:
        tensordict_cpp.Collector("CartPole-v1", {actor!r}, frames_per_batch=8)
    except ImportError as e:
        print(e)
    else:
        raise AssertionError("a Collector without tensordict")
""")
# The command names the torch the wheel was built for (this venv's), pinned:
# an unpinned torch would pull a CUDA build.
check(result.returncode == 0 and "pip install tensordict torch==2.13.0" in result.stdout,
      f"without tensordict, Collector is an ImportError naming what to install "
      f"({result.stdout.strip()[-300:]!r})", result.stderr)

# 4. TorchRL: check_env_specs on CppEnv.
result = python(f"""
    import torch, tensordict_cpp
    tensordict_cpp.load_env_library({library!r})
    from tensordict_cpp.envs import CppEnv
    from torchrl.envs.utils import check_env_specs
    for env in (CppEnv("Corridor-v0", 4, max_steps=20), CppEnv("CartPole-v1", 3),
                CppEnv("CartPole-v1", 2, categorical_action_encoding=True)):
        check_env_specs(env)
    env = CppEnv("Corridor-v0", 4, max_steps=20)
    env.set_seed(0)
    rollout = env.rollout(30, break_when_any_done=False)
    assert rollout.batch_size == torch.Size([4, 30]), rollout.batch_size
    # max_steps=20: every sub-env ends (terminated or truncated) within 20 steps.
    assert rollout["next", "done"][:, :20].squeeze(-1).any(-1).all(), rollout["next", "done"]
    print("check_env_specs ok")
""")
check(result.returncode == 0 and "check_env_specs ok" in result.stdout,
      "TorchRL's check_env_specs passes on CppEnv over the user's env and CartPole-v1",
      result.stdout + result.stderr)

# 5. The console script tensordict-cpp-worker and a stock DistributedCollector
# learner (this venv's TorchRL), the env from --env-library.
worker = os.path.join(venv, "bin", "tensordict-cpp-worker")
result = run([py, os.path.join(RL_TESTS, "torchrl_worker_example_test.py"), worker,
              os.path.join(WORK, "worker"), py, "--env", "Corridor-v0",
              "--env-library", library, "--env-kwargs", '{"max_steps": 6}'],
             env=env, cwd=WORK)
check(result.returncode == 0 and result.stdout.strip().endswith("OK"),
      "tensordict-cpp-worker serves the env (--env-library) to a stock TorchRL "
      "DistributedCollector learner", result.stdout[-3000:] + result.stderr[-3000:])

print(f"{passed} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
