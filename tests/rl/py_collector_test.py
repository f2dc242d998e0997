#!/usr/bin/env python3
"""tensordict_cpp.Collector (the C++ collector in the Python process)
against TorchRL 0.14.1's Collector and against rl::Collector run directly.

usage: py_collector_test.py REFERENCE_EXE WORK_DIR

REFERENCE_EXE is py_collector_reference (rl::Collector without Python).
Run by the TorchRL venv's Python (tensordict 0.14.3), the policy is TorchRL's
CartPole PPO actor (a ProbabilisticActor: MLP -> logits ->
OneHotCategorical, return_log_prob) on "CartPole-v1", and the layout is
compared with TorchRL's own Collector. Run by a Python without TorchRL
(the system one, tensordict 0.15.3), the policy is a tensordict.nn
ProbabilisticTensorDictSequential (Linear -> NormalParamExtractor ->
torch.distributions.Normal, return_log_prob) on "PointMass". Checked in
both:

1. every batch is a tensordict.TensorDict of the layout TorchRL gives ([T]
   for one env, [N, T] for N; ("next", ...), ("collector", "traj_ids"), the
   policy's outputs), and, with TorchRL, exactly the keys, dtypes, shapes
   and batch sizes of TorchRL's Collector batch on GymEnv("CartPole-v1")
   (and SerialEnv of 4) with the same actor; len() and total_frames as
   TorchRL's;
2. the values equal rl::Collector's (py_collector_reference, same package,
   seeds, options, 2 threads), and a batch kept stays valid (unchanged)
   after the next batches; with return_same_td=True the batches share
   their tensors, overwritten;
3. weights given from Python (TensorDict.from_module of another actor, its
   .data, a flat dict, the module; from another thread while collecting)
   show in the next batch: its parameters and log-probs are those the
   Python actor with the new weights computes for the batch's observations
   and actions; a wrong key or shape raises KeyError/ValueError naming the
   key, and the weights in use stay;
4. set_seed gives the batch of a fresh collector with that seed; shutdown
   ends iteration; bad arguments raise clear errors;
5. the GIL is released while a batch is collected (a Python thread runs);
6. 300 iterations keep RSS, the batch's refcount and the number of live
   TensorDicts stable.
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import threading
import time
import warnings

import torch
import tensordict
from tensordict import TensorDict

warnings.filterwarnings("ignore")

import tensordict_cpp  # noqa: E402

try:
    import torchrl  # noqa: F401

    HAVE_TORCHRL = True
except ImportError:
    HAVE_TORCHRL = False

TORCH_SEED = 11
ENV_SEED = 5


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def check(cond, msg):
    if not cond:
        fail(msg)


# --- the actors ------------------------------------------------------------------


def torchrl_actor(seed):
    from tensordict.nn import TensorDictModule
    from torch import nn
    from torchrl.data import OneHot
    from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor

    torch.manual_seed(seed)
    net = MLP(in_features=4, out_features=2, num_cells=[64, 64], activation_class=nn.Tanh)
    return ProbabilisticActor(
        TensorDictModule(net, in_keys=["observation"], out_keys=["logits"]),
        in_keys=["logits"],
        out_keys=["action"],
        spec=OneHot(2),
        distribution_class=OneHotCategorical,
        return_log_prob=True,
    )


def tensordict_nn_actor(seed):
    from tensordict.nn import (
        NormalParamExtractor,
        ProbabilisticTensorDictModule,
        ProbabilisticTensorDictSequential,
        TensorDictModule,
    )
    from torch import nn

    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 4), NormalParamExtractor())
    return ProbabilisticTensorDictSequential(
        TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
        ProbabilisticTensorDictModule(
            in_keys=["loc", "scale"],
            out_keys=["action"],
            distribution_class=torch.distributions.Normal,
            return_log_prob=True,
        ),
    )


if HAVE_TORCHRL:
    ENV, make_actor, PARAM_KEYS = "CartPole-v1", torchrl_actor, ["logits"]
else:
    ENV, make_actor, PARAM_KEYS = "PointMass", tensordict_nn_actor, ["loc", "scale"]


def export_actor(work):
    path = os.path.join(work, "actor.pt2")
    example = TensorDict(observation=torch.randn(4, 4), batch_size=[4])
    tensordict_cpp.export(make_actor(0), example, path)
    return path


def collector(package, **kwargs):
    kwargs.setdefault("frames_per_batch", 64)
    return tensordict_cpp.Collector(ENV, package, **kwargs)


def log_prob_key(batch):
    keys = [k for k in batch.keys() if isinstance(k, str) and k.endswith("log_prob")]
    check(len(keys) == 1, f"expected one log-prob key in the batch, got {list(batch.keys())}")
    return keys[0]


# --- 1. layout ------------------------------------------------------------------------


def leaves(td):
    return {
        key: (td.get(key).dtype, tuple(td.get(key).shape))
        for key in td.keys(include_nested=True, leaves_only=True)
    }


def sub_batch_sizes(td):
    return {
        key: tuple(td.get(key).batch_size)
        for key in td.keys(include_nested=True)
        if isinstance(td.get(key), tensordict.TensorDictBase)
    }


def check_type(batch):
    check(type(batch) is tensordict.TensorDict,
          f"a batch must be a tensordict.TensorDict, got {type(batch)}")
    for key in batch.keys(include_nested=True):
        value = batch.get(key)
        check(type(value) in (TensorDict, torch.Tensor),
              f"entry {key!r} is a {type(value)}")


def check_layout(package):
    # One env: [T], as TorchRL's Collector on an unbatched env.
    c = collector(package, frames_per_batch=64, total_frames=200)
    check(len(c) == 4, f"len(collector) = {len(c)}, expected ceil(200 / 64) = 4")
    check(c.total_frames == 200, f"total_frames = {c.total_frames}")
    check(c.frames_per_batch == 64 and c.requested_frames_per_batch == 64,
          f"frames_per_batch {c.frames_per_batch}, requested {c.requested_frames_per_batch}")
    batches = list(c)
    check(len(batches) == 4, f"iteration gave {len(batches)} batches, expected 4")
    check(c.frames == 256, f"frames = {c.frames}, expected 256")
    for b in batches:
        check_type(b)
        check(tuple(b.batch_size) == (64,), f"batch size {tuple(b.batch_size)}, expected (64,)")
    one_env = batches[0]
    check(one_env["collector", "traj_ids"].dtype == torch.int64, "traj_ids dtype")
    ids = torch.cat([b["collector", "traj_ids"] for b in batches])
    check(bool((ids[1:] >= ids[:-1]).all()), "traj_ids must not decrease along time")
    # ("next", "done") steps start new trajectories, with the next id.
    done = torch.cat([b["next", "done"].squeeze(-1) for b in batches])
    check(torch.equal(ids[1:] - ids[:-1], done[:-1].long()),
          "traj_ids must grow by one exactly after each done step")
    # Several envs: [N, T], frames rounded up to a multiple of N.
    c4 = collector(package, frames_per_batch=62, total_frames=-1, num_envs=4)
    check(c4.requested_frames_per_batch == 64 and c4.frames_per_batch == 16,
          f"num_envs=4: requested {c4.requested_frames_per_batch}, per env {c4.frames_per_batch}")
    check(c4.total_frames == float("inf"), "endless total_frames must be inf")
    try:
        len(c4)
        fail("len() of an endless collector must raise")
    except RuntimeError:
        pass
    four_envs = next(iter(c4))
    check_type(four_envs)
    check(tuple(four_envs.batch_size) == (4, 16), f"batch size {tuple(four_envs.batch_size)}")
    c.shutdown()
    c4.shutdown()
    if not HAVE_TORCHRL:
        want = {"observation", "action", "loc", "scale", "done", "terminated", "truncated",
                ("next", "observation"), ("next", "reward"), ("next", "done"),
                ("next", "terminated"), ("next", "truncated"), ("collector", "traj_ids")}
        got = set(one_env.keys(include_nested=True, leaves_only=True))
        check(want <= got, f"missing keys {want - got}")
        print(f"layout: [T] and [4, T] batches, {len(got)} leaves")
        return
    from torchrl.collectors import Collector
    from torchrl.envs import GymEnv, SerialEnv

    actor = make_actor(0)
    for name, env, mine in (
        ("GymEnv", GymEnv("CartPole-v1"), one_env),
        ("SerialEnv(4)", SerialEnv(4, lambda: GymEnv("CartPole-v1")), four_envs),
    ):
        frames = 64
        ref = Collector(env, actor, frames_per_batch=frames, total_frames=200)
        check(len(ref) == len(c), f"len: TorchRL {len(ref)}, ours {len(c)}")
        check(ref.total_frames == c.total_frames, "total_frames differs from TorchRL's")
        theirs = next(iter(ref))
        ref.shutdown()
        check(type(theirs) is type(mine), f"{name}: type {type(theirs)} vs {type(mine)}")
        check(tuple(theirs.batch_size) == tuple(mine.batch_size),
              f"{name}: batch size TorchRL {tuple(theirs.batch_size)}, ours {tuple(mine.batch_size)}")
        lt, lm = leaves(theirs), leaves(mine)
        check(set(lt) == set(lm), f"{name}: keys differ: TorchRL only {set(lt) - set(lm)}, "
                                  f"ours only {set(lm) - set(lt)}")
        for key in lt:
            check(lt[key] == lm[key], f"{name}: {key!r}: TorchRL {lt[key]}, ours {lm[key]}")
        check(sub_batch_sizes(theirs) == sub_batch_sizes(mine),
              f"{name}: sub-dict batch sizes {sub_batch_sizes(theirs)} vs {sub_batch_sizes(mine)}")
    print(f"layout: {len(lt)} leaves equal TorchRL's ([T] and [4, T])")


# --- 2. values against rl::Collector ---------------------------------------------------


def check_values(package, exe, work):
    out = os.path.join(work, "reference")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    subprocess.run([exe, package, ENV, "4", "64", "3", "2", str(ENV_SEED), str(TORCH_SEED), out],
                   check=True, timeout=300)
    torch.manual_seed(TORCH_SEED)
    c = collector(package, frames_per_batch=64, num_envs=4, num_threads=2, seed=ENV_SEED)
    it = iter(c)
    kept = next(it)
    kept_copy = kept.clone()
    ours = [kept, next(it), next(it)]
    c.shutdown()
    check(next(it, None) is None, "iteration must end after shutdown")
    check(c.next() is None, "next() after shutdown must be None")
    check(torch.equal(kept["observation"], kept_copy["observation"])
          and (kept == kept_copy).all(),
          "a batch changed after the next batches were collected (it must stay valid)")
    # return_same_td: every batch over the same tensors, overwritten (a new
    # Python TensorDict each time, holding the same tensor objects).
    torch.manual_seed(TORCH_SEED)
    same = collector(package, frames_per_batch=64, num_envs=4, num_threads=2, seed=ENV_SEED,
                     return_same_td=True)
    first = same.next()
    first_values = first.clone()
    second = same.next()
    check(second["observation"] is first["observation"]
          and second["next", "observation"].data_ptr() == first["next", "observation"].data_ptr(),
          "return_same_td=True must yield the same tensors every batch")
    check(torch.equal(first_values["observation"], ours[0]["observation"])
          and torch.equal(first["observation"], ours[1]["observation"]),
          "return_same_td=True: the buffers must hold the latest batch")
    same.shutdown()
    for i, mine in enumerate(ours):
        ref = TensorDict.load_memmap(os.path.join(out, f"batch_{i}"))
        check(tuple(ref.batch_size) == tuple(mine.batch_size), f"batch {i}: batch size")
        lr, lm = leaves(ref), leaves(mine)
        check(lr == lm, f"batch {i}: layout differs from rl::Collector's: {lr} vs {lm}")
        for key in lr:
            check(torch.equal(ref.get(key), mine.get(key)),
                  f"batch {i}: {key!r} differs from rl::Collector's")
    print(f"values: 3 batches of [4, 16] equal rl::Collector's, {len(lr)} leaves each")


# --- 3. weights -------------------------------------------------------------------------


def python_outputs(actor, batch):
    """The parameters and log-prob the Python actor computes for the batch's
    observations and actions."""
    from tensordict.nn import set_interaction_type

    td = TensorDict(observation=batch["observation"].clone(), batch_size=batch.batch_size)
    with torch.no_grad(), set_interaction_type("random"):
        dist = actor.get_dist(td)
        lp = dist.log_prob(batch["action"])
    return td, lp


def check_matches_actor(actor, batch, what):
    td, lp = python_outputs(actor, batch)
    for key in PARAM_KEYS:
        check(torch.allclose(td[key], batch[key], atol=1e-5, rtol=1e-5),
              f"{what}: {key!r} is not the Python actor's (max diff "
              f"{(td[key] - batch[key]).abs().max().item():.3g})")
    cpp_lp = batch[log_prob_key(batch)]
    if lp.shape != cpp_lp.shape and lp.dim() > cpp_lp.dim():
        lp = lp.sum(-1)
    check(lp.shape == cpp_lp.shape, f"{what}: log-prob shape {tuple(lp.shape)} vs {tuple(cpp_lp.shape)}")
    check(torch.allclose(lp, cpp_lp, atol=1e-5, rtol=1e-5),
          f"{what}: the log-probs are not the Python actor's (max diff "
          f"{(lp - cpp_lp).abs().max().item():.3g})")


def check_weights(package):
    actor_a, actor_b = make_actor(0), make_actor(1)
    c = collector(package, frames_per_batch=64, num_envs=4, num_threads=2,
                  track_policy_version=True)
    first = c.next()
    check_matches_actor(actor_a, first, "exported weights")
    check(c.policy_version == 0, "policy_version before any update")
    c.update_policy_weights_(TensorDict.from_module(actor_b))
    second = c.next()
    check_matches_actor(actor_b, second, "after update_policy_weights_(from_module(b))")
    check(c.policy_version == 1, f"policy_version {c.policy_version}, expected 1")
    check(bool((second["next", "policy_version"] == 1).all()), "('next', 'policy_version')")
    # The batch collected before the update keeps its values.
    check_matches_actor(actor_a, first, "the batch before the update")

    # A wrong key, an unknown key, a wrong shape: refused, naming the key.
    good = TensorDict.from_module(actor_a).data
    name = c.weight_names[0]
    parts = tuple(name.split("."))
    missing = good.clone()
    del missing[parts]
    for bad, kind, text in (
        (missing, KeyError, name),
        (good.clone().set(("not_a", "weight"), torch.zeros(3)), KeyError, "not_a"),
        (good.clone().set(parts, torch.zeros(good[parts].shape[0] + 1)), ValueError, parts[-1]),
        (good.clone().set(parts, good[parts].double()), ValueError, "float64"),
    ):
        try:
            c.update_policy_weights_(bad)
            fail(f"weights with a bad {text!r} were accepted")
        except kind as e:
            check(text in str(e), f"the error does not name {text!r}: {e}")
    for bad in (42, "weights", [torch.zeros(2)]):
        try:
            c.update_policy_weights_(bad)
            fail(f"weights {bad!r} were accepted")
        except TypeError:
            pass
    try:
        c.update_policy_weights_()
        fail("update_policy_weights_() without weights must raise")
    except TypeError:
        pass
    third = c.next()
    check(c.policy_version == 1, "a refused update must not count")
    check_matches_actor(actor_b, third, "after refused updates (b must stay)")

    # .data, a flat dict with "." keys and the module itself.
    c.update_policy_weights_(TensorDict.from_module(actor_a).data)
    check_matches_actor(actor_a, c.next(), "after update_policy_weights_(.data)")
    flat = TensorDict.from_module(actor_b).flatten_keys(".")
    c.update_policy_weights_({k: v.detach() for k, v in flat.items()})
    check_matches_actor(actor_b, c.next(), "after update_policy_weights_(flat dict)")
    c.update_policy_weights_(actor_a)
    check_matches_actor(actor_a, c.next(), "after update_policy_weights_(module)")
    check(c.policy_version == 4, f"policy_version {c.policy_version}, expected 4")

    # Updates from another Python thread while batches are collected (the
    # GIL released): each batch is wholly a's or wholly b's.
    stop = threading.Event()
    weights = [TensorDict.from_module(actor_a).data, TensorDict.from_module(actor_b).data]
    errors = []

    def update():
        i = 0
        try:
            while not stop.is_set():
                c.update_policy_weights_(weights[i % 2])
                i += 1
        except Exception as e:  # reported below
            errors.append(e)

    thread = threading.Thread(target=update)
    thread.start()
    try:
        batches = [c.next() for _ in range(20)]
    finally:
        stop.set()
        thread.join()
    check(not errors, f"update_policy_weights_ from a thread failed: {errors}")
    check(c.policy_version > 4, "no update from the thread was applied")
    for i, b in enumerate(batches):
        for actor in (actor_a, actor_b):
            td, _ = python_outputs(actor, b)
            if torch.allclose(td[PARAM_KEYS[0]], b[PARAM_KEYS[0]], atol=1e-5, rtol=1e-5):
                check_matches_actor(actor, b, f"batch {i} during updates from a thread")
                break
        else:
            fail(f"batch {i} collected during updates from a thread is neither a's nor b's")
    c.shutdown()
    print("weights: updates show in the next batch; bad ones refused by key")


# --- 4. seeds, shutdown, errors ---------------------------------------------------------


def check_seed_and_errors(package, work):
    torch.manual_seed(1)
    c = collector(package, seed=3)
    c.next()
    check(c.set_seed(9) == 9, "set_seed must return the seed")
    torch.manual_seed(2)
    after = c.next()
    torch.manual_seed(2)
    fresh = collector(package, seed=9).next()
    # traj_ids go on counting across the reset (TorchRL's do too).
    ids = ("collector", "traj_ids")
    check((after.exclude(ids) == fresh.exclude(ids)).all(),
          "after set_seed(9) the batch must be a fresh seed-9 collector's")
    check(bool((after[ids] > fresh[ids]).all()), "traj_ids must go on after set_seed")
    c.shutdown()
    c.shutdown()  # idempotent
    check([b for b in c] == [], "no batches after shutdown")
    with collector(package, total_frames=64) as ctx:
        check(len(list(ctx)) == 1, "one batch for total_frames = frames_per_batch")

    cases = [
        (lambda: tensordict_cpp.Collector("NoSuchEnv-v0", package, frames_per_batch=8),
         ValueError, "NoSuchEnv-v0"),
        (lambda: tensordict_cpp.Collector(ENV, os.path.join(work, "missing.pt2"), frames_per_batch=8),
         FileNotFoundError, "missing.pt2"),
        (lambda: collector(package, frames_per_batch=0), ValueError, "frames_per_batch"),
        (lambda: collector(package, num_envs=0), ValueError, "num_envs"),
        (lambda: collector(package, num_threads=0), ValueError, "num_threads"),
        (lambda: collector(package, total_frames=0), ValueError, "total_frames"),
        (lambda: collector(package, exploration_type="greedy"), ValueError, "greedy"),
        (lambda: collector(package, frames_per_batch=8.5), TypeError, "frames_per_batch"),
    ]
    broken = os.path.join(work, "broken.pt2")
    with open(broken, "wb") as f:
        f.write(b"not a zip archive")
    cases.append((lambda: tensordict_cpp.Collector(ENV, broken, frames_per_batch=8),
                  RuntimeError, "broken.pt2"))
    for make, kind, text in cases:
        try:
            make()
            fail(f"expected {kind.__name__} mentioning {text!r}")
        except kind as e:
            check(text in str(e), f"{kind.__name__} does not mention {text!r}: {e}")
    # The package's actions do not fit the other env: a ValueError naming
    # the key at every try, never a silent end.
    other = "PointMass" if ENV == "CartPole-v1" else "CartPole-v1"
    mismatched = tensordict_cpp.Collector(other, package, frames_per_batch=8)
    for attempt in range(2):
        try:
            mismatched.next()
            fail(f"the {ENV} actor's actions were taken by {other}")
        except ValueError as e:
            check("'action'" in str(e), f"the error does not name 'action': {e}")
    mismatched.shutdown()
    print(f"seed/shutdown/errors: {len(cases)} bad arguments refused")


# --- 5. the GIL ------------------------------------------------------------------------


def check_gil_released(package):
    c = collector(package, frames_per_batch=16_000, num_envs=8)
    c.next()  # warm up
    count = [0]
    running = threading.Event()
    stop = threading.Event()

    def spin():
        running.set()
        while not stop.is_set():
            count[0] += 1

    thread = threading.Thread(target=spin)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    try:
        thread.start()
        running.wait()
        before = count[0]
        c.next()
        during = count[0] - before
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(old)
        c.shutdown()
    # With the GIL held for the whole batch the thread could not count at all.
    check(during > 1000, f"a Python thread counted only {during} while a batch was collected")
    print(f"GIL: a Python thread counted {during} while a batch was collected")


# --- 6. leaks -----------------------------------------------------------------------------


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def live_tensordicts():
    return sum(1 for o in gc.get_objects() if isinstance(o, tensordict.TensorDictBase))


def check_leaks(package):
    c = collector(package, frames_per_batch=1024, num_envs=8, num_threads=2)
    refcounts, leaf_refcounts = set(), set()
    rss = {}
    gc.collect()
    # The object census allocates a list of every object, which moves RSS:
    # taken only before and after the loop, whose RSS is read without it.
    live = live_tensordicts()
    for i, batch in enumerate(c):
        refcounts.add(sys.getrefcount(batch))
        leaf_refcounts.add(sys.getrefcount(batch["next", "observation"]))
        if i in (100, 300):
            gc.collect()
            rss[i] = rss_bytes()
        if i == 300:
            break
    c.shutdown()
    batch_bytes = sum(t.numel() * t.element_size()
                      for t in batch.values(include_nested=True, leaves_only=True))
    del batch
    gc.collect()
    live_end = live_tensordicts()
    growth = rss[300] - rss[100]
    # 200 leaked batches would be 200 * batch_bytes (about 16 MiB here);
    # the allocator's own noise stays well under a quarter of that.
    check(growth < 50 * batch_bytes, f"RSS grew by {growth / 2**20:.1f} MiB over 200 batches "
                                     f"of {batch_bytes / 2**10:.0f} KiB")
    check(len(refcounts) == 1, f"the batch's refcount varied: {sorted(refcounts)}")
    check(len(leaf_refcounts) == 1, f"a leaf's refcount varied: {sorted(leaf_refcounts)}")
    check(live_end == live, f"live TensorDicts went from {live} to {live_end} over 300 batches")
    print(f"leaks: RSS {growth / 2**20:+.2f} MiB over 200 batches of {batch_bytes / 2**10:.0f} KiB, "
          f"refcount {refcounts.pop()}, live TensorDicts {live} before and after")


def main():
    exe, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    torch.set_num_threads(1)
    print(f"tensordict {tensordict.__version__}, TorchRL: {HAVE_TORCHRL}, env {ENV}")
    start = time.perf_counter()
    package = export_actor(work)
    print(f"exported the actor in {time.perf_counter() - start:.0f} s")
    for step, args in (
        (check_layout, (package,)),
        (check_values, (package, exe, work)),
        (check_weights, (package,)),
        (check_seed_and_errors, (package, work)),
        (check_gil_released, (package,)),
        (check_leaks, (package,)),
    ):
        # TorchRL's SerialEnv changes torch's thread count; the package's
        # kernels would then wait on an oversubscribed thread pool.
        torch.set_num_threads(1)
        start = time.perf_counter()
        step(*args)
        print(f"  ({step.__name__}: {time.perf_counter() - start:.1f} s)")
    print("OK")


if __name__ == "__main__":
    main()
