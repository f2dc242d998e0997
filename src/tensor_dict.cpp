// The TensorDict core: storage, lookup, validation, set/get, batch size,
// names, locking. Key-set operations live in tensor_dict/keys.cpp, building
// in tensor_dict/construct.cpp, printing in tensor_dict/repr.cpp.

#include "tensordict/tensor_dict.h"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <unordered_set>

#include "detail/format.h"
#include "detail/tensor_dict_impl.h"
#include "detail/walk.h"
#include "tensordict/errors.h"
#include "tensordict/json.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

const char* const kLockError =
    "Cannot modify locked TensorDict. For in-place modification, consider "
    "using the `set_()` method and make sure the key is present.";

namespace {
size_t hash_key(std::string_view key) noexcept {
  return std::hash<std::string_view>{}(key);
}
} // namespace

Node* TensorDictImpl::find(std::string_view key) const noexcept {
  if (slots_.empty()) {
    return nullptr;
  }
  const size_t hash = hash_key(key);
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const int32_t pos = slots_[i];
    if (pos < 0) {
      return nullptr;
    }
    const Node& node = nodes_[pos];
    if (node.hash == hash && node.key == key) {
      return const_cast<Node*>(&node);
    }
  }
}

void TensorDictImpl::rebuild_slots(size_t capacity) {
  slots_.assign(capacity, -1);
  const size_t mask = capacity - 1;
  for (size_t pos = 0; pos < nodes_.size(); ++pos) {
    size_t i = nodes_[pos].hash & mask;
    while (slots_[i] >= 0) {
      i = (i + 1) & mask;
    }
    slots_[i] = static_cast<int32_t>(pos);
  }
}

void TensorDictImpl::reserve(size_t n) {
  nodes_.reserve(n);
  size_t capacity = 8;
  while (capacity < 2 * n) {
    capacity *= 2;
  }
  if (capacity > slots_.size()) {
    rebuild_slots(capacity);
  }
}

Node& TensorDictImpl::append(std::string key, Value value) {
  const size_t hash = hash_key(key);
  nodes_.push_back(Node{std::move(key), std::move(value), hash});
  if (2 * nodes_.size() > slots_.size()) {
    rebuild_slots(std::max<size_t>(8, 2 * slots_.size()));
    return nodes_.back();
  }
  const size_t mask = slots_.size() - 1;
  size_t i = hash & mask;
  while (slots_[i] >= 0) {
    i = (i + 1) & mask;
  }
  slots_[i] = static_cast<int32_t>(nodes_.size() - 1);
  return nodes_.back();
}

Value TensorDictImpl::erase(std::string_view key) {
  Node* node = find(key);
  TORCH_INTERNAL_ASSERT(node != nullptr);
  Value value = std::move(node->value);
  nodes_.erase(nodes_.begin() + (node - nodes_.data()));
  // Positions after the erased node shifted: re-index (erasing is rare).
  rebuild_slots(slots_.size());
  return value;
}

std::string TensorDictImpl::sorted_keys_repr() const {
  std::vector<std::string_view> keys;
  keys.reserve(nodes_.size());
  for (const auto& node : nodes_) {
    keys.emplace_back(node.key);
  }
  std::sort(keys.begin(), keys.end());
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i > 0) {
      out += ", ";
    }
    out += python_repr(keys[i]);
  }
  out += "]";
  return out;
}

TensorDict make_tensordict(
    std::vector<int64_t> batch_size,
    std::optional<c10::Device> device,
    DimNames names) {
  auto impl = c10::make_intrusive<TensorDictImpl>();
  impl->batch_size = std::move(batch_size);
  impl->device = device;
  impl->names = std::move(names);
  return TensorDict(std::move(impl));
}

TensorDict empty_like(const TensorDict& td) {
  const TensorDictImpl& impl = *td.unsafeGetImpl();
  return make_tensordict(impl.batch_size, impl.device, impl.names);
}

void throw_missing_key(
    const TensorDictImpl& impl,
    std::string_view part,
    const NestedKey& key) {
  std::string msg = c10::str(
      "key \"",
      part,
      "\" not found in TensorDict with keys ",
      impl.sorted_keys_repr());
  if (key.size() > 1) {
    msg += c10::str(" (while looking up ", key.to_string(), ")");
  }
  throw KeyError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, msg);
}

namespace {

[[noreturn]] void throw_through_leaf(
    const Node& node,
    const NestedKey& key,
    size_t depth) {
  TENSORDICT_CHECK_KEY(
      false,
      key.prefix(depth + 1).to_string(),
      " is a ",
      node.value.type_name(),
      ", not a tensordict, so it has no entry ",
      python_repr(key[depth + 1]),
      ".");
  TORCH_INTERNAL_ASSERT(false);
}

// Walks the first size()-1 parts. `create` makes missing levels (as empty
// dicts shaped like their parent); otherwise a missing level throws, or
// returns null with `nothrow`.
TensorDictImpl* walk_parents(
    const TensorDict& root,
    const NestedKey& key,
    bool create,
    bool nothrow) {
  TensorDictImpl* impl = root.unsafeGetImpl();
  for (size_t depth = 0; depth + 1 < key.size(); ++depth) {
    Node* node = impl->find(key[depth]);
    if (node == nullptr) {
      if (nothrow) {
        return nullptr;
      }
      if (!create) {
        throw_missing_key(*impl, key[depth], key);
      }
      check_unlocked(*impl);
      TensorDict child =
          make_tensordict(impl->batch_size, impl->device, impl->names);
      node = &impl->append(std::string(key[depth]), Value(std::move(child)));
    }
    if (!node->value.is_tensordict()) {
      if (nothrow) {
        return nullptr;
      }
      throw_through_leaf(*node, key, depth);
    }
    impl = node->value.tensordict().unsafeGetImpl();
  }
  return impl;
}

// A dict may not hold itself, directly or through its nested dicts.
bool holds(const TensorDictImpl& haystack, const TensorDictImpl* needle) {
  if (&haystack == needle) {
    return true;
  }
  for (const auto& node : haystack.nodes()) {
    if (node->value.is_tensordict() &&
        holds(*node->value.tensordict().unsafeGetImpl(), needle)) {
      return true;
    }
  }
  return false;
}

bool starts_with(c10::IntArrayRef shape, c10::IntArrayRef prefix) {
  return shape.size() >= prefix.size() &&
      std::equal(prefix.begin(), prefix.end(), shape.begin());
}

[[noreturn]] void throw_batch_mismatch(
    c10::IntArrayRef batch_size,
    c10::IntArrayRef shape,
    const NestedKey& key) {
  TORCH_CHECK(
      false,
      "batch dimension mismatch, got self.batch_size=",
      size_repr(batch_size),
      " and value.shape=",
      size_repr(shape),
      " for key ",
      key.to_string(),
      ". The leading dimensions of a value must match the batch size.");
  TORCH_INTERNAL_ASSERT(false);
}

// Gives a nested dict the parent's names on the shared dims.
void propagate_names(TensorDictImpl& child, const DimNames& names) {
  if (names.empty() && child.names.empty()) {
    return;
  }
  DimNames merged(child.batch_size.size());
  for (size_t i = 0; i < merged.size(); ++i) {
    if (i < names.size()) {
      merged[i] = names[i];
    } else if (i < child.names.size()) {
      merged[i] = child.names[i];
    }
  }
  if (std::all_of(merged.begin(), merged.end(), [](const auto& n) {
        return !n.has_value();
      })) {
    merged.clear();
  }
  child.names = std::move(merged);
  for (const auto& node : child.nodes()) {
    if (node->value.is_tensordict()) {
      propagate_names(*node->value.tensordict().unsafeGetImpl(), child.names);
    }
  }
}

void check_names(const DimNames& names, size_t batch_dims) {
  if (names.empty()) {
    return;
  }
  std::vector<std::string> given;
  for (const auto& name : names) {
    given.push_back(name ? python_repr(*name) : "None");
  }
  TORCH_CHECK_VALUE(
      names.size() == batch_dims,
      "the length of the dimension names must equate the tensordict "
      "batch_dims attribute. Got ",
      names_repr(names),
      " for batch_dims ",
      batch_dims,
      ".");
  std::unordered_set<std::string_view> seen;
  for (const auto& name : names) {
    TORCH_CHECK_VALUE(
        !name || seen.insert(*name).second,
        "Some dimension names are non-unique: ",
        names_repr(names),
        ".");
  }
}

bool no_names(const DimNames& names) {
  return std::all_of(
      names.begin(), names.end(), [](const auto& n) { return !n; });
}

} // namespace

TensorDictImpl& deepest_existing(const TensorDict& root, const NestedKey& key) {
  TensorDictImpl* impl = root.unsafeGetImpl();
  for (size_t depth = 0; depth + 1 < key.size(); ++depth) {
    Node* node = impl->find(key[depth]);
    if (node == nullptr) {
      return *impl;
    }
    if (!node->value.is_tensordict()) {
      throw_through_leaf(*node, key, depth);
    }
    impl = node->value.tensordict().unsafeGetImpl();
  }
  return *impl;
}

TensorDictImpl& resolve_parent(const TensorDict& root, const NestedKey& key) {
  return *walk_parents(root, key, /*create=*/false, /*nothrow=*/false);
}

TensorDictImpl* find_parent(const TensorDict& root, const NestedKey& key) noexcept {
  return walk_parents(root, key, /*create=*/false, /*nothrow=*/true);
}

void check_unlocked(const TensorDictImpl& impl) {
  TORCH_CHECK(!impl.locked, kLockError);
}

Value validate_value(
    const TensorDictImpl& impl,
    const Value& value,
    const NestedKey& key,
    bool non_blocking) {
  switch (value.kind()) {
    case Value::Kind::kTensor: {
      const at::Tensor& t = value.tensor();
      if (!starts_with(t.sizes(), impl.batch_size)) {
        throw_batch_mismatch(impl.batch_size, t.sizes(), key);
      }
      if (impl.device && t.device() != *impl.device) {
        return Value(t.to(*impl.device, non_blocking));
      }
      return value;
    }
    case Value::Kind::kTensorDict: {
      const TensorDict& td = value.tensordict();
      if (!starts_with(td.batch_size(), impl.batch_size)) {
        throw_batch_mismatch(impl.batch_size, td.batch_size(), key);
      }
      TORCH_CHECK_VALUE(
          !holds(*td.unsafeGetImpl(), &impl),
          "cannot set ",
          key.to_string(),
          ": a TensorDict cannot hold itself");
      TensorDict stored = td;
      if (impl.device && td.device() != impl.device) {
        stored = td.to(*impl.device, non_blocking);
      }
      if (!impl.names.empty()) {
        propagate_names(*stored.unsafeGetImpl(), impl.names);
      }
      return Value(std::move(stored));
    }
    case Value::Kind::kNonTensorData: {
      NonTensorData data = value.non_tensor_data();
      if (data.batch_size().empty()) {
        data.set_batch_size(impl.batch_size);
      } else if (!starts_with(data.batch_size(), impl.batch_size)) {
        throw_batch_mismatch(impl.batch_size, data.batch_size(), key);
      }
      if (impl.device) {
        data.set_device(impl.device);
      }
      return Value(std::move(data));
    }
    case Value::Kind::kNonTensorStack: {
      const NonTensorStack& stack = value.non_tensor_stack();
      if (!starts_with(stack.batch_size(), impl.batch_size)) {
        throw_batch_mismatch(impl.batch_size, stack.batch_size(), key);
      }
      if (impl.device && stack.device() != impl.device) {
        NonTensorStack moved = stack;
        moved.set_device(impl.device);
        return Value(std::move(moved));
      }
      return value;
    }
  }
  TORCH_INTERNAL_ASSERT(false, "unknown entry kind");
}

} // namespace detail

using detail::Node;
using detail::TensorDictImpl;

// --- handle plumbing ---------------------------------------------------------

TensorDict::TensorDict() : impl_(c10::make_intrusive<TensorDictImpl>()) {}

TensorDict::TensorDict(
    c10::IntArrayRef batch_size,
    std::optional<c10::Device> device,
    const DimNames& names)
    : TensorDict() {
  for (int64_t s : batch_size) {
    TORCH_CHECK_VALUE(
        s >= 0,
        "batch size must be non-negative, got ",
        detail::size_repr(batch_size));
  }
  impl_->batch_size = batch_size.vec();
  impl_->device = device;
  set_names(names);
}

TensorDict::TensorDict(
    std::initializer_list<int64_t> batch_size,
    std::optional<c10::Device> device,
    const DimNames& names)
    : TensorDict(c10::IntArrayRef(batch_size), device, names) {}

TensorDict::TensorDict(c10::intrusive_ptr<TensorDictImpl> impl)
    : impl_(std::move(impl)) {
  TORCH_INTERNAL_ASSERT(impl_);
}

TensorDict::TensorDict(const TensorDict& other) = default;
// A handle is never null: moving shares the dict (one atomic increment, no
// allocation), so a moved-from handle stays a valid dict.
TensorDict::TensorDict(TensorDict&& other) noexcept : impl_(other.impl_) {}
TensorDict& TensorDict::operator=(const TensorDict& other) & = default;
TensorDict& TensorDict::operator=(TensorDict&& other) & noexcept {
  std::swap(impl_, other.impl_);
  return *this;
}
TensorDict::~TensorDict() = default;

// --- batch size, device, names -------------------------------------------------

c10::IntArrayRef TensorDict::batch_size() const& noexcept {
  return impl_->batch_size;
}

std::vector<int64_t> TensorDict::batch_size() const&& {
  return impl_->batch_size;
}

int64_t TensorDict::batch_dims() const noexcept {
  return static_cast<int64_t>(impl_->batch_size.size());
}

int64_t TensorDict::numel() const noexcept {
  int64_t n = 1;
  for (int64_t s : impl_->batch_size) {
    n *= s;
  }
  return n;
}

int64_t TensorDict::size(int64_t dim) const {
  const int64_t ndim = batch_dims();
  return impl_->batch_size[detail::wrap_dim(dim, ndim)];
}

std::optional<c10::Device> TensorDict::device() const noexcept {
  return impl_->device;
}

void TensorDict::set_batch_size(c10::IntArrayRef new_size) {
  for (int64_t s : new_size) {
    TORCH_CHECK_VALUE(
        s >= 0,
        "batch size must be non-negative, got ",
        detail::size_repr(new_size));
  }
  // Check everything before changing anything, so a failure loses nothing.
  std::function<void(const TensorDictImpl&, c10::IntArrayRef)> check =
      [&](const TensorDictImpl& impl, c10::IntArrayRef size) {
        for (const auto& node : impl.nodes()) {
          const Value& v = node->value;
          const std::vector<int64_t> shape = v.shape();
          if (!v.is_tensor()) {
            // Shorter nested batch sizes grow along; longer ones must agree.
            const size_t common = std::min(shape.size(), size.size());
            const bool fits = std::equal(
                shape.begin(), shape.begin() + common, size.begin());
            if (fits && v.is_tensordict() && shape.size() < size.size()) {
              check(*v.tensordict().unsafeGetImpl(), size);
            }
            if (fits) {
              continue;
            }
          } else if (detail::starts_with(shape, size)) {
            continue;
          }
          TORCH_CHECK(
              false,
              "the ",
              v.type_name(),
              " ",
              node->key,
              " has shape ",
              detail::size_repr(shape),
              " which is incompatible with the batch-size ",
              detail::size_repr(size),
              ".");
        }
      };
  check(*impl_, new_size);

  std::function<void(TensorDictImpl&, c10::IntArrayRef)> apply =
      [&](TensorDictImpl& impl, c10::IntArrayRef size) {
        const size_t old_dims = impl.batch_size.size();
        impl.batch_size = size.vec();
        if (!impl.names.empty()) {
          impl.names.resize(size.size());
          if (detail::no_names(impl.names)) {
            impl.names.clear();
          }
        }
        (void)old_dims;
        for (const auto& node : impl.nodes()) {
          Value& v = node->value;
          if (v.is_tensordict()) {
            TensorDictImpl& child = *v.tensordict().unsafeGetImpl();
            if (child.batch_size.size() < size.size()) {
              apply(child, size);
            }
          } else if (v.is_non_tensor_data()) {
            if (v.non_tensor_data().batch_size().size() < size.size()) {
              NonTensorData data = v.non_tensor_data();
              data.set_batch_size(size);
              v = Value(std::move(data));
            }
          } else if (v.is_non_tensor_stack()) {
            if (v.non_tensor_stack().batch_size().size() < size.size()) {
              NonTensorStack stack = v.non_tensor_stack();
              stack.set_batch_size(size);
              v = Value(std::move(stack));
            }
          }
        }
      };
  apply(*impl_, new_size);
}

DimNames TensorDict::names() const {
  if (impl_->names.empty()) {
    return DimNames(impl_->batch_size.size());
  }
  return impl_->names;
}

bool TensorDict::has_names() const noexcept {
  return !impl_->names.empty();
}

void TensorDict::set_names(const DimNames& names) {
  detail::check_names(names, impl_->batch_size.size());
  impl_->names = detail::no_names(names) ? DimNames{} : names;
  for (const auto& node : impl_->nodes()) {
    if (node->value.is_tensordict()) {
      TensorDictImpl& child = *node->value.tensordict().unsafeGetImpl();
      if (impl_->names.empty()) {
        // Clearing names clears the shared dims of nested dicts too.
        const size_t shared_dims = impl_->batch_size.size();
        for (size_t i = 0; i < child.names.size() && i < shared_dims; ++i) {
          child.names[i].reset();
        }
        if (detail::no_names(child.names)) {
          child.names.clear();
        }
      }
      detail::propagate_names(child, impl_->names);
    }
  }
}

TensorDict& TensorDict::refine_names(const DimNames& names) {
  const size_t ndim = impl_->batch_size.size();
  // Expand "..." into as many unnamed dims as it covers.
  DimNames wanted;
  size_t ellipsis = 0;
  for (const auto& name : names) {
    ellipsis += name && *name == "...";
  }
  TORCH_CHECK_VALUE(
      ellipsis <= 1, "refine_names: at most one '...' is allowed");
  TORCH_CHECK_VALUE(
      names.size() - ellipsis <= ndim,
      "refine_names: got ",
      names.size() - ellipsis,
      " names for ",
      ndim,
      " batch dims");
  for (const auto& name : names) {
    if (name && *name == "...") {
      const size_t skip = ndim - (names.size() - 1);
      for (size_t i = 0; i < skip; ++i) {
        wanted.emplace_back(std::nullopt);
      }
    } else {
      wanted.push_back(name);
    }
  }
  TORCH_CHECK_VALUE(
      wanted.size() == ndim,
      "refine_names: got ",
      wanted.size(),
      " names for ",
      ndim,
      " batch dims");
  DimNames current = this->names();
  DimNames refined = current;
  for (size_t i = 0; i < ndim; ++i) {
    if (!wanted[i]) {
      continue;
    }
    if (current[i] && *current[i] != *wanted[i]) {
      TORCH_CHECK(
          false,
          "refine_names: cannot coerce TensorDict names ",
          detail::names_repr(current),
          " with ",
          detail::names_repr(wanted),
          ".");
    }
    refined[i] = wanted[i];
  }
  set_names(refined);
  return *this;
}

TensorDict TensorDict::rename(const DimNames& names) const {
  TensorDict result = copy();
  result.set_names(names);
  return result;
}

TensorDict TensorDict::rename_by_map(
    const std::map<std::string, std::string>& old_to_new) const {
  DimNames current = names();
  std::vector<std::string> missing;
  for (const auto& [from, to] : old_to_new) {
    auto it = std::find(current.begin(), current.end(), from);
    if (it == current.end()) {
      missing.push_back(detail::python_repr(from));
      continue;
    }
    *it = to;
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) {
      list += (list.empty() ? "" : ", ") + m;
    }
    TORCH_CHECK_VALUE(
        false,
        "Some names to be renamed were not part of the tensordict names: [",
        list,
        "] vs ",
        detail::names_repr(this->names()),
        ".");
  }
  return rename(current);
}

TensorDict& TensorDict::rename_(const DimNames& names) {
  set_names(names);
  return *this;
}

// --- reading -----------------------------------------------------------------

const Value* TensorDict::find(const NestedKey& key) const& noexcept {
  TensorDictImpl* parent = detail::find_parent(*this, key);
  if (parent == nullptr) {
    return nullptr;
  }
  Node* node = parent->find(key.back());
  return node == nullptr ? nullptr : &node->value;
}

bool TensorDict::contains(const NestedKey& key) const noexcept {
  return find(key) != nullptr;
}

namespace {

const Value& lookup(const TensorDict& td, const NestedKey& key) {
  TensorDictImpl& parent = detail::resolve_parent(td, key);
  Node* node = parent.find(key.back());
  if (node == nullptr) {
    detail::throw_missing_key(parent, key.back(), key);
  }
  return node->value;
}

[[noreturn]] void throw_wrong_kind(
    const Value& value,
    const NestedKey& key,
    const char* wanted) {
  TORCH_CHECK_TYPE(
      false,
      "the entry ",
      key.to_string(),
      " is a ",
      value.type_name(),
      ", not a ",
      wanted);
  TORCH_INTERNAL_ASSERT(false);
}

} // namespace

at::Tensor TensorDict::get(const NestedKey& key) const {
  const Value& value = lookup(*this, key);
  if (!value.is_tensor()) {
    throw_wrong_kind(value, key, "Tensor");
  }
  return value.tensor();
}

at::Tensor TensorDict::get(
    const NestedKey& key,
    const at::Tensor& default_value) const {
  const Value* value = find(key);
  if (value == nullptr) {
    return default_value;
  }
  if (!value->is_tensor()) {
    throw_wrong_kind(*value, key, "Tensor");
  }
  return value->tensor();
}

TensorDict TensorDict::get_tensordict(const NestedKey& key) const {
  const Value& value = lookup(*this, key);
  if (!value.is_tensordict()) {
    throw_wrong_kind(value, key, "TensorDict");
  }
  return value.tensordict();
}

Value TensorDict::operator[](const NestedKey& key) const {
  return lookup(*this, key);
}

Value TensorDict::setdefault(const NestedKey& key, const Value& default_value) {
  if (const Value* value = find(key)) {
    return *value;
  }
  set(key, default_value);
  return lookup(*this, key);
}

Json TensorDict::get_non_tensor(const NestedKey& key) const {
  const Value& value = lookup(*this, key);
  if (!value.is_non_tensor()) {
    throw_wrong_kind(value, key, "NonTensorData or NonTensorStack");
  }
  return value.non_tensor();
}

Json TensorDict::get_non_tensor(const NestedKey& key, const Json& default_value)
    const {
  const Value* value = find(key);
  if (value == nullptr) {
    return default_value;
  }
  if (!value->is_non_tensor()) {
    throw_wrong_kind(*value, key, "NonTensorData or NonTensorStack");
  }
  return value->non_tensor();
}

bool TensorDict::is_non_tensor(const NestedKey& key) const {
  return lookup(*this, key).is_non_tensor();
}

// --- writing -----------------------------------------------------------------

namespace {

// Python's `set_` checks for one tensor entry: shape, then dtype.
void copy_into(
    const at::Tensor& dest,
    const at::Tensor& value,
    const NestedKey& key,
    bool non_blocking) {
  const auto dest_sizes = dest.sizes();
  const auto sizes = value.sizes();
  bool fits = sizes.size() <= dest_sizes.size();
  for (size_t i = 0; fits && i < sizes.size(); ++i) {
    const int64_t s = sizes[sizes.size() - 1 - i];
    fits = s == 1 || s == dest_sizes[dest_sizes.size() - 1 - i];
  }
  TORCH_CHECK(
      fits,
      "Failed to update ",
      key.to_string(),
      ": the value of shape ",
      detail::size_repr(sizes),
      " does not fit the entry of shape ",
      detail::size_repr(dest_sizes));
  TORCH_CHECK_TYPE(
      c10::canCast(value.scalar_type(), dest.scalar_type()),
      "Failed to update ",
      key.to_string(),
      ": a value of dtype ",
      detail::dtype_name(value.scalar_type()),
      " cannot be cast safely to the entry's dtype ",
      detail::dtype_name(dest.scalar_type()));
  dest.copy_(value, non_blocking);
}

// Writes `value` over an existing entry without replacing it, when both are
// tensors or both dicts; returns false when that is not possible.
bool write_in_place(
    Node& node,
    const Value& value,
    const NestedKey& key,
    bool non_blocking) {
  if (node.value.is_tensor() && value.is_tensor()) {
    copy_into(node.value.tensor(), value.tensor(), key, non_blocking);
    return true;
  }
  if (node.value.is_tensordict() && value.is_tensordict()) {
    TensorDict dest = node.value.tensordict();
    dest.update(
        value.tensordict(),
        UpdateOptions().inplace(true).non_blocking(non_blocking));
    return true;
  }
  if (node.value.is_non_tensor() && value.is_non_tensor()) {
    return false; // replaced below, which in-place writes may do
  }
  return false;
}

} // namespace

TensorDict& TensorDict::set(
    const NestedKey& key,
    const Value& value,
    const SetOptions& options) {
  TensorDictImpl* found = detail::find_parent(*this, key);
  if (found == nullptr) {
    // Missing levels are made like the deepest existing dict, so validate
    // against that one first: a rejected value must not leave new levels.
    TensorDictImpl& deepest = detail::deepest_existing(*this, key);
    detail::check_unlocked(deepest);
    Value stored =
        detail::validate_value(deepest, value, key, options.non_blocking());
    TensorDictImpl& parent =
        *detail::walk_parents(*this, key, /*create=*/true, /*nothrow=*/false);
    parent.append(std::string(key.back()), std::move(stored));
    return *this;
  }
  TensorDictImpl& parent = *found;
  Node* node = parent.find(key.back());
  if (node != nullptr && options.inplace()) {
    if (write_in_place(*node, value, key, options.non_blocking())) {
      return *this;
    }
    if (node->value.is_non_tensor() && value.is_non_tensor()) {
      // Non-tensor values have no storage to write into: replacing one is
      // the in-place write, and locked dicts allow it.
      node->value =
          detail::validate_value(parent, value, key, options.non_blocking());
      return *this;
    }
  }
  detail::check_unlocked(parent);
  Value stored =
      detail::validate_value(parent, value, key, options.non_blocking());
  if (node != nullptr) {
    node->value = std::move(stored);
  } else {
    parent.append(std::string(key.back()), std::move(stored));
  }
  return *this;
}

TensorDict& TensorDict::set(
    const NestedKey& key,
    const at::Tensor& value,
    const SetOptions& options) {
  return set(key, Value(value), options);
}

TensorDict& TensorDict::set(
    const NestedKey& key,
    const TensorDict& value,
    const SetOptions& options) {
  return set(key, Value(value), options);
}

TensorDict& TensorDict::set_non_tensor(const NestedKey& key, const Json& value) {
  return set(key, Value(NonTensorData(value)));
}

TensorDict& TensorDict::set_(const NestedKey& key, const at::Tensor& value) {
  TORCH_CHECK_VALUE(value.defined(), "cannot set_ an undefined tensor");
  TensorDictImpl& parent = detail::resolve_parent(*this, key);
  Node* node = parent.find(key.back());
  if (node == nullptr) {
    detail::throw_missing_key(parent, key.back(), key);
  }
  if (!node->value.is_tensor()) {
    throw_wrong_kind(node->value, key, "Tensor");
  }
  if (!detail::starts_with(value.sizes(), parent.batch_size)) {
    detail::throw_batch_mismatch(parent.batch_size, value.sizes(), key);
  }
  copy_into(node->value.tensor(), value, key, /*non_blocking=*/false);
  return *this;
}

// --- locking -----------------------------------------------------------------

namespace {

bool has_locked_parent(const TensorDictImpl& impl) {
  for (const auto& weak : impl.lock_parents) {
    auto parent = weak.lock();
    if (parent && parent->locked) {
      return true;
    }
  }
  return false;
}

void lock_impl(const detail::ImplPtr& impl) {
  impl->locked = true;
  for (const auto& node : impl->nodes()) {
    if (node->value.is_tensordict()) {
      const auto& child = node->value.tensordict();
      TensorDictImpl* child_impl = child.unsafeGetImpl();
      child_impl->lock_parents.emplace_back(impl);
      lock_impl(c10::intrusive_ptr<TensorDictImpl>::reclaim_copy(child_impl));
    }
  }
}

void unlock_children(TensorDictImpl& impl) {
  for (const auto& node : impl.nodes()) {
    if (!node->value.is_tensordict()) {
      continue;
    }
    TensorDictImpl& child = *node->value.tensordict().unsafeGetImpl();
    auto& parents = child.lock_parents;
    parents.erase(
        std::remove_if(
            parents.begin(),
            parents.end(),
            [&](const auto& weak) {
              auto parent = weak.lock();
              return !parent || parent.get() == &impl || !parent->locked;
            }),
        parents.end());
    if (parents.empty() && child.locked) {
      child.locked = false;
      child.shared = false;
      child.is_memmap = false;
      unlock_children(child);
    }
  }
}

} // namespace

TensorDict& TensorDict::lock_() {
  if (!impl_->locked) {
    lock_impl(impl_);
  }
  return *this;
}

TensorDict& TensorDict::unlock_() {
  TORCH_CHECK(
      !has_locked_parent(*impl_),
      "Cannot unlock a tensordict that is part of a locked graph. Unlock the "
      "root tensordict first. If the tensordict is part of multiple graphs, "
      "group the graphs under a common tensordict an unlock this root.");
  impl_->lock_parents.clear();
  if (impl_->locked) {
    // As in Python, an unlocked dict is no longer marked shared (its
    // tensors stay in shared memory).
    impl_->locked = false;
    impl_->shared = false;
    impl_->is_memmap = false;
    unlock_children(*impl_);
  }
  return *this;
}

bool TensorDict::is_locked() const noexcept {
  return impl_->locked;
}

// --- copies and moves ----------------------------------------------------------

TensorDict TensorDict::clone() const {
  return detail::map_entries(
      *this, [](const at::Tensor& t) { return t.clone(); });
}

TensorDict TensorDict::copy() const {
  return detail::map_entries(*this, [](const at::Tensor& t) { return t; });
}

TensorDict TensorDict::to(c10::Device device, bool non_blocking) const {
  if (is_consolidated()) {
    return detail::move_consolidated(*this, device, non_blocking);
  }
  TensorDict result = detail::map_entries(
      *this,
      [&](const at::Tensor& t) { return t.to(device, non_blocking); },
      device);
  return result;
}

std::ostream& operator<<(std::ostream& out, const TensorDict& td) {
  return out << td.repr();
}

TENSORDICT_END_NAMESPACE
