// One contiguous fp32 buffer for all of the GPT's parameters (and, with the
// same offsets, its gradients and AdamW moments), as llm.c lays them out: the
// logical tensors of trainer/model/model.h in their GPT-2 order (gpt_tensors.h),
// back to back, no padding. Torch-free and CUDA-free: the CUDA trainer
// initialises the buffer on the host with InitializeParameters and copies it to
// the device once.
#ifndef MTB_TRAINER_CUDA_LAYOUT_H_
#define MTB_TRAINER_CUDA_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/model/model_shape.h"

namespace mtb {
namespace cuda {

// How a tensor starts out (the LibTorch model's GPT-2 initialisation).
enum class InitKind { kNormal, kZeros, kOnes };

struct TensorSlot {
  std::string name;            // the LibTorch model's name, e.g. "h.0.ln_1.weight"
  std::vector<int64_t> shape;  // row-major; weights (out, in)
  int64_t offset = 0;          // in floats, from the buffer's start
  int64_t numel = 0;
  bool weight_decay = false;   // AdamW decays it (the matrices but wte/wpe)
  InitKind init = InitKind::kZeros;
  double stddev = 0;           // kNormal only
};

class ParameterLayout {
 public:
  // The layout of trainer/model/model.h's GptModel for `shape`.
  static ParameterLayout ForGpt(const ModelShape& shape);

  const ModelShape& shape() const { return shape_; }
  // In GPT-2 order; tensors()[i] is the model's parameter i.
  const std::vector<TensorSlot>& tensors() const { return tensors_; }
  // Floats in the whole buffer (the model's ParameterCount()).
  int64_t total() const { return total_; }
  // Offset of the tensor at `index` (gpt_tensors.h's indices).
  int64_t offset(int index) const { return tensors_.at(index).offset; }

 private:
  ModelShape shape_;
  std::vector<TensorSlot> tensors_;
  int64_t total_ = 0;
};

// Writes the initial parameters into `buffer` (layout.total() floats), bit for
// bit those of GptModel(layout.shape(), seed): element e of the normal tensor
// at index i is static_cast<float>(stddev * CounterNormal(key, e)) with
// key = CounterKey({seed, kInit, i}) (common/nn/init.h).
void InitializeParameters(const ParameterLayout& layout, uint64_t seed,
                          float* buffer);

}  // namespace cuda
}  // namespace mtb

#endif  // MTB_TRAINER_CUDA_LAYOUT_H_
