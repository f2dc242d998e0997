// Views built without the dispatcher (src/tensor_dict/fast_view.h): every op's
// leaves equal ATen's views of the same leaves, and the rule of NOTE [Fast
// views] picks ATen wherever autograd or a transform could tell.
#include "tensor_dict/fast_view.h"

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/forward_grad.h>

#include <functional>
#include <random>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace fast_view_test {

using at::indexing::Ellipsis;
using at::indexing::None;
using at::indexing::Slice;
using at::indexing::TensorIndex;
using tensordict::NestedKey;
using tensordict::TensorDict;
using tensordict::detail::LeafViews;

namespace {

// Batch [4, 6]; leaves of every geometry the walk meets: contiguous,
// transposed, offset into a larger storage, broadcast (stride 0), integer
// and bool dtypes, and a nested dict with an extra batch dim.
TensorDict make_td() {
  TensorDict td({4, 6});
  td.set("a", torch::randn({4, 6, 3}));
  td.set("t", torch::randn({6, 4, 2}).transpose(0, 1));
  td.set("o", torch::arange(60, torch::kFloat).narrow(0, 2, 24).view({4, 6}));
  td.set("e", torch::randn({1, 6, 5}).expand({4, 6, 5}));
  td.set("i", torch::arange(24, torch::kLong).view({4, 6}));
  td.set("b", torch::rand({4, 6, 2}) > 0.5);
  td.set({"n", "x"}, torch::randn({4, 6, 7, 2}));
  return td;
}

// Expects `got` (from the dict's op under no_grad) to be the tensor ATen's op
// gives on the same leaf (`expected`, taken with grad mode on), and to have
// been built directly whenever ATen's result is a view.
void expect_same_view(
    const at::Tensor& leaf,
    const at::Tensor& got,
    const at::Tensor& expected,
    const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(got.defined());
  EXPECT_EQ(got.sizes(), expected.sizes());
  EXPECT_EQ(got.scalar_type(), expected.scalar_type());
  EXPECT_TRUE(torch::equal(got, expected));
  const bool aliases = expected.storage().is_alias_of(leaf.storage());
  EXPECT_EQ(got.storage().is_alias_of(leaf.storage()), aliases);
  if (aliases) {
    EXPECT_EQ(got.strides(), expected.strides());
    EXPECT_EQ(got.storage_offset(), expected.storage_offset());
    EXPECT_EQ(got.is_contiguous(), expected.is_contiguous());
    EXPECT_EQ(
        got.is_non_overlapping_and_dense(),
        expected.is_non_overlapping_and_dense());
    EXPECT_EQ(got.is_inference(), expected.is_inference());
    if (!leaf.is_inference()) {
      EXPECT_EQ(got._version(), leaf._version());
    }
    EXPECT_FALSE(got.is_view()) << "expected a directly built view";
  }
}

// Runs `td_op` under no_grad and checks every leaf of the result against
// `leaf_op` on the same leaf of `td`, taken with grad mode on.
void check_op(
    const TensorDict& td,
    const std::function<TensorDict(const TensorDict&)>& td_op,
    const std::function<at::Tensor(const at::Tensor&)>& leaf_op,
    const std::string& what) {
  TensorDict result;
  {
    torch::NoGradGuard no_grad;
    result = td_op(td);
  }
  for (const NestedKey& key :
       td.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    const at::Tensor leaf = td.get(key);
    expect_same_view(
        leaf, result.get(key), leaf_op(leaf), what + " " + key.to_string());
  }
}

// A random index of integers, slices (negative and out-of-range ends
// included) and None over the batch dims `batch`.
std::vector<TensorIndex> random_index(
    std::mt19937& rng, c10::IntArrayRef batch) {
  std::vector<TensorIndex> out;
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t used = pick(0, static_cast<int64_t>(batch.size()));
  for (int64_t d = 0; d < used; ++d) {
    if (pick(0, 3) == 0) {
      out.emplace_back(None);
    }
    const int64_t size = batch[d];
    switch (pick(0, 2)) {
      case 0:
        out.emplace_back(pick(-size, size - 1));
        break;
      case 1:
        out.emplace_back(Slice(
            pick(-2 * size, 2 * size), pick(-2 * size, 2 * size), pick(1, 3)));
        break;
      default:
        out.emplace_back(Slice(None, pick(-size, size)));
        break;
    }
  }
  if (out.empty() || pick(0, 3) == 0) {
    out.emplace_back(None);
  }
  return out;
}

std::string index_repr(c10::ArrayRef<TensorIndex> index) {
  std::ostringstream out;
  for (const TensorIndex& i : index) {
    out << i << " ";
  }
  return out.str();
}

}  // namespace

TEST(FastViewTest, RandomBasicIndicesGiveAtenViews) {
  std::mt19937 rng(7);
  const TensorDict td = make_td();
  for (int round = 0; round < 300; ++round) {
    const std::vector<TensorIndex> index = random_index(rng, td.batch_size());
    check_op(
        td,
        [&](const TensorDict& d) { return d.index(index); },
        [&](const at::Tensor& t) { return t.index(index); },
        "index " + index_repr(index));
  }
}

TEST(FastViewTest, RandomBasicIndicesWithGradMatchAtenIndexing) {
  std::mt19937 rng(11);
  const at::Tensor leaf = torch::randn({3, 6, 4}).permute({2, 1, 0});
  const at::Tensor param = torch::randn({4, 6, 3}, torch::requires_grad());
  const TensorDict td({{"leaf", leaf}, {"param", param}}, {4, 6});
  for (int round = 0; round < 100; ++round) {
    const std::vector<TensorIndex> index = random_index(rng, td.batch_size());
    SCOPED_TRACE(index_repr(index));
    const TensorDict result = td.index(index);
    for (const char* key : {"leaf", "param"}) {
      const at::Tensor source = td.get(key);
      const at::Tensor got = result.get(key);
      const at::Tensor expected = source.index(index);
      EXPECT_EQ(got.sizes(), expected.sizes()) << key;
      EXPECT_EQ(got.strides(), expected.strides()) << key;
      EXPECT_EQ(got.storage_offset(), expected.storage_offset()) << key;
      EXPECT_TRUE(got.is_view()) << key;
    }
    // The same gradient flows back to the leaf.
    const at::Tensor weight = torch::randn(result.get("param").sizes());
    const at::Tensor grad = torch::autograd::grad(
        {(result.get("param") * weight).sum()}, {param})[0];
    const at::Tensor expected_grad = torch::autograd::grad(
        {(param.index(index) * weight).sum()}, {param})[0];
    EXPECT_TRUE(torch::equal(grad, expected_grad));
  }
}

TEST(FastViewTest, EllipsisGivesAtenViews) {
  const TensorDict td = make_td();
  check_op(
      td,
      [](const TensorDict& d) {
        return d.index({Ellipsis, 2});
      },
      [](const at::Tensor& t) {
        return t.index({Slice(), 2});
      },
      "index ..., 2");
  check_op(
      td,
      [](const TensorDict& d) {
        return d.index({1, Ellipsis, None});
      },
      [](const at::Tensor& t) {
        return t.index({1, Slice(), None});
      },
      "index 1, ..., None");
}

TEST(FastViewTest, ShapeOpsGiveAtenViews) {
  const TensorDict td = make_td();
  check_op(
      td,
      [](const TensorDict& d) {
        return d.reshape({3, 8});
      },
      [](const at::Tensor& t) {
        std::vector<int64_t> shape{3, 8};
        shape.insert(shape.end(), t.sizes().begin() + 2, t.sizes().end());
        return t.reshape(shape);  // a copy for the transposed leaf
      },
      "reshape");
  check_op(
      td.contiguous(),
      [](const TensorDict& d) { return d.view({24}); },
      [](const at::Tensor& t) {
        std::vector<int64_t> shape{24};
        shape.insert(shape.end(), t.sizes().begin() + 2, t.sizes().end());
        return t.view(shape);
      },
      "view");
  check_op(
      td,
      [](const TensorDict& d) {
        return d.view({4, 6});
      },
      [](const at::Tensor& t) { return t.view(t.sizes()); },
      "view (same batch)");
  check_op(
      td,
      [](const TensorDict& d) { return d.unsqueeze(1); },
      [](const at::Tensor& t) { return t.unsqueeze(1); },
      "unsqueeze(1)");
  check_op(
      td,
      [](const TensorDict& d) { return d.unsqueeze(2); },
      [](const at::Tensor& t) { return t.unsqueeze(2); },
      "unsqueeze(2)");
  check_op(
      td,
      [](const TensorDict& d) {
        return d.permute({1, 0});
      },
      [](const at::Tensor& t) {
        std::vector<int64_t> dims{1, 0};
        for (int64_t d = 2; d < t.dim(); ++d) {
          dims.push_back(d);
        }
        return t.permute(dims);
      },
      "permute");
  check_op(
      td,
      [](const TensorDict& d) { return d.transpose(0, 1); },
      [](const at::Tensor& t) { return t.transpose(0, 1); },
      "transpose");
  check_op(
      td,
      [](const TensorDict& d) { return d.narrow(1, 2, 3); },
      [](const at::Tensor& t) { return t.narrow(1, 2, 3); },
      "narrow");
  check_op(
      td,
      [](const TensorDict& d) {
        return d.expand({5, 4, 6});
      },
      [](const at::Tensor& t) {
        std::vector<int64_t> shape{5};
        shape.insert(shape.end(), t.sizes().begin(), t.sizes().end());
        return t.expand(shape);
      },
      "expand");
  const TensorDict single = td.index({Slice(0, 1)}).unsqueeze(2);
  check_op(
      single,
      [](const TensorDict& d) { return d.squeeze(); },
      [](const at::Tensor& t) {
        return t.squeeze(std::vector<int64_t>{0, 2});
      },
      "squeeze()");
  check_op(
      single,
      [](const TensorDict& d) { return d.squeeze(2); },
      [](const at::Tensor& t) { return t.squeeze(2); },
      "squeeze(2)");
}

TEST(FastViewTest, SplittingOpsGiveAtenViews) {
  const TensorDict td = make_td();
  std::vector<TensorDict> pieces;
  {
    torch::NoGradGuard no_grad;
    pieces = td.unbind(1);
  }
  ASSERT_EQ(pieces.size(), 6u);
  std::vector<TensorDict> chunks;
  {
    torch::NoGradGuard no_grad;
    chunks = td.chunk(3, 0);
  }
  ASSERT_EQ(chunks.size(), 2u);
  std::vector<TensorDict> split;
  {
    torch::NoGradGuard no_grad;
    split = td.split({1, 0, 5}, 1);
  }
  ASSERT_EQ(split.size(), 3u);
  for (const NestedKey& key :
       td.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    const at::Tensor leaf = td.get(key);
    const std::vector<at::Tensor> rows = leaf.unbind(1);
    for (size_t i = 0; i < rows.size(); ++i) {
      expect_same_view(leaf, pieces[i].get(key), rows[i], "unbind");
    }
    const std::vector<at::Tensor> leaf_chunks = leaf.chunk(3, 0);
    for (size_t i = 0; i < leaf_chunks.size(); ++i) {
      expect_same_view(leaf, chunks[i].get(key), leaf_chunks[i], "chunk");
    }
    const std::vector<at::Tensor> leaf_split =
        leaf.split_with_sizes({1, 0, 5}, 1);
    for (size_t i = 0; i < leaf_split.size(); ++i) {
      expect_same_view(leaf, split[i].get(key), leaf_split[i], "split");
    }
  }
}

TEST(FastViewTest, EmptyBatchDimsGiveAtenViews) {
  TensorDict td({0, 3});
  td.set("a", torch::randn({0, 3, 2}));
  check_op(
      td,
      [](const TensorDict& d) {
        return d.index({Slice(1, None), 1});
      },
      [](const at::Tensor& t) {
        return t.index({Slice(1, None), 1});
      },
      "index of an empty dim");
  check_op(
      td,
      [](const TensorDict& d) {
        return d.reshape({3, 0});
      },
      [](const at::Tensor& t) {
        return t.reshape({3, 0, 2});
      },
      "reshape of an empty dict");
  std::vector<TensorDict> pieces;
  {
    torch::NoGradGuard no_grad;
    pieces = td.unbind(0);
  }
  EXPECT_TRUE(pieces.empty());
}

TEST(FastViewTest, WritesThroughEitherTensorAreSeenByBoth) {
  const at::Tensor leaf = torch::zeros({4, 3});
  TensorDict td({{"a", leaf}}, {4});
  TensorDict row;
  {
    torch::NoGradGuard no_grad;
    row = td.index({2});
  }
  const at::Tensor view = row.get("a");
  ASSERT_FALSE(view.is_view());
  const int64_t version = leaf._version();
  view.fill_(5);
  EXPECT_EQ(leaf._version(), version + 1);
  EXPECT_TRUE(torch::equal(leaf[2], torch::full({3}, 5.0)));
  EXPECT_EQ(leaf.sum().item<float>(), 15.0F);
  leaf.mul_(2);
  EXPECT_EQ(view._version(), leaf._version());
  EXPECT_TRUE(torch::equal(view, torch::full({3}, 10.0)));
}

TEST(FastViewTest, AutogradSeesASavedLeafModifiedThroughADirectView) {
  const at::Tensor x = torch::ones({4, 3});
  const at::Tensor w = torch::ones({3}, torch::requires_grad());
  TensorDict td({{"x", x}}, {4});
  const at::Tensor y = (x * w).sum();  // saves x for w's gradient
  {
    torch::NoGradGuard no_grad;
    td.index({0}).get("x").add_(1);
  }
  EXPECT_THROWS_WITH(
      y.backward(), c10::Error, "modified by an inplace operation");
}

TEST(FastViewTest, GradModeKeepsAtenViews) {
  const TensorDict td = make_td();
  const TensorDict row = td.index({1});
  EXPECT_TRUE(row.get("a").is_view());
  EXPECT_TRUE(td.reshape({24}).get("a").is_view());
  EXPECT_TRUE(td.unbind(0)[0].get("a").is_view());
}

TEST(FastViewTest, LeavesThatRequireGradKeepAtenViews) {
  const at::Tensor param = torch::randn({4, 3}, torch::requires_grad());
  at::Tensor param_view;
  {
    torch::NoGradGuard no_grad;
    param_view = param.narrow(0, 0, 4);  // requires grad through its base
  }
  TensorDict td(
      {{"p", param}, {"pv", param_view}, {"data", torch::randn({4, 3})}}, {4});
  torch::NoGradGuard no_grad;
  const TensorDict row = td.index({1});
  EXPECT_TRUE(row.get("p").is_view());
  EXPECT_TRUE(row.get("p").requires_grad());
  EXPECT_TRUE(row.get("pv").is_view());
  EXPECT_TRUE(row.get("pv").requires_grad());
  EXPECT_FALSE(row.get("data").is_view());
}

TEST(FastViewTest, InferenceModeBuildsViewsOfBothKindsOfTensor) {
  const at::Tensor normal = torch::randn({4, 3});
  at::Tensor inference;
  {
    c10::InferenceMode guard;
    inference = torch::randn({4, 3});
  }
  TensorDict td({{"normal", normal}, {"inference", inference}}, {4});
  c10::InferenceMode guard;
  const TensorDict rows = td.index({Slice(1, 3)});
  const at::Tensor expected_normal = normal.index({Slice(1, 3)});
  const at::Tensor expected_inference = inference.index({Slice(1, 3)});
  expect_same_view(normal, rows.get("normal"), expected_normal, "normal");
  expect_same_view(
      inference, rows.get("inference"), expected_inference, "inference");
  EXPECT_FALSE(rows.get("normal").is_inference());
  EXPECT_TRUE(rows.get("inference").is_inference());
}

TEST(FastViewTest, ForwardModeTangentsKeepAtenViews) {
  const uint64_t level = torch::autograd::ForwardADLevel::get_next_idx();
  {
    const at::Tensor dual =
        at::_make_dual(torch::randn({4, 3}), torch::ones({4, 3}), level);
    TensorDict td({{"dual", dual}}, {4});
    torch::NoGradGuard no_grad;
    const at::Tensor row = td.index({1}).get("dual");
    EXPECT_TRUE(row._fw_grad(level).defined());
    EXPECT_TRUE(torch::equal(row._fw_grad(level), torch::ones({3})));
  }
  torch::autograd::ForwardADLevel::release_idx(level);
}

TEST(FastViewTest, ThreadDispatchKeysKeepAtenViews) {
  const TensorDict td = make_td();
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(td.index({1}).get("a").is_view());
  // A tracer (or functorch, or a Python mode) includes keys on the thread.
  c10::impl::IncludeDispatchKeyGuard tracer(c10::DispatchKey::Tracer);
  EXPECT_TRUE(td.index({1}).get("a").is_view());
  EXPECT_FALSE(LeafViews().direct(td.get("a")));
}

TEST(FastViewTest, OnlyPlainDenseCpuTensorsAreBuiltDirectly) {
  torch::NoGradGuard no_grad;
  const LeafViews views;
  EXPECT_TRUE(views.direct(torch::randn({2, 3})));
  EXPECT_TRUE(views.direct(torch::randn({2, 3}).t()));
  EXPECT_FALSE(views.direct(torch::randn({2, 3}, torch::kComplexFloat).conj()));
  EXPECT_FALSE(views.direct(torch::randn({2, 3}).to_sparse()));
  EXPECT_FALSE(views.direct(at::Tensor()));
  EXPECT_FALSE(views.direct(torch::randn({2}, torch::requires_grad())));
}

TEST(FastViewTest, RejectedArgumentsRaiseAtenErrors) {
  const TensorDict td = make_td();
  auto message = [](const std::function<void()>& fn) {
    try {
      fn();
    } catch (const c10::Error& e) {
      return std::string(e.msg());
    }
    return std::string("no error");
  };
  const std::vector<std::function<void(const TensorDict&)>> ops = {
      [](const TensorDict& d) { (void)d.index({4}); },
      [](const TensorDict& d) {
        (void)d.index({0, -7});
      },
      [](const TensorDict& d) { (void)d.index({Slice(None, None, -1)}); },
      [](const TensorDict& d) { (void)d.view({24}); },  // "t" is transposed
      [](const TensorDict& d) { (void)d.index({}); },
  };
  for (const auto& op : ops) {
    const std::string with_grad = message([&] { op(td); });
    torch::NoGradGuard no_grad;
    EXPECT_EQ(message([&] { op(td); }), with_grad);
    EXPECT_NE(with_grad, "no error");
  }
}

TEST(FastViewTest, NonTensorAndLazyStackEntriesFollowTheSameIndex) {
  TensorDict td({3, 2});
  td.set("a", torch::arange(6, torch::kFloat).view({3, 2}));
  td.set(
      "s",
      tensordict::Value(
          tensordict::NonTensorStack({0, 1, 2, 3, 4, 5}, {3, 2})));
  td.set_non_tensor("txt", "same");
  td.set(
      "lazy",
      tensordict::Value(tensordict::lazy_stack(
          {TensorDict({{"x", torch::zeros({2})}}, {2}),
           TensorDict({{"x", torch::ones({2})}}, {2}),
           TensorDict({{"x", torch::full({2}, 2.0)}}, {2})},
          0)));
  const std::vector<std::vector<TensorIndex>> indices = {
      {1}, {Slice(0, 3, 2)}, {None, 2, Slice(1, None)}, {Slice(), 0}};
  for (const auto& index : indices) {
    const TensorDict expected = td.index(index);
    torch::NoGradGuard no_grad;
    tensordict::testing::expect_td_equal(td.index(index), expected);
  }
}

}  // namespace fast_view_test
