// rl::run_torchrl_worker against a C++ stand-in for TorchRL's learner
// (rank 0 of a Gloo group on 127.0.0.1, the collector store and the weight
// store, the start-up broadcasts and scatters), for what a stock Python
// learner cannot be made to send: malformed instructions, seeds and
// payloads, a learner that vanishes mid-protocol. The stock learner itself
// is tests/rl/torchrl_worker_test.py.

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "tensordict/distributed.h"
#include "tensordict/rl.h"

namespace torchrl_worker_test {

using tensordict::TensorDict;
namespace dist = tensordict::dist;
namespace rl = tensordict::rl;
using namespace std::chrono_literals;

constexpr int64_t kFrames = 4;

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

c10::intrusive_ptr<c10d::TCPStore> store_server(
    int port, std::optional<size_t> workers) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = true;
  options.numWorkers = workers;
  options.waitWorkers = workers.has_value();
  options.timeout = 20s;
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
}

std::string text(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::vector<uint8_t> bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

void wait(const c10::intrusive_ptr<c10d::Work>& work) {
  work->wait();
}

// Rank 0 as TorchRL's DistributedCollector sets it up (see NOTE [TorchRL
// worker protocol]); each step is a method, so that a test can stop or
// misbehave at any of them.
struct Learner {
  int pg_port = free_port();
  int collector_port = free_port();
  int weight_port = free_port();
  dist::ProcessGroupPtr group;
  c10::intrusive_ptr<c10d::TCPStore> collector_store;
  c10::intrusive_ptr<c10d::TCPStore> weight_store;

  rl::TorchRLWorkerOptions worker_options() const {
    return rl::TorchRLWorkerOptions("127.0.0.1", pg_port, 1, 2)
        .weights_store_port(weight_port)
        .frames_per_batch(kFrames)
        .timeout(10s)
        .idle_timeout(5s);
  }

  // The group (its store waits for the worker to join).
  void join() {
    c10::intrusive_ptr<c10d::Store> store = store_server(pg_port, 2);
    store = c10::make_intrusive<c10d::PrefixStore>("default_pg", store);
    store = c10::make_intrusive<c10d::PrefixStore>("0/", store);
    group = c10::make_intrusive<c10d::ProcessGroup>(store, 0, 2);
    auto options = c10d::ProcessGroupGloo::Options::create();
    options->timeout = 10s;
    options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForInterface("lo"));
    auto backend = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("cpu/", store), 0, 2, options);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
    group->setBackend(
        c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, backend);
  }

  void stores(int64_t announced_port = -1) {
    collector_store = store_server(collector_port, std::nullopt);
    weight_store = store_server(weight_port, std::nullopt);
    std::vector<at::Tensor> port{at::full(
        {1}, announced_port < 0 ? collector_port : announced_port, at::kLong)};
    c10d::BroadcastOptions options;
    wait(group->broadcast(port, options));
    collector_store->set("TRAINER_status", bytes("alive"));
  }

  // scatter_object_list's three steps, with `payload` as rank 1's pickle.
  void scatter(const std::string& payload, int64_t announced = -1) {
    const int64_t size = static_cast<int64_t>(payload.size());
    std::vector<at::Tensor> max{
        at::full({1}, announced < 0 ? size : announced, at::kLong)};
    c10d::BroadcastOptions broadcast_options;
    wait(group->broadcast(max, broadcast_options));
    if (announced >= 0 && announced != size) {
      return;  // the worker refuses before the scatter
    }
    at::Tensor mine = at::zeros({size}, at::kByte);
    at::Tensor theirs = at::empty({size}, at::kByte);
    std::memcpy(theirs.data_ptr(), payload.data(), payload.size());
    std::vector<at::Tensor> out{at::empty({size}, at::kByte)};
    std::vector<std::vector<at::Tensor>> in{{mine, theirs}};
    c10d::ScatterOptions options;
    wait(group->scatter(out, in, options));
    std::vector<at::Tensor> out_size{at::zeros({1}, at::kLong)};
    std::vector<std::vector<at::Tensor>> sizes{
        {at::zeros({1}, at::kLong), at::full({1}, size, at::kLong)}};
    wait(group->scatter(out_size, sizes, options));
  }

  void initial_weights(const TensorDict& weights) {
    weight_store->set("STATELESS_MODEL", bytes("0"));
    dist::send(weights, 1, dist::SendOptions().group(group).checked(false));
  }

  void start(const TensorDict& weights) {
    join();
    stores();
    scatter(std::string("\x80\x04K\x01.", 5));  // pickle.dumps(1)
    initial_weights(weights);
  }

  // Waits (bounded) until the worker took its instruction from `store`.
  static void consumed(c10d::TCPStore& store) {
    for (int i = 0; i < 5000 && store.check({"NODE_1_in"}); ++i) {
      std::this_thread::sleep_for(2ms);
    }
    ASSERT_FALSE(store.check({"NODE_1_in"}))
        << "the worker took no instruction";
  }

  // Blocks until the worker answered in `key` of `store`, then takes it.
  static std::string take(c10d::TCPStore& store, const std::string& key) {
    std::string value = text(store.get(key));
    store.deleteKey(key);
    return value;
  }
};

TensorDict weights_of(float value) {
  return TensorDict(
      {{"module",
        {{"bias", at::full({2}, value)}, {"weight", at::full({2, 3}, value)}}}},
      /*batch_size=*/{});
}

// A source whose batch reports the weights and seed it was made with.
struct Source {
  float weight = 0;
  int64_t seed = -1;
  int64_t frames = kFrames;
  rl::TorchRLWorkerHooks hooks() {
    rl::TorchRLWorkerHooks h;
    h.weights = weights_of(0);
    h.apply_weights = [this](const TensorDict& w) {
      const float v = w.get({"module", "weight"}).index({0, 0}).item<float>();
      TORCH_CHECK_VALUE(v != 13, "key ('module', 'weight'): 13 is unlucky");
      weight = v;
    };
    h.set_seed = [this](int64_t s) {
      seed = s;
      return s * 2;
    };
    h.next_batch = [this]() {
      return TensorDict(
          {{"obs", at::full({frames, 3}, weight)},
           {"next", {{"seed", at::full({frames}, seed, at::kLong)}}}},
          /*batch_size=*/{frames});
    };
    return h;
  }
};

class TorchRLWorker : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("GLOO_SOCKET_IFNAME", "lo", 1);
  }
};

// Runs the worker on a thread; the result (or its error) is read with get().
std::future<rl::TorchRLWorkerStats> run(
    rl::TorchRLWorkerHooks hooks, rl::TorchRLWorkerOptions options) {
  return std::async(std::launch::async, [hooks = std::move(hooks), options]() {
    return rl::run_torchrl_worker(hooks, options);
  });
}

std::string error_of(std::future<rl::TorchRLWorkerStats>& worker) {
  EXPECT_EQ(worker.wait_for(30s), std::future_status::ready);
  try {
    worker.get();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "(no error)";
}

TEST_F(TorchRLWorker, ServesBatchesWeightsSeedsAndShutdown) {
  Learner learner;
  Source source;
  auto worker = run(source.hooks(), learner.worker_options());
  learner.start(weights_of(1.5));

  learner.collector_store->set("NODE_1_in", bytes("continue"));
  TensorDict batch(
      {{"obs", at::zeros({kFrames, 3})},
       {"next", {{"seed", at::zeros({kFrames}, at::kLong)}}}},
      /*batch_size=*/{kFrames});
  dist::recv(batch, 1, dist::RecvOptions().group(learner.group).checked(false));
  EXPECT_TRUE(
      batch.get("obs").eq(1.5).all().item<bool>());  // the initial weights
  // As TorchRL's _next_async, polls the status until it says "done".
  std::string status;
  for (int i = 0; i < 5000 && status != "done"; ++i) {
    status = text(learner.collector_store->get("NODE_1_status"));
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(status, "done");

  // NaN weights and weights the policy refuses: received, acked "refused"
  // with the key, and the old weights stay. As TorchRL's learner raises on
  // such an ack without deleting it, these reads leave it in the store: each
  // next update must answer with its own ack, not the stale one.
  TensorDict nan_weights = weights_of(3);
  nan_weights.get({"module", "bias"}).index_put_({1}, std::nanf(""));
  learner.weight_store->set("NODE_1_in", bytes("update_weights"));
  dist::send(
      nan_weights, 1, dist::SendOptions().group(learner.group).checked(false));
  const std::string nan_ack = text(learner.weight_store->get("NODE_1_out"));
  EXPECT_EQ(nan_ack.rfind("refused: ", 0), 0u) << nan_ack;
  EXPECT_NE(
      nan_ack.find("('module', 'bias') holds NaN or infinity"),
      std::string::npos)
      << nan_ack;
  learner.weight_store->set("NODE_1_in", bytes("update_weights"));
  dist::send(
      weights_of(13),
      1,
      dist::SendOptions().group(learner.group).checked(false));
  const std::string unlucky = text(learner.weight_store->get("NODE_1_out"));
  EXPECT_NE(unlucky.find("refused: "), std::string::npos) << unlucky;
  EXPECT_NE(unlucky.find("13 is unlucky"), std::string::npos) << unlucky;

  // An update through the weight store, acked there.
  learner.weight_store->set("NODE_1_in", bytes("update_weights"));
  dist::send(
      weights_of(2.5),
      1,
      dist::SendOptions().group(learner.group).checked(false));
  EXPECT_EQ(Learner::take(*learner.weight_store, "NODE_1_out"), "updated");

  // The older updater's path: the instruction on the collector store.
  learner.collector_store->set("NODE_1_in", bytes("update_weights"));
  dist::send(
      weights_of(4),
      1,
      dist::SendOptions().group(learner.group).checked(false));
  EXPECT_EQ(Learner::take(*learner.collector_store, "NODE_1_out"), "updated");

  learner.collector_store->set("NODE_1_in", bytes("seeding_21"));
  EXPECT_EQ(Learner::take(*learner.collector_store, "NODE_1_out"), "updated");
  EXPECT_EQ(Learner::take(*learner.collector_store, "NODE_1_seed"), "42");

  learner.collector_store->set("NODE_1_in", bytes("continue"));
  dist::recv(batch, 1, dist::RecvOptions().group(learner.group).checked(false));
  EXPECT_TRUE(batch.get("obs").eq(4).all().item<bool>());
  EXPECT_TRUE(batch.get({"next", "seed"}).eq(21).all().item<bool>());

  // A learner that is shutting down gets no batch, but the worker goes on.
  learner.collector_store->set("TRAINER_status", bytes("shutdown"));
  learner.collector_store->set("NODE_1_in", bytes("continue"));
  Learner::consumed(*learner.collector_store);
  learner.collector_store->set("NODE_1_in", bytes("shutdown"));
  EXPECT_EQ(Learner::take(*learner.collector_store, "NODE_1_out"), "down");
  ASSERT_EQ(worker.wait_for(30s), std::future_status::ready);
  const rl::TorchRLWorkerStats stats = worker.get();
  EXPECT_EQ(stats.batches, 3);
  EXPECT_EQ(stats.frames, 3 * kFrames);
  EXPECT_EQ(stats.weight_updates, 3);  // initial, 2.5, 4
  EXPECT_EQ(stats.weights_refused, 2);
  EXPECT_EQ(stats.seeds, 1);
}

TEST_F(TorchRLWorker, UnknownInstructionEndsTheWorkerAndTellsTheLearner) {
  Learner learner;
  Source source;
  auto worker = run(source.hooks(), learner.worker_options());
  learner.start(weights_of(1));
  learner.collector_store->set("NODE_1_in", bytes("explode"));
  const std::string ack = Learner::take(*learner.collector_store, "NODE_1_out");
  EXPECT_EQ(ack.rfind("error: ", 0), 0u) << ack;
  const std::string error = error_of(worker);
  EXPECT_NE(
      error.find("unknown instruction 'explode' in 'NODE_1_in'"),
      std::string::npos)
      << error;
  EXPECT_NE(
      error.find("TorchRL worker rank 1 of learner 127.0.0.1:"),
      std::string::npos)
      << error;
}

TEST_F(TorchRLWorker, MalformedSeedIsRefused) {
  Learner learner;
  Source source;
  auto worker = run(source.hooks(), learner.worker_options());
  learner.start(weights_of(1));
  learner.collector_store->set("NODE_1_in", bytes("seeding_12x"));
  const std::string error = error_of(worker);
  EXPECT_NE(
      error.find("'seeding_12x' does not hold an int64 seed"),
      std::string::npos)
      << error;
  EXPECT_EQ(source.seed, -1);
}

TEST_F(TorchRLWorker, BatchOfTheWrongSizeIsNotSent) {
  Learner learner;
  Source source;
  source.frames = 3;
  auto worker = run(source.hooks(), learner.worker_options());
  learner.start(weights_of(1));
  learner.collector_store->set("NODE_1_in", bytes("continue"));
  const std::string error = error_of(worker);
  EXPECT_NE(
      error.find("the batch holds 3 frames (batch size [3]); the learner "
                 "expects frames_per_batch = 4"),
      std::string::npos)
      << error;
}

TEST_F(TorchRLWorker, StartUpPayloadThatIsNotAPickleIsRefused) {
  Learner learner;
  Source source;
  auto worker = run(source.hooks(), learner.worker_options());
  learner.join();
  learner.stores();
  learner.scatter("import os; os.system('boom')");
  const std::string error = error_of(worker);
  EXPECT_NE(error.find("start-up payload is not a pickle"), std::string::npos)
      << error;
}

TEST_F(TorchRLWorker, OversizedStartUpPayloadIsRefusedBeforeAllocating) {
  Learner learner;
  Source source;
  auto worker =
      run(source.hooks(), learner.worker_options().max_payload_bytes(1024));
  learner.join();
  learner.stores();
  learner.scatter("x", int64_t{1} << 40);
  const std::string error = error_of(worker);
  EXPECT_NE(
      error.find(
          "has 1099511627776 bytes; expected 1 to max_payload_bytes = 1024"),
      std::string::npos)
      << error;
}

TEST_F(TorchRLWorker, BadStorePortIsRefused) {
  Learner learner;
  Source source;
  auto worker = run(source.hooks(), learner.worker_options());
  learner.join();
  learner.collector_store = store_server(learner.collector_port, std::nullopt);
  std::vector<at::Tensor> port{at::full({1}, 70000, at::kLong)};
  c10d::BroadcastOptions options;
  wait(learner.group->broadcast(port, options));
  const std::string error = error_of(worker);
  EXPECT_NE(
      error.find("port as 70000; expected a port in [1, 65535]"),
      std::string::npos)
      << error;
}

TEST_F(TorchRLWorker, InitialWeightsWithoutALayoutAreRefused) {
  Learner learner;
  Source source;
  rl::TorchRLWorkerHooks hooks = source.hooks();
  hooks.weights = TensorDict();
  auto worker = run(hooks, learner.worker_options());
  learner.join();
  learner.stores();
  learner.scatter(std::string("\x80\x04K\x01.", 5));
  learner.weight_store->set("STATELESS_MODEL", bytes("0"));
  const std::string error = error_of(worker);
  EXPECT_NE(error.find("this worker has no weights layout"), std::string::npos)
      << error;
}

TEST_F(TorchRLWorker, LearnerThatGoesAwayEndsTheWorker) {
  Source source;
  std::future<rl::TorchRLWorkerStats> worker;
  {
    Learner learner;
    worker = run(source.hooks(), learner.worker_options().idle_timeout(600s));
    learner.start(weights_of(1));
    learner.collector_store->set("NODE_1_in", bytes("continue"));
    TensorDict batch(
        {{"obs", at::zeros({kFrames, 3})},
         {"next", {{"seed", at::zeros({kFrames}, at::kLong)}}}},
        /*batch_size=*/{kFrames});
    dist::recv(
        batch, 1, dist::RecvOptions().group(learner.group).checked(false));
  }  // the stores and the group close
  const std::string error = error_of(worker);
  EXPECT_NE(error.find("(the learner went away?)"), std::string::npos) << error;
}

TEST_F(TorchRLWorker, SilentLearnerEndsTheWorkerAtItsIdleTimeout) {
  Learner learner;
  Source source;
  auto worker =
      run(source.hooks(), learner.worker_options().idle_timeout(300ms));
  learner.start(weights_of(1));
  const std::string error = error_of(worker);
  EXPECT_NE(
      error.find("no instruction from the learner at 127.0.0.1 for 300 ms "
                 "(idle_timeout)"),
      std::string::npos)
      << error;
}

TEST_F(TorchRLWorker, OptionsAreCheckedBeforeConnecting) {
  Source source;
  const auto message = [&](const rl::TorchRLWorkerHooks& hooks,
                           const rl::TorchRLWorkerOptions& options) {
    try {
      rl::run_torchrl_worker(hooks, options);
    } catch (const c10::ValueError& e) {
      return std::string(e.what_without_backtrace());
    }
    return std::string("(no error)");
  };
  const rl::TorchRLWorkerOptions options("127.0.0.1", 1, 1, 2);
  EXPECT_NE(
      message(source.hooks(), rl::TorchRLWorkerOptions(options).rank(0))
          .find("expected 1 <= rank < world_size (rank 0 is the learner), got "
                "rank 0"),
      std::string::npos);
  EXPECT_NE(
      message(source.hooks(), rl::TorchRLWorkerOptions(options).backend("nccl"))
          .find("backend 'nccl' is not offered; expected 'gloo'"),
      std::string::npos);
  rl::TorchRLWorkerHooks no_source = source.hooks();
  no_source.next_batch = nullptr;
  EXPECT_NE(
      message(no_source, options).find("hooks.next_batch is not set"),
      std::string::npos);
}

}  // namespace torchrl_worker_test
