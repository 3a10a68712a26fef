// Golden losses: the first steps' losses of a seeded tiny model, pinned in
// testdata/golden_losses_tiny.txt so that any change to initialisation, data,
// dropout keys, the model or the optimizer shows up. Regenerate (after a
// deliberate change) with
//   bazel run //trainer:golden_losses > testdata/golden_losses_tiny.txt
#ifndef MTB_TRAINER_TESTS_GOLDEN_H_
#define MTB_TRAINER_TESTS_GOLDEN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trainer/train_result.pb.h"

namespace mtb {

// TinyConfig() (trainer/tests/test_config.h) with: vocab 64, d_model 32, 2 layers
// x 4 heads, seq 16, batch 4, grad_accum 2,
// synthetic data, dropout 0.1, AdamW lr 3e-3 cosine (warm-up 2, to 3e-4 at
// step 5), clip 1.0, seed 2024, 5 steps, fp32, one intra-op thread.
TrainConfig GoldenConfig();

// The per-step losses of `config` on one rank (SingleStrategy). Sets LibTorch's
// intra-op threads to config.intra_op_threads().
absl::StatusOr<std::vector<double>> TrainLosses(const TrainConfig& config);

// The golden file: '#' comment lines (what and how to regenerate), then one
// "<step> <loss>" line per step with 17 significant digits. `gemm` names the
// GEMM backend the losses were computed with ("blas": golden_losses_tiny.txt,
// "onednn": golden_losses_tiny_onednn.txt).
std::string FormatGoldenLosses(const std::vector<double>& losses,
                               const std::string& gemm = "blas");
absl::StatusOr<std::vector<double>> ParseGoldenLosses(absl::string_view text);

}  // namespace mtb

#endif  // MTB_TRAINER_TESTS_GOLDEN_H_
