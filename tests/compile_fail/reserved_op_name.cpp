// Without kShadow, a field cannot take the name of a generated forwarder
// either: `div_` is the in-place half of a BINARY_PAIR entry of the op list.
#include <tensordict/tensor_class.h>

struct Point : tensordict::TensorClass<Point> {
  TENSORDICT_FIELDS(Point, x, div_)
};
