#include "core/node_table.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

// Its own namespace, so that test files can share a unity batch.
namespace node_table_test {

namespace {

using tensordict::Value;
using tensordict::detail::Node;
using tensordict::detail::NodeTable;

Value number(int64_t i) {
  return Value(torch::tensor(i));
}

int64_t number_of(const Node* node) {
  return node->value.tensor().item<int64_t>();
}

std::vector<std::string> keys_of(const NodeTable& table) {
  std::vector<std::string> out;
  for (const Node* node : table.nodes()) {
    out.push_back(node->key);
  }
  return out;
}

// Keys that all probe to the same first slot of an 8-slot table, so the
// table must walk past the others to find each one.
std::vector<std::string> colliding_keys(size_t n) {
  std::vector<std::string> out;
  size_t wanted_slot = 0;
  for (int i = 0; out.size() < n; ++i) {
    std::string key = "key" + std::to_string(i);
    const size_t slot = std::hash<std::string_view>{}(key)&7;
    if (out.empty()) {
      wanted_slot = slot;
    }
    if (slot == wanted_slot) {
      out.push_back(std::move(key));
    }
  }
  return out;
}

}  // namespace

TEST(NodeTableTest, AnEmptyTableFindsNothing) {
  NodeTable table;
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.size(), 0u);
  EXPECT_TRUE(table.nodes().empty());
  EXPECT_EQ(table.find("a"), nullptr);
  EXPECT_EQ(table.find(""), nullptr);
}

TEST(NodeTableTest, NodesComeInInsertionOrder) {
  NodeTable table;
  for (const char* key : {"zeta", "alpha", "mid", "beta"}) {
    table.append(key, number(static_cast<int64_t>(table.size())));
  }
  EXPECT_EQ(
      keys_of(table),
      (std::vector<std::string>{"zeta", "alpha", "mid", "beta"}));
  EXPECT_EQ(table.nodes().size(), 4u);
  EXPECT_EQ(number_of(table.find("mid")), 2);
}

TEST(NodeTableTest, AppendReturnsTheStoredNode) {
  NodeTable table;
  Node& node = table.append("a", number(7));
  EXPECT_EQ(&node, table.find("a"));
  EXPECT_EQ(node.key, "a");
  EXPECT_EQ(number_of(&node), 7);
}

TEST(NodeTableTest, FindsEveryKeyAfterManyAppendsAndRehashes) {
  NodeTable table;
  const int64_t n = 1000;
  std::vector<size_t> slot_counts;
  for (int64_t i = 0; i < n; ++i) {
    table.append("k" + std::to_string(i), number(i));
    if (slot_counts.empty() || slot_counts.back() != table.slot_count()) {
      slot_counts.push_back(table.slot_count());
    }
  }
  // 8, 16, ..., 2048: the table doubled each time it got more than half full.
  ASSERT_EQ(slot_counts.size(), 9u);
  EXPECT_EQ(slot_counts.front(), 8u);
  EXPECT_EQ(slot_counts.back(), 2048u);
  for (int64_t i = 0; i < n; ++i) {
    const Node* node = table.find("k" + std::to_string(i));
    ASSERT_NE(node, nullptr) << i;
    EXPECT_EQ(number_of(node), i);
  }
  EXPECT_EQ(table.find("k1000"), nullptr);
  EXPECT_EQ(table.find("k"), nullptr);
  int64_t expected = 0;
  for (const Node* node : table.nodes()) {
    EXPECT_EQ(number_of(node), expected++);
  }
}

TEST(NodeTableTest, EraseReturnsTheValueAndKeepsTheOthersInOrder) {
  NodeTable table;
  for (int64_t i = 0; i < 20; ++i) {
    table.append("k" + std::to_string(i), number(i));
  }
  Value erased = table.erase("k5");
  EXPECT_EQ(erased.tensor().item<int64_t>(), 5);
  EXPECT_EQ(table.size(), 19u);
  EXPECT_EQ(table.find("k5"), nullptr);
  for (int64_t i = 0; i < 20; ++i) {
    if (i == 5) {
      continue;
    }
    const Node* node = table.find("k" + std::to_string(i));
    ASSERT_NE(node, nullptr) << i;
    EXPECT_EQ(number_of(node), i);
  }
  EXPECT_EQ(keys_of(table)[4], "k4");
  EXPECT_EQ(keys_of(table)[5], "k6");
}

TEST(NodeTableTest, AnErasedKeyAppendedAgainGoesLast) {
  NodeTable table;
  table.append("a", number(1));
  table.append("b", number(2));
  table.append("c", number(3));
  (void)table.erase("a");
  table.append("a", number(4));
  EXPECT_EQ(keys_of(table), (std::vector<std::string>{"b", "c", "a"}));
  EXPECT_EQ(number_of(table.find("a")), 4);
  EXPECT_EQ(number_of(table.find("b")), 2);
}

TEST(NodeTableTest, ErasingEveryKeyLeavesAnEmptyUsableTable) {
  NodeTable table;
  table.append("a", number(1));
  table.append("b", number(2));
  (void)table.erase("b");
  (void)table.erase("a");
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.find("a"), nullptr);
  table.append("b", number(3));
  EXPECT_EQ(number_of(table.find("b")), 3);
}

// Erasing the last node frees its slot alone (no re-index): keys that
// collide with it, before it in the probe chain and after it, stay found,
// through appends, rehashes and erasures in the middle.
TEST(NodeTableTest, ErasingTheLastKeysKeepsEveryCollidingKeyFound) {
  const std::vector<std::string> keys = colliding_keys(12);
  NodeTable table;
  std::vector<std::string> expected;
  const auto check = [&] {
    ASSERT_EQ(keys_of(table), expected);
    for (size_t i = 0; i < keys.size(); ++i) {
      const bool present =
          std::find(expected.begin(), expected.end(), keys[i]) !=
          expected.end();
      const Node* node = table.find(keys[i]);
      ASSERT_EQ(node != nullptr, present) << keys[i];
      if (present) {
        EXPECT_EQ(number_of(node), static_cast<int64_t>(i)) << keys[i];
      }
    }
  };
  const auto append = [&](size_t i) {
    table.append(keys[i], number(static_cast<int64_t>(i)));
    expected.push_back(keys[i]);
  };
  for (size_t i = 0; i < 5; ++i) {
    append(i);
  }
  for (int round = 0; round < 3; ++round) {
    // The last two out and back in, as a collector's root every step.
    EXPECT_EQ(table.erase(keys[4]).tensor().item<int64_t>(), 4);
    expected.pop_back();
    check();
    (void)table.erase(keys[3]);
    expected.pop_back();
    check();
    append(3);
    append(4);
    check();
  }
  for (size_t i = 5; i < 12; ++i) {  // past 8 slots: a rehash
    append(i);
  }
  check();
  (void)table.erase(keys[11]);
  expected.pop_back();
  check();
  (void)table.erase(keys[2]);  // the middle: re-indexed
  expected.erase(expected.begin() + 2);
  check();
  (void)table.erase(keys[10]);
  expected.pop_back();
  check();
  append(11);
  append(2);
  check();
}

TEST(NodeTableTest, ReserveMakesRoomWithoutRehashingOrMovingNodes) {
  NodeTable table;
  table.reserve(100);
  // At most half full: 100 entries need 200 slots, rounded up to 256.
  EXPECT_EQ(table.slot_count(), 256u);
  table.append("k0", number(0));
  const Node* first = table.find("k0");
  for (int64_t i = 1; i < 100; ++i) {
    table.append("k" + std::to_string(i), number(i));
  }
  EXPECT_EQ(table.slot_count(), 256u);
  EXPECT_EQ(table.find("k0"), first);
  for (int64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(number_of(table.find("k" + std::to_string(i))), i);
  }
}

TEST(NodeTableTest, ReserveNeverShrinksAndKeepsEntries) {
  NodeTable table;
  for (int64_t i = 0; i < 10; ++i) {
    table.append("k" + std::to_string(i), number(i));
  }
  const size_t slots = table.slot_count();
  table.reserve(1);
  EXPECT_EQ(table.slot_count(), slots);
  table.reserve(1000);
  EXPECT_EQ(table.slot_count(), 2048u);
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(number_of(table.find("k" + std::to_string(i))), i);
  }
}

TEST(NodeTableTest, KeysProbingToTheSameSlotAreAllFound) {
  const std::vector<std::string> keys = colliding_keys(5);
  NodeTable table;
  // Four keys fit 8 slots without a rehash, so they share one probe chain.
  for (size_t i = 0; i < 4; ++i) {
    table.append(keys[i], number(static_cast<int64_t>(i)));
  }
  ASSERT_EQ(table.slot_count(), 8u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(number_of(table.find(keys[i])), static_cast<int64_t>(i));
  }
  // A fifth key on the same chain is absent: the probe must end at a gap.
  EXPECT_EQ(table.find(keys[4]), nullptr);
  // Erasing the head of the chain must not cut off the keys behind it.
  (void)table.erase(keys[0]);
  EXPECT_EQ(table.find(keys[0]), nullptr);
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(number_of(table.find(keys[i])), static_cast<int64_t>(i));
  }
}

TEST(NodeTableTest, TheEmptyStringIsAnOrdinaryKey) {
  NodeTable table;
  table.append("a", number(1));
  table.append("", number(2));
  EXPECT_EQ(number_of(table.find("")), 2);
  EXPECT_EQ(keys_of(table), (std::vector<std::string>{"a", ""}));
  (void)table.erase("");
  EXPECT_EQ(table.find(""), nullptr);
  EXPECT_EQ(number_of(table.find("a")), 1);
}

TEST(NodeTableTest, KeysAreComparedWhole) {
  NodeTable table;
  table.append("ab", number(1));
  EXPECT_EQ(table.find("a"), nullptr);
  EXPECT_EQ(table.find("abc"), nullptr);
  EXPECT_EQ(table.find(std::string_view("abc", 2)), table.find("ab"));
}

// same_key reads short keys as overlapping words: a byte that differs at
// any place of any length up to past the memcmp cut-over (16) must count,
// and keys read from the middle of a larger buffer must compare alike.
TEST(NodeTableTest, SameKeySeesEveryByteOfEveryLength) {
  using tensordict::detail::same_key;
  const std::string buffer(64, 'k');
  for (size_t n = 0; n <= 24; ++n) {
    const std::string key(n, 'k');
    EXPECT_TRUE(same_key(key, std::string_view(buffer).substr(3, n))) << n;
    EXPECT_FALSE(same_key(key, std::string(n + 1, 'k'))) << n;
    for (size_t at = 0; at < n; ++at) {
      std::string other = key;
      other[at] = 'j';
      EXPECT_FALSE(same_key(key, other)) << "length " << n << ", byte " << at;
      EXPECT_FALSE(same_key(other, key)) << "length " << n << ", byte " << at;
    }
  }
  // The table finds through it: keys of each length class, alike but one
  // byte.
  NodeTable table;
  for (const char* key :
       {"x",
        "act",
        "done",
        "action",
        "terminated",
        "observation",
        "a_key_past_16_bytes"}) {
    table.append(key, number(static_cast<int64_t>(std::strlen(key))));
  }
  EXPECT_EQ(number_of(table.find("observation")), 11);
  EXPECT_EQ(table.find("observatioN"), nullptr);
  EXPECT_EQ(table.find("acti0n"), nullptr);
  EXPECT_EQ(number_of(table.find("a_key_past_16_bytes")), 19);
  EXPECT_EQ(table.find("a_key_past_16_bytez"), nullptr);
}

TEST(NodeTableTest, ClearRemovesEveryNode) {
  NodeTable table;
  for (int64_t i = 0; i < 10; ++i) {
    table.append("k" + std::to_string(i), number(i));
  }
  table.clear();
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.find("k3"), nullptr);
  table.append("k3", number(33));
  EXPECT_EQ(number_of(table.find("k3")), 33);
  EXPECT_EQ(keys_of(table), (std::vector<std::string>{"k3"}));
}

}  // namespace node_table_test
