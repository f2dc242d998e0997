// Printing: Python's compact repr (its default, see NOTE [Compact repr]) and
// its detailed repr (`tensordict.set_printoptions(compact=False)`).

#include <algorithm>
#include <ostream>

#include "core/tensor_dict_impl.h"
#include "repr/compact_repr.h"
#include "repr/value_repr.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE

namespace detail {

// Python builds the detailed repr bottom-up: each nested repr is indented
// whole with textwrap.indent, and the "key: value" lines are sorted as
// strings (so "a1: ..." sorts before "a: ...", since '1' < ':').
std::string detailed_repr(const TensorDict& td, const PrintOptions& options) {
  const auto& impl = *td.unsafeGetImpl();
  std::vector<std::string> fields;
  fields.reserve(impl.nodes().size());
  for (const auto& node : impl.nodes()) {
    fields.push_back(node->key + ": " + value_repr(node->value, options));
  }
  if (options.sort_keys() == SortKeys::kAlphabetical) {
    std::sort(fields.begin(), fields.end());
  }
  std::string joined;
  for (size_t i = 0; i < fields.size(); ++i) {
    joined += i > 0 ? ",\n" : "";
    joined += fields[i];
  }
  std::string body = "fields={\n" + indent_lines(joined, "    ") + "}";
  if (options.show_batch_size()) {
    body += ",\nbatch_size=" + size_repr(impl.batch_size);
  }
  if (options.show_device()) {
    body += ",\ndevice=" + device_repr(impl.device);
  }
  body += c10::str(",\nis_shared=", python_bool(impl.shared), ")");
  return "TensorDict(\n" + indent_lines(body, "    ");
}

}  // namespace detail

namespace {

std::string td_compact_repr(const TensorDict& td, const PrintOptions& options) {
  const auto& impl = *td.unsafeGetImpl();
  return detail::compact_repr(
      "TensorDict",
      detail::compact_header(impl.batch_size, impl.device, options),
      detail::compact_entries(td, options));
}

}  // namespace

std::string TensorDict::repr() const {
  const PrintOptions options = get_printoptions();
  return options.compact() ? td_compact_repr(*this, options)
                           : detail::detailed_repr(*this, options);
}

std::string TensorDict::repr_compact() const {
  return td_compact_repr(*this, get_printoptions());
}

std::string TensorDict::repr_detailed() const {
  return detail::detailed_repr(*this, get_printoptions());
}

TENSORDICT_END_NAMESPACE
