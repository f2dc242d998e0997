#pragma once

// The Python class a dict or a lazy stack carries ("<class 'module.Name'>"),
// as checked when it is set and spelled in reprs and metadata: below both
// the dicts that hold it and the formats that write it.

#include <string>
#include <string_view>

#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Returns the class name in a `_type` string: "Name" for
/// "<class 'module.Outer.Name'>", or "" if it is not of that form.
std::string class_name_of(std::string_view type_string);

/// Throws ValueError unless `type_string` is empty (no class) or reads
/// "<class 'module.Name'>": what `set_python_class` accepts.
void check_python_class(std::string_view type_string);

}  // namespace detail
TENSORDICT_END_NAMESPACE
