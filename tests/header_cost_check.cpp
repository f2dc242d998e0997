// Compiled, never run: proves that <tensordict/tensor_dict.h> and
// <tensordict/rl.h> (with <tensordict/probabilistic.h>) stay free of the
// full <nlohmann/json.hpp> while dicts can still be built from literals and
// their entries copied, and probabilistic modules made and destroyed. Only
// json.hpp defines INCLUDE_NLOHMANN_JSON_HPP_ (json_fwd.hpp defines
// INCLUDE_NLOHMANN_JSON_FWD_HPP_ instead).

#include <tensordict/rl.h>
#include <tensordict/tensor_dict.h>

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
