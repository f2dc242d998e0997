// The C++ half of nn_interop.py: builds the same nested-key policy as the
// Python side, prints its keys and parameter names as JSON, loads weights
// Python memmapped and checks the outputs, and memmaps its own weights,
// inputs and outputs for Python to check.
//
// usage: nn_interop names
//        nn_interop load PARAMS_DIR IO_DIR   (exit 1 if the outputs differ)
//        nn_interop save PARAMS_DIR IO_DIR

#include <tensordict/memmap.h>
#include <tensordict/nn.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using namespace tensordict;  // NOLINT(google-build-using-namespace)
using tensordict::nn::TensorDictModule;
using tensordict::nn::TensorDictSequential;

namespace {

// Python: TensorDictSequential(
//   TensorDictModule(nn.Linear(4, 16), [("obs", "x")], [("net", "hidden")]),
//   TensorDictModule(nn.ReLU(), [("net", "hidden")], [("net", "hidden")]),
//   TensorDictSequential(
//     TensorDictModule(nn.Bilinear(16, 3, 8),
//                      [("net", "hidden"), ("obs", "goal")], [("net",
//                      "feat")]),
//     TensorDictModule(nn.Linear(8, 2), [("net", "feat")],
//                      [("action", "logits")])))
TensorDictSequential make_policy() {
  return TensorDictSequential(
      {TensorDictModule(
           torch::nn::Linear(4, 16), {{"obs", "x"}}, {{"net", "hidden"}}),
       TensorDictModule(
           torch::nn::ReLU(), {{"net", "hidden"}}, {{"net", "hidden"}}),
       TensorDictSequential(
           {TensorDictModule(
                torch::nn::Bilinear(16, 3, 8),
                {{"net", "hidden"}, {"obs", "goal"}},
                {{"net", "feat"}}),
            TensorDictModule(
                torch::nn::Linear(8, 2),
                {{"net", "feat"}},
                {{"action", "logits"}})})});
}

nlohmann::json key_list(const std::vector<NestedKey>& keys) {
  nlohmann::json out = nlohmann::json::array();
  for (const NestedKey& key : keys) {
    out.push_back(key.to_vector());
  }
  return out;
}

int names() {
  TensorDictSequential policy = make_policy();
  nlohmann::json out;
  out["in_keys"] = key_list(policy->in_keys());
  out["out_keys"] = key_list(policy->out_keys());
  out["from_module"] = nlohmann::json::array();
  for (const NestedKey& key : TensorDict::from_module(*policy).keys(
           /*include_nested=*/true, /*leaves_only=*/true)) {
    out["from_module"].push_back(key.join_parts("."));
  }
  out["named_parameters"] = nlohmann::json::array();
  for (const auto& item : policy->named_parameters()) {
    out["named_parameters"].push_back(item.key());
  }
  std::cout << out.dump() << "\n";
  return 0;
}

int load(const std::string& params_dir, const std::string& io_dir) {
  TensorDictSequential policy = make_policy();
  TensorDict::load_memmap(params_dir).to_module(*policy);
  const TensorDict io = TensorDict::load_memmap(io_dir);
  TensorDict td = io.select({{"obs", "x"}, {"obs", "goal"}}).clone();
  torch::NoGradGuard no_grad;
  policy(td);
  bool ok = true;
  for (const NestedKey& key : policy->out_keys()) {
    const bool same =
        torch::allclose(td.get(key), io.get(key), /*rtol=*/1e-5, /*atol=*/1e-6);
    std::cout << key << ": " << (same ? "matches" : "DIFFERS") << " Python\n";
    ok = ok && same;
  }
  return ok ? 0 : 1;
}

int save(const std::string& params_dir, const std::string& io_dir) {
  torch::manual_seed(7);
  TensorDictSequential policy = make_policy();
  TensorDict td(
      {{"obs",
        {{"x", torch::randn({32, 4})}, {"goal", torch::randn({32, 3})}}}},
      {32});
  {
    torch::NoGradGuard no_grad;
    policy(td);
  }
  (void)TensorDict::from_module(*policy).detach().memmap(params_dir);
  (void)td.memmap(io_dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "names") {
    return names();
  }
  if (args.size() == 3 && args[0] == "load") {
    return load(args[1], args[2]);
  }
  if (args.size() == 3 && args[0] == "save") {
    return save(args[1], args[2]);
  }
  std::cerr << "usage: nn_interop names | load PARAMS IO | save PARAMS IO\n";
  return 2;
}
