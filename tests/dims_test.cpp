#include "util/dims.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

// Its own namespace, so that test files can share a unity batch.
namespace dims_test {

namespace {

using tensordict::detail::same_dims;

TEST(DimsTest, SameDimsComparesLengthAndEveryDim) {
  const std::vector<int64_t> shape = {4, 1, 3};
  EXPECT_TRUE(same_dims(shape, std::vector<int64_t>{4, 1, 3}));
  EXPECT_TRUE(same_dims({}, {}));
  EXPECT_FALSE(same_dims(shape, std::vector<int64_t>{4, 1}));
  EXPECT_FALSE(same_dims(std::vector<int64_t>{4, 1}, shape));
  EXPECT_FALSE(same_dims(shape, {}));
  for (size_t d = 0; d < shape.size(); ++d) {
    std::vector<int64_t> other = shape;
    other[d] += 1;
    EXPECT_FALSE(same_dims(shape, other)) << "dim " << d;
  }
  // Parts of shapes, by pointer and count: only those `n` dims count.
  const std::vector<int64_t> longer = {9, 4, 1, 3, 7};
  EXPECT_TRUE(same_dims(shape.data(), longer.data() + 1, 3));
  EXPECT_FALSE(same_dims(shape.data(), longer.data(), 3));
  EXPECT_FALSE(same_dims(shape.data(), longer.data() + 2, 2));
  EXPECT_TRUE(same_dims(shape.data(), longer.data(), 0));
}

}  // namespace

}  // namespace dims_test
