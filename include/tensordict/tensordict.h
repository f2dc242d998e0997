#pragma once

/// @file
/// Umbrella header: everything public in the library.

#include "tensordict/archive.h"
#include "tensordict/consolidate.h"
#include "tensordict/errors.h"
#include "tensordict/indexing.h"
#include "tensordict/json.h"
#include "tensordict/lazy_stack.h"
#include "tensordict/lazy_stacked_tensor_class.h"
#include "tensordict/map.h"
#include "tensordict/memmap.h"
#include "tensordict/module.h"
#include "tensordict/nested_key.h"
#include "tensordict/non_tensor.h"
#include "tensordict/options.h"
#include "tensordict/print_options.h"
#include "tensordict/safetensors.h"
#include "tensordict/state_dict.h"
#include "tensordict/tensor_class.h"
#include "tensordict/tensor_dict.h"
#include "tensordict/tensor_dict_params.h"
#include "tensordict/value.h"
#include "tensordict/vmap.h"
