// TensorDictParams; see NOTE [TensorDictParams registration] in
// tensordict/tensor_dict_params.h.

#include "tensordict/tensor_dict_params.h"

#include <c10/util/Exception.h>

#include <ostream>
#include <string>
#include <utility>

#include "core/tensor_dict_impl.h"
#include "core/walk.h"
#include "tensordict/errors.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
// Named, not anonymous: the library is a unity build.
namespace params_registration {

// How a leaf is registered.
enum class Role { kParameter, kBuffer };

bool is_parameter_like(const at::Tensor& tensor) {
  return tensor.is_leaf() && tensor.requires_grad();
}

// Python's `_maybe_make_param` (convert) and `_maybe_make_param_or_buffer`
// (no_convert), with "a leaf requiring grad" standing for nn.Parameter.
std::pair<at::Tensor, Role> converted(const at::Tensor& tensor, bool convert) {
  if (is_parameter_like(tensor)) {
    return {tensor, Role::kParameter};
  }
  const c10::ScalarType dtype = tensor.scalar_type();
  if (convert &&
      (dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf)) {
    return {tensor.detach().requires_grad_(true), Role::kParameter};
  }
  return {tensor, Role::kBuffer};
}

void check_name(const std::string& name, const KeyPath& path) {
  TORCH_CHECK_VALUE(
      !name.empty() && name.find('.') == std::string::npos,
      "TensorDictParams cannot register the key ",
      path.to_string(),
      ": a parameter or buffer name must be non-empty and hold no \".\"");
}

// The module holding the level `level_module` has as child `name`, made if
// missing.
torch::nn::Module& child_module(
    torch::nn::Module& level_module, const std::string& name) {
  const auto children = level_module.named_children();
  if (const auto* child = children.find(name)) {
    return **child;
  }
  return *level_module.register_module(
      name, std::make_shared<torch::nn::Module>("TensorDictParams"));
}

void check_role(bool was_parameter, Role role, const KeyPath& path) {
  TORCH_CHECK_VALUE(
      was_parameter == (role == Role::kParameter),
      "TensorDictParams: the value for key ",
      path.to_string(),
      " would be a ",
      role == Role::kParameter ? "parameter" : "buffer",
      " but the key is registered as a ",
      was_parameter ? "parameter" : "buffer",
      "; a key keeps its role");
}

// Throws if the tensor registered for `key` below `root`, if any, has
// another role than `role`; changes nothing.
void check_existing_role(
    const torch::nn::Module& root,
    const NestedKey& key,
    Role role,
    const KeyPath& path) {
  const torch::nn::Module* module = &root;
  for (size_t i = 0; i + 1 < key.size(); ++i) {
    const auto children = module->named_children();
    const auto* child = children.find(std::string(key[i]));
    if (child == nullptr) {
      return;  // a new level: nothing registered yet
    }
    module = child->get();
  }
  const std::string name(key.back());
  const bool is_parameter =
      module->named_parameters(/*recurse=*/false).find(name) != nullptr;
  if (is_parameter ||
      module->named_buffers(/*recurse=*/false).find(name) != nullptr) {
    check_role(is_parameter, role, path);
  }
}

// Registers `tensor` as `name` of `level_module`: a new registration, or an
// existing one's data replaced.
at::Tensor register_leaf(
    torch::nn::Module& level_module,
    const std::string& name,
    const at::Tensor& tensor,
    Role role,
    const KeyPath& path) {
  auto params = level_module.named_parameters(/*recurse=*/false);
  auto buffers = level_module.named_buffers(/*recurse=*/false);
  at::Tensor* param = params.find(name);
  at::Tensor* buffer = buffers.find(name);
  if (param == nullptr && buffer == nullptr) {
    if (role == Role::kParameter) {
      return level_module.register_parameter(
          name, tensor, /*requires_grad=*/tensor.requires_grad());
    }
    return level_module.register_buffer(name, tensor);
  }
  const bool was_parameter = param != nullptr;
  check_role(was_parameter, role, path);
  at::Tensor registered = was_parameter ? *param : *buffer;
  if (!registered.is_same(tensor)) {
    registered.set_data(tensor);
  }
  return registered;
}

// Registers the tensors of `td` on `module`, nested levels as child
// modules, and puts the registered tensors in the dict. `role_of` says how
// each leaf is registered.
template <typename RoleOf>
void register_level(
    const TensorDict& td,
    torch::nn::Module& module,
    KeyPath& path,
    const RoleOf& role_of) {
  struct Register : MutWalkVisitor {
    const RoleOf& role_of;
    // The module of the dict being walked, and those of its parents.
    std::vector<torch::nn::Module*> modules;
    void leaf(const KeyPath& path, Node& node) {
      check_name(node.key, path);
      auto [tensor, role] = role_of(node.value.tensor(), path);
      node.value =
          Value(register_leaf(*modules.back(), node.key, tensor, role, path));
    }
    bool enter_dict(const KeyPath& path, TensorDictImpl&) {
      const std::string name(path.back());
      check_name(name, path);
      modules.push_back(&child_module(*modules.back(), name));
      return true;
    }
    void leave_dict(const KeyPath&, TensorDictImpl&) {
      modules.pop_back();
    }
    // Lazy stacks and non-tensor values hold no parameters.
    bool enter_lazy_stack(const KeyPath&, Node&) {
      return false;
    }
  } visitor{{}, role_of, {&module}};
  walk_mut(*td.unsafeGetImpl(), visitor, path);
}

// Sets the device of `td` and its nested dicts, when they have one.
void set_device(const TensorDict& td, c10::Device device) {
  struct SetDevice : MutWalkVisitor {
    c10::Device device;
    void set(TensorDictImpl& dict) const {
      if (dict.device) {
        dict.device = device;
      }
    }
    bool enter_dict(const KeyPath&, TensorDictImpl& dict) const {
      set(dict);
      return true;
    }
    bool enter_lazy_stack(const KeyPath&, Node&) const {
      return false;
    }
  } visitor{{}, device};
  visitor.set(*td.unsafeGetImpl());
  walk_mut(*td.unsafeGetImpl(), visitor);
}

}  // namespace params_registration
}  // namespace detail

namespace reg = detail::params_registration;

TensorDictParams::TensorDictParams(
    TensorDict params, const TensorDictParamsOptions& options)
    : torch::nn::Module("TensorDictParams"),
      params_(std::move(params)),
      no_convert_(options.no_convert()) {
  detail::KeyPath path;
  const bool convert = !no_convert_;
  reg::register_level(
      params_, *this, path, [convert](const at::Tensor& t, const auto&) {
        return reg::converted(t, convert);
      });
  if (options.lock()) {
    params_.lock_();
  }
}

TensorDictParams::TensorDictParams(
    FromModuleTag,
    TensorDict params,
    const torch::nn::Module& module,
    bool use_state_dict)
    : torch::nn::Module("TensorDictParams"),
      params_(std::move(params)),
      no_convert_(true) {
  // The module's parameters stay parameters, even frozen ones, and its
  // buffers buffers; detached state-dict leaves are all buffers.
  const auto module_params = module.named_parameters(/*recurse=*/true);
  detail::KeyPath path;
  reg::register_level(
      params_,
      *this,
      path,
      [&](const at::Tensor& t, const detail::KeyPath& key) {
        const bool is_param =
            !use_state_dict && module_params.find(key.joined(".")) != nullptr;
        return std::make_pair(
            t, is_param ? reg::Role::kParameter : reg::Role::kBuffer);
      });
}

std::shared_ptr<TensorDictParams> TensorDictParams::from_module(
    const torch::nn::Module& module, const FromModuleOptions& options) {
  if (const auto* params = dynamic_cast<const TensorDictParams*>(&module)) {
    return std::const_pointer_cast<TensorDictParams>(
        std::static_pointer_cast<const TensorDictParams>(
            params->shared_from_this()));
  }
  TensorDict td =
      TensorDict::from_module(module, FromModuleOptions(options).lock(false));
  auto out = std::shared_ptr<TensorDictParams>(new TensorDictParams(
      FromModuleTag{}, std::move(td), module, options.use_state_dict()));
  if (options.lock()) {
    out->params_.lock_();
  }
  return out;
}

at::Tensor TensorDictParams::get(const NestedKey& key) const {
  return params_.get(key);
}

TensorDictParams& TensorDictParams::set(
    const NestedKey& key, const at::Tensor& value) {
  // Check everything first, then set (the dict checks the shape and makes
  // missing levels), then register: a refused value changes nothing.
  detail::KeyPath path;
  for (size_t i = 0; i < key.size(); ++i) {
    path.push(key[i]);  // a view of `key`, which outlives `path`
    reg::check_name(std::string(key[i]), path);
  }
  auto [tensor, role] = reg::converted(value, !no_convert_);
  reg::check_existing_role(*this, key, role, path);
  // Writes through the module work on a locked dict, as in Python.
  const bool locked = params_.is_locked();
  if (locked) {
    params_.unlock_();
  }
  try {
    params_.set(key, value);
  } catch (...) {
    if (locked) {
      params_.lock_();
    }
    throw;
  }
  if (locked) {
    params_.lock_();
  }
  torch::nn::Module* module = this;
  TensorDict level = params_;
  for (size_t i = 0; i + 1 < key.size(); ++i) {
    const std::string part(key[i]);
    module = &reg::child_module(*module, part);
    level = level.get_tensordict(part);
  }
  const std::string name(key.back());
  const at::Tensor registered =
      reg::register_leaf(*module, name, tensor, role, path);
  level.unsafeGetImpl()->find(name)->value = Value(registered);
  return *this;
}

void TensorDictParams::set_dict_device(torch::Device device) {
  reg::set_device(params_, device);
}

void TensorDictParams::to(
    torch::Device device, torch::Dtype dtype, bool non_blocking) {
  torch::nn::Module::to(device, dtype, non_blocking);
  set_dict_device(device);
}

void TensorDictParams::to(torch::Dtype dtype, bool non_blocking) {
  torch::nn::Module::to(dtype, non_blocking);
}

void TensorDictParams::to(torch::Device device, bool non_blocking) {
  torch::nn::Module::to(device, non_blocking);
  set_dict_device(device);
}

void TensorDictParams::pretty_print(std::ostream& stream) const {
  stream << "TensorDictParams(params=" << params_.repr() << ")";
}

TENSORDICT_END_NAMESPACE
