#pragma once

// Helpers the tensor_dict_*_test files share: the dict most of their ops
// start from, and a leaf check with dtype, shape and tolerance.

#include <tensordict/tensor_dict.h>

#include "support.h"

namespace tensordict::testing {

// batch [2, 3], named (x, y): a float [2, 3, 4] of 0..23; n {b} with batch
// [2, 3, 5], b float of 0..29 divided by `b_divisor`.
inline TensorDict named_2x3_td(double b_divisor = 1) {
  TensorDict td(
      {{"a", torch::arange(24, torch::kFloat).view({2, 3, 4})}},
      {2, 3},
      std::nullopt,
      {"x", "y"});
  td.set(
      "n",
      TensorDict(
          {{"b", torch::arange(30, torch::kFloat).view({2, 3, 5}) / b_divisor}},
          {2, 3, 5}));
  return td;
}

// Expects the leaf `key` of `td` to have the dtype and shape of `expected`
// and values torch::allclose to it (with its rtol, atol and equal_nan).
inline void expect_leaf(
    const TensorDict& td,
    const NestedKey& key,
    const at::Tensor& expected,
    double rtol = 1e-5,
    double atol = 1e-8,
    bool equal_nan = false) {
  const at::Tensor got = td.get(key);
  EXPECT_EQ(got.scalar_type(), expected.scalar_type()) << key;
  EXPECT_EQ(got.sizes(), expected.sizes()) << key;
  EXPECT_TRUE(torch::allclose(got, expected, rtol, atol, equal_nan))
      << key << "\n"
      << got << "\n"
      << expected;
}

}  // namespace tensordict::testing
