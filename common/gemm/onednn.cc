#include "common/gemm/onednn.h"

#include <omp.h>

#include <vector>

#include "ATen/Parallel.h"
#include "glog/logging.h"
#include "oneapi/dnnl/dnnl.h"

namespace mtb {
namespace gemm {
namespace {

// How dnnl_sgemm reads one row-major matrix operand of `rows` x `cols`:
// as itself ('N', rows `ld` apart) or as the transpose of a row-major matrix
// ('T', columns `ld` apart).
struct Operand {
  char trans = 'N';
  int64_t ld = 0;
};

// The operand view of the last two dimensions of `t`, if one has unit stride.
bool DescribeOperand(const at::Tensor& t, Operand* operand) {
  const int64_t rows = t.size(-2);
  const int64_t cols = t.size(-1);
  const int64_t row_stride = t.stride(-2);
  const int64_t col_stride = t.stride(-1);
  if (col_stride == 1 || cols == 1) {
    // A single row's stride is never used; dnnl only needs ld >= cols.
    const int64_t ld = rows == 1 ? cols : row_stride;
    if (ld >= cols) {
      *operand = {'N', ld};
      return true;
    }
  }
  if (row_stride == 1 || rows == 1) {
    const int64_t ld = cols == 1 ? rows : col_stride;
    if (ld >= rows) {
      *operand = {'T', ld};
      return true;
    }
  }
  return false;
}

// The element offsets of every matrix of `t`'s batch dimensions (all but the
// last two), in row-major batch order.
std::vector<int64_t> BatchOffsets(const at::Tensor& t) {
  const int64_t batch_dims = t.dim() - 2;
  std::vector<int64_t> offsets = {0};
  for (int64_t d = 0; d < batch_dims; ++d) {
    std::vector<int64_t> next;
    next.reserve(offsets.size() * t.size(d));
    for (int64_t base : offsets) {
      for (int64_t i = 0; i < t.size(d); ++i) {
        next.push_back(base + i * t.stride(d));
      }
    }
    offsets = std::move(next);
  }
  return offsets;
}

// dnnl_sgemm runs on omp_get_max_threads() of its calling thread. LibTorch
// sets that to the intra-op thread count (at::set_num_threads) on the thread
// that calls set_num_threads, and on any other thread only when that thread
// first runs a LibTorch parallel kernel (at::internal::lazy_init_num_threads).
// Until then a fresh thread (a rank thread, a worker) has OpenMP's initial
// count: OMP_NUM_THREADS, or every core. A product must not be the first to
// run there, so it initialises the thread as LibTorch would. Inside a parallel
// region oneDNN runs on its caller alone; the region's threads need nothing.
void FollowIntraOpThreads() {
  if (!omp_in_parallel()) at::internal::lazy_init_num_threads();
}

void Sgemm(const Operand& a, const Operand& b, int64_t m, int64_t n, int64_t k, const float* a_data,
           const float* b_data, float beta, float* c_data, int64_t ldc) {
  const dnnl_status_t status =
      dnnl_sgemm(a.trans, b.trans, m, n, k, 1.0f, a_data, a.ld, b_data, b.ld, beta, c_data, ldc);
  CHECK_EQ(status, dnnl_success) << "dnnl_sgemm " << a.trans << b.trans << " " << m << "x" << n
                                 << "x" << k;
}

}  // namespace

void OneDnnMatmulInto(const at::Tensor& a_in, const at::Tensor& b_in, float beta, at::Tensor& out) {
  FollowIntraOpThreads();
  CHECK_GE(a_in.dim(), 2);
  CHECK_EQ(a_in.dim(), b_in.dim());
  CHECK_EQ(a_in.dim(), out.dim());
  CHECK(a_in.scalar_type() == at::kFloat && b_in.scalar_type() == at::kFloat &&
        out.scalar_type() == at::kFloat);
  CHECK(out.is_contiguous());
  for (int64_t d = 0; d + 2 < a_in.dim(); ++d) {
    CHECK_EQ(a_in.size(d), b_in.size(d)) << "batch dimension " << d;
    CHECK_EQ(a_in.size(d), out.size(d)) << "batch dimension " << d;
  }
  const int64_t m = a_in.size(-2);
  const int64_t k = a_in.size(-1);
  const int64_t n = b_in.size(-1);
  CHECK_EQ(b_in.size(-2), k);
  CHECK_EQ(out.size(-2), m);
  CHECK_EQ(out.size(-1), n);
  if (out.numel() == 0) return;
  if (k == 0) {
    if (beta == 0)
      out.zero_();
    else
      out.mul_(beta);
    return;
  }
  Operand a_op, b_op;
  const at::Tensor a = DescribeOperand(a_in, &a_op) ? a_in : a_in.contiguous();
  const at::Tensor b = DescribeOperand(b_in, &b_op) ? b_in : b_in.contiguous();
  CHECK(DescribeOperand(a, &a_op) && DescribeOperand(b, &b_op));
  const float* a_data = a.data_ptr<float>();
  const float* b_data = b.data_ptr<float>();
  float* c_data = out.data_ptr<float>();
  if (a.dim() == 2) {
    Sgemm(a_op, b_op, m, n, k, a_data, b_data, beta, c_data, n);
    return;
  }
  const std::vector<int64_t> a_offsets = BatchOffsets(a);
  const std::vector<int64_t> b_offsets = BatchOffsets(b);
  const int64_t batch = static_cast<int64_t>(a_offsets.size());
  at::parallel_for(0, batch, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      Sgemm(a_op, b_op, m, n, k, a_data + a_offsets[i], b_data + b_offsets[i], beta,
            c_data + i * m * n, n);
    }
  });
}

int OneDnnThreads() {
  FollowIntraOpThreads();
  return omp_in_parallel() ? 1 : omp_get_max_threads();
}

}  // namespace gemm
}  // namespace mtb
