// Prints draws of rl::NumpyGenerator for numpy_random_vs_numpy.py, which
// makes the same draws with NumPy and compares them bit for bit. Usage:
//   numpy_random_draws SEED N
// prints, one per line, as hex integers (doubles by their bits):
//   the SeedSequence's first 8 state words, the PCG64 state and increment,
//   N raw draws; then, from a fresh generator of the same seed, N
//   `random()`, N `uniform(-0.1, 0.1)` scalars, a size-N `uniform(-3, 5)`
//   fill, N `standard_normal()` scalars and a size-N `standard_normal` fill,
//   in that order on one stream (as the script draws them).

#include <tensordict/rl/numpy_random.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace rl = tensordict::rl;

namespace {

void print_double(double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  std::printf("%016" PRIx64 "\n", bits);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: numpy_random_draws SEED N\n");
    return 2;
  }
  const uint64_t seed = std::strtoull(argv[1], nullptr, 10);
  const int64_t n = std::strtoll(argv[2], nullptr, 10);
  uint32_t words[8];
  tensordict::detail::numpy_seed_sequence_state(seed, words, 8);
  for (uint32_t word : words) {
    std::printf("%08" PRIx32 "\n", word);
  }
  rl::NumpyGenerator raw(seed);
  const rl::NumpyGenerator::State state = raw.state();
  std::printf(
      "%016" PRIx64 "%016" PRIx64 "\n%016" PRIx64 "%016" PRIx64 "\n",
      state.state_high,
      state.state_low,
      state.inc_high,
      state.inc_low);
  for (int64_t i = 0; i < n; ++i) {
    std::printf("%016" PRIx64 "\n", raw.next_uint64());
  }
  rl::NumpyGenerator rng(seed);
  std::vector<double> fill(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    print_double(rng.random());
  }
  for (int64_t i = 0; i < n; ++i) {
    print_double(rng.uniform(-0.1, 0.1));
  }
  rng.uniform(-3.0, 5.0, fill.data(), n);
  for (double value : fill) {
    print_double(value);
  }
  for (int64_t i = 0; i < n; ++i) {
    print_double(rng.standard_normal());
  }
  rng.standard_normal(fill.data(), n);
  for (double value : fill) {
    print_double(value);
  }
  return 0;
}
