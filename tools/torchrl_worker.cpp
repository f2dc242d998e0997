// A C++ worker rank for a stock TorchRL 0.14.1 learner:
//
//   torchrl_worker --master HOST:PORT --rank R --world-size W
//                  --policy actor.pt2 --env CartPole-v1 --frames-per-batch N
//                  [--env-kwargs JSON] [--env-library PATH]...
//                  [--num-envs E] [--threads T] [--timeout-s S]
//                  [--idle-timeout-s S] [--exploration-type TYPE] [--sync]
//                  [--verbose]
//
// Installed as `tensordict-cpp-worker` by the Python package, and by `make
// install`. The env is any registered env (rl::make_env): the built-ins, or
// those of the shared libraries `--env-library` loads (each must register
// at least one env), made with the keyword arguments `--env-kwargs` gives
// (a JSON object).
//
// The learner runs `DistributedCollector([env_fn], policy,
// frames_per_batch=N * workers, launcher="submitit_delayed",
// tcp_port=PORT)`; this process is one of its workers (see NOTE [TorchRL
// worker protocol] in tensordict/rl.h). The policy is an AOTInductor
// package of the learner's policy made by `tensordict_cpp.export` (the
// module's weights layout, from its metadata, is the layout the learner's
// weight updates arrive in); `--frames-per-batch` is
// the learner's frames_per_batch over the number of workers (sync) or as
// is (async), and one sub-env gives batches of the learner's unbatched
// layout [N]. Exits 0 after the learner's shutdown, 1 with a message on any
// error (a learner that went away included), 2 on bad arguments.

#include <tensordict/aoti.h>
#include <tensordict/json.h>
#include <tensordict/rl.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace {

struct Args {
  std::string host;
  int port = 0;
  int rank = -1;
  int world_size = -1;
  std::string policy;
  std::string env;
  std::vector<std::string> env_libraries;
  std::string env_kwargs = "{}";
  int64_t frames_per_batch = 0;
  int64_t num_envs = 1;
  int64_t threads = 1;
  int64_t timeout_s = 60;
  int64_t idle_timeout_s = 600;
  // TorchRL's collectors sample by default (ExplorationType.RANDOM).
  tensordict::nn::InteractionType exploration_type =
      tensordict::nn::InteractionType::kRandom;
  bool sync = false;
  bool verbose = false;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr
      << "torchrl_worker: " << problem << "\n"
      << "usage: torchrl_worker --master HOST:PORT --rank R --world-size W "
         "--policy actor.pt2 --env CartPole-v1 --frames-per-batch N "
         "[--env-kwargs JSON] [--env-library PATH]... [--num-envs E] "
         "[--threads T] [--timeout-s S] [--idle-timeout-s S] "
         "[--exploration-type random|mode|mean|deterministic] "
         "[--sync] [--verbose]\n";
  std::exit(2);
}

int64_t integer(const std::string& flag, const std::string& text, int64_t min) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < min) {
    usage(
        flag + " expects an integer >= " + std::to_string(min) + ", got '" +
        text + "'");
  }
  return value;
}

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--verbose" || flag == "--sync") {
      (flag == "--sync" ? args.sync : args.verbose) = true;
      continue;
    }
    if (i + 1 >= argc) {
      usage(flag + " expects a value");
    }
    const std::string value = argv[++i];
    if (flag == "--master") {
      const size_t colon = value.rfind(':');
      if (colon == std::string::npos || colon == 0) {
        usage("--master expects HOST:PORT, got '" + value + "'");
      }
      args.host = value.substr(0, colon);
      args.port = static_cast<int>(
          integer("--master's port", value.substr(colon + 1), 1));
    } else if (flag == "--rank") {
      args.rank = static_cast<int>(integer(flag, value, 1));
    } else if (flag == "--world-size") {
      args.world_size = static_cast<int>(integer(flag, value, 2));
    } else if (flag == "--policy") {
      args.policy = value;
    } else if (flag == "--env") {
      args.env = value;
    } else if (flag == "--env-library") {
      args.env_libraries.push_back(value);
    } else if (flag == "--env-kwargs") {
      args.env_kwargs = value;
    } else if (flag == "--frames-per-batch") {
      args.frames_per_batch = integer(flag, value, 1);
    } else if (flag == "--num-envs") {
      args.num_envs = integer(flag, value, 1);
    } else if (flag == "--threads") {
      args.threads = integer(flag, value, 1);
    } else if (flag == "--timeout-s") {
      args.timeout_s = integer(flag, value, 1);
    } else if (flag == "--idle-timeout-s") {
      args.idle_timeout_s = integer(flag, value, 1);
    } else if (flag == "--exploration-type") {
      try {
        args.exploration_type =
            tensordict::nn::interaction_type_from_string(value);
      } catch (const c10::Error&) {
        usage(
            "--exploration-type expects random, mode, mean or "
            "deterministic, got '" +
            value + "'");
      }
    } else {
      usage("unknown argument '" + flag + "'");
    }
  }
  if (args.host.empty() || args.rank < 0 || args.world_size < 0 ||
      args.policy.empty() || args.env.empty() || args.frames_per_batch == 0) {
    usage(
        "--master, --rank, --world-size, --policy, --env and "
        "--frames-per-batch are required");
  }
  if (args.port > 65535 || args.rank >= args.world_size) {
    usage("expected a port <= 65535 and --rank < --world-size");
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  namespace rl = tensordict::rl;
  const tensordict::Json env_kwargs = tensordict::Json::parse(
      args.env_kwargs, nullptr, /*allow_exceptions=*/false);
  if (!env_kwargs.is_object()) {
    usage("--env-kwargs expects a JSON object, got '" + args.env_kwargs + "'");
  }
  try {
    for (const std::string& library : args.env_libraries) {
      const std::vector<std::string> names = rl::load_env_library(library);
      if (args.verbose) {
        std::cerr << "torchrl_worker: " << library << " registered";
        for (const std::string& name : names) {
          std::cerr << " " << name;
        }
        std::cerr << std::endl;
      }
    }
    rl::Collector collector(
        rl::make_env(args.env, args.num_envs, env_kwargs),
        tensordict::nn::AOTIModule(args.policy),
        rl::CollectorOptions(args.frames_per_batch)
            .num_threads(args.threads)
            .exploration_type(args.exploration_type));
    if (collector.frames_per_batch() != args.frames_per_batch) {
      usage(
          "--frames-per-batch " + std::to_string(args.frames_per_batch) +
          " is not a multiple of --num-envs " + std::to_string(args.num_envs) +
          ", so batches would not fit the learner's");
    }
    // The learner's weights arrive in the layout the policy answers for
    // (its package's weights: the keys of TensorDict.from_module(policy)
    // on the learner, as tensordict_cpp.export recorded them).
    const rl::TorchRLWorkerStats stats = rl::run_torchrl_worker(
        collector,
        rl::TorchRLWorkerOptions(
            args.host, args.port, args.rank, args.world_size)
            .frames_per_batch(args.frames_per_batch)
            .sync(args.sync)
            .timeout(std::chrono::seconds(args.timeout_s))
            .idle_timeout(std::chrono::seconds(args.idle_timeout_s))
            .verbose(args.verbose));
    collector.shutdown();
    std::cout << "batches=" << stats.batches << " frames=" << stats.frames
              << " weight_updates=" << stats.weight_updates
              << " weights_refused=" << stats.weights_refused
              << " seeds=" << stats.seeds << std::endl;
    return 0;
  } catch (const c10::Error& e) {
    std::cerr << "torchrl_worker: " << e.what_without_backtrace() << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "torchrl_worker: " << e.what() << std::endl;
    return 1;
  }
}
