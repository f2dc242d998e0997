// Tests of include/tensordict/tensor_dict_params.h: TensorDictParams, the
// registration of a dict's tensors as a module's parameters and buffers,
// and TensorDictParams::from_module (Python's from_module(as_module=True)).

#include <tensordict/tensor_dict_params.h>

#include <sstream>
#include <string>
#include <vector>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace tensor_dict_params_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)

namespace {

template <typename Items>
std::vector<std::string> names(const Items& items) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    out.push_back(item.key());
  }
  return out;
}

torch::nn::Sequential make_model() {
  return torch::nn::Sequential(
      torch::nn::Linear(2, 3), torch::nn::ReLU(), torch::nn::BatchNorm1d(3));
}

}  // namespace

// Python:
//   td = TensorDict({"a": torch.zeros(2), "i": torch.arange(2), "n": {"w":
//       torch.ones(2, dtype=torch.float64), "bf": torch.ones(2,
//       dtype=torch.bfloat16)}}, [])
//   p = TensorDictParams(td)
//   [n for n, _ in p.named_parameters()]  -> ['a', 'n.w']
//   [n for n, _ in p.named_buffers()]     -> ['i', 'n.bf']
//   td["a"].requires_grad                 -> True
TEST(TensorDictParamsTest, FloatTensorsBecomeParametersWithPythonsNames) {
  TensorDict td(
      {{"a", torch::zeros({2})},
       {"i", torch::arange(2)},
       {"n",
        {{"w", torch::ones({2}, torch::kFloat64)},
         {"bf", torch::ones({2}, torch::kBFloat16)}}}});
  auto params = std::make_shared<TensorDictParams>(td);
  EXPECT_EQ(
      names(params->named_parameters()),
      (std::vector<std::string>{"a", "n.w"}));
  EXPECT_EQ(
      names(params->named_buffers()), (std::vector<std::string>{"i", "n.bf"}));
  // The wrapped dict (not a copy) holds the registered tensors.
  EXPECT_TRUE(td.get("a").requires_grad());
  EXPECT_TRUE(td.get("a").is_same(params->named_parameters()["a"]));
  EXPECT_TRUE(td.get({"n", "bf"}).is_same(params->named_buffers()["n.bf"]));
  EXPECT_FALSE(td.get("i").requires_grad());
  EXPECT_FALSE(params->no_convert());
}

// Python: TensorDictParams(TensorDict({"a": torch.zeros(2)}),
// no_convert=True) has no parameters and the buffer 'a'.
TEST(TensorDictParamsTest, NoConvertKeepsTensorsAsTheyAre) {
  TensorDict td(
      {{"a", torch::zeros({2})},
       {"p", torch::ones({2}, torch::requires_grad())}});
  TensorDictParams params(td, TensorDictParamsOptions().no_convert(true));
  EXPECT_EQ(names(params.named_parameters()), (std::vector<std::string>{"p"}));
  EXPECT_EQ(names(params.named_buffers()), (std::vector<std::string>{"a"}));
  EXPECT_FALSE(td.get("a").requires_grad());
  EXPECT_TRUE(params.no_convert());
}

TEST(TensorDictParamsTest, AnOptimizerStepChangesTheDictsTensors) {
  TensorDict td(
      {{"w", torch::ones({3})}, {"n", {{"b", torch::zeros({3})}}}}, {3});
  auto params = std::make_shared<TensorDictParams>(td);
  torch::optim::SGD optimizer(params->parameters(), /*lr=*/0.5);
  const at::Tensor x = torch::full({3}, 2.0);
  const at::Tensor loss = (td.get("w") * x + td.get({"n", "b"})).sum();
  loss.backward();
  optimizer.step();
  // w -= 0.5 * x; b -= 0.5 * 1
  EXPECT_TRUE(torch::allclose(td.get("w"), torch::zeros({3})));
  EXPECT_TRUE(torch::allclose(td.get({"n", "b"}), torch::full({3}, -0.5)));
  EXPECT_TRUE(torch::allclose(params->get("w"), torch::zeros({3})));
}

TEST(TensorDictParamsTest, ToKeepsTheTensorsRegistered) {
  TensorDict td({{"w", torch::ones({2})}, {"i", torch::arange(2)}});
  auto params = std::make_shared<TensorDictParams>(td);
  params->to(torch::kFloat64);
  EXPECT_EQ(td.get("w").scalar_type(), torch::kFloat64);
  EXPECT_TRUE(td.get("w").is_same(params->named_parameters()["w"]));
  EXPECT_TRUE(td.get("w").requires_grad());
  params->to(torch::Device(torch::kCPU), torch::kFloat32);
  EXPECT_EQ(td.get("w").scalar_type(), torch::kFloat32);
  EXPECT_TRUE(td.get("w").is_same(params->named_parameters()["w"]));
  EXPECT_TRUE(td.get("i").is_same(params->named_buffers()["i"]));
}

TEST(TensorDictParamsTest, ToADeviceKeepsTheDictsDevice) {
  TensorDict td(
      {{"w", torch::ones({2})}, {"n", {{"v", torch::ones({2})}}}},
      {},
      torch::Device(torch::kCPU));
  TensorDictParams params(td);
  params.to(torch::Device(torch::kCPU));
  EXPECT_EQ(td.device(), torch::Device(torch::kCPU));
  EXPECT_TRUE(td.get({"n", "v"}).is_same(params.named_parameters()["n.v"]));
}

TEST(TensorDictParamsTest, ToADeviceMovesTheDictsTensorsAndDevice) {
  if (!at::hasCUDA()) {
    GTEST_SKIP() << "needs a CUDA device";
  }
  TensorDict td(
      {{"w", torch::ones({2})}, {"n", {{"v", torch::ones({2})}}}},
      {},
      torch::Device(torch::kCPU));
  TensorDictParams params(td);
  params.to(torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(td.device(), torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(td.get_tensordict("n").device(), torch::Device(torch::kCUDA, 0));
  EXPECT_TRUE(td.get("w").is_cuda());
  EXPECT_TRUE(td.get("w").is_same(params.named_parameters()["w"]));
}

// Python:
//   m = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.BatchNorm1d(3))
//   p = TensorDict.from_module(m, as_module=True)
//   named_parameters -> ['0.weight', '0.bias', '2.weight', '2.bias']
//   named_buffers -> ['2.running_mean', '2.running_var',
//                     '2.num_batches_tracked']
//   with use_state_dict=True: no parameters, all seven are buffers.
TEST(TensorDictParamsTest, FromModuleKeepsParametersAndBuffersApart) {
  auto model = make_model();
  auto params = TensorDictParams::from_module(*model);
  EXPECT_EQ(
      names(params->named_parameters()),
      (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(
      names(params->named_buffers()),
      (std::vector<std::string>{
          "2.running_mean", "2.running_var", "2.num_batches_tracked"}));
  auto* linear = model[0]->as<torch::nn::Linear>();
  EXPECT_TRUE(params->get({"0", "weight"}).is_same(linear->weight));
  // A frozen parameter stays a parameter.
  linear->bias.set_requires_grad(false);
  EXPECT_EQ(
      names(TensorDictParams::from_module(*model)->named_parameters()),
      (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));

  auto from_sd = TensorDictParams::from_module(
      *model, FromModuleOptions().use_state_dict(true).lock(true));
  EXPECT_TRUE(from_sd->named_parameters().is_empty());
  EXPECT_EQ(from_sd->named_buffers().size(), 7u);
  EXPECT_TRUE(from_sd->tensordict().is_locked());
}

TEST(TensorDictParamsTest, RegisteredUnderAParentWithDottedNames) {
  // Python: m.params = p; [n for n, _ in m.named_parameters()] ->
  // ['params.0.weight', 'params.0.bias', ...]
  auto model = make_model();
  torch::nn::Module parent;
  auto params =
      parent.register_module("params", TensorDictParams::from_module(*model));
  EXPECT_EQ(
      names(parent.named_parameters()),
      (std::vector<std::string>{
          "params.0.weight",
          "params.0.bias",
          "params.2.weight",
          "params.2.bias"}));
  // from_module on the parent gives the TensorDictParams' own dict.
  const TensorDict td = TensorDict::from_module(parent);
  EXPECT_TRUE(td.get_tensordict("params").is_same(params->tensordict()));
  EXPECT_EQ(TensorDictParams::from_module(*params), params);
}

TEST(TensorDictParamsTest, SetConvertsAndRegistersNewEntries) {
  auto params = std::make_shared<TensorDictParams>(
      TensorDict({{"w", torch::ones({2})}}),
      TensorDictParamsOptions().lock(true));
  const at::Tensor registered = params->named_parameters()["w"];
  // Python: m.params['other'] = torch.randn(3) is a Parameter.
  params->set({"n", "other"}, torch::zeros({3}));
  EXPECT_TRUE(params->get({"n", "other"}).requires_grad());
  EXPECT_TRUE(params->get({"n", "other"})
                  .is_same(params->named_parameters()["n.other"]));
  params->set("i", torch::arange(2));
  EXPECT_TRUE(params->get("i").is_same(params->named_buffers()["i"]));
  // An existing key keeps its registered tensor, with the new data.
  params->set("w", torch::full({2}, 7.0));
  EXPECT_TRUE(params->get("w").is_same(registered));
  EXPECT_TRUE(torch::equal(registered, torch::full({2}, 7.0)));
  EXPECT_TRUE(params->tensordict().is_locked());
  EXPECT_THROWS_WITH(
      params->set("w", torch::arange(2)),
      c10::ValueError,
      "TensorDictParams: the value for key 'w' would be a buffer but the "
      "key is registered as a parameter; a key keeps its role");
  // The refused value changed nothing.
  EXPECT_TRUE(params->get("w").is_same(registered));
  EXPECT_TRUE(torch::equal(registered, torch::full({2}, 7.0)));
}

TEST(TensorDictParamsTest, KeysThatCannotBeNamesAreRefused) {
  EXPECT_THROWS_WITH(
      TensorDictParams(TensorDict({{"a.b", torch::zeros({1})}})),
      c10::ValueError,
      "TensorDictParams cannot register the key 'a.b': a parameter or "
      "buffer name must be non-empty and hold no \".\"");
}

// Python: print(TensorDictParams(TensorDict({"a": torch.zeros(2)})))
TEST(TensorDictParamsTest, PrintsPythonsRepr) {
  TensorDictParams params(TensorDict({{"a", torch::zeros({2})}}));
  std::ostringstream out;
  params.pretty_print(out);
  EXPECT_EQ(
      out.str(),
      "TensorDictParams(params=TensorDict(batch_size=[], fields={a: "
      "f32[2]}))");
}

}  // namespace tensor_dict_params_test
