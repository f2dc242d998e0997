// The C++ half of probabilistic_interop.py. Two commands:
//
//   dists CASES OUT       builds each case's distribution with
//                         make_distribution and writes its log_prob of the
//                         given value, mode, mean, deterministic sample,
//                         entropy (or the error each raised) and a seeded
//                         random draw, as JSON.
//   actor PACKAGE IN OUT  loads an exported actor with nn::AOTIModule and
//                         runs it on the input dict under each interaction
//                         type (random with a seed), writing every output.
//   log_prob PACKAGE IN OUT
//                         loads an exported actor, runs it deterministically
//                         on the input dict, then, from the distribution its
//                         head builds on the parameters it computed, writes
//                         the log-prob of the given actions, the
//                         deterministic sample and the mode (or the errors);
//                         then a seeded random run's action and log-prob.
//   time PACKAGE IN N     prints the mean time of N calls (not a test).
//
// Tensors travel as {"dtype", "shape", "data"} with data flattened; doubles
// print with round-trip precision, so float32 values cross exactly.

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <tensordict/aoti.h>
#include <tensordict/probabilistic.h>
#include <tensordict/tensor_dict.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using nlohmann::json;
using tensordict::TensorDict;
namespace tdnn = tensordict::nn;

namespace {

c10::ScalarType dtype_of(const std::string& name) {
  if (name == "float32") {
    return at::kFloat;
  }
  if (name == "float64") {
    return at::kDouble;
  }
  if (name == "int64") {
    return at::kLong;
  }
  if (name == "bool") {
    return at::kBool;
  }
  TORCH_CHECK(false, "unknown dtype ", name);
}

std::string dtype_name(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "float32";
    case at::kDouble:
      return "float64";
    case at::kLong:
      return "int64";
    case at::kBool:
      return "bool";
    default:
      TORCH_CHECK(false, "unexpected dtype ", dtype);
  }
}

at::Tensor from_json(const json& spec) {
  // Non-finite values travel as the strings "nan", "inf" and "-inf".
  std::vector<double> data;
  for (const auto& v : spec.at("data")) {
    data.push_back(
        v.is_string() ? std::stod(v.get<std::string>()) : v.get<double>());
  }
  std::vector<int64_t> shape = spec.at("shape").get<std::vector<int64_t>>();
  at::Tensor flat = at::tensor(data, at::kDouble);
  return flat.reshape(shape).to(dtype_of(spec.at("dtype").get<std::string>()));
}

json to_json(const at::Tensor& tensor) {
  at::Tensor t = tensor.detach().contiguous();
  at::Tensor flat = t.to(at::kDouble).reshape({-1});
  json data = json::array();
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const double v = flat.data_ptr<double>()[i];
    if (std::isfinite(v)) {
      data.push_back(v);
    } else {
      data.push_back(std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
    }
  }
  return {
      {"dtype", dtype_name(t.scalar_type())},
      {"shape", t.sizes().vec()},
      {"data", data}};
}

// Runs `fn` and records its tensor, or the error it raised.
json attempt(const std::function<at::Tensor()>& fn) {
  try {
    return to_json(fn());
  } catch (const c10::Error& e) {
    return {{"error", e.what_without_backtrace()}};
  }
}

int run_dists(const std::string& cases_path, const std::string& out_path) {
  json cases = json::parse(std::ifstream(cases_path));
  json out = json::object();
  for (const auto& c : cases) {
    const std::string name = c.at("name").get<std::string>();
    tdnn::DistributionTensors tensors;
    for (const auto& [arg, spec] : c.at("tensors").items()) {
      tensors[arg] = from_json(spec);
    }
    tensordict::Json kwargs = tensordict::Json::parse(c.at("kwargs").dump());
    json result;
    try {
      auto dist = tdnn::make_distribution(
          c.at("class").get<std::string>(), kwargs, tensors);
      at::Tensor value = from_json(c.at("value"));
      result["log_prob"] = attempt([&] { return dist->log_prob(value); });
      result["mode"] = attempt([&] { return dist->mode(); });
      result["mean"] = attempt([&] { return dist->mean(); });
      result["deterministic"] =
          attempt([&] { return dist->deterministic_sample(); });
      result["entropy"] = attempt([&] { return dist->entropy(); });
      const auto shape = c.at("sample_shape").get<std::vector<int64_t>>();
      at::manual_seed(c.at("seed").get<int64_t>());
      result["sample"] = attempt([&] {
        return dist->has_rsample() ? dist->rsample(shape) : dist->sample(shape);
      });
    } catch (const c10::Error& e) {
      result["error"] = e.what_without_backtrace();
    }
    out[name] = result;
  }
  std::ofstream(out_path) << out.dump();
  return 0;
}

// The input dict: {"inputs": {key: tensor}, "batch": size}.
TensorDict inputs_of(const json& in) {
  TensorDict td({}, {in.at("batch").get<int64_t>()});
  for (const auto& [key, spec] : in.at("inputs").items()) {
    td.set(key, from_json(spec));
  }
  return td;
}

int run_actor(
    const std::string& package,
    const std::string& in_path,
    const std::string& out_path) {
  json in = json::parse(std::ifstream(in_path));
  tdnn::AOTIModule actor(package);
  json out = json::object();
  out["in_keys"] = json::array();
  for (const auto& key : actor->in_keys()) {
    out["in_keys"].push_back(key.join_parts("."));
  }
  out["out_keys"] = json::array();
  for (const auto& key : actor->out_keys()) {
    out["out_keys"].push_back(key.join_parts("."));
  }
  for (const std::string type :
       {"default", "deterministic", "mode", "mean", "random"}) {
    TensorDict td = inputs_of(in);
    json result = json::object();
    try {
      std::optional<tdnn::InteractionType> chosen;
      if (type != "default") {
        chosen = tdnn::interaction_type_from_string(type);
      }
      tdnn::SetInteractionType guard(chosen);
      at::manual_seed(in.at("seed").get<int64_t>());
      actor(td);
      for (const auto& key : actor->out_keys()) {
        result[key.join_parts(".")] = to_json(td.get(key));
      }
    } catch (const c10::Error& e) {
      result["error"] = e.what_without_backtrace();
    }
    out[type] = result;
  }
  std::ofstream(out_path) << out.dump();
  return 0;
}

// The input dict plus {"actions": tensor}; see the command's comment.
int run_log_prob(
    const std::string& package,
    const std::string& in_path,
    const std::string& out_path) {
  json in = json::parse(std::ifstream(in_path));
  tdnn::AOTIModule actor(package);
  const auto head = actor->probabilistic_head();
  TORCH_CHECK(head != nullptr, package, " has no distribution head");
  json out = json::object();
  TensorDict td = inputs_of(in);
  {
    tdnn::SetInteractionType guard(tdnn::InteractionType::kDeterministic);
    actor(td);
  }
  json params = json::object();
  for (const auto& key : head->in_keys()) {
    params[key.join_parts(".")] = to_json(td.get(key));
  }
  out["params"] = params;
  out["deterministic_action"] = to_json(td.get(head->out_keys().front()));
  const auto dist = head->get_dist(td);
  out["distribution"] = dist->name();
  const at::Tensor actions = from_json(in.at("actions"));
  out["log_prob"] = attempt([&] { return dist->log_prob(actions); });
  out["deterministic_sample"] =
      attempt([&] { return dist->deterministic_sample(); });
  out["mode"] = attempt([&] { return dist->mode(); });
  TensorDict random = inputs_of(in);
  {
    tdnn::SetInteractionType guard(tdnn::InteractionType::kRandom);
    at::manual_seed(in.at("seed").get<int64_t>());
    actor(random);
  }
  json sampled = json::object();
  for (const auto& key : actor->out_keys()) {
    sampled[key.join_parts(".")] = to_json(random.get(key));
  }
  out["random"] = sampled;
  std::ofstream(out_path) << out.dump();
  return 0;
}

// Prints the mean time of `iterations` calls per interaction type (for the
// report; nothing is asserted on it).
int run_time(
    const std::string& package,
    const std::string& in_path,
    int64_t iterations) {
  json in = json::parse(std::ifstream(in_path));
  tdnn::AOTIModule actor(package);
  TensorDict td = inputs_of(in);
  for (const auto type :
       {tdnn::InteractionType::kDeterministic,
        tdnn::InteractionType::kRandom}) {
    tdnn::SetInteractionType guard(type);
    for (int i = 0; i < 100; ++i) {
      actor(td);
    }
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < iterations; ++i) {
      actor(td);
    }
    const std::chrono::duration<double, std::micro> took =
        std::chrono::steady_clock::now() - start;
    std::cout << tdnn::interaction_type_name(type) << ": "
              << took.count() / static_cast<double>(iterations) << " us/call\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string command = argc > 1 ? argv[1] : "";
    if (command == "dists" && argc == 4) {
      return run_dists(argv[2], argv[3]);
    }
    if (command == "time" && argc == 5) {
      return run_time(argv[2], argv[3], std::stoll(argv[4]));
    }
    if (command == "actor" && argc == 5) {
      return run_actor(argv[2], argv[3], argv[4]);
    }
    if (command == "log_prob" && argc == 5) {
      return run_log_prob(argv[2], argv[3], argv[4]);
    }
    std::cerr << "usage: probabilistic_interop dists CASES OUT | actor "
                 "PACKAGE IN OUT | log_prob PACKAGE IN OUT | time PACKAGE IN "
                 "N\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
