// The reprs of non-tensor values, as Python prints NonTensorData and
// NonTensorStack and the objects their JSON decodes to.

#include <c10/util/StringUtil.h>

#include <string>

#include "tensordict/json.h"
#include "tensordict/non_tensor.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

// Python's repr() of the object a JSON value decodes to.
void append_python_repr(std::string& out, const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      out += "None";
      break;
    case Json::value_t::boolean:
      out += value.get<bool>() ? "True" : "False";
      break;
    case Json::value_t::string:
      out += detail::python_repr(value.get_ref<const std::string&>());
      break;
    case Json::value_t::number_float:
      out += detail::float_repr(value.get<double>());
      break;
    case Json::value_t::array: {
      out += '[';
      bool first = true;
      for (const Json& item : value) {
        out += first ? "" : ", ";
        first = false;
        append_python_repr(out, item);
      }
      out += ']';
      break;
    }
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, item] : value.items()) {
        out += first ? "" : ", ";
        first = false;
        out += detail::python_repr(k);
        out += ": ";
        append_python_repr(out, item);
      }
      out += '}';
      break;
    }
    default:  // integers and binary
      out += value.dump();
      break;
  }
}

}  // namespace

std::string python_str(const Json& value) {
  if (value.is_string()) {
    return value.get<std::string>();
  }
  std::string out;
  append_python_repr(out, value);
  return out;
}

std::string NonTensorData::repr() const {
  return c10::str(
      "NonTensorData(data=",
      python_str(*data_),
      ", batch_size=",
      detail::size_repr(batch_size_),
      ", device=",
      detail::device_repr(device_),
      ")");
}

std::string NonTensorStack::repr() const {
  std::string list;
  append_python_repr(list, tolist());
  const std::string body = c10::str(
      list,
      ",\nbatch_size=",
      detail::size_repr(batch_size_),
      ",\ndevice=",
      detail::device_repr(device_),
      ")");
  return "NonTensorStack(\n" + detail::indent_lines(body, "    ");
}

TENSORDICT_END_NAMESPACE
