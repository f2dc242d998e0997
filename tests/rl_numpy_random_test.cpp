// Tests of include/tensordict/rl/numpy_random.h that need no NumPy: the
// stream's own laws (fills continue scalar draws, copies and reseeding
// replay, ranges). tests/rl/numpy_random_vs_numpy.py compares the draws
// with live NumPy bit for bit.

#include <gtest/gtest.h>
#include <tensordict/rl/numpy_random.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace rl_numpy_random_test {

namespace rl = tensordict::rl;

TEST(NumpyGeneratorTest, MatchesNumpysFirstDrawOfDefaultRngZero) {
  // np.random.default_rng(0).random(), NumPy's documented example value.
  rl::NumpyGenerator rng(0);
  EXPECT_EQ(rng.random(), 0.6369616873214543);
}

TEST(NumpyGeneratorTest, FillsContinueTheScalarDraws) {
  rl::NumpyGenerator scalar(12345);
  rl::NumpyGenerator filled(12345);
  std::vector<double> out(1000);
  filled.uniform(-0.5, 2.0, out.data(), 500);
  filled.standard_normal(out.data() + 500, 500);
  for (int i = 0; i < 500; ++i) {
    EXPECT_EQ(out[i], scalar.uniform(-0.5, 2.0)) << i;
  }
  for (int i = 500; i < 1000; ++i) {
    EXPECT_EQ(out[i], scalar.standard_normal()) << i;
  }
  EXPECT_EQ(filled.next_uint64(), scalar.next_uint64());
}

TEST(NumpyGeneratorTest, CopiesAndReseedingReplayTheStream) {
  rl::NumpyGenerator a(7);
  (void)a.standard_normal();
  rl::NumpyGenerator b = a;
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(a.next_uint64(), b.next_uint64());
  }
  a.seed(7);
  const rl::NumpyGenerator fresh(7);
  EXPECT_EQ(a.state().state_low, fresh.state().state_low);
  EXPECT_EQ(a.state().state_high, fresh.state().state_high);
  EXPECT_EQ(a.state().inc_low, fresh.state().inc_low);
  // PCG's increment is odd.
  EXPECT_EQ(fresh.state().inc_low & 1U, 1U);
}

TEST(NumpyGeneratorTest, SeedsDifferInEveryWord) {
  // 0 and 2^32 differ only in the second 32-bit word of the seed.
  const uint64_t seeds[] = {0, 1, uint64_t{1} << 32, ~uint64_t{0}};
  for (uint64_t x : seeds) {
    for (uint64_t y : seeds) {
      if (x != y) {
        EXPECT_NE(
            rl::NumpyGenerator(x).next_uint64(),
            rl::NumpyGenerator(y).next_uint64())
            << x << " " << y;
      }
    }
  }
}

TEST(NumpyGeneratorTest, DrawsStayInTheirRanges) {
  rl::NumpyGenerator rng(3);
  double sum = 0.0;
  double squares = 0.0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double u = rng.random();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    const double v = rng.uniform(-0.1, 0.1);
    ASSERT_GE(v, -0.1);
    ASSERT_LT(v, 0.1);
    const double z = rng.standard_normal();
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    squares += z * z;
  }
  // Mean 0 and variance 1 within 5 standard errors.
  EXPECT_NEAR(sum / n, 0.0, 5.0 / std::sqrt(n));
  EXPECT_NEAR(squares / n, 1.0, 5.0 * std::sqrt(2.0 / n));
}

}  // namespace rl_numpy_random_test
