// The collector: steps a batched env with one policy call per step,
// sub-env ranges on a pool of threads, and writes TorchRL 0.14.1's batch
// layout into reused buffers.

#include "tensordict/rl/collector.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rl/step_mdp.h"
#include "tensordict/detail/entries.h"
#include "tensordict/errors.h"
#include "tensordict/nn.h"
#include "tensordict/value.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

namespace {

// Runs fn(0) .. fn(k - 1) at once: fn(0) on the calling thread, the others
// on threads kept for the collector's lifetime (a step is tens of
// microseconds; starting threads per step would cost more than it saves).
class RangePool {
 public:
  explicit RangePool(int64_t num_threads) {
    for (int64_t w = 1; w < num_threads; ++w) {
      threads_.emplace_back([this, w] { work(w); });
    }
    errors_.resize(static_cast<size_t>(num_threads));
  }
  ~RangePool() {
    stop();
  }
  RangePool(const RangePool&) = delete;
  RangePool& operator=(const RangePool&) = delete;

  int64_t size() const {
    return static_cast<int64_t>(threads_.size()) + 1;
  }

  void run(const std::function<void(int64_t)>& fn) {
    std::fill(errors_.begin(), errors_.end(), nullptr);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fn_ = &fn;
      pending_ = static_cast<int64_t>(threads_.size());
      ++generation_;
    }
    start_.notify_all();
    try {
      fn(0);
    } catch (...) {
      errors_[0] = std::current_exception();
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [this] { return pending_ == 0; });
      fn_ = nullptr;
    }
    for (const std::exception_ptr& error : errors_) {
      if (error) {
        std::rethrow_exception(error);
      }
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    start_.notify_all();
    for (std::thread& thread : threads_) {
      if (thread.joinable()) {
        thread.join();
      }
    }
    threads_.clear();
  }

 private:
  void work(int64_t w) {
    uint64_t seen = 0;
    while (true) {
      const std::function<void(int64_t)>* fn = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) {
          return;
        }
        seen = generation_;
        fn = fn_;
      }
      try {
        (*fn)(w);
      } catch (...) {
        errors_[static_cast<size_t>(w)] = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        --pending_;
      }
      done_.notify_one();
    }
  }

  std::vector<std::thread> threads_;
  std::vector<std::exception_ptr> errors_;
  std::mutex mutex_;
  std::condition_variable start_;
  std::condition_variable done_;
  const std::function<void(int64_t)>* fn_ = nullptr;
  int64_t pending_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
};

// Copies `n` rows of kRow bytes, packed at `in`, to rows `stride` bytes
// apart at `out`.
template <size_t kRow>
void copy_rows(char* out, const char* in, int64_t n, size_t stride) {
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(out + static_cast<size_t>(i) * stride, in + i * kRow, kRow);
  }
}

// Copies step `t` of every sub-env, `src` [N, ...], into `dst` [N, T, ...]:
// one memcpy per sub-env when both are contiguous CPU tensors of one dtype
// (a step of a few sub-envs is otherwise dominated by the dispatcher calls
// of select and copy_), else select + copy_.
void copy_step(const at::Tensor& src, const at::Tensor& dst, int64_t t) {
  const c10::IntArrayRef from = src.sizes();
  const c10::IntArrayRef to = dst.sizes();
  if (src.device().is_cpu() && dst.device().is_cpu() &&
      src.scalar_type() == dst.scalar_type() && src.is_contiguous() &&
      dst.is_contiguous() && !from.empty() && from.size() + 1 == to.size() &&
      from[0] == to[0] &&
      std::equal(from.begin() + 1, from.end(), to.begin() + 2)) {
    const c10::IntArrayRef strides = dst.strides();
    const auto item = static_cast<int64_t>(dst.itemsize());
    const auto row = static_cast<size_t>(strides[1] * item);
    const auto stride = static_cast<size_t>(strides[0] * item);
    const auto* in = static_cast<const char*>(src.const_data_ptr());
    auto* out = static_cast<char*>(dst.data_ptr()) + t * row;
    // The rows of a step are a few bytes (a flag, a float, an observation):
    // a copy of known size is a move or two, a call to memcpy is not.
    switch (row) {
      case 1:
        copy_rows<1>(out, in, from[0], stride);
        return;
      case 4:
        copy_rows<4>(out, in, from[0], stride);
        return;
      case 8:
        copy_rows<8>(out, in, from[0], stride);
        return;
      case 16:
        copy_rows<16>(out, in, from[0], stride);
        return;
      default:
        for (int64_t i = 0; i < from[0]; ++i) {
          std::memcpy(out + i * stride, in + i * row, row);
        }
        return;
    }
  }
  dst.select(1, t).copy_(src);
}

// Whether `flags` is a CPU bool tensor of `n` contiguous elements, whose
// bytes the collector reads and writes directly (a step of a few sub-envs
// is otherwise dominated by the dispatcher calls of the tensor ops).
bool is_cpu_flags(const at::Tensor& flags, int64_t n) {
  return flags.device().is_cpu() && flags.scalar_type() == c10::kBool &&
         flags.is_contiguous() && flags.numel() == n;
}

// Clears the flags of the sub-envs `mask` [N] marks: they start anew.
void clear_flags(const at::Tensor& flags, const at::Tensor& mask) {
  const int64_t n = mask.numel();
  if (is_cpu_flags(flags, n)) {
    bool* out = flags.data_ptr<bool>();
    const bool* done = mask.const_data_ptr<bool>();
    for (int64_t i = 0; i < n; ++i) {
      out[i] = out[i] && !done[i];
    }
    return;
  }
  flags.logical_and_(
      mask.to(flags.device()).logical_not().reshape(flags.sizes()));
}

// NOTE [Step leaves in walk order]
// Every step has the same leaves, in an order that settles after the first
// steps (step_mdp moves "next" up, the policy appends its outputs). One
// pass over the nodes, compared with the last step's order, finds each
// leaf's buffer slot without a lookup per key; any other order (or a lazy
// stack) is looked up key by key, as the first step is, and remembered.
class StepLeaves {
 public:
  // Fills `values` in `keys` order; false when the tensors of `td` are not
  // exactly `keys` (non-tensor entries are not batched and do not count).
  bool gather(
      const TensorDict& td,
      const std::vector<NestedKey>& keys,
      std::vector<const at::Tensor*>& values) {
    values.assign(keys.size(), nullptr);
    if (!order_.empty() &&
        detail::match_leaf_order(td, order_, slot_, values.data())) {
      return true;
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      const Value* value = td.find(keys[i]);
      if (value == nullptr || !value->is_tensor()) {
        return false;
      }
      values[i] = &value->tensor();
    }
    // The tensors `td` holds (a lazy stack's included, non-tensor data
    // not): as many as `keys`, all found above, so the same keys.
    std::vector<NestedKey> order =
        td.keys(/*include_nested=*/true, /*leaves_only=*/true);
    if (order.size() != keys.size()) {
      return false;
    }
    order_ = std::move(order);
    slot_.clear();
    for (const NestedKey& key : order_) {
      const auto slot = static_cast<size_t>(
          std::find(keys.begin(), keys.end(), key) - keys.begin());
      if (slot == keys.size()) {
        // A leaf that is not batched (non-tensor data): no order to keep.
        order_.clear();
        break;
      }
      slot_.push_back(slot);
    }
    return true;
  }

 private:
  std::vector<NestedKey> order_;  // the last step's leaves, in walk order
  std::vector<size_t> slot_;      // order_[i] is keys[slot_[i]]
};

std::string key_list(const TensorDict& td) {
  std::string out;
  for (const NestedKey& key : td.keys(true, true)) {
    out += (out.empty() ? "" : ", ") + key.to_string();
  }
  return out;
}

}  // namespace

struct Collector::State {
  explicit State(int64_t num_threads) : pool(num_threads) {}
  RangePool pool;
  int64_t steps_per_batch = 0;
  // [begin, end) of each worker.
  std::vector<std::pair<int64_t, int64_t>> ranges;
  // The root of the current step, with storage of its own.
  TensorDict root;
  // The "next" dicts steps write into, in turn: the root of a step aliases
  // the previous step's, so that one must not be overwritten by the step.
  TensorDict next[2];
  // The batch [N, T] and its leaves, in the order of `keys`.
  TensorDict batch;
  std::vector<NestedKey> keys;
  std::vector<at::Tensor> leaves;
  int64_t next_traj_id = 0;
  // Which sub-envs the last step ended: [N] bool on the CPU, reused from
  // step to step.
  at::Tensor done_mask;
  // The step's leaves in `keys` order (reused from step to step).
  std::vector<const at::Tensor*> step_values;
  StepLeaves step_leaves;
  // The root of the step before, which the next step_mdp fills in place
  // when no one else holds it (NOTE [step_mdp into a spare root]).
  std::optional<TensorDict> spare_root;
  uint64_t step_count = 0;
  bool started = false;
  bool need_reset = false;
  bool broken = false;
  bool shut_down = false;
  // Weights staged by update_policy_weights_, applied between steps.
  std::mutex weights_mutex;
  std::optional<TensorDict> pending_weights;
  std::atomic<int64_t> version{0};
};

Collector::Collector(
    std::shared_ptr<EnvBase> env,
    nn::AnyTensorDictModule policy,
    const CollectorOptions& options)
    : env_(std::move(env)), policy_(std::move(policy)), options_(options) {
  TORCH_CHECK_VALUE(env_ != nullptr, "Collector needs an env, got null");
  TORCH_CHECK_VALUE(!policy_.is_empty(), "Collector needs a policy, got none");
  TORCH_CHECK_VALUE(
      options_.frames_per_batch() >= 1,
      "Collector needs frames_per_batch >= 1, got ",
      options_.frames_per_batch());
  TORCH_CHECK_VALUE(
      options_.num_threads() >= 1,
      "Collector needs num_threads >= 1, got ",
      options_.num_threads());
  TORCH_CHECK_VALUE(
      options_.total_frames() == -1 || options_.total_frames() >= 1,
      "Collector needs total_frames >= 1 or -1 (unbounded), got ",
      options_.total_frames());
  const int64_t n = env_->num_envs();
  const int64_t threads = std::min(options_.num_threads(), n);
  state_ = std::make_unique<State>(threads);
  // ceil(frames_per_batch / N) steps, as TorchRL rounds.
  state_->steps_per_batch = (options_.frames_per_batch() + n - 1) / n;
  for (int64_t w = 0; w < threads; ++w) {
    state_->ranges.emplace_back(w * n / threads, (w + 1) * n / threads);
  }
  state_->next[0] = env_->make_next();
  state_->next[1] = env_->make_next();
  if (options_.seed()) {
    env_->set_seed(*options_.seed());
  }
}

Collector::~Collector() {
  shutdown();
}

int64_t Collector::frames_per_batch() const noexcept {
  return state_->steps_per_batch * env_->num_envs();
}

int64_t Collector::policy_version() const noexcept {
  return state_->version.load();
}

void Collector::set_seed(uint64_t seed) {
  env_->set_seed(seed);
  state_->need_reset = true;
}

void Collector::shutdown() {
  if (state_ && !state_->shut_down) {
    state_->shut_down = true;
    state_->pool.stop();
  }
}

TensorDict squeeze_single_env(const TensorDict& batch) {
  const c10::IntArrayRef size = batch.batch_size();
  if (size.size() == 2 && size[0] == 1) {
    return batch.squeeze(0);
  }
  return batch;
}

void Collector::update_policy_weights_(const TensorDict& weights) {
  nn::check_weights(
      policy_->weights_layout(),
      weights,
      "update_policy_weights_",
      "the policy");
  TensorDict staged = weights.detach().clone();
  std::lock_guard<std::mutex> lock(state_->weights_mutex);
  state_->pending_weights = std::move(staged);
}

std::optional<TensorDict> Collector::next() {
  State& s = *state_;
  if (s.shut_down) {
    return std::nullopt;
  }
  TORCH_CHECK(
      !s.broken,
      "Collector: an earlier error in the env left it in an unknown state; "
      "make a new env and collector");
  if (options_.total_frames() >= 0 && frames_ >= options_.total_frames()) {
    return std::nullopt;
  }
  const int64_t n = env_->num_envs();
  const int64_t steps = s.steps_per_batch;
  const auto apply_pending = [&] {
    std::optional<TensorDict> weights;
    {
      std::lock_guard<std::mutex> lock(s.weights_mutex);
      weights.swap(s.pending_weights);
    }
    if (weights) {
      policy_->load_weights(*weights);
      ++s.version;
    }
  };
  // Runs an env call over every worker's range; an error leaves the env
  // in an unknown state. It reaches the caller naming the env and the
  // range, whichever thread it was raised on.
  const auto run_ranges = [&](const std::function<void(int64_t, int64_t)>& f) {
    try {
      s.pool.run([&](int64_t w) {
        const auto& range = s.ranges[static_cast<size_t>(w)];
        try {
          f(range.first, range.second);
        } catch (c10::Error& e) {
          TORCH_RETHROW(
              e,
              "while the collector stepped sub-envs [",
              range.first,
              ", ",
              range.second,
              ") of env '",
              env_->name(),
              "'");
        } catch (const std::exception& e) {
          TORCH_CHECK(
              false,
              "env '",
              env_->name(),
              "' raised an error while the collector stepped sub-envs [",
              range.first,
              ", ",
              range.second,
              "): ",
              e.what());
        }
      });
    } catch (...) {
      s.broken = true;
      throw;
    }
  };
  const auto stamp_version = [&](TensorDict& td) {
    if (options_.track_policy_version()) {
      td.set(
          "policy_version",
          at::full({n}, s.version.load(), at::TensorOptions(c10::kLong)));
    }
  };

  apply_pending();
  if (!s.started || s.need_reset || options_.reset_at_each_iter()) {
    TensorDict root = env_->make_next().exclude({"reward"});
    run_ranges([&](int64_t begin, int64_t end) {
      env_->reset_range(begin, end, nullptr, root);
    });
    // TorchRL numbers the first trajectories 0..N-1, and a full reset
    // starts new ones.
    root.set(
        {"collector", "traj_ids"},
        at::arange(
            s.next_traj_id, s.next_traj_id + n, at::TensorOptions(c10::kLong)));
    s.next_traj_id += n;
    stamp_version(root);
    s.root = root;
    s.started = true;
    s.need_reset = false;
  }
  // Buffers are made at the first step, from the keys it gives.
  const bool allocate = !options_.return_same_td() || s.leaves.empty();

  for (int64_t t = 0; t < steps; ++t) {
    if (options_.update_weights_mid_batch() && t > 0) {
      apply_pending();
    }
    // The root keeps the version of the step (or reset) that made it, as
    // TorchRL's PolicyVersion transform stamps it.
    TensorDict td = s.root;
    {
      torch::NoGradGuard no_grad;
      const nn::SetInteractionType interaction(options_.exploration_type());
      try {
        TensorDict out = policy_(td);
        if (!out.is_same(td)) {
          td.update(out);
        }
      } catch (c10::Error& e) {
        TORCH_RETHROW(
            e,
            "while the collector called the policy on the root of env '",
            env_->name(),
            "' (keys: ",
            key_list(td),
            ")");
      }
    }
    env_->check_action(td);
    TensorDict next = s.next[s.step_count++ % 2];
    run_ranges([&](int64_t begin, int64_t end) {
      env_->step_range(begin, end, td, next);
    });
    stamp_version(next);
    td.set("next", next);

    if (allocate && t == 0) {
      // First step of a batch that needs buffers: one per leaf, [N, T, ...],
      // in the first batch's key order (the check below compares the rest).
      std::vector<NestedKey> keys =
          s.keys.empty()
              ? td.keys(/*include_nested=*/true, /*leaves_only=*/true)
              : s.keys;
      TensorDict batch({n, steps});
      std::vector<at::Tensor> leaves;
      for (const NestedKey& key : keys) {
        const Value* found = td.find(key);
        TORCH_CHECK(
            found != nullptr,
            "Collector: the policy's outputs changed between batches: "
            "expected keys ",
            key_list(s.batch),
            ", got ",
            key_list(td));
        TORCH_CHECK_TYPE(
            found->is_tensor(),
            "Collector: key ",
            key.to_string(),
            " holds non-tensor data, which a batch cannot hold");
        const at::Tensor& value = found->tensor();
        std::vector<int64_t> shape = {n, steps};
        shape.insert(
            shape.end(), value.sizes().begin() + 1, value.sizes().end());
        at::Tensor leaf = at::empty(shape, value.options());
        batch.set(key, leaf);
        leaves.push_back(leaf);
      }
      s.keys = std::move(keys);
      s.leaves = std::move(leaves);
      s.batch = batch;
    }
    // The leaves of the first step, in any order: a key the policy writes
    // that the previous root kept (step_mdp drops the action only, so a
    // log-prob stays) comes before the action from the second step on.
    // One lookup a leaf: the same count and every key of the first step.
    std::vector<const at::Tensor*>& values = s.step_values;
    TORCH_CHECK(
        s.step_leaves.gather(td, s.keys, values),
        "Collector: the policy's outputs changed between steps: expected "
        "keys ",
        key_list(s.batch),
        ", got ",
        key_list(td));
    for (size_t i = 0; i < values.size(); ++i) {
      copy_step(*values[i], s.leaves[i], t);
    }

    // The root of the next step: "next" moved up (its leaves alias `next`,
    // which the step after next overwrites, once copied into the batch),
    // then the done sub-envs reset in place.
    static const StepMdpOptions kStepMdp;
    std::optional<TensorDict> spare = std::move(s.spare_root);
    s.spare_root.reset();
    TensorDict root = spare && step_mdp_into(td, kStepMdp, *spare)
                          ? std::move(*spare)
                          : step_mdp(td, kStepMdp);
    spare.reset();
    // The mask is a copy of "done": the flags are cleared in place below.
    const at::Tensor flags = root.get("done");
    if (!s.done_mask.defined() || s.done_mask.numel() != n) {
      s.done_mask = at::empty({n}, at::TensorOptions(c10::kBool));
    }
    bool* mask = s.done_mask.data_ptr<bool>();
    bool any_done = false;
    if (is_cpu_flags(flags, n)) {
      const bool* values = flags.const_data_ptr<bool>();
      for (int64_t i = 0; i < n; ++i) {
        mask[i] = values[i];
        any_done = any_done || values[i];
      }
    } else {
      s.done_mask.copy_(flags.reshape({n}));
      any_done = s.done_mask.any().item<bool>();
    }
    if (any_done) {
      run_ranges([&](int64_t begin, int64_t end) {
        env_->reset_range(begin, end, mask, root);
      });
      for (const char* key : {"done", "terminated", "truncated"}) {
        clear_flags(root.get(key), s.done_mask);
      }
      at::Tensor traj_ids = root.get({"collector", "traj_ids"});
      auto ids = traj_ids.accessor<int64_t, 1>();
      for (int64_t i = 0; i < n; ++i) {
        if (mask[i]) {
          ids[i] = s.next_traj_id++;
        }
      }
    }
    s.root = std::move(root);
    s.spare_root = std::move(td);
  }
  frames_ += n * steps;
  return s.batch;
}

}  // namespace rl
TENSORDICT_END_NAMESPACE
