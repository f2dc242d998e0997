// rl::MLP, TorchRL's MLP, with the loops of NOTE [Small-batch MLP] (rl.h).

#include <ATen/EmptyTensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/elu.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/tanh.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "tensordict/rl.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

namespace {

enum Activation { kTanh, kReLU, kELU };

int activation_of(const std::string& name) {
  if (name == "Tanh") {
    return kTanh;
  }
  if (name == "ReLU") {
    return kReLU;
  }
  if (name == "ELU") {
    return kELU;
  }
  TORCH_CHECK_VALUE(
      false,
      "MLP: unknown activation '",
      name,
      "'; the known ones are 'Tanh', 'ReLU' and 'ELU'");
}

// w[0, n) . h[0, n) in eight running sums, which the compiler can keep in
// vector registers without reassociating a single sum.
float dot(const float* w, const float* h, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) {
      acc[k] += w[i + k] * h[i + k];
    }
  }
  float tail = 0;
  for (; i < n; ++i) {
    tail += w[i] * h[i];
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
         ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

// tanh within a few float ulps at a third of libm's tanhf cost: its odd
// Taylor series near 0 (the first term left out is below 2e-9 |x|
// there), else
// 1 - 2 / (e^2|x| + 1), signed.
float tanh_approx(float x) {
  const float a = std::fabs(x);
  if (a < 0.125F) {
    const float x2 = x * x;
    return x * (1.0F + x2 * (-1.0F / 3.0F +
                             x2 * (2.0F / 15.0F + x2 * (-17.0F / 315.0F))));
  }
  if (a > 9.0F) {  // tanh(9) rounds to 1 in float
    return std::copysign(1.0F, x);
  }
  return std::copysign(1.0F - 2.0F / (std::exp(2.0F * a) + 1.0F), x);
}

float activate(int activation, float x) {
  switch (activation) {
    case kTanh:
      return tanh_approx(x);
    case kReLU:
      return x > 0 ? x : (std::isnan(x) ? x : 0.0F);
    default:
      return x > 0 ? x : std::expm1(x);
  }
}

}  // namespace

MLPImpl::MLPImpl(MLPOptions options)
    : options_(std::move(options)),
      activation_(activation_of(options_.activation())) {
  TORCH_CHECK_VALUE(
      options_.in_features() >= 1 && options_.out_features() >= 1,
      "MLP: in_features and out_features must be >= 1, got ",
      options_.in_features(),
      " and ",
      options_.out_features());
  std::vector<int64_t> sizes = {options_.in_features()};
  for (int64_t cells : options_.num_cells()) {
    TORCH_CHECK_VALUE(cells >= 1, "MLP: num_cells must be >= 1, got ", cells);
    sizes.push_back(cells);
  }
  sizes.push_back(options_.out_features());
  const size_t layers = sizes.size() - 1;
  for (size_t l = 1; l < layers; ++l) {
    widest_hidden_ = std::max(widest_hidden_, sizes[l]);
  }
  int64_t index = 0;
  for (size_t l = 0; l < layers; ++l) {
    const bool last = l + 1 == layers;
    auto linear = register_module(
        std::to_string(index++),
        torch::nn::Linear(torch::nn::LinearOptions(sizes[l], sizes[l + 1])
                              .bias(!last || options_.bias_last_layer())));
    weights_.push_back(linear->weight);
    biases_.push_back(linear->bias);
    if (!last || options_.activate_last_layer()) {
      const std::string name = std::to_string(index++);
      switch (activation_) {
        case kTanh:
          register_module(name, torch::nn::Tanh());
          break;
        case kReLU:
          register_module(name, torch::nn::ReLU());
          break;
        default:
          register_module(name, torch::nn::ELU());
          break;
      }
    }
  }
}

at::Tensor MLPImpl::forward(const at::Tensor& input) {
  TORCH_CHECK_VALUE(
      input.defined() && input.dim() >= 1 &&
          input.size(-1) == options_.in_features(),
      "MLP: expected an input whose last dim is ",
      options_.in_features(),
      ", got ",
      input.defined() ? input.sizes() : c10::IntArrayRef{});
  bool loops = input.device().is_cpu() && input.scalar_type() == at::kFloat &&
               input.numel() / options_.in_features() <= kLoopRows &&
               !(at::GradMode::is_enabled() && input.requires_grad());
  for (size_t l = 0; loops && l < weights_.size(); ++l) {
    for (const at::Tensor* p : {&weights_[l], &biases_[l]}) {
      loops = loops && (!p->defined() ||
                        (p->device().is_cpu() &&
                         p->scalar_type() == at::kFloat && p->is_contiguous() &&
                         !(at::GradMode::is_enabled() && p->requires_grad())));
    }
  }
  if (loops) {
    return forward_loops(input);
  }
  if (input.dim() == 2 && input.device().is_cpu() &&
      input.layout() == at::kStrided && weights_.size() > 1 &&
      !at::GradMode::is_enabled() && !c10::InferenceMode::is_enabled() &&
      input.size(0) * widest_hidden_ * static_cast<int64_t>(input.itemsize()) <=
          kMaxReusedBytes) {
    return forward_reusing(input);
  }
  at::Tensor h = input;
  for (size_t l = 0; l < weights_.size(); ++l) {
    h = at::linear(h, weights_[l], biases_[l]);
    if (l + 1 < weights_.size() || options_.activate_last_layer()) {
      h = activation_ == kTanh   ? at::tanh(h)
          : activation_ == kReLU ? at::relu(h)
                                 : at::elu(h);
    }
  }
  return h;
}

// NOTE [Hidden layers in reused buffers] Without gradients, the hidden
// layers of a 2-D CPU input are written into two buffers kept per thread
// (`addmm_out`, then the activation in place), so a call allocates only
// its output. The functional ops allocate and free every hidden tensor,
// and between the steps of a collector, whose dicts and env allocate too,
// the allocator hands them out at changing addresses (four in turn over a
// batch), which a step then misses in the first-level cache.
// The ops and their kernels are those of the functional path (`linear` on
// a 2-D input with a bias is `addmm`), so the output is the same to the
// bit (rl_test compares the two).
at::Tensor MLPImpl::forward_reusing(const at::Tensor& input) const {
  // The buffers and the layer each holds: a layer writes into one while
  // it reads the other. Never returned, never held past the call.
  thread_local at::Tensor buffers[2];
  at::Tensor h = input;
  for (size_t l = 0; l < weights_.size(); ++l) {
    const bool last = l + 1 == weights_.size();
    if (last) {
      h = at::linear(h, weights_[l], biases_[l]);
    } else {
      // A hidden layer always has a bias: `linear` is addmm.
      at::Tensor& out = buffers[l % 2];
      if (!out.defined() || out.scalar_type() != input.scalar_type()) {
        out = at::empty({0}, input.options());
      }
      // Sized here: an out= op warns when it resizes a non-empty output.
      const std::array<int64_t, 2> shape = {h.size(0), weights_[l].size(0)};
      if (out.sizes() != c10::IntArrayRef(shape)) {
        out.resize_(shape);
      }
      at::addmm_out(out, biases_[l], h, weights_[l].t());
      h = out;
    }
    if (!last || options_.activate_last_layer()) {
      switch (activation_) {
        case kTanh:
          h.tanh_();
          break;
        case kReLU:
          h.relu_();
          break;
        default:
          at::elu_(h);
          break;
      }
    }
  }
  return h;
}

at::Tensor MLPImpl::forward_loops(const at::Tensor& input) const {
  const at::Tensor x = input.contiguous();
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = options_.out_features();
  // Without the dispatcher, as the distributions' loops allocate (NOTE
  // [Loops for small CPU parameters]): x is a CPU float tensor here.
  at::Tensor out = at::detail::empty_cpu(
      shape, at::kFloat, /*pin_memory=*/false, std::nullopt);
  const int64_t rows = x.numel() / options_.in_features();
  int64_t widest = 0;
  for (const at::Tensor& w : weights_) {
    widest = std::max(widest, w.size(0));
  }
  // Two hidden buffers in turn, kept per thread: collector threads call
  // one policy at once.
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>(2 * widest));
  const float* in_rows = x.const_data_ptr<float>();
  float* out_rows = out.mutable_data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* h = in_rows + r * options_.in_features();
    for (size_t l = 0; l < weights_.size(); ++l) {
      const int64_t n_out = weights_[l].size(0);
      const int64_t n_in = weights_[l].size(1);
      const bool last = l + 1 == weights_.size();
      float* y = last ? out_rows + r * options_.out_features()
                      : scratch.data() + (l % 2) * widest;
      const float* w = weights_[l].const_data_ptr<float>();
      const float* b =
          biases_[l].defined() ? biases_[l].const_data_ptr<float>() : nullptr;
      const bool act = !last || options_.activate_last_layer();
      for (int64_t o = 0; o < n_out; ++o) {
        float v = dot(w + o * n_in, h, n_in) + (b != nullptr ? b[o] : 0.0F);
        y[o] = act ? activate(activation_, v) : v;
      }
      h = y;
    }
  }
  return out;
}

void MLPImpl::pretty_print(std::ostream& stream) const {
  stream << "MLP";
}

}  // namespace rl
TENSORDICT_END_NAMESPACE
