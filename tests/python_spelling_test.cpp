// Tests of src/util/python_spelling.h: the list, tuple and set spellings
// that reprs and error messages share, compared with what Python prints.

#include "util/python_spelling.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

// Its own namespace, so that test files can share a unity batch.
namespace python_spelling_test {

namespace {

using tensordict::detail::join_spelled;
using tensordict::detail::names_repr;
using tensordict::detail::python_repr;
using tensordict::detail::python_tuple;
using tensordict::detail::size_repr;
using tensordict::detail::sorted_list_repr;

TEST(PythonSpellingTest, JoinSpelledSeparatesEachSpelledItem) {
  const std::vector<int64_t> numbers = {3, -1, 20};
  const auto spell = [](int64_t n) { return std::to_string(n); };
  EXPECT_EQ(join_spelled(numbers, spell), "3, -1, 20");
  EXPECT_EQ(join_spelled(numbers, spell, ",\n"), "3,\n-1,\n20");
  EXPECT_EQ(join_spelled(std::vector<int64_t>{7}, spell), "7");
  EXPECT_EQ(join_spelled(std::vector<int64_t>{}, spell), "");
  // A plain function spells too; a std::set keeps its order.
  const std::set<std::string> keys = {"b", "a"};
  EXPECT_EQ(join_spelled(keys, python_repr), "'a', 'b'");
}

TEST(PythonSpellingTest, ShapesAreSpelledAsPythonPrintsThem) {
  // Python: repr(torch.Size([4, 3])), repr((2,)), repr((2, 5)), repr(()).
  EXPECT_EQ(size_repr({4, 3}), "torch.Size([4, 3])");
  EXPECT_EQ(size_repr({}), "torch.Size([])");
  EXPECT_EQ(python_tuple({2}), "(2,)");
  EXPECT_EQ(python_tuple({2, 5}), "(2, 5)");
  EXPECT_EQ(python_tuple({}), "()");
}

TEST(PythonSpellingTest, NameListsAreSortedAndQuotedAsPythonPrintsThem) {
  // Python: repr(sorted(["b", "it's", "a"])) and repr(["x", None]).
  EXPECT_EQ(sorted_list_repr({"b", "it's", "a"}), "['a', 'b', \"it's\"]");
  EXPECT_EQ(sorted_list_repr({}), "[]");
  EXPECT_EQ(names_repr({std::string("x"), std::nullopt}), "['x', None]");
  EXPECT_EQ(names_repr({}), "[]");
}

}  // namespace
}  // namespace python_spelling_test
