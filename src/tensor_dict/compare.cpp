// Comparisons: leafwise ==/!= giving bool dicts, all/any, equal().

#include <ATen/ops/allclose.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ne.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/walk.h"
#include "tensordict/errors.h"
#include "tensordict/json.h"
#include "util/python_spelling.h"

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

// One level of `equal` (and `allclose`): the same batch size, keys, kinds
// and values, tensors of the same dtype, shape and device compared by
// `same_values`.
template <typename SameValues>
bool equal_level(
    const detail::TensorDictImpl& a,
    const detail::TensorDictImpl& b,
    detail::KeyPath& path,
    const SameValues& same_values) {
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
                   same_values(ta, tb);
          }
          case Value::Kind::kTensorDict:
            return equal_level(
                *va.tensordict().unsafeGetImpl(),
                *vb.tensordict().unsafeGetImpl(),
                path,
                same_values);
          case Value::Kind::kLazyStack: {
            const auto& ea = va.lazy_stack().tensordicts();
            const auto& eb = vb.lazy_stack().tensordicts();
            if (va.lazy_stack().stack_dim() != vb.lazy_stack().stack_dim() ||
                ea.size() != eb.size()) {
              return false;
            }
            for (size_t i = 0; i < ea.size(); ++i) {
              if (!equal_level(
                      *ea[i].unsafeGetImpl(),
                      *eb[i].unsafeGetImpl(),
                      path,
                      same_values)) {
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
  return equal_level(
      *a.unsafeGetImpl(),
      *b.unsafeGetImpl(),
      path,
      [](const at::Tensor& ta, const at::Tensor& tb) {
        return at::equal(ta, tb);
      });
}

bool allclose(
    const TensorDict& a,
    const TensorDict& b,
    double rtol,
    double atol,
    bool equal_nan) {
  detail::KeyPath path;
  return equal_level(
      *a.unsafeGetImpl(),
      *b.unsafeGetImpl(),
      path,
      [&](const at::Tensor& ta, const at::Tensor& tb) {
        return at::allclose(ta, tb, rtol, atol, equal_nan);
      });
}

namespace {

// `torch.testing.assert_close`'s default (rtol, atol) for `dtype`: exact
// for integers and bool.
std::pair<double, double> default_tolerances(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kHalf:
    case at::kComplexHalf:
      return {1e-3, 1e-5};
    case at::kBFloat16:
      return {1.6e-2, 1e-5};
    case at::kFloat:
    case at::kComplexFloat:
      return {1.3e-6, 1e-5};
    case at::kDouble:
    case at::kComplexDouble:
      return {1e-7, 1e-7};
    default:
      return {0.0, 0.0};
  }
}

// A key as Python's assert_close prints it: a tuple of strings.
std::string key_tuple(const std::vector<std::string>& key) {
  std::string out = "(";
  for (const auto& part : key) {
    out += detail::python_repr(part);
    out += ", ";
  }
  if (key.size() > 1) {
    out.resize(out.size() - 2);
  } else if (!key.empty()) {
    out.resize(out.size() - 1);  // "('x',)"
  }
  return out + ")";
}

struct CloseCheck {
  std::optional<double> rtol;
  std::optional<double> atol;
  bool equal_nan;

  void tensors(
      const at::Tensor& a,
      const at::Tensor& b,
      const std::vector<std::string>& key) const {
    const auto mismatch = [&](const std::string& why) {
      TORCH_CHECK(false, "key ", key_tuple(key), " does not match", why);
    };
    if (a.scalar_type() != b.scalar_type()) {
      mismatch(c10::str(
          ": dtype ",
          detail::dtype_name(a.scalar_type()),
          " != ",
          detail::dtype_name(b.scalar_type())));
    }
    if (a.sizes() != b.sizes()) {
      mismatch(c10::str(": shape ", a.sizes(), " != ", b.sizes()));
    }
    if (a.device() != b.device()) {
      mismatch(c10::str(": device ", a.device(), " != ", b.device()));
    }
    const auto [default_rtol, default_atol] =
        default_tolerances(a.scalar_type());
    if (at::allclose(
            a,
            b,
            rtol.value_or(default_rtol),
            atol.value_or(default_atol),
            equal_nan)) {
      return;
    }
    const at::Tensor diff = a.to(at::kFloat).sub(b.to(at::kFloat));
    const double mse = diff.pow(2).sum().div(a.numel()).sqrt().item<double>();
    char text[64];
    std::snprintf(text, sizeof(text), ", got mse = %4.4f", mse);
    mismatch(text);
  }

  void dicts(
      const TensorDict& a,
      const TensorDict& b,
      std::vector<std::string>& key) const {
    const detail::TensorDictImpl& ia = *a.unsafeGetImpl();
    const detail::TensorDictImpl& ib = *b.unsafeGetImpl();
    std::vector<std::string_view> ka;
    std::vector<std::string_view> kb;
    for (const detail::Node* node : ia.nodes()) {
      ka.push_back(node->key);
    }
    for (const detail::Node* node : ib.nodes()) {
      kb.push_back(node->key);
    }
    std::sort(ka.begin(), ka.end());
    std::sort(kb.begin(), kb.end());
    if (ka != kb) {
      std::vector<std::string_view> only_a;
      std::vector<std::string_view> only_b;
      std::set_difference(
          ka.begin(),
          ka.end(),
          kb.begin(),
          kb.end(),
          std::back_inserter(only_a));
      std::set_difference(
          kb.begin(),
          kb.end(),
          ka.begin(),
          ka.end(),
          std::back_inserter(only_b));
      std::string msg = "keys in tensordicts mismatch.";
      if (!key.empty()) {
        msg += c10::str(" (at ", key_tuple(key), ")");
      }
      if (!only_a.empty()) {
        msg += c10::str(
            " The first TD has keys ",
            detail::sorted_list_repr(only_a),
            " that the second does not have.");
      }
      if (!only_b.empty()) {
        msg += c10::str(
            " The second TD has keys ",
            detail::sorted_list_repr(only_b),
            " that the first does not have.");
      }
      TENSORDICT_CHECK_KEY(false, msg);
    }
    for (const std::string_view name : ka) {
      key.emplace_back(name);
      values(ia.find(name)->value, ib.find(name)->value, key);
      key.pop_back();
    }
  }

  void values(
      const Value& a, const Value& b, std::vector<std::string>& key) const {
    if (a.is_non_tensor() && b.is_non_tensor()) {
      return;  // Python skips non-tensor data
    }
    TORCH_CHECK_TYPE(
        a.kind() == b.kind(),
        "assert_allclose_td: the entry at ",
        key_tuple(key),
        " is a ",
        a.type_name(),
        " in the first tensordict and a ",
        b.type_name(),
        " in the second");
    switch (a.kind()) {
      case Value::Kind::kTensor:
        tensors(a.tensor(), b.tensor(), key);
        return;
      case Value::Kind::kTensorDict:
        dicts(a.tensordict(), b.tensordict(), key);
        return;
      case Value::Kind::kLazyStack: {
        const auto& ea = a.lazy_stack().tensordicts();
        const auto& eb = b.lazy_stack().tensordicts();
        TORCH_CHECK(
            ea.size() == eb.size(),
            "key ",
            key_tuple(key),
            " does not match: lazy stacks of ",
            ea.size(),
            " and ",
            eb.size(),
            " tensordicts");
        for (size_t i = 0; i < ea.size(); ++i) {
          dicts(ea[i], eb[i], key);
        }
        return;
      }
      case Value::Kind::kNonTensorData:
      case Value::Kind::kNonTensorStack:
        return;
    }
  }
};

}  // namespace

bool assert_allclose_td(
    const TensorDict& actual,
    const TensorDict& expected,
    std::optional<double> rtol,
    std::optional<double> atol,
    bool equal_nan) {
  std::vector<std::string> key;
  CloseCheck{rtol, atol, equal_nan}.dicts(actual, expected, key);
  return true;
}

TENSORDICT_END_NAMESPACE
