#include "tensor_dict/batch_transform.h"

#include <ATen/TensorIndexing.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/zeros.h>

#include <algorithm>

#include "tensordict/json.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

LazyStackAtoms lazy_stack_atoms(
    const LazyStackedTensorDict& stack, size_t root_dims) {
  const auto batch = stack.batch_size();
  const auto s = static_cast<size_t>(stack.stack_dim());
  TORCH_INTERNAL_ASSERT(s < root_dims && root_dims <= batch.size());
  // Each element's dicts at every position of its first root_dims - 1
  // dims (the root dims without the stack dim), row-major; unbinding keeps
  // them views, so writes through an atom reach the element.
  std::vector<std::vector<TensorDict>> cut;
  for (const TensorDict& element : stack.tensordicts()) {
    std::vector<TensorDict> level{element};
    for (size_t d = 0; d + 1 < root_dims; ++d) {
      std::vector<TensorDict> next;
      for (const TensorDict& td : level) {
        for (TensorDict& piece : td.unbind(0)) {
          next.push_back(std::move(piece));
        }
      }
      level = std::move(next);
    }
    cut.push_back(std::move(level));
  }
  // Walk the root positions row-major; the stack dim picks the element and
  // the other dims, row-major among themselves, the atom within it.
  int64_t count = 1;
  for (size_t d = 0; d < root_dims; ++d) {
    count *= batch[d];
  }
  LazyStackAtoms out;
  out.atoms.reserve(count);
  out.element_of = at::empty({count}, at::TensorOptions().dtype(at::kLong));
  int64_t* element_of = out.element_of.data_ptr<int64_t>();
  for (int64_t flat = 0; flat < count; ++flat) {
    int64_t rest = flat;
    int64_t element = 0;
    int64_t within = 0;
    int64_t within_stride = 1;
    for (size_t d = root_dims; d-- > 0;) {
      const int64_t coord = rest % batch[d];
      rest /= batch[d];
      if (d == s) {
        element = coord;
      } else {
        within += coord * within_stride;
        within_stride *= batch[d];
      }
    }
    out.atoms.push_back(cut[element][within]);
    element_of[flat] = element;
  }
  out.positions = at::arange(count, at::TensorOptions().dtype(at::kLong))
                      .view(batch.slice(0, root_dims));
  return out;
}

namespace {

// Stacks the atoms at `picked` (any shape) densely into one dict of batch
// size picked's shape + the atoms' own.
TensorDict stack_atoms(const LazyStackAtoms& atoms, const at::Tensor& picked) {
  const at::Tensor flat = picked.contiguous().view(-1);
  const int64_t* pos = flat.data_ptr<int64_t>();
  if (picked.dim() == 0) {
    return atoms.atoms[pos[0]];
  }
  std::vector<TensorDict> chosen;
  chosen.reserve(flat.numel());
  for (int64_t i = 0; i < flat.numel(); ++i) {
    chosen.push_back(atoms.atoms[pos[i]]);
  }
  TensorDict dense =
      chosen.empty()
          ? atoms.atoms[0].unsqueeze(0).index({at::empty({0}, at::kLong)})
          : stack(chosen, 0);
  std::vector<int64_t> shape = picked.sizes().vec();
  const auto atom_batch = atoms.atoms[0].batch_size();
  shape.insert(shape.end(), atom_batch.begin(), atom_batch.end());
  return dense.reshape(shape);
}

}  // namespace

Value assemble_atoms(
    const LazyStackAtoms& atoms,
    const at::Tensor& picked,
    const LazyStackedTensorDict& like,
    std::string_view key) {
  TORCH_CHECK(
      picked.numel() == 0 || picked.min().item<int64_t>() >= 0,
      "cannot fill new positions of the lazy stack at '",
      key,
      "': a lazy stack has no value to put there");
  const at::Tensor elements = atoms.element_of.index({picked});
  if (picked.numel() == 0 ||
      (elements.min().item<int64_t>() == elements.max().item<int64_t>())) {
    return Value(stack_atoms(atoms, picked));
  }
  for (int64_t t = 0; t < picked.dim(); ++t) {
    const at::Tensor per_slice =
        elements.movedim(t, 0).reshape({picked.size(t), -1});
    if (!at::equal(
            std::get<0>(per_slice.max(1)), std::get<0>(per_slice.min(1)))) {
      continue;
    }
    std::vector<TensorDict> slices;
    slices.reserve(picked.size(t));
    for (int64_t i = 0; i < picked.size(t); ++i) {
      slices.push_back(stack_atoms(atoms, picked.select(t, i)));
    }
    return Value(lazy_stack(slices, t, like.stack_dim_name()));
  }
  try {
    return Value(stack_atoms(atoms, picked));
  } catch (const c10::Error& e) {
    C10_THROW_ERROR(
        Error,
        c10::str(
            "the lazy stack at '",
            key,
            "' has elements of different shapes, and the result mixes them "
            "along every dim, so it is neither a lazy stack nor a dense "
            "dict: ",
            e.msg()));
  }
}

at::Tensor stack_positions(const NonTensorStack& stack) {
  return at::arange(
             static_cast<int64_t>(stack.values().size()),
             at::TensorOptions().dtype(at::kLong))
      .view(stack.batch_size());
}

Value gather_stack(
    const NonTensorStack& stack,
    const at::Tensor& positions,
    std::optional<c10::Device> device) {
  const at::Tensor flat = positions.contiguous().view(-1);
  const int64_t* pos = flat.data_ptr<int64_t>();
  if (positions.dim() == 0) {
    return Value(NonTensorData(stack.at(pos[0]), {}, device));
  }
  std::vector<Json> values;
  values.reserve(flat.numel());
  for (int64_t i = 0; i < flat.numel(); ++i) {
    values.push_back(pos[i] < 0 ? Json(nullptr) : stack.at(pos[i]));
  }
  return Value(NonTensorStack(std::move(values), positions.sizes(), device));
}

at::Tensor data_positions(const NonTensorData& data) {
  return at::zeros(data.batch_size(), at::TensorOptions().dtype(at::kLong));
}

Value gather_data(const NonTensorData& data, const at::Tensor& positions) {
  const at::Tensor flat = positions.contiguous().view(-1);
  const int64_t* pos = flat.data_ptr<int64_t>();
  const int64_t n = flat.numel();
  if (std::all_of(pos, pos + n, [](int64_t p) { return p >= 0; })) {
    NonTensorData out = data;
    out.set_batch_size(positions.sizes());
    return Value(std::move(out));
  }
  std::vector<Json> values;
  values.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    values.push_back(pos[i] < 0 ? Json(nullptr) : data.data());
  }
  return Value(
      NonTensorStack(std::move(values), positions.sizes(), data.device()));
}

TensorDict carried_dict(
    const TensorDictImpl& src, const BatchChange& change, size_t root_dims) {
  BatchChange carried =
      carry_change(change, src.batch_size, src.names, root_dims);
  TensorDict out = make_tensordict(
      std::move(carried.batch_size), src.device, std::move(carried.names));
  out.unsafeGetImpl()->python_class = src.python_class;
  return out;
}

BatchChange carry_change(
    const BatchChange& change,
    c10::IntArrayRef old_batch,
    const DimNames& old_names,
    size_t root_dims) {
  TORCH_INTERNAL_ASSERT(old_batch.size() >= root_dims);
  BatchChange out;
  out.batch_size = change.batch_size;
  out.batch_size.insert(
      out.batch_size.end(), old_batch.begin() + root_dims, old_batch.end());
  if (!change.names.empty() || !old_names.empty()) {
    out.names = change.names.empty() ? DimNames(change.batch_size.size())
                                     : change.names;
    for (size_t i = root_dims; i < old_batch.size(); ++i) {
      out.names.push_back(i < old_names.size() ? old_names[i] : std::nullopt);
    }
    bool any = false;
    for (const auto& name : out.names) {
      any = any || name.has_value();
    }
    if (!any) {
      out.names.clear();
    }
  }
  return out;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
