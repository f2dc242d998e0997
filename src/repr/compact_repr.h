#pragma once

// The compact repr, written once for TensorDict, LazyStackedTensorDict and
// (later) TensorClass. See NOTE [Compact repr].

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensordict/fwd.h"
#include "tensordict/print_options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

// NOTE [Compact repr]
// Python's `set_printoptions(compact=True)` (its default) prints a dict as
//   TensorDict(batch_size=[3], fields={a: i64[2], b: {c: bool[]}, s: str})
// built from metadata only, in two steps:
//  1. an entry tree: each level is a list of (key, node) entries, a node
//     being a token (`f32[3]`: dtype and the dims after the batch dims,
//     `@cuda:0` when the dict has no device and the tensor is not on cpu;
//     a non-tensor's type name, `str`, `NonTensorStack`) or a container (a
//     prefix, "" or the extra batch dims `[4]` or a class name, and its own
//     entries). Each level is sorted by the text "key: flat node" when
//     `sort_keys` is alphabetical;
//  2. the render: a container stays on one line when it fits in 80
//     columns with what comes before and after it on its line; otherwise it
//     prints one entry per line, indented four more spaces, each entry
//     rendered by the same rule. Columns count code points, as Python's
//     len() does.
// `compact_repr` assembles `Name(header..., fields={...})`, with a lazy
// stack's `exclusive_fields={0: {...}}` after the fields.
//
// A TensorClass prints the same way: its class name instead of TensorDict,
// no `batch_size` (or `device`) header item when the class has such a
// field, its nested TensorClass entries as containers whose prefix is the
// class name (`compact_container(name + compact_extra_dims(...), ...)`), and
// its fields that hold no tensor appended after the sorted entries as
// tokens of their type name (`None`, `str`, `int`).

struct CompactEntry;

/// A node of the entry tree: a token, or a container of entries.
struct CompactNode {
  /// The token, or the container's prefix ("", "[4]", a class name).
  std::string text;
  /// True for a container, even an empty one.
  bool container = false;
  /// A container's entries, in print order.
  std::vector<CompactEntry> entries;
};

/// One "key: node" entry.
struct CompactEntry {
  std::string key;
  CompactNode node;
};

/// Returns a token node.
CompactNode compact_token_node(std::string token);
/// Returns a container node.
CompactNode compact_container(
    std::string prefix, std::vector<CompactEntry> entries);

/// Returns Python's short dtype name: f32, i64, u8, c64, bf16, bool.
std::string compact_dtype(c10::ScalarType dtype);
/// Returns dims as Python's compact repr prints them: "[4,3]", "[]".
std::string compact_dims(c10::IntArrayRef dims);
/// Returns the batch dims of a nested dict after its parent's:
/// `compact_dims(batch_size[parent_batch_dims:])`, or "" when there are
/// none.
std::string compact_extra_dims(
    c10::IntArrayRef batch_size, int64_t parent_batch_dims);
/// Returns the token of a tensor entry: `[shape]` after the dtype when
/// `show_dtype`, then `@` and the sorted devices when `dict_device` is unset
/// and they are not just cpu.
std::string compact_token(
    c10::IntArrayRef shape,
    c10::ScalarType dtype,
    const std::vector<c10::Device>& devices,
    const std::optional<c10::Device>& dict_device,
    const PrintOptions& options);
/// Returns the token of a non-tensor entry: the Python type name of a
/// NonTensorData's value (`str`, `int`, `float`, `bool`, `NoneType`,
/// `list`, `dict`), or `NonTensorStack`.
std::string compact_non_tensor(const Value& value);

/// Returns the node of a lazy stack entry of a dict with
/// `parent_batch_dims` batch dims: `LazyStackedTensorDict[extra]{...}` with
/// the fields its elements share, as Python prints it
/// (src/core/lazy_stack.cpp).
CompactNode compact_lazy_stack_node(
    const LazyStackedTensorDict& stack,
    int64_t parent_batch_dims,
    const PrintOptions& options);

/// Returns the node of one entry of a plain dict with `batch_dims` batch
/// dims and device `dict_device`: a token, or a nested dict's container.
CompactNode compact_value(
    const Value& value,
    int64_t batch_dims,
    const std::optional<c10::Device>& dict_device,
    const PrintOptions& options);
/// Returns the entries of a plain dict, sorted as `options` says.
std::vector<CompactEntry> compact_entries(
    const TensorDict& td, const PrintOptions& options);
/// Sorts one level's entries by "key: flat node" when `sort_keys` is
/// alphabetical; keeps them in order otherwise.
void sort_compact_entries(
    std::vector<CompactEntry>& entries, const PrintOptions& options);

/// Returns the header items of a dict: `batch_size=[...]` when
/// `show_batch_size`, `device=...` when `show_device` and a device is set.
std::vector<std::string> compact_header(
    c10::IntArrayRef batch_size,
    const std::optional<c10::Device>& device,
    const PrintOptions& options);

/// Returns a node on one line: `prefix{k: v, ...}` or the token.
std::string compact_flat(const CompactNode& node);
/// Renders `node` given the `used` columns before it on its line and the
/// `tail` columns that follow it; wrapped lines start with `indent` plus
/// four spaces. See NOTE [Compact repr].
std::string compact_render(
    const CompactNode& node, std::string_view indent, size_t used, size_t tail);
/// Returns `class_name(h1, h2, fields={...})`, with `, exclusive_fields=
/// {i: {...}, ...}` after the fields when `exclusive` is not empty.
std::string compact_repr(
    std::string_view class_name,
    const std::vector<std::string>& header,
    std::vector<CompactEntry> body,
    std::vector<CompactEntry> exclusive = {});

}  // namespace detail
TENSORDICT_END_NAMESPACE
