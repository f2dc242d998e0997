#include "repr/value_repr.h"

#include <c10/util/Exception.h>

#include "tensordict/lazy_stack.h"
#include "tensordict/non_tensor.h"
#include "tensordict/value.h"
#include "util/python_spelling.h"
#include "util/shared_memory.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

std::string value_repr(const Value& value) {
  return value_repr(value, get_printoptions());
}

std::string value_repr(const Value& value, const PrintOptions& options) {
  switch (value.kind()) {
    case Value::Kind::kTensor: {
      const at::Tensor& t = value.tensor();
      return tensor_repr(
          t.sizes(), t.device(), t.scalar_type(), tensor_is_shared(t));
    }
    case Value::Kind::kTensorDict:
      return detailed_repr(value.tensordict(), options);
    case Value::Kind::kNonTensorData:
      return value.non_tensor_data().repr();
    case Value::Kind::kNonTensorStack:
      return value.non_tensor_stack().repr();
    case Value::Kind::kLazyStack:
      return value.lazy_stack().repr_detailed();
  }
  TORCH_INTERNAL_ASSERT(false, "unknown entry kind");
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
