// The handle itself: construction, copying and moving of handles, batch
// size and device, and the deep copies (clone, copy, to). See the class
// comment in tensor_dict.h for what a handle shares.

#include <algorithm>
#include <ostream>
#include <utility>

#include "core/python_class.h"
#include "core/tensor_dict_impl.h"
#include "core/walk.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

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

namespace {

void check_batch_size_values(c10::IntArrayRef batch_size) {
  for (int64_t s : batch_size) {
    TORCH_CHECK_VALUE(
        s >= 0, "batch size must be non-negative, got ", size_repr(batch_size));
  }
}

// Throws unless every entry of `impl` fits the batch size `size`. Nested
// dicts and non-tensors with shorter batch sizes grow along (so their
// entries are checked too); longer ones must agree on the common dims.
void check_entries_fit(const TensorDictImpl& impl, c10::IntArrayRef size) {
  struct Check : WalkVisitor {
    c10::IntArrayRef size;
    void check(
        const KeyPath& path,
        const char* type_name,
        c10::IntArrayRef shape,
        bool fits) const {
      TORCH_CHECK(
          fits,
          "the ",
          type_name,
          " ",
          path.back(),
          " has shape ",
          size_repr(shape),
          " which is incompatible with the batch-size ",
          size_repr(size),
          ".");
    }
    // A nested dict, lazy stack or non-tensor fits when its batch dims and
    // the new ones agree as far as both go.
    bool agrees(c10::IntArrayRef shape) const {
      const size_t common = std::min(shape.size(), size.size());
      return std::equal(shape.begin(), shape.begin() + common, size.begin());
    }
    void leaf(const KeyPath& path, const at::Tensor& t) const {
      check(path, "Tensor", t.sizes(), shape_starts_with(t.sizes(), size));
    }
    bool enter_dict(const KeyPath& path, const TensorDict& dict) const {
      check(path, "TensorDict", dict.batch_size(), agrees(dict.batch_size()));
      // Its entries move only when it gains dims.
      return static_cast<size_t>(dict.batch_dims()) < size.size();
    }
    void non_tensor(const KeyPath& path, const Value& v) const {
      const std::vector<int64_t> shape = v.shape();
      check(path, v.type_name(), shape, agrees(shape));
    }
    bool enter_lazy_stack(
        const KeyPath& path, const LazyStackedTensorDict& stack) const {
      // A lazy stack's batch size is its elements': it cannot grow here.
      const c10::IntArrayRef shape = stack.batch_size();
      check(
          path,
          "LazyStackedTensorDict",
          shape,
          agrees(shape) && shape.size() >= size.size());
      return false;
    }
  } visitor;
  visitor.size = size;
  KeyPath path;
  walk(impl, visitor, path);
}

// Sets the batch size of `impl` to `size` (already checked), and of the
// nested dicts and non-tensors that have fewer dims.
void assign_batch_size(TensorDictImpl& impl, c10::IntArrayRef size) {
  struct Assign : MutWalkVisitor {
    c10::IntArrayRef size;
    void assign(TensorDictImpl& dict) const {
      dict.batch_size = size.vec();
      if (!dict.names.empty()) {
        dict.names.resize(size.size());
        if (all_unnamed(dict.names)) {
          dict.names.clear();
        }
      }
    }
    bool enter_dict(const KeyPath&, TensorDictImpl& dict) const {
      if (dict.batch_size.size() >= size.size()) {
        return false;
      }
      assign(dict);
      return true;
    }
    void non_tensor(const KeyPath&, Node& node) const {
      Value& v = node.value;
      if (v.is_non_tensor_data()) {
        if (v.non_tensor_data().batch_size().size() < size.size()) {
          NonTensorData data = v.non_tensor_data();
          data.set_batch_size(size);
          v = Value(std::move(data));
        }
      } else if (v.non_tensor_stack().batch_size().size() < size.size()) {
        NonTensorStack stack = v.non_tensor_stack();
        stack.set_batch_size(size);
        v = Value(std::move(stack));
      }
    }
    // A lazy stack's batch size is its elements' (check_entries_fit).
    bool enter_lazy_stack(const KeyPath&, Node&) const {
      return false;
    }
  } visitor;
  visitor.size = size;
  visitor.assign(impl);
  walk_mut(impl, visitor);
}

}  // namespace
}  // namespace detail

using detail::TensorDictImpl;

// --- handle plumbing ---------------------------------------------------------

TensorDict::TensorDict() : impl_(c10::make_intrusive<TensorDictImpl>()) {}

TensorDict::TensorDict(
    c10::IntArrayRef batch_size,
    std::optional<c10::Device> device,
    const DimNames& names)
    : TensorDict() {
  detail::check_batch_size_values(batch_size);
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

// --- batch size and device
// -----------------------------------------------------

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

c10::IntArrayRef TensorDict::size() const& noexcept {
  return impl_->batch_size;
}

std::vector<int64_t> TensorDict::size() const&& {
  return impl_->batch_size;
}

int64_t TensorDict::size(int64_t dim) const {
  const int64_t ndim = batch_dims();
  return impl_->batch_size[detail::wrap_dim(dim, ndim)];
}

std::optional<c10::Device> TensorDict::device() const noexcept {
  return impl_->device;
}

void TensorDict::set_batch_size(c10::IntArrayRef new_size) {
  detail::check_batch_size_values(new_size);
  // Check everything before changing anything, so a failure loses nothing.
  detail::check_entries_fit(*impl_, new_size);
  detail::assign_batch_size(*impl_, new_size);
}

// --- copies and moves
// ----------------------------------------------------------

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
  return detail::map_entries(
      *this,
      [&](const at::Tensor& t) { return t.to(device, non_blocking); },
      device);
}

const std::string& TensorDict::python_class() const noexcept {
  return impl_->python_class;
}

TensorDict& TensorDict::set_python_class(std::string type_string) {
  detail::check_python_class(type_string);
  impl_->python_class = std::move(type_string);
  return *this;
}

std::ostream& operator<<(std::ostream& out, const TensorDict& td) {
  return out << td.repr();
}

TENSORDICT_END_NAMESPACE
