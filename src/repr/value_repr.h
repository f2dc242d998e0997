#pragma once

// The repr of one entry, shared by the reprs of TensorDict,
// LazyStackedTensorDict and TensorClass: one switch over the entry kinds
// (repr/value_repr.cpp).

#include <string>

#include "tensordict/fwd.h"
#include "tensordict/print_options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Returns the repr of one entry as a TensorDict's detailed repr prints it
/// (the tensor line, the nested dict's detailed repr, or the non-tensor's
/// repr), with the current print options.
std::string value_repr(const Value& value);
/// Same, with `options` (whose `compact` is ignored: a detailed repr nests
/// detailed reprs).
std::string value_repr(const Value& value, const PrintOptions& options);

/// Returns Python's detailed repr of `td` with `options`, ignoring
/// `options.compact()` (src/repr/tensor_dict_repr.cpp).
std::string detailed_repr(const TensorDict& td, const PrintOptions& options);

}  // namespace detail
TENSORDICT_END_NAMESPACE
