// The traversal engine (src/core/walk.h): key paths, the visitor walk and
// its mutating twin, for_each_dict and any_dict, and the N-ary zip with its
// one key and kind check, its matching answer and its missing dicts.

#include "core/walk.h"

#include <tensordict/tensor_dict.h>

#include <string>
#include <vector>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace walk_test {

using namespace tensordict;  // NOLINT(google-build-using-namespace)
using tensordict::detail::KeyPath;
using tensordict::detail::Node;
using tensordict::detail::TensorDictImpl;
using tensordict::detail::ZipKeys;
using tensordict::detail::ZipOptions;

TensorDict make_tree() {
  TensorDict td({{"a", torch::zeros({2})}}, {2});
  td.set("n", TensorDict({{"b", torch::ones({2})}, {"s", "text"}}, {2}));
  td.set_non_tensor("c", "x");
  return td;
}

// Records every hook call as one line.
struct Recorder : tensordict::detail::WalkVisitor {
  std::vector<std::string> events;
  bool skip_nested = false;

  bool enter_dict(const KeyPath& path, const TensorDict& /*dict*/) {
    events.push_back("enter " + path.to_string());
    return !skip_nested;
  }
  void leave_dict(const KeyPath& path, const TensorDict& /*dict*/) {
    events.push_back("leave " + path.to_string());
  }
  void leaf(const KeyPath& path, const at::Tensor& /*tensor*/) {
    events.push_back("leaf " + path.to_string());
  }
  void non_tensor(const KeyPath& path, const Value& value) {
    events.push_back(
        "non_tensor " + path.to_string() + " " + value.type_name());
  }
};

TEST(WalkTest, KeyPathIsAStackMaterializedOnDemand) {
  KeyPath path;
  EXPECT_TRUE(path.empty());
  EXPECT_EQ(path.to_string(), "");
  EXPECT_EQ(path.child("a"), NestedKey("a"));
  path.push("n");
  path.push("b");
  EXPECT_EQ(path.size(), 2u);
  EXPECT_EQ(path.back(), "b");
  EXPECT_EQ(path.key(), NestedKey({"n", "b"}));
  EXPECT_EQ(path.joined("."), "n.b");
  EXPECT_EQ(path.child("c").to_string(), "('n', 'b', 'c')");
  path.pop();
  EXPECT_EQ(path.to_string(), "'n'");
  {
    tensordict::detail::PathPart part(path, "z");
    EXPECT_EQ(path.joined("/"), "n/z");
  }
  EXPECT_EQ(path.joined("/"), "n");
}

TEST(WalkTest, KeyPathStartsAtAKeyBorrowingItsParts) {
  const NestedKey key({"n", "b"});
  KeyPath path(key);
  EXPECT_EQ(path.size(), 2u);
  EXPECT_EQ(path.parts()[0].data(), key[0].data());
  path.push("c");
  EXPECT_EQ(path.to_string(), "('n', 'b', 'c')");
}

TEST(WalkTest, RebuildMakesEveryLevelAndMovesNonTensorsWhenAsked) {
  const TensorDict td = make_tree();
  std::vector<std::string> levels;
  auto make_dict = [&](const TensorDictImpl& level) {
    levels.push_back(std::to_string(level.nodes().size()));
    return tensordict::detail::make_tensordict(
        level.batch_size, c10::Device(c10::kMeta), level.names);
  };
  // Drops the nested tensor "b": an undefined result drops its entry.
  auto keep_root_leaf = [](const at::Tensor& t) {
    return t.sum().item<double>() == 0 ? t : at::Tensor();
  };
  const TensorDict moved = tensordict::detail::rebuild(
      *td.unsafeGetImpl(),
      make_dict,
      keep_root_leaf,
      /*move_non_tensors=*/true);
  EXPECT_EQ(levels, (std::vector<std::string>{"3", "2"}));
  EXPECT_TRUE(moved.get("a").is_same(td.get("a")));
  EXPECT_FALSE(moved.contains({"n", "b"}));
  const c10::Device meta(c10::kMeta);
  EXPECT_EQ(moved[NestedKey({"n", "s"})].non_tensor_data().device(), meta);
  EXPECT_EQ(moved["c"].non_tensor_data().device(), meta);
  EXPECT_FALSE(td["c"].non_tensor_data().device().has_value());

  const TensorDict kept = tensordict::detail::rebuild(
      *td.unsafeGetImpl(),
      make_dict,
      keep_root_leaf,
      /*move_non_tensors=*/false);
  EXPECT_FALSE(kept["c"].non_tensor_data().device().has_value());
}

TEST(WalkTest, WalkCallsTheHooksDepthFirstInInsertionOrder) {
  Recorder recorder;
  tensordict::detail::walk(make_tree(), recorder);
  const std::vector<std::string> expected = {
      "leaf 'a'",
      "enter 'n'",
      "leaf ('n', 'b')",
      "non_tensor ('n', 's') NonTensorData",
      "leave 'n'",
      "non_tensor 'c' NonTensorData"};
  EXPECT_EQ(recorder.events, expected);
}

TEST(WalkTest, WalkSkipsADictWhoseEnterHookReturnsFalse) {
  Recorder recorder;
  recorder.skip_nested = true;
  tensordict::detail::walk(make_tree(), recorder);
  const std::vector<std::string> expected = {
      "leaf 'a'", "enter 'n'", "non_tensor 'c' NonTensorData"};
  EXPECT_EQ(recorder.events, expected);
}

TEST(WalkTest, ForEachDictVisitsParentsBeforeChildren) {
  TensorDict td = make_tree();
  td.set({"n", "m"}, TensorDict({{"d", torch::ones({2})}}, {2}));
  std::vector<size_t> sizes;
  tensordict::detail::for_each_dict(
      *td.unsafeGetImpl(),
      [&](TensorDictImpl& dict) { sizes.push_back(dict.nodes().size()); });
  EXPECT_EQ(sizes, (std::vector<size_t>{3, 3, 1}));
}

TEST(WalkTest, ForEachNestedListsNestedEntriesBeforeTheirDict) {
  std::vector<std::string> keys;
  tensordict::detail::for_each_nested(
      make_tree(), [&](const NestedKey& key, const Value& /*value*/) {
        keys.push_back(key.to_string());
      });
  EXPECT_EQ(
      keys,
      (std::vector<std::string>{
          "'a'", "('n', 'b')", "('n', 's')", "'n'", "'c'"}));
}

// Zips `dicts` at the root and returns "key:kinds" per visited entry.
std::vector<std::string> zip_root(
    const std::vector<TensorDict>& tds, const ZipOptions& options) {
  std::vector<const TensorDictImpl*> dicts;
  for (const TensorDict& td : tds) {
    dicts.push_back(td.unsafeGetImpl());
  }
  std::vector<std::string> out;
  KeyPath path;
  tensordict::detail::zip_level(
      dicts, path, options, [&](const Node& node, auto values) {
        std::string entry = path.to_string() + ":";
        EXPECT_EQ(node.key, path.back());
        for (const Value* v : values) {
          entry += v == nullptr ? "-" : v->is_tensor() ? "T" : "o";
        }
        out.push_back(entry);
      });
  return out;
}

TEST(WalkTest, ZipLevelMatchesKeysAsItsOptionsSay) {
  const TensorDict a({{"x", torch::zeros({2})}, {"y", torch::zeros({2})}}, {2});
  const TensorDict b({{"y", torch::zeros({2})}, {"x", torch::zeros({2})}}, {2});
  const TensorDict c({{"y", torch::zeros({2})}}, {2});
  EXPECT_EQ(
      zip_root({a, b, b}, ZipOptions{"stack"}),
      (std::vector<std::string>{"'x':TTT", "'y':TTT"}));
  EXPECT_EQ(
      zip_root({a, c}, ZipOptions{"stack", ZipKeys::kCommon}),
      (std::vector<std::string>{"'y':TT"}));
  EXPECT_EQ(
      zip_root({a, c}, ZipOptions{"apply", ZipKeys::kFirstOrNull}),
      (std::vector<std::string>{"'x':T-", "'y':TT"}));
  EXPECT_THROWS_EXACTLY(
      zip_root({a, c}, ZipOptions{"apply", ZipKeys::kFirst}),
      KeyError,
      "key \"x\" not found in TensorDict with keys ['y']");
  // One key-set check for every strict zip: the first key one dict lacks.
  EXPECT_THROWS_EXACTLY(
      zip_root({a, b, c}, ZipOptions{"stack"}),
      KeyError,
      "key \"x\" not found in TensorDict with keys ['y']");
  EXPECT_THROWS_EXACTLY(
      zip_root({c, a}, ZipOptions{"stack"}),
      KeyError,
      "key \"x\" not found in TensorDict with keys ['y']");
}

TEST(WalkTest, ZipLevelThrowsOneKindErrorNamingBothDicts) {
  const TensorDict a({{"x", torch::zeros({2})}}, {2});
  const TensorDict b({{"x", torch::zeros({2})}}, {2});
  const TensorDict c({{"x", TensorDict({}, {2})}}, {2});
  EXPECT_THROWS_EXACTLY(
      zip_root({a, b, c}, ZipOptions{"stack"}),
      c10::TypeError,
      "cannot stack entry 'x': it is a Tensor in tensordict 0 and a "
      "TensorDict in tensordict 2");
  EXPECT_EQ(
      zip_root(
          {a, c}, ZipOptions{"stack", ZipKeys::kSame, /*check_kinds=*/false}),
      (std::vector<std::string>{"'x':To"}));
  // Non-tensor kinds count as one.
  const TensorDict d({{"x", "text"}}, {2});
  TensorDict e({}, {2});
  e.set(
      "x",
      Value(
          tensordict::NonTensorStack(std::vector<tensordict::Json>{"p", "q"})));
  EXPECT_EQ(
      zip_root({d, e}, ZipOptions{"stack"}),
      (std::vector<std::string>{"'x':oo"}));
}

// Records the walk_mut hooks and rewrites every tensor to its negation and
// every non-tensor to "seen".
struct Rewriter : tensordict::detail::MutWalkVisitor {
  std::vector<std::string> events;
  bool enter_dict(const KeyPath& path, TensorDictImpl& dict) {
    events.push_back("enter " + path.to_string());
    if (path.to_string() == "'n'") {
      dict.names = {"rows"};  // a change the caller sees through its handle
    }
    return true;
  }
  void leave_dict(const KeyPath& path, TensorDictImpl& /*dict*/) {
    events.push_back("leave " + path.to_string());
  }
  void leaf(const KeyPath& path, Node& node) {
    events.push_back("leaf " + path.to_string());
    node.value = Value(-node.value.tensor());
  }
  void non_tensor(const KeyPath& path, Node& node) {
    events.push_back("non_tensor " + path.to_string());
    node.value = Value(tensordict::NonTensorData("seen", {2}));
  }
  bool enter_lazy_stack(const KeyPath& path, Node& /*node*/) {
    events.push_back("lazy " + path.to_string());
    return true;
  }
};

TEST(WalkTest, WalkMutRewritesEntriesInPlaceInWalkOrder) {
  TensorDict td = make_tree();
  td.set(
      "l",
      tensordict::lazy_stack(
          {TensorDict({{"e", torch::ones({1})}}, {}),
           TensorDict({{"e", torch::ones({1})}}, {})},
          0));
  const TensorDict nested = td.get_tensordict("n");
  Rewriter rewriter;
  tensordict::detail::walk_mut(*td.unsafeGetImpl(), rewriter);
  EXPECT_EQ(
      rewriter.events,
      (std::vector<std::string>{
          "leaf 'a'",
          "enter 'n'",
          "leaf ('n', 'b')",
          "non_tensor ('n', 's')",
          "leave 'n'",
          "non_tensor 'c'",
          "lazy 'l'",
          "enter ('l', '0')",
          "leaf ('l', '0', 'e')",
          "leave ('l', '0')",
          "enter ('l', '1')",
          "leaf ('l', '1', 'e')",
          "leave ('l', '1')"}));
  EXPECT_TRUE(torch::equal(td.get("a"), -torch::zeros({2})));
  EXPECT_TRUE(torch::equal(nested.get("b"), -torch::ones({2})));
  EXPECT_EQ(td.get_non_tensor("c"), "seen");
  EXPECT_EQ(nested.get_non_tensor("s"), "seen");
  EXPECT_EQ(nested.names(), (tensordict::DimNames{"rows"}));
  EXPECT_TRUE(torch::equal(
      td.get_lazy_stack("l").tensordicts()[1].get("e"), -torch::ones({1})));
}

TEST(WalkTest, AnyDictStopsAtTheFirstDictItAccepts) {
  TensorDict td = make_tree();
  td.set({"n", "m"}, TensorDict({{"d", torch::ones({2})}}, {2}));
  td.set("z", TensorDict({}, {2}));
  const TensorDictImpl* target = td.get_tensordict({"n", "m"}).unsafeGetImpl();
  std::vector<size_t> seen;
  EXPECT_TRUE(tensordict::detail::any_dict(
      *td.unsafeGetImpl(), [&](const TensorDictImpl& dict) {
        seen.push_back(dict.nodes().size());
        return &dict == target;
      }));
  // The root, "n", then ("n", "m"): "z" is never reached.
  EXPECT_EQ(seen, (std::vector<size_t>{4, 3, 1}));
  seen.clear();
  EXPECT_FALSE(tensordict::detail::any_dict(
      *td.unsafeGetImpl(), [&](const TensorDictImpl& dict) {
        seen.push_back(dict.nodes().size());
        return false;
      }));
  EXPECT_EQ(seen, (std::vector<size_t>{4, 3, 1, 0}));
}

// Zips two dicts with kMatch; returns the answer and the keys `fn` saw.
std::pair<bool, std::vector<std::string>> match_root(
    const TensorDict& a, const TensorDict& b, const std::string& stop_at = "") {
  const TensorDictImpl* dicts[] = {a.unsafeGetImpl(), b.unsafeGetImpl()};
  std::vector<std::string> seen;
  KeyPath path;
  const bool answer = tensordict::detail::zip_level(
      dicts,
      path,
      ZipOptions{"compare", ZipKeys::kMatch},
      [&](const Node& node, auto /*values*/) {
        seen.push_back(node.key);
        return node.key != stop_at;
      });
  return {answer, seen};
}

TEST(WalkTest, ZipLevelMatchAnswersFalseInsteadOfThrowing) {
  const TensorDict a({{"x", torch::zeros({2})}, {"y", torch::zeros({2})}}, {2});
  const TensorDict b({{"y", torch::zeros({2})}, {"x", torch::zeros({2})}}, {2});
  const TensorDict fewer({{"x", torch::zeros({2})}}, {2});
  const TensorDict other_key(
      {{"x", torch::zeros({2})}, {"w", torch::zeros({2})}}, {2});
  TensorDict other_kind({{"x", torch::zeros({2})}}, {2});
  other_kind.set("y", TensorDict({}, {2}));
  using Seen = std::vector<std::string>;
  EXPECT_EQ(match_root(a, b), std::make_pair(true, Seen{"x", "y"}));
  EXPECT_EQ(match_root(a, fewer), std::make_pair(false, Seen{}));
  EXPECT_EQ(match_root(a, other_key), std::make_pair(false, Seen{}));
  // The kind mismatch at "y" stops the walk before `fn` sees it.
  EXPECT_EQ(match_root(a, other_kind), std::make_pair(false, Seen{"x"}));
  // `fn` answering false stops it too.
  EXPECT_EQ(match_root(a, b, "x"), std::make_pair(false, Seen{"x"}));
}

TEST(WalkTest, ZipLevelTakesMissingDictsWithFirstOrNull) {
  const TensorDict a({{"x", torch::zeros({2})}, {"y", torch::zeros({2})}}, {2});
  const TensorDict c({{"y", torch::zeros({2})}}, {2});
  const TensorDictImpl* dicts[] = {
      a.unsafeGetImpl(), nullptr, c.unsafeGetImpl()};
  std::vector<std::string> out;
  KeyPath path;
  EXPECT_TRUE(tensordict::detail::zip_level(
      dicts,
      path,
      ZipOptions{"update", ZipKeys::kFirstOrNull},
      [&](const Node& node, auto values) {
        std::string entry = node.key + ":";
        for (const Value* v : values) {
          entry += v == nullptr ? "-" : "T";
        }
        out.push_back(entry);
      }));
  EXPECT_EQ(out, (std::vector<std::string>{"x:T--", "y:T-T"}));
}

}  // namespace walk_test
