// The GEMM backends against float64 math. oneDNN: every output and gradient
// within the summation bound γ_n Σ|a||b| (common/gemm/bound.h) of the exact
// product, element by element; BLAS: bit-identical to LibTorch's own ops.
#include "common/gemm/ops.h"

#include <omp.h>

#include <string>
#include <thread>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "common/gemm/backend.h"
#include "common/gemm/bound.h"
#include "common/gemm/onednn.h"
#include "gtest/gtest.h"
#include "torch/csrc/autograd/autograd.h"

namespace mtb {
namespace gemm {
namespace {

at::Tensor Random(at::IntArrayRef sizes, uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(sizes, generator, at::kFloat);
}

// max over elements of |actual - exact| / bound (<= 1: within the bound).
double WorstRatio(const at::Tensor& actual, const at::Tensor& exact, const at::Tensor& bound) {
  return ((actual.to(at::kDouble) - exact).abs() / bound).max().item<double>();
}

// y = x·Wᵀ + b and its three gradients for upstream gradient g, with the
// per-element bound of each from the sum it is: y sums K products and the
// bias (K + 1 terms), dx sums N, dW sums M (rows of x), db sums M.
struct LinearCase {
  at::Tensor x, weight, bias, upstream;  // (M, K), (N, K), (N), (M, N)
};

LinearCase MakeLinearCase(int64_t m, int64_t k, int64_t n) {
  return {Random({m, k}, 1), Random({n, k}, 2), Random({n}, 3), Random({m, n}, 4)};
}

// Ratios to the bound for y, dx, dW, db on `backend`.
std::vector<double> LinearRatios(Backend backend, const LinearCase& c, double scale_error = 0) {
  const at::Tensor x = c.x.clone().requires_grad_(true);
  const at::Tensor w = c.weight.clone().requires_grad_(true);
  const at::Tensor b = c.bias.clone().requires_grad_(true);
  at::Tensor y = Linear(backend, x, w, b);
  const auto grads = torch::autograd::grad({y}, {x, w, b}, {c.upstream});
  if (scale_error != 0) y = y.detach() * (1 + scale_error);
  const int64_t m = c.x.size(0), k = c.x.size(1), n = c.weight.size(0);
  const at::Tensor x64 = c.x.to(at::kDouble), w64 = c.weight.to(at::kDouble);
  const at::Tensor b64 = c.bias.to(at::kDouble);
  const at::Tensor g64 = c.upstream.to(at::kDouble);
  return {
      WorstRatio(y.detach(), x64.mm(w64.t()) + b64,
                 Fp32Gamma(k + 1) * (x64.abs().mm(w64.abs().t()) + b64.abs())),
      WorstRatio(grads[0], g64.mm(w64), Fp32Gamma(n) * g64.abs().mm(w64.abs())),
      WorstRatio(grads[1], g64.t().mm(x64), Fp32Gamma(m) * g64.abs().t().mm(x64.abs())),
      WorstRatio(grads[2], g64.sum(0), Fp32Gamma(m) * g64.abs().sum(0)),
  };
}

TEST(OneDnnGemm, LinearAndItsGradientsAreWithinTheSummationBound) {
  // The model's shapes and awkward ones (odd, prime, one row).
  for (const auto& [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {64, 32, 96}, {64, 128, 32}, {37, 53, 11}, {1, 7, 5}, {256, 64, 256}}) {
    const std::vector<double> ratios = LinearRatios(Backend::kOneDnn, MakeLinearCase(m, k, n));
    for (size_t i = 0; i < ratios.size(); ++i) {
      EXPECT_LE(ratios[i], 1.0) << "output " << i << " of " << m << "x" << k << "x" << n;
    }
  }
}

TEST(OneDnnGemm, WithoutBiasAsTheTiedLmHeadIsWithinTheBoundToo) {
  const LinearCase c = MakeLinearCase(64, 32, 96);
  const at::Tensor x = c.x.view({4, 16, 32}).requires_grad_(true);
  const at::Tensor w = c.weight.clone().requires_grad_(true);
  const at::Tensor y = Linear(Backend::kOneDnn, x, w, at::Tensor());  // (4, 16, 96)
  const auto grads = torch::autograd::grad({y}, {x, w}, {c.upstream.view({4, 16, 96})});
  const at::Tensor x64 = c.x.to(at::kDouble), w64 = c.weight.to(at::kDouble);
  const at::Tensor g64 = c.upstream.to(at::kDouble);
  EXPECT_LE(WorstRatio(y.detach().view({64, 96}), x64.mm(w64.t()),
                       Fp32Gamma(32) * x64.abs().mm(w64.abs().t())),
            1.0);
  EXPECT_LE(
      WorstRatio(grads[0].view({64, 32}), g64.mm(w64), Fp32Gamma(96) * g64.abs().mm(w64.abs())),
      1.0);
  EXPECT_LE(WorstRatio(grads[1], g64.t().mm(x64), Fp32Gamma(64) * g64.abs().t().mm(x64.abs())),
            1.0);
}

TEST(OneDnnGemm, OneRowLeavesTheBiasUntouched) {
  // One row (an MoE expert given one token): C starts as a copy of the bias,
  // never the bias itself.
  const LinearCase c = MakeLinearCase(1, 3, 4);
  const at::Tensor bias = c.bias.clone();
  const at::Tensor first = Linear(Backend::kOneDnn, c.x, c.weight, bias);
  EXPECT_TRUE(at::equal(bias, c.bias));
  EXPECT_TRUE(at::equal(Linear(Backend::kOneDnn, c.x, c.weight, bias), first));
}

TEST(OneDnnGemm, AWrongProductBreaksTheBound) {
  // A relative error of 1e-4 is far above γ_K for K = 32 (2e-6).
  const std::vector<double> ratios =
      LinearRatios(Backend::kOneDnn, MakeLinearCase(64, 32, 96), /*scale_error=*/1e-4);
  EXPECT_GT(ratios[0], 1.0);
}

TEST(OneDnnGemm, BatchedStridedViewsAreReadInPlaceAndWithinTheBound) {
  // Attention's products: heads are views into a fused (B, T, 3W) tensor.
  const int64_t batch = 2, seq = 9, heads = 3, head_dim = 5;
  const int64_t width = heads * head_dim;
  const at::Tensor qkv = Random({batch, seq, 3 * width}, 5);
  const auto parts = qkv.split(width, 2);
  auto split_heads = [&](const at::Tensor& t) {
    return t.view({batch, seq, heads, head_dim}).transpose(1, 2);
  };
  const at::Tensor q = split_heads(parts[0]).requires_grad_(false);
  const at::Tensor k = split_heads(parts[1]);
  const at::Tensor a = q.clone().requires_grad_(true);
  const at::Tensor kt = k.transpose(-2, -1);  // (B, H, Dh, T), strided
  const at::Tensor kt_leaf = kt.detach().requires_grad_(true);
  const at::Tensor scores = Matmul(Backend::kOneDnn, a, kt_leaf);  // (B,H,T,T)
  const at::Tensor upstream = Random({batch, heads, seq, seq}, 6);
  const auto grads = torch::autograd::grad({scores}, {a, kt_leaf}, {upstream});
  const at::Tensor a64 = q.to(at::kDouble), b64 = kt.to(at::kDouble);
  const at::Tensor g64 = upstream.to(at::kDouble);
  EXPECT_LE(WorstRatio(scores.detach(), a64.matmul(b64),
                       Fp32Gamma(head_dim) * a64.abs().matmul(b64.abs())),
            1.0);
  EXPECT_LE(WorstRatio(grads[0], g64.matmul(b64.transpose(-2, -1)),
                       Fp32Gamma(seq) * g64.abs().matmul(b64.abs().transpose(-2, -1))),
            1.0);
  EXPECT_LE(WorstRatio(grads[1], a64.transpose(-2, -1).matmul(g64),
                       Fp32Gamma(seq) * a64.abs().transpose(-2, -1).matmul(g64.abs())),
            1.0);
}

TEST(OneDnnGemm, BitsDoNotDependOnWhereTheDataLives) {
  // Exact mode relies on this: the same shapes and values give the same bits
  // wherever the allocator put them (here: at an odd float offset).
  const LinearCase c = MakeLinearCase(64, 32, 96);
  const at::Tensor y = Linear(Backend::kOneDnn, c.x, c.weight, c.bias);
  const at::Tensor shifted = at::empty({c.x.numel() + 3}, at::kFloat);
  shifted.slice(0, 3).copy_(c.x.reshape({-1}));
  const at::Tensor x_elsewhere = shifted.slice(0, 3).view(c.x.sizes());
  EXPECT_TRUE(at::equal(Linear(Backend::kOneDnn, x_elsewhere, c.weight, c.bias), y));
}

TEST(BlasGemm, IsLibTorchsOwnPathBitForBit) {
  const LinearCase c = MakeLinearCase(37, 53, 11);
  const at::Tensor x = c.x.view({1, 37, 53}).requires_grad_(true);
  const at::Tensor w = c.weight.clone().requires_grad_(true);
  const at::Tensor b = c.bias.clone().requires_grad_(true);
  const at::Tensor ours = Linear(Backend::kBlas, x, w, b);
  const at::Tensor theirs = at::linear(x, w, b);
  EXPECT_TRUE(at::equal(ours, theirs));
  const at::Tensor g = c.upstream.view({1, 37, 11});
  const auto our_grads = torch::autograd::grad({ours}, {x, w, b}, {g});
  const auto their_grads = torch::autograd::grad({theirs}, {x, w, b}, {g});
  for (size_t i = 0; i < our_grads.size(); ++i) {
    EXPECT_TRUE(at::equal(our_grads[i], their_grads[i])) << "gradient " << i;
  }
  const at::Tensor a = Random({2, 3, 4, 5}, 7), bm = Random({2, 3, 5, 6}, 8);
  EXPECT_TRUE(at::equal(Matmul(Backend::kBlas, a, bm), at::matmul(a, bm)));
}

TEST(GemmBackend, DefaultIsOneDnnAndScopedBackendRestoresIt) {
  EXPECT_EQ(DefaultBackend(), Backend::kOneDnn);
  {
    ScopedBackend blas(Backend::kBlas);
    EXPECT_EQ(DefaultBackend(), Backend::kBlas);
  }
  EXPECT_EQ(DefaultBackend(), Backend::kOneDnn);
}

TEST(GemmBackend, ParsesAutoOneDnnAndBlas) {
  EXPECT_EQ(*ParseBackend("auto"), Backend::kOneDnn);
  EXPECT_EQ(*ParseBackend("onednn"), Backend::kOneDnn);
  EXPECT_EQ(*ParseBackend("blas"), Backend::kBlas);
  const absl::StatusOr<Backend> bad = ParseBackend("mkl");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--gemm=mkl"), std::string::npos);
}

TEST(OneDnnGemm, ThreadsFollowLibTorchsIntraOpThreads) {
  at::set_num_threads(3);
  EXPECT_EQ(OneDnnThreads(), 3);
  at::set_num_threads(1);
  EXPECT_EQ(OneDnnThreads(), 1);
}

TEST(OneDnnGemm, AFreshThreadRunsItsProductsOnTheIntraOpThreadCount) {
  // A thread that has run no LibTorch parallel kernel yet starts with
  // OpenMP's initial count (OMP_NUM_THREADS, or every core), not LibTorch's.
  int initial = 0;
  std::thread([&] { initial = omp_get_max_threads(); }).join();
  const int previous = at::get_num_threads();
  const int intra_op = initial > 1 ? 1 : 2;
  at::set_num_threads(intra_op);
  // A vector times a (K, N) row-major matrix: oneDNN splits its sum over K
  // between its threads, so the bits show the thread count it ran on (with
  // the matrix transposed, or with more rows, it splits over outputs and
  // shows nothing).
  const at::Tensor x = Random({1, 4096}, 9);
  const at::Tensor weight_t = Random({4096, 64}, 10);
  at::Tensor on_intra_op = at::empty({1, 64}), on_initial = at::empty({1, 64}),
             on_fresh_thread = at::empty({1, 64});
  OneDnnMatmulInto(x, weight_t, 0, on_intra_op);
  // The negative case: on OpenMP's initial count the bits differ, so the
  // comparison below can fail (this thread is initialised already, so the
  // product keeps the count set here).
  omp_set_num_threads(initial);
  OneDnnMatmulInto(x, weight_t, 0, on_initial);
  at::set_num_threads(intra_op);
  ASSERT_FALSE(at::equal(on_initial, on_intra_op))
      << "1x64x4096 gave the same bits on " << initial << " and " << intra_op
      << " threads: this check cannot see the thread count here";

  // The product is the first thing the fresh thread does.
  int threads_after = 0;
  std::thread([&] {
    OneDnnMatmulInto(x, weight_t, 0, on_fresh_thread);
    threads_after = omp_get_max_threads();
  }).join();
  EXPECT_TRUE(at::equal(on_fresh_thread, on_intra_op));
  EXPECT_EQ(threads_after, intra_op);
  int reported = 0;
  std::thread([&] { reported = OneDnnThreads(); }).join();
  EXPECT_EQ(reported, intra_op);
  at::set_num_threads(previous);
}

}  // namespace
}  // namespace gemm
}  // namespace mtb
