// Tests of clone() on the modules of include/tensordict/nn.h and
// include/tensordict/probabilistic.h: a deep copy, as Python's
// copy.deepcopy of a module and torch's Cloneable give (target networks,
// ensembles). AOTIModule's clone is tested in tests/aoti_test.cpp, next to
// its packages.

#include <tensordict/nn.h>
#include <tensordict/probabilistic.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <string>
#include <vector>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace module_clone_test {

using namespace tensordict;      // NOLINT(google-build-using-namespace)
using namespace tensordict::nn;  // NOLINT(google-build-using-namespace)

namespace {

template <class Impl>
std::shared_ptr<Impl> clone_as(
    const torch::nn::Module& module,
    const std::optional<c10::Device>& device = std::nullopt) {
  auto copy = std::dynamic_pointer_cast<Impl>(module.clone(device));
  EXPECT_NE(copy, nullptr) << "clone() returned another type";
  return copy;
}

// Returns true if no parameter of `a` shares storage with one of `b`, and
// their values are equal, name by name.
void expect_equal_but_not_shared(
    const torch::nn::Module& a, const torch::nn::Module& b) {
  const auto pa = a.named_parameters();
  const auto pb = b.named_parameters();
  ASSERT_EQ(pa.keys(), pb.keys());
  ASSERT_FALSE(pa.is_empty());
  for (const auto& item : pa) {
    const at::Tensor& other = pb[item.key()];
    EXPECT_TRUE(torch::equal(item.value(), other)) << item.key();
    EXPECT_NE(item.value().data_ptr(), other.data_ptr()) << item.key();
  }
}

// A module that cannot be cloned: a plain torch::nn::Module.
struct Plain : torch::nn::Module {
  at::Tensor forward(const at::Tensor& x) {
    return x + 1;
  }
};

}  // namespace

TEST(ModuleCloneTest, TensorDictModuleCloneCopiesTheWrappedModule) {
  torch::manual_seed(0);
  TensorDictModule actor(torch::nn::Linear(3, 2), {{"obs", "x"}}, {"action"});
  auto copy = clone_as<TensorDictModuleImpl>(*actor);
  expect_equal_but_not_shared(*actor, *copy);
  EXPECT_EQ(copy->in_keys(), actor->in_keys());
  EXPECT_EQ(copy->out_keys(), actor->out_keys());
  EXPECT_NE(copy->module(), actor->module());
  TensorDict td({{{"obs", "x"}, torch::randn({4, 3})}}, {4});
  TensorDict a = (*actor)(td.clone());
  TensorDict b = (*copy)(td.clone());
  EXPECT_TRUE(torch::equal(a.get("action"), b.get("action")));
  // Training the copy leaves the original alone.
  {
    torch::NoGradGuard no_grad;
    for (auto& p : copy->parameters()) {
      p.add_(1.0);
    }
  }
  TensorDict again = (*actor)(td.clone());
  EXPECT_TRUE(torch::equal(again.get("action"), a.get("action")));
  TensorDict moved = (*copy)(td.clone());
  EXPECT_FALSE(torch::equal(moved.get("action"), a.get("action")));
}

TEST(ModuleCloneTest, CloneKeepsTheSelectionTheOptionsAndTheMode) {
  TensorDictModule module(
      [](const at::Tensor& x) { return std::make_tuple(x * 2, x * 3); },
      {"x"},
      {"double", "triple"},
      TensorDictModuleOptions().inplace(InplaceMode::kFalse));
  module->select_out_keys({"triple"});
  module->eval();
  auto copy = clone_as<TensorDictModuleImpl>(*module);
  EXPECT_EQ(copy->out_keys(), std::vector<NestedKey>{"triple"});
  EXPECT_EQ(copy->out_keys_source(), module->out_keys_source());
  EXPECT_EQ(copy->options().inplace(), InplaceMode::kFalse);
  EXPECT_FALSE(copy->is_training());
  TensorDict td({{"x", torch::ones({2})}}, {2});
  TensorDict out = (*copy)(td);
  EXPECT_FALSE(out.is_same(td));  // inplace=False: a new dict
  EXPECT_TRUE(out.contains("triple"));
  EXPECT_FALSE(out.contains("double"));
}

TEST(ModuleCloneTest, SequentialCloneClonesEveryModule) {
  torch::manual_seed(1);
  TensorDictSequential policy(
      {TensorDictModule(torch::nn::Linear(4, 8), {"obs"}, {"hidden"}),
       TensorDictModule(
           torch::nn::Functional(torch::relu), {"hidden"}, {"hidden"}),
       TensorDictModule(torch::nn::Linear(8, 2), {"hidden"}, {"action"})},
      TensorDictSequentialOptions().partial_tolerant(true));
  policy->select_out_keys({"action"});
  auto copy = clone_as<TensorDictSequentialImpl>(*policy);
  ASSERT_EQ(copy->size(), 3u);
  EXPECT_TRUE(copy->partial_tolerant());
  EXPECT_EQ(copy->in_keys(), policy->in_keys());
  EXPECT_EQ(copy->out_keys(), std::vector<NestedKey>{"action"});
  // Names as in Python: module.0.module.weight, ...
  expect_equal_but_not_shared(*policy, *copy);
  for (size_t i = 0; i < copy->size(); ++i) {
    EXPECT_NE(
        (*copy)[static_cast<int64_t>(i)].ptr(),
        (*policy)[static_cast<int64_t>(i)].ptr());
  }
  TensorDict td({{"obs", torch::randn({3, 4})}}, {3});
  TensorDict a = policy(td.clone());
  TensorDict b = (*copy)(td.clone());
  EXPECT_TRUE(torch::equal(a.get("action"), b.get("action")));
  EXPECT_FALSE(b.contains("hidden"));
}

TEST(ModuleCloneTest, CloneToADeviceGivesParametersThere) {
  TensorDictSequential policy(
      {TensorDictModule(torch::nn::Linear(2, 2), {"obs"}, {"action"})});
  auto copy = clone_as<TensorDictSequentialImpl>(*policy, c10::kCPU);
  for (const auto& p : copy->parameters()) {
    EXPECT_EQ(p.device(), c10::Device(c10::kCPU));
  }
  expect_equal_but_not_shared(*policy, *copy);
}

// The error, with the context the clone added (what() has it, msg() not).
std::string clone_error(const torch::nn::Module& module) {
  try {
    (void)module.clone();
  } catch (const c10::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ModuleCloneTest, ModulesThatCannotBeClonedSayWhich) {
  TensorDictModule plain(std::make_shared<Plain>(), {"x"}, {"y"});
  const std::string alone = clone_error(*plain);
  EXPECT_NE(alone.find("clone() has not been implemented"), std::string::npos)
      << alone;
  EXPECT_NE(
      alone.find("while cloning TensorDictModule(module="), std::string::npos)
      << alone;
  TensorDictSequential sequence(
      {TensorDictModule(torch::nn::Linear(2, 2), {"x"}, {"h"}), plain});
  const std::string nested = clone_error(*sequence);
  EXPECT_NE(nested.find("Failed while cloning module '1'."), std::string::npos)
      << nested;
}

TEST(ModuleCloneTest, ProbabilisticSequentialCloneIsProbabilistic) {
  torch::manual_seed(2);
  ProbabilisticTensorDictSequential actor({
      TensorDictModule(torch::nn::Linear(4, 2), {"observation"}, {"loc"}),
      TensorDictModule(
          [](const at::Tensor& loc) { return at::ones_like(loc) * 0.5; },
          {"loc"},
          {"scale"}),
      ProbabilisticTensorDictModule(
          {"loc", "scale"},
          "action",
          ProbabilisticTensorDictModuleOptions("TanhNormal")
              .distribution_kwargs(R"({"low": -2.0, "high": 2.0})")
              .return_log_prob(true)),
  });
  auto copy = clone_as<ProbabilisticTensorDictSequentialImpl>(*actor);
  EXPECT_EQ(copy->out_keys(), actor->out_keys());
  EXPECT_NE(&copy->head(), &actor->head());
  EXPECT_EQ(copy->head().log_prob_key(), NestedKey("action_log_prob"));
  expect_equal_but_not_shared(*actor, *copy);
  TensorDict td({{"observation", torch::randn({5, 4})}}, {5});
  TensorDict a = actor(td.clone());
  TensorDict b = (*copy)(td.clone());
  for (const char* key : {"loc", "action", "action_log_prob"}) {
    EXPECT_TRUE(torch::equal(a.get(key), b.get(key))) << key;
  }
  // The same draws from the same seed.
  SetInteractionType random(InteractionType::kRandom);
  torch::manual_seed(3);
  TensorDict ra = actor(td.clone());
  torch::manual_seed(3);
  TensorDict rb = (*copy)(td.clone());
  EXPECT_TRUE(torch::equal(ra.get("action"), rb.get("action")));
}

TEST(ModuleCloneTest, ProbabilisticModuleCloneCopiesItsTensorArguments) {
  ProbabilisticTensorDictModule head(
      {"loc", "scale"},
      "action",
      ProbabilisticTensorDictModuleOptions("TanhNormal")
          .distribution_tensor_kwargs(
              {{"low", torch::full({2}, -1.0)},
               {"high", torch::full({2}, 1.0)}}));
  head->select_out_keys({"action"});
  auto copy = clone_as<ProbabilisticTensorDictModuleImpl>(*head);
  const auto& original = head->options().distribution_tensor_kwargs();
  const auto& copied = copy->options().distribution_tensor_kwargs();
  ASSERT_EQ(copied.size(), 2u);
  for (const auto& [name, tensor] : original) {
    EXPECT_TRUE(torch::equal(copied.at(name), tensor)) << name;
    EXPECT_NE(copied.at(name).data_ptr(), tensor.data_ptr()) << name;
  }
  EXPECT_EQ(copy->out_keys(), std::vector<NestedKey>{"action"});
  EXPECT_EQ(copy->dist_keys(), head->dist_keys());
  TensorDict td({{"loc", torch::zeros({2})}, {"scale", torch::ones({2})}}, {});
  TensorDict a = head(td.clone());
  TensorDict b = (*copy)(td.clone());
  EXPECT_TRUE(torch::allclose(a.get("action"), b.get("action")));
}

}  // namespace module_clone_test
