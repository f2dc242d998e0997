#pragma once

/// @file
/// A TensorDict as a torch::data dataset, so that libtorch's
/// `torch::data::make_data_loader` serves batches of a (memory-mapped)
/// TensorDict. Not included by <tensordict/tensordict.h>: it includes
/// torch/data, which is heavy.

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/data/datasets/base.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include "tensordict/indexing.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE

/// A torch::data batch dataset over batch dim 0 of a TensorDict: each batch
/// is the dict gathered at the sampler's indices, one index per leaf
/// (`td.index({indices})`), so a memory-mapped dict reads only the rows of
/// the batch. Copying the dataset aliases the dict (the data loader's
/// worker threads share it; concurrent reads are safe).
///
/// Example:
/// ```
///   auto loader = torch::data::make_data_loader<
///       torch::data::samplers::SequentialSampler>(
///       TensorDictDataset(TensorDict::load_memmap("/data")),
///       torch::data::DataLoaderOptions().batch_size(64).workers(2));
///   for (const TensorDict& batch : *loader) { ... }
/// ```
class TensorDictDataset : public torch::data::datasets::
                              BatchDataset<TensorDictDataset, TensorDict> {
 public:
  /// Serves `data`, which must have at least one batch dim; throws
  /// ValueError otherwise.
  explicit TensorDictDataset(TensorDict data) : data_(std::move(data)) {
    TORCH_CHECK_VALUE(
        data_.batch_dims() >= 1,
        "TensorDictDataset: the dict needs a batch dim to index, but its "
        "batch size is []");
  }

  /// Returns the rows `indices` of the dict, gathered (a copy); throws
  /// IndexError for an index past the end.
  TensorDict get_batch(c10::ArrayRef<size_t> indices) override {
    at::Tensor index =
        at::empty({static_cast<int64_t>(indices.size())}, at::kLong);
    int64_t* out = index.data_ptr<int64_t>();
    for (const size_t i : indices) {
      *out++ = static_cast<int64_t>(i);
    }
    return data_.index({index});
  }

  /// Returns the size of batch dim 0.
  std::optional<size_t> size() const override {
    return static_cast<size_t>(data_.batch_size()[0]);
  }

  /// Returns the dict served (an alias).
  const TensorDict& data() const noexcept {
    return data_;
  }

 private:
  TensorDict data_;
};

TENSORDICT_END_NAMESPACE
