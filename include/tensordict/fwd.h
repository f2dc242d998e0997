#pragma once

/// @file
/// Forward declarations of the public classes and the Json type, for
/// headers that only name them.

#include <nlohmann/json_fwd.hpp>
#include <variant>

#include "tensordict/export.h"

/// The library: TensorDict, its entries, options and free functions.
TENSORDICT_BEGIN_NAMESPACE

class NestedKey;
class NonTensorData;
class NonTensorStack;
class TensorDict;
class Value;
class Item;
class LazyStackedTensorDict;
class StateDict;
struct MemmapOptions;
struct LoadMemmapOptions;

namespace detail {
class TensorDictImpl;
}  // namespace detail

namespace nn {
class AnyTensorDictModule;
}  // namespace nn

/// The JSON value type that non-tensor entries hold (null, bool, integers,
/// doubles, strings, lists and objects). Objects keep their keys in
/// insertion order, as Python dicts do, so JSON round-trips exactly.
/// Public headers see only this declaration; include <tensordict/json.h>
/// for the complete type.
using Json = nlohmann::ordered_json;

/// What a file or directory holds at its root: a dict or a lazy stack. The
/// loaders that take either (`load_memmap_any`, `from_consolidated_any`,
/// `from_safetensors_any`) return it, as Python's loaders return either
/// class.
using LoadedTree = std::variant<TensorDict, LazyStackedTensorDict>;

TENSORDICT_END_NAMESPACE
