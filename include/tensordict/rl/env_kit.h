#pragma once

/// @file
/// The env author's kit: typed row views that resolve a leaf once per call
/// (`Rows`, `IndexRows`), and `BatchedEnv`, which batches an env written one
/// sub-env at a time (EnvPool's shape). Part of <tensordict/rl.h>; the
/// guide is docs/new_env.md.
//
// NOTE [Rows in a range call]
// `EnvBase::step_range` and `reset_range` check every leaf they hand to
// `step_range_`/`reset_range_` (key, dtype, shape [N, ...]) before calling
// the env, so an env reads and writes rows by pointer. A `Rows<T>` made at
// the top of `step_range_` resolves its key once, checks the dtype T and the
// layout again (one compare each), and then `rows(i, j)` is a multiply and
// a load. It points into the dict's leaf: it is valid while that leaf is
// not replaced, which holds for the duration of one range call. Views are
// CPU only (an env that steps on another device writes with tensor ops).

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensordict/export.h"
#include "tensordict/fwd.h"
#include "tensordict/nested_key.h"
#include "tensordict/rl/env.h"
#include "tensordict/rl/spec.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Where the rows of a leaf [N, d1, ..., dk] are: N rows of `width` = d1 *
/// ... * dk elements, `row_stride` and `col_stride` elements apart.
struct RowLayout {
  /// The first element (of the leaf's dtype).
  void* data = nullptr;
  /// N.
  int64_t rows = 0;
  /// Elements a row (1 for a leaf [N]).
  int64_t width = 1;
  /// Elements between rows.
  int64_t row_stride = 0;
  /// Elements between the elements of a row.
  int64_t col_stride = 1;
  /// The leaf's dtype.
  c10::ScalarType dtype = c10::ScalarType::Undefined;
};

/// Returns the layout of `leaf`: a CPU tensor of >= 1 dims whose trailing
/// dims are one strided axis. Throws ValueError naming `key` otherwise. A
/// `writable` layout points at `data_ptr()`; a read-only one at
/// `const_data_ptr()`, which never copies a lazily cloned storage.
TENSORDICT_API RowLayout
row_layout(const at::Tensor& leaf, const NestedKey& key, bool writable);

/// Returns the layout of the tensor at `key` of `td`. Throws KeyError if it
/// is missing, TypeError if it is not a tensor, ValueError as above.
TENSORDICT_API RowLayout
row_layout(const TensorDict& td, const NestedKey& key, bool writable);

/// Throws ValueError: the leaf at `key` is `got`, the view wants `expected`.
[[noreturn]] TENSORDICT_API void throw_row_dtype(
    const NestedKey& key, c10::ScalarType expected, c10::ScalarType got);

/// Reads element `offset` of a layout of any real dtype, as int64.
TENSORDICT_API int64_t read_as_int64(const RowLayout& layout, int64_t offset);

}  // namespace detail

namespace rl {

/// A typed view of the rows of an [N, ...] leaf: `rows(i, j)` is element j
/// of sub-env i's row (the trailing dims flattened). T is the leaf's C++
/// type (`float`, `int64_t`, `bool`, ...); `Rows<const T>` reads without
/// asking for a writable pointer. See NOTE [Rows in a range call].
///
/// Example (in `step_range_`):
/// ```
///   const rl::Rows<float> obs(next, "observation");
///   const rl::Rows<float> reward(next, "reward");
///   for (int64_t i = begin; i < end; ++i) { obs(i, 0) = 0.0F; reward(i)
///   = 1.0F; }
/// ```
template <typename T>
class Rows {
 public:
  /// The element type without const.
  using value_type = std::remove_const_t<T>;

  /// Resolves `key` of `td` once. Throws KeyError, TypeError or ValueError
  /// naming the key when it is missing, not a tensor, not of dtype T, not
  /// on the CPU, or of no batch dim.
  Rows(const TensorDict& td, const NestedKey& key)
      : Rows(detail::row_layout(td, key, !std::is_const_v<T>), key) {}
  /// Views `leaf`; errors name `key`.
  explicit Rows(const at::Tensor& leaf, const NestedKey& key = "leaf")
      : Rows(detail::row_layout(leaf, key, !std::is_const_v<T>), key) {}

  /// Returns element `j` of row `i` (no bounds check).
  T& operator()(int64_t i, int64_t j = 0) const {
    return data_[i * row_stride_ + j * col_stride_];
  }
  /// Returns the number of rows (N).
  int64_t size() const noexcept {
    return rows_;
  }
  /// Returns the elements a row.
  int64_t width() const noexcept {
    return width_;
  }
  /// Returns true if a row's elements are adjacent, so that `row(i)` may be
  /// read as an array of `width()` elements.
  bool rows_contiguous() const noexcept {
    return col_stride_ == 1 || width_ == 1;
  }
  /// Returns a pointer to row `i`'s first element.
  T* row(int64_t i) const {
    return data_ + i * row_stride_;
  }

 private:
  Rows(const detail::RowLayout& layout, const NestedKey& key)
      : data_(static_cast<T*>(layout.data)),
        rows_(layout.rows),
        width_(layout.width),
        row_stride_(layout.row_stride),
        col_stride_(layout.col_stride) {
    constexpr c10::ScalarType kDtype =
        c10::CppTypeToScalarType<value_type>::value;
    if (layout.dtype != kDtype) {
      detail::throw_row_dtype(key, kDtype, layout.dtype);
    }
  }

  T* data_;
  int64_t rows_;
  int64_t width_;
  int64_t row_stride_;
  int64_t col_stride_;
};

/// Reads a discrete action as one index per sub-env, whatever form the spec
/// takes: a `Categorical` leaf [N] or [N, 1] of an integer dtype, or a
/// `OneHot` leaf [N, n] of any integer, bool or floating dtype (the index
/// of its one 1). The action was checked against the spec before the range
/// call, so a one-hot row holds exactly one 1.
///
/// Example: `const rl::IndexRows action(td, "action", action_spec());`
/// then `action[i]` is sub-env i's index.
class TENSORDICT_API IndexRows {
 public:
  /// Resolves `key` of `td` as an action of `spec` (Categorical or
  /// OneHot). Throws ValueError for another spec kind, a shape that does
  /// not fit it, or a leaf that is not on the CPU; KeyError if missing.
  IndexRows(const TensorDict& td, const NestedKey& key, const TensorSpec& spec);

  /// Returns sub-env `i`'s index.
  int64_t operator[](int64_t i) const {
    switch (layout_.dtype) {
      case c10::kLong:
        return index_of(
            i, Typed<int64_t>{static_cast<const int64_t*>(layout_.data)});
      case c10::kInt:
        return index_of(
            i, Typed<int32_t>{static_cast<const int32_t*>(layout_.data)});
      case c10::kBool:
        return index_of(i, Typed<bool>{static_cast<const bool*>(layout_.data)});
      case c10::kFloat:
        return index_of(
            i, Typed<float>{static_cast<const float*>(layout_.data)});
      default:
        return index_of(i, [this](int64_t offset) {
          return detail::read_as_int64(layout_, offset);
        });
    }
  }
  /// Returns the number of rows (N).
  int64_t size() const noexcept {
    return layout_.rows;
  }
  /// Returns where the leaf's rows are.
  const detail::RowLayout& layout() const noexcept {
    return layout_;
  }

 private:
  // Reads the element at an offset as an int64 (floats truncated).
  template <typename T>
  struct Typed {
    const T* data;
    int64_t operator()(int64_t offset) const {
      return static_cast<int64_t>(data[offset]);
    }
  };
  // Row i's index, its elements read by `read`. A one-hot row's is its
  // first nonzero element, -1 for none, chosen by selects from the last:
  // actions are random, and a loop leaving at the 1 mispredicts every
  // other row.
  template <class Read>
  int64_t index_of(int64_t i, Read read) const {
    const int64_t base = i * layout_.row_stride;
    if (!one_hot_) {
      return read(base);
    }
    int64_t index = -1;
    for (int64_t j = layout_.width - 1; j >= 0; --j) {
      index = read(base + j * layout_.col_stride) != 0 ? j : index;
    }
    return index;
  }

  detail::RowLayout layout_;
  bool one_hot_ = false;
};

/// What a sub-env's step returns to `BatchedEnv`.
struct StepResult {
  /// The step's reward.
  float reward = 0.0F;
  /// The episode ended (a terminal state).
  bool terminated = false;
  /// The episode was cut short (a time limit).
  bool truncated = false;
};

/// The increment of splitmix64's state, 2^64 divided by the golden ratio.
inline constexpr uint64_t kSplitmix64Gamma = 0x9E3779B97F4A7C15ULL;

/// Returns splitmix64's output for state `x`: the hash of the sub-env
/// seeds (`sub_env_seed`), of the built-in envs' resets and of
/// `SubEnvRng`. The same integers in Python
/// (examples/python_env/reference.py), so resets are reproducible outside
/// C++.
constexpr uint64_t splitmix64(uint64_t x) noexcept {
  x += kSplitmix64Gamma;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/// The random stream `BatchedEnv` gives each sub-env: re-seeded at every
/// reset from (the env's seed, the sub-env's index, its episode count),
/// and used by that sub-env alone, so that the data do not depend on how
/// the sub-envs are split among threads. A splitmix64 stream: a standard
/// random number engine of 64-bit outputs (feed it to `<random>`'s
/// distributions as any engine), whose state is one word, so that the
/// re-seed at every reset costs a store where `std::mt19937_64` would
/// rebuild 312 words (several microseconds a reset, about 5% of a
/// collector's batch on CartPole). Output k after `seed(s)` is
/// splitmix64(s + (k + 1) * 0x9E3779B97F4A7C15), as the built-in envs hash
/// their resets.
class SubEnvRng {
 public:
  /// The type of an output.
  using result_type = uint64_t;
  /// The seed a default-constructed stream starts from.
  static constexpr result_type default_seed = 0;

  /// Starts the stream of `seed`.
  explicit SubEnvRng(result_type seed = default_seed) noexcept : state_(seed) {}
  /// Restarts the stream of `seed`.
  void seed(result_type seed = default_seed) noexcept {
    state_ = seed;
  }
  /// Returns the next output.
  result_type operator()() noexcept {
    const result_type out = splitmix64(state_);
    state_ += kSplitmix64Gamma;
    return out;
  }
  /// Skips `n` outputs.
  void discard(unsigned long long n) noexcept {
    state_ += kSplitmix64Gamma * static_cast<uint64_t>(n);
  }
  /// Returns the smallest output.
  static constexpr result_type min() noexcept {
    return 0;
  }
  /// Returns the largest output.
  static constexpr result_type max() noexcept {
    return ~result_type{0};
  }
  /// Returns true if both streams give the same outputs from here on.
  friend bool operator==(const SubEnvRng& a, const SubEnvRng& b) noexcept {
    return a.state_ == b.state_;
  }
  /// Returns true if the streams differ from here on.
  friend bool operator!=(const SubEnvRng& a, const SubEnvRng& b) noexcept {
    return a.state_ != b.state_;
  }

 private:
  uint64_t state_;
};

/// Returns the seed of episode `episode` of sub-env `index` under the env
/// seed `seed`: splitmix64 of the three, the streams the built-in envs
/// draw their resets from (see NOTE [Sub-env ranges]).
TENSORDICT_API uint64_t
sub_env_seed(uint64_t seed, int64_t index, int64_t episode) noexcept;

/// One sub-env's rows in a call of a `BatchedEnv` sub-env: its observation
/// rows to write, and its action to read (in `step`).
class SubEnvRows {
 public:
  /// Returns the sub-env's row of observation key `k` (the observation
  /// spec's order), `width` adjacent elements of type T. Throws ValueError
  /// if T is not the key's dtype.
  template <typename T>
  T* observation(size_t k = 0) const {
    const detail::RowLayout& layout = observations_->at(k);
    constexpr c10::ScalarType kDtype = c10::CppTypeToScalarType<T>::value;
    if (layout.dtype != kDtype) {
      detail::throw_row_dtype(observation_keys_->at(k), kDtype, layout.dtype);
    }
    return static_cast<T*>(layout.data) + index_ * layout.row_stride;
  }
  /// Returns the sub-env's action index (a Categorical or OneHot action
  /// spec, any accepted dtype). Only in `step`.
  int64_t action_index() const {
    TORCH_CHECK(action_index_ != nullptr, "SubEnvRows: no action in a reset");
    return (*action_index_)[index_];
  }
  /// Returns the sub-env's action row, of type T (an action spec's own
  /// dtype; a one-hot action may come in another: read `action_index`).
  /// Only in `step`. Throws ValueError if T is not the action's dtype.
  template <typename T>
  const T* action() const {
    TORCH_CHECK(action_ != nullptr, "SubEnvRows: no action in a reset");
    constexpr c10::ScalarType kDtype = c10::CppTypeToScalarType<T>::value;
    if (action_->dtype != kDtype) {
      detail::throw_row_dtype("action", kDtype, action_->dtype);
    }
    return static_cast<const T*>(action_->data) + index_ * action_->row_stride;
  }
  /// Returns the sub-env's index.
  int64_t index() const noexcept {
    return index_;
  }

  /// Made by `BatchedEnv`.
  SubEnvRows(
      int64_t index,
      const std::vector<detail::RowLayout>* observations,
      const std::vector<NestedKey>* observation_keys,
      const detail::RowLayout* action,
      const IndexRows* action_index)
      : index_(index),
        observations_(observations),
        observation_keys_(observation_keys),
        action_(action),
        action_index_(action_index) {}

 private:
  int64_t index_;
  const std::vector<detail::RowLayout>* observations_;
  const std::vector<NestedKey>* observation_keys_;
  const detail::RowLayout* action_;
  const IndexRows* action_index_;
};

/// Batches an env written one sub-env at a time, in EnvPool's shape, into
/// an `EnvBase` of `num_envs` of them. `SubEnv` provides:
/// - `SubEnv(const Json& kwargs)`: read the keyword arguments with
///   `EnvKwargs` (every sub-env is made from the same ones);
/// - `std::string name() const`, `Composite observation_spec() const` and
///   `TensorSpec action_spec() const` (asked of the first sub-env);
/// - `void reset(const SubEnvRows& rows, SubEnvRng& rng)`: start an
///   episode and write its first observation;
/// - `StepResult step(const SubEnvRows& rows, SubEnvRng& rng)`: read the
///   action, write the observation, return reward and flags.
///
/// Each sub-env is called from one thread at a time (a collector gives
/// each thread a contiguous range of sub-envs) and only on its own rows.
/// Observation rows must be contiguous (every leaf the env makes is).
/// The rng is re-seeded with `sub_env_seed` at every reset (a one-word
/// store: `SubEnvRng`). The adapter keeps each sub-env's last observation,
/// so a partial reset writes the others' rows too, as the range contract
/// asks.
///
/// Example: `TENSORDICT_REGISTER_ENV("Chain-v0", rl::BatchedEnv<Chain>);`
template <typename SubEnv>
class BatchedEnv : public EnvBase {
 public:
  /// Makes `num_envs` sub-envs, each `SubEnv(kwargs)`.
  BatchedEnv(int64_t num_envs, const Json& kwargs) : EnvBase(num_envs) {
    envs_.reserve(static_cast<size_t>(num_envs));
    for (int64_t i = 0; i < num_envs; ++i) {
      envs_.emplace_back(kwargs);
    }
    name_ = envs_.front().name();
    set_specs(envs_.front().observation_spec(), envs_.front().action_spec());
    // The last observation of each sub-env: the rows sub-envs write.
    last_ = observation_spec().zero(batch_size());
    for (const auto& entry : observation_spec().entries()) {
      keys_.push_back(entry.first);
      layouts_.push_back(detail::row_layout(last_, entry.first, true));
      TORCH_CHECK_VALUE(
          layouts_.back().col_stride == 1 || layouts_.back().width == 1,
          name_,
          ": observation ",
          entry.first.to_string(),
          " needs contiguous rows");
    }
    rngs_.resize(static_cast<size_t>(num_envs));
    episodes_.assign(static_cast<size_t>(num_envs), 0);
  }

  /// Returns the sub-envs' name.
  std::string name() const override {
    return name_;
  }
  /// Returns sub-env `i` (for tests and inspection; not while stepping).
  SubEnv& sub_env(int64_t i) {
    return envs_.at(static_cast<size_t>(i));
  }

 protected:
  void reset_range_(
      int64_t begin,
      int64_t end,
      const bool* mask,
      const TensorDict& out) override {
    for (int64_t i = begin; i < end; ++i) {
      if (mask == nullptr || mask[i]) {
        SubEnvRng& rng = rngs_[static_cast<size_t>(i)];
        rng.seed(sub_env_seed(seed(), i, episodes_[static_cast<size_t>(i)]++));
        envs_[static_cast<size_t>(i)].reset(
            SubEnvRows(i, &layouts_, &keys_, nullptr, nullptr), rng);
      }
    }
    copy_observations(begin, end, [&](size_t k) {
      return detail::row_layout(out, keys_[k], true);
    });
  }

  void step_range_(
      int64_t begin,
      int64_t end,
      const TensorDict& td,
      const TensorDict& next) override {
    step_rows(
        begin,
        end,
        td,
        Rows<float>(next, "reward"),
        Rows<bool>(next, "terminated"),
        Rows<bool>(next, "truncated"));
    copy_observations(begin, end, [&](size_t k) {
      return detail::row_layout(next, keys_[k], true);
    });
  }

  // The collector's path: the "next" leaves were found once per batch
  // (`EnvBase::step_leaves`), so no key is looked up here, as in the
  // built-in envs.
  void step_leaves_(
      int64_t begin,
      int64_t end,
      const TensorDict& td,
      const StepLeaves& leaves) override {
    step_rows(
        begin,
        end,
        td,
        Rows<float>(leaves.reward, "reward"),
        Rows<bool>(leaves.terminated, "terminated"),
        Rows<bool>(leaves.truncated, "truncated"));
    copy_observations(begin, end, [&](size_t k) {
      return detail::row_layout(leaves.observations[k], keys_[k], true);
    });
  }

  void set_seed_(uint64_t /*seed*/) override {
    std::fill(episodes_.begin(), episodes_.end(), 0);
  }

 private:
  // Steps sub-envs [begin, end), writing their rewards and flags.
  void step_rows(
      int64_t begin,
      int64_t end,
      const TensorDict& td,
      const Rows<float>& reward,
      const Rows<bool>& terminated,
      const Rows<bool>& truncated) {
    // One lookup of the action: a discrete one's layout is its IndexRows'.
    const bool discrete = action_spec().kind() == SpecKind::kCategorical ||
                          action_spec().kind() == SpecKind::kOneHot;
    std::optional<IndexRows> index;
    detail::RowLayout action;
    if (discrete) {
      index.emplace(td, "action", action_spec());
      action = index->layout();
    } else {
      action = detail::row_layout(td, "action", false);
    }
    for (int64_t i = begin; i < end; ++i) {
      const StepResult result = envs_[static_cast<size_t>(i)].step(
          SubEnvRows(i, &layouts_, &keys_, &action, index ? &*index : nullptr),
          rngs_[static_cast<size_t>(i)]);
      reward(i) = result.reward;
      terminated(i) = result.terminated;
      truncated(i) = result.truncated;
    }
  }

  // Copies rows [begin, end) of the last observations into the rows
  // `layout_of(k)` gives for observation k.
  template <class LayoutOf>
  void copy_observations(
      int64_t begin, int64_t end, const LayoutOf& layout_of) {
    for (size_t k = 0; k < keys_.size(); ++k) {
      const detail::RowLayout to = layout_of(k);
      const detail::RowLayout& from = layouts_[k];
      const auto item = static_cast<int64_t>(c10::elementSize(from.dtype));
      for (int64_t i = begin; i < end; ++i) {
        if (to.col_stride == 1 || to.width == 1) {
          std::memcpy(
              static_cast<char*>(to.data) + i * to.row_stride * item,
              static_cast<const char*>(from.data) + i * from.row_stride * item,
              static_cast<size_t>(from.width * item));
        } else {
          for (int64_t j = 0; j < from.width; ++j) {
            std::memcpy(
                static_cast<char*>(to.data) +
                    (i * to.row_stride + j * to.col_stride) * item,
                static_cast<const char*>(from.data) +
                    (i * from.row_stride + j) * item,
                static_cast<size_t>(item));
          }
        }
      }
    }
  }

  std::string name_;
  std::vector<SubEnv> envs_;
  std::vector<SubEnvRng> rngs_;
  std::vector<int64_t> episodes_;
  TensorDict last_;
  std::vector<NestedKey> keys_;
  std::vector<detail::RowLayout> layouts_;
};

}  // namespace rl
TENSORDICT_END_NAMESPACE
