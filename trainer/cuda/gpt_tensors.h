// Where each of the GPT's parameters sits in the GPT-2 order the LibTorch
// model builds them (trainer/model/model.h): wte, wpe, then per block the twelve
// tensors below, then ln_f.weight, ln_f.bias. Plain C++ (no std:: types), so
// the CUDA sources include it too.
#ifndef MTB_TRAINER_CUDA_GPT_TENSORS_H_
#define MTB_TRAINER_CUDA_GPT_TENSORS_H_

#include <cstdint>

namespace mtb {
namespace cuda {

// A block's tensors in order; weights are (out, in) row-major as
// torch.nn.Linear stores them.
enum BlockTensor : int {
  kLn1Weight = 0,     // (D)
  kLn1Bias = 1,       // (D)
  kQkvWeight = 2,     // (3D, D)
  kQkvBias = 3,       // (3D)
  kAttnProjWeight = 4,  // (D, D)
  kAttnProjBias = 5,  // (D)
  kLn2Weight = 6,     // (D)
  kLn2Bias = 7,       // (D)
  kFcWeight = 8,      // (4D, D)
  kFcBias = 9,        // (4D)
  kMlpProjWeight = 10,  // (D, 4D)
  kMlpProjBias = 11,  // (D)
  kTensorsPerBlock = 12,
};

inline constexpr int kTokenEmbeddingIndex = 0;     // wte (V, D), also the head
inline constexpr int kPositionEmbeddingIndex = 1;  // wpe (seq_len, D)
inline constexpr int BlockTensorIndex(int64_t layer, int tensor) {
  return 2 + static_cast<int>(layer) * kTensorsPerBlock + tensor;
}
inline constexpr int FinalLnWeightIndex(int64_t n_layers) {
  return 2 + static_cast<int>(n_layers) * kTensorsPerBlock;
}
inline constexpr int FinalLnBiasIndex(int64_t n_layers) {
  return FinalLnWeightIndex(n_layers) + 1;
}
inline constexpr int TensorCount(int64_t n_layers) {
  return FinalLnBiasIndex(n_layers) + 1;
}

}  // namespace cuda
}  // namespace mtb

#endif  // MTB_TRAINER_CUDA_GPT_TENSORS_H_
