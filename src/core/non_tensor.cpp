#include "tensordict/non_tensor.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <functional>
#include <type_traits>

#include "core/walk.h"
#include "tensordict/errors.h"
#include "tensordict/json.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

int64_t element_count(c10::IntArrayRef sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    TORCH_CHECK_VALUE(
        s >= 0,
        "batch size must be non-negative, got ",
        detail::size_repr(sizes));
    n *= s;
  }
  return n;
}

}  // namespace

// --- NonTensorData -----------------------------------------------------------

NonTensorData::NonTensorData() : data_(std::make_shared<const Json>()) {}

NonTensorData::NonTensorData(
    Json data,
    c10::IntArrayRef batch_size,
    std::optional<c10::Device> device,
    DimNames names)
    : data_(std::make_shared<const Json>(std::move(data))), device_(device) {
  set_batch_size(batch_size);
  if (names.empty()) {
    return;
  }
  // TensorDict's checks and messages (Python's `td.names = names`).
  TORCH_CHECK_VALUE(
      names.size() == batch_size_.size(),
      "the length of the dimension names must equate the tensordict "
      "batch_dims attribute. Got ",
      detail::names_repr(names),
      " for batch_dims ",
      batch_size_.size(),
      ".");
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      TORCH_CHECK_VALUE(
          !names[i] || names[i] != names[j],
          "Some dimension names are non-unique: ",
          detail::names_repr(names),
          ".");
    }
  }
  names_ = std::move(names);
}

NonTensorData::NonTensorData(
    detail::TextArg text,
    c10::IntArrayRef batch_size,
    std::optional<c10::Device> device,
    DimNames names)
    : NonTensorData(
          text.data == nullptr ? Json()
                               : Json(std::string(text.data, text.size)),
          batch_size,
          device,
          std::move(names)) {}

// The value pointer is copied, not moved, so it is never null.
NonTensorData::NonTensorData(NonTensorData&& other) noexcept
    : data_(other.data_),
      batch_size_(std::move(other.batch_size_)),
      device_(other.device_),
      names_(std::move(other.names_)),
      saved_path_(other.saved_path_) {}

NonTensorData& NonTensorData::operator=(NonTensorData&& other) noexcept {
  data_ = other.data_;
  batch_size_ = std::move(other.batch_size_);
  device_ = other.device_;
  names_ = std::move(other.names_);
  saved_path_ = other.saved_path_;
  return *this;
}

void NonTensorData::set_batch_size(c10::IntArrayRef batch_size) {
  element_count(batch_size);  // validates
  batch_size_ = batch_size.vec();
  if (!names_.empty()) {
    names_.resize(batch_size_.size());
    if (std::all_of(names_.begin(), names_.end(), [](const auto& name) {
          return !name.has_value();
        })) {
      names_.clear();
    }
  }
}

bool NonTensorData::operator==(const NonTensorData& other) const {
  return *data_ == *other.data_ && batch_size_ == other.batch_size_ &&
         device_ == other.device_;
}

// --- NonTensorStack ----------------------------------------------------------

NonTensorStack::NonTensorStack()
    : values_(std::make_shared<const std::vector<Json>>()), batch_size_{0} {}

NonTensorStack::NonTensorStack(
    std::vector<Json> values, std::optional<c10::Device> device)
    : values_(std::make_shared<const std::vector<Json>>(std::move(values))),
      batch_size_{static_cast<int64_t>(values_->size())},
      device_(device) {}

NonTensorStack::NonTensorStack(
    std::vector<Json> values,
    c10::IntArrayRef batch_size,
    std::optional<c10::Device> device)
    : values_(std::make_shared<const std::vector<Json>>(std::move(values))),
      batch_size_(batch_size.vec()),
      device_(device) {
  TORCH_CHECK_VALUE(
      !batch_size_.empty(),
      "a NonTensorStack needs at least one batch dim, got torch.Size([])");
  const int64_t n = element_count(batch_size_);
  TORCH_CHECK_VALUE(
      static_cast<int64_t>(values_->size()) == n,
      "a NonTensorStack of batch size ",
      detail::size_repr(batch_size_),
      " needs ",
      n,
      " values, got ",
      values_->size());
}

// The values pointer is copied, not moved, so it is never null.
NonTensorStack::NonTensorStack(NonTensorStack&& other) noexcept
    : values_(other.values_),
      batch_size_(std::move(other.batch_size_)),
      device_(other.device_),
      saved_path_(other.saved_path_) {}

NonTensorStack& NonTensorStack::operator=(NonTensorStack&& other) noexcept {
  values_ = other.values_;
  batch_size_ = std::move(other.batch_size_);
  device_ = other.device_;
  saved_path_ = other.saved_path_;
  return *this;
}

NonTensorStack NonTensorStack::from_list(
    const Json& nested, int64_t batch_dims, std::optional<c10::Device> device) {
  TORCH_CHECK_VALUE(
      batch_dims >= 1,
      "a NonTensorStack needs at least one batch dim, got batch_dims=",
      batch_dims);
  std::vector<int64_t> sizes;
  const Json* level = &nested;
  for (int64_t d = 0; d < batch_dims; ++d) {
    TORCH_CHECK_VALUE(
        level->is_array(),
        "NonTensorStack.from_list: expected a list at depth ",
        d,
        ", got ",
        level->type_name());
    sizes.push_back(static_cast<int64_t>(level->size()));
    if (level->empty()) {
      // Deeper sizes of an empty list are unknowable: they are zero.
      sizes.resize(batch_dims, 0);
      break;
    }
    level = &level->front();
  }
  std::vector<Json> flat;
  std::function<void(const Json&, int64_t)> collect = [&](const Json& node,
                                                          int64_t depth) {
    if (depth == batch_dims) {
      flat.push_back(node);
      return;
    }
    TORCH_CHECK_VALUE(
        node.is_array() && static_cast<int64_t>(node.size()) == sizes[depth],
        "NonTensorStack.from_list: ragged lists: expected a list of length ",
        sizes[depth],
        " at depth ",
        depth,
        ", got ",
        node.is_array() ? std::to_string(node.size()) : node.type_name());
    for (const Json& child : node) {
      collect(child, depth + 1);
    }
  };
  collect(nested, 0);
  return NonTensorStack(std::move(flat), sizes, device);
}

const Json& NonTensorStack::at(int64_t flat_index) const {
  TORCH_CHECK_INDEX(
      flat_index >= 0 && flat_index < static_cast<int64_t>(values_->size()),
      "index ",
      flat_index,
      " is out of bounds for a NonTensorStack of ",
      values_->size(),
      " values");
  return (*values_)[flat_index];
}

Json NonTensorStack::tolist() const {
  std::function<Json(size_t, size_t&)> build = [&](size_t dim, size_t& pos) {
    Json list = Json::array();
    for (int64_t i = 0; i < batch_size_[dim]; ++i) {
      if (dim + 1 == batch_size_.size()) {
        list.push_back((*values_)[pos++]);
      } else {
        list.push_back(build(dim + 1, pos));
      }
    }
    return list;
  };
  size_t pos = 0;
  return build(0, pos);
}

void NonTensorStack::set_batch_size(c10::IntArrayRef batch_size) {
  const size_t common = std::min(batch_size.size(), batch_size_.size());
  TORCH_CHECK(
      std::equal(
          batch_size_.begin(),
          batch_size_.begin() + common,
          batch_size.begin()),
      "the NonTensorStack has batch size ",
      detail::size_repr(batch_size_),
      " which is incompatible with the batch-size ",
      detail::size_repr(batch_size),
      ".");
  if (batch_size.size() <= batch_size_.size()) {
    return;
  }
  const int64_t repeat = element_count(batch_size.slice(batch_size_.size()));
  std::vector<Json> grown;
  grown.reserve(values_->size() * repeat);
  for (const Json& value : *values_) {
    for (int64_t r = 0; r < repeat; ++r) {
      grown.push_back(value);
    }
  }
  // Copies may share the old values: replace them, never modify them.
  values_ = std::make_shared<const std::vector<Json>>(std::move(grown));
  batch_size_ = batch_size.vec();
}

bool NonTensorStack::operator==(const NonTensorStack& other) const {
  return *values_ == *other.values_ && batch_size_ == other.batch_size_ &&
         device_ == other.device_;
}

// --- Python's NonTensorData / NonTensorStack methods ----------------------

namespace {

DimNames unnamed(size_t dims) {
  return DimNames(dims, std::nullopt);
}

// `data` repeated as nested lists over `batch_size[dim:]`.
Json repeat_as_lists(const Json& data, c10::IntArrayRef batch_size) {
  if (batch_size.empty()) {
    return data;
  }
  const Json inner = repeat_as_lists(data, batch_size.slice(1));
  Json list = Json::array();
  for (int64_t i = 0; i < batch_size[0]; ++i) {
    list.push_back(inner);
  }
  return list;
}

std::vector<int64_t> without_dim(c10::IntArrayRef sizes, int64_t dim) {
  std::vector<int64_t> out = sizes.vec();
  out.erase(out.begin() + dim);
  return out;
}

}  // namespace

DimNames NonTensorData::names() const {
  return names_.empty() ? unnamed(batch_size_.size()) : names_;
}

Json NonTensorData::tolist() const {
  return repeat_as_lists(*data_, batch_size_);
}

Value NonTensorData::maybe_to_stack() const {
  if (batch_size_.empty()) {
    return *this;
  }
  int64_t count = 1;
  for (const int64_t size : batch_size_) {
    count *= size;
  }
  return NonTensorStack(
      std::vector<Json>(static_cast<size_t>(count), *data_),
      batch_size_,
      device_);
}

std::vector<NonTensorData> NonTensorData::unbind(int64_t dim) const {
  dim = detail::wrap_dim(dim, static_cast<int64_t>(batch_size_.size()));
  NonTensorData piece = *this;
  piece.batch_size_ = without_dim(batch_size_, dim);
  if (!piece.names_.empty()) {
    piece.names_.erase(piece.names_.begin() + dim);
  }
  return std::vector<NonTensorData>(
      static_cast<size_t>(batch_size_[dim]), piece);
}

Json NonTensorData::get(std::string_view key) const {
  TENSORDICT_CHECK_KEY(
      key == "data",
      "NonTensorData has one entry, 'data'; there is no key ",
      detail::python_repr(std::string(key)));
  return *data_;
}

Json NonTensorData::get(std::string_view key, Json default_value) const {
  return key == "data" ? *data_ : std::move(default_value);
}

NonTensorData& NonTensorData::set(
    std::string_view key, Json value, const SetOptions& /*options*/) {
  // Neither option changes anything: see the header.
  return set(key, std::move(value));
}

NonTensorData& NonTensorData::set(std::string_view key, Json value) {
  TENSORDICT_CHECK_KEY(
      key == "data",
      "NonTensorData has one entry, 'data'; there is no key ",
      detail::python_repr(std::string(key)));
  data_ = std::make_shared<const Json>(std::move(value));
  return *this;
}

NonTensorData NonTensorData::from_tensordict(
    const TensorDict& td, const Json& non_tensordict) {
  TORCH_CHECK_VALUE(
      td.is_empty(),
      "NonTensorData.from_tensordict: NonTensorData has no tensor fields, "
      "but the tensordict holds entries");
  const auto data = non_tensordict.find("data");
  TENSORDICT_CHECK_KEY(
      non_tensordict.is_object() && data != non_tensordict.end(),
      "NonTensorData.from_tensordict: non_tensordict needs the field "
      "'data'");
  return NonTensorData(*data, td.batch_size(), td.device());
}

DimNames NonTensorStack::names() const {
  return unnamed(batch_size_.size());
}

std::vector<Value> NonTensorStack::unbind(int64_t dim) const {
  const auto ndim = static_cast<int64_t>(batch_size_.size());
  dim = detail::wrap_dim(dim, ndim);
  const int64_t n = batch_size_[dim];
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < ndim; ++d) {
    inner *= batch_size_[d];
  }
  const int64_t outer =
      n * inner == 0 ? 0 : static_cast<int64_t>(values_->size()) / (n * inner);
  const std::vector<int64_t> piece_batch = without_dim(batch_size_, dim);
  std::vector<Value> pieces;
  pieces.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    std::vector<Json> values;
    values.reserve(static_cast<size_t>(outer * inner));
    for (int64_t o = 0; o < outer; ++o) {
      const auto begin = values_->begin() + (o * n + i) * inner;
      values.insert(values.end(), begin, begin + inner);
    }
    if (piece_batch.empty()) {
      pieces.emplace_back(NonTensorData(values.front(), {}, device_));
    } else {
      pieces.emplace_back(
          NonTensorStack(std::move(values), piece_batch, device_));
    }
  }
  return pieces;
}

TENSORDICT_END_NAMESPACE
