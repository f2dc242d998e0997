// The reprs of a class level; see NOTE [Class reprs] in repr/class_repr.h.

#include "repr/class_repr.h"

#include <algorithm>
#include <vector>

#include "core/tensor_dict_impl.h"
#include "repr/compact_repr.h"
#include "repr/value_repr.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

bool ClassReprHook::has_field(std::string_view name) const {
  for (size_t i = 0; i < field_count(); ++i) {
    if (field_name(i) == name) {
      return true;
    }
  }
  return false;
}

std::string class_repr(
    const TensorDict& td,
    const ClassReprHook& hook,
    const PrintOptions& options) {
  return options.compact() ? class_repr_compact(td, hook, options)
                           : class_repr_detailed(td, hook, options);
}

namespace {

// The entries of a class level (see NOTE [Compact repr]): the set fields,
// sorted as the options say, then the unset ones as `None` in field order,
// as Python appends them.
std::vector<CompactEntry> class_compact_body(
    const TensorDict& td,
    const ClassReprHook& hook,
    const PrintOptions& options) {
  const TensorDictImpl& impl = *td.unsafeGetImpl();
  const auto batch_dims = static_cast<int64_t>(impl.batch_size.size());
  std::vector<CompactEntry> entries;
  std::vector<CompactEntry> unset;
  for (size_t i = 0; i < hook.field_count(); ++i) {
    const std::string& name = hook.field_name(i);
    const Value* value = hook.field_value(td, i);
    if (value == nullptr) {
      unset.push_back({name, compact_token_node("None")});
      continue;
    }
    ClassReprHookPtr nested =
        value->is_tensordict() ? hook.nested(i) : ClassReprHookPtr();
    if (nested) {
      const TensorDict& dict = value->tensordict();
      entries.push_back(
          {name,
           compact_container(
               nested->name() +
                   compact_extra_dims(dict.batch_size(), batch_dims),
               class_compact_body(dict, *nested, options))});
    } else {
      entries.push_back(
          {name, compact_value(*value, batch_dims, impl.device, options)});
    }
  }
  sort_compact_entries(entries, options);
  for (CompactEntry& entry : unset) {
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::string join_lines(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    out += (i > 0 ? ",\n" : "") + parts[i];
  }
  return out;
}

}  // namespace

std::string class_repr_compact(
    const TensorDict& td,
    const ClassReprHook& hook,
    const PrintOptions& options) {
  const TensorDictImpl& impl = *td.unsafeGetImpl();
  std::vector<std::string> header =
      compact_header(impl.batch_size, impl.device, options);
  // A field named like a header item replaces it, as in Python.
  for (const char* item : {"batch_size", "device"}) {
    if (hook.has_field(item)) {
      const std::string prefix = std::string(item) + "=";
      header.erase(
          std::remove_if(
              header.begin(),
              header.end(),
              [&](const std::string& h) { return h.rfind(prefix, 0) == 0; }),
          header.end());
    }
  }
  return compact_repr(
      hook.name(), header, class_compact_body(td, hook, options));
}

std::string class_repr_detailed(
    const TensorDict& td,
    const ClassReprHook& hook,
    const PrintOptions& options) {
  const TensorDictImpl& impl = *td.unsafeGetImpl();
  std::vector<std::string> lines;
  std::vector<std::string> none_lines;
  for (size_t i = 0; i < hook.field_count(); ++i) {
    const std::string& name = hook.field_name(i);
    const Value* value = hook.field_value(td, i);
    if (value == nullptr) {
      none_lines.push_back(name + "=None");
      continue;
    }
    ClassReprHookPtr nested =
        value->is_tensordict() ? hook.nested(i) : ClassReprHookPtr();
    lines.push_back(
        name + "=" +
        (nested ? class_repr_detailed(value->tensordict(), *nested, options)
                : value_repr(*value, options)));
  }
  std::sort(lines.begin(), lines.end());
  // Python always starts with the (possibly empty) block of set fields, so
  // a class with none prints "Name(\n,\n    a=None, ...".
  std::vector<std::string> parts;
  parts.push_back("\n" + indent_lines(join_lines(lines), "    "));
  if (!none_lines.empty()) {
    parts.push_back(indent_lines(join_lines(none_lines), "    "));
  }
  if (!hook.has_field("batch_size")) {
    parts.push_back("    batch_size=" + size_repr(impl.batch_size));
  } else if (!hook.has_field("shape")) {
    parts.push_back("    shape=" + size_repr(impl.batch_size));
  }
  if (!hook.has_field("device")) {
    parts.push_back("    device=" + device_repr(impl.device));
  }
  parts.push_back(std::string("    is_shared=") + python_bool(impl.shared));
  return hook.name() + "(" + join_lines(parts) + ")";
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
