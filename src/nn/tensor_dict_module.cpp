// TensorDictModuleBase: keys, out-key selection and the dispatch call shared
// by every module of tensordict/nn.h.

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "nn/keys.h"
#include "tensordict/errors.h"
#include "tensordict/nn.h"

TENSORDICT_BEGIN_NAMESPACE
namespace nn {
namespace nn_module_internal {

bool contains_key(const std::vector<NestedKey>& keys, const NestedKey& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

bool is_discard(const NestedKey& key) {
  return key.size() == 1 && key[0] == "_";
}

std::string keys_to_string(const std::vector<NestedKey>& keys) {
  return "[" + c10::Join(", ", keys) + "]";
}

}  // namespace nn_module_internal

using nn_module_internal::contains_key;
using nn_module_internal::keys_to_string;

TensorDictModuleBase::TensorDictModuleBase(std::string name)
    : torch::nn::Module(std::move(name)) {}

TensorDictModuleBase::~TensorDictModuleBase() = default;

TensorDict TensorDictModuleBase::forward(TensorDict td) {
  TensorDict out = td;
  return forward(std::move(td), std::move(out));
}

TensorDict TensorDictModuleBase::operator()(TensorDict td) {
  TensorDict out = forward(std::move(td));
  return filter_in_call_ ? drop_unselected(std::move(out)) : out;
}

TensorDict TensorDictModuleBase::operator()(TensorDict td, TensorDict out) {
  TensorDict result = forward(std::move(td), std::move(out));
  return filter_in_call_ ? drop_unselected(std::move(result)) : result;
}

std::vector<at::Tensor> TensorDictModuleBase::operator()(
    std::initializer_list<std::pair<NestedKey, at::Tensor>> inputs) {
  return dispatch(TensorInputs(inputs));
}

std::vector<at::Tensor> TensorDictModuleBase::dispatch(
    const TensorInputs& inputs) {
  TensorDict td;
  for (const auto& [key, tensor] : inputs) {
    TENSORDICT_CHECK_KEY(
        contains_key(in_keys_, key),
        name(),
        ": got the input ",
        key.to_string(),
        ", which is not one of its in_keys ",
        keys_to_string(in_keys_));
    td.set(key, tensor);
  }
  for (const NestedKey& key : in_keys_) {
    TENSORDICT_CHECK_KEY(
        td.contains(key),
        name(),
        ": the input ",
        key.to_string(),
        " is missing from the call; its in_keys are ",
        keys_to_string(in_keys_));
  }
  TensorDict out = (*this)(std::move(td));
  std::vector<at::Tensor> result;
  result.reserve(out_keys_.size());
  for (const NestedKey& key : out_keys_) {
    if (!nn_module_internal::is_discard(key)) {
      result.push_back(out.get(key));
    }
  }
  return result;
}

TensorDictModuleBase& TensorDictModuleBase::select_out_keys(
    const std::vector<NestedKey>& keys) {
  std::vector<NestedKey> missing;
  for (const NestedKey& key : keys) {
    if (!contains_key(out_keys_, key)) {
      missing.push_back(key);
    }
  }
  TORCH_CHECK_VALUE(
      missing.empty(),
      "Can't select non existent ",
      missing.size() == 1 ? "key: " + missing[0].to_string()
                          : "keys: " + keys_to_string(missing),
      ". The module out_keys are ",
      keys_to_string(out_keys_),
      ".");
  out_keys_ = keys;
  selected_ = true;
  filter_in_call_ = true;
  return *this;
}

TensorDictModuleBase& TensorDictModuleBase::reset_out_keys() {
  out_keys_ = out_keys_source_;
  selected_ = false;
  filter_in_call_ = false;
  return *this;
}

void TensorDictModuleBase::set_keys(
    std::vector<NestedKey> in_keys, std::vector<NestedKey> out_keys) {
  in_keys_ = std::move(in_keys);
  out_keys_source_ = std::move(out_keys);
  out_keys_ = out_keys_source_;
  selected_ = false;
  filter_in_call_ = false;
}

void TensorDictModuleBase::set_selected_out_keys(std::vector<NestedKey> keys) {
  out_keys_ = std::move(keys);
  selected_ = true;
  filter_in_call_ = false;
}

void TensorDictModuleBase::copy_keys_from(const TensorDictModuleBase& other) {
  in_keys_ = other.in_keys_;
  out_keys_source_ = other.out_keys_source_;
  out_keys_ = other.out_keys_;
  selected_ = other.selected_;
  filter_in_call_ = other.filter_in_call_;
  train(other.is_training());
}

// The outputs that were computed but not selected leave the dict, and so
// do the nested dicts that only held them; entries that are also inputs
// stay, since `out` may be the input dict.
TensorDict TensorDictModuleBase::drop_unselected(TensorDict out) const {
  for (const NestedKey& key : out_keys_source_) {
    if (contains_key(out_keys_, key) || contains_key(in_keys_, key) ||
        !out.contains(key)) {
      continue;
    }
    out.del_(key);
    for (size_t depth = key.size() - 1; depth > 0; --depth) {
      const NestedKey parent = key.prefix(depth);
      if (contains_key(out_keys_, parent) || contains_key(in_keys_, parent)) {
        break;
      }
      const Value* value = out.find(parent);
      if (value == nullptr || !value->is_tensordict() ||
          !value->tensordict().is_empty()) {
        break;
      }
      out.del_(parent);
    }
  }
  return out;
}

// --- TensorDictModule -------------------------------------------------------

namespace nn_module_internal {

// "1 tensor", "1 or 2 tensors", "0, 1 or 2 tensors".
std::string input_counts_to_string(uint32_t counts) {
  std::vector<size_t> accepted;
  for (size_t n = 0; n <= detail::kMaxModuleInputs; ++n) {
    if ((counts >> n) & 1u) {
      accepted.push_back(n);
    }
  }
  std::string text;
  for (size_t i = 0; i < accepted.size(); ++i) {
    if (i > 0) {
      text += i + 1 == accepted.size() ? " or " : ", ";
    }
    text += std::to_string(accepted[i]);
  }
  const bool plural = accepted.size() > 1 || accepted[0] != 1;
  return text + (plural ? " tensors" : " tensor");
}

}  // namespace nn_module_internal

void TensorDictModuleImpl::init(
    detail::TensorFunction function,
    uint32_t accepted_input_counts,
    std::vector<NestedKey> in_keys,
    std::vector<NestedKey> out_keys,
    TensorDictModuleOptions options) {
  function_ = std::move(function);
  options_ = std::move(options);
  set_keys(std::move(in_keys), std::move(out_keys));
  const size_t count = this->in_keys().size();
  TORCH_CHECK_VALUE(
      count <= detail::kMaxModuleInputs &&
          ((accepted_input_counts >> count) & 1u) != 0,
      describe(),
      ": in_keys has ",
      count,
      count == 1 ? " key " : " keys ",
      keys_to_string(this->in_keys()),
      ", but the module's forward takes ",
      nn_module_internal::input_counts_to_string(accepted_input_counts));
}

TensorDictModuleImpl::TensorDictModuleImpl(
    CloneTag /*unused*/,
    const TensorDictModuleImpl& other,
    const std::optional<c10::Device>& device)
    : TensorDictModuleBase("TensorDictModule"),
      rebind_(other.rebind_),
      options_(other.options_) {
  if (other.wrapped_ != nullptr) {
    try {
      wrapped_ = other.wrapped_->clone(device);
      function_ = rebind_(wrapped_);
    } catch (c10::Error& e) {
      TORCH_RETHROW(e, "while cloning ", other.describe());
    }
    register_module("module", wrapped_);
  } else {
    function_ = other.function_;
  }
  copy_keys_from(other);
}

std::shared_ptr<torch::nn::Module> TensorDictModuleImpl::clone(
    const std::optional<c10::Device>& device) const {
  // Not make_shared: the constructor is private.
  return std::shared_ptr<TensorDictModuleImpl>(
      new TensorDictModuleImpl(CloneTag{}, *this, device));
}

std::string TensorDictModuleImpl::describe() const {
  std::ostringstream text;
  text << "TensorDictModule(module=";
  if (wrapped_ != nullptr) {
    wrapped_->pretty_print(text);
  } else {
    text << "<callable>";
  }
  text << ", in_keys=" << keys_to_string(in_keys())
       << ", out_keys=" << keys_to_string(out_keys()) << ")";
  return text.str();
}

TensorDict TensorDictModuleImpl::forward(TensorDict td) {
  switch (options_.inplace()) {
    case InplaceMode::kTrue:
      break;
    case InplaceMode::kFalse:
      return forward(std::move(td), TensorDict());
    case InplaceMode::kEmpty: {
      TensorDict out = td.empty();
      return forward(std::move(td), std::move(out));
    }
  }
  TensorDict out = td;
  return forward(std::move(td), std::move(out));
}

TensorDict TensorDictModuleImpl::forward(TensorDict td, TensorDict out) {
  const std::vector<NestedKey>& in = in_keys();
  // On the stack (init checked the count): no heap list a call.
  c10::SmallVector<at::Tensor, detail::kMaxModuleInputs> inputs;
  std::vector<NestedKey> absent;
  for (const NestedKey& key : in) {
    const Value* value = td.find(key);
    if (value != nullptr && value->is_tensor()) {
      inputs.push_back(value->tensor());
      continue;
    }
    if (value == nullptr && !options_.strict()) {
      // Python's strict=False passes None.
      inputs.emplace_back();
      absent.push_back(key);
      continue;
    }
    TENSORDICT_CHECK_KEY(
        value != nullptr,
        describe(),
        ": the input ",
        key.to_string(),
        " is not in the dict, whose keys are ",
        keys_to_string(td.keys(/*include_nested=*/true)));
    inputs.push_back(td.get(key));
  }
  detail::TensorList outputs;
  try {
    outputs = function_(inputs);
  } catch (c10::Error& e) {
    if (absent.empty()) {
      throw;
    }
    // Python's error would not say it; a porter looking for why a module
    // fails on an undefined tensor needs it.
    TORCH_RETHROW(
        e,
        "while calling ",
        describe(),
        " with the absent ",
        absent.size() == 1 ? "input " : "inputs ",
        keys_to_string(absent),
        absent.size() == 1 ? " passed as an undefined tensor"
                           : " passed as undefined tensors",
        " (Python's None; strict(true) makes a missing input a KeyError)");
  }
  const std::vector<NestedKey>& keys = out_keys_source();
  TORCH_CHECK(
      outputs.size() == keys.size(),
      describe(),
      ": the module returned ",
      outputs.size(),
      outputs.size() == 1 ? " tensor" : " tensors",
      ", but there ",
      keys.size() == 1 ? "is " : "are ",
      keys.size(),
      keys.size() == 1 ? " out_key " : " out_keys ",
      keys_to_string(keys));
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!nn_module_internal::is_discard(keys[i])) {
      out.set(keys[i], outputs[i]);
    }
  }
  return out;
}

void TensorDictModuleImpl::pretty_print(std::ostream& stream) const {
  stream << "TensorDictModule(in_keys=" << keys_to_string(in_keys())
         << ", out_keys=" << keys_to_string(out_keys()) << ")";
}

}  // namespace nn
TENSORDICT_END_NAMESPACE
