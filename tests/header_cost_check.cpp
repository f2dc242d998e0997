// Compiled, never run: proves that <tensordict/tensor_dict.h>,
// <tensordict/tensor_class.h> and <tensordict/rl.h> (with
// <tensordict/probabilistic.h>) stay free of the full <nlohmann/json.hpp>
// while dicts can still be built from literals and their entries copied,
// TensorClasses with string and number fields made, set, stacked and saved
// as state dicts, and probabilistic modules made and destroyed. Only
// json.hpp defines INCLUDE_NLOHMANN_JSON_HPP_ (json_fwd.hpp defines
// INCLUDE_NLOHMANN_JSON_FWD_HPP_ instead).

#include <tensordict/rl.h>
#include <tensordict/tensor_class.h>
#include <tensordict/tensor_dict.h>

#include <optional>
#include <string>
#include <vector>

#ifdef INCLUDE_NLOHMANN_JSON_HPP_
#error "a public header pulls in json.hpp; public headers take json_fwd.hpp"
#endif

namespace header_cost_check {

// Literals of every non-JSON kind: tensors, nested lists, strings, numbers
// and null; then copies of the non-tensor entries.
tensordict::TensorDict build_from_literals(const at::Tensor& obs) {
  tensordict::TensorDict td(
      {{"obs", obs},
       {"next", {{"reward", obs}, {"done", false}}},
       {"task", "reach"},
       {"name", std::string("run-1")},
       {"step", 3},
       {"ratio", 0.5},
       {"none", nullptr}},
      /*batch_size=*/{4});
  const tensordict::Value task = td["task"];
  const tensordict::NonTensorData data = task.non_tensor_data();
  tensordict::NonTensorData label("cat", /*batch_size=*/{4});
  label = data;
  td.set("label", tensordict::Value(label));
  td.set_non_tensor("kind", "episode");
  td.set_non_tensor("id", std::string("a1"));
  return td;
}

struct Step : tensordict::TensorClass<Step> {
  TENSORDICT_FIELDS(
      Step,
      obs,
      (std::string, task),
      (std::optional<int64_t>, step),
      (int64_t, horizon, 3))
};

// A TensorClass built by name, by position and from a dict, written
// through its setters and `set`, stacked, printed and saved as a state
// dict, where the JSON its string fields are held in is incomplete.
size_t use_a_tensor_class(const at::Tensor& obs) {
  Step named({{"obs", obs}, {"task", "reach"}, {"step", 3}}, {4});
  named.set_task(std::string("push"));
  named.set_step(std::nullopt);
  named.set("horizon", 5);
  named.set("task", "slide");
  Step positional(obs, "reach", int64_t{2}, int64_t{3}, {4});
  const Step wrapped = Step::from_tensordict(positional.to_tensordict());
  const Step both = tensordict::stack(std::vector<Step>{named, wrapped});
  const tensordict::StateDict sd = both.state_dict();
  return sd.size() + both.repr().size() + named.task().size();
}

// A probabilistic actor made, run by a collector and destroyed where the
// JSON its keyword arguments are held in is incomplete.
int64_t collect_with_a_probabilistic_actor(
    tensordict::nn::AnyTensorDictModule logits) {
  namespace tdnn = tensordict::nn;
  tdnn::ProbabilisticTensorDictSequential actor(
      {std::move(logits),
       tdnn::ProbabilisticTensorDictModule(
           std::vector<std::string>{"logits"},
           "action",
           tdnn::ProbabilisticTensorDictModuleOptions("OneHotCategorical"))});
  tensordict::rl::Collector collector(
      tensordict::rl::make_env("CartPole-v1", 2),
      actor,
      tensordict::rl::CollectorOptions(8));
  return collector.frames_per_batch();
}

}  // namespace header_cost_check
