// EnvBase: reset, step, rollout and the range entry points of every
// batched env; step_mdp; make_env.

#include <ATen/ops/logical_or.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor_dict_impl.h"
#include "core/walk.h"
#include "rl/step_mdp.h"
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
// dtype of `spec`: the range calls write rows through raw accessors.
void check_leaf(
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
  if (value.dim() == static_cast<int64_t>(trailing.size()) + 1 &&
      value.size(0) == num_envs && value.sizes().slice(1) == trailing &&
      spec.accepts(value.scalar_type())) {
    return;
  }
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

// done = terminated | truncated over the sub-envs [begin, end), as TorchRL's
// EnvBase computes it. By pointer on the flags make_next makes (CPU bool,
// [N, 1], contiguous): a step of a few sub-envs is otherwise dominated by
// the dispatcher calls of three narrows and logical_or.
void write_done(int64_t begin, int64_t end, const TensorDict& next) {
  const at::Tensor& done = next.find("done")->tensor();
  const at::Tensor& terminated = next.find("terminated")->tensor();
  const at::Tensor& truncated = next.find("truncated")->tensor();
  const auto is_flat_flags = [](const at::Tensor& flags) {
    return flags.device().is_cpu() && flags.scalar_type() == c10::kBool &&
           flags.is_contiguous() && flags.dim() == 2 && flags.size(1) == 1;
  };
  if (is_flat_flags(done) && is_flat_flags(terminated) &&
      is_flat_flags(truncated)) {
    bool* out = done.data_ptr<bool>();
    const bool* term = terminated.const_data_ptr<bool>();
    const bool* trunc = truncated.const_data_ptr<bool>();
    for (int64_t i = begin; i < end; ++i) {
      out[i] = term[i] || trunc[i];
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
  const Value* action = td.find("action");
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
  action_spec_->check(
      tensor_of(*action, name(), "action"), batch_size(), "action");
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
  write_done(begin, end, next);
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

// The key lists step_mdp leaves out (pointers into its options: a
// collector calls it every step).
using ExcludedKeys = c10::SmallVector<const std::vector<NestedKey>*, 3>;

// Whether the key `path` spells (its parts, outermost first) is one of
// `excluded`'s.
template <typename Parts>
bool is_excluded(const ExcludedKeys& excluded, const Parts& path) {
  for (const std::vector<NestedKey>* keys : excluded) {
    for (const NestedKey& key : *keys) {
      if (key.size() == path.size() &&
          std::equal(key.begin(), key.end(), path.begin())) {
        return true;
      }
    }
  }
  return false;
}

// step_mdp's copy of one dict into the new root, a client of the walk
// engine: leaves aliased, nested dicts made anew (the collector's resets
// write into the new root's, which must not reach the stepped dict's),
// merged with those already there, the excluded keys left out and a lazy
// stack kept whole.
struct StepMdpCopy : detail::WalkVisitor {
  StepMdpCopy(TensorDict root, const ExcludedKeys& excluded, bool skip_next)
      : excluded(excluded), skip_next(skip_next) {
    dicts.push_back(std::move(root));
  }

  bool is_excluded(const detail::KeyPath& path) const {
    return rl::is_excluded(excluded, path.parts());
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

  const ExcludedKeys& excluded;
  bool skip_next;
  std::vector<TensorDict> dicts;
};

// NOTE [step_mdp by node]
// A collector calls step_mdp every step, and TensorDict::set checks each
// value again against the new root: its key, batch prefix, device and dim
// names. When the root and its "next" share batch size and device and have
// no dim names (what every env here writes), each value has passed those
// checks already in a dict of the same batch size and device, so the new
// root takes the nodes as they are: keys hashed once, room reserved, no
// checks repeated. It builds what StepMdpCopy builds (nested dicts made
// anew and merged, empty ones left out, excluded keys left out, non-tensor
// values and lazy stacks kept whole); anything else goes through set.
class StepMdpByNode {
 public:
  explicit StepMdpByNode(const ExcludedKeys& excluded) : excluded_(excluded) {}

  static bool applies(const TensorDict& td, const TensorDict& next) {
    const detail::TensorDictImpl& a = *td.unsafeGetImpl();
    const detail::TensorDictImpl& b = *next.unsafeGetImpl();
    return a.batch_size == b.batch_size && a.device == b.device &&
           a.names.empty() && b.names.empty();
  }

  // Copies the nodes of `from` into `to` (a dict this call made), leaving
  // out the excluded keys and, at the root, "next" when `skip_next`.
  void copy(
      const detail::TensorDictImpl& from,
      detail::TensorDictImpl& to,
      bool skip_next) {
    to.reserve(to.nodes().size() + from.nodes().size());
    for (const detail::Node* node : from.nodes()) {
      if (skip_next && path_.empty() && node->key == "next") {
        continue;
      }
      path_.push_back(node->key);
      if (!is_excluded()) {
        detail::Node* there = to.find(node->key);
        if (node->value.is_tensordict()) {
          copy_dict(*node, there, to);
        } else if (there != nullptr) {
          there->value = node->value;
        } else {
          to.append_like(*node, Value(node->value));
        }
      }
      path_.pop_back();
    }
  }

 private:
  bool is_excluded() const {
    return rl::is_excluded(excluded_, path_);
  }

  void copy_dict(
      const detail::Node& node,
      detail::Node* there,
      detail::TensorDictImpl& to) {
    const TensorDict& source = node.value.tensordict();
    const bool merge = there != nullptr && there->value.is_tensordict();
    TensorDict made =
        merge ? there->value.tensordict() : detail::empty_like(source);
    copy(*source.unsafeGetImpl(), *made.unsafeGetImpl(), false);
    if (merge || made.is_empty()) {
      return;
    }
    if (there != nullptr) {
      there->value = Value(std::move(made));
    } else {
      to.append_like(node, Value(std::move(made)));
    }
  }

  const ExcludedKeys& excluded_;
  std::vector<std::string_view> path_;
};

// NOTE [step_mdp into a spare root]
// The collector's roots take turns: once a step is copied into the batch
// and no one else holds its root, that root is the dict the step after
// next fills. Its keys then come in the order a new root would have them,
// so each node takes its new value in place: no dict, node or key is made
// and nothing is hashed again (StepMdpByNode makes them all, every step).
// The fill walks what StepMdpByNode walks, in the same order; a node is
// either the next one of its dict (a key placed first) or one placed
// before it in this fill (a key of "next" merged over the root's); the
// nodes left over at the end of a dict (the action and "next" the step
// added) are dropped. Any other shape gives up: a key missing or in another
// order, a dict where a tensor was or the reverse (a value of "next" over
// a dict of the root included), a dict that would be left empty, a dict
// held elsewhere or not plain (locked, shared, memmapped, consolidated,
// named).
class StepMdpRefill {
 public:
  explicit StepMdpRefill(const ExcludedKeys& excluded) : excluded_(excluded) {
    // A top-level node can be excluded only if its key has the length and
    // first letter of a one-part excluded key: most nodes are told apart
    // without comparing keys.
    for (const std::vector<NestedKey>* keys : excluded_) {
      for (const NestedKey& key : *keys) {
        if (key.size() == 1) {
          top_prefixes_.push_back(prefix(key[0]));
        }
      }
    }
  }

  // Whether `impl` may be written in place as a dict like `like`.
  static bool reusable(
      detail::TensorDictImpl& impl, const detail::TensorDictImpl& like) {
    return c10::raw::intrusive_ptr::use_count(&impl) == 1 && !impl.locked &&
           !impl.shared && impl.lock_parents.empty() &&
           impl.python_class.empty() && !impl.memmap.is_memmap &&
           impl.memmap.prefix.empty() && !impl.consolidated.storage.defined() &&
           impl.names.empty() && like.names.empty() &&
           impl.batch_size == like.batch_size && impl.device == like.device;
  }

  // Puts the nodes of `from` into `to`, as StepMdpByNode::copy would.
  bool fill(
      const detail::TensorDictImpl& from,
      detail::TensorDictImpl& to,
      bool skip_next) {
    const size_t level = level_of(to);
    for (const detail::Node* node : from.nodes()) {
      if (skip_next && path_.empty() &&
          std::string_view(node->key) == std::string_view("next")) {
        continue;
      }
      path_.push_back(node->key);
      const bool ok = is_excluded(*node) || put(*node, to, level);
      path_.pop_back();
      if (!ok) {
        return false;
      }
    }
    return true;
  }

  // Drops the nodes of every dict filled past those the fill put there:
  // what the step added to the root it was (the action, "next").
  void trim() {
    for (const Level& level : levels_) {
      while (level.dict->nodes().size() > level.placed) {
        const detail::NodeRange nodes = level.dict->nodes();
        const std::string key = (*nodes.begin())[nodes.size() - 1].key;
        level.dict->erase(key);
      }
    }
  }

 private:
  struct Level {
    detail::TensorDictImpl* dict;
    size_t placed;  // nodes [0, placed) hold their new values
  };

  size_t level_of(detail::TensorDictImpl& dict) {
    for (size_t i = 0; i < levels_.size(); ++i) {
      if (levels_[i].dict == &dict) {
        return i;
      }
    }
    levels_.push_back({&dict, 0});
    return levels_.size() - 1;
  }

  bool put(const detail::Node& node, detail::TensorDictImpl& to, size_t level) {
    const detail::NodeRange nodes = to.nodes();
    detail::Node* const first = *nodes.begin();
    const size_t placed = levels_[level].placed;
    detail::Node* there = nullptr;
    bool merged = false;
    if (placed < nodes.size() && first[placed].key == node.key) {
      there = first + placed;
      ++levels_[level].placed;
    } else {
      // A key placed before in this fill, or none: the nodes placed are
      // few, and their hashes are kept (no hashing of the key).
      for (size_t i = 0; i < placed && there == nullptr; ++i) {
        if (first[i].hash == node.hash && first[i].key == node.key) {
          there = first + i;
        }
      }
      if (there == nullptr) {
        return false;
      }
      merged = true;
    }
    if (node.value.is_tensor() && there->value.is_tensor()) {
      // The tensor handle alone (the node is not const, its accessor is):
      // the variant's assignment costs a visit.
      const_cast<at::Tensor&>(there->value.tensor()) = node.value.tensor();
      return true;
    }
    if (!node.value.is_tensordict()) {
      if (merged && there->value.is_tensordict()) {
        // A value of "next" over a dict of the root this fill went into:
        // replacing it would free a dict `levels_` still names.
        return false;
      }
      there->value = node.value;
      return true;
    }
    if (!there->value.is_tensordict()) {
      return false;
    }
    const detail::TensorDictImpl& source =
        *node.value.tensordict().unsafeGetImpl();
    detail::TensorDictImpl& target = *there->value.tensordict().unsafeGetImpl();
    if (!merged && !reusable(target, source)) {
      return false;
    }
    const size_t child = level_of(target);
    return fill(source, target, false) && levels_[child].placed > 0;
  }

  // A key's length and first letter, as one number.
  static uint64_t prefix(std::string_view key) {
    return (static_cast<uint64_t>(key.size()) << 8) |
           (key.empty() ? 0U : static_cast<unsigned char>(key[0]));
  }

  bool is_excluded(const detail::Node& node) const {
    if (path_.size() == 1 &&
        std::find(
            top_prefixes_.begin(), top_prefixes_.end(), prefix(node.key)) ==
            top_prefixes_.end()) {
      return false;
    }
    return rl::is_excluded(excluded_, path_);
  }

  const ExcludedKeys& excluded_;
  c10::SmallVector<uint64_t, 8> top_prefixes_;
  c10::SmallVector<std::string_view, 8> path_;
  c10::SmallVector<Level, 4> levels_;
};

// The key lists `options` leaves out.
ExcludedKeys excluded_keys(const StepMdpOptions& options) {
  ExcludedKeys excluded;
  if (options.exclude_reward()) {
    excluded.push_back(&options.reward_keys());
  }
  if (options.exclude_done()) {
    excluded.push_back(&options.done_keys());
  }
  if (options.exclude_action()) {
    excluded.push_back(&options.action_keys());
  }
  return excluded;
}

}  // namespace

bool step_mdp_into(
    const TensorDict& td, const StepMdpOptions& options, TensorDict& spare) {
  const Value* found = td.find("next");
  if (!options.keep_other() || found == nullptr || !found->is_tensordict()) {
    return false;
  }
  const TensorDict& next = found->tensordict();
  detail::TensorDictImpl& out = *spare.unsafeGetImpl();
  if (!StepMdpByNode::applies(td, next) ||
      !StepMdpRefill::reusable(out, *next.unsafeGetImpl())) {
    return false;
  }
  const ExcludedKeys excluded = excluded_keys(options);
  StepMdpRefill refill(excluded);
  if (!refill.fill(*td.unsafeGetImpl(), out, /*skip_next=*/true) ||
      !refill.fill(*next.unsafeGetImpl(), out, false)) {
    return false;
  }
  refill.trim();
  return true;
}

TensorDict step_mdp(const TensorDict& td, const StepMdpOptions& options) {
  TENSORDICT_CHECK_KEY(
      td.contains("next"),
      "step_mdp: key 'next' is missing: the dict was not stepped");
  const TensorDict next = td.get_tensordict("next");
  const ExcludedKeys excluded = excluded_keys(options);
  if (options.keep_other() && StepMdpByNode::applies(td, next)) {
    TensorDict out = detail::empty_like(next);
    StepMdpByNode copy(excluded);
    copy.copy(*td.unsafeGetImpl(), *out.unsafeGetImpl(), /*skip_next=*/true);
    copy.copy(*next.unsafeGetImpl(), *out.unsafeGetImpl(), false);
    return out;
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

}  // namespace rl
TENSORDICT_END_NAMESPACE
