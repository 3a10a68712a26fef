// The GPT's step in CUDA (gpt_cuda.h). Vocabulary: N = B * T rows of the
// residual stream; "row-major (r, c)" is how the LibTorch model stores a
// tensor, and cuBLASLt, column-major, sees the same memory as its transpose:
// every product below is written as the column-major product of those
// transposes (the comment above each call gives m, n, k in those terms).
//
// Kernels: token + position embedding forward and backward (the token
// embedding's gradient one block per distinct token, its rows in order: no
// atomics anywhere, so a run repeats bit for bit), a
// warp-per-row LayerNorm forward and backward, bias + exact (erf) GELU, the
// (B, T, 3D) <-> (B, H, T, D/H) permutes, a warp-per-row causal softmax and its
// backward, the fused classifier (softmax, cross-entropy and its gradient in
// one pass over a row of logits), column sums for bias and LayerNorm
// gradients (a thread per column: a fixed order), the gradient's sum of
// squares in fixed per-block partials, and AdamW with the clip coefficient
// folded in.
#include "trainer/cuda/gpt_cuda.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "trainer/cuda/gpt_tensors.h"

namespace mtb {
namespace cuda {
namespace {

// A device or library failure inside a step is not recoverable: name the
// call and stop (exit 1: the run failed).
#define MTB_CUDA_CHECK(call)                                                \
  do {                                                                      \
    cudaError_t mtb_error = (call);                                         \
    if (mtb_error != cudaSuccess) {                                         \
      std::fprintf(stderr, "trainer_cuda: %s failed at %s:%d: %s\n", #call, \
                   __FILE__, __LINE__, cudaGetErrorString(mtb_error));      \
      std::exit(1);                                                         \
    }                                                                       \
  } while (0)

#define MTB_CUBLAS_CHECK(call)                                                \
  do {                                                                        \
    cublasStatus_t mtb_status = (call);                                       \
    if (mtb_status != CUBLAS_STATUS_SUCCESS) {                                \
      std::fprintf(stderr, "trainer_cuda: %s failed at %s:%d: status %d\n",   \
                   #call, __FILE__, __LINE__, static_cast<int>(mtb_status));  \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kNormPartials = 1024;  // blocks of the sum-of-squares kernel
constexpr float kLayerNormEps = 1e-5f;  // common/nn/layers.h's default

int Blocks(int64_t n, int threads = kThreads) {
  return static_cast<int>((n + threads - 1) / threads);
}

__device__ float WarpSum(float value) {
  for (int offset = 16; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffff, value, offset);
  }
  return value;
}

__device__ float WarpMax(float value) {
  for (int offset = 16; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(0xffffffff, value, offset));
  }
  return value;
}

// ---- embedding ----

// out (N, D) = wte[tokens[n]] + wpe[n % T].
__global__ void EmbeddingForward(float* out, const int32_t* tokens,
                                 const float* wte, const float* wpe, int64_t n_rows,
                                 int64_t seq_len, int64_t d) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n_rows * d) return;
  const int64_t row = i / d, c = i % d;
  out[i] = wte[tokens[row] * d + c] + wpe[(row % seq_len) * d + c];
}

// The rows of each distinct token of a step, in row order, made on the host
// from its tokens: group g is token token[g], its rows
// order[start[g] .. start[g + 1]). What makes the token embedding's gradient
// deterministic (each element has one writer that adds in row order), so
// that a GPU run repeats bit for bit and a resumed run equals the continuous
// one.
struct TokenGroups {
  std::vector<int32_t> order, token, start;
  // Reserves for n rows (no allocation when grouped later).
  explicit TokenGroups(int64_t n) {
    order.reserve(n);
    token.reserve(n);
    start.reserve(n + 1);
  }
  void Group(const int32_t* tokens, int64_t n) {
    order.resize(n);
    for (int64_t i = 0; i < n; ++i) order[i] = static_cast<int32_t>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return tokens[a] < tokens[b]; });
    token.clear();
    start.clear();
    for (int64_t j = 0; j < n; ++j) {
      if (j == 0 || tokens[order[j]] != tokens[order[j - 1]]) {
        token.push_back(tokens[order[j]]);
        start.push_back(static_cast<int32_t>(j));
      }
    }
    start.push_back(static_cast<int32_t>(n));
  }
  int64_t groups() const { return static_cast<int64_t>(token.size()); }
};

// dwte[token[g]] += the sum of dout over the group's rows, in row order: one
// block per distinct token (TokenGroups).
__global__ void TokenEmbeddingBackward(float* dwte, const int32_t* order,
                                       const int32_t* group_token,
                                       const int32_t* group_start, const float* dout,
                                       int64_t d) {
  const int64_t g = blockIdx.x;
  const int64_t token = group_token[g];
  const int32_t begin = group_start[g], end = group_start[g + 1];
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    float sum = 0;
    for (int32_t j = begin; j < end; ++j) sum += dout[order[j] * d + c];
    dwte[token * d + c] += sum;
  }
}

// dwpe[t] += sum over b of dout[b * T + t] (in b order).
__global__ void PositionEmbeddingBackward(float* dwpe, const float* dout,
                                          int64_t batch, int64_t seq_len, int64_t d) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= seq_len * d) return;
  float sum = 0;
  for (int64_t b = 0; b < batch; ++b) sum += dout[b * seq_len * d + i];
  dwpe[i] += sum;
}

// ---- LayerNorm ----

// One warp per row of x (N, C): out = (x - mean) * rstd * w + b.
__global__ void LayerNormForward(float* out, float* mean, float* rstd,
                                 const float* x, const float* w, const float* b,
                                 int64_t n_rows, int c) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n_rows) return;
  const float* xr = x + row * c;
  float sum = 0;
  for (int i = lane; i < c; i += 32) sum += xr[i];
  const float m = WarpSum(sum) / c;
  float var = 0;
  for (int i = lane; i < c; i += 32) var += (xr[i] - m) * (xr[i] - m);
  const float s = rsqrtf(WarpSum(var) / c + kLayerNormEps);
  for (int i = lane; i < c; i += 32) out[row * c + i] = (xr[i] - m) * s * w[i] + b[i];
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// dx += LayerNorm's input gradient, one warp per row.
__global__ void LayerNormBackwardInput(float* dx, const float* dout,
                                       const float* x, const float* w,
                                       const float* mean, const float* rstd,
                                       int64_t n_rows, int c) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n_rows) return;
  const float m = mean[row], s = rstd[row];
  const float* xr = x + row * c;
  const float* dr = dout + row * c;
  float dnorm_sum = 0, dnorm_norm_sum = 0;
  for (int i = lane; i < c; i += 32) {
    const float dnorm = dr[i] * w[i];
    dnorm_sum += dnorm;
    dnorm_norm_sum += dnorm * (xr[i] - m) * s;
  }
  const float dnorm_mean = WarpSum(dnorm_sum) / c;
  const float dnorm_norm_mean = WarpSum(dnorm_norm_sum) / c;
  for (int i = lane; i < c; i += 32) {
    const float norm = (xr[i] - m) * s;
    dx[row * c + i] += s * (dr[i] * w[i] - dnorm_mean - norm * dnorm_norm_mean);
  }
}

// dw[c] += sum_n dout[n, c] * norm[n, c]; db[c] += sum_n dout[n, c]. A thread
// per column, rows in order.
__global__ void LayerNormBackwardWeights(float* dw, float* db, const float* dout,
                                         const float* x, const float* mean,
                                         const float* rstd, int64_t n_rows, int c) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= c) return;
  float sum_w = 0, sum_b = 0;
  for (int64_t row = 0; row < n_rows; ++row) {
    const float d = dout[row * c + col];
    sum_w += d * (x[row * c + col] - mean[row]) * rstd[row];
    sum_b += d;
  }
  dw[col] += sum_w;
  db[col] += sum_b;
}

// db[c] += sum_n dout[n, c] (a bias's gradient), rows in order.
__global__ void ColumnSum(float* db, const float* dout, int64_t n_rows, int c) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= c) return;
  float sum = 0;
  for (int64_t row = 0; row < n_rows; ++row) sum += dout[row * c + col];
  db[col] += sum;
}

// ---- elementwise ----

__global__ void Add(float* out, const float* a, const float* b, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

// torch.nn.GELU(): 0.5 x (1 + erf(x / sqrt 2)).
__global__ void GeluForward(float* out, const float* x, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

// d *= GELU'(x) = 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi).
__global__ void GeluBackward(float* d, const float* x, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  const float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
  const float pdf = expf(-0.5f * v * v) * 0.39894228040143268f;
  d[i] *= cdf + v * pdf;
}

// ---- attention ----

// qkv (B, T, 3, H, hs) -> q, k, v each (B, H, T, hs).
__global__ void SplitHeads(float* q, float* k, float* v, const float* qkv,
                           int64_t batch, int64_t seq_len, int64_t n_heads, int64_t hs) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= batch * n_heads * seq_len * hs) return;
  const int64_t e = i % hs, t = (i / hs) % seq_len, h = (i / (hs * seq_len)) % n_heads,
                b = i / (hs * seq_len * n_heads);
  const int64_t d = n_heads * hs;
  const int64_t from = (b * seq_len + t) * 3 * d + h * hs + e;
  q[i] = qkv[from];
  k[i] = qkv[from + d];
  v[i] = qkv[from + 2 * d];
}

// The reverse: dq, dk, dv (B, H, T, hs) -> dqkv (B, T, 3, H, hs).
__global__ void MergeHeadsQkv(float* dqkv, const float* dq, const float* dk,
                              const float* dv, int64_t batch, int64_t seq_len,
                              int64_t n_heads, int64_t hs) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= batch * n_heads * seq_len * hs) return;
  const int64_t e = i % hs, t = (i / hs) % seq_len, h = (i / (hs * seq_len)) % n_heads,
                b = i / (hs * seq_len * n_heads);
  const int64_t d = n_heads * hs;
  const int64_t to = (b * seq_len + t) * 3 * d + h * hs + e;
  dqkv[to] = dq[i];
  dqkv[to + d] = dk[i];
  dqkv[to + 2 * d] = dv[i];
}

// y (B, H, T, hs) <-> out (B, T, H * hs); forward when to_rows, else back.
__global__ void HeadsToRows(float* rows, float* heads, int64_t batch, int64_t seq_len,
                            int64_t n_heads, int64_t hs, bool to_rows) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= batch * n_heads * seq_len * hs) return;
  const int64_t e = i % hs, t = (i / hs) % seq_len, h = (i / (hs * seq_len)) % n_heads,
                b = i / (hs * seq_len * n_heads);
  const int64_t r = (b * seq_len + t) * n_heads * hs + h * hs + e;
  if (to_rows) {
    rows[r] = heads[i];
  } else {
    heads[i] = rows[r];
  }
}

// One warp per score row (b, h, query t) of length T: att = softmax over keys
// 0..t of the (already scaled) scores, 0 past t. `planted` is 0 except in
// kernel_check's negative case, where 1 lets each query see one future key.
__global__ void CausalSoftmaxForward(float* att, const float* scores, int64_t rows,
                                     int seq_len, int planted) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int t = min(static_cast<int>(row % seq_len) + planted, seq_len - 1);
  const float* s = scores + row * seq_len;
  float* a = att + row * seq_len;
  float max_value = -INFINITY;
  for (int j = lane; j <= t; j += 32) max_value = fmaxf(max_value, s[j]);
  max_value = WarpMax(max_value);
  float sum = 0;
  for (int j = lane; j <= t; j += 32) sum += expf(s[j] - max_value);
  sum = WarpSum(sum);
  for (int j = lane; j < seq_len; j += 32) {
    a[j] = j <= t ? expf(s[j] - max_value) / sum : 0.0f;
  }
}

// datt := att * (datt - sum_j att_j datt_j), in place (the scores' gradient
// before the 1/sqrt(hs) scale, which the next products apply).
__global__ void CausalSoftmaxBackward(float* datt, const float* att, int64_t rows,
                                      int seq_len) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int t = static_cast<int>(row % seq_len);
  float* d = datt + row * seq_len;
  const float* a = att + row * seq_len;
  float dot = 0;
  for (int j = lane; j <= t; j += 32) dot += a[j] * d[j];
  dot = WarpSum(dot);
  for (int j = lane; j < seq_len; j += 32) d[j] = j <= t ? a[j] * (d[j] - dot) : 0.0f;
}

// ---- classifier ----

// One block per row of logits (N, V): losses[row] = logsumexp - logit[target],
// and the row becomes its gradient (softmax - onehot(target)) / N in place.
__global__ void FusedClassifier(float* logits, float* losses, const int32_t* targets,
                                int64_t n_rows, int vocab) {
  __shared__ float shared[kWarpsPerBlock];
  const int64_t row = blockIdx.x;
  float* l = logits + row * vocab;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  auto block_reduce = [&](float value, bool is_max) {
    value = is_max ? WarpMax(value) : WarpSum(value);
    if (lane == 0) shared[warp] = value;
    __syncthreads();
    float result = is_max ? -INFINITY : 0.0f;
    for (int w = 0; w < kWarpsPerBlock; ++w) {
      result = is_max ? fmaxf(result, shared[w]) : result + shared[w];
    }
    __syncthreads();
    return result;
  };
  float max_value = -INFINITY;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) max_value = fmaxf(max_value, l[j]);
  max_value = block_reduce(max_value, true);
  float sum = 0;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) sum += expf(l[j] - max_value);
  sum = block_reduce(sum, false);
  const int target = targets[row];
  if (threadIdx.x == 0) losses[row] = logf(sum) + max_value - l[target];
  __syncthreads();  // the target's logit is read before the row is overwritten
  const float inv_n = 1.0f / static_cast<float>(n_rows);
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
    const float p = expf(l[j] - max_value) / sum;
    l[j] = (p - (j == target ? 1.0f : 0.0f)) * inv_n;
  }
}

// ---- optimizer ----

// partials[block] = sum of g^2 over a grid-stride slice (fixed order).
__global__ void SumOfSquares(float* partials, const float* g, int64_t n) {
  __shared__ float shared[kWarpsPerBlock];
  float sum = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    sum += g[i] * g[i];
  }
  sum = WarpSum(sum);
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float block = 0;
    for (int w = 0; w < kWarpsPerBlock; ++w) block += shared[w];
    partials[blockIdx.x] = block;
  }
}

// As trainer/model/optimizer.cc's AdamW with the gradient scaled by the clip
// coefficient first: p *= 1 - lr wd; m, v moments; p -= lr / bc1 * m / (sqrt(v)
// / sqrt(bc2) + eps).
__global__ void AdamW(float* p, const float* g, float* m, float* v, int64_t n,
                      float lr, float beta1, float beta2, float eps, float decay_factor,
                      float step_size, float sqrt_bc2, float grad_scale) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float grad = g[i] * grad_scale;
  const float param = p[i] * decay_factor;
  const float mi = beta1 * m[i] + (1.0f - beta1) * grad;
  const float vi = beta2 * v[i] + (1.0f - beta2) * grad * grad;
  m[i] = mi;
  v[i] = vi;
  p[i] = param - step_size * mi / (sqrtf(vi) / sqrt_bc2 + eps);
}

// ---- cuBLASLt ----

struct Lt {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 32 << 20;
};

// Column-major C (m, n) = alpha op(A) op(B) + beta C [+ bias (m) per column],
// `batch` times with the given strides (in floats). A is stored (m, k), or
// (k, m) when trans_a; B (k, n), or (n, k) when trans_b.
void Matmul(const Lt& lt, cudaStream_t stream, float* c, const float* a,
            const float* b, const float* bias, int64_t m, int64_t n, int64_t k,
            bool trans_a, bool trans_b, float alpha, float beta, int batch = 1,
            int64_t stride_a = 0, int64_t stride_b = 0, int64_t stride_c = 0) {
  cublasLtMatmulDesc_t desc;
  MTB_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  MTB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                  &op_a, sizeof(op_a)));
  MTB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                  &op_b, sizeof(op_b)));
  if (bias != nullptr) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    MTB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    MTB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  auto layout = [batch](int64_t rows, int64_t cols, int64_t stride) {
    cublasLtMatrixLayout_t l;
    MTB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, rows, cols, rows));
    if (batch > 1) {
      MTB_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
      MTB_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    }
    return l;
  };
  cublasLtMatrixLayout_t a_layout = trans_a ? layout(k, m, stride_a) : layout(m, k, stride_a);
  cublasLtMatrixLayout_t b_layout = trans_b ? layout(n, k, stride_b) : layout(k, n, stride_b);
  cublasLtMatrixLayout_t c_layout = layout(m, n, stride_c);
  cublasLtMatmulPreference_t preference;
  MTB_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  MTB_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt.workspace_bytes,
      sizeof(lt.workspace_bytes)));
  cublasLtMatmulHeuristicResult_t heuristic;
  int found = 0;
  MTB_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt.handle, desc, a_layout, b_layout,
                                                  c_layout, c_layout, preference, 1,
                                                  &heuristic, &found));
  if (found == 0) {
    std::fprintf(stderr,
                 "trainer_cuda: cuBLASLt has no fp32 algorithm for m=%lld n=%lld "
                 "k=%lld batch=%d\n",
                 static_cast<long long>(m), static_cast<long long>(n),
                 static_cast<long long>(k), batch);
    std::exit(1);
  }
  MTB_CUBLAS_CHECK(cublasLtMatmul(lt.handle, desc, &alpha, a, a_layout, b, b_layout,
                                  &beta, c, c_layout, c, c_layout, &heuristic.algo,
                                  lt.workspace, lt.workspace_bytes, stream));
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatrixLayoutDestroy(a_layout);
  cublasLtMatrixLayoutDestroy(b_layout);
  cublasLtMatrixLayoutDestroy(c_layout);
  cublasLtMatmulDescDestroy(desc);
}

// torch.nn.Linear: y (rows, out) = x (rows, in) W^T + bias; W (out, in).
// Column-major: y^T (out, rows) = op_T(W as (in, out)) x^T (in, rows).
void LinearForward(const Lt& lt, cudaStream_t stream, float* y, const float* x,
                   const float* w, const float* bias, int64_t rows, int64_t in,
                   int64_t out) {
  Matmul(lt, stream, y, w, x, bias, /*m=*/out, /*n=*/rows, /*k=*/in, true, false, 1, 0);
}

// dx (rows, in) = dy W (written); dW (out, in) += dy^T x; dbias += column sums.
void LinearBackward(const Lt& lt, cudaStream_t stream, float* dx, float* dw,
                    float* dbias, const float* dy, const float* x, const float* w,
                    int64_t rows, int64_t in, int64_t out) {
  // dx^T (in, rows) = W as (in, out) . dy^T (out, rows)
  Matmul(lt, stream, dx, w, dy, nullptr, in, rows, out, false, false, 1, 0);
  // dW^T (in, out) = x^T (in, rows) . op_T(dy^T as (out, rows))
  Matmul(lt, stream, dw, x, dy, nullptr, in, out, rows, false, true, 1, 1);
  if (dbias != nullptr) {
    ColumnSum<<<Blocks(out), kThreads, 0, stream>>>(dbias, dy, rows, static_cast<int>(out));
  }
}

// ---- attention (between the qkv and the output projection) ----

// qkv (N, 3D) -> y (N, D) rows; q, k, v, att, heads_out kept for backward,
// scores is scratch (B, H, T, T).
void AttentionForward(const Lt& lt, cudaStream_t stream, float* y, const float* qkv,
                      float* q, float* k, float* v, float* scores, float* att,
                      float* heads_out, int64_t b, int64_t t, int64_t h, int64_t hs,
                      int planted = 0) {
  const int64_t n = b * t, d = h * hs;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  SplitHeads<<<Blocks(n * d), kThreads, 0, stream>>>(q, k, v, qkv, b, t, h, hs);
  // scores^T per (b, h): (Tk, Tq) = op_T(k as (hs, Tk)) . q as (hs, Tq), scaled
  Matmul(lt, stream, scores, k, q, nullptr, t, t, hs, true, false, scale, 0,
         static_cast<int>(b * h), t * hs, t * hs, t * t);
  CausalSoftmaxForward<<<Blocks(b * h * t, kWarpsPerBlock), kThreads, 0, stream>>>(
      att, scores, b * h * t, static_cast<int>(t), planted);
  // y^T (hs, Tq) = v as (hs, Tk) . att as (Tk, Tq)
  Matmul(lt, stream, heads_out, v, att, nullptr, hs, t, t, false, false, 1, 0,
         static_cast<int>(b * h), t * hs, t * t, t * hs);
  HeadsToRows<<<Blocks(n * d), kThreads, 0, stream>>>(y, heads_out, b, t, h, hs, true);
}

// dy (N, D) rows -> dqkv (N, 3D), from the forward's q, k, v and att;
// d_scores, d_heads, d_q, d_k, d_v are scratch. dy is read as rows only.
void AttentionBackward(const Lt& lt, cudaStream_t stream, float* dqkv, float* dy,
                       const float* q, const float* k, const float* v, const float* att,
                       float* d_scores, float* d_heads, float* d_q, float* d_k, float* d_v,
                       int64_t b, int64_t t, int64_t h, int64_t hs) {
  const int64_t n = b * t, d = h * hs;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  HeadsToRows<<<Blocks(n * d), kThreads, 0, stream>>>(dy, d_heads, b, t, h, hs, false);
  const int batch = static_cast<int>(b * h);
  // d(att)^T (Tk, Tq) = op_T(v as (hs, Tk)) . dy as (hs, Tq)
  Matmul(lt, stream, d_scores, v, d_heads, nullptr, t, t, hs, true, false, 1, 0, batch,
         t * hs, t * hs, t * t);
  // dv^T (hs, Tk) = dy as (hs, Tq) . op_T(att as (Tk, Tq))
  Matmul(lt, stream, d_v, d_heads, att, nullptr, hs, t, t, false, true, 1, 0, batch,
         t * hs, t * t, t * hs);
  CausalSoftmaxBackward<<<Blocks(b * h * t, kWarpsPerBlock), kThreads, 0, stream>>>(
      d_scores, att, b * h * t, static_cast<int>(t));
  // dq^T (hs, Tq) = k as (hs, Tk) . dS as (Tk, Tq), scaled
  Matmul(lt, stream, d_q, k, d_scores, nullptr, hs, t, t, false, false, scale, 0, batch,
         t * hs, t * t, t * hs);
  // dk^T (hs, Tk) = q as (hs, Tq) . op_T(dS as (Tk, Tq)), scaled
  Matmul(lt, stream, d_k, q, d_scores, nullptr, hs, t, t, false, true, scale, 0, batch,
         t * hs, t * t, t * hs);
  MergeHeadsQkv<<<Blocks(n * d), kThreads, 0, stream>>>(dqkv, d_q, d_k, d_v, b, t, h, hs);
}

// ---- the optimizer step ----

// The gradient's norm (fixed per-block partials summed on the host in
// double), clipping (torch's coefficient) and AdamW per tensor. Synchronises
// the stream once (for the norm). partials: kNormPartials floats on the
// device; host_partials: as many on the host.
void OptimizerStep(cudaStream_t stream, float* params, const float* grads, float* adam_m,
                   float* adam_v, int64_t total, const std::vector<DeviceTensor>& tensors,
                   const AdamWSettings& adamw, float* partials, float* host_partials,
                   int64_t step, double lr, double max_grad_norm, StepStats* stats) {
  SumOfSquares<<<kNormPartials, kThreads, 0, stream>>>(partials, grads, total);
  MTB_CUDA_CHECK(cudaMemcpyAsync(host_partials, partials, kNormPartials * sizeof(float),
                                 cudaMemcpyDeviceToHost, stream));
  MTB_CUDA_CHECK(cudaStreamSynchronize(stream));
  double sum_squares = 0;
  for (int i = 0; i < kNormPartials; ++i) sum_squares += host_partials[i];
  stats->grad_norm = std::sqrt(sum_squares);
  double grad_scale = 1.0;
  if (max_grad_norm > 0 && stats->grad_norm > max_grad_norm) {
    grad_scale = max_grad_norm / (stats->grad_norm + 1e-6);
    stats->clipped = true;
  }
  const double bias_correction1 = 1 - std::pow(adamw.beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(adamw.beta2, static_cast<double>(step));
  for (const DeviceTensor& tensor : tensors) {
    const double decay = tensor.weight_decay ? adamw.weight_decay : 0.0;
    AdamW<<<Blocks(tensor.numel), kThreads, 0, stream>>>(
        params + tensor.offset, grads + tensor.offset, adam_m + tensor.offset,
        adam_v + tensor.offset, tensor.numel, static_cast<float>(lr),
        static_cast<float>(adamw.beta1), static_cast<float>(adamw.beta2),
        static_cast<float>(adamw.eps), static_cast<float>(1 - lr * decay),
        static_cast<float>(lr / bias_correction1),
        static_cast<float>(std::sqrt(bias_correction2)), static_cast<float>(grad_scale));
  }
  MTB_CUDA_CHECK(cudaGetLastError());
}

// ---- the model ----

struct LayerActivations {
  float *ln1, *ln1_mean, *ln1_rstd;  // (N, D), (N), (N)
  float* qkv;                        // (N, 3D)
  float *q, *k, *v;                  // (B, H, T, hs)
  float* att;                        // (B, H, T, T) probabilities
  float* heads_out;                  // (B, H, T, hs)
  float* attn_y;                     // (N, D): heads_out as rows
  float* residual2;                  // (N, D): input + attention projection
  float *ln2, *ln2_mean, *ln2_rstd;
  float* fc;                         // (N, 4D) pre-GELU
  float* fc_gelu;                    // (N, 4D)
  float* residual3;                  // (N, D): the block's output
};

class GptCudaImpl : public GptCuda, public ShardedDevice {
 public:
  GptCudaImpl(const GptDims& dims, std::vector<DeviceTensor> tensors,
              const AdamWSettings& adamw)
      : dims_(dims), tensors_(std::move(tensors)), adamw_(adamw) {}

  ~GptCudaImpl() override {
    for (void* p : allocations_) cudaFree(p);
    if (lt_.handle != nullptr) cublasLtDestroy(lt_.handle);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Every buffer, once. Returns "" or why not.
  std::string Allocate(const float* initial, int64_t total) {
    total_ = total;
    const int64_t b = dims_.batch_size, t = dims_.seq_len, d = dims_.d_model,
                  h = dims_.n_heads, v = dims_.vocab_size;
    const int64_t n = b * t;
    std::string error;
    auto floats = [&](int64_t count) -> float* {
      if (!error.empty()) return nullptr;
      void* p = nullptr;
      const cudaError_t status = cudaMalloc(&p, count * sizeof(float));
      if (status != cudaSuccess) {
        error = "cudaMalloc of " + std::to_string(count * sizeof(float)) +
                " bytes (" + std::to_string(bytes_) + " already held): " +
                cudaGetErrorString(status);
        return nullptr;
      }
      allocations_.push_back(p);
      bytes_ += count * static_cast<int64_t>(sizeof(float));
      return static_cast<float*>(p);
    };
    params_ = floats(total);
    grads_ = floats(total);
    adam_m_ = floats(total);
    adam_v_ = floats(total);
    layers_.resize(dims_.n_layers);
    for (LayerActivations& a : layers_) {
      a.ln1 = floats(n * d);
      a.ln1_mean = floats(n);
      a.ln1_rstd = floats(n);
      a.qkv = floats(n * 3 * d);
      a.q = floats(n * d);
      a.k = floats(n * d);
      a.v = floats(n * d);
      a.att = floats(b * h * t * t);
      a.heads_out = floats(n * d);
      a.attn_y = floats(n * d);
      a.residual2 = floats(n * d);
      a.ln2 = floats(n * d);
      a.ln2_mean = floats(n);
      a.ln2_rstd = floats(n);
      a.fc = floats(n * 4 * d);
      a.fc_gelu = floats(n * 4 * d);
      a.residual3 = floats(n * d);
    }
    encoded_ = floats(n * d);
    lnf_ = floats(n * d);
    lnf_mean_ = floats(n);
    lnf_rstd_ = floats(n);
    logits_ = floats(n * v);
    losses_ = floats(n);
    scores_ = floats(b * h * t * t);  // forward scores, backward d(att)
    d_residual_ = floats(n * d);
    d_rows_ = floats(n * d);
    d_wide_ = floats(n * 4 * d);
    d_qkv_ = floats(n * 3 * d);
    d_q_ = floats(n * d);
    d_k_ = floats(n * d);
    d_v_ = floats(n * d);
    d_heads_ = floats(n * d);
    norm_partials_ = floats(kNormPartials);
    if (!error.empty()) return error;
    void* p = nullptr;
    // inputs, targets, and the token groups' order, token and start.
    if (cudaMalloc(&p, (5 * n + 1) * sizeof(int32_t)) != cudaSuccess) {
      return "cudaMalloc of the token buffers failed";
    }
    allocations_.push_back(p);
    bytes_ += (5 * n + 1) * static_cast<int64_t>(sizeof(int32_t));
    inputs_ = static_cast<int32_t*>(p);
    targets_ = inputs_ + n;
    group_order_ = targets_ + n;
    group_token_ = group_order_ + n;
    group_start_ = group_token_ + n;
    if (cudaMalloc(&lt_.workspace, lt_.workspace_bytes) != cudaSuccess) {
      return "cudaMalloc of the cuBLASLt workspace failed";
    }
    allocations_.push_back(lt_.workspace);
    bytes_ += static_cast<int64_t>(lt_.workspace_bytes);
    if (cublasLtCreate(&lt_.handle) != CUBLAS_STATUS_SUCCESS) {
      return "cublasLtCreate failed";
    }
    MTB_CUDA_CHECK(cudaStreamCreate(&stream_));
    for (int i = 0; i < 4; ++i) {
      cudaEvent_t e;
      MTB_CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
    // Backward's points where gradients become final (NotifyReady): the
    // final LayerNorm, each block, the embeddings.
    for (int64_t i = 0; i < dims_.n_layers + 2; ++i) {
      cudaEvent_t e;
      MTB_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      events_.push_back(e);
    }
    MTB_CUDA_CHECK(cudaMemcpy(params_, initial, total * sizeof(float),
                              cudaMemcpyHostToDevice));
    MTB_CUDA_CHECK(cudaMemset(adam_m_, 0, total * sizeof(float)));
    MTB_CUDA_CHECK(cudaMemset(adam_v_, 0, total * sizeof(float)));
    host_losses_.resize(n);
    host_partials_.resize(kNormPartials);
    return "";
  }

  StepStats ForwardBackward(const int32_t* inputs, const int32_t* targets) override {
    const int64_t n = dims_.batch_size * dims_.seq_len;
    MTB_CUDA_CHECK(cudaMemcpyAsync(inputs_, inputs, n * sizeof(int32_t),
                                   cudaMemcpyHostToDevice, stream_));
    MTB_CUDA_CHECK(cudaMemcpyAsync(targets_, targets, n * sizeof(int32_t),
                                   cudaMemcpyHostToDevice, stream_));
    // The previous step's copies from groups_ are done (this call
    // synchronises before it returns).
    groups_.Group(inputs, n);
    MTB_CUDA_CHECK(cudaMemcpyAsync(group_order_, groups_.order.data(), n * sizeof(int32_t),
                                   cudaMemcpyHostToDevice, stream_));
    MTB_CUDA_CHECK(cudaMemcpyAsync(group_token_, groups_.token.data(),
                                   groups_.groups() * sizeof(int32_t),
                                   cudaMemcpyHostToDevice, stream_));
    MTB_CUDA_CHECK(cudaMemcpyAsync(group_start_, groups_.start.data(),
                                   (groups_.groups() + 1) * sizeof(int32_t),
                                   cudaMemcpyHostToDevice, stream_));
    MTB_CUDA_CHECK(cudaMemsetAsync(grads_, 0, total_ * sizeof(float), stream_));
    MTB_CUDA_CHECK(cudaEventRecord(events_[0], stream_));
    Forward();
    MTB_CUDA_CHECK(cudaEventRecord(events_[1], stream_));
    Backward();
    MTB_CUDA_CHECK(cudaEventRecord(events_[2], stream_));
    MTB_CUDA_CHECK(cudaMemcpyAsync(host_losses_.data(), losses_, n * sizeof(float),
                                   cudaMemcpyDeviceToHost, stream_));
    MTB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    StepStats stats;
    double loss_sum = 0;
    for (float l : host_losses_) loss_sum += l;
    stats.loss = loss_sum / static_cast<double>(n);
    float ms = 0;
    MTB_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[0], events_[1]));
    stats.forward_ms = ms;
    MTB_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[1], events_[2]));
    stats.backward_ms = ms;
    return stats;
  }

  float* gradients() override { return grads_; }

  void Update(int64_t step, double lr, double max_grad_norm, StepStats* stats) override {
    // The gradient may have been changed by another stream (a collective).
    MTB_CUDA_CHECK(cudaDeviceSynchronize());
    MTB_CUDA_CHECK(cudaEventRecord(events_[2], stream_));
    OptimizerStep(stream_, params_, grads_, adam_m_, adam_v_, total_, tensors_, adamw_,
                  norm_partials_, host_partials_.data(), step, lr, max_grad_norm, stats);
    MTB_CUDA_CHECK(cudaEventRecord(events_[3], stream_));
    MTB_CUDA_CHECK(cudaEventSynchronize(events_[3]));
    float ms = 0;
    MTB_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[2], events_[3]));
    stats->optimizer_ms = ms;
  }

  void CopyParametersToHost(float* host) override {
    MTB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    MTB_CUDA_CHECK(cudaMemcpy(host, params_, total_ * sizeof(float),
                              cudaMemcpyDeviceToHost));
  }

  void CopyStateToHost(float* parameters, float* exp_avg, float* exp_avg_sq) override {
    MTB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const size_t bytes = total_ * sizeof(float);
    MTB_CUDA_CHECK(cudaMemcpy(parameters, params_, bytes, cudaMemcpyDeviceToHost));
    MTB_CUDA_CHECK(cudaMemcpy(exp_avg, adam_m_, bytes, cudaMemcpyDeviceToHost));
    MTB_CUDA_CHECK(cudaMemcpy(exp_avg_sq, adam_v_, bytes, cudaMemcpyDeviceToHost));
  }

  void LoadState(const float* parameters, const float* exp_avg,
                 const float* exp_avg_sq) override {
    MTB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const size_t bytes = total_ * sizeof(float);
    MTB_CUDA_CHECK(cudaMemcpy(params_, parameters, bytes, cudaMemcpyHostToDevice));
    MTB_CUDA_CHECK(cudaMemcpy(adam_m_, exp_avg, bytes, cudaMemcpyHostToDevice));
    MTB_CUDA_CHECK(cudaMemcpy(adam_v_, exp_avg_sq, bytes, cudaMemcpyHostToDevice));
  }

  int64_t DeviceBytes() const override { return bytes_; }

  // ---- several GPUs (bucket_sync.h) ----

  void SetGradientReadyHook(GradientReadyHook* hook) override { hook_ = hook; }
  ShardedDevice* sharded() override { return this; }
  float* parameters() override { return params_; }

  float* AllocateShardGradients(int64_t numel, std::string* error) override {
    void* p = nullptr;
    if (const cudaError_t e = cudaMalloc(&p, numel * sizeof(float)); e != cudaSuccess) {
      *error = "cudaMalloc of " + std::to_string(numel * sizeof(float)) + " bytes: " +
               cudaGetErrorString(e);
      return nullptr;
    }
    allocations_.push_back(p);
    bytes_ += numel * static_cast<int64_t>(sizeof(float));
    MTB_CUDA_CHECK(cudaMemset(p, 0, numel * sizeof(float)));
    return static_cast<float*>(p);
  }

  double SquaredNorm(const float* data, int64_t numel) override {
    // The shard was written on the collectives' stream.
    MTB_CUDA_CHECK(cudaDeviceSynchronize());
    SumOfSquares<<<kNormPartials, kThreads, 0, stream_>>>(norm_partials_, data, numel);
    MTB_CUDA_CHECK(cudaMemcpyAsync(host_partials_.data(), norm_partials_,
                                   kNormPartials * sizeof(float), cudaMemcpyDeviceToHost,
                                   stream_));
    MTB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    double sum = 0;
    for (float partial : host_partials_) sum += partial;
    return sum;
  }

  double UpdatePieces(const std::vector<UpdatePiece>& pieces, const float* shard_gradients,
                      int64_t step, double lr, double grad_scale) override {
    MTB_CUDA_CHECK(cudaDeviceSynchronize());
    MTB_CUDA_CHECK(cudaEventRecord(events_[2], stream_));
    const double bias_correction1 = 1 - std::pow(adamw_.beta1, static_cast<double>(step));
    const double bias_correction2 = 1 - std::pow(adamw_.beta2, static_cast<double>(step));
    for (const UpdatePiece& piece : pieces) {
      const double decay = piece.weight_decay ? adamw_.weight_decay : 0.0;
      AdamW<<<Blocks(piece.numel), kThreads, 0, stream_>>>(
          params_ + piece.offset, shard_gradients + piece.shard_offset,
          adam_m_ + piece.offset, adam_v_ + piece.offset, piece.numel,
          static_cast<float>(lr), static_cast<float>(adamw_.beta1),
          static_cast<float>(adamw_.beta2), static_cast<float>(adamw_.eps),
          static_cast<float>(1 - lr * decay), static_cast<float>(lr / bias_correction1),
          static_cast<float>(std::sqrt(bias_correction2)), static_cast<float>(grad_scale));
    }
    MTB_CUDA_CHECK(cudaGetLastError());
    MTB_CUDA_CHECK(cudaEventRecord(events_[3], stream_));
    // The parameters are gathered on the collectives' stream next.
    MTB_CUDA_CHECK(cudaEventSynchronize(events_[3]));
    float ms = 0;
    MTB_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[2], events_[3]));
    return ms;
  }

 private:
  // Backward's point `point` (0: the final LayerNorm, 1..L: the blocks from
  // the last, L + 1: the embeddings): `tensors`' gradients are final once
  // the kernels enqueued so far have run.
  void NotifyReady(int64_t point, const std::vector<int>& tensors) {
    if (hook_ == nullptr) return;
    cudaEvent_t ready = events_[4 + point];
    MTB_CUDA_CHECK(cudaEventRecord(ready, stream_));
    hook_->Ready(tensors, ready);
  }

  float* Param(int index) { return params_ + tensors_[index].offset; }
  float* Grad(int index) { return grads_ + tensors_[index].offset; }
  float* Param(int64_t layer, int tensor) { return Param(BlockTensorIndex(layer, tensor)); }
  float* Grad(int64_t layer, int tensor) { return Grad(BlockTensorIndex(layer, tensor)); }

  void Forward() {
    const int64_t b = dims_.batch_size, t = dims_.seq_len, d = dims_.d_model,
                  h = dims_.n_heads, v = dims_.vocab_size, hs = d / h;
    const int64_t n = b * t;
    const int row_blocks = Blocks(n, kWarpsPerBlock);
    EmbeddingForward<<<Blocks(n * d), kThreads, 0, stream_>>>(
        encoded_, inputs_, Param(kTokenEmbeddingIndex), Param(kPositionEmbeddingIndex),
        n, t, d);
    const float* x = encoded_;
    for (int64_t l = 0; l < dims_.n_layers; ++l) {
      LayerActivations& a = layers_[l];
      LayerNormForward<<<row_blocks, kThreads, 0, stream_>>>(
          a.ln1, a.ln1_mean, a.ln1_rstd, x, Param(l, kLn1Weight), Param(l, kLn1Bias), n,
          static_cast<int>(d));
      LinearForward(lt_, stream_, a.qkv, a.ln1, Param(l, kQkvWeight), Param(l, kQkvBias),
                    n, d, 3 * d);
      AttentionForward(lt_, stream_, a.attn_y, a.qkv, a.q, a.k, a.v, scores_, a.att,
                       a.heads_out, b, t, h, hs);
      LinearForward(lt_, stream_, a.residual2, a.attn_y, Param(l, kAttnProjWeight),
                    Param(l, kAttnProjBias), n, d, d);
      Add<<<Blocks(n * d), kThreads, 0, stream_>>>(a.residual2, a.residual2, x, n * d);
      LayerNormForward<<<row_blocks, kThreads, 0, stream_>>>(
          a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, Param(l, kLn2Weight),
          Param(l, kLn2Bias), n, static_cast<int>(d));
      LinearForward(lt_, stream_, a.fc, a.ln2, Param(l, kFcWeight), Param(l, kFcBias), n, d,
                    4 * d);
      GeluForward<<<Blocks(n * 4 * d), kThreads, 0, stream_>>>(a.fc_gelu, a.fc, n * 4 * d);
      LinearForward(lt_, stream_, a.residual3, a.fc_gelu, Param(l, kMlpProjWeight),
                    Param(l, kMlpProjBias), n, 4 * d, d);
      Add<<<Blocks(n * d), kThreads, 0, stream_>>>(a.residual3, a.residual3, a.residual2,
                                                   n * d);
      x = a.residual3;
    }
    const int64_t layers = dims_.n_layers;
    LayerNormForward<<<row_blocks, kThreads, 0, stream_>>>(
        lnf_, lnf_mean_, lnf_rstd_, x, Param(FinalLnWeightIndex(layers)),
        Param(FinalLnBiasIndex(layers)), n, static_cast<int>(d));
    // The head is tied to wte: logits (N, V) = lnf wte^T.
    LinearForward(lt_, stream_, logits_, lnf_, Param(kTokenEmbeddingIndex), nullptr, n, d, v);
    FusedClassifier<<<static_cast<int>(n), kThreads, 0, stream_>>>(
        logits_, losses_, targets_, n, static_cast<int>(v));
    MTB_CUDA_CHECK(cudaGetLastError());
  }

  void Backward() {
    const int64_t b = dims_.batch_size, t = dims_.seq_len, d = dims_.d_model,
                  h = dims_.n_heads, v = dims_.vocab_size, hs = d / h;
    const int64_t n = b * t;
    const int row_blocks = Blocks(n, kWarpsPerBlock);
    const int64_t layers = dims_.n_layers;
    // logits_ now holds d(logits).
    LinearBackward(lt_, stream_, d_rows_, Grad(kTokenEmbeddingIndex), nullptr, logits_,
                   lnf_, Param(kTokenEmbeddingIndex), n, d, v);
    const float* last = layers > 0 ? layers_[layers - 1].residual3 : encoded_;
    MTB_CUDA_CHECK(cudaMemsetAsync(d_residual_, 0, n * d * sizeof(float), stream_));
    LayerNormBackwardInput<<<row_blocks, kThreads, 0, stream_>>>(
        d_residual_, d_rows_, last, Param(FinalLnWeightIndex(layers)), lnf_mean_,
        lnf_rstd_, n, static_cast<int>(d));
    LayerNormBackwardWeights<<<Blocks(d), kThreads, 0, stream_>>>(
        Grad(FinalLnWeightIndex(layers)), Grad(FinalLnBiasIndex(layers)), d_rows_, last,
        lnf_mean_, lnf_rstd_, n, static_cast<int>(d));
    NotifyReady(0, {FinalLnBiasIndex(layers), FinalLnWeightIndex(layers)});
    for (int64_t l = layers - 1; l >= 0; --l) {
      LayerActivations& a = layers_[l];
      const float* x = l > 0 ? layers_[l - 1].residual3 : encoded_;
      // d_residual_ is d(residual3): through the MLP into d(residual2).
      LinearBackward(lt_, stream_, d_wide_, Grad(l, kMlpProjWeight), Grad(l, kMlpProjBias),
                     d_residual_, a.fc_gelu, Param(l, kMlpProjWeight), n, 4 * d, d);
      GeluBackward<<<Blocks(n * 4 * d), kThreads, 0, stream_>>>(d_wide_, a.fc, n * 4 * d);
      LinearBackward(lt_, stream_, d_rows_, Grad(l, kFcWeight), Grad(l, kFcBias), d_wide_,
                     a.ln2, Param(l, kFcWeight), n, d, 4 * d);
      LayerNormBackwardInput<<<row_blocks, kThreads, 0, stream_>>>(
          d_residual_, d_rows_, a.residual2, Param(l, kLn2Weight), a.ln2_mean, a.ln2_rstd,
          n, static_cast<int>(d));
      LayerNormBackwardWeights<<<Blocks(d), kThreads, 0, stream_>>>(
          Grad(l, kLn2Weight), Grad(l, kLn2Bias), d_rows_, a.residual2, a.ln2_mean,
          a.ln2_rstd, n, static_cast<int>(d));
      // d(residual2) through the attention into d(x).
      LinearBackward(lt_, stream_, d_rows_, Grad(l, kAttnProjWeight),
                     Grad(l, kAttnProjBias), d_residual_, a.attn_y,
                     Param(l, kAttnProjWeight), n, d, d);
      AttentionBackward(lt_, stream_, d_qkv_, d_rows_, a.q, a.k, a.v, a.att, scores_,
                        d_heads_, d_q_, d_k_, d_v_, b, t, h, hs);
      LinearBackward(lt_, stream_, d_rows_, Grad(l, kQkvWeight), Grad(l, kQkvBias), d_qkv_,
                     a.ln1, Param(l, kQkvWeight), n, d, 3 * d);
      LayerNormBackwardInput<<<row_blocks, kThreads, 0, stream_>>>(
          d_residual_, d_rows_, x, Param(l, kLn1Weight), a.ln1_mean, a.ln1_rstd, n,
          static_cast<int>(d));
      LayerNormBackwardWeights<<<Blocks(d), kThreads, 0, stream_>>>(
          Grad(l, kLn1Weight), Grad(l, kLn1Bias), d_rows_, x, a.ln1_mean, a.ln1_rstd, n,
          static_cast<int>(d));
      std::vector<int> block;  // reverse layout order, as backward readies them
      for (int tensor = kTensorsPerBlock - 1; tensor >= 0; --tensor) {
        block.push_back(BlockTensorIndex(l, tensor));
      }
      NotifyReady(layers - l, block);
    }
    TokenEmbeddingBackward<<<static_cast<unsigned>(groups_.groups()), kThreads, 0, stream_>>>(
        Grad(kTokenEmbeddingIndex), group_order_, group_token_, group_start_, d_residual_, d);
    PositionEmbeddingBackward<<<Blocks(t * d), kThreads, 0, stream_>>>(
        Grad(kPositionEmbeddingIndex), d_residual_, b, t, d);
    MTB_CUDA_CHECK(cudaGetLastError());
    NotifyReady(layers + 1, {kPositionEmbeddingIndex, kTokenEmbeddingIndex});
  }

  GptDims dims_;
  std::vector<DeviceTensor> tensors_;
  AdamWSettings adamw_;
  int64_t total_ = 0;
  int64_t bytes_ = 0;
  std::vector<void*> allocations_;
  Lt lt_;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;  // 4 timing events, then NotifyReady's
  GradientReadyHook* hook_ = nullptr;
  float *params_ = nullptr, *grads_ = nullptr, *adam_m_ = nullptr, *adam_v_ = nullptr;
  std::vector<LayerActivations> layers_;
  float *encoded_ = nullptr, *lnf_ = nullptr, *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr;
  float *logits_ = nullptr, *losses_ = nullptr, *scores_ = nullptr;
  float *d_residual_ = nullptr, *d_rows_ = nullptr, *d_wide_ = nullptr, *d_qkv_ = nullptr;
  float *d_q_ = nullptr, *d_k_ = nullptr, *d_v_ = nullptr, *d_heads_ = nullptr;
  float* norm_partials_ = nullptr;
  int32_t *inputs_ = nullptr, *targets_ = nullptr;
  int32_t *group_order_ = nullptr, *group_token_ = nullptr, *group_start_ = nullptr;
  TokenGroups groups_{dims_.batch_size * dims_.seq_len};
  std::vector<float> host_losses_, host_partials_;
};

// Device copies of a reference kernel's inputs and scratch, freed together.
class ScratchBuffers {
 public:
  ScratchBuffers() {
    MTB_CUDA_CHECK(cudaStreamCreate(&stream_));
    MTB_CUDA_CHECK(cudaMalloc(&lt_.workspace, lt_.workspace_bytes));
    MTB_CUBLAS_CHECK(cublasLtCreate(&lt_.handle));
  }
  ~ScratchBuffers() {
    cudaStreamSynchronize(stream_);
    for (void* p : held_) cudaFree(p);
    cublasLtDestroy(lt_.handle);
    cudaFree(lt_.workspace);
    cudaStreamDestroy(stream_);
  }
  const Lt& lt() const { return lt_; }
  cudaStream_t stream() const { return stream_; }

  float* Zeros(int64_t n) {
    void* p = nullptr;
    MTB_CUDA_CHECK(cudaMalloc(&p, std::max<int64_t>(n, 1) * sizeof(float)));
    MTB_CUDA_CHECK(cudaMemset(p, 0, std::max<int64_t>(n, 1) * sizeof(float)));
    held_.push_back(p);
    return static_cast<float*>(p);
  }
  float* Floats(const RefTensor& tensor) {
    std::vector<float> host(tensor.values.begin(), tensor.values.end());
    float* p = Zeros(tensor.numel());
    MTB_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(float),
                              cudaMemcpyHostToDevice));
    return p;
  }
  int32_t* Ints(const RefTensor& tensor) {
    return IntsFrom(std::vector<int32_t>(tensor.values.begin(), tensor.values.end()));
  }
  int32_t* IntsFrom(const std::vector<int32_t>& host) {
    void* p = nullptr;
    MTB_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(host.size(), 1) * sizeof(int32_t)));
    held_.push_back(p);
    MTB_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(int32_t),
                              cudaMemcpyHostToDevice));
    return static_cast<int32_t*>(p);
  }
  std::vector<double> Back(const float* device, int64_t n) {
    MTB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    MTB_CUDA_CHECK(cudaGetLastError());
    std::vector<float> host(n);
    MTB_CUDA_CHECK(cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost));
    return std::vector<double>(host.begin(), host.end());
  }

 private:
  Lt lt_;
  cudaStream_t stream_ = nullptr;
  std::vector<void*> held_;
};

// dqkv (N, 3D) rows -> the (N, D) part `which` (0 q, 1 k, 2 v).
std::vector<double> QkvPart(const std::vector<double>& dqkv, int64_t n, int64_t d, int which) {
  std::vector<double> part(n * d);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < d; ++c) part[r * d + c] = dqkv[r * 3 * d + which * d + c];
  }
  return part;
}

}  // namespace

std::string RunReferenceKernel(const KernelRef& kernel, bool planted_off_by_one,
                               std::map<std::string, std::vector<double>>* outputs) {
  std::string missing;
  auto in = [&](const std::string& name) -> const RefTensor& {
    static const RefTensor kEmpty;
    const RefTensor* t = kernel.Input(name);
    if (t == nullptr) {
      if (missing.empty()) missing = "no input " + name;
      return kEmpty;
    }
    return *t;
  };
  auto dim = [&](const std::string& name, int i) -> int64_t {
    const RefTensor& t = in(name);
    return i < static_cast<int>(t.shape.size()) ? t.shape[i] : 0;
  };
  const std::string& k = kernel.name;
  // Every input a kernel reads, checked before anything runs.
  const std::map<std::string, std::vector<std::string>> needs = {
      {"embedding_forward", {"tokens", "wte", "wpe"}},
      {"embedding_backward", {"tokens", "dout", "vocab"}},
      {"layernorm_forward", {"x", "weight", "bias"}},
      {"layernorm_backward", {"dout", "x", "weight", "mean", "rstd"}},
      {"linear_forward", {"x", "weight", "bias"}},
      {"linear_backward", {"x", "weight", "dy"}},
      {"gelu_forward", {"x"}},
      {"gelu_backward", {"x", "dy"}},
      {"causal_softmax_forward", {"scores"}},
      {"causal_softmax_backward", {"att", "datt"}},
      {"attention_forward", {"qkv", "n_heads"}},
      {"attention_backward", {"qkv", "att", "dy", "n_heads"}},
      {"classifier", {"logits", "targets"}},
      {"grad_norm_clip_adamw",
       {"p", "g", "m", "v", "tensor_numel", "tensor_decay", "settings"}},
  };
  auto need = needs.find(k);
  if (need == needs.end()) return "no device implementation of kernel " + k;
  for (const std::string& name : need->second) in(name);
  if (!missing.empty()) return missing;

  ScratchBuffers s;
  const cudaStream_t st = s.stream();
  const int planted = planted_off_by_one ? 1 : 0;
  if (k == "embedding_forward") {
    const int64_t b = dim("tokens", 0), t = dim("tokens", 1), d = dim("wte", 1);
    float* out = s.Zeros(b * t * d);
    EmbeddingForward<<<Blocks(b * t * d), kThreads, 0, st>>>(
        out, s.Ints(in("tokens")), s.Floats(in("wte")), s.Floats(in("wpe")), b * t, t, d);
    (*outputs)["out"] = s.Back(out, b * t * d);
  } else if (k == "embedding_backward") {
    const int64_t b = dim("tokens", 0), t = dim("tokens", 1), d = dim("dout", 2);
    const int64_t v = static_cast<int64_t>(in("vocab").values.at(0));
    float* dwte = s.Zeros(v * d);
    float* dwpe = s.Zeros(t * d);
    const std::vector<int32_t> tokens(in("tokens").values.begin(), in("tokens").values.end());
    TokenGroups groups(b * t);
    groups.Group(tokens.data(), b * t);
    const float* dout = s.Floats(in("dout"));
    TokenEmbeddingBackward<<<static_cast<unsigned>(groups.groups()), kThreads, 0, st>>>(
        dwte, s.IntsFrom(groups.order), s.IntsFrom(groups.token), s.IntsFrom(groups.start),
        dout, d);
    PositionEmbeddingBackward<<<Blocks(t * d), kThreads, 0, st>>>(dwpe, dout, b, t, d);
    (*outputs)["dwte"] = s.Back(dwte, v * d);
    (*outputs)["dwpe"] = s.Back(dwpe, t * d);
  } else if (k == "layernorm_forward") {
    const int64_t n = dim("x", 0), c = dim("x", 1);
    float *y = s.Zeros(n * c), *mean = s.Zeros(n), *rstd = s.Zeros(n);
    LayerNormForward<<<Blocks(n, kWarpsPerBlock), kThreads, 0, st>>>(
        y, mean, rstd, s.Floats(in("x")), s.Floats(in("weight")), s.Floats(in("bias")), n,
        static_cast<int>(c));
    (*outputs)["y"] = s.Back(y, n * c);
    (*outputs)["mean"] = s.Back(mean, n);
    (*outputs)["rstd"] = s.Back(rstd, n);
  } else if (k == "layernorm_backward") {
    const int64_t n = dim("x", 0), c = dim("x", 1);
    float *dx = s.Zeros(n * c), *dw = s.Zeros(c), *db = s.Zeros(c);
    const float *dout = s.Floats(in("dout")), *x = s.Floats(in("x")),
                *w = s.Floats(in("weight")), *mean = s.Floats(in("mean")),
                *rstd = s.Floats(in("rstd"));
    LayerNormBackwardInput<<<Blocks(n, kWarpsPerBlock), kThreads, 0, st>>>(
        dx, dout, x, w, mean, rstd, n, static_cast<int>(c));
    LayerNormBackwardWeights<<<Blocks(c), kThreads, 0, st>>>(dw, db, dout, x, mean, rstd, n,
                                                             static_cast<int>(c));
    (*outputs)["dx"] = s.Back(dx, n * c);
    (*outputs)["dweight"] = s.Back(dw, c);
    (*outputs)["dbias"] = s.Back(db, c);
  } else if (k == "linear_forward") {
    const int64_t rows = dim("x", 0), in_f = dim("x", 1), out_f = dim("weight", 0);
    float* y = s.Zeros(rows * out_f);
    LinearForward(s.lt(), st, y, s.Floats(in("x")), s.Floats(in("weight")),
                  s.Floats(in("bias")), rows, in_f, out_f);
    (*outputs)["y"] = s.Back(y, rows * out_f);
  } else if (k == "linear_backward") {
    const int64_t rows = dim("x", 0), in_f = dim("x", 1), out_f = dim("weight", 0);
    float *dx = s.Zeros(rows * in_f), *dw = s.Zeros(out_f * in_f), *db = s.Zeros(out_f);
    LinearBackward(s.lt(), st, dx, dw, db, s.Floats(in("dy")), s.Floats(in("x")),
                   s.Floats(in("weight")), rows, in_f, out_f);
    (*outputs)["dx"] = s.Back(dx, rows * in_f);
    (*outputs)["dweight"] = s.Back(dw, out_f * in_f);
    (*outputs)["dbias"] = s.Back(db, out_f);
  } else if (k == "gelu_forward") {
    const int64_t n = in("x").numel();
    float* y = s.Zeros(n);
    GeluForward<<<Blocks(n), kThreads, 0, st>>>(y, s.Floats(in("x")), n);
    (*outputs)["y"] = s.Back(y, n);
  } else if (k == "gelu_backward") {
    const int64_t n = in("x").numel();
    float* d = s.Floats(in("dy"));
    GeluBackward<<<Blocks(n), kThreads, 0, st>>>(d, s.Floats(in("x")), n);
    (*outputs)["dx"] = s.Back(d, n);
  } else if (k == "causal_softmax_forward") {
    const int64_t t = dim("scores", 3), rows = in("scores").numel() / std::max<int64_t>(t, 1);
    float* att = s.Zeros(rows * t);
    CausalSoftmaxForward<<<Blocks(rows, kWarpsPerBlock), kThreads, 0, st>>>(
        att, s.Floats(in("scores")), rows, static_cast<int>(t), planted);
    (*outputs)["att"] = s.Back(att, rows * t);
  } else if (k == "causal_softmax_backward") {
    const int64_t t = dim("att", 3), rows = in("att").numel() / std::max<int64_t>(t, 1);
    float* d = s.Floats(in("datt"));
    CausalSoftmaxBackward<<<Blocks(rows, kWarpsPerBlock), kThreads, 0, st>>>(
        d, s.Floats(in("att")), rows, static_cast<int>(t));
    (*outputs)["dscores"] = s.Back(d, rows * t);
  } else if (k == "attention_forward" || k == "attention_backward") {
    const int64_t b = dim("qkv", 0), t = dim("qkv", 1), d = dim("qkv", 2) / 3;
    const int64_t h = static_cast<int64_t>(in("n_heads").values.at(0));
    if (h <= 0 || d % h != 0) return "n_heads does not divide the width";
    const int64_t hs = d / h, n = b * t;
    const float* qkv = s.Floats(in("qkv"));
    float *q = s.Zeros(n * d), *kk = s.Zeros(n * d), *v = s.Zeros(n * d);
    float* scores = s.Zeros(b * h * t * t);
    if (k == "attention_forward") {
      float *att = s.Zeros(b * h * t * t), *heads = s.Zeros(n * d), *y = s.Zeros(n * d);
      AttentionForward(s.lt(), st, y, qkv, q, kk, v, scores, att, heads, b, t, h, hs,
                       planted);
      (*outputs)["y"] = s.Back(y, n * d);
      (*outputs)["att"] = s.Back(att, b * h * t * t);
    } else {
      SplitHeads<<<Blocks(n * d), kThreads, 0, st>>>(q, kk, v, qkv, b, t, h, hs);
      float *dqkv = s.Zeros(n * 3 * d), *d_heads = s.Zeros(n * d), *dq = s.Zeros(n * d),
            *dk = s.Zeros(n * d), *dv = s.Zeros(n * d);
      AttentionBackward(s.lt(), st, dqkv, s.Floats(in("dy")), q, kk, v, s.Floats(in("att")),
                        scores, d_heads, dq, dk, dv, b, t, h, hs);
      const std::vector<double> all = s.Back(dqkv, n * 3 * d);
      (*outputs)["dq"] = QkvPart(all, n, d, 0);
      (*outputs)["dk"] = QkvPart(all, n, d, 1);
      (*outputs)["dv"] = QkvPart(all, n, d, 2);
    }
  } else if (k == "classifier") {
    const int64_t n = dim("logits", 0), v = dim("logits", 1);
    float* logits = s.Floats(in("logits"));
    float* losses = s.Zeros(n);
    FusedClassifier<<<static_cast<int>(n), kThreads, 0, st>>>(
        logits, losses, s.Ints(in("targets")), n, static_cast<int>(v));
    (*outputs)["losses"] = s.Back(losses, n);
    (*outputs)["dlogits"] = s.Back(logits, n * v);
  } else if (k == "grad_norm_clip_adamw") {
    const std::vector<double>& settings = in("settings").values;
    if (settings.size() != 7) return "settings: want 7 values";
    std::vector<DeviceTensor> tensors;
    int64_t offset = 0;
    for (size_t i = 0; i < in("tensor_numel").values.size(); ++i) {
      DeviceTensor tensor;
      tensor.offset = offset;
      tensor.numel = static_cast<int64_t>(in("tensor_numel").values[i]);
      tensor.weight_decay = in("tensor_decay").values.at(i) != 0;
      offset += tensor.numel;
      tensors.push_back(tensor);
    }
    const int64_t n = in("p").numel();
    if (offset != n) return "tensor_numel does not add up to p's size";
    AdamWSettings adamw;
    adamw.beta1 = settings[3];
    adamw.beta2 = settings[4];
    adamw.eps = settings[5];
    adamw.weight_decay = settings[6];
    float *p = s.Floats(in("p")), *m = s.Floats(in("m")), *v = s.Floats(in("v"));
    float* partials = s.Zeros(kNormPartials);
    std::vector<float> host_partials(kNormPartials);
    StepStats stats;
    OptimizerStep(st, p, s.Floats(in("g")), m, v, n, tensors, adamw, partials,
                  host_partials.data(), static_cast<int64_t>(settings[0]), settings[1],
                  settings[2], &stats);
    (*outputs)["grad_norm"] = {stats.grad_norm};
    (*outputs)["p"] = s.Back(p, n);
    (*outputs)["m"] = s.Back(m, n);
    (*outputs)["v"] = s.Back(v, n);
  }
  return "";
}

std::string ProbeDevice(DeviceInfo* info) {
  int count = 0;
  if (cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess) {
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(status);
  }
  if (count == 0) return "no CUDA device is visible";
  cudaDeviceProp properties;
  if (cudaError_t status = cudaGetDeviceProperties(&properties, 0);
      status != cudaSuccess) {
    return std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(status);
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  auto version = [](int v) {
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  };
  info->name = properties.name;
  info->driver_version = version(driver);
  info->runtime_version = version(runtime);
  info->total_memory_bytes = static_cast<int64_t>(properties.totalGlobalMem);
  return "";
}

std::string UseDevice(int device) {
  const cudaError_t status = cudaSetDevice(device);
  if (status == cudaSuccess) return "";
  return std::string("cudaSetDevice(") + std::to_string(device) + "): " +
         cudaGetErrorString(status);
}

std::unique_ptr<GptCuda> CreateGptCuda(const GptDims& dims,
                                       const std::vector<DeviceTensor>& tensors,
                                       const float* initial_parameters, int64_t total,
                                       const AdamWSettings& adamw, std::string* error) {
  if (static_cast<int>(tensors.size()) != TensorCount(dims.n_layers)) {
    *error = "the parameter layout has " + std::to_string(tensors.size()) +
             " tensors; " + std::to_string(dims.n_layers) + " layers need " +
             std::to_string(TensorCount(dims.n_layers));
    return nullptr;
  }
  auto model = std::make_unique<GptCudaImpl>(dims, tensors, adamw);
  *error = model->Allocate(initial_parameters, total);
  if (!error->empty()) return nullptr;
  return model;
}

}  // namespace cuda
}  // namespace mtb
