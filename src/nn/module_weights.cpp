// The weights contract of TensorDictModuleBase (NOTE [Weights contract] in
// tensordict/nn.h): weights_layout, load_weights and check_weights.

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "tensordict/errors.h"
#include "tensordict/nn.h"
#include "tensordict/tensor_dict_params.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace nn {

namespace {

at::Tensor meta_like(const at::Tensor& tensor) {
  return at::empty(
      tensor.sizes(),
      at::TensorOptions().dtype(tensor.scalar_type()).device(at::kMeta));
}

TensorDict layout_of(const torch::nn::Module& module);

// The layout of `module`'s own tensors and of the modules below it, the
// TensorDictModuleBase ones answering for theirs: the keys
// TensorDict::from_module gives, with a child that holds no weights left
// out as it leaves one out.
TensorDict layout_below(const torch::nn::Module& module) {
  TensorDict layout;
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    layout.set(item.key(), meta_like(item.value()));
  }
  for (const auto& item : module.named_buffers(/*recurse=*/false)) {
    layout.set(item.key(), meta_like(item.value()));
  }
  for (const auto& item : module.named_children()) {
    TensorDict child = layout_of(*item.value());
    if (!child.is_empty()) {
      layout.set(item.key(), child);
    }
  }
  return layout;
}

TensorDict layout_of(const torch::nn::Module& module) {
  if (const auto* td_module =
          dynamic_cast<const TensorDictModuleBase*>(&module)) {
    return td_module->weights_layout();
  }
  if (const auto* params = dynamic_cast<const TensorDictParams*>(&module)) {
    // Its own dict, as from_module gives it.
    return params->tensordict().apply(meta_like);
  }
  return layout_below(module);
}

void load_into(torch::nn::Module& module, const TensorDict& weights);

// Copies `weights` (checked, nested as the layout) into `module`'s own
// tensors and hands each module below it its part.
void load_below(torch::nn::Module& module, const TensorDict& weights) {
  for (auto& item : module.named_parameters(/*recurse=*/false)) {
    item.value().copy_(weights.get(item.key()));
  }
  for (auto& item : module.named_buffers(/*recurse=*/false)) {
    item.value().copy_(weights.get(item.key()));
  }
  for (const auto& item : module.named_children()) {
    const Value* part = weights.find(item.key());
    if (part != nullptr) {
      load_into(*item.value(), part->tensordict());
    }
  }
}

void load_into(torch::nn::Module& module, const TensorDict& weights) {
  if (auto* td_module = dynamic_cast<TensorDictModuleBase*>(&module)) {
    td_module->load_weights(weights);
    return;
  }
  if (auto* params = dynamic_cast<TensorDictParams*>(&module)) {
    const TensorDict& own = params->tensordict();
    for (const NestedKey& key :
         own.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
      own.get(key).copy_(weights.get(key));
    }
    return;
  }
  load_below(module, weights);
}

std::string weight_list(const TensorDict& layout) {
  std::vector<std::string> names;
  for (const NestedKey& key :
       layout.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    names.push_back(key.join_parts("."));
  }
  std::sort(names.begin(), names.end());
  return names.empty() ? std::string("none") : c10::Join(", ", names);
}

std::string shape_and_dtype(const at::Tensor& tensor) {
  return c10::str(
      tensor.sizes(),
      " ",
      ::tensordict::detail::dtype_name(tensor.scalar_type()));
}

}  // namespace

TensorDict TensorDictModuleBase::weights_layout() const {
  return layout_below(*this);
}

void TensorDictModuleBase::load_weights(const TensorDict& weights) {
  const std::string who = name() + ".load_weights";
  check_weights(weights_layout(), weights, who);
  // Nested as the layout, whichever way the keys came.
  const TensorDict nested = weights.flatten_keys(".").unflatten_keys(".");
  torch::NoGradGuard no_grad;
  load_below(*this, nested);
}

void check_weights(
    const TensorDict& layout,
    const TensorDict& weights,
    std::string_view who,
    std::string_view owner) {
  const TensorDict flat_layout = layout.flatten_keys(".");
  std::vector<std::string> given;
  for (const NestedKey& key :
       weights.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    const std::string name = key.join_parts(".");
    const Value* want = flat_layout.find(name);
    TENSORDICT_CHECK_KEY(
        want != nullptr,
        who,
        ": key ",
        key.to_string(),
        " is not a weight of ",
        owner,
        "; its weights are ",
        weight_list(layout));
    const Value* got = weights.find(key);
    TORCH_CHECK_TYPE(
        got != nullptr && got->is_tensor(),
        who,
        ": key ",
        key.to_string(),
        " holds no tensor");
    const at::Tensor& tensor = got->tensor();
    const at::Tensor& expected = want->tensor();
    TORCH_CHECK_VALUE(
        tensor.sizes() == expected.sizes() &&
            tensor.scalar_type() == expected.scalar_type(),
        who,
        ": key ",
        key.to_string(),
        " expected ",
        shape_and_dtype(expected),
        ", got ",
        shape_and_dtype(tensor));
    given.push_back(name);
  }
  for (const NestedKey& key :
       layout.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    TENSORDICT_CHECK_KEY(
        std::find(given.begin(), given.end(), key.join_parts(".")) !=
            given.end(),
        who,
        ": key ",
        key.to_string(),
        " of ",
        owner,
        " is missing from the weights; its weights are ",
        weight_list(layout));
  }
}

}  // namespace nn
TENSORDICT_END_NAMESPACE
