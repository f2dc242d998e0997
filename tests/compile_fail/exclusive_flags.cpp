// autocast and nocast cannot be combined.
#include <tensordict/tensor_class.h>

using tensordict::ClassFlags;

struct Point
    : tensordict::
          TensorClass<Point, ClassFlags::kAutocast | ClassFlags::kNocast> {
  TENSORDICT_FIELDS(Point, x)
};

Point make() {
  return Point();
}
