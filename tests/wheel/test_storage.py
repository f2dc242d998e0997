#!/usr/bin/env python3
"""The C++ storage functions of the installed tensordict_cpp, against Python
tensordict's own, on every tree of the interop corpus
(tests/python/memmap_corpus.py), both ways:

- memmap: Python writes (``memmap``/``save``/``memmap_`` as the case says),
  ``tensordict_cpp.load_memmap`` reads; ``tensordict_cpp.memmap`` (or
  ``save``) writes, Python's ``load_memmap`` reads; the dict the C++ save
  returns is checked too;
- consolidate: Python's ``consolidate(filename=...)`` writes,
  ``tensordict_cpp.from_consolidated`` reads; ``tensordict_cpp.consolidate``
  writes, Python's ``from_consolidated`` reads;
- safetensors: ``tensordict.to_safetensors`` writes,
  ``tensordict_cpp.from_safetensors`` reads, and the reverse.

Each comparison is the canonical dump of tests/python/td_dump.py (keys,
dtypes, shapes, bytes, non-tensor values, the root's batch size and names)
plus the class and batch size of every nested dict and stack. A tree Python
itself cannot write in a format (safetensors holds no non-tensor data, ...)
is skipped for that format with Python's reason; a tree C++ refuses where
Python writes it is a failure.

Then the error cases: a missing path, a truncated file of each format, a
non-TensorDict argument, each a Python exception with a clear message; the
keyword arguments Python users pass; and a process killed while
tensordict_cpp.save overwrites a save, after which Python and C++ load the
old tree or the new one, whole.

usage: test_storage.py CORPUS_DIR WORK_DIR
CORPUS_DIR is tests/python (memmap_corpus.py, td_dump.py, corpus_classes.py).
"""

from __future__ import annotations

import os
import shutil
import sys
import traceback
import warnings

CORPUS_DIR, WORK = sys.argv[1:3]
sys.path.insert(0, CORPUS_DIR)

import torch  # noqa: E402
import tensordict  # noqa: E402
from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict  # noqa: E402
from tensordict.base import TensorDictBase  # noqa: E402

import memmap_corpus  # noqa: E402
import td_dump  # noqa: E402

try:
    import tensordict_cpp

    tensordict_cpp.save  # noqa: B018 (an older install lacks it)
except (ImportError, AttributeError) as e:
    sys.exit(f"FAILED: tensordict_cpp with its storage functions is not installed in "
             f"{sys.executable} ({e}); run scripts/install-deps.sh")

failures: list[str] = []
passed = 0
skipped: list[str] = []


def check(ok: bool, what: str) -> None:
    global passed
    if ok:
        passed += 1
    else:
        failures.append(what)
        print("FAILED: " + what, flush=True)


def structure(obj, key=()) -> dict:
    """{key: (kind, batch size)} of every nested collection, a tensorclass as
    its dict (the casters return tensorclasses as TensorDicts)."""
    out = {}
    if isinstance(obj, (NonTensorData, NonTensorStack)):
        return out
    if td_dump._is_user_tensorclass(obj):
        obj = obj._tensordict
    if isinstance(obj, LazyStackedTensorDict):
        out[key] = ("stack", list(obj.batch_size), obj.stack_dim)
        for i, element in enumerate(obj.tensordicts):
            out.update(structure(element, key + (str(i),)))
    elif isinstance(obj, TensorDictBase):
        out[key] = ("dict", list(obj.batch_size))
        for name in obj.keys():
            out.update(structure(obj.get(name), key + (name,)))
    return out


def compare(expected_obj, actual, what: str) -> None:
    """Checks `actual` against the in-memory tree `expected_obj`."""
    kind = td_dump.root_kind(expected_obj)
    want_type = LazyStackedTensorDict if kind == "LazyStackedTensorDict" else TensorDict
    if type(actual) is not want_type and not td_dump._is_user_tensorclass(actual):
        check(False, f"{what}: returns a {type(actual).__name__}, expected a "
                     f"{want_type.__name__}")
        return
    expected = td_dump.dump(expected_obj)
    got = td_dump.dump(actual)
    if kind == "tensorclass" and "class" not in got:
        # C++ returns the dict of a tensorclass (the casters build no class).
        expected.pop("class")
    problems = td_dump.diff(expected, got)
    want_structure, got_structure = structure(expected_obj), structure(actual)
    for key in sorted(want_structure.keys() | got_structure.keys()):
        if want_structure.get(key) != got_structure.get(key):
            problems.append(f"{key}: expected {want_structure.get(key)}, "
                            f"got {got_structure.get(key)}")
    check(not problems, f"{what}: " + "; ".join(problems[:6]))


def attempt(what: str, fn):
    """Runs fn; a failure is recorded with its exception."""
    try:
        return fn()
    except Exception as e:  # every failure is reported per case
        check(False, f"{what}: {type(e).__name__}: {e}".replace("\n", " ")[:600])
        if os.environ.get("TEST_STORAGE_TRACEBACK"):
            traceback.print_exc()
        return None


def python_refuses(fn) -> str | None:
    """Returns Python's reason when it cannot write the tree, else None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn()
    except Exception as e:  # Python's own refusal
        return f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
    return None


# Trees the C++ memmap refuses on purpose, with words of its message.
REFUSED_MEMMAP = {
    "keys_reserved_like": ["'_format_version'", "would collide with", "meta.json"],
}


def build(case):
    torch.manual_seed(0)
    return case.build()


def memmap_case(case) -> None:
    obj = build(case)
    kind = td_dump.root_kind(obj)
    py_dir = os.path.join(WORK, "memmap_py", case.name)
    memmap_corpus.write_case(case, os.path.join(WORK, "memmap_py"))
    loaded = attempt(f"{case.name}: Python {case.api}, tensordict_cpp.load_memmap",
                     lambda: tensordict_cpp.load_memmap(py_dir))
    if loaded is not None:
        compare(obj, loaded, f"{case.name}: Python {case.api}, tensordict_cpp.load_memmap")

    cpp_dir = os.path.join(WORK, "memmap_cpp", case.name)
    threads = 2 if case.api in ("memmap_", "memmap_threads") else 0
    save = tensordict_cpp.save if case.api == "save" else tensordict_cpp.memmap
    if case.name in REFUSED_MEMMAP:
        # Keys named like meta.json's own members: Python writes them and
        # loses them on load; C++ refuses them before writing anything.
        raises(lambda: save(obj, cpp_dir), (RuntimeError, ValueError),
               REFUSED_MEMMAP[case.name], f"{case.name}: tensordict_cpp.{save.__name__}")
        check(not os.path.exists(cpp_dir),
              f"{case.name}: a refused tensordict_cpp.{save.__name__} writes nothing")
        return
    result = attempt(f"{case.name}: tensordict_cpp.{save.__name__}",
                     lambda: save(obj, cpp_dir, num_threads=threads))
    if result is None:
        return
    compare(obj, result, f"{case.name}: tensordict_cpp.{save.__name__}'s result")
    if isinstance(result, TensorDict):
        check(result.is_locked, f"{case.name}: tensordict_cpp.memmap's result is locked")
    back = attempt(f"{case.name}: tensordict_cpp.{save.__name__}, Python load_memmap",
                   lambda: td_dump.load_tree(cpp_dir, kind))
    if back is not None:
        compare(obj, back, f"{case.name}: tensordict_cpp.{save.__name__}, Python load_memmap")


def consolidate_case(case) -> None:
    obj = build(case)
    py_file = os.path.join(WORK, "consolidated_py", case.name + ".bin")
    reason = python_refuses(lambda: obj.consolidate(filename=py_file))
    if reason is not None:
        skipped.append(f"{case.name}: consolidate: Python refuses it ({reason})")
        return
    loaded = attempt(f"{case.name}: Python consolidate, tensordict_cpp.from_consolidated",
                     lambda: tensordict_cpp.from_consolidated(py_file))
    if loaded is not None:
        compare(obj, loaded,
                f"{case.name}: Python consolidate, tensordict_cpp.from_consolidated")
    cpp_file = os.path.join(WORK, "consolidated_cpp", case.name + ".bin")
    result = attempt(f"{case.name}: tensordict_cpp.consolidate",
                     lambda: tensordict_cpp.consolidate(obj, cpp_file))
    if result is None:
        return
    compare(obj, result, f"{case.name}: tensordict_cpp.consolidate's result")
    back = attempt(f"{case.name}: tensordict_cpp.consolidate, Python from_consolidated",
                   lambda: TensorDict.from_consolidated(cpp_file))
    if back is not None:
        compare(obj, back, f"{case.name}: tensordict_cpp.consolidate, Python from_consolidated")
    with open(py_file, "rb") as f, open(cpp_file, "rb") as g:
        check(f.read() == g.read(),
              f"{case.name}: tensordict_cpp.consolidate writes Python's bytes")


def safetensors_case(case) -> None:
    obj = build(case)
    py_file = os.path.join(WORK, "safetensors_py", case.name + ".safetensors")
    reason = python_refuses(lambda: tensordict.to_safetensors(obj, py_file))
    if reason is None:
        # Python writes some trees it cannot read back (its reader is the
        # reference for the C++ file below).
        reason = python_refuses(lambda: tensordict.from_safetensors(py_file))
    if reason is not None:
        skipped.append(f"{case.name}: safetensors: Python refuses it ({reason})")
        return
    loaded = attempt(f"{case.name}: Python to_safetensors, tensordict_cpp.from_safetensors",
                     lambda: tensordict_cpp.from_safetensors(py_file))
    expected = tensordict.from_safetensors(py_file)
    if loaded is not None:
        compare(expected, loaded,
                f"{case.name}: Python to_safetensors, tensordict_cpp.from_safetensors")
    cpp_file = os.path.join(WORK, "safetensors_cpp", case.name + ".safetensors")
    if attempt(f"{case.name}: tensordict_cpp.to_safetensors",
               lambda: tensordict_cpp.to_safetensors(obj, cpp_file) or True) is None:
        return
    back = attempt(f"{case.name}: tensordict_cpp.to_safetensors, Python from_safetensors",
                   lambda: tensordict.from_safetensors(cpp_file))
    if back is not None:
        compare(expected, back,
                f"{case.name}: tensordict_cpp.to_safetensors, Python from_safetensors")
    with open(py_file, "rb") as f, open(cpp_file, "rb") as g:
        check(f.read() == g.read(),
              f"{case.name}: tensordict_cpp.to_safetensors writes Python's bytes")


def raises(fn, types, words, what: str) -> None:
    """Checks that fn raises one of `types` whose message holds every word."""
    try:
        fn()
    except types as e:
        message = str(e)
        missing = [w for w in words if w not in message]
        check(not missing and "Exception raised from" not in message,
              f"{what}: {type(e).__name__} lacks {missing} or carries a C++ "
              f"backtrace: {message[:400]!r}")
        return
    except Exception as e:  # the wrong kind of error
        check(False, f"{what}: raised {type(e).__name__}: {e}"[:600])
        return
    check(False, f"{what}: raised nothing")


def truncated_copy(src: str, dst: str, keep: int) -> str:
    with open(src, "rb") as f:
        data = f.read()
    with open(dst, "wb") as f:
        f.write(data[:keep])
    return dst


def error_cases() -> None:
    err = os.path.join(WORK, "errors")
    os.makedirs(err)
    td = TensorDict({"a": torch.arange(12.0).reshape(3, 4), "sub": {"b": torch.ones(3)}}, [3])
    missing = os.path.join(err, "missing")
    raises(lambda: tensordict_cpp.load_memmap(missing), (RuntimeError, OSError, ValueError),
           [missing], "load_memmap of a missing directory names it")
    raises(lambda: tensordict_cpp.from_consolidated(missing), (RuntimeError, OSError, ValueError),
           [missing], "from_consolidated of a missing file names it")
    raises(lambda: tensordict_cpp.from_safetensors(missing), (RuntimeError, OSError, ValueError),
           [missing], "from_safetensors of a missing file names it")

    # A memmap leaf file shorter than meta.json says: Python would map zeros.
    tree = os.path.join(err, "tree")
    td.memmap(tree)
    leaf = os.path.join(tree, "a.memmap")
    truncated_copy(leaf, leaf, 20)
    raises(lambda: tensordict_cpp.load_memmap(tree), (RuntimeError, ValueError),
           ["a", "20"], "load_memmap of a truncated leaf file names the key and the size")
    # meta.json cut in the middle.
    tree2 = os.path.join(err, "tree2")
    td.memmap(tree2)
    meta = os.path.join(tree2, "meta.json")
    truncated_copy(meta, meta, os.path.getsize(meta) // 2)
    raises(lambda: tensordict_cpp.load_memmap(tree2), (RuntimeError, ValueError),
           ["meta.json"], "load_memmap of a truncated meta.json names it")

    consolidated = os.path.join(err, "c.bin")
    td.consolidate(filename=consolidated)
    size = os.path.getsize(consolidated)
    for keep in (size - 1, size // 2, 4):
        cut = truncated_copy(consolidated, os.path.join(err, f"c{keep}.bin"), keep)
        raises(lambda: tensordict_cpp.from_consolidated(cut), (RuntimeError, ValueError),
               [os.path.basename(cut)], f"from_consolidated of a file cut to {keep} bytes")

    st = os.path.join(err, "s.safetensors")
    tensordict.to_safetensors(td, st)
    size = os.path.getsize(st)
    for keep in (size - 1, size // 2, 4):
        cut = truncated_copy(st, os.path.join(err, f"s{keep}.safetensors"), keep)
        raises(lambda: tensordict_cpp.from_safetensors(cut), (RuntimeError, ValueError),
               [], f"from_safetensors of a file cut to {keep} bytes")

    for name, call in [
        ("memmap", lambda x: tensordict_cpp.memmap(x, os.path.join(err, "never"))),
        ("save", lambda x: tensordict_cpp.save(x, os.path.join(err, "never"))),
        ("consolidate", lambda x: tensordict_cpp.consolidate(x, os.path.join(err, "n.bin"))),
        ("to_safetensors",
         lambda x: tensordict_cpp.to_safetensors(x, os.path.join(err, "n.safetensors"))),
    ]:
        for bad in ({"a": torch.zeros(2)}, torch.zeros(2), NonTensorData("x"), None):
            raises(lambda: call(bad), (TypeError,), ["TensorDict", type(bad).__name__],
                   f"{name} of a {type(bad).__name__}")
    check(not os.path.exists(os.path.join(err, "never")), "a refused save writes nothing")
    raises(lambda: tensordict_cpp.load_memmap(42), (TypeError,), ["prefix", "int"],
           "load_memmap of an int path")
    raises(lambda: tensordict_cpp.load_memmap(tree + "\0x"), (ValueError,), ["NUL"],
           "load_memmap of a path with a NUL byte")
    raises(lambda: tensordict_cpp.from_consolidated(42), (TypeError,), ["filename", "int"],
           "from_consolidated of an int path")
    raises(lambda: tensordict_cpp.load_memmap(tree, mode="w"), (ValueError,), ["mode", "'w'"],
           "load_memmap with an unknown mode")
    # Python's td.memmap(prefix, num_threads=-1) writes on the calling thread
    # (no pool below 1), and so does the C++ API the binding calls.
    negative = attempt("memmap with num_threads=-1",
                       lambda: tensordict_cpp.memmap(td, os.path.join(err, "t"), num_threads=-1))
    if negative is not None:
        back = tensordict_cpp.load_memmap(os.path.join(err, "t"))
        check(torch.equal(back["a"], td["a"]) and torch.equal(back["sub", "b"], td["sub", "b"]),
              "memmap with num_threads=-1 writes the tree")


def argument_cases() -> None:
    """The keyword arguments Python users pass, with Python's meaning."""
    base = os.path.join(WORK, "arguments")
    os.makedirs(base)
    td = TensorDict({"a": torch.arange(6.0).reshape(3, 2), "s": "x"}, [3])
    import pathlib

    saved = tensordict_cpp.save(td, pathlib.Path(base) / "p", num_threads=2)
    compare(td, saved, "save to a pathlib.Path with num_threads=2")
    compare(td, tensordict_cpp.load(pathlib.Path(base) / "p"), "load of a pathlib.Path")
    compare(TensorDict({"a": td["a"]}, [3]),
            tensordict_cpp.load_memmap(os.path.join(base, "p"), mode="r").exclude("s"),
            "load_memmap(mode='r')")
    sub = TensorDict({"n": {"x": torch.ones(3, 1)}}, [3])
    tensordict_cpp.memmap(sub, os.path.join(base, "sub"))
    compare(sub["n"], tensordict_cpp.load_memmap(os.path.join(base, "sub"), subpath=("n",)),
            "load_memmap(subpath=('n',))")
    compare(sub["n"], tensordict_cpp.load_memmap(os.path.join(base, "sub"), subpath="n"),
            "load_memmap(subpath='n')")
    meta = tensordict_cpp.load_memmap(os.path.join(base, "p"), device="meta")
    check(meta["a"].device.type == "meta" and meta["a"].shape == (3, 2),
          f"load_memmap(device='meta') reads shapes only ({meta['a']})")
    # An overwrite of a complete save is swapped in; existsok=False refuses an
    # existing leaf file before writing anything.
    again = TensorDict({"a": torch.full((3, 2), 7.0), "s": "y"}, [3])
    tensordict_cpp.memmap(again, os.path.join(base, "p"))
    compare(again, TensorDict.load_memmap(os.path.join(base, "p")), "memmap over a save")
    raises(lambda: tensordict_cpp.memmap(td, os.path.join(base, "p"), existsok=False),
           (RuntimeError, ValueError), ["exists"], "memmap(existsok=False) over a save")
    compare(again, TensorDict.load_memmap(os.path.join(base, "p")),
            "a refused existsok=False save leaves the old tree")
    # A leaf already mapped elsewhere needs copy_existing, as in Python.
    mapped = TensorDict.load_memmap(os.path.join(base, "p"))
    raises(lambda: tensordict_cpp.memmap(mapped, os.path.join(base, "q")),
           (RuntimeError, ValueError), ["copy_existing"], "memmap of mapped leaves")
    compare(again, tensordict_cpp.memmap(mapped, os.path.join(base, "q"), copy_existing=True),
            "memmap(copy_existing=True)")
    raises(lambda: tensordict_cpp.memmap(TensorDict({"n": mapped}, []), os.path.join(base, "r")),
           (RuntimeError,), ["copy_existing", "('n', 'a')", "a.memmap"],
           "memmap of a nested mapped leaf names its key")
    # Leaves that view a consolidated file are plain tensors in Python: both
    # sides copy them without copy_existing.
    td.exclude("s").consolidate(filename=os.path.join(base, "c.bin"))
    viewed = TensorDict.from_consolidated(os.path.join(base, "c.bin"))
    compare(viewed, tensordict_cpp.memmap(viewed, os.path.join(base, "from_c")),
            "memmap of a consolidated file's leaves")
    archive = tensordict_cpp.save(td, os.path.join(base, "t.tdz"))
    compare(td, archive, "save to a .tdz archive")
    compare(td, tensordict.load(os.path.join(base, "t.tdz")), "Python loads the C++ archive")
    compare(td, tensordict_cpp.memmap(td, os.path.join(base, "atomic"), atomic=True,
                                      durable=True), "memmap(atomic=True, durable=True)")
    shm = tensordict_cpp.memmap(td)
    compare(td, shm, "memmap() without a prefix (shared memory)")
    check(shm["a"].is_shared(), "memmap() without a prefix puts the leaves in shared memory")
    plain = td.exclude("s")
    in_memory = tensordict_cpp.consolidate(plain)
    compare(plain, in_memory, "consolidate() without a file")
    storages = {t.untyped_storage().data_ptr() for t in in_memory.values(True, True)}
    check(len(storages) == 1, f"consolidate()'s leaves view one storage ({len(storages)})")


KILL_ROUNDS = 8

_SAVER = """
import sys, torch, tensordict_cpp
from tensordict import TensorDict
prefix = sys.argv[1]
trees = [TensorDict({f"g{g}": {f"l{i}": torch.full((256,), float(v)) for i in range(50)}
                     for g in range(40)}, []) for v in (1, 2)]
save = tensordict_cpp.save  # loads the engine before the parent's clock starts
print("ready", flush=True)
n = 1
while True:
    save(trees[n % 2], prefix)
    n += 1
"""


def crash_cases() -> None:
    """A process killed (SIGKILL) at a random moment while it saves over a
    complete save with tensordict_cpp.save: Python's own loader, and the C++
    one, then find the old tree or the new one, whole, never a mix."""
    import random
    import signal
    import subprocess
    import time

    prefix = os.path.join(WORK, "crash", "tree")
    os.makedirs(os.path.dirname(prefix))
    first = TensorDict({f"g{g}": {f"l{i}": torch.full((256,), 1.0) for i in range(50)}
                        for g in range(40)}, [])
    tensordict_cpp.save(first, prefix)
    rng = random.Random(0)
    seen = set()
    for round_ in range(KILL_ROUNDS):
        proc = subprocess.Popen([sys.executable, "-c", _SAVER, prefix],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        # A process's first save takes longest (up to 2 s on a slow disk: it
        # writes fresh files where later saves reuse a spare tree).
        time.sleep(rng.uniform(0.02, 4.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for name, load in (("Python", TensorDict.load_memmap),
                           ("tensordict_cpp", tensordict_cpp.load_memmap)):
            try:
                loaded = load(prefix)
                values = {float(t[0]) for t in loaded.values(True, True)}
                same = all(bool((t == t[0]).all()) for t in loaded.values(True, True))
                ok = (len(list(loaded.keys(True, True))) == 2000 and len(values) == 1
                      and same)
                what = f"values {sorted(values)}"
                seen.update(values)
            except Exception as e:  # a load that fails is a torn save
                ok, what = False, f"{type(e).__name__}: {e}"
            check(ok, f"kill {round_}: {name} loads the old or the new tree whole ({what})")
    # Which trees the kills left (timing decides, so it is reported only).
    print(f"crash: {KILL_ROUNDS} kills left trees of values {sorted(seen)}")


def main() -> int:
    shutil.rmtree(WORK, ignore_errors=True)
    for sub in ("memmap_py", "memmap_cpp", "consolidated_py", "consolidated_cpp",
                "safetensors_py", "safetensors_cpp"):
        os.makedirs(os.path.join(WORK, sub))
    cases = memmap_corpus.CASES
    for case in cases:
        for run in (memmap_case, consolidate_case, safetensors_case):
            attempt(f"{case.name}: {run.__name__}", lambda: run(case))
    print(f"corpus: {len(cases)} trees")
    attempt("error cases", error_cases)
    attempt("argument cases", argument_cases)
    attempt("crash cases", crash_cases)
    for line in skipped:
        print("skipped: " + line)
    print(f"{passed} checks passed, {len(failures)} failed, {len(skipped)} skipped")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
