// vmap and functional_call_vmap on functorch's dynamic layer stack; see
// NOTE [vmap from C++] in tensordict/vmap.h.

#include "tensordict/vmap.h"

#include <ATen/functorch/BatchedTensorImpl.h>
#include <ATen/functorch/DynamicLayer.h>
#include <ATen/ops/movedim.h>
#include <ATen/ops/stack.h>
#include <c10/util/Exception.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/instancenorm.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/rnn.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensordict/module.h"

TENSORDICT_BEGIN_NAMESPACE
namespace vmap_internal {

namespace functorch = at::functorch;

functorch::RandomnessType to_functorch(VmapRandomness randomness) {
  switch (randomness) {
    case VmapRandomness::kSame:
      return functorch::RandomnessType::Same;
    case VmapRandomness::kDifferent:
      return functorch::RandomnessType::Different;
    case VmapRandomness::kError:
      break;
  }
  return functorch::RandomnessType::Error;
}

// Pushes a vmap layer for its lifetime: Python's `vmap_increment_nesting`.
// Popping in the destructor keeps the thread's layer stack balanced when the
// function throws; a layer left behind would batch every later op.
class VmapLayer {
 public:
  VmapLayer(int64_t batch_size, VmapRandomness randomness)
      : level_(functorch::initAndPushDynamicLayer(
            functorch::TransformType::Vmap,
            c10::SymInt(batch_size),
            to_functorch(randomness))) {}
  ~VmapLayer() {
    functorch::popDynamicLayerAndDeleteMetadata();
  }
  VmapLayer(const VmapLayer&) = delete;
  VmapLayer& operator=(const VmapLayer&) = delete;
  VmapLayer(VmapLayer&&) = delete;
  VmapLayer& operator=(VmapLayer&&) = delete;

  int64_t level() const noexcept {
    return level_;
  }

 private:
  int64_t level_;
};

// Takes the batch dim of `level` out of a result and puts it at `out_dim`,
// as Python's `_remove_batch_dim`: a result that does not vary over the
// members (not batched at this level) is expanded.
at::Tensor unbatch(
    const at::Tensor& result,
    int64_t level,
    int64_t batch_size,
    int64_t out_dim) {
  TORCH_CHECK_INDEX(
      out_dim <= result.dim(),
      "vmap: out_dim ",
      out_dim,
      " is out of range for a result of shape ",
      result.sizes(),
      " per member");
  auto* batched = functorch::maybeGetBatchedImpl(result);
  if (batched == nullptr || batched->level() != level) {
    std::vector<int64_t> sizes = result.sizes().vec();
    sizes.insert(sizes.begin() + out_dim, batch_size);
    return result.expand(sizes);
  }
  return at::movedim(batched->value(), batched->bdim(), out_dim);
}

// Checks in_dims and out_dim, and returns the batch size the mapped inputs
// agree on.
int64_t check_batch(
    const char* what,
    const std::vector<at::Tensor>& inputs,
    const VmapOptions& options,
    std::optional<int64_t> known_batch_size) {
  const auto& in_dims = options.in_dims();
  TORCH_CHECK_VALUE(
      in_dims.empty() || in_dims.size() == inputs.size(),
      what,
      ": got ",
      in_dims.size(),
      " in_dims for ",
      inputs.size(),
      " inputs; give one per input (std::nullopt for a shared one), or none");
  std::optional<int64_t> batch_size = known_batch_size;
  for (size_t i = 0; i < in_dims.size(); ++i) {
    if (!in_dims[i]) {
      continue;
    }
    const at::Tensor& input = inputs[i];
    TORCH_CHECK_VALUE(
        input.defined(), what, ": input ", i, " is mapped but undefined");
    const int64_t dim = *in_dims[i];
    TORCH_CHECK_INDEX(
        dim >= 0 && dim < input.dim(),
        what,
        ": in_dim ",
        dim,
        " of input ",
        i,
        " is out of range for its shape ",
        input.sizes(),
        " (in_dims must be in [0, dim) and non-negative)");
    const int64_t size = input.size(dim);
    if (!batch_size) {
      batch_size = size;
    }
    TORCH_CHECK_VALUE(
        size == *batch_size,
        what,
        ": input ",
        i,
        " has size ",
        size,
        " at its in_dim ",
        dim,
        ", but the batch has ",
        *batch_size,
        known_batch_size ? " members (the size of params_stack's dim 0)"
                         : " members (the size of the first mapped input)");
  }
  TORCH_CHECK_VALUE(
      batch_size.has_value(),
      what,
      ": no input is mapped; give at least one an in_dim");
  TORCH_CHECK_INDEX(
      options.out_dim() >= 0,
      what,
      ": out_dim must be non-negative, got ",
      options.out_dim());
  return *batch_size;
}

std::vector<at::Tensor> member_inputs(
    const std::vector<at::Tensor>& inputs,
    const std::vector<std::optional<int64_t>>& in_dims,
    int64_t member) {
  std::vector<at::Tensor> out = inputs;
  for (size_t i = 0; i < in_dims.size(); ++i) {
    if (in_dims[i]) {
      out[i] = inputs[i].select(*in_dims[i], member);
    }
  }
  return out;
}

// Calls `fn` with inputs batched at a new vmap level; `prepare` runs after
// the layer is pushed and gets the level (to batch the parameters with).
template <class Prepare>
at::Tensor run_batched(
    int64_t batch_size,
    const std::vector<at::Tensor>& inputs,
    const VmapOptions& options,
    Prepare&& prepare,
    VmapFunction fn) {
  VmapLayer layer(batch_size, options.randomness());
  std::vector<at::Tensor> batched = inputs;
  const auto& in_dims = options.in_dims();
  for (size_t i = 0; i < in_dims.size(); ++i) {
    if (in_dims[i]) {
      batched[i] =
          functorch::addBatchDim(inputs[i], *in_dims[i], layer.level());
    }
  }
  [[maybe_unused]] const auto scope = prepare(layer.level());
  const at::Tensor result = fn(batched);
  TORCH_CHECK(
      result.defined(), "vmap: the function returned an undefined tensor");
  return unbatch(result, layer.level(), batch_size, options.out_dim());
}

at::Tensor stack_results(std::vector<at::Tensor> results, int64_t out_dim) {
  TORCH_CHECK_INDEX(
      out_dim <= results.front().dim(),
      "vmap: out_dim ",
      out_dim,
      " is out of range for a result of shape ",
      results.front().sizes(),
      " per member");
  return at::stack(results, out_dim);
}

// --- swapping batched tensors into a module --------------------------------

// A module member holding one of its registered tensors.
struct Slot {
  NestedKey key;
  at::Tensor* member;
};

using NamedMembers = std::vector<std::pair<std::string, at::Tensor*>>;

// The members of a layer of type Impl, by the names it registers them under;
// null when the module is of another type.
template <class Impl>
std::optional<NamedMembers> members_of(
    torch::nn::Module& module,
    std::initializer_list<std::pair<const char*, at::Tensor Impl::*>> table) {
  auto* impl = dynamic_cast<Impl*>(&module);
  if (impl == nullptr) {
    return std::nullopt;
  }
  NamedMembers out;
  for (const auto& [name, member] : table) {
    out.emplace_back(name, &(impl->*member));
  }
  return out;
}

template <class Impl>
std::optional<NamedMembers> weight_bias(torch::nn::Module& module) {
  return members_of<Impl>(
      module, {{"weight", &Impl::weight}, {"bias", &Impl::bias}});
}

template <class Impl>
std::optional<NamedMembers> weight_only(torch::nn::Module& module) {
  return members_of<Impl>(module, {{"weight", &Impl::weight}});
}

template <class Impl>
std::optional<NamedMembers> norm_layer(torch::nn::Module& module) {
  return members_of<Impl>(
      module,
      {{"weight", &Impl::weight},
       {"bias", &Impl::bias},
       {"running_mean", &Impl::running_mean},
       {"running_var", &Impl::running_var},
       {"num_batches_tracked", &Impl::num_batches_tracked}});
}

template <class Impl>
std::optional<NamedMembers> rnn_cell(torch::nn::Module& module) {
  return members_of<Impl>(
      module,
      {{"weight_ih", &Impl::weight_ih},
       {"weight_hh", &Impl::weight_hh},
       {"bias_ih", &Impl::bias_ih},
       {"bias_hh", &Impl::bias_hh}});
}

std::optional<NamedMembers> layer_members(torch::nn::Module& module) {
  using namespace torch::nn;  // NOLINT(google-build-using-namespace)
  using Finder = std::optional<NamedMembers> (*)(torch::nn::Module&);
  static const Finder kFinders[] = {
      weight_bias<LinearImpl>,          weight_bias<BilinearImpl>,
      weight_bias<Conv1dImpl>,          weight_bias<Conv2dImpl>,
      weight_bias<Conv3dImpl>,          weight_bias<ConvTranspose1dImpl>,
      weight_bias<ConvTranspose2dImpl>, weight_bias<ConvTranspose3dImpl>,
      weight_bias<LayerNormImpl>,       weight_bias<GroupNormImpl>,
      weight_only<EmbeddingImpl>,       weight_only<EmbeddingBagImpl>,
      weight_only<PReLUImpl>,           norm_layer<BatchNorm1dImpl>,
      norm_layer<BatchNorm2dImpl>,      norm_layer<BatchNorm3dImpl>,
      norm_layer<InstanceNorm1dImpl>,   norm_layer<InstanceNorm2dImpl>,
      norm_layer<InstanceNorm3dImpl>,   rnn_cell<RNNCellImpl>,
      rnn_cell<LSTMCellImpl>,           rnn_cell<GRUCellImpl>,
  };
  for (const Finder finder : kFinders) {
    if (auto members = finder(module)) {
      return members;
    }
  }
  return std::nullopt;
}

// Lists the member behind every tensor `module` registers, with its key in
// the dict `from_module` builds; false when one cannot be reached (a
// module type we do not know, or a member that no longer aliases its
// registered tensor).
bool collect_slots(
    torch::nn::Module& module,
    std::vector<std::string>& path,
    std::vector<Slot>& slots) {
  std::vector<std::pair<std::string, at::Tensor>> own;
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    own.emplace_back(item.key(), item.value());
  }
  for (const auto& item : module.named_buffers(/*recurse=*/false)) {
    own.emplace_back(item.key(), item.value());
  }
  if (!own.empty()) {
    auto members = layer_members(module);
    if (!members) {
      return false;
    }
    for (const auto& [name, tensor] : own) {
      at::Tensor* member = nullptr;
      for (const auto& [member_name, candidate] : *members) {
        if (member_name == name) {
          member = candidate;
        }
      }
      if (member == nullptr ||
          member->unsafeGetTensorImpl() != tensor.unsafeGetTensorImpl()) {
        return false;
      }
      path.push_back(name);
      slots.push_back(Slot{NestedKey(path), member});
      path.pop_back();
    }
  }
  for (const auto& item : module.named_children()) {
    path.push_back(item.key());
    const bool ok = collect_slots(*item.value(), path, slots);
    path.pop_back();
    if (!ok) {
      return false;
    }
  }
  return true;
}

// Puts the batched parameters into the module's members and restores the
// members' own tensors when it goes out of scope.
class MemberSwap {
 public:
  MemberSwap(const std::vector<Slot>& slots, std::vector<at::Tensor> values)
      : slots_(slots) {
    originals_.reserve(slots.size());
    for (size_t i = 0; i < slots.size(); ++i) {
      originals_.push_back(std::exchange(*slots[i].member, values[i]));
    }
  }
  ~MemberSwap() {
    for (size_t i = 0; i < originals_.size(); ++i) {
      *slots_[i].member = std::move(originals_[i]);
    }
  }
  MemberSwap(const MemberSwap&) = delete;
  MemberSwap& operator=(const MemberSwap&) = delete;
  MemberSwap(MemberSwap&&) = delete;
  MemberSwap& operator=(MemberSwap&&) = delete;

 private:
  const std::vector<Slot>& slots_;
  std::vector<at::Tensor> originals_;
};

// Checks that `params_stack` is the module's dict with a members' dim in
// front, leaf for leaf; returns the number of members.
int64_t check_params_stack(
    torch::nn::Module& module, const TensorDict& params_stack) {
  TORCH_CHECK_VALUE(
      params_stack.batch_dims() >= 1,
      "functional_call_vmap: params_stack has batch size [] but needs the "
      "members along dim 0; stack the members' parameters "
      "(tensordict::stack of TensorDict::from_module dicts)");
  const int64_t members = params_stack.size(0);
  const TensorDict expected = TensorDict::from_module(module);
  const auto expected_leaves = expected.items(
      /*include_nested=*/true, /*leaves_only=*/true);
  for (const auto& [key, value] : expected_leaves) {
    const Value* given = params_stack.find(key);
    TORCH_CHECK_VALUE(
        given != nullptr,
        "functional_call_vmap: the module's tensor ",
        key.to_string(),
        " is missing from params_stack");
    TORCH_CHECK_VALUE(
        given->is_tensor(),
        "functional_call_vmap: key ",
        key.to_string(),
        " of params_stack is a ",
        given->type_name(),
        " but the module holds a tensor there");
    const at::Tensor& module_tensor = value.tensor();
    const at::Tensor& stacked = given->tensor();
    std::vector<int64_t> want = module_tensor.sizes().vec();
    want.insert(want.begin(), members);
    TORCH_CHECK_VALUE(
        stacked.sizes() == c10::IntArrayRef(want),
        "functional_call_vmap: key ",
        key.to_string(),
        " of params_stack has shape ",
        stacked.sizes(),
        " but needs ",
        c10::IntArrayRef(want),
        ": the module's shape ",
        module_tensor.sizes(),
        " after the ",
        members,
        " members");
    TORCH_CHECK_TYPE(
        stacked.scalar_type() == module_tensor.scalar_type(),
        "functional_call_vmap: key ",
        key.to_string(),
        " of params_stack has dtype ",
        stacked.scalar_type(),
        " but the module's tensor has dtype ",
        module_tensor.scalar_type());
  }
  for (const auto& key : params_stack.keys(
           /*include_nested=*/true, /*leaves_only=*/true)) {
    TORCH_CHECK_VALUE(
        expected.find(key) != nullptr,
        "functional_call_vmap: key ",
        key.to_string(),
        " of params_stack has no parameter or buffer of that name in the "
        "module");
  }
  return members;
}

// The loop over the members. With `slots` (the module's members are
// reachable) each member's slices go into them, so that gradients reach
// params_stack as on the batched path; otherwise through ScopedModuleSwap,
// where they reach the module's own parameters (see NOTE [Swapping module
// tensors]).
at::Tensor module_loop(
    torch::nn::Module& module,
    const TensorDict& params_stack,
    int64_t members,
    const std::vector<Slot>* slots,
    const std::vector<at::Tensor>& inputs,
    const VmapOptions& options,
    VmapFunction forward) {
  std::vector<at::Tensor> results;
  results.reserve(members);
  for (int64_t i = 0; i < members; ++i) {
    std::vector<at::Tensor> member_in =
        member_inputs(inputs, options.in_dims(), i);
    if (slots != nullptr) {
      std::vector<at::Tensor> values;
      values.reserve(slots->size());
      for (const Slot& slot : *slots) {
        values.push_back(params_stack.get(slot.key).select(0, i));
      }
      MemberSwap swap(*slots, std::move(values));
      results.push_back(forward(member_in));
    } else {
      ScopedModuleSwap swap(params_stack.index({i}), module);
      results.push_back(forward(member_in));
    }
  }
  return stack_results(std::move(results), options.out_dim());
}

// Runs `batched` or `loop` as the mode says, a loop when the call cannot
// be batched (`swappable` false: kBatched was refused before), and reports
// the path that gave the result.
template <typename Batched, typename Loop>
at::Tensor run_in_mode(
    const VmapOptions& options,
    bool swappable,
    const Batched& batched,
    const Loop& loop) {
  const auto report = [&](VmapPath path, at::Tensor result) {
    if (options.path_taken() != nullptr) {
      *options.path_taken() = path;
    }
    return result;
  };
  if (!swappable || options.mode() == VmapMode::kLoop) {
    return report(VmapPath::kLoop, loop());
  }
  if (options.mode() != VmapMode::kBatchedThenLoop) {
    return report(VmapPath::kBatched, batched());
  }
  try {
    return report(VmapPath::kBatched, batched());
  } catch (const c10::Error&) {
    return report(VmapPath::kLoop, loop());
  }
}

}  // namespace vmap_internal

at::Tensor vmap(
    VmapFunction fn,
    const std::vector<at::Tensor>& inputs,
    const VmapOptions& options) {
  using namespace vmap_internal;  // NOLINT(google-build-using-namespace)
  const int64_t batch_size =
      check_batch("vmap", inputs, options, /*known_batch_size=*/std::nullopt);
  const auto loop = [&] {
    std::vector<at::Tensor> results;
    results.reserve(batch_size);
    for (int64_t i = 0; i < batch_size; ++i) {
      results.push_back(fn(member_inputs(inputs, options.in_dims(), i)));
    }
    return stack_results(std::move(results), options.out_dim());
  };
  const auto batched = [&] {
    return run_batched(
        batch_size, inputs, options, [](int64_t) { return 0; }, fn);
  };
  return vmap_internal::run_in_mode(options, /*swappable=*/true, batched, loop);
}

at::Tensor functional_call_vmap(
    torch::nn::Module& module,
    const TensorDict& params_stack,
    const std::vector<at::Tensor>& inputs,
    VmapFunction forward,
    const VmapOptions& options) {
  using namespace vmap_internal;  // NOLINT(google-build-using-namespace)
  const int64_t members = check_params_stack(module, params_stack);
  (void)check_batch("functional_call_vmap", inputs, options, members);
  std::vector<Slot> slots;
  std::vector<std::string> path;
  const bool swappable = collect_slots(module, path, slots);
  TORCH_CHECK(
      swappable || options.mode() != VmapMode::kBatched,
      "functional_call_vmap: VmapMode::kBatched, but the module (or one of "
      "its submodules) holds tensors in members vmap cannot swap: only "
      "libtorch's own layers are batched; use VmapMode::kAuto to run it as "
      "a loop");
  const auto loop = [&] {
    return module_loop(
        module,
        params_stack,
        members,
        swappable ? &slots : nullptr,
        inputs,
        options,
        forward);
  };
  const auto batched = [&] {
    return run_batched(
        members,
        inputs,
        options,
        [&](int64_t level) {
          std::vector<at::Tensor> values;
          values.reserve(slots.size());
          for (const Slot& slot : slots) {
            values.push_back(functorch::addBatchDim(
                params_stack.get(slot.key), /*dim=*/0, level));
          }
          return std::make_unique<MemberSwap>(slots, std::move(values));
        },
        forward);
  };
  return run_in_mode(options, swappable, batched, loop);
}

TENSORDICT_END_NAMESPACE
