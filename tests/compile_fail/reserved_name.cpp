// Without kShadow, a field cannot take the name of a TensorClass member.
#include <tensordict/tensor_class.h>

struct Point : tensordict::TensorClass<Point> {
  TENSORDICT_FIELDS(Point, x, batch_size)
};
