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
// gradients (row chunks summed in order, then the chunks in order: a fixed
// order), the gradient's sum of
// squares in fixed per-block partials, and AdamW with the clip coefficient
// folded in.
#include "trainer/cuda/gpt_cuda.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>
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

// Activations are templated on their storage type T: float (the fp32 step)
// or bf16 (the bf16 step). Every kernel computes in fp32: it widens what it
// reads and rounds (to nearest even) what it writes.
using bf16 = __nv_bfloat16;

__device__ __forceinline__ float Wide(float x) { return x; }
__device__ __forceinline__ float Wide(bf16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T Narrow(float x);
template <>
__device__ __forceinline__ float Narrow<float>(float x) { return x; }
template <>
__device__ __forceinline__ bf16 Narrow<bf16>(float x) { return __float2bfloat16_rn(x); }

template <typename T>
cudaDataType_t DataType() {
  return std::is_same<T, float>::value ? CUDA_R_32F : CUDA_R_16BF;
}

// out[i] = T(in[i]) (fp32 -> the activation type), and back.
template <typename To, typename From>
__global__ void Convert(To* out, const From* in, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = Narrow<To>(Wide(in[i]));
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
template <typename T>
__global__ void LayerNormForward(T* out, float* mean, float* rstd,
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
  for (int i = lane; i < c; i += 32) out[row * c + i] = Narrow<T>((xr[i] - m) * s * w[i] + b[i]);
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// dx += LayerNorm's input gradient, one warp per row.
template <typename T>
__global__ void LayerNormBackwardInput(float* dx, const T* dout,
                                       const float* x, const float* w,
                                       const float* mean, const float* rstd,
                                       int64_t n_rows, int c) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n_rows) return;
  const float m = mean[row], s = rstd[row];
  const float* xr = x + row * c;
  const T* dr = dout + row * c;
  float dnorm_sum = 0, dnorm_norm_sum = 0;
  for (int i = lane; i < c; i += 32) {
    const float dnorm = Wide(dr[i]) * w[i];
    dnorm_sum += dnorm;
    dnorm_norm_sum += dnorm * (xr[i] - m) * s;
  }
  const float dnorm_mean = WarpSum(dnorm_sum) / c;
  const float dnorm_norm_mean = WarpSum(dnorm_norm_sum) / c;
  for (int i = lane; i < c; i += 32) {
    const float norm = (xr[i] - m) * s;
    dx[row * c + i] += s * (Wide(dr[i]) * w[i] - dnorm_mean - norm * dnorm_norm_mean);
  }
}

// Column sums of a (N, C) gradient in two fixed-order passes (deterministic,
// no atomics): the rows are cut into at most kColumnChunks chunks; pass one
// sums each chunk's rows in order, a thread per (column, chunk), into
// partials; pass two adds a column's chunk sums in chunk order. A bias's
// gradient is db[c] += sum_n dout[n, c]; LayerNorm's also dw[c] += sum_n
// dout[n, c] * norm[n, c] (kLayerNorm). partials: 2 x chunks x C floats.
constexpr int kColumnChunks = 64;

template <typename T, bool kLayerNorm>
__global__ void ColumnPartials(float* partials, const T* dout, const float* x,
                               const float* mean, const float* rstd, int64_t n_rows, int c,
                               int64_t chunk_rows) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= c) return;
  const int64_t chunk = blockIdx.y;
  const int64_t begin = chunk * chunk_rows;
  const int64_t end = min(n_rows, begin + chunk_rows);
  float sum_b = 0, sum_w = 0;
  for (int64_t row = begin; row < end; ++row) {
    const float d = Wide(dout[row * c + col]);
    sum_b += d;
    if (kLayerNorm) sum_w += d * (x[row * c + col] - mean[row]) * rstd[row];
  }
  partials[chunk * c + col] = sum_b;
  if (kLayerNorm) partials[(gridDim.y + chunk) * c + col] = sum_w;
}

template <bool kLayerNorm>
__global__ void FinishColumns(float* db, float* dw, const float* partials, int chunks,
                              int c) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= c) return;
  float sum_b = 0, sum_w = 0;
  for (int k = 0; k < chunks; ++k) {
    sum_b += partials[static_cast<int64_t>(k) * c + col];
    if (kLayerNorm) sum_w += partials[static_cast<int64_t>(chunks + k) * c + col];
  }
  db[col] += sum_b;
  if (kLayerNorm) dw[col] += sum_w;
}

template <typename T, bool kLayerNorm>
void ColumnSums(cudaStream_t stream, float* partials, int64_t partial_floats, float* db,
                float* dw, const T* dout, const float* x, const float* mean,
                const float* rstd, int64_t n_rows, int c) {
  if (n_rows <= 0 || c <= 0) return;
  const int64_t chunk_rows = (n_rows + kColumnChunks - 1) / kColumnChunks;
  const int chunks = static_cast<int>((n_rows + chunk_rows - 1) / chunk_rows);
  if (2 * static_cast<int64_t>(chunks) * c > partial_floats) {
    std::fprintf(stderr, "trainer_cuda: column sums of %d columns need %lld scratch floats, "
                 "%lld allocated\n", c, 2LL * chunks * c, static_cast<long long>(partial_floats));
    std::exit(1);
  }
  const dim3 grid(Blocks(c), chunks);
  ColumnPartials<T, kLayerNorm><<<grid, kThreads, 0, stream>>>(partials, dout, x, mean, rstd,
                                                               n_rows, c, chunk_rows);
  FinishColumns<kLayerNorm><<<Blocks(c), kThreads, 0, stream>>>(db, dw, partials, chunks, c);
}

// ---- elementwise ----

// The residual stream stays fp32: out = a + widened b (fp32 + bf16 promotes
// to fp32 in the CPU trainer too).
template <typename T>
__global__ void Add(float* out, const float* a, const T* b, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a[i] + Wide(b[i]);
}

// torch.nn.GELU(): 0.5 x (1 + erf(x / sqrt 2)).
template <typename T>
__global__ void GeluForward(T* out, const T* x, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float v = Wide(x[i]);
  out[i] = Narrow<T>(0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));
}

// d *= GELU'(x) = 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi).
template <typename T>
__global__ void GeluBackward(T* d, const T* x, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float v = Wide(x[i]);
  const float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
  const float pdf = expf(-0.5f * v * v) * 0.39894228040143268f;
  d[i] = Narrow<T>(Wide(d[i]) * (cdf + v * pdf));
}

// ---- attention ----

// qkv (B, T, 3, H, hs) -> q, k, v each (B, H, T, hs).
template <typename T>
__global__ void SplitHeads(T* q, T* k, T* v, const T* qkv,
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
template <typename T>
__global__ void MergeHeadsQkv(T* dqkv, const T* dq, const T* dk, const T* dv, int64_t batch, int64_t seq_len,
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
template <typename T>
__global__ void HeadsToRows(T* rows, T* heads, int64_t batch, int64_t seq_len,
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
template <typename T>
__global__ void CausalSoftmaxForward(T* att, const T* scores, int64_t rows,
                                     int seq_len, int planted) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int t = min(static_cast<int>(row % seq_len) + planted, seq_len - 1);
  const T* s = scores + row * seq_len;
  T* a = att + row * seq_len;
  float max_value = -INFINITY;
  for (int j = lane; j <= t; j += 32) max_value = fmaxf(max_value, Wide(s[j]));
  max_value = WarpMax(max_value);
  float sum = 0;
  for (int j = lane; j <= t; j += 32) sum += expf(Wide(s[j]) - max_value);
  sum = WarpSum(sum);
  for (int j = lane; j < seq_len; j += 32) {
    a[j] = Narrow<T>(j <= t ? expf(Wide(s[j]) - max_value) / sum : 0.0f);
  }
}

// datt := att * (datt - sum_j att_j datt_j), in place (the scores' gradient
// before the 1/sqrt(hs) scale, which the next products apply).
template <typename T>
__global__ void CausalSoftmaxBackward(T* datt, const T* att, int64_t rows, int seq_len) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int t = static_cast<int>(row % seq_len);
  T* d = datt + row * seq_len;
  const T* a = att + row * seq_len;
  float dot = 0;
  for (int j = lane; j <= t; j += 32) dot += Wide(a[j]) * Wide(d[j]);
  dot = WarpSum(dot);
  for (int j = lane; j < seq_len; j += 32) {
    d[j] = Narrow<T>(j <= t ? Wide(a[j]) * (Wide(d[j]) - dot) : 0.0f);
  }
}

// ---- classifier ----

// One block per row of logits (N, V): losses[row] = logsumexp - logit[target],
// and the row becomes its gradient (softmax - onehot(target)) / N in place.
template <typename T>
__global__ void FusedClassifier(T* logits, float* losses, const int32_t* targets,
                                int64_t n_rows, int vocab) {
  __shared__ float shared[kWarpsPerBlock];
  const int64_t row = blockIdx.x;
  T* l = logits + row * vocab;
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
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
    max_value = fmaxf(max_value, Wide(l[j]));
  }
  max_value = block_reduce(max_value, true);
  float sum = 0;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) sum += expf(Wide(l[j]) - max_value);
  sum = block_reduce(sum, false);
  const int target = targets[row];
  if (threadIdx.x == 0) losses[row] = logf(sum) + max_value - Wide(l[target]);
  __syncthreads();  // the target's logit is read before the row is overwritten
  const float inv_n = 1.0f / static_cast<float>(n_rows);
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
    const float p = expf(Wide(l[j]) - max_value) / sum;
    l[j] = Narrow<T>((p - (j == target ? 1.0f : 0.0f)) * inv_n);
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
                      float step_size, float sqrt_bc2, float grad_scale, bf16* p_low) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float grad = g[i] * grad_scale;
  const float param = p[i] * decay_factor;
  const float mi = beta1 * m[i] + (1.0f - beta1) * grad;
  const float vi = beta2 * v[i] + (1.0f - beta2) * grad * grad;
  m[i] = mi;
  v[i] = vi;
  const float updated = param - step_size * mi / (sqrtf(vi) / sqrt_bc2 + eps);
  p[i] = updated;
  // The bf16 step's copy of the weights for the products, made here from
  // the fp32 master in the same pass.
  if (p_low != nullptr) p_low[i] = __float2bfloat16_rn(updated);
}

// ---- cuBLASLt ----

struct Lt {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 32 << 20;
  // The column sums' scratch (ColumnSums), allocated with the rest.
  float* partials = nullptr;
  int64_t partial_floats = 0;
};

// Column-major C (m, n) = alpha op(A) op(B) + beta C [+ bias (m) per column],
// `batch` times with the given strides (in elements). A is stored (m, k), or
// (k, m) when trans_a; B (k, n), or (n, k) when trans_b. A and B (and the
// bias) are of ab_type, C of c_type; the products accumulate in fp32
// (CUBLAS_COMPUTE_32F: no TF32) with fp32 alpha and beta.
void Matmul(const Lt& lt, cudaStream_t stream, void* c, const void* a, const void* b,
            const void* bias, int64_t m, int64_t n, int64_t k, bool trans_a,
            bool trans_b, float alpha, float beta, int batch = 1, int64_t stride_a = 0,
            int64_t stride_b = 0, int64_t stride_c = 0,
            cudaDataType_t ab_type = CUDA_R_32F, cudaDataType_t c_type = CUDA_R_32F) {
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
  auto layout = [batch](cudaDataType_t type, int64_t rows, int64_t cols, int64_t stride) {
    cublasLtMatrixLayout_t l;
    MTB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, rows, cols, rows));
    if (batch > 1) {
      MTB_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
      MTB_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    }
    return l;
  };
  cublasLtMatrixLayout_t a_layout =
      trans_a ? layout(ab_type, k, m, stride_a) : layout(ab_type, m, k, stride_a);
  cublasLtMatrixLayout_t b_layout =
      trans_b ? layout(ab_type, n, k, stride_b) : layout(ab_type, k, n, stride_b);
  cublasLtMatrixLayout_t c_layout = layout(c_type, m, n, stride_c);
  cublasLtMatmulPreference_t preference;
  MTB_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  MTB_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt.workspace_bytes,
      sizeof(lt.workspace_bytes)));
  // The heuristic assumes 256-byte aligned matrices unless told: a tensor of
  // the parameter buffer starts where the previous one ends (a bf16 copy's
  // offsets are only 2-byte multiples), so it is told each pointer's.
  auto alignment = [](const void* p) {
    uint32_t bytes = 256;
    while (bytes > 1 && reinterpret_cast<uintptr_t>(p) % bytes != 0) bytes /= 2;
    return bytes;
  };
  const std::pair<cublasLtMatmulPreferenceAttributes_t, const void*> aligned[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, c}};
  for (const auto& [attribute, pointer] : aligned) {
    const uint32_t bytes = alignment(pointer);
    MTB_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(preference, attribute, &bytes, sizeof(bytes)));
  }
  cublasLtMatmulHeuristicResult_t heuristic;
  int found = 0;
  MTB_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt.handle, desc, a_layout, b_layout,
                                                  c_layout, c_layout, preference, 1,
                                                  &heuristic, &found));
  if (found == 0) {
    std::fprintf(stderr,
                 "trainer_cuda: cuBLASLt has no algorithm for m=%lld n=%lld "
                 "k=%lld batch=%d (%s inputs)\n",
                 static_cast<long long>(m), static_cast<long long>(n),
                 static_cast<long long>(k), batch, ab_type == CUDA_R_32F ? "fp32" : "bf16");
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
// Column-major: y^T (out, rows) = op_T(W as (in, out)) x^T (in, rows). T:
// x, W, the bias and y (bf16: the weight's bf16 copy, the output rounded
// once from the fp32 accumulator plus bias, as CPU autocast's linear).
template <typename T>
void LinearForward(const Lt& lt, cudaStream_t stream, T* y, const T* x, const T* w,
                   const T* bias, int64_t rows, int64_t in, int64_t out) {
  Matmul(lt, stream, y, w, x, bias, /*m=*/out, /*n=*/rows, /*k=*/in, true, false, 1, 0, 1,
         0, 0, 0, DataType<T>(), DataType<T>());
}

// dx (rows, in) = dy W (written, T); dW (out, in) += dy^T x and dbias +=
// column sums of dy, both accumulated in fp32 into the fp32 gradient.
template <typename T>
void LinearBackward(const Lt& lt, cudaStream_t stream, T* dx, float* dw, float* dbias,
                    const T* dy, const T* x, const T* w, int64_t rows, int64_t in,
                    int64_t out) {
  // dx^T (in, rows) = W as (in, out) . dy^T (out, rows)
  Matmul(lt, stream, dx, w, dy, nullptr, in, rows, out, false, false, 1, 0, 1, 0, 0, 0,
         DataType<T>(), DataType<T>());
  // dW^T (in, out) = x^T (in, rows) . op_T(dy^T as (out, rows))
  Matmul(lt, stream, dw, x, dy, nullptr, in, out, rows, false, true, 1, 1, 1, 0, 0, 0,
         DataType<T>(), CUDA_R_32F);
  if (dbias != nullptr) {
    ColumnSums<T, false>(stream, lt.partials, lt.partial_floats, dbias, nullptr, dy, nullptr,
                         nullptr, nullptr, rows, static_cast<int>(out));
  }
}

// ---- attention (between the qkv and the output projection) ----

// qkv (N, 3D) -> y (N, D) rows; q, k, v, att, heads_out kept for backward,
// scores is scratch (B, H, T, T).
template <typename T>
void AttentionForward(const Lt& lt, cudaStream_t stream, T* y, const T* qkv, T* q, T* k,
                      T* v, T* scores, T* att, T* heads_out, int64_t b, int64_t t,
                      int64_t h, int64_t hs, int planted = 0) {
  const cudaDataType_t type = DataType<T>();
  const int64_t n = b * t, d = h * hs;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  SplitHeads<<<Blocks(n * d), kThreads, 0, stream>>>(q, k, v, qkv, b, t, h, hs);
  // scores^T per (b, h): (Tk, Tq) = op_T(k as (hs, Tk)) . q as (hs, Tq), scaled
  Matmul(lt, stream, scores, k, q, nullptr, t, t, hs, true, false, scale, 0,
         static_cast<int>(b * h), t * hs, t * hs, t * t, type, type);
  CausalSoftmaxForward<<<Blocks(b * h * t, kWarpsPerBlock), kThreads, 0, stream>>>(
      att, scores, b * h * t, static_cast<int>(t), planted);
  // y^T (hs, Tq) = v as (hs, Tk) . att as (Tk, Tq)
  Matmul(lt, stream, heads_out, v, att, nullptr, hs, t, t, false, false, 1, 0,
         static_cast<int>(b * h), t * hs, t * t, t * hs, type, type);
  HeadsToRows<<<Blocks(n * d), kThreads, 0, stream>>>(y, heads_out, b, t, h, hs, true);
}

// dy (N, D) rows -> dqkv (N, 3D), from the forward's q, k, v and att;
// d_scores, d_heads, d_q, d_k, d_v are scratch. dy is read as rows only.
template <typename T>
void AttentionBackward(const Lt& lt, cudaStream_t stream, T* dqkv, T* dy, const T* q,
                       const T* k, const T* v, const T* att, T* d_scores, T* d_heads,
                       T* d_q, T* d_k, T* d_v, int64_t b, int64_t t, int64_t h,
                       int64_t hs) {
  const cudaDataType_t type = DataType<T>();
  const int64_t n = b * t, d = h * hs;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  HeadsToRows<<<Blocks(n * d), kThreads, 0, stream>>>(dy, d_heads, b, t, h, hs, false);
  const int batch = static_cast<int>(b * h);
  // d(att)^T (Tk, Tq) = op_T(v as (hs, Tk)) . dy as (hs, Tq)
  Matmul(lt, stream, d_scores, v, d_heads, nullptr, t, t, hs, true, false, 1, 0, batch,
         t * hs, t * hs, t * t, type, type);
  // dv^T (hs, Tk) = dy as (hs, Tq) . op_T(att as (Tk, Tq))
  Matmul(lt, stream, d_v, d_heads, att, nullptr, hs, t, t, false, true, 1, 0, batch,
         t * hs, t * t, t * hs, type, type);
  CausalSoftmaxBackward<<<Blocks(b * h * t, kWarpsPerBlock), kThreads, 0, stream>>>(
      d_scores, att, b * h * t, static_cast<int>(t));
  // dq^T (hs, Tq) = k as (hs, Tk) . dS as (Tk, Tq), scaled
  Matmul(lt, stream, d_q, k, d_scores, nullptr, hs, t, t, false, false, scale, 0, batch,
         t * hs, t * t, t * hs, type, type);
  // dk^T (hs, Tk) = q as (hs, Tq) . op_T(dS as (Tk, Tq)), scaled
  Matmul(lt, stream, d_k, q, d_scores, nullptr, hs, t, t, false, true, scale, 0, batch,
         t * hs, t * t, t * hs, type, type);
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
                   int64_t step, double lr, double max_grad_norm, StepStats* stats,
                   bf16* params_low = nullptr) {
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
        static_cast<float>(std::sqrt(bias_correction2)), static_cast<float>(grad_scale),
        params_low == nullptr ? nullptr : params_low + tensor.offset);
  }
  MTB_CUDA_CHECK(cudaGetLastError());
}

// ---- the model ----

// T: the activations' type (float or bf16); the residual stream, LayerNorm's
// statistics and every gradient of a parameter stay fp32.
template <typename T>
struct LayerActivations {
  T* ln1;                            // (N, D)
  float *ln1_mean, *ln1_rstd;        // (N), (N)
  T* qkv;                            // (N, 3D)
  T *q, *k, *v;                      // (B, H, T, hs)
  T* att;                            // (B, H, T, T) probabilities
  T* heads_out;                      // (B, H, T, hs)
  T* attn_y;                         // (N, D): heads_out as rows
  float* residual2;                  // (N, D): input + attention projection
  T* ln2;
  float *ln2_mean, *ln2_rstd;
  T* fc;                             // (N, 4D) pre-GELU
  T* fc_gelu;                        // (N, 4D)
  float* residual3;                  // (N, D): the block's output
};

// The model with activations of type T: float is the fp32 step; bf16 is the
// bf16 step (docs/gpu.md "The bf16 step"): the products read a bf16 copy of
// the weights that AdamW rewrites from the fp32 master each step.
template <typename T>
class GptCudaImpl : public GptCuda, public ShardedDevice {
 public:
  static constexpr bool kLow = !std::is_same<T, float>::value;

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
    auto bytes = [&](int64_t count) -> void* {
      if (!error.empty()) return nullptr;
      void* p = nullptr;
      const cudaError_t status = cudaMalloc(&p, count);
      if (status != cudaSuccess) {
        error = "cudaMalloc of " + std::to_string(count) + " bytes (" +
                std::to_string(bytes_) + " already held): " + cudaGetErrorString(status);
        return nullptr;
      }
      allocations_.push_back(p);
      bytes_ += count;
      return p;
    };
    auto floats = [&](int64_t count) { return static_cast<float*>(bytes(count * 4)); };
    auto acts = [&](int64_t count) {
      return static_cast<T*>(bytes(count * static_cast<int64_t>(sizeof(T))));
    };
    params_ = floats(total);
    grads_ = floats(total);
    adam_m_ = floats(total);
    adam_v_ = floats(total);
    if (kLow) {
      params_low_ = acts(total);
    } else {
      params_low_ = reinterpret_cast<T*>(params_);
    }
    layers_.resize(dims_.n_layers);
    for (LayerActivations<T>& a : layers_) {
      a.ln1 = acts(n * d);
      a.ln1_mean = floats(n);
      a.ln1_rstd = floats(n);
      a.qkv = acts(n * 3 * d);
      a.q = acts(n * d);
      a.k = acts(n * d);
      a.v = acts(n * d);
      a.att = acts(b * h * t * t);
      a.heads_out = acts(n * d);
      a.attn_y = acts(n * d);
      a.residual2 = floats(n * d);
      a.ln2 = acts(n * d);
      a.ln2_mean = floats(n);
      a.ln2_rstd = floats(n);
      a.fc = acts(n * 4 * d);
      a.fc_gelu = acts(n * 4 * d);
      a.residual3 = floats(n * d);
    }
    encoded_ = floats(n * d);
    proj_ = acts(n * d);
    lnf_ = acts(n * d);
    lnf_mean_ = floats(n);
    lnf_rstd_ = floats(n);
    logits_ = acts(n * v);
    losses_ = floats(n);
    scores_ = acts(b * h * t * t);  // forward scores, backward d(att)
    d_residual_ = floats(n * d);
    d_residual_low_ = kLow ? acts(n * d) : reinterpret_cast<T*>(d_residual_);
    d_rows_ = acts(n * d);
    d_wide_ = acts(n * 4 * d);
    d_qkv_ = acts(n * 3 * d);
    d_q_ = acts(n * d);
    d_k_ = acts(n * d);
    d_v_ = acts(n * d);
    d_heads_ = acts(n * d);
    norm_partials_ = floats(kNormPartials);
    lt_.partial_floats = 2 * kColumnChunks * 4 * d;  // the widest: the fc bias
    lt_.partials = floats(lt_.partial_floats);
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
    RefreshLowWeights();
    MTB_CUDA_CHECK(cudaMemset(adam_m_, 0, total * sizeof(float)));
    MTB_CUDA_CHECK(cudaMemset(adam_v_, 0, total * sizeof(float)));
    host_losses_.resize(n);
    host_partials_.resize(kNormPartials);
    return "";
  }

  StepStats ForwardBackward(const int32_t* inputs, const int32_t* targets) override {
    const int64_t n = dims_.batch_size * dims_.seq_len;
    if (low_weights_stale_) {
      RefreshLowWeights();
      low_weights_stale_ = false;
    }
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
                  norm_partials_, host_partials_.data(), step, lr, max_grad_norm, stats,
                  kLow ? reinterpret_cast<bf16*>(params_low_) : nullptr);
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
    RefreshLowWeights();
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
          static_cast<float>(std::sqrt(bias_correction2)), static_cast<float>(grad_scale),
          nullptr);
    }
    MTB_CUDA_CHECK(cudaGetLastError());
    // The pieces cover this rank's shard only; the other ranks' updated
    // parameters arrive by the all-gather after this call, so the bf16 copy is
    // rewritten from the whole gathered master before the next forward.
    low_weights_stale_ = kLow;
    MTB_CUDA_CHECK(cudaEventRecord(events_[3], stream_));
    // The parameters are gathered on the collectives' stream next.
    MTB_CUDA_CHECK(cudaEventSynchronize(events_[3]));
    float ms = 0;
    MTB_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[2], events_[3]));
    return ms;
  }

 private:
  // Set by the sharded update (zero1): the bf16 copy waits for the gathered
  // master (bf16 step only).
  bool low_weights_stale_ = false;
  // The bf16 copy of the weights from the fp32 master (bf16 step only).
  void RefreshLowWeights() {
    if (!kLow) return;
    Convert<<<Blocks(total_), kThreads, 0, stream_>>>(params_low_, params_, total_);
    MTB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  // What the products read: the bf16 copy (bf16 step) or the master (fp32).
  T* Low(int index) { return params_low_ + tensors_[index].offset; }
  T* Low(int64_t layer, int tensor) { return Low(BlockTensorIndex(layer, tensor)); }
  // d_residual_ as the products' dy: rounded to bf16 (the bf16 step), as the
  // CPU trainer's fp32 residual hands its gradient to a bf16 linear.
  const T* ResidualGradForProducts() {
    if (!kLow) return d_residual_low_;
    const int64_t count = dims_.batch_size * dims_.seq_len * dims_.d_model;
    Convert<<<Blocks(count), kThreads, 0, stream_>>>(d_residual_low_, d_residual_, count);
    return d_residual_low_;
  }
  // LayerNorm's weight and bias gradients over the step's rows.
  void LayerNormWeights(float* dw, float* db, const T* dout, const float* x,
                        const float* mean, const float* rstd) {
    ColumnSums<T, true>(stream_, lt_.partials, lt_.partial_floats, db, dw, dout, x, mean,
                        rstd, dims_.batch_size * dims_.seq_len,
                        static_cast<int>(dims_.d_model));
  }

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
      LayerActivations<T>& a = layers_[l];
      LayerNormForward<<<row_blocks, kThreads, 0, stream_>>>(
          a.ln1, a.ln1_mean, a.ln1_rstd, x, Param(l, kLn1Weight), Param(l, kLn1Bias), n,
          static_cast<int>(d));
      LinearForward(lt_, stream_, a.qkv, a.ln1, Low(l, kQkvWeight), Low(l, kQkvBias), n, d,
                    3 * d);
      AttentionForward(lt_, stream_, a.attn_y, a.qkv, a.q, a.k, a.v, scores_, a.att,
                       a.heads_out, b, t, h, hs);
      LinearForward(lt_, stream_, proj_, a.attn_y, Low(l, kAttnProjWeight),
                    Low(l, kAttnProjBias), n, d, d);
      Add<<<Blocks(n * d), kThreads, 0, stream_>>>(a.residual2, x, proj_, n * d);
      LayerNormForward<<<row_blocks, kThreads, 0, stream_>>>(
          a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, Param(l, kLn2Weight),
          Param(l, kLn2Bias), n, static_cast<int>(d));
      LinearForward(lt_, stream_, a.fc, a.ln2, Low(l, kFcWeight), Low(l, kFcBias), n, d,
                    4 * d);
      GeluForward<<<Blocks(n * 4 * d), kThreads, 0, stream_>>>(a.fc_gelu, a.fc, n * 4 * d);
      LinearForward(lt_, stream_, proj_, a.fc_gelu, Low(l, kMlpProjWeight),
                    Low(l, kMlpProjBias), n, 4 * d, d);
      Add<<<Blocks(n * d), kThreads, 0, stream_>>>(a.residual3, a.residual2, proj_, n * d);
      x = a.residual3;
    }
    const int64_t layers = dims_.n_layers;
    LayerNormForward<<<row_blocks, kThreads, 0, stream_>>>(
        lnf_, lnf_mean_, lnf_rstd_, x, Param(FinalLnWeightIndex(layers)),
        Param(FinalLnBiasIndex(layers)), n, static_cast<int>(d));
    // The head is tied to wte: logits (N, V) = lnf wte^T.
    LinearForward<T>(lt_, stream_, logits_, lnf_, Low(kTokenEmbeddingIndex), nullptr, n, d, v);
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
    LinearBackward<T>(lt_, stream_, d_rows_, Grad(kTokenEmbeddingIndex), nullptr, logits_,
                      lnf_, Low(kTokenEmbeddingIndex), n, d, v);
    const float* last = layers > 0 ? layers_[layers - 1].residual3 : encoded_;
    MTB_CUDA_CHECK(cudaMemsetAsync(d_residual_, 0, n * d * sizeof(float), stream_));
    LayerNormBackwardInput<<<row_blocks, kThreads, 0, stream_>>>(
        d_residual_, d_rows_, last, Param(FinalLnWeightIndex(layers)), lnf_mean_,
        lnf_rstd_, n, static_cast<int>(d));
    LayerNormWeights(Grad(FinalLnWeightIndex(layers)), Grad(FinalLnBiasIndex(layers)),
                     d_rows_, last, lnf_mean_, lnf_rstd_);
    NotifyReady(0, {FinalLnBiasIndex(layers), FinalLnWeightIndex(layers)});
    for (int64_t l = layers - 1; l >= 0; --l) {
      LayerActivations<T>& a = layers_[l];
      const float* x = l > 0 ? layers_[l - 1].residual3 : encoded_;
      // d_residual_ is d(residual3): through the MLP into d(residual2).
      LinearBackward(lt_, stream_, d_wide_, Grad(l, kMlpProjWeight), Grad(l, kMlpProjBias),
                     ResidualGradForProducts(), a.fc_gelu, Low(l, kMlpProjWeight), n, 4 * d,
                     d);
      GeluBackward<<<Blocks(n * 4 * d), kThreads, 0, stream_>>>(d_wide_, a.fc, n * 4 * d);
      LinearBackward<T>(lt_, stream_, d_rows_, Grad(l, kFcWeight), Grad(l, kFcBias),
                        d_wide_, a.ln2, Low(l, kFcWeight), n, d, 4 * d);
      LayerNormBackwardInput<<<row_blocks, kThreads, 0, stream_>>>(
          d_residual_, d_rows_, a.residual2, Param(l, kLn2Weight), a.ln2_mean, a.ln2_rstd,
          n, static_cast<int>(d));
      LayerNormWeights(Grad(l, kLn2Weight), Grad(l, kLn2Bias), d_rows_, a.residual2,
                       a.ln2_mean, a.ln2_rstd);
      // d(residual2) through the attention into d(x).
      LinearBackward(lt_, stream_, d_rows_, Grad(l, kAttnProjWeight),
                     Grad(l, kAttnProjBias), ResidualGradForProducts(), a.attn_y,
                     Low(l, kAttnProjWeight), n, d, d);
      AttentionBackward(lt_, stream_, d_qkv_, d_rows_, a.q, a.k, a.v, a.att, scores_,
                        d_heads_, d_q_, d_k_, d_v_, b, t, h, hs);
      LinearBackward<T>(lt_, stream_, d_rows_, Grad(l, kQkvWeight), Grad(l, kQkvBias),
                        d_qkv_, a.ln1, Low(l, kQkvWeight), n, d, 3 * d);
      LayerNormBackwardInput<<<row_blocks, kThreads, 0, stream_>>>(
          d_residual_, d_rows_, x, Param(l, kLn1Weight), a.ln1_mean, a.ln1_rstd, n,
          static_cast<int>(d));
      LayerNormWeights(Grad(l, kLn1Weight), Grad(l, kLn1Bias), d_rows_, x, a.ln1_mean,
                       a.ln1_rstd);
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
  T* params_low_ = nullptr;  // params_ itself in the fp32 step
  std::vector<LayerActivations<T>> layers_;
  float *encoded_ = nullptr, *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr;
  T *proj_ = nullptr, *lnf_ = nullptr, *logits_ = nullptr, *scores_ = nullptr;
  float* losses_ = nullptr;
  float* d_residual_ = nullptr;
  T* d_residual_low_ = nullptr;  // d_residual_ itself in the fp32 step
  T *d_rows_ = nullptr, *d_wide_ = nullptr, *d_qkv_ = nullptr;
  T *d_q_ = nullptr, *d_k_ = nullptr, *d_v_ = nullptr, *d_heads_ = nullptr;
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
    lt_.partial_floats = 2 * kColumnChunks * (int64_t{1} << 16);  // up to 65536 columns
    lt_.partials = Zeros(lt_.partial_floats);
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
  // n zeros of the activation type T.
  template <typename T>
  T* Acts(int64_t n) {
    if constexpr (std::is_same<T, float>::value) {
      return Zeros(n);
    } else {
      void* p = nullptr;
      MTB_CUDA_CHECK(cudaMalloc(&p, std::max<int64_t>(n, 1) * sizeof(T)));
      MTB_CUDA_CHECK(cudaMemset(p, 0, std::max<int64_t>(n, 1) * sizeof(T)));
      held_.push_back(p);
      return static_cast<T*>(p);
    }
  }
  // An input as T: rounded to bf16 (to nearest even) for the bf16 kernels.
  template <typename T>
  T* In(const RefTensor& tensor) {
    float* wide = Floats(tensor);
    if constexpr (std::is_same<T, float>::value) {
      return wide;
    } else {
      T* low = Acts<T>(tensor.numel());
      Convert<<<Blocks(tensor.numel()), kThreads, 0, stream_>>>(low, wide, tensor.numel());
      return low;
    }
  }
  template <typename T>
  std::vector<double> Out(const T* device, int64_t n) {
    if constexpr (std::is_same<T, float>::value) {
      return Back(device, n);
    } else {
      float* wide = Zeros(n);
      Convert<<<Blocks(n), kThreads, 0, stream_>>>(wide, device, n);
      return Back(wide, n);
    }
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

// T: the activations' type, as the step of that precision keeps them (the
// embedding and the optimizer are fp32 in both steps; LayerNorm reads the
// fp32 residual stream and its fp32 weights; a product's weight gradient is
// accumulated in fp32).
template <typename T>
std::string RunReferenceKernelAs(const KernelRef& kernel, bool planted_off_by_one,
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
    T* y = s.Acts<T>(n * c);
    float *mean = s.Zeros(n), *rstd = s.Zeros(n);
    LayerNormForward<<<Blocks(n, kWarpsPerBlock), kThreads, 0, st>>>(
        y, mean, rstd, s.Floats(in("x")), s.Floats(in("weight")), s.Floats(in("bias")), n,
        static_cast<int>(c));
    (*outputs)["y"] = s.Out(y, n * c);
    (*outputs)["mean"] = s.Back(mean, n);
    (*outputs)["rstd"] = s.Back(rstd, n);
  } else if (k == "layernorm_backward") {
    const int64_t n = dim("x", 0), c = dim("x", 1);
    float *dx = s.Zeros(n * c), *dw = s.Zeros(c), *db = s.Zeros(c);
    const T* dout = s.In<T>(in("dout"));
    const float *x = s.Floats(in("x")), *w = s.Floats(in("weight")),
                *mean = s.Floats(in("mean")), *rstd = s.Floats(in("rstd"));
    LayerNormBackwardInput<<<Blocks(n, kWarpsPerBlock), kThreads, 0, st>>>(
        dx, dout, x, w, mean, rstd, n, static_cast<int>(c));
    ColumnSums<T, true>(st, s.lt().partials, s.lt().partial_floats, db, dw, dout, x, mean,
                        rstd, n, static_cast<int>(c));
    (*outputs)["dx"] = s.Back(dx, n * c);
    (*outputs)["dweight"] = s.Back(dw, c);
    (*outputs)["dbias"] = s.Back(db, c);
  } else if (k == "linear_forward") {
    const int64_t rows = dim("x", 0), in_f = dim("x", 1), out_f = dim("weight", 0);
    T* y = s.Acts<T>(rows * out_f);
    LinearForward<T>(s.lt(), st, y, s.In<T>(in("x")), s.In<T>(in("weight")),
                     s.In<T>(in("bias")), rows, in_f, out_f);
    (*outputs)["y"] = s.Out(y, rows * out_f);
  } else if (k == "linear_backward") {
    const int64_t rows = dim("x", 0), in_f = dim("x", 1), out_f = dim("weight", 0);
    T* dx = s.Acts<T>(rows * in_f);
    float *dw = s.Zeros(out_f * in_f), *db = s.Zeros(out_f);
    LinearBackward<T>(s.lt(), st, dx, dw, db, s.In<T>(in("dy")), s.In<T>(in("x")),
                      s.In<T>(in("weight")), rows, in_f, out_f);
    (*outputs)["dx"] = s.Out(dx, rows * in_f);
    (*outputs)["dweight"] = s.Back(dw, out_f * in_f);
    (*outputs)["dbias"] = s.Back(db, out_f);
  } else if (k == "gelu_forward") {
    const int64_t n = in("x").numel();
    T* y = s.Acts<T>(n);
    GeluForward<<<Blocks(n), kThreads, 0, st>>>(y, s.In<T>(in("x")), n);
    (*outputs)["y"] = s.Out(y, n);
  } else if (k == "gelu_backward") {
    const int64_t n = in("x").numel();
    T* d = s.In<T>(in("dy"));
    GeluBackward<<<Blocks(n), kThreads, 0, st>>>(d, s.In<T>(in("x")), n);
    (*outputs)["dx"] = s.Out(d, n);
  } else if (k == "causal_softmax_forward") {
    const int64_t t = dim("scores", 3), rows = in("scores").numel() / std::max<int64_t>(t, 1);
    T* att = s.Acts<T>(rows * t);
    CausalSoftmaxForward<<<Blocks(rows, kWarpsPerBlock), kThreads, 0, st>>>(
        att, s.In<T>(in("scores")), rows, static_cast<int>(t), planted);
    (*outputs)["att"] = s.Out(att, rows * t);
  } else if (k == "causal_softmax_backward") {
    const int64_t t = dim("att", 3), rows = in("att").numel() / std::max<int64_t>(t, 1);
    T* d = s.In<T>(in("datt"));
    CausalSoftmaxBackward<<<Blocks(rows, kWarpsPerBlock), kThreads, 0, st>>>(
        d, s.In<T>(in("att")), rows, static_cast<int>(t));
    (*outputs)["dscores"] = s.Out(d, rows * t);
  } else if (k == "attention_forward" || k == "attention_backward") {
    const int64_t b = dim("qkv", 0), t = dim("qkv", 1), d = dim("qkv", 2) / 3;
    const int64_t h = static_cast<int64_t>(in("n_heads").values.at(0));
    if (h <= 0 || d % h != 0) return "n_heads does not divide the width";
    const int64_t hs = d / h, n = b * t;
    const T* qkv = s.In<T>(in("qkv"));
    T *q = s.Acts<T>(n * d), *kk = s.Acts<T>(n * d), *v = s.Acts<T>(n * d);
    T* scores = s.Acts<T>(b * h * t * t);
    if (k == "attention_forward") {
      T *att = s.Acts<T>(b * h * t * t), *heads = s.Acts<T>(n * d), *y = s.Acts<T>(n * d);
      AttentionForward<T>(s.lt(), st, y, qkv, q, kk, v, scores, att, heads, b, t, h, hs,
                          planted);
      (*outputs)["y"] = s.Out(y, n * d);
      (*outputs)["att"] = s.Out(att, b * h * t * t);
    } else {
      SplitHeads<<<Blocks(n * d), kThreads, 0, st>>>(q, kk, v, qkv, b, t, h, hs);
      T *dqkv = s.Acts<T>(n * 3 * d), *d_heads = s.Acts<T>(n * d), *dq = s.Acts<T>(n * d),
        *dk = s.Acts<T>(n * d), *dv = s.Acts<T>(n * d);
      AttentionBackward<T>(s.lt(), st, dqkv, s.In<T>(in("dy")), q, kk, v, s.In<T>(in("att")),
                           scores, d_heads, dq, dk, dv, b, t, h, hs);
      const std::vector<double> all = s.Out(dqkv, n * 3 * d);
      (*outputs)["dq"] = QkvPart(all, n, d, 0);
      (*outputs)["dk"] = QkvPart(all, n, d, 1);
      (*outputs)["dv"] = QkvPart(all, n, d, 2);
    }
  } else if (k == "classifier") {
    const int64_t n = dim("logits", 0), v = dim("logits", 1);
    T* logits = s.In<T>(in("logits"));
    float* losses = s.Zeros(n);
    FusedClassifier<<<static_cast<int>(n), kThreads, 0, st>>>(
        logits, losses, s.Ints(in("targets")), n, static_cast<int>(v));
    (*outputs)["losses"] = s.Back(losses, n);
    (*outputs)["dlogits"] = s.Out(logits, n * v);
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

}  // namespace

std::string RunReferenceKernel(const KernelRef& kernel, bool planted_off_by_one,
                               std::map<std::string, std::vector<double>>* outputs,
                               bool bf16_kernels) {
  return bf16_kernels ? RunReferenceKernelAs<bf16>(kernel, planted_off_by_one, outputs)
                      : RunReferenceKernelAs<float>(kernel, planted_off_by_one, outputs);
}

std::string MeasureGemmPeak(bool bf16_inputs, const std::vector<GemmTiming>& shapes,
                            int repeats, int calls, std::vector<GemmTiming>* timings) {
  if (repeats < 1 || calls < 1) return "repeats and calls must be >= 1";
  timings->clear();
  ScratchBuffers s;
  cudaEvent_t start, stop;
  MTB_CUDA_CHECK(cudaEventCreate(&start));
  MTB_CUDA_CHECK(cudaEventCreate(&stop));
  for (const GemmTiming& shape : shapes) {
    // Zeros: the timing does not depend on the values (no denormal paths in
    // the tensor cores), and zeros cannot overflow.
    void *a, *b, *c;
    if (bf16_inputs) {
      a = s.Acts<bf16>(shape.m * shape.k);
      b = s.Acts<bf16>(shape.k * shape.n);
      c = s.Acts<bf16>(shape.m * shape.n);
    } else {
      a = s.Zeros(shape.m * shape.k);
      b = s.Zeros(shape.k * shape.n);
      c = s.Zeros(shape.m * shape.n);
    }
    const cudaDataType_t type = bf16_inputs ? CUDA_R_16BF : CUDA_R_32F;
    auto product = [&] {
      Matmul(s.lt(), s.stream(), c, a, b, nullptr, shape.m, shape.n, shape.k, false, false,
             1, 0, 1, 0, 0, 0, type, type);
    };
    product();  // warm-up: the heuristic, the first launch
    float best_ms = 0;
    for (int r = 0; r < repeats; ++r) {
      MTB_CUDA_CHECK(cudaEventRecord(start, s.stream()));
      for (int i = 0; i < calls; ++i) product();
      MTB_CUDA_CHECK(cudaEventRecord(stop, s.stream()));
      MTB_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      MTB_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (r == 0 || ms < best_ms) best_ms = ms;
    }
    GemmTiming timing = shape;
    timing.flops_per_second = 2.0 * shape.m * shape.n * shape.k * calls / (best_ms / 1e3);
    timings->push_back(timing);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return "";
}

int64_t DeviceFreeBytes() {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return -1;
  return static_cast<int64_t>(free_bytes);
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
  if (dims.bf16) {
    auto model = std::make_unique<GptCudaImpl<bf16>>(dims, tensors, adamw);
    *error = model->Allocate(initial_parameters, total);
    if (!error->empty()) return nullptr;
    return model;
  }
  auto model = std::make_unique<GptCudaImpl<float>>(dims, tensors, adamw);
  *error = model->Allocate(initial_parameters, total);
  if (!error->empty()) return nullptr;
  return model;
}

}  // namespace cuda
}  // namespace mtb
