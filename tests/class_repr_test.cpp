// The class reprs (src/repr/class_repr.h) through a hook written here, not a
// TensorClass: repr/ prints any class level its hook describes. The
// expected strings are what Python tensordict 0.15 prints for the same
// tensorclasses.

#include "repr/class_repr.h"

#include <tensordict/tensor_dict.h>

#include <string>
#include <utility>
#include <vector>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace class_repr_test {

using tensordict::PrintOptions;
using tensordict::TensorDict;
using tensordict::Value;
using tensordict::detail::ClassReprHook;
using tensordict::detail::ClassReprHookPtr;

// A class given as its name and fields; a field may name a nested class.
struct FakeClass {
  std::string name;
  std::vector<std::string> fields;
  std::vector<const FakeClass*> nested;  // per field, null for none
};

class FakeHook final : public ClassReprHook {
 public:
  explicit FakeHook(const FakeClass& cls) : cls_(cls) {}
  const std::string& name() const override {
    return cls_.name;
  }
  size_t field_count() const override {
    return cls_.fields.size();
  }
  const std::string& field_name(size_t index) const override {
    return cls_.fields[index];
  }
  const Value* field_value(const TensorDict& td, size_t index) const override {
    calls.push_back(cls_.fields[index]);
    return td.find(cls_.fields[index]);
  }
  ClassReprHookPtr nested(size_t index) const override {
    const FakeClass* cls = cls_.nested[index];
    return cls ? std::make_unique<FakeHook>(*cls) : ClassReprHookPtr();
  }

  mutable std::vector<std::string> calls;

 private:
  const FakeClass& cls_;
};

const FakeClass kInner{"Inner", {"x"}, {nullptr}};
const FakeClass kOuter{
    "Outer", {"obs", "label", "inner"}, {nullptr, nullptr, &kInner}};

TensorDict outer() {
  TensorDict td({{"obs", torch::zeros({3, 2})}}, {3});
  td.set("inner", TensorDict({{"x", torch::ones({3}, torch::kInt64)}}, {3}));
  return td;
}

TEST(ClassReprTest, CompactPrintsTheClassNamesAndUnsetFieldsLast) {
  EXPECT_EQ(
      tensordict::detail::class_repr(outer(), FakeHook(kOuter), PrintOptions()),
      "Outer(batch_size=[3], fields={inner: Inner{x: i64[]}, obs: f32[2], "
      "label: None})");
}

TEST(ClassReprTest, DetailedNestsTheClassAndListsUnsetFieldsAfterSetOnes) {
  EXPECT_EQ(
      tensordict::detail::class_repr(
          outer(), FakeHook(kOuter), PrintOptions().compact(false)),
      "Outer(\n"
      "    inner=Inner(\n"
      "        x=Tensor(shape=torch.Size([3]), device=cpu, "
      "dtype=torch.int64, is_shared=False),\n"
      "        batch_size=torch.Size([3]),\n"
      "        device=None,\n"
      "        is_shared=False),\n"
      "    obs=Tensor(shape=torch.Size([3, 2]), device=cpu, "
      "dtype=torch.float32, is_shared=False),\n"
      "    label=None,\n"
      "    batch_size=torch.Size([3]),\n"
      "    device=None,\n"
      "    is_shared=False)");
}

TEST(ClassReprTest, AFieldNamedLikeAHeaderItemReplacesIt) {
  const FakeClass dev{"Dev", {"device", "a"}, {nullptr, nullptr}};
  const TensorDict td({{"a", torch::zeros({2})}}, {2});
  EXPECT_EQ(
      tensordict::detail::class_repr(td, FakeHook(dev), PrintOptions()),
      "Dev(batch_size=[2], fields={a: f32[], device: None})");
  EXPECT_EQ(
      tensordict::detail::class_repr(
          td, FakeHook(dev), PrintOptions().compact(false)),
      "Dev(\n"
      "    a=Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.float32, "
      "is_shared=False),\n"
      "    device=None,\n"
      "    batch_size=torch.Size([2]),\n"
      "    is_shared=False)");
}

TEST(ClassReprTest, ANestedDictWithoutAClassPrintsAsADict) {
  const FakeClass plain{"Plain", {"inner"}, {nullptr}};
  EXPECT_EQ(
      tensordict::detail::class_repr(
          TensorDict(
              {{"inner", TensorDict({{"x", torch::ones({3})}}, {3})}}, {3}),
          FakeHook(plain),
          PrintOptions()),
      "Plain(batch_size=[3], fields={inner: {x: f32[]}})");
}

TEST(ClassReprTest, AsksTheHookForEachFieldInDeclarationOrder) {
  const FakeHook hook(kOuter);
  (void)tensordict::detail::class_repr(outer(), hook, PrintOptions());
  EXPECT_EQ(hook.calls, (std::vector<std::string>{"obs", "label", "inner"}));
}

}  // namespace class_repr_test
