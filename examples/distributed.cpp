// Two ranks exchanging a TensorDict over torch.distributed (Gloo, loopback).
//
// Run it under torchrun, which sets MASTER_ADDR, MASTER_PORT, RANK and
// WORLD_SIZE:
//   torchrun --nproc-per-node 2 --no-python build/bin/distributed
// or by hand, in two shells:
//   MASTER_PORT=29500 WORLD_SIZE=2 RANK=0 build/bin/distributed
//   MASTER_PORT=29500 WORLD_SIZE=2 RANK=1 build/bin/distributed
// or with no RANK set, when it starts both ranks itself.

#include <sys/wait.h>
#include <tensordict/distributed.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

namespace dist = tensordict::dist;
using tensordict::TensorDict;

namespace {

TensorDict observation(double fill) {
  TensorDict td({4});
  td.set("reward", torch::full({4}, fill));
  td.set({"obs", "pixels"}, torch::full({4, 3, 8, 8}, fill, torch::kUInt8));
  td.set({"obs", "state"}, torch::full({4, 7}, fill));
  td.set_non_tensor("task", "reach");
  return td;
}

int run_rank() {
  const auto group = dist::init_process_group();
  const int rank = group->getRank();
  if (rank == 0) {
    // Leaf by leaf into a dict the receiver already has...
    dist::send(observation(1), 1);
    // ...or metadata first, so that the receiver needs nothing.
    dist::init_remote(observation(2), 1);
  } else {
    TensorDict buffer = observation(0);
    dist::recv(buffer, 0);
    const TensorDict fresh = dist::from_remote_init(0);
    std::cout << "rank 1 received reward "
              << buffer.get("reward")[0].item<float>()
              << ", then a new dict with task '"
              << fresh.get_non_tensor("task").get<std::string>() << "' and "
              << fresh.keys(true, true).size() << " leaves\n";
  }
  // Every rank ends with the sum of every rank's values.
  TensorDict mine = observation(rank + 1);
  dist::all_reduce(mine);
  std::cout << "rank " << rank << ": all_reduce gives reward "
            << mine.get("reward")[0].item<float>() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("RANK") != nullptr) {
    return run_rank();
  }
  // No launcher: start both ranks on this machine.
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(29500 + getpid() % 1000).c_str(), 1);
  setenv("WORLD_SIZE", "2", 1);
  pid_t ranks[2];
  for (int rank = 0; rank < 2; ++rank) {
    ranks[rank] = fork();
    if (ranks[rank] == 0) {
      setenv("RANK", std::to_string(rank).c_str(), 1);
      execv("/proc/self/exe", argv);
      _exit(127);
    }
  }
  int failed = 0;
  for (const pid_t pid : ranks) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  (void)argc;
  return failed == 0 ? 0 : 1;
}
