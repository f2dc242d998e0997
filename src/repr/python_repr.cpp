// Python's reprs of plain values; see repr/python_repr.h.

#include "repr/python_repr.h"

#include "tensordict/non_tensor.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

std::string torch_device_repr(const std::optional<c10::Device>& device) {
  if (!device) {
    return "None";
  }
  std::string out =
      "device(type='" + c10::DeviceTypeName(device->type(), true) + "'";
  if (device->has_index()) {
    out += ", index=" + std::to_string(device->index());
  }
  return out + ")";
}

std::string json_value_repr(const Json& value) {
  return value.is_string() ? python_repr(value.get_ref<const std::string&>())
                           : python_str(value);
}

std::string ordered_dict_repr(
    const std::vector<std::pair<std::string, std::string>>& items) {
  if (items.empty()) {
    return "OrderedDict()";
  }
  std::string out = "OrderedDict([";
  for (size_t i = 0; i < items.size(); ++i) {
    out += (i > 0 ? ", (" : "(") + python_repr(items[i].first) + ", " +
           items[i].second + ")";
  }
  return out + "])";
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
