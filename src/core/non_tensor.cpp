#include "tensordict/non_tensor.h"

#include <c10/util/Exception.h>

#include <functional>
#include <type_traits>

#include "core/walk.h"
#include "memmap/writer.h"
#include "tensordict/errors.h"
#include "tensordict/json.h"
#include "tensordict/state_dict.h"
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

// Python's repr() of the object a JSON value decodes to.
void append_python_repr(std::string& out, const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      out += "None";
      break;
    case Json::value_t::boolean:
      out += value.get<bool>() ? "True" : "False";
      break;
    case Json::value_t::string:
      out += detail::python_repr(value.get_ref<const std::string&>());
      break;
    case Json::value_t::number_float:
      out += detail::float_repr(value.get<double>());
      break;
    case Json::value_t::array: {
      out += '[';
      bool first = true;
      for (const Json& item : value) {
        out += first ? "" : ", ";
        first = false;
        append_python_repr(out, item);
      }
      out += ']';
      break;
    }
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, item] : value.items()) {
        out += first ? "" : ", ";
        first = false;
        out += detail::python_repr(k);
        out += ": ";
        append_python_repr(out, item);
      }
      out += '}';
      break;
    }
    default:  // integers and binary
      out += value.dump();
      break;
  }
}

}  // namespace

std::string python_str(const Json& value) {
  if (value.is_string()) {
    return value.get<std::string>();
  }
  std::string out;
  append_python_repr(out, value);
  return out;
}

// --- NonTensorData -----------------------------------------------------------

NonTensorData::NonTensorData() : data_(std::make_shared<const Json>()) {}

NonTensorData::NonTensorData(
    Json data, c10::IntArrayRef batch_size, std::optional<c10::Device> device)
    : data_(std::make_shared<const Json>(std::move(data))), device_(device) {
  set_batch_size(batch_size);
}

NonTensorData::NonTensorData(
    detail::TextArg text,
    c10::IntArrayRef batch_size,
    std::optional<c10::Device> device)
    : NonTensorData(
          text.data == nullptr ? Json()
                               : Json(std::string(text.data, text.size)),
          batch_size,
          device) {}

// The value pointer is copied, not moved, so it is never null.
NonTensorData::NonTensorData(NonTensorData&& other) noexcept
    : data_(other.data_),
      batch_size_(std::move(other.batch_size_)),
      device_(other.device_),
      saved_path_(other.saved_path_) {}

NonTensorData& NonTensorData::operator=(NonTensorData&& other) noexcept {
  data_ = other.data_;
  batch_size_ = std::move(other.batch_size_);
  device_ = other.device_;
  saved_path_ = other.saved_path_;
  return *this;
}

void NonTensorData::set_batch_size(c10::IntArrayRef batch_size) {
  element_count(batch_size);  // validates
  batch_size_ = batch_size.vec();
}

std::string NonTensorData::repr() const {
  return c10::str(
      "NonTensorData(data=",
      python_str(*data_),
      ", batch_size=",
      detail::size_repr(batch_size_),
      ", device=",
      detail::device_repr(device_),
      ")");
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

std::string NonTensorStack::repr() const {
  std::string list;
  append_python_repr(list, tolist());
  const std::string body = c10::str(
      list,
      ",\nbatch_size=",
      detail::size_repr(batch_size_),
      ",\ndevice=",
      detail::device_repr(device_),
      ")");
  return "NonTensorStack(\n" + detail::indent_lines(body, "    ");
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

void check_empty_state_dict(const StateDict& state_dict, const char* what) {
  TORCH_CHECK_VALUE(
      state_dict.empty(),
      what,
      " holds no tensors, so its state dict is empty; got one with ",
      state_dict.size(),
      " entries");
}

// Loads a directory whose root must be a `T` (NonTensorData or
// NonTensorStack).
// The directory `load_memmap(prefix, options)` reads.
std::string loaded_directory(
    const std::string& prefix, const LoadMemmapOptions& options) {
  std::string dir = prefix;
  for (const std::string& part : options.subpath()) {
    dir += "/" + part;
  }
  return dir;
}

template <typename T>
T load_root(const std::string& prefix, const LoadMemmapOptions& options) {
  constexpr bool kData = std::is_same_v<T, NonTensorData>;
  const Value value = detail::load_non_tensor_root(prefix, options);
  TORCH_CHECK(
      kData ? value.is_non_tensor_data() : value.is_non_tensor_stack(),
      prefix,
      " holds a ",
      value.type_name(),
      ", not a ",
      kData ? "NonTensorData" : "NonTensorStack",
      ": load it with ",
      value.type_name(),
      "::load_memmap");
  if constexpr (kData) {
    return value.non_tensor_data();
  } else {
    return value.non_tensor_stack();
  }
}

}  // namespace

DimNames NonTensorData::names() const {
  return unnamed(batch_size_.size());
}

Json NonTensorData::tolist() const {
  return repeat_as_lists(*data_, batch_size_);
}

NonTensorStack NonTensorData::maybe_to_stack() const {
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

StateDict NonTensorData::state_dict() const {
  return {};
}

NonTensorData& NonTensorData::load_state_dict(const StateDict& state_dict) {
  check_empty_state_dict(state_dict, "NonTensorData");
  return *this;
}

NonTensorData NonTensorData::memmap(const MemmapOptions& options) const {
  NonTensorData out = *this;
  return out.memmap_(options);
}

NonTensorData& NonTensorData::memmap_(const MemmapOptions& options) {
  detail::save_non_tensor_root(Value(*this), options);
  if (!options.prefix().empty()) {
    saved_path_ = std::make_shared<const std::string>(options.prefix());
  }
  return *this;
}

NonTensorData NonTensorData::memmap_like(const MemmapOptions& options) const {
  return memmap(options);
}

NonTensorData NonTensorData::save(const MemmapOptions& options) const {
  return memmap(options);
}

NonTensorData NonTensorData::dumps(const MemmapOptions& options) const {
  return memmap(options);
}

NonTensorData NonTensorData::load_memmap(
    const std::string& prefix, const LoadMemmapOptions& options) {
  NonTensorData out = load_root<NonTensorData>(prefix, options);
  out.saved_path_ =
      std::make_shared<const std::string>(loaded_directory(prefix, options));
  return out;
}

NonTensorData NonTensorData::load(
    const std::string& prefix, const LoadMemmapOptions& options) {
  return load_memmap(prefix, options);
}

NonTensorData& NonTensorData::load_memmap_(
    const std::string& prefix, const LoadMemmapOptions& options) {
  *this = load_memmap(prefix, options);
  return *this;
}

NonTensorData& NonTensorData::load_(
    const std::string& prefix, const LoadMemmapOptions& options) {
  return load_memmap_(prefix, options);
}

NonTensorData& NonTensorData::memmap_refresh_() {
  TORCH_CHECK(
      saved_path_ != nullptr,
      "Cannot refresh a NonTensorData that is not memory mapped or has no "
      "path associated.");
  // The directory stores no batch dims (nor does Python's): keep ours.
  data_ = load_memmap(*saved_path_).data_;
  return *this;
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

StateDict NonTensorStack::state_dict() const {
  return {};
}

NonTensorStack& NonTensorStack::load_state_dict(const StateDict& state_dict) {
  check_empty_state_dict(state_dict, "NonTensorStack");
  return *this;
}

NonTensorStack NonTensorStack::memmap(const MemmapOptions& options) const {
  NonTensorStack out = *this;
  return out.memmap_(options);
}

NonTensorStack& NonTensorStack::memmap_(const MemmapOptions& options) {
  detail::save_non_tensor_root(Value(*this), options);
  if (!options.prefix().empty()) {
    saved_path_ = std::make_shared<const std::string>(options.prefix());
  }
  return *this;
}

NonTensorStack NonTensorStack::memmap_like(const MemmapOptions& options) const {
  return memmap(options);
}

NonTensorStack NonTensorStack::save(const MemmapOptions& options) const {
  return memmap(options);
}

NonTensorStack NonTensorStack::dumps(const MemmapOptions& options) const {
  return memmap(options);
}

NonTensorStack NonTensorStack::load_memmap(
    const std::string& prefix, const LoadMemmapOptions& options) {
  NonTensorStack out = load_root<NonTensorStack>(prefix, options);
  out.saved_path_ =
      std::make_shared<const std::string>(loaded_directory(prefix, options));
  return out;
}

NonTensorStack NonTensorStack::load(
    const std::string& prefix, const LoadMemmapOptions& options) {
  return load_memmap(prefix, options);
}

NonTensorStack& NonTensorStack::load_memmap_(
    const std::string& prefix, const LoadMemmapOptions& options) {
  *this = load_memmap(prefix, options);
  return *this;
}

NonTensorStack& NonTensorStack::load_(
    const std::string& prefix, const LoadMemmapOptions& options) {
  return load_memmap_(prefix, options);
}

NonTensorStack& NonTensorStack::memmap_refresh_() {
  TORCH_CHECK(
      saved_path_ != nullptr,
      "Cannot refresh a NonTensorStack that is not memory mapped or has no "
      "path associated.");
  *this = load_memmap(*saved_path_);
  return *this;
}

TENSORDICT_END_NAMESPACE
