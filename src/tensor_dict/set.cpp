// Reading and writing entries: find/get and their typed forms, set and set_,
// and the validation every stored value goes through. Each of them walks a
// key once, with `lookup`, and switches over what it found (see NOTE [Key
// paths] in path.cpp); renaming and removing entries live in keys.cpp.

#include <algorithm>
#include <string>

#include "core/tensor_dict_impl.h"
#include "core/walk.h"
#include "tensordict/json.h"
#include "util/dims.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

bool shape_starts_with(c10::IntArrayRef shape, c10::IntArrayRef batch_size) {
  // Every set of a tensor checks its batch prefix (same_dims: no memcmp).
  return shape.size() >= batch_size.size() &&
         same_dims(shape.data(), batch_size.data(), batch_size.size());
}

namespace {

// A dict may not hold itself, directly or through its nested dicts.
bool holds_dict(const TensorDictImpl& haystack, const TensorDictImpl* needle) {
  return detail::any_dict(
      haystack, [&](const TensorDictImpl& dict) { return &dict == needle; });
}

[[noreturn]] void throw_batch_mismatch(
    c10::IntArrayRef batch_size, c10::IntArrayRef shape, const NestedKey& key) {
  C10_THROW_ERROR(
      Error,
      c10::str(
          "batch dimension mismatch, got self.batch_size=",
          size_repr(batch_size),
          " and value.shape=",
          size_repr(shape),
          " for key ",
          key.to_string(),
          ". The leading dimensions of a value must match the batch size."));
}

// Throws unless `shape` begins with the batch size of `impl`.
void check_batch_prefix(
    const TensorDictImpl& impl, c10::IntArrayRef shape, const NestedKey& key) {
  if (!shape_starts_with(shape, impl.batch_size)) {
    throw_batch_mismatch(impl.batch_size, shape, key);
  }
}

[[noreturn]] void throw_wrong_kind(
    const Value& value, const NestedKey& key, const char* wanted) {
  C10_THROW_ERROR(
      TypeError,
      c10::str(
          "the entry ",
          key.to_string(),
          " is a ",
          value.type_name(),
          ", not a ",
          wanted));
}

}  // namespace

Value validate_value(
    const TensorDictImpl& impl,
    const Value& value,
    const NestedKey& key,
    bool non_blocking) {
  switch (value.kind()) {
    case Value::Kind::kTensor: {
      const at::Tensor& t = value.tensor();
      check_batch_prefix(impl, t.sizes(), key);
      if (impl.device && t.device() != *impl.device) {
        return Value(t.to(*impl.device, non_blocking));
      }
      return value;
    }
    case Value::Kind::kTensorDict: {
      const TensorDict& td = value.tensordict();
      check_batch_prefix(impl, td.batch_size(), key);
      TORCH_CHECK_VALUE(
          !holds_dict(*td.unsafeGetImpl(), &impl),
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
      } else {
        check_batch_prefix(impl, data.batch_size(), key);
      }
      if (impl.device) {
        data.set_device(impl.device);
      }
      return Value(std::move(data));
    }
    case Value::Kind::kNonTensorStack: {
      const NonTensorStack& stack = value.non_tensor_stack();
      check_batch_prefix(impl, stack.batch_size(), key);
      if (impl.device && stack.device() != impl.device) {
        NonTensorStack moved = stack;
        moved.set_device(impl.device);
        return Value(std::move(moved));
      }
      return value;
    }
    case Value::Kind::kLazyStack: {
      // Dim names are not carried into lazy stacks: the stack dim's name
      // is the stack's own (`stack_dim_name`).
      const LazyStackedTensorDict& stack = value.lazy_stack();
      check_batch_prefix(impl, stack.batch_size(), key);
      for (const TensorDict& element : stack.tensordicts()) {
        TORCH_CHECK_VALUE(
            !holds_dict(*element.unsafeGetImpl(), &impl),
            "cannot set ",
            key.to_string(),
            ": a TensorDict cannot hold itself");
      }
      if (impl.device && stack.device() != impl.device) {
        std::vector<TensorDict> moved;
        for (const TensorDict& element : stack.tensordicts()) {
          moved.push_back(element.to(*impl.device, non_blocking));
        }
        return Value(restack_like(stack, std::move(moved)));
      }
      return value;
    }
  }
  TORCH_INTERNAL_ASSERT(false, "unknown entry kind");
}

namespace {

// Returns the entry stored at `key`; throws KeyError if there is none (a
// key through a lazy stack included: nothing is stored there).
Node& lookup_entry(const TensorDict& td, const NestedKey& key) {
  const Lookup found = lookup(td, key);
  if (found.kind != Lookup::Kind::kFound) {
    detail::throw_key_error(found, key);
  }
  return *found.node;
}

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
      size_repr(sizes),
      " does not fit the entry of shape ",
      size_repr(dest_sizes));
  TORCH_CHECK_TYPE(
      c10::canCast(value.scalar_type(), dest.scalar_type()),
      "Failed to update ",
      key.to_string(),
      ": a value of dtype ",
      dtype_name(value.scalar_type()),
      " cannot be cast safely to the entry's dtype ",
      dtype_name(dest.scalar_type()));
  dest.copy_(value, non_blocking);
}

// Writes `value` over an existing entry of `parent` without replacing its
// storage when both are tensors or both dicts; a non-tensor has no storage,
// so replacing it is its in-place write (which locked dicts allow). Returns
// false when the kinds differ and the entry must be replaced.
bool write_in_place(
    TensorDictImpl& parent,
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
    node.value = validate_value(parent, value, key, non_blocking);
    return true;
  }
  return false;
}

}  // namespace
}  // namespace detail

using detail::Node;
using detail::TensorDictImpl;

// --- reading -----------------------------------------------------------------

namespace detail {
namespace {

// The entry at `hop.rest` of a lazy stack, as Python's `stack.get(rest)`
// gives it: the stacked tensor, or the lazy stack of nested dicts.
Value lazy_hop_entry(const LazyHop& hop, const NestedKey& key) {
  const Value* first = hop.stack.tensordicts().front().find(hop.rest);
  if (first != nullptr && first->is_tensordict()) {
    return Value(hop.stack.get_tensordict(hop.rest));
  }
  if (first != nullptr && !first->is_tensor()) {
    throw_wrong_kind(*first, key, "Tensor or TensorDict");
  }
  return Value(hop.stack.get(hop.rest));
}

// The one switch of the readers that throw on a missing key: `from_entry`
// of the entry `found` names, or `from_hop` of the lazy stack the key runs
// into; otherwise the KeyError of `get`. Inlined into each reader, so the
// Lookup stays in registers.
template <typename FromEntry, typename FromHop>
auto read_found(
    Lookup found,
    const NestedKey& key,
    const FromEntry& from_entry,
    const FromHop& from_hop) {
  switch (found.kind) {
    case Lookup::Kind::kFound:
      return from_entry(found.node->value);
    case Lookup::Kind::kThroughLazyStack:
      return from_hop(lazy_hop(found, key));
    case Lookup::Kind::kMissing:
    case Lookup::Kind::kThroughLeaf:
      break;
  }
  throw_key_error(found, key);
}

// The tensor at `found`, for both forms of `get`.
at::Tensor tensor_found(Lookup found, const NestedKey& key) {
  return read_found(
      found,
      key,
      [&](const Value& value) {
        if (!value.is_tensor()) {
          throw_wrong_kind(value, key, "Tensor");
        }
        return value.tensor();
      },
      [](const LazyHop& hop) { return hop.stack.get(hop.rest); });
}

}  // namespace
}  // namespace detail

using Found = detail::Lookup::Kind;

const Value* TensorDict::find(const NestedKey& key) const& noexcept {
  const detail::Lookup found = detail::lookup(*this, key);
  return found.kind == Found::kFound ? &found.node->value : nullptr;
}

bool TensorDict::contains(const NestedKey& key) const noexcept {
  const detail::Lookup found = detail::lookup(*this, key);
  switch (found.kind) {
    case Found::kFound:
      return true;
    case Found::kThroughLazyStack:
      return detail::lazy_hop_contains(found, key);
    case Found::kMissing:
    case Found::kThroughLeaf:
      return false;
  }
  return false;
}

at::Tensor TensorDict::get(const NestedKey& key) const {
  return detail::tensor_found(detail::lookup(*this, key), key);
}

at::Tensor TensorDict::get(
    const NestedKey& key, const at::Tensor& default_value) const {
  const detail::Lookup found = detail::lookup(*this, key);
  const bool present =
      found.kind == Found::kFound || (found.kind == Found::kThroughLazyStack &&
                                      detail::lazy_hop_contains(found, key));
  return present ? detail::tensor_found(found, key) : default_value;
}

TensorDict TensorDict::get_tensordict(const NestedKey& key) const {
  const Value& value = detail::lookup_entry(*this, key).value;
  if (!value.is_tensordict()) {
    detail::throw_wrong_kind(value, key, "TensorDict");
  }
  return value.tensordict();
}

LazyStackedTensorDict TensorDict::get_lazy_stack(const NestedKey& key) const {
  return detail::read_found(
      detail::lookup(*this, key),
      key,
      [&](const Value& value) {
        if (!value.is_lazy_stack()) {
          detail::throw_wrong_kind(value, key, "LazyStackedTensorDict");
        }
        return value.lazy_stack();
      },
      [](const detail::LazyHop& hop) {
        return hop.stack.get_tensordict(hop.rest);
      });
}

Value TensorDict::operator[](const NestedKey& key) const {
  return detail::read_found(
      detail::lookup(*this, key),
      key,
      [](const Value& value) { return value; },
      [&](const detail::LazyHop& hop) {
        return detail::lazy_hop_entry(hop, key);
      });
}

Value TensorDict::setdefault(const NestedKey& key, const Value& default_value) {
  if (const Value* value = find(key)) {
    return *value;
  }
  set(key, default_value);
  return detail::lookup_entry(*this, key).value;
}

Json TensorDict::get_non_tensor(const NestedKey& key) const {
  const Value& value = detail::lookup_entry(*this, key).value;
  if (!value.is_non_tensor()) {
    detail::throw_wrong_kind(value, key, "NonTensorData or NonTensorStack");
  }
  return value.non_tensor();
}

Json TensorDict::get_non_tensor(
    const NestedKey& key, const Json& default_value) const {
  const Value* value = find(key);
  if (value == nullptr) {
    return default_value;
  }
  if (!value->is_non_tensor()) {
    detail::throw_wrong_kind(*value, key, "NonTensorData or NonTensorStack");
  }
  return value->non_tensor();
}

bool TensorDict::is_non_tensor(const NestedKey& key) const {
  return detail::lookup_entry(*this, key).value.is_non_tensor();
}

// --- writing -----------------------------------------------------------------

namespace {

// Python's lazy stack `set`: the value is cut along the stack dim and each
// piece set into its element. Kept out of `set`, whose hot path it would
// otherwise weigh down.
C10_NOINLINE void set_through_lazy_stack(
    const detail::LazyHop& hop,
    const NestedKey& key,
    const Value& value,
    const SetOptions& options) {
  const std::vector<TensorDict>& elements = hop.stack.tensordicts();
  const int64_t dim = hop.stack.stack_dim();
  const auto n = static_cast<int64_t>(elements.size());
  std::vector<Value> pieces;
  if (value.is_tensor()) {
    const at::Tensor& t = value.tensor();
    TORCH_CHECK(
        t.dim() > dim && t.size(dim) == n,
        "cannot set ",
        key.to_string(),
        " through a lazy stack of ",
        n,
        " elements stacked at dim ",
        dim,
        ": the value of shape ",
        detail::size_repr(t.sizes()),
        " does not have ",
        n,
        " items at that dim");
    for (at::Tensor& piece : t.unbind(dim)) {
      pieces.emplace_back(std::move(piece));
    }
  } else if (value.is_tensordict()) {
    const TensorDict& td = value.tensordict();
    TORCH_CHECK(
        td.batch_dims() > dim && td.batch_size()[dim] == n,
        "cannot set ",
        key.to_string(),
        " through a lazy stack of ",
        n,
        " elements stacked at dim ",
        dim,
        ": the value of batch size ",
        detail::size_repr(td.batch_size()),
        " does not have ",
        n,
        " items at that dim");
    for (TensorDict& piece : td.unbind(dim)) {
      pieces.emplace_back(std::move(piece));
    }
  } else {
    detail::throw_wrong_kind(value, key, "Tensor or TensorDict");
  }
  for (int64_t i = 0; i < n; ++i) {
    TensorDict element = elements[i];
    element.set(hop.rest, pieces[i], options);
  }
}

}  // namespace

TensorDict& TensorDict::set(
    const NestedKey& key, const Value& value, const SetOptions& options) {
  // One walk (NOTE [Key paths]).
  const detail::Lookup found = detail::lookup(*this, key);
  TensorDictImpl& parent = *found.dict;
  Node* const node = found.node;
  switch (found.kind) {
    case Found::kThroughLazyStack:
      set_through_lazy_stack(detail::lazy_hop(found, key), key, value, options);
      return *this;
    case Found::kThroughLeaf:
      detail::throw_key_error(found, key);
    case Found::kFound:
      if (options.inplace() &&
          detail::write_in_place(
              parent, *node, value, key, options.non_blocking())) {
        return *this;
      }
      break;
    case Found::kMissing:
      break;
  }
  // Missing levels are made like the deepest existing dict, so validate
  // against that one first: a rejected value must not leave new levels.
  detail::check_unlocked(parent);
  if (node != nullptr && node->value.is_tensor() && value.is_tensor() &&
      (!parent.device || value.tensor().device() == *parent.device)) {
    // A tensor over a tensor on the dict's device, what a module's output
    // does every step: validate_value would only check the batch prefix,
    // so check it and assign the handle, without a Value copy and the
    // variant's move-assignment.
    detail::check_batch_prefix(parent, value.tensor().sizes(), key);
    const_cast<at::Tensor&>(node->value.tensor()) = value.tensor();
    return *this;
  }
  Value stored =
      detail::validate_value(parent, value, key, options.non_blocking());
  if (node != nullptr) {
    node->value = std::move(stored);
    return *this;
  }
  TensorDictImpl* holder = &parent;
  if (found.depth + 1 < key.size()) {
    holder = detail::resolve(found.end(), key, detail::PathMode::kCreate).dict;
  }
  holder->append(std::string(key.back()), std::move(stored));
  return *this;
}

TensorDict& TensorDict::set(
    const NestedKey& key, const at::Tensor& value, const SetOptions& options) {
  return set(key, Value(value), options);
}

TensorDict& TensorDict::set(
    const NestedKey& key, const TensorDict& value, const SetOptions& options) {
  return set(key, Value(value), options);
}

TensorDict& TensorDict::set_non_tensor(
    const NestedKey& key, const Json& value) {
  return set(key, Value(NonTensorData(value)));
}

TensorDict& TensorDict::set_(const NestedKey& key, const at::Tensor& value) {
  TORCH_CHECK_VALUE(value.defined(), "cannot set_ an undefined tensor");
  const detail::Lookup found = detail::lookup(*this, key);
  if (found.kind != Found::kFound) {
    detail::throw_key_error(found, key);
  }
  const Value& entry = found.node->value;
  if (!entry.is_tensor()) {
    detail::throw_wrong_kind(entry, key, "Tensor");
  }
  detail::check_batch_prefix(*found.dict, value.sizes(), key);
  detail::copy_into(entry.tensor(), value, key, /*non_blocking=*/false);
  return *this;
}

TENSORDICT_END_NAMESPACE
