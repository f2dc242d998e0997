// The memmap members of TensorClass (declared in the public
// include/tensordict/detail/tensor_class_impl.h): an instance or a lazy stack
// of instances saved and loaded with its Python class checked, and
// make_memmap with its key checked against the fields.

#include "tensordict/tensor_class.h"

#include <c10/util/Exception.h>

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tensor_class/fields.h"
#include "tensordict/memmap.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

TensorDict tc_load_memmap(
    const ClassInfo& info,
    const std::string& prefix,
    const LoadMemmapOptions& options) {
  TensorDict td = TensorDict::load_memmap(prefix, options);
  check_loaded_class(td.python_class(), info, prefix);
  tc_check(td, info);
  return td;
}

namespace {

// Throws unless `prefix` holds the class `info` describes, reading no leaf:
// meta.json alone tells the class and the fields, so a load into an
// existing class checks this before writing anything.
void check_saved_class(
    const ClassInfo& info,
    const std::string& prefix,
    const LoadMemmapOptions& options) {
  (void)tc_load_memmap(
      info, prefix, LoadMemmapOptions(options).device(c10::Device(c10::kMeta)));
}

}  // namespace

void tc_load_memmap_into(
    const TensorDict& td,
    const ClassInfo& info,
    const std::string& prefix,
    const LoadMemmapOptions& options) {
  check_saved_class(info, prefix, options);
  TensorDict dest = td;
  dest.load_memmap_(prefix, options);
}

void tc_load_memmap_out(
    const TensorDict& td,
    const ClassInfo& info,
    const std::string& prefix,
    const LoadMemmapOptions& options) {
  check_saved_class(info, prefix, options);
  TensorDict dest = td;
  (void)TensorDict::load_memmap(prefix, dest, options);
}

at::Tensor tc_make_memmap(
    const TensorDict& td,
    const ClassInfo& info,
    const NestedKey& key,
    c10::IntArrayRef shape,
    c10::ScalarType dtype) {
  const FieldAt field = resolve_field(info, key, "make_memmap");
  if (field.info != nullptr) {
    const FieldKind kind = field.info->fields[field.index].kind;
    TORCH_CHECK_TYPE(
        kind != FieldKind::kTensorDict && kind != FieldKind::kTensorClass &&
            kind != FieldKind::kString && kind != FieldKind::kJson,
        "make_memmap: ",
        field_label(*field.info, field.index),
        " takes ",
        kind_name(kind),
        ", not a tensor");
  }
  return TensorDict(td).make_memmap(key, shape, dtype);
}

void tc_mark_lazy(LazyStackedTensorDict& stack, const ClassInfo& info) {
  // Python's elements are plain dicts whose TensorClass fields keep their
  // classes; the class itself marks the stack.
  for (const auto& element : stack.tensordicts()) {
    tc_mark_classes(element, info);
    TensorDict(element).set_python_class("");
  }
  stack.set_python_class(info.python_class);
}

LazyStackedTensorDict tc_marked_lazy_copy(
    const LazyStackedTensorDict& stack, const ClassInfo& info) {
  std::vector<TensorDict> copies;
  copies.reserve(stack.tensordicts().size());
  for (const auto& element : stack.tensordicts()) {
    copies.push_back(element.copy());
  }
  LazyStackedTensorDict out(
      std::move(copies), stack.stack_dim(), stack.stack_dim_name());
  tc_mark_lazy(out, info);
  return out;
}

LazyStackedTensorDict tc_memmap_lazy(
    const LazyStackedTensorDict& stack,
    const ClassInfo& info,
    const MemmapOptions& options) {
  return memmap(tc_marked_lazy_copy(stack, info), options);
}

LazyStackedTensorDict tc_load_lazy_memmap(
    const ClassInfo& info,
    const std::string& prefix,
    const LoadMemmapOptions& options) {
  LoadedTree tree = load_memmap_any(prefix, options);
  auto* stack = std::get_if<LazyStackedTensorDict>(&tree);
  TORCH_CHECK_VALUE(
      stack != nullptr,
      prefix,
      " holds a dense ",
      info.name,
      ", not a lazy stack: load it with ",
      info.name,
      "::load_memmap");
  check_loaded_class(stack->python_class(), info, prefix);
  tc_check_lazy(*stack, info);
  return *stack;
}

void tc_load_lazy_memmap_into(
    LazyStackedTensorDict& stack,
    const ClassInfo& info,
    const std::string& prefix,
    const LoadMemmapOptions& options) {
  // From meta.json only: the meta device reads no leaf.
  (void)tc_load_lazy_memmap(
      info, prefix, LoadMemmapOptions(options).device(c10::Device(c10::kMeta)));
  stack.load_memmap_(prefix, options);
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
