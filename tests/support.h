#pragma once

// Shared test helpers: exception-message assertions and dict equality.

#include <gtest/gtest.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <string>

/// Asserts that `statement` throws `error_type` whose message (without the
/// backtrace) contains `substring`.
#define EXPECT_THROWS_WITH(statement, error_type, substring)                  \
  do {                                                                       \
    bool tensordict_test_thrown = false;                                     \
    try {                                                                    \
      (void)(statement);                                                     \
    } catch (const error_type& e) {                                          \
      tensordict_test_thrown = true;                                         \
      EXPECT_NE(std::string(e.msg()).find(substring), std::string::npos)     \
          << "message was: " << e.msg();                                     \
    } catch (const std::exception& e) {                                      \
      ADD_FAILURE() << "threw the wrong type: " << e.what();                 \
      tensordict_test_thrown = true;                                         \
    }                                                                        \
    EXPECT_TRUE(tensordict_test_thrown) << #statement " did not throw";      \
  } while (false)

/// Asserts that `statement` throws `error_type` with exactly `message`.
#define EXPECT_THROWS_EXACTLY(statement, error_type, message)                 \
  do {                                                                       \
    bool tensordict_test_thrown = false;                                     \
    try {                                                                    \
      (void)(statement);                                                     \
    } catch (const error_type& e) {                                          \
      tensordict_test_thrown = true;                                         \
      EXPECT_EQ(std::string(e.msg()), std::string(message));                 \
    } catch (const std::exception& e) {                                      \
      ADD_FAILURE() << "threw the wrong type: " << e.what();                 \
      tensordict_test_thrown = true;                                         \
    }                                                                        \
    EXPECT_TRUE(tensordict_test_thrown) << #statement " did not throw";      \
  } while (false)

namespace tensordict::testing {

/// Checks batch size, keys (in order), kinds and values, recursively.
inline void expect_td_equal(const TensorDict& a, const TensorDict& b) {
  EXPECT_EQ(a.batch_size(), b.batch_size());
  const auto ka = a.keys(/*include_nested=*/true);
  const auto kb = b.keys(/*include_nested=*/true);
  ASSERT_EQ(ka.size(), kb.size());
  for (size_t i = 0; i < ka.size(); ++i) {
    EXPECT_EQ(ka[i], kb[i]);
    const Value va = a[ka[i]];
    const Value vb = b[kb[i]];
    ASSERT_EQ(va.kind(), vb.kind()) << ka[i];
    if (va.is_tensor()) {
      EXPECT_EQ(va.tensor().scalar_type(), vb.tensor().scalar_type()) << ka[i];
      EXPECT_TRUE(torch::equal(va.tensor(), vb.tensor())) << ka[i];
    } else if (va.is_non_tensor()) {
      EXPECT_EQ(va.non_tensor(), vb.non_tensor()) << ka[i];
    }
  }
  EXPECT_TRUE(equal(a, b));
}

} // namespace tensordict::testing
