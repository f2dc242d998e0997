// Tests of include/tensordict/nn.h: TensorDictModule and
// TensorDictSequential against the same modules called on tensors, their
// keys in Python's order, parameter names, errors and ensembles.

#include <tensordict/nn.h>

#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "support.h"
#include "weights_contract.h"

// Its own namespace, so that test files can share a unity batch.
namespace nn_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)
using tensordict::nn::AnyTensorDictModule;
using tensordict::nn::ArgKeys;
using tensordict::nn::InplaceMode;
using tensordict::nn::TensorDictModule;
using tensordict::nn::TensorDictModuleBase;
using tensordict::nn::TensorDictModuleHolder;
using tensordict::nn::TensorDictModuleOptions;
using tensordict::nn::TensorDictSequential;
using tensordict::nn::TensorDictSequentialOptions;
using tensordict::nn::TensorKwargs;

namespace {

std::vector<std::string> flat(const std::vector<NestedKey>& keys) {
  std::vector<std::string> out;
  for (const NestedKey& key : keys) {
    out.push_back(key.join_parts("."));
  }
  return out;
}

using Strings = std::vector<std::string>;

// The policy: reads obs.x, writes hidden and action.logits.
TensorDictSequential make_policy() {
  return TensorDictSequential(
      {TensorDictModule(torch::nn::Linear(4, 8), {{"obs", "x"}}, {"hidden"}),
       TensorDictModule(
           torch::nn::Functional(torch::relu), {"hidden"}, {"hidden"}),
       TensorDictModule(
           torch::nn::Linear(8, 2), {"hidden"}, {{"action", "logits"}})});
}

// A module of our own: y = 2 * x.
struct DoublerImpl : TensorDictModuleBase {
  DoublerImpl() : TensorDictModuleBase("Doubler") {
    set_keys({"x"}, {"y"});
  }
  using TensorDictModuleBase::forward;
  TensorDict forward(TensorDict td, TensorDict out) override {
    return out.set("y", td.get("x") * 2);
  }
};
class Doubler : public TensorDictModuleHolder<DoublerImpl> {
 public:
  using TensorDictModuleHolder::TensorDictModuleHolder;
  Doubler() : TensorDictModuleHolder(std::make_shared<DoublerImpl>()) {}
};

}  // namespace

TEST(TensorDictModuleTest, WritesTheOutputIntoTheInputDict) {
  torch::nn::Linear linear(3, 2);
  TensorDictModule module(linear, {{"obs", "x"}}, {"y"});
  const at::Tensor x = torch::randn({5, 3});
  TensorDict td({{"obs", {{"x", x}}}}, {5});
  TensorDict out = module(td);
  EXPECT_TRUE(out.is_same(td));
  EXPECT_TRUE(torch::equal(td.get("y"), linear(x)));
  EXPECT_EQ(flat(td.keys(true)), (Strings{"obs.x", "obs", "y"}));
  EXPECT_EQ(flat(module->in_keys()), (Strings{"obs.x"}));
  EXPECT_EQ(flat(module->out_keys()), (Strings{"y"}));
}

TEST(TensorDictModuleTest, RegistersTheWrappedModuleAsModule) {
  torch::nn::Linear linear(3, 2);
  TensorDictModule module(linear, {"x"}, {"y"});
  Strings names;
  for (const auto& item : module->named_parameters()) {
    names.push_back(item.key());
  }
  EXPECT_EQ(names, (Strings{"module.weight", "module.bias"}));
  EXPECT_EQ(module->module().get(), linear.ptr().get());
  module->eval();
  EXPECT_FALSE(linear->is_training());
}

TEST(TensorDictModuleTest, WrapsASharedPointerToAModule) {
  auto linear = std::make_shared<torch::nn::LinearImpl>(3, 2);
  TensorDictModule module(linear, {"x"}, {"y"});
  EXPECT_EQ(module->module().get(), linear.get());
  EXPECT_EQ(module->named_parameters().size(), 2u);
  const at::Tensor x = torch::randn({2, 3});
  EXPECT_TRUE(torch::equal(module({{"x", x}})[0], linear->forward(x)));
}

TEST(TensorDictModuleTest, PrintsItsKeysAndTheWrappedModule) {
  TensorDictSequential policy = make_policy();
  std::ostringstream text;
  text << *policy;
  EXPECT_EQ(
      text.str(),
      "TensorDictSequential(in_keys=[('obs', 'x')], out_keys=['hidden', "
      "('action', 'logits')])(\n"
      "  (module): torch::nn::ModuleList(\n"
      "    (0): TensorDictModule(in_keys=[('obs', 'x')], "
      "out_keys=['hidden'])(\n"
      "      (module): torch::nn::Linear(in_features=4, out_features=8, "
      "bias=true)\n"
      "    )\n"
      "    (1): TensorDictModule(in_keys=['hidden'], out_keys=['hidden'])(\n"
      "      (module): torch::nn::Functional()\n"
      "    )\n"
      "    (2): TensorDictModule(in_keys=['hidden'], "
      "out_keys=[('action', 'logits')])(\n"
      "      (module): torch::nn::Linear(in_features=8, out_features=2, "
      "bias=true)\n"
      "    )\n"
      "  )\n"
      ")");
}

TEST(TensorDictModuleTest, AnInputThatIsNotATensorThrowsTypeError) {
  TensorDictModule module([](const at::Tensor& a) { return a; }, {"a"}, {"b"});
  TensorDict td({{"a", {{"nested", torch::zeros({1})}}}});
  EXPECT_THROW(module(td), c10::TypeError);
}

TEST(TensorDictModuleTest, CallableWithSeveralInputsFillsSeveralKeys) {
  TensorDictModule module(
      [](const at::Tensor& a, const at::Tensor& b) {
        return std::make_tuple(a + b, a * b);
      },
      {"a", "b"},
      {"sum", {"out", "product"}});
  TensorDict td({{"a", torch::full({2}, 3.0)}, {"b", torch::full({2}, 4.0)}});
  module(td);
  EXPECT_TRUE(torch::equal(td.get("sum"), torch::full({2}, 7.0)));
  EXPECT_TRUE(torch::equal(td.get({"out", "product"}), torch::full({2}, 12.0)));
}

TEST(TensorDictModuleTest, UnderscoreDiscardsAnOutput) {
  TensorDictModule module(
      [](const at::Tensor& a) {
        return std::vector<at::Tensor>{a + 1, a + 2};
      },
      {"a"},
      {"_", "b"});
  TensorDict td({{"a", torch::zeros({1})}});
  module(td);
  EXPECT_EQ(flat(td.keys()), (Strings{"a", "b"}));
  EXPECT_TRUE(torch::equal(td.get("b"), torch::full({1}, 2.0)));
  EXPECT_EQ(module({{"a", torch::zeros({1})}}).size(), 1u);
}

TEST(TensorDictModuleTest, NestedTupleOutputsFlattenInOrder) {
  torch::nn::LSTM lstm(torch::nn::LSTMOptions(3, 4));
  TensorDictModule module(lstm, {"x"}, {"y", "h", "c"});
  const at::Tensor x = torch::randn({2, 1, 3});
  TensorDict td({{"x", x}});
  module(td);
  auto [y, state] = lstm->forward(x);
  EXPECT_TRUE(torch::allclose(td.get("y"), y));
  EXPECT_TRUE(torch::allclose(td.get("h"), std::get<0>(state)));
  EXPECT_TRUE(torch::allclose(td.get("c"), std::get<1>(state)));
}

TEST(TensorDictModuleTest, MissingInputPassesAnUndefinedTensorAsPythonNone) {
  // Python 0.15.3 (strict=False by default):
  //   mod = TensorDictModule(lambda a, b: a if b is None else a + b,
  //                          ["a", "b"], ["c"])
  //   mod(TensorDict({"a": torch.ones(2)}, [2]))["c"]   # tensor([1., 1.])
  TensorDictModule module(
      [](const at::Tensor& a, const at::Tensor& b) {
        return b.defined() ? a + b : a;
      },
      {"a", "b"},
      {"c"});
  EXPECT_FALSE(module->options().strict());
  TensorDict td({{"a", torch::ones({2})}}, {2});
  module(td);
  EXPECT_TRUE(torch::equal(td.get("c"), torch::ones({2})));
  TensorDict both({{"a", torch::ones({2})}, {"b", torch::ones({2})}}, {2});
  module(both);
  EXPECT_TRUE(torch::equal(both.get("c"), torch::full({2}, 2.)));
}

namespace {

// Python: class M(nn.Module): forward(x) is x, act(x) is x * 2.
struct ActImpl : torch::nn::Cloneable<ActImpl> {
  void reset() override {}
  at::Tensor forward(const at::Tensor& x) {
    return x;
  }
  at::Tensor act(const at::Tensor& x) {
    return x * 2;
  }
};
TORCH_MODULE(Act);

// A module whose forward takes keyword arguments x and y: x - y.
struct DiffImpl : torch::nn::Module {
  at::Tensor forward(const TensorKwargs& kwargs) {
    return kwargs.at("x") - kwargs.at("y");
  }
};
TORCH_MODULE(Diff);

}  // namespace

TEST(TensorDictModuleTest, MethodCallsThatMemberInsteadOfForward) {
  // Python 0.15.3:
  //   m = TensorDictModule(M(), ["a"], ["c"], method="act")
  //   m(TensorDict({"a": torch.ones(2)}, [2]))["c"]   # tensor([2., 2.])
  Act act;
  TensorDictModule module(act, &ActImpl::act, {"a"}, {"c"});
  TensorDict td({{"a", torch::ones({2})}}, {2});
  module(td);
  EXPECT_TRUE(torch::equal(td.get("c"), torch::full({2}, 2.)));
  EXPECT_EQ(module->module(), act.ptr());
  // A clone calls the same member of its copy.
  auto copy = std::dynamic_pointer_cast<tensordict::nn::TensorDictModuleImpl>(
      module->clone());
  ASSERT_NE(copy, nullptr);
  TensorDict again({{"a", torch::full({2}, 3.)}}, {2});
  (void)copy->forward(again);
  EXPECT_TRUE(torch::equal(again.get("c"), torch::full({2}, 6.)));
}

TEST(TensorDictModuleTest, DictInKeysPassKeywordArguments) {
  // Python 0.15.3 (out_to_in_map=True, the default: argument -> key):
  //   m = TensorDictModule(lambda x, y: x - y, in_keys={"y": "a", "x": "b"},
  //                        out_keys=["c"])
  //   m.in_keys                                       # ['a', 'b']
  //   m(TensorDict({"a": torch.ones(2), "b": torch.full((2,), 5.)},
  //                [2]))["c"]                         # tensor([4., 4.])
  //   m = TensorDictModule(lambda x=None: torch.zeros(2) if x is None else x,
  //                        {"x": "a"}, ["c"])
  //   m(TensorDict({}, [2]))["c"]                     # tensor([0., 0.])
  TensorDictModule module(
      [](const TensorKwargs& kw) { return kw.at("x") - kw.at("y"); },
      ArgKeys{{"y", "a"}, {"x", "b"}},
      {"c"});
  EXPECT_EQ(flat(module->in_keys()), (Strings{"a", "b"}));
  TensorDict td({{"a", torch::ones({2})}, {"b", torch::full({2}, 5.)}}, {2});
  module(td);
  EXPECT_TRUE(torch::equal(td.get("c"), torch::full({2}, 4.)));

  TensorDictModule optional(
      [](const TensorKwargs& kw) {
        const at::Tensor& x = kw.at("x");
        return x.defined() ? x : torch::zeros({2});
      },
      ArgKeys{{"x", "a"}},
      {"c"});
  TensorDict empty({}, {2});
  optional(empty);
  EXPECT_TRUE(torch::equal(empty.get("c"), torch::zeros({2})));

  // A module holder's forward, with a nested key.
  TensorDictModule holder(
      Diff(), ArgKeys{{"x", {"n", "b"}}, {"y", "a"}}, {"c"});
  TensorDict nested({{"a", torch::ones({2})}}, {2});
  nested.set({"n", "b"}, torch::full({2}, 3.));
  holder(nested);
  EXPECT_TRUE(torch::equal(nested.get("c"), torch::full({2}, 2.)));
}

TEST(TensorDictModuleTest, AModuleFailingOnAnAbsentInputSaysItWasAbsent) {
  // Python 0.15.3 calls nn.Linear with None and raises its TypeError; the
  // C++ error adds which input was absent.
  TensorDictModule module(torch::nn::Linear(3, 2), {"x"}, {"y"});
  TensorDict td({{"z", torch::zeros({3})}});
  try {
    module(td);
    ADD_FAILURE() << "did not throw";
  } catch (const c10::Error& e) {
    EXPECT_NE(
        std::string(e.what()).find(
            "with the absent input ['x'] passed as an undefined tensor "
            "(Python's None; strict(true) makes a missing input a KeyError)"),
        std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(td.contains("y"));
}

TEST(TensorDictModuleTest, StrictMissingInputThrowsKeyErrorNamingKeyAndModule) {
  // Python 0.15.3: TensorDictModule(..., strict=True) raises KeyError.
  TensorDictModule module(
      torch::nn::Linear(3, 2),
      {{"obs", "x"}},
      {"y"},
      TensorDictModuleOptions().strict(true));
  TensorDict td({{"obs", {{"z", torch::zeros({3})}}}});
  EXPECT_THROWS_WITH(
      module(td),
      KeyError,
      "TensorDictModule(module=torch::nn::Linear(in_features=3, "
      "out_features=2, bias=true), in_keys=[('obs', 'x')], out_keys=['y']): "
      "the input ('obs', 'x') is not in the dict, whose keys are "
      "[('obs', 'z'), 'obs']");
}

TEST(TensorDictModuleTest, WrongOutputCountThrows) {
  TensorDictModule module(
      [](const at::Tensor& a) {
        return std::vector<at::Tensor>{a, a, a};
      },
      {"a"},
      {"b", "c"});
  TensorDict td({{"a", torch::zeros({1})}});
  EXPECT_THROWS_WITH(
      module(td),
      c10::Error,
      "TensorDictModule(module=<callable>, in_keys=['a'], out_keys=['b', "
      "'c']): the module returned 3 tensors, but there are 2 out_keys "
      "['b', 'c']");
  EXPECT_FALSE(td.contains("b"));
}

TEST(TensorDictModuleTest, InKeysTheForwardCannotTakeThrowAtConstruction) {
  EXPECT_THROWS_WITH(
      TensorDictModule(torch::nn::Linear(3, 2), {"a", "b"}, {"y"}),
      c10::ValueError,
      "in_keys has 2 keys ['a', 'b'], but the module's forward takes 1 "
      "tensor");
  EXPECT_THROWS_WITH(
      TensorDictModule(
          [](const at::Tensor& a, const at::Tensor& b) { return a + b; },
          {"a"},
          {"y"}),
      c10::ValueError,
      "in_keys has 1 key ['a'], but the module's forward takes 2 tensors");
}

TEST(TensorDictModuleTest, ForwardWithAnOutputDictLeavesTheInputAlone) {
  TensorDictModule module(
      [](const at::Tensor& a) { return a + 1; }, {"a"}, {{"o", "b"}});
  TensorDict td({{"a", torch::zeros({2})}}, {2});
  TensorDict out({}, {2});
  TensorDict result = module(td, out);
  EXPECT_TRUE(result.is_same(out));
  EXPECT_EQ(flat(td.keys(true)), (Strings{"a"}));
  EXPECT_EQ(flat(out.keys(true)), (Strings{"o.b", "o"}));
  EXPECT_TRUE(torch::equal(out.get({"o", "b"}), torch::ones({2})));
}

TEST(TensorDictModuleTest, InplaceFalseWritesANewDictWithNoBatchDims) {
  TensorDictModule module(
      [](const at::Tensor& a) { return a.sum(); },
      {"a"},
      {"total"},
      TensorDictModuleOptions().inplace(InplaceMode::kFalse));
  TensorDict td({{"a", torch::ones({2})}}, {2});
  TensorDict out = module(td);
  EXPECT_FALSE(out.is_same(td));
  EXPECT_EQ(out.batch_dims(), 0);
  EXPECT_EQ(flat(out.keys()), (Strings{"total"}));
  EXPECT_EQ(out.get("total").item<float>(), 2.0F);
  EXPECT_FALSE(td.contains("total"));
}

TEST(TensorDictModuleTest, InplaceEmptyWritesANewDictWithTheBatchSize) {
  TensorDictModule module(
      [](const at::Tensor& a) { return a * 3; },
      {"a"},
      {"b"},
      TensorDictModuleOptions().inplace(InplaceMode::kEmpty));
  TensorDict td({{"a", torch::ones({2})}}, {2});
  TensorDict out = module(td);
  EXPECT_FALSE(out.is_same(td));
  EXPECT_EQ(out.batch_size(), c10::IntArrayRef({2}));
  EXPECT_EQ(flat(out.keys()), (Strings{"b"}));
  EXPECT_FALSE(td.contains("b"));
}

TEST(TensorDictModuleTest, DispatchReturnsTheOutputTensors) {
  torch::nn::Linear linear(3, 2);
  TensorDictModule module(linear, {{"obs", "x"}}, {"y"});
  const at::Tensor x = torch::randn({4, 3});
  std::vector<at::Tensor> out = module({{{"obs", "x"}, x}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(torch::equal(out[0], linear(x)));
  EXPECT_THROWS_WITH(
      module({{"obs", x}}),
      KeyError,
      "TensorDictModule: got the input 'obs', which is not one of its "
      "in_keys [('obs', 'x')]");
  TensorDictModule two(
      [](const at::Tensor& a, const at::Tensor& b) { return a - b; },
      {"a", "b"},
      {"c"});
  EXPECT_THROWS_WITH(
      two({{"a", x}}),
      KeyError,
      "TensorDictModule: the input 'b' is missing from the call; its in_keys "
      "are ['a', 'b']");
  EXPECT_TRUE(torch::equal(
      two({{"b", torch::ones({1})}, {"a", torch::full({1}, 3.0)}})[0],
      torch::full({1}, 2.0)));
}

TEST(TensorDictModuleTest, SelectOutKeysDropsTheOthersAndEmptiedDicts) {
  TensorDictModule module(
      [](const at::Tensor& a) { return std::make_tuple(a + 1, a + 2); },
      {"x"},
      {{"o", "a"}, {"p", "b"}});
  module->select_out_keys({{"o", "a"}});
  EXPECT_EQ(flat(module->out_keys()), (Strings{"o.a"}));
  EXPECT_EQ(flat(module->out_keys_source()), (Strings{"o.a", "p.b"}));
  TensorDict td({{"x", torch::zeros({2})}}, {2});
  module(td);
  EXPECT_EQ(flat(td.keys(true)), (Strings{"x", "o.a", "o"}));
  std::vector<at::Tensor> out = module({{"x", torch::zeros({2})}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(torch::equal(out[0], torch::ones({2})));
  module->reset_out_keys();
  TensorDict again({{"x", torch::zeros({2})}}, {2});
  module(again);
  EXPECT_EQ(flat(again.keys(true)), (Strings{"x", "o.a", "o", "p.b", "p"}));
  EXPECT_THROWS_WITH(
      module->select_out_keys({"zz"}),
      c10::ValueError,
      "Can't select non existent key: 'zz'. The module out_keys are "
      "[('o', 'a'), ('p', 'b')].");
}

TEST(TensorDictSequentialTest, RunsThePolicyAndMatchesTheRawModules) {
  TensorDictSequential policy = make_policy();
  const at::Tensor x = torch::randn({32, 4});
  TensorDict td({{"obs", {{"x", x}}}}, {32});
  TensorDict out = policy(td);
  EXPECT_TRUE(out.is_same(td));
  auto first = std::dynamic_pointer_cast<torch::nn::LinearImpl>(
      policy[0]->named_children()[0].value());
  auto last = std::dynamic_pointer_cast<torch::nn::LinearImpl>(
      policy[2]->named_children()[0].value());
  ASSERT_TRUE(first && last);
  const at::Tensor hidden = torch::relu(first->forward(x));
  EXPECT_TRUE(torch::allclose(td.get("hidden"), hidden));
  EXPECT_TRUE(
      torch::allclose(td.get({"action", "logits"}), last->forward(hidden)));
  EXPECT_EQ(
      flat(td.keys(true)),
      (Strings{"obs.x", "obs", "hidden", "action.logits", "action"}));
  EXPECT_EQ(flat(policy->in_keys()), (Strings{"obs.x"}));
  EXPECT_EQ(flat(policy->out_keys()), (Strings{"hidden", "action.logits"}));
}

TEST(TensorDictSequentialTest, ParameterNamesAreThoseOfPython) {
  TensorDictSequential policy = make_policy();
  TensorDict params = TensorDict::from_module(*policy);
  EXPECT_EQ(
      flat(params.keys(/*include_nested=*/true, /*leaves_only=*/true)),
      (Strings{
          "module.0.module.weight",
          "module.0.module.bias",
          "module.2.module.weight",
          "module.2.module.bias"}));
  Strings names;
  for (const auto& item : policy->named_parameters()) {
    names.push_back(item.key());
  }
  EXPECT_EQ(
      names,
      (Strings{
          "module.0.module.weight",
          "module.0.module.bias",
          "module.2.module.weight",
          "module.2.module.bias"}));
}

TEST(TensorDictSequentialTest, KeysFollowPythonsOrder) {
  // Python: in_keys ['a', 'd', ('n', 'b')], out_keys ['c', 'b', ('n', 'e')].
  auto id = [](const at::Tensor& t) { return t; };
  TensorDictSequential seq(
      {TensorDictModule(id, {"a"}, {"b"}),
       TensorDictModule(id, {"b"}, {"c"}),
       TensorDictModule(
           [](const at::Tensor& c, const at::Tensor& d) { return c + d; },
           {"c", "d"},
           {"b"}),
       TensorDictModule(id, {{"n", "b"}}, {{"n", "e"}})});
  EXPECT_EQ(flat(seq->in_keys()), (Strings{"a", "d", "n.b"}));
  EXPECT_EQ(flat(seq->out_keys()), (Strings{"c", "b", "n.e"}));
}

TEST(TensorDictSequentialTest, SelectOutKeysKeepsIntermediatesOutOfTheInput) {
  TensorDictSequential seq(
      {TensorDictModule(
           [](const at::Tensor& x) { return x + 1; }, {"x"}, {"y"}),
       TensorDictModule(
           [](const at::Tensor& y) { return y + 1; }, {"y"}, {{"out", "z"}})});
  seq->select_out_keys({{"out", "z"}});
  TensorDict td({{"x", torch::zeros({2})}});
  TensorDict out = seq(td);
  EXPECT_TRUE(out.is_same(td));
  EXPECT_EQ(flat(td.keys(true)), (Strings{"x", "out.z", "out"}));
  EXPECT_TRUE(torch::equal(td.get({"out", "z"}), torch::full({2}, 2.0)));
  std::vector<at::Tensor> tensors = seq({{"x", torch::zeros({1})}});
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_TRUE(torch::equal(tensors[0], torch::full({1}, 2.0)));
  EXPECT_THROWS_WITH(
      seq->select_out_keys({"y"}),
      c10::ValueError,
      "All keys in selected_out_keys must be in out_keys: 'y' is not one of "
      "[('out', 'z')]");
  seq->reset_out_keys();
  EXPECT_EQ(flat(seq->out_keys()), (Strings{"y", "out.z"}));
  TensorDict again({{"x", torch::zeros({2})}});
  seq(again);
  EXPECT_EQ(flat(again.keys(true)), (Strings{"x", "y", "out.z", "out"}));
}

TEST(TensorDictSequentialTest, SelectedOutKeysOptionMustBeOutKeys) {
  auto id = [](const at::Tensor& t) { return t; };
  EXPECT_THROWS_WITH(
      TensorDictSequential(
          {TensorDictModule(id, {"a"}, {"b"})},
          TensorDictSequentialOptions().selected_out_keys({"c"})),
      c10::ValueError,
      "'c' is not one of ['b']");
  TensorDictSequential seq(
      {TensorDictModule(id, {"a"}, {"b"}), TensorDictModule(id, {"b"}, {"c"})},
      TensorDictSequentialOptions().selected_out_keys({"c"}));
  EXPECT_EQ(flat(seq->out_keys()), (Strings{"c"}));
  EXPECT_EQ(flat(seq->out_keys_source()), (Strings{"b", "c"}));
}

TEST(TensorDictSequentialTest, ForwardIntoAnOutputDictWritesOnlyOutKeys) {
  TensorDictSequential policy = make_policy();
  TensorDict td({{"obs", {{"x", torch::randn({3, 4})}}}}, {3});
  TensorDict out({}, {3});
  TensorDict result = policy(td, out);
  EXPECT_TRUE(result.is_same(out));
  EXPECT_EQ(flat(td.keys(true)), (Strings{"obs.x", "obs"}));
  EXPECT_EQ(
      flat(out.keys(true)), (Strings{"hidden", "action.logits", "action"}));
}

TEST(TensorDictSequentialTest, PartialTolerantSkipsModulesWithMissingInputs) {
  auto plus_one = [](const at::Tensor& t) { return t + 1; };
  std::vector<AnyTensorDictModule> modules = {
      TensorDictModule(plus_one, {"a"}, {"b"}),
      TensorDictModule(
          plus_one, {"missing"}, {"c"}, TensorDictModuleOptions().strict(true)),
      TensorDictModule(plus_one, {"b"}, {"d"})};
  TensorDictSequential tolerant(
      modules, TensorDictSequentialOptions().partial_tolerant(true));
  TensorDict td({{"a", torch::zeros({1})}});
  tolerant(td);
  EXPECT_EQ(flat(td.keys()), (Strings{"a", "b", "d"}));
  TensorDictSequential strict(modules);
  TensorDict again({{"a", torch::zeros({1})}});
  try {
    strict(again);
    ADD_FAILURE() << "did not throw";
  } catch (const KeyError& e) {
    EXPECT_NE(
        std::string(e.what()).find("Failed while executing module '1'."),
        std::string::npos)
        << e.what();
    EXPECT_NE(
        std::string(e.msg()).find("the input 'missing' is not in the dict"),
        std::string::npos)
        << e.msg();
  }
}

TEST(TensorDictSequentialTest, SelectSubsequenceKeepsWhatTheKeysNeed) {
  auto id = [](const at::Tensor& t) { return t; };
  TensorDictSequential seq(
      {TensorDictModule(id, {"a"}, {"b"}),
       TensorDictModule(id, {"b"}, {"c"}),
       TensorDictModule(
           [](const at::Tensor& c, const at::Tensor& d) { return c + d; },
           {"c", "d"},
           {"b"}),
       TensorDictModule(id, {{"n", "b"}}, {{"n", "e"}})},
      TensorDictSequentialOptions().partial_tolerant(true));
  // Python: 2 modules, in_keys ['a'], out_keys ['b', 'c'] for both.
  TensorDictSequential by_out =
      seq->select_subsequence(std::nullopt, std::vector<NestedKey>{"c"});
  EXPECT_EQ(by_out->size(), 2u);
  EXPECT_EQ(flat(by_out->in_keys()), (Strings{"a"}));
  EXPECT_EQ(flat(by_out->out_keys()), (Strings{"b", "c"}));
  EXPECT_TRUE(by_out->partial_tolerant());
  EXPECT_TRUE(by_out[0].ptr() == seq[0].ptr());
  TensorDictSequential by_in =
      seq->select_subsequence(std::vector<NestedKey>{"a"});
  EXPECT_EQ(by_in->size(), 2u);
  EXPECT_EQ(flat(by_in->out_keys()), (Strings{"b", "c"}));
  EXPECT_THROWS_WITH(
      seq->select_subsequence(std::vector<NestedKey>{"zz"}),
      c10::ValueError,
      "No modules left after selection");
}

TEST(TensorDictSequentialTest, NestedSequencesAndModulesOfYourOwn) {
  Doubler doubler;
  TensorDictSequential inner(
      {TensorDictModule(
           [](const at::Tensor& y) { return y + 1; }, {"y"}, {"z"}),
       TensorDictModule(
           [](const at::Tensor& z) { return z * 10; }, {"z"}, {"w"})});
  TensorDictSequential outer({doubler, inner});
  EXPECT_EQ(flat(outer->in_keys()), (Strings{"x"}));
  EXPECT_EQ(flat(outer->out_keys()), (Strings{"y", "z", "w"}));
  TensorDict td({{"x", torch::ones({1})}});
  outer(td);
  EXPECT_TRUE(torch::equal(td.get("w"), torch::full({1}, 30.0)));
  // The nested sequence is filtered too: only "z" is needed.
  TensorDictSequential sub =
      outer->select_subsequence(std::nullopt, std::vector<NestedKey>{"z"});
  ASSERT_EQ(sub->size(), 2u);
  EXPECT_EQ(flat(sub->out_keys()), (Strings{"y", "z"}));
  std::vector<std::string> names;
  for (const AnyTensorDictModule& module : *outer) {
    names.push_back(module->name());
  }
  EXPECT_EQ(names, (Strings{"Doubler", "TensorDictSequential"}));
}

TEST(TensorDictSequentialTest, IndexingCountsFromTheEndAndChecksRange) {
  TensorDictSequential policy = make_policy();
  EXPECT_EQ(policy->size(), 3u);
  EXPECT_TRUE(policy[-1].ptr() == policy[2].ptr());
  EXPECT_EQ(flat(policy[-1]->out_keys()), (Strings{"action.logits"}));
  EXPECT_THROWS_WITH(
      policy[3],
      c10::IndexError,
      "index 3 is out of range for a TensorDictSequential of 3 modules");
  EXPECT_THROWS_WITH(policy[-4], c10::IndexError, "index -4 is out of range");
  EXPECT_THROWS_WITH(
      TensorDictSequential({TensorDictModule(nullptr)}),
      c10::ValueError,
      "TensorDictSequential: module 0 is an empty holder (nullptr)");
}

TEST(TensorDictSequentialTest, TrainsWithAnOptimizer) {
  torch::manual_seed(0);
  TensorDictSequential policy = make_policy();
  TensorDictModule loss_module(
      [](const at::Tensor& logits, const at::Tensor& target) {
        return torch::mse_loss(logits, target);
      },
      {{"action", "logits"}, "target"},
      {"loss"},
      TensorDictModuleOptions().inplace(InplaceMode::kFalse));
  torch::optim::SGD optimizer(
      policy->parameters(), torch::optim::SGDOptions(0.1));
  TensorDict data(
      {{"obs", {{"x", torch::randn({32, 4})}}},
       {"target", torch::randn({32, 2})}},
      {32});
  std::vector<double> losses;
  for (int step = 0; step < 20; ++step) {
    TensorDict batch = data.copy();
    at::Tensor loss = loss_module(policy(batch)).get("loss");
    losses.push_back(loss.item<double>());
    loss.backward();
    optimizer.step();
    optimizer.zero_grad();
  }
  EXPECT_LT(losses.back(), losses.front());
}

TEST(TensorDictSequentialTest, ToModuleLoadsWeightsUnderPythonsNames) {
  TensorDictSequential a = make_policy();
  TensorDictSequential b = make_policy();
  TensorDict x({{"obs", {{"x", torch::randn({5, 4})}}}}, {5});
  const at::Tensor expected = a(x.copy()).get({"action", "logits"});
  ASSERT_FALSE(
      torch::allclose(b(x.copy()).get({"action", "logits"}), expected));
  TensorDict::from_module(*a).clone().to_module(*b);
  EXPECT_TRUE(torch::allclose(b(x.copy()).get({"action", "logits"}), expected));
}

TEST(TensorDictSequentialTest, EnsembleRunsOnceOverStackedParameters) {
  TensorDictSequential policy = make_policy();
  std::vector<TensorDict> members;
  for (int i = 0; i < 3; ++i) {
    TensorDictSequential member = make_policy();
    members.push_back(TensorDict::from_module(*member));
  }
  TensorDict params_stack = stack(members);
  const at::Tensor x = torch::randn({6, 4});
  auto call = [&](const std::vector<at::Tensor>& inputs) {
    return policy({{{"obs", "x"}, inputs[0]}})[1];
  };
  const at::Tensor batched = functional_call_vmap(
      *policy, params_stack, {x}, call, VmapOptions().mode(VmapMode::kBatched));
  ASSERT_EQ(batched.sizes(), c10::IntArrayRef({3, 6, 2}));
  for (int64_t i = 0; i < 3; ++i) {
    ScopedModuleSwap swap(params_stack.index({i}), *policy);
    EXPECT_TRUE(torch::allclose(
        batched[i], policy({{{"obs", "x"}, x}})[1], 1e-5, 1e-6));
  }
}

// ---- The weights contract (NOTE [Weights contract]) ----

TEST(WeightsContractTest, ATensorDictModuleAnswersForItsParametersAndBuffers) {
  TensorDictModule linear(torch::nn::Linear(3, 2), {"x"}, {"y"});
  weights_contract::expect_load_weights_contract(*linear);
  TensorDictModule norm(torch::nn::BatchNorm1d(3), {"x"}, {"y"});
  weights_contract::expect_load_weights_contract(*norm);
  EXPECT_EQ(
      flat(norm->weights_layout().keys(true, true)),
      (Strings{
          "module.weight",
          "module.bias",
          "module.running_mean",
          "module.running_var",
          "module.num_batches_tracked"}));
}

TEST(WeightsContractTest, ASequenceAnswersForItsModulesUnderTheirPrefixes) {
  TensorDictSequential policy = make_policy();
  weights_contract::expect_load_weights_contract(*policy);
  EXPECT_EQ(
      flat(policy->weights_layout().keys(true, true)),
      (Strings{
          "module.0.module.weight",
          "module.0.module.bias",
          "module.2.module.weight",
          "module.2.module.bias"}));
}

TEST(WeightsContractTest, AModuleWithoutWeightsTakesOnlyNone) {
  Doubler doubler;
  EXPECT_TRUE(doubler->weights_layout().is_empty());
  doubler->load_weights(TensorDict());
  EXPECT_THROWS_WITH(
      doubler->load_weights(TensorDict({{"w", torch::zeros({1})}})),
      KeyError,
      "Doubler.load_weights: key 'w' is not a weight of the module; its "
      "weights are none");
}

TEST(WeightsContractTest, CheckWeightsNamesTheKeyAndSpellsDtypesAsPython) {
  const TensorDict layout(
      {{"a", {{"w", torch::empty({2, 3}, torch::device(torch::kMeta))}}}});
  nn::check_weights(layout, TensorDict({{"a.w", torch::ones({2, 3})}}), "f");
  EXPECT_THROWS_WITH(
      nn::check_weights(
          layout,
          TensorDict({{"a", {{"w", torch::ones({2, 3}, torch::kDouble)}}}}),
          "f",
          "the policy"),
      c10::ValueError,
      "f: key ('a', 'w') expected [2, 3] torch.float32, got [2, 3] "
      "torch.float64");
  EXPECT_THROWS_WITH(
      nn::check_weights(layout, TensorDict(), "f", "the policy"),
      KeyError,
      "f: key ('a', 'w') of the policy is missing from the weights; its "
      "weights are a.w");
}

}  // namespace nn_test
