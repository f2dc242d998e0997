// EnvBase: reset, step, rollout and the range entry points of every
// batched env; step_mdp; make_env.

#include <ATen/ops/logical_or.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/walk.h"
#include "tensordict/errors.h"
#include "tensordict/rl.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

namespace {

const NestedKey kDoneKeys[] = {"done", "terminated", "truncated"};

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

// Checks that `td` holds `key` with the shape [N] + spec shape and the
// dtype of `spec`: the range calls write rows through raw accessors.
void check_leaf(
    const TensorDict& td,
    const NestedKey& key,
    const TensorSpec& spec,
    int64_t num_envs,
    const char* what) {
  TENSORDICT_CHECK_KEY(
      td.contains(key),
      what,
      ": key ",
      key.to_string(),
      " is missing from the dict (make it with make_next)");
  const at::Tensor value = td.get(key);
  std::vector<int64_t> shape = {num_envs};
  shape.insert(shape.end(), spec.shape().begin(), spec.shape().end());
  TORCH_CHECK_VALUE(
      value.sizes() == c10::IntArrayRef(shape) &&
          value.scalar_type() == spec.dtype(),
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

}  // namespace

EnvBase::EnvBase(int64_t num_envs)
    : num_envs_(num_envs), reward_spec_(TensorSpec::unbounded({1})) {
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
  TENSORDICT_CHECK_KEY(
      td.contains("action"),
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
  action_spec_->check(td.get("action"), batch_size(), "action");
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
  for (const NestedKey& key : observation_spec_.keys()) {
    check_leaf(out, key, observation_spec_.get(key), num_envs_, "reset_range");
  }
  reset_range_(begin, end, mask, out);
}

void EnvBase::step_range(
    int64_t begin, int64_t end, const TensorDict& td, const TensorDict& next) {
  check_range(begin, end, num_envs_);
  check_leaf(td, "action", *action_spec_, num_envs_, "step_range");
  for (const NestedKey& key : observation_spec_.keys()) {
    check_leaf(next, key, observation_spec_.get(key), num_envs_, "step_range");
  }
  check_leaf(next, "reward", reward_spec_, num_envs_, "step_range");
  for (const NestedKey& key : kDoneKeys) {
    check_leaf(next, key, done_spec_.get(key), num_envs_, "step_range");
  }
  step_range_(begin, end, td, next);
  const int64_t n = end - begin;
  at::Tensor done = next.get("done").narrow(0, begin, n);
  at::logical_or_out(
      done,
      next.get("terminated").narrow(0, begin, n),
      next.get("truncated").narrow(0, begin, n));
}

at::Tensor EnvBase::rand_action(std::optional<at::Generator> generator) const {
  return action_spec_->rand(batch_size(), std::move(generator));
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

namespace {

// step_mdp's copy of one dict into the new root, a client of the walk
// engine: leaves aliased, nested dicts made anew (the collector's resets
// write into the new root's, which must not reach the stepped dict's),
// merged with those already there, the excluded keys left out and a lazy
// stack kept whole.
struct StepMdpCopy : detail::WalkVisitor {
  StepMdpCopy(
      TensorDict root,
      const std::vector<const std::vector<NestedKey>*>& excluded,
      bool skip_next)
      : excluded(excluded), skip_next(skip_next) {
    dicts.push_back(std::move(root));
  }

  bool is_excluded(const detail::KeyPath& path) const {
    for (const std::vector<NestedKey>* keys : excluded) {
      for (const NestedKey& key : *keys) {
        if (key.size() == path.size() &&
            std::equal(key.begin(), key.end(), path.parts().begin())) {
          return true;
        }
      }
    }
    return false;
  }
  std::string name(const detail::KeyPath& path) const {
    return std::string(path.parts().back());
  }
  bool enter_dict(const detail::KeyPath& path, const TensorDict& dict) {
    if ((skip_next && path.size() == 1 && path.parts()[0] == "next") ||
        is_excluded(path)) {
      return false;
    }
    const Value* there = dicts.back().find(name(path));
    dicts.push_back(
        there != nullptr && there->is_tensordict() ? there->tensordict()
                                                   : dict.empty());
    return true;
  }
  void leave_dict(const detail::KeyPath& path, const TensorDict& /*dict*/) {
    TensorDict made = std::move(dicts.back());
    dicts.pop_back();
    if (!made.is_empty()) {
      dicts.back().set(name(path), made);
    }
  }
  void leaf(const detail::KeyPath& path, const at::Tensor& tensor) {
    if (!is_excluded(path)) {
      dicts.back().set(name(path), tensor);
    }
  }
  void non_tensor(const detail::KeyPath& path, const Value& value) {
    if (!is_excluded(path)) {
      dicts.back().set(name(path), value);
    }
  }
  bool enter_lazy_stack(
      const detail::KeyPath& path, const LazyStackedTensorDict& stack) {
    if (!is_excluded(path)) {
      dicts.back().set(name(path), Value(stack));
    }
    return false;
  }

  const std::vector<const std::vector<NestedKey>*>& excluded;
  bool skip_next;
  std::vector<TensorDict> dicts;
};

}  // namespace

TensorDict step_mdp(const TensorDict& td, const StepMdpOptions& options) {
  TENSORDICT_CHECK_KEY(
      td.contains("next"),
      "step_mdp: key 'next' is missing: the dict was not stepped");
  const TensorDict next = td.get_tensordict("next");
  // The excluded key lists, not copied: a collector calls this every step.
  std::vector<const std::vector<NestedKey>*> excluded;
  if (options.exclude_reward()) {
    excluded.push_back(&options.reward_keys());
  }
  if (options.exclude_done()) {
    excluded.push_back(&options.done_keys());
  }
  if (options.exclude_action()) {
    excluded.push_back(&options.action_keys());
  }
  TensorDict out = next.empty();
  if (options.keep_other()) {
    StepMdpCopy root(out, excluded, /*skip_next=*/true);
    detail::walk(td, root);
  } else if (!options.exclude_action()) {
    for (const NestedKey& key : options.action_keys()) {
      if (td.contains(key)) {
        out.set(key, td[key]);
      }
    }
  }
  StepMdpCopy moved(out, excluded, /*skip_next=*/false);
  detail::walk(next, moved);
  return out;
}

std::shared_ptr<EnvBase> make_env(const std::string& name, int64_t num_envs) {
  if (name == "CartPole-v1") {
    return std::make_shared<CartPoleEnv>(num_envs);
  }
  if (name == "PointMass") {
    return std::make_shared<PointMassEnv>(num_envs);
  }
  TORCH_CHECK_VALUE(
      false,
      "unknown env '",
      name,
      "'; the known envs are 'CartPole-v1' and 'PointMass'");
}

}  // namespace rl
TENSORDICT_END_NAMESPACE
