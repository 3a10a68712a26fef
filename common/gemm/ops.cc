// The oneDNN path's autograd functions. For y = x·Wᵀ + b with x flattened to
// (M, K) rows, W (N, K) and upstream gradient g = dL/dy (M, N):
//   dx = g·W (M, K),  dW = gᵀ·x (N, K),  db = Σ_rows g (N).
// For c = a·b per batch matrix, a (M, K), b (K, N), g (M, N):
//   da = g·bᵀ (M, K),  db = aᵀ·g (K, N).
// Transposes are strided views that dnnl_sgemm reads in place.
#include "common/gemm/ops.h"

#include "ATen/ATen.h"
#include "ATen/autocast_mode.h"
#include "common/gemm/onednn.h"
#include "glog/logging.h"
#include "torch/csrc/autograd/custom_function.h"

namespace mtb {
namespace gemm {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// (rows, cols) view of a matrix, or of the flattened leading dimensions.
at::Tensor Rows(const at::Tensor& t) { return t.reshape({-1, t.size(-1)}); }

// y (M, N) = x (M, K) · W (N, K)ᵀ + bias.
at::Tensor LinearForward(const at::Tensor& x2, const at::Tensor& weight, const at::Tensor& bias) {
  // A fresh C, bias-initialised: expand(...).contiguous() would return the
  // bias itself for one row, and dnnl_sgemm writes C in place.
  at::Tensor y = at::empty({x2.size(0), weight.size(0)}, x2.options());
  float beta = 0;
  if (bias.defined()) {
    y.copy_(bias.expand_as(y));
    beta = 1;
  }
  OneDnnMatmulInto(x2, weight.t(), beta, y);
  return y;
}

at::Tensor MatmulForward(const at::Tensor& a, const at::Tensor& b) {
  std::vector<int64_t> sizes = a.sizes().vec();
  sizes.back() = b.size(-1);
  at::Tensor c = at::empty(sizes, a.options());
  OneDnnMatmulInto(a, b, 0, c);
  return c;
}

// The gradients of y = x·Wᵀ (+ b) from upstream `grad`, those requested.
variable_list LinearBackward(AutogradContext* ctx, const at::Tensor& grad, bool has_bias) {
  const variable_list saved = ctx->get_saved_variables();
  const at::Tensor& x = saved[0];
  const at::Tensor& weight = saved[1];
  const at::Tensor g = Rows(grad).contiguous();  // (M, N)
  variable_list grads(has_bias ? 3 : 2);
  if (ctx->needs_input_grad(0)) {
    grads[0] = MatmulForward(g, weight).view(x.sizes());  // (M, K)
  }
  if (ctx->needs_input_grad(1)) {
    grads[1] = MatmulForward(g.t(), Rows(x));  // (N, K)
  }
  if (has_bias && ctx->needs_input_grad(2)) grads[2] = g.sum(0);
  return grads;
}

at::Tensor LinearOutput(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                        const at::Tensor& bias) {
  ctx->save_for_backward({x, weight});
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  return LinearForward(Rows(x), weight, bias).view(sizes);
}

// Two functions: LibTorch's custom functions take no undefined tensor (the
// tied LM head has no bias).
class OneDnnLinear : public torch::autograd::Function<OneDnnLinear> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias) {
    return LinearOutput(ctx, x, weight, bias);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return LinearBackward(ctx, grads[0], /*has_bias=*/true);
  }
};

class OneDnnLinearNoBias : public torch::autograd::Function<OneDnnLinearNoBias> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight) {
    return LinearOutput(ctx, x, weight, at::Tensor());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return LinearBackward(ctx, grads[0], /*has_bias=*/false);
  }
};

class OneDnnMatmul : public torch::autograd::Function<OneDnnMatmul> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    ctx->save_for_backward({a, b});
    return MatmulForward(a, b);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& a = saved[0];
    const at::Tensor& b = saved[1];
    const at::Tensor g = grads[0].contiguous();  // (..., M, N)
    at::Tensor da, db;
    if (ctx->needs_input_grad(0)) da = MatmulForward(g, b.transpose(-2, -1));
    if (ctx->needs_input_grad(1)) db = MatmulForward(a.transpose(-2, -1), g);
    return {da, db};
  }
};

// oneDNN's functions cover fp32 outside autocast; everything else keeps
// LibTorch's ops.
bool OneDnnApplies(Backend backend, const at::Tensor& a, const at::Tensor& b) {
  return backend == Backend::kOneDnn && !at::autocast::is_cpu_enabled() &&
         a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat && a.device().is_cpu();
}

}  // namespace

at::Tensor Linear(Backend backend, const at::Tensor& x, const at::Tensor& weight,
                  const at::Tensor& bias) {
  if (!OneDnnApplies(backend, x, weight) || (bias.defined() && bias.scalar_type() != at::kFloat)) {
    return at::linear(x, weight, bias);
  }
  CHECK_EQ(weight.dim(), 2);
  CHECK_EQ(x.size(-1), weight.size(1));
  if (!bias.defined()) return OneDnnLinearNoBias::apply(x, weight);
  return OneDnnLinear::apply(x, weight, bias);
}

at::Tensor Matmul(Backend backend, const at::Tensor& a, const at::Tensor& b) {
  if (!OneDnnApplies(backend, a, b)) return at::matmul(a, b);
  return OneDnnMatmul::apply(a, b);
}

at::Tensor Linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return Linear(DefaultBackend(), x, weight, bias);
}

at::Tensor Matmul(const at::Tensor& a, const at::Tensor& b) {
  return Matmul(DefaultBackend(), a, b);
}

}  // namespace gemm
}  // namespace mtb
