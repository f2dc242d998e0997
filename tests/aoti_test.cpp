// Tests of include/tensordict/aoti.h: AOTInductor packages exported by
// Python (tests/python/aoti_packages.py, run once per build tree) run as
// TensorDict modules, and their outputs equal Python eager's on the same
// inputs, within 1e-5 (absolute and relative: the package's kernels and
// eager's may sum in a different order).
//
// The packages' directory comes from TENSORDICT_AOTI_PACKAGES, which ctest
// sets; run by hand without it, every test skips and says so.

#include <tensordict/aoti.h>
#include <tensordict/json.h>
#include <tensordict/memmap.h>
#include <tensordict/pack.h>
#include <tensordict/probabilistic.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "nn/aoti_zip.h"
#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace aoti_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)
using tensordict::nn::AOTIModule;
using tensordict::nn::AOTIModuleOptions;

namespace {

constexpr double kTolerance = 1e-5;

class AOTIModuleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("TENSORDICT_AOTI_PACKAGES");
    if (dir == nullptr || *dir == '\0') {
      GTEST_SKIP() << "TENSORDICT_AOTI_PACKAGES is not set: run through "
                      "ctest, which exports the packages first";
    }
    dir_ = dir;
  }

  std::string path(const std::string& name) const {
    return dir_ + "/" + name;
  }

  // A writable copy of what Python memmapped.
  TensorDict load(const std::string& name) const {
    return TensorDict::load_memmap(path(name)).clone();
  }

  std::string dir_;
};

void expect_close(const at::Tensor& actual, const at::Tensor& expected) {
  ASSERT_EQ(actual.sizes(), expected.sizes());
  ASSERT_EQ(actual.scalar_type(), expected.scalar_type());
  EXPECT_TRUE(torch::allclose(actual, expected, kTolerance, kTolerance))
      << "max abs difference "
      << (actual - expected).abs().max().item<double>();
}

TEST_F(AOTIModuleTest, TutorialPackageRunsWithTheCallersKeys) {
  AOTIModule module(path("module.pt2"), {"obs"}, {"action"});
  EXPECT_EQ(module->in_keys(), std::vector<NestedKey>{"obs"});
  EXPECT_EQ(module->out_keys(), std::vector<NestedKey>{"action"});
  EXPECT_EQ(module->input_names(), std::vector<std::string>{"obs"});
  TensorDict td = load("module_inputs");
  TensorDict out = module(td);
  EXPECT_TRUE(out.is_same(td));  // in place, as TensorDictModule
  expect_close(td.get("action"), load("module_expected").get("action"));
}

TEST_F(AOTIModuleTest, TutorialPackageWithoutKeysAsksForThem) {
  EXPECT_THROWS_WITH(
      AOTIModule(path("module.pt2")),
      c10::ValueError,
      "has no tensordict.in_keys metadata; pass the keys");
}

TEST_F(AOTIModuleTest, CallersKeysMustNameThePackagesInputs) {
  EXPECT_THROWS_WITH(
      AOTIModule(path("module.pt2"), {"observation"}, {"action"}),
      c10::ValueError,
      "the package's input 'obs' matches none of the in_keys "
      "['observation']");
  EXPECT_THROWS_WITH(
      AOTIModule(path("module.pt2"), {"obs"}, {"action", "value"}),
      c10::ValueError,
      "the package returns 1 tensors, but there are 2 out_keys");
}

TEST_F(AOTIModuleTest, KeysComeFromTheMetadata) {
  AOTIModule module(path("sequential.pt2"));
  const std::vector<NestedKey> in = {{"obs", "x"}, {"obs", "y"}};
  const std::vector<NestedKey> out = {{"out", "action"}, {"hidden", "h"}};
  EXPECT_EQ(module->in_keys(), in);
  EXPECT_EQ(module->out_keys(), out);
  EXPECT_EQ(
      module->input_names(), (std::vector<std::string>{"obs_x", "obs_y"}));
  const auto range = module->batch_range();
  ASSERT_TRUE(range.has_value());
  EXPECT_EQ(range->first, 1);
  EXPECT_EQ(range->second, 64);
  EXPECT_EQ(module->metadata().at("AOTI_DEVICE_KEY"), "cpu");
  // Keys given that differ from the metadata's are refused.
  EXPECT_THROWS_WITH(
      AOTIModule(path("sequential.pt2"), {{"obs", "x"}}, out),
      c10::ValueError,
      "differ from the package's metadata");
}

TEST_F(AOTIModuleTest, SequentialMatchesPythonEagerAtEveryBatchSize) {
  AOTIModule module(path("sequential.pt2"));
  for (int64_t batch : {1, 5, 64}) {
    SCOPED_TRACE(batch);
    TensorDict td = load("sequential_inputs_" + std::to_string(batch));
    const TensorDict expected =
        load("sequential_expected_" + std::to_string(batch));
    module(td);
    expect_close(td.get({"out", "action"}), expected.get({"out", "action"}));
    expect_close(td.get({"hidden", "h"}), expected.get({"hidden", "h"}));
    // select_out_keys in Python dropped the intermediate ("hidden", "g").
    EXPECT_FALSE(td.contains({"hidden", "g"}));
  }
}

TEST_F(AOTIModuleTest, ForwardWritesIntoAnotherDict) {
  AOTIModule module(path("sequential.pt2"));
  const TensorDict td = load("sequential_inputs_5");
  TensorDict out({}, {5});
  TensorDict result = module(td, out);
  EXPECT_TRUE(result.is_same(out));
  EXPECT_FALSE(td.contains({"out", "action"}));
  expect_close(
      out.get({"out", "action"}),
      load("sequential_expected_5").get({"out", "action"}));
}

TEST_F(AOTIModuleTest, NonContiguousInputsGiveTheSameOutputs) {
  AOTIModule module(path("sequential.pt2"));
  TensorDict td = load("sequential_inputs_5");
  const at::Tensor x = td.get({"obs", "x"});
  // Same values, transposed strides: the package must not read them raw.
  const at::Tensor strided = x.t().contiguous().t();
  ASSERT_FALSE(strided.is_contiguous());
  td.set({"obs", "x"}, strided);
  module(td);
  expect_close(
      td.get({"out", "action"}),
      load("sequential_expected_5").get({"out", "action"}));
}

TEST_F(AOTIModuleTest, SelectOutKeysDropsTheOthersFromTheCall) {
  AOTIModule module(path("sequential.pt2"));
  module->select_out_keys({{"out", "action"}});
  TensorDict td = load("sequential_inputs_5");
  module(td);
  EXPECT_TRUE(td.contains({"out", "action"}));
  EXPECT_FALSE(td.contains({"hidden", "h"}));
}

TEST_F(AOTIModuleTest, RunsAsAnyTensorDictModuleAndFromTensors) {
  AOTIModule module(path("sequential.pt2"));
  tensordict::nn::AnyTensorDictModule any = module;
  TensorDict td = load("sequential_inputs_5");
  any(td);
  const at::Tensor expected =
      load("sequential_expected_5").get({"out", "action"});
  expect_close(td.get({"out", "action"}), expected);
  // The dispatch form: tensors by in_key, tensors by out_key back.
  const TensorDict inputs = load("sequential_inputs_5");
  const std::vector<at::Tensor> outputs = module(
      {{{"obs", "x"}, inputs.get({"obs", "x"})},
       {{"obs", "y"}, inputs.get({"obs", "y"})}});
  ASSERT_EQ(outputs.size(), 2u);
  expect_close(outputs[0], expected);
}

// A package sits in a TensorDictSequential next to C++ modules: the
// sequence's keys and outputs chain through it.
TEST_F(AOTIModuleTest, RunsInsideATensorDictSequential) {
  using tensordict::nn::TensorDictModule;
  using tensordict::nn::TensorDictSequential;
  TensorDictSequential policy({
      AOTIModule(path("sequential.pt2")),
      TensorDictModule(
          torch::nn::Functional([](const at::Tensor& t) { return t * 2; }),
          {{"out", "action"}},
          {"doubled"}),
  });
  const AOTIModule package(path("sequential.pt2"));
  EXPECT_EQ(policy->in_keys(), package->in_keys());
  std::vector<NestedKey> out_keys = package->out_keys();
  out_keys.emplace_back("doubled");
  EXPECT_EQ(policy->out_keys(), out_keys);
  TensorDict td = load("sequential_inputs_5");
  policy(td);
  const at::Tensor expected =
      load("sequential_expected_5").get({"out", "action"});
  expect_close(td.get({"out", "action"}), expected);
  expect_close(td.get("doubled"), expected * 2);
}

TEST_F(AOTIModuleTest, ConcurrentCallersGetTheirOwnResults) {
  AOTIModule module(path("sequential.pt2"), AOTIModuleOptions().num_runners(2));
  const TensorDict inputs = load("sequential_inputs_5");
  const at::Tensor expected =
      load("sequential_expected_5").get({"out", "action"});
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        TensorDict td = inputs.clone();
        module(td);
        if (!torch::allclose(
                td.get({"out", "action"}), expected, kTolerance, kTolerance)) {
          ++wrong;
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(wrong.load(), 0);
}

// ---- Errors before the package runs ----

TEST_F(AOTIModuleTest, MissingInputKeyIsAKeyError) {
  AOTIModule module(path("sequential.pt2"));
  TensorDict td = load("sequential_inputs_5");
  td.del_({"obs", "y"});
  EXPECT_THROWS_WITH(
      module(td),
      tensordict::KeyError,
      "the input ('obs', 'y') is missing from the dict");
}

TEST_F(AOTIModuleTest, WrongDtypeIsATypeError) {
  AOTIModule module(path("sequential.pt2"));
  TensorDict td = load("sequential_inputs_5");
  td.set({"obs", "x"}, td.get({"obs", "x"}).to(torch::kFloat64));
  EXPECT_THROWS_WITH(
      module(td),
      c10::TypeError,
      "the input ('obs', 'x') has dtype Double, but the package takes Float");
}

TEST_F(AOTIModuleTest, WrongTrailingShapeIsAValueError) {
  AOTIModule module(path("sequential.pt2"));
  TensorDict td(
      {{"obs", {{"x", torch::randn({5, 4})}, {"y", torch::randn({5, 2})}}}},
      {5});
  EXPECT_THROWS_WITH(
      module(td),
      c10::ValueError,
      "the input ('obs', 'x') has shape [5, 4], but the package takes "
      "[*batch, 5] with 1 batch dims");
}

TEST_F(AOTIModuleTest, WrongDeviceIsAValueError) {
  AOTIModule module(path("sequential.pt2"));
  // A dict without a device, so its leaves may sit on different ones.
  TensorDict td;
  td.set({"obs", "x"}, torch::randn({5, 5}));
  td.set({"obs", "y"}, torch::empty({5, 2}, torch::kMeta));
  EXPECT_THROWS_WITH(
      module(td),
      c10::ValueError,
      "the input ('obs', 'y') is on meta, but the package takes it on cpu");
}

TEST_F(AOTIModuleTest, BatchOutsideTheExportedRangeIsAValueError) {
  AOTIModule module(path("sequential.pt2"));
  TensorDict td(
      {{"obs", {{"x", torch::randn({65, 5})}, {"y", torch::randn({65, 2})}}}},
      {65});
  EXPECT_THROWS_WITH(
      module(td),
      c10::ValueError,
      "has batch size [65], but the package takes [-1] with dim 0 in [1, 64]");
  TensorDict empty(
      {{"obs", {{"x", torch::randn({0, 5})}, {"y", torch::randn({0, 2})}}}},
      {0});
  EXPECT_THROWS_WITH(module(empty), c10::ValueError, "with dim 0 in [1, 64]");
  // A static batch size must match exactly.
  AOTIModule fixed(path("static.pt2"));
  EXPECT_FALSE(fixed->batch_range().has_value());
  TensorDict td3 = load("static_inputs");
  fixed(td3);
  expect_close(td3.get("out"), load("static_expected").get("out"));
  TensorDict seven({{"obs", torch::randn({7, 2})}}, {7});
  EXPECT_THROWS_WITH(
      fixed(seven),
      c10::ValueError,
      "the input 'obs' has batch size [7], but the package takes [3]");
}

TEST_F(AOTIModuleTest, UnboundedDynamicBatchTakesAnyPositiveSize) {
  AOTIModule module(path("weights_outside.pt2"));
  const auto range = module->batch_range();
  ASSERT_TRUE(range.has_value());
  EXPECT_EQ(range->second, std::nullopt);
  module->load_weights(TensorDict::load_memmap(path("weights_a")));
  const TensorDict inputs = load("weights_outside_inputs");
  const at::Tensor expected = load("weights_outside_expected_a").get("value");
  // Rows are independent: 3 and 300 rows give the eager rows.
  for (int64_t rows : {3, 300}) {
    const at::Tensor obs = inputs.get("obs").repeat({50, 1}).narrow(0, 0, rows);
    TensorDict td({{"obs", obs}}, {rows});
    module(td);
    expect_close(td.get("value"), expected.repeat({50, 1}).narrow(0, 0, rows));
  }
  TensorDict empty({{"obs", torch::randn({0, 4})}}, {0});
  EXPECT_THROWS_WITH(module(empty), c10::ValueError, "with dim 0 in [1, inf]");
}

TEST_F(AOTIModuleTest, InputsWithDifferentBatchSizesAreAValueError) {
  AOTIModule module(path("sequential.pt2"));
  TensorDict td;
  td.set({"obs", "x"}, torch::randn({5, 5}));
  td.set({"obs", "y"}, torch::randn({4, 2}));
  EXPECT_THROWS_WITH(
      module(td),
      c10::ValueError,
      "the input ('obs', 'y') has batch size [4], but the input ('obs', 'x') "
      "has [5]");
}

// ---- Packages without tensordict.spec: their compiled input checks ----

TEST_F(AOTIModuleTest, TutorialPackageRefusesAWrongShapeBeforeItRuns) {
  AOTIModule module(path("module.pt2"), {"obs"}, {"action"});
  TensorDict wide({{"obs", torch::randn({4, 5})}}, {4});
  EXPECT_THROWS_WITH(
      module(wide),
      c10::ValueError,
      "AOTIModule '" + path("module.pt2") +
          "': the input 'obs' has shape [4, 5], but the package takes [4, 3] "
          "(the input checks compiled into it)");
  TensorDict rows({{"obs", torch::randn({5, 3})}}, {5});
  EXPECT_THROWS_WITH(
      module(rows),
      c10::ValueError,
      "the input 'obs' has shape [5, 3], but the package takes [4, 3]");
  TensorDict flat({{"obs", torch::randn({12})}}, {12});
  EXPECT_THROWS_WITH(
      module(flat),
      c10::ValueError,
      "the input 'obs' has shape [12], but the package takes [4, 3]");
  TensorDict doubles({{"obs", torch::randn({4, 3}, torch::kFloat64)}}, {4});
  EXPECT_THROWS_WITH(
      module(doubles),
      c10::TypeError,
      "the input 'obs' has dtype Double, but the package takes Float");
  // The right input still runs.
  TensorDict td = load("module_inputs");
  module(td);
  expect_close(td.get("action"), load("module_expected").get("action"));
}

TEST_F(AOTIModuleTest, PackageWithoutSpecNamesTheNestedKeyOfAWrongInput) {
  // sequential.pt2 without its tensordict metadata: a dynamic batch of
  // [2, 64] (torch.export's range; the exporter's spec says [1, 64]).
  const std::vector<NestedKey> in = {{"obs", "x"}, {"obs", "y"}};
  const std::vector<NestedKey> out = {{"out", "action"}, {"hidden", "h"}};
  AOTIModule module(path("sequential_no_spec.pt2"), in, out);
  EXPECT_FALSE(module->batch_range().has_value());
  TensorDict td = load("sequential_inputs_5");
  module(td);
  expect_close(
      td.get({"out", "action"}),
      load("sequential_expected_5").get({"out", "action"}));
  TensorDict narrow(
      {{"obs", {{"x", torch::randn({5, 5})}, {"y", torch::randn({5, 3})}}}},
      {5});
  EXPECT_THROWS_WITH(
      module(narrow),
      c10::ValueError,
      "the input ('obs', 'y') has shape [5, 3], but the package takes "
      "[2..64, 2] (the input checks compiled into it)");
  TensorDict big(
      {{"obs", {{"x", torch::randn({65, 5})}, {"y", torch::randn({65, 2})}}}},
      {65});
  EXPECT_THROWS_WITH(
      module(big),
      c10::ValueError,
      "the input ('obs', 'x') has shape [65, 5], but the package takes "
      "[2..64, 5]");
  // torch.export traced it for sizes >= 2, and so its checks refuse 1.
  TensorDict one = load("sequential_inputs_1");
  EXPECT_THROWS_WITH(
      module(one),
      c10::ValueError,
      "the input ('obs', 'x') has shape [1, 5], but the package takes "
      "[2..64, 5]");
  TensorDict ints(
      {{"obs",
        {{"x", torch::ones({5, 5}, torch::kInt64)},
         {"y", torch::randn({5, 2})}}}},
      {5});
  EXPECT_THROWS_WITH(
      module(ints),
      c10::TypeError,
      "the input ('obs', 'x') has dtype Long, but the package takes Float");
}

TEST_F(AOTIModuleTest, InputsAreLaidOutWithTheStridesThePackageReads) {
  // Compiled from a transposed example: its kernel indexes the input with
  // strides (1, 5). A contiguous input passed as is gives wrong values.
  AOTIModule module(path("strided.pt2"), {"obs"}, {"action"});
  const TensorDict inputs = load("strided_inputs");
  const at::Tensor expected = load("strided_expected").get("action");
  ASSERT_TRUE(inputs.get("obs").is_contiguous());
  TensorDict td = inputs.clone();
  module(td);
  expect_close(td.get("action"), expected);
  // Already in the package's layout, and in a third one.
  TensorDict transposed = inputs.clone();
  transposed.set("obs", inputs.get("obs").t().contiguous().t());
  module(transposed);
  expect_close(transposed.get("action"), expected);
  TensorDict sliced = inputs.clone();
  sliced.set(
      "obs",
      torch::cat({inputs.get("obs"), inputs.get("obs")}, 1).narrow(1, 3, 3));
  module(sliced);
  expect_close(sliced.get("action"), expected);
  // The raw call, for comparison: the same tensor read with the wrong
  // strides.
  const at::Tensor raw = module->run({inputs.get("obs")})[0];
  EXPECT_FALSE(torch::allclose(raw, expected, kTolerance, kTolerance));
}

TEST_F(AOTIModuleTest, PackageThatCannotBeCheckedIsRefused) {
  EXPECT_THROWS_WITH(
      AOTIModule(path("module_no_checks.pt2"), {"obs"}, {"action"}),
      c10::Error,
      "has neither tensordict.spec nor a wrapper source with the input "
      "checks");
  EXPECT_THROWS_WITH(
      AOTIModule(path("spec_disagrees.pt2")),
      c10::Error,
      "tensordict.spec and the input checks of its wrapper source disagree "
      "on the input ('obs', 'x'): [*batch, 6] with 1 batch dims against "
      "[2..64, 5]");
  EXPECT_THROWS_WITH(
      AOTIModule(path("two_metadata.pt2")), c10::Error, "' differ");
}

// ---- The spec reader (nn/aoti_package_meta.h), on its own ----

using tensordict::detail::AotiInputCheck;
using tensordict::detail::parse_input_checks;

TEST_F(AOTIModuleTest, InputChecksAreReadFromTheWrapperSource) {
  const auto files =
      tensordict::detail::read_package_file(path("module.pt2"), "model");
  ASSERT_TRUE(files.wrapper_source.has_value());
  const std::vector<AotiInputCheck> checks =
      parse_input_checks(*files.wrapper_source, "module.pt2");
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].dtype, c10::kFloat);
  EXPECT_EQ(checks[0].device_type, c10::kCPU);
  ASSERT_EQ(checks[0].sizes.size(), 2u);
  EXPECT_EQ(checks[0].sizes[0].size, 4);
  EXPECT_EQ(checks[0].sizes[1].size, 3);
  EXPECT_EQ(
      checks[0].strides,
      (std::vector<std::optional<int64_t>>{int64_t{3}, int64_t{1}}));

  const auto seq =
      tensordict::detail::read_package_file(path("sequential.pt2"), "model");
  const std::vector<AotiInputCheck> two =
      parse_input_checks(*seq.wrapper_source, "sequential.pt2");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_FALSE(two[1].sizes[0].size.has_value());
  EXPECT_EQ(two[1].sizes[0].min, 2);
  EXPECT_EQ(two[1].sizes[0].max, 64);
  EXPECT_EQ(two[1].sizes[1].size, 2);
  EXPECT_THROWS_WITH(
      tensordict::detail::read_package_file(path("module.pt2"), "other"),
      c10::Error,
      "no metadata for model 'other'");
}

std::string check_source(const std::string& index, const std::string& body) {
  return "AOTI_NOINLINE static void check_input_" + index +
         "(\n    AtenTensorHandle* input_handles\n) {\n"
         "    ConstantHandle arg0 = ConstantHandle(input_handles[" +
         index + "]);\n" + body + "}\n";
}

TEST_F(AOTIModuleTest, MalformedInputChecksAreRefused) {
  const std::string dtype =
      "    int32_t arg0_expected_dtype = aoti_torch_dtype_float32();\n";
  EXPECT_EQ(
      parse_input_checks(
          check_source(
              "0",
              dtype + "    if (arg0_size[0] < 2) {\n"
                      "    if (3 != arg0_size[1]) {\n"
                      "    if (1 != arg0_stride[1]) {\n"),
          "p")[0]
          .sizes[0]
          .min,
      2);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {check_source(
           "0", "    int32_t arg0_expected_dtype = aoti_torch_dtype_f99();\n"),
       "a dtype this build does not know: 'int32_t arg0_expected_dtype = "
       "aoti_torch_dtype_f99();'"},
      {check_source("0", "    if (3 != arg0_size[1] + 1) {\n"),
       "an unknown form: 'if (3 != arg0_size[1] + 1) {'"},
      {check_source("0", "    if (arg0.dim() != 2) {\n"), "an unknown form"},
      {check_source("0", "    if (99999999999999999999 != arg0_size[0]) {\n"),
       "a number out of range"},
      {check_source("0", "    if (3 != arg0_size[64]) {\n"),
       "a dim beyond torch's limit"},
      {check_source("0", "    if (3 != arg0_size[0]) {\n") +
           check_source("0", ""),
       "its wrapper source checks input 0 twice"},
      {check_source("1", ""), "checks input 1 of 1 inputs"},
      {check_source(
           "0", "    if (arg0_size[0] < 9) {\n    if (arg0_size[0] > 4) {\n"),
       "an empty range"},
      {"static void check_input_x(", "a malformed check_input_ function"},
  };
  for (const auto& [source, message] : cases) {
    SCOPED_TRACE(message);
    EXPECT_THROWS_WITH(parse_input_checks(source, "p"), c10::Error, message);
  }
  // A source without checks describes no input.
  EXPECT_TRUE(parse_input_checks("int main() {}", "p").empty());
}

TEST_F(AOTIModuleTest, SpecReaderRefusesMalformedMetadata) {
  using tensordict::detail::AotiPackageFiles;
  using tensordict::detail::read_package_spec;
  const auto read = [](const std::string& json) {
    AotiPackageFiles files;
    files.metadata_json = json;
    files.wrapper_source = check_source("0", "");
    return read_package_spec(files, "p.pt2", std::nullopt, std::nullopt);
  };
  EXPECT_THROWS_WITH(read("[1]"), c10::Error, "p.pt2");
  EXPECT_THROWS_WITH(
      read(R"({"AOTI_DEVICE_KEY": 1})"),
      c10::Error,
      "the metadata entry 'AOTI_DEVICE_KEY' must be a string, found number");
  EXPECT_THROWS_WITH(read("{}"), c10::Error, "no AOTI_DEVICE_KEY");
  EXPECT_THROWS_WITH(
      read(R"({"AOTI_DEVICE_KEY": "xpu"})"),
      c10::Error,
      "was compiled for device 'xpu'");
  EXPECT_THROWS_WITH(
      read(R"({"AOTI_DEVICE_KEY": "cpu"})"),
      c10::ValueError,
      "has no tensordict.in_keys metadata");
  const auto spec = read(
      R"({"AOTI_DEVICE_KEY": "cpu", "tensordict.in_keys": "[[\"a\", \"b\"]]",)"
      R"( "tensordict.out_keys": "[\"c\"]"})");
  EXPECT_EQ(spec.in_keys, (std::vector<NestedKey>{{"a", "b"}}));
  EXPECT_EQ(spec.out_keys, std::vector<NestedKey>{"c"});
  ASSERT_TRUE(spec.input_checks.has_value());
  EXPECT_EQ(spec.input_checks->size(), 1u);
  EXPECT_FALSE(spec.has_spec);
}

// ---- Packages that must be refused ----

TEST_F(AOTIModuleTest, TruncatedPackageIsAnError) {
  tensordict::testing::TempDir tmp;
  const std::string bytes =
      tensordict::testing::read_text(path("sequential.pt2"));
  ASSERT_GT(bytes.size(), 1000u);
  for (size_t keep : {bytes.size() / 2, bytes.size() - 10, size_t{10}}) {
    SCOPED_TRACE(keep);
    tensordict::testing::write_text(tmp / "cut.pt2", bytes.substr(0, keep));
    EXPECT_THROWS_WITH(
        AOTIModule(tmp / "cut.pt2"), c10::Error, "is the file truncated?");
  }
  tensordict::testing::write_text(tmp / "empty.pt2", "");
  EXPECT_THROWS_WITH(
      AOTIModule(tmp / "empty.pt2"), c10::Error, "is not a zip archive");
  EXPECT_THROWS_WITH(
      AOTIModule(tmp / "missing.pt2"), c10::Error, "cannot open the file");
}

TEST_F(AOTIModuleTest, CorruptedPackageIsAnErrorBeforeItsLibraryIsOpened) {
  tensordict::testing::TempDir tmp;
  std::string bytes = tensordict::testing::read_text(path("sequential.pt2"));
  // A byte in the middle lies in the shared library, by far the largest
  // entry.
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x5a);
  tensordict::testing::write_text(tmp / "flipped.pt2", bytes);
  EXPECT_THROWS_WITH(
      AOTIModule(tmp / "flipped.pt2"),
      c10::Error,
      "is corrupted: its CRC-32 is");
  std::string garbage(4096, '\0');
  for (size_t i = 0; i < garbage.size(); ++i) {
    garbage[i] = static_cast<char>((i * 7919) % 251);
  }
  tensordict::testing::write_text(tmp / "garbage.pt2", garbage);
  EXPECT_THROWS_WITH(
      AOTIModule(tmp / "garbage.pt2"), c10::Error, "is not a zip archive");
}

TEST_F(AOTIModuleTest, DamagedDirectoryBytesAreRefusedNeverFollowed) {
  // Every third byte of the central directory and end record, flipped in
  // turn: sizes, offsets, counts and CRCs must be caught by the check, and
  // no value may make it read out of bounds or loop.
  tensordict::testing::TempDir tmp;
  const std::string bytes = tensordict::testing::read_text(path("static.pt2"));
  ASSERT_GT(bytes.size(), 2000u);
  int refused = 0;
  for (size_t i = bytes.size() - 1500; i < bytes.size(); i += 3) {
    std::string damaged = bytes;
    damaged[i] = static_cast<char>(damaged[i] ^ 0xff);
    tensordict::testing::write_text(tmp / "damaged.pt2", damaged);
    try {
      (void)tensordict::detail::read_package_file(tmp / "damaged.pt2", "model");
    } catch (const c10::Error&) {
      ++refused;
    }
  }
  // Names, times and attributes may change harmlessly; most bytes may not.
  EXPECT_GT(refused, 250);
}

TEST_F(AOTIModuleTest, EntryEscapingThePackageDirectoryIsRefused) {
  EXPECT_THROWS_WITH(
      AOTIModule(path("escaping_entry.pt2")),
      c10::Error,
      "the entry name 'a/../../escaped' would be extracted outside");
}

TEST_F(AOTIModuleTest, PackageForAnotherDeviceIsRefused) {
  if (at::hasCUDA()) {
    GTEST_SKIP() << "this process has a CUDA device";
  }
  EXPECT_THROWS_WITH(
      AOTIModule(path("cuda_device.pt2")),
      c10::Error,
      "was compiled for cuda, but this process has no CUDA device");
}

TEST_F(AOTIModuleTest, PackageFromAnotherTorchIsRefused) {
  EXPECT_THROWS_WITH(
      AOTIModule(path("other_torch.pt2")),
      c10::Error,
      "was built by torch 2.99.0+cpu, but this program runs torch 2.13.0");
}

TEST_F(AOTIModuleTest, MalformedMetadataIsRefused) {
  EXPECT_THROWS_WITH(
      AOTIModule(path("future_format.pt2")),
      c10::Error,
      "has tensordict metadata format '9', but this build reads formats '1' "
      "and '2'");
  EXPECT_THROWS_WITH(
      AOTIModule(path("bad_keys.pt2")),
      c10::Error,
      "metadata 'tensordict.in_keys': a key must be a string or a non-empty "
      "list of strings, found 1");
  EXPECT_THROWS_WITH(
      AOTIModule(path("bad_spec.pt2")), c10::Error, "tensordict.spec");
}

// ---- Probabilistic packages ----

TEST_F(AOTIModuleTest, ProbabilisticPackageSamplesAsThePythonActor) {
  AOTIModule actor(path("probabilistic.pt2"));
  ASSERT_EQ(actor->out_keys().size(), 3u);
  EXPECT_EQ(actor->out_keys()[1], NestedKey("action"));
  EXPECT_EQ(actor->out_keys()[2], NestedKey("action_log_prob"));
  ASSERT_NE(actor->probabilistic_head(), nullptr);
  EXPECT_EQ(
      actor->probabilistic_head()->options().distribution_class(),
      "torch.distributions.categorical.Categorical");
  // Unset interaction type: the default, deterministic (the mode).
  TensorDict td = load("probabilistic_inputs");
  actor(td);
  const TensorDict expected = load("probabilistic_expected");
  for (const char* key : {"logits", "action_log_prob"}) {
    expect_close(td.get(key), expected.get(key));
  }
  EXPECT_TRUE(torch::equal(td.get("action"), expected.get("action")));
  // Random, seeded as Python was: the same draws.
  TensorDict random = load("probabilistic_inputs");
  {
    nn::SetInteractionType guard(nn::InteractionType::kRandom);
    torch::manual_seed(5);
    actor(random);
  }
  const TensorDict expected_random = load("probabilistic_expected_random");
  EXPECT_TRUE(
      torch::equal(random.get("action"), expected_random.get("action")));
  expect_close(
      random.get("action_log_prob"), expected_random.get("action_log_prob"));
}

TEST_F(AOTIModuleTest, MalformedProbabilisticMetadataIsRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"unknown_class",
       "unknown distribution class 'torch.distributions.Beta'"},
      {"list_kwarg",
       "the distribution keyword argument 'x' must be a number, a boolean or "
       "null, got array"},
      {"unknown_kwarg", "got an unexpected keyword argument 'temperature'"},
      {"unknown_key",
       "the distribution reads 'nope', which is not an output of the package"},
      {"median", "'median' is not a valid InteractionType"},
      {"short_tensor",
       "the tensor keyword argument 'probs' of shape [3] needs a list of 3 "
       "numbers as data"},
      {"format_1", "tensordict.probabilistic needs metadata format 2"},
      {"no_head", "metadata format 2 needs tensordict.probabilistic"},
  };
  for (const auto& [name, message] : cases) {
    SCOPED_TRACE(name);
    EXPECT_THROWS_WITH(
        AOTIModule(path("probabilistic_" + name + ".pt2")),
        c10::Error,
        message);
  }
}

// ---- Weights from a TensorDict ----

TEST_F(AOTIModuleTest, PackageWithoutWeightsRefusesCallsUntilLoaded) {
  AOTIModule module(path("weights_outside.pt2"));
  TensorDict td = load("weights_outside_inputs");
  EXPECT_THROWS_WITH(module(td), c10::Error, "call load_weights first");
  const TensorDict weights = TensorDict::load_memmap(path("weights_a"));
  std::vector<std::string> names;
  for (const NestedKey& key : weights.flatten_keys(".").keys()) {
    names.emplace_back(key[0]);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(module->weight_names(), names);
  module->load_weights(weights);  // nested, as from_module gives them
  module(td);
  expect_close(
      td.get("value"), load("weights_outside_expected_a").get("value"));
  // Flattened keys work too.
  module->load_weights(
      TensorDict::load_memmap(path("weights_b")).flatten_keys("."));
  module(td);
  expect_close(
      td.get("value"), load("weights_outside_expected_b").get("value"));
}

TEST_F(AOTIModuleTest, WrongWeightsAreRefusedAndTheOldOnesKept) {
  AOTIModule module(path("weights_outside.pt2"));
  const TensorDict good = TensorDict::load_memmap(path("weights_a"));
  module->load_weights(good);
  TensorDict flat = good.flatten_keys(".").clone();

  TensorDict missing = flat.clone();
  missing.del_("module.2.bias");
  EXPECT_THROWS_WITH(
      module->load_weights(missing),
      tensordict::KeyError,
      "the weight 'module.2.bias' is missing from the dict");

  TensorDict extra = flat.clone();
  extra.set("module.9.weight", torch::zeros({1}));
  EXPECT_THROWS_WITH(
      module->load_weights(extra),
      tensordict::KeyError,
      "'module.9.weight' is not a weight of the package");

  TensorDict shape = flat.clone();
  shape.set("module.0.weight", torch::zeros({8, 5}));
  EXPECT_THROWS_WITH(
      module->load_weights(shape),
      c10::ValueError,
      "the weight 'module.0.weight' has shape [8, 5], but the package's is "
      "[8, 4]");

  TensorDict dtype = flat.clone();
  dtype.set("module.0.weight", torch::zeros({8, 4}, torch::kFloat64));
  EXPECT_THROWS_WITH(
      module->load_weights(dtype),
      c10::TypeError,
      "the weight 'module.0.weight' has dtype Double");

  TensorDict td = load("weights_outside_inputs");
  module(td);
  expect_close(
      td.get("value"), load("weights_outside_expected_a").get("value"));
}

TEST_F(AOTIModuleTest, TutorialPackageWeightsAreCheckedAgainstTheOnesInUse) {
  AOTIModule module(path("module.pt2"), {"obs"}, {"action"});
  // Inductor inlined the 4-element bias into the code: it is no weight.
  EXPECT_EQ(module->weight_names(), std::vector<std::string>{"module.weight"});
  EXPECT_THROWS_WITH(
      module->load_weights(TensorDict(
          {{"module.weight", torch::zeros({4, 3})},
           {"module.bias", torch::zeros({4})}})),
      tensordict::KeyError,
      "'module.bias' is not a weight of the package");
  EXPECT_THROWS_WITH(
      module->load_weights(TensorDict(
          {{"module.weight", torch::zeros({4, 3}, torch::kFloat64)}})),
      c10::TypeError,
      "the weight 'module.weight' has dtype Double, but the package's is "
      "Float");
  EXPECT_THROWS_WITH(
      module->load_weights(
          TensorDict({{"module.weight", torch::zeros({4, 4})}})),
      c10::ValueError,
      "has shape [4, 4], but the package's is [4, 3]");
  // Zero weights leave the (inlined) bias alone.
  module->load_weights(TensorDict({{"module.weight", torch::zeros({4, 3})}}));
  TensorDict a = load("module_inputs");
  TensorDict b = load("module_inputs");
  b.set("obs", torch::randn({4, 3}));
  module(a);
  module(b);
  EXPECT_TRUE(torch::equal(a.get("action"), b.get("action")));
}

TEST_F(AOTIModuleTest, WeightsThatAreViewsIntoLargerStoragesLoadCorrectly) {
  AOTIModule module(path("weights_outside.pt2"));
  // Each weight sits at an offset inside a larger buffer, as in a
  // consolidated dict or a slice of stacked weights.
  const TensorDict flat =
      TensorDict::load_memmap(path("weights_a")).flatten_keys(".");
  TensorDict views;
  for (const NestedKey& key : flat.keys()) {
    const at::Tensor t = flat.get(key);
    const at::Tensor buffer =
        torch::cat({torch::full({7}, 1e6), t.flatten(), torch::full({5}, 1e6)});
    views.set(key, buffer.narrow(0, 7, t.numel()).view(t.sizes()));
  }
  module->load_weights(views);
  TensorDict td = load("weights_outside_inputs");
  module(td);
  expect_close(
      td.get("value"), load("weights_outside_expected_a").get("value"));
}

TEST_F(AOTIModuleTest, WeightsOfUnknownShapeAreRefused) {
  // weights_outside.pt2 without its tensordict metadata: that it holds no
  // weights is still found out (a call would crash), but not their shapes.
  AOTIModule module(path("weights_outside_no_spec.pt2"), {"obs"}, {"value"});
  TensorDict td = load("weights_outside_inputs");
  EXPECT_THROWS_WITH(module(td), c10::Error, "call load_weights first");
  // Without the metadata, the names keep the exporter's wrapper prefix.
  const TensorDict flat =
      TensorDict::load_memmap(path("weights_a")).flatten_keys(".");
  TensorDict prefixed;
  for (const NestedKey& key : flat.keys()) {
    prefixed.set("module." + std::string(key[0]), flat.get(key));
  }
  EXPECT_THROWS_WITH(
      module->load_weights(prefixed),
      c10::Error,
      "is unknown (a package without tensordict.spec whose weights are "
      "outside it)");
}

TEST_F(AOTIModuleTest, HotSwapNeverMixesOldAndNewWeights) {
  AOTIModule module(
      path("weights_outside.pt2"), AOTIModuleOptions().num_runners(4));
  const TensorDict a = TensorDict::load_memmap(path("weights_a"));
  const TensorDict b = TensorDict::load_memmap(path("weights_b"));
  const at::Tensor expected_a = load("weights_outside_expected_a").get("value");
  const at::Tensor expected_b = load("weights_outside_expected_b").get("value");
  ASSERT_FALSE(torch::allclose(expected_a, expected_b, 1e-2, 1e-2));
  module->load_weights(a);
  const TensorDict inputs = load("weights_outside_inputs");

  std::atomic<bool> stop{false};
  std::atomic<int> saw_a{0};
  std::atomic<int> saw_b{0};
  std::atomic<int> mixed{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      while (!stop.load()) {
        TensorDict td = inputs.clone();
        module(td);
        const at::Tensor value = td.get("value");
        if (torch::allclose(value, expected_a, kTolerance, kTolerance)) {
          ++saw_a;
        } else if (torch::allclose(value, expected_b, kTolerance, kTolerance)) {
          ++saw_b;
        } else {
          ++mixed;
        }
      }
    });
  }
  const auto wait_for = [&](std::atomic<int>& counter) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (counter.load() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
  };
  wait_for(saw_a);
  for (int swap = 0; swap < 200; ++swap) {
    module->load_weights(swap % 2 == 0 ? b : a);
  }
  saw_b = 0;
  module->load_weights(b);
  wait_for(saw_b);  // the callers now see b's outputs, and only those
  stop = true;
  for (auto& thread : callers) {
    thread.join();
  }
  EXPECT_EQ(mixed.load(), 0);
  EXPECT_GT(saw_a.load(), 0);
  EXPECT_GT(saw_b.load(), 0);
}

// ---- The weights contract (NOTE [Weights contract] in nn.h) ----

TEST_F(AOTIModuleTest, WeightsLayoutIsThePackagesFromItsSpec) {
  AOTIModule module(path("weights_outside.pt2"));
  const TensorDict a = TensorDict::load_memmap(path("weights_a"));
  const TensorDict layout = module->weights_layout();
  std::vector<NestedKey> want = a.keys(true, true);
  std::vector<NestedKey> got = layout.keys(true, true);
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  ASSERT_EQ(got, want);
  for (const NestedKey& key : got) {
    EXPECT_TRUE(layout.get(key).device().is_meta()) << key;
    EXPECT_EQ(layout.get(key).sizes(), a.get(key).sizes()) << key;
    EXPECT_EQ(layout.get(key).scalar_type(), a.get(key).scalar_type()) << key;
  }
  // No spec and no weights held: nothing says what the weights are.
  AOTIModule unknown(path("weights_outside_no_spec.pt2"), {"obs"}, {"value"});
  EXPECT_THROWS_WITH(
      unknown->weights_layout(),
      c10::Error,
      "is unknown (a package without tensordict.spec whose weights are "
      "outside it), so no weights can be loaded into it");
}

// An AOTIModule inside a TensorDictSequential shows its package's weights
// under its prefix and takes new ones through the sequence, which a
// collector's update reaches; refusals, of its part or another module's,
// leave every weight in use.
TEST_F(AOTIModuleTest, AnAOTIModuleInASequenceTakesHotSwappedWeights) {
  torch::manual_seed(0);
  AOTIModule aoti(path("weights_outside.pt2"));
  nn::TensorDictModule scale(torch::nn::Linear(3, 3), {"value"}, {"scaled"});
  nn::TensorDictSequential seq({aoti, scale});
  const TensorDict a = TensorDict::load_memmap(path("weights_a")).clone();
  const TensorDict b = TensorDict::load_memmap(path("weights_b")).clone();
  const TensorDict own = TensorDict::from_module(*scale).clone();
  const auto weights = [&](const TensorDict& package) {
    TensorDict out;
    out.set({"module", "0"}, package.clone());
    out.set({"module", "1"}, own.clone());
    return out;
  };
  std::vector<std::string> names;
  for (const NestedKey& key : seq->weights_layout().keys(true, true)) {
    names.push_back(key.join_parts("."));
  }
  EXPECT_EQ(
      names,
      (std::vector<std::string>{
          "module.0.module.0.bias",  // a package's, by name
          "module.0.module.0.weight",
          "module.0.module.2.bias",
          "module.0.module.2.weight",
          "module.1.module.weight",  // a Linear's, as registered
          "module.1.module.bias"}));
  const at::Tensor expected_a = load("weights_outside_expected_a").get("value");
  const at::Tensor expected_b = load("weights_outside_expected_b").get("value");
  const auto value = [&] {
    TensorDict td = load("weights_outside_inputs");
    seq(td);
    return td.get("value");
  };
  seq->load_weights(weights(a));
  expect_close(value(), expected_a);
  seq->load_weights(weights(b).flatten_keys("."));
  expect_close(value(), expected_b);

  TensorDict bad_package = weights(a);
  bad_package.set(
      {"module", "0", "module", "0", "weight"}, torch::zeros({8, 5}));
  EXPECT_THROWS_WITH(
      seq->load_weights(bad_package),
      c10::ValueError,
      "key ('module', '0', 'module', '0', 'weight') expected [8, 4] "
      "torch.float32, got [8, 5] torch.float32");
  TensorDict bad_other = weights(a);
  bad_other.set(
      {"module", "1", "module", "bias"}, torch::zeros({3}, at::kDouble));
  EXPECT_THROWS_WITH(
      seq->load_weights(bad_other),
      c10::ValueError,
      "key ('module', '1', 'module', 'bias') expected [3] torch.float32");
  TensorDict missing =
      weights(a).exclude({{"module", "0", "module", "2", "bias"}});
  EXPECT_THROWS_WITH(
      seq->load_weights(missing),
      tensordict::KeyError,
      "key ('module', '0', 'module', '2', 'bias') of the module is missing");
  expect_close(value(), expected_b);
  tensordict::testing::expect_td_equal(TensorDict::from_module(*scale), own);

  // An AOTIModule's own refusals keep the package's weights too.
  EXPECT_THROWS_WITH(
      aoti->load_weights(a.exclude({{"module", "2", "bias"}})),
      tensordict::KeyError,
      "the weight 'module.2.bias' is missing from the dict");
  expect_close(value(), expected_b);
}

// ---- clone() ----

TEST_F(AOTIModuleTest, CloneIsAnIndependentCopyWithTheWeightsInUse) {
  AOTIModule module(path("weights_outside.pt2"));
  module->load_weights(TensorDict::load_memmap(path("weights_b")));
  auto copy = std::dynamic_pointer_cast<tensordict::nn::AOTIModuleImpl>(
      module->clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->in_keys(), module->in_keys());
  EXPECT_EQ(copy->out_keys(), module->out_keys());
  const at::Tensor expected_a = load("weights_outside_expected_a").get("value");
  const at::Tensor expected_b = load("weights_outside_expected_b").get("value");
  TensorDict td = load("weights_outside_inputs");
  (*copy)(td);
  expect_close(td.get("value"), expected_b);
  // New weights in the original leave the clone's alone, and back.
  module->load_weights(TensorDict::load_memmap(path("weights_a")));
  (*copy)(td);
  expect_close(td.get("value"), expected_b);
  module(td);
  expect_close(td.get("value"), expected_a);
  // A package without weights clones into one without weights.
  AOTIModule empty(path("weights_outside.pt2"));
  auto empty_copy = empty->clone();
  EXPECT_THROWS_WITH(
      (*std::dynamic_pointer_cast<tensordict::nn::AOTIModuleImpl>(empty_copy))(
          td),
      c10::Error,
      "call load_weights first");
}

TEST_F(AOTIModuleTest, CloneKeepsTheCallersKeysAndTheSelection) {
  AOTIModule module(
      path("sequential_no_spec.pt2"),
      {{"obs", "x"}, {"obs", "y"}},
      {{"out", "action"}, {"hidden", "h"}});
  module->select_out_keys({{"out", "action"}});
  tensordict::nn::AnyTensorDictModule copy(
      std::dynamic_pointer_cast<tensordict::nn::TensorDictModuleBase>(
          module->clone()));
  EXPECT_EQ(
      copy->out_keys(), std::vector<NestedKey>{NestedKey({"out", "action"})});
  TensorDict td = load("sequential_inputs_5");
  copy(td);
  EXPECT_FALSE(td.contains({"hidden", "h"}));
  expect_close(
      td.get({"out", "action"}),
      load("sequential_expected_5").get({"out", "action"}));
  EXPECT_THROWS_WITH(
      module->clone(c10::Device(c10::kMeta)),
      c10::Error,
      "cannot clone it to meta: a package runs on the device it was "
      "compiled for, cpu");
}

// ---- pack() and PackLayout against Python (tests/pack_test.cpp has the
// rest) ----

std::vector<NestedKey> json_keys(const Json& list) {
  std::vector<NestedKey> keys;
  for (const Json& key : list) {
    keys.emplace_back(key.get<std::vector<std::string>>());
  }
  return keys;
}

TEST_F(AOTIModuleTest, PackGivesPythonsColumnsBitForBit) {
  const TensorDict td = load("pack_input");
  const TensorDict expected = load("pack_expected");
  const Json golden =
      Json::parse(tensordict::testing::read_text(path("pack_layout.json")));
  auto [flat, layout] = tensordict::pack(td);
  EXPECT_TRUE(torch::equal(flat, expected.get("flat")));
  // The old spelling, tensordict::nn::pack, is the same function.
  EXPECT_TRUE(torch::equal(tensordict::nn::pack(td).first, flat));
  EXPECT_TRUE(flat.is_contiguous());
  EXPECT_EQ(layout.keys, json_keys(golden["keys"]));
  EXPECT_EQ(
      layout.shapes, golden["shapes"].get<std::vector<std::vector<int64_t>>>());
  EXPECT_EQ(layout.offsets, golden["offsets"].get<std::vector<int64_t>>());
  EXPECT_EQ(layout.numel, golden["numel"].get<int64_t>());
  EXPECT_EQ(layout.dim, golden["dim"].get<int64_t>());
  ASSERT_EQ(layout.nested.size(), golden["nested"].size());
  for (size_t i = 0; i < layout.nested.size(); ++i) {
    EXPECT_EQ(
        layout.nested[i].first,
        NestedKey(golden["nested"][i][0].get<std::vector<std::string>>()));
  }
  auto [flat0, layout0] = tensordict::pack(td, 0);
  EXPECT_TRUE(torch::equal(flat0, expected.get("flat0")));
  EXPECT_EQ(layout0.dim, golden["dim0"].get<int64_t>());
}

TEST_F(AOTIModuleTest, UnpackInvertsPackWithViews) {
  const TensorDict td = load("pack_input");
  auto [flat, layout] = tensordict::pack(td);
  const TensorDict back = layout.unpack(flat);
  for (const NestedKey& key : td.keys(true, true)) {
    EXPECT_TRUE(torch::equal(back.get(key), td.get(key))) << key.to_string();
  }
  EXPECT_EQ(back.get("b").data_ptr(), flat.data_ptr());  // a view
  // Rows of the packed tensor unpack to a dict of that batch size.
  const TensorDict rows = layout.unpack(flat.narrow(0, 1, 2));
  EXPECT_EQ(rows.batch_size(), c10::IntArrayRef({2}));
  EXPECT_TRUE(torch::equal(
      rows.get({"nested", "stress"}),
      td.get({"nested", "stress"}).narrow(0, 1, 2)));
  // Packing into a layout follows its order.
  auto [again, same] = tensordict::pack(back, -1, &layout);
  EXPECT_TRUE(torch::equal(again, flat));
  EXPECT_EQ(same, layout);
}

}  // namespace
}  // namespace aoti_test
