#pragma once

/// @file
/// All the leaves of a dict in one tensor of features, and back (Python
/// tensordict 0.15's `td.pack()` and `PackLayout.unpack`): the one-tensor
/// contract of deployment stacks, with Python's column order. A free
/// function rather than a TensorDict member, so that tensor_dict.h stays as
/// it is; tensordict::nn::pack (tensordict/aoti.h) is the same function.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "tensordict/export.h"
#include "tensordict/nested_key.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE

/// The layout of a dict packed by `pack` (Python's `tensordict.PackLayout`):
/// each leaf's columns in the packed tensor, and what `unpack` needs to
/// rebuild the dict. Compares by value.
///
/// Example:
/// ```
///   auto [flat, layout] = pack(td);      // [*batch, F]
///   TensorDict back = layout.unpack(flat.index({Slice(0, 2)}));
/// ```
struct TENSORDICT_API PackLayout {
  /// The leaf keys, in column order.
  std::vector<NestedKey> keys;
  /// Each leaf's feature shape (after the dict's batch dims).
  std::vector<std::vector<int64_t>> shapes;
  /// The packed dim of the packed tensor, counted from the end.
  int64_t dim = -1;
  /// Each nested dict's key and batch shape after the root's batch dims;
  /// parents come before their children.
  std::vector<std::pair<NestedKey, std::vector<int64_t>>> nested;
  /// The packed dict's device, if it had one.
  std::optional<c10::Device> device;
  /// The first column of each leaf.
  std::vector<int64_t> offsets;
  /// The number of columns.
  int64_t numel = 0;

  /// Rebuilds a dict whose leaves are views of `flat`; its batch size is
  /// `flat`'s shape without the packed dim. Throws c10::IndexError if `dim`
  /// is out of range for `flat`, c10::ValueError if `flat` has not `numel`
  /// entries along it.
  [[nodiscard]] TensorDict unpack(const at::Tensor& flat) const;
  /// Returns true if both layouts are the same.
  bool operator==(const PackLayout& other) const;
  /// Returns true if the layouts differ.
  bool operator!=(const PackLayout& other) const {
    return !(*this == other);
  }
};

/// Packs every leaf of `td` into one contiguous tensor (Python's
/// `td.pack(dim, layout=layout)`): each leaf is flattened after the batch
/// dims and the leaves are concatenated in `keys(true, true, sort=true)`
/// order (or `layout`'s), along `dim` (in [-(batch_dims + 1), batch_dims]);
/// the columns are those Python gives. Returns a copy and its layout. Throws
/// c10::IndexError for `dim`, c10::TypeError for a non-tensor entry or
/// mixed dtypes, c10::Error for mixed devices or a lazy stack, KeyError or
/// c10::ValueError if the leaves differ from `layout`'s.
TENSORDICT_API std::pair<at::Tensor, PackLayout> pack(
    const TensorDict& td, int64_t dim = -1, const PackLayout* layout = nullptr);

TENSORDICT_END_NAMESPACE
