// TensorDict ops against the same ATen calls on a plain vector of the same
// leaves ("raw"). Each op has two benchmarks, <op>/cpp and <op>/raw; the
// report (benchmarks/report.py) divides them and adds Python's timings of
// the same work (benchmarks/python_tensor_dict.py). Registered at static
// initialization; benchmarks/main.cpp runs them.
//
// Workload (kept in step with python_tensor_dict.py): a TensorDict of 3 levels
// holding 100 float32 leaves of shape [64, 8], batch size [64].
//
// The view ops (index_int, index_slice, unbind, reshape) run under no_grad on
// both sides, where the dict builds its views directly (NOTE [Fast views] in
// src/tensor_dict/fast_view.h); their "_grad" twins run with grad mode on and
// leaves that require grad, where every view goes through ATen.

#include <benchmark/benchmark.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "instructions.h"

using namespace tensordict::indexing;
using tensordict::NestedKey;
using tensordict::TensorDict;

namespace {

constexpr int64_t kBatch = 64;
constexpr int64_t kLeaves = 100;

// Leaves are spread over three levels: root, "l1", ("l1", "l2").
NestedKey leaf_key(int64_t i) {
  const std::string name = "leaf" + std::to_string(i);
  if (i % 3 == 0) {
    return NestedKey(name);
  }
  if (i % 3 == 1) {
    return NestedKey({NestedKey("l1"), NestedKey(name)});
  }
  return NestedKey({NestedKey("l1"), NestedKey("l2"), NestedKey(name)});
}

struct Workload {
  TensorDict td;
  std::vector<at::Tensor> raw;
  // The raw side of get/set: the same leaves in one flat hash map keyed by
  // the joined path, the least a lookup by name can cost.
  std::unordered_map<std::string, at::Tensor> by_path;
};

Workload make_workload(int64_t leaves = kLeaves, bool requires_grad = false) {
  Workload w;
  w.td = TensorDict({kBatch});
  for (int64_t i = 0; i < leaves; ++i) {
    at::Tensor t = torch::randn({kBatch, 8}).requires_grad_(requires_grad);
    w.td.set(leaf_key(i), t);
    w.raw.push_back(t);
    w.by_path.emplace(leaf_key(i).join_parts("/"), t);
  }
  return w;
}

const at::Tensor& mask() {
  static const at::Tensor m = torch::arange(kBatch) % 3 == 0;
  return m;
}

const at::Tensor& int_index() {
  static const at::Tensor i = torch::randint(0, kBatch, {32}, torch::kLong);
  return i;
}

// Registers <name>/cpp and <name>/raw from two callables over a workload of
// `leaves` leaves (that require grad when `requires_grad`).
template <typename CppFn, typename RawFn>
void register_pair(
    const std::string& name,
    CppFn cpp,
    RawFn raw,
    int64_t leaves = kLeaves,
    bool requires_grad = false) {
  benchmark::RegisterBenchmark(
      (name + "/cpp").c_str(),
      [=](benchmark::State& state) {
        Workload w = make_workload(leaves, requires_grad);
        for (auto _ : state) {
          benchmark::DoNotOptimize(cpp(w));
        }
      })
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(
      (name + "/raw").c_str(),
      [=](benchmark::State& state) {
        Workload w = make_workload(leaves, requires_grad);
        for (auto _ : state) {
          benchmark::DoNotOptimize(raw(w));
        }
      })
      ->Unit(benchmark::kMicrosecond);
  // The same two, counted in instructions (instructions.h).
  tensordict_bench::register_instruction_op(name + "/cpp", [=] {
    auto w = std::make_shared<Workload>(make_workload(leaves, requires_grad));
    return std::function<void()>(
        [w, cpp] { benchmark::DoNotOptimize(cpp(*w)); });
  });
  tensordict_bench::register_instruction_op(name + "/raw", [=] {
    auto w = std::make_shared<Workload>(make_workload(leaves, requires_grad));
    return std::function<void()>(
        [w, raw] { benchmark::DoNotOptimize(raw(*w)); });
  });
}

// 8 dicts of 20 leaves each, and the same leaves grouped by key.
std::vector<TensorDict> stack_inputs() {
  static const std::vector<TensorDict> tds = [] {
    std::vector<TensorDict> out;
    for (int i = 0; i < 8; ++i) {
      out.push_back(make_workload(20).td);
    }
    return out;
  }();
  return tds;
}

std::vector<std::vector<at::Tensor>> stack_leaves() {
  const std::vector<TensorDict> tds = stack_inputs();
  std::vector<std::vector<at::Tensor>> by_key;
  for (const NestedKey& key :
       tds[0].keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    std::vector<at::Tensor> group;
    for (const TensorDict& td : tds) {
      group.push_back(td.get(key));
    }
    by_key.push_back(std::move(group));
  }
  return by_key;
}

// The raw side of a per-leaf op: the same ATen call on every leaf.
template <typename Leaves, typename Op>
auto each(const std::vector<Leaves>& leaves, Op op) {
  std::vector<at::Tensor> out;
  out.reserve(leaves.size());
  for (const Leaves& t : leaves) {
    out.push_back(op(t));
  }
  return out;
}

// `fn` run under no_grad.
template <typename Fn>
auto no_grad(Fn fn) {
  return [fn](Workload& w) {
    torch::NoGradGuard guard;
    return fn(w);
  };
}

// The view ops, each against the cheapest ATen call giving the same views.
void register_views(const std::string& suffix, bool grad) {
  auto add = [&](const std::string& name, auto cpp, auto raw) {
    if (grad) {
      register_pair(name + suffix, cpp, raw, kLeaves, /*requires_grad=*/true);
    } else {
      register_pair(name + suffix, no_grad(cpp), no_grad(raw));
    }
  };
  add(
      "index_int",
      [](Workload& w) { return w.td.index({3}); },
      [](Workload& w) {
        return each(w.raw, [](const at::Tensor& t) { return t.select(0, 3); });
      });
  add(
      "index_slice",
      [](Workload& w) { return w.td.index({Slice(8, 40, 2)}); },
      [](Workload& w) {
        return each(
            w.raw, [](const at::Tensor& t) { return t.slice(0, 8, 40, 2); });
      });
  add(
      "unbind",
      [](Workload& w) { return w.td.unbind(0); },
      [](Workload& w) {
        std::vector<std::vector<at::Tensor>> out;
        out.reserve(w.raw.size());
        for (const at::Tensor& t : w.raw) {
          out.push_back(t.unbind(0));
        }
        return out;
      });
  add(
      "reshape",
      [](Workload& w) {
        return w.td.reshape({8, 8});
      },
      [](Workload& w) {
        return each(w.raw, [](const at::Tensor& t) {
          return t.view({8, 8, 8});
        });
      });
}

void register_all() {
  register_views("", /*grad=*/false);
  register_views("_grad", /*grad=*/true);
  register_pair(
      "index_mask",
      [](Workload& w) { return w.td.index({mask()}); },
      [](Workload& w) {
        return each(
            w.raw, [](const at::Tensor& t) { return t.index({mask()}); });
      });
  register_pair(
      "index_tensor",
      [](Workload& w) { return w.td.index({int_index()}); },
      [](Workload& w) {
        return each(
            w.raw, [](const at::Tensor& t) { return t.index({int_index()}); });
      });
  // Python's stack/cat work: 8 dicts of 20 leaves each.
  register_pair(
      "stack",
      [](Workload&) {
        static const std::vector<TensorDict> tds = stack_inputs();
        return tensordict::stack(tds, 0);
      },
      [](Workload&) {
        static const std::vector<std::vector<at::Tensor>> leaves =
            stack_leaves();
        return each(leaves, [](const std::vector<at::Tensor>& ts) {
          return at::stack(ts, 0);
        });
      });
  register_pair(
      "cat",
      [](Workload&) {
        static const std::vector<TensorDict> tds = stack_inputs();
        return tensordict::cat(tds, 0);
      },
      [](Workload&) {
        static const std::vector<std::vector<at::Tensor>> leaves =
            stack_leaves();
        return each(leaves, [](const std::vector<at::Tensor>& ts) {
          return at::cat(ts, 0);
        });
      });
  register_pair(
      "to_float64",
      [](Workload& w) { return w.td.to(at::kDouble); },
      [](Workload& w) {
        return each(
            w.raw, [](const at::Tensor& t) { return t.to(at::kDouble); });
      });
  register_pair(
      "apply",
      [](Workload& w) {
        return w.td.apply([](const at::Tensor& t) { return t * 2; });
      },
      [](Workload& w) {
        return each(w.raw, [](const at::Tensor& t) { return t * 2; });
      });
  register_pair(
      "clone",
      [](Workload& w) { return w.td.clone(); },
      [](Workload& w) {
        return each(w.raw, [](const at::Tensor& t) { return t.clone(); });
      });
  register_pair(
      "get_nested",
      [](Workload& w) {
        return w.td.get({"l1", "l2", "leaf5"});
      },
      [](Workload& w) { return w.by_path.at("l1/l2/leaf5"); });
  register_pair(
      "set_nested",
      [](Workload& w) {
        w.td.set({"l1", "l2", "leaf5"}, w.raw[5]);
        return 0;
      },
      [](Workload& w) {
        w.by_path["l1/l2/leaf5"] = w.raw[5];
        return 0;
      });
  register_pair(
      "update",
      [](Workload& w) {
        static const TensorDict other = make_workload().td;
        w.td.update(other);
        return 0;
      },
      [](Workload& w) {
        static const std::vector<at::Tensor> other = make_workload().raw;
        for (size_t i = 0; i < other.size(); ++i) {
          w.raw[i] = other[i];
        }
        return 0;
      });
}

[[maybe_unused]] const bool registered = (register_all(), true);

}  // namespace
