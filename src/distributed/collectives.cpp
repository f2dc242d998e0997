// init_remote/from_remote_init, broadcast, reduce, all_reduce, all_gather
// and gather_and_stack, with Python tensordict 0.15's message sequences.

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "consolidate/layout.h"
#include "distributed/wire.h"
#include "io/pickle.h"

TENSORDICT_BEGIN_NAMESPACE
namespace dist {
namespace detail {
namespace {

// A peer's storage larger than this is refused before it is allocated.
constexpr int64_t kMaxStorageBytes = int64_t{1} << 46;
// gather_and_stack's buffer kinds (Python's _GATHER_*).
constexpr int64_t kGatherNothing = 0, kGatherPickle = 1, kGatherStorage = 2;

at::TensorOptions bytes_options() {
  return at::TensorOptions().dtype(at::kByte);
}

at::Tensor longs(std::vector<int64_t> values) {
  at::Tensor t = at::empty(
      {static_cast<int64_t>(values.size())},
      at::TensorOptions().dtype(at::kLong));
  std::copy(values.begin(), values.end(), t.data_ptr<int64_t>());
  return t;
}

at::Tensor pickle_tensor(const Json& object) {
  const std::string bytes = ::tensordict::detail::pickle_dumps(object);
  at::Tensor t =
      at::empty({static_cast<int64_t>(bytes.size())}, bytes_options());
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

void run(c10::intrusive_ptr<c10d::Work> work) {
  work->wait();
}

void broadcast_tensor(const ProcessGroupPtr& group, at::Tensor t, int src) {
  std::vector<at::Tensor> tensors{std::move(t)};
  c10d::BroadcastOptions options;
  options.rootRank = src;
  run(group->broadcast(tensors, options));
}

std::vector<at::Tensor> all_gather_tensor(
    const ProcessGroupPtr& group, const at::Tensor& t) {
  std::vector<at::Tensor> outputs;
  for (int i = 0; i < group->getSize(); ++i) {
    outputs.push_back(at::empty_like(t));
  }
  std::vector<std::vector<at::Tensor>> output_lists{outputs};
  std::vector<at::Tensor> inputs{t};
  run(group->allgather(output_lists, inputs));
  return output_lists[0];
}

int64_t checked_size(const Json& value, const std::string& what) {
  TORCH_CHECK_VALUE(
      value.is_number_integer() && value.get<int64_t>() >= 0 &&
          value.get<int64_t>() <= kMaxStorageBytes,
      what,
      ": expected a byte count in [0, 2^46], got ",
      value.dump());
  return value.get<int64_t>();
}

// Takes `key` out of the metadata `meta`, or returns null.
Json pop(Json& meta, const char* key) {
  const auto found = meta.find(key);
  if (found == meta.end()) {
    return nullptr;
  }
  Json value = std::move(*found);
  meta.erase(found);
  return value;
}

TensorDict rebuild(
    const at::Tensor& storage, const Json& meta, const std::string& source) {
  return ::tensordict::detail::read_consolidated_parts(
      storage, meta, source, LoadConsolidatedOptions());
}

// The metadata and storage a rank sends, with Python's extra members.
::tensordict::detail::ConsolidatedParts parts_to_send(const TensorDict& td) {
  auto parts = ::tensordict::detail::consolidated_parts(td);
  TORCH_CHECK_VALUE(
      parts.storage.is_cpu(),
      "Gloo sends CPU tensors; the dict is on ",
      parts.storage.device().str());
  parts.metadata["_total_bytes"] = parts.storage.numel();
  return parts;
}

// The leaves as reduce/all_reduce visit them, each with what to copy back
// when the collective ran on a temporary.
struct CollectiveLeaf {
  at::Tensor target;
  at::Tensor buffer;  // what the collective reads and writes
};

std::vector<CollectiveLeaf> collective_leaves(
    const TensorDict& td, bool sorted) {
  std::vector<CollectiveLeaf> out;
  for (at::Tensor& leaf : wire_leaves(td, sorted).tensors) {
    at::Tensor buffer =
        leaf.is_contiguous() && leaf.is_cpu() ? leaf : leaf.contiguous().cpu();
    out.push_back({std::move(leaf), std::move(buffer)});
  }
  return out;
}

// Python's _bucketed_collective: non-contiguous leaves alone and first as
// met, then per dtype (in order of first appearance) buckets of at most
// `bucket_bytes`.
std::vector<std::vector<size_t>> buckets_of(
    const std::vector<CollectiveLeaf>& leaves, int64_t bucket_bytes) {
  std::vector<std::vector<size_t>> buckets;
  std::vector<c10::ScalarType> order;
  std::map<c10::ScalarType, std::vector<size_t>> groups;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const at::Tensor& t = leaves[i].target;
    if (!t.is_contiguous()) {
      buckets.push_back({i});
      continue;
    }
    if (groups.find(t.scalar_type()) == groups.end()) {
      order.push_back(t.scalar_type());
    }
    groups[t.scalar_type()].push_back(i);
  }
  for (const c10::ScalarType dtype : order) {
    std::vector<size_t> bucket;
    int64_t size = 0;
    for (const size_t i : groups[dtype]) {
      const int64_t nbytes = leaves[i].target.nbytes();
      if (!bucket.empty() && size + nbytes > bucket_bytes) {
        buckets.push_back(std::move(bucket));
        bucket.clear();
        size = 0;
      }
      bucket.push_back(i);
      size += nbytes;
    }
    buckets.push_back(std::move(bucket));
  }
  return buckets;
}

// Runs `collective` on every leaf (or bucket) and writes the results back
// into the leaves; `copy_back` is false on ranks whose leaves keep their
// values (reduce's non-destination ranks).
Works run_leaves(
    std::vector<CollectiveLeaf> leaves,
    const CollectiveOptions& options,
    bool copy_back,
    const char* what,
    const std::function<c10::intrusive_ptr<c10d::Work>(at::Tensor&)>&
        collective) {
  struct Job {
    at::Tensor flat;
    std::vector<size_t> members;  // leaves to refill from flat
  };
  std::vector<Job> jobs;
  if (options.bucket_bytes()) {
    for (auto& bucket : buckets_of(leaves, *options.bucket_bytes())) {
      if (bucket.size() == 1) {
        jobs.push_back({leaves[bucket[0]].buffer, bucket});
        continue;
      }
      std::vector<at::Tensor> parts;
      for (const size_t i : bucket) {
        parts.push_back(leaves[i].buffer.reshape(-1));
      }
      jobs.push_back({at::cat(parts), bucket});
    }
  } else {
    for (size_t i = 0; i < leaves.size(); ++i) {
      jobs.push_back({leaves[i].buffer, {i}});
    }
  }
  bool needs_copy = false;
  for (const Job& job : jobs) {
    needs_copy =
        needs_copy || job.members.size() > 1 ||
        !leaves[job.members[0]].buffer.is_same(leaves[job.members[0]].target);
  }
  TORCH_CHECK_VALUE(
      !(options.async_op() && options.return_premature() && needs_copy &&
        copy_back),
      what,
      "(return_premature): buckets and non-contiguous leaves are written "
      "back after the collective, which the caller would not wait for; "
      "drop bucket_bytes or make the leaves contiguous");
  Works works;
  for (Job& job : jobs) {
    works.push_back(collective(job.flat));
    if (!options.async_op()) {
      wait_all({works.back()}, what);
    }
  }
  if (options.async_op() && options.return_premature()) {
    return works;
  }
  if (options.async_op()) {
    wait_all(works, what);
  }
  if (copy_back && needs_copy) {
    for (const Job& job : jobs) {
      int64_t offset = 0;
      for (const size_t i : job.members) {
        CollectiveLeaf& leaf = leaves[i];
        const int64_t n = leaf.target.numel();
        const at::Tensor chunk =
            job.members.size() == 1
                ? job.flat
                : job.flat.narrow(0, offset, n).view(leaf.target.sizes());
        offset += n;
        if (!chunk.is_same(leaf.target)) {
          leaf.target.copy_(chunk);
        }
      }
    }
  }
  return {};
}

}  // namespace

void send_object(const Json& object, int dst, const ProcessGroupPtr& group) {
  const at::Tensor bytes = pickle_tensor(object);
  std::vector<at::Tensor> size{longs({bytes.numel()})};
  run(group->send(size, dst, 0));
  std::vector<at::Tensor> data{bytes};
  run(group->send(data, dst, 0));
}

Json read_pickle(
    const at::Tensor& bytes, int64_t size, const std::string& what) {
  TORCH_CHECK_VALUE(
      size >= 0 && size <= bytes.numel(),
      what,
      ": a pickle of ",
      size,
      " bytes announced in a buffer of ",
      bytes.numel());
  return ::tensordict::detail::pickle_loads(
      std::string_view(static_cast<const char*>(bytes.const_data_ptr()), size),
      what);
}

Json recv_object(
    int src, const ProcessGroupPtr& group, const std::string& what) {
  std::vector<at::Tensor> size{
      at::empty({1}, at::TensorOptions().dtype(at::kLong))};
  run(group->recv(size, src, 0));
  const int64_t n = size[0].data_ptr<int64_t>()[0];
  TORCH_CHECK_VALUE(
      n >= 0 && n <= (int64_t{1} << 31),
      what,
      ": rank ",
      src,
      " announced an object of ",
      n,
      " bytes; expected 0 to 2^31");
  std::vector<at::Tensor> data{at::empty({n}, bytes_options())};
  run(group->recv(data, src, 0));
  return read_pickle(data[0], n, what);
}

Json broadcast_object(
    const Json& object, int src, const ProcessGroupPtr& group) {
  const bool root = group->getRank() == src;
  at::Tensor bytes = root ? pickle_tensor(object) : at::Tensor();
  at::Tensor size = longs({root ? bytes.numel() : 0});
  broadcast_tensor(group, size, src);
  const int64_t n = size.data_ptr<int64_t>()[0];
  TORCH_CHECK_VALUE(
      n >= 0 && n <= (int64_t{1} << 31),
      "broadcast: rank ",
      src,
      " announced an object of ",
      n,
      " bytes; expected 0 to 2^31");
  if (!root) {
    bytes = at::empty({n}, bytes_options());
  }
  broadcast_tensor(group, bytes, src);
  return root ? object
              : read_pickle(
                    bytes,
                    n,
                    "the metadata broadcast by rank " + std::to_string(src));
}

std::vector<Json> all_gather_object(
    const Json& object, const ProcessGroupPtr& group) {
  const at::Tensor bytes = pickle_tensor(object);
  const std::vector<at::Tensor> sizes =
      all_gather_tensor(group, longs({bytes.numel()}));
  int64_t max_size = 0;
  for (const at::Tensor& s : sizes) {
    max_size = std::max(max_size, s.data_ptr<int64_t>()[0]);
  }
  TORCH_CHECK_VALUE(
      max_size <= (int64_t{1} << 31),
      "all_gather: a rank announced an object of ",
      max_size,
      " bytes; expected at most 2^31");
  // Python resizes its pickle in place: the padding is whatever follows.
  at::Tensor padded = at::zeros({max_size}, bytes_options());
  padded.narrow(0, 0, bytes.numel()).copy_(bytes);
  const std::vector<at::Tensor> gathered = all_gather_tensor(group, padded);
  std::vector<Json> out;
  for (size_t i = 0; i < gathered.size(); ++i) {
    out.push_back(read_pickle(
        gathered[i],
        sizes[i].data_ptr<int64_t>()[0],
        "the metadata gathered from rank " + std::to_string(i)));
  }
  return out;
}

}  // namespace detail

void init_remote(
    const TensorDict& td, int dst, const CollectiveOptions& options) {
  const ProcessGroupPtr group = detail::group_or_default(options.group());
  if (options.use_broadcast()) {
    (void)broadcast(td, group->getRank(), options);
    return;
  }
  detail::check_peer(group, dst, "init_remote");
  const auto parts = detail::parts_to_send(td);
  detail::send_object(parts.metadata, dst, group);
  std::vector<at::Tensor> storage{parts.storage};
  detail::run(group->send(storage, dst, 0));
}

TensorDict from_remote_init(int src, const CollectiveOptions& options) {
  const ProcessGroupPtr group = detail::group_or_default(options.group());
  if (options.use_broadcast()) {
    return broadcast(TensorDict(), src, options);
  }
  detail::check_peer(group, src, "from_remote_init");
  const std::string source = "the metadata from rank " + std::to_string(src);
  Json meta = detail::recv_object(src, group, source);
  TORCH_CHECK_VALUE(
      meta.is_object(), source, ": expected a dict, got ", meta.type_name());
  const int64_t total = detail::checked_size(
      detail::pop(meta, "_total_bytes"), source + " (_total_bytes)");
  (void)detail::pop(meta, "_tensorclass_type");
  std::vector<at::Tensor> storage{at::empty({total}, detail::bytes_options())};
  detail::run(group->recv(storage, src, 0));
  return detail::rebuild(storage[0], meta, source);
}

TensorDict broadcast(
    const TensorDict& td, int src, const CollectiveOptions& options) {
  const ProcessGroupPtr group = detail::group_or_default(options.group());
  detail::check_rank(group, src, "broadcast");
  if (group->getRank() == src) {
    auto parts = detail::parts_to_send(td);
    const Json sent_meta = parts.metadata;
    parts.metadata["_storage_device"] = "cpu";
    (void)detail::broadcast_object(parts.metadata, src, group);
    detail::broadcast_tensor(group, parts.storage, src);
    if (td.is_consolidated() &&
        td.consolidated_storage().is_same(parts.storage)) {
      return td;
    }
    Json meta = sent_meta;
    (void)detail::pop(meta, "_total_bytes");
    return detail::rebuild(parts.storage, meta, "the broadcast dict");
  }
  const std::string source =
      "the metadata broadcast by rank " + std::to_string(src);
  Json meta = detail::broadcast_object(Json(), src, group);
  TORCH_CHECK_VALUE(
      meta.is_object(), source, ": expected a dict, got ", meta.type_name());
  const int64_t total = detail::checked_size(
      detail::pop(meta, "_total_bytes"), source + " (_total_bytes)");
  (void)detail::pop(meta, "_storage_device");
  (void)detail::pop(meta, "_tensorclass_type");
  at::Tensor storage = at::empty({total}, detail::bytes_options());
  detail::broadcast_tensor(group, storage, src);
  return detail::rebuild(storage, meta, source);
}

Works reduce(const TensorDict& td, int dst, const CollectiveOptions& options) {
  const ProcessGroupPtr group = detail::group_or_default(options.group());
  detail::check_rank(group, dst, "reduce");
  c10d::ReduceOptions reduce_options;
  reduce_options.reduceOp = c10d::ReduceOp(options.op());
  reduce_options.rootRank = dst;
  return detail::run_leaves(
      detail::collective_leaves(td, /*sorted=*/true),
      options,
      /*copy_back=*/group->getRank() == dst,
      "reduce",
      [&](at::Tensor& flat) {
        std::vector<at::Tensor> tensors{flat};
        return group->reduce(tensors, reduce_options);
      });
}

Works all_reduce(const TensorDict& td, const CollectiveOptions& options) {
  const ProcessGroupPtr group = detail::group_or_default(options.group());
  c10d::AllreduceOptions reduce_options;
  reduce_options.reduceOp = c10d::ReduceOp(options.op());
  // Python walks all_reduce's leaves with _fast_apply: insertion order.
  return detail::run_leaves(
      detail::collective_leaves(td, /*sorted=*/false),
      options,
      /*copy_back=*/true,
      "all_reduce",
      [&](at::Tensor& flat) {
        std::vector<at::Tensor> tensors{flat};
        return group->allreduce(tensors, reduce_options);
      });
}

std::vector<TensorDict> all_gather(
    const TensorDict& td, const CollectiveOptions& options) {
  const ProcessGroupPtr group = detail::group_or_default(options.group());
  const auto parts = detail::parts_to_send(td);
  std::vector<Json> metas = detail::all_gather_object(parts.metadata, group);
  int64_t max_size = 0;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < metas.size(); ++i) {
    TORCH_CHECK_VALUE(
        metas[i].is_object(),
        "all_gather: the metadata of rank ",
        i,
        " is not a dict");
    sizes.push_back(detail::checked_size(
        detail::pop(metas[i], "_total_bytes"),
        "all_gather: the metadata of rank " + std::to_string(i)));
    max_size = std::max(max_size, sizes.back());
  }
  at::Tensor padded = at::zeros({max_size}, detail::bytes_options());
  padded.narrow(0, 0, parts.storage.numel()).copy_(parts.storage);
  const std::vector<at::Tensor> gathered =
      detail::all_gather_tensor(group, padded);
  std::vector<TensorDict> out;
  for (size_t i = 0; i < gathered.size(); ++i) {
    out.push_back(detail::rebuild(
        gathered[i].narrow(0, 0, sizes[i]),
        metas[i],
        "the dict gathered from rank " + std::to_string(i)));
  }
  return out;
}

std::optional<TensorDict> gather_and_stack(
    const TensorDict& td, int dst, const CollectiveOptions& options) {
  const ProcessGroupPtr group = detail::group_or_default(options.group());
  const int rank = group->getRank();
  const int world = group->getSize();
  detail::check_rank(group, dst, "gather_and_stack");
  // Python's Gloo form: every rank's [kind, storage bytes, buffer bytes],
  // then the buffers (storage + pickled metadata) padded to the largest.
  at::Tensor storage, pickle;
  int64_t kind = detail::kGatherNothing;
  if (rank != dst) {
    auto parts = ::tensordict::detail::consolidated_parts(td);
    TORCH_CHECK_VALUE(
        parts.storage.is_cpu(),
        "gather_and_stack: Gloo sends CPU tensors; the dict is on ",
        parts.storage.device().str());
    storage = parts.storage;
    pickle = detail::pickle_tensor(parts.metadata);
    kind = detail::kGatherStorage;
  }
  const int64_t size = rank != dst ? storage.numel() + pickle.numel() : 0;
  const at::Tensor header =
      detail::longs({kind, rank != dst ? storage.numel() : 0, size});
  const std::vector<at::Tensor> headers =
      detail::all_gather_tensor(group, header);
  int64_t max_size = 0;
  for (const at::Tensor& h : headers) {
    max_size = std::max(max_size, h.data_ptr<int64_t>()[2]);
  }
  TORCH_CHECK_VALUE(
      max_size >= 0 && max_size <= detail::kMaxStorageBytes,
      "gather_and_stack: a rank announced a buffer of ",
      max_size,
      " bytes");
  at::Tensor buffer = at::zeros({max_size}, detail::bytes_options());
  if (rank != dst) {
    buffer.narrow(0, 0, storage.numel()).copy_(storage);
    buffer.narrow(0, storage.numel(), pickle.numel()).copy_(pickle);
  }
  std::vector<std::vector<at::Tensor>> outputs;
  if (rank == dst) {
    outputs.emplace_back();
    for (int i = 0; i < world; ++i) {
      outputs[0].push_back(at::empty_like(buffer));
    }
  }
  std::vector<at::Tensor> inputs{buffer};
  c10d::GatherOptions gather_options;
  gather_options.rootRank = dst;
  detail::run(group->gather(outputs, inputs, gather_options));
  if (rank != dst) {
    return std::nullopt;
  }
  std::vector<TensorDict> gathered;
  for (int i = 0; i < world; ++i) {
    if (i == dst) {
      continue;
    }
    const int64_t* h = headers[i].data_ptr<int64_t>();
    const std::string source =
        "the dict gathered from rank " + std::to_string(i);
    TORCH_CHECK_VALUE(
        h[0] != detail::kGatherPickle,
        source,
        " is a pickled Python object (its leaves are not on the CPU, require "
        "grad or are not plain tensors), which C++ cannot read");
    TORCH_CHECK_VALUE(
        h[0] == detail::kGatherStorage && h[1] >= 0 && h[1] <= h[2] &&
            h[2] <= max_size,
        source,
        ": an inconsistent header [kind ",
        h[0],
        ", storage ",
        h[1],
        ", size ",
        h[2],
        "]");
    const at::Tensor& received = outputs[0][i];
    const Json meta = detail::read_pickle(
        received.narrow(0, h[1], h[2] - h[1]), h[2] - h[1], source);
    gathered.push_back(
        detail::rebuild(received.narrow(0, 0, h[1]), meta, source));
  }
  TensorDict out = td;
  out.update(stack(gathered, 0), UpdateOptions().inplace(true));
  return out;
}

}  // namespace dist
TENSORDICT_END_NAMESPACE
