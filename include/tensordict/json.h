#pragma once

/// @file
/// The complete JSON type behind `tensordict::Json`. The other public
/// headers see only <nlohmann/json_fwd.hpp>, so a translation unit that
/// builds dicts from tensors, strings and numbers does not parse json.hpp;
/// include this header to read non-tensor values (`NonTensorData::data()`,
/// `TensorDict::get_non_tensor`) or to build them from JSON.
/// <tensordict/tensordict.h> includes it.

#include <nlohmann/json.hpp>

#include "tensordict/fwd.h"
