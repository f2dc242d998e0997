// AOTIModule: an AOTInductor package run as a TensorDict module. See NOTE
// [Package contract] and NOTE [Untrusted packages] in tensordict/aoti.h.

#include <c10/util/Exception.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/walk.h"
#include "io/format.h"
#include "io/metadata_reader.h"
#include "nn/aoti_zip.h"
#include "nn/keys.h"
#include "tensordict/aoti.h"
#include "tensordict/errors.h"
#include "tensordict/json.h"
#include "tensordict/probabilistic.h"

TENSORDICT_BEGIN_NAMESPACE
namespace nn {
namespace aoti_internal {

// The metadata formats this build reads: "1" (tensordict_cpp.METADATA_FORMAT)
// and "2" (METADATA_FORMAT_PROBABILISTIC: format 1 plus
// tensordict.probabilistic, which a build reading only format 1 must refuse
// rather than run the package without its distribution).
constexpr const char* kFormat = "1";
constexpr const char* kFormatProbabilistic = "2";
// The most entries of a tensor keyword argument (bounds are per action dim).
constexpr int64_t kMaxKwargNumel = int64_t{1} << 16;
// Metadata JSON is small and flat; deeper nesting is hostile.
constexpr int64_t kMaxJsonDepth = 16;

struct InputSpec {
  explicit InputSpec(NestedKey key_) : key(std::move(key_)) {}
  NestedKey key;
  std::string name;
  // From tensordict.spec; unset for packages without it.
  std::optional<c10::ScalarType> dtype;
  std::optional<std::vector<int64_t>> shape;
  std::optional<c10::Device> device;
};

struct WeightSpec {
  std::optional<c10::ScalarType> dtype;
  std::optional<std::vector<int64_t>> shape;
};

std::string join_key(const NestedKey& key) {
  std::string name;
  for (size_t i = 0; i < key.size(); ++i) {
    if (i > 0) {
      name += '_';
    }
    name += key[i];
  }
  return name;
}

std::string shape_string(c10::IntArrayRef shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) {
      text += ", ";
    }
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

// Parses one metadata value, which may be any JSON (the reader only takes
// objects, so the value is wrapped in one).
Json parse_value(const std::string& text, const std::string& what) {
  return ::tensordict::detail::parse_meta_json(
             "{\"v\": " + text + "\n}", kMaxJsonDepth, what)
      .at("v");
}

// A key list: items are strings or non-empty lists of strings.
std::vector<NestedKey> parse_keys(
    const std::string& text, const std::string& path, const char* entry) {
  const std::string what =
      c10::str("AOTI package '", path, "' metadata '", entry, "'");
  const Json value = parse_value(text, what);
  TORCH_CHECK(
      value.is_array() && !value.empty(),
      what,
      " must be a non-empty JSON list of keys, found ",
      text);
  std::vector<NestedKey> keys;
  for (const Json& item : value) {
    if (item.is_string()) {
      keys.emplace_back(item.get<std::string>());
      continue;
    }
    TORCH_CHECK(
        item.is_array() && !item.empty(),
        what,
        ": a key must be a string or a non-empty list of strings, found ",
        item.dump());
    std::vector<std::string> parts;
    for (const Json& part : item) {
      TORCH_CHECK(
          part.is_string() && !part.get<std::string>().empty(),
          what,
          ": a key must be a string or a non-empty list of strings, found ",
          item.dump());
      parts.push_back(part.get<std::string>());
    }
    keys.emplace_back(parts);
  }
  return keys;
}

// The keyword names of a call spec's inputs: `[1, {tuple: [(), {dict}]}]`,
// the form torch.export gives `f(**kwargs)`.
std::vector<std::string> parse_input_names(
    const std::string& text, const std::string& path) {
  const std::string what = c10::str("AOTI package '", path, "' call spec");
  const Json spec = parse_value(text, what);
  const auto fail = [&](const char* problem) {
    TORCH_CHECK(
        false,
        what,
        ": ",
        problem,
        "; AOTIModule runs packages whose inputs are keyword tensors, one per "
        "in_key (found ",
        text.substr(0, 400),
        ")");
  };
  if (!spec.is_array() || spec.size() != 2 || !spec[1].is_object()) {
    fail("not a [version, tree] pair");
  }
  const Json& root = spec[1];
  const auto children = [&](const Json& node) -> const Json& {
    const auto it = node.find("children_spec");
    if (it == node.end() || !it->is_array()) {
      fail("a node has no children list");
    }
    return *it;
  };
  const auto type_is = [](const Json& node, const char* type) {
    const auto it = node.find("type");
    return it != node.end() && it->is_string() && *it == type;
  };
  if (!type_is(root, "builtins.tuple") || children(root).size() != 2) {
    fail("the inputs are not an (args, kwargs) pair");
  }
  const Json& args = children(root)[0];
  const Json& kwargs = children(root)[1];
  if (!args.is_object() || !children(args).empty()) {
    fail("the package takes positional inputs");
  }
  if (!kwargs.is_object() || !type_is(kwargs, "builtins.dict")) {
    fail("the keyword inputs are not a dict");
  }
  const auto context = kwargs.find("context");
  if (context == kwargs.end() || !context->is_string()) {
    fail("the keyword inputs have no names");
  }
  const Json names = parse_value(context->get<std::string>(), what);
  if (!names.is_array() || names.size() != children(kwargs).size()) {
    fail("the keyword names do not match the inputs");
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < names.size(); ++i) {
    const Json& child = children(kwargs)[i];
    if (!names[i].is_string() || !child.is_object() ||
        !(child.contains("type") && child["type"].is_null())) {
      fail("an input is not a single tensor");
    }
    out.push_back(names[i].get<std::string>());
  }
  return out;
}

// How many tensors the package returns: one leaf, or a tuple of leaves.
size_t parse_output_count(const std::string& text, const std::string& path) {
  const std::string what = c10::str("AOTI package '", path, "' call spec");
  const Json spec = parse_value(text, what);
  const auto is_leaf = [](const Json& node) {
    return node.is_object() && node.contains("type") && node["type"].is_null();
  };
  TORCH_CHECK(
      spec.is_array() && spec.size() == 2 && spec[1].is_object(),
      what,
      ": the outputs are not a [version, tree] pair");
  const Json& root = spec[1];
  if (is_leaf(root)) {
    return 1;
  }
  const auto children = root.find("children_spec");
  TORCH_CHECK(
      root.contains("type") && root["type"] == "builtins.tuple" &&
          children != root.end() && children->is_array() &&
          std::all_of(children->begin(), children->end(), is_leaf),
      what,
      ": the outputs are not a tensor or a tuple of tensors (found ",
      text.substr(0, 400),
      ")");
  return children->size();
}

std::string this_torch_version() {
  return c10::str(
      TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR, ".", TORCH_VERSION_PATCH);
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

// Rebuilds the probabilistic head of a format-2 package from its
// tensordict.probabilistic metadata (see tensordict_cpp.export): every value
// is checked before use. Its in_keys must be outputs of the package.
std::shared_ptr<ProbabilisticTensorDictModuleImpl> parse_probabilistic(
    const std::string& text,
    const std::string& path,
    const std::vector<NestedKey>& package_outputs) {
  const std::string file =
      c10::str("AOTI package '", path, "' (tensordict.probabilistic)");
  const Json meta =
      ::tensordict::detail::parse_meta_json(text, kMaxJsonDepth, file);
  const ::tensordict::detail::MetadataReader reader(
      file, ::tensordict::detail::KeyPath());
  reader.expect_object(meta, "tensordict.probabilistic");
  const std::string& cls = reader.string(
      reader.member(meta, "distribution_class"), "distribution_class");
  const Json& kwargs = reader.member(meta, "distribution_kwargs");
  reader.expect_object(kwargs, "distribution_kwargs");
  for (const auto& [name, value] : kwargs.items()) {
    TORCH_CHECK_VALUE(
        value.is_number() || value.is_boolean() || value.is_null(),
        file,
        ": the distribution keyword argument '",
        name,
        "' must be a number, a boolean or null, got ",
        value.type_name());
  }
  DistributionTensors tensor_kwargs;
  const Json& tensors = reader.member(meta, "distribution_tensor_kwargs");
  reader.expect_object(tensors, "distribution_tensor_kwargs");
  for (const auto& [name, item] : tensors.items()) {
    reader.expect_object(item, "distribution_tensor_kwargs{}");
    const c10::ScalarType dtype = reader.dtype(reader.member(item, "dtype"));
    const std::vector<int64_t> shape =
        reader.shape(reader.member(item, "shape"), "shape");
    int64_t numel = 1;
    for (int64_t size : shape) {
      TORCH_CHECK_VALUE(
          size <= kMaxKwargNumel && numel * size <= kMaxKwargNumel,
          file,
          ": the tensor keyword argument '",
          name,
          "' has shape ",
          shape_string(shape),
          ", more than ",
          kMaxKwargNumel,
          " entries");
      numel *= size;
    }
    const Json& data = reader.member(item, "data");
    TORCH_CHECK_VALUE(
        data.is_array() && static_cast<int64_t>(data.size()) == numel,
        file,
        ": the tensor keyword argument '",
        name,
        "' of shape ",
        shape_string(shape),
        " needs a list of ",
        numel,
        " numbers as data");
    std::vector<double> values;
    values.reserve(data.size());
    for (const Json& v : data) {
      TORCH_CHECK_VALUE(
          v.is_number(),
          file,
          ": the tensor keyword argument '",
          name,
          "' holds ",
          v.dump(),
          ", which is not a number");
      values.push_back(v.get<double>());
    }
    tensor_kwargs[name] =
        at::tensor(values, at::kDouble).reshape(shape).to(dtype);
  }
  const Json& dist_keys_json = reader.member(meta, "dist_keys");
  TORCH_CHECK_VALUE(
      dist_keys_json.is_array(), file, ": dist_keys must be a list of strings");
  std::vector<std::string> dist_keys;
  for (const Json& key : dist_keys_json) {
    dist_keys.push_back(reader.string(key, "dist_keys[]"));
  }
  std::vector<NestedKey> in_keys = parse_keys(
      reader.member(meta, "in_keys").dump(),
      path,
      "tensordict.probabilistic in_keys");
  const NestedKey out_key = parse_keys(
      c10::str("[", reader.member(meta, "out_key").dump(), "]"),
      path,
      "tensordict.probabilistic out_key")[0];
  ProbabilisticTensorDictModuleOptions options(cls);
  options.distribution_kwargs(kwargs.dump());
  options.distribution_tensor_kwargs(std::move(tensor_kwargs));
  options.return_log_prob(reader.boolean(
      reader.member(meta, "return_log_prob"), "return_log_prob"));
  const Json& log_prob_key = reader.member(meta, "log_prob_key");
  if (!log_prob_key.is_null()) {
    options.log_prob_key(parse_keys(
        c10::str("[", log_prob_key.dump(), "]"),
        path,
        "tensordict.probabilistic log_prob_key")[0]);
  }
  const std::string& type = reader.string(
      reader.member(meta, "default_interaction_type"),
      "default_interaction_type");
  for (const NestedKey& key : in_keys) {
    TORCH_CHECK_VALUE(
        std::find(package_outputs.begin(), package_outputs.end(), key) !=
            package_outputs.end(),
        file,
        ": the distribution reads ",
        key.to_string(),
        ", which is not an output of the package (its outputs are ",
        nn_module_internal::keys_to_string(package_outputs),
        ")");
  }
  try {
    options.default_interaction_type(interaction_type_from_string(type));
    return std::make_shared<ProbabilisticTensorDictModuleImpl>(
        std::move(dist_keys), std::move(in_keys), out_key, std::move(options));
  } catch (c10::Error& e) {
    TORCH_RETHROW(e, "while reading ", file);
  }
}

}  // namespace aoti_internal

using aoti_internal::InputSpec;
using aoti_internal::join_key;
using aoti_internal::shape_string;
using aoti_internal::WeightSpec;
using nn_module_internal::keys_to_string;

struct AOTIModuleImpl::State {
  std::string path;
  std::string where;  // "AOTIModule 'path'": the start of every message
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader;
  std::unordered_map<std::string, std::string> metadata;
  std::vector<InputSpec> inputs;  // in the package's order
  std::vector<std::string> input_names;
  c10::Device device = c10::kCPU;
  // From tensordict.spec: batch sizes with -1 for the dynamic dim.
  bool has_spec = false;
  std::vector<int64_t> batch_size;
  int64_t batch_min = 0;
  std::optional<int64_t> batch_max;
  std::string weights_prefix;
  std::map<std::string, std::string> weight_fqns;  // name -> package fqn
  std::map<std::string, WeightSpec> weights;
  std::atomic<bool> weights_ready{false};
  std::mutex swap_mutex;  // one load_weights at a time
  // What the package returns, in order; the module's out_keys add the
  // head's sample and log-prob keys.
  std::vector<NestedKey> package_outputs;
  // The distribution of a format-2 package; null otherwise.
  std::shared_ptr<ProbabilisticTensorDictModuleImpl> head;
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

  // Everything is checked before libtorch extracts the archive and opens
  // the library inside (see NOTE [Untrusted packages]).
  aoti_internal::check_zip_integrity(path);
  std::unordered_map<std::string, std::string> meta;
  try {
    meta = torch::inductor::AOTIModelPackageLoader::load_metadata_from_package(
        path, options.model_name());
  } catch (const std::exception& e) {
    TORCH_CHECK(
        false,
        "AOTI package '",
        path,
        "': cannot read the metadata of model '",
        options.model_name(),
        "': ",
        e.what());
  }
  const auto get = [&](const char* name) -> const std::string* {
    const auto it = meta.find(name);
    return it == meta.end() ? nullptr : &it->second;
  };

  const std::string* device_key = get("AOTI_DEVICE_KEY");
  TORCH_CHECK(
      device_key != nullptr,
      "AOTI package '",
      path,
      "': no AOTI_DEVICE_KEY in its metadata; is it an AOTInductor package?");
  if (*device_key == "cpu") {
    s.device = c10::Device(c10::kCPU);
    if (const std::string* isa = get("AOTI_CPU_ISA")) {
      aoti_internal::check_cpu_isa(*isa, path);
    }
  } else if (*device_key == "cuda") {
    TORCH_CHECK(
        at::hasCUDA(),
        "AOTI package '",
        path,
        "' was compiled for cuda, but this process has no CUDA device");
    s.device = c10::Device(
        c10::kCUDA,
        options.device_index() < 0 ? c10::DeviceIndex(0)
                                   : options.device_index());
  } else {
    TORCH_CHECK(
        false,
        "AOTI package '",
        path,
        "' was compiled for device '",
        *device_key,
        "'; AOTIModule runs cpu and cuda packages");
  }

  bool probabilistic = false;
  if (const std::string* format = get("tensordict.format")) {
    probabilistic = *format == aoti_internal::kFormatProbabilistic;
    TORCH_CHECK(
        *format == aoti_internal::kFormat || probabilistic,
        "AOTI package '",
        path,
        "' has tensordict metadata format '",
        *format,
        "', but this build reads formats '",
        aoti_internal::kFormat,
        "' and '",
        aoti_internal::kFormatProbabilistic,
        "'; export it again with this version's tensordict_cpp");
  }
  const std::string* probabilistic_text = get("tensordict.probabilistic");
  TORCH_CHECK(
      probabilistic == (probabilistic_text != nullptr),
      "AOTI package '",
      path,
      "': ",
      probabilistic ? "metadata format 2 needs tensordict.probabilistic"
                    : "tensordict.probabilistic needs metadata format 2");

  // Keys: the metadata's, which the caller's must then equal.
  std::optional<std::vector<NestedKey>> meta_in;
  std::optional<std::vector<NestedKey>> meta_out;
  if (const std::string* text = get("tensordict.in_keys")) {
    meta_in = aoti_internal::parse_keys(*text, path, "tensordict.in_keys");
  }
  if (const std::string* text = get("tensordict.out_keys")) {
    meta_out = aoti_internal::parse_keys(*text, path, "tensordict.out_keys");
  }
  const auto pick = [&](std::optional<std::vector<NestedKey>>& given,
                        std::optional<std::vector<NestedKey>>& from_meta,
                        const char* what) {
    if (given && from_meta) {
      TORCH_CHECK_VALUE(
          *given == *from_meta,
          s.where,
          ": the ",
          what,
          " given, ",
          keys_to_string(*given),
          ", differ from the package's metadata, ",
          keys_to_string(*from_meta));
    }
    if (!given) {
      TORCH_CHECK_VALUE(
          from_meta.has_value(),
          s.where,
          ": the package has no tensordict.",
          what,
          " metadata; pass the keys: AOTIModule(path, in_keys, out_keys)");
      given = std::move(from_meta);
    }
    TORCH_CHECK_VALUE(
        !given->empty(), s.where, ": the ", what, " must not be empty");
    return std::move(*given);
  };
  std::vector<NestedKey> ins = pick(in_keys, meta_in, "in_keys");
  std::vector<NestedKey> outs = pick(out_keys, meta_out, "out_keys");

  // The spec: everything the calls are checked against.
  std::map<std::string, InputSpec> spec_inputs;
  bool weights_in_package = true;
  if (const std::string* text = get("tensordict.spec")) {
    const std::string file =
        c10::str("AOTI package '", path, "' (tensordict.spec)");
    const Json spec = ::tensordict::detail::parse_meta_json(
        *text, aoti_internal::kMaxJsonDepth, file);
    const ::tensordict::detail::MetadataReader reader(
        file, ::tensordict::detail::KeyPath());
    const std::string& torch_version =
        reader.string(reader.member(spec, "torch"), "torch");
    const std::string ours = aoti_internal::this_torch_version();
    TORCH_CHECK(
        torch_version.compare(0, ours.size(), ours) == 0 &&
            (torch_version.size() == ours.size() ||
             torch_version[ours.size()] == '+'),
        "AOTI package '",
        path,
        "' was built by torch ",
        torch_version,
        ", but this program runs torch ",
        ours,
        "; export it again with torch ",
        ours);
    // Sizes, or -1 for the dynamic dim (which shape() would refuse).
    const Json& batch = reader.member(spec, "batch_size");
    TORCH_CHECK(
        batch.is_array() &&
            batch.size() <= ::tensordict::detail::MetadataReader::kMaxDims,
        file,
        ": batch_size must be a list of at most ",
        ::tensordict::detail::MetadataReader::kMaxDims,
        " sizes");
    for (const Json& dim : batch) {
      const int64_t size = reader.integer(dim, "batch_size");
      TORCH_CHECK(
          size >= -1,
          file,
          ": batch_size entries are sizes or -1, found ",
          size);
      s.batch_size.push_back(size);
    }
    const Json& low = reader.member(spec, "batch_min");
    const Json& high = reader.member(spec, "batch_max");
    if (!low.is_null()) {
      s.batch_min = reader.integer(low, "batch_min");
    }
    if (!high.is_null()) {
      s.batch_max = reader.integer(high, "batch_max");
    }
    const Json& inputs = reader.member(spec, "inputs");
    TORCH_CHECK(inputs.is_array(), file, ": inputs must be a list");
    for (const Json& item : inputs) {
      reader.expect_object(item, "inputs[]");
      const Json& key = reader.member(item, "key");
      InputSpec input(aoti_internal::parse_keys(
          c10::str("[", key.dump(), "]"), path, "tensordict.spec inputs")[0]);
      input.name = reader.string(reader.member(item, "name"), "name");
      input.dtype = reader.dtype(reader.member(item, "dtype"));
      input.shape = reader.shape(reader.member(item, "shape"), "shape");
      input.device = reader.device(reader.member(item, "device"));
      const std::string name = input.name;
      spec_inputs.emplace(name, std::move(input));
    }
    s.weights_prefix =
        reader.string(reader.member(spec, "weights_prefix"), "weights_prefix");
    weights_in_package = reader.boolean(
        reader.member(spec, "weights_in_package"), "weights_in_package");
    if (spec.contains("weights")) {
      const Json& weights = spec["weights"];
      reader.expect_object(weights, "weights");
      for (const auto& [name, item] : weights.items()) {
        reader.expect_object(item, "weights{}");
        WeightSpec w;
        w.dtype = reader.dtype(reader.member(item, "dtype"));
        w.shape = reader.shape(reader.member(item, "shape"), "shape");
        s.weights.emplace(name, std::move(w));
      }
    }
    s.has_spec = true;
  }

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

  const std::vector<std::string> call_spec = s.loader->get_call_spec();
  TORCH_CHECK(
      call_spec.size() == 2,
      s.where,
      ": the call spec has ",
      call_spec.size(),
      " parts, expected 2 (inputs and outputs)");
  s.input_names = aoti_internal::parse_input_names(call_spec[0], path);
  const size_t outputs = aoti_internal::parse_output_count(call_spec[1], path);
  TORCH_CHECK_VALUE(
      outputs == outs.size(),
      s.where,
      ": the package returns ",
      outputs,
      " tensors, but there are ",
      outs.size(),
      " out_keys ",
      keys_to_string(outs));

  // Match the in_keys to the keyword names, in the package's order.
  std::map<std::string, NestedKey> by_name;
  for (const NestedKey& key : ins) {
    const std::string name = join_key(key);
    TORCH_CHECK_VALUE(
        by_name.emplace(name, key).second,
        s.where,
        ": in_keys ",
        keys_to_string(ins),
        " give the input name '",
        name,
        "' twice");
  }
  for (const std::string& name : s.input_names) {
    const auto it = by_name.find(name);
    TORCH_CHECK_VALUE(
        it != by_name.end(),
        s.where,
        ": the package's input '",
        name,
        "' matches none of the in_keys ",
        keys_to_string(ins),
        " (nested keys are joined with '_')");
    InputSpec input(it->second);
    if (s.has_spec) {
      const auto found = spec_inputs.find(name);
      TORCH_CHECK(
          found != spec_inputs.end() && found->second.key == it->second,
          s.where,
          ": tensordict.spec does not describe the input '",
          name,
          "' as the key ",
          it->second.to_string());
      input = found->second;
    } else {
      input.name = name;
      input.device = s.device;
    }
    s.inputs.push_back(std::move(input));
    by_name.erase(it);
  }
  TORCH_CHECK_VALUE(
      by_name.empty(),
      s.where,
      ": the in_key ",
      by_name.empty() ? std::string() : by_name.begin()->second.to_string(),
      " is not an input of the package, whose inputs are ",
      c10::Join(", ", s.input_names));
  s.package_outputs = outs;
  if (probabilistic_text != nullptr) {
    s.head = aoti_internal::parse_probabilistic(
        *probabilistic_text, path, s.package_outputs);
    for (const NestedKey& key : s.head->out_keys()) {
      TORCH_CHECK_VALUE(
          std::find(outs.begin(), outs.end(), key) == outs.end(),
          s.where,
          ": the distribution writes ",
          key.to_string(),
          ", which the package returns too");
      outs.push_back(key);
    }
  }
  set_keys(std::move(ins), std::move(outs));

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
          s.weights[name] = WeightSpec{
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
            WeightSpec{static_cast<c10::ScalarType>(dtype), std::nullopt};
      }
    }
  }
  s.weights_ready = weights_in_package;
}

TensorDict AOTIModuleImpl::forward(TensorDict td, TensorDict out) {
  State& s = *state_;
  TORCH_CHECK(
      s.weights_ready.load(std::memory_order_acquire),
      s.where,
      ": the package holds no weights (compiled with "
      "package_constants_in_so=False); call load_weights first");
  const size_t batch_dims = s.batch_size.size();
  std::vector<at::Tensor> inputs;
  inputs.reserve(s.inputs.size());
  std::vector<int64_t> batch;  // the first input's batch dims
  const NestedKey* batch_key = nullptr;
  for (const InputSpec& spec : s.inputs) {
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
    TORCH_CHECK_TYPE(
        !spec.dtype || tensor.scalar_type() == *spec.dtype,
        s.where,
        ": the input ",
        spec.key.to_string(),
        " has dtype ",
        tensor.scalar_type(),
        ", but the package takes ",
        spec.dtype.value_or(tensor.scalar_type()));
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
    }
    // The package reads its inputs with the strides it was compiled for.
    inputs.push_back(tensor.contiguous());
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

std::vector<at::Tensor> AOTIModuleImpl::run(
    const std::vector<at::Tensor>& inputs) {
  State& s = *state_;
  TORCH_CHECK(
      s.weights_ready.load(std::memory_order_acquire),
      s.where,
      ": the package holds no weights (compiled with "
      "package_constants_in_so=False); call load_weights first");
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
