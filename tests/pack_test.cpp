// Tests of include/tensordict/pack.h that need no Python: what pack()
// refuses, and round trips. Its columns against Python's, bit for bit, are
// tested in tests/aoti_test.cpp, which has the Python-written goldens.

#include <tensordict/pack.h>

#include <vector>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace pack_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)

TEST(PackTest, PackAndUnpackRoundTripANestedDict) {
  TensorDict td(
      {{"a", torch::randn({3, 2, 2})},
       {"sub", TensorDict({{"b", torch::randn({3})}}, {3})}},
      {3});
  auto [flat, layout] = tensordict::pack(td);
  EXPECT_EQ(flat.sizes(), c10::IntArrayRef({3, 5}));
  EXPECT_EQ(layout.keys, (std::vector<NestedKey>{"a", {"sub", "b"}}));
  EXPECT_EQ(layout.offsets, (std::vector<int64_t>{0, 4}));
  const TensorDict back = layout.unpack(flat);
  EXPECT_TRUE(torch::equal(back.get("a"), td.get("a")));
  EXPECT_TRUE(torch::equal(back.get({"sub", "b"}), td.get({"sub", "b"})));
  EXPECT_EQ(
      back.get({"sub", "b"}).data_ptr<float>(), flat.data_ptr<float>() + 4);
}

TEST(PackTest, PackRefusesWhatItCannotPack) {
  TensorDict td({{"a", torch::zeros({2, 3})}, {"b", torch::zeros({2})}}, {2});
  auto [flat, layout] = tensordict::pack(td);
  EXPECT_THROWS_WITH(
      tensordict::pack(td, 2), c10::IndexError, "dim 2 is out of range");
  TensorDict mixed = td.clone();
  mixed.set("c", torch::zeros({2}, torch::kInt64));
  EXPECT_THROWS_WITH(
      tensordict::pack(mixed),
      c10::TypeError,
      "Cannot pack leaves of different dtypes: Float and Long at 'c'");
  TensorDict other_keys = td.exclude({"b"});
  other_keys.set("d", torch::zeros({2}));
  EXPECT_THROWS_WITH(
      tensordict::pack(other_keys, -1, &layout),
      tensordict::KeyError,
      "The leaves of the tensordict differ from the keys of the layout");
  TensorDict reshaped(
      {{"a", torch::zeros({2, 4})}, {"b", torch::zeros({2})}}, {2});
  EXPECT_THROWS_WITH(
      tensordict::pack(reshaped, -1, &layout),
      c10::ValueError,
      "The feature shapes of the leaves differ from those of the layout");
  TensorDict text({{"a", torch::zeros({2})}, {"note", "hi"}}, {2});
  EXPECT_THROWS_WITH(
      tensordict::pack(text),
      c10::TypeError,
      "Cannot pack the non-tensor entry 'note'");
  EXPECT_THROWS_WITH(
      layout.unpack(torch::zeros({2, 5})),
      c10::ValueError,
      "Expected 4 entries along dim -1 of the packed tensor, got 5.");
}

}  // namespace pack_test
