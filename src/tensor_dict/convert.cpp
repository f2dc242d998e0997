// Device, dtype and memory ops. Out-of-place ones are one call to the
// engine (detail::map_entries); in-place ones walk the tensors.

#include <ATen/Context.h>
#include <ATen/MapAllocator.h>
#include <c10/core/CPUAllocator.h>

#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/walk.h"
#include "tensordict/errors.h"
#include "util/python_spelling.h"
#include "util/shared_memory.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

using detail::Node;
using detail::TensorDictImpl;

// Moves one CPU storage into a new shared-memory mapping in place, as
// torch's `UntypedStorage._share_fd_cpu_` does: every tensor viewing the
// storage sees the new memory, since the StorageImpl itself is kept.
void move_storage_to_shared_memory(const c10::Storage& storage) {
  if (detail::storage_is_shared(storage)) {
    return;
  }
  const size_t nbytes = storage.nbytes();
  // The flags of torch's "file_descriptor" sharing strategy: a fresh
  // process-wide name, created exclusively and unlinked at once (so nothing
  // leaks in /dev/shm), with the fd kept for handing to other processes.
  const int flags = at::ALLOCATOR_MAPPED_SHAREDMEM |
                    at::ALLOCATOR_MAPPED_EXCLUSIVE |
                    at::ALLOCATOR_MAPPED_KEEPFD | at::ALLOCATOR_MAPPED_UNLINK;
  at::DataPtr shared = at::MapAllocator::makeDataPtr(
      at::NewProcessWideShmHandle(), flags, nbytes, nullptr);
  if (nbytes > 0) {
    std::memcpy(shared.get(), storage.data(), nbytes);
  }
  storage.set_data_ptr_noswap(std::move(shared));
}

// Python's `repr` of a list of nested keys: ['a', ('n', 'b')].
std::string keys_repr(const std::vector<NestedKey>& keys) {
  return "[" +
         detail::join_spelled(
             keys, [](const NestedKey& key) { return key.to_string(); }) +
         "]";
}

// True when `value` broadcasts to `dest` (torch's copy_ rule).
bool broadcasts_to(c10::IntArrayRef value, c10::IntArrayRef dest) {
  if (value.size() > dest.size()) {
    return false;
  }
  for (size_t i = 0; i < value.size(); ++i) {
    const int64_t s = value[value.size() - 1 - i];
    if (s != 1 && s != dest[dest.size() - 1 - i]) {
      return false;
    }
  }
  return true;
}

// One planned write of copy_: a tensor copy, or a non-tensor replacement.
struct PlannedCopy {
  at::Tensor dest;
  at::Tensor src;
  TensorDictImpl* parent = nullptr;  // for non-tensor values
  std::string key;
  std::optional<Value> value;
};

// Collects the keys present on one side only, at every level.
void diff_keys(
    const TensorDictImpl& dst,
    const TensorDictImpl& src,
    detail::KeyPath& path,
    std::vector<NestedKey>& only_dst,
    std::vector<NestedKey>& only_src) {
  for (const auto& node : dst.nodes()) {
    detail::PathPart part(path, node->key);
    const Node* other = src.find(node->key);
    if (other == nullptr) {
      only_dst.push_back(path.key());
    } else if (node->value.is_tensordict() && other->value.is_tensordict()) {
      diff_keys(
          *node->value.tensordict().unsafeGetImpl(),
          *other->value.tensordict().unsafeGetImpl(),
          path,
          only_dst,
          only_src);
    }
  }
  for (const auto& node : src.nodes()) {
    if (dst.find(node->key) == nullptr) {
      detail::PathPart part(path, node->key);
      only_src.push_back(path.key());
    }
  }
}

// Checks every pair of entries and plans the writes; writes nothing. The
// key sets are known to agree (diff_keys).
void plan_copy(
    TensorDictImpl& dst,
    const TensorDictImpl& src,
    detail::KeyPath& path,
    bool non_blocking,
    std::vector<PlannedCopy>& plan) {
  const TensorDictImpl* dicts[] = {&dst, &src};
  const detail::ZipOptions options{"copy", detail::ZipKeys::kFirst};
  detail::zip_level(dicts, path, options, [&](const Node& node, auto values) {
    const Value& d = *values[0];
    const Value& s = *values[1];
    if (d.is_tensor()) {
      TORCH_CHECK(
          broadcasts_to(s.tensor().sizes(), d.tensor().sizes()),
          "copy_() cannot copy the value of shape ",
          detail::size_repr(s.tensor().sizes()),
          " under the key ",
          path.to_string(),
          " into the entry of shape ",
          detail::size_repr(d.tensor().sizes()));
      plan.push_back({d.tensor(), s.tensor(), nullptr, {}, std::nullopt});
    } else if (d.is_tensordict()) {
      plan_copy(
          *d.tensordict().unsafeGetImpl(),
          *s.tensordict().unsafeGetImpl(),
          path,
          non_blocking,
          plan);
    } else if (d.is_lazy_stack()) {
      const LazyStackedTensorDict& ds = d.lazy_stack();
      const LazyStackedTensorDict& ss = s.lazy_stack();
      detail::check_same_stacking(ds, ss, path, "copy");
      for (size_t i = 0; i < ds.tensordicts().size(); ++i) {
        plan_copy(
            *ds.tensordicts()[i].unsafeGetImpl(),
            *ss.tensordicts()[i].unsafeGetImpl(),
            path,
            non_blocking,
            plan);
      }
    } else {
      plan.push_back(
          {{},
           {},
           &dst,
           node.key,
           detail::validate_value(dst, s, path.key(), non_blocking)});
    }
  });
}

}  // namespace

TensorDict TensorDict::to(c10::ScalarType dtype) const {
  return detail::map_entries(
      *this, [&](const at::Tensor& t) { return t.to(dtype); });
}

TensorDict TensorDict::to(
    const at::TensorOptions& options, bool non_blocking) const {
  std::optional<c10::Device> device;
  if (options.has_device()) {
    device = options.device();
  }
  return detail::map_entries(
      *this,
      [&](const at::Tensor& t) { return t.to(options, non_blocking); },
      device);
}

TensorDict TensorDict::cpu() const {
  return to(c10::Device(c10::kCPU));
}

TensorDict TensorDict::cuda(
    std::optional<c10::DeviceIndex> index, bool non_blocking) const {
  // Checked before any tensor moves, so an empty dict reports it too.
  TORCH_CHECK(
      at::hasCUDA(),
      "cuda: CUDA is not available (this PyTorch was built without CUDA, or "
      "it sees no CUDA device); move to another device with to(device)");
  const auto count = static_cast<int64_t>(at::getNumGPUs());
  const c10::DeviceIndex device =
      index ? *index : at::detail::getCUDAHooks().current_device();
  TORCH_CHECK_INDEX(
      device >= 0 && device < count,
      "cuda: device index ",
      static_cast<int64_t>(device),
      " is out of range: ",
      count,
      " CUDA device(s) are visible");
  return to(c10::Device(c10::kCUDA, device), non_blocking);
}

TensorDict TensorDict::pin_memory() const {
  return detail::map_entries(
      *this, [](const at::Tensor& t) { return t.pin_memory(); });
}

TensorDict& TensorDict::share_memory_() {
  if (impl_->device && impl_->device->is_cuda()) {
    return *this;  // CUDA tensors are shared already (Python's rule)
  }
  auto share = [](const at::Tensor& t) {
    if (t.device().is_cpu() && t.has_storage()) {
      move_storage_to_shared_memory(t.storage());
    }
  };
  detail::for_each_tensor(*impl_, share);
  detail::for_each_dict(
      *impl_, [](TensorDictImpl& dict) { dict.shared = true; });
  lock_();
  return *this;
}

bool TensorDict::is_shared() const noexcept {
  if (impl_->device && impl_->device->is_cuda()) {
    return true;
  }
  return impl_->shared;
}

TensorDict TensorDict::detach() const {
  return detail::map_entries(
      *this, [](const at::Tensor& t) { return t.detach(); });
}

TensorDict& TensorDict::detach_() {
  auto detach = [](const at::Tensor& t) { t.detach_(); };
  detail::for_each_tensor(*impl_, detach);
  return *this;
}

TensorDict& TensorDict::requires_grad_(bool requires_grad) {
  auto set = [&](const at::Tensor& t) { t.requires_grad_(requires_grad); };
  detail::for_each_tensor(*impl_, set);
  return *this;
}

TensorDict TensorDict::contiguous() const {
  return detail::map_entries(
      *this, [](const at::Tensor& t) { return t.contiguous(); });
}

bool TensorDict::is_contiguous() const {
  return detail::all_tensors(
      *this, [](const at::Tensor& t) { return t.is_contiguous(); });
}

TensorDict& TensorDict::zero_() {
  auto zero = [](const at::Tensor& t) { t.zero_(); };
  detail::for_each_tensor(*impl_, zero);
  return *this;
}

TensorDict& TensorDict::fill_(const NestedKey& key, const c10::Scalar& value) {
  const Value entry = (*this)[key];
  auto fill = [&](const at::Tensor& t) { t.fill_(value); };
  if (entry.is_tensor()) {
    fill(entry.tensor());
  } else if (entry.is_tensordict()) {
    detail::for_each_tensor(*entry.tensordict().unsafeGetImpl(), fill);
  } else if (entry.is_lazy_stack()) {
    for (const TensorDict& element : entry.lazy_stack().tensordicts()) {
      detail::for_each_tensor(*element.unsafeGetImpl(), fill);
    }
  } else {
    TORCH_CHECK_TYPE(
        false,
        "fill_() expects a Tensor or a TensorDict at ",
        key.to_string(),
        ", got a ",
        entry.type_name());
  }
  return *this;
}

TensorDict& TensorDict::copy_(const TensorDict& src, bool non_blocking) {
  std::vector<NestedKey> only_dst;
  std::vector<NestedKey> only_src;
  detail::KeyPath path;
  diff_keys(*impl_, *src.impl_, path, only_dst, only_src);
  TENSORDICT_CHECK_KEY(
      only_dst.empty() && only_src.empty(),
      "copy_() needs the same keys in both tensordicts, but ",
      only_dst.empty() ? "" : "the source lacks " + keys_repr(only_dst),
      only_dst.empty() || only_src.empty() ? "" : " and ",
      only_src.empty() ? "" : "the destination lacks " + keys_repr(only_src));
  std::vector<PlannedCopy> plan;
  plan_copy(*impl_, *src.impl_, path, non_blocking, plan);
  for (PlannedCopy& step : plan) {
    if (step.dest.defined()) {
      step.dest.copy_(step.src, non_blocking);
    } else {
      // Non-tensor values have no storage to write into: replacing them is
      // the in-place write (as `set(..., inplace)` does on locked dicts).
      step.parent->find(step.key)->value = std::move(*step.value);
    }
  }
  return *this;
}

TensorDict TensorDict::float32() const {
  return to(c10::kFloat);
}

TensorDict TensorDict::float64() const {
  return to(c10::kDouble);
}

TensorDict TensorDict::half() const {
  return to(c10::kHalf);
}

TensorDict TensorDict::bfloat16() const {
  return to(c10::kBFloat16);
}

TensorDict TensorDict::int32() const {
  return to(c10::kInt);
}

TensorDict TensorDict::boolean() const {
  return to(c10::kBool);
}

TENSORDICT_END_NAMESPACE
