#!/usr/bin/env python3
"""examples/custom_env, a user's env never compiled into the library,
through the three doors, built as a user builds it.

usage: custom_env_test.py SOURCE_DIR BUILD_DIR WORK_DIR TORCHRL_PYTHON CMAKE

Run by the Python that has the installed tensordict_cpp package (the wheel
scripts/install-deps.sh installs). Checks:

1. the example builds against the install tree (`cmake --install` of
   BUILD_DIR: a static libtensordict, so the env is linked into the
   program) and its program collects the env with rl::Collector;
2. it builds against the wheel's tensordict_cpp.cmake_prefix_path with no
   system nlohmann_json (the wheel ships its headers): a shared library of
   the env, a program that loads it (rl::load_env_library) and collects it,
   and a Python extension;
3. Python: after `import corridor_envs`, tensordict_cpp.registered_envs()
   lists the env and tensordict_cpp.Collector(env="Corridor-v0",
   env_kwargs=...) collects it with an exported policy; in another process
   tensordict_cpp.load_env_library(lib) registers it, again returns the same
   names, and a path that does not load or a library that registers nothing
   raises ValueError; an unknown keyword argument raises ValueError naming
   the env, the argument and the known ones;
4. TorchRL (TORCHRL_PYTHON): tensordict_cpp.envs.CppEnv over the env and
   over CartPole-v1 (one-hot and categorical) passes check_env_specs,
   rolls out under TransformedEnv(StepCounter, RewardSum, ObservationNorm)
   and collects with TorchRL's own Collector;
5. the installed worker (the package's bin/torchrl_worker) serves the env
   to a stock DistributedCollector learner with --env-library
   (torchrl_worker_example_test.py's checks).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

SOURCE, BUILD, WORK, TORCHRL_PYTHON, CMAKE = sys.argv[1:6]
EXAMPLE = os.path.join(SOURCE, "examples", "custom_env")
HERE = os.path.dirname(os.path.abspath(__file__))
passed = 0


def check(ok, what, detail=""):
    global passed
    if not ok:
        sys.exit(f"FAIL: {what}\n{detail}")
    passed += 1
    print(f"ok: {what}", flush=True)


def run(cmd, timeout=900, **kwargs):
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, text=True, capture_output=True, timeout=timeout, **kwargs)


def must(cmd, **kwargs):
    result = run(cmd, **kwargs)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


def python(code, interpreter=sys.executable, extra_path=()):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*extra_path, env.get("PYTHONPATH", "")])
    return run([interpreter, "-c", textwrap.dedent(code)], env=env)


import torch  # noqa: E402
import tensordict_cpp  # noqa: E402

TORCH_PREFIX = torch.utils.cmake_prefix_path
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)

# --- 1. the install tree (static libtensordict) -----------------------------------
install = os.path.join(WORK, "install")
must([CMAKE, "--install", BUILD, "--prefix", install])
static_build = os.path.join(WORK, "static")
must([CMAKE, "-S", EXAMPLE, "-B", static_build, "-DCMAKE_BUILD_TYPE=Release",
      f"-DCMAKE_PREFIX_PATH={install};{TORCH_PREFIX}"])
must([CMAKE, "--build", static_build, "-j", "2"])
out = must([os.path.join(static_build, "collect_corridor")]).stdout
check("frames=640" in out, "install tree: the env linked into a program is collected", out)

# --- 2. the wheel's prefix, without a system nlohmann_json ------------------------
wheel_build = os.path.join(WORK, "wheel")
must([CMAKE, "-S", EXAMPLE, "-B", wheel_build, "-DCMAKE_BUILD_TYPE=Release",
      f"-DCMAKE_PREFIX_PATH={tensordict_cpp.cmake_prefix_path};{TORCH_PREFIX}",
      "-DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=TRUE",
      f"-DPython3_EXECUTABLE={sys.executable}"])
must([CMAKE, "--build", wheel_build, "-j", "2"])
library = os.path.join(wheel_build, "libcorridor_env.so")
check(os.path.isfile(library), "wheel: the env's shared library is built")
out = must([os.path.join(wheel_build, "collect_corridor"), library]).stdout
check("registered Corridor-v0" in out and "frames=640" in out,
      "wheel: a program loads the library and collects the env", out)
bad = run([os.path.join(wheel_build, "collect_corridor"), "/nonexistent/libnope.so"])
check(bad.returncode == 1 and "cannot load '/nonexistent/libnope.so'" in bad.stderr,
      "a library that does not load is a clear error", bad.stderr)

# --- 3. Python: the extension, load_env_library, tensordict_cpp.Collector ---------
package = os.path.join(WORK, "actor.pt2")
must([sys.executable, os.path.join(HERE, "torchrl_worker_policy.py"), package], cwd=WORK)
result = python(f"""
    import torch, tensordict_cpp
    assert "Corridor-v0" not in tensordict_cpp.registered_envs()
    import corridor_envs
    assert "Corridor-v0" in tensordict_cpp.registered_envs(), tensordict_cpp.registered_envs()
    collector = tensordict_cpp.Collector(
        env="Corridor-v0", policy={package!r}, frames_per_batch=32,
        total_frames=96, num_envs=4, seed=1, env_kwargs={{"max_steps": 5}})
    batches = list(collector)
    assert len(batches) == 3, len(batches)
    b = batches[0]
    assert b.batch_size == torch.Size([4, 8]), b.batch_size
    assert b["next", "observation"].shape == (4, 8, 4)
    # max_steps=5: every sub-env is truncated at its fifth step.
    assert b["next", "truncated"][:, 4].all(), b["next", "truncated"]
    try:
        tensordict_cpp.Collector(env="Corridor-v0", policy={package!r},
                                 frames_per_batch=8, env_kwargs={{"lenght": 2.0}})
    except ValueError as e:
        assert "Corridor-v0: unknown keyword argument 'lenght'; the env takes 'length', 'max_steps'" in str(e), e
    else:
        raise AssertionError("an unknown keyword argument was accepted")
    print("collected", sum(x.numel() for x in batches))
""", extra_path=[wheel_build])
check(result.returncode == 0 and "collected 96" in result.stdout,
      "import corridor_envs: tensordict_cpp.Collector collects the env with env_kwargs",
      result.stdout + result.stderr)
result = python(f"""
    import torch, tensordict_cpp, _ctypes
    names = tensordict_cpp.load_env_library({library!r})
    assert names == ["Corridor-v0"], names
    assert tensordict_cpp.load_env_library({library!r}) == names
    for path, text in [("/nonexistent/lib.so", "cannot load"),
                       (tensordict_cpp._C.__file__, "registered no env")]:
        try:
            tensordict_cpp.load_env_library(path)
        except ValueError as e:
            assert text in str(e), e
        else:
            raise AssertionError(path)
    print("loaded")
""")
check(result.returncode == 0 and "loaded" in result.stdout,
      "tensordict_cpp.load_env_library: names, a second load, and clear errors",
      result.stdout + result.stderr)

# torch.distributions.OneHotCategorical samples float one-hots: the C++
# CartPole takes them, and the batch keeps the policy's dtype, as TorchRL's.
float_package = os.path.join(WORK, "float_actor.pt2")
result = python(f"""
    import torch, tensordict_cpp
    from tensordict import TensorDict
    from tensordict.nn import (ProbabilisticTensorDictModule,
                               ProbabilisticTensorDictSequential, TensorDictModule)
    torch.manual_seed(0)
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(torch.nn.Linear(4, 2), ["observation"], ["logits"]),
        ProbabilisticTensorDictModule(
            in_keys=["logits"], out_keys=["action"], return_log_prob=True,
            distribution_class=torch.distributions.OneHotCategorical))
    example = TensorDict(observation=torch.zeros(4, 4), batch_size=[4])
    tensordict_cpp.export(actor, example, {float_package!r})
    collector = tensordict_cpp.Collector("CartPole-v1", {float_package!r},
                                         frames_per_batch=64, num_envs=4, seed=0)
    batch = next(iter(collector))
    action = batch["action"]
    assert action.dtype == torch.float32, action.dtype
    assert ((action == 0) | (action == 1)).all() and (action.sum(-1) == 1).all()
    collector.shutdown()
    print("float one-hot", tuple(action.shape))
""")
check(result.returncode == 0 and "float one-hot (4, 16, 2)" in result.stdout,
      "a torch OneHotCategorical actor collects CartPole; the batch keeps float",
      result.stdout + result.stderr)

# --- 4. TorchRL: CppEnv -------------------------------------------------------------
result = python("""
    import torch, tensordict_cpp
    import corridor_envs
    from tensordict_cpp.envs import CppEnv
    from torchrl.envs import (Compose, ObservationNorm, RewardSum, StepCounter,
                              TransformedEnv)
    from torchrl.envs.utils import check_env_specs
    from torchrl.collectors import Collector
    for env in (CppEnv("Corridor-v0", 4, max_steps=20), CppEnv("CartPole-v1", 8),
                CppEnv("CartPole-v1", 3, categorical_action_encoding=True)):
        check_env_specs(env)
        env.set_seed(0)
    env = CppEnv("CartPole-v1", 3, categorical_action_encoding=True)
    assert env.action_spec.shape == torch.Size([3]), env.action_spec
    # The dicts come back on the env's device (no per-step .to(device)).
    cpu = torch.device("cpu")
    root = env.reset()
    assert root.device == cpu, root.device
    root["action"] = env.action_spec.rand()
    stepped = env.step(root)
    assert stepped["next"].device == cpu, stepped["next"].device
    assert env._step(root).device == cpu
    t = TransformedEnv(CppEnv("Corridor-v0", 4, max_steps=20), Compose(
        StepCounter(), RewardSum(),
        ObservationNorm(loc=0.0, scale=2.0, in_keys=["observation"])))
    check_env_specs(t)
    r = t.rollout(50, break_when_any_done=False)
    assert r.batch_size == torch.Size([4, 50]), r.batch_size
    assert r["next", "step_count"].max() == 20, r["next", "step_count"].max()
    collector = Collector(CppEnv("Corridor-v0", 4), policy=None, frames_per_batch=64,
                          total_frames=128)
    frames = sum(b.numel() for b in collector)
    collector.shutdown()
    assert frames == 128, frames
    try:
        CppEnv("Corridor-v0", 2, width=3)
    except ValueError as e:
        assert "unknown keyword argument 'width'" in str(e), e
    else:
        raise AssertionError("unknown kwarg accepted")
    print("torchrl ok")
""", interpreter=TORCHRL_PYTHON, extra_path=[wheel_build])
check(result.returncode == 0 and "torchrl ok" in result.stdout,
      "CppEnv: check_env_specs, transforms, rollout and TorchRL's Collector",
      result.stdout + result.stderr)

# --- 5. the installed worker with --env-library ------------------------------------
worker = os.path.join(os.path.dirname(tensordict_cpp.__file__), "bin", "torchrl_worker")
check(os.path.isfile(worker), "the package ships the worker binary")
result = run([TORCHRL_PYTHON, os.path.join(HERE, "torchrl_worker_example_test.py"),
              worker, os.path.join(WORK, "worker"), sys.executable,
              "--env", "Corridor-v0", "--env-library", library,
              "--env-kwargs", '{"max_steps": 6}'],
             env=dict(os.environ, GLOO_SOCKET_IFNAME="lo",
                      LD_LIBRARY_PATH=os.path.join(os.path.dirname(torch.__file__), "lib")))
check(result.returncode == 0 and "OK" in result.stdout,
      "the installed worker serves the env to a stock DistributedCollector learner",
      result.stdout[-3000:] + result.stderr[-3000:])

print(f"{passed} passed, 0 failed")
