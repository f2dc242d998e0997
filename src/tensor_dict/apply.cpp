// apply, named_apply and apply_: user callbacks over the leaves, with other
// dicts' leaves matched by key.

#include "detail/format.h"
#include "detail/walk.h"
#include "tensordict/errors.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

using LeafFn =
    c10::function_ref<at::Tensor(const NestedKey&, c10::ArrayRef<at::Tensor>)>;

struct ApplyContext {
  LeafFn fn;
  const ApplyOptions& options;
  const std::vector<int64_t>* root_batch; // set when options.batch_size()
};

void apply_level(
    const ApplyContext& ctx,
    const detail::TensorDictImpl& src,
    const std::vector<const detail::TensorDictImpl*>& others,
    const std::optional<NestedKey>& prefix,
    TensorDict& dst) {
  detail::TensorDictImpl& out = *dst.unsafeGetImpl();
  std::vector<at::Tensor> leaves(others.size() + 1);
  for (const auto& node : src.nodes()) {
    const NestedKey key =
        prefix ? prefix->child(node->key) : NestedKey(std::string_view(node->key));
    const Value& v = node->value;
    // The matching entry of each other dict (null where it is missing).
    std::vector<const Value*> matches;
    for (const detail::TensorDictImpl* other : others) {
      const detail::Node* found = other ? other->find(node->key) : nullptr;
      if (found == nullptr && !ctx.options.default_value().defined() &&
          (v.is_tensor() || v.is_tensordict())) {
        if (other == nullptr) {
          TENSORDICT_CHECK_KEY(
              false,
              "key ",
              key.to_string(),
              " not found in the other TensorDict passed to apply");
        }
        detail::throw_missing_key(*other, node->key, key);
      }
      matches.push_back(found ? &found->value : nullptr);
    }
    if (v.is_tensor()) {
      leaves[0] = v.tensor();
      for (size_t i = 0; i < matches.size(); ++i) {
        if (matches[i] == nullptr) {
          leaves[i + 1] = ctx.options.default_value();
        } else {
          TORCH_CHECK_TYPE(
              matches[i]->is_tensor(),
              "apply: the entry ",
              key.to_string(),
              " is a Tensor here but a ",
              matches[i]->type_name(),
              " in another TensorDict");
          leaves[i + 1] = matches[i]->tensor();
        }
      }
      at::Tensor result = ctx.fn(key, leaves);
      if (result.defined()) {
        out.append(
            node->key, detail::validate_value(out, Value(result), key, false));
      }
    } else if (v.is_tensordict()) {
      const detail::TensorDictImpl& child = *v.tensordict().unsafeGetImpl();
      std::vector<const detail::TensorDictImpl*> child_others;
      for (const Value* m : matches) {
        if (m != nullptr) {
          TORCH_CHECK_TYPE(
              m->is_tensordict(),
              "apply: the entry ",
              key.to_string(),
              " is a TensorDict here but a ",
              m->type_name(),
              " in another TensorDict");
        }
        child_others.push_back(m ? m->tensordict().unsafeGetImpl() : nullptr);
      }
      TensorDict sub = ctx.root_batch
          ? detail::make_tensordict(*ctx.root_batch, child.device, {})
          : detail::make_tensordict(child.batch_size, child.device, child.names);
      apply_level(ctx, child, child_others, key, sub);
      const std::optional<bool> filter = ctx.options.filter_empty();
      const bool drop = sub.is_empty() &&
          (filter.has_value() ? *filter : !child.nodes().empty());
      if (!drop) {
        out.append(node->key, Value(std::move(sub)));
      }
    } else {
      // Non-tensor data is kept, as Python's apply does.
      out.append(node->key, detail::validate_value(out, v, key, false));
    }
  }
}

} // namespace

TensorDict TensorDict::apply_impl(
    LeafFn fn,
    c10::ArrayRef<TensorDict> others,
    const ApplyOptions& options) const {
  const auto& batch = options.batch_size();
  DimNames names;
  if (options.names()) {
    names = *options.names();
  } else if (!batch || *batch == impl_->batch_size) {
    names = impl_->names;
  }
  TensorDict result = batch
      ? TensorDict(c10::IntArrayRef(*batch), impl_->device, names)
      : detail::make_tensordict(impl_->batch_size, impl_->device, names);
  std::vector<const detail::TensorDictImpl*> other_impls;
  for (const TensorDict& other : others) {
    other_impls.push_back(other.unsafeGetImpl());
  }
  const ApplyContext ctx{fn, options, batch ? &*batch : nullptr};
  apply_level(ctx, *impl_, other_impls, std::nullopt, result);
  return result;
}

void TensorDict::apply_inplace_impl(LeafFn fn) {
  detail::for_each_nested(
      *this, std::nullopt, [&](const NestedKey& key, const Value& value) {
        if (!value.is_tensor()) {
          return;
        }
        const at::Tensor& t = value.tensor();
        at::Tensor result = fn(key, t);
        if (result.defined() && !result.is_same(t)) {
          t.copy_(result);
        }
      });
}

TENSORDICT_END_NAMESPACE
