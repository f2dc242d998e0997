#pragma once

/// @file
/// Forward declarations of the public classes and the Json type, for
/// headers that only name them.

#include <nlohmann/json_fwd.hpp>

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

/// The JSON value type that non-tensor entries hold (null, bool, integers,
/// doubles, strings, lists and objects). Objects keep their keys in
/// insertion order, as Python dicts do, so JSON round-trips exactly.
/// Public headers see only this declaration; include <tensordict/json.h>
/// for the complete type.
using Json = nlohmann::ordered_json;

TENSORDICT_END_NAMESPACE
