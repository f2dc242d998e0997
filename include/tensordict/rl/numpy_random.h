#pragma once

/// @file
/// `rl::NumpyGenerator`: NumPy's default generator, draw for draw, for C++
/// envs that must reset exactly as a Gymnasium env seeded the same way
/// (gymnasium's `np_random`). Part of <tensordict/rl.h>.
//
// NOTE [NumPy's generator]
// The name says what it reproduces: `np.random.default_rng(seed)`, which is
// `Generator(PCG64(SeedSequence(seed)))` under NumPy 2.x (and what
// gymnasium's `seeding.np_random(seed)` builds). Three parts, each matched
// bit for bit against NumPy 2.4.6 (tests/rl/numpy_random_vs_numpy.py):
// - SeedSequence: the seed's 32-bit words hashed into a pool of four, then
//   expanded into the 256 bits PCG64 starts from (its state and increment);
// - PCG64 (the 128-bit LCG with the XSL-RR output; not PCG64DXSM): each
//   64-bit draw advances the LCG, then folds and rotates its state;
// - the distributions: `random()` is the top 53 bits over 2^53, `uniform`
//   is low + (high - low) * random(), and `standard_normal` is NumPy's
//   256-strip ziggurat on 52-bit draws with its exponential tail and its
//   wedge test (tables: src/rl/numpy_ziggurat_tables.h, NumPy's data).
// A size-n draw fills elements 0, 1, ... in order, as NumPy fills a new
// C-contiguous array, so `uniform(low, high, n)` continues exactly where n
// scalar draws would.

#include <cstdint>

#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

/// NumPy's `default_rng(seed)`: PCG64 seeded by a SeedSequence of `seed`,
/// and the draws of `numpy.random.Generator` that envs use, each equal to
/// NumPy 2.x's bit for bit. See NOTE [NumPy's generator].
///
/// A value type (copying copies the stream); not thread-safe: give each
/// sub-env its own.
///
/// Example (a Gymnasium MuJoCo reset):
/// ```
///   rl::NumpyGenerator rng(seed);   // gymnasium's reset(seed=seed)
///   rng.uniform(-0.1, 0.1, noise.data(), nq);
///   rng.standard_normal(more.data(), nv);
/// ```
class TENSORDICT_API NumpyGenerator {
 public:
  /// The PCG64 state as NumPy's `bit_generator.state["state"]` shows it:
  /// the 128-bit `state` and `inc`, each as high and low 64 bits.
  struct State {
    /// High 64 bits of the LCG state.
    uint64_t state_high = 0;
    /// Low 64 bits of the LCG state.
    uint64_t state_low = 0;
    /// High 64 bits of the (odd) increment.
    uint64_t inc_high = 0;
    /// Low 64 bits of the increment.
    uint64_t inc_low = 0;
  };

  /// Seeds as `np.random.default_rng(seed)` does (a SeedSequence of the
  /// non-negative integer `seed`).
  explicit NumpyGenerator(uint64_t seed = 0) noexcept;

  /// Reseeds as a new `NumpyGenerator(seed)`.
  void seed(uint64_t seed) noexcept;
  /// Returns the PCG64 state (for tests against NumPy).
  State state() const noexcept;

  /// Returns the next raw 64-bit draw (`PCG64.random_raw()`).
  uint64_t next_uint64() noexcept;
  /// Returns a double in [0, 1) (`Generator.random()`).
  double random() noexcept;
  /// Returns `Generator.uniform(low, high)`: low + (high - low) * random().
  double uniform(double low, double high) noexcept;
  /// Fills `out[0..n)` as `Generator.uniform(low, high, size=n)`.
  void uniform(double low, double high, double* out, int64_t n) noexcept;
  /// Returns `Generator.standard_normal()` (NumPy's ziggurat).
  double standard_normal() noexcept;
  /// Fills `out[0..n)` as `Generator.standard_normal(size=n)`.
  void standard_normal(double* out, int64_t n) noexcept;

 private:
  // The 128-bit LCG state and increment, as (high, low) words, so that the
  // header needs no 128-bit type.
  uint64_t state_high_ = 0;
  uint64_t state_low_ = 0;
  uint64_t inc_high_ = 0;
  uint64_t inc_low_ = 0;
};

}  // namespace rl

namespace detail {

/// Writes `SeedSequence(seed).generate_state(n_words, np.uint32)` into
/// `out[0..n_words)` (the pool NumPy mixes from the seed's 32-bit words,
/// least significant first; seed 0 is one zero word).
TENSORDICT_API void numpy_seed_sequence_state(
    uint64_t seed, uint32_t* out, int64_t n_words) noexcept;

}  // namespace detail
TENSORDICT_END_NAMESPACE
