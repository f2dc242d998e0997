// Print options (print_options.h) and the compact repr they select. Expected
// reprs come from Python tensordict 0.15.3; tests/python/test_parity.py
// compares many more cases with Python directly.
#include <tensordict/lazy_stack.h>
#include <tensordict/print_options.h>
#include <tensordict/tensor_dict.h>

#include <atomic>
#include <sstream>
#include <thread>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace print_options_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)

namespace {

// a: [3, 2] int64, b: {c: [3] bool}, s: "str" (the example of the header).
TensorDict make_td() {
  return TensorDict(
      {{"a", torch::zeros({3, 2}, torch::kLong)},
       {"b", {{"c", torch::zeros({3}, torch::kBool)}}},
       {"s", "str"}},
      /*batch_size=*/{3});
}

const char* const kCompact =
    "TensorDict(batch_size=[3], fields={a: i64[2], b: {c: bool[]}, s: str})";

bool same_options(const PrintOptions& a, const PrintOptions& b) {
  return a.compact() == b.compact() && a.sort_keys() == b.sort_keys() &&
         a.show_dtype() == b.show_dtype() &&
         a.show_batch_size() == b.show_batch_size() &&
         a.show_device() == b.show_device();
}

}  // namespace

TEST(PrintOptionsTest, DefaultsArePythons) {
  const PrintOptions options;
  EXPECT_TRUE(options.compact());
  EXPECT_EQ(options.sort_keys(), SortKeys::kAlphabetical);
  EXPECT_TRUE(options.show_dtype());
  EXPECT_TRUE(options.show_batch_size());
  EXPECT_TRUE(options.show_device());
  EXPECT_TRUE(same_options(get_printoptions(), options));
}

TEST(PrintOptionsTest, SetPrintoptionsChangesWhatGetPrintoptionsReturns) {
  const PrintOptions before = get_printoptions();
  set_printoptions(PrintOptions().compact(false).show_dtype(false));
  EXPECT_FALSE(get_printoptions().compact());
  EXPECT_FALSE(get_printoptions().show_dtype());
  EXPECT_TRUE(get_printoptions().show_device());
  set_printoptions(before);
  EXPECT_TRUE(same_options(get_printoptions(), before));
}

TEST(PrintOptionsTest, GuardRestoresThePreviousOptionsWhenNested) {
  const PrintOptions before = get_printoptions();
  {
    PrintOptionsGuard outer(get_printoptions().compact(false));
    EXPECT_FALSE(get_printoptions().compact());
    {
      PrintOptionsGuard inner(
          get_printoptions().sort_keys(SortKeys::kInsertion));
      EXPECT_FALSE(get_printoptions().compact());
      EXPECT_EQ(get_printoptions().sort_keys(), SortKeys::kInsertion);
    }
    EXPECT_FALSE(get_printoptions().compact());
    EXPECT_EQ(get_printoptions().sort_keys(), SortKeys::kAlphabetical);
  }
  EXPECT_TRUE(same_options(get_printoptions(), before));
}

TEST(PrintOptionsTest, ReprIsCompactByDefault) {
  const TensorDict td = make_td();
  EXPECT_EQ(td.repr(), kCompact);
  EXPECT_EQ(td.repr_compact(), kCompact);
  std::ostringstream out;
  out << td;
  EXPECT_EQ(out.str(), kCompact);
}

TEST(PrintOptionsTest, ReprIsDetailedWhenCompactIsOff) {
  const TensorDict td = make_td();
  PrintOptionsGuard guard(PrintOptions().compact(false));
  EXPECT_EQ(td.repr(), td.repr_detailed());
  EXPECT_EQ(td.repr_detailed().rfind("TensorDict(\n    fields={\n", 0), 0u);
  std::ostringstream out;
  out << td;
  EXPECT_EQ(out.str(), td.repr_detailed());
  // The explicit forms ignore the option.
  EXPECT_EQ(td.repr_compact(), kCompact);
}

TEST(PrintOptionsTest, DetailedReprNestsDetailedReprs) {
  const std::string detailed = make_td().repr_detailed();
  EXPECT_NE(
      detailed.find("        b: TensorDict(\n            fields={\n"),
      std::string::npos)
      << detailed;
  EXPECT_EQ(detailed.find("bool[]"), std::string::npos) << detailed;
}

TEST(PrintOptionsTest, CompactReprFollowsTheOtherOptions) {
  const TensorDict td(
      {{"b", torch::zeros({2})}, {"a", torch::zeros({2, 3}, torch::kLong)}},
      /*batch_size=*/{2},
      c10::Device("cpu"));
  EXPECT_EQ(
      td.repr(),
      "TensorDict(batch_size=[2], device=cpu, fields={a: i64[3], b: f32[]})");
  {
    PrintOptionsGuard guard(PrintOptions()
                                .sort_keys(SortKeys::kInsertion)
                                .show_dtype(false)
                                .show_batch_size(false)
                                .show_device(false));
    EXPECT_EQ(td.repr(), "TensorDict(fields={b: [], a: [3]})");
  }
  {
    PrintOptionsGuard guard(
        PrintOptions().compact(false).show_batch_size(false).show_device(
            false));
    const std::string detailed = td.repr();
    EXPECT_EQ(detailed.find("batch_size="), std::string::npos) << detailed;
    EXPECT_NE(detailed.find("is_shared=False)"), std::string::npos) << detailed;
  }
}

TEST(PrintOptionsTest, CompactReprPrintsNonTensorsByTypeName) {
  TensorDict td({{"t", torch::zeros({3})}}, /*batch_size=*/{3});
  td.set_non_tensor("i", 3);
  td.set_non_tensor("f", 2.5);
  td.set_non_tensor("n", nullptr);
  td.set("st", NonTensorStack({"x", "y", "z"}));
  td.set("e", TensorDict({3, 4}));
  EXPECT_EQ(
      td.repr(),
      "TensorDict(batch_size=[3], fields={\n"
      "    e: [4]{},\n"
      "    f: float,\n"
      "    i: int,\n"
      "    n: NoneType,\n"
      "    st: NonTensorStack,\n"
      "    t: f32[]})");
}

TEST(PrintOptionsTest, CompactReprWrapsLevelsThatDoNotFitIn80Columns) {
  TensorDict td = TensorDict(c10::IntArrayRef({2}));
  td.set({"outer", std::string(13, 'k')}, torch::zeros({2, 3}));
  td.set({"outer", "inner", std::string(13, 'x')}, torch::zeros({2, 4}));
  td.set({"outer", "inner", "y"}, torch::zeros({2, 1, 1, 1}));
  td.set("zz", torch::zeros({2}));
  EXPECT_EQ(
      td.repr(),
      "TensorDict(batch_size=[2], fields={\n"
      "    outer: {\n"
      "        inner: {xxxxxxxxxxxxx: f32[4], y: f32[1,1,1]},\n"
      "        kkkkkkkkkkkkk: f32[3]},\n"
      "    zz: f32[]})");
}

TEST(PrintOptionsTest, LazyStackReprIsCompactByDefault) {
  const LazyStackedTensorDict stack = lazy_stack(
      {TensorDict({{"a", torch::zeros({3}, torch::kInt)}}),
       TensorDict({{"a", torch::zeros({4})}, {"b", torch::zeros({1})}})});
  const std::string expected =
      "LazyStackedTensorDict(batch_size=[2], stack_dim=0, fields={\n"
      "    a: f32[-1]}, exclusive_fields={1: {b: f32[1]}})";
  EXPECT_EQ(stack.repr(), expected);
  EXPECT_EQ(stack.repr_compact(), expected);
  std::ostringstream out;
  out << stack;
  EXPECT_EQ(out.str(), expected);
  PrintOptionsGuard guard(PrintOptions().compact(false));
  EXPECT_EQ(stack.repr(), stack.repr_detailed());
  EXPECT_EQ(stack.repr_detailed().rfind("LazyStackedTensorDict(\n", 0), 0u);
}

TEST(PrintOptionsTest, LazyStackReprFallsBackToDetailedWhereCompactFails) {
  const LazyStackedTensorDict stack = lazy_stack(
      {TensorDict({{"x", {{"a", torch::zeros({1})}}}}),
       TensorDict({{"x", torch::zeros({3})}})});
  EXPECT_THROWS_WITH(
      stack.repr_compact(),
      c10::Error,
      "no compact repr: the entry is a TensorDict in some elements only");
  EXPECT_EQ(stack.repr(), stack.repr_detailed());
}

// One thread sets the options while others print: every repr is one of the
// two forms, never a mix, and nothing races (run under TSan to check).
TEST(PrintOptionsTest, ReprAndSetPrintoptionsMayRunInParallel) {
  const PrintOptions before = get_printoptions();
  const TensorDict td = make_td();
  const std::string compact = td.repr_compact();
  const std::string detailed = td.repr_detailed();
  std::atomic<bool> done{false};
  std::thread setter([&] {
    for (int i = 0; i < 200; ++i) {
      set_printoptions(PrintOptions().compact(i % 2 == 0));
    }
    done = true;
  });
  int mixed = 0;
  while (!done) {
    const std::string text = td.repr();
    mixed += text != compact && text != detailed;
  }
  setter.join();
  set_printoptions(before);
  EXPECT_EQ(mixed, 0);
}

}  // namespace print_options_test
