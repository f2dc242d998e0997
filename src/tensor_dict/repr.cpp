// Printing in the shape of Python's detailed repr
// (`tensordict.set_printoptions(compact=False)`).

#include <algorithm>
#include <ostream>

#include "detail/format.h"
#include "detail/tensor_dict_impl.h"
#include "detail/value_repr.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

using detail::python_bool;

// Python builds the repr bottom-up: each nested repr is indented whole with
// textwrap.indent, and the "key: value" lines are sorted as strings (so
// "a1: ..." sorts before "a: ...", since '1' < ':').
std::string td_repr(const TensorDict& td) {
  const auto& impl = *td.unsafeGetImpl();
  std::vector<std::string> fields;
  fields.reserve(impl.nodes().size());
  for (const auto& node : impl.nodes()) {
    fields.push_back(node->key + ": " + detail::value_repr(node->value));
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
      detail::device_repr(impl.device),
      ",\nis_shared=",
      python_bool(impl.shared),
      ")");
  return "TensorDict(\n" + detail::indent_lines(body, "    ");
}

}  // namespace

std::string TensorDict::repr() const {
  return td_repr(*this);
}

TENSORDICT_END_NAMESPACE
