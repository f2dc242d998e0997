// The device paths on a real GPU: moving dicts to CUDA and back, pinned
// memory, consolidating to and from the GPU, and loading a memmap onto it.
// Each test skips where torch sees no CUDA device; the CPU-only test at the
// end runs everywhere and checks the error a pinned copy gives without one.

#include <tensordict/consolidate.h>
#include <tensordict/memmap.h>
#include <tensordict/non_tensor.h>
#include <tensordict/tensor_dict.h>

#include "support.h"

namespace cuda_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)
using tensordict::testing::TempDir;

namespace {

#define SKIP_WITHOUT_CUDA()                                  \
  if (!torch::cuda::is_available()) {                        \
    GTEST_SKIP() << "no CUDA device here (torch sees none)"; \
  }

TensorDict sample() {
  TensorDict td(
      {{"obs", torch::arange(24, torch::kFloat32).reshape({4, 6})},
       {"next",
        {{"reward", torch::tensor({1.5, -2.0, 3.25, 0.5}, torch::kFloat64)},
         {"done", torch::tensor({true, false, true, false})}}},
       {"step", torch::arange(4, torch::kInt64)}},
      {4});
  td.set("task", Value(NonTensorData("reach", {4})));
  return td;
}

// Keys, dtypes and values, compared on the CPU whatever the devices.
void expect_same_values(const TensorDict& a, const TensorDict& b) {
  EXPECT_EQ(a.batch_size(), b.batch_size());
  const std::vector<NestedKey> keys = a.keys(/*include_nested=*/true);
  ASSERT_EQ(keys, b.keys(/*include_nested=*/true));
  for (const NestedKey& key : keys) {
    const Value va = a[key];
    const Value vb = b[key];
    ASSERT_EQ(va.kind(), vb.kind()) << key;
    if (va.is_tensor()) {
      EXPECT_EQ(va.tensor().scalar_type(), vb.tensor().scalar_type()) << key;
      EXPECT_TRUE(torch::equal(va.tensor().cpu(), vb.tensor().cpu())) << key;
    } else if (va.is_non_tensor()) {
      EXPECT_EQ(va.non_tensor(), vb.non_tensor()) << key;
    }
  }
}

void expect_on(const TensorDict& td, const c10::Device& device) {
  for (const Value& leaf : td.values(
           /*include_nested=*/true,
           /*leaves_only=*/true)) {
    EXPECT_EQ(leaf.tensor().device(), device);
  }
}

}  // namespace

TEST(CudaTest, ToCudaAndBackKeepsValuesAndSetsTheDevice) {
  SKIP_WITHOUT_CUDA();
  const TensorDict td = sample();
  const c10::Device gpu(c10::kCUDA, 0);
  for (const bool non_blocking : {false, true}) {
    const TensorDict on_gpu = td.to(gpu, non_blocking);
    if (non_blocking) {
      torch::cuda::synchronize();
    }
    EXPECT_EQ(on_gpu.device(), gpu);
    EXPECT_EQ(on_gpu.get_tensordict("next").device(), gpu);
    expect_on(on_gpu, gpu);
    EXPECT_EQ(on_gpu.get_non_tensor("task"), "reach");
    const TensorDict back = on_gpu.to(torch::kCPU, non_blocking);
    if (non_blocking) {
      torch::cuda::synchronize();
    }
    expect_on(back, c10::Device(c10::kCPU));
    expect_same_values(back, td);
  }
}

TEST(CudaTest, PinMemoryPinsEveryLeaf) {
  SKIP_WITHOUT_CUDA();
  const TensorDict td = sample();
  const TensorDict pinned = td.pin_memory();
  for (const Value& leaf : pinned.values(true, true)) {
    EXPECT_TRUE(leaf.tensor().is_pinned());
  }
  expect_same_values(pinned, td);
  // A pinned consolidated storage, and a non-blocking copy out of it.
  const TensorDict packed =
      td.consolidate(ConsolidateOptions().pin_memory(true));
  EXPECT_TRUE(packed.consolidated_storage().is_pinned());
  expect_same_values(packed, td);
  const TensorDict on_gpu =
      packed.to(c10::Device(c10::kCUDA, 0), /*non_blocking=*/true);
  torch::cuda::synchronize();
  expect_same_values(on_gpu.to(torch::kCPU), td);
}

TEST(CudaTest, ConsolidateToAndFromTheGpu) {
  SKIP_WITHOUT_CUDA();
  const TensorDict td = sample();
  const c10::Device gpu(c10::kCUDA, 0);
  const TensorDict packed = td.consolidate(ConsolidateOptions().device(gpu));
  EXPECT_TRUE(packed.is_consolidated());
  EXPECT_EQ(packed.consolidated_storage().device(), gpu);
  expect_on(packed, gpu);
  // Moving a consolidated dict moves its one storage.
  const TensorDict back = packed.to(torch::kCPU);
  expect_on(back, c10::Device(c10::kCPU));
  expect_same_values(back, td);
  const TensorDict again =
      packed.consolidate(ConsolidateOptions().device(c10::Device(c10::kCPU)));
  EXPECT_EQ(again.consolidated_storage().device(), c10::Device(c10::kCPU));
  expect_same_values(again, td);
}

TEST(CudaTest, LoadMemmapOntoTheGpu) {
  SKIP_WITHOUT_CUDA();
  TempDir dir;
  const TensorDict td = sample();
  (void)td.memmap(dir / "td");
  const c10::Device gpu(c10::kCUDA, 0);
  const TensorDict loaded =
      TensorDict::load_memmap(dir / "td", LoadMemmapOptions().device(gpu));
  EXPECT_EQ(loaded.device(), gpu);
  expect_on(loaded, gpu);
  expect_same_values(loaded.to(torch::kCPU), td);
}

// Runs where there is no GPU: a pinned copy needs an accelerator, and the
// error is torch's own (it names the missing accelerator), not a crash or a
// silent unpinned copy.
TEST(CudaTest, PinnedCopiesWithoutAnAcceleratorThrowTorchsError) {
  if (torch::cuda::is_available()) {
    GTEST_SKIP() << "a CUDA device is here; the pinned tests above run";
  }
  const TensorDict td = sample();
  EXPECT_THROWS_WITH((void)td.pin_memory(), c10::Error, "accelerator");
  EXPECT_THROWS_WITH(
      (void)td.consolidate(ConsolidateOptions().pin_memory(true)),
      c10::Error,
      "accelerator");
}

#undef SKIP_WITHOUT_CUDA

}  // namespace cuda_test
