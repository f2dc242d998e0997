// A frozen class cannot rename its fields.
#include <tensordict/tensor_class.h>

struct Point : tensordict::TensorClass<Point, tensordict::ClassFlags::kFrozen> {
  TENSORDICT_FIELDS(Point, x, (std::optional<at::Tensor>, y))
};

void move(Point& p) {
  p.rename_key_("x", "y");
}
