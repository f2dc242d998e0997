#pragma once

/// @file
/// Modules that read and write TensorDicts: the C++ form of Python's
/// `tensordict.nn`. Not included by <tensordict/tensordict.h>: it includes
/// libtorch's module headers, which a user of dicts alone does not need.
//
// NOTE [Module names as in Python]
// Python registers the module a TensorDictModule wraps as its child
// `module`, and the modules of a TensorDictSequential in an `nn.ModuleList`
// named `module`, so a sequence's parameters are named
// `module.0.module.weight`. libtorch forbids dots in a child's name, so the
// sequence here registers a `torch::nn::ModuleList` named `module` as well:
// `named_parameters()`, `TensorDict::from_module` and `to_module` then see
// the same names in both languages, and weights saved by one load into the
// other without renaming.

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensordict/errors.h"
#include "tensordict/export.h"
#include "tensordict/nested_key.h"
#include "tensordict/options.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
/// Modules that read and write TensorDicts (Python's `tensordict.nn`).
namespace nn {

/// Input tensors of a dispatch call, keyed by in_key: `{{"obs", t}}`.
using TensorInputs = std::vector<std::pair<NestedKey, at::Tensor>>;

// NOTE [Weights contract]
// Every TensorDictModuleBase answers for its weights, whatever holds them:
// `weights_layout()` says what they are and `load_weights(weights)` takes
// new ones, checked against that layout, all or nothing. By default the
// weights are the module's parameters and buffers and, under their names,
// those the TensorDictModuleBase modules below it answer for, so a module
// whose weights are no libtorch parameters (an AOTIModule: its package's)
// shows them under its place in a TensorDictSequential
// (`module.<i>.<name>`, see NOTE [Module names as in Python]) and takes
// new ones there. A caller that swaps weights (rl::Collector, the TorchRL
// worker) asks the module, never its type.

/// The interface every module that reads `in_keys` from a TensorDict and
/// writes `out_keys` implements (Python's `TensorDictModuleBase`), so that a
/// TensorDictSequential can chain modules of any kind. Derive from it,
/// call `set_keys` in the constructor and override
/// `forward(TensorDict, TensorDict)`; a derived class that overrides only
/// that overload adds `using TensorDictModuleBase::forward;` so the
/// one-argument form stays visible.
///
/// `forward` is the bare computation. The call operators add what Python's
/// `__call__` adds: the out-key selection of `select_out_keys`, and the
/// dispatch from tensors. Holders (`TensorDictModule`,
/// `TensorDictSequential`, `AnyTensorDictModule`) call through them.
///
/// Example:
/// ```
///   struct Doubler : TensorDictModuleBase {
///     Doubler() { set_keys({"x"}, {"y"}); }
///     using TensorDictModuleBase::forward;
///     TensorDict forward(TensorDict td, TensorDict out) override {
///       return out.set("y", td.get("x") * 2);
///     }
///   };
/// ```
class TENSORDICT_API TensorDictModuleBase : public torch::nn::Module {
 public:
  /// Makes a module with no keys; `name` is what `name()` and error
  /// messages show.
  explicit TensorDictModuleBase(std::string name = "TensorDictModuleBase");
  ~TensorDictModuleBase() override;

  /// Reads the inputs from `td`, writes the outputs into it and returns
  /// it (Python's default, `inplace=True`). Calls `forward(td, td)`.
  virtual TensorDict forward(TensorDict td);
  /// Reads the inputs from `td`, writes the outputs into `out` and returns
  /// `out` (Python's `tensordict_out`). Throws KeyError for a missing input.
  virtual TensorDict forward(TensorDict td, TensorDict out) = 0;

  /// Runs `forward(td)`, then drops the outputs `select_out_keys` left out.
  TensorDict operator()(TensorDict td);
  /// Runs `forward(td, out)`, then drops the outputs `select_out_keys` left
  /// out of `out`.
  TensorDict operator()(TensorDict td, TensorDict out);
  /// Calls the module on tensors, as Python's `module(obs=t)`: the inputs
  /// go into a dict with no batch dims, and the result holds the tensors
  /// of `out_keys()` in order ("_" excluded). Throws KeyError if an input
  /// key is not one of `in_keys()`, or if an in_key is not given.
  std::vector<at::Tensor> operator()(
      std::initializer_list<std::pair<NestedKey, at::Tensor>> inputs);
  /// The dispatch call of `operator()` with the inputs in a vector.
  std::vector<at::Tensor> dispatch(const TensorInputs& inputs);

  /// Returns the keys the module reads, in order.
  const std::vector<NestedKey>& in_keys() const noexcept {
    return in_keys_;
  }
  /// Returns the keys the module writes, those `select_out_keys` chose.
  const std::vector<NestedKey>& out_keys() const noexcept {
    return out_keys_;
  }
  /// Returns all the keys the module writes, before `select_out_keys`.
  const std::vector<NestedKey>& out_keys_source() const noexcept {
    return out_keys_source_;
  }
  /// Keeps only `keys` of the outputs in what a call returns; the module
  /// still computes all of them. Returns this module. Throws ValueError,
  /// naming the key, if one is not in `out_keys()`.
  virtual TensorDictModuleBase& select_out_keys(
      const std::vector<NestedKey>& keys);
  /// Undoes `select_out_keys`; returns this module.
  virtual TensorDictModuleBase& reset_out_keys();

  /// Returns the layout of the weights `load_weights` takes (see NOTE
  /// [Weights contract]): a dict with no batch dims, keyed as
  /// `TensorDict::from_module` keys the module's tensors, whose leaves are
  /// meta tensors of the weights' shapes and dtypes (a view of nothing).
  /// Throws what a module below throws (an AOTIModule whose weights'
  /// shapes are unknown).
  virtual TensorDict weights_layout() const;
  /// Replaces the module's weights with copies of `weights`, keyed as
  /// `weights_layout()` (nested, or joined with "."), which it checks them
  /// against first (`check_weights`): throws KeyError naming a missing or
  /// unknown key, ValueError naming a key whose shape or dtype differs, and
  /// the weights are then unchanged. Copies without autograd.
  virtual void load_weights(const TensorDict& weights);

 protected:
  /// Sets the keys the module reads and writes (and resets any selection).
  void set_keys(
      std::vector<NestedKey> in_keys, std::vector<NestedKey> out_keys);
  /// Sets the selected out_keys without the call-time filtering (for
  /// modules whose forward applies the selection itself).
  void set_selected_out_keys(std::vector<NestedKey> keys);
  /// Returns true once `select_out_keys` chose keys.
  bool has_selected_out_keys() const noexcept {
    return selected_;
  }
  /// Takes the keys, the selection and the training mode of `other`: what
  /// a `clone()` keeps besides the module's own state.
  void copy_keys_from(const TensorDictModuleBase& other);

 private:
  TensorDict drop_unselected(TensorDict out) const;

  std::vector<NestedKey> in_keys_;
  std::vector<NestedKey> out_keys_source_;
  std::vector<NestedKey> out_keys_;
  bool selected_ = false;
  bool filter_in_call_ = false;
};

/// Checks `weights` against `layout` (a `weights_layout()`): every key of
/// the layout present, no other, each with the layout's shape and dtype;
/// keys match nested or joined with ".". Throws KeyError naming a missing
/// or unknown key (and listing the weights), ValueError naming a key whose
/// shape or dtype differs, TypeError for a key that holds no tensor. Each
/// message starts with `who` and calls the weights' owner `owner` ("the
/// policy").
TENSORDICT_API void check_weights(
    const TensorDict& layout,
    const TensorDict& weights,
    std::string_view who,
    std::string_view owner = "the module");

/// A `torch::nn::ModuleHolder` over a TensorDictModuleBase subclass with
/// its call operators, so `policy(td)`, `policy->in_keys()` and `*policy`
/// work as for libtorch's own modules. Derive a holder for a module of your
/// own from it, as `TORCH_MODULE` would.
///
/// Example: `class Doubler : public TensorDictModuleHolder<DoublerImpl> {
/// using TensorDictModuleHolder::TensorDictModuleHolder; };`
template <class Impl>
class TensorDictModuleHolder : public torch::nn::ModuleHolder<Impl> {
  static_assert(
      std::is_base_of_v<TensorDictModuleBase, Impl>,
      "TensorDictModuleHolder holds TensorDictModuleBase subclasses");

 public:
  /// Makes an empty holder.
  TensorDictModuleHolder(std::nullptr_t)  // NOLINT(google-explicit-constructor)
      : torch::nn::ModuleHolder<Impl>(nullptr) {}
  /// Holds `module` (shared, not copied).
  TensorDictModuleHolder(  // NOLINT(google-explicit-constructor)
      std::shared_ptr<Impl> module)
      : torch::nn::ModuleHolder<Impl>(std::move(module)) {}

  /// Runs the module on `td`, writing into it; returns what the module
  /// returns (`td` for the modules of this header). See
  /// `TensorDictModuleBase::operator()`.
  TensorDict operator()(TensorDict td) {
    return (*this->get())(std::move(td));
  }
  /// Runs the module on `td`, writing into `out`; returns `out`.
  TensorDict operator()(TensorDict td, TensorDict out) {
    return (*this->get())(std::move(td), std::move(out));
  }
  /// Calls the module on tensors keyed by in_key; returns the tensors of
  /// its out_keys, in order.
  std::vector<at::Tensor> operator()(
      std::initializer_list<std::pair<NestedKey, at::Tensor>> inputs) {
    return (*this->get())(inputs);
  }
};

/// A holder of any TensorDictModuleBase: what TensorDictSequential holds,
/// so that TensorDictModule, TensorDictSequential and modules of your own
/// sit side by side. Converts implicitly from any holder of a
/// TensorDictModuleBase subclass and from a `std::shared_ptr` to one; the
/// module is shared, not copied.
///
/// Example: `AnyTensorDictModule any = TensorDictModule(fn, {"a"}, {"b"});`
class AnyTensorDictModule
    : public TensorDictModuleHolder<TensorDictModuleBase> {
 public:
  /// Makes an empty holder.
  AnyTensorDictModule(std::nullptr_t)  // NOLINT(google-explicit-constructor)
      : TensorDictModuleHolder(nullptr) {}
  /// Holds `module`.
  template <
      class T,
      std::enable_if_t<std::is_base_of_v<TensorDictModuleBase, T>, int> = 0>
  AnyTensorDictModule(  // NOLINT(google-explicit-constructor)
      std::shared_ptr<T> module)
      : TensorDictModuleHolder(
            std::shared_ptr<TensorDictModuleBase>(std::move(module))) {}
  /// Holds the module of `holder`.
  template <
      class T,
      std::enable_if_t<std::is_base_of_v<TensorDictModuleBase, T>, int> = 0>
  AnyTensorDictModule(  // NOLINT(google-explicit-constructor)
      const torch::nn::ModuleHolder<T>& holder)
      : TensorDictModuleHolder(
            holder.is_empty()
                ? nullptr
                : std::shared_ptr<TensorDictModuleBase>(holder.ptr())) {}
};

namespace detail {

// A wrapped module's outputs, on the stack up to four: a module runs every
// step of a collector, and a heap list is an allocation and a free a call.
using TensorList = c10::SmallVector<at::Tensor, 4>;

// The wrapped module, type-erased: tensors in, tensors out.
using TensorFunction = std::function<TensorList(c10::ArrayRef<at::Tensor>)>;

// The most inputs a wrapped module's forward can take.
constexpr size_t kMaxModuleInputs = 8;

// A module's outputs, flattened into a list of tensors: a tensor is one,
// a vector or tuple gives its elements in order (nested tuples, such as
// LSTM's (output, (h, c)), flatten depth-first), void gives none.
inline void append_outputs(TensorList& out, at::Tensor tensor) {
  out.push_back(std::move(tensor));
}
inline void append_outputs(TensorList& out, std::vector<at::Tensor> tensors) {
  out.insert(
      out.end(),
      std::make_move_iterator(tensors.begin()),
      std::make_move_iterator(tensors.end()));
}
template <class... Ts>
void append_outputs(TensorList& out, std::tuple<Ts...> tuple) {
  std::apply(
      [&](auto&... elements) {
        (append_outputs(out, std::move(elements)), ...);
      },
      tuple);
}
template <class A, class B>
void append_outputs(TensorList& out, std::pair<A, B> pair) {
  append_outputs(out, std::move(pair.first));
  append_outputs(out, std::move(pair.second));
}

template <size_t I>
using TensorArg = const at::Tensor&;

template <class F, size_t... I>
constexpr bool invocable_with(std::index_sequence<I...> /*unused*/) {
  return std::is_invocable_v<F&, TensorArg<I>...>;
}

template <class F, size_t... I>
TensorList invoke_with(
    F& function,
    c10::ArrayRef<at::Tensor> inputs,
    std::index_sequence<I...> /*unused*/) {
  TensorList outputs;
  if constexpr (std::is_void_v<std::invoke_result_t<F&, TensorArg<I>...>>) {
    function(inputs[I]...);
  } else {
    append_outputs(outputs, function(inputs[I]...));
  }
  return outputs;
}

// Calls `function` with as many tensors as `inputs` holds; the
// constructor checked that this count is one the function accepts.
template <class F, size_t N = 0>
TensorList invoke_n(F& function, c10::ArrayRef<at::Tensor> inputs) {
  if constexpr (N > kMaxModuleInputs) {
    TORCH_INTERNAL_ASSERT(false, "no arity of the module matches");
  } else {
    if (inputs.size() == N) {
      if constexpr (invocable_with<F>(std::make_index_sequence<N>())) {
        return invoke_with(function, inputs, std::make_index_sequence<N>());
      } else {
        TORCH_INTERNAL_ASSERT(false, "the module takes no ", N, " tensors");
      }
    }
    return invoke_n<F, N + 1>(function, inputs);
  }
}

// Bit n is set when `F` can be called with n tensors.
template <class F, size_t... N>
constexpr uint32_t accepted_input_counts(std::index_sequence<N...> /*unused*/) {
  return (
      (invocable_with<F>(std::make_index_sequence<N>()) ? (1u << N) : 0u) |
      ...);
}

// True for a libtorch module holder (`torch::nn::Linear`) and for a
// `std::shared_ptr` to a module (`std::make_shared<MyModuleImpl>()`).
template <class M>
struct is_module_handle : torch::detail::is_module_holder<M> {};
template <class T>
struct is_module_handle<std::shared_ptr<T>>
    : std::is_base_of<torch::nn::Module, T> {};

// Returns the module a handle points to.
template <class M>
std::shared_ptr<torch::nn::Module> module_pointer(const M& module) {
  if constexpr (torch::detail::is_module_holder<M>::value) {
    return module.ptr();
  } else {
    return module;
  }
}

// Returns a handle of type `M` to `module` (a clone of what an `M` held),
// or throws if the clone is of another type.
template <class M>
M module_handle_from(const std::shared_ptr<torch::nn::Module>& module) {
  if constexpr (torch::detail::is_module_holder<M>::value) {
    auto impl = std::dynamic_pointer_cast<typename M::ContainedType>(module);
    TORCH_CHECK(impl != nullptr, "clone() returned a module of another type");
    return M(std::move(impl));
  } else {
    auto impl = std::dynamic_pointer_cast<typename M::element_type>(module);
    TORCH_CHECK(impl != nullptr, "clone() returned a module of another type");
    return impl;
  }
}

// Calls a module handle's forward; a functor so calls it cannot take fail
// substitution (and are not counted as accepted) instead of compiling.
template <class Holder>
struct ForwardOf {
  Holder module;
  template <class... Args>
  auto operator()(const Args&... args)
      -> decltype(std::declval<Holder&>()->forward(args...)) {
    return module->forward(args...);
  }
};

// Calls a member function of a module handle (Python's `method=`).
template <class Holder, class Method>
struct MethodOf {
  Holder module;
  Method method;
  template <class... Args>
  auto operator()(const Args&... args) -> decltype((
      std::declval<Holder&>().get()->*std::declval<Method&>())(args...)) {
    return (module.get()->*method)(args...);
  }
};

}  // namespace detail

/// The keyword arguments a module with dict in_keys is called with: each
/// argument name with its tensor (undefined for an absent in_key, as
/// Python passes None).
using TensorKwargs = std::map<std::string, at::Tensor>;

/// A TensorDictModule's dict in_keys: (argument name, key) pairs, the
/// direction of Python's default `out_to_in_map=True` (`in_keys={"x":
/// "obs"}` is `{{"x", "obs"}}`).
using ArgKeys = std::vector<std::pair<std::string, NestedKey>>;

namespace detail {

// Calls a module handle's forward with keyword arguments.
template <class Holder>
struct KwargsForwardOf {
  Holder module;
  // A template, so that a forward taking no TensorKwargs fails substitution.
  template <class Kwargs>
  auto operator()(const Kwargs& kwargs)
      -> decltype(std::declval<Holder&>()->forward(kwargs)) {
    return module->forward(kwargs);
  }
};

// The callable that takes the keyword arguments: a handle's forward, or
// the callable itself.
template <class M>
using KwargsCall =
    std::conditional_t<is_module_handle<M>::value, KwargsForwardOf<M>, M>;

// True for a module (or callable) called with TensorKwargs and with no
// tensor: it takes dict in_keys, and list in_keys do not apply.
template <class M, class = void>
struct takes_kwargs : std::false_type {};
template <class M>
struct takes_kwargs<
    M,
    std::enable_if_t<std::is_invocable_v<KwargsCall<M>&, const TensorKwargs&>>>
    : std::bool_constant<
          accepted_input_counts<
              std::conditional_t<is_module_handle<M>::value, ForwardOf<M>, M>>(
              std::make_index_sequence<kMaxModuleInputs + 1>()) == 0> {};

}  // namespace detail

/// Where a TensorDictModule's one-dict call writes: Python's `inplace`
/// argument, whose values are `True`, `False` and `"empty"`.
enum class InplaceMode {
  /// Into the input dict, which is returned (Python's `True`, the default).
  kTrue,
  /// Into a new dict with no batch dims (Python's `False`): what a loss
  /// module needs, whose scalar outputs fit no batch size.
  kFalse,
  /// Into `td.empty()`, a new dict with the input's batch size, device and
  /// names (Python's `"empty"`).
  kEmpty,
};

/// Options of `TensorDictModule`.
///
/// Example: `TensorDictModuleOptions().inplace(InplaceMode::kFalse)`
struct TENSORDICT_API TensorDictModuleOptions {
  /// Where the one-dict call writes (Python's `inplace`).
  TENSORDICT_ARG(InplaceMode, inplace) = InplaceMode::kTrue;
  /// Throw KeyError for an in_key the dict lacks; when false (Python's
  /// default `strict=False`), the module is called with an undefined
  /// tensor in its place, as Python passes None.
  TENSORDICT_ARG(bool, strict) = false;
};

/// The module of a TensorDictModule holder: see `TensorDictModule`.
class TENSORDICT_API TensorDictModuleImpl : public TensorDictModuleBase {
 public:
  /// Wraps `module`, a libtorch module holder or `std::shared_ptr` to a
  /// module (registered as the child `module`, as in Python), or any
  /// callable taking tensors. It reads
  /// `in_keys`, passing them as forward's arguments in order, and writes
  /// its outputs to `out_keys` in order ("_" discards one). Throws
  /// ValueError if forward cannot take `in_keys.size()` tensors.
  template <class M, std::enable_if_t<!detail::takes_kwargs<M>::value, int> = 0>
  TensorDictModuleImpl(
      M module,
      std::vector<NestedKey> in_keys,
      std::vector<NestedKey> out_keys,
      TensorDictModuleOptions options = {})
      : TensorDictModuleBase("TensorDictModule") {
    constexpr auto counts =
        std::make_index_sequence<detail::kMaxModuleInputs + 1>();
    if constexpr (detail::is_module_handle<M>::value) {
      using Forward = detail::ForwardOf<M>;
      static_assert(
          detail::accepted_input_counts<Forward>(counts) != 0,
          "TensorDictModule wraps a module whose forward takes up to 8 "
          "tensors");
      wrapped_ = detail::module_pointer(module);
      register_module("module", wrapped_);
      rebind_ = [](const std::shared_ptr<torch::nn::Module>& clone) {
        return make_function(Forward{detail::module_handle_from<M>(clone)});
      };
      init(
          make_function(Forward{std::move(module)}),
          detail::accepted_input_counts<Forward>(counts),
          std::move(in_keys),
          std::move(out_keys),
          std::move(options));
    } else {
      static_assert(
          detail::accepted_input_counts<M>(counts) != 0,
          "TensorDictModule wraps a module holder or a callable taking up "
          "to 8 tensors");
      init(
          make_function(std::move(module)),
          detail::accepted_input_counts<M>(counts),
          std::move(in_keys),
          std::move(out_keys),
          std::move(options));
    }
  }

  /// Wraps `module`, calling its member function `method` instead of
  /// `forward` (Python's `method="act"`):
  /// `TensorDictModule(actor, &ActorImpl::act, {"obs"}, {"action"})`.
  /// `module` is a module holder or `std::shared_ptr` to a module, and a
  /// clone calls the same member of its copy. Throws like the constructor
  /// above.
  template <
      class M,
      class Method,
      std::enable_if_t<std::is_member_function_pointer_v<Method>, int> = 0>
  TensorDictModuleImpl(
      M module,
      Method method,
      std::vector<NestedKey> in_keys,
      std::vector<NestedKey> out_keys,
      TensorDictModuleOptions options = {})
      : TensorDictModuleBase("TensorDictModule") {
    static_assert(
        detail::is_module_handle<M>::value,
        "TensorDictModule calls a method of a module holder or of a "
        "std::shared_ptr to a module");
    using Call = detail::MethodOf<M, Method>;
    constexpr uint32_t accepted = detail::accepted_input_counts<Call>(
        std::make_index_sequence<detail::kMaxModuleInputs + 1>());
    static_assert(
        accepted != 0,
        "TensorDictModule calls a method taking up to 8 tensors");
    wrapped_ = detail::module_pointer(module);
    register_module("module", wrapped_);
    rebind_ = [method](const std::shared_ptr<torch::nn::Module>& clone) {
      return make_function(Call{detail::module_handle_from<M>(clone), method});
    };
    init(
        make_function(Call{std::move(module), method}),
        accepted,
        std::move(in_keys),
        std::move(out_keys),
        std::move(options));
  }

  /// Wraps `module` whose forward (or a callable) takes its inputs as
  /// keyword arguments, `const TensorKwargs&`: Python's dict `in_keys`.
  /// `in_keys` pairs each argument name with the key it reads (Python's
  /// default `out_to_in_map=True`); `in_keys()` then lists the keys, as
  /// Python's. An absent key is an undefined tensor under its name (a
  /// KeyError with `strict`). C++ has no keyword arguments: the module
  /// reads them from the map.
  template <class M, std::enable_if_t<detail::takes_kwargs<M>::value, int> = 0>
  TensorDictModuleImpl(
      M module,
      ArgKeys in_keys,
      std::vector<NestedKey> out_keys,
      TensorDictModuleOptions options = {})
      : TensorDictModuleBase("TensorDictModule") {
    std::vector<std::string> names;
    std::vector<NestedKey> keys;
    for (auto& [name, key] : in_keys) {
      names.push_back(std::move(name));
      keys.push_back(std::move(key));
    }
    const uint32_t accepted =
        keys.size() <= detail::kMaxModuleInputs ? 1u << keys.size() : 0u;
    if constexpr (detail::is_module_handle<M>::value) {
      using Call = detail::KwargsForwardOf<M>;
      wrapped_ = detail::module_pointer(module);
      register_module("module", wrapped_);
      rebind_ = [names](const std::shared_ptr<torch::nn::Module>& clone) {
        return make_kwargs_function(
            Call{detail::module_handle_from<M>(clone)}, names);
      };
      init(
          make_kwargs_function(Call{std::move(module)}, names),
          accepted,
          std::move(keys),
          std::move(out_keys),
          std::move(options));
    } else {
      init(
          make_kwargs_function(std::move(module), names),
          accepted,
          std::move(keys),
          std::move(out_keys),
          std::move(options));
    }
  }

  using TensorDictModuleBase::forward;
  /// Reads `in_keys` from `td` (an absent one is an undefined tensor, or
  /// with the `strict` option a KeyError naming it and this module); writes
  /// into `td` (or the new dict the `inplace` option asks for) and returns
  /// the dict written.
  TensorDict forward(TensorDict td) override;
  /// Reads `in_keys` from `td` and writes `out_keys` into `out`; returns
  /// `out`. An absent input is passed as an undefined tensor (a KeyError
  /// with `strict`); throws if an input is not a tensor, and if the module
  /// returns more or fewer tensors than there are out_keys.
  TensorDict forward(TensorDict td, TensorDict out) override;

  /// Returns the wrapped libtorch module, or null for a callable.
  const std::shared_ptr<torch::nn::Module>& module() const noexcept {
    return wrapped_;
  }
  /// Returns the options given at construction.
  const TensorDictModuleOptions& options() const noexcept {
    return options_;
  }
  /// Prints `TensorDictModule(in_keys=[...], out_keys=[...])`.
  void pretty_print(std::ostream& stream) const override;
  /// Returns a deep copy (Python's `copy.deepcopy`): the wrapped module is
  /// cloned with its `clone(device)` (its parameters copied, moved to
  /// `device` if given), the keys, selection and options kept. A callable
  /// is copied as a value, so what it captures is shared. Throws libtorch's
  /// error, naming this module, if the wrapped module cannot be cloned.
  std::shared_ptr<torch::nn::Module> clone(
      const std::optional<c10::Device>& device = std::nullopt) const override;

 private:
  struct CloneTag {};
  TensorDictModuleImpl(
      CloneTag /*unused*/,
      const TensorDictModuleImpl& other,
      const std::optional<c10::Device>& device);
  template <class F>
  static detail::TensorFunction make_function(F function) {
    return [function =
                std::move(function)](c10::ArrayRef<at::Tensor> inputs) mutable {
      return detail::invoke_n(function, inputs);
    };
  }
  template <class F>
  static detail::TensorFunction make_kwargs_function(
      F function, std::vector<std::string> names) {
    return [function = std::move(function), names = std::move(names)](
               c10::ArrayRef<at::Tensor> inputs) mutable {
      TensorKwargs kwargs;
      for (size_t i = 0; i < names.size(); ++i) {
        kwargs.emplace(names[i], inputs[i]);
      }
      detail::TensorList outputs;
      if constexpr (std::is_void_v<
                        std::invoke_result_t<F&, const TensorKwargs&>>) {
        function(kwargs);
      } else {
        detail::append_outputs(outputs, function(kwargs));
      }
      return outputs;
    };
  }
  void init(
      detail::TensorFunction function,
      uint32_t accepted_input_counts,
      std::vector<NestedKey> in_keys,
      std::vector<NestedKey> out_keys,
      TensorDictModuleOptions options);
  std::string describe() const;

  detail::TensorFunction function_;
  std::shared_ptr<torch::nn::Module> wrapped_;
  // Makes the call of a clone of `wrapped_`, which must be of its type.
  std::function<detail::TensorFunction(
      const std::shared_ptr<torch::nn::Module>&)>
      rebind_;
  TensorDictModuleOptions options_;
};

/// Wraps a libtorch module, or a callable taking tensors, so that it reads
/// its inputs from a TensorDict and writes its outputs into one (Python's
/// `tensordict.nn.TensorDictModule`). A holder, like `torch::nn::Linear`:
/// copies share the module; `module->clone()` copies it deeply. The wrapped
/// module is the child `module`, so `parameters()`, `to()`, `train()`/`eval()`,
/// optimizers and `TensorDict::from_module` see it. A forward returning a tuple
/// or a vector of tensors fills several out_keys; the out_key "_" discards an
/// output. An in_key the dict lacks is passed as an undefined tensor, as
/// Python passes None (`strict=False`, the default); with the `strict`
/// option it is a KeyError before the call.
///
/// Example:
/// ```
///   torch::nn::Linear linear(4, 2);
///   TensorDictModule actor(linear, {{"obs", "x"}}, {"action"});
///   actor(td);                     // td["action"] = linear(td["obs", "x"])
///   actor({{{"obs", "x"}, t}});    // {linear(t)}
/// ```
class TensorDictModule : public TensorDictModuleHolder<TensorDictModuleImpl> {
 public:
  using TensorDictModuleHolder::TensorDictModuleHolder;
  /// Wraps `module`; see `TensorDictModuleImpl`'s constructor.
  template <class M, std::enable_if_t<!detail::takes_kwargs<M>::value, int> = 0>
  TensorDictModule(
      M module,
      std::vector<NestedKey> in_keys,
      std::vector<NestedKey> out_keys,
      TensorDictModuleOptions options = {})
      : TensorDictModuleHolder(std::make_shared<TensorDictModuleImpl>(
            std::move(module),
            std::move(in_keys),
            std::move(out_keys),
            std::move(options))) {}
  /// Wraps `module`, calling its member `method` (Python's `method=`); see
  /// `TensorDictModuleImpl`'s constructor.
  template <
      class M,
      class Method,
      std::enable_if_t<std::is_member_function_pointer_v<Method>, int> = 0>
  TensorDictModule(
      M module,
      Method method,
      std::vector<NestedKey> in_keys,
      std::vector<NestedKey> out_keys,
      TensorDictModuleOptions options = {})
      : TensorDictModuleHolder(std::make_shared<TensorDictModuleImpl>(
            std::move(module),
            method,
            std::move(in_keys),
            std::move(out_keys),
            std::move(options))) {}
  /// Wraps `module` taking keyword arguments, with dict in_keys (Python's
  /// `in_keys={"x": "obs"}`); see `TensorDictModuleImpl`'s constructor.
  template <class M, std::enable_if_t<detail::takes_kwargs<M>::value, int> = 0>
  TensorDictModule(
      M module,
      ArgKeys in_keys,
      std::vector<NestedKey> out_keys,
      TensorDictModuleOptions options = {})
      : TensorDictModuleHolder(std::make_shared<TensorDictModuleImpl>(
            std::move(module),
            std::move(in_keys),
            std::move(out_keys),
            std::move(options))) {}
};

class TensorDictSequential;

/// Options of `TensorDictSequential`.
///
/// Example:
/// `TensorDictSequentialOptions().partial_tolerant(true)`
struct TENSORDICT_API TensorDictSequentialOptions {
  /// Skip a module whose inputs are not all in the dict, instead of
  /// throwing KeyError (Python's `partial_tolerant`).
  TENSORDICT_ARG(bool, partial_tolerant) = false;
  /// The out_keys to keep, as `select_out_keys` (Python's
  /// `selected_out_keys`); empty keeps them all.
  TENSORDICT_ARG(std::vector<NestedKey>, selected_out_keys);
};

/// The module of a TensorDictSequential holder: see `TensorDictSequential`.
class TENSORDICT_API TensorDictSequentialImpl : public TensorDictModuleBase {
 public:
  /// Chains `modules` (shared, not copied); throws ValueError if a
  /// selected out_key is not an out_key of the chain, or if a holder is
  /// empty.
  explicit TensorDictSequentialImpl(
      std::vector<AnyTensorDictModule> modules,
      TensorDictSequentialOptions options = {});

  using TensorDictModuleBase::forward;
  /// Runs the modules in order on `td` and returns it. After
  /// `select_out_keys`, the modules run on a shallow copy, and only the
  /// selected outputs (and the entries `td` had, if a module replaced
  /// them) are written back. A module's error gets the note "Failed while
  /// executing module 'i'.".
  TensorDict forward(TensorDict td) override;
  /// Runs the modules on a shallow copy of `td`, then writes the out_keys
  /// into `out` and returns it.
  TensorDict forward(TensorDict td, TensorDict out) override;

  /// Keeps only `keys` of the outputs in what forward writes back; throws
  /// ValueError if one is not an out_key.
  TensorDictSequentialImpl& select_out_keys(
      const std::vector<NestedKey>& keys) override;
  /// Undoes `select_out_keys`.
  TensorDictSequentialImpl& reset_out_keys() override;

  /// Returns a new sequence of the same modules (shared) with only those
  /// that can run from `in_keys` (default: this sequence's) and that the
  /// `out_keys` (default: this sequence's) need, nested sequences filtered
  /// the same way; it keeps `partial_tolerant`. Throws ValueError if no
  /// module is left.
  TensorDictSequential select_subsequence(
      const std::optional<std::vector<NestedKey>>& in_keys = std::nullopt,
      const std::optional<std::vector<NestedKey>>& out_keys =
          std::nullopt) const;

  /// Returns the number of modules.
  size_t size() const noexcept {
    return modules_.size();
  }
  /// Returns module `index` (negative counts from the end); throws
  /// IndexError when out of range.
  const AnyTensorDictModule& operator[](int64_t index) const;
  /// Iterates over the modules.
  std::vector<AnyTensorDictModule>::const_iterator begin() const noexcept {
    return modules_.begin();
  }
  /// Iterates over the modules.
  std::vector<AnyTensorDictModule>::const_iterator end() const noexcept {
    return modules_.end();
  }
  /// Returns true if modules with missing inputs are skipped.
  bool partial_tolerant() const noexcept {
    return partial_tolerant_;
  }
  /// Sets whether modules with missing inputs are skipped.
  void set_partial_tolerant(bool partial_tolerant) noexcept {
    partial_tolerant_ = partial_tolerant;
  }
  /// Prints `TensorDictSequential(in_keys=[...], out_keys=[...])`.
  void pretty_print(std::ostream& stream) const override;
  /// Returns a deep copy: a sequence of each module's `clone(device)`, with
  /// the same options and selected out_keys (torch's
  /// `Sequential::clone`). Throws what a module's clone throws, noting
  /// which module it was.
  std::shared_ptr<torch::nn::Module> clone(
      const std::optional<c10::Device>& device = std::nullopt) const override;

 protected:
  /// Returns each module's `clone(device)`, in order.
  std::vector<AnyTensorDictModule> clone_modules(
      const std::optional<c10::Device>& device) const;
  /// Returns the options that rebuild this sequence as it is now.
  TensorDictSequentialOptions current_options() const;

 private:
  TensorDict run(TensorDict td);

  std::vector<AnyTensorDictModule> modules_;
  bool partial_tolerant_;
};

/// Runs TensorDict modules one after the other on the same dict (Python's
/// `tensordict.nn.TensorDictSequential`). Its in_keys are the keys a module
/// reads that no earlier module writes; its out_keys every key a module
/// writes, once each, in Python's order (a key written twice counts where
/// it is written last). The modules are the children `module.0`,
/// `module.1`, ... (see NOTE [Module names as in Python]). A holder: copies
/// share the modules. Not ported: Python's dict of named modules,
/// `inplace`, slices and item assignment, and the per-element run of
/// `partial_tolerant` over a lazy stack.
///
/// Example:
/// ```
///   TensorDictSequential policy({
///       TensorDictModule(torch::nn::Linear(4, 8), {"obs"}, {"hidden"}),
///       TensorDictModule(torch::nn::Functional(torch::relu), {"hidden"},
///                        {"hidden"}),
///       TensorDictModule(torch::nn::Linear(8, 2), {"hidden"}, {"action"})});
///   policy(td);              // writes hidden and action
///   policy->in_keys();       // {"obs"}
/// ```
class TensorDictSequential
    : public TensorDictModuleHolder<TensorDictSequentialImpl> {
 public:
  using TensorDictModuleHolder::TensorDictModuleHolder;
  /// Chains `modules`; see `TensorDictSequentialImpl`'s constructor.
  TensorDictSequential(
      std::vector<AnyTensorDictModule> modules,
      TensorDictSequentialOptions options = {})
      : TensorDictModuleHolder(std::make_shared<TensorDictSequentialImpl>(
            std::move(modules), std::move(options))) {}
  /// Returns module `index` (negative counts from the end); throws
  /// IndexError when out of range.
  const AnyTensorDictModule& operator[](int64_t index) const {
    return (*get())[index];
  }
};

}  // namespace nn
TENSORDICT_END_NAMESPACE
