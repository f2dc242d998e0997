// A frozen class cannot take a new batch size (Python's
// FrozenInstanceError).
#include <tensordict/tensor_class.h>

struct Point : tensordict::TensorClass<Point, tensordict::ClassFlags::kFrozen> {
  TENSORDICT_FIELDS(Point, x)
};

void shrink(Point& p) {
  p.set_batch_size({});
}
