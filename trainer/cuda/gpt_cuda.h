// The GPT's training step on one NVIDIA GPU in plain CUDA C++ (no LibTorch),
// as llm.c's train_gpt2.cu: one contiguous fp32 parameter buffer laid out as
// trainer/cuda/layout.h says, one gradient buffer and two AdamW moment buffers
// with the same offsets, every activation allocated once when the model is
// created (no allocation inside a step), cuBLASLt for every matrix product and
// kernels for the rest (gpt_cuda.cu lists them).
//
// This header is plain C++ (std:: types only): the .cu behind it is compiled by
// nvcc, the callers by the host compiler.
//
// Two precisions (GptDims::bf16): fp32, every product in CUBLAS_COMPUTE_32F
// (no TF32); and bf16 (docs/gpu.md "The bf16 step"): bf16 activations and a
// bf16 copy of the weights for the products (fp32 accumulation), fp32 master
// weights, fp32 gradients and an fp32 AdamW, the residual stream fp32.
// Not thread-safe; one GptCuda per process and device.
#ifndef MTB_TRAINER_CUDA_GPT_CUDA_H_
#define MTB_TRAINER_CUDA_GPT_CUDA_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trainer/cuda/kernel_refs.h"

namespace mtb {
namespace cuda {

struct GptDims {
  int64_t vocab_size = 0;  // V
  int64_t d_model = 0;     // D
  int64_t n_layers = 0;    // L
  int64_t n_heads = 0;     // H
  int64_t seq_len = 0;     // T: every sample is seq_len tokens
  int64_t batch_size = 0;  // B: samples per step
  bool bf16 = false;       // the bf16 step (--precision=bf16), else fp32
};

// One logical tensor of the buffer (layout.h's TensorSlot without the name).
struct DeviceTensor {
  int64_t offset = 0;
  int64_t numel = 0;
  bool weight_decay = false;
};

struct AdamWSettings {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

struct DeviceInfo {
  std::string name;            // "NVIDIA H200"
  std::string driver_version;  // "13.0" (cudaDriverGetVersion)
  std::string runtime_version;
  int64_t total_memory_bytes = 0;
};

// Whether device 0 can run the trainer: "" when it can (and *info filled),
// otherwise one line saying why, e.g. "cudaGetDeviceCount: CUDA driver version
// is insufficient for CUDA runtime version" or "no CUDA device is visible".
std::string ProbeDevice(DeviceInfo* info);

struct StepStats {
  double loss = 0;       // mean cross-entropy over the B x T targets
  double grad_norm = 0;  // global L2 norm before clipping
  bool clipped = false;
  double forward_ms = 0;   // CUDA events: forward incl. the fused classifier
  double backward_ms = 0;
  double optimizer_ms = 0;  // norm, clip and AdamW
};

// Told during ForwardBackward each time the gradients of some tensors are
// final, so that their buckets' collectives can start while backward goes on
// (trainer/cuda/bucket_sync.h): `tensors` are layout positions, in the order
// backward finished them; `ready` is a device event recorded on the model's
// stream after the kernels that wrote them (a cudaEvent_t on a GPU; null
// where the gradients are complete when Ready is called, a host stand-in).
class GradientReadyHook {
 public:
  virtual ~GradientReadyHook() = default;
  virtual void Ready(const std::vector<int>& tensors, void* ready) = 0;
};

// ZeRO-1's update (trainer/cuda/bucket_sync.h): AdamW on pieces of the flat
// buffers, each piece's gradient read from a separate shard buffer.
struct UpdatePiece {
  int64_t offset = 0;        // flat element of the parameters and moments
  int64_t shard_offset = 0;  // element of the shard gradient buffer
  int64_t numel = 0;
  bool weight_decay = false;  // the piece's tensor's flag
  bool operator==(const UpdatePiece& o) const {
    return offset == o.offset && shard_offset == o.shard_offset && numel == o.numel &&
           weight_decay == o.weight_decay;
  }
};

// The device half of a ZeRO-1 step. Every call synchronises what it needs
// (the collectives' stream before, the model's after), so the buffers may be
// handed straight to the collectives.
class ShardedDevice {
 public:
  virtual ~ShardedDevice() = default;
  // The flat parameter buffer (total floats; device memory on a GPU).
  virtual float* parameters() = 0;
  // A buffer of `numel` floats for this rank's shard of the gradient, made
  // once before the first step (nothing is allocated inside a step); null
  // and *error on failure.
  virtual float* AllocateShardGradients(int64_t numel, std::string* error) = 0;
  // The sum of squares of data[0, numel) (fixed order, summed in double).
  virtual double SquaredNorm(const float* data, int64_t numel) = 0;
  // AdamW (1-based `step`, `lr`) on every piece, each gradient element
  // multiplied by grad_scale first (the clip coefficient); the moments are
  // this model's, at the pieces' offsets. Returns the milliseconds it took.
  virtual double UpdatePieces(const std::vector<UpdatePiece>& pieces,
                              const float* shard_gradients, int64_t step, double lr,
                              double grad_scale) = 0;
};

class GptCuda {
 public:
  virtual ~GptCuda() = default;
  // One optimizer step in two phases, so that a run on several GPUs can
  // synchronise the gradient between them (trainer/strategy/sync_plan.h):
  //
  //   ForwardBackward  forward and backward on this rank's rows: the flat
  //                    gradient (layout.h's offsets) in gradients(); the
  //                    stats' loss (the mean cross-entropy over these B x T
  //                    targets), forward_ms and backward_ms. inputs, targets:
  //                    (B, T) token ids on the host. Returns once the
  //                    gradient is complete.
  //   Update           the gradient norm of gradients() as they are now,
  //                    clipping to max_grad_norm (0: off; coefficient
  //                    max_norm / (norm + 1e-6) as torch.nn.utils.clip_grad_norm_),
  //                    AdamW at `lr` (1-based `step`, for the bias
  //                    correction); fills grad_norm, clipped, optimizer_ms.
  virtual StepStats ForwardBackward(const int32_t* inputs, const int32_t* targets) = 0;
  // The gradient buffer: total floats, device memory on a GPU.
  virtual float* gradients() = 0;
  virtual void Update(int64_t step, double lr, double max_grad_norm, StepStats* stats) = 0;
  // Both phases on one rank.
  StepStats Step(const int32_t* inputs, const int32_t* targets, int64_t step, double lr,
                 double max_grad_norm) {
    StepStats stats = ForwardBackward(inputs, targets);
    Update(step, lr, max_grad_norm, &stats);
    return stats;
  }
  // The parameter buffer (total floats) back to the host.
  virtual void CopyParametersToHost(float* host) = 0;
  // The whole training state (total floats each) to and from the host: the
  // parameters and AdamW's first and second moments, a checkpoint's model/,
  // optimizer/exp_avg/ and optimizer/exp_avg_sq/ tensors (layout.h's
  // offsets). AdamW's update count is the caller's (Step's `step`).
  virtual void CopyStateToHost(float* parameters, float* exp_avg,
                               float* exp_avg_sq) = 0;
  virtual void LoadState(const float* parameters, const float* exp_avg,
                         const float* exp_avg_sq) = 0;
  // Every byte this model took from the CUDA allocator (all of it at
  // creation: nothing is allocated inside a step).
  virtual int64_t DeviceBytes() const = 0;
  // Several GPUs. The hook backward calls as gradients become final (null:
  // none, the default; a model without per-layer points never calls it).
  virtual void SetGradientReadyHook(GradientReadyHook* hook) { (void)hook; }
  // ZeRO-1's device half, or null when this model has none.
  virtual ShardedDevice* sharded() { return nullptr; }
};

// Makes device `device` current for the calling thread (a multi-GPU run's
// rank thread, before it creates its model); "" or why not.
std::string UseDevice(int device);

// Allocates every buffer and copies `initial_parameters` (total floats) to the
// device. On failure returns null and sets *error (one line, e.g. an
// out-of-memory naming the bytes asked for).
std::unique_ptr<GptCuda> CreateGptCuda(
    const GptDims& dims, const std::vector<DeviceTensor>& tensors,
    const float* initial_parameters, int64_t total,
    const AdamWSettings& adamw, std::string* error);

// Runs one kernel of the per-kernel reference folder (kernel_refs.h) on
// device 0 through the same kernels, products and helpers the step uses, and
// fills (*outputs) with every output the kernel names. planted_off_by_one
// makes the causal softmax let each query see one future key (kernel_check's
// negative case). bf16_kernels: the bf16 step's kernels (inputs the step
// keeps in bf16 rounded to bf16 first, bf16 outputs widened back); otherwise
// the fp32 step's. "" or why the kernel could not run (an unknown kernel, a
// missing input).
std::string RunReferenceKernel(const KernelRef& kernel, bool planted_off_by_one,
                               std::map<std::string, std::vector<double>>* outputs,
                               bool bf16_kernels = false);

// The GEMM peak of device 0 in a step's precision: cuBLASLt products with
// fp32 accumulation, bf16 inputs and output (bf16) or fp32 ones (no TF32).
// Each shape is timed `repeats` times (after one warm-up call) over `calls`
// back-to-back products; the best time per shape counts.
struct GemmTiming {
  int64_t m = 0, n = 0, k = 0;
  double flops_per_second = 0;  // 2 m n k calls / best time
};
// "" or why not; *timings one per shape, in order.
std::string MeasureGemmPeak(bool bf16, const std::vector<GemmTiming>& shapes, int repeats,
                            int calls, std::vector<GemmTiming>* timings);

// The CUDA allocator's view of device 0: free bytes now (cudaMemGetInfo).
// -1 when it cannot be read.
int64_t DeviceFreeBytes();

}  // namespace cuda
}  // namespace mtb

#endif  // MTB_TRAINER_CUDA_GPT_CUDA_H_
