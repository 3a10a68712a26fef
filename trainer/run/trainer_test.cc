#include "trainer/run/components.h"
#include "trainer/run/trainer.h"

#include <memory>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "common/base/flags.h"
#include "common/libtorch/allclose.h"
#include "gtest/gtest.h"
#include "trainer/data/data.h"
#include "trainer/run/strategy.h"
#include "trainer/tests/test_config.h"

namespace mtb {
namespace {

struct Trained {
  std::vector<StepRecord> steps;
  // Per step: every parameter's gradient, then (after the last step) every
  // parameter.
  std::vector<std::vector<at::Tensor>> grads;
  std::vector<at::Tensor> params;
};

Trained Train(const TrainConfig& config) {
  const auto data = TensorData(MakeSyntheticSamples(config.seed(), config.vocab_size(),
                                      config.seq_len()));
  SingleStrategy strategy;
  auto trainer = Trainer::Create(config, RankInfo{}, &strategy, data.get());
  CHECK(trainer.ok()) << trainer.status();
  Trained run;
  for (int step = 0; step < config.steps(); ++step) {
    absl::StatusOr<StepRecord> record = (*trainer)->Step();
    CHECK(record.ok()) << record.status();
    run.steps.push_back(*record);
    std::vector<at::Tensor> grads;
    for (const NamedParameter& p : (*trainer)->model().parameters()) {
      grads.push_back(p.tensor.grad().clone());
    }
    run.grads.push_back(grads);
  }
  for (const NamedParameter& p : (*trainer)->model().parameters()) {
    run.params.push_back(p.tensor.detach().clone());
  }
  return run;
}

void ExpectAllClose(const std::vector<at::Tensor>& actual,
                    const std::vector<at::Tensor>& expected,
                    const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    const AllCloseResult result = AllClose(actual[i], expected[i]);
    EXPECT_TRUE(result.ok) << what << " " << i << ": " << result.message;
  }
}

TEST(Trainer, GradAccumulationKTimesBEqualsOneStepOfKTimesB) {
  TrainConfig accumulated = TinyConfig();
  accumulated.set_dropout(0.1);  // masks are keyed by global sample index
  accumulated.set_max_grad_norm(1.0);
  accumulated.set_steps(2);
  accumulated.set_batch_size(2);
  accumulated.set_grad_accum(3);
  TrainConfig whole = accumulated;
  whole.set_batch_size(6);
  whole.set_grad_accum(1);
  const Trained a = Train(accumulated);
  const Trained b = Train(whole);
  for (int step = 0; step < 2; ++step) {
    EXPECT_NEAR(a.steps[step].loss(), b.steps[step].loss(),
                1e-5 + 1.3e-6 * b.steps[step].loss());
    EXPECT_NEAR(a.steps[step].grad_norm(), b.steps[step].grad_norm(),
                1e-5 + 1.3e-6 * b.steps[step].grad_norm());
    ExpectAllClose(a.grads[step], b.grads[step], "gradient");
  }
  ExpectAllClose(a.params, b.params, "parameter");
}

TEST(Trainer, ActivationCheckpointingChangesNoLossGradientOrParameter) {
  TrainConfig plain = TinyConfig();
  plain.set_dropout(0.2);
  plain.set_grad_accum(2);
  TrainConfig checkpointed = plain;
  checkpointed.set_activation_checkpointing(true);
  const Trained a = Train(plain);
  const Trained b = Train(checkpointed);
  for (size_t step = 0; step < a.steps.size(); ++step) {
    EXPECT_EQ(a.steps[step].loss(), b.steps[step].loss()) << "step " << step;
    for (size_t i = 0; i < a.grads[step].size(); ++i) {
      EXPECT_TRUE(at::equal(a.grads[step][i], b.grads[step][i]))
          << "step " << step << " gradient " << i;
    }
  }
  for (size_t i = 0; i < a.params.size(); ++i) {
    EXPECT_TRUE(at::equal(a.params[i], b.params[i])) << "parameter " << i;
  }
}

TEST(Trainer, NonFiniteLossStopsBeforeTheUpdateNamingTheStep) {
  TrainConfig config = TinyConfig();
  const auto data = TensorData(MakeSyntheticSamples(7, 64, 16));
  SingleStrategy strategy;
  RunComponents faults;
  faults.Add(MakeFaultComponent(
      *ParseFaults("nan:rank=0,step=2", TrainerFaultGrammar()), 0));
  auto trainer = Trainer::Create(config, RankInfo{}, &strategy, data.get(),
                                 &faults);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->Step().ok());
  std::vector<at::Tensor> before;
  for (const NamedParameter& p : (*trainer)->model().parameters()) {
    before.push_back(p.tensor.detach().clone());
  }
  const absl::StatusOr<StepRecord> stopped = (*trainer)->Step();
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kAborted);
  // It would happen again: the launcher must not restart it.
  EXPECT_EQ(ExitCodeFor(stopped.status()), kExitDeterministicFailure);
  EXPECT_EQ(std::string(stopped.status().message()),
            "step 2 of 3: the loss is not finite on rank 0 (nan) and the "
            "gradient norm (nan) is not finite (injected by "
            "--fault=nan:rank=0,step=2); every rank stopped before the "
            "optimizer update");
  EXPECT_EQ((*trainer)->completed_steps(), 1);
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(at::equal((*trainer)->model().parameters()[i].tensor, before[i]))
        << (*trainer)->model().parameters()[i].name;
  }
}

TEST(Trainer, ClippingCapsTheNormAndIsRecorded) {
  TrainConfig config = TinyConfig();
  config.set_max_grad_norm(0.05);  // far below the first steps' norms
  const Trained run = Train(config);
  for (const StepRecord& step : run.steps) {
    ASSERT_GT(step.grad_norm(), 0.05);
    EXPECT_TRUE(step.clipped());
  }
  double sum_of_squares = 0;
  for (const at::Tensor& g : run.grads.back()) {
    sum_of_squares += g.pow(2).sum().item<double>();
  }
  EXPECT_NEAR(std::sqrt(sum_of_squares), 0.05, 1e-6);
}

TEST(Trainer, MicroBatchesTileTheGlobalBatchByRankThenMicroBatch) {
  // 2 ranks x 3 micro-batches of 4: micro-batch m of rank r starts at
  // (m * 2 + r) * 4.
  EXPECT_EQ(FirstSampleOf(0, RankInfo{0, 2}, 4), 0);
  EXPECT_EQ(FirstSampleOf(0, RankInfo{1, 2}, 4), 4);
  EXPECT_EQ(FirstSampleOf(1, RankInfo{0, 2}, 4), 8);
  EXPECT_EQ(FirstSampleOf(2, RankInfo{1, 2}, 4), 20);
  EXPECT_EQ(FirstSampleOf(2, RankInfo{0, 1}, 8), 16);
}

TEST(RunTraining, RepeatedRunsFromScratchGiveIdenticalLossesAndASummary) {
  TrainConfig config = TinyConfig();
  config.set_repeat(2);
  config.set_steps(4);
  config.set_timing_warmup_steps(1);
  config.set_dropout(0.1);
  const auto data = TensorData(MakeSyntheticSamples(7, 64, 16));
  SingleStrategy strategy;
  absl::StatusOr<TrainResult> result =
      RunTraining(config, RankInfo{}, strategy, *data);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->runs_size(), 2);
  for (int step = 0; step < 4; ++step) {
    EXPECT_EQ(result->runs(0).steps(step).loss(),
              result->runs(1).steps(step).loss());
  }
  EXPECT_FALSE(result->runs(0).steps(0).timed());
  EXPECT_TRUE(result->runs(0).steps(1).timed());
  EXPECT_EQ(result->summary().final_loss().count(), 2);
  EXPECT_DOUBLE_EQ(result->summary().final_loss().std(), 0.0);
  EXPECT_GT(result->summary().tokens_per_second().mean(), 0);
  EXPECT_EQ(result->model().tokens_per_step(), 4 * 16);
  EXPECT_EQ(result->config_fingerprint().size(), 64u);
  EXPECT_EQ(result->schema_version(), 1);
}

}  // namespace
}  // namespace mtb
