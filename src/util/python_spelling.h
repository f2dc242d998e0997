#pragma once

// Python spellings of torch things, for reprs and error messages.

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Wraps a possibly negative dim into [0, ndim); throws IndexError with
/// torch's wording when it is out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim);

/// Returns Python's name of a dtype: "torch.float32".
std::string dtype_name(c10::ScalarType dtype);
/// Returns `spell(item)` for each of `items`, separated by `separator`:
/// the one loop behind the list, tuple and set spellings of reprs and
/// messages ("[" + join_spelled(...) + "]").
template <typename Items, typename Spell>
std::string join_spelled(
    const Items& items, const Spell& spell, std::string_view separator = ", ") {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) {
      out += separator;
    }
    first = false;
    out += spell(item);
  }
  return out;
}

/// Returns Python's repr of a size: "torch.Size([4, 3])".
std::string size_repr(c10::IntArrayRef sizes);
/// Returns Python's repr of a shape as a tuple: "(2, 5)", "(2,)", "()".
std::string python_tuple(c10::IntArrayRef sizes);
/// Returns Python's repr of a str: 'text'.
std::string python_repr(std::string_view text);
/// Returns Python's repr of the sorted list of `names`: ['a', 'b'].
std::string sorted_list_repr(std::vector<std::string_view> names);
/// Returns Python's repr of a float: shortest round-trip digits, fixed
/// notation for exponents in [-4, 16), "1.0" for whole numbers.
std::string float_repr(double value);
/// Prefixes every line holding more than whitespace, as Python's
/// `textwrap.indent` does.
std::string indent_lines(std::string_view text, std::string_view prefix);
/// Returns Python's repr of a list of names: ['x', None]. Takes what
/// DimNames (tensordict/options.h, on core) names, spelled out: util/ is
/// below core/.
std::string names_repr(const std::vector<std::optional<std::string>>& names);
/// Returns Python's repr of a bool: "True" or "False".
const char* python_bool(bool b);
/// Returns a device as Python prints it ("cpu", "cuda:0"), or "None".
std::string device_repr(const std::optional<c10::Device>& device);
/// Returns the line Python's detailed repr prints for a tensor:
/// `Tensor(shape=torch.Size([4]), device=cpu, dtype=torch.float32,
/// is_shared=False)`.
std::string tensor_repr(
    c10::IntArrayRef shape,
    c10::Device device,
    c10::ScalarType dtype,
    bool shared);
}  // namespace detail
TENSORDICT_END_NAMESPACE
