// The GPT's dimensions, without LibTorch: the LibTorch model (trainer/model/model.h)
// and the CUDA trainer's parameter layout (trainer/cuda/layout.h) both take it.
#ifndef MTB_TRAINER_MODEL_MODEL_SHAPE_H_
#define MTB_TRAINER_MODEL_MODEL_SHAPE_H_

#include <cstdint>

#include "trainer/train_result.pb.h"

namespace mtb {

struct ModelShape {
  int64_t vocab_size = 256;
  int64_t d_model = 64;
  int64_t n_layers = 2;
  int64_t n_heads = 4;
  int64_t seq_len = 32;
};

ModelShape ModelShapeOf(const TrainConfig& config);

// Parameters of the GPT (trainer/model/model.h): V D + T D + L (12 D^2 + 13 D) + 2 D.
int64_t ParameterCountOf(const ModelShape& shape);
// N in the FLOPs formula: every parameter but the position embedding (the
// token embedding is also the LM head's matmul).
int64_t FlopsParameterCountOf(const ModelShape& shape);
// Training FLOPs per token: 6 N + 12 L T D (forward 2N + 4LTD: QK^T and AV
// over the full T x T score matrix, as PaLM's appendix B; backward twice the
// forward).
double FlopsPerTokenOf(const ModelShape& shape);

}  // namespace mtb

#endif  // MTB_TRAINER_MODEL_MODEL_SHAPE_H_
