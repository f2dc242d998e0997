// tensor_only cannot be combined with nocast (nor autocast).
#include <tensordict/tensor_class.h>

using tensordict::ClassFlags;

struct Point
    : tensordict::
          TensorClass<Point, ClassFlags::kTensorOnly | ClassFlags::kNocast> {
  TENSORDICT_FIELDS(Point, x)
};

Point make() {
  return Point();
}
