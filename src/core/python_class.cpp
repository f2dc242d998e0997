#include "core/python_class.h"

#include <c10/util/Exception.h>

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

std::string class_name_of(std::string_view type_string) {
  constexpr std::string_view kPrefix = "<class '";
  constexpr std::string_view kSuffix = "'>";
  if (type_string.size() <= kPrefix.size() + kSuffix.size() ||
      type_string.substr(0, kPrefix.size()) != kPrefix ||
      type_string.substr(type_string.size() - kSuffix.size()) != kSuffix) {
    return "";
  }
  std::string_view path = type_string.substr(
      kPrefix.size(), type_string.size() - kPrefix.size() - kSuffix.size());
  const size_t dot = path.find_last_of('.');
  return std::string(
      dot == std::string_view::npos ? path : path.substr(dot + 1));
}

void check_python_class(std::string_view type_string) {
  TORCH_CHECK_VALUE(
      type_string.empty() || !class_name_of(type_string).empty(),
      "a Python class is spelled \"<class 'module.Name'>\", got '",
      type_string,
      "'");
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
