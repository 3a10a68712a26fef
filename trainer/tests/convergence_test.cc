// Training that must actually learn, on the shipped corpus: bf16 tracks fp32,
// and a shortened version of the default job cuts the loss by 30%.
#include <cmath>
#include <iostream>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/config/config.h"
#include "trainer/config/flags.h"
#include "trainer/tests/golden.h"

namespace mtb {
namespace {

// The default job's configuration (the flag defaults: shipped corpus, AdamW,
// cosine with warm-up, clipping) with a smaller model and fewer steps, so the
// test takes seconds: d_model 64, 2 layers, context 64, batch 8, 60 steps.
TrainConfig ShortenedDefaultJob() {
  TrainConfig config = *TrainConfigFromFlags();
  config.set_d_model(64);
  config.set_n_layers(2);
  config.set_seq_len(64);
  config.set_batch_size(8);
  config.set_steps(60);
  config.set_intra_op_threads(1);
  ResolveConfig(&config, 1);
  return config;
}

TEST(Convergence, ShortenedDefaultJobCutsTheCorpusLossByThirtyPercent) {
  const TrainConfig config = ShortenedDefaultJob();
  ASSERT_TRUE(ValidateConfig(config).ok()) << ValidateConfig(config);
  ASSERT_EQ(config.data(), "testdata/gnu_licenses.bin");
  absl::StatusOr<std::vector<double>> losses = TrainLosses(config);
  ASSERT_TRUE(losses.ok()) << losses.status();
  std::cout << "shortened default job: loss " << losses->front() << " -> "
            << losses->back() << "\n";
  EXPECT_NEAR(losses->front(), std::log(256.0), 0.1);
  EXPECT_LE(losses->back(), 0.7 * losses->front())
      << "first " << losses->front() << ", last " << losses->back();
}

TEST(Convergence, Bf16LossIsWithinTwoPercentOfFp32After20Steps) {
  TrainConfig fp32 = ShortenedDefaultJob();
  fp32.set_steps(20);
  fp32.set_lr(3e-3);
  fp32.set_lr_decay_steps(20);
  fp32.set_min_lr(3e-4);
  TrainConfig bf16 = fp32;
  bf16.set_precision(TrainConfig::bf16);
  absl::StatusOr<std::vector<double>> a = TrainLosses(fp32);
  absl::StatusOr<std::vector<double>> b = TrainLosses(bf16);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  std::cout << "after 20 steps: fp32 " << a->back() << ", bf16 " << b->back()
            << "\n";
  for (double loss : *b) ASSERT_TRUE(std::isfinite(loss));
  EXPECT_LT(b->back(), 0.8 * b->front()) << "bf16 did not learn";
  EXPECT_NEAR(b->back(), a->back(), 0.02 * a->back())
      << "fp32 " << a->back() << ", bf16 " << b->back();
}

}  // namespace
}  // namespace mtb
