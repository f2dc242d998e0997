// TensorDictSequential: a chain of TensorDict modules, with Python's key
// bookkeeping (in_keys, out_keys, selected outputs, sub-chains).

#include <c10/util/Exception.h>
#include <torch/nn/modules/container/modulelist.h>

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "nn/keys.h"
#include "tensordict/errors.h"
#include "tensordict/nn.h"

TENSORDICT_BEGIN_NAMESPACE
namespace nn {
namespace nn_sequential_internal {

using nn_module_internal::contains_key;

// Python's rule: an input is a key some module reads before any module
// writes it; the outputs are every key written, each where it is written
// last.
std::pair<std::vector<NestedKey>, std::vector<NestedKey>> chain_keys(
    const std::vector<AnyTensorDictModule>& modules) {
  std::vector<NestedKey> in_keys;
  std::vector<NestedKey> written;
  for (const AnyTensorDictModule& module : modules) {
    for (const NestedKey& key : module->in_keys()) {
      if (!contains_key(written, key) && !contains_key(in_keys, key)) {
        in_keys.push_back(key);
      }
    }
    written.insert(
        written.end(), module->out_keys().begin(), module->out_keys().end());
  }
  std::vector<NestedKey> out_keys;
  for (size_t i = 0; i < written.size(); ++i) {
    bool written_later = false;
    for (size_t j = i + 1; j < written.size() && !written_later; ++j) {
      written_later = written[j] == written[i];
    }
    if (!written_later) {
      out_keys.push_back(written[i]);
    }
  }
  return {std::move(in_keys), std::move(out_keys)};
}

bool is_plain_sequence(const TensorDictModuleBase& module) {
  return typeid(module) == typeid(TensorDictSequentialImpl);
}

}  // namespace nn_sequential_internal

TensorDictSequentialImpl::TensorDictSequentialImpl(
    std::vector<AnyTensorDictModule> modules,
    TensorDictSequentialOptions options)
    : TensorDictModuleBase("TensorDictSequential"),
      modules_(std::move(modules)),
      partial_tolerant_(options.partial_tolerant()) {
  torch::nn::ModuleList list;
  for (size_t i = 0; i < modules_.size(); ++i) {
    TORCH_CHECK_VALUE(
        !modules_[i].is_empty(),
        "TensorDictSequential: module ",
        i,
        " is an empty holder (nullptr)");
    list->push_back(std::shared_ptr<torch::nn::Module>(modules_[i].ptr()));
  }
  register_module("module", list);
  auto [in_keys, out_keys] = nn_sequential_internal::chain_keys(modules_);
  set_keys(std::move(in_keys), std::move(out_keys));
  if (!options.selected_out_keys().empty()) {
    select_out_keys(options.selected_out_keys());
  }
}

std::vector<AnyTensorDictModule> TensorDictSequentialImpl::clone_modules(
    const std::optional<c10::Device>& device) const {
  std::vector<AnyTensorDictModule> modules;
  modules.reserve(modules_.size());
  for (size_t i = 0; i < modules_.size(); ++i) {
    try {
      auto copy = std::dynamic_pointer_cast<TensorDictModuleBase>(
          modules_[i]->clone(device));
      TORCH_CHECK(
          copy != nullptr,
          "clone() of a TensorDictModuleBase returned another kind of module");
      modules.emplace_back(std::move(copy));
    } catch (c10::Error& e) {
      e.add_context(c10::str("Failed while cloning module '", i, "'."));
      throw;
    }
  }
  return modules;
}

TensorDictSequentialOptions TensorDictSequentialImpl::current_options() const {
  TensorDictSequentialOptions options;
  options.partial_tolerant(partial_tolerant_);
  if (has_selected_out_keys()) {
    options.selected_out_keys(out_keys());
  }
  return options;
}

std::shared_ptr<torch::nn::Module> TensorDictSequentialImpl::clone(
    const std::optional<c10::Device>& device) const {
  auto copy = std::make_shared<TensorDictSequentialImpl>(
      clone_modules(device), current_options());
  copy->train(is_training());
  return copy;
}

TensorDict TensorDictSequentialImpl::run(TensorDict td) {
  for (size_t i = 0; i < modules_.size(); ++i) {
    TensorDictModuleBase& module = *modules_[i];
    try {
      bool runs = true;
      if (partial_tolerant_) {
        for (const NestedKey& key : module.in_keys()) {
          runs = runs && td.contains(key);
        }
      }
      if (runs) {
        td = module(std::move(td));
      }
    } catch (c10::Error& e) {
      e.add_context(c10::str("Failed while executing module '", i, "'."));
      throw;
    }
  }
  return td;
}

TensorDict TensorDictSequentialImpl::forward(TensorDict td) {
  if (!has_selected_out_keys()) {
    return run(std::move(td));
  }
  // The modules write into a shallow copy, so the outputs left out of the
  // selection never reach `td`; the selected ones, and the entries of `td`
  // a module replaced, are written back.
  TensorDict result = run(td.copy());
  std::vector<NestedKey> keys = out_keys();
  for (NestedKey& key :
       td.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    if (!nn_module_internal::contains_key(keys, key)) {
      keys.push_back(std::move(key));
    }
  }
  if (!keys.empty()) {
    td.update(result, UpdateOptions().keys_to_update(std::move(keys)));
  }
  return td;
}

TensorDict TensorDictSequentialImpl::forward(TensorDict td, TensorDict out) {
  TensorDict result = run(td.copy());
  if (!out_keys().empty()) {
    out.update(result, UpdateOptions().keys_to_update(out_keys()));
  }
  return out;
}

TensorDictSequentialImpl& TensorDictSequentialImpl::select_out_keys(
    const std::vector<NestedKey>& keys) {
  for (const NestedKey& key : keys) {
    TORCH_CHECK_VALUE(
        nn_module_internal::contains_key(out_keys(), key),
        "All keys in selected_out_keys must be in out_keys: ",
        key.to_string(),
        " is not one of ",
        nn_module_internal::keys_to_string(out_keys()));
  }
  set_selected_out_keys(keys);
  return *this;
}

TensorDictSequentialImpl& TensorDictSequentialImpl::reset_out_keys() {
  TensorDictModuleBase::reset_out_keys();
  return *this;
}

TensorDictSequential TensorDictSequentialImpl::select_subsequence(
    const std::optional<std::vector<NestedKey>>& in_keys,
    const std::optional<std::vector<NestedKey>>& out_keys) const {
  using nn_module_internal::contains_key;
  std::vector<NestedKey> available = in_keys.value_or(this->in_keys());
  std::vector<NestedKey> needed = out_keys.value_or(this->out_keys());
  std::vector<AnyTensorDictModule> modules = modules_;
  std::vector<bool> keep(modules.size(), true);
  for (size_t i = 0; i < modules.size(); ++i) {
    if (nn_sequential_internal::is_plain_sequence(*modules[i])) {
      const auto& sequence =
          static_cast<const TensorDictSequentialImpl&>(*modules[i]);
      try {
        modules[i] = sequence.select_subsequence(available, std::nullopt);
      } catch (const c10::ValueError&) {
        keep[i] = false;
        continue;
      }
    }
    bool runs = true;
    for (const NestedKey& key : modules[i]->in_keys()) {
      runs = runs && contains_key(available, key);
    }
    if (runs) {
      const std::vector<NestedKey>& written = modules[i]->out_keys();
      available.insert(available.end(), written.begin(), written.end());
    } else {
      keep[i] = false;
    }
  }
  for (size_t i = modules.size(); i-- > 0;) {
    if (!keep[i]) {
      continue;
    }
    bool useful = false;
    for (const NestedKey& key : modules[i]->out_keys()) {
      useful = useful || contains_key(needed, key);
    }
    if (!useful) {
      keep[i] = false;
      continue;
    }
    if (nn_sequential_internal::is_plain_sequence(*modules[i])) {
      const auto& sequence =
          static_cast<const TensorDictSequentialImpl&>(*modules[i]);
      modules[i] = sequence.select_subsequence(std::nullopt, needed);
    }
    const std::vector<NestedKey>& read = modules[i]->in_keys();
    needed.insert(needed.end(), read.begin(), read.end());
  }
  std::vector<AnyTensorDictModule> kept;
  for (size_t i = 0; i < modules.size(); ++i) {
    if (keep[i]) {
      kept.push_back(std::move(modules[i]));
    }
  }
  TORCH_CHECK_VALUE(
      !kept.empty(),
      "No modules left after selection. Make sure that in_keys and out_keys "
      "are coherent.");
  return TensorDictSequential(
      std::move(kept),
      TensorDictSequentialOptions().partial_tolerant(partial_tolerant_));
}

const AnyTensorDictModule& TensorDictSequentialImpl::operator[](
    int64_t index) const {
  const auto size = static_cast<int64_t>(modules_.size());
  TORCH_CHECK_INDEX(
      index >= -size && index < size,
      "index ",
      index,
      " is out of range for a TensorDictSequential of ",
      size,
      size == 1 ? " module" : " modules");
  return modules_[static_cast<size_t>(index < 0 ? index + size : index)];
}

void TensorDictSequentialImpl::pretty_print(std::ostream& stream) const {
  stream << "TensorDictSequential(in_keys="
         << nn_module_internal::keys_to_string(in_keys())
         << ", out_keys=" << nn_module_internal::keys_to_string(out_keys())
         << ")";
}

}  // namespace nn
TENSORDICT_END_NAMESPACE
