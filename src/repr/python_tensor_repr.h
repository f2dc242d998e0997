#pragma once

// Python's repr of a tensor (torch/_tensor_str.py with the default print
// options); not API. See NOTE [Python tensor repr].

#include <ATen/core/Tensor.h>

#include <string>

#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Returns what Python's `repr(tensor)` prints with torch's default print
/// options (precision 4, threshold 1000, edge items 3, line width 80):
/// `tensor([0.5000, 1.0000])`, `tensor([1, 2], dtype=torch.int32)`,
/// `tensor(..., device='meta', size=(2,))`. A sparse tensor prints its
/// dense values (Python prints its indices and values).
std::string python_tensor_repr(const at::Tensor& tensor);

}  // namespace detail
TENSORDICT_END_NAMESPACE
