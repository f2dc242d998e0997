// The reprs of LazyStackedTensorDict, detailed and compact, as Python's lazy
// stack prints them: the keys its elements share, then each element's own.

#include <c10/core/ScalarType.h>

#include <algorithm>
#include <string>
#include <utility>

#include "core/key_path.h"
#include "core/python_class.h"
#include "core/stacked.h"
#include "core/walk.h"
#include "repr/compact_repr.h"
#include "repr/value_repr.h"
#include "tensordict/json.h"
#include "tensordict/lazy_stack.h"
#include "util/python_spelling.h"
#include "util/shared_memory.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

using detail::device_repr;
using detail::Node;
using detail::python_bool;
using detail::same_kind;
using detail::tensor_repr;
using detail::stacked::common_nodes;
using detail::stacked::member_values;
using detail::stacked::nested_dicts;
using detail::stacked::stack_non_tensors;

// Python's `_td_fields`: the "key: repr" lines, sorted, indented.
std::string td_fields(
    std::vector<std::string> fields, const PrintOptions& options) {
  if (options.sort_keys() == SortKeys::kAlphabetical) {
    std::sort(fields.begin(), fields.end());
  }
  return detail::indent_lines("\n" + detail::join_parts(fields, ",\n"), "    ");
}

// What the elements' tensors of one entry share, as Python's `_plain_leaf`
// and `_compact_leaf` see it: the element shape with -1 where the elements
// differ ([-1] when their ranks differ), the promoted dtype and the
// distinct devices.
struct StackedLeaf {
  std::vector<int64_t> shape;
  bool ragged = false;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  std::vector<c10::Device> devices;
};

StackedLeaf stacked_leaf(const std::vector<Value>& values) {
  const at::Tensor& first = values[0].tensor();
  StackedLeaf leaf;
  leaf.shape = first.sizes().vec();
  leaf.dtype = first.scalar_type();
  for (const Value& v : values) {
    const at::Tensor& t = v.tensor();
    if (std::find(leaf.devices.begin(), leaf.devices.end(), t.device()) ==
        leaf.devices.end()) {
      leaf.devices.push_back(t.device());
    }
    leaf.dtype = c10::promoteTypes(leaf.dtype, t.scalar_type());
    if (leaf.ragged) {
      continue;
    }
    if (t.dim() != static_cast<int64_t>(leaf.shape.size())) {
      leaf.ragged = true;
      leaf.shape = {-1};
      continue;
    }
    for (size_t d = 0; d < leaf.shape.size(); ++d) {
      if (leaf.shape[d] != t.size(static_cast<int64_t>(d))) {
        leaf.shape[d] = -1;
      }
    }
  }
  return leaf;
}

// Python's `_plain_leaf` + `_stacked_repr`: the stacked shape with -1 where
// the elements differ ([-1] when their ranks differ); the promoted dtype
// when the stack would succeed, else the first tensor's attributes.
std::string stacked_tensor_repr(
    const std::vector<Value>& values, int64_t stack_dim) {
  const at::Tensor& first = values[0].tensor();
  StackedLeaf leaf = stacked_leaf(values);
  std::vector<int64_t>& shape = leaf.shape;
  if (!leaf.ragged) {
    shape.insert(
        shape.begin() + stack_dim, static_cast<int64_t>(values.size()));
  }
  const bool unknown = std::find(shape.begin(), shape.end(), -1) != shape.end();
  if (!unknown && leaf.devices.size() == 1 &&
      leaf.dtype != c10::ScalarType::Undefined) {
    return tensor_repr(
        shape, first.device(), leaf.dtype, first.device().type() == c10::kCUDA);
  }
  return tensor_repr(
      shape,
      first.device(),
      first.scalar_type(),
      detail::tensor_is_shared(first));
}

// Python's `_mixed_repr`: "[Tensor, NonTensorData]", first appearances.
std::string mixed_repr(const std::vector<Value>& values) {
  std::vector<std::string> names;
  for (const Value& v : values) {
    std::string name = v.type_name();
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      names.push_back(std::move(name));
    }
  }
  return "[" + detail::join_parts(names, ", ") + "]";
}

bool is_common_key(const std::vector<const Node*>& common, const Node& node) {
  return std::find_if(common.begin(), common.end(), [&](const Node* c) {
           return c->key == node.key;
         }) != common.end();
}

std::string lazy_repr(
    const LazyStackedTensorDict& stack, const PrintOptions& options) {
  const std::vector<TensorDict>& tds = stack.tensordicts();
  const std::vector<const Node*> common = common_nodes(tds);
  std::vector<std::string> fields;
  for (const Node* node : common) {
    const NestedKey key{std::string_view(node->key)};
    const std::vector<Value> values = member_values(tds, node->key, key);
    std::string text;
    const bool mixed =
        !std::all_of(values.begin(), values.end(), [&](const Value& v) {
          return same_kind(values[0], v);
        });
    if (mixed) {
      text = mixed_repr(values);
    } else if (values[0].is_tensor()) {
      text = stacked_tensor_repr(values, stack.stack_dim());
    } else if (values[0].is_tensordict()) {
      text = lazy_repr(
          LazyStackedTensorDict(nested_dicts(values), stack.stack_dim()),
          options);
    } else {
      text = stack_non_tensors(values, stack.stack_dim(), key).repr();
    }
    fields.push_back(node->key + ": " + text);
  }

  std::vector<std::string> exclusive;
  bool all_shared = true;
  for (size_t i = 0; i < tds.size(); ++i) {
    const auto& impl = *tds[i].unsafeGetImpl();
    all_shared = all_shared && impl.shared;
    std::vector<std::string> own;
    for (const auto& node : impl.nodes()) {
      if (!is_common_key(common, *node)) {
        own.push_back(
            node->key + ": " + detail::value_repr(node->value, options));
      }
    }
    if (!own.empty()) {
      exclusive.push_back(detail::indent_lines(
          c10::str(i, " ->", td_fields(own, options)), "    "));
    }
  }

  const std::string indent = "    ";
  std::vector<std::string> parts = {
      detail::indent_lines(
          "fields={" + td_fields(fields, options) + "}", indent),
      detail::indent_lines(
          "exclusive_fields={\n" + detail::join_parts(exclusive, ",\n") + "}",
          indent),
  };
  if (options.show_batch_size()) {
    parts.push_back(
        indent + "batch_size=" + detail::size_repr(stack.batch_size()));
  }
  if (options.show_device()) {
    parts.push_back(indent + "device=" + device_repr(stack.device()));
  }
  parts.push_back(indent + "is_shared=" + python_bool(all_shared));
  parts.push_back(indent + c10::str("stack_dim=", stack.stack_dim()));
  return "LazyStackedTensorDict(\n" + detail::join_parts(parts, ",\n") + ")";
}

std::vector<detail::CompactEntry> compact_stacked_entries(
    const std::vector<TensorDict>& tds,
    const std::optional<c10::Device>& device,
    const PrintOptions& options);

// Python's `_compact_entry` for an entry of a lazy stack whose elements have
// `member_dims` batch dims: the first element's entry decides its kind.
// Tensors merge as in `stacked_leaf`, after the batch dims, unless another
// element holds a non-tensor: the last one gives its type name, as Python
// reads the elements from the end. Throws where Python's compact repr fails
// (a dict in some elements only), so that `repr()` falls back to the
// detailed form as Python's does.
detail::CompactNode compact_stacked_value(
    const std::vector<Value>& values,
    int64_t member_dims,
    const std::optional<c10::Device>& device,
    const PrintOptions& options) {
  const Value& first = values[0];
  if (!first.is_tensor() && !first.is_tensordict()) {
    return detail::compact_token_node(detail::compact_non_tensor(first));
  }
  if (first.is_tensor()) {
    for (auto it = values.rbegin(); it != values.rend(); ++it) {
      if (!it->is_tensor() && !it->is_tensordict()) {
        return detail::compact_token_node(detail::compact_non_tensor(*it));
      }
    }
  }
  const auto dicts =
      std::count_if(values.begin(), values.end(), [](const Value& v) {
        return v.is_tensordict();
      });
  if (first.is_tensordict() && dicts == static_cast<int64_t>(values.size())) {
    const std::vector<TensorDict> nested = nested_dicts(values);
    return detail::compact_container(
        detail::compact_extra_dims(nested[0].batch_size(), member_dims),
        compact_stacked_entries(nested, device, options));
  }
  TORCH_CHECK(
      dicts == 0,
      "no compact repr: the entry is a TensorDict in some elements only");
  const StackedLeaf leaf = stacked_leaf(values);
  TORCH_CHECK(
      leaf.dtype != c10::ScalarType::Undefined,
      "no compact repr: the dtypes do not promote");
  const std::vector<int64_t> shape =
      leaf.ragged ? leaf.shape
                  : std::vector<int64_t>(
                        leaf.shape.begin() + member_dims, leaf.shape.end());
  return detail::compact_token_node(
      detail::compact_token(shape, leaf.dtype, leaf.devices, device, options));
}

// Python's `_compact_entries` over the keys every element holds.
std::vector<detail::CompactEntry> compact_stacked_entries(
    const std::vector<TensorDict>& tds,
    const std::optional<c10::Device>& device,
    const PrintOptions& options) {
  const int64_t member_dims = tds[0].batch_dims();
  std::vector<detail::CompactEntry> entries;
  for (const Node* node : common_nodes(tds)) {
    const NestedKey key{std::string_view(node->key)};
    entries.push_back(
        {node->key,
         compact_stacked_value(
             member_values(tds, node->key, key),
             member_dims,
             device,
             options)});
  }
  detail::sort_compact_entries(entries, options);
  return entries;
}

// Python's `_compact_repr` of a lazy stack: the header ends with the stack
// dim, and each element's own keys follow as `exclusive_fields`.
std::string lazy_compact_repr(
    const LazyStackedTensorDict& stack, const PrintOptions& options) {
  const std::vector<TensorDict>& tds = stack.tensordicts();
  std::vector<std::string> header =
      detail::compact_header(stack.batch_size(), stack.device(), options);
  header.push_back(c10::str("stack_dim=", stack.stack_dim()));
  const std::vector<const Node*> common = common_nodes(tds);
  std::vector<detail::CompactEntry> exclusive;
  for (size_t i = 0; i < tds.size(); ++i) {
    const auto& impl = *tds[i].unsafeGetImpl();
    const auto batch_dims = static_cast<int64_t>(impl.batch_size.size());
    std::vector<detail::CompactEntry> own;
    for (const auto& node : impl.nodes()) {
      if (!is_common_key(common, *node)) {
        own.push_back(
            {node->key,
             detail::compact_value(
                 node->value, batch_dims, impl.device, options)});
      }
    }
    if (!own.empty()) {
      detail::sort_compact_entries(own, options);
      exclusive.push_back(
          {std::to_string(i), detail::compact_container("", std::move(own))});
    }
  }
  return detail::compact_repr(
      "LazyStackedTensorDict",
      header,
      compact_stacked_entries(tds, stack.device(), options),
      std::move(exclusive));
}

}  // namespace

namespace detail {

CompactNode compact_lazy_stack_node(
    const LazyStackedTensorDict& stack,
    int64_t parent_batch_dims,
    const PrintOptions& options) {
  const std::string& cls = stack.python_class();
  std::string prefix =
      cls.empty() ? "LazyStackedTensorDict" : class_name_of(cls);
  prefix += compact_extra_dims(stack.batch_size(), parent_batch_dims);
  return compact_container(
      std::move(prefix),
      compact_stacked_entries(stack.tensordicts(), stack.device(), options));
}

}  // namespace detail

std::string LazyStackedTensorDict::repr() const {
  const PrintOptions options = get_printoptions();
  if (options.compact()) {
    // As Python's repr: where the compact form fails, the detailed one.
    try {
      return lazy_compact_repr(*this, options);
    } catch (const c10::Error&) {
    }
  }
  return lazy_repr(*this, options);
}

std::string LazyStackedTensorDict::repr_compact() const {
  return lazy_compact_repr(*this, get_printoptions());
}

std::string LazyStackedTensorDict::repr_detailed() const {
  return lazy_repr(*this, get_printoptions());
}

std::ostream& operator<<(
    std::ostream& out, const LazyStackedTensorDict& stack) {
  return out << stack.repr();
}

TENSORDICT_END_NAMESPACE
