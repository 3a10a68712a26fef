#include "common/libtorch/matmul_peak.h"

#include <algorithm>
#include <chrono>

#include "ATen/ATen.h"
#include "absl/strings/str_format.h"
#include "common/gemm/onednn.h"
#include "glog/logging.h"

namespace mtb {
namespace {

// Values in [-1, 1]; they do not matter for the timing.
at::Tensor Operand(int64_t rows, int64_t cols, at::ScalarType dtype) {
  return at::linspace(-1, 1, rows * cols, at::kFloat).view({rows, cols}).to(dtype);
}

// Best seconds of `repeats` runs of `product`, after one warm-up (oneDNN
// creates its primitive there, OpenBLAS its buffers).
template <typename Product>
double BestSeconds(int repeats, Product product) {
  product();
  double best = 0;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    product();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = i == 0 ? seconds : std::min(best, seconds);
  }
  return std::max(best, 1e-9);
}

GemmSpeed Measure(const std::string& library, const std::string& precision, const GemmShape& shape,
                  int repeats) {
  const at::ScalarType dtype = precision == "bf16" ? at::kBFloat16 : at::kFloat;
  const at::Tensor x = Operand(shape.m, shape.k, dtype);
  const at::Tensor weight = Operand(shape.n, shape.k, dtype);
  at::Tensor out = at::empty({shape.m, shape.n}, dtype);
  double seconds = 0;
  if (library == "onednn") {
    seconds = BestSeconds(repeats, [&] { gemm::OneDnnMatmulInto(x, weight.t(), 0, out); });
  } else {
    CHECK(library == "blas" || library == "libtorch") << library;
    seconds = BestSeconds(repeats, [&] { at::mm_out(out, x, weight.t()); });
  }
  GemmSpeed speed;
  speed.library = library;
  speed.precision = precision;
  speed.shape = shape;
  speed.flops_per_second = 2.0 * static_cast<double>(shape.m) * static_cast<double>(shape.n) *
                           static_cast<double>(shape.k) / seconds;
  return speed;
}

}  // namespace

std::string GemmSpeed::Describe() const {
  return absl::StrFormat("%s %s %dx%dx%d", library, precision, shape.m, shape.n, shape.k);
}

std::vector<GemmShape> ModelGemmShapes(int64_t tokens, int64_t d_model, int64_t vocab_size) {
  tokens = std::min(tokens, kMaxGemmRows);
  return {{tokens, 3 * d_model, d_model}, {tokens, d_model, d_model},
          {tokens, 4 * d_model, d_model}, {tokens, d_model, 4 * d_model},
          {tokens, vocab_size, d_model},  {1024, 1024, 1024}};
}

std::vector<std::string> GemmLibraries(const std::string& precision) {
  CHECK(precision == "fp32" || precision == "bf16") << precision;
  if (precision == "bf16") return {"libtorch"};
  return {"onednn", "blas"};
}

std::vector<GemmSpeed> MeasureGemms(const std::string& precision,
                                    const std::vector<GemmShape>& shapes, int repeats) {
  CHECK_GT(repeats, 0);
  at::NoGradGuard no_grad;
  std::vector<GemmSpeed> speeds;
  for (const std::string& library : GemmLibraries(precision)) {
    for (const GemmShape& shape : shapes) {
      speeds.push_back(Measure(library, precision, shape, repeats));
    }
  }
  return speeds;
}

const GemmSpeed* FastestGemm(const std::vector<GemmSpeed>& speeds, const std::string& library) {
  const GemmSpeed* fastest = nullptr;
  for (const GemmSpeed& speed : speeds) {
    if (!library.empty() && speed.library != library) continue;
    if (fastest == nullptr || speed.flops_per_second > fastest->flops_per_second) {
      fastest = &speed;
    }
  }
  return fastest;
}

}  // namespace mtb
