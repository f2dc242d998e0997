// A frozen class has no usable setter.
#include <tensordict/tensor_class.h>

struct Point : tensordict::TensorClass<Point, tensordict::ClassFlags::kFrozen> {
  TENSORDICT_FIELDS(Point, x)
};

void write(Point& p, const at::Tensor& t) {
  p.set_x(t);
}
