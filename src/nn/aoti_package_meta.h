#pragma once

// The package-spec reader of AOTIModule: everything a `.pt2` package says
// about itself (its metadata, tensordict.spec, tensordict.probabilistic and
// the input checks of its wrapper source), read from its bytes and checked,
// before (and without) loading its library. Pure: no loader, no device, no
// file system, so that a fuzz target (fuzz/fuzz_aoti_package_meta.cpp)
// feeds it arbitrary bytes. See NOTE [Package contract] and NOTE [Untrusted
// packages] in tensordict/aoti.h.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tensordict/export.h"
#include "tensordict/nested_key.h"

TENSORDICT_BEGIN_NAMESPACE
namespace nn {
class ProbabilisticTensorDictModuleImpl;
}  // namespace nn

namespace detail {

// The entries of a package that its spec is read from, as bytes.
struct AotiPackageFiles {
  // The model's `*_metadata.json`: a JSON object of strings.
  std::string metadata_json;
  // The model's generated wrapper source (`*.wrapper.cpp`), which
  // AOTInductor packages with every model; unset if the package has none.
  std::optional<std::string> wrapper_source;
};

// The entries the spec is read from in the zip archive of `size` bytes at
// `data`, for the model `model_name` (`<top>/data/aotinductor/<model>/`).
// Checks the archive's structure and every entry's CRC-32 first, and that
// each entry is stored (torch writes packages uncompressed), as
// read_package_file (nn/aoti_zip.h) does for a file. Throws
// c10::Error naming `label` and the entry otherwise, if the model has no
// metadata, or if it has two metadata files that differ.
AotiPackageFiles read_package_files(
    const unsigned char* data,
    uint64_t size,
    const std::string& label,
    const std::string& model_name);

// One dim of an input as AOTInductor checks it: an exact size, or a range.
struct AotiDimCheck {
  std::optional<int64_t> size;
  std::optional<int64_t> min;
  std::optional<int64_t> max;
};

// What the generated `check_input_<i>` function of a package verifies of
// its i-th input (the checks AOTI_RUNTIME_CHECK_INPUTS switches on): read
// from the wrapper source, so that a call is checked before it runs, with
// errors that name the input's key.
struct AotiInputCheck {
  std::optional<c10::ScalarType> dtype;
  // One per dim: the rank is the number of dims the checks read.
  std::vector<AotiDimCheck> sizes;
  // Static strides; nullopt where the stride is symbolic.
  std::vector<std::optional<int64_t>> strides;
  std::optional<c10::DeviceType> device_type;
};

// Returns the checks of every input of the package, in input order, read
// from its wrapper source. Throws c10::Error naming `label` if a check is
// malformed, if an input is checked twice or not at all, or if a check has
// a form this build does not know (a newer AOTInductor): then the package
// cannot be checked, and is refused rather than run unchecked.
std::vector<AotiInputCheck> parse_input_checks(
    const std::string& source, const std::string& label);

// One input as tensordict.spec describes it.
struct AotiInputSpec {
  explicit AotiInputSpec(NestedKey key_) : key(std::move(key_)) {}
  NestedKey key;
  std::string name;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> shape;  // after the batch dims
  std::optional<c10::Device> device;
};

// One weight's dtype and (when known) shape.
struct AotiWeightSpec {
  std::optional<c10::ScalarType> dtype;
  std::optional<std::vector<int64_t>> shape;
};

// Everything a package says about itself, checked.
struct AotiPackageSpec {
  // The metadata, user entries and AOTInductor's.
  std::unordered_map<std::string, std::string> metadata;
  // AOTI_DEVICE_KEY: "cpu" or "cuda".
  c10::DeviceType device_type = c10::kCPU;
  // AOTI_CPU_ISA, empty if absent.
  std::string cpu_isa;
  // The in_keys and out_keys of the module: the metadata's, or the
  // caller's (which must then equal them). out_keys end with the head's.
  std::vector<NestedKey> in_keys;
  std::vector<NestedKey> out_keys;
  // What the package returns, in order (out_keys without the head's).
  std::vector<NestedKey> package_outputs;
  // From tensordict.spec, if the package has one.
  bool has_spec = false;
  std::vector<int64_t> batch_size;  // -1 for the dynamic dim
  int64_t batch_min = 0;
  std::optional<int64_t> batch_max;
  std::map<std::string, AotiInputSpec> spec_inputs;  // by input name
  std::string weights_prefix;
  bool weights_in_package = true;
  std::map<std::string, AotiWeightSpec> weights;
  // From the wrapper source, in input order; unset if it has none.
  std::optional<std::vector<AotiInputCheck>> input_checks;
  // The distribution of a format-2 package; null otherwise.
  std::shared_ptr<nn::ProbabilisticTensorDictModuleImpl> head;
};

// Reads and checks the spec of the package `path` (used in messages) from
// `files`, with the keys the caller gives (nullopt: the metadata's).
// Throws c10::Error (ValueError for keys) naming the package and what is
// wrong: malformed metadata, an unknown format, no keys, keys that differ
// from the metadata's, a package of another torch version, a malformed
// tensordict.spec, tensordict.probabilistic or input check.
AotiPackageSpec read_package_spec(
    const AotiPackageFiles& files,
    const std::string& path,
    std::optional<std::vector<NestedKey>> in_keys,
    std::optional<std::vector<NestedKey>> out_keys);

// Returns the keyword input names of a call spec's inputs
// (`[1, {tuple: [(), {dict}]}]`, the form torch.export gives `f(**kwargs)`).
// Throws c10::Error naming `path` for any other form.
std::vector<std::string> parse_input_names(
    const std::string& text, const std::string& path);

// Returns how many tensors a call spec's outputs are: one leaf, or a tuple
// of leaves. Throws c10::Error naming `path` otherwise.
size_t parse_output_count(const std::string& text, const std::string& path);

// One input of a package, matched to its key: what every call checks.
struct AotiInput {
  NestedKey key;
  std::string name;
  // From tensordict.spec.
  std::optional<c10::ScalarType> dtype;
  std::optional<std::vector<int64_t>> shape;
  std::optional<c10::Device> device;
  // From the wrapper source.
  std::optional<AotiInputCheck> check;
};

// Matches the package's keyword input names (in its order) to the spec's
// in_keys (nested keys joined with "_") and returns the inputs in that
// order; `where` starts every message. Throws c10::ValueError if a name
// matches no in_key, an in_key no name, two in_keys give one name, and
// c10::Error if tensordict.spec or the input checks describe other inputs.
std::vector<AotiInput> match_inputs(
    const AotiPackageSpec& spec,
    const std::vector<std::string>& input_names,
    const std::string& where);

// Returns `key` joined with "_", the name the package gives its input.
std::string aoti_input_name(const NestedKey& key);

}  // namespace detail
TENSORDICT_END_NAMESPACE
