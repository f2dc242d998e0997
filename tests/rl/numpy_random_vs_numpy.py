"""rl::NumpyGenerator against live NumPy, bit for bit.

For many seeds (small, 32-bit, 64-bit, gymnasium-style s + i), runs
numpy_random_draws and makes the same draws with
`np.random.default_rng(seed)`: the SeedSequence's state words, PCG64's
state, raw draws, random(), scalar and filled uniform, and scalar and
filled standard_normal. Enough normal draws are made that the ziggurat's
rare paths (the wedge and the tail beyond r) are taken, and the script
checks that they were.

Usage: numpy_random_vs_numpy.py NUMPY_RANDOM_DRAWS
"""

import struct
import subprocess
import sys

import numpy as np

ZIGGURAT_R = 3.6541528853610087963519472518


def as_bits(values):
    return [struct.unpack("<Q", struct.pack("<d", float(v)))[0] for v in values]


def check(binary, seed, n):
    out = subprocess.run([binary, str(seed), str(n)], check=True, capture_output=True, text=True)
    lines = [int(line, 16) for line in out.stdout.split()]
    expected = []
    seq = np.random.SeedSequence(seed)
    expected += [int(w) for w in seq.generate_state(8, np.uint32)]
    bit_gen = np.random.PCG64(np.random.SeedSequence(seed))
    pcg = bit_gen.state["state"]
    expected += [pcg["state"], pcg["inc"]]
    expected += [int(v) for v in bit_gen.random_raw(n)]
    rng = np.random.default_rng(seed)
    expected += as_bits([rng.random() for _ in range(n)])
    expected += as_bits([rng.uniform(-0.1, 0.1) for _ in range(n)])
    expected += as_bits(rng.uniform(-3.0, 5.0, size=n))
    normals = [rng.standard_normal() for _ in range(n)]
    expected += as_bits(normals)
    filled = rng.standard_normal(size=n)
    expected += as_bits(filled)
    if len(lines) != len(expected):
        sys.exit(f"seed {seed}: {len(lines)} values from C++, {len(expected)} from numpy")
    names = (
        ["seed_sequence"] * 8
        + ["pcg64 state", "pcg64 inc"]
        + ["random_raw"] * n
        + ["random"] * n
        + ["uniform"] * n
        + ["uniform(size=n)"] * n
        + ["standard_normal"] * n
        + ["standard_normal(size=n)"] * n
    )
    for i, (got, want) in enumerate(zip(lines, expected)):
        if got != want:
            sys.exit(f"seed {seed}: value {i} ({names[i]}) is {got:#x} in C++, numpy gives {want:#x}")
    return np.concatenate([np.asarray(normals), filled])


def main():
    binary = sys.argv[1]
    seeds = list(range(0, 40)) + [123, 2**31 - 1, 2**32 - 1, 2**32, 2**32 + 7, 2**63 + 12345, 2**64 - 1]
    seeds += [1000 + i for i in range(8)]  # gymnasium's vector convention, s + i
    tail = 0
    for k, seed in enumerate(seeds):
        n = 100_000 if k < 4 else 2_000
        normals = check(binary, seed, n)
        tail += int(np.sum(np.abs(normals) > ZIGGURAT_R))
    # About 2.7e-4 of draws lie beyond r: the tail path must have been taken
    # (the wedge path, far more common, is then surely covered too).
    if tail < 20:
        sys.exit(f"only {tail} draws beyond r: the tail path was hardly tested")
    print(f"{len(seeds)} seeds equal numpy {np.__version__} bit for bit ({tail} tail draws)")


if __name__ == "__main__":
    main()
