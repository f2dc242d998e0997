#include <tensordict/nested_key.h>

#include <unordered_set>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace nested_key_test {

using tensordict::KeyError;
using tensordict::NestedKey;

TEST(NestedKeyTest, StringKeyHasOnePart) {
  NestedKey key = "obs";
  ASSERT_EQ(key.size(), 1u);
  EXPECT_EQ(key[0], "obs");
  EXPECT_EQ(key.back(), "obs");
  EXPECT_EQ(key.to_string(), "'obs'");
}

TEST(NestedKeyTest, NestedBraceListsUnravel) {
  NestedKey key = {"a", {"b", {"c"}}};
  EXPECT_EQ(key, NestedKey({"a", "b", "c"}));
  EXPECT_EQ(key.to_vector(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(key.to_string(), "('a', 'b', 'c')");
}

TEST(NestedKeyTest, SingleElementListIsThePlainKey) {
  EXPECT_EQ(NestedKey({"a"}), NestedKey("a"));
  EXPECT_EQ(NestedKey({{"a"}}).to_string(), "'a'");
}

TEST(NestedKeyTest, EmptyKeyIsAKeyError) {
  EXPECT_THROWS_EXACTLY(
      NestedKey(std::vector<std::string>{}),
      KeyError,
      "Only NestedKeys are supported: a key must be a string or a non-empty, "
      "possibly nested tuple of strings. Got key ().");
  EXPECT_THROWS_WITH(NestedKey({}), KeyError, "Got key ()");
}

TEST(NestedKeyTest, OwnedKeysSurviveTheirSource) {
  NestedKey key = [] {
    std::string a = "a rather long key that does not fit inline";
    std::string b = "b";
    return NestedKey({NestedKey(a), NestedKey(b)});
  }();
  EXPECT_EQ(key[0], "a rather long key that does not fit inline");
  EXPECT_EQ(key[1], "b");
  NestedKey copy = key;
  EXPECT_EQ(copy, key);
  EXPECT_EQ(copy[0].data(), key[0].data());  // copies share storage
}

TEST(NestedKeyTest, StringViewKeysOwnACopy) {
  std::string text = "temporary";
  NestedKey key{std::string_view(text)};
  text.assign("overwritten");
  EXPECT_EQ(key[0], "temporary");
}

TEST(NestedKeyTest, JoinAndPrefix) {
  NestedKey key = {"a", "b"};
  EXPECT_EQ(key.child("c"), NestedKey({"a", "b", "c"}));
  EXPECT_EQ(key.join(NestedKey({"c", "d"})).size(), 4u);
  EXPECT_EQ(key.prefix(1), NestedKey("a"));
  EXPECT_THROWS_WITH(key.prefix(0), c10::IndexError, "out of range");
  EXPECT_THROWS_WITH(key.prefix(3), c10::IndexError, "out of range");
  EXPECT_EQ(key.join_parts("/"), "a/b");
}

TEST(NestedKeyTest, OrdersByDotJoinedString) {
  // Python sorts keys(sort=True) by ".".join(key).
  EXPECT_TRUE(NestedKey("a") < NestedKey({"a", "x"}));
  EXPECT_TRUE(NestedKey({"a", "x"}) < NestedKey("b"));
  EXPECT_TRUE(NestedKey("a.b") < NestedKey({"a", "c"}));
  EXPECT_FALSE(NestedKey({"a", "b"}) < NestedKey("a.b"));
  EXPECT_FALSE(NestedKey("a.b") < NestedKey({"a", "b"}));
  EXPECT_TRUE(NestedKey("A") < NestedKey("a"));
}

TEST(NestedKeyTest, ReprQuotesLikePython) {
  EXPECT_EQ(NestedKey("it's").to_string(), "\"it's\"");
  EXPECT_EQ(NestedKey("a'b\"c").to_string(), "'a\\'b\"c'");
  EXPECT_EQ(NestedKey("back\\slash").to_string(), "'back\\\\slash'");
  EXPECT_EQ(NestedKey("").to_string(), "''");
}

TEST(NestedKeyTest, HashesEqualKeysEqually) {
  std::unordered_set<NestedKey> keys;
  keys.insert(NestedKey({"a", "b"}));
  keys.insert(NestedKey(std::vector<std::string>{"a", "b"}));
  keys.insert("a");
  EXPECT_EQ(keys.size(), 2u);
  EXPECT_TRUE(keys.count(NestedKey({"a", {"b"}})));
}

TEST(NestedKeyTest, NullPointerIsRejected) {
  const char* null = nullptr;
  EXPECT_THROWS_WITH(NestedKey{null}, c10::ValueError, "null pointer");
}

TEST(NestedKeyTest, ChildOfJoinsAParentOrStartsAtTheRoot) {
  EXPECT_EQ(NestedKey::child_of(std::nullopt, "a"), NestedKey("a"));
  EXPECT_EQ(
      NestedKey::child_of(NestedKey({"n", "m"}), "a").to_string(),
      "('n', 'm', 'a')");
}

TEST(NestedKeyTest, FromPartsOwnsACopyOfThePath) {
  std::string part = "obs";
  const std::vector<std::string_view> parts = {"next", part};
  const NestedKey key = NestedKey::from_parts(parts);
  part = "xxx";
  EXPECT_EQ(key.to_string(), "('next', 'obs')");
  EXPECT_THROWS_WITH(
      NestedKey::from_parts({}),
      KeyError,
      "a key must be a string or a non-empty");
}

}  // namespace nested_key_test
