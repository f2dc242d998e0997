// Tests of include/tensordict/vmap.h: vmap and functional_call_vmap against
// a loop over ScopedModuleSwap, the errors, and the dynamic layer stack
// left clean after an exception.

#include <ATen/functorch/DynamicLayer.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace vmap_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)

namespace {

// Stacks the parameters of `members` and returns them with the loop's
// reference output: each member's parameters swapped into `shell`, one call
// per member, the outputs stacked.
template <class Holder, class Forward>
std::pair<TensorDict, at::Tensor> stack_and_reference(
    const std::vector<Holder>& members, Holder& shell, Forward forward) {
  std::vector<TensorDict> params;
  for (const auto& member : members) {
    params.push_back(TensorDict::from_module(*member));
  }
  TensorDict params_stack = stack(params);
  std::vector<at::Tensor> outputs;
  for (int64_t i = 0; i < params_stack.size(0); ++i) {
    ScopedModuleSwap swap(params_stack.index({i}), *shell);
    outputs.push_back(forward(i));
  }
  return {params_stack, torch::stack(outputs)};
}

bool no_dynamic_layer() {
  return at::functorch::getDynamicLayerStack().empty();
}

struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t in, int64_t hidden, int64_t out)
      : fc1(register_module("fc1", torch::nn::Linear(in, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, hidden))),
        fc3(register_module("fc3", torch::nn::Linear(hidden, out))) {}
  at::Tensor forward(const at::Tensor& x) {
    return fc3(torch::relu(fc2(torch::relu(fc1(x)))));
  }
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
  torch::nn::Linear fc3;
};
TORCH_MODULE(Mlp);

// A module with a parameter of its own: vmap cannot reach the member that
// forward reads, so it runs as a loop.
struct ScaleImpl : torch::nn::Module {
  ScaleImpl() : scale(register_parameter("scale", torch::randn({3}))) {}
  at::Tensor forward(const at::Tensor& x) {
    return x * scale;
  }
  at::Tensor scale;
};
TORCH_MODULE(Scale);

}  // namespace

TEST(VmapTest, LinearOverTwoCopiesGivesTheSeedsShape) {
  torch::manual_seed(0);
  torch::nn::Linear model(3, 4);
  const TensorDict params = TensorDict::from_module(*model);
  const TensorDict params_stack = stack({params, params});
  const at::Tensor x = torch::randn({10, 3});
  const at::Tensor y = functional_call_vmap(model, params_stack, x);
  EXPECT_EQ(y.sizes(), c10::IntArrayRef({2, 10, 4}));
  const at::Tensor expected = model->forward(x);
  EXPECT_TRUE(torch::allclose(y[0], expected));
  EXPECT_TRUE(torch::allclose(y[1], expected));
  EXPECT_TRUE(no_dynamic_layer());
}

TEST(VmapTest, LinearMatchesTheLoopForDistinctMembers) {
  torch::manual_seed(1);
  std::vector<torch::nn::Linear> members;
  for (int i = 0; i < 4; ++i) {
    members.emplace_back(3, 4);
  }
  torch::nn::Linear shell(3, 4);
  const at::Tensor x = torch::randn({10, 3});
  auto [params_stack, expected] = stack_and_reference(
      members, shell, [&](int64_t) { return shell->forward(x); });
  const at::Tensor batched = functional_call_vmap(
      shell, params_stack, x, VmapOptions().mode(VmapMode::kBatched));
  const at::Tensor loop = functional_call_vmap(
      shell, params_stack, x, VmapOptions().mode(VmapMode::kLoop));
  EXPECT_TRUE(torch::allclose(batched, expected, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(loop, expected, 1e-5, 1e-6));
  for (size_t i = 0; i < members.size(); ++i) {
    EXPECT_TRUE(torch::allclose(batched[i], members[i]->forward(x)));
  }
}

TEST(VmapTest, SequentialWithBatchedInputsMatchesTheLoop) {
  torch::manual_seed(2);
  auto make = [] {
    return torch::nn::Sequential(
        torch::nn::Linear(5, 8),
        torch::nn::ReLU(),
        torch::nn::Linear(8, 8),
        torch::nn::Tanh(),
        torch::nn::Linear(8, 2));
  };
  std::vector<torch::nn::Sequential> members = {make(), make(), make()};
  auto shell = make();
  const at::Tensor x = torch::randn({3, 6, 5});  // one batch per member
  auto [params_stack, expected] = stack_and_reference(
      members, shell, [&](int64_t i) { return shell->forward(x[i]); });
  const at::Tensor y = functional_call_vmap(
      shell,
      params_stack,
      x,
      VmapOptions().in_dims({0}).mode(VmapMode::kBatched));
  EXPECT_EQ(y.sizes(), c10::IntArrayRef({3, 6, 2}));
  EXPECT_TRUE(torch::allclose(y, expected, 1e-5, 1e-6));
}

TEST(VmapTest, Conv2dMatchesTheLoopWithSharedAndBatchedInputs) {
  torch::manual_seed(3);
  auto make = [] {
    return torch::nn::Sequential(
        torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).padding(1)),
        torch::nn::ReLU(),
        torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 2, 3).stride(2)),
        torch::nn::Flatten());
  };
  std::vector<torch::nn::Sequential> members = {make(), make()};
  auto shell = make();
  const at::Tensor shared = torch::randn({5, 3, 8, 8});
  auto [params_stack, expected] = stack_and_reference(
      members, shell, [&](int64_t) { return shell->forward(shared); });
  const auto batched_mode = VmapOptions().mode(VmapMode::kBatched);
  const at::Tensor y =
      functional_call_vmap(shell, params_stack, shared, batched_mode);
  EXPECT_EQ(y.sizes(), expected.sizes());
  EXPECT_TRUE(torch::allclose(y, expected, 1e-5, 1e-5));

  // Inputs mapped along dim 1: [5, 2, 3, 8, 8], member i sees [:, i].
  const at::Tensor per_member = torch::randn({5, 2, 3, 8, 8});
  std::vector<at::Tensor> outputs;
  for (int64_t i = 0; i < 2; ++i) {
    ScopedModuleSwap swap(params_stack.index({i}), *shell);
    outputs.push_back(shell->forward(per_member.select(1, i)));
  }
  const at::Tensor z = functional_call_vmap(
      shell,
      params_stack,
      per_member,
      VmapOptions().in_dims({1}).mode(VmapMode::kBatched));
  EXPECT_TRUE(torch::allclose(z, torch::stack(outputs), 1e-5, 1e-5));
}

TEST(VmapTest, MlpEnsembleMatchesTheLoopAndTheMembers) {
  torch::manual_seed(4);
  std::vector<Mlp> members;
  for (int i = 0; i < 8; ++i) {
    members.emplace_back(16, 32, 10);
  }
  Mlp shell(16, 32, 10);
  const at::Tensor x = torch::randn({12, 16});
  auto [params_stack, expected] = stack_and_reference(
      members, shell, [&](int64_t) { return shell->forward(x); });
  const at::Tensor y = functional_call_vmap(
      shell, params_stack, x, VmapOptions().mode(VmapMode::kBatched));
  EXPECT_EQ(y.sizes(), c10::IntArrayRef({8, 12, 10}));
  EXPECT_TRUE(torch::allclose(y, expected, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(y[5], members[5]->forward(x), 1e-5, 1e-6));
  // out_dim moves the members' dim.
  const at::Tensor moved = functional_call_vmap(
      shell,
      params_stack,
      x,
      VmapOptions().out_dim(1).mode(VmapMode::kBatched));
  EXPECT_TRUE(torch::equal(moved, y.movedim(0, 1)));
}

TEST(VmapTest, GradientsReachTheStackedParametersOnBothPaths) {
  torch::manual_seed(5);
  std::vector<Mlp> members = {Mlp(4, 6, 2), Mlp(4, 6, 2), Mlp(4, 6, 2)};
  std::vector<TensorDict> params;
  for (const auto& member : members) {
    params.push_back(TensorDict::from_module(*member).detach());
  }
  const at::Tensor x = torch::randn({5, 4});
  auto grads = [&](VmapMode mode) {
    TensorDict leaves = stack(params).apply(
        [](const at::Tensor& t) { return t.clone().requires_grad_(); });
    functional_call_vmap(members[0], leaves, x, VmapOptions().mode(mode))
        .pow(2)
        .sum()
        .backward();
    return leaves.apply([](const at::Tensor& t) { return t.grad(); });
  };
  const TensorDict batched = grads(VmapMode::kBatched);
  const TensorDict loop = grads(VmapMode::kLoop);
  for (const auto& key : batched.keys(true, true)) {
    ASSERT_TRUE(batched.get(key).defined()) << key;
    EXPECT_TRUE(torch::allclose(batched.get(key), loop.get(key), 1e-5, 1e-6))
        << key;
  }
}

TEST(VmapTest, ExceptionInForwardPopsTheLayerAndRestoresTheModule) {
  torch::manual_seed(6);
  torch::nn::Linear model(3, 4);
  const at::Tensor weight = model->weight;
  const at::Tensor weight_values = model->weight.detach().clone();
  const TensorDict params_stack =
      stack({TensorDict::from_module(*model), TensorDict::from_module(*model)})
          .detach()
          .apply([](const at::Tensor& t) { return t * 2; });
  const at::Tensor x = torch::randn({10, 3});
  for (const VmapMode mode : {VmapMode::kBatched, VmapMode::kAuto}) {
    EXPECT_THROWS_WITH(
        functional_call_vmap(
            *model,
            params_stack,
            {x},
            [&](const std::vector<at::Tensor>& in) -> at::Tensor {
              (void)model->forward(in[0]);
              TORCH_CHECK(false, "forward failed on purpose");
            },
            VmapOptions().mode(mode)),
        c10::Error,
        "forward failed on purpose");
    EXPECT_TRUE(no_dynamic_layer());
    EXPECT_TRUE(model->weight.is_same(weight));
    EXPECT_TRUE(torch::equal(model->weight, weight_values));
    EXPECT_TRUE(torch::equal(x + 1, x.add(torch::ones({10, 3}))));
  }
  // A non-c10 exception propagates as is, without a loop retry.
  int calls = 0;
  EXPECT_THROW(
      (void)functional_call_vmap(
          *model,
          params_stack,
          {x},
          [&](const std::vector<at::Tensor>&) -> at::Tensor {
            ++calls;
            throw std::runtime_error("plain");
          }),
      std::runtime_error);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(no_dynamic_layer());
  EXPECT_TRUE(model->weight.is_same(weight));
  EXPECT_EQ(model->forward(x).sizes(), c10::IntArrayRef({10, 4}));
}

TEST(VmapTest, ModuleWithItsOwnParameterRunsAsALoop) {
  torch::manual_seed(7);
  std::vector<Scale> members = {Scale(), Scale()};
  Scale shell;
  const at::Tensor x = torch::randn({4, 3});
  auto [params_stack, expected] = stack_and_reference(
      members, shell, [&](int64_t) { return shell->forward(x); });
  VmapPath path = VmapPath::kBatched;
  EXPECT_TRUE(torch::allclose(
      functional_call_vmap(
          shell, params_stack, x, VmapOptions().path_taken(&path)),
      expected));
  EXPECT_EQ(path, VmapPath::kLoop);
  EXPECT_THROWS_WITH(
      functional_call_vmap(
          shell, params_stack, x, VmapOptions().mode(VmapMode::kBatched)),
      c10::Error,
      "holds tensors in members vmap cannot swap");
}

// The default mode runs the function once: a batched call that throws is
// the caller's error, never silently re-run member by member. The re-run is
// a mode of its own, and `path_taken` tells which path gave the result.
TEST(VmapTest, OnlyBatchedThenLoopRunsTheFunctionAgainAfterAnError) {
  const at::Tensor x = torch::arange(6, torch::kFloat).reshape({3, 2});
  int calls = 0;
  const auto fails_first = [&](const std::vector<at::Tensor>& in) {
    TORCH_CHECK(++calls > 1, "cannot batch this on purpose");
    return in[0] * 2;
  };
  VmapPath path = VmapPath::kLoop;
  EXPECT_THROWS_WITH(
      vmap(fails_first, {x}, VmapOptions().in_dims({0}).path_taken(&path)),
      c10::Error,
      "cannot batch this on purpose");
  EXPECT_EQ(calls, 1);

  calls = 0;
  const at::Tensor out = vmap(
      fails_first,
      {x},
      VmapOptions()
          .in_dims({0})
          .mode(VmapMode::kBatchedThenLoop)
          .path_taken(&path));
  EXPECT_EQ(calls, 1 + 3);  // the batched call, then one per member
  EXPECT_EQ(path, VmapPath::kLoop);
  EXPECT_TRUE(torch::equal(out, x * 2));

  calls = 1;  // from now on the function succeeds
  EXPECT_TRUE(torch::equal(
      vmap(
          fails_first,
          {x},
          VmapOptions()
              .in_dims({0})
              .mode(VmapMode::kBatchedThenLoop)
              .path_taken(&path)),
      x * 2));
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(path, VmapPath::kBatched);
  (void)vmap(
      fails_first,
      {x},
      VmapOptions().in_dims({0}).mode(VmapMode::kLoop).path_taken(&path));
  EXPECT_EQ(path, VmapPath::kLoop);
}

TEST(VmapTest, WrongStacksAndInputsGiveClearErrors) {
  torch::nn::Linear model(3, 4);
  const TensorDict params = TensorDict::from_module(*model);
  const TensorDict params_stack = stack({params, params});
  const at::Tensor x = torch::randn({10, 3});
  EXPECT_THROWS_WITH(
      functional_call_vmap(model, params, x),
      c10::ValueError,
      "params_stack has batch size [] but needs the members along dim 0");
  torch::nn::Linear wider(3, 5);
  const TensorDict wrong =
      stack({TensorDict::from_module(*wider), TensorDict::from_module(*wider)});
  EXPECT_THROWS_WITH(
      functional_call_vmap(model, wrong, x),
      c10::ValueError,
      "key 'weight' of params_stack has shape [2, 5, 3] but needs [2, 4, 3]");
  EXPECT_THROWS_WITH(
      functional_call_vmap(model, params_stack.exclude({"bias"}), x),
      c10::ValueError,
      "the module's tensor 'bias' is missing from params_stack");
  TensorDict extra = params_stack.clone();
  extra.set("scale", torch::ones({2}));
  EXPECT_THROWS_WITH(
      functional_call_vmap(model, extra, x),
      c10::ValueError,
      "key 'scale' of params_stack has no parameter or buffer");
  EXPECT_THROWS_WITH(
      functional_call_vmap(model, params_stack.to(torch::kFloat64), x),
      c10::TypeError,
      "has dtype Double but the module's tensor has dtype Float");
  EXPECT_THROWS_WITH(
      functional_call_vmap(
          model,
          params_stack,
          torch::randn({3, 10, 3}),
          VmapOptions().in_dims({0})),
      c10::ValueError,
      "input 0 has size 3 at its in_dim 0, but the batch has 2 members");
  EXPECT_THROWS_WITH(
      functional_call_vmap(
          model, params_stack, x, VmapOptions().in_dims({0, 1})),
      c10::ValueError,
      "got 2 in_dims for 1 inputs");
  EXPECT_THROWS_WITH(
      functional_call_vmap(model, params_stack, x, VmapOptions().in_dims({2})),
      c10::IndexError,
      "in_dim 2 of input 0 is out of range for its shape [10, 3]");
  EXPECT_THROWS_WITH(
      functional_call_vmap(
          model,
          params_stack,
          x,
          VmapOptions().out_dim(3).mode(VmapMode::kBatched)),
      c10::IndexError,
      "out_dim 3 is out of range for a result of shape [10, 4] per member");
  EXPECT_TRUE(no_dynamic_layer());
}

TEST(VmapTest, VmapOfAFunctionMatchesTheLoop) {
  torch::manual_seed(8);
  const at::Tensor w = torch::randn({6, 4, 3});
  const at::Tensor x = torch::randn({10, 3});
  const auto fn = [](const std::vector<at::Tensor>& in) {
    return in[1].matmul(in[0].t()).relu().sum(-1);
  };
  const at::Tensor batched = vmap(
      fn,
      {w, x},
      VmapOptions().in_dims({0, std::nullopt}).mode(VmapMode::kBatched));
  const at::Tensor loop = vmap(
      fn,
      {w, x},
      VmapOptions().in_dims({0, std::nullopt}).mode(VmapMode::kLoop));
  EXPECT_EQ(batched.sizes(), c10::IntArrayRef({6, 10}));
  EXPECT_TRUE(torch::allclose(batched, loop, 1e-5, 1e-6));
  // A result that does not depend on the mapped input is expanded.
  const at::Tensor constant = vmap(
      [](const std::vector<at::Tensor>& in) { return in[1] * 2; },
      {w, x},
      VmapOptions().in_dims({0, std::nullopt}));
  EXPECT_EQ(constant.sizes(), c10::IntArrayRef({6, 10, 3}));
  EXPECT_TRUE(torch::equal(constant[3], x * 2));
  EXPECT_THROWS_WITH(
      vmap(fn, {w, x}, VmapOptions()),
      c10::ValueError,
      "vmap: no input is mapped; give at least one an in_dim");
  EXPECT_THROWS_WITH(
      vmap(fn, {w, x}, VmapOptions().in_dims({0, 0})),
      c10::ValueError,
      "input 1 has size 10 at its in_dim 0, but the batch has 6 members");
}

TEST(VmapTest, RandomnessFollowsTheOption) {
  torch::manual_seed(9);
  torch::nn::Sequential model(
      torch::nn::Linear(3, 64), torch::nn::Dropout(0.5));
  model->train();
  const TensorDict params = TensorDict::from_module(*model).detach();
  const TensorDict params_stack = stack({params, params});
  const at::Tensor x = torch::randn({10, 3});
  EXPECT_THROWS_WITH(
      functional_call_vmap(
          model, params_stack, x, VmapOptions().mode(VmapMode::kBatched)),
      c10::Error,
      "randomness");
  EXPECT_TRUE(no_dynamic_layer());
  const at::Tensor same = functional_call_vmap(
      model,
      params_stack,
      x,
      VmapOptions().randomness(VmapRandomness::kSame).mode(VmapMode::kBatched));
  EXPECT_TRUE(torch::equal(same[0], same[1]));
  const at::Tensor different = functional_call_vmap(
      model,
      params_stack,
      x,
      VmapOptions()
          .randomness(VmapRandomness::kDifferent)
          .mode(VmapMode::kBatched));
  EXPECT_FALSE(torch::equal(different[0], different[1]));
}

}  // namespace vmap_test

namespace vmap_test {

TEST(VmapTest, NormAndEmbeddingLayersMatchTheLoop) {
  torch::manual_seed(10);
  auto make = [] {
    return torch::nn::Sequential(
        torch::nn::Embedding(20, 6),
        torch::nn::LayerNorm(torch::nn::LayerNormOptions({6})),
        torch::nn::Linear(6, 5),
        torch::nn::BatchNorm1d(5));
  };
  std::vector<torch::nn::Sequential> members = {make(), make(), make()};
  for (auto& member : members) {
    // Distinct running statistics, as trained members would have.
    (void)member->forward(torch::randint(20, {32}));
    member->eval();
  }
  auto shell = make();
  shell->eval();
  const at::Tensor tokens = torch::randint(20, {7});
  auto [params_stack, expected] = stack_and_reference(
      members, shell, [&](int64_t) { return shell->forward(tokens); });
  const at::Tensor y = functional_call_vmap(
      shell, params_stack, tokens, VmapOptions().mode(VmapMode::kBatched));
  EXPECT_TRUE(torch::allclose(y, expected, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(y[2], members[2]->forward(tokens), 1e-5, 1e-6));
}

}  // namespace vmap_test
