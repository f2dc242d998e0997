// EnvBase: reset, step, rollout and the range entry points of every
// batched env (step_mdp is in step_mdp.cpp, make_env in registry.cpp).

#include <ATen/ops/logical_or.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensordict/errors.h"
#include "tensordict/rl.h"
#include "util/tensor_bytes.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

namespace {

const NestedKey kDoneKeys[] = {"done", "terminated", "truncated"};
// Made once: a collector checks the action at every step.
const NestedKey kAction("action");

void check_range(int64_t begin, int64_t end, int64_t num_envs) {
  TORCH_CHECK_INDEX(
      0 <= begin && begin <= end && end <= num_envs,
      "sub-env range [",
      begin,
      ", ",
      end,
      ") is not inside [0, ",
      num_envs,
      ")");
}

// The tensor `value` holds, or TypeError naming `key`: the range calls read
// rows through raw accessors.
const at::Tensor& tensor_of(
    const Value& value, std::string_view who, const NestedKey& key) {
  TORCH_CHECK_TYPE(
      value.is_tensor(),
      who,
      ": key ",
      key.to_string(),
      " holds ",
      value.is_tensordict()   ? "a dict"
      : value.is_lazy_stack() ? "a lazy stack"
                              : "non-tensor data",
      ", expected a tensor");
  return value.tensor();
}

// Checks that `td` holds `key` with the shape [N] + spec shape and the
// dtype of `spec`, and returns it: the range calls write rows through raw
// accessors.
const at::Tensor& check_leaf(
    const TensorDict& td,
    const NestedKey& key,
    const TensorSpec& spec,
    int64_t num_envs,
    const char* what) {
  // One lookup and no shape built unless it fails: every step checks
  // every leaf it writes.
  const Value* found = td.find(key);
  TENSORDICT_CHECK_KEY(
      found != nullptr,
      what,
      ": key ",
      key.to_string(),
      " is missing from the dict (make it with make_next)");
  const at::Tensor& value = tensor_of(*found, what, key);
  const c10::IntArrayRef trailing(spec.shape());
  if (value.dim() != static_cast<int64_t>(trailing.size()) + 1 ||
      value.size(0) != num_envs || value.sizes().slice(1) != trailing ||
      !spec.accepts(value.scalar_type())) {
    std::vector<int64_t> shape = {num_envs};
    shape.insert(shape.end(), spec.shape().begin(), spec.shape().end());
    TORCH_CHECK_VALUE(
        false,
        what,
        ": key ",
        key.to_string(),
        " expected ",
        c10::IntArrayRef(shape),
        " ",
        spec.dtype(),
        ", got ",
        value.sizes(),
        " ",
        value.scalar_type());
  }
  return value;
}

// done = terminated | truncated over the sub-envs [begin, end), as TorchRL's
// EnvBase computes it. By pointer on CPU bool flags [N, 1] of any row
// stride (make_next's, or the collector's views of its batch): a step of a
// few sub-envs is otherwise dominated by the dispatcher calls of three
// narrows and logical_or.
void write_done(
    int64_t begin,
    int64_t end,
    const at::Tensor& done,
    const at::Tensor& terminated,
    const at::Tensor& truncated) {
  const auto is_cpu_flags = [](const at::Tensor& flags) {
    return flags.device().is_cpu() && flags.scalar_type() == c10::kBool &&
           flags.dim() == 2 && flags.size(1) == 1;
  };
  if (is_cpu_flags(done) && is_cpu_flags(terminated) &&
      is_cpu_flags(truncated)) {
    bool* out = detail::writable_data<bool>(done);
    const bool* term = detail::readable_data<bool>(terminated);
    const bool* trunc = detail::readable_data<bool>(truncated);
    const int64_t out_stride = done.stride(0);
    const int64_t term_stride = terminated.stride(0);
    const int64_t trunc_stride = truncated.stride(0);
    for (int64_t i = begin; i < end; ++i) {
      // `|`, not `||`: no branch on the flags.
      out[i * out_stride] = term[i * term_stride] | trunc[i * trunc_stride];
    }
    return;
  }
  const int64_t n = end - begin;
  at::Tensor range = done.narrow(0, begin, n);
  at::logical_or_out(
      range, terminated.narrow(0, begin, n), truncated.narrow(0, begin, n));
}

}  // namespace

EnvBase::EnvBase(int64_t num_envs)
    : num_envs_(num_envs),
      batch_size_{num_envs},
      reward_spec_(TensorSpec::unbounded({1})) {
  TORCH_CHECK_VALUE(
      num_envs >= 1, "an env needs num_envs >= 1, got ", num_envs);
  for (const NestedKey& key : kDoneKeys) {
    done_spec_.set(key, TensorSpec::categorical(2, {1}, c10::kBool));
  }
}

EnvBase::~EnvBase() = default;

void EnvBase::set_specs(Composite observation_spec, TensorSpec action_spec) {
  observation_spec_ = std::move(observation_spec);
  action_spec_ = std::move(action_spec);
}

void EnvBase::set_seed(uint64_t seed) {
  seed_ = seed;
  set_seed_(seed);
}

TensorDict EnvBase::reset(const std::optional<TensorDict>& td) {
  const std::vector<int64_t> batch = batch_size();
  at::Tensor mask;
  if (td) {
    TORCH_CHECK_VALUE(
        td->batch_size() == c10::IntArrayRef(batch),
        name(),
        ".reset: expected a dict of batch size [",
        num_envs_,
        "], got ",
        td->batch_size());
    if (td->contains("_reset")) {
      const at::Tensor given = td->get("_reset");
      TORCH_CHECK_VALUE(
          given.scalar_type() == c10::kBool &&
              (given.sizes() == c10::IntArrayRef{num_envs_} ||
               given.sizes() == c10::IntArrayRef{num_envs_, 1}),
          name(),
          ".reset: key '_reset' must be a bool mask of shape [",
          num_envs_,
          "] or [",
          num_envs_,
          ", 1], got ",
          given.sizes(),
          " ",
          given.scalar_type());
      mask = given.reshape({num_envs_}).contiguous();
    }
  }
  TensorDict observations = observation_spec_.zero(batch);
  reset_range(
      0,
      num_envs_,
      mask.defined() ? mask.data_ptr<bool>() : nullptr,
      observations);
  TensorDict out = td ? td->exclude({"_reset"}) : TensorDict(batch);
  const at::Tensor keep =
      mask.defined() ? mask.logical_not().unsqueeze(-1) : at::Tensor();
  for (const NestedKey& key : kDoneKeys) {
    if (keep.defined() && td->contains(key)) {
      out.set(key, td->get(key).logical_and(keep));
    } else {
      out.set(key, done_spec_.get(key).zero(batch));
    }
  }
  for (const NestedKey& key : observation_spec_.keys()) {
    out.set(key, observations.get(key));
  }
  return out;
}

void EnvBase::check_action(const TensorDict& td) const {
  const Value* action = td.find(kAction);
  TENSORDICT_CHECK_KEY(
      action != nullptr,
      name(),
      ": key 'action' the env needs is missing from the dict (expected ",
      "the policy to write it); keys present: ",
      c10::Join(", ", [&] {
        std::vector<std::string> names;
        for (const NestedKey& key : td.keys(true, true)) {
          names.push_back(key.to_string());
        }
        return names;
      }()));
  // name() (a virtual call and a string) only for the error.
  const at::Tensor& value = action->is_tensor()
                                ? action->tensor()
                                : tensor_of(*action, name(), kAction);
  action_spec_->check(value, batch_size(), kAction);
}

TensorDict EnvBase::make_next() const {
  const std::vector<int64_t> batch = batch_size();
  TensorDict next = observation_spec_.zero(batch);
  next.set("reward", reward_spec_.zero(batch));
  for (const NestedKey& key : kDoneKeys) {
    next.set(key, done_spec_.get(key).zero(batch));
  }
  return next;
}

TensorDict EnvBase::step(TensorDict td) {
  TORCH_CHECK_VALUE(
      td.batch_size() == c10::IntArrayRef(batch_size()),
      name(),
      ".step: expected a dict of batch size [",
      num_envs_,
      "], got ",
      td.batch_size());
  check_action(td);
  TensorDict next = make_next();
  step_range(0, num_envs_, td, next);
  td.set("next", next);
  return td;
}

void EnvBase::reset_range(
    int64_t begin, int64_t end, const bool* mask, const TensorDict& out) {
  check_range(begin, end, num_envs_);
  for (const auto& [key, spec] : observation_spec_.entries()) {
    check_leaf(out, key, spec, num_envs_, "reset_range");
  }
  reset_range_(begin, end, mask, out);
}

void EnvBase::step_range(
    int64_t begin, int64_t end, const TensorDict& td, const TensorDict& next) {
  check_range(begin, end, num_envs_);
  check_leaf(td, "action", *action_spec_, num_envs_, "step_range");
  for (const auto& [key, spec] : observation_spec_.entries()) {
    check_leaf(next, key, spec, num_envs_, "step_range");
  }
  check_leaf(next, "reward", reward_spec_, num_envs_, "step_range");
  for (const NestedKey& key : kDoneKeys) {
    check_leaf(next, key, done_spec_.get(key), num_envs_, "step_range");
  }
  step_range_(begin, end, td, next);
  write_done(
      begin,
      end,
      next.find("done")->tensor(),
      next.find("terminated")->tensor(),
      next.find("truncated")->tensor());
}

StepLeaves EnvBase::step_leaves(const TensorDict& next) const {
  StepLeaves leaves;
  leaves.next = next;
  for (const auto& [key, spec] : observation_spec_.entries()) {
    leaves.observations.push_back(
        check_leaf(next, key, spec, num_envs_, "step_leaves"));
  }
  leaves.reward =
      check_leaf(next, "reward", reward_spec_, num_envs_, "step_leaves");
  at::Tensor* flags[] = {&leaves.done, &leaves.terminated, &leaves.truncated};
  for (size_t k = 0; k < std::size(kDoneKeys); ++k) {
    *flags[k] = check_leaf(
        next,
        kDoneKeys[k],
        done_spec_.get(kDoneKeys[k]),
        num_envs_,
        "step_leaves");
  }
  return leaves;
}

void EnvBase::step_range(
    int64_t begin,
    int64_t end,
    const TensorDict& td,
    const StepLeaves& leaves) {
  check_range(begin, end, num_envs_);
  step_leaves_(begin, end, td, leaves);
  write_done(begin, end, leaves.done, leaves.terminated, leaves.truncated);
}

void EnvBase::step_leaves_(
    int64_t begin,
    int64_t end,
    const TensorDict& td,
    const StepLeaves& leaves) {
  step_range_(begin, end, td, leaves.next);
}

at::Tensor EnvBase::rand_action(std::optional<at::Generator> generator) const {
  return action_spec_->rand(batch_size(), std::move(generator));
}

TensorDict EnvBase::rollout(int64_t max_steps, const RolloutOptions& options) {
  return rollout(max_steps, nn::AnyTensorDictModule(nullptr), options);
}

TensorDict EnvBase::rollout(
    int64_t max_steps,
    const nn::AnyTensorDictModule& policy,
    const RolloutOptions& options) {
  TORCH_CHECK_VALUE(
      max_steps >= 1, "rollout needs max_steps >= 1, got ", max_steps);
  TensorDict td;
  if (options.auto_reset()) {
    td = reset();
  } else {
    TORCH_CHECK_VALUE(
        options.tensordict().has_value(),
        "rollout with auto_reset=false needs a starting tensordict");
    td = *options.tensordict();
  }
  std::vector<TensorDict> steps;
  steps.reserve(static_cast<size_t>(max_steps));
  for (int64_t t = 0; t < max_steps; ++t) {
    if (policy.is_empty()) {
      td.set("action", rand_action());
    } else {
      torch::NoGradGuard no_grad;
      nn::AnyTensorDictModule module = policy;
      td = module(td);
    }
    td = step(td);
    steps.push_back(td);
    const at::Tensor done = td.get({"next", "done"});
    if ((options.break_when_any_done() && done.any().item<bool>()) ||
        (options.break_when_all_done() && done.all().item<bool>())) {
      break;
    }
    if (t + 1 == max_steps) {
      break;
    }
    td = step_mdp(td);
    if (done.any().item<bool>()) {
      td.set("_reset", done.clone());
      td = reset(td);
    }
  }
  return stack(steps, /*dim=*/1);
}

}  // namespace rl
TENSORDICT_END_NAMESPACE
