// Device, dtype and memory ops (declared in tensor_dict.h).
#include <ATen/MapAllocator.h>
#include <tensordict/tensor_dict.h>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace tensor_dict_convert_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)

namespace {

// batch [2] named (x): a float [2, 3]; n {i int64 [2, 4]} batch [2, 4];
// s "txt".
TensorDict make_td() {
  TensorDict td(
      {{"a", torch::arange(6, torch::kFloat).view({2, 3})}},
      {2},
      std::nullopt,
      {"x"});
  td.set("n", TensorDict({{"i", torch::arange(8).view({2, 4})}}, {2, 4}));
  td.set_non_tensor("s", "txt");
  return td;
}

// What Python's Tensor.is_shared() says for a CPU tensor.
bool in_shared_memory(const at::Tensor& t) {
  const auto* map = at::MapAllocator::fromDataPtr(t.storage().data_ptr());
  return map != nullptr && (map->flags() & at::ALLOCATOR_MAPPED_SHAREDMEM);
}

}  // namespace

TEST(TensorDictConvertTest, ToDtypeCastsEveryTensorAndKeepsTheRest) {
  TensorDict td = make_td();
  TensorDict d = td.to(torch::kDouble);
  EXPECT_EQ(d.get("a").scalar_type(), torch::kDouble);
  EXPECT_EQ(d.get({"n", "i"}).scalar_type(), torch::kDouble);
  EXPECT_TRUE(torch::equal(d.get("a"), td.get("a").to(torch::kDouble)));
  EXPECT_TRUE(
      torch::equal(d.get({"n", "i"}), td.get({"n", "i"}).to(torch::kDouble)));
  EXPECT_EQ(d.batch_size(), c10::IntArrayRef({2}));
  EXPECT_EQ(d.get_tensordict("n").batch_size(), c10::IntArrayRef({2, 4}));
  EXPECT_EQ(d.names(), DimNames{"x"});
  EXPECT_EQ(d.get_non_tensor("s"), Json("txt"));
  EXPECT_FALSE(d.device().has_value());
  // A new dict: the source is untouched.
  EXPECT_EQ(td.get("a").scalar_type(), torch::kFloat);
}

TEST(TensorDictConvertTest, DtypeShortcutsNameTheDtypeTheyGive) {
  TensorDict td = make_td();
  const std::vector<std::pair<TensorDict, c10::ScalarType>> cases = {
      {td.float32(), torch::kFloat},
      {td.float64(), torch::kDouble},
      {td.half(), torch::kHalf},
      {td.bfloat16(), torch::kBFloat16},
      {td.int32(), torch::kInt},
      {td.boolean(), torch::kBool},
  };
  for (const auto& [out, dtype] : cases) {
    EXPECT_EQ(out.get("a").scalar_type(), dtype);
    EXPECT_EQ(out.get({"n", "i"}).scalar_type(), dtype);
    EXPECT_TRUE(torch::equal(out.get("a"), td.get("a").to(dtype)));
    EXPECT_EQ(out.names(), DimNames{"x"});
  }
}

TEST(TensorDictConvertTest, ToOptionsMovesAndCasts) {
  TensorDict td = make_td();
  const c10::Device meta("meta");
  TensorDict m = td.to(torch::TensorOptions().device(meta));
  EXPECT_EQ(m.device(), meta);
  EXPECT_EQ(m.get("a").device(), meta);
  EXPECT_EQ(m.get({"n", "i"}).device(), meta);
  EXPECT_EQ(m.get_tensordict("n").device(), meta);
  EXPECT_EQ(m.get("a").scalar_type(), torch::kFloat);
  EXPECT_EQ(m.get({"n", "i"}).sizes(), c10::IntArrayRef({2, 4}));
  EXPECT_EQ(m["s"].non_tensor_data().device(), meta);
  EXPECT_EQ(m.names(), DimNames{"x"});

  TensorDict both =
      td.to(torch::TensorOptions().device(meta).dtype(torch::kHalf));
  EXPECT_EQ(both.device(), meta);
  EXPECT_EQ(both.get("a").scalar_type(), torch::kHalf);
  EXPECT_EQ(both.get({"n", "i"}).scalar_type(), torch::kHalf);

  // Options without a device keep the dict's device.
  TensorDict on_cpu({{"a", torch::zeros({2})}}, {2}, c10::Device(c10::kCPU));
  TensorDict cast = on_cpu.to(torch::TensorOptions().dtype(torch::kDouble));
  EXPECT_EQ(cast.device(), c10::Device(c10::kCPU));
  EXPECT_EQ(cast.get("a").scalar_type(), torch::kDouble);
}

TEST(TensorDictConvertTest, ToTakesADeviceTypeOrADeviceString) {
  // torch::kMeta and "meta" alone would be ambiguous between the Device and
  // TensorOptions overloads without the DeviceType and string ones.
  TensorDict td = make_td();
  const c10::Device meta("meta");
  for (const TensorDict& m : {td.to(torch::kMeta), td.to("meta")}) {
    EXPECT_EQ(m.device(), meta);
    EXPECT_EQ(m.get("a").device(), meta);
    EXPECT_EQ(m.get({"n", "i"}).device(), meta);
    EXPECT_EQ(m.get("a").scalar_type(), torch::kFloat);
  }
  TensorDict cpu = td.to(torch::kCPU);
  EXPECT_TRUE(cpu.get("a").is_same(td.get("a")));
  EXPECT_THROW((void)td.to("no-such-device"), c10::Error);
}

TEST(TensorDictConvertTest, CpuSetsTheDeviceAndAliasesCpuLeaves) {
  TensorDict td = make_td();
  TensorDict c = td.cpu();
  EXPECT_EQ(c.device(), c10::Device(c10::kCPU));
  EXPECT_TRUE(c.get("a").is_same(td.get("a")));
  EXPECT_TRUE(c.get({"n", "i"}).is_same(td.get({"n", "i"})));
  EXPECT_EQ(c.get_tensordict("n").device(), c10::Device(c10::kCPU));
}

// Python's td.cuda() raises "Torch not compiled with CUDA enabled" on a
// CPU build; C++ says what is missing, for an empty dict too, as
// TensorClass::cuda does.
TEST(TensorDictConvertTest, CudaThrowsAClearErrorWithoutCuda) {
  if (at::hasCUDA()) {
    GTEST_SKIP() << "a CUDA device is here; CudaMovesEveryLeaf_CUDA runs";
  }
  EXPECT_THROWS_EXACTLY(
      (void)make_td().cuda(),
      c10::Error,
      "cuda: CUDA is not available (this PyTorch was built without CUDA, or "
      "it sees no CUDA device); move to another device with to(device)");
  EXPECT_THROWS_WITH(
      (void)TensorDict().cuda(0), c10::Error, "cuda: CUDA is not available");
}

// Python: td.cuda().device == torch.device("cuda:0"), every leaf moved.
TEST(TensorDictConvertTest, CudaMovesEveryLeaf_CUDA) {
  if (!at::hasCUDA()) {
    GTEST_SKIP() << "no CUDA device here";
  }
  const TensorDict td = make_td();
  const TensorDict g = td.cuda();
  EXPECT_EQ(g.device(), c10::Device(c10::kCUDA, 0));
  EXPECT_TRUE(g.get("a").is_cuda());
  EXPECT_TRUE(g.get({"n", "i"}).is_cuda());
  EXPECT_TRUE(torch::equal(g.get("a").cpu(), td.get("a")));
  EXPECT_EQ(g.get_non_tensor("s"), Json("txt"));
  EXPECT_TRUE(td.get("a").device().is_cpu());
  EXPECT_THROWS_WITH(
      (void)td.cuda(static_cast<c10::DeviceIndex>(at::getNumGPUs())),
      c10::IndexError,
      "is out of range");
}

TEST(TensorDictConvertTest, PinMemoryThrowsTorchsErrorWithoutAnAccelerator) {
  if (at::hasCUDA()) {
    GTEST_SKIP() << "an accelerator is present";
  }
  EXPECT_THROWS_EXACTLY(
      make_td().pin_memory(),
      c10::Error,
      "Cannot access accelerator device when none is available.");
}

TEST(TensorDictConvertTest, ShareMemoryMovesStorageInPlaceSoViewsSeeIt) {
  TensorDict td = make_td();
  const at::Tensor a = td.get("a");
  const at::Tensor view = a[1];  // taken before the move
  const at::Tensor nested = td.get({"n", "i"});
  EXPECT_FALSE(td.is_shared());
  EXPECT_FALSE(in_shared_memory(a));

  TensorDict& same = td.share_memory_();
  EXPECT_TRUE(same.is_same(td));
  EXPECT_TRUE(td.is_shared());
  EXPECT_TRUE(td.get_tensordict("n").is_shared());
  EXPECT_TRUE(td.is_locked());
  EXPECT_TRUE(td.get_tensordict("n").is_locked());
  EXPECT_TRUE(in_shared_memory(a));
  EXPECT_TRUE(in_shared_memory(view));
  EXPECT_TRUE(in_shared_memory(nested));
  // The bytes moved along.
  EXPECT_TRUE(torch::equal(a, torch::arange(6, torch::kFloat).view({2, 3})));
  EXPECT_TRUE(torch::equal(nested, torch::arange(8).view({2, 4})));
  // Writes through the dict reach the old view, and the other way round.
  td.get("a").fill_(42);
  EXPECT_TRUE(torch::equal(view, torch::full({3}, 42.0)));
  view[0] = 7;
  EXPECT_EQ(td.get("a")[1][0].item<float>(), 7);
  // Sharing again is a no-op.
  void* ptr = a.data_ptr();
  td.share_memory_();
  EXPECT_EQ(a.data_ptr(), ptr);

  const std::string repr = td.repr_detailed();
  EXPECT_NE(
      repr.find("a: Tensor(shape=torch.Size([2, 3]), device=cpu, "
                "dtype=torch.float32, is_shared=True)"),
      std::string::npos)
      << repr;
  EXPECT_NE(repr.find("device=None,\n    is_shared=True)"), std::string::npos)
      << repr;
  // Locked, as in Python: no new keys, in-place writes allowed.
  EXPECT_THROWS_WITH(td.set("new", torch::zeros({2})), c10::Error, "locked");
  td.zero_();
  EXPECT_TRUE(torch::equal(view, torch::zeros({3})));
  // Unlocking clears the mark (as Python does); the memory stays shared.
  td.unlock_();
  EXPECT_FALSE(td.is_shared());
  EXPECT_FALSE(td.get_tensordict("n").is_shared());
  EXPECT_TRUE(in_shared_memory(a));
}

TEST(TensorDictConvertTest, ShareMemoryLeavesOtherDevicesAlone) {
  TensorDict td = make_td().to(c10::Device("meta"));
  td.share_memory_();
  EXPECT_TRUE(td.is_shared());
  EXPECT_TRUE(td.is_locked());
  EXPECT_EQ(td.get("a").device(), c10::Device("meta"));
}

TEST(TensorDictConvertTest, ShareMemoryHandlesEmptyTensors) {
  TensorDict td({{"e", torch::zeros({0, 3})}}, {0});
  td.share_memory_();
  EXPECT_TRUE(td.is_shared());
  EXPECT_EQ(td.get("e").sizes(), c10::IntArrayRef({0, 3}));
}

TEST(TensorDictConvertTest, CopiesAreNotShared) {
  TensorDict td = make_td();
  td.share_memory_();
  EXPECT_FALSE(td.clone().is_shared());
  EXPECT_FALSE(td.to(torch::kDouble).is_shared());
  EXPECT_FALSE(td.contiguous().is_shared());
  EXPECT_FALSE(td.clone().is_locked());
}

TEST(TensorDictConvertTest, DetachAndRequiresGrad) {
  TensorDict td = make_td().float32();
  td.requires_grad_();
  EXPECT_TRUE(td.get("a").requires_grad());
  EXPECT_TRUE(td.get({"n", "i"}).requires_grad());
  TensorDict d = td.detach();
  EXPECT_FALSE(d.get("a").requires_grad());
  EXPECT_FALSE(d.get({"n", "i"}).requires_grad());
  EXPECT_EQ(d.get("a").data_ptr(), td.get("a").data_ptr());
  EXPECT_TRUE(td.get("a").requires_grad());

  TensorDict computed = td.apply([](const at::Tensor& t) { return t * 2; });
  EXPECT_TRUE(computed.get("a").requires_grad());
  computed.detach_();
  EXPECT_FALSE(computed.get("a").requires_grad());
  EXPECT_FALSE(computed.get({"n", "i"}).requires_grad());

  td.requires_grad_(false);
  EXPECT_FALSE(td.get("a").requires_grad());

  EXPECT_THROWS_EXACTLY(
      make_td().requires_grad_(),
      c10::Error,
      "Only Tensors of floating point and complex dtype can require "
      "gradients");
}

TEST(TensorDictConvertTest, ContiguousAndIsContiguous) {
  TensorDict td({{"t", torch::arange(6, torch::kFloat).view({3, 2}).t()}}, {2});
  EXPECT_FALSE(td.is_contiguous());
  TensorDict c = td.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_TRUE(c.get("t").is_contiguous());
  EXPECT_TRUE(torch::equal(c.get("t"), td.get("t")));
  TensorDict already = make_td();
  EXPECT_TRUE(already.is_contiguous());
  EXPECT_TRUE(already.contiguous().get("a").is_same(already.get("a")));
  EXPECT_TRUE(TensorDict().is_contiguous());
}

TEST(TensorDictConvertTest, ZeroAndFillWriteInPlace) {
  TensorDict td = make_td();
  const at::Tensor a = td.get("a");
  td.fill_("a", 3);
  EXPECT_TRUE(torch::equal(a, torch::full({2, 3}, 3.0)));
  td.fill_({"n", "i"}, 7);
  EXPECT_TRUE(
      torch::equal(td.get({"n", "i"}), torch::full({2, 4}, 7, torch::kLong)));
  td.fill_("n", 5);
  EXPECT_TRUE(
      torch::equal(td.get({"n", "i"}), torch::full({2, 4}, 5, torch::kLong)));
  td.lock_();
  td.zero_();
  EXPECT_TRUE(torch::equal(a, torch::zeros({2, 3})));
  EXPECT_TRUE(
      torch::equal(td.get({"n", "i"}), torch::zeros({2, 4}, torch::kLong)));
  EXPECT_EQ(td.get_non_tensor("s"), Json("txt"));

  EXPECT_THROWS_EXACTLY(
      td.fill_("zz", 1),
      KeyError,
      "key \"zz\" not found in TensorDict with keys ['a', 'n', 's']");
  EXPECT_THROWS_EXACTLY(
      td.fill_("s", 1),
      c10::TypeError,
      "fill_() expects a Tensor or a TensorDict at 's', got a NonTensorData");
}

TEST(TensorDictConvertTest, CopyWritesIntoTheExistingTensors) {
  TensorDict td = make_td();
  const at::Tensor a = td.get("a");
  TensorDict src(
      {{"a", torch::ones({2, 1}, torch::kDouble)},  // broadcast and cast
       {"n", TensorDict({{"i", torch::full({2, 4}, 9)}}, {2, 4})},
       {"s", "new"}},
      {2});
  td.lock_();
  td.copy_(src);
  EXPECT_TRUE(td.get("a").is_same(a));
  EXPECT_EQ(a.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(a, torch::ones({2, 3})));
  EXPECT_TRUE(
      torch::equal(td.get({"n", "i"}), torch::full({2, 4}, 9, torch::kLong)));
  EXPECT_EQ(td.get_non_tensor("s"), Json("new"));
  EXPECT_EQ(td["s"].non_tensor_data().batch_size(), c10::IntArrayRef({2}));
}

TEST(TensorDictConvertTest, CopyThrowsListingKeysThatDifferAndWritesNothing) {
  TensorDict td = make_td();
  TensorDict missing({{"a", torch::ones({2, 3})}}, {2});
  missing.set("n", TensorDict({{"j", torch::ones({2, 4})}}, {2, 4}));
  missing.set("extra", torch::ones({2}));
  EXPECT_THROWS_EXACTLY(
      td.copy_(missing),
      KeyError,
      "copy_() needs the same keys in both tensordicts, but the source lacks "
      "[('n', 'i'), 's'] and the destination lacks [('n', 'j'), 'extra']");
  TensorDict only_extra = make_td();
  only_extra.set("z", torch::ones({2}));
  EXPECT_THROWS_EXACTLY(
      td.copy_(only_extra),
      KeyError,
      "copy_() needs the same keys in both tensordicts, but the destination "
      "lacks ['z']");

  TensorDict bad_shape = make_td();
  bad_shape.set({"n", "i"}, torch::ones({2, 4, 3}), tensordict::SetOptions());
  bad_shape.set("a", torch::full({2, 3}, 5.0));
  EXPECT_THROWS_EXACTLY(
      td.copy_(bad_shape),
      c10::Error,
      "copy_() cannot copy the value of shape torch.Size([2, 4, 3]) under the "
      "key ('n', 'i') into the entry of shape torch.Size([2, 4])");
  // Checked before any write: "a" came first and is unchanged.
  EXPECT_TRUE(
      torch::equal(td.get("a"), torch::arange(6, torch::kFloat).view({2, 3})));

  TensorDict bad_kind = make_td();
  bad_kind.del_("s");
  bad_kind.set("s", torch::zeros({2}));
  EXPECT_THROWS_EXACTLY(
      td.copy_(bad_kind),
      c10::TypeError,
      "cannot copy entry 's': it is a NonTensorData in tensordict 0 and a "
      "Tensor in tensordict 1");
}

}  // namespace tensor_dict_convert_test
