"""tensordict_mujoco through the Python door, as a user gets it: the env
library built on its own against the installed wheel (its
tensordict_cpp.cmake_prefix_path), loaded with
tensordict_cpp.load_env_library, and each env made as
tensordict_cpp.envs.CppEnv passes TorchRL's check_env_specs; a seeded
reset equals gymnasium's reset(seed=s + i), and a rollout runs through
resets.

The wheel must carry rl::NumpyGenerator (libtensordict of this branch or
later). An installed wheel that predates it cannot load the library: the
test then says so and is skipped (exit 77).

Usage (TorchRL's Python): mujoco_cppenv_test.py SOURCE_DIR WORK_DIR CMAKE
"""

import os
import shutil
import subprocess
import sys

import gymnasium as gym
import numpy as np
import torch

SKIP = 77
source, work, cmake = sys.argv[1], sys.argv[2], sys.argv[3]

import tensordict_cpp  # noqa: E402

shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)

header = os.path.join(tensordict_cpp.cmake_prefix_path, "..", "..", "include",
                      "tensordict", "rl", "numpy_random.h")
wheel_headers = [os.path.join(tensordict_cpp.__path__[0], "include", "tensordict", "rl",
                              "numpy_random.h"), os.path.normpath(header)]
if not any(os.path.isfile(h) for h in wheel_headers):
    print("SKIPPED: the installed tensordict_cpp predates rl::NumpyGenerator "
          f"(no {wheel_headers[0]}); rebuild the wheel from this tree")
    sys.exit(SKIP)


def must(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


build = os.path.join(work, "build")
must([cmake, "-S", os.path.join(source, "envs", "mujoco"), "-B", build,
      "-DCMAKE_BUILD_TYPE=Release",
      f"-DCMAKE_PREFIX_PATH={tensordict_cpp.cmake_prefix_path};{torch.utils.cmake_prefix_path}",
      f"-DTENSORDICT_MUJOCO_PYTHON={sys.executable}"])
must([cmake, "--build", build, "-j", "2"])
library = os.path.join(build, "libtensordict_mujoco.so")
if not os.path.isfile(library):
    sys.exit(f"no {library} was built")

try:
    names = tensordict_cpp.load_env_library(library)
except ValueError as error:
    if "NumpyGenerator" in str(error):
        print(f"SKIPPED: the installed tensordict_cpp predates rl::NumpyGenerator: {error}")
        sys.exit(SKIP)
    raise
expected = ["Ant-v5", "HalfCheetah-v5", "Hopper-v5", "Walker2d-v5"]
if sorted(names) != expected:
    sys.exit(f"load_env_library registered {names}, expected {expected}")

from tensordict_cpp.envs import CppEnv  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

for name in expected:
    env = CppEnv(name, 3)
    check_env_specs(env)
    env.set_seed(42)
    td = env.reset()
    for i in range(3):
        want, _ = gym.make(name).reset(seed=42 + i)
        got = td["observation"][i].numpy()
        if not np.array_equal(got.view(np.uint64), want.view(np.uint64)):
            sys.exit(f"{name}: CppEnv's reset of sub-env {i} differs from gymnasium's "
                     f"reset(seed={42 + i}):\n{got}\n{want}")
    rollout = env.rollout(200, break_when_any_done=False)
    if rollout["next", "x_velocity"].dtype != torch.float64 or rollout.batch_size != (3, 200):
        sys.exit(f"{name}: rollout {rollout}")
    print(f"{name}: CppEnv passes check_env_specs; seeded resets equal gymnasium's; "
          f"a 200-step rollout ran ({int(rollout['next', 'done'].sum())} episodes ended)")

try:
    CppEnv("Hopper-v5", 1, healthy_rewrd=1.0)
    sys.exit("an unknown keyword argument was taken")
except ValueError as error:
    if "healthy_rewrd" not in str(error):
        sys.exit(f"the refusal does not name the argument: {error}")
print("CppEnv refuses an unknown keyword argument, naming it")
