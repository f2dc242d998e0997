// apply, named_apply and apply_: user callbacks over the leaves (or, with
// call_on_nested, over the top-level entries), with other dicts' entries
// matched by key.

#include "core/walk.h"
#include "tensordict/errors.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

using LeafFn =
    c10::function_ref<at::Tensor(const NestedKey&, c10::ArrayRef<at::Tensor>)>;
using EntryFn = c10::function_ref<std::optional<Value>(
    const NestedKey&, c10::ArrayRef<Value>)>;

struct ApplyContext {
  const ApplyOptions& options;
  const std::vector<int64_t>* root_batch;  // set when options.batch_size()
};

// Calls a tensor callback on tensor leaves; `matches[i]` is the entry of
// other dict i (null where it is missing).
class LeafVisitor {
 public:
  LeafVisitor(LeafFn fn, size_t n_others, const at::Tensor& default_value)
      : fn_(fn), leaves_(n_others + 1), default_value_(default_value) {}

  static bool visits(const Value& v) noexcept {
    return v.is_tensor();
  }
  // The callback takes tensors only, so every match must be one.
  static constexpr bool kChecksKinds = true;

  // The kinds of `matches` are checked by the caller.
  std::optional<Value> operator()(
      const NestedKey& key,
      const Value& v,
      c10::ArrayRef<const Value*> matches) {
    leaves_[0] = v.tensor();
    for (size_t i = 0; i < matches.size(); ++i) {
      if (matches[i] == nullptr) {
        leaves_[i + 1] = default_value_;
        continue;
      }
      leaves_[i + 1] = matches[i]->tensor();
    }
    at::Tensor result = fn_(key, leaves_);
    if (!result.defined()) {
      return std::nullopt;
    }
    return Value(std::move(result));
  }

 private:
  LeafFn fn_;
  std::vector<at::Tensor> leaves_;  // reused from entry to entry
  const at::Tensor& default_value_;
};

// Calls an entry callback on tensor leaves, or on every entry with
// call_on_nested.
class EntryVisitor {
 public:
  EntryVisitor(EntryFn fn, const ApplyOptions& options, size_t n_others)
      : fn_(fn),
        call_on_nested_(options.call_on_nested()),
        default_value_(options.default_value()) {
    values_.reserve(n_others + 1);
  }

  bool visits(const Value& v) const noexcept {
    return call_on_nested_ || v.is_tensor();
  }
  // The callback takes any Value, so matches of any kind are passed on.
  static constexpr bool kChecksKinds = false;

  std::optional<Value> operator()(
      const NestedKey& key,
      const Value& v,
      c10::ArrayRef<const Value*> matches) {
    values_.clear();
    values_.push_back(v);
    for (const Value* m : matches) {
      values_.push_back(m ? *m : Value(default_value_));
    }
    return fn_(key, values_);
  }

 private:
  EntryFn fn_;
  bool call_on_nested_;
  std::vector<Value> values_;  // reused from entry to entry
  const at::Tensor& default_value_;
};

// Fills `out` from `src`: entries the visitor takes get its result, nested
// dicts it does not take are walked, other non-tensor entries are kept.
// `others[i]` is null below a dict missing from other dict i (filled with
// the default value).
template <typename Visitor>
LazyStackedTensorDict apply_lazy_stack(
    const ApplyContext& ctx,
    Visitor& visit,
    const LazyStackedTensorDict& stack,
    c10::ArrayRef<const Value*> others,
    detail::KeyPath& path);

template <typename Visitor>
void apply_level(
    const ApplyContext& ctx,
    Visitor& visit,
    const detail::TensorDictImpl& src,
    c10::ArrayRef<const detail::TensorDictImpl*> others,
    detail::KeyPath& path,
    detail::TensorDictImpl& out) {
  const bool has_default = ctx.options.default_value().defined();
  // One buffer per level, reused for every entry; matches[0] is `src`'s.
  std::vector<const Value*> matches(others.size() + 1);
  const c10::ArrayRef<const Value*> other_matches(
      matches.data() + 1, others.size());
  out.reserve(src.nodes().size());
  size_t pos = 0;
  for (const auto& node : src.nodes()) {
    detail::PathPart part(path, node->key);
    const Value& v = node->value;
    const bool visited = visit.visits(v);
    if (!visited && !v.is_collection()) {
      // Non-tensor data is kept, as Python's apply does.
      out.append(node->key, detail::validate_value(out, v, path.key(), false));
      ++pos;
      continue;
    }
    matches[0] = &v;
    for (size_t i = 0; i < others.size(); ++i) {
      const detail::TensorDictImpl* other = others[i];
      const detail::Node* found =
          other ? detail::find_matching(*other, node->key, pos) : nullptr;
      if (found == nullptr && !has_default) {
        TORCH_INTERNAL_ASSERT(other != nullptr);
        detail::throw_missing_key(*other, node->key, path.key());
      }
      matches[i + 1] = found ? &found->value : nullptr;
    }
    ++pos;
    if (visited) {
      if (Visitor::kChecksKinds) {
        detail::check_same_kind(matches, path, "apply a function to");
      }
      const NestedKey key = path.key();
      std::optional<Value> result = visit(key, v, other_matches);
      if (result) {
        out.append(node->key, detail::validate_value(out, *result, key, false));
      }
      continue;
    }
    detail::check_same_kind(matches, path, "apply a function to");
    if (v.is_lazy_stack()) {
      out.append(
          node->key,
          Value(apply_lazy_stack(
              ctx, visit, v.lazy_stack(), other_matches, path)));
      continue;
    }
    const detail::TensorDictImpl& child = *v.tensordict().unsafeGetImpl();
    std::vector<const detail::TensorDictImpl*> child_others(others.size());
    for (size_t i = 0; i < others.size(); ++i) {
      const Value* m = other_matches[i];
      child_others[i] = m ? m->tensordict().unsafeGetImpl() : nullptr;
    }
    TensorDict sub =
        ctx.root_batch
            ? detail::make_tensordict(*ctx.root_batch, child.device, {})
            : detail::make_tensordict(
                  child.batch_size, child.device, child.names);
    apply_level(ctx, visit, child, child_others, path, *sub.unsafeGetImpl());
    const std::optional<bool> filter = ctx.options.filter_empty();
    const bool drop = sub.is_empty() &&
                      (filter.has_value() ? *filter : !child.nodes().empty());
    if (!drop) {
      out.append(node->key, Value(std::move(sub)));
    }
  }
}

// Applies `visit` to each element of a lazy stack entry, matched with the
// same element of the others' stacks, and stacks the results again.
template <typename Visitor>
LazyStackedTensorDict apply_lazy_stack(
    const ApplyContext& ctx,
    Visitor& visit,
    const LazyStackedTensorDict& stack,
    c10::ArrayRef<const Value*> others,
    detail::KeyPath& path) {
  TORCH_CHECK_VALUE(
      ctx.root_batch == nullptr,
      "apply: batch_size cannot be given for a dict holding the lazy stack ",
      path.to_string());
  for (const Value* other : others) {
    if (other != nullptr) {
      detail::check_same_stacking(
          stack, other->lazy_stack(), path, "apply a function to");
    }
  }
  std::vector<TensorDict> elements;
  std::vector<const detail::TensorDictImpl*> element_others(others.size());
  for (size_t e = 0; e < stack.tensordicts().size(); ++e) {
    const detail::TensorDictImpl& child =
        *stack.tensordicts()[e].unsafeGetImpl();
    for (size_t i = 0; i < others.size(); ++i) {
      element_others[i] =
          others[i] != nullptr
              ? others[i]->lazy_stack().tensordicts()[e].unsafeGetImpl()
              : nullptr;
    }
    elements.push_back(
        detail::make_tensordict(child.batch_size, child.device, child.names));
    apply_level(
        ctx,
        visit,
        child,
        element_others,
        path,
        *elements.back().unsafeGetImpl());
  }
  return detail::restack_like(stack, std::move(elements));
}

// Makes the empty result and runs `visit` over `self` and `others`.
template <typename Visitor>
TensorDict run_apply(
    const TensorDict& self,
    Visitor& visit,
    c10::ArrayRef<TensorDict> others,
    const ApplyOptions& options) {
  const detail::TensorDictImpl& impl = *self.unsafeGetImpl();
  const auto& batch = options.batch_size();
  DimNames names;
  if (options.names()) {
    names = *options.names();
  } else if (!batch || *batch == impl.batch_size) {
    names = impl.names;
  }
  TensorDict result =
      batch ? TensorDict(c10::IntArrayRef(*batch), impl.device, names)
            : detail::make_tensordict(impl.batch_size, impl.device, names);
  std::vector<const detail::TensorDictImpl*> other_impls;
  other_impls.reserve(others.size());
  for (const TensorDict& other : others) {
    other_impls.push_back(other.unsafeGetImpl());
  }
  const ApplyContext ctx{options, batch ? &*batch : nullptr};
  detail::KeyPath path;
  apply_level(ctx, visit, impl, other_impls, path, *result.unsafeGetImpl());
  return result;
}

}  // namespace

namespace detail {

TensorDict apply_impl(
    const TensorDict& td,
    LeafFn fn,
    c10::ArrayRef<TensorDict> others,
    const ApplyOptions& options) {
  TORCH_CHECK_VALUE(
      !options.call_on_nested(),
      "apply: call_on_nested=true passes nested TensorDicts to the callback, "
      "so it must take a const Value& and return a std::optional<Value> (or "
      "a Value), not an at::Tensor");
  LeafVisitor visit(fn, others.size(), options.default_value());
  return run_apply(td, visit, others, options);
}

TensorDict apply_entries_impl(
    const TensorDict& td,
    EntryFn fn,
    c10::ArrayRef<TensorDict> others,
    const ApplyOptions& options) {
  EntryVisitor visit(fn, options, others.size());
  return run_apply(td, visit, others, options);
}

void apply_inplace_impl(TensorDict& td, LeafFn fn) {
  detail::for_each_nested(td, [&](const NestedKey& key, const Value& value) {
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

}  // namespace detail

TENSORDICT_END_NAMESPACE
