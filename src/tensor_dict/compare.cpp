// Comparisons: leafwise ==/!= giving bool dicts, all/any, equal().

#include <ATen/ops/eq.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ne.h>

#include "core/walk.h"
#include "tensordict/json.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

// Non-tensor values compare whole: one bool per batch element, as Python's
// NonTensorData.__eq__ returns.
at::Tensor non_tensor_flag(c10::IntArrayRef batch_size, bool value) {
  return at::full(batch_size, value, at::TensorOptions().dtype(at::kBool));
}

bool same_non_tensor(const Value& a, const Value& b) {
  return a.non_tensor() == b.non_tensor();
}

Json scalar_json(const c10::Scalar& s) {
  if (s.isBoolean()) {
    return s.toBool();
  }
  if (s.isIntegral(/*includeBool=*/false)) {
    return s.toLong();
  }
  return s.toDouble();
}

TensorDict compare_scalar(
    const TensorDict& td, const c10::Scalar& other, bool equal) {
  const Json other_json = scalar_json(other);
  TensorDict result = detail::map_entries(td, [&](const at::Tensor& t) {
    return equal ? at::eq(t, other) : at::ne(t, other);
  });
  // map_entries copied non-tensor values: replace them by their flags.
  for (const auto& [key, value] : result.items(/*include_nested=*/true)) {
    if (value.is_non_tensor()) {
      const bool same = value.non_tensor() == other_json;
      result.set(key, non_tensor_flag(value.shape(), same == equal));
    }
  }
  return result;
}

}  // namespace

TensorDict TensorDict::operator==(const TensorDict& other) const {
  return detail::zip_entries(
      *this,
      other,
      "compare",
      [](const at::Tensor& a, const at::Tensor& b) { return at::eq(a, b); },
      [](const Value& a, const Value& b, c10::IntArrayRef shape) {
        return non_tensor_flag(shape, same_non_tensor(a, b));
      });
}

TensorDict TensorDict::operator!=(const TensorDict& other) const {
  return detail::zip_entries(
      *this,
      other,
      "compare",
      [](const at::Tensor& a, const at::Tensor& b) { return at::ne(a, b); },
      [](const Value& a, const Value& b, c10::IntArrayRef shape) {
        return non_tensor_flag(shape, !same_non_tensor(a, b));
      });
}

TensorDict TensorDict::operator==(const c10::Scalar& other) const {
  return compare_scalar(*this, other, /*equal=*/true);
}

TensorDict TensorDict::operator!=(const c10::Scalar& other) const {
  return compare_scalar(*this, other, /*equal=*/false);
}

bool TensorDict::all() const {
  return detail::all_tensors(
      *this, [](const at::Tensor& t) { return t.all().item<bool>(); });
}

bool TensorDict::any() const {
  // any() is "not all tensors are all-false".
  return !detail::all_tensors(
      *this, [](const at::Tensor& t) { return !t.any().item<bool>(); });
}

namespace {

// One level of `equal`: the same batch size, keys, kinds and values.
bool equal_level(
    const detail::TensorDictImpl& a,
    const detail::TensorDictImpl& b,
    detail::KeyPath& path) {
  if (&a == &b) {
    return true;
  }
  if (a.batch_size != b.batch_size) {
    return false;
  }
  const detail::TensorDictImpl* dicts[] = {&a, &b};
  const detail::ZipOptions options{"compare", detail::ZipKeys::kMatch};
  return detail::zip_level(
      dicts, path, options, [&](const detail::Node&, auto values) {
        const Value& va = *values[0];
        const Value& vb = *values[1];
        if (va.kind() != vb.kind()) {
          return false;  // NonTensorData and NonTensorStack never equal
        }
        switch (va.kind()) {
          case Value::Kind::kTensor: {
            const at::Tensor& ta = va.tensor();
            const at::Tensor& tb = vb.tensor();
            return ta.scalar_type() == tb.scalar_type() &&
                   ta.sizes() == tb.sizes() && ta.device() == tb.device() &&
                   at::equal(ta, tb);
          }
          case Value::Kind::kTensorDict:
            return equal_level(
                *va.tensordict().unsafeGetImpl(),
                *vb.tensordict().unsafeGetImpl(),
                path);
          case Value::Kind::kLazyStack: {
            const auto& ea = va.lazy_stack().tensordicts();
            const auto& eb = vb.lazy_stack().tensordicts();
            if (va.lazy_stack().stack_dim() != vb.lazy_stack().stack_dim() ||
                ea.size() != eb.size()) {
              return false;
            }
            for (size_t i = 0; i < ea.size(); ++i) {
              if (!equal_level(
                      *ea[i].unsafeGetImpl(), *eb[i].unsafeGetImpl(), path)) {
                return false;
              }
            }
            return true;
          }
          case Value::Kind::kNonTensorData:
          case Value::Kind::kNonTensorStack:
            return va.non_tensor() == vb.non_tensor() &&
                   va.shape() == vb.shape();
        }
        return false;
      });
}

}  // namespace

bool equal(const TensorDict& a, const TensorDict& b) {
  detail::KeyPath path;
  return equal_level(*a.unsafeGetImpl(), *b.unsafeGetImpl(), path);
}

TENSORDICT_END_NAMESPACE
