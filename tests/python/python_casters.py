#!/usr/bin/env python3
"""The pybind11 casters of tensordict/python.h against the installed package.

Drives the python_casters extension (tests/python/python_casters.cpp):
round trips of every entry kind (values, shapes, dtypes, device, dim names,
nested dicts, non-tensor data and stacks, lazy stacks, a TensorClass as its
dict), shared storage (written through one side, read through the other),
no leak over 100,000 conversions each way (refcounts, tracemalloc and RSS),
and the TypeErrors that name the key. Every dict C++ hands over is checked
with tensordict.utils._check_invariants, since it is built without
validation.

usage: python_casters.py MODULE_DIR
"""

import gc
import sys
import tracemalloc

import torch
import tensordict
from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    tensorclass,
)
from tensordict.utils import _check_invariants

sys.path.insert(0, sys.argv[1])
import python_casters as ext  # noqa: E402

FAILURES = []
CHECKS = [0]


def check(cond, what):
    CHECKS[0] += 1
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)


def check_tree(td):
    """_check_invariants on every dict of the tree, lazy stacks' elements too."""
    if isinstance(td, LazyStackedTensorDict):
        for sub in td.tensordicts:
            check_tree(sub)
        return
    _check_invariants(td)
    for value in td._tensordict.values():
        if isinstance(value, TensorDict) or (
            isinstance(value, LazyStackedTensorDict) and not isinstance(value, NonTensorStack)
        ):
            check_tree(value)


def same_tree(a, b, path=()):
    """Entry by entry: types, keys in order, tensors identical (same
    object), non-tensor values, batch sizes, devices and names."""
    check(type(a) is type(b), f"{path}: type {type(a)} vs {type(b)}")
    check(a.batch_size == b.batch_size, f"{path}: batch size {a.batch_size} vs {b.batch_size}")
    check(a.device == b.device, f"{path}: device {a.device} vs {b.device}")
    check(list(a.names) == list(b.names), f"{path}: names {a.names} vs {b.names}")
    if isinstance(a, NonTensorStack):
        check(a.tolist() == b.tolist(), f"{path}: stack {a.tolist()} vs {b.tolist()}")
        return
    if isinstance(a, LazyStackedTensorDict):
        check(a.stack_dim == b.stack_dim, f"{path}: stack dim {a.stack_dim} vs {b.stack_dim}")
        check(len(a.tensordicts) == len(b.tensordicts), f"{path}: stack length")
        for i, (x, y) in enumerate(zip(a.tensordicts, b.tensordicts)):
            same_tree(x, y, path + (i,))
        return
    check(list(a._tensordict) == list(b._tensordict), f"{path}: keys {list(a._tensordict)} vs {list(b._tensordict)}")
    for key, x in a._tensordict.items():
        y = b._tensordict.get(key)
        if isinstance(x, torch.Tensor):
            check(x is y, f"{path + (key,)}: tensor is not the same object")
        elif isinstance(x, NonTensorData):
            check(type(y) is NonTensorData and x.data == y.data, f"{path + (key,)}: {x} vs {y}")
            check(x.batch_size == y.batch_size, f"{path + (key,)}: non-tensor batch size")
        else:
            same_tree(x, y, path + (key,))


def python_sample():
    td = TensorDict(
        {
            "obs": torch.randn(3, 4),
            "i8": torch.arange(3, dtype=torch.int8),
            "bf": torch.ones(3, 2, dtype=torch.bfloat16),
            "c64": torch.zeros(3, dtype=torch.complex64),
            "bool": torch.tensor([True, False, True]),
            "scalar_ish": torch.zeros(3, 1, 1),
            "noncontig": torch.randn(4, 3).t(),
            "next": {"reward": torch.ones(3, 1), "deep": {"x": torch.zeros(3, 2, 2)}},
        },
        batch_size=[3],
        names=["env"],
    )
    td["text"] = NonTensorData("hello", batch_size=[3])
    td["meta"] = NonTensorData({"a": [1, 2.5, None, True], "b": {"c": "d"}}, batch_size=[3])
    td["big"] = NonTensorData(2**63 + 5, batch_size=[3])
    td["words"] = NonTensorStack.from_list(["a", "b", "c"])
    td["lazy"] = LazyStackedTensorDict(
        TensorDict(a=torch.zeros(3, 2), batch_size=[3]),
        TensorDict(a=torch.ones(3, 2), batch_size=[3]),
        stack_dim=1,
        stack_dim_name="agent",
    )
    return td


def test_round_trips():
    td = python_sample()
    back = ext.identity(td)
    check(back is not td, "identity returns a new Python object")
    same_tree(td, back)
    check_tree(back)
    check(back["big"] == 2**63 + 5, "an unsigned 64-bit int survives")
    check(back.names == ["env"], f"names {back.names}")
    check(back["next"].names == ["env"], f"nested names {back['next'].names}")
    # Shapes, dtypes and strides of a tensor are its own: same object.
    check(back["noncontig"].stride() == td["noncontig"].stride(), "strides")

    # C++-built dict: every kind, and a second round trip is stable.
    cpp = ext.sample()
    check_tree(cpp)
    check(type(cpp) is TensorDict, "C++ gives a real TensorDict")
    check(cpp.batch_size == torch.Size([3]), f"batch size {cpp.batch_size}")
    check(cpp["obs"].dtype == torch.float32 and cpp["obs"].shape == (3, 4), "obs")
    check(cpp["half"].dtype == torch.float16, "half")
    check(cpp["next", "deep", "x"].dtype == torch.uint8, "nested uint8")
    check(cpp["task"] == "reach", f"task {cpp['task']}")
    check(cpp["meta"] == {"seed": 7, "tags": ["a", "b"], "ok": True}, f"meta {cpp['meta']}")
    check(cpp["none"] is None, f"none {cpp.get('none')}")
    check(isinstance(cpp.get("words"), NonTensorStack), "words is a NonTensorStack")
    check(cpp["words"] == ["x", 1, {"k": 2.5}], f"words {cpp['words']}")
    lazy = cpp.get("stack")
    check(type(lazy) is LazyStackedTensorDict, f"stack type {type(lazy)}")
    check(lazy.stack_dim == 1 and lazy.batch_size == torch.Size([3, 2]), f"lazy {lazy.batch_size}")
    check(lazy.names == [None, "agents"], f"lazy names {lazy.names}")
    check(torch.equal(lazy["a"], torch.stack([torch.zeros(3, 2), torch.ones(3, 2)], 1)), "lazy a")
    again = ext.identity(cpp)
    same_tree(cpp, again)
    check(
        [k if isinstance(k, str) else k for k in cpp.keys(True)] == list(again.keys(True)),
        "nested key order",
    )
    # Python's own ops work on what C++ made.
    check(torch.equal((cpp.exclude("task", "meta", "none", "words", "stack") + 0)["obs"], cpp["obs"]), "ops")
    check(cpp[0].batch_size == torch.Size([]), "indexing")

    # Lazy stacks, non-tensor data and stacks on their own.
    stack = td.get("lazy")
    same_tree(stack, ext.identity_lazy(stack))
    d = NonTensorData({"x": [1, 2]}, batch_size=[2, 2])
    d2 = ext.identity_non_tensor(d)
    check(type(d2) is NonTensorData and d2.data == d.data and d2.batch_size == d.batch_size, "NonTensorData")
    s = NonTensorStack.from_list([["a", "b"], ["c", "d"], ["e", "f"]])
    s2 = ext.identity_non_tensor_stack(s)
    check(s2.batch_size == torch.Size([3, 2]) and s2.tolist() == s.tolist(), f"stack {s2.tolist()}")
    check(ext.identity_value(torch.ones(2)) is not None, "value of a tensor")
    t = torch.ones(2)
    check(ext.identity_value(t) is t, "a tensor crosses as itself")

    # Devices and locks.
    dev = TensorDict(a=torch.zeros(2), batch_size=[2], device="cpu")
    back = ext.identity(dev)
    check(back.device == torch.device("cpu"), f"device {back.device}")
    check(ext.describe(dev)["device"] == "cpu", "C++ sees the device")
    locked = TensorDict(a=torch.zeros(2), batch_size=[2]).lock_()
    check(ext.describe(locked)["locked"], "C++ sees the lock")
    check(ext.identity(locked).is_locked, "lock survives")
    check_tree(ext.identity(locked))
    # Empty dicts and batch sizes with several dims.
    empty = TensorDict(batch_size=[2, 5])
    check(ext.identity(empty).batch_size == torch.Size([2, 5]), "empty")
    desc = ext.describe(python_sample())
    check(desc["batch_size"] == [3] and desc["names"] == ["env"], f"describe {desc}")
    check("('next', 'deep', 'x')" in desc["keys"], f"keys {desc['keys']}")


def test_tensorclass():
    @tensorclass
    class Step:
        obs: torch.Tensor
        reward: torch.Tensor
        task: str

    step = Step(obs=torch.zeros(2, 3), reward=torch.ones(2), task="walk", batch_size=[2])
    check(ext.step_task(step) == "walk", "tensorclass -> C++ TensorClass")
    out = ext.identity_step(step)
    check(type(out) is TensorDict, f"a TensorClass comes back as its dict: {type(out)}")
    check(out["obs"] is step.obs and out["task"] == "walk", "tensorclass fields")
    check_tree(out)
    made = ext.make_step()
    check(made.batch_size == torch.Size([2]) and made["task"] == "run", f"make_step {made}")
    check(ext.step_task(made) == "run", "dict -> C++ TensorClass")
    # A tensorclass nested in a dict crosses as its dict.
    td = TensorDict(step=step, batch_size=[2])
    back = ext.identity(td)
    check(type(back.get("step")) is TensorDict and back["step", "obs"] is step.obs, "nested tensorclass")
    # A dict missing a field is from_tensordict's error.
    try:
        ext.step_task(TensorDict(obs=torch.zeros(2), batch_size=[2]))
        check(False, "a dict missing fields converts to Step")
    except Exception as e:  # noqa: BLE001
        check("reward" in str(e) or "task" in str(e), f"missing field error: {e}")


def test_shared_storage():
    td = python_sample()
    ext.fill(td, ["next", "reward"], 7.0)
    check(bool((td["next", "reward"] == 7).all()), "C++ write seen by Python")
    td["obs"].fill_(3.0)
    check(bool((ext.get(td, ["obs"]) == 3).all()), "Python write seen by C++")
    back = ext.identity(td)
    back["next", "deep", "x"].fill_(9)
    check(bool((td["next", "deep", "x"] == 9).all()), "through a round trip")
    check(back["obs"].data_ptr() == td["obs"].data_ptr(), "same data pointer")
    lazy = ext.identity_lazy(td.get("lazy"))
    lazy.tensordicts[0]["a"].fill_(5)
    check(bool((td.get("lazy").tensordicts[0]["a"] == 5).all()), "through a lazy stack")
    grown = ext.set_zeros(td, "new")
    check("new" in grown.keys() and "new" not in td.keys(), "new keys go to the returned dict")


def test_errors():
    def raises(fn, *needles):
        try:
            fn()
        except TypeError as e:
            ok = all(n in str(e) for n in needles)
            check(ok, f"TypeError {e!r} lacks {needles}")
            return
        except Exception as e:  # noqa: BLE001
            check(False, f"{needles}: raised {type(e).__name__}, not TypeError: {e}")
            return
        check(False, f"{needles}: no error")

    class Opaque:
        pass

    bad = TensorDict({"a": {"b": torch.zeros(2)}}, batch_size=[2])
    bad["a", "obj"] = NonTensorData(Opaque(), batch_size=[2])
    raises(lambda: ext.identity(bad), "('a', 'obj')", "Opaque", "JSON")
    nested = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)], layout=torch.jagged)
    jag = TensorDict(batch_size=[2])
    jag._tensordict["jag"] = nested  # what TensorDict(..., batch_size=[2]) stores
    raises(lambda: ext.identity(jag), "'jag'", "nested")
    keys = TensorDict({"x": torch.zeros(1)}, batch_size=[1])
    keys["m"] = NonTensorData({1: "int key"}, batch_size=[1])
    raises(lambda: ext.identity(keys), "'m'", "key")
    raises(lambda: ext.identity({"a": torch.zeros(2)}), "incompatible function arguments")
    raises(lambda: ext.identity(torch.zeros(2)), "incompatible function arguments")
    raises(lambda: ext.from_python([1, 2]), "expected a tensordict.TensorDict", "list")
    sub = TensorDict(a=torch.zeros(4, 2), batch_size=[4])
    holder = TensorDict(batch_size=[2])
    holder._tensordict["view"] = sub._get_sub_tensordict(slice(0, 2))
    raises(lambda: ext.identity(holder), "'view'", "to_tensordict")


def test_refcounts():
    td = python_sample()
    td_refs = sys.getrefcount(td)
    leaves = list(td.values(True, True))
    before = [sys.getrefcount(t) for t in leaves if isinstance(t, torch.Tensor)]
    cpp = ext.sample()
    cpp_leaves = [t for t in cpp.values(True, True) if isinstance(t, torch.Tensor)]
    cpp_before = [sys.getrefcount(t) for t in cpp_leaves]
    n = 100_000
    # Warm up, then measure: C++ -> Python (through a Python round trip of
    # the dict: Python -> C++ -> Python) and Python -> C++.
    ext.load_many(td, 1000)
    ext.convert_many(ext.hundred_leaves(), 1000)
    gc.collect()
    tracemalloc.start()
    rss_before = rss_kb()
    snap0 = tracemalloc.get_traced_memory()[0]
    check(ext.load_many(td, n) > 0, "load_many")
    small = TensorDict({"a": torch.zeros(2), "n": {"b": torch.ones(2)}}, batch_size=[2])
    for _ in range(n // 10):
        ext.identity(small)
    # C++ -> Python: 100 leaves over 3 levels n times, and every entry kind
    # (non-tensor data and stacks, lazy stacks: slower) n / 10 times.
    last = ext.convert_many(ext.hundred_leaves(), n)
    last = ext.convert_many(ext.identity(td), n // 10)
    del last
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - snap0
    tracemalloc.stop()
    rss_grown = rss_kb() - rss_before
    after = [sys.getrefcount(t) for t in leaves if isinstance(t, torch.Tensor)]
    check(before == after, f"refcounts of the Python leaves {before} -> {after}")
    check(sys.getrefcount(td) == td_refs, f"refcount of the converted dict {td_refs} -> {sys.getrefcount(td)}")
    cpp_after = [sys.getrefcount(t) for t in cpp_leaves]
    check(cpp_before == cpp_after, f"refcounts of C++-made leaves {cpp_before} -> {cpp_after}")
    check(grown < 1_000_000, f"tracemalloc grew by {grown} bytes over {n} conversions")
    check(rss_grown < 50_000, f"RSS grew by {rss_grown} kB over {n} conversions")
    print(f"refcounts: {n} conversions each way; traced +{grown} B, RSS +{rss_grown} kB")


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    torch.manual_seed(0)
    for test in (test_round_trips, test_tensorclass, test_shared_storage, test_errors, test_refcounts):
        before = len(FAILURES)
        test()
        print(f"{test.__name__}: {'ok' if len(FAILURES) == before else 'FAILED'}")
    print(f"tensordict {tensordict.__version__}, torch {torch.__version__}")
    if FAILURES:
        print(f"{len(FAILURES)} failures")
        sys.exit(1)
    print(f"python_casters: all {CHECKS[0]} checks passed")


if __name__ == "__main__":
    main()
