// A C++ worker rank of TorchRL 0.14.1's DistributedCollector: the start-up
// handshake, the two instruction streams and the batch and weight transfers
// (see NOTE [TorchRL worker protocol] in rl.h).

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <charconv>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "distributed/wire.h"
#include "tensordict/distributed.h"
#include "tensordict/rl.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {
namespace {

using Clock = std::chrono::steady_clock;
using StorePtr = c10::intrusive_ptr<c10d::Store>;

// How often an idle worker asks the stores for an instruction: a store
// round trip is tens of microseconds, so this costs little and answers a
// learner within a few milliseconds.
constexpr std::chrono::milliseconds kPollInterval{2};

std::string text_of(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::vector<uint8_t> bytes_of(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

// A value written to a store key, cut to one line of bounded length so a
// long error stays readable in the learner's RuntimeError.
std::string one_line(std::string text, size_t limit = 480) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') {
      c = ' ';
    }
  }
  if (text.size() > limit) {
    text.resize(limit);
    text += "...";
  }
  return text;
}

// An exception's message without c10's backtrace, on one line.
std::string message_of(const std::exception& e) {
  if (const auto* error = dynamic_cast<const c10::Error*>(&e)) {
    return one_line(error->what_without_backtrace());
  }
  return one_line(e.what());
}

// Throws for a transfer with the learner (`what`) that threw `e`.
[[noreturn]] void throw_learner_gone(
    const std::string& what, const std::exception& e) {
  TORCH_CHECK(false, what, " failed (the learner went away?): ", message_of(e));
}

// A store of the learner, with the address it was reached at for messages.
struct LearnerStore {
  StorePtr store;
  std::string name;  // "the collector store at 127.0.0.1:10004"
  mutable bool lost_connection = false;

  [[noreturn]] void lost(
      const std::exception& e, const std::string& doing) const {
    lost_connection = true;
    TORCH_CHECK(
        false,
        "lost ",
        name,
        " while ",
        doing,
        " (the learner went away?): ",
        message_of(e));
  }
  bool check(const std::string& key) const {
    try {
      return store->check({key});
    } catch (const std::exception& e) {
      lost(e, "checking '" + key + "'");
    }
  }
  std::string get(const std::string& key) const {
    try {
      return text_of(store->get(key));
    } catch (const std::exception& e) {
      lost(e, "reading '" + key + "'");
    }
  }
  void set(const std::string& key, const std::string& value) const {
    try {
      store->set(key, bytes_of(value));
    } catch (const std::exception& e) {
      lost(e, "writing '" + key + "'");
    }
  }
  void erase(const std::string& key) const {
    try {
      store->deleteKey(key);
    } catch (const std::exception& e) {
      lost(e, "deleting '" + key + "'");
    }
  }
  // Waits for `key` until `deadline`, polling, so that a learner that is
  // slow to publish it (it runs a local collector first) is waited for
  // longer than one store operation's timeout.
  std::string wait(
      const std::string& key,
      Clock::time_point deadline,
      const std::string& what) const {
    while (!check(key)) {
      TORCH_CHECK(
          Clock::now() < deadline,
          "timed out waiting for ",
          what,
          " ('",
          key,
          "' in ",
          name,
          ")");
      std::this_thread::sleep_for(kPollInterval);
    }
    return get(key);
  }
};

LearnerStore connect_store(
    const std::string& addr,
    int port,
    std::optional<size_t> num_workers,
    std::chrono::milliseconds timeout,
    const std::string& what) {
  TORCH_CHECK_VALUE(
      port > 0 && port < 65536,
      "run_torchrl_worker: the port of ",
      what,
      " must be in [1, 65535], got ",
      port);
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = false;
  options.numWorkers = num_workers;
  options.timeout = timeout;
  LearnerStore out;
  out.name = what + " at " + addr + ":" + std::to_string(port);
  try {
    out.store = c10::make_intrusive<c10d::TCPStore>(addr, options);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "could not connect to ", out.name, ": ", message_of(e));
  }
  return out;
}

void wait_work(
    const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) {
  try {
    work->wait();
  } catch (const std::exception& e) {
    throw_learner_gone(what, e);
  }
}

// One int64 that rank 0 broadcasts, as Python's `broadcast` of an int64
// tensor of shape [1]; `what` names it when the learner is gone.
int64_t recv_broadcast_int64(
    const dist::ProcessGroupPtr& group, const std::string& what) {
  std::vector<at::Tensor> value{at::zeros({1}, at::kLong)};
  c10d::BroadcastOptions options;
  options.rootRank = 0;
  wait_work(group->broadcast(value, options), what);
  return value[0].item<int64_t>();
}

// The store port the learner broadcasts.
int recv_store_port(const dist::ProcessGroupPtr& group) {
  const int64_t value =
      recv_broadcast_int64(group, "receiving the collector store's port");
  TORCH_CHECK(
      value > 0 && value < 65536,
      "the learner broadcast the collector store's port as ",
      value,
      "; expected a port in [1, 65535]");
  return static_cast<int>(value);
}

// The receiving side of torch.distributed.scatter_object_list: the largest
// pickle's size (broadcast), the padded pickle (scatter), its own size
// (scatter). The pickle is the learner's collector recipe (classes and
// closures): it is never unpickled; its bytes are checked for size and
// dropped. Returns the pickle's size.
int64_t recv_startup_payload(
    const dist::ProcessGroupPtr& group, int64_t max_bytes) {
  const int64_t padded =
      recv_broadcast_int64(group, "receiving the size of the start-up payload");
  TORCH_CHECK(
      padded > 0 && padded <= max_bytes,
      "the learner's start-up payload (scatter_object_list) has ",
      padded,
      " bytes; expected 1 to max_payload_bytes = ",
      max_bytes);
  c10d::ScatterOptions scatter_options;
  scatter_options.rootRank = 0;
  std::vector<at::Tensor> payload{at::empty({padded}, at::kByte)};
  std::vector<std::vector<at::Tensor>> none;
  wait_work(
      group->scatter(payload, none, scatter_options),
      "receiving the start-up payload");
  std::vector<at::Tensor> own{at::zeros({1}, at::kLong)};
  wait_work(
      group->scatter(own, none, scatter_options),
      "receiving the start-up payload's size");
  const int64_t used = own[0].item<int64_t>();
  TORCH_CHECK(
      used > 0 && used <= padded,
      "the learner's start-up payload says it holds ",
      used,
      " bytes of its ",
      padded,
      "; expected 1 to ",
      padded);
  const auto* bytes = payload[0].const_data_ptr<uint8_t>();
  // A pickle of protocol 2 or later starts with PROTO and ends with STOP.
  TORCH_CHECK(
      bytes[0] == 0x80 && bytes[used - 1] == '.',
      "the learner's start-up payload is not a pickle (first byte ",
      static_cast<int>(bytes[0]),
      ", last byte ",
      static_cast<int>(bytes[used - 1]),
      "); expected a scatter_object_list from TorchRL's "
      "DistributedCollector(launcher=\"submitit_delayed\")");
  return used;
}

class Worker {
 public:
  Worker(const TorchRLWorkerHooks& hooks, const TorchRLWorkerOptions& options)
      : hooks_(hooks), options_(options), rank_(options.rank()) {
    const std::string prefix = "NODE_" + std::to_string(rank_) + "_";
    in_key_ = prefix + "in";
    out_key_ = prefix + "out";
    status_key_ = prefix + "status";
    seed_key_ = prefix + "seed";
  }

  TorchRLWorkerStats run() {
    start();
    try {
      serve();
    } catch (const c10::Error& e) {
      report_error(e.what_without_backtrace());
      throw;
    }
    dist::destroy_process_group();
    return stats_;
  }

 private:
  void log(const std::string& text) const {
    if (options_.verbose()) {
      std::cerr << "torchrl_worker rank " << rank_ << ": " << text << std::endl;
    }
  }

  void start() {
    const std::string& addr = options_.master_addr();
    log("joining the group at " + addr + ":" +
        std::to_string(options_.master_port()));
    try {
      group_ = dist::init_process_group(dist::InitOptions()
                                            .master_addr(addr)
                                            .master_port(options_.master_port())
                                            .rank(rank_)
                                            .world_size(options_.world_size())
                                            .timeout(options_.timeout()));
    } catch (const std::exception& e) {
      TORCH_CHECK(
          false,
          "could not join the learner's group at ",
          addr,
          ":",
          options_.master_port(),
          " within ",
          options_.timeout().count(),
          " ms: ",
          message_of(e));
    }
    const int store_port = recv_store_port(group_);
    collector_store_ = connect_store(
        addr,
        store_port,
        static_cast<size_t>(options_.world_size()),
        options_.timeout(),
        "the collector store");
    const int64_t payload =
        recv_startup_payload(group_, options_.max_payload_bytes());
    log("start-up payload of " + std::to_string(payload) +
        " bytes dropped unread");
    weight_store_ = connect_store(
        addr,
        options_.weights_store_port().value_or(options_.master_port() + 2),
        std::nullopt,
        options_.timeout(),
        "the weight sync scheme's store");
    const std::string stateless = weight_store_.wait(
        "STATELESS_MODEL",
        Clock::now() + options_.idle_timeout(),
        "the learner's weight sync scheme to connect");
    TORCH_CHECK(
        stateless == "0" || stateless == "1",
        "the learner's STATELESS_MODEL is '",
        one_line(stateless, 40),
        "'; expected '0' or '1'");
    if (stateless == "0") {
      TORCH_CHECK(
          !hooks_.weights.is_empty(),
          "the learner sends initial weights (STATELESS_MODEL is '0') but "
          "this worker has no weights layout; give TorchRLWorkerHooks::weights "
          "the learner's TensorDict.from_module(policy) layout");
      const std::string refused = receive_and_apply("the initial weights");
      TORCH_CHECK(
          refused.empty(),
          "the learner's initial weights do not fit this worker's policy: ",
          refused);
    }
    log("ready");
  }

  // Posts the receives of one weights message into a copy of the layout,
  // then checks and applies it. Returns "" once applied, else the reason
  // it was refused (the policy is then unchanged).
  std::string receive_and_apply(const std::string& what) {
    TensorDict buffer = hooks_.weights.clone();
    try {
      dist::recv(buffer, 0, dist::RecvOptions().group(group_).checked(false));
    } catch (const c10::Error& e) {
      throw_learner_gone("receiving " + what, e);
    }
    std::string refused;
    if (options_.refuse_non_finite()) {
      const dist::detail::WireLeaves leaves = dist::detail::wire_leaves(buffer);
      for (size_t i = 0; i < leaves.tensors.size() && refused.empty(); ++i) {
        const at::Tensor& t = leaves.tensors[i];
        if (at::isFloatingType(t.scalar_type()) &&
            !t.isfinite().all().item<bool>()) {
          refused = what + ": " + leaves.key(i) + " holds NaN or infinity";
        }
      }
    }
    if (refused.empty() && hooks_.apply_weights) {
      try {
        hooks_.apply_weights(buffer);
      } catch (const c10::Error& e) {
        refused = what + ": " + one_line(e.what_without_backtrace());
      }
    }
    if (refused.empty()) {
      ++stats_.weight_updates;
      log("applied " + what);
    } else {
      ++stats_.weights_refused;
      log("refused " + what + ": " + refused);
    }
    return refused;
  }

  void serve() {
    Clock::time_point deadline = Clock::now() + options_.idle_timeout();
    for (;;) {
      const LearnerStore* source = nullptr;
      if (collector_store_.check(in_key_)) {
        source = &collector_store_;
      } else if (weight_store_.check(in_key_)) {
        source = &weight_store_;
      }
      if (source == nullptr) {
        TORCH_CHECK(
            Clock::now() < deadline,
            "no instruction from the learner at ",
            options_.master_addr(),
            " for ",
            options_.idle_timeout().count(),
            " ms (idle_timeout)");
        std::this_thread::sleep_for(kPollInterval);
        continue;
      }
      const std::string instruction = source->get(in_key_);
      source->erase(in_key_);
      log("instruction '" + one_line(instruction, 80) + "' from " +
          source->name);
      if (instruction == "continue") {
        collect_and_send();
      } else if (instruction == "update_weights") {
        // A stale "refused" ack the learner raised on is dropped before the
        // new weights are received, so it cannot answer this update.
        source->erase(out_key_);
        const std::string refused = receive_and_apply("the weights update");
        source->set(
            out_key_, refused.empty() ? "updated" : "refused: " + refused);
      } else if (
          instruction.rfind("seeding_", 0) == 0 &&
          source == &collector_store_) {
        seed(instruction);
      } else if (instruction == "shutdown" && source == &collector_store_) {
        collector_store_.set(out_key_, "down");
        log("shut down");
        return;
      } else if (instruction == "stop" && source == &weight_store_) {
        // The scheme's own stop word, for its receiver thread: nothing here.
      } else {
        TORCH_CHECK(
            false,
            "unknown instruction '",
            one_line(instruction, 80),
            "' in '",
            in_key_,
            "' of ",
            source->name,
            "; expected 'continue', 'update_weights', 'seeding_<int>' or "
            "'shutdown'");
      }
      deadline = Clock::now() + options_.idle_timeout();
    }
  }

  void collect_and_send() {
    collector_store_.set(status_key_, "busy");
    TORCH_CHECK(
        hooks_.next_batch, "run_torchrl_worker: hooks.next_batch is not set");
    TensorDict batch = hooks_.next_batch();
    const int64_t frames = batch.numel();
    TORCH_CHECK(
        options_.frames_per_batch() <= 0 ||
            frames == options_.frames_per_batch(),
        "the batch holds ",
        frames,
        " frames (batch size ",
        batch.batch_size(),
        "); the learner expects frames_per_batch = ",
        options_.frames_per_batch());
    ++stats_.batches;
    stats_.frames += frames;
    if (collector_store_.get("TRAINER_status") != "alive") {
      log("the learner is not alive: batch dropped");
      return;
    }
    try {
      dist::send(batch, 0, dist::SendOptions().group(group_).checked(false));
    } catch (const c10::Error& e) {
      throw_learner_gone(
          c10::str("sending batch ", stats_.batches, " to the learner"), e);
    }
    if (!options_.sync()) {
      collector_store_.set(status_key_, "done");
    }
  }

  void seed(const std::string& instruction) {
    const std::string digits = instruction.substr(8);
    int64_t value = 0;
    const auto parsed =
        std::from_chars(digits.data(), digits.data() + digits.size(), value);
    TORCH_CHECK_VALUE(
        !digits.empty() && parsed.ec == std::errc() &&
            parsed.ptr == digits.data() + digits.size(),
        "the learner's seeding instruction '",
        one_line(instruction, 80),
        "' does not hold an int64 seed after 'seeding_'");
    const int64_t reported = hooks_.set_seed ? hooks_.set_seed(value) : value;
    ++stats_.seeds;
    collector_store_.set(seed_key_, std::to_string(reported));
    collector_store_.set(out_key_, "updated");
  }

  // Tells a learner that waits for this worker's answer why none will come.
  void report_error(const std::string& message) noexcept {
    if (!collector_store_.store || collector_store_.lost_connection) {
      return;
    }
    try {
      collector_store_.store->set(
          out_key_, bytes_of("error: " + one_line(message)));
    } catch (...) {
    }
  }

  const TorchRLWorkerHooks& hooks_;
  const TorchRLWorkerOptions& options_;
  const int rank_;
  std::string in_key_, out_key_, status_key_, seed_key_;
  dist::ProcessGroupPtr group_;
  LearnerStore collector_store_;
  LearnerStore weight_store_;
  TorchRLWorkerStats stats_;
};

}  // namespace

TorchRLWorkerStats run_torchrl_worker(
    const TorchRLWorkerHooks& hooks, const TorchRLWorkerOptions& options) {
  TORCH_CHECK_VALUE(
      options.backend() == "gloo",
      "run_torchrl_worker: backend '",
      options.backend(),
      "' is not offered; expected 'gloo'");
  TORCH_CHECK_VALUE(
      options.world_size() >= 2 && options.rank() >= 1 &&
          options.rank() < options.world_size(),
      "run_torchrl_worker: expected 1 <= rank < world_size (rank 0 is the "
      "learner), got rank ",
      options.rank(),
      " and world size ",
      options.world_size());
  TORCH_CHECK_VALUE(
      static_cast<bool>(hooks.next_batch),
      "run_torchrl_worker: hooks.next_batch is not set");
  Worker worker(hooks, options);
  try {
    return worker.run();
  } catch (c10::Error& e) {
    TORCH_RETHROW(
        e,
        "TorchRL worker rank ",
        options.rank(),
        " of learner ",
        options.master_addr(),
        ":",
        options.master_port());
  }
}

}  // namespace rl
TENSORDICT_END_NAMESPACE
