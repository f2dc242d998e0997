// LazyStackedTensorDict (declared in lazy_stack.h).

#include "tensordict/lazy_stack.h"

#include <ATen/TensorIndexing.h>
#include <ATen/ops/stack.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <ostream>
#include <utility>

#include "core/batch_index.h"
#include "core/lazy_stack_impl.h"
#include "core/python_class.h"
#include "core/stacked.h"
#include "core/walk.h"
#include "tensordict/errors.h"
#include "tensordict/json.h"
#include "util/python_spelling.h"
#include "util/shared_memory.h"

TENSORDICT_BEGIN_NAMESPACE

namespace detail::stacked {

using detail::LazyStackedTensorDictImpl;
using detail::Node;
using detail::TensorDictImpl;

using detail::device_repr;

// The elements' dicts, for the walk engine.
std::vector<const TensorDictImpl*> impls_of(
    const std::vector<TensorDict>& tds) {
  std::vector<const TensorDictImpl*> out;
  out.reserve(tds.size());
  for (const TensorDict& td : tds) {
    out.push_back(td.unsafeGetImpl());
  }
  return out;
}

// The nodes of the first element whose key every element holds, in the
// first element's order.
std::vector<const Node*> common_nodes(const std::vector<TensorDict>& tds) {
  std::vector<const Node*> out;
  detail::KeyPath path;
  const detail::ZipOptions options{
      "stack", detail::ZipKeys::kCommon, /*check_kinds=*/false};
  detail::zip_level(impls_of(tds), path, options, [&](const Node& node, auto) {
    out.push_back(&node);
  });
  return out;
}

// Python's repr of the common keys of one level: ['a', 'b'], sorted.
std::string common_keys_repr(const std::vector<TensorDict>& tds) {
  std::vector<std::string_view> keys;
  for (const Node* node : common_nodes(tds)) {
    keys.emplace_back(node->key);
  }
  return detail::sorted_list_repr(std::move(keys));
}

// The entries named `part` of every element; throws Python's KeyError when
// one of them lacks it. `key` is the full key looked up.
std::vector<Value> member_values(
    const std::vector<TensorDict>& tds,
    std::string_view part,
    const NestedKey& key) {
  std::vector<Value> values;
  values.reserve(tds.size());
  for (const TensorDict& td : tds) {
    const Node* node = td.unsafeGetImpl()->find(part);
    if (node == nullptr) {
      std::string msg = c10::str(
          "key \"",
          part,
          "\" not found in LazyStackedTensorDict with keys ",
          common_keys_repr(tds));
      if (key.size() > 1) {
        msg += c10::str(" (while looking up ", key.to_string(), ")");
      }
      TENSORDICT_CHECK_KEY(false, msg);
    }
    values.push_back(node->value);
  }
  return values;
}

using detail::same_kind;

// Throws the engine's kind error unless every entry has the kind of the
// first (any non-tensor kinds count as one).
void check_same_kind(const std::vector<Value>& values, const NestedKey& key) {
  std::vector<const Value*> pointers;
  pointers.reserve(values.size());
  for (const Value& v : values) {
    pointers.push_back(&v);
  }
  detail::KeyPath path;
  for (std::string_view part : key) {
    path.push(part);
  }
  detail::check_same_kind(pointers, path, "stack");
}

// Throws TypeError unless the (same-kind) entries are of kind `wanted`.
void check_kind(
    const std::vector<Value>& values,
    const NestedKey& key,
    Value::Kind wanted,
    const char* wanted_name) {
  check_same_kind(values, key);
  TORCH_CHECK_TYPE(
      values[0].kind() == wanted,
      "the entry ",
      key.to_string(),
      " is a ",
      values[0].type_name(),
      ", not a ",
      wanted_name);
}

std::vector<TensorDict> nested_dicts(const std::vector<Value>& values) {
  std::vector<TensorDict> out;
  out.reserve(values.size());
  for (const Value& v : values) {
    out.push_back(v.tensordict());
  }
  return out;
}

// Python's error for leaves that cannot be stacked; `shapes` in the order
// of the elements, repeats dropped.
[[noreturn]] void throw_stack_error(
    const NestedKey& key, const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<std::vector<int64_t>> unique;
  for (const auto& s : shapes) {
    if (std::find(unique.begin(), unique.end(), s) == unique.end()) {
      unique.push_back(s);
    }
  }
  const std::string list = "[" +
                           detail::join_spelled(
                               unique,
                               [](const std::vector<int64_t>& shape) {
                                 return detail::size_repr(shape);
                               }) +
                           "]";
  TORCH_CHECK(
      false,
      "Failed to stack tensors within a tensordict under the key ",
      key.to_string(),
      ": their shapes are ",
      list,
      ". To read them, take the entry from each of tensordicts().");
  TORCH_INTERNAL_ASSERT(false);
}

void check_same_shapes(const std::vector<Value>& values, const NestedKey& key) {
  std::vector<std::vector<int64_t>> shapes;
  shapes.reserve(values.size());
  for (const Value& v : values) {
    shapes.push_back(v.shape());
  }
  for (const auto& s : shapes) {
    if (s != shapes.front()) {
      throw_stack_error(key, shapes);
    }
  }
}

at::Tensor stack_tensors(
    const std::vector<Value>& values, int64_t stack_dim, const NestedKey& key) {
  check_same_shapes(values, key);
  std::vector<at::Tensor> tensors;
  tensors.reserve(values.size());
  for (const Value& v : values) {
    tensors.push_back(v.tensor());
  }
  return at::stack(tensors, stack_dim);
}

// Stacks NonTensorData / NonTensorStack entries of one batch shape into one
// NonTensorStack, as Python's lazy stack does (even for equal values).
NonTensorStack stack_non_tensors(
    const std::vector<Value>& values, int64_t stack_dim, const NestedKey& key) {
  check_same_shapes(values, key);
  const std::vector<int64_t> shape = values.front().shape();
  int64_t outer = 1;
  for (int64_t d = 0; d < stack_dim; ++d) {
    outer *= shape[d];
  }
  int64_t inner = 1;
  for (size_t d = stack_dim; d < shape.size(); ++d) {
    inner *= shape[d];
  }
  auto flat_at = [](const Value& v, int64_t i) -> const Json& {
    return v.is_non_tensor_data() ? v.non_tensor_data().data()
                                  : v.non_tensor_stack().at(i);
  };
  std::vector<Json> flat;
  flat.reserve(outer * inner * values.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (const Value& v : values) {
      for (int64_t i = 0; i < inner; ++i) {
        flat.push_back(flat_at(v, o * inner + i));
      }
    }
  }
  std::vector<int64_t> out_shape = shape;
  out_shape.insert(
      out_shape.begin() + stack_dim, static_cast<int64_t>(values.size()));
  const Value& first = values.front();
  const std::optional<c10::Device> device =
      first.is_non_tensor_data() ? first.non_tensor_data().device()
                                 : first.non_tensor_stack().device();
  return NonTensorStack(std::move(flat), out_shape, device);
}

// Walks `key` through the elements and returns every element's entry.
std::vector<Value> walk_values(
    const std::vector<TensorDict>& elements, const NestedKey& key) {
  std::vector<TensorDict> level = elements;
  for (size_t depth = 0;; ++depth) {
    std::vector<Value> values = member_values(level, key[depth], key);
    if (depth + 1 == key.size()) {
      return values;
    }
    TENSORDICT_CHECK_KEY(
        values[0].is_tensordict(),
        key.prefix(depth + 1).to_string(),
        " is a ",
        values[0].type_name(),
        ", not a tensordict, so it has no entry ",
        detail::python_repr(key[depth + 1]),
        ".");
    check_same_kind(values, key.prefix(depth + 1));
    level = nested_dicts(values);
  }
}

// The values `values` point at, copied.
std::vector<Value> copy_values(c10::ArrayRef<const Value*> values) {
  std::vector<Value> out;
  out.reserve(values.size());
  for (const Value* v : values) {
    out.push_back(*v);
  }
  return out;
}

void collect_keys(
    const std::vector<TensorDict>& tds,
    detail::KeyPath& path,
    bool include_nested,
    bool leaves_only,
    std::vector<NestedKey>& out) {
  // Kinds matter only where the walk goes down.
  const detail::ZipOptions options{
      "stack", detail::ZipKeys::kCommon, /*check_kinds=*/false};
  detail::zip_level(
      impls_of(tds), path, options, [&](const Node& node, auto values) {
        if (include_nested && node.value.is_tensordict()) {
          detail::check_same_kind(values, path, options.verb);
          collect_keys(
              nested_dicts(copy_values(values)),
              path,
              include_nested,
              leaves_only,
              out);
        }
        if (!leaves_only || node.value.is_tensor()) {
          out.push_back(path.key());
        }
      });
}

TensorDict contiguous_impl(
    const LazyStackedTensorDict& stack, detail::KeyPath& path) {
  const std::vector<TensorDict>& tds = stack.tensordicts();
  const int64_t stack_dim = stack.stack_dim();
  TensorDict dense(
      stack.batch_size(),
      stack.device(),
      stack.has_names() ? stack.names() : DimNames{});
  const detail::ZipOptions options{"stack", detail::ZipKeys::kCommon};
  detail::zip_level(
      impls_of(tds), path, options, [&](const Node& node, auto pointers) {
        const std::vector<Value> values = copy_values(pointers);
        const NestedKey local{std::string_view(node.key)};
        switch (values[0].kind()) {
          case Value::Kind::kTensor:
            dense.set(local, stack_tensors(values, stack_dim, path.key()));
            break;
          case Value::Kind::kTensorDict:
            dense.set(
                local,
                contiguous_impl(
                    LazyStackedTensorDict(
                        nested_dicts(values),
                        stack_dim,
                        stack.stack_dim_name()),
                    path));
            break;
          case Value::Kind::kNonTensorData:
          case Value::Kind::kNonTensorStack:
            dense.set(
                local, Value(stack_non_tensors(values, stack_dim, path.key())));
            break;
          case Value::Kind::kLazyStack: {
            std::vector<TensorDict> dense_elements;
            for (const Value& v : values) {
              dense_elements.push_back(v.lazy_stack().contiguous());
            }
            dense.set(local, ::tensordict::stack(dense_elements, stack_dim));
            break;
          }
        }
      });
  return dense;
}

}  // namespace detail::stacked

namespace {

using detail::device_repr;
using detail::LazyStackedTensorDictImpl;
using detail::Node;
using detail::TensorDictImpl;
using detail::stacked::check_kind;
using detail::stacked::collect_keys;
using detail::stacked::common_nodes;
using detail::stacked::contiguous_impl;
using detail::stacked::nested_dicts;
using detail::stacked::stack_tensors;
using detail::stacked::walk_values;

// Python's slice.indices(n): the positions a slice selects.
std::vector<int64_t> slice_positions(
    const at::indexing::Slice& slice, int64_t n) {
  const int64_t step = slice.step().expect_int();
  auto adjust = [&](int64_t i) {
    if (i < 0) {
      i += n;
      return i < 0 ? (step < 0 ? int64_t{-1} : int64_t{0}) : i;
    }
    return i >= n ? (step < 0 ? n - 1 : n) : i;
  };
  const int64_t start = adjust(slice.start().expect_int());
  const int64_t stop = adjust(slice.stop().expect_int());
  std::vector<int64_t> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    out.push_back(i);
  }
  return out;
}

}  // namespace

// --- construction
// --------------------------------------------------------------

LazyStackedTensorDict::LazyStackedTensorDict(
    std::vector<TensorDict> tensordicts,
    int64_t stack_dim,
    std::optional<std::string> stack_dim_name)
    : impl_(c10::make_intrusive<LazyStackedTensorDictImpl>()) {
  TORCH_CHECK(!tensordicts.empty(), "items cannot be empty");
  const TensorDict& first = tensordicts.front();
  const int64_t ndim = first.batch_dims();
  const int64_t n = static_cast<int64_t>(tensordicts.size());
  TORCH_CHECK(
      stack_dim >= -(ndim + 1),
      "Couldn't infer stack dim from negative value, got stack_dim=",
      stack_dim,
      " for elements with ",
      ndim,
      " batch dims (expected a dim in [",
      -(ndim + 1),
      ", ",
      ndim,
      "])");
  if (stack_dim < 0) {
    stack_dim += ndim + 1;
  }
  for (size_t i = 1; i < tensordicts.size(); ++i) {
    const TensorDict& td = tensordicts[i];
    TORCH_CHECK(
        td.device() == first.device(),
        "devices differ, got ",
        device_repr(first.device()),
        " and ",
        device_repr(td.device()));
    TORCH_CHECK(
        td.batch_size() == first.batch_size(),
        "batch sizes in tensordicts differs, LazyStackedTensorDict cannot be "
        "created. Got td[0].batch_size=",
        detail::size_repr(first.batch_size()),
        " and td[",
        i,
        "].batch_size=",
        detail::size_repr(td.batch_size()),
        ".");
  }
  std::vector<int64_t> batch = first.batch_size().vec();
  TORCH_CHECK(
      stack_dim <= ndim,
      "Stack dim ",
      stack_dim,
      " is too big for batch size ",
      [&] {
        std::vector<int64_t> stacked = batch;
        stacked.push_back(n);
        return detail::size_repr(stacked);
      }(),
      ".");
  batch.insert(batch.begin() + stack_dim, n);
  impl_->batch_size = std::move(batch);
  impl_->device = first.device();
  impl_->stack_dim = stack_dim;
  impl_->stack_dim_name = std::move(stack_dim_name);
  impl_->tensordicts = std::move(tensordicts);
}

LazyStackedTensorDict::LazyStackedTensorDict(
    const LazyStackedTensorDict& other) = default;
LazyStackedTensorDict::LazyStackedTensorDict(
    LazyStackedTensorDict&& other) noexcept = default;
LazyStackedTensorDict& LazyStackedTensorDict::operator=(
    const LazyStackedTensorDict& other) & = default;
LazyStackedTensorDict& LazyStackedTensorDict::operator=(
    LazyStackedTensorDict&& other) & noexcept = default;
LazyStackedTensorDict::~LazyStackedTensorDict() = default;

LazyStackedTensorDict lazy_stack(
    const std::vector<TensorDict>& tensordicts,
    int64_t dim,
    std::optional<std::string> stack_dim_name) {
  return LazyStackedTensorDict(tensordicts, dim, std::move(stack_dim_name));
}

// --- structure
// -----------------------------------------------------------------

const std::vector<TensorDict>& LazyStackedTensorDict::tensordicts()
    const& noexcept {
  return impl_->tensordicts;
}

std::vector<TensorDict> LazyStackedTensorDict::tensordicts() const&& {
  return impl_->tensordicts;
}

int64_t LazyStackedTensorDict::stack_dim() const noexcept {
  return impl_->stack_dim;
}

c10::IntArrayRef LazyStackedTensorDict::batch_size() const& noexcept {
  return impl_->batch_size;
}

std::vector<int64_t> LazyStackedTensorDict::batch_size() const&& {
  return impl_->batch_size;
}

int64_t LazyStackedTensorDict::batch_dims() const noexcept {
  return static_cast<int64_t>(impl_->batch_size.size());
}

int64_t LazyStackedTensorDict::size(int64_t dim) const {
  const int64_t ndim = batch_dims();
  return impl_->batch_size[detail::wrap_dim(dim, ndim)];
}

c10::IntArrayRef LazyStackedTensorDict::size() const& noexcept {
  return impl_->batch_size;
}

std::vector<int64_t> LazyStackedTensorDict::size() const&& {
  return impl_->batch_size;
}

size_t LazyStackedTensorDict::num_keys() const {
  return common_nodes(impl_->tensordicts).size();
}

std::optional<c10::Device> LazyStackedTensorDict::device() const noexcept {
  return impl_->device;
}

const std::optional<std::string>& LazyStackedTensorDict::stack_dim_name()
    const noexcept {
  return impl_->stack_dim_name;
}

bool LazyStackedTensorDict::has_names() const {
  return impl_->tensordicts.front().has_names();
}

const std::string& LazyStackedTensorDict::python_class() const noexcept {
  return impl_->python_class;
}

LazyStackedTensorDict& LazyStackedTensorDict::set_python_class(
    std::string type_string) {
  detail::check_python_class(type_string);
  impl_->python_class = std::move(type_string);
  return *this;
}

DimNames LazyStackedTensorDict::names() const {
  const TensorDict& first = impl_->tensordicts.front();
  DimNames names =
      first.has_names()
          ? first.names()
          : DimNames(static_cast<size_t>(first.batch_dims()), std::nullopt);
  names.insert(names.begin() + impl_->stack_dim, impl_->stack_dim_name);
  return names;
}

// --- indexing
// ------------------------------------------------------------------

TensorDict LazyStackedTensorDict::at(int64_t index) const {
  const int64_t n = static_cast<int64_t>(impl_->tensordicts.size());
  TORCH_CHECK_INDEX(
      index >= -n && index < n,
      "index ",
      index,
      " is out of bounds for the stack dim of size ",
      n);
  return impl_->tensordicts[index < 0 ? index + n : index];
}

// NOTE [Lazy stack indexing]
// An index of the stack is split into the item that lands on the stack dim
// and the rest, which indexes every element: an integer there picks one
// element, a slice, a 1-D int64 tensor or a 1-D bool mask picks a list of
// them, which are stacked lazily again. The stack dim of the result is
// where torch puts that dim when indexing the dense stack. Ints are applied
// as selects (torch's rule), so only index tensors take part in the
// advanced-indexing layout: their dims replace the first of them when they
// are adjacent (only ints between them), else go first. The combinations
// whose layout would change by taking the stack item out, or that need one
// lazy stack per index element, are errors.
std::variant<TensorDict, LazyStackedTensorDict> LazyStackedTensorDict::index(
    c10::ArrayRef<at::indexing::TensorIndex> indices) const {
  using at::indexing::TensorIndex;
  const int64_t stack_dim = impl_->stack_dim;
  const int64_t n = static_cast<int64_t>(impl_->tensordicts.size());
  constexpr const char* kWhere = "LazyStackedTensorDict.index: ";

  // 0-dim integer tensors become integers; then the one batch-index
  // normalizer expands the Ellipsis and checks the dims (NOTE [Batch-dim
  // indices]).
  std::vector<TensorIndex> given;
  given.reserve(indices.size());
  for (const TensorIndex& idx : indices) {
    TORCH_CHECK(
        !idx.is_boolean(),
        kWhere,
        "a boolean (True/False) index is not supported");
    if (idx.is_tensor()) {
      const at::Tensor& t = idx.tensor();
      TORCH_CHECK_INDEX(
          t.scalar_type() == at::kLong || t.scalar_type() == at::kInt ||
              t.scalar_type() == at::kBool,
          kWhere,
          "index tensors must be int64, int32 or bool, got ",
          detail::dtype_name(t.scalar_type()));
      if (t.dim() == 0 && t.scalar_type() != at::kBool) {
        given.emplace_back(t.item<int64_t>());
        continue;
      }
    }
    given.push_back(idx);
  }
  std::vector<TensorIndex> items =
      detail::normalize_index(
          given, impl_->batch_size, DimNames{}, "LazyStackedTensorDict")
          .indices;
  // Cover every dim up to the stack dim.
  int64_t used = 0;
  for (const TensorIndex& idx : items) {
    used += detail::consumed_dims(idx);
  }
  while (used <= stack_dim) {
    items.emplace_back(at::indexing::Slice());
    ++used;
  }

  // The item on the stack dim, and the output dims before it.
  size_t k = 0;
  int64_t dim = 0;
  for (; k < items.size(); ++k) {
    const int64_t d = detail::consumed_dims(items[k]);
    if (dim + d > stack_dim) {
      break;
    }
    dim += d;
  }
  const TensorIndex& item = items[k];
  TORCH_CHECK(
      detail::consumed_dims(item) == 1,
      kWhere,
      "a bool mask over several batch dims that include the stack dim is not "
      "supported; index the elements (tensordicts()) instead");
  std::vector<TensorIndex> rest;
  rest.reserve(items.size() - 1);
  for (size_t i = 0; i < items.size(); ++i) {
    if (i != k) {
      rest.push_back(items[i]);
    }
  }
  auto index_element = [&](int64_t i) {
    const TensorDict& element = impl_->tensordicts[i];
    return rest.empty() ? element : element.index(rest);
  };

  if (item.is_integer()) {
    const int64_t i = item.integer().expect_int();
    TORCH_CHECK_INDEX(
        i >= -n && i < n,
        "index ",
        i,
        " is out of bounds for the stack dim of size ",
        n);
    return index_element(i < 0 ? i + n : i);
  }

  // Where torch puts the stack dim: basic dims before it, and the index
  // tensors' dims before it when their block comes first.
  int64_t basic_before = 0;
  bool tensors_before = false;
  bool tensors_after = false;
  int64_t tensor_dims = 0;
  size_t first_tensor = items.size();
  size_t last_tensor = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const TensorIndex& idx = items[i];
    if (idx.is_tensor() && i != k) {
      const at::Tensor& t = idx.tensor();
      tensor_dims = std::max<int64_t>(
          tensor_dims, t.scalar_type() == at::kBool ? 1 : t.dim());
      (i < k ? tensors_before : tensors_after) = true;
      first_tensor = std::min(first_tensor, i);
      last_tensor = i;
    } else if (i < k && (idx.is_slice() || idx.is_none())) {
      ++basic_before;
    }
  }
  std::vector<int64_t> positions;
  int64_t out_dim = basic_before;
  if (item.is_slice()) {
    TORCH_CHECK(
        !(tensors_before && tensors_after),
        kWhere,
        "index tensors on both sides of the stack dim are not supported; "
        "index the elements (tensordicts()) instead");
    bool adjacent = true;
    for (size_t i = first_tensor; i < last_tensor; ++i) {
      adjacent = adjacent && (items[i].is_tensor() || items[i].is_integer());
    }
    if (tensors_before || (tensors_after && !adjacent)) {
      out_dim += tensor_dims;
    }
    positions = slice_positions(item.slice(), n);
  } else {
    TORCH_CHECK(
        !tensors_before && !tensors_after,
        kWhere,
        "an index tensor on the stack dim cannot be combined with index "
        "tensors on other batch dims");
    const at::Tensor t = item.tensor().to(at::kCPU);
    TORCH_CHECK(
        t.dim() == 1,
        kWhere,
        "an index tensor on the stack dim must be 1-D (one lazy stack per "
        "index element is not supported), got ",
        t.dim(),
        " dims");
    if (t.scalar_type() == at::kBool) {
      TORCH_CHECK_INDEX(
          t.size(0) == n,
          "The shape of the mask ",
          t.sizes(),
          " at the stack dim does not match the size ",
          n,
          " of the stack dim");
      const at::Tensor picked = t.nonzero().view(-1);
      const int64_t* first = picked.data_ptr<int64_t>();
      positions.assign(first, first + picked.numel());
    } else {
      const at::Tensor picked = t.to(at::kLong).contiguous();
      for (int64_t i = 0; i < picked.numel(); ++i) {
        const int64_t p = picked.data_ptr<int64_t>()[i];
        TORCH_CHECK_INDEX(
            p >= -n && p < n,
            "index ",
            p,
            " is out of bounds for the stack dim of size ",
            n);
        positions.push_back(p < 0 ? p + n : p);
      }
    }
  }
  TORCH_CHECK(
      !positions.empty(),
      kWhere,
      "an index selecting no element of the stack dim is not supported (a "
      "lazy stack needs at least one element)");
  std::vector<TensorDict> selected;
  selected.reserve(positions.size());
  for (int64_t i : positions) {
    selected.push_back(index_element(i));
  }
  return LazyStackedTensorDict(
      std::move(selected), out_dim, impl_->stack_dim_name);
}

// --- reading
// -------------------------------------------------------------------

std::vector<NestedKey> LazyStackedTensorDict::keys(
    bool include_nested, bool leaves_only, bool sort) const {
  std::vector<NestedKey> out;
  detail::KeyPath path;
  collect_keys(impl_->tensordicts, path, include_nested, leaves_only, out);
  if (sort) {
    std::stable_sort(out.begin(), out.end());
  }
  return out;
}

bool LazyStackedTensorDict::contains(const NestedKey& key) const noexcept {
  std::vector<const TensorDictImpl*> level;
  for (const TensorDict& td : impl_->tensordicts) {
    level.push_back(td.unsafeGetImpl());
  }
  for (size_t depth = 0; depth < key.size(); ++depth) {
    for (const TensorDictImpl*& impl : level) {
      const Node* node = impl->find(key[depth]);
      if (node == nullptr) {
        return false;
      }
      if (depth + 1 < key.size()) {
        if (!node->value.is_tensordict()) {
          return false;
        }
        impl = node->value.tensordict().unsafeGetImpl();
      }
    }
  }
  return true;
}

at::Tensor LazyStackedTensorDict::get(const NestedKey& key) const {
  const std::vector<Value> values = walk_values(impl_->tensordicts, key);
  check_kind(values, key, Value::Kind::kTensor, "Tensor");
  return stack_tensors(values, impl_->stack_dim, key);
}

LazyStackedTensorDict LazyStackedTensorDict::get_tensordict(
    const NestedKey& key) const {
  const std::vector<Value> values = walk_values(impl_->tensordicts, key);
  check_kind(values, key, Value::Kind::kTensorDict, "TensorDict");
  try {
    return LazyStackedTensorDict(
        nested_dicts(values), impl_->stack_dim, impl_->stack_dim_name);
  } catch (c10::Error& e) {
    TORCH_RETHROW(e, "while stacking the entry ", key.to_string());
  }
}

TensorDict LazyStackedTensorDict::contiguous() const {
  detail::KeyPath path;
  return contiguous_impl(*this, path);
}

TENSORDICT_END_NAMESPACE
