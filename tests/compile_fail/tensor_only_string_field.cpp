// A tensor_only class cannot declare a string field.
#include <tensordict/tensor_class.h>

#include <string>

struct Point
    : tensordict::TensorClass<Point, tensordict::ClassFlags::kTensorOnly> {
  TENSORDICT_FIELDS(Point, x, (std::string, label))
};
