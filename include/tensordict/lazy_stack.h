#pragma once

// (in progress) LazyStackedTensorDict.

#include "tensordict/tensor_dict.h"
