#pragma once

// Python's reprs of the plain values a state dict prints: a torch.device, a
// JSON value as the Python object it stands for, and an OrderedDict; not
// API.

#include <c10/core/Device.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensordict/fwd.h"
#include "tensordict/json.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Returns Python's repr of a torch.device (`device(type='cuda', index=0)`),
/// or `None` when `device` is unset.
std::string torch_device_repr(const std::optional<c10::Device>& device);
/// Returns Python's repr of the object `value` stands for: a quoted string,
/// or the number, bool, None, list or dict as `str()` prints it.
std::string json_value_repr(const Json& value);
/// Returns Python 3.11's repr of an OrderedDict of (key, repr) pairs:
/// `OrderedDict([('a', 1)])`, `OrderedDict()`.
std::string ordered_dict_repr(
    const std::vector<std::pair<std::string, std::string>>& items);

}  // namespace detail
TENSORDICT_END_NAMESPACE
