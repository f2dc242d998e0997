// Printing in the shape of Python's detailed repr
// (`tensordict.set_printoptions(compact=False)`).

#include <ATen/MapAllocator.h>

#include <algorithm>
#include <ostream>

#include "detail/format.h"
#include "detail/tensor_dict_impl.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

// A CPU tensor is shared when its storage is a shared-memory mapping, as
// Python's Tensor.is_shared() reports.
bool tensor_is_shared(const at::Tensor& t) {
  if (!t.has_storage() || t.device().type() != c10::kCPU) {
    return false;
  }
  const auto* map = at::MapAllocator::fromDataPtr(t.storage().data_ptr());
  return map != nullptr && (map->flags() & at::ALLOCATOR_MAPPED_SHAREDMEM);
}

const char* python_bool(bool b) {
  return b ? "True" : "False";
}

std::string device_repr(const std::optional<c10::Device>& device) {
  return device ? device->str() : "None";
}

std::string td_repr(const TensorDict& td);

std::string value_repr(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kTensor: {
      const at::Tensor& t = value.tensor();
      return c10::str(
          "Tensor(shape=",
          detail::size_repr(t.sizes()),
          ", device=",
          t.device().str(),
          ", dtype=",
          detail::dtype_name(t.scalar_type()),
          ", is_shared=",
          python_bool(tensor_is_shared(t)),
          ")");
    }
    case Value::Kind::kTensorDict:
      return td_repr(value.tensordict());
    case Value::Kind::kNonTensorData:
      return value.non_tensor_data().repr();
    case Value::Kind::kNonTensorStack:
      return value.non_tensor_stack().repr();
  }
  return {};
}

// Python builds the repr bottom-up: each nested repr is indented whole with
// textwrap.indent, and the "key: value" lines are sorted as strings (so
// "a1: ..." sorts before "a: ...", since '1' < ':').
std::string td_repr(const TensorDict& td) {
  const auto& impl = *td.unsafeGetImpl();
  std::vector<std::string> fields;
  fields.reserve(impl.nodes().size());
  for (const auto& node : impl.nodes()) {
    fields.push_back(node->key + ": " + value_repr(node->value));
  }
  std::sort(fields.begin(), fields.end());
  std::string joined;
  for (size_t i = 0; i < fields.size(); ++i) {
    joined += i > 0 ? ",\n" : "";
    joined += fields[i];
  }
  const std::string body = c10::str(
      "fields={\n",
      detail::indent_lines(joined, "    "),
      "},\nbatch_size=",
      detail::size_repr(impl.batch_size),
      ",\ndevice=",
      device_repr(impl.device),
      ",\nis_shared=",
      python_bool(impl.shared),
      ")");
  return "TensorDict(\n" + detail::indent_lines(body, "    ");
}

} // namespace

std::string TensorDict::repr() const {
  return td_repr(*this);
}

TENSORDICT_END_NAMESPACE
