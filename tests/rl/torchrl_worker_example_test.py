"""tools/torchrl_worker (C++ CartPole, an AOTInductor policy, the C++
collector) as the worker of a stock TorchRL 0.14.1 DistributedCollector.

Usage: torchrl_worker_example_test.py WORKER_EXE WORK_DIR EXPORT_PYTHON
           [--env NAME] [WORKER_ARG...]

With --env, the worker serves that env (any env of CartPole's layout:
observation float32 [4], a OneHot(2) action), and WORKER_ARGs go to it
(--env-library PATH, --env-kwargs JSON): tests/rl/custom_env_test.py serves
an env built outside the library that way. The reward of 1 a step is
checked for CartPole only.

EXPORT_PYTHON is a Python with tensordict_cpp, which exports the policy of
torchrl_worker_policy.py; the learner (this process, in TorchRL's venv) runs
the same policy eagerly and sends its weights. Checks, on every batch: the
layout equals a local TorchRL Collector batch, the logits are the learner's
current weights applied to the observations, the actions are their one-hot
argmax, the steps chain (next observation = following observation until a
done step); and across batches: a weights update visible in the next batch,
NaN weights refused (the learner raises, the worker keeps its weights),
set_seed giving the same batch twice, a clean shutdown with the worker's
counts. Every wait is bounded; all traffic stays on 127.0.0.1.
"""

import functools
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torchrl_worker_test as base  # noqa: E402  (pins loopback on import)
import torch  # noqa: E402
from torchrl.collectors import Collector  # noqa: E402
from torchrl.collectors.distributed import DistributedCollector  # noqa: E402
from torchrl.envs import GymEnv  # noqa: E402
from torchrl_worker_policy import make_policy  # noqa: E402

FRAMES = 16
BATCHES = 5


def layout(td):
    return sorted(
        (str(k), td.get(k).dtype, tuple(td.get(k).shape)) for k in td.keys(True, True)
    )


def local_layout(policy):
    local = Collector(
        GymEnv("CartPole-v1"),
        policy=policy,
        frames_per_batch=FRAMES,
        total_frames=-1,
        split_trajs=False,
        return_same_td=True,
    )
    for batch in local:
        out = layout(batch)
        break
    local.shutdown()
    return out


def check_batch(i, data, weight, bias, expected_layout, cartpole=True):
    assert layout(data) == expected_layout, f"batch {i}: {layout(data)}"
    obs = data["observation"]
    want = obs @ weight.T + bias
    torch.testing.assert_close(
        data["logits"], want, rtol=1e-5, atol=1e-5, msg=f"batch {i}: logits"
    )
    onehot = torch.nn.functional.one_hot(data["logits"].argmax(-1), 2)
    assert torch.equal(data["action"], onehot), f"batch {i}: action"
    if cartpole:
        assert (data["next", "reward"] == 1).all(), f"batch {i}: reward"
    done = data["next", "done"].squeeze(-1)
    flags = data["next", "terminated"] | data["next", "truncated"]
    assert torch.equal(data["next", "done"], flags), f"batch {i}: done"
    for t in range(FRAMES - 1):
        if not done[t]:
            assert torch.equal(data["next", "observation"][t], obs[t + 1]), (i, t)
    traj = data["collector", "traj_ids"]
    assert (traj[1:] >= traj[:-1]).all(), f"batch {i}: traj_ids {traj}"
    return int(done.sum())


def main():
    exe, work_dir, export_python = sys.argv[1], sys.argv[2], sys.argv[3]
    env_name, worker_args = "CartPole-v1", sys.argv[4:]
    if worker_args[:1] == ["--env"]:
        env_name, worker_args = worker_args[1], worker_args[2:]
    os.makedirs(work_dir, exist_ok=True)
    package = os.path.join(work_dir, "actor.pt2")
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run(
        [export_python, os.path.join(here, "torchrl_worker_policy.py"), package],
        check=True,
        timeout=280,
        cwd=work_dir,
        stdout=subprocess.DEVNULL,
    )
    port = base.free_base_port()
    worker = subprocess.Popen(
        [
            exe,
            "--master", f"127.0.0.1:{port}",
            "--rank", "1",
            "--world-size", "2",
            "--policy", package,
            "--env", env_name,
            "--frames-per-batch", str(FRAMES),
            "--timeout-s", "30",
            "--idle-timeout-s", "120",
            *worker_args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    policy = make_policy()
    linear = policy.module[0].module
    expected_layout = local_layout(make_policy())
    try:
        collector = DistributedCollector(
            [functools.partial(GymEnv, "CartPole-v1")],
            policy,
            frames_per_batch=FRAMES,
            total_frames=FRAMES * BATCHES,
            launcher="submitit_delayed",
            backend="gloo",
            tcp_port=port,
        )
    except BaseException:
        worker.kill()
        print(worker.communicate()[1])
        raise
    weights = (linear.weight.detach().clone(), linear.bias.detach().clone())
    batches, dones, seeded = [], 0, []
    try:
        for i, data in enumerate(collector):
            dones += check_batch(
                i, data, *weights, expected_layout, cartpole=env_name == "CartPole-v1"
            )
            batches.append(data.clone())
            with torch.no_grad():
                if i == 0:
                    linear.weight.mul_(-1.5)
                    linear.bias.copy_(torch.tensor([0.3, -0.3]))
                    collector.update_policy_weights_()
                elif i == 1:
                    good = linear.weight.clone()
                    linear.weight[1, 2] = float("inf")
                    try:
                        collector.update_policy_weights_()
                    except RuntimeError as e:
                        msg = str(e)
                        assert "refused" in msg, msg
                        assert "('module', '0', 'module', 'weight')" in msg, msg
                    else:
                        raise AssertionError("infinite weights were not refused")
                    linear.weight.copy_(good)
                    seeded.append(collector.set_seed(7))
                elif i == 2:
                    seeded.append(collector.set_seed(7))
            weights = (linear.weight.detach().clone(), linear.bias.detach().clone())
    finally:
        collector.shutdown()
    out, err = base.finish(worker, "example")[1:]
    assert worker.returncode == 0, f"worker failed ({worker.returncode}):\n{err}"
    assert len(batches) == BATCHES, len(batches)
    assert seeded == [7, 7], seeded
    # The same seed, the same weights: the batch after each set_seed(7) is
    # the same, step for step.
    for key in ("observation", "action", "logits", ("next", "observation")):
        assert torch.equal(batches[2][key], batches[3][key]), key
    assert not torch.equal(batches[1]["observation"], batches[2]["observation"])
    counts = (
        f"batches={BATCHES} frames={BATCHES * FRAMES} weight_updates=2 "
        "weights_refused=1 seeds=2"
    )
    assert out.strip() == counts, out
    print(
        f"example worker on {env_name}: {BATCHES} batches of {FRAMES} checked "
        f"({dones} episode ends), {out.strip()}"
    )
    print("OK")


if __name__ == "__main__":
    main()
