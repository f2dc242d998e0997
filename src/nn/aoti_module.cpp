// AOTIModule: an AOTInductor package run as a TensorDict module. See NOTE
// [Package contract] and NOTE [Untrusted packages] in tensordict/aoti.h.
// What a package says about itself is read by nn/aoti_package_meta.h; this
// file opens the loader, matches the package's inputs and runs the calls.

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nn/aoti_package_meta.h"
#include "nn/aoti_zip.h"
#include "nn/keys.h"
#include "tensordict/aoti.h"
#include "tensordict/errors.h"
#include "tensordict/probabilistic.h"

TENSORDICT_BEGIN_NAMESPACE
namespace nn {
namespace {

// The package's spec, read by nn/aoti_package_meta.h (nn.h has an
// nn::detail too).
namespace aoti = ::tensordict::detail;

using aoti::AotiDimCheck;
using aoti::AotiInput;
using aoti::AotiInputCheck;
using aoti::AotiWeightSpec;
using nn_module_internal::keys_to_string;

std::string shape_string(c10::IntArrayRef shape) {
  return c10::str(shape);
}

// The sizes an input check takes, as "[2..64, 5]".
std::string checked_shape_string(const AotiInputCheck& check) {
  std::vector<std::string> dims;
  for (const AotiDimCheck& dim : check.sizes) {
    if (dim.size) {
      dims.push_back(std::to_string(*dim.size));
    } else {
      dims.push_back(c10::str(
          dim.min.value_or(0),
          "..",
          dim.max ? std::to_string(*dim.max) : std::string("inf")));
    }
  }
  return "[" + c10::Join(", ", dims) + "]";
}

// Static strides, "?" for a symbolic one.
std::string strides_string(const std::vector<std::optional<int64_t>>& strides) {
  std::vector<std::string> parts;
  for (const auto& stride : strides) {
    parts.push_back(stride ? std::to_string(*stride) : std::string("?"));
  }
  return "[" + c10::Join(", ", parts) + "]";
}

bool size_fits(const AotiDimCheck& dim, int64_t size) {
  return (!dim.size || size == *dim.size) && (!dim.min || size >= *dim.min) &&
         (!dim.max || size <= *dim.max);
}

// True if `strides` lay out `sizes` densely, without overlap: a
// permutation of a contiguous layout (size-1 dims aside).
bool dense_strides(
    c10::IntArrayRef sizes,
    const std::vector<std::optional<int64_t>>& strides) {
  std::vector<size_t> order;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!strides[d] || *strides[d] < 0) {
      return false;
    }
    if (sizes[d] != 1) {
      order.push_back(d);
    }
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return *strides[a] < *strides[b];
  });
  int64_t expected = 1;
  for (size_t d : order) {
    if (*strides[d] != expected) {
      return false;
    }
    expected *= sizes[d];
  }
  return true;
}

// The instruction sets a CPU package was compiled for, which this CPU must
// have: running it otherwise dies on an illegal instruction.
void check_cpu_isa(const std::string& isa, const std::string& path) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  const bool needs_avx512 = isa.find("AVX512") != std::string::npos;
  const bool needs_avx2 = isa.find("AVX2") != std::string::npos;
  TORCH_CHECK(
      !needs_avx512 || __builtin_cpu_supports("avx512f"),
      "AOTI package '",
      path,
      "' was compiled for a CPU with ",
      isa,
      ", which this CPU lacks; export it again on (or for) this machine");
  TORCH_CHECK(
      !needs_avx2 || __builtin_cpu_supports("avx2"),
      "AOTI package '",
      path,
      "' was compiled for a CPU with ",
      isa,
      ", which this CPU lacks; export it again on (or for) this machine");
#else
  (void)isa;
  (void)path;
#endif
}

}  // namespace

struct AOTIModuleImpl::State {
  std::string path;
  std::string where;  // "AOTIModule 'path'": the start of every message
  AOTIModuleOptions options;
  // The keys the caller gave, which a clone gives again.
  std::optional<std::vector<NestedKey>> given_in_keys;
  std::optional<std::vector<NestedKey>> given_out_keys;
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader;
  std::unordered_map<std::string, std::string> metadata;
  std::vector<AotiInput> inputs;  // in the package's order
  std::vector<std::string> input_names;
  c10::Device device = c10::kCPU;
  // From tensordict.spec: batch sizes with -1 for the dynamic dim.
  bool has_spec = false;
  std::vector<int64_t> batch_size;
  int64_t batch_min = 0;
  std::optional<int64_t> batch_max;
  std::string weights_prefix;
  std::map<std::string, std::string> weight_fqns;  // name -> package fqn
  std::map<std::string, AotiWeightSpec> weights;
  std::atomic<bool> weights_ready{false};
  std::mutex swap_mutex;  // one load_weights at a time
  // What the package returns, in order; the module's out_keys add the
  // head's sample and log-prob keys.
  std::vector<NestedKey> package_outputs;
  // The distribution of a format-2 package; null otherwise.
  std::shared_ptr<ProbabilisticTensorDictModuleImpl> head;

  // Throws unless there are weights to run with: a package compiled with
  // package_constants_in_so=False has none until load_weights.
  void check_weights_ready() const {
    TORCH_CHECK(
        weights_ready.load(std::memory_order_acquire),
        where,
        ": the package holds no weights (compiled with "
        "package_constants_in_so=False); call load_weights first");
  }
};

AOTIModuleImpl::AOTIModuleImpl(
    const std::string& path, const AOTIModuleOptions& options)
    : TensorDictModuleBase("AOTIModule"), state_(std::make_unique<State>()) {
  state_->path = path;
  init(std::nullopt, std::nullopt, options);
}

AOTIModuleImpl::AOTIModuleImpl(
    const std::string& path,
    std::vector<NestedKey> in_keys,
    std::vector<NestedKey> out_keys,
    const AOTIModuleOptions& options)
    : TensorDictModuleBase("AOTIModule"), state_(std::make_unique<State>()) {
  state_->path = path;
  init(std::move(in_keys), std::move(out_keys), options);
}

AOTIModuleImpl::~AOTIModuleImpl() = default;

void AOTIModuleImpl::init(
    std::optional<std::vector<NestedKey>> in_keys,
    std::optional<std::vector<NestedKey>> out_keys,
    const AOTIModuleOptions& options) {
  State& s = *state_;
  const std::string& path = s.path;
  s.where = c10::str("AOTIModule '", path, "'");
  s.options = options;
  s.given_in_keys = in_keys;
  s.given_out_keys = out_keys;

  // Everything is checked before libtorch extracts the archive and opens
  // the library inside (see NOTE [Untrusted packages]).
  aoti::AotiPackageSpec spec = aoti::read_package_spec(
      aoti::read_package_file(path, options.model_name()),
      path,
      std::move(in_keys),
      std::move(out_keys));
  if (spec.device_type == c10::kCPU) {
    s.device = c10::Device(c10::kCPU);
    check_cpu_isa(spec.cpu_isa, path);
  } else {
    TORCH_CHECK(
        at::hasCUDA(),
        "AOTI package '",
        path,
        "' was compiled for cuda, but this process has no CUDA device");
    s.device = c10::Device(
        c10::kCUDA,
        options.device_index() < 0 ? c10::DeviceIndex(0)
                                   : options.device_index());
  }
  s.has_spec = spec.has_spec;
  s.batch_size = spec.batch_size;
  s.batch_min = spec.batch_min;
  s.batch_max = spec.batch_max;
  s.weights_prefix = spec.weights_prefix;
  s.weights = spec.weights;
  s.package_outputs = spec.package_outputs;
  s.head = spec.head;

  try {
    s.loader = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
        path,
        options.model_name(),
        /*run_single_threaded=*/false,
        std::max<size_t>(options.num_runners(), 1),
        options.device_index());
  } catch (const std::exception& e) {
    TORCH_CHECK(false, s.where, ": libtorch cannot load it: ", e.what());
  }
  s.metadata = s.loader->get_metadata();
  // What was checked must be what libtorch read (the file may have been
  // replaced in between).
  for (const auto& [name, value] : spec.metadata) {
    const auto it = s.metadata.find(name);
    TORCH_CHECK(
        it != s.metadata.end() && it->second == value,
        s.where,
        ": libtorch read other metadata than was checked (entry '",
        name,
        "'); was the file replaced while it loaded?");
  }

  const std::vector<std::string> call_spec = s.loader->get_call_spec();
  TORCH_CHECK(
      call_spec.size() == 2,
      s.where,
      ": the call spec has ",
      call_spec.size(),
      " parts, expected 2 (inputs and outputs)");
  s.input_names = aoti::parse_input_names(call_spec[0], path);
  const size_t outputs = aoti::parse_output_count(call_spec[1], path);
  TORCH_CHECK_VALUE(
      outputs == s.package_outputs.size(),
      s.where,
      ": the package returns ",
      outputs,
      " tensors, but there are ",
      s.package_outputs.size(),
      " out_keys ",
      keys_to_string(s.package_outputs));
  s.inputs = aoti::match_inputs(spec, s.input_names, s.where);
  check_inputs_agree();
  std::vector<NestedKey> outs = spec.out_keys;
  set_keys(std::move(spec.in_keys), std::move(outs));

  init_weights(spec.weights_in_package);
}

// The compiled input checks against the package's device and its
// tensordict.spec, for what both state.
void AOTIModuleImpl::check_inputs_agree() {
  State& s = *state_;
  const size_t batch_dims = s.batch_size.size();
  for (AotiInput& input : s.inputs) {
    if (!s.has_spec) {
      input.device = s.device;
    }
    if (!input.check) {
      continue;
    }
    const AotiInputCheck& check = *input.check;
    TORCH_CHECK(
        !check.device_type || *check.device_type == s.device.type(),
        s.where,
        ": the input checks of its wrapper source take the input ",
        input.key.to_string(),
        " on ",
        c10::DeviceTypeName(check.device_type.value_or(c10::kCPU)),
        ", but the package runs on ",
        s.device.type());
    if (s.has_spec) {
      // Both describe the input: they must agree on what they both state.
      bool agree = check.sizes.size() == batch_dims + input.shape->size() &&
                   (!check.dtype || *check.dtype == *input.dtype);
      for (size_t d = 0; agree && d < input.shape->size(); ++d) {
        agree = size_fits(check.sizes[batch_dims + d], (*input.shape)[d]);
      }
      TORCH_CHECK(
          agree,
          s.where,
          ": tensordict.spec and the input checks of its wrapper source "
          "disagree on the input ",
          input.key.to_string(),
          ": [*batch, ",
          shape_string(*input.shape).substr(1),
          " with ",
          batch_dims,
          " batch dims against ",
          checked_shape_string(check));
    }
  }
}

// The weights' names, shapes and whether the package holds them.
void AOTIModuleImpl::init_weights(bool weights_in_package) {
  State& s = *state_;
  // Weights, named as TensorDict::from_module names them.
  for (const std::string& fqn : s.loader->get_constant_fqns()) {
    std::string name = fqn;
    if (!s.weights_prefix.empty() &&
        name.compare(0, s.weights_prefix.size(), s.weights_prefix) == 0) {
      name = name.substr(s.weights_prefix.size());
    }
    s.weight_fqns.emplace(name, fqn);
  }
  // The weights in use: none when the package was compiled without them
  // (package_constants_in_so=False), whatever its metadata says, since a
  // call would then read null constants. Their shapes check load_weights.
  {
    const auto* runner = s.loader->get_runner();
    const auto names = runner->getConstantNamesToOriginalFQNs();
    std::set<std::string> present;
    for (const auto& [constant, tensor] :
         runner->extract_constants_map(/*use_inactive=*/false)) {
      if (!tensor.defined()) {
        continue;
      }
      // Keyed by the original name; internal names are mapped just in case.
      const auto internal = names.find(constant);
      const std::string& fqn =
          internal == names.end() ? constant : internal->second;
      present.insert(fqn);
      for (const auto& [name, full] : s.weight_fqns) {
        if (full == fqn && s.weights.count(name) == 0) {
          s.weights[name] = AotiWeightSpec{
              tensor.scalar_type(),
              std::vector<int64_t>(
                  tensor.sizes().begin(), tensor.sizes().end())};
        }
      }
    }
    bool all_present = true;
    for (const auto& [name, fqn] : s.weight_fqns) {
      all_present = all_present && present.count(fqn) == 1;
    }
    weights_in_package = weights_in_package && all_present;
  }
  // Without shapes from the spec or the weights in use, the dtypes at least.
  const auto* runner = s.loader->get_runner();
  const auto fqns = runner->getConstantNamesToOriginalFQNs();
  for (const auto& [internal, dtype] : runner->getConstantNamesToDtypes()) {
    const auto fqn = fqns.find(internal);
    if (fqn == fqns.end()) {
      continue;
    }
    for (const auto& [name, full] : s.weight_fqns) {
      if (full == fqn->second && s.weights.count(name) == 0 && dtype >= 0 &&
          dtype < static_cast<int32_t>(c10::ScalarType::NumOptions)) {
        s.weights[name] =
            AotiWeightSpec{static_cast<c10::ScalarType>(dtype), std::nullopt};
      }
    }
  }
  s.weights_ready = weights_in_package;
}

TensorDict AOTIModuleImpl::forward(TensorDict td, TensorDict out) {
  State& s = *state_;
  s.check_weights_ready();
  const size_t batch_dims = s.batch_size.size();
  std::vector<at::Tensor> inputs;
  inputs.reserve(s.inputs.size());
  std::vector<int64_t> batch;  // the first input's batch dims
  const NestedKey* batch_key = nullptr;
  for (const AotiInput& spec : s.inputs) {
    const Value* value = td.find(spec.key);
    TENSORDICT_CHECK_KEY(
        value != nullptr,
        s.where,
        ": the input ",
        spec.key.to_string(),
        " is missing from the dict; its in_keys are ",
        keys_to_string(in_keys()));
    TORCH_CHECK_TYPE(
        value->is_tensor(),
        s.where,
        ": the input ",
        spec.key.to_string(),
        " must be a tensor");
    const at::Tensor& tensor = value->tensor();
    std::optional<c10::ScalarType> dtype = spec.dtype;
    if (!dtype && spec.check) {
      dtype = spec.check->dtype;
    }
    TORCH_CHECK_TYPE(
        !dtype || tensor.scalar_type() == *dtype,
        s.where,
        ": the input ",
        spec.key.to_string(),
        " has dtype ",
        tensor.scalar_type(),
        ", but the package takes ",
        dtype.value_or(tensor.scalar_type()));
    TORCH_CHECK_VALUE(
        !spec.device || tensor.device() == *spec.device,
        s.where,
        ": the input ",
        spec.key.to_string(),
        " is on ",
        tensor.device(),
        ", but the package takes it on ",
        spec.device.value_or(tensor.device()));
    if (spec.shape) {
      const c10::IntArrayRef sizes = tensor.sizes();
      const bool trailing_ok =
          sizes.size() == batch_dims + spec.shape->size() &&
          std::equal(
              spec.shape->begin(),
              spec.shape->end(),
              sizes.begin() + static_cast<ptrdiff_t>(batch_dims));
      TORCH_CHECK_VALUE(
          trailing_ok,
          s.where,
          ": the input ",
          spec.key.to_string(),
          " has shape ",
          shape_string(sizes),
          ", but the package takes [*batch, ",
          shape_string(*spec.shape).substr(1),
          " with ",
          batch_dims,
          " batch dims");
      const c10::IntArrayRef leading = sizes.slice(0, batch_dims);
      if (batch_key == nullptr) {
        for (size_t d = 0; d < batch_dims; ++d) {
          const int64_t want = s.batch_size[d];
          const bool ok =
              want >= 0 ? leading[d] == want
                        : leading[d] >= s.batch_min &&
                              (!s.batch_max || leading[d] <= *s.batch_max);
          TORCH_CHECK_VALUE(
              ok,
              s.where,
              ": the input ",
              spec.key.to_string(),
              " has batch size ",
              shape_string(leading),
              ", but the package takes ",
              shape_string(s.batch_size),
              want >= 0 ? std::string()
                        : c10::str(
                              " with dim ",
                              d,
                              " in [",
                              s.batch_min,
                              ", ",
                              s.batch_max ? std::to_string(*s.batch_max)
                                          : std::string("inf"),
                              "]"));
        }
        batch.assign(leading.begin(), leading.end());
        batch_key = &spec.key;
      } else {
        TORCH_CHECK_VALUE(
            leading.equals(batch),
            s.where,
            ": the input ",
            spec.key.to_string(),
            " has batch size ",
            shape_string(leading),
            ", but the input ",
            batch_key->to_string(),
            " has ",
            shape_string(batch));
      }
    } else if (spec.check) {
      // No tensordict.spec: the sizes the package's own checks take.
      const AotiInputCheck& check = *spec.check;
      const c10::IntArrayRef sizes = tensor.sizes();
      bool fits = sizes.size() == check.sizes.size();
      for (size_t d = 0; fits && d < sizes.size(); ++d) {
        fits = size_fits(check.sizes[d], sizes[d]);
      }
      TORCH_CHECK_VALUE(
          fits,
          s.where,
          ": the input ",
          spec.key.to_string(),
          " has shape ",
          shape_string(sizes),
          ", but the package takes ",
          checked_shape_string(check),
          " (the input checks compiled into it)");
    }
    // The package reads its inputs with the strides it was compiled for:
    // contiguous ones, unless its checks say otherwise.
    at::Tensor input = tensor.contiguous();
    if (spec.check) {
      const std::vector<std::optional<int64_t>>& strides = spec.check->strides;
      bool match = true;
      for (size_t d = 0; match && d < strides.size(); ++d) {
        match =
            !strides[d] || input.stride(static_cast<int64_t>(d)) == *strides[d];
      }
      if (!match) {
        TORCH_CHECK_VALUE(
            dense_strides(input.sizes(), strides),
            s.where,
            ": the input ",
            spec.key.to_string(),
            " of shape ",
            shape_string(input.sizes()),
            " has strides ",
            shape_string(input.strides()),
            " once contiguous, but the package reads it with strides ",
            strides_string(strides),
            ", which this module cannot lay it out in");
        std::vector<int64_t> layout;
        for (const auto& stride : strides) {
          layout.push_back(*stride);
        }
        at::Tensor laid_out =
            at::empty_strided(input.sizes(), layout, input.options());
        laid_out.copy_(input);
        input = std::move(laid_out);
      }
    }
    inputs.push_back(std::move(input));
  }
  std::vector<at::Tensor> outputs = s.loader->run(inputs);
  const std::vector<NestedKey>& keys = s.package_outputs;
  TORCH_CHECK(
      outputs.size() == keys.size(),
      s.where,
      ": the package returned ",
      outputs.size(),
      " tensors for ",
      keys.size(),
      " out_keys");
  for (size_t i = 0; i < keys.size(); ++i) {
    out.set(keys[i], std::move(outputs[i]));
  }
  if (s.head) {
    // The head reads its parameters from what the package just wrote.
    s.head->forward(out, out);
  }
  return out;
}

std::shared_ptr<ProbabilisticTensorDictModuleImpl>
AOTIModuleImpl::probabilistic_head() const noexcept {
  return state_->head;
}

std::shared_ptr<torch::nn::Module> AOTIModuleImpl::clone(
    const std::optional<c10::Device>& device) const {
  State& s = *state_;
  TORCH_CHECK(
      !device || *device == s.device,
      s.where,
      ": cannot clone it to ",
      device.value_or(s.device),
      ": a package runs on the device it was compiled for, ",
      s.device,
      "; export the model again for that device");
  auto copy = s.given_in_keys
                  ? std::make_shared<AOTIModuleImpl>(
                        s.path, *s.given_in_keys, *s.given_out_keys, s.options)
                  : std::make_shared<AOTIModuleImpl>(s.path, s.options);
  TORCH_CHECK(
      copy->state_->metadata == s.metadata,
      s.where,
      ": the package file changed since it was loaded; a clone would run "
      "another model");
  // The weights in use, read under the lock that load_weights swaps them
  // under, so the copy gets one set, not a mix.
  std::lock_guard<std::mutex> lock(s.swap_mutex);
  if (s.weights_ready.load(std::memory_order_acquire) &&
      !s.weight_fqns.empty()) {
    const auto* runner = s.loader->get_runner();
    const auto internal = runner->getConstantNamesToOriginalFQNs();
    std::unordered_map<std::string, at::Tensor> constants;
    for (const auto& [constant, tensor] :
         runner->extract_constants_map(/*use_inactive=*/false)) {
      // Keyed by the original name; internal names are mapped just in case.
      const auto fqn = internal.find(constant);
      constants.emplace(fqn == internal.end() ? constant : fqn->second, tensor);
    }
    TensorDict weights;
    for (const auto& [name, fqn] : s.weight_fqns) {
      const auto it = constants.find(fqn);
      TORCH_CHECK(
          it != constants.end() && it->second.defined(),
          s.where,
          ": the weight '",
          name,
          "' in use cannot be read back to clone it");
      weights.set(name, it->second);
    }
    copy->load_weights(weights);
  }
  copy->copy_keys_from(*this);
  return copy;
}

std::vector<at::Tensor> AOTIModuleImpl::run(
    const std::vector<at::Tensor>& inputs) {
  State& s = *state_;
  s.check_weights_ready();
  return s.loader->run(inputs);
}

void AOTIModuleImpl::load_weights(const TensorDict& weights) {
  State& s = *state_;
  const TensorDict flat = weights.flatten_keys(".");
  std::unordered_map<std::string, at::Tensor> constants;
  for (const NestedKey& key : flat.keys(
           /*include_nested=*/false, /*leaves_only=*/true)) {
    const std::string name(key[0]);
    const auto fqn = s.weight_fqns.find(name);
    TENSORDICT_CHECK_KEY(
        fqn != s.weight_fqns.end(),
        s.where,
        ": '",
        name,
        "' is not a weight of the package; its weights are ",
        c10::Join(", ", weight_names()),
        " (small constants are inlined unless exported with "
        "always_keep_tensor_constants=True, as tensordict_cpp.export does)");
    const Value* value = flat.find(key);
    TORCH_CHECK_TYPE(
        value->is_tensor(), s.where, ": the weight '", name, "' is no tensor");
    const at::Tensor& tensor = value->tensor();
    const auto spec = s.weights.find(name);
    if (spec != s.weights.end()) {
      TORCH_CHECK_TYPE(
          !spec->second.dtype || tensor.scalar_type() == *spec->second.dtype,
          s.where,
          ": the weight '",
          name,
          "' has dtype ",
          tensor.scalar_type(),
          ", but the package's is ",
          spec->second.dtype.value_or(tensor.scalar_type()));
      TORCH_CHECK_VALUE(
          !spec->second.shape || tensor.sizes().equals(*spec->second.shape),
          s.where,
          ": the weight '",
          name,
          "' has shape ",
          shape_string(tensor.sizes()),
          ", but the package's is ",
          shape_string(spec->second.shape.value_or(std::vector<int64_t>{})));
    }
    TORCH_CHECK(
        spec != s.weights.end() && spec->second.shape,
        s.where,
        ": the shape of the weight '",
        name,
        "' is unknown (a package without tensordict.spec whose weights are "
        "outside it), and a wrong one would be read out of bounds; export "
        "the model with tensordict_cpp.export");
    // A tensor owning exactly its data: the package copies the whole
    // storage of what it is given, with its strides and offset, so a view
    // into a larger storage (a slice, a consolidated dict) would overrun.
    constants.emplace(
        fqn->second,
        tensor.detach().to(s.device).clone(at::MemoryFormat::Contiguous));
  }
  for (const auto& [name, fqn] : s.weight_fqns) {
    TENSORDICT_CHECK_KEY(
        constants.count(fqn) == 1,
        s.where,
        ": the weight '",
        name,
        "' is missing from the dict; load_weights replaces all of them");
  }
  std::lock_guard<std::mutex> lock(s.swap_mutex);
  // The inactive buffer is idle: calls use the active one, and the swap
  // waits for the calls in flight (the package's exclusive lock).
  s.loader->load_constants(
      constants,
      /*use_inactive=*/true,
      /*check_full_update=*/true);
  auto* runner = s.loader->get_runner();
  runner->swap_constant_buffer();
  runner->free_inactive_constant_buffer();
  s.weights_ready.store(true, std::memory_order_release);
}

TensorDict AOTIModuleImpl::weights_layout() const {
  const State& s = *state_;
  TensorDict layout;
  for (const auto& [name, fqn] : s.weight_fqns) {
    const auto spec = s.weights.find(name);
    TORCH_CHECK(
        spec != s.weights.end() && spec->second.shape && spec->second.dtype,
        s.where,
        ": the shape of the weight '",
        name,
        "' is unknown (a package without tensordict.spec whose weights are "
        "outside it), so no weights can be loaded into it; export the model "
        "with tensordict_cpp.export");
    std::vector<std::string> parts;
    size_t begin = 0;
    for (size_t dot = name.find('.'); dot != std::string::npos;
         dot = name.find('.', begin)) {
      parts.push_back(name.substr(begin, dot - begin));
      begin = dot + 1;
    }
    parts.push_back(name.substr(begin));
    layout.set(
        NestedKey(parts),
        at::empty(
            *spec->second.shape,
            at::TensorOptions().dtype(*spec->second.dtype).device(at::kMeta)));
  }
  return layout;
}

std::vector<std::string> AOTIModuleImpl::weight_names() const {
  std::vector<std::string> names;
  for (const auto& [name, fqn] : state_->weight_fqns) {
    names.push_back(name);
  }
  return names;
}

const std::vector<std::string>& AOTIModuleImpl::input_names() const noexcept {
  return state_->input_names;
}

const std::unordered_map<std::string, std::string>& AOTIModuleImpl::metadata()
    const noexcept {
  return state_->metadata;
}

c10::Device AOTIModuleImpl::device() const noexcept {
  return state_->device;
}

std::optional<std::pair<int64_t, std::optional<int64_t>>>
AOTIModuleImpl::batch_range() const {
  const State& s = *state_;
  if (s.batch_size.empty() || s.batch_size[0] >= 0) {
    return std::nullopt;
  }
  return std::make_pair(s.batch_min, s.batch_max);
}

const std::string& AOTIModuleImpl::path() const noexcept {
  return state_->path;
}

}  // namespace nn
TENSORDICT_END_NAMESPACE
