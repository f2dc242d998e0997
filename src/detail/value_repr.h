#pragma once

// The repr of one entry, shared by the reprs of TensorDict,
// LazyStackedTensorDict and TensorClass. It lives in the core (value.cpp),
// not in detail/format, which knows torch types only.

#include <string>

#include "tensordict/fwd.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Returns the repr of one entry as a TensorDict's repr prints it (the
/// tensor line, the nested dict's repr, or the non-tensor's repr).
std::string value_repr(const Value& value);

}  // namespace detail
TENSORDICT_END_NAMESPACE
