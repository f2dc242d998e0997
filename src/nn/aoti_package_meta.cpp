// The package-spec reader of AOTIModule; see nn/aoti_package_meta.h.

#include "nn/aoti_package_meta.h"

#include <ATen/ops/tensor.h>
#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/key_path.h"
#include "io/format.h"
#include "io/mapped_zip.h"
#include "io/metadata_reader.h"
#include "io/zip.h"
#include "nn/aoti_zip.h"
#include "nn/keys.h"
#include "tensordict/json.h"
#include "tensordict/probabilistic.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace aoti_package_meta {

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
// Far above any package (a model has a handful of files).
constexpr uint64_t kMaxEntries = uint64_t{1} << 20;
// The metadata of a model with many weights stays far below this.
constexpr uint64_t kMaxMetadataBytes = uint64_t{64} << 20;
// A wrapper source holds the kernels' launches; large models reach MBs.
constexpr uint64_t kMaxWrapperBytes = uint64_t{1} << 30;
// The most inputs a package's checks may describe.
constexpr int64_t kMaxInputs = int64_t{1} << 16;

using nn::nn_module_internal::keys_to_string;

std::string shape_text(c10::IntArrayRef shape) {
  return c10::str(shape);
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Parses one metadata value, which may be any JSON (the reader only takes
// objects, so the value is wrapped in one).
Json parse_value(const std::string& text, const std::string& what) {
  return parse_meta_json("{\"v\": " + text + "\n}", kMaxJsonDepth, what)
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
      text.substr(0, 400));
  std::vector<NestedKey> keys;
  for (const Json& item : value) {
    if (item.is_string()) {
      keys.emplace_back(item.get<std::string>());
      continue;
    }
    TORCH_CHECK(
        item.is_array() && !item.empty() &&
            item.size() <= MetadataReader::kMaxDims,
        what,
        ": a key must be a string or a non-empty list of strings, found ",
        item.dump().substr(0, 400));
    std::vector<std::string> parts;
    for (const Json& part : item) {
      TORCH_CHECK(
          part.is_string() && !part.get<std::string>().empty(),
          what,
          ": a key must be a string or a non-empty list of strings, found ",
          item.dump().substr(0, 400));
      parts.push_back(part.get<std::string>());
    }
    keys.emplace_back(parts);
  }
  return keys;
}

NestedKey parse_key(
    const Json& value, const std::string& path, const char* entry) {
  return parse_keys(c10::str("[", value.dump(), "]"), path, entry)[0];
}

std::string this_torch_version() {
  return c10::str(
      TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR, ".", TORCH_VERSION_PATCH);
}

// Rebuilds the probabilistic head of a format-2 package from its
// tensordict.probabilistic metadata (see tensordict_cpp.export): every value
// is checked before use. Its in_keys must be outputs of the package.
std::shared_ptr<nn::ProbabilisticTensorDictModuleImpl> parse_probabilistic(
    const std::string& text,
    const std::string& path,
    const std::vector<NestedKey>& package_outputs) {
  const std::string file =
      c10::str("AOTI package '", path, "' (tensordict.probabilistic)");
  const Json meta = parse_meta_json(text, kMaxJsonDepth, file);
  const MetadataReader reader(file, KeyPath());
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
  nn::DistributionTensors tensor_kwargs;
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
          shape_text(shape),
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
        shape_text(shape),
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
          v.dump().substr(0, 100),
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
  const NestedKey out_key = parse_key(
      reader.member(meta, "out_key"), path, "tensordict.probabilistic out_key");
  nn::ProbabilisticTensorDictModuleOptions options(cls);
  options.distribution_kwargs(kwargs.dump());
  options.distribution_tensor_kwargs(std::move(tensor_kwargs));
  options.return_log_prob(reader.boolean(
      reader.member(meta, "return_log_prob"), "return_log_prob"));
  const Json& log_prob_key = reader.member(meta, "log_prob_key");
  if (!log_prob_key.is_null()) {
    options.log_prob_key(
        parse_key(log_prob_key, path, "tensordict.probabilistic log_prob_key"));
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
        keys_to_string(package_outputs),
        ")");
  }
  try {
    options.default_interaction_type(nn::interaction_type_from_string(type));
    return std::make_shared<nn::ProbabilisticTensorDictModuleImpl>(
        std::move(dist_keys), std::move(in_keys), out_key, std::move(options));
  } catch (c10::Error& e) {
    TORCH_RETHROW(e, "while reading ", file);
  }
}

// The tensordict.spec entry: batch, inputs, weights.
void parse_spec(
    const std::string& text, const std::string& path, AotiPackageSpec& s) {
  const std::string file =
      c10::str("AOTI package '", path, "' (tensordict.spec)");
  const Json spec = parse_meta_json(text, kMaxJsonDepth, file);
  const MetadataReader reader(file, KeyPath());
  const std::string& torch_version =
      reader.string(reader.member(spec, "torch"), "torch");
  const std::string ours = this_torch_version();
  TORCH_CHECK(
      torch_version.compare(0, ours.size(), ours) == 0 &&
          (torch_version.size() == ours.size() ||
           torch_version[ours.size()] == '+'),
      "AOTI package '",
      path,
      "' was built by torch ",
      torch_version.substr(0, 100),
      ", but this program runs torch ",
      ours,
      "; export it again with torch ",
      ours);
  // Sizes, or -1 for the dynamic dim (which shape() would refuse).
  const Json& batch = reader.member(spec, "batch_size");
  TORCH_CHECK(
      batch.is_array() && batch.size() <= MetadataReader::kMaxDims,
      file,
      ": batch_size must be a list of at most ",
      MetadataReader::kMaxDims,
      " sizes");
  for (const Json& dim : batch) {
    const int64_t size = reader.integer(dim, "batch_size");
    TORCH_CHECK(
        size >= -1, file, ": batch_size entries are sizes or -1, found ", size);
    s.batch_size.push_back(size);
  }
  const Json& low = reader.member(spec, "batch_min");
  const Json& high = reader.member(spec, "batch_max");
  if (!low.is_null()) {
    s.batch_min = reader.integer(low, "batch_min");
    TORCH_CHECK(
        s.batch_min >= 0,
        file,
        ": batch_min must be >= 0, found ",
        s.batch_min);
  }
  if (!high.is_null()) {
    s.batch_max = reader.integer(high, "batch_max");
    TORCH_CHECK(
        *s.batch_max >= s.batch_min,
        file,
        ": batch_max ",
        *s.batch_max,
        " is below batch_min ",
        s.batch_min);
  }
  const Json& inputs = reader.member(spec, "inputs");
  TORCH_CHECK(inputs.is_array(), file, ": inputs must be a list");
  for (const Json& item : inputs) {
    reader.expect_object(item, "inputs[]");
    AotiInputSpec input(
        parse_key(reader.member(item, "key"), path, "tensordict.spec inputs"));
    input.name = reader.string(reader.member(item, "name"), "name");
    input.dtype = reader.dtype(reader.member(item, "dtype"));
    input.shape = reader.shape(reader.member(item, "shape"), "shape");
    TORCH_CHECK(
        s.batch_size.size() + input.shape.size() <= MetadataReader::kMaxDims,
        file,
        ": the input '",
        input.name,
        "' has more than ",
        MetadataReader::kMaxDims,
        " dims");
    input.device = reader.device(reader.member(item, "device"));
    const std::string name = input.name;
    TORCH_CHECK(
        s.spec_inputs.emplace(name, std::move(input)).second,
        file,
        ": the input '",
        name,
        "' is described twice");
  }
  s.weights_prefix =
      reader.string(reader.member(spec, "weights_prefix"), "weights_prefix");
  s.weights_in_package = reader.boolean(
      reader.member(spec, "weights_in_package"), "weights_in_package");
  if (spec.contains("weights")) {
    const Json& weights = spec["weights"];
    reader.expect_object(weights, "weights");
    for (const auto& [name, item] : weights.items()) {
      reader.expect_object(item, "weights{}");
      AotiWeightSpec w;
      w.dtype = reader.dtype(reader.member(item, "dtype"));
      w.shape = reader.shape(reader.member(item, "shape"), "shape");
      s.weights.emplace(name, std::move(w));
    }
  }
  s.has_spec = true;
}

// ---- The input checks of the wrapper source ----
//
// AOTInductor writes one `check_input_<i>(AtenTensorHandle* input_handles)`
// per input into the wrapper, each a run of statements of a few fixed forms
// (torch/_inductor/codegen/cpp_wrapper_cpu.py,
// generate_input_output_runtime_checks):
//   ConstantHandle <v> = ConstantHandle(input_handles[<i>]);
//   int32_t <v>_expected_dtype = aoti_torch_dtype_<dtype>();
//   if (<n> != <v>_size[<d>]) {           an exact size
//   if (<v>_size[<d>] < <n>) {            a lower bound
//   if (<v>_size[<d>] > <n>) {            an upper bound
//   if (<n> != <v>_stride[<d>]) {         a static stride
//   int32_t <v>_expected_device_type = <n>;
// Every `if` on <v> must have one of these forms: a form this reader does
// not know means a check it would skip, so the package is refused.

struct CheckParser {
  const std::string& label;
  int64_t index;

  [[noreturn]] void fail(const std::string& line, const char* why) const {
    TORCH_CHECK(
        false,
        label,
        ": cannot read the input check of input ",
        index,
        " in its wrapper source (",
        why,
        ": '",
        line.substr(0, 200),
        "'); was it built by another torch version?");
  }

  // Reads a non-negative decimal integer at `text[pos]`; advances `pos`.
  int64_t number(
      const std::string& line, std::string_view text, size_t& pos) const {
    const size_t start = pos;
    int64_t value = 0;
    while (pos < text.size() &&
           std::isdigit(static_cast<unsigned char>(text[pos])) != 0) {
      const int64_t digit = text[pos] - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) {
        fail(line, "a number out of range");
      }
      value = value * 10 + digit;
      ++pos;
    }
    if (pos == start) {
      fail(line, "a number was expected");
    }
    return value;
  }

  // Consumes `word` at `text[pos]`, or fails.
  void expect(
      const std::string& line,
      std::string_view text,
      size_t& pos,
      std::string_view word) const {
    if (text.substr(pos, word.size()) != word) {
      fail(line, "an unknown form");
    }
    pos += word.size();
  }

  // Reads "[<d>]" with d a dim below kMaxDims.
  size_t dim(
      const std::string& line, std::string_view text, size_t& pos) const {
    expect(line, text, pos, "[");
    const int64_t d = number(line, text, pos);
    expect(line, text, pos, "]");
    if (d >= static_cast<int64_t>(MetadataReader::kMaxDims)) {
      fail(line, "a dim beyond torch's limit");
    }
    return static_cast<size_t>(d);
  }
};

std::string_view trim(std::string_view text) {
  while (!text.empty() &&
         std::isspace(static_cast<unsigned char>(text.front())) != 0) {
    text.remove_prefix(1);
  }
  while (!text.empty() &&
         std::isspace(static_cast<unsigned char>(text.back())) != 0) {
    text.remove_suffix(1);
  }
  return text;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

AotiDimCheck& dim_at(AotiInputCheck& check, size_t d) {
  if (check.sizes.size() <= d) {
    check.sizes.resize(d + 1);
  }
  return check.sizes[d];
}

// Reads the body of check_input_<index>: the lines after its header, up to
// the next function.
AotiInputCheck parse_one_check(
    std::string_view body, int64_t index, const std::string& label) {
  const CheckParser p{label, index};
  AotiInputCheck check;
  std::string var;
  std::vector<std::optional<int64_t>> strides;
  bool have_device = false;
  size_t start = 0;
  while (start < body.size()) {
    size_t end = body.find('\n', start);
    if (end == std::string_view::npos) {
      end = body.size();
    }
    const std::string_view text = trim(body.substr(start, end - start));
    start = end + 1;
    const std::string line(text);
    if (starts_with(text, "ConstantHandle ")) {
      size_t pos = std::string_view("ConstantHandle ").size();
      const size_t eq = text.find(" = ConstantHandle(input_handles", pos);
      if (!var.empty() || eq == std::string_view::npos || eq == pos) {
        p.fail(line, "an unknown form");
      }
      var = std::string(text.substr(pos, eq - pos));
      pos = eq + std::string_view(" = ConstantHandle(input_handles").size();
      p.expect(line, text, pos, "[");
      if (p.number(line, text, pos) != index) {
        p.fail(line, "the check reads another input");
      }
      p.expect(line, text, pos, "]);");
      if (pos != text.size()) {
        p.fail(line, "an unknown form");
      }
      continue;
    }
    if (var.empty()) {
      continue;
    }
    const std::string size_of = var + "_size";
    const std::string stride_of = var + "_stride";
    const std::string dtype_decl =
        "int32_t " + var + "_expected_dtype = aoti_torch_dtype_";
    const std::string device_decl =
        "int32_t " + var + "_expected_device_type = ";
    if (starts_with(text, dtype_decl)) {
      const std::string_view rest = text.substr(dtype_decl.size());
      const size_t close = rest.find("();");
      if (close == std::string_view::npos || close + 3 != rest.size() ||
          check.dtype) {
        p.fail(line, "an unknown form");
      }
      const std::string name(rest.substr(0, close));
      const auto dtype = dtype_from_name("torch." + name);
      if (!dtype) {
        p.fail(line, "a dtype this build does not know");
      }
      check.dtype = dtype;
      continue;
    }
    if (starts_with(text, device_decl)) {
      size_t pos = device_decl.size();
      const int64_t type = p.number(line, text, pos);
      p.expect(line, text, pos, ";");
      if (pos != text.size() || have_device) {
        p.fail(line, "an unknown form");
      }
      // torch's DEVICE_TO_INT: 0 is cpu, 1 is cuda.
      if (type == 0) {
        check.device_type = c10::kCPU;
      } else if (type == 1) {
        check.device_type = c10::kCUDA;
      } else {
        p.fail(line, "a device type this build does not know");
      }
      have_device = true;
      continue;
    }
    if (!starts_with(text, "if (") ||
        text == "if (" + var + "_expected_dtype != " + var + "_dtype) {" ||
        text == "if (" + var + "_expected_device_type != " + var +
                    "_device_type) {") {
      continue;
    }
    size_t pos = 4;
    if (starts_with(text.substr(pos), size_of + "[")) {
      // A bound: "if (<v>_size[<d>] < <n>) {" or "... > <n>) {".
      pos += size_of.size();
      const size_t d = p.dim(line, text, pos);
      const bool lower = starts_with(text.substr(pos), " < ");
      const bool upper = starts_with(text.substr(pos), " > ");
      if (!lower && !upper) {
        p.fail(line, "an unknown form");
      }
      pos += 3;
      const int64_t n = p.number(line, text, pos);
      p.expect(line, text, pos, ") {");
      AotiDimCheck& dim = dim_at(check, d);
      std::optional<int64_t>& bound = lower ? dim.min : dim.max;
      if (pos != text.size() || bound || dim.size) {
        p.fail(line, "an unknown form");
      }
      bound = n;
      continue;
    }
    if (text.size() > pos &&
        std::isdigit(static_cast<unsigned char>(text[pos])) != 0) {
      // "if (<n> != <v>_size[<d>]) {" or "... <v>_stride[<d>]) {".
      const int64_t n = p.number(line, text, pos);
      p.expect(line, text, pos, " != ");
      const bool is_size = starts_with(text.substr(pos), size_of + "[");
      const bool is_stride = starts_with(text.substr(pos), stride_of + "[");
      if (!is_size && !is_stride) {
        p.fail(line, "an unknown form");
      }
      pos += is_size ? size_of.size() : stride_of.size();
      const size_t d = p.dim(line, text, pos);
      p.expect(line, text, pos, ") {");
      if (pos != text.size()) {
        p.fail(line, "an unknown form");
      }
      if (is_size) {
        AotiDimCheck& dim = dim_at(check, d);
        if (dim.size || dim.min || dim.max) {
          p.fail(line, "a dim checked twice");
        }
        dim.size = n;
      } else {
        if (strides.size() <= d) {
          strides.resize(d + 1);
        }
        if (strides[d]) {
          p.fail(line, "a stride checked twice");
        }
        strides[d] = n;
      }
      continue;
    }
    if (text.find(var) != std::string_view::npos) {
      p.fail(line, "an unknown form");
    }
  }
  if (var.empty()) {
    p.fail("", "no ConstantHandle of the input");
  }
  // The rank is the number of dims the checks read; every dim of a
  // torch.export input has one (a dynamic dim its bounds, a static one its
  // size), and the innermost stride of a dense input is static.
  const size_t rank = std::max(check.sizes.size(), strides.size());
  check.sizes.resize(rank);
  strides.resize(rank);
  for (size_t d = 0; d < rank; ++d) {
    const AotiDimCheck& dim = check.sizes[d];
    if (dim.min && dim.max && *dim.min > *dim.max) {
      p.fail(
          c10::str("dim ", d, " in [", *dim.min, ", ", *dim.max, "]"),
          "an empty range");
    }
  }
  check.strides = std::move(strides);
  return check;
}

}  // namespace aoti_package_meta

using aoti_package_meta::ends_with;
using aoti_package_meta::keys_to_string;
using aoti_package_meta::kFormat;
using aoti_package_meta::kFormatProbabilistic;

std::string aoti_input_name(const NestedKey& key) {
  return c10::Join("_", std::vector<std::string>(key.begin(), key.end()));
}

namespace {

// What torch writes: at most aoti_package_meta::kMaxEntries entries, all
// stored.
ZipParseOptions package_parse_options() {
  ZipParseOptions options;
  options.max_entries = aoti_package_meta::kMaxEntries;
  return options;
}

AotiPackageFiles read_package_entries(
    const MappedZip& zip, const std::string& model_name) {
  const std::string& label = zip.label();
  const std::vector<ZipEntry>& entries = zip.entries();
  // Every entry, the library included: libtorch's reader skips CRCs, so a
  // flipped byte in the library would otherwise be loaded and run.
  ZipVerifyPolicy policy;
  policy.skip_directories = false;
  policy.stored_only_reason =
      "torch writes packages uncompressed, so it was repacked or is "
      "corrupted";
  const std::vector<std::string> problems = zip.verify(policy);
  TORCH_CHECK(problems.empty(), problems.empty() ? "" : problems.front());
  const std::string model_dir = "/data/aotinductor/" + model_name + "/";
  AotiPackageFiles files;
  const ZipEntry* metadata = nullptr;
  const ZipEntry* wrapper = nullptr;
  for (const ZipEntry& entry : entries) {
    const size_t top = entry.name.find('/');
    if (top == std::string::npos ||
        entry.name.compare(top, model_dir.size(), model_dir) != 0 ||
        entry.name.find('/', top + model_dir.size()) != std::string::npos) {
      continue;
    }
    if (ends_with(entry.name, "_metadata.json")) {
      TORCH_CHECK(
          entry.size <= aoti_package_meta::kMaxMetadataBytes,
          label,
          ": the metadata entry '",
          entry.name,
          "' has ",
          entry.size,
          " bytes, more than ",
          aoti_package_meta::kMaxMetadataBytes);
      std::string text(zip.payload(entry));
      if (metadata == nullptr) {
        files.metadata_json = std::move(text);
        metadata = &entry;
      } else {
        // libtorch reads one of them: what is checked must be what it reads.
        TORCH_CHECK(
            text == files.metadata_json,
            label,
            ": the metadata entries '",
            metadata->name,
            "' and '",
            entry.name,
            "' differ");
      }
    } else if (ends_with(entry.name, ".wrapper.cpp")) {
      TORCH_CHECK(
          wrapper == nullptr,
          label,
          ": model '",
          model_name,
          "' has two wrapper sources, '",
          wrapper->name,
          "' and '",
          entry.name,
          "'");
      TORCH_CHECK(
          entry.size <= aoti_package_meta::kMaxWrapperBytes,
          label,
          ": the wrapper source '",
          entry.name,
          "' has ",
          entry.size,
          " bytes, more than ",
          aoti_package_meta::kMaxWrapperBytes);
      files.wrapper_source = std::string(zip.payload(entry));
      wrapper = &entry;
    }
  }
  TORCH_CHECK(
      metadata != nullptr,
      label,
      ": no metadata for model '",
      model_name,
      "' (an entry '<top>",
      model_dir,
      "*_metadata.json'); is it an AOTInductor package, and is the model "
      "name right?");
  return files;
}

}  // namespace

AotiPackageFiles read_package_files(
    const unsigned char* data,
    uint64_t size,
    const std::string& label,
    const std::string& model_name) {
  return read_package_entries(
      MappedZip(data, size, label, package_parse_options()), model_name);
}

AotiPackageFiles read_package_file(
    const std::string& path, const std::string& model_name) {
  const std::string label = c10::str("AOTI package '", path, "'");
  TORCH_CHECK(
      ::access(path.c_str(), R_OK) == 0,
      label,
      ": cannot open the file: ",
      std::strerror(errno));
  return read_package_entries(
      MappedZip(path, label, package_parse_options()), model_name);
}

std::vector<AotiInputCheck> parse_input_checks(
    const std::string& source, const std::string& label) {
  static constexpr std::string_view kHeader = "static void check_input_";
  std::vector<std::pair<int64_t, size_t>> starts;  // index, body start
  size_t pos = source.find(kHeader);
  while (pos != std::string::npos) {
    size_t p = pos + kHeader.size();
    const size_t digits = p;
    int64_t index = 0;
    while (p < source.size() &&
           std::isdigit(static_cast<unsigned char>(source[p])) != 0 &&
           p - digits < 9) {
      index = index * 10 + (source[p] - '0');
      ++p;
    }
    TORCH_CHECK(
        p > digits && p < source.size() && source[p] == '(',
        label,
        ": cannot read the input checks in its wrapper source (a malformed "
        "check_input_ function)");
    TORCH_CHECK(
        index < aoti_package_meta::kMaxInputs,
        label,
        ": its wrapper source checks input ",
        index,
        ", more than ",
        aoti_package_meta::kMaxInputs,
        " inputs");
    starts.emplace_back(index, p);
    pos = source.find(kHeader, p);
  }
  std::vector<std::optional<AotiInputCheck>> checks(starts.size());
  for (size_t i = 0; i < starts.size(); ++i) {
    const auto [index, begin] = starts[i];
    // The body ends where the next function starts.
    size_t end = i + 1 < starts.size() ? starts[i + 1].second : source.size();
    end = std::min(end, source.find("static bool", begin));
    end = std::min(end, source.find("AOTI_NOINLINE", begin));
    TORCH_CHECK(
        static_cast<size_t>(index) < checks.size() && !checks[index],
        label,
        ": its wrapper source checks input ",
        index,
        static_cast<size_t>(index) < checks.size() ? " twice" : "",
        static_cast<size_t>(index) < checks.size()
            ? std::string()
            : c10::str(" of ", checks.size(), " inputs"));
    checks[index] = aoti_package_meta::parse_one_check(
        std::string_view(source).substr(begin, end - begin), index, label);
  }
  std::vector<AotiInputCheck> out;
  out.reserve(checks.size());
  for (auto& check : checks) {
    out.push_back(std::move(*check));
  }
  return out;
}

AotiPackageSpec read_package_spec(
    const AotiPackageFiles& files,
    const std::string& path,
    std::optional<std::vector<NestedKey>> in_keys,
    std::optional<std::vector<NestedKey>> out_keys) {
  AotiPackageSpec s;
  const std::string label = c10::str("AOTI package '", path, "'");
  const std::string where = c10::str("AOTIModule '", path, "'");
  {
    const Json meta = parse_meta_json(
        files.metadata_json,
        aoti_package_meta::kMaxJsonDepth,
        label + " (its metadata)");
    for (const auto& [name, value] : meta.items()) {
      TORCH_CHECK(
          value.is_string(),
          label,
          ": the metadata entry '",
          name,
          "' must be a string, found ",
          value.type_name());
      s.metadata.emplace(name, value.get<std::string>());
    }
  }
  const auto get = [&](const char* name) -> const std::string* {
    const auto it = s.metadata.find(name);
    return it == s.metadata.end() ? nullptr : &it->second;
  };

  const std::string* device_key = get("AOTI_DEVICE_KEY");
  TORCH_CHECK(
      device_key != nullptr,
      label,
      ": no AOTI_DEVICE_KEY in its metadata; is it an AOTInductor package?");
  if (*device_key == "cpu") {
    s.device_type = c10::kCPU;
  } else if (*device_key == "cuda") {
    s.device_type = c10::kCUDA;
  } else {
    TORCH_CHECK(
        false,
        label,
        " was compiled for device '",
        device_key->substr(0, 100),
        "'; AOTIModule runs cpu and cuda packages");
  }
  if (const std::string* isa = get("AOTI_CPU_ISA")) {
    s.cpu_isa = *isa;
  }

  bool probabilistic = false;
  if (const std::string* format = get("tensordict.format")) {
    probabilistic = *format == kFormatProbabilistic;
    TORCH_CHECK(
        *format == kFormat || probabilistic,
        label,
        " has tensordict metadata format '",
        format->substr(0, 100),
        "', but this build reads formats '",
        kFormat,
        "' and '",
        kFormatProbabilistic,
        "'; export it again with this version's tensordict_cpp");
  }
  const std::string* probabilistic_text = get("tensordict.probabilistic");
  TORCH_CHECK(
      probabilistic == (probabilistic_text != nullptr),
      label,
      ": ",
      probabilistic ? "metadata format 2 needs tensordict.probabilistic"
                    : "tensordict.probabilistic needs metadata format 2");

  // Keys: the metadata's, which the caller's must then equal.
  std::optional<std::vector<NestedKey>> meta_in;
  std::optional<std::vector<NestedKey>> meta_out;
  if (const std::string* text = get("tensordict.in_keys")) {
    meta_in = aoti_package_meta::parse_keys(*text, path, "tensordict.in_keys");
  }
  if (const std::string* text = get("tensordict.out_keys")) {
    meta_out =
        aoti_package_meta::parse_keys(*text, path, "tensordict.out_keys");
  }
  const auto pick = [&](std::optional<std::vector<NestedKey>>& given,
                        std::optional<std::vector<NestedKey>>& from_meta,
                        const char* what) {
    if (given && from_meta) {
      TORCH_CHECK_VALUE(
          *given == *from_meta,
          where,
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
          where,
          ": the package has no tensordict.",
          what,
          " metadata; pass the keys: AOTIModule(path, in_keys, out_keys)");
      given = std::move(from_meta);
    }
    TORCH_CHECK_VALUE(
        !given->empty(), where, ": the ", what, " must not be empty");
    return std::move(*given);
  };
  s.in_keys = pick(in_keys, meta_in, "in_keys");
  s.out_keys = pick(out_keys, meta_out, "out_keys");
  s.package_outputs = s.out_keys;

  if (const std::string* text = get("tensordict.spec")) {
    aoti_package_meta::parse_spec(*text, path, s);
  }
  if (files.wrapper_source) {
    s.input_checks = parse_input_checks(*files.wrapper_source, label);
  }
  // A call that reaches the kernels with a wrong shape reads out of bounds
  // or returns wrong values silently: a package must say what it takes.
  TORCH_CHECK(
      s.has_spec || s.input_checks,
      label,
      " has neither tensordict.spec nor a wrapper source with the input "
      "checks AOTInductor compiles into every package, so its inputs cannot "
      "be checked before it runs; export it again (tensordict_cpp.export, or "
      "torch._inductor.aoti_compile_and_package, which keeps the source)");
  if (probabilistic_text != nullptr) {
    s.head = aoti_package_meta::parse_probabilistic(
        *probabilistic_text, path, s.package_outputs);
    for (const NestedKey& key : s.head->out_keys()) {
      TORCH_CHECK_VALUE(
          std::find(s.out_keys.begin(), s.out_keys.end(), key) ==
              s.out_keys.end(),
          where,
          ": the distribution writes ",
          key.to_string(),
          ", which the package returns too");
      s.out_keys.push_back(key);
    }
  }
  return s;
}

std::vector<std::string> parse_input_names(
    const std::string& text, const std::string& path) {
  const std::string what = c10::str("AOTI package '", path, "' call spec");
  const Json spec = aoti_package_meta::parse_value(text, what);
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
  const Json names =
      aoti_package_meta::parse_value(context->get<std::string>(), what);
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

size_t parse_output_count(const std::string& text, const std::string& path) {
  const std::string what = c10::str("AOTI package '", path, "' call spec");
  const Json spec = aoti_package_meta::parse_value(text, what);
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

std::vector<AotiInput> match_inputs(
    const AotiPackageSpec& spec,
    const std::vector<std::string>& input_names,
    const std::string& where) {
  const std::vector<NestedKey>& ins = spec.in_keys;
  std::map<std::string, NestedKey> by_name;
  for (const NestedKey& key : ins) {
    const std::string name = aoti_input_name(key);
    TORCH_CHECK_VALUE(
        by_name.emplace(name, key).second,
        where,
        ": in_keys ",
        keys_to_string(ins),
        " give the input name '",
        name,
        "' twice");
  }
  if (spec.input_checks) {
    TORCH_CHECK(
        spec.input_checks->size() == input_names.size(),
        where,
        ": its wrapper source checks ",
        spec.input_checks->size(),
        " inputs, but its call spec names ",
        input_names.size());
  }
  std::vector<AotiInput> inputs;
  for (size_t i = 0; i < input_names.size(); ++i) {
    const std::string& name = input_names[i];
    const auto it = by_name.find(name);
    TORCH_CHECK_VALUE(
        it != by_name.end(),
        where,
        ": the package's input '",
        name,
        "' matches none of the in_keys ",
        keys_to_string(ins),
        " (nested keys are joined with '_')");
    AotiInput input{it->second, name, {}, {}, {}, {}};
    if (spec.has_spec) {
      const auto found = spec.spec_inputs.find(name);
      TORCH_CHECK(
          found != spec.spec_inputs.end() && found->second.key == it->second,
          where,
          ": tensordict.spec does not describe the input '",
          name,
          "' as the key ",
          it->second.to_string());
      input.dtype = found->second.dtype;
      input.shape = found->second.shape;
      input.device = found->second.device;
    }
    if (spec.input_checks) {
      input.check = (*spec.input_checks)[i];
    }
    inputs.push_back(std::move(input));
    by_name.erase(it);
  }
  TORCH_CHECK_VALUE(
      by_name.empty(),
      where,
      ": the in_key ",
      by_name.empty() ? std::string() : by_name.begin()->second.to_string(),
      " is not an input of the package, whose inputs are ",
      c10::Join(", ", input_names));
  return inputs;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
