// Control: the same shapes as the other snippets, legal, so the harness is
// known to compile them when nothing is wrong.
#include <tensordict/tensor_class.h>

#include <string>

using tensordict::ClassFlags;

struct Base : tensordict::TensorClass<Base, ClassFlags::kFrozen> {
  TENSORDICT_FIELDS(Base, x)
};

struct Child : tensordict::TensorClass<Child, ClassFlags::kFrozen, Base> {
  TENSORDICT_FIELDS(Child, y)
};

struct Shadowed : tensordict::TensorClass<Shadowed, ClassFlags::kShadow> {
  TENSORDICT_FIELDS(Shadowed, x, batch_size, (std::string, label))
};

void write(Shadowed& s, const at::Tensor& t) {
  s.set_batch_size(t);
}
