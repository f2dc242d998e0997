// Views of leaves built without the dispatcher. See NOTE [Fast views] in
// fast_view.h.

#include "tensor_dict/fast_view.h"

#include <ATen/ExpandUtils.h>
#include <ATen/TensorUtils.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/forward_grad.h>
#include <torch/csrc/autograd/variable.h>

#include <typeinfo>

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

// --- geometry
// -------------------------------------------------------------------

ViewGeometry::ViewGeometry(const at::Tensor& t)
    : sizes(t.sizes().begin(), t.sizes().end()),
      strides(t.strides().begin(), t.strides().end()),
      offset(t.storage_offset()) {}

void ViewGeometry::select(int64_t dim, int64_t index) {
  offset += index * strides[dim];
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
}

void ViewGeometry::narrow(
    int64_t dim, int64_t start, int64_t length, int64_t step) {
  offset += start * strides[dim];
  // ceil(length / step) without overflowing for a huge step.
  sizes[dim] = length == 0 ? 0 : 1 + (length - 1) / step;
  strides[dim] *= step;
}

void ViewGeometry::unsqueeze(int64_t dim) {
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  const int64_t stride = dim >= ndim ? 1 : sizes[dim] * strides[dim];
  sizes.insert(sizes.begin() + dim, 1);
  strides.insert(strides.begin() + dim, stride);
}

void ViewGeometry::squeeze(c10::IntArrayRef dims) {
  // From the last dim down, so positions stay valid as dims go.
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] == 1 && std::find(dims.begin(), dims.end(), d) != dims.end()) {
      sizes.erase(sizes.begin() + d);
      strides.erase(strides.begin() + d);
    }
  }
}

void ViewGeometry::permute_leading(c10::IntArrayRef dims) {
  const c10::SmallVector<int64_t, 6> old_sizes = sizes;
  const c10::SmallVector<int64_t, 6> old_strides = strides;
  for (size_t i = 0; i < dims.size(); ++i) {
    sizes[i] = old_sizes[dims[i]];
    strides[i] = old_strides[dims[i]];
  }
}

void ViewGeometry::transpose(int64_t dim0, int64_t dim1) {
  std::swap(sizes[dim0], sizes[dim1]);
  std::swap(strides[dim0], strides[dim1]);
}

bool ViewGeometry::expand(c10::IntArrayRef target) {
  if (target.size() < sizes.size()) {
    return false;
  }
  // ATen's rules and its errors (a mismatch at a non-singleton dim).
  auto result = at::inferExpandGeometry_dimvector(sizes, strides, target);
  sizes.assign(result.sizes.begin(), result.sizes.end());
  strides.assign(result.strides.begin(), result.strides.end());
  return true;
}

bool ViewGeometry::view(c10::IntArrayRef target) {
  // Strides that are exactly the contiguous ones (the usual leaf) stay so:
  // computeStride's answer, without its general walk.
  bool contiguous = true;
  int64_t expected = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    contiguous = contiguous && strides[d] == expected;
    expected *= sizes[d];
  }
  if (contiguous && expected > 0) {
    sizes.assign(target.begin(), target.end());
    strides.resize(sizes.size());
    expected = 1;
    for (size_t d = sizes.size(); d-- > 0;) {
      strides[d] = expected;
      expected *= sizes[d];
    }
    return true;
  }
  const at::DimVector shape(target.begin(), target.end());
  std::optional<at::DimVector> new_strides =
      at::detail::computeStride(sizes, strides, shape);
  if (!new_strides.has_value()) {
    return false;
  }
  sizes.assign(shape.begin(), shape.end());
  strides.assign(new_strides->begin(), new_strides->end());
  return true;
}

// --- basic indices
// -------------------------------------------------------------

std::optional<BasicIndex> plan_basic_index(
    c10::ArrayRef<at::indexing::TensorIndex> indices,
    c10::IntArrayRef batch_size) {
  if (indices.empty()) {
    return std::nullopt;  // ATen refuses an empty index list
  }
  BasicIndex plan;
  plan.steps.reserve(indices.size());
  size_t dim = 0;  // the batch dim the next integer or slice consumes
  for (const at::indexing::TensorIndex& index : indices) {
    if (index.is_none()) {
      plan.steps.push_back({BasicIndexStep::Kind::kNewDim});
      plan.batch_size.push_back(1);
      continue;
    }
    if (dim >= batch_size.size()) {
      return std::nullopt;
    }
    const int64_t size = batch_size[dim++];
    if (index.is_integer()) {
      const std::optional<int64_t> value = index.integer().maybe_as_int();
      if (!value.has_value() || *value < -size || *value >= size) {
        return std::nullopt;
      }
      plan.steps.push_back(
          {BasicIndexStep::Kind::kSelect, *value < 0 ? *value + size : *value});
      continue;
    }
    if (!index.is_slice()) {
      return std::nullopt;  // tensors and booleans: ATen's advanced indexing
    }
    const at::indexing::Slice& slice = index.slice();
    const std::optional<int64_t> start_arg = slice.start().maybe_as_int();
    const std::optional<int64_t> stop_arg = slice.stop().maybe_as_int();
    const std::optional<int64_t> step = slice.step().maybe_as_int();
    if (!start_arg || !stop_arg || !step || *step <= 0) {
      return std::nullopt;
    }
    // ATen's slice: negative ends count from the end, then both clamp.
    int64_t start = *start_arg;
    int64_t stop = *stop_arg;
    if (start < 0) {
      start = std::max<int64_t>(start + size, 0);
    }
    if (stop < 0) {
      stop = stop + size;
    }
    start = std::min(start, size);
    stop = std::clamp(stop, start, size);
    BasicIndexStep out{
        BasicIndexStep::Kind::kSlice, start, stop - start, *step};
    plan.batch_size.push_back(
        out.length == 0 ? 0 : 1 + (out.length - 1) / out.step);
    plan.steps.push_back(out);
  }
  // Dims after the last index are kept whole.
  plan.batch_size.insert(
      plan.batch_size.end(), batch_size.begin() + dim, batch_size.end());
  return plan;
}

// --- the rule
// -------------------------------------------------------------------

namespace {

// The dispatch keys of a plain dense CPU tensor, made outside and inside
// inference mode: a leaf with any other set takes ATen's path.
struct PlainKeys {
  c10::DispatchKeySet normal;
  c10::DispatchKeySet inference;
};

const PlainKeys& plain_cpu_keys() {
  // Both modes set explicitly: the first call may come from either.
  static const PlainKeys keys = [] {
    PlainKeys out;
    {
      c10::InferenceMode guard(/*enabled=*/false);
      out.normal = at::empty({0}).key_set();
    }
    {
      c10::InferenceMode guard(/*enabled=*/true);
      out.inference = at::empty({0}).key_set();
    }
    return out;
  }();
  return keys;
}

bool thread_allows_direct_views() {
  if (at::GradMode::is_enabled()) {
    return false;
  }
  // A tracer, a functorch transform or a Python mode adds keys here and
  // must see every op. Every thread includes these two; inference mode
  // removes the second.
  static const c10::DispatchKeySet always(
      {c10::DispatchKey::BackendSelect, c10::DispatchKey::ADInplaceOrView});
  return (c10::impl::tls_local_dispatch_key_set().included_ - always).empty();
}

}  // namespace

LeafViews::LeafViews() : enabled_(thread_allows_direct_views()) {}

bool LeafViews::direct(const at::Tensor& t) const {
  if (!enabled_ || !t.defined()) {
    return false;
  }
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  const PlainKeys& plain = plain_cpu_keys();
  const c10::DispatchKeySet keys = impl->key_set();
  if (keys != plain.normal && keys != plain.inference) {
    return false;
  }
  if (typeid(*impl) != typeid(c10::TensorImpl) ||
      impl->has_symbolic_sizes_strides()) {
    return false;
  }
  c10::AutogradMetaInterface* meta = impl->autograd_meta();
  if (meta == nullptr) {
    return true;  // the common case: nothing for autograd to track
  }
  if (meta->requires_grad()) {
    return false;  // also true for a view of a tensor that requires grad
  }
  const auto& fw_grad =
      static_cast<torch::autograd::AutogradMeta*>(meta)->fw_grad_;
  return fw_grad == nullptr || fw_grad->empty();
}

at::Tensor make_direct_view(const at::Tensor& base, const ViewGeometry& g) {
  c10::TensorImpl* src = base.unsafeGetTensorImpl();
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      c10::TensorImpl::VIEW,
      c10::Storage(src->storage()),
      src->key_set(),
      src->dtype());
  impl->set_sizes_and_strides(g.sizes, g.strides, g.offset);
  if (!src->is_inference()) {
    // Writes through either tensor bump the one counter, so autograd sees
    // a saved leaf modified through the view, as with ATen's views.
    impl->set_version_counter(src->version_counter());
  }
  return at::Tensor(std::move(impl));
}

// --- the ops
// --------------------------------------------------------------------

namespace {

// `t`'s view whose geometry `shape(g)` makes, built directly when `views`
// allows; else, or when `shape` returns false (an argument only ATen can
// answer, with its error or a copy), `aten()`.
template <typename Shape, typename Aten>
at::Tensor view_or_aten(
    const LeafViews& views, const at::Tensor& t, Shape&& shape, Aten&& aten) {
  if (!views.direct(t)) {
    return aten();
  }
  ViewGeometry g(t);
  if (!shape(g)) {
    return aten();
  }
  return make_direct_view(t, g);
}

// ATen's calls for the steps of a basic index, with ViewGeometry's names.
struct AtenSteps {
  at::Tensor t;
  void select(int64_t dim, int64_t index) {
    t = t.select(dim, index);
  }
  void narrow(int64_t dim, int64_t start, int64_t length, int64_t step) {
    t = t.slice(dim, start, start + length, step);
  }
  void unsqueeze(int64_t dim) {
    t = t.unsqueeze(dim);
  }
};

// Applies `plan` to `target` (a ViewGeometry or AtenSteps) as ATen's
// indexing does: a cursor moves over the dims, past slices and new dims.
template <typename Target>
void apply_steps(const BasicIndex& plan, Target& target) {
  int64_t dim = 0;
  for (const BasicIndexStep& step : plan.steps) {
    switch (step.kind) {
      case BasicIndexStep::Kind::kSelect:
        target.select(dim, step.start);
        break;
      case BasicIndexStep::Kind::kSlice:
        target.narrow(dim++, step.start, step.length, step.step);
        break;
      case BasicIndexStep::Kind::kNewDim:
        target.unsqueeze(dim++);
        break;
    }
  }
}

}  // namespace

at::Tensor LeafViews::select(
    const at::Tensor& t, int64_t dim, int64_t index) const {
  return view_or_aten(
      *this,
      t,
      [&](ViewGeometry& g) {
        g.select(dim, index);
        return true;
      },
      [&] { return t.select(dim, index); });
}

at::Tensor LeafViews::narrow(
    const at::Tensor& t, int64_t dim, int64_t start, int64_t length) const {
  return view_or_aten(
      *this,
      t,
      [&](ViewGeometry& g) {
        g.narrow(dim, start, length);
        return true;
      },
      [&] { return t.narrow(dim, start, length); });
}

at::Tensor LeafViews::index(const at::Tensor& t, const BasicIndex& plan) const {
  return view_or_aten(
      *this,
      t,
      [&](ViewGeometry& g) {
        apply_steps(plan, g);
        return true;
      },
      [&] {
        // The calls ATen's indexing makes, after the checks the plan made.
        AtenSteps aten{t};
        apply_steps(plan, aten);
        return aten.t;
      });
}

at::Tensor LeafViews::unsqueeze(const at::Tensor& t, int64_t dim) const {
  return view_or_aten(
      *this,
      t,
      [&](ViewGeometry& g) {
        g.unsqueeze(dim);
        return true;
      },
      [&] { return t.unsqueeze(dim); });
}

at::Tensor LeafViews::squeeze(
    const at::Tensor& t, c10::IntArrayRef dims) const {
  return view_or_aten(
      *this,
      t,
      [&](ViewGeometry& g) {
        g.squeeze(dims);
        return true;
      },
      [&] { return t.squeeze(dims); });
}

at::Tensor LeafViews::permute_leading(
    const at::Tensor& t, c10::IntArrayRef dims) const {
  return view_or_aten(
      *this,
      t,
      [&](ViewGeometry& g) {
        g.permute_leading(dims);
        return true;
      },
      [&] {
        c10::SmallVector<int64_t, 8> full(dims.begin(), dims.end());
        for (int64_t d = static_cast<int64_t>(dims.size()); d < t.dim(); ++d) {
          full.push_back(d);
        }
        return t.permute(full);
      });
}

at::Tensor LeafViews::transpose(
    const at::Tensor& t, int64_t dim0, int64_t dim1) const {
  return view_or_aten(
      *this,
      t,
      [&](ViewGeometry& g) {
        g.transpose(dim0, dim1);
        return true;
      },
      [&] { return t.transpose(dim0, dim1); });
}

at::Tensor LeafViews::expand(
    const at::Tensor& t, c10::IntArrayRef sizes) const {
  return view_or_aten(
      *this,
      t,
      [&](ViewGeometry& g) { return g.expand(sizes); },
      [&] { return t.expand(sizes); });
}

at::Tensor LeafViews::view(const at::Tensor& t, c10::IntArrayRef sizes) const {
  return view_or_aten(
      *this,
      t,
      [&](ViewGeometry& g) { return g.view(sizes); },
      [&] { return t.view(sizes); });
}

at::Tensor LeafViews::reshape(
    const at::Tensor& t, c10::IntArrayRef sizes) const {
  // A view where one exists, as reshape would give: view() skips
  // reshape's second look at the strides and its size inference.
  const bool fast = direct(t);
  if (!fast && t.is_contiguous()) {
    return t.view(sizes);  // always a view: no geometry needed
  }
  ViewGeometry g(t);
  if (!g.view(sizes)) {
    return t.reshape(sizes);  // the strides need a copy
  }
  return fast ? make_direct_view(t, g) : t.view(sizes);
}

std::vector<at::Tensor> LeafViews::unbind(
    const at::Tensor& t, int64_t dim) const {
  if (!direct(t)) {
    return t.unbind(dim);
  }
  // Rows differ only in their offset.
  ViewGeometry row(t);
  const int64_t n = row.sizes[dim];
  const int64_t stride = row.strides[dim];
  row.select(dim, 0);
  const int64_t first = row.offset;
  std::vector<at::Tensor> out;
  out.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    row.offset = first + i * stride;
    out.push_back(make_direct_view(t, row));
  }
  return out;
}

std::vector<at::Tensor> LeafViews::split_with_sizes(
    const at::Tensor& t, c10::IntArrayRef sizes, int64_t dim) const {
  if (!direct(t)) {
    return t.split_with_sizes(sizes, dim);
  }
  // Pieces differ only in their offset and their size along `dim`.
  ViewGeometry piece(t);
  const int64_t first = piece.offset;
  const int64_t stride = piece.strides[dim];
  std::vector<at::Tensor> out;
  out.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t length : sizes) {
    piece.offset = first + start * stride;
    piece.sizes[dim] = length;
    out.push_back(make_direct_view(t, piece));
    start += length;
  }
  return out;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
