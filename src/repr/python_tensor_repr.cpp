// NOTE [Python tensor repr]
// A state dict prints as Python's OrderedDict does, so its tensors print as
// Python's `repr(tensor)` does, which is not libtorch's `operator<<`. This
// follows the rules of torch/_tensor_str.py with the default print options:
//  - one formatter per tensor, built from the elements shown: integers as
//    they are; floats in "int mode" (`1.`) when all the finite non-zero
//    ones are whole, in scientific mode when their magnitudes span more
//    than 1000x or leave [1e-4, 1e8], else fixed with 4 decimals; every
//    element right-aligned to the widest;
//  - rows of the innermost dim wrapped to 80 columns, dims separated by
//    one blank line fewer than their depth;
//  - more than 1000 elements: 3 edge items per dim around "...";
//  - suffixes (device, size, dtype, grad_fn or requires_grad), wrapped
//    when the last line would pass 80 columns.
// The elements are read once as doubles (complex: real and imaginary
// parts) or as integer text, then walked by index.

#include "repr/python_tensor_repr.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/view_as_real.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/ScalarType.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/key_path.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
// Named, not anonymous: the library is a unity build.
namespace tensor_str {

constexpr int kPrecision = 4;
constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int64_t kLineWidth = 80;

std::string padded_left(std::string text, int64_t width) {
  const auto size = static_cast<int64_t>(text.size());
  return size >= width ? text : std::string(width - size, ' ') + text;
}

// printf's "%.*f" / "%.*e", with Python's "nan" for any NaN.
std::string printf_double(double value, bool scientific, int precision) {
  if (std::isnan(value)) {
    return "nan";
  }
  const char* format = scientific ? "%.*e" : "%.*f";
  const int size = std::snprintf(nullptr, 0, format, precision, value);
  std::string out(static_cast<size_t>(size) + 1, '\0');
  std::snprintf(out.data(), out.size(), format, precision, value);
  out.resize(static_cast<size_t>(size));
  return out;
}

// torch's _Formatter for a floating tensor, built from the elements shown.
class FloatFormatter {
 public:
  explicit FloatFormatter(const std::vector<double>& shown) {
    std::vector<double> values;
    for (const double v : shown) {
      if (std::isfinite(v) && v != 0) {
        values.push_back(v);
      }
    }
    if (values.empty()) {
      return;
    }
    double min_abs = std::abs(values[0]);
    double max_abs = min_abs;
    for (const double v : values) {
      int_mode_ = int_mode_ && v == std::ceil(v);
      min_abs = std::min(min_abs, std::abs(v));
      max_abs = std::max(max_abs, std::abs(v));
    }
    sci_mode_ =
        max_abs / min_abs > 1000.0 || max_abs > 1.0e8 || min_abs < 1.0e-4;
    for (const double v : values) {
      int64_t width = 0;
      if (sci_mode_) {
        width = static_cast<int64_t>(
            printf_double(v, /*scientific=*/true, kPrecision).size());
      } else if (int_mode_) {
        // One more for the "." that marks a float.
        width = static_cast<int64_t>(
                    printf_double(v, /*scientific=*/false, 0).size()) +
                1;
      } else {
        width = static_cast<int64_t>(
            printf_double(v, /*scientific=*/false, kPrecision).size());
      }
      max_width_ = std::max(max_width_, width);
    }
  }

  int64_t width() const {
    return max_width_;
  }

  std::string format(double value) const {
    std::string out;
    if (sci_mode_) {
      out = padded_left(
          printf_double(value, /*scientific=*/true, kPrecision), max_width_);
    } else if (int_mode_) {
      out = printf_double(value, /*scientific=*/false, 0);
      if (std::isfinite(value)) {
        out += '.';
      }
    } else {
      out = printf_double(value, /*scientific=*/false, kPrecision);
    }
    return padded_left(std::move(out), max_width_);
  }

 private:
  bool int_mode_ = true;
  bool sci_mode_ = false;
  int64_t max_width_ = 1;
};

// The elements of a tensor, read once, and how to print one.
class Elements {
 public:
  explicit Elements(const at::Tensor& tensor) {
    for (const int64_t size : tensor.sizes()) {
      sizes_.push_back(size);
    }
    strides_.assign(sizes_.size(), 1);
    for (int64_t d = static_cast<int64_t>(sizes_.size()) - 2; d >= 0; --d) {
      strides_[d] = strides_[d + 1] * sizes_[d + 1];
    }
    summarize_ = tensor.numel() > kThreshold;
    const at::Tensor cpu = tensor.to(at::kCPU).resolve_conj().resolve_neg();
    const c10::ScalarType dtype = tensor.scalar_type();
    if (c10::isComplexType(dtype)) {
      kind_ = Kind::kComplex;
      const at::Tensor parts =
          at::view_as_real(cpu.to(at::kComplexDouble)).contiguous();
      const double* data = parts.data_ptr<double>();
      for (int64_t i = 0; i < cpu.numel(); ++i) {
        real_.push_back(data[2 * i]);
        imag_.push_back(data[2 * i + 1]);
      }
    } else if (c10::isFloatingType(dtype)) {
      kind_ = Kind::kFloat;
      const at::Tensor values = cpu.to(at::kDouble).contiguous();
      real_.assign(
          values.data_ptr<double>(), values.data_ptr<double>() + cpu.numel());
    } else {
      kind_ = Kind::kText;
      read_text(cpu);
    }
    std::vector<int64_t> shown;
    collect_shown(0, 0, shown);
    if (kind_ == Kind::kText) {
      for (const int64_t i : shown) {
        text_width_ =
            std::max(text_width_, static_cast<int64_t>(text_[i].size()));
      }
      return;
    }
    std::vector<double> shown_real;
    std::vector<double> shown_imag;
    for (const int64_t i : shown) {
      shown_real.push_back(real_[i]);
      if (kind_ == Kind::kComplex) {
        shown_imag.push_back(imag_[i]);
      }
    }
    real_format_ = FloatFormatter(shown_real);
    imag_format_ = FloatFormatter(shown_imag);
  }

  // torch's _tensor_str_with_formatter from dim `dim`, at `offset`.
  std::string render(size_t dim, int64_t offset, int64_t indent) const {
    if (sizes_.empty()) {
      return element(offset);
    }
    const int64_t size = sizes_[dim];
    const bool elided = summarize_ && size > 2 * kEdgeItems;
    std::vector<std::string> parts;
    const bool innermost = dim + 1 == sizes_.size();
    for (int64_t i = 0; i < size; ++i) {
      if (elided && i == kEdgeItems) {
        parts.emplace_back(innermost ? " ..." : "...");
        i = size - kEdgeItems - 1;
        continue;
      }
      const int64_t at = offset + i * strides_[dim];
      parts.push_back(
          innermost ? element(at) : render(dim + 1, at, indent + 1));
    }
    if (!innermost) {
      const std::string separator = "," +
                                    std::string(sizes_.size() - dim - 1, '\n') +
                                    std::string(indent + 1, ' ');
      return "[" + join_parts(parts, separator) + "]";
    }
    int64_t element_length = real_width() + 2;
    if (kind_ == Kind::kComplex) {
      element_length += imag_format_.width() + 1;
    }
    const int64_t per_line =
        std::max<int64_t>(1, (kLineWidth - indent) / element_length);
    std::vector<std::string> lines;
    for (size_t i = 0; i < parts.size(); i += per_line) {
      const auto end = std::min(parts.size(), i + per_line);
      lines.push_back(join_parts(
          std::vector<std::string>(parts.begin() + i, parts.begin() + end),
          ", "));
    }
    return "[" + join_parts(lines, ",\n" + std::string(indent + 1, ' ')) + "]";
  }

 private:
  enum class Kind { kFloat, kComplex, kText };

  void read_text(const at::Tensor& cpu) {
    const int64_t n = cpu.numel();
    if (cpu.scalar_type() == at::kBool) {
      const at::Tensor values = cpu.contiguous();
      const bool* data = values.data_ptr<bool>();
      for (int64_t i = 0; i < n; ++i) {
        text_.emplace_back(python_bool(data[i]));
      }
    } else if (cpu.scalar_type() == at::kUInt64) {
      const at::Tensor values = cpu.contiguous();
      const auto* data = values.data_ptr<uint64_t>();
      for (int64_t i = 0; i < n; ++i) {
        text_.push_back(std::to_string(data[i]));
      }
    } else {
      const at::Tensor values = cpu.to(at::kLong).contiguous();
      const int64_t* data = values.data_ptr<int64_t>();
      for (int64_t i = 0; i < n; ++i) {
        text_.push_back(std::to_string(data[i]));
      }
    }
  }

  // The flat indices of the elements printed (torch's
  // get_summarized_data).
  void collect_shown(
      size_t dim, int64_t offset, std::vector<int64_t>& out) const {
    if (dim == sizes_.size()) {
      out.push_back(offset);
      return;
    }
    const int64_t size = sizes_[dim];
    const bool elided = summarize_ && size > 2 * kEdgeItems;
    for (int64_t i = 0; i < size; ++i) {
      if (elided && i == kEdgeItems) {
        i = size - kEdgeItems - 1;
        continue;
      }
      collect_shown(dim + 1, offset + i * strides_[dim], out);
    }
  }

  int64_t real_width() const {
    return kind_ == Kind::kText ? text_width_ : real_format_.width();
  }

  std::string element(int64_t i) const {
    if (kind_ == Kind::kText) {
      return padded_left(text_[i], text_width_);
    }
    std::string real = real_format_.format(real_[i]);
    if (kind_ == Kind::kFloat) {
      return real;
    }
    std::string imag = imag_format_.format(imag_[i]) + "j";
    imag.erase(0, imag.find_first_not_of(' '));
    if (imag[0] == '+' || imag[0] == '-') {
      return real + imag;
    }
    return real + "+" + imag;
  }

  std::vector<int64_t> sizes_;
  std::vector<int64_t> strides_;
  bool summarize_ = false;
  Kind kind_ = Kind::kFloat;
  std::vector<double> real_;
  std::vector<double> imag_;
  std::vector<std::string> text_;
  int64_t text_width_ = 1;
  FloatFormatter real_format_{{}};
  FloatFormatter imag_format_{{}};
};

// torch's _add_suffixes.
std::string with_suffixes(
    std::string text,
    const std::vector<std::string>& suffixes,
    int64_t indent) {
  const size_t newline = text.rfind('\n');
  int64_t last_line_length =
      newline == std::string::npos
          ? static_cast<int64_t>(text.size()) + 2
          : static_cast<int64_t>(text.size() - newline) + 1;
  for (const auto& suffix : suffixes) {
    const auto length = static_cast<int64_t>(suffix.size());
    if (last_line_length + length + 2 > kLineWidth) {
      text += ",\n" + std::string(indent, ' ') + suffix;
      last_line_length = indent + length;
    } else {
      text += ", " + suffix;
      last_line_length += length + 2;
    }
  }
  return text + ")";
}

}  // namespace tensor_str

std::string python_tensor_repr(const at::Tensor& input) {
  TORCH_CHECK(input.defined(), "cannot print an undefined tensor");
  at::NoGradGuard no_grad;
  const std::string prefix = "tensor(";
  const auto indent = static_cast<int64_t>(prefix.size());
  at::Tensor tensor = input.layout() == at::kStrided ? input : input.to_dense();
  std::vector<std::string> suffixes;
  if (tensor.device().type() != c10::DeviceType::CPU) {
    suffixes.push_back("device='" + tensor.device().str() + "'");
  }
  const c10::ScalarType dtype = tensor.scalar_type();
  const c10::ScalarType default_dtype = c10::get_default_dtype_as_scalartype();
  const c10::ScalarType default_complex =
      default_dtype == at::kDouble ? at::kComplexDouble : at::kComplexFloat;
  const bool has_default_dtype = dtype == default_dtype ||
                                 dtype == default_complex ||
                                 dtype == at::kLong || dtype == at::kBool;
  std::string body;
  if (tensor.is_meta()) {
    suffixes.push_back("size=" + python_tuple(tensor.sizes()));
    if (dtype != default_dtype) {
      suffixes.push_back("dtype=" + dtype_name(dtype));
    }
    body = "...";
  } else if (tensor.numel() == 0) {
    if (tensor.dim() != 1) {
      suffixes.push_back("size=" + python_tuple(tensor.sizes()));
    }
    if (dtype != default_dtype) {
      suffixes.push_back("dtype=" + dtype_name(dtype));
    }
    body = "[]";
  } else {
    if (!has_default_dtype) {
      suffixes.push_back("dtype=" + dtype_name(dtype));
    }
    body = tensor_str::Elements(tensor).render(0, 0, indent);
  }
  if (const auto& grad_fn = input.grad_fn()) {
    std::string name = grad_fn->name();
    const size_t colons = name.rfind("::");
    if (colons != std::string::npos) {
      name = name.substr(colons + 2);
    }
    suffixes.push_back("grad_fn=<" + name + ">");
  } else if (input.requires_grad()) {
    suffixes.push_back("requires_grad=True");
  }
  return tensor_str::with_suffixes(prefix + body, suffixes, indent);
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
