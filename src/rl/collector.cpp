// The collector: steps a batched env with one policy call per step,
// sub-env ranges on a pool of threads, and writes TorchRL 0.14.1's batch
// layout into reused buffers.

#include "tensordict/rl/collector.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <c10/macros/Macros.h>
#include <c10/util/Exception.h>
#include <c10/util/FunctionRef.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tensordict/detail/entries.h"
#include "tensordict/errors.h"
#include "tensordict/nn.h"
#include "tensordict/value.h"
#include "util/dims.h"
#include "util/tensor_bytes.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

// The types Collector::State holds: a named namespace, not an anonymous
// one, since the file may be compiled inside rl/'s unity group, where GCC
// treats it as a header and warns on a class with external linkage holding
// types of internal linkage (-Wsubobject-linkage).
namespace collector_internal {

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

  void run(c10::function_ref<void(int64_t)> fn) {
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
      const c10::function_ref<void(int64_t)>* fn = nullptr;
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
  const c10::function_ref<void(int64_t)>* fn_ = nullptr;
  int64_t pending_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
};

// Where the column of a contiguous batch leaf [N, T, ...] is, in bytes.
struct Column {
  explicit Column(const at::Tensor& leaf)
      : cpu(leaf.device().is_cpu() && leaf.is_contiguous() && leaf.dim() >= 2) {
    if (cpu) {
      const auto item = static_cast<int64_t>(leaf.itemsize());
      data = static_cast<char*>(leaf.data_ptr());
      env_stride = leaf.stride(0) * item;
      row = leaf.stride(1) * item;
    }
  }
  // Sub-env i's row of step t.
  char* at(int64_t i, int64_t t) const {
    return data + i * env_stride + t * row;
  }

  bool cpu = false;
  char* data = nullptr;
  int64_t env_stride = 0;  // bytes between sub-envs
  int64_t row = 0;         // bytes of one row, and between steps
};

}  // namespace collector_internal

namespace {

using collector_internal::Column;
using collector_internal::RangePool;

// Copies `n` rows of kRow bytes, `in_stride` bytes apart at `in`, to rows
// `out_stride` bytes apart at `out`.
template <size_t kRow>
void copy_rows(
    char* out, size_t out_stride, const char* in, size_t in_stride, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(out + i * out_stride, in + i * in_stride, kRow);
  }
}

// The same for rows of `row` bytes. The rows of a step are a few bytes (a
// flag, a float, an observation): a copy of known size is a move or two, a
// call to memcpy is not, and a step copies a few per leaf (inlined: a
// call to it cost more than the copies of a one-env step).
C10_ALWAYS_INLINE void copy_rows(
    char* out,
    size_t out_stride,
    const char* in,
    size_t in_stride,
    size_t n,
    size_t row) {
  switch (row) {
    case 1:
      return copy_rows<1>(out, out_stride, in, in_stride, n);
    case 4:
      return copy_rows<4>(out, out_stride, in, in_stride, n);
    case 8:
      return copy_rows<8>(out, out_stride, in, in_stride, n);
    case 16:
      return copy_rows<16>(out, out_stride, in, in_stride, n);
    default:
      for (size_t i = 0; i < n; ++i) {
        std::memcpy(out + i * out_stride, in + i * in_stride, row);
      }
  }
}

// Copies step `t` of every sub-env, `src` [N, ...], into `dst` [N, T, ...]
// (`column` its layout, found once per layout): one copy per sub-env when
// `src` is a contiguous CPU tensor of dst's dtype and step shape (a step of
// a few sub-envs is otherwise dominated by the dispatcher calls of select
// and copy_), else select + copy_.
void copy_step(
    const at::Tensor& src,
    const Column& column,
    const at::Tensor& dst,
    int64_t t) {
  const c10::IntArrayRef from = src.sizes();
  const c10::IntArrayRef to = dst.sizes();
  const bool same_step =
      !from.empty() && from.size() + 1 == to.size() && from[0] == to[0] &&
      detail::same_dims(from.data() + 1, to.data() + 2, from.size() - 1);
  const char* in = column.cpu && same_step && src.device().is_cpu() &&
                           src.scalar_type() == dst.scalar_type() &&
                           src.is_contiguous()
                       ? detail::readable_bytes(src)
                       : nullptr;
  if (in != nullptr) {
    const auto row = static_cast<size_t>(column.row);
    copy_rows(
        column.at(0, t),
        static_cast<size_t>(column.env_stride),
        in,
        row,
        static_cast<size_t>(from[0]),
        row);
    return;
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
    bool* out = detail::writable_data<bool>(flags);
    const bool* done = detail::readable_data<bool>(mask);
    for (int64_t i = 0; i < n; ++i) {
      out[i] = out[i] & !done[i];  // not &&: no branch on the flags
    }
    return;
  }
  flags.logical_and_(
      mask.to(flags.device()).logical_not().reshape(flags.sizes()));
}

// Whether the root alone holds `leaf` (no other handle, no view of its
// storage), so that the collector may write into it in place.
bool held_alone(const at::Tensor& leaf) {
  return leaf.use_count() == 1 && leaf.storage().use_count() == 1;
}

std::string key_list(const std::vector<NestedKey>& keys) {
  std::string out;
  for (const NestedKey& key : keys) {
    out += (out.empty() ? "" : ", ") + key.to_string();
  }
  return out;
}

std::string key_list(const TensorDict& td) {
  return key_list(td.keys(/*include_nested=*/true, /*leaves_only=*/true));
}

// NOTE [One step path]
// The batch [N, T, ...] is allocated once its layout is known (the root's
// tensors after a batch's first policy call, and the env's "next" keys),
// and every step then writes into it:
// - the policy reads the root of the step, `State::root` (a dict [N] of
//   contiguous leaves of its own), and writes its outputs there;
// - the env's range call writes straight into column t of the batch's
//   "next" leaves: `next_window` holds one view [N, ...] of each, made once
//   per batch and moved from column to column (its storage offset), since
//   making views anew each step would cost more than the step. The env
//   finds and checks the views once per layout (`EnvBase::step_leaves`),
//   so a step moves their offsets and steps, with no key looked up. The
//   env kit's row views take any row stride (NOTE [Rows in a range call]);
//   a view is valid for the range call only, as that note says;
// - `record` copies the root's leaves into column t, whose places in the
//   batch are found once per layout (`Column`);
// - `advance` copies the carried leaves of column t of "next" into the
//   root (the carry pairs, decided once per layout from StepMdpOptions,
//   as step_mdp moves them), resets the done sub-envs into the root and
//   drops the action: the root is then what step_mdp and a partial reset
//   make, and is not built anew.
// The root is not itself a column of the batch: the root of a batch's
// first step is made by the last step of the batch before, which the
// caller may still be reading (or has changed), and a policy reads
// contiguous rows, as it did before (an AOTI package is compiled for
// them). TorchRL's collector likewise runs its policy on a step dict of
// its own and copies it into its batch.
//
// The root's leaves are found after each policy call by one pass over its
// nodes in the last step's order (detail::match_leaf_order), else key by
// key (a batch's first step, or a policy that changed the order).

// Where TorchRL's collector numbers the trajectories.
const NestedKey& traj_ids_key() {
  static const NestedKey key({"collector", "traj_ids"});
  return key;
}

// What the root of the next step keeps and drops: TorchRL's step_mdp
// defaults, as its collector uses them.
const StepMdpOptions& step_mdp_options() {
  static const StepMdpOptions options;
  return options;
}

// Copies column t of `leaf` [N, T, ...] into `dst` [N, ...], a leaf of the
// root: by rows on the CPU, else through select.
void copy_column(
    const Column& column,
    const at::Tensor& leaf,
    int64_t t,
    const at::Tensor& dst) {
  const int64_t n = leaf.size(0);
  if (column.cpu && dst.device().is_cpu() && dst.is_contiguous() &&
      dst.scalar_type() == leaf.scalar_type() &&
      dst.numel() * static_cast<int64_t>(dst.itemsize()) == column.row * n) {
    const auto row = static_cast<size_t>(column.row);
    copy_rows(
        static_cast<char*>(dst.data_ptr()),
        row,
        column.at(0, t),
        static_cast<size_t>(column.env_stride),
        static_cast<size_t>(n),
        row);
    return;
  }
  dst.copy_(leaf.select(1, t).reshape(dst.sizes()));
}

}  // namespace

struct Collector::State {
  explicit State(int64_t num_threads) : pool(num_threads) {}

  // The phases of a batch (NOTE [One step path]), in the order next()
  // runs them.
  void start_batch(Collector& c);
  void call_policy(Collector& c);
  void lay_out(Collector& c);
  void step_env(Collector& c, int64_t t);
  void record(int64_t t);
  void advance(Collector& c, int64_t t);

  void apply_pending(Collector& c);
  void run_ranges(Collector& c, c10::function_ref<void(int64_t, int64_t)> f);
  bool find_root_leaves();

  RangePool pool;
  int64_t steps_per_batch = 0;
  // [begin, end) of each worker.
  std::vector<std::pair<int64_t, int64_t>> ranges;
  // The root of the step about to run, with storage of its own: the
  // policy's input.
  TensorDict root;
  // A "next" as the env makes it: its keys, shapes and dtypes.
  TensorDict next_template;

  // The batch [N, T]: the root's leaves in `root_keys` order, then those
  // of "next" in `next_keys` order.
  TensorDict batch;
  std::vector<NestedKey> root_keys;
  std::vector<at::Tensor> root_leaves;
  std::vector<Column> root_columns;
  std::vector<NestedKey> next_keys;
  std::vector<at::Tensor> next_leaves;
  std::vector<Column> next_columns;
  // The env's view of column t of "next" (every key but the version),
  // moved each step: the views and their storage offsets at column 0.
  TensorDict next_window;
  // Its leaves, found and checked by the env once per layout: a step only
  // moves their offsets.
  StepLeaves window_leaves;
  std::vector<at::Tensor> windows;
  std::vector<int64_t> window_offsets;
  std::vector<size_t> window_slots;  // their places in next_keys
  // Carry pairs: next_keys[first] moves up to root_keys[second].
  std::vector<std::pair<size_t, size_t>> carries;
  // Carried keys of "next" the root lacks (step_mdp adds them).
  std::vector<size_t> carries_added;
  size_t done_slot = 0;                // "done" in next_keys
  std::optional<size_t> version_slot;  // "policy_version" in next_keys
  // Places in root_keys of what a reset rewrites in the root: the done
  // keys of step_mdp_options (in its order) and the trajectory ids; none
  // for a key the root lacks.
  std::vector<std::optional<size_t>> reset_slots;
  std::optional<size_t> traj_slot;

  // The root's tensors in root_keys order, found after each policy call;
  // its last walk order, and each key's place in root_keys.
  std::vector<const at::Tensor*> values;
  std::vector<NestedKey> order;
  std::vector<size_t> slots;

  int64_t next_traj_id = 0;
  // Which sub-envs the last step ended: [N] bool on the CPU, reused from
  // step to step.
  at::Tensor done_mask;
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
  state_->next_template = env_->make_next();
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

void Collector::State::apply_pending(Collector& c) {
  std::optional<TensorDict> weights;
  {
    std::lock_guard<std::mutex> lock(weights_mutex);
    weights.swap(pending_weights);
  }
  if (weights) {
    c.policy_->load_weights(*weights);
    ++version;
  }
}

// An error leaves the env in an unknown state. It reaches the caller
// naming the env and the range, whichever thread it was raised on.
void Collector::State::run_ranges(
    Collector& c, c10::function_ref<void(int64_t, int64_t)> f) {
  const EnvBase& env = *c.env_;
  const auto run_one = [&](int64_t w) {
    const auto& range = ranges[static_cast<size_t>(w)];
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
          env.name(),
          "'");
    } catch (const std::exception& e) {
      TORCH_CHECK(
          false,
          "env '",
          env.name(),
          "' raised an error while the collector stepped sub-envs [",
          range.first,
          ", ",
          range.second,
          "): ",
          e.what());
    }
  };
  try {
    if (ranges.size() == 1) {
      // One range runs on the calling thread: the pool would only add its
      // locks and wake-ups to every step.
      run_one(0);
    } else {
      pool.run(run_one);
    }
  } catch (...) {
    broken = true;
    throw;
  }
}

// Start the batch: staged weights, and a full reset when one is due.
void Collector::State::start_batch(Collector& c) {
  apply_pending(c);
  const CollectorOptions& options = c.options_;
  if (started && !need_reset && !options.reset_at_each_iter()) {
    return;
  }
  const int64_t n = c.env_->num_envs();
  TensorDict fresh = c.env_->make_next().exclude({"reward"});
  run_ranges(c, [&](int64_t begin, int64_t end) {
    c.env_->reset_range(begin, end, nullptr, fresh);
  });
  // TorchRL numbers the first trajectories 0..N-1, and a full reset
  // starts new ones.
  fresh.set(
      traj_ids_key(),
      at::arange(
          next_traj_id, next_traj_id + n, at::TensorOptions(c10::kLong)));
  next_traj_id += n;
  if (options.track_policy_version()) {
    fresh.set(
        "policy_version",
        at::full({n}, version.load(), at::TensorOptions(c10::kLong)));
  }
  root = fresh;
  // The root's order is new: find its leaves key by key.
  order.clear();
  started = true;
  need_reset = false;
}

// Call the policy on the root; its outputs land in the root.
void Collector::State::call_policy(Collector& c) {
  torch::NoGradGuard no_grad;
  const nn::SetInteractionType interaction(c.options_.exploration_type());
  try {
    TensorDict out = c.policy_(root);
    if (!out.is_same(root)) {
      root.update(out);
    }
  } catch (c10::Error& e) {
    TORCH_RETHROW(
        e,
        "while the collector called the policy on the root of env '",
        c.env_->name(),
        "' (keys: ",
        key_list(root),
        ")");
  }
  c.env_->check_action(root);
}

// Finds the root's tensors in root_keys order (NOTE [One step path]);
// false when they are not exactly root_keys (non-tensor data is not
// batched and does not count).
bool Collector::State::find_root_leaves() {
  values.assign(root_keys.size(), nullptr);
  if (!order.empty() &&
      detail::match_leaf_order(root, order, slots, values.data())) {
    return true;
  }
  for (size_t i = 0; i < root_keys.size(); ++i) {
    const Value* value = root.find(root_keys[i]);
    if (value == nullptr || !value->is_tensor()) {
      return false;
    }
    values[i] = &value->tensor();
  }
  std::vector<NestedKey> walk;
  slots.clear();
  for (NestedKey& key :
       root.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    const Value* value = root.find(key);
    if (value->is_lazy_stack()) {
      // Its tensors are not nodes of the walk: key by key every step.
      walk.clear();
      break;
    }
    if (!value->is_tensor()) {
      continue;
    }
    const auto slot = static_cast<size_t>(
        std::find(root_keys.begin(), root_keys.end(), key) - root_keys.begin());
    if (slot == root_keys.size()) {
      return false;
    }
    slots.push_back(slot);
    walk.push_back(std::move(key));
  }
  if (!walk.empty() && walk.size() != root_keys.size()) {
    return false;
  }
  order = std::move(walk);
  if (order.empty()) {
    slots.clear();
  }
  return true;
}

// Lay out the batch at a batch's first step, from the root the policy
// wrote and the env's "next": the same layout as the batch before when
// the root has the same tensors (in any order), new buffers unless
// return_same_td reuses them.
void Collector::State::lay_out(Collector& c) {
  const bool same_keys = !root_keys.empty() && find_root_leaves();
  if (same_keys && c.options_.return_same_td()) {
    return;
  }
  const int64_t n = c.env_->num_envs();
  const int64_t steps = steps_per_batch;
  if (!same_keys) {
    std::vector<NestedKey> keys =
        root.keys(/*include_nested=*/true, /*leaves_only=*/true);
    for (const NestedKey& key : keys) {
      TORCH_CHECK_TYPE(
          root.find(key)->is_tensor(),
          "Collector: key ",
          key.to_string(),
          " holds non-tensor data, which a batch cannot hold");
    }
    root_keys = std::move(keys);
    const auto slot_of = [&](const NestedKey& key) -> std::optional<size_t> {
      const auto at = std::find(root_keys.begin(), root_keys.end(), key);
      if (at == root_keys.end()) {
        return std::nullopt;
      }
      return static_cast<size_t>(at - root_keys.begin());
    };
    reset_slots.clear();
    for (const NestedKey& key : step_mdp_options().done_keys()) {
      reset_slots.push_back(slot_of(key));
    }
    traj_slot = slot_of(traj_ids_key());
    next_keys =
        next_template.keys(/*include_nested=*/true, /*leaves_only=*/true);
    if (c.options_.track_policy_version()) {
      next_keys.emplace_back("policy_version");
    }
    order.clear();
    TORCH_INTERNAL_ASSERT(find_root_leaves());
  }
  const auto make_leaf = [&](const at::Tensor& like) {
    std::vector<int64_t> shape = {n, steps};
    shape.insert(shape.end(), like.sizes().begin() + 1, like.sizes().end());
    return at::empty(shape, like.options());
  };
  batch = TensorDict({n, steps});
  root_leaves.clear();
  root_columns.clear();
  for (size_t i = 0; i < root_keys.size(); ++i) {
    root_leaves.push_back(make_leaf(*values[i]));
    root_columns.emplace_back(root_leaves.back());
    batch.set(root_keys[i], root_leaves.back());
  }
  next_leaves.clear();
  next_columns.clear();
  windows.clear();
  window_offsets.clear();
  window_slots.clear();
  next_window = TensorDict({n});
  carries.clear();
  carries_added.clear();
  version_slot.reset();
  // The carry pairs: what step_mdp moves up from "next".
  const StepMdpOptions& options = step_mdp_options();
  const auto in = [](const std::vector<NestedKey>& keys, const NestedKey& key) {
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  };
  const auto excluded = [&](const NestedKey& key) {
    return (options.exclude_reward() && in(options.reward_keys(), key)) ||
           (options.exclude_done() && in(options.done_keys(), key)) ||
           (options.exclude_action() && in(options.action_keys(), key));
  };
  for (size_t k = 0; k < next_keys.size(); ++k) {
    const NestedKey& key = next_keys[k];
    const Value* made = next_template.find(key);
    at::Tensor leaf =
        made != nullptr ? make_leaf(made->tensor())
                        : at::empty({n, steps}, at::TensorOptions(c10::kLong));
    if (made == nullptr) {
      version_slot = k;
    } else {
      const at::Tensor window = leaf.select(1, 0);
      window_offsets.push_back(window.storage_offset());
      next_window.set(key, window);
      // The tensor the dict holds is the one the env's rows read.
      windows.push_back(next_window.find(key)->tensor());
      window_slots.push_back(k);
    }
    if (key == NestedKey("done")) {
      done_slot = k;
    }
    batch.set({"next", key}, leaf);
    next_leaves.push_back(leaf);
    next_columns.emplace_back(leaf);
    if (!excluded(key)) {
      const auto slot = static_cast<size_t>(
          std::find(root_keys.begin(), root_keys.end(), key) -
          root_keys.begin());
      if (slot < root_keys.size()) {
        carries.emplace_back(k, slot);
      } else {
        carries_added.push_back(k);
      }
    }
  }
  window_leaves = c.env_->step_leaves(next_window);
}

// Step the env: it writes column t of the batch's "next".
void Collector::State::step_env(Collector& c, int64_t t) {
  for (size_t k = 0; k < windows.size(); ++k) {
    // Column t of an [N, T, ...] leaf starts t rows of one step further.
    windows[k].unsafeGetTensorImpl()->set_storage_offset(
        window_offsets[k] + t * next_leaves[window_slots[k]].stride(1));
  }
  run_ranges(c, [&](int64_t begin, int64_t end) {
    c.env_->step_range(begin, end, root, window_leaves);
  });
  if (version_slot) {
    const int64_t stamp = version.load();
    const Column& column = next_columns[*version_slot];
    if (column.cpu) {
      for (int64_t i = 0; i < c.env_->num_envs(); ++i) {
        *reinterpret_cast<int64_t*>(column.at(i, t)) = stamp;
      }
    } else {
      next_leaves[*version_slot].select(1, t).fill_(stamp);
    }
  }
}

// Record the root of step t (its keys and the policy's outputs) in column
// t; "next" is there already.
void Collector::State::record(int64_t t) {
  for (size_t i = 0; i < values.size(); ++i) {
    copy_step(*values[i], root_columns[i], root_leaves[i], t);
  }
}

// Advance the root to step t + 1: the carry pairs, then the done sub-envs
// reset, new trajectory ids, and the action dropped (what step_mdp and a
// partial reset make).
void Collector::State::advance(Collector& c, int64_t t) {
  const int64_t n = c.env_->num_envs();
  for (const auto& [k, slot] : carries) {
    if (!held_alone(*values[slot])) {
      // Someone else holds the root's leaf (a policy output aliasing it):
      // the root takes a leaf of its own.
      root.set(
          root_keys[slot], values[slot]->clone(at::MemoryFormat::Contiguous));
      values[slot] = &root.find(root_keys[slot])->tensor();
    }
    copy_column(next_columns[k], next_leaves[k], t, *values[slot]);
  }
  for (const size_t k : carries_added) {
    root.set(next_keys[k], next_leaves[k].select(1, t).clone());
  }
  if (!done_mask.defined() || done_mask.numel() != n) {
    done_mask = at::empty({n}, at::TensorOptions(c10::kBool));
  }
  bool* mask = detail::writable_data<bool>(done_mask);
  bool any_done = false;
  const Column& done = next_columns[done_slot];
  if (done.cpu && next_leaves[done_slot].scalar_type() == c10::kBool) {
    for (int64_t i = 0; i < n; ++i) {
      mask[i] = *reinterpret_cast<const bool*>(done.at(i, t));
      any_done = any_done | mask[i];
    }
  } else {
    done_mask.copy_(next_leaves[done_slot].select(1, t).reshape({n}));
    any_done = done_mask.any().item<bool>();
  }
  if (any_done) {
    run_ranges(c, [&](int64_t begin, int64_t end) {
      c.env_->reset_range(begin, end, mask, root);
    });
    // The root's leaves found after the policy call (values) are still
    // its nodes' unless a carried key was added above: the reset writes
    // into them. A key the root lacks is looked up, and refused, by get.
    const bool found = carries_added.empty();
    const std::vector<NestedKey>& done_keys = step_mdp_options().done_keys();
    for (size_t i = 0; i < done_keys.size(); ++i) {
      clear_flags(
          found && reset_slots[i] ? *values[*reset_slots[i]]
                                  : root.get(done_keys[i]),
          done_mask);
    }
    const at::Tensor traj_ids =
        found && traj_slot ? *values[*traj_slot] : root.get(traj_ids_key());
    auto ids = traj_ids.accessor<int64_t, 1>();
    for (int64_t i = 0; i < n; ++i) {
      if (mask[i]) {
        ids[i] = next_traj_id++;
      }
    }
  }
  if (step_mdp_options().exclude_action()) {
    for (const NestedKey& key : step_mdp_options().action_keys()) {
      if (root.find(key) != nullptr) {
        root.del_(key);
      }
    }
  }
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
  s.start_batch(*this);
  for (int64_t t = 0; t < s.steps_per_batch; ++t) {
    if (options_.update_weights_mid_batch() && t > 0) {
      s.apply_pending(*this);
    }
    s.call_policy(*this);
    if (t == 0) {
      s.lay_out(*this);
    } else {
      TORCH_CHECK(
          s.find_root_leaves(),
          "Collector: the policy's outputs changed between steps: expected "
          "keys ",
          key_list(s.root_keys),
          ", got ",
          key_list(s.root));
    }
    s.step_env(*this, t);
    s.record(t);
    s.advance(*this, t);
  }
  frames_ += env_->num_envs() * s.steps_per_batch;
  return s.batch;
}

}  // namespace rl
TENSORDICT_END_NAMESPACE
