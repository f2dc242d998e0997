#pragma once

// Private to src/: the state behind a LazyStackedTensorDict handle, for the
// floors above core/ that define its members (memmap/, consolidate/).

#include <c10/core/Device.h>
#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensordict/lazy_stack.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

class LazyStackedTensorDictImpl : public c10::intrusive_ptr_target {
 public:
  std::vector<TensorDict> tensordicts;  // never empty
  int64_t stack_dim = 0;                // in [0, batch dims of the elements]
  std::vector<int64_t> batch_size;      // the elements' with the stack inserted
  std::optional<c10::Device> device;
  std::optional<std::string> stack_dim_name;
  std::string python_class;  // "" unless a Python tensorclass wraps the stack
};

}  // namespace detail
TENSORDICT_END_NAMESPACE
