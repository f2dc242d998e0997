// send/recv/isend/irecv: NOTE [The wire] in tensordict/distributed.h.

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "core/tensor_dict_impl.h"
#include "core/walk.h"
#include "distributed/wire.h"
#include "io/format.h"
#include "tensordict/lazy_stack.h"
#include "util/python_spelling.h"
#include "util/sha256.h"

TENSORDICT_BEGIN_NAMESPACE
namespace dist {
namespace detail {
namespace {

using ::tensordict::detail::KeyPath;
using ::tensordict::detail::TensorDictImpl;

// The tag of the key/shape/dtype list of `checked` transfers: far from the
// tags leaves use (init_tag upwards, or the pseudo-random chain in [0,
// 10000)).
constexpr int kCheckTag = INT_MAX - 1;
// A key list longer than this is refused before it is allocated.
constexpr int64_t kMaxCheckBytes = int64_t{1} << 30;

void collect(
    const TensorDict& td, bool sorted, int32_t parent, WireLeaves& out);

void collect_value(
    const Value& value, bool sorted, int32_t part, WireLeaves& out) {
  if (value.is_tensor()) {
    out.tensors.push_back(value.tensor());
    out.leaf_part.push_back(part);
  } else if (value.is_tensordict()) {
    collect(value.tensordict(), sorted, part, out);
  } else if (value.is_lazy_stack()) {
    for (const TensorDict& element : value.lazy_stack().tensordicts()) {
      collect(element, sorted, part, out);
    }
  }
  // Non-tensor values do not cross the per-leaf wire (as in Python).
}

void collect(
    const TensorDict& td, bool sorted, int32_t parent, WireLeaves& out) {
  const TensorDictImpl& impl = *td.unsafeGetImpl();
  c10::SmallVector<const ::tensordict::detail::Node*, 16> nodes;
  for (const auto* node : impl.nodes()) {
    nodes.push_back(node);
  }
  // Python's sorted_keys: code point order, which is UTF-8 byte order.
  if (sorted) {
    std::sort(nodes.begin(), nodes.end(), [](const auto* a, const auto* b) {
      return a->key < b->key;
    });
  }
  for (const auto* node : nodes) {
    out.parts.push_back({&node->key, parent});
    collect_value(
        node->value, sorted, static_cast<int32_t>(out.parts.size() - 1), out);
  }
}

int64_t next_tag(int64_t tag, bool pseudo_rand) {
  return pseudo_rand ? int_generator(tag + 1) : tag + 1;
}

void check_tag(int64_t tag, const char* what) {
  TORCH_CHECK_VALUE(
      tag >= INT_MIN && tag < kCheckTag,
      what,
      ": tag ",
      tag,
      " is out of range (c10d tags are 32-bit; ",
      kCheckTag,
      " and above are reserved)");
}

Json schema_of(const WireLeaves& leaves, int64_t storage_bytes) {
  Json list = Json::array();
  for (size_t i = 0; i < leaves.tensors.size(); ++i) {
    const at::Tensor& t = leaves.tensors[i];
    list.push_back(
        {leaves.key(i),
         ::tensordict::detail::dtype_name(t.scalar_type()),
         t.sizes().vec()});
  }
  return Json{{"leaves", std::move(list)}, {"storage_bytes", storage_bytes}};
}

std::string describe_leaf(const Json& leaf) {
  return leaf.at(1).get<std::string>() + " " + leaf.at(2).dump();
}

// Returns "" if the receiver's and the sender's lists agree, else why not.
std::string compare_schemas(const Json& mine, const Json& theirs) {
  const Json& a = mine.at("leaves");
  const Json& b = theirs.at("leaves");
  std::map<std::string, const Json*> here;
  std::map<std::string, const Json*> there;
  for (const Json& leaf : a) {
    here[leaf.at(0).get<std::string>()] = &leaf;
  }
  for (const Json& leaf : b) {
    there[leaf.at(0).get<std::string>()] = &leaf;
  }
  for (const Json& leaf : b) {
    const std::string key = leaf.at(0).get<std::string>();
    const auto found = here.find(key);
    if (found == here.end()) {
      return key + " (" + describe_leaf(leaf) +
             ") is on the sender but missing here";
    }
    const Json& own = *found->second;
    if (own.at(1) != leaf.at(1) || own.at(2) != leaf.at(2)) {
      return key + " is " + describe_leaf(own) + " here but " +
             describe_leaf(leaf) + " on the sender";
    }
  }
  for (const Json& leaf : a) {
    const std::string key = leaf.at(0).get<std::string>();
    if (there.find(key) == there.end()) {
      return key + " (" + describe_leaf(leaf) +
             ") is here but missing on the sender";
    }
  }
  if (mine.at("storage_bytes") != theirs.at("storage_bytes")) {
    return "the consolidated storage has " + mine.at("storage_bytes").dump() +
           " bytes here but " + theirs.at("storage_bytes").dump() +
           " on the sender (consolidate both with the same layout)";
  }
  return "";
}

at::Tensor int64_scalar(int64_t value) {
  at::Tensor t = at::empty({1}, at::TensorOptions().dtype(at::kLong));
  t.data_ptr<int64_t>()[0] = value;
  return t;
}

at::Tensor bytes_tensor(const std::string& text) {
  at::Tensor t = at::empty(
      {static_cast<int64_t>(text.size())},
      at::TensorOptions().dtype(at::kByte));
  if (!text.empty()) {
    std::memcpy(t.data_ptr(), text.data(), text.size());
  }
  return t;
}

void send_one(const ProcessGroupPtr& group, at::Tensor t, int dst, int tag) {
  std::vector<at::Tensor> tensors{std::move(t)};
  group->send(tensors, dst, tag)->wait();
}

void recv_one(const ProcessGroupPtr& group, at::Tensor t, int src, int tag) {
  std::vector<at::Tensor> tensors{std::move(t)};
  group->recv(tensors, src, tag)->wait();
}

// A length-prefixed text message with tag kCheckTag.
void send_text(const ProcessGroupPtr& group, const std::string& text, int dst) {
  send_one(
      group, int64_scalar(static_cast<int64_t>(text.size())), dst, kCheckTag);
  if (!text.empty()) {
    send_one(group, bytes_tensor(text), dst, kCheckTag);
  }
}

std::string recv_text(const ProcessGroupPtr& group, int src, const char* what) {
  at::Tensor size = at::empty({1}, at::TensorOptions().dtype(at::kLong));
  recv_one(group, size, src, kCheckTag);
  const int64_t n = size.data_ptr<int64_t>()[0];
  TORCH_CHECK_VALUE(
      n >= 0 && n <= kMaxCheckBytes,
      what,
      ": rank ",
      src,
      " announced a key list of ",
      n,
      " bytes; expected 0 to ",
      kMaxCheckBytes,
      " (is the peer a checked C++ sender?)");
  if (n == 0) {
    return "";
  }
  at::Tensor bytes = at::empty({n}, at::TensorOptions().dtype(at::kByte));
  recv_one(group, bytes, src, kCheckTag);
  return std::string(static_cast<const char*>(bytes.const_data_ptr()), n);
}

// NOTE [The checked handshake]
// The sender opens with one fixed-size message: a magic word and the
// SHA-256 of its key list (keys, dtypes, shapes, storage size). The
// receiver hashes its own list and answers kAgreed when the digests match:
// two small messages and no parsing on the common path. Otherwise it
// answers kSendList, the sender sends the list as JSON, and the receiver
// compares the two entry by entry and answers with the verdict ("" when
// they agree after all): the slow path names the key and both sides'
// values.
constexpr int64_t kCheckMagic = 0x316b636568636474;  // "tdcheck1"
constexpr int64_t kAgreed = 0;
constexpr int64_t kSendList = 1;
constexpr int64_t kHeaderWords = 5;  // the magic, then 32 digest bytes

// The header of a checked transfer of `leaves`.
at::Tensor check_header(const WireLeaves& leaves, int64_t storage_bytes) {
  ::tensordict::detail::Sha256 hash;
  auto put = [&hash](int64_t value) { hash.update(&value, sizeof value); };
  put(static_cast<int64_t>(leaves.tensors.size()));
  put(storage_bytes);
  for (size_t i = 0; i < leaves.tensors.size(); ++i) {
    // The key's names, innermost first, each length-prefixed.
    for (int32_t part = leaves.leaf_part[i]; part >= 0;
         part = leaves.parts[part].parent) {
      const std::string& name = *leaves.parts[part].name;
      put(static_cast<int64_t>(name.size()));
      hash.update(name.data(), name.size());
    }
    const at::Tensor& t = leaves.tensors[i];
    put(-1);
    put(static_cast<int64_t>(t.scalar_type()));
    put(t.dim());
    for (const int64_t size : t.sizes()) {
      put(size);
    }
  }
  at::Tensor header =
      at::empty({kHeaderWords}, at::TensorOptions().dtype(at::kLong));
  auto* words = header.data_ptr<int64_t>();
  words[0] = kCheckMagic;
  const auto digest = hash.digest();
  std::memcpy(words + 1, digest.data(), digest.size());
  return header;
}

// The sender's half of a checked transfer: the header, the answer, and the
// list and verdict if the receiver asks.
void offer_schema(
    const ProcessGroupPtr& group,
    const WireLeaves& leaves,
    int64_t storage_bytes,
    int dst) {
  std::string verdict;
  try {
    send_one(group, check_header(leaves, storage_bytes), dst, kCheckTag);
    at::Tensor answer = at::empty({1}, at::TensorOptions().dtype(at::kLong));
    recv_one(group, answer, dst, kCheckTag);
    const int64_t code = answer.data_ptr<int64_t>()[0];
    if (code == kAgreed) {
      return;
    }
    TORCH_CHECK(
        code == kSendList,
        "the receiver answered ",
        code,
        "; expected ",
        kAgreed,
        " or ",
        kSendList);
    send_text(
        group,
        ::tensordict::detail::dump_json(
            schema_of(leaves, storage_bytes), false, false),
        dst);
    verdict = recv_text(group, dst, "send");
  } catch (const std::exception& e) {
    TORCH_CHECK(
        false,
        "send to rank ",
        dst,
        ": exchanging the key list failed, nothing was sent: ",
        e.what());
  }
  TORCH_CHECK_VALUE(
      verdict.empty(),
      "send to rank ",
      dst,
      ": the receiver refused the dict: ",
      verdict);
}

// The receiver's half: compares, answers, and throws on a mismatch.
void accept_schema(
    const ProcessGroupPtr& group,
    const WireLeaves& leaves,
    int64_t storage_bytes,
    int src) {
  std::string text;
  try {
    at::Tensor header =
        at::empty({kHeaderWords}, at::TensorOptions().dtype(at::kLong));
    recv_one(group, header, src, kCheckTag);
    TORCH_CHECK(
        header.data_ptr<int64_t>()[0] == kCheckMagic,
        "the first message is not a key list header (is the peer a checked "
        "C++ sender?)");
    const at::Tensor mine = check_header(leaves, storage_bytes);
    if (std::memcmp(
            header.const_data_ptr(),
            mine.const_data_ptr(),
            kHeaderWords * sizeof(int64_t)) == 0) {
      send_one(group, int64_scalar(kAgreed), src, kCheckTag);
      return;
    }
    send_one(group, int64_scalar(kSendList), src, kCheckTag);
    text = recv_text(group, src, "recv");
  } catch (const std::exception& e) {
    TORCH_CHECK(
        false,
        "recv from rank ",
        src,
        ": receiving the key list failed, nothing was written: ",
        e.what());
  }
  Json theirs;
  std::string verdict;
  try {
    theirs =
        ::tensordict::detail::parse_meta_json(text, 8, "the sender's key list");
    verdict = compare_schemas(schema_of(leaves, storage_bytes), theirs);
  } catch (const std::exception& e) {
    verdict = std::string("unreadable key list: ") + e.what();
  }
  send_text(group, verdict, src);
  TORCH_CHECK_VALUE(
      verdict.empty(),
      "recv from rank ",
      src,
      ": ",
      verdict,
      "; nothing was written");
}

// Starts sending the leaves; the works hold the (contiguous) tensors.
Works start_sends(
    const ProcessGroupPtr& group,
    const WireLeaves& leaves,
    int dst,
    int64_t& tag,
    bool pseudo_rand) {
  Works works;
  works.reserve(leaves.tensors.size());
  for (const at::Tensor& leaf : leaves.tensors) {
    tag = next_tag(tag, pseudo_rand);
    check_tag(tag, "send");
    std::vector<at::Tensor> tensors{leaf.contiguous()};
    works.push_back(group->send(tensors, dst, static_cast<int>(tag)));
  }
  return works;
}

bool receivable(const at::Tensor& t) {
  return t.is_contiguous() && t.is_cpu();
}

at::Tensor consolidated_storage_of(const TensorDict& td, const char* what) {
  const at::Tensor storage = td.consolidated_storage();
  TORCH_CHECK_VALUE(
      storage.defined(),
      what,
      "(consolidated=true) expects a consolidated dict: call consolidate() "
      "first, on both ranks, so the layouts agree");
  return storage;
}

}  // namespace

WireLeaves wire_leaves(const TensorDict& td, bool sorted) {
  WireLeaves out;
  collect(td, sorted, /*parent=*/-1, out);
  return out;
}

std::string WireLeaves::key(size_t i) const {
  c10::SmallVector<std::string_view, 8> names;
  for (int32_t part = leaf_part.at(i); part >= 0; part = parts[part].parent) {
    names.push_back(*parts[part].name);
  }
  std::reverse(names.begin(), names.end());
  KeyPath path;
  for (const std::string_view name : names) {
    path.push(name);
  }
  return ::tensordict::detail::describe(path);
}

}  // namespace detail

namespace detail {

// numpy's SeedSequence(seed) (pool size 4) and PCG64, as
// `np.random.default_rng(seed).bytes(8)` uses them: the tags Python's
// `_int_generator` chains.
int64_t int_generator(int64_t seed) {
  TORCH_CHECK_VALUE(
      seed >= 0,
      "pseudo_rand: the tag chain starts at init_tag, which must be >= 0 "
      "(numpy seeds are non-negative), got ",
      seed);
  constexpr uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875;
  constexpr uint32_t kInitB = 0x8b51f9dd, kMultB = 0x58f38ded;
  constexpr uint32_t kMixL = 0xca01f9dd, kMixR = 0x4973f715;
  std::vector<uint32_t> entropy;
  auto rest = static_cast<uint64_t>(seed);
  do {
    entropy.push_back(static_cast<uint32_t>(rest));
    rest >>= 32;
  } while (rest != 0);
  uint32_t hash = kInitA;
  auto hashmix = [&hash](uint32_t value) {
    value ^= hash;
    hash *= kMultA;
    value *= hash;
    return value ^ (value >> 16);
  };
  auto mix = [](uint32_t x, uint32_t y) {
    uint32_t r = kMixL * x - kMixR * y;
    return r ^ (r >> 16);
  };
  uint32_t pool[4];
  for (size_t i = 0; i < 4; ++i) {
    pool[i] = hashmix(i < entropy.size() ? entropy[i] : 0);
  }
  for (size_t src = 0; src < 4; ++src) {
    for (size_t dst = 0; dst < 4; ++dst) {
      if (src != dst) {
        pool[dst] = mix(pool[dst], hashmix(pool[src]));
      }
    }
  }
  for (size_t src = 4; src < entropy.size(); ++src) {
    for (size_t dst = 0; dst < 4; ++dst) {
      pool[dst] = mix(pool[dst], hashmix(entropy[src]));
    }
  }
  uint64_t words[4];
  uint32_t hash_b = kInitB;
  for (size_t i = 0; i < 8; ++i) {
    uint32_t v = pool[i % 4] ^ hash_b;
    hash_b *= kMultB;
    v *= hash_b;
    v ^= v >> 16;
    if (i % 2 == 0) {
      words[i / 2] = v;
    } else {
      words[i / 2] |= static_cast<uint64_t>(v) << 32;
    }
  }
  using u128 = unsigned __int128;
  const u128 mult =
      (static_cast<u128>(0x2360ed051fc65da4ULL) << 64) | 0x4385df649fccf645ULL;
  const u128 init_state = (static_cast<u128>(words[0]) << 64) | words[1];
  const u128 init_seq = (static_cast<u128>(words[2]) << 64) | words[3];
  const u128 inc = (init_seq << 1) | 1;
  u128 state = inc;  // 0 * mult + inc
  state += init_state;
  state = state * mult + inc;
  state = state * mult + inc;  // the draw
  const uint64_t x =
      static_cast<uint64_t>(state >> 64) ^ static_cast<uint64_t>(state);
  const unsigned rot = static_cast<unsigned>(state >> 122);
  const uint64_t out = (x >> rot) | (x << ((64 - rot) & 63));
  // Its 8 little-endian bytes read big-endian, modulo 10_000.
  return static_cast<int64_t>(__builtin_bswap64(out) % 10000);
}

}  // namespace detail

namespace detail {
namespace {

// A transfer whose messages are all started: what finishing it needs.
struct Started {
  Works works;
  WireLeaves leaves;               // per leaf: what work i carries
  std::vector<at::Tensor> copies;  // recv: a leaf to refill from `buffers`
  std::vector<at::Tensor> buffers;
  int64_t last_tag = 0;

  // What work i carries, for messages.
  std::string what(size_t i) const {
    return leaves.tensors.empty() ? "the consolidated storage" : leaves.key(i);
  }
};

// Checks, exchanges the key list if asked, and starts every send: the
// messages and their order are Python's, without a round trip per leaf.
Started start_send(
    const TensorDict& td,
    int dst,
    const SendOptions& options,
    const char* what) {
  const ProcessGroupPtr group = group_or_default(options.group());
  check_peer(group, dst, what);
  const bool checked = use_checked(options.checked(), group, dst, what);
  Started out;
  if (options.consolidated()) {
    const TensorDict cons = td.is_consolidated() ? td : td.consolidate();
    const at::Tensor storage = cons.consolidated_storage();
    if (checked) {
      offer_schema(group, wire_leaves(cons), storage.numel(), dst);
    }
    std::vector<at::Tensor> tensors{storage};
    out.works.push_back(group->send(tensors, dst, 0));
    return out;
  }
  out.leaves = wire_leaves(td);
  if (checked) {
    offer_schema(group, out.leaves, 0, dst);
  }
  out.last_tag = options.init_tag() - 1;
  out.works =
      start_sends(group, out.leaves, dst, out.last_tag, options.pseudo_rand());
  return out;
}

// Checks, exchanges the key list if asked, and posts every receive. A leaf
// c10d cannot receive into in place gets a buffer, unless `in_place_only`.
Started start_recv(
    const TensorDict& td,
    int src,
    const RecvOptions& options,
    const char* what,
    bool in_place_only) {
  const ProcessGroupPtr group = group_or_default(options.group());
  check_peer(group, src, what);
  const bool checked = use_checked(options.checked(), group, src, what);
  Started out;
  if (options.consolidated()) {
    const at::Tensor storage = consolidated_storage_of(td, what);
    if (checked) {
      accept_schema(group, wire_leaves(td), storage.numel(), src);
    }
    std::vector<at::Tensor> tensors{storage};
    out.works.push_back(group->recv(tensors, src, 0));
    out.copies.emplace_back();
    out.buffers.push_back(storage);
    return out;
  }
  out.leaves = wire_leaves(td);
  const WireLeaves& leaves = out.leaves;
  for (size_t i = 0; i < leaves.tensors.size(); ++i) {
    TORCH_CHECK_VALUE(
        !in_place_only || receivable(leaves.tensors[i]),
        what,
        ": ",
        leaves.key(i),
        " is not a contiguous CPU tensor, which c10d cannot receive into in "
        "place, and return_premature leaves no time to copy it; make it "
        "contiguous or wait");
  }
  if (checked) {
    accept_schema(group, leaves, 0, src);
  }
  int64_t tag = options.init_tag() - 1;
  for (const at::Tensor& leaf : leaves.tensors) {
    tag = next_tag(tag, options.pseudo_rand());
    check_tag(tag, what);
    const bool direct = receivable(leaf);
    out.buffers.push_back(direct ? leaf : leaf.contiguous().cpu());
    out.copies.push_back(direct ? at::Tensor() : leaf);
    std::vector<at::Tensor> tensors{out.buffers.back()};
    out.works.push_back(group->recv(tensors, src, static_cast<int>(tag)));
  }
  out.last_tag = tag;
  return out;
}

void finish_send(const Started& started, int dst) {
  for (size_t i = 0; i < started.works.size(); ++i) {
    try {
      started.works[i]->wait();
    } catch (const std::exception& e) {
      TORCH_CHECK(
          false,
          "send to rank ",
          dst,
          ": ",
          started.what(i),
          " failed: ",
          e.what());
    }
  }
}

// Waits in order (data arrives in order, so when one fails the later ones
// have not been written) and refills the leaves received into buffers.
void finish_recv(const Started& started, int src) {
  const size_t n = started.works.size();
  for (size_t i = 0; i < n; ++i) {
    try {
      started.works[i]->wait();
    } catch (const std::exception& e) {
      TORCH_CHECK(
          false,
          "recv from rank ",
          src,
          ": ",
          started.what(i),
          " failed after ",
          i,
          " of ",
          n,
          " leaves were received (those are written, this one may be partly "
          "written, the rest keep their values): ",
          e.what());
    }
    if (started.copies[i].defined()) {
      started.copies[i].copy_(started.buffers[i]);
    }
  }
}

}  // namespace
}  // namespace detail

int64_t send(const TensorDict& td, int dst, const SendOptions& options) {
  const detail::Started started = detail::start_send(td, dst, options, "send");
  detail::finish_send(started, dst);
  return started.last_tag;
}

int64_t recv(const TensorDict& td, int src, const RecvOptions& options) {
  const detail::Started started =
      detail::start_recv(td, src, options, "recv", /*in_place_only=*/false);
  detail::finish_recv(started, src);
  return started.last_tag;
}

Works isend(const TensorDict& td, int dst, const SendOptions& options) {
  detail::Started started = detail::start_send(td, dst, options, "isend");
  if (options.return_early()) {
    return std::move(started.works);
  }
  detail::finish_send(started, dst);
  return {};
}

Works irecv(const TensorDict& td, int src, const RecvOptions& options) {
  detail::Started started =
      detail::start_recv(td, src, options, "irecv", options.return_premature());
  if (options.return_premature()) {
    return std::move(started.works);
  }
  detail::finish_recv(started, src);
  return {};
}

}  // namespace dist
TENSORDICT_END_NAMESPACE
