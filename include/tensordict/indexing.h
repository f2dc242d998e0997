#pragma once

/// @file
/// Indexing a TensorDict over its batch dims. This header pulls in
/// ATen/TensorIndexing.h (so tensor_dict.h does not have to).
//
// Python                      C++
// --------------------------  ------------------------------------------
// td[0]                       td.index({0})
// td[-1, 2]                   td.index({-1, 2})
// td[1:3]                     td.index({Slice(1, 3)})
// td[::2]                     td.index({Slice(None, None, 2)})
// td[..., 0]                  td.index({Ellipsis, 0})
// td[None]                    td.index({None})
// td[mask]                    td.index({mask})          (a bool tensor)
// td[idx]                     td.index({idx})           (an int64 tensor)
// td[idx] = other             td.index_put_({idx}, other)
// td[idx] = 0                 td.index_put_({idx}, 0)
//
// with `using namespace at::indexing;` (or tensordict::indexing) for Slice,
// None and Ellipsis.

#include <ATen/TensorIndexing.h>

#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
/// Slice, None and Ellipsis for `index()`: `using namespace` it.
namespace indexing {
using at::indexing::Ellipsis;
using at::indexing::None;
using at::indexing::Slice;
using at::indexing::TensorIndex;
}  // namespace indexing
TENSORDICT_END_NAMESPACE
