// A class with explicit, non-frozen flags cannot extend a frozen one.
#include <tensordict/tensor_class.h>

using tensordict::ClassFlags;

struct Base : tensordict::TensorClass<Base, ClassFlags::kFrozen> {
  TENSORDICT_FIELDS(Base, x)
};

struct Child : tensordict::TensorClass<Child, ClassFlags::kShadow, Base> {
  TENSORDICT_FIELDS(Child, y)
};
