// Sending a TensorDict between two local ranks (two threads, each with its
// own Gloo group over loopback TCP): per leaf on Python's wire, per leaf
// checked, and consolidated (one message), against raw ProcessGroup::send of
// the same tensors. Every iteration ends with a one-element ack from the
// receiver, so a time is "until the dict has arrived", the same for every
// side. Loopback messages are noisy on a shared machine, so each benchmark
// also records the median iteration (the `median_us` counter, which
// report.py prefers, as python_distributed.py reports medians too), after
// two warm-up rounds. The Python side is python_distributed.py.

#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <tensordict/distributed.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>

namespace {

using tensordict::TensorDict;
namespace dist = tensordict::dist;

// Small dicts take milliseconds a round, 256 MiB ones a fraction of a second.
constexpr int kSmallIterations = 200;
constexpr int kLargeIterations = 20;
constexpr int kWarmup = 2;

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Rank 1 lives on a thread of its own and runs the jobs it is given.
class Pair {
 public:
  // Never destroyed: rank 1's thread waits on the pair until the process
  // ends, and destroying a condition variable with a waiter blocks exit.
  static Pair& get() {
    static Pair* pair = new Pair;
    return *pair;
  }
  dist::ProcessGroupPtr sender;

  // Runs `job` on the receiving rank; the future is ready when it ends.
  std::future<void> on_receiver(
      std::function<void(const dist::ProcessGroupPtr&)> job) {
    std::packaged_task<void()> task(
        [this, job = std::move(job)] { job(receiver_); });
    std::future<void> done = task.get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(std::move(task));
    }
    ready_.notify_one();
    return done;
  }

 private:
  Pair() {
    const int port = free_port();
    auto join = [port](int rank) {
      return dist::init_process_group(dist::InitOptions()
                                          .master_addr("127.0.0.1")
                                          .master_port(port)
                                          .rank(rank)
                                          .world_size(2));
    };
    std::promise<dist::ProcessGroupPtr> receiver_group;
    std::thread([&, this] {
      receiver_group.set_value(join(1));
      loop();
    }).detach();
    sender = join(0);
    receiver_ = receiver_group.get_future().get();
  }
  void loop() {
    for (;;) {
      std::packaged_task<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return !jobs_.empty(); });
        task = std::move(jobs_.front());
        jobs_.erase(jobs_.begin());
      }
      task();
    }
  }
  dist::ProcessGroupPtr receiver_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<std::packaged_task<void()>> jobs_;
};

void send_one(
    const dist::ProcessGroupPtr& group,
    const at::Tensor& t,
    int peer,
    int tag) {
  std::vector<at::Tensor> tensors{t};
  group->send(tensors, peer, tag)->wait();
}
void recv_one(
    const dist::ProcessGroupPtr& group,
    const at::Tensor& t,
    int peer,
    int tag) {
  std::vector<at::Tensor> tensors{t};
  group->recv(tensors, peer, tag)->wait();
}

TensorDict many_leaves(int n, std::vector<int64_t> shape) {
  TensorDict td;
  for (int i = 0; i < n; ++i) {
    td.set("leaf" + std::to_string(1000 + i), torch::randn(shape));
  }
  return td;
}

// Sends `kWarmup` + the state's iterations times with `send`, the receiver
// receiving with `recv` and acking each; records the median round.
void run(
    benchmark::State& state,
    const std::function<void(const dist::ProcessGroupPtr&)>& send,
    const std::function<void(const dist::ProcessGroupPtr&)>& recv) {
  Pair& pair = Pair::get();
  const at::Tensor ack = torch::zeros({1});
  const int64_t rounds = state.max_iterations + kWarmup;
  auto done = pair.on_receiver([&](const dist::ProcessGroupPtr& group) {
    const at::Tensor reply = torch::ones({1});
    for (int64_t i = 0; i < rounds; ++i) {
      recv(group);
      send_one(group, reply, 0, 999999);
    }
  });
  auto round = [&] {
    send(pair.sender);
    recv_one(pair.sender, ack, 1, 999999);
  };
  for (int i = 0; i < kWarmup; ++i) {
    round();
  }
  std::vector<double> times;
  times.reserve(static_cast<size_t>(state.max_iterations));
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    round();
    times.push_back(std::chrono::duration<double, std::micro>(
                        std::chrono::steady_clock::now() - start)
                        .count());
  }
  done.get();
  std::nth_element(
      times.begin(), times.begin() + times.size() / 2, times.end());
  state.counters["median_us"] = times[times.size() / 2];
}

void per_leaf(
    benchmark::State& state, int n, std::vector<int64_t> shape, bool checked) {
  const TensorDict out = many_leaves(n, shape);
  const TensorDict in = many_leaves(n, shape);
  run(
      state,
      [&](const auto& g) {
        dist::send(out, 1, dist::SendOptions().group(g).checked(checked));
      },
      [&](const auto& g) {
        dist::recv(in, 0, dist::RecvOptions().group(g).checked(checked));
      });
}

void raw_leaves(benchmark::State& state, int n, std::vector<int64_t> shape) {
  const TensorDict out_td = many_leaves(n, shape);
  const TensorDict in_td = many_leaves(n, shape);
  std::vector<at::Tensor> out, in;
  for (int i = 0; i < n; ++i) {
    out.push_back(out_td.get("leaf" + std::to_string(1000 + i)));
    in.push_back(in_td.get("leaf" + std::to_string(1000 + i)));
  }
  run(
      state,
      // Every message started before the first wait, as dist::send does.
      [&](const auto& g) {
        std::vector<c10::intrusive_ptr<c10d::Work>> works;
        for (int i = 0; i < n; ++i) {
          std::vector<at::Tensor> tensors{out[i]};
          works.push_back(g->send(tensors, 1, i));
        }
        for (auto& work : works) {
          work->wait();
        }
      },
      [&](const auto& g) {
        std::vector<c10::intrusive_ptr<c10d::Work>> works;
        for (int i = 0; i < n; ++i) {
          std::vector<at::Tensor> tensors{in[i]};
          works.push_back(g->recv(tensors, 0, i));
        }
        for (auto& work : works) {
          work->wait();
        }
      });
}

void consolidated(benchmark::State& state, int n, std::vector<int64_t> shape) {
  const TensorDict out = many_leaves(n, shape).consolidate();
  const TensorDict in = many_leaves(n, shape).consolidate();
  run(
      state,
      [&](const auto& g) {
        dist::send(
            out,
            1,
            dist::SendOptions().group(g).consolidated(true).checked(false));
      },
      [&](const auto& g) {
        dist::recv(
            in,
            0,
            dist::RecvOptions().group(g).consolidated(true).checked(false));
      });
}

void raw_buffer(benchmark::State& state, int n, std::vector<int64_t> shape) {
  const int64_t bytes = n * c10::multiply_integers(shape) * 4;
  const at::Tensor out = torch::empty({bytes}, torch::kUInt8);
  const at::Tensor in = torch::empty({bytes}, torch::kUInt8);
  run(
      state,
      [&](const auto& g) { send_one(g, out, 1, 0); },
      [&](const auto& g) { recv_one(g, in, 0, 0); });
}

const std::vector<int64_t> kSmall{64, 8};    // 2 KiB
const std::vector<int64_t> kLarge{1 << 20};  // 4 MiB: 64 of them are 256 MiB

template <class Fn, class... Args>
void add(const std::string& name, int iterations, Fn fn, Args... args) {
  benchmark::RegisterBenchmark(
      name.c_str(), [=](benchmark::State& state) { fn(state, args...); })
      ->Iterations(iterations)
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
}

// The two workloads, each per leaf (Python's wire; the small one checked
// too), consolidated, and their raw baselines.
struct DistWorkload {
  const char* op;
  int iterations;
  int leaves;
  std::vector<int64_t> shape;
  bool with_checked;
};

const bool registered = [] {
  const DistWorkload workloads[] = {
      {"dist_100_leaves", kSmallIterations, 100, kSmall, true},
      {"dist_256MiB", kLargeIterations, 64, kLarge, false}};
  for (const DistWorkload& w : workloads) {
    const std::string op = w.op;
    const auto name = [&op](const char* suffix) { return op + suffix; };
    add(name("/cpp"), w.iterations, per_leaf, w.leaves, w.shape, false);
    add(name("/raw"), w.iterations, raw_leaves, w.leaves, w.shape);
    if (w.with_checked) {
      add(name("_checked/cpp"),
          w.iterations,
          per_leaf,
          w.leaves,
          w.shape,
          true);
      add(name("_checked/raw"), w.iterations, raw_leaves, w.leaves, w.shape);
    }
    add(name("_consolidated/cpp"),
        w.iterations,
        consolidated,
        w.leaves,
        w.shape);
    add(name("_consolidated/raw"), w.iterations, raw_buffer, w.leaves, w.shape);
  }
  return true;
}();

}  // namespace
