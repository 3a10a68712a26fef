// Tiny, fast configurations for trainer tests (testonly).
#ifndef MTB_TRAINER_TEST_CONFIG_H_
#define MTB_TRAINER_TEST_CONFIG_H_

#include "trainer/train_result.pb.h"

namespace mtb {

// A resolved, valid config: vocab 64, d_model 32, 2 layers x 4 heads, seq 16,
// batch 4, synthetic data, fp32, no dropout, AdamW with PyTorch's defaults,
// constant schedule without warm-up, no clipping, 3 steps, seed 7, one thread,
// strategy single, a nominal --peak_flops (no measurement).
TrainConfig TinyConfig();

}  // namespace mtb

#endif  // MTB_TRAINER_TEST_CONFIG_H_
