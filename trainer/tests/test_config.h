// Tiny, fast configurations for trainer tests, and the base of the golden
// run's config (trainer/tests/golden.h), so that the tests and the golden losses
// share one definition of "the tiny model". Not testonly for that reason:
// //trainer:golden_losses is a plain binary.
#ifndef MTB_TRAINER_TESTS_TEST_CONFIG_H_
#define MTB_TRAINER_TESTS_TEST_CONFIG_H_

#include "trainer/train_result.pb.h"

namespace mtb {

// A resolved, valid config: vocab 64, d_model 32, 2 layers x 4 heads, seq 16,
// batch 4, synthetic data, fp32, no dropout, AdamW with PyTorch's defaults,
// constant schedule without warm-up, no clipping, 3 steps, seed 7, one thread,
// strategy single, a nominal --peak_flops (no measurement).
TrainConfig TinyConfig();

}  // namespace mtb

#endif  // MTB_TRAINER_TESTS_TEST_CONFIG_H_
