// The interaction type, the distribution factory and the probabilistic
// modules of tensordict/probabilistic.h.

#include "tensordict/probabilistic.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nn/categorical_draw.h"
#include "nn/keys.h"
#include "nn/tanh_normal_draw.h"
#include "tensordict/errors.h"

TENSORDICT_BEGIN_NAMESPACE
namespace nn {

// --- Interaction type ------------------------------------------------------

namespace {
thread_local std::optional<InteractionType> current_interaction_type;
}  // namespace

const char* interaction_type_name(InteractionType type) {
  switch (type) {
    case InteractionType::kRandom:
      return "random";
    case InteractionType::kMode:
      return "mode";
    case InteractionType::kMean:
      return "mean";
    case InteractionType::kDeterministic:
      return "deterministic";
  }
  TORCH_INTERNAL_ASSERT(false, "unknown InteractionType");
}

InteractionType interaction_type_from_string(const std::string& name) {
  std::string lower = name;
  std::transform(
      lower.begin(), lower.end(), lower.begin(), [](unsigned char c) {
        return static_cast<char>(std::tolower(c));
      });
  for (InteractionType type :
       {InteractionType::kRandom,
        InteractionType::kMode,
        InteractionType::kMean,
        InteractionType::kDeterministic}) {
    if (lower == interaction_type_name(type)) {
      return type;
    }
  }
  // A throw the compiler sees as one: TORCH_CHECK_VALUE(false, ...) leaves
  // GCC's Debug builds (the sanitizer trees) warning of a missing return.
  C10_THROW_ERROR(
      ValueError,
      c10::str(
          "'",
          name,
          "' is not a valid InteractionType (expected one of 'random', "
          "'mode', 'mean', 'deterministic'; 'median' is not supported)"));
}

std::optional<InteractionType> interaction_type() noexcept {
  return current_interaction_type;
}

SetInteractionType::SetInteractionType(
    std::optional<InteractionType> type) noexcept
    : previous_(current_interaction_type) {
  current_interaction_type = type;
}

SetInteractionType::~SetInteractionType() {
  current_interaction_type = previous_;
}

// --- Factory ---------------------------------------------------------------

namespace {

enum class DistKind {
  kCategorical,
  kOneHotCategorical,
  kTorchOneHotCategorical,
  kNormal,
  kTanhNormal,
  kDelta,
};

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

DistKind dist_kind(const std::string& class_name) {
  const auto dot = class_name.rfind('.');
  const std::string bare =
      dot == std::string::npos ? class_name : class_name.substr(dot + 1);
  const std::string module =
      dot == std::string::npos ? std::string() : class_name.substr(0, dot);
  const bool from_torch = module == "torch.distributions" ||
                          starts_with(module, "torch.distributions.");
  const bool known_module =
      module.empty() || from_torch || module == "torchrl.modules" ||
      starts_with(module, "torchrl.modules.") || module == "tensordict.nn" ||
      starts_with(module, "tensordict.nn.");
  if (known_module) {
    if (bare == "Categorical" && (module.empty() || from_torch)) {
      return DistKind::kCategorical;
    }
    if (bare == "OneHotCategorical") {
      return from_torch ? DistKind::kTorchOneHotCategorical
                        : DistKind::kOneHotCategorical;
    }
    if (bare == "Normal" && (module.empty() || from_torch)) {
      return DistKind::kNormal;
    }
    if (bare == "TanhNormal" && !from_torch) {
      return DistKind::kTanhNormal;
    }
    if (bare == "Delta" && !from_torch) {
      return DistKind::kDelta;
    }
  }
  C10_THROW_ERROR(
      ValueError,
      c10::str(
          "unknown distribution class '",
          class_name,
          "': expected Categorical, OneHotCategorical, Normal "
          "(torch.distributions or TorchRL's), TanhNormal or Delta "
          "(TorchRL's)"));
}

// The arguments each distribution takes, as Python's constructor names them.
const std::set<std::string>& argument_names(DistKind kind) {
  static const std::set<std::string> categorical{
      "logits", "probs", "validate_args"};
  static const std::set<std::string> normal{"loc", "scale", "validate_args"};
  static const std::set<std::string> tanh_normal{
      "loc",
      "scale",
      "low",
      "high",
      "event_dims",
      "tanh_loc",
      "upscale",
      "safe_tanh"};
  static const std::set<std::string> delta{
      "param", "atol", "rtol", "batch_shape", "event_shape"};
  switch (kind) {
    case DistKind::kCategorical:
    case DistKind::kOneHotCategorical:
    case DistKind::kTorchOneHotCategorical:
      return categorical;
    case DistKind::kNormal:
      return normal;
    case DistKind::kTanhNormal:
      return tanh_normal;
    case DistKind::kDelta:
      return delta;
  }
  TORCH_INTERNAL_ASSERT(false, "unknown distribution kind");
}

void check_argument_name(
    DistKind kind, const std::string& class_name, const std::string& name) {
  TORCH_CHECK_VALUE(
      argument_names(kind).count(name) != 0,
      class_name,
      " got an unexpected keyword argument '",
      name,
      "'");
}

// The arguments of one distribution, consumed by name so that whatever is
// left over can be reported as unknown.
class Arguments {
 public:
  Arguments(
      std::string dist, const Json& kwargs, const DistributionTensors& tensors)
      : dist_(std::move(dist)), tensors_(tensors) {
    TORCH_CHECK_VALUE(
        kwargs.is_object() || kwargs.is_null(),
        dist_,
        ": the keyword arguments must be a JSON object, got ",
        kwargs.type_name());
    if (kwargs.is_object()) {
      for (const auto& [name, value] : kwargs.items()) {
        TORCH_CHECK_VALUE(
            tensors_.count(name) == 0,
            dist_,
            ": the argument '",
            name,
            "' is given both as a tensor and as a keyword");
        values_.emplace(name, value);
      }
    }
  }

  bool has(const std::string& name) const {
    return tensors_.count(name) != 0 || values_.count(name) != 0;
  }

  // A tensor argument, or a number made into a tensor of `like`'s dtype
  // and device (Python's `torch.as_tensor(number)`); undefined if absent.
  at::Tensor tensor(
      const std::string& name,
      c10::ScalarType number_dtype,
      c10::Device device) {
    used_.insert(name);
    if (auto it = tensors_.find(name); it != tensors_.end()) {
      TORCH_CHECK_VALUE(
          it->second.defined(),
          dist_,
          ": the tensor argument '",
          name,
          "' is not defined");
      return it->second;
    }
    if (auto it = values_.find(name); it != values_.end()) {
      TORCH_CHECK_VALUE(
          it->second.is_number(),
          dist_,
          ": the argument '",
          name,
          "' must be a tensor or a number, got ",
          it->second.type_name());
      return at::scalar_tensor(
          it->second.get<double>(),
          at::TensorOptions(number_dtype).device(device));
    }
    return {};
  }

  at::Tensor required_tensor(
      const std::string& name,
      c10::ScalarType number_dtype,
      c10::Device device) {
    at::Tensor t = tensor(name, number_dtype, device);
    TORCH_CHECK_VALUE(
        t.defined(), dist_, ": the argument '", name, "' is missing");
    return t;
  }

  std::optional<double> number(const std::string& name) {
    return scalar<double>(name, &Json::is_number, "a number");
  }

  std::optional<int64_t> integer(const std::string& name) {
    return scalar<int64_t>(name, &Json::is_number_integer, "an integer");
  }

  std::optional<bool> boolean(const std::string& name) {
    return scalar<bool>(name, &Json::is_boolean, "a boolean");
  }

  // The keyword argument `name` as a T, checked with `is_kind` (a JSON
  // type test); nullopt when it is missing or null.
  template <class T>
  std::optional<T> scalar(
      const std::string& name,
      bool (Json::*is_kind)() const noexcept,
      const char* kind) {
    const Json* value = json(name);
    if (value == nullptr || value->is_null()) {
      return std::nullopt;
    }
    TORCH_CHECK_VALUE(
        (value->*is_kind)(),
        dist_,
        ": the argument '",
        name,
        "' must be ",
        kind,
        ", got ",
        value->dump());
    return value->get<T>();
  }

  std::vector<int64_t> shape(const std::string& name) {
    const Json* value = json(name);
    std::vector<int64_t> out;
    if (value == nullptr || value->is_null()) {
      return out;
    }
    TORCH_CHECK_VALUE(
        value->is_array(),
        dist_,
        ": the argument '",
        name,
        "' must be a list of sizes, got ",
        value->dump());
    for (const auto& size : *value) {
      TORCH_CHECK_VALUE(
          size.is_number_integer() && size.get<int64_t>() >= 0,
          dist_,
          ": the argument '",
          name,
          "' must be a list of sizes, got ",
          value->dump());
      out.push_back(size.get<int64_t>());
    }
    return out;
  }

  // Throws for an argument no reader consumed.
  void check_all_used() const {
    const auto check = [&](const std::string& name) {
      TORCH_CHECK_VALUE(
          used_.count(name) != 0,
          dist_,
          " got an unexpected keyword argument '",
          name,
          "'");
    };
    for (const auto& entry : tensors_) {
      check(entry.first);
    }
    for (const auto& entry : values_) {
      check(entry.first);
    }
  }

 private:
  const Json* json(const std::string& name) {
    used_.insert(name);
    TORCH_CHECK_VALUE(
        tensors_.count(name) == 0,
        dist_,
        ": the argument '",
        name,
        "' must not be a tensor");
    auto it = values_.find(name);
    return it == values_.end() ? nullptr : &it->second;
  }

  std::string dist_;
  const DistributionTensors& tensors_;
  std::map<std::string, Json> values_;
  std::set<std::string> used_;
};

// Reads Categorical-like parameters: exactly one of logits and probs.
std::pair<at::Tensor, bool> categorical_params(
    Arguments& args, const std::string& dist) {
  const bool has_logits = args.has("logits");
  const bool has_probs = args.has("probs");
  TORCH_CHECK_VALUE(
      has_logits != has_probs,
      dist,
      ": either `probs` or `logits` must be specified, but not both");
  at::Tensor t = has_logits ? args.tensor("logits", at::kFloat, at::kCPU)
                            : args.tensor("probs", at::kFloat, at::kCPU);
  return {t, has_logits};
}

// TanhNormal's parameters and options, read from `args` (all used).
struct TanhNormalParams {
  at::Tensor loc;
  at::Tensor scale;
  TanhNormalOptions options;
};

TanhNormalParams tanh_normal_params(Arguments& args) {
  at::Tensor loc = args.required_tensor("loc", at::kFloat, at::kCPU);
  at::Tensor scale =
      args.required_tensor("scale", loc.scalar_type(), loc.device());
  TanhNormalOptions options;
  // TorchRL makes number bounds tensors of the default dtype.
  if (at::Tensor low = args.tensor("low", at::kFloat, loc.device());
      low.defined()) {
    options.low(low);
  }
  if (at::Tensor high = args.tensor("high", at::kFloat, loc.device());
      high.defined()) {
    options.high(high);
  }
  options.event_dims(args.integer("event_dims"));
  if (auto v = args.boolean("tanh_loc")) {
    options.tanh_loc(*v);
  }
  if (auto v = args.number("upscale")) {
    options.upscale(*v);
  }
  if (auto v = args.boolean("safe_tanh")) {
    options.safe_tanh(*v);
  }
  args.check_all_used();
  return {loc, scale, options};
}

}  // namespace

std::shared_ptr<Distribution> make_distribution(
    const std::string& class_name,
    const Json& kwargs,
    const DistributionTensors& tensors) {
  const DistKind kind = dist_kind(class_name);
  Arguments args(class_name, kwargs, tensors);
  if (argument_names(kind).count("validate_args") != 0) {
    // Always validated here; accepted so Python's kwargs pass through.
    args.boolean("validate_args");
  }
  std::shared_ptr<Distribution> dist;
  switch (kind) {
    case DistKind::kCategorical: {
      auto [param, is_logits] = categorical_params(args, class_name);
      args.check_all_used();
      dist = is_logits ? Categorical::from_logits(param)
                       : Categorical::from_probs(param);
      break;
    }
    case DistKind::kOneHotCategorical:
    case DistKind::kTorchOneHotCategorical: {
      auto [param, is_logits] = categorical_params(args, class_name);
      args.check_all_used();
      const bool torch_semantics = kind == DistKind::kTorchOneHotCategorical;
      dist = is_logits ? OneHotCategorical::from_logits(param, torch_semantics)
                       : OneHotCategorical::from_probs(param, torch_semantics);
      break;
    }
    case DistKind::kNormal: {
      at::Tensor loc = args.required_tensor("loc", at::kFloat, at::kCPU);
      at::Tensor scale =
          args.required_tensor("scale", loc.scalar_type(), loc.device());
      args.check_all_used();
      dist = std::make_shared<Normal>(loc, scale);
      break;
    }
    case DistKind::kTanhNormal: {
      TanhNormalParams params = tanh_normal_params(args);
      dist = std::make_shared<TanhNormal>(
          params.loc, params.scale, params.options);
      break;
    }
    case DistKind::kDelta: {
      at::Tensor param = args.required_tensor("param", at::kFloat, at::kCPU);
      const double atol = args.number("atol").value_or(1e-6);
      const double rtol = args.number("rtol").value_or(1e-6);
      auto batch_shape = args.shape("batch_shape");
      auto event_shape = args.shape("event_shape");
      args.check_all_used();
      dist = std::make_shared<Delta>(
          param, atol, rtol, std::move(batch_shape), std::move(event_shape));
      break;
    }
  }
  return dist;
}

// --- ProbabilisticTensorDictModule -----------------------------------------

ProbabilisticTensorDictModuleOptions::ProbabilisticTensorDictModuleOptions(
    std::string distribution_class)
    : distribution_class_(std::move(distribution_class)) {}

namespace {

NestedKey log_prob_key_for(const NestedKey& out_key) {
  // Python's `_add_suffix`: the suffix goes on the last part.
  std::vector<std::string> parts = out_key.to_vector();
  parts.back() += "_log_prob";
  return NestedKey(parts);
}

}  // namespace

ProbabilisticTensorDictModuleImpl::ProbabilisticTensorDictModuleImpl(
    std::vector<std::string> dist_keys,
    std::vector<NestedKey> in_keys,
    NestedKey out_key,
    ProbabilisticTensorDictModuleOptions options)
    : TensorDictModuleBase("ProbabilisticTensorDictModule"),
      dist_keys_(std::move(dist_keys)),
      log_prob_key_(options.log_prob_key().value_or(log_prob_key_for(out_key))),
      options_(std::move(options)) {
  TORCH_CHECK_VALUE(
      dist_keys_.size() == in_keys.size(),
      "ProbabilisticTensorDictModule: got ",
      dist_keys_.size(),
      " distribution argument names for ",
      in_keys.size(),
      " in_keys");
  TORCH_CHECK_VALUE(
      !in_keys.empty(), "ProbabilisticTensorDictModule: in_keys is empty");
  TORCH_CHECK_VALUE(
      out_key.size() > 0,
      "ProbabilisticTensorDictModule: the out_key is empty");
  // Fails early, at construction (or when a package loads), on an unknown
  // class or argument name, rather than at the first call.
  const DistKind kind = dist_kind(options_.distribution_class());
  kind_ = static_cast<int>(kind);
  try {
    kwargs_ =
        std::make_unique<Json>(Json::parse(options_.distribution_kwargs()));
  } catch (const nlohmann::json::exception& e) {
    TORCH_CHECK_VALUE(
        false,
        "ProbabilisticTensorDictModule: distribution_kwargs is not valid "
        "JSON: ",
        e.what());
  }
  TORCH_CHECK_VALUE(
      kwargs_->is_object(),
      "ProbabilisticTensorDictModule: distribution_kwargs must be a JSON "
      "object, got ",
      kwargs_->type_name());
  for (const auto& [name, value] : kwargs_->items()) {
    check_argument_name(kind, options_.distribution_class(), name);
  }
  for (const auto& [name, value] : options_.distribution_tensor_kwargs()) {
    check_argument_name(kind, options_.distribution_class(), name);
  }
  for (const auto& name : dist_keys_) {
    check_argument_name(kind, options_.distribution_class(), name);
    TORCH_CHECK_VALUE(
        !kwargs_->contains(name) &&
            options_.distribution_tensor_kwargs().count(name) == 0,
        "ProbabilisticTensorDictModule: the distribution argument '",
        name,
        "' is both read from a key and given as a keyword argument");
  }
  std::vector<NestedKey> out_keys{out_key};
  if (options_.return_log_prob()) {
    out_keys.push_back(log_prob_key_);
  }
  set_keys(std::move(in_keys), std::move(out_keys));
}

ProbabilisticTensorDictModuleImpl::ProbabilisticTensorDictModuleImpl(
    const std::vector<std::string>& in_keys,
    NestedKey out_key,
    ProbabilisticTensorDictModuleOptions options)
    : ProbabilisticTensorDictModuleImpl(
          in_keys,
          std::vector<NestedKey>(in_keys.begin(), in_keys.end()),
          std::move(out_key),
          std::move(options)) {}

ProbabilisticTensorDictModuleImpl::~ProbabilisticTensorDictModuleImpl() =
    default;

std::shared_ptr<torch::nn::Module> ProbabilisticTensorDictModuleImpl::clone(
    const std::optional<c10::Device>& device) const {
  ProbabilisticTensorDictModuleOptions options = options_;
  DistributionTensors tensors;
  for (const auto& [name, tensor] : options_.distribution_tensor_kwargs()) {
    tensors[name] =
        device ? tensor.to(*device, /*non_blocking=*/false, /*copy=*/true)
               : tensor.clone();
  }
  options.distribution_tensor_kwargs(std::move(tensors));
  // The sample key comes first in out_keys_source (the log-prob key, if
  // any, after it).
  auto copy = std::make_shared<ProbabilisticTensorDictModuleImpl>(
      dist_keys_, in_keys(), out_keys_source().front(), std::move(options));
  copy->copy_keys_from(*this);
  return copy;
}

namespace {

// The categorical kind of a head, if it is one.
std::optional<detail::CategoricalHead> categorical_head(DistKind kind) {
  switch (kind) {
    case DistKind::kCategorical:
      return detail::CategoricalHead::kCategorical;
    case DistKind::kOneHotCategorical:
      return detail::CategoricalHead::kOneHotCategorical;
    case DistKind::kTorchOneHotCategorical:
      return detail::CategoricalHead::kTorchOneHotCategorical;
    default:
      return std::nullopt;
  }
}

// The parameter of a categorical head on one tensor without keyword
// arguments (an actor's every step), found in `td`; null for any other head
// or a parameter `td` does not have.
const at::Tensor* categorical_param(
    const TensorDict& td,
    const std::vector<std::string>& dist_keys,
    const std::vector<NestedKey>& in_keys,
    bool has_kwargs,
    DistKind kind) {
  if (dist_keys.size() != 1 || in_keys.empty() || has_kwargs ||
      !categorical_head(kind) ||
      (dist_keys[0] != "logits" && dist_keys[0] != "probs")) {
    return nullptr;
  }
  const Value* found = td.find(in_keys[0]);
  return found != nullptr && found->is_tensor() && found->tensor().defined()
             ? &found->tensor()
             : nullptr;
}

// The distribution's tensor arguments: `base` (the module's tensor
// keyword arguments) and each of `dist_keys` read from its in-key in `td`.
DistributionTensors distribution_tensors(
    const TensorDict& td,
    const std::vector<std::string>& dist_keys,
    const std::vector<NestedKey>& in_keys,
    const DistributionTensors& base,
    const std::string& module_name) {
  DistributionTensors tensors = base;
  for (size_t i = 0; i < dist_keys.size(); ++i) {
    const NestedKey& key = in_keys[i];
    TENSORDICT_CHECK_KEY(
        td.contains(key),
        module_name,
        ": the distribution parameter '",
        dist_keys[i],
        "' is read from the key ",
        key.to_string(),
        ", which the input does not have");
    tensors[dist_keys[i]] = td.get(key);
  }
  return tensors;
}

}  // namespace

std::shared_ptr<Distribution> ProbabilisticTensorDictModuleImpl::get_dist(
    const TensorDict& td) const {
  // What make_distribution would do for a categorical head, without
  // building its argument tables.
  if (const at::Tensor* param = categorical_param(
          td,
          dist_keys_,
          in_keys(),
          !kwargs_->empty() || !options_.distribution_tensor_kwargs().empty(),
          static_cast<DistKind>(kind_))) {
    const auto kind = static_cast<DistKind>(kind_);
    const bool logits = dist_keys_[0] == "logits";
    if (kind == DistKind::kCategorical) {
      return logits ? Categorical::from_logits(*param)
                    : Categorical::from_probs(*param);
    }
    const bool torch_semantics = kind == DistKind::kTorchOneHotCategorical;
    return logits ? OneHotCategorical::from_logits(*param, torch_semantics)
                  : OneHotCategorical::from_probs(*param, torch_semantics);
  }
  return make_distribution(
      options_.distribution_class(),
      *kwargs_,
      distribution_tensors(
          td,
          dist_keys_,
          in_keys(),
          options_.distribution_tensor_kwargs(),
          name()));
}

at::Tensor ProbabilisticTensorDictModuleImpl::dist_sample(
    const Distribution& dist,
    std::optional<InteractionType> type,
    std::optional<at::Generator> generator) const {
  if (!type) {
    type = interaction_type();
  }
  const InteractionType chosen =
      type.value_or(options_.default_interaction_type());
  switch (chosen) {
    case InteractionType::kDeterministic:
      return dist.deterministic_sample();
    case InteractionType::kMode:
      return dist.mode();
    case InteractionType::kMean:
      try {
        return dist.mean();
      } catch (const c10::NotImplementedError&) {
        // Python estimates the mean from samples when there is no formula.
        const std::vector<int64_t> shape{options_.n_empirical_estimate()};
        at::Tensor samples = dist.has_rsample()
                                 ? dist.rsample(shape, std::move(generator))
                                 : dist.sample(shape, std::move(generator));
        return samples.mean(0);
      }
    case InteractionType::kRandom:
      return dist.has_rsample() ? dist.rsample({}, std::move(generator))
                                : dist.sample({}, std::move(generator));
  }
  TORCH_INTERNAL_ASSERT(false, "unknown InteractionType");
}

TensorDict ProbabilisticTensorDictModuleImpl::forward(
    TensorDict td, TensorDict out) {
  // A categorical head on logits drawing at random: the loops of its
  // distribution, without it (NOTE [A categorical head without its
  // distribution]).
  const InteractionType chosen =
      interaction_type().value_or(options_.default_interaction_type());
  const at::Tensor* param =
      chosen == InteractionType::kRandom
          ? categorical_param(
                td,
                dist_keys_,
                in_keys(),
                !kwargs_->empty() ||
                    !options_.distribution_tensor_kwargs().empty(),
                static_cast<DistKind>(kind_))
          : nullptr;
  if (param != nullptr && dist_keys_[0] == "logits") {
    std::optional<detail::CategoricalDraw> drawn = detail::draw_from_logits(
        *param,
        *categorical_head(static_cast<DistKind>(kind_)),
        options_.return_log_prob(),
        std::nullopt);
    if (drawn) {
      out.set(out_keys_source()[0], drawn->sample);
      if (options_.return_log_prob()) {
        out.set(log_prob_key_, drawn->log_prob);
      }
      return out;
    }
  }
  std::shared_ptr<Distribution> dist;
  if (chosen == InteractionType::kRandom &&
      static_cast<DistKind>(kind_) == DistKind::kTanhNormal) {
    // A TanhNormal head drawing at random: the loops of its distribution,
    // without it (NOTE [A TanhNormal head without its distribution]).
    const DistributionTensors tensors = distribution_tensors(
        td,
        dist_keys_,
        in_keys(),
        options_.distribution_tensor_kwargs(),
        name());
    Arguments args(options_.distribution_class(), *kwargs_, tensors);
    TanhNormalParams params = tanh_normal_params(args);
    std::optional<detail::TanhNormalDraw> drawn = detail::draw_tanh_normal(
        params.loc,
        params.scale,
        params.options,
        options_.return_log_prob(),
        std::nullopt);
    if (drawn) {
      out.set(out_keys_source()[0], drawn->sample);
      if (options_.return_log_prob()) {
        out.set(log_prob_key_, drawn->log_prob);
      }
      return out;
    }
    dist =
        std::make_shared<TanhNormal>(params.loc, params.scale, params.options);
  } else {
    dist = get_dist(td);
  }
  at::Tensor sample = dist_sample(*dist);
  out.set(out_keys_source()[0], sample);
  if (options_.return_log_prob()) {
    out.set(log_prob_key_, dist->log_prob(sample));
  }
  return out;
}

void ProbabilisticTensorDictModuleImpl::pretty_print(
    std::ostream& stream) const {
  stream << "ProbabilisticTensorDictModule(in_keys="
         << nn_module_internal::keys_to_string(in_keys())
         << ", out_keys=" << nn_module_internal::keys_to_string(out_keys())
         << ", distribution_class=" << options_.distribution_class()
         << ", default_interaction_type="
         << interaction_type_name(options_.default_interaction_type()) << ")";
}

// --- ProbabilisticTensorDictSequential -------------------------------------

namespace {

ProbabilisticTensorDictModuleImpl* last_probabilistic(
    const std::vector<AnyTensorDictModule>& modules) {
  TORCH_CHECK_VALUE(
      !modules.empty(), "ProbabilisticTensorDictSequential: no modules");
  auto* head = dynamic_cast<ProbabilisticTensorDictModuleImpl*>(
      modules.back().ptr().get());
  TORCH_CHECK_TYPE(
      head != nullptr,
      "The last module passed to ProbabilisticTensorDictSequential must be "
      "an instance of ProbabilisticTensorDictModule, got ",
      modules.back().is_empty() ? std::string("an empty holder")
                                : modules.back()->name());
  return head;
}

}  // namespace

ProbabilisticTensorDictSequentialImpl::ProbabilisticTensorDictSequentialImpl(
    std::vector<AnyTensorDictModule> modules,
    TensorDictSequentialOptions options)
    : TensorDictSequentialImpl(modules, std::move(options)),
      head_(last_probabilistic(modules)) {}

std::shared_ptr<torch::nn::Module> ProbabilisticTensorDictSequentialImpl::clone(
    const std::optional<c10::Device>& device) const {
  auto copy = std::make_shared<ProbabilisticTensorDictSequentialImpl>(
      clone_modules(device), current_options());
  copy->train(is_training());
  return copy;
}

std::shared_ptr<Distribution> ProbabilisticTensorDictSequentialImpl::get_dist(
    TensorDict td) {
  for (size_t i = 0; i + 1 < size(); ++i) {
    AnyTensorDictModule module = (*this)[static_cast<int64_t>(i)];
    td = module(td);
  }
  return head_->get_dist(td);
}

}  // namespace nn
TENSORDICT_END_NAMESPACE
