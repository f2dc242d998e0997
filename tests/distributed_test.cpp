// Distributed TensorDicts across real processes on 127.0.0.1: each test
// starts this binary again once per rank (TD_DIST_SCENARIO names what the
// ranks run) and checks that every rank exits cleanly within a time bound.
// The Python interop cases (tests/python/distributed_interop.py) start the
// same scenarios of this binary next to Python ranks.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <tensordict/distributed.h>
#include <tensordict/tensor_class.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "io/pickle.h"

extern char** environ;

namespace distributed_test {

using tensordict::NonTensorData;
using tensordict::TensorDict;
namespace dist = tensordict::dist;

// --- the dicts the scenarios exchange ----------------------------------------

// Every dtype of the memmap format, nested dicts, keys out of sorted order
// and a non-tensor value; `fill` sets every value (0 on receivers).
TensorDict sample(double fill, bool with_values = true) {
  auto v = [&](at::ScalarType dtype, std::vector<int64_t> shape) {
    at::Tensor t = torch::arange(
                       1,
                       1 + c10::multiply_integers(shape),
                       torch::TensorOptions().dtype(torch::kFloat64))
                       .reshape(shape);
    if (!with_values) {
      t = torch::zeros(shape, torch::kFloat64);
    } else {
      t = t + fill;
    }
    if (dtype == at::kBool) {
      return with_values ? (t.remainder(2) == 0)
                         : torch::zeros(shape, torch::kBool);
    }
    return t.to(dtype);
  };
  TensorDict td({4});
  td.set("zeta", v(at::kFloat, {4, 3}));
  td.set({"nested", "b"}, v(at::kInt, {4}));
  td.set({"nested", "a"}, v(at::kDouble, {4, 2, 2}));
  td.set("alpha", v(at::kBool, {4, 5}));
  td.set("half", v(at::kHalf, {4}));
  td.set("bf16", v(at::kBFloat16, {4, 2}));
  td.set("i8", v(at::kChar, {4}));
  td.set("u8", v(at::kByte, {4}));
  td.set("i16", v(at::kShort, {4}));
  td.set("i64", v(at::kLong, {4, 1}));
  td.set("c64", v(at::kComplexFloat, {4}));
  td.set_non_tensor("label", with_values ? "sent" : "kept");
  return td;
}

void expect_equal(
    const TensorDict& got, const TensorDict& want, const std::string& what) {
  for (const auto& key : want.keys(true, true)) {
    const at::Tensor w = want.get(key);
    const at::Tensor g = got.get(key);
    TORCH_CHECK(
        g.scalar_type() == w.scalar_type() && g.sizes() == w.sizes() &&
            torch::equal(g, w),
        what,
        ": ",
        key.to_string(),
        " differs: got ",
        g,
        " want ",
        w);
  }
}

// The other dtypes of the memmap format (uint16/32/64, complex, float8).
// They are compared byte for byte: torch::equal does not take them all.
// complex128 comes first: consolidate refuses it at an offset that is not a
// multiple of 16. Float8 leaves go leaf by leaf only: the consolidated
// metadata has no name for them (neither has Python's).
TensorDict every_other_dtype(double fill, bool float8 = true) {
  TensorDict td({3});
  const at::Tensor base =
      torch::arange(1, 7, torch::kFloat64).reshape({3, 2}) + fill;
  for (const auto dtype :
       {at::kComplexDouble,
        at::kUInt16,
        at::kUInt32,
        at::kUInt64,
        at::kComplexHalf,
        at::kFloat8_e4m3fn,
        at::kFloat8_e5m2,
        at::kFloat8_e4m3fnuz,
        at::kFloat8_e5m2fnuz}) {
    if (float8 || !c10::isFloat8Type(dtype)) {
      td.set(c10::toString(dtype), base.to(dtype));
    }
  }
  return td;
}

void expect_same_bytes(
    const TensorDict& got, const TensorDict& want, const std::string& what) {
  for (const auto& key : want.keys(true, true)) {
    const at::Tensor w = want.get(key).contiguous();
    const at::Tensor g = got.get(key).contiguous();
    TORCH_CHECK(
        g.scalar_type() == w.scalar_type() && g.sizes() == w.sizes() &&
            std::memcmp(g.const_data_ptr(), w.const_data_ptr(), w.nbytes()) ==
                0,
        what,
        ": ",
        key.to_string(),
        " differs");
  }
}

int env_int(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : -1;
}

// --- scenarios: run inside each rank's process
// --------------------------------

using Scenario = std::function<void(int rank, int world)>;

void send_recv(int rank, int /*world*/) {
  const TensorDict want = sample(0.5);
  TORCH_CHECK(
      dist::checked_by_default(dist::default_group(), 1 - rank),
      "two C++ ranks of init_process_group check by default");
  if (rank == 0) {
    dist::send(want, 1);
    dist::send(want, 1, dist::SendOptions().init_tag(7).pseudo_rand(true));
    dist::isend(want, 1);
    auto works = dist::isend(want, 1, dist::SendOptions().return_early(true));
    for (auto& w : works) {
      w->wait();
    }
    const TensorDict cons = want.consolidate();
    dist::send(cons, 1, dist::SendOptions().consolidated(true));
    dist::send(want, 1);
  } else {
    TensorDict got = sample(0, false);
    TORCH_CHECK(dist::recv(got, 0) == 10, "recv should return the last tag");
    expect_equal(got, want, "recv");
    TORCH_CHECK(
        got.get_non_tensor("label").get<std::string>() == "kept",
        "non-tensor values do not cross the per-leaf wire");
    got = sample(0, false);
    dist::recv(got, 0, dist::RecvOptions().init_tag(7).pseudo_rand(true));
    expect_equal(got, want, "recv(pseudo_rand)");
    got = sample(0, false);
    dist::irecv(got, 0);
    expect_equal(got, want, "irecv");
    got = sample(0, false);
    auto works =
        dist::irecv(got, 0, dist::RecvOptions().return_premature(true));
    TORCH_CHECK(works.size() == 11, "one work per leaf, got ", works.size());
    for (auto& w : works) {
      w->wait();
    }
    expect_equal(got, want, "irecv(return_premature)");
    TensorDict cons = sample(0, false).consolidate();
    dist::recv(cons, 0, dist::RecvOptions().consolidated(true));
    expect_equal(cons, want, "recv(consolidated)");
    // Into a memmapped dict: the files are written in place.
    const std::string dir = std::getenv("TD_DIST_DIR");
    TensorDict mapped = sample(0, false).memmap(dir + "/mapped");
    dist::recv(mapped, 0);
    expect_equal(
        TensorDict::load_memmap(dir + "/mapped"), want, "recv into memmap");
  }
}

struct Step : tensordict::TensorClass<Step> {
  TENSORDICT_FIELDS(Step, obs, action, (std::string, task))
};

// The Step the class scenarios exchange (tests/python/distributed_interop.py
// builds the same one).
Step make_step(double fill, const std::string& task) {
  return Step(
      {{"obs", torch::arange(12, torch::kFloat).reshape({4, 3}) + fill},
       {"action", torch::arange(4) + static_cast<int64_t>(fill)},
       {"task", task}},
      {4});
}

void expect_same_step(const Step& got, const Step& want, const char* what) {
  TORCH_CHECK(torch::equal(got.obs(), want.obs()), what, ": obs differs");
  TORCH_CHECK(
      torch::equal(got.action(), want.action()), what, ": action differs");
}

void remote_init(int rank, int /*world*/) {
  const TensorDict want = sample(2);
  const Step step(
      {{"obs", torch::rand({4, 3})},
       {"action", torch::arange(4)},
       {"task", "reach"}},
      {4});
  if (rank == 0) {
    dist::init_remote(want, 1);
    // A TensorClass travels as its dict, as in Python.
    dist::init_remote(step.tensordict(), 1);
    dist::send(step.tensordict(), 1);
  } else {
    const TensorDict got = dist::from_remote_init(0);
    expect_equal(got, want, "from_remote_init");
    TORCH_CHECK(got.batch_size() == std::vector<int64_t>{4});
    TORCH_CHECK(got.get_non_tensor("label").get<std::string>() == "sent");
    const Step remote = Step::from_tensordict(dist::from_remote_init(0));
    TORCH_CHECK(
        remote.task() == "reach",
        "the non-tensor field travels with init_remote");
    Step into(
        {{"obs", torch::zeros({4, 3})},
         {"action", torch::zeros({4}, torch::kLong)},
         {"task", "kept"}},
        {4});
    dist::recv(into.tensordict(), 0);
    TORCH_CHECK(torch::equal(into.obs(), remote.obs()));
    TORCH_CHECK(torch::equal(into.action(), torch::arange(4)));
    TORCH_CHECK(
        into.task() == "kept", "non-tensor fields stay with per-leaf recv");
  }
}

void expect_error(
    const std::function<void()>& fn, std::vector<std::string> parts);

// A TensorClass on both ends, with no `.tensordict()`: point to point in
// place (the receiver keeps its class and its own non-tensor field), a
// class to a dict and back, a mismatch named on the receiver, then the
// collectives.
void tensor_class(int rank, int world) {
  auto* const make = &make_step;
  auto* const same = &expect_same_step;
  const Step want = make(0.5, "reach");
  if (rank == 0) {
    dist::send(want, 1);
    dist::send(want, 1, dist::SendOptions().init_tag(3).pseudo_rand(true));
    dist::isend(want, 1);
    dist::send(want, 1);               // into a dict
    dist::send(want.tensordict(), 1);  // a dict into a class
    dist::init_remote(want, 1);
    // The receiver's action is [5]: refused before a byte is written.
    expect_error(
        [&] { dist::send(want, 1); }, {"send to rank 1", "key 'action'"});
  } else {
    Step got = make(0, "kept");
    const TensorDict dict = got.tensordict();
    const at::Tensor obs = got.obs();
    TORCH_CHECK(dist::recv(got, 0) == 1, "recv returns the last tag");
    same(got, want, "recv");
    TORCH_CHECK(got.task() == "kept", "non-tensor fields stay with recv");
    TORCH_CHECK(
        got.tensordict().is_same(dict) && got.obs().is_same(obs),
        "recv writes into the class's own tensors");
    Step pseudo = make(0, "kept");
    dist::recv(pseudo, 0, dist::RecvOptions().init_tag(3).pseudo_rand(true));
    same(pseudo, want, "recv(pseudo_rand)");
    Step async = make(0, "kept");
    auto works =
        dist::irecv(async, 0, dist::RecvOptions().return_premature(true));
    TORCH_CHECK(works.size() == 2, "one work per leaf, got ", works.size());
    for (auto& w : works) {
      w->wait();
    }
    same(async, want, "irecv");
    TensorDict as_dict = make(0, "kept").tensordict();
    dist::recv(as_dict, 0);
    TORCH_CHECK(torch::equal(as_dict.get("obs"), want.obs()), "class to dict");
    Step from_dict = make(0, "kept");
    dist::recv(from_dict, 0);
    same(from_dict, want, "dict to class");
    const Step remote = dist::from_remote_init<Step>(0);
    same(remote, want, "from_remote_init<Step>");
    TORCH_CHECK(remote.task() == "reach", "init_remote carries the task");
    Step wrong(
        {{"obs", torch::zeros({4, 3})},
         {"action", torch::zeros({4, 5}, torch::kLong)},
         {"task", "kept"}},
        {4});
    expect_error(
        [&] { dist::recv(wrong, 0); },
        {"recv from rank 0",
         "key 'action' is torch.int64 [4,5] here but torch.int64 [4] on the "
         "sender",
         "nothing was written"});
    TORCH_CHECK(
        torch::equal(wrong.action(), torch::zeros({4, 5}, torch::kLong)));
  }
  // Collectives: every rank passes its own instance.
  Step mine = make(rank, "rank " + std::to_string(rank));
  const Step got = dist::broadcast(mine, world - 1);
  same(got, make(world - 1, ""), "broadcast");
  TORCH_CHECK(
      got.task() == "rank " + std::to_string(world - 1),
      "broadcast carries the task, got ",
      got.task());
  const std::vector<Step> all = dist::all_gather(mine);
  TORCH_CHECK(static_cast<int>(all.size()) == world);
  for (int i = 0; i < world; ++i) {
    same(all[i], make(i, ""), "all_gather");
    TORCH_CHECK(all[i].task() == "rank " + std::to_string(i), "all_gather");
  }
  dist::all_reduce(mine);
  const double total = world * (world - 1) / 2.0;
  TORCH_CHECK(
      torch::equal(
          mine.obs(),
          torch::arange(12, torch::kFloat).reshape({4, 3}) * world + total),
      "all_reduce");
  Step reduced = make(rank, "r");
  dist::reduce(reduced, 0);
  if (rank == 0) {
    TORCH_CHECK(
        torch::equal(
            reduced.action(),
            torch::arange(4) * world + static_cast<int64_t>(total)),
        "reduce");
  }
}

void every_dtype(int rank, int /*world*/) {
  const TensorDict want = every_other_dtype(0.5);
  const TensorDict want_consolidable = every_other_dtype(0.5, /*float8=*/false);
  if (rank == 0) {
    dist::send(want, 1);
    dist::send(want_consolidable, 1, dist::SendOptions().consolidated(true));
    dist::init_remote(want_consolidable, 1);
  } else {
    TensorDict got = every_other_dtype(0);
    dist::recv(got, 0);
    expect_same_bytes(got, want, "recv");
    TensorDict cons = every_other_dtype(0, false).consolidate();
    dist::recv(cons, 0, dist::RecvOptions().consolidated(true));
    expect_same_bytes(cons, want_consolidable, "recv(consolidated)");
    expect_same_bytes(
        dist::from_remote_init(0), want_consolidable, "from_remote_init");
  }
}

// Point to point among four ranks: each sends to the next and receives from
// the previous (even ranks send first, so blocking calls cannot all wait).
void ring(int rank, int world) {
  const int next = (rank + 1) % world;
  const int prev = (rank + world - 1) % world;
  TensorDict got = sample(0, false);
  auto send_all = [&] {
    auto works =
        dist::isend(sample(rank), next, dist::SendOptions().return_early(true));
    for (auto& w : works) {
      w->wait();
    }
    dist::init_remote(sample(rank + 10), next);
  };
  auto recv_all = [&] {
    dist::irecv(got, prev);
    expect_equal(got, sample(prev), "irecv in the ring");
    expect_equal(
        dist::from_remote_init(prev),
        sample(prev + 10),
        "from_remote_init in the ring");
  };
  if (rank % 2 == 0) {
    send_all();
    recv_all();
  } else {
    recv_all();
    send_all();
  }
}

void collectives(int rank, int world) {
  // broadcast from the last rank
  const int src = world - 1;
  TensorDict mine = sample(rank);
  const TensorDict got = dist::broadcast(mine, src);
  expect_equal(got, sample(src), "broadcast");
  // all_reduce: the sum of every rank's values
  auto filled = [&](double value) {
    TensorDict td({3});
    td.set("x", torch::full({3, 2}, value));
    td.set({"n", "y"}, torch::full({3}, static_cast<int64_t>(value)));
    td.set("t", torch::full({2, 3}, value).t());  // not contiguous
    return td;
  };
  const double total = world * (world - 1) / 2.0;
  TensorDict sum = filled(rank);
  dist::all_reduce(sum);
  expect_equal(sum, filled(total), "all_reduce");
  TensorDict bucketed = filled(rank);
  dist::all_reduce(bucketed, dist::CollectiveOptions().bucket_bytes(1024));
  expect_equal(bucketed, filled(total), "all_reduce(bucket_bytes)");
  TensorDict maxed = filled(rank);
  dist::all_reduce(
      maxed, dist::CollectiveOptions().op(c10d::ReduceOp::MAX).async_op(true));
  expect_equal(maxed, filled(world - 1), "all_reduce(MAX, async_op)");
  // reduce onto rank 0
  TensorDict reduced = filled(rank);
  dist::reduce(reduced, 0);
  if (rank == 0) {
    expect_equal(reduced, filled(total), "reduce");
  }
  // all_gather: each rank's dict, shapes may differ
  TensorDict own({rank + 1});
  own.set("r", torch::full({rank + 1}, rank));
  const auto all = dist::all_gather(own);
  TORCH_CHECK(static_cast<int>(all.size()) == world);
  for (int i = 0; i < world; ++i) {
    TORCH_CHECK(
        torch::equal(all[i].get("r"), torch::full({i + 1}, i)),
        "all_gather ",
        i);
  }
  // gather_and_stack onto rank 0
  TensorDict part({2});
  part.set("v", torch::full({2}, rank + 10.0));
  TensorDict dest({world - 1, 2});
  dest.set("v", torch::zeros({world - 1, 2}));
  const auto stacked = dist::gather_and_stack(rank == 0 ? dest : part, 0);
  if (rank == 0) {
    TORCH_CHECK(stacked.has_value());
    for (int i = 1; i < world; ++i) {
      TORCH_CHECK(
          torch::equal(dest.get("v")[i - 1], torch::full({2}, i + 10.0)));
    }
  } else {
    TORCH_CHECK(!stacked.has_value());
  }
}

// Expects `fn` to throw a message holding every part of `parts`.
void expect_error(
    const std::function<void()>& fn, std::vector<std::string> parts) {
  try {
    fn();
  } catch (const std::exception& e) {
    const std::string message = e.what();
    for (const auto& part : parts) {
      TORCH_CHECK(
          message.find(part) != std::string::npos,
          "expected '",
          part,
          "' in the error: ",
          message);
    }
    std::cout << "error as expected: " << message.substr(0, message.find('\n'))
              << "\n";
    return;
  }
  TORCH_CHECK(false, "expected an error with '", parts.front(), "'");
}

// Refusals that happen before a message is sent, on either rank.
void local_refusals(int rank) {
  TensorDict strided({2});
  strided.set("t", torch::zeros({3, 2}).t());
  if (rank == 1) {
    expect_error(
        [&] {
          (void)dist::irecv(
              strided, 0, dist::RecvOptions().return_premature(true));
        },
        {"irecv: key 't' is not a contiguous CPU tensor"});
  }
  TensorDict two({2});
  two.set("a", torch::zeros({2}));
  two.set("b", torch::zeros({2}));
  expect_error(
      [&] {
        (void)dist::all_reduce(
            two,
            dist::CollectiveOptions()
                .async_op(true)
                .return_premature(true)
                .bucket_bytes(1024));
      },
      {"all_reduce(return_premature): buckets and non-contiguous leaves"});
}

void mismatch(int rank, int /*world*/) {
  local_refusals(rank);
  TensorDict td({2});
  td.set("a", torch::zeros({2, 3}));
  td.set({"n", "b"}, torch::zeros({2}, torch::kLong));
  if (rank == 0) {
    expect_error(
        [&] { dist::send(td, 1); },
        {"send to rank 1", "refused", "key ('n', 'b')"});
    // A dict with a key the receiver lacks.
    td.set("extra", torch::zeros({2}));
    expect_error(
        [&] { dist::send(td, 1); },
        {"refused",
         "key 'extra' (torch.float32 [2]) is on the sender but missing here"});
  } else {
    TensorDict other({2});
    other.set("a", torch::zeros({2, 3}));
    other.set({"n", "b"}, torch::ones({2, 4}, torch::kLong));
    expect_error(
        [&] { dist::recv(other, 0); },
        {"recv from rank 0",
         "key ('n', 'b') is torch.int64 [2,4] here but torch.int64 [2] "
         "on the sender",
         "nothing was written"});
    TORCH_CHECK(
        torch::equal(other.get({"n", "b"}), torch::ones({2, 4}, torch::kLong)));
    expect_error(
        [&] { dist::recv(td, 0); },
        {"recv from rank 0",
         "key 'extra' (torch.float32 [2]) is on the sender but missing here"});
  }
  // A peer announcing a terabyte of metadata: refused before allocating.
  if (rank == 0) {
    std::vector<at::Tensor> size{torch::full({1}, int64_t{1} << 40)};
    dist::default_group()->send(size, 1, 0)->wait();
  } else {
    expect_error(
        [&] { (void)dist::from_remote_init(0); },
        {"the metadata from rank 0: rank 0 announced an object of "
         "1099511627776 bytes; expected 0 to 2^31"});
  }
  // Something other than a key list header on the checked transfers' tag.
  if (rank == 0) {
    std::vector<at::Tensor> header{torch::zeros({5}, torch::kLong)};
    dist::default_group()->send(header, 1, INT_MAX - 1)->wait();
  } else {
    expect_error(
        [&] { dist::recv(td, 0); },
        {"recv from rank 0: receiving the key list failed, nothing was "
         "written",
         "the first message is not a key list header (is the peer a checked "
         "C++ sender?)"});
  }
}

void dead_peer(int rank, int /*world*/) {
  TensorDict td({2});
  td.set("a", torch::zeros({2, 3}));
  if (rank == 1) {
    std::_Exit(0);  // dies before receiving anything
  }
  expect_error([&] { dist::send(td, 1); }, {"send to rank 1"});
}

// Eight leaves of 8 MiB: more than the sockets buffer.
TensorDict big(double fill) {
  TensorDict td;
  for (int i = 0; i < 8; ++i) {
    td.set("leaf" + std::to_string(i), torch::full({1 << 21}, fill));
  }
  return td;
}

void receiver_dies_mid_transfer(int rank, int /*world*/) {
  if (rank == 1) {
    TensorDict first;  // the sender's first leaf only, then gone
    first.set("leaf0", torch::zeros({1 << 21}));
    dist::recv(first, 0, dist::RecvOptions().checked(false));
    std::_Exit(0);
  }
  expect_error(
      [&] { dist::send(big(1), 1, dist::SendOptions().checked(false)); },
      {"send to rank 1: key 'leaf"});
}

void sender_dies_mid_transfer(int rank, int /*world*/) {
  if (rank == 0) {
    TensorDict part;  // the first three leaves of the receiver's eight
    for (int i = 0; i < 3; ++i) {
      part.set("leaf" + std::to_string(i), torch::full({1 << 21}, 1.0));
    }
    dist::send(part, 1, dist::SendOptions().checked(false));
    std::_Exit(0);
  }
  const std::string dir = std::getenv("TD_DIST_DIR");
  TensorDict mapped = big(0).memmap(dir + "/partial");
  expect_error(
      [&] { dist::recv(mapped, 0, dist::RecvOptions().checked(false)); },
      {"recv from rank 0: key 'leaf3' failed after 3 of 8 leaves were "
       "received"});
  const TensorDict disk = TensorDict::load_memmap(dir + "/partial");
  TORCH_CHECK(torch::equal(disk.get("leaf2"), torch::full({1 << 21}, 1.0)));
  TORCH_CHECK(torch::equal(disk.get("leaf3"), torch::zeros({1 << 21})));
}

void silent_peer(int rank, int /*world*/) {
  TensorDict td({2});
  td.set("a", torch::zeros({2, 3}));
  if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(8));  // never sends
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  expect_error([&] { dist::recv(td, 1); }, {"recv"});
  const auto waited = std::chrono::steady_clock::now() - start;
  TORCH_CHECK(waited < std::chrono::seconds(7), "the timeout was not honoured");
}

// Peers of the Python interop test (tests/python/distributed_interop.py):
// Python sends sample(3), or receives sample(4).
TensorDict reducible(double fill) {
  TensorDict td({3});
  td.set("x", torch::full({3, 2}, fill));
  td.set({"n", "y"}, torch::full({3}, static_cast<int64_t>(fill)));
  return td;
}

// checked(true) toward a Python rank: refused at once, nothing sent.
void expect_checked_refused(int peer, bool sending) {
  TORCH_CHECK(
      !dist::checked_by_default(dist::default_group(), peer),
      "a Python rank does not announce the checked wire");
  TensorDict td = sample(0, false);
  const std::string what = sending ? "send" : "recv";
  expect_error(
      [&] {
        if (sending) {
          dist::send(td, peer, dist::SendOptions().checked(true));
        } else {
          dist::recv(td, peer, dist::RecvOptions().checked(true));
        }
      },
      {what + ": checked(true) asks rank " + std::to_string(peer) +
           " for the key-list exchange, but rank " + std::to_string(peer) +
           " did not announce it",
       "Nothing was sent or received"});
}

// Every transfer with the Python rank uses default options (NOTE [Choosing
// the wire] in distributed.h).
void py_recv(int rank, int /*world*/) {
  const int peer = 1 - rank;
  expect_checked_refused(peer, /*sending=*/true);
  TensorDict got = sample(0, false);
  TORCH_CHECK(dist::recv(got, peer) == 10, "recv returns the last tag");
  expect_equal(got, sample(3), "recv from Python");
  TORCH_CHECK(got.get_non_tensor("label").get<std::string>() == "kept");
  got = sample(0, false);
  dist::irecv(got, peer);
  expect_equal(got, sample(3), "irecv from Python's isend");
  got = sample(0, false);
  auto works =
      dist::irecv(got, peer, dist::RecvOptions().return_premature(true));
  for (auto& work : works) {
    work->wait();
  }
  expect_equal(got, sample(3), "irecv(return_premature) from Python's send");
  got = sample(0, false);
  dist::irecv(got, peer, dist::RecvOptions().init_tag(5).pseudo_rand(true));
  expect_equal(got, sample(3), "irecv(pseudo_rand) from Python");
  TensorDict cons = sample(0, false).consolidate();
  dist::recv(cons, peer, dist::RecvOptions().consolidated(true));
  expect_equal(cons, sample(3), "recv(consolidated) from Python");
  const TensorDict remote = dist::from_remote_init(peer);
  expect_equal(remote, sample(3), "from_remote_init from Python");
  TORCH_CHECK(remote.get_non_tensor("label").get<std::string>() == "sent");
  const TensorDict b = dist::broadcast(TensorDict(), peer);
  expect_equal(b, sample(3), "broadcast from Python");
  TensorDict sum = reducible(1);
  dist::all_reduce(sum);
  expect_equal(sum, reducible(4), "all_reduce with Python");
}

// A Python tensorclass on the other end, default options.
void py_class(int rank, int /*world*/) {
  const int peer = 1 - rank;
  Step got = make_step(0, "kept");
  dist::recv(got, peer);
  expect_same_step(got, make_step(0.5, ""), "recv from a Python tensorclass");
  TORCH_CHECK(got.task() == "kept");
  const Step remote = dist::from_remote_init<Step>(peer);
  expect_same_step(remote, make_step(0.5, ""), "from_remote_init<Step>");
  TORCH_CHECK(remote.task() == "reach", "got task ", remote.task());
  const Step b = dist::broadcast(Step(), peer);
  expect_same_step(b, make_step(0.5, ""), "broadcast from Python");
  TORCH_CHECK(b.task() == "reach");
  dist::send(make_step(1.5, "sent"), peer);
  dist::init_remote(make_step(2.5, "sent"), peer);
}

void py_send(int rank, int /*world*/) {
  const int peer = 1 - rank;
  expect_checked_refused(peer, /*sending=*/false);
  const TensorDict td = sample(4);
  TORCH_CHECK(dist::send(td, peer) == 10, "send returns the last tag");
  dist::isend(td, peer);
  auto works = dist::isend(td, peer, dist::SendOptions().return_early(true));
  for (auto& work : works) {
    work->wait();
  }
  dist::isend(td, peer, dist::SendOptions().init_tag(5).pseudo_rand(true));
  dist::send(td, peer, dist::SendOptions().consolidated(true));
  dist::init_remote(td, peer);
  (void)dist::broadcast(td, rank);
  TensorDict sum = reducible(1);
  dist::all_reduce(sum);
  expect_equal(sum, reducible(4), "all_reduce with Python");
}

// Two C++ ranks (0 and 2) and a Python rank (1) in one group: between the
// C++ ranks the default is still checked (a mismatch is refused on both
// ends), with the Python rank it is Python's wire.
void py_mixed(int rank, int world) {
  TORCH_CHECK(world == 3 && rank != 1, "py_mixed runs C++ ranks 0 and 2");
  const int other = 2 - rank;  // the other C++ rank
  const dist::ProcessGroupPtr group = dist::default_group();
  TORCH_CHECK(dist::checked_by_default(group, other), "C++ peer: checked");
  TORCH_CHECK(!dist::checked_by_default(group, 1), "Python peer: plain");
  TensorDict wrong = sample(0, false);
  wrong.set({"nested", "b"}, torch::zeros({4, 2}, torch::kInt));
  if (rank == 0) {
    dist::send(sample(4), 1);
    expect_error(
        [&] { dist::send(wrong, other); },
        {"send to rank 2", "refused", "key ('nested', 'b')"});
    dist::isend(sample(5), other);
  } else {
    TensorDict got = sample(0, false);
    expect_error(
        [&] { dist::recv(got, other); },
        {"recv from rank 0",
         "key ('nested', 'b') is torch.int32 [4] here but torch.int32 [4,2] on "
         "the sender",
         "nothing was written"});
    expect_equal(got, sample(0, false), "nothing written on a mismatch");
    dist::irecv(got, other);
    expect_equal(got, sample(5), "irecv from the C++ rank");
    got = sample(0, false);
    dist::recv(got, 1);
    expect_equal(got, sample(3), "recv from the Python rank");
  }
}

// Rank 1 joins the group the way a Python rank does (the same store
// prefixes and Gloo backend, no announcement; see group_made_elsewhere):
// rank 0 talks to it with default options, and checked(true) toward it is
// refused at once. Rank 1's group is one made elsewhere, so its defaults
// are Python's wire too.
void unannounced_peer(int rank, int /*world*/) {
  const int peer = 1 - rank;
  TORCH_CHECK(
      !dist::checked_by_default(dist::default_group(), peer),
      "rank ",
      rank,
      ": the wire toward rank ",
      peer,
      " should be plain");
  if (rank == 0) {
    expect_checked_refused(peer, /*sending=*/true);
    dist::send(sample(1), peer);
    TensorDict got = sample(0, false);
    dist::irecv(got, peer);
    expect_equal(got, sample(2), "irecv from the unannounced rank");
  } else {
    TensorDict got = sample(0, false);
    dist::recv(got, peer);
    expect_equal(got, sample(1), "recv on a group made elsewhere");
    dist::isend(sample(2), peer);
  }
}

const std::map<std::string, Scenario>& scenarios() {
  static const std::map<std::string, Scenario> all = {
      {"send_recv", send_recv},
      {"remote_init", remote_init},
      {"every_dtype", every_dtype},
      {"tensor_class", tensor_class},
      {"ring", ring},
      {"collectives", collectives},
      {"mismatch", mismatch},
      {"dead_peer", dead_peer},
      {"silent_peer", silent_peer},
      {"receiver_dies_mid_transfer", receiver_dies_mid_transfer},
      {"sender_dies_mid_transfer", sender_dies_mid_transfer},
      {"py_recv", py_recv},
      {"py_send", py_send},
      {"py_class", py_class},
      {"py_mixed", py_mixed},
      {"unannounced_peer", unannounced_peer},
  };
  return all;
}

// A group joined as Python's init_process_group("gloo") joins it, from the
// torchrun variables, without the announcement of dist::init_process_group:
// what a group created elsewhere looks like to the library.
dist::ProcessGroupPtr group_made_elsewhere(const dist::InitOptions& options) {
  const int rank = env_int("RANK");
  const int world = env_int("WORLD_SIZE");
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(env_int("MASTER_PORT"));
  store_options.isServer = rank == 0;
  store_options.numWorkers = world;
  store_options.waitWorkers = true;
  const std::chrono::milliseconds timeout =
      options.timeout().value_or(std::chrono::seconds(60));
  store_options.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store =
      c10::make_intrusive<c10d::TCPStore>("127.0.0.1", store_options);
  store = c10::make_intrusive<c10d::PrefixStore>("default_pg", store);
  store = c10::make_intrusive<c10d::PrefixStore>("0/", store);
  auto gloo = c10d::ProcessGroupGloo::Options::create();
  gloo->timeout = timeout;
  gloo->devices.push_back(
      c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto backend = c10::make_intrusive<c10d::ProcessGroupGloo>(
      c10::make_intrusive<c10d::PrefixStore>("cpu/", store), rank, world, gloo);
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rank, world);
  group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
  group->setBackend(
      c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, backend);
  dist::set_default_group(group);
  return group;
}

int run_rank(const std::string& name) {
  const auto found = scenarios().find(name);
  if (found == scenarios().end()) {
    std::cerr << "unknown scenario " << name << "\n";
    return 2;
  }
  try {
    auto options = dist::InitOptions();
    if (const int seconds = env_int("TD_DIST_TIMEOUT"); seconds > 0) {
      options.timeout(std::chrono::milliseconds(seconds * 1000));
    }
    const auto group = name == "unannounced_peer" && env_int("RANK") == 1
                           ? group_made_elsewhere(options)
                           : dist::init_process_group(options);
    found->second(group->getRank(), group->getSize());
    std::cout << "rank " << group->getRank() << " ok\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "rank " << env_int("RANK") << " failed: " << e.what() << "\n";
    return 1;
  }
}

// --- the launcher
// ----------------------------------------------------------------

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

struct RankResult {
  int status = -1;  // exit code, or -1 if killed at the deadline
  std::string output;
};

std::vector<RankResult> run_ranks(
    const std::string& scenario,
    int world,
    int timeout_seconds = 60,
    int op_timeout = 20) {
  const std::string port = std::to_string(free_port());
  const auto dir = std::filesystem::temp_directory_path() /
                   ("td_dist_" + scenario + "_" + port);
  std::filesystem::create_directories(dir);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      env_strings.emplace_back(*e);
    }
    env_strings.push_back("TD_DIST_SCENARIO=" + scenario);
    env_strings.push_back("MASTER_ADDR=127.0.0.1");
    env_strings.push_back("MASTER_PORT=" + port);
    env_strings.push_back("RANK=" + std::to_string(rank));
    env_strings.push_back("WORLD_SIZE=" + std::to_string(world));
    env_strings.push_back("TD_DIST_TIMEOUT=" + std::to_string(op_timeout));
    env_strings.push_back("TD_DIST_DIR=" + dir.string());
    std::vector<char*> envp;
    for (auto& s : env_strings) {
      envp.push_back(s.data());
    }
    envp.push_back(nullptr);
    const std::string log =
        (dir / ("rank" + std::to_string(rank) + ".log")).string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(
        &actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::string exe = "/proc/self/exe";
    char* argv[] = {exe.data(), nullptr};
    pid_t pid = 0;
    const int rc = posix_spawn(
        &pid, "/proc/self/exe", &actions, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    EXPECT_EQ(rc, 0) << "posix_spawn failed";
    pids.push_back(pid);
  }
  std::vector<RankResult> results(world);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  for (int rank = 0; rank < world; ++rank) {
    int status = 0;
    for (;;) {
      const pid_t done = ::waitpid(pids[rank], &status, WNOHANG);
      if (done == pids[rank]) {
        results[rank].status =
            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        for (const pid_t p : pids) {
          ::kill(p, SIGKILL);
        }
        ::waitpid(pids[rank], &status, 0);
        results[rank].status = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::ifstream in(dir / ("rank" + std::to_string(rank) + ".log"));
    std::stringstream text;
    text << in.rdbuf();
    results[rank].output = text.str();
  }
  std::filesystem::remove_all(dir);
  return results;
}

void expect_all_ok(const std::vector<RankResult>& results) {
  for (size_t rank = 0; rank < results.size(); ++rank) {
    EXPECT_EQ(results[rank].status, 0) << "rank " << rank << ":\n"
                                       << results[rank].output;
  }
}

// One run of the rank program: `scenario` on `world` ranks, each operation
// timing out after `op_timeout` seconds. Rank `must_pass` must exit 0
// (every rank when -1; in the fault scenarios the killed or stalled peer's
// own status is not the point), and rank `error_rank`, if any, must have
// printed the error it expected.
struct RankScenario {
  const char* test;
  const char* scenario;
  int world;
  int op_timeout = 20;
  int must_pass = -1;  // -1: every rank
  int error_rank = -1;
};

class DistributedScenarioTest : public testing::TestWithParam<RankScenario> {};

TEST_P(DistributedScenarioTest, RanksExitCleanly) {
  const RankScenario& s = GetParam();
  const auto results = run_ranks(s.scenario, s.world, 60, s.op_timeout);
  if (s.must_pass < 0) {
    expect_all_ok(results);
  } else {
    EXPECT_EQ(results[s.must_pass].status, 0) << results[s.must_pass].output;
  }
  if (s.error_rank >= 0) {
    EXPECT_NE(
        results[s.error_rank].output.find("error as expected"),
        std::string::npos)
        << results[s.error_rank].output;
  }
}

INSTANTIATE_TEST_SUITE_P(
    DistributedTest,
    DistributedScenarioTest,
    testing::Values(
        RankScenario{"SendRecvEveryFormTwoRanks", "send_recv", 2},
        RankScenario{
            "InitRemoteCarriesKeysShapesAndNonTensors", "remote_init", 2},
        RankScenario{
            "TensorClassOnBothEndsOfEveryFunction",
            "tensor_class",
            2,
            20,
            -1,
            1},
        RankScenario{"EveryDtypeOfTheFormatCrossesTheWire", "every_dtype", 2},
        RankScenario{"PointToPointRingOfFourRanks", "ring", 4},
        RankScenario{"CollectivesTwoRanks", "collectives", 2},
        RankScenario{"CollectivesFourRanks", "collectives", 4},
        RankScenario{
            "MismatchedStructuresAreNamedOnBothRanks",
            "mismatch",
            2,
            20,
            -1,
            1},
        RankScenario{
            "RankOfAGroupMadeElsewhereGetsPythonsWire",
            "unannounced_peer",
            2,
            20,
            -1,
            0},
        // Faults: the surviving rank reports an error in time, not a hang.
        RankScenario{"DeadPeerIsAnErrorNotAHang", "dead_peer", 2, 10, 0},
        RankScenario{
            "ReceiverKilledMidTransferIsAnErrorOnTheSender",
            "receiver_dies_mid_transfer",
            2,
            10,
            0},
        RankScenario{
            "SenderKilledMidTransferSaysWhatWasWritten",
            "sender_dies_mid_transfer",
            2,
            10,
            1},
        RankScenario{"SilentPeerTimesOut", "silent_peer", 2, 3, 0}),
    [](const testing::TestParamInfo<RankScenario>& info) {
      return std::string(info.param.test);
    });

TEST(DistributedTest, IntGeneratorMatchesNumpy) {
  // From the docstring of Python's tensordict.utils._int_generator.
  std::vector<int64_t> got;
  int64_t seed = 10;
  for (int i = 0; i < 10; ++i) {
    seed = dist::detail::int_generator(seed);
    got.push_back(seed);
  }
  EXPECT_EQ(
      got,
      (std::vector<int64_t>{
          6756, 1717, 4410, 9740, 9611, 9716, 5397, 7745, 4521, 7523}));
  EXPECT_THROW(dist::detail::int_generator(-1), c10::ValueError);
}

TEST(DistributedTest, PickleCodecRoundTripsPlainData) {
  using tensordict::detail::pickle_dumps;
  using tensordict::detail::pickle_loads;
  const tensordict::Json value = tensordict::Json::parse(
      R"({"cls": "TensorDict", "n": [1, -2, 3000000000, -9007199254740993, 0.5,
          true, false, null, "été"], "nested": {"empty": [], "d": {}}})");
  EXPECT_EQ(pickle_loads(pickle_dumps(value), "the test"), value);
}

TEST(DistributedTest, PickleReaderRefusesCodeAndTruncation) {
  using tensordict::detail::pickle_loads;
  // pickle.dumps(print, protocol=2): a GLOBAL, which names a function.
  const std::string global(
      "\x80\x02"
      "c__builtin__\nprint\nq\x00.",
      24);
  try {
    (void)pickle_loads(global, "the test");
    FAIL() << "expected an error";
  } catch (const c10::ValueError& e) {
    EXPECT_NE(
        std::string(e.what()).find("opcode 0x63 is not plain data"),
        std::string::npos)
        << e.what();
  }
  // A string announcing more bytes than follow.
  EXPECT_THROW(
      (void)pickle_loads(
          std::string(
              "\x80\x02X\x10\x00\x00\x00"
              "ab",
              9),
          "t"),
      c10::ValueError);
  EXPECT_THROW(
      (void)pickle_loads(std::string("\x80\x02}", 3), "t"), c10::ValueError);
}

// Runs init_process_group with these environment variables and returns its
// error (it must fail before it opens any socket).
std::string init_error(const std::map<std::string, std::string>& env) {
  for (const char* name :
       {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"}) {
    ::unsetenv(name);
  }
  for (const auto& [name, value] : env) {
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  try {
    (void)dist::init_process_group();
  } catch (const c10::ValueError& e) {
    return e.what();
  }
  return "no error";
}

TEST(DistributedTest, InitProcessGroupNamesWhatIsMissingOrWrong) {
  EXPECT_NE(
      init_error({}).find(
          "init_process_group: MASTER_PORT is not set and no value was given"),
      std::string::npos);
  EXPECT_NE(
      init_error({{"MASTER_PORT", "29500"}, {"RANK", "one"}})
          .find("init_process_group: RANK must be an integer, got 'one'"),
      std::string::npos);
  EXPECT_NE(
      init_error({{"MASTER_PORT", "29500"}, {"RANK", "2"}, {"WORLD_SIZE", "2"}})
          .find("expected 0 <= RANK < WORLD_SIZE, got rank 2 and world size 2"),
      std::string::npos);
  for (const char* name : {"MASTER_PORT", "RANK", "WORLD_SIZE"}) {
    ::unsetenv(name);
  }
}

TEST(DistributedTest, NoDefaultGroupIsAClearError) {
  TensorDict td;
  try {
    dist::send(td, 1);
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("no default process group"),
        std::string::npos);
  }
}

// A Gloo group for a rank that is a thread of this process; the ranks of a
// world share `store`.
dist::ProcessGroupPtr thread_rank_group(
    const c10::intrusive_ptr<c10d::Store>& store,
    int rank,
    int world,
    std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->timeout = timeout;
  options->devices.push_back(
      c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto backend =
      c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rank, world);
  group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
  group->setBackend(
      c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, backend);
  return group;
}

// Ranks as threads of one process, each with its own group: every
// operation of ours runs on both ranks at once in one address space, where
// ThreadSanitizer sees both sides (make test-tsan).
TEST(DistributedTest, RanksAsThreadsOfOneProcessSendAndReduce) {
  constexpr int kWorld = 2;
  const c10::intrusive_ptr<c10d::Store> store =
      c10::make_intrusive<c10d::HashStore>();
  std::vector<std::string> errors(kWorld);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kWorld; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        const dist::ProcessGroupPtr group =
            thread_rank_group(store, rank, kWorld);
        const TensorDict want = sample(0.5);
        if (rank == 0) {
          dist::send(want, 1, dist::SendOptions().group(group));
          dist::send(
              want.consolidate(),
              1,
              dist::SendOptions().group(group).consolidated(true));
        } else {
          TensorDict got = sample(0, false);
          dist::recv(got, 0, dist::RecvOptions().group(group));
          expect_equal(got, want, "recv");
          got = sample(0, false).consolidate();
          dist::recv(
              got, 0, dist::RecvOptions().group(group).consolidated(true));
          expect_equal(got, want, "recv(consolidated)");
        }
        TensorDict sum({3});
        sum.set("x", torch::full({3, 2}, static_cast<double>(rank + 1)));
        sum.set({"n", "y"}, torch::full({3}, int64_t{rank + 1}));
        dist::all_reduce(
            sum, dist::CollectiveOptions().group(group).async_op(true));
        TORCH_CHECK(torch::equal(sum.get("x"), torch::full({3, 2}, 3.0)));
        TORCH_CHECK(torch::equal(sum.get({"n", "y"}), torch::full({3}, 3L)));
        const TensorDict got = dist::broadcast(
            sample(rank), 1, dist::CollectiveOptions().group(group));
        expect_equal(got, sample(1), "broadcast");
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (std::thread& rank : ranks) {
    rank.join();
  }
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_EQ(errors[rank], "") << "rank " << rank;
  }
}

// Runs `body(rank, group)` on two thread ranks of one hand-made group and
// returns each rank's error ("" if none).
std::vector<std::string> on_thread_ranks(
    const std::function<void(int, const dist::ProcessGroupPtr&)>& body) {
  constexpr int kWorld = 2;
  const c10::intrusive_ptr<c10d::Store> store =
      c10::make_intrusive<c10d::HashStore>();
  std::vector<std::string> errors(kWorld);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kWorld; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        // Short: a rank waiting for a handshake the other never starts
        // fails here instead of hanging the test.
        body(
            rank,
            thread_rank_group(store, rank, kWorld, std::chrono::seconds(5)));
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (std::thread& rank : ranks) {
    rank.join();
  }
  return errors;
}

// A group made with c10d directly (as TorchRL or torchrun's Python would
// hand one over) announced nothing: the default is Python's wire. A
// checked sender would wait for an answer the plain receiver never gives,
// and both would time out.
TEST(DistributedTest, GroupMadeElsewhereGetsPythonsWireByDefault) {
  const auto errors = on_thread_ranks([](int rank, const auto& group) {
    TORCH_CHECK(!dist::checked_by_default(group, 1 - rank));
    const TensorDict want = sample(0.5);
    if (rank == 0) {
      dist::send(want, 1, dist::SendOptions().group(group));
      dist::isend(want, 1, dist::SendOptions().group(group));
    } else {
      TensorDict got = sample(0, false);
      dist::recv(got, 0, dist::RecvOptions().group(group).checked(false));
      expect_equal(got, want, "recv(checked(false)) of a default send");
      got = sample(0, false);
      dist::irecv(got, 0, dist::RecvOptions().group(group));
      expect_equal(got, want, "irecv of a default isend");
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

// checked(true) on both ends is how a group made elsewhere gets the checks.
TEST(DistributedTest, GroupMadeElsewhereChecksWhenTold) {
  const auto errors = on_thread_ranks([](int rank, const auto& group) {
    TensorDict td({2});
    td.set("a", torch::zeros({2, 3}));
    td.set({"n", "b"}, torch::zeros({2}, torch::kLong));
    if (rank == 0) {
      dist::send(td, 1, dist::SendOptions().group(group).checked(true));
    } else {
      TensorDict other({2});
      other.set("a", torch::ones({2, 3}));
      other.set({"n", "b"}, torch::ones({2, 4}, torch::kLong));
      dist::recv(other, 0, dist::RecvOptions().group(group).checked(true));
    }
  });
  EXPECT_NE(errors[0].find("send to rank 1"), std::string::npos) << errors[0];
  EXPECT_NE(
      errors[0].find("the receiver refused the dict: key ('n', 'b')"),
      std::string::npos)
      << errors[0];
  EXPECT_NE(
      errors[1].find("key ('n', 'b') is torch.int64 [2,4] here but "
                     "torch.int64 [2] on the sender; nothing was written"),
      std::string::npos)
      << errors[1];
}

TEST(DistributedTest, CheckedByDefaultNamesABadPeer) {
  const auto errors = on_thread_ranks([](int rank, const auto& group) {
    if (rank == 0) {
      expect_error(
          [&] { (void)dist::checked_by_default(group, 2); },
          {"checked_by_default: rank 2 is not in the group (ranks 0 to 1)"});
      expect_error(
          [&] { (void)dist::checked_by_default(group, 0); },
          {"checked_by_default: rank 0 is this process"});
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

}  // namespace distributed_test

int main(int argc, char** argv) {
  if (const char* scenario = std::getenv("TD_DIST_SCENARIO")) {
    return distributed_test::run_rank(scenario);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
