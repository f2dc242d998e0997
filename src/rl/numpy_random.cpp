#include "tensordict/rl/numpy_random.h"

#include <cmath>

#include "rl/numpy_ziggurat_tables.h"

TENSORDICT_BEGIN_NAMESPACE
namespace {

// GCC and Clang's 128-bit integer: the LCG's arithmetic is exact mod 2^128.
__extension__ using uint128 = unsigned __int128;

uint128 join(uint64_t high, uint64_t low) {
  return (static_cast<uint128>(high) << 64) | low;
}

// SeedSequence's hash constants (O'Neill's seed_seq_fe, as NumPy uses
// them): a multiply-xorshift hash for pooling the entropy, another for
// drawing state words from the pool, and the mix of two pool words.
constexpr uint32_t kInitA = 0x43b0d7e5U;
constexpr uint32_t kMultA = 0x931e8875U;
constexpr uint32_t kInitB = 0x8b51f9ddU;
constexpr uint32_t kMultB = 0x58f38dedU;
constexpr uint32_t kMixMultL = 0xca01f9ddU;
constexpr uint32_t kMixMultR = 0x4973f715U;
constexpr int kXShift = 16;
constexpr int kPoolSize = 4;

// The pooling hash; each call advances the hash constant.
uint32_t hash_mix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  return value ^ (value >> kXShift);
}

uint32_t mix(uint32_t x, uint32_t y) {
  uint32_t result = kMixMultL * x - kMixMultR * y;
  return result ^ (result >> kXShift);
}

// PCG64's multiplier (PCG's default 128-bit LCG multiplier).
const uint128 kPcgMultiplier =
    join(0x2360ED051FC65DA4ULL, 0x4385DF649FCCF645ULL);

// The edge of the ziggurat's base strip, where the tail begins, and its
// inverse (NumPy's constants for its 256-strip table).
constexpr double kZigguratR = 3.6541528853610087963519472518;
constexpr double kZigguratInvR = 0.27366123732975827203338247596;

}  // namespace

namespace detail {

void numpy_seed_sequence_state(
    uint64_t seed, uint32_t* out, int64_t n_words) noexcept {
  // The seed's 32-bit words, least significant first; 0 is one word.
  uint32_t entropy[2] = {
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  const int n_entropy = (seed >> 32) != 0 ? 2 : 1;
  uint32_t pool[kPoolSize];
  uint32_t hash_const = kInitA;
  for (int i = 0; i < kPoolSize; ++i) {
    pool[i] = hash_mix(i < n_entropy ? entropy[i] : 0U, hash_const);
  }
  for (int src = 0; src < kPoolSize; ++src) {
    for (int dst = 0; dst < kPoolSize; ++dst) {
      if (src != dst) {
        pool[dst] = mix(pool[dst], hash_mix(pool[src], hash_const));
      }
    }
  }
  // At most two entropy words, never more than the pool: nothing is left
  // to fold in after the pool's own words.
  uint32_t draw_const = kInitB;
  for (int64_t i = 0; i < n_words; ++i) {
    uint32_t value = pool[i % kPoolSize];
    value ^= draw_const;
    draw_const *= kMultB;
    value *= draw_const;
    out[i] = value ^ (value >> kXShift);
  }
}

}  // namespace detail

namespace rl {

NumpyGenerator::NumpyGenerator(uint64_t seed) noexcept {
  this->seed(seed);
}

void NumpyGenerator::seed(uint64_t seed) noexcept {
  // PCG64 takes four 64-bit words of the sequence (pairs of 32-bit words,
  // low word first): the first two are the start, the last two the stream.
  uint32_t words[8];
  detail::numpy_seed_sequence_state(seed, words, 8);
  uint64_t wide[4];
  for (int i = 0; i < 4; ++i) {
    wide[i] = static_cast<uint64_t>(words[2 * i]) |
              (static_cast<uint64_t>(words[2 * i + 1]) << 32);
  }
  const uint128 start = join(wide[0], wide[1]);
  const uint128 inc = (join(wide[2], wide[3]) << 1) | 1U;
  // PCG's seeding: step from 0, add the start, step again.
  uint128 state = inc;
  state += start;
  state = state * kPcgMultiplier + inc;
  state_high_ = static_cast<uint64_t>(state >> 64);
  state_low_ = static_cast<uint64_t>(state);
  inc_high_ = static_cast<uint64_t>(inc >> 64);
  inc_low_ = static_cast<uint64_t>(inc);
}

NumpyGenerator::State NumpyGenerator::state() const noexcept {
  State out;
  out.state_high = state_high_;
  out.state_low = state_low_;
  out.inc_high = inc_high_;
  out.inc_low = inc_low_;
  return out;
}

uint64_t NumpyGenerator::next_uint64() noexcept {
  const uint128 state = join(state_high_, state_low_) * kPcgMultiplier +
                        join(inc_high_, inc_low_);
  state_high_ = static_cast<uint64_t>(state >> 64);
  state_low_ = static_cast<uint64_t>(state);
  // XSL-RR: fold the halves, rotate by the top six bits.
  const uint64_t folded = state_high_ ^ state_low_;
  const unsigned rotation = static_cast<unsigned>(state_high_ >> 58);
  return (folded >> rotation) | (folded << ((64U - rotation) & 63U));
}

double NumpyGenerator::random() noexcept {
  return static_cast<double>(next_uint64() >> 11) * (1.0 / 9007199254740992.0);
}

double NumpyGenerator::uniform(double low, double high) noexcept {
  return low + (high - low) * random();
}

void NumpyGenerator::uniform(
    double low, double high, double* out, int64_t n) noexcept {
  const double range = high - low;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = low + range * random();
  }
}

double NumpyGenerator::standard_normal() noexcept {
  namespace zig = tensordict_numpy_ziggurat;
  for (;;) {
    // One 64-bit draw: 8 bits pick the strip, 1 the sign, 52 the position.
    uint64_t bits = next_uint64();
    const auto strip = static_cast<int>(bits & 0xFFU);
    bits >>= 8;
    const bool negative = (bits & 1U) != 0;
    const uint64_t position = (bits >> 1) & 0x000FFFFFFFFFFFFFULL;
    double x = static_cast<double>(position) * zig::kWI[strip];
    if (negative) {
      x = -x;
    }
    if (position < zig::kKI[strip]) {
      return x;  // inside the strip's rectangle: most draws end here
    }
    if (strip == 0) {
      // The tail beyond r, by Marsaglia's exponential method; 1 - U keeps
      // the logarithm's argument away from 0. The sign comes from a bit
      // of the first draw that the strip test did not use.
      for (;;) {
        const double xx = -kZigguratInvR * std::log1p(-random());
        const double yy = -std::log1p(-random());
        if (yy + yy > xx * xx) {
          return ((position >> 8) & 1U) != 0 ? -(kZigguratR + xx)
                                             : kZigguratR + xx;
        }
      }
    }
    // The wedge between the rectangle and the curve.
    if ((zig::kFI[strip - 1] - zig::kFI[strip]) * random() + zig::kFI[strip] <
        std::exp(-0.5 * x * x)) {
      return x;
    }
  }
}

void NumpyGenerator::standard_normal(double* out, int64_t n) noexcept {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = standard_normal();
  }
}

}  // namespace rl
TENSORDICT_END_NAMESPACE
