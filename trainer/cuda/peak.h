// trainer_cuda without --peak_flops (the trainer's "0: measure a matmul at
// start in the run's precision"): the cuBLASLt GEMM peak measured on the GPU
// before the run (gpt_cuda.h's MeasureGemmPeak, bf16 for --precision=bf16)
// becomes the result's peak_flops (what was measured, in `source` and
// `gemms`) and every MFU is recomputed against it; and the device
// allocations after step 1, watched through the allocator's free bytes. Plain C++: tested on the CPU with
// stand-in timings and a stand-in device model.
#ifndef MTB_TRAINER_CUDA_PEAK_H_
#define MTB_TRAINER_CUDA_PEAK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer/cuda/gpt_cuda.h"
#include "trainer/train_result.pb.h"

namespace mtb {
namespace cuda {

// The shapes timed: large square-ish products (8192^3, 4096^3, 8192 x 8192 x
// 4096), where cuBLASLt is at its best: a peak, not the model's shapes.
std::vector<GemmTiming> PeakShapes();

// Sets result->peak_flops from the fastest timing (rank: that; job: times
// world_size), its source ("measured: fastest of cuBLASLt bf16 GEMMs (fp32
// accumulation; best of R x C calls per shape): MxNxK X TFLOP/s, ..."), one gemms
// record per shape, and recomputes every step's mfu (tokens_per_second x
// flops_per_token / the job's peak) and the summary's. timings must not be
// empty or hold a non-positive rate (returns false and changes nothing).
bool ApplyMeasuredPeak(const std::vector<GemmTiming>& timings, bool bf16, int repeats,
                       int calls, int world_size, TrainResult* result);

// What AllocationWatch saw: the free bytes after step 1's Update and the
// lowest after any later Update.
struct AllocationStats {
  int64_t updates = 0;
  int64_t free_after_first = -1;
  int64_t lowest_later = -1;
  // free after step 1 - lowest later: 0 when no step after the first
  // allocates, whoever would allocate (our code, cuBLASLt, the driver); -1
  // before step 2's Update.
  int64_t BytesAllocatedAfterStep1() const;
};

// A device model that watches the allocator around the steps into *stats
// (which outlives it).
class AllocationWatch : public GptCuda {
 public:
  AllocationWatch(std::unique_ptr<GptCuda> model, std::function<int64_t()> free_bytes,
                  AllocationStats* stats)
      : model_(std::move(model)), free_bytes_(std::move(free_bytes)), stats_(stats) {}
  StepStats ForwardBackward(const int32_t* inputs, const int32_t* targets) override {
    return model_->ForwardBackward(inputs, targets);
  }
  float* gradients() override { return model_->gradients(); }
  void Update(int64_t step, double lr, double max_grad_norm, StepStats* stats) override;
  void CopyParametersToHost(float* host) override { model_->CopyParametersToHost(host); }
  void CopyStateToHost(float* p, float* m, float* v) override {
    model_->CopyStateToHost(p, m, v);
  }
  void LoadState(const float* p, const float* m, const float* v) override {
    model_->LoadState(p, m, v);
  }
  int64_t DeviceBytes() const override { return model_->DeviceBytes(); }
  void SetGradientReadyHook(GradientReadyHook* hook) override {
    model_->SetGradientReadyHook(hook);
  }
  // zero1's update goes through the model's sharded side, not Update: the
  // watch sees only Update's steps (single and ddp), and says -1 otherwise.
  ShardedDevice* sharded() override { return model_->sharded(); }

 private:
  std::unique_ptr<GptCuda> model_;
  std::function<int64_t()> free_bytes_;
  AllocationStats* stats_;
};

// The line trainer_cuda prints after a run: "device memory allocated after
// step 1: N bytes (free after step 1: F bytes, U updates)", N -1 when fewer
// than two steps ran.
std::string AllocationLine(const AllocationStats& stats);

}  // namespace cuda
}  // namespace mtb

#endif  // MTB_TRAINER_CUDA_PEAK_H_
