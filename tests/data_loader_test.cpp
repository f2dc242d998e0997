// TensorDictDataset (tensordict/data_loader.h) under
// torch::data::make_data_loader.
#include <tensordict/data_loader.h>

#include <algorithm>
#include <numeric>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace data_loader_test {

using tensordict::TensorDict;
using tensordict::TensorDictDataset;
using tensordict::testing::TempDir;

namespace {

// 10 memory-mapped items: labels i, images [2, 3] filled with i, and a
// nested dict whose "score" is i / 2.
TensorDict make_dataset(const TempDir& dir) {
  const at::Tensor labels = torch::arange(10, torch::kLong);
  TensorDict td(
      {{"images",
        labels.to(torch::kUInt8).view({10, 1, 1}).expand({10, 2, 3}).clone()},
       {"labels", labels},
       {"meta", {{"score", labels.to(torch::kFloat) / 2}}}},
      {10});
  return td.memmap(tensordict::MemmapOptions(dir.str()));
}

// Checks that every row of `batch` is the item its label names.
void expect_consistent(const TensorDict& batch) {
  const at::Tensor labels = batch.get("labels");
  const int64_t n = labels.size(0);
  EXPECT_EQ(batch.batch_size(), std::vector<int64_t>({n}));
  EXPECT_TRUE(torch::equal(
      batch.get("images"),
      labels.to(torch::kUInt8).view({n, 1, 1}).expand({n, 2, 3})));
  EXPECT_TRUE(
      torch::equal(batch.get({"meta", "score"}), labels.to(torch::kFloat) / 2));
}

}  // namespace

TEST(DataLoaderTest, SequentialSamplerServesBatchesInOrder) {
  TempDir dir;
  auto loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          TensorDictDataset(make_dataset(dir)),
          torch::data::DataLoaderOptions().batch_size(4));
  std::vector<std::vector<int64_t>> labels;
  for (const TensorDict& batch : *loader) {
    expect_consistent(batch);
    const at::Tensor l = batch.get("labels");
    labels.emplace_back(
        l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + l.numel());
  }
  EXPECT_EQ(
      labels,
      (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
}

TEST(DataLoaderTest, RandomSamplerWithWorkersServesEveryItemOnce) {
  TempDir dir;
  torch::manual_seed(0);
  auto loader = torch::data::make_data_loader(
      TensorDictDataset(make_dataset(dir)),
      torch::data::DataLoaderOptions().batch_size(3).workers(2));
  std::vector<int64_t> seen;
  std::vector<int64_t> sizes;
  for (const TensorDict& batch : *loader) {
    expect_consistent(batch);
    const at::Tensor l = batch.get("labels");
    seen.insert(
        seen.end(), l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + l.numel());
    sizes.push_back(l.numel());
  }
  std::sort(sizes.begin(), sizes.end());
  EXPECT_EQ(sizes, std::vector<int64_t>({1, 3, 3, 3}));
  std::vector<int64_t> sorted = seen;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> all(10);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
  EXPECT_NE(seen, all);  // shuffled (fixed seed)
}

TEST(DataLoaderTest, GetBatchGathersOneIndexPerLeaf) {
  TempDir dir;
  TensorDictDataset dataset(make_dataset(dir));
  EXPECT_EQ(dataset.size(), std::optional<size_t>(10));
  const TensorDict batch = dataset.get_batch(std::vector<size_t>{7, 2, 7});
  EXPECT_TRUE(torch::equal(batch.get("labels"), torch::tensor({7, 2, 7})));
  expect_consistent(batch);
  EXPECT_THROW(
      (void)dataset.get_batch(std::vector<size_t>{10}), c10::IndexError);
  EXPECT_THROWS_WITH(
      TensorDictDataset(TensorDict()),
      c10::ValueError,
      "TensorDictDataset: the dict needs a batch dim to index");
}

}  // namespace data_loader_test
