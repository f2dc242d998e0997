// The checks every module kind's weights contract (NOTE [Weights contract]
// in tensordict/nn.h) must pass, for the test files of each kind's header.

#pragma once

#include <tensordict/nn.h>

#include <string>

#include "support.h"

namespace weights_contract {

/// Checks that `module`, whose weights are its libtorch parameters and
/// buffers (or those of modules below it), lays them out as
/// `TensorDict::from_module` keys them, that each refusal of `load_weights`
/// (a missing, an unknown, a misshapen and a mistyped key) names the key
/// and leaves every weight as it was, and that fitting weights load,
/// nested or with "."-joined keys.
inline void expect_load_weights_contract(
    tensordict::nn::TensorDictModuleBase& module) {
  using tensordict::NestedKey;
  using tensordict::TensorDict;
  using tensordict::testing::expect_td_equal;
  const TensorDict before = TensorDict::from_module(module).clone();
  const TensorDict layout = module.weights_layout();
  ASSERT_EQ(
      layout.keys(/*include_nested=*/true, /*leaves_only=*/true),
      before.keys(/*include_nested=*/true, /*leaves_only=*/true));
  for (const NestedKey& key : layout.keys(true, true)) {
    EXPECT_TRUE(layout.get(key).device().is_meta()) << key;
    EXPECT_EQ(layout.get(key).sizes(), before.get(key).sizes()) << key;
    EXPECT_EQ(layout.get(key).scalar_type(), before.get(key).scalar_type())
        << key;
  }
  ASSERT_FALSE(layout.is_empty());
  const TensorDict good = before.apply(
      [](const at::Tensor& t) { return torch::full_like(t, 3).detach(); });
  const NestedKey first = layout.keys(true, true).front();
  const std::string name = first.to_string();
  const at::Tensor& model = good.get(first);

  EXPECT_THROWS_WITH(
      module.load_weights(good.exclude({first})),
      tensordict::KeyError,
      "key " + name + " of the module is missing from the weights");
  expect_td_equal(TensorDict::from_module(module), before);

  TensorDict extra = good.clone();
  extra.set({"stray", "weight"}, torch::zeros({1}));
  EXPECT_THROWS_WITH(
      module.load_weights(extra),
      tensordict::KeyError,
      "key ('stray', 'weight') is not a weight of the module");
  expect_td_equal(TensorDict::from_module(module), before);

  TensorDict shape = good.clone();
  shape.set(first, torch::zeros({model.numel() + 1}, model.options()));
  EXPECT_THROWS_WITH(
      module.load_weights(shape),
      c10::ValueError,
      "key " + name + " expected ");
  expect_td_equal(TensorDict::from_module(module), before);

  TensorDict dtype = good.clone();
  dtype.set(
      first,
      model.to(model.scalar_type() == at::kDouble ? at::kFloat : at::kDouble));
  EXPECT_THROWS_WITH(
      module.load_weights(dtype),
      c10::ValueError,
      "key " + name + " expected ");
  expect_td_equal(TensorDict::from_module(module), before);

  module.load_weights(good);
  expect_td_equal(TensorDict::from_module(module), good);
  module.load_weights(before.flatten_keys("."));
  expect_td_equal(TensorDict::from_module(module), before);
}

}  // namespace weights_contract
