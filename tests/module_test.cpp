// Tests of include/tensordict/module.h: from_module, to_module and
// ScopedModuleSwap, plus checkpointing through memmap.

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace module_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)
namespace fs = std::filesystem;

namespace {

torch::nn::Sequential make_model() {
  return torch::nn::Sequential(
      torch::nn::Linear(2, 3), torch::nn::ReLU(), torch::nn::BatchNorm1d(3));
}

std::string temp_path() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path path =
      fs::temp_directory_path() /
      ("tensordict_module_" + std::to_string(::getpid()) + "_" + info->name());
  fs::remove_all(path);
  return path.string();
}

}  // namespace

TEST(ModuleTest, FromModuleUsesPythonKeysAndAliasesTheTensors) {
  auto model = make_model();
  const TensorDict params = TensorDict::from_module(*model);
  // Python: ('0','weight'), ('0','bias'), ('2','weight'), ... ; the ReLU
  // child holds nothing and is left out.
  EXPECT_EQ(
      params.keys(/*include_nested=*/true, /*leaves_only=*/true),
      (std::vector<NestedKey>{
          {"0", "weight"},
          {"0", "bias"},
          {"2", "weight"},
          {"2", "bias"},
          {"2", "running_mean"},
          {"2", "running_var"},
          {"2", "num_batches_tracked"}}));
  EXPECT_EQ(params.keys(), (std::vector<NestedKey>{"0", "2"}));
  EXPECT_TRUE(params.batch_size().empty());
  auto* linear = model[0]->as<torch::nn::Linear>();
  EXPECT_TRUE(params.get({"0", "weight"}).is_same(linear->weight));
  params.get({"0", "bias"}).detach().fill_(4);
  EXPECT_TRUE(torch::equal(linear->bias, torch::full({3}, 4.0)));
}

TEST(ModuleTest, ToModuleInPlaceCopiesValues) {
  auto model = make_model();
  const TensorDict zeros = TensorDict::from_module(*model).apply(
      [](const at::Tensor& t) { return torch::zeros_like(t); });
  const void* before = model[0]->as<torch::nn::Linear>()->weight.data_ptr();
  (void)zeros.to_module(*model, ToModuleOptions().inplace(true));
  auto* linear = model[0]->as<torch::nn::Linear>();
  EXPECT_EQ(linear->weight.data_ptr(), before);
  EXPECT_TRUE(torch::equal(linear->weight, torch::zeros({3, 2})));
  EXPECT_TRUE(linear->weight.requires_grad());
}

TEST(ModuleTest, ToModuleSwapMakesTheModuleUseTheDictsTensors) {
  auto model = make_model();
  auto* linear = model[0]->as<torch::nn::Linear>();
  const at::Tensor original = linear->weight.detach().clone();
  const TensorDict ones = TensorDict::from_module(*model).apply(
      [](const at::Tensor& t) { return torch::ones_like(t); });
  const TensorDict previous = ones.to_module(*model);
  EXPECT_EQ(linear->weight.data_ptr(), ones.get({"0", "weight"}).data_ptr());
  EXPECT_TRUE(torch::equal(previous.get({"0", "weight"}), original));
  // forward computes with the swapped-in weights: ones @ x + 1
  model->eval();
  const at::Tensor y = linear->forward(torch::ones({1, 2}));
  EXPECT_TRUE(torch::allclose(y, torch::full({1, 3}, 3.0)));
  // Restore.
  (void)previous.to_module(*model);
  EXPECT_TRUE(torch::equal(linear->weight, original));
}

TEST(ModuleTest, ScopedSwapRestoresTheOriginals) {
  auto model = make_model();
  auto* linear = model[0]->as<torch::nn::Linear>();
  const void* own = linear->weight.data_ptr();
  const TensorDict twos = TensorDict::from_module(*model).apply(
      [](const at::Tensor& t) { return torch::full_like(t, 2); });
  {
    ScopedModuleSwap swap(twos, *model);
    EXPECT_TRUE(torch::equal(linear->weight, torch::full({3, 2}, 2.0)));
    EXPECT_EQ(swap.originals().get({"0", "weight"}).data_ptr(), own);
  }
  EXPECT_EQ(linear->weight.data_ptr(), own);
  EXPECT_FALSE(torch::equal(linear->weight, torch::full({3, 2}, 2.0)));
}

TEST(ModuleTest, SwappedParametersTakeTheGradientsAsInPython) {
  // Python 0.15.3 (the functional pattern):
  //   model = nn.Linear(2, 3); x = torch.ones(4, 2)
  //   params = TensorDict.from_module(model).clone().detach().requires_grad_()
  //   with params.to_module(model):
  //       model(x).sum().backward()
  //   params["weight"].grad    # tensor of 4s; model.weight.grad is None
  //   params["bias"].grad      # tensor of 4s
  //   model.weight.is_leaf     # True once restored
  // Seeded: the closed form below is checked on a layer whose terms do not
  // cancel by chance.
  torch::manual_seed(0);
  torch::nn::Linear model(2, 3);
  const at::Tensor own = model->weight;
  const TensorDict params =
      TensorDict::from_module(*model).clone().detach().requires_grad_();
  const at::Tensor x = torch::ones({4, 2});
  {
    ScopedModuleSwap swap(params, *model);
    model->forward(x).sum().backward();
  }
  ASSERT_TRUE(params.get("weight").grad().defined());
  EXPECT_TRUE(
      torch::equal(params.get("weight").grad(), torch::full({3, 2}, 4.)));
  EXPECT_TRUE(torch::equal(params.get("bias").grad(), torch::full({3}, 4.)));
  EXPECT_FALSE(own.grad().defined());
  EXPECT_TRUE(model->weight.is_leaf());
  EXPECT_TRUE(model->weight.requires_grad());
  // Without the guard: gradients flow on through computed dict tensors.
  const at::Tensor scale = torch::full({1}, 2., torch::requires_grad());
  const TensorDict scaled =
      params.apply([&](const at::Tensor& t) { return t.detach() * scale; });
  const TensorDict previous = scaled.to_module(*model);
  model->forward(x).sum().backward();
  (void)previous.to_module(*model);
  ASSERT_TRUE(scale.grad().defined());
  // d/d scale of sum(x @ (s W)^T + s b) = sum(x @ W^T + b)
  const at::Tensor w = params.get("weight").detach();
  const at::Tensor b = params.get("bias").detach();
  // The two sums add the same terms in different orders, and a random layer
  // can make them cancel to near zero, so the tolerance scales with the size
  // of the terms, not of the result.
  const at::Tensor terms = torch::matmul(x, w.t()) + b;
  const double term_scale =
      torch::matmul(x.abs(), w.abs().t()).add(b.abs()).sum().item<double>();
  ASSERT_GT(std::abs(terms.sum().item<double>()), 1e-2 * term_scale)
      << "the seeded layer's terms cancel: the check below would be weak";
  EXPECT_NEAR(
      scale.grad().item<double>(),
      terms.sum().item<double>(),
      1e-5 * term_scale);
  EXPECT_FALSE(own.grad().defined());
  EXPECT_TRUE(model->weight.is_leaf());
  // A dict tensor without grad leaves the module's parameter a leaf.
  {
    ScopedModuleSwap swap(params.detach(), *model);
    EXPECT_TRUE(model->weight.is_leaf());
  }
  EXPECT_TRUE(model->weight.is_leaf());
}

TEST(ModuleTest, MismatchedStructureNamesTheKey) {
  auto model = make_model();
  TensorDict params = TensorDict::from_module(*model).clone();
  params.set({"0", "extra"}, torch::zeros({1}));
  EXPECT_THROWS_WITH(
      params.to_module(*model),
      c10::Error,
      "to_module: key ('0', 'extra') has no parameter, buffer or submodule of "
      "that name in torch::nn::Linear");
  TensorDict missing = TensorDict::from_module(*model).clone();
  (void)missing.pop({"2", "running_var"});
  EXPECT_THROWS_WITH(
      missing.to_module(*model),
      c10::Error,
      "to_module: the module's buffer ('2', 'running_var') is missing from the "
      "dict");
  TensorDict shape = TensorDict::from_module(*model).clone();
  shape.set({"0", "weight"}, torch::zeros({4, 2}));
  EXPECT_THROWS_WITH(
      shape.to_module(*model),
      c10::Error,
      "to_module: key ('0', 'weight') has shape [4, 2] but the module's tensor "
      "has shape [3, 2]");
  // A failed call leaves the module untouched.
  EXPECT_FALSE(torch::equal(
      model[0]->as<torch::nn::Linear>()->weight, torch::zeros({3, 2})));
}

TEST(ModuleTest, EnsembleRunsOncePerSlice) {
  std::vector<torch::nn::Linear> members;
  std::vector<TensorDict> params;
  for (int i = 0; i < 3; ++i) {
    members.emplace_back(torch::nn::Linear(4, 2));
    params.push_back(TensorDict::from_module(*members.back()));
  }
  const TensorDict stacked = stack(params).detach();
  EXPECT_EQ(stacked.batch_size(), (std::vector<int64_t>{3}));
  torch::nn::Linear shell(4, 2);
  const at::Tensor x = torch::randn({5, 4});
  for (int64_t i = 0; i < 3; ++i) {
    ScopedModuleSwap swap(stacked.index({i}), *shell);
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::allclose(shell->forward(x), members[i]->forward(x)));
  }
}

TEST(ModuleTest, CheckpointThroughMemmapLoadsOntoAFreshModel) {
  const std::string dir = temp_path();
  auto model = make_model();
  (void)TensorDict::from_module(*model).memmap(dir);
  auto fresh = make_model();
  (void)TensorDict::load_memmap(dir).to_module(
      *fresh, ToModuleOptions().inplace(true));
  auto* a = model[0]->as<torch::nn::Linear>();
  auto* b = fresh[0]->as<torch::nn::Linear>();
  EXPECT_TRUE(torch::equal(a->weight, b->weight));
  EXPECT_TRUE(torch::equal(
      model[2]->as<torch::nn::BatchNorm1d>()->running_var,
      fresh[2]->as<torch::nn::BatchNorm1d>()->running_var));

  // One submodule from its sub-directory.
  torch::nn::Linear single(2, 3);
  (void)TensorDict::load_memmap(dir, LoadMemmapOptions().subpath({"0"}))
      .to_module(*single, ToModuleOptions().inplace(true));
  EXPECT_TRUE(torch::equal(single->weight, a->weight));
  EXPECT_TRUE(torch::equal(single->bias, a->bias));
  fs::remove_all(dir);
}

TEST(ModuleTest, FromModuleWithUseStateDictGivesDetachedAliases) {
  auto model = make_model();
  const TensorDict plain = TensorDict::from_module(*model);
  const TensorDict sd =
      TensorDict::from_module(*model, FromModuleOptions().use_state_dict(true));
  EXPECT_EQ(
      sd.keys(/*include_nested=*/true, /*leaves_only=*/true),
      plain.keys(/*include_nested=*/true, /*leaves_only=*/true));
  auto* linear = model[0]->as<torch::nn::Linear>();
  // Python: from_module(m, use_state_dict=True)["0", "weight"] is not
  // m[0].weight, and does not require grad.
  EXPECT_FALSE(sd.get({"0", "weight"}).is_same(linear->weight));
  EXPECT_FALSE(sd.get({"0", "weight"}).requires_grad());
  EXPECT_EQ(sd.get({"0", "weight"}).data_ptr(), linear->weight.data_ptr());
}

TEST(ModuleTest, FromModuleLocksAndKeepsEmptySubmodulesOnRequest) {
  auto model = make_model();
  EXPECT_FALSE(TensorDict::from_module(*model).is_locked());
  EXPECT_TRUE(TensorDict::from_module(*model, FromModuleOptions().lock(true))
                  .is_locked());
  const TensorDict all =
      TensorDict::from_module(*model, FromModuleOptions().filter_empty(false));
  EXPECT_EQ(all.keys(), (std::vector<NestedKey>{"0", "1", "2"}));
  EXPECT_TRUE(all.get_tensordict("1").is_empty());
}

TEST(ModuleTest, ToModuleInPlaceReturnsCopiesOfThePreviousValues) {
  auto model = make_model();
  auto* linear = model[0]->as<torch::nn::Linear>();
  const at::Tensor original = linear->weight.detach().clone();
  const TensorDict zeros = TensorDict::from_module(*model).apply(
      [](const at::Tensor& t) { return torch::zeros_like(t); });
  const TensorDict swap =
      zeros.to_module(*model, ToModuleOptions().inplace(true));
  EXPECT_TRUE(torch::equal(swap.get({"0", "weight"}), original));
  EXPECT_NE(swap.get({"0", "weight"}).data_ptr(), linear->weight.data_ptr());
  EXPECT_TRUE(torch::equal(linear->weight, torch::zeros({3, 2})));
  // Swapping back restores the values.
  (void)swap.to_module(*model, ToModuleOptions().inplace(true));
  EXPECT_TRUE(torch::equal(linear->weight, original));
}

TEST(ModuleTest, ToModuleWithoutReturnSwapReturnsAnEmptyDict) {
  auto model = make_model();
  const TensorDict ones = TensorDict::from_module(*model).apply(
      [](const at::Tensor& t) { return torch::ones_like(t); });
  for (const bool inplace : {false, true}) {
    const TensorDict swap = ones.to_module(
        *model, ToModuleOptions().inplace(inplace).return_swap(false));
    EXPECT_TRUE(swap.is_empty());
    EXPECT_TRUE(torch::equal(
        model[0]->as<torch::nn::Linear>()->weight, torch::ones({3, 2})));
  }
}

}  // namespace module_test

namespace module_test_transformer {

using namespace tensordict;  // NOLINT(google-build-using-namespace)

// Python (tensordict 0.15, torch 2.13) on nn.Transformer() with its
// defaults: 184 leaves holding 44,140,544 values, first
// ('encoder', 'layers', '0', 'self_attn', 'in_proj_weight') and last
// ('decoder', 'norm', 'bias'); the root has no batch dims and two keys.
TEST(ModuleTest, FromModuleOnATransformerHasPythonsKeys) {
  torch::nn::Transformer model{torch::nn::TransformerOptions()};
  const TensorDict params = TensorDict::from_module(*model);
  const std::vector<NestedKey> keys =
      params.keys(/*include_nested=*/true, /*leaves_only=*/true);
  ASSERT_EQ(keys.size(), 184U);
  int64_t values = 0;
  for (const Value& leaf : params.values(true, true)) {
    values += leaf.tensor().numel();
  }
  EXPECT_EQ(values, 44140544);
  EXPECT_EQ(
      keys.front(),
      NestedKey({"encoder", "layers", "0", "self_attn", "in_proj_weight"}));
  EXPECT_EQ(keys.back(), NestedKey({"decoder", "norm", "bias"}));
  EXPECT_EQ(params.keys(), (std::vector<NestedKey>{"encoder", "decoder"}));
  EXPECT_TRUE(params.batch_size().empty());
  // The leaves are the module's own tensors.
  EXPECT_TRUE(params.get(keys.front())
                  .is_same(model->named_parameters()
                               ["encoder.layers.0.self_attn.in_proj_weight"]));
}

}  // namespace module_test_transformer
