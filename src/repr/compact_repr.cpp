// The compact repr: the entry tree and its 80-column render. See NOTE
// [Compact repr].

#include "repr/compact_repr.h"

#include <algorithm>
#include <utility>

#include "core/tensor_dict_impl.h"
#include "tensordict/json.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

namespace {

constexpr size_t kCompactWidth = 80;

// Python's len() of UTF-8 text: the code points, not the bytes.
size_t code_points(std::string_view text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) {
        return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
      }));
}

// Replaces every `from` in `text` by `to`, as Python's str.replace.
void replace_all(
    std::string& text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

}  // namespace

CompactNode compact_token_node(std::string token) {
  CompactNode node;
  node.text = std::move(token);
  return node;
}

CompactNode compact_container(
    std::string prefix, std::vector<CompactEntry> entries) {
  CompactNode node;
  node.text = std::move(prefix);
  node.container = true;
  node.entries = std::move(entries);
  return node;
}

std::string compact_dtype(c10::ScalarType dtype) {
  std::string name =
      dtype_name(dtype).substr(std::string_view("torch.").size());
  // In this order, so that "uint8" becomes "u8", not "ui8".
  replace_all(name, "float", "f");
  replace_all(name, "uint", "u");
  replace_all(name, "int", "i");
  replace_all(name, "complex", "c");
  return name;
}

std::string compact_dims(c10::IntArrayRef dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    out += i > 0 ? "," : "";
    out += std::to_string(dims[i]);
  }
  return out + "]";
}

std::string compact_extra_dims(
    c10::IntArrayRef batch_size, int64_t parent_batch_dims) {
  const auto skip = static_cast<size_t>(parent_batch_dims);
  return batch_size.size() > skip ? compact_dims(batch_size.slice(skip)) : "";
}

std::string compact_token(
    c10::IntArrayRef shape,
    c10::ScalarType dtype,
    const std::vector<c10::Device>& devices,
    const std::optional<c10::Device>& dict_device,
    const PrintOptions& options) {
  std::string token = compact_dims(shape);
  if (options.show_dtype()) {
    token = compact_dtype(dtype) + token;
  }
  const bool cpu_only = std::all_of(
      devices.begin(), devices.end(), [](c10::Device d) { return d.is_cpu(); });
  if (!dict_device && !cpu_only) {
    std::vector<std::string> names;
    for (c10::Device d : devices) {
      names.push_back(d.str());
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    token += "@";
    for (size_t i = 0; i < names.size(); ++i) {
      token += (i > 0 ? "," : "") + names[i];
    }
  }
  return token;
}

std::string compact_non_tensor(const Value& value) {
  if (value.is_non_tensor_stack()) {
    return "NonTensorStack";
  }
  const Json& data = value.non_tensor_data().data();
  switch (data.type()) {
    case Json::value_t::null:
      return "NoneType";
    case Json::value_t::boolean:
      return "bool";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "int";
    case Json::value_t::number_float:
      return "float";
    case Json::value_t::string:
      return "str";
    case Json::value_t::array:
      return "list";
    case Json::value_t::object:
      return "dict";
    case Json::value_t::binary:
      return "bytes";
    case Json::value_t::discarded:
      break;
  }
  return "NoneType";
}

CompactNode compact_value(
    const Value& value,
    int64_t batch_dims,
    const std::optional<c10::Device>& dict_device,
    const PrintOptions& options) {
  switch (value.kind()) {
    case Value::Kind::kTensor: {
      const at::Tensor& t = value.tensor();
      return compact_token_node(compact_token(
          t.sizes().slice(static_cast<size_t>(batch_dims)),
          t.scalar_type(),
          {t.device()},
          dict_device,
          options));
    }
    case Value::Kind::kTensorDict: {
      const TensorDict& sub = value.tensordict();
      return compact_container(
          compact_extra_dims(sub.batch_size(), batch_dims),
          compact_entries(sub, options));
    }
    case Value::Kind::kLazyStack:
      return compact_lazy_stack_node(value.lazy_stack(), batch_dims, options);
    case Value::Kind::kNonTensorData:
    case Value::Kind::kNonTensorStack:
      return compact_token_node(compact_non_tensor(value));
  }
  TORCH_INTERNAL_ASSERT(false, "unknown entry kind");
}

std::vector<CompactEntry> compact_entries(
    const TensorDict& td, const PrintOptions& options) {
  const TensorDictImpl& impl = *td.unsafeGetImpl();
  const auto batch_dims = static_cast<int64_t>(impl.batch_size.size());
  std::vector<CompactEntry> entries;
  entries.reserve(impl.nodes().size());
  for (const auto& node : impl.nodes()) {
    entries.push_back(
        {node->key,
         compact_value(node->value, batch_dims, impl.device, options)});
  }
  sort_compact_entries(entries, options);
  return entries;
}

void sort_compact_entries(
    std::vector<CompactEntry>& entries, const PrintOptions& options) {
  if (options.sort_keys() != SortKeys::kAlphabetical) {
    return;
  }
  std::vector<std::pair<std::string, CompactEntry>> keyed;
  keyed.reserve(entries.size());
  for (CompactEntry& entry : entries) {
    std::string text = entry.key + ": " + compact_flat(entry.node);
    keyed.emplace_back(std::move(text), std::move(entry));
  }
  std::stable_sort(
      keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
        return a.first < b.first;
      });
  for (size_t i = 0; i < entries.size(); ++i) {
    entries[i] = std::move(keyed[i].second);
  }
}

std::vector<std::string> compact_header(
    c10::IntArrayRef batch_size,
    const std::optional<c10::Device>& device,
    const PrintOptions& options) {
  std::vector<std::string> header;
  if (options.show_batch_size()) {
    header.push_back("batch_size=" + compact_dims(batch_size));
  }
  if (options.show_device() && device) {
    header.push_back("device=" + device->str());
  }
  return header;
}

std::string compact_flat(const CompactNode& node) {
  if (!node.container) {
    return node.text;
  }
  return node.text + "{" +
         join_spelled(
             node.entries,
             [](const CompactEntry& entry) {
               return entry.key + ": " + compact_flat(entry.node);
             }) +
         "}";
}

std::string compact_render(
    const CompactNode& node,
    std::string_view indent,
    size_t used,
    size_t tail) {
  std::string flat = compact_flat(node);
  if (!node.container || node.entries.empty() ||
      used + code_points(flat) + tail <= kCompactWidth) {
    return flat;
  }
  const std::string pad = std::string(indent) + "    ";
  std::string out = node.text + "{\n";
  for (size_t i = 0; i < node.entries.size(); ++i) {
    const CompactEntry& entry = node.entries[i];
    const bool last = i + 1 == node.entries.size();
    out += i > 0 ? ",\n" : "";
    out += pad + entry.key + ": ";
    out += compact_render(
        entry.node,
        pad,
        code_points(pad) + code_points(entry.key) + 2,
        last ? tail + 1 : 1);
  }
  return out + "}";
}

std::string compact_repr(
    std::string_view class_name,
    const std::vector<std::string>& header,
    std::vector<CompactEntry> body,
    std::vector<CompactEntry> exclusive) {
  constexpr std::string_view kExclusive = ", exclusive_fields=";
  std::string out = std::string(class_name) + "(";
  for (const std::string& item : header) {
    out += item + ", ";
  }
  out += "fields=";
  // The exclusive fields follow on the last line of the fields.
  const size_t tail = exclusive.empty() ? 1 : 1 + kExclusive.size() + 1;
  out += compact_render(
      compact_container("", std::move(body)), "", code_points(out), tail);
  if (!exclusive.empty()) {
    const size_t line_start = out.rfind('\n') + 1;  // 0 when there is none
    const size_t used = code_points(std::string_view(out).substr(line_start)) +
                        kExclusive.size();
    out += kExclusive;
    out += compact_render(
        compact_container("", std::move(exclusive)), "", used, 1);
  }
  return out + ")";
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
