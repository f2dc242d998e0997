#pragma once

// The TensorClasses and builders that the TensorClass test files
// (tensor_class*_test.cpp, lazy_stacked_tensor_class_test.cpp) share. A
// namespace of their own, so the files can share a unity batch; each file
// names what it uses with using-declarations.

#include <tensordict/tensor_class.h>

#include <optional>
#include <string>
#include <utility>

#include "support.h"

namespace tensor_class_testing {

using namespace tensordict;  // NOLINT(google-build-using-namespace)

struct Inner : TensorClass<Inner> {
  TENSORDICT_FIELDS(Inner, x)
};

struct Trajectory : TensorClass<Trajectory> {
  TENSORDICT_FIELDS(
      Trajectory,
      obs,
      action,
      (Inner, inner),
      (std::optional<TensorDict>, extra),
      (std::string, task),
      (std::optional<int64_t>, step),
      (std::optional<Json>, info),
      (std::optional<at::Tensor>, mask))
};

struct Cast : TensorClass<Cast, ClassFlags::kAutocast> {
  TENSORDICT_FIELDS(
      Cast,
      (int64_t, step),
      (double, ratio),
      (bool, done),
      (std::optional<std::string>, label))
};

struct NoCast : TensorClass<NoCast, ClassFlags::kNocast> {
  TENSORDICT_FIELDS(NoCast, (int64_t, step), (double, ratio))
};

struct Plain : TensorClass<Plain> {
  TENSORDICT_FIELDS(Plain, (int64_t, step), (double, ratio))
};

struct Frozen : TensorClass<Frozen, ClassFlags::kFrozen> {
  TENSORDICT_FIELDS(Frozen, x)
};

struct Fast : TensorClass<Fast, ClassFlags::kTensorOnly> {
  TENSORDICT_FIELDS(Fast, a, b, (std::optional<at::Tensor>, c))
};

struct Shadowing : TensorClass<Shadowing, ClassFlags::kShadow> {
  TENSORDICT_FIELDS(Shadowing, batch_size, x)
};

struct Base : TensorClass<Base, ClassFlags::kAutocast> {
  TENSORDICT_FIELDS(Base, obs, (int64_t, step))
};

struct Derived : TensorClass<Derived, ClassFlags::kInherit, Base> {
  TENSORDICT_FIELDS(Derived, reward)
};

struct FrozenBase : TensorClass<FrozenBase, ClassFlags::kFrozen> {
  TENSORDICT_FIELDS(FrozenBase, a)
};

struct FrozenChild : TensorClass<FrozenChild, ClassFlags::kFrozen, FrozenBase> {
  TENSORDICT_FIELDS(FrozenChild, b)
};

// Flag combinations Python accepts together; each compiles and keeps both
// behaviours (the exclusive ones are compile_fail tests).
struct FrozenCast
    : TensorClass<FrozenCast, ClassFlags::kFrozen | ClassFlags::kAutocast> {
  TENSORDICT_FIELDS(FrozenCast, x, (int64_t, step))
};

struct FrozenFast
    : TensorClass<FrozenFast, ClassFlags::kFrozen | ClassFlags::kTensorOnly> {
  TENSORDICT_FIELDS(FrozenFast, a, b)
};

struct ShadowNocast
    : TensorClass<ShadowNocast, ClassFlags::kShadow | ClassFlags::kNocast> {
  TENSORDICT_FIELDS(ShadowNocast, batch_size, (double, ratio))
};

struct Registered : TensorClass<Registered> {
  TENSORDICT_FIELDS(Registered, pos, (Inner, inner), (std::string, label))
};
TENSORDICT_PYTHON_CLASS(Registered, "<class 'tests.Registered'>");
TENSORDICT_PYTHON_CLASS(Inner, "<class 'tests.Inner'>");

struct Unregistered : TensorClass<Unregistered> {
  TENSORDICT_FIELDS(Unregistered, x)
};

inline Trajectory make_trajectory(int64_t batch = 4) {
  return Trajectory(
      {{"obs", torch::arange(batch * 3, torch::kFloat).reshape({batch, 3})},
       {"action", torch::ones({batch}, torch::kLong)},
       {"inner", Inner({{"x", torch::zeros({batch, 2})}}, {batch})},
       {"task", "reach"}},
      {batch});
}

// A Registered instance with batch size [2].
inline Registered make_registered(
    at::Tensor pos, at::Tensor inner_x, const std::string& label) {
  return Registered(
      {{"pos", std::move(pos)},
       {"inner", Inner({{"x", std::move(inner_x)}}, {2})},
       {"label", label}},
      {2});
}

struct Holder : TensorClass<Holder> {
  TENSORDICT_FIELDS(Holder, a, (Inner, inner), (std::optional<std::string>, s))
};

inline Holder make_holder() {
  return Holder(
      {{"a", torch::tensor({1.0f, 2.0f})},
       {"inner", Inner({{"x", torch::tensor({3.0f, 4.0f})}}, {2})},
       {"s", "hi"}},
      {2});
}

}  // namespace tensor_class_testing
