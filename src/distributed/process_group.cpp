// Joining a Gloo group from C++ as Python's init_process_group does, and the
// default group.

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "distributed/wire.h"

TENSORDICT_BEGIN_NAMESPACE
namespace dist {
namespace {

std::mutex default_group_mutex;
ProcessGroupPtr the_default_group;

// NOTE [Who speaks the checked wire]
// A C++ rank joining through init_process_group writes kCheckedWireValue
// under kCheckedWirePrefix + its rank in the group's store, before it
// builds its Gloo backend. Gloo connects the full mesh at construction
// (our devices are never lazy), which waits for every rank's address in the
// same store; so once init_process_group returns on any rank, every C++
// rank of the group has announced, and a missing key means a rank that
// never will (Python, or a C++ rank that joined another way). The answer
// per peer is therefore stable, and cached. Groups are remembered weakly:
// a weak_intrusive_ptr keeps the ProcessGroup's memory (not the group)
// until the entry is dropped, so a new group cannot reuse a dead one's
// address while the entry exists.
constexpr std::string_view kCheckedWirePrefix = "tensordict_cpp/checked_wire/";
constexpr std::string_view kCheckedWireValue = "tdcheck1";

struct AnnouncedGroup {
  c10::weak_intrusive_ptr<c10d::ProcessGroup> group;
  c10::intrusive_ptr<c10d::Store> store;
  std::vector<int8_t> peers;  // -1 not looked up yet, 0 no, 1 yes
};

std::mutex announced_mutex;
std::vector<AnnouncedGroup> announced_groups;

std::string checked_wire_key(int rank) {
  return std::string(kCheckedWirePrefix) + std::to_string(rank);
}

// Forgets groups that no longer exist; announced_mutex is held.
void drop_dead_groups() {
  announced_groups.erase(
      std::remove_if(
          announced_groups.begin(),
          announced_groups.end(),
          [](const AnnouncedGroup& entry) { return entry.group.expired(); }),
      announced_groups.end());
}

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return std::nullopt;
  }
  return std::string(value);
}

int env_int(const char* name, std::optional<int> given) {
  if (given) {
    return *given;
  }
  const std::optional<std::string> text = env(name);
  TORCH_CHECK_VALUE(
      text.has_value(),
      "init_process_group: ",
      name,
      " is not set and no value was given (torchrun sets MASTER_ADDR, "
      "MASTER_PORT, RANK and WORLD_SIZE)");
  try {
    size_t used = 0;
    const int value = std::stoi(*text, &used);
    if (used == text->size()) {
      return value;
    }
  } catch (const std::exception&) {
  }
  // A throw the compiler sees, so the function visibly never falls off its
  // end (TORCH_CHECK_VALUE(false, ...) hides it at -O0).
  C10_THROW_ERROR(
      ValueError,
      c10::str(
          "init_process_group: ",
          name,
          " must be an integer, got '",
          *text,
          "'"));
}

}  // namespace

ProcessGroupPtr init_process_group(const InitOptions& options) {
  const std::string addr =
      options.master_addr().value_or(env("MASTER_ADDR").value_or("127.0.0.1"));
  const int port = env_int("MASTER_PORT", options.master_port());
  const int rank = env_int("RANK", options.rank());
  const int world_size = env_int("WORLD_SIZE", options.world_size());
  TORCH_CHECK_VALUE(
      world_size >= 1 && rank >= 0 && rank < world_size,
      "init_process_group: expected 0 <= RANK < WORLD_SIZE, got rank ",
      rank,
      " and world size ",
      world_size);
  TORCH_CHECK_VALUE(
      port > 0 && port < 65536,
      "init_process_group: MASTER_PORT must be in [1, 65535], got ",
      port);
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  if (options.timeout()) {
    timeout = *options.timeout();
  } else if (env("TENSORDICT_DIST_TIMEOUT_SECONDS")) {
    timeout = std::chrono::seconds(
        env_int("TENSORDICT_DIST_TIMEOUT_SECONDS", std::nullopt));
  }

  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(port);
  store_options.isServer = rank == 0;
  store_options.numWorkers = world_size;
  store_options.waitWorkers = true;  // as Python: clients count themselves in
  store_options.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store =
      c10::make_intrusive<c10d::TCPStore>(addr, store_options);
  // The prefixes of Python's init_process_group("gloo"): "default_pg", then
  // the group's name ("0" for the first group), then the device.
  store = c10::make_intrusive<c10d::PrefixStore>("default_pg", store);
  store = c10::make_intrusive<c10d::PrefixStore>("0/", store);
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rank, world_size);
  // Before Gloo's connect: see NOTE [Who speaks the checked wire].
  store->set(
      checked_wire_key(rank),
      std::vector<uint8_t>(kCheckedWireValue.begin(), kCheckedWireValue.end()));
  {
    std::lock_guard<std::mutex> lock(announced_mutex);
    drop_dead_groups();
    announced_groups.push_back(
        {c10::weak_intrusive_ptr<c10d::ProcessGroup>(group),
         store,
         std::vector<int8_t>(world_size, -1)});
  }
  auto backend_store = c10::make_intrusive<c10d::PrefixStore>("cpu/", store);

  // Eager devices: their full-mesh connect is what orders every C++ rank's
  // announcement before any transfer (NOTE [Who speaks the checked wire]).
  auto gloo_options = c10d::ProcessGroupGloo::Options::create();
  gloo_options->timeout = timeout;
  if (const auto ifname = env("GLOO_SOCKET_IFNAME")) {
    gloo_options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForInterface(
            *ifname, /*lazyInit=*/false));
  } else {
    gloo_options->devices.push_back(
        c10d::ProcessGroupGloo::createDefaultDevice(/*lazyInit=*/false));
  }
  auto backend = c10::make_intrusive<c10d::ProcessGroupGloo>(
      backend_store, rank, world_size, gloo_options);
  group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
  group->setBackend(
      c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, backend);
  set_default_group(group);
  return group;
}

void set_default_group(ProcessGroupPtr group) {
  std::lock_guard<std::mutex> lock(default_group_mutex);
  the_default_group = std::move(group);
}

ProcessGroupPtr default_group() {
  std::lock_guard<std::mutex> lock(default_group_mutex);
  TORCH_CHECK(
      the_default_group,
      "no default process group: call tensordict::dist::init_process_group() "
      "or set_default_group(), or pass a group in the options");
  return the_default_group;
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(default_group_mutex);
  return static_cast<bool>(the_default_group);
}

void destroy_process_group() {
  set_default_group({});
}

bool checked_by_default(const ProcessGroupPtr& group, int peer) {
  TORCH_CHECK_VALUE(group, "checked_by_default: expected a group, got none");
  detail::check_peer(group, peer, "checked_by_default");
  return detail::peer_speaks_checked(group, peer).value_or(false);
}

namespace detail {

std::optional<bool> peer_speaks_checked(
    const ProcessGroupPtr& group, int peer) {
  std::lock_guard<std::mutex> lock(announced_mutex);
  drop_dead_groups();
  for (AnnouncedGroup& entry : announced_groups) {
    if (entry.group.lock().get() != group.get()) {
      continue;
    }
    int8_t& known = entry.peers.at(peer);
    if (known < 0) {
      const std::string key = checked_wire_key(peer);
      bool yes = false;
      if (entry.store->check({key})) {
        const std::vector<uint8_t> value = entry.store->get(key);
        yes = std::string_view(
                  reinterpret_cast<const char*>(value.data()), value.size()) ==
              kCheckedWireValue;
      }
      known = yes ? 1 : 0;
    }
    return known == 1;
  }
  return std::nullopt;
}

bool use_checked(
    std::optional<bool> asked,
    const ProcessGroupPtr& group,
    int peer,
    const char* what) {
  if (asked.has_value() && !*asked) {
    return false;
  }
  const std::optional<bool> speaks = peer_speaks_checked(group, peer);
  if (!asked.has_value()) {
    return speaks.value_or(false);
  }
  TORCH_CHECK_VALUE(
      speaks.value_or(true),
      what,
      ": checked(true) asks rank ",
      peer,
      " for the key-list exchange, but rank ",
      peer,
      " did not announce it when it joined the group (a Python rank, or a "
      "C++ rank that did not join through init_process_group); leave "
      "checked unset, or pass checked(false), for Python's wire. Nothing "
      "was sent or received");
  return true;
}

ProcessGroupPtr group_or_default(const ProcessGroupPtr& group) {
  return group ? group : default_group();
}

void check_rank(const ProcessGroupPtr& group, int rank, const char* what) {
  TORCH_CHECK_VALUE(
      rank >= 0 && rank < group->getSize(),
      what,
      ": rank ",
      rank,
      " is not in the group (ranks 0 to ",
      group->getSize() - 1,
      ")");
}

void check_peer(const ProcessGroupPtr& group, int peer, const char* what) {
  check_rank(group, peer, what);
  TORCH_CHECK_VALUE(
      peer != group->getRank(),
      what,
      ": rank ",
      peer,
      " is this process; expected another rank");
}

void wait_all(const Works& works, const std::string& what) {
  std::exception_ptr first;
  for (const auto& work : works) {
    try {
      work->wait();
    } catch (const std::exception&) {
      if (!first) {
        first = std::current_exception();
      }
    }
  }
  if (first) {
    try {
      std::rethrow_exception(first);
    } catch (const std::exception& e) {
      TORCH_CHECK(false, what, ": ", e.what());
    }
  }
}

}  // namespace detail
}  // namespace dist
TENSORDICT_END_NAMESPACE
