#pragma once

// The meta.json texts of a save, in Python's layout: a leaf's entry, the
// format members, and the files of lazy stacks and non-tensor values.
// Shared by the save plan, make_memmap and append. See NOTE [Memmap
// layout].

#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <string>

#include "core/key_path.h"
#include "tensordict/fwd.h"
#include "tensordict/options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Appends `key` to the JSON object `object` without searching it: for
/// keys known to be new, such as a dict's own. The ordered object copies
/// its members, values and all, when it grows: reserve it first.
void append_member(Json& object, std::string key, Json value);

/// A leaf's entry in its dict's meta.json, as Python writes it: `device`
/// is the source tensor's, which loading ignores.
Json leaf_meta(
    std::string device, c10::IntArrayRef shape, c10::ScalarType dtype);

/// The `_format_version` and `_class` members of a meta.json.
Json format_members(const char* class_id);

/// Returns `value` as dump_json writes it; throws naming the entry `path`
/// whose text is not UTF-8.
std::string dump_checked(
    const Json& value, bool spaced, bool ascii, const KeyPath& path);

/// The meta.json content of a NonTensorData or NonTensorStack directory, in
/// Python's layout; `path` names the entry in errors.
std::string non_tensor_meta(
    const Value& value, JsonStyle style, const KeyPath& path);

/// The meta.json of a lazy stack's directory (Python's layout: the stack
/// dim and its name; the elements are the sub-directories 0, 1, ...).
Json lazy_stack_meta(const LazyStackedTensorDict& stack);

}  // namespace detail
TENSORDICT_END_NAMESPACE
