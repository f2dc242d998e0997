// from_module, to_module and ScopedModuleSwap; see NOTE [Swapping module
// tensors] in tensordict/module.h.

#include "tensordict/module.h"

#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>

#include <string>
#include <utility>
#include <vector>

#include "core/walk.h"
#include "tensordict/errors.h"
#include "tensordict/tensor_dict_params.h"

TENSORDICT_BEGIN_NAMESPACE
namespace {

// Returns null when the module (and its children) hold no tensor and
// `filter_empty` says so, as Python leaves such children out. A
// TensorDictParams gives its own dict, as in Python.
std::optional<TensorDict> module_tensors(
    const torch::nn::Module& module, const FromModuleOptions& options) {
  if (const auto* params = dynamic_cast<const TensorDictParams*>(&module)) {
    return params->tensordict();
  }
  const auto leaf = [&](const at::Tensor& t) {
    return options.use_state_dict() ? t.detach() : t;
  };
  TensorDict result;
  detail::TensorDictImpl& impl = *result.unsafeGetImpl();
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    impl.append(item.key(), leaf(item.value()));
  }
  for (const auto& item : module.named_buffers(/*recurse=*/false)) {
    impl.append(item.key(), leaf(item.value()));
  }
  for (const auto& item : module.named_children()) {
    if (auto child = module_tensors(*item.value(), options)) {
      impl.append(item.key(), std::move(*child));
    }
  }
  if (impl.nodes().empty() && options.filter_empty()) {
    return std::nullopt;
  }
  return result;
}

bool holds_tensors(const torch::nn::Module& module) {
  return module_tensors(module, FromModuleOptions()).has_value();
}

// One module tensor to write.
struct Target {
  at::Tensor module_tensor;
  at::Tensor value;
};

// Checks that `td` matches `module` key for key and shape for shape, and
// lists what to write; nothing is changed.
void collect_targets(
    const TensorDict& td,
    torch::nn::Module& module,
    detail::KeyPath& path,
    std::vector<Target>& targets) {
  const auto params = module.named_parameters(/*recurse=*/false);
  const auto buffers = module.named_buffers(/*recurse=*/false);
  const auto children = module.named_children();
  for (const auto& node : td.unsafeGetImpl()->nodes()) {
    const std::string& name = node->key;
    const Value& value = node->value;
    detail::PathPart part(path, name);
    const at::Tensor* tensor = params.find(name);
    if (tensor == nullptr) {
      tensor = buffers.find(name);
    }
    if (tensor != nullptr) {
      TORCH_CHECK(
          value.is_tensor(),
          "to_module: key ",
          path.to_string(),
          " is a ",
          value.type_name(),
          " but the module holds a tensor there");
      const at::Tensor& t = value.tensor();
      TORCH_CHECK(
          t.sizes() == tensor->sizes(),
          "to_module: key ",
          path.to_string(),
          " has shape ",
          t.sizes(),
          " but the module's tensor has shape ",
          tensor->sizes());
      TORCH_CHECK(
          t.scalar_type() == tensor->scalar_type(),
          "to_module: key ",
          path.to_string(),
          " has dtype ",
          t.scalar_type(),
          " but the module's tensor has dtype ",
          tensor->scalar_type());
      targets.push_back(Target{*tensor, t});
      continue;
    }
    const auto* child = children.find(name);
    TORCH_CHECK(
        child != nullptr,
        "to_module: key ",
        path.to_string(),
        " has no parameter, buffer or submodule of that name in ",
        module.name());
    TORCH_CHECK(
        value.is_tensordict(),
        "to_module: key ",
        path.to_string(),
        " is a ",
        value.type_name(),
        " but the module has a submodule there");
    collect_targets(value.tensordict(), **child, path, targets);
  }
  // Every tensor the module holds must be given.
  auto check_present = [&](const std::string& name, const char* what) {
    TORCH_CHECK(
        td.contains(name),
        "to_module: the module's ",
        what,
        " ",
        path.child(name).to_string(),
        " is missing from the dict");
  };
  for (const auto& item : params) {
    check_present(item.key(), "parameter");
  }
  for (const auto& item : buffers) {
    check_present(item.key(), "buffer");
  }
  for (const auto& item : children) {
    if (holds_tensors(*item.value())) {
      check_present(item.key(), "submodule");
    }
  }
}

}  // namespace

TensorDict TensorDict::from_module(
    const torch::nn::Module& module, const FromModuleOptions& options) {
  auto result = module_tensors(module, options);
  TensorDict out = result ? std::move(*result) : TensorDict();
  if (options.lock()) {
    out.lock_();
  }
  return out;
}

TensorDict TensorDict::to_module(
    torch::nn::Module& module, const ToModuleOptions& options) const {
  std::vector<Target> targets;
  detail::KeyPath path;
  collect_targets(*this, module, path, targets);
  // The values the module held: new tensors of the old data when the
  // module's tensors get the dict's data, copies when written over in place
  // (as Python's swap clones them).
  TensorDict previous;
  if (options.return_swap()) {
    previous = from_module(module).apply([&](const at::Tensor& t) {
      return options.inplace() ? t.detach().clone() : t.variable_data();
    });
  }
  at::NoGradGuard no_grad;
  for (Target& target : targets) {
    if (options.inplace()) {
      target.module_tensor.copy_(target.value);
      continue;
    }
    if (target.module_tensor.unsafeGetTensorImpl() ==
        target.value.unsafeGetTensorImpl()) {
      continue;  // the module's own tensor
    }
    target.module_tensor.set_data(target.value);
    // The module tensor takes the dict tensor's place in the graph, so
    // gradients reach the dict, as in Python; a dict tensor without grad
    // (the originals a swap restores among them) makes it a leaf again.
    // See NOTE [Swapping module tensors].
    torch::autograd::impl::set_gradient_edge(
        target.module_tensor,
        target.value.requires_grad()
            ? torch::autograd::impl::gradient_edge(target.value)
            : torch::autograd::Edge());
  }
  return previous;
}

ScopedModuleSwap::ScopedModuleSwap(
    const TensorDict& params, torch::nn::Module& module)
    : module_(&module), originals_(params.to_module(module)) {}

ScopedModuleSwap::~ScopedModuleSwap() {
  try {
    (void)originals_.to_module(*module_);
  } catch (const std::exception&) {
    // The originals have the module's own structure: restoring cannot fail
    // unless the module was changed meanwhile, and a destructor must not
    // throw.
  }
}

TENSORDICT_END_NAMESPACE
