// The pipelined step against one rank, with ranks as threads: bit for bit at
// one micro-batch (pipeline_training.h says why), within the parameter tiers
// of trainer/tests/ddp_process_check.cc with several (a different fp32 summation
// order, as DDP's); and the classic bug, a tied embedding whose gradient is
// not summed between the first and last stages, fails that comparison.
#include "trainer/pipeline/pipeline_training.h"

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "absl/strings/str_cat.h"
#include "common/collective/test_util.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "common/base/flags.h"
#include "common/faults/fault_spec.h"
#include "trainer/checkpoint/checkpointer.h"
#include "trainer/checkpoint/plan.h"
#include "trainer/config/config_names.h"
#include "trainer/tests/ddp_process_check.h"
#include "trainer/model/init_from.h"
#include "trainer/pipeline/schedule.h"
#include "trainer/run/strategy.h"
#include "trainer/tests/test_config.h"
#include "trainer/run/trainer.h"

namespace mtb::pipeline {
namespace {

struct Trained {
  std::vector<StepRecord> steps;
  at::Tensor parameters;  // the flat store
  std::vector<DumpedParameter> manifest;
};

// 4 layers so that 4 stages have a block each, dropout and clipping on (the
// norm crosses --max_grad_norm in these steps), 4 steps.
TrainConfig PipelineTestConfig() {
  TrainConfig config = TinyConfig();
  config.set_n_layers(4);
  config.set_dropout(0.1);
  config.set_max_grad_norm(0.5);
  config.set_lr(3e-3);
  config.set_steps(4);
  return config;
}

Trained TrainOneRank(const TrainConfig& config) {
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
  }
  const ParameterStore& store = (*trainer)->model().store();
  run.parameters = store.flat_parameters().detach().clone();
  for (size_t i = 0; i < store.parameters().size(); ++i) {
    run.manifest.push_back({store.parameters()[i].name,
                            store.offset(static_cast<int>(i)),
                            store.parameters()[i].tensor.numel()});
  }
  return run;
}

Trained TrainPipelined(TrainConfig config, int stages, const std::string& schedule,
                       int micro_batches, bool skip_tied_sum = false,
                       int dp = 1, const std::string& strategy = "ddp",
                       const SyncTestFault& sync_fault = {}) {
  config.set_batch_size(config.batch_size() / dp);
  if (dp > 1) config.set_strategy(*StrategyFromName(strategy));
  config.set_pp(stages);
  config.set_pp_schedule(schedule);
  config.set_pp_microbatches(micro_batches);
  config.set_testonly_pp_skip_tied_embedding_sum(skip_tied_sum);
  CHECK(ValidatePipelineConfig(config).ok()) << ValidatePipelineConfig(config);
  const auto data = TensorData(MakeSyntheticSamples(config.seed(), config.vocab_size(),
                                      config.seq_len()));
  Trained run;
  const absl::Status ran = collective::RunRanksAsThreads(
      stages * dp, [&](collective::Communicator& communicator) {
        absl::StatusOr<std::unique_ptr<PipelineStage>> stage =
            PipelineStage::Create(config, &communicator, sync_fault);
        ASSERT_TRUE(stage.ok()) << stage.status();
        std::vector<StepRecord> steps;
        for (int64_t step = 1; step <= config.steps(); ++step) {
          absl::StatusOr<StepRecord> record = (*stage)->Step(step, *data);
          ASSERT_TRUE(record.ok()) << record.status();
          steps.push_back(*record);
        }
        ASSERT_TRUE((*stage)->GatherFullParameters().ok());
        if (communicator.rank() == 0) {
          run.steps = steps;
          run.parameters =
              (*stage)->model().store().flat_parameters().detach().clone();
        }
      });
  CHECK(ran.ok()) << ran;
  return run;
}

// --checkpoint_dir on rank threads, planned as the trainer's main plans
// (PlanCheckpoints over the run's config and world) and run as its workers
// run: RunPipelineTraining per rank with the trainer's Checkpointer, or, at
// pp 1, RunTraining on one rank. Rank 0's step records (a resumed run's
// from its first step on) and its final model, gathered.
Trained TrainWithCheckpoints(TrainConfig config, int world,
                             const std::string& dir, int save_every,
                             const std::string& resume = "",
                             bool testonly_resume_without_step = false) {
  checkpoint::CheckpointOptions options;
  options.dir = dir;
  options.save_every = save_every;
  options.resume = resume;
  absl::StatusOr<checkpoint::CheckpointPlan> plan = checkpoint::PlanCheckpoints(
      options, &config, world, [](absl::string_view) { return false; });
  CHECK(plan.ok()) << plan.status();
  CHECK(ValidatePipelineConfig(config).ok()) << ValidatePipelineConfig(config);
  const auto data = TensorData(MakeSyntheticSamples(
      config.seed(), config.vocab_size(), config.seq_len()));
  Trained run;
  auto keep = [&run](const TrainResult& result) {
    run.steps.assign(result.runs(0).steps().begin(),
                     result.runs(0).steps().end());
  };
  RunHooks hooks;
  hooks.after_last_run = [&run](const GptModel& model) {
    run.parameters = model.store().flat_parameters().detach().clone();
    return absl::OkStatus();
  };
  if (config.pp() <= 1) {
    CHECK_EQ(world, 1);
    config.set_strategy(TrainConfig::single);
    SingleStrategy strategy;
    checkpoint::Checkpointer checkpointer(*plan, config, 0, 1, nullptr);
    if (plan->enabled()) hooks.checkpointer = &checkpointer;
    absl::StatusOr<TrainResult> result =
        RunTraining(config, RankInfo{}, strategy, *data, hooks);
    CHECK(result.ok()) << result.status();
    keep(*result);
    return run;
  }
  const absl::Status ran = collective::RunRanksAsThreads(
      world, [&](collective::Communicator& communicator) {
        const int rank = communicator.rank();
        checkpoint::Checkpointer checkpointer(*plan, config, rank, world,
                                              &communicator);
        RunHooks mine;
        if (plan->enabled()) mine.checkpointer = &checkpointer;
        // Collective (the stages' gather): every rank; rank 0 keeps it.
        mine.after_last_run = [&, rank](const GptModel& model) {
          return rank == 0 ? hooks.after_last_run(model) : absl::OkStatus();
        };
        absl::StatusOr<TrainResult> result = RunPipelineTraining(
            config, RankInfo{rank, world}, &communicator, *data, mine, {},
            tp::TestFault::kNone, testonly_resume_without_step);
        ASSERT_TRUE(result.ok()) << "rank " << rank << ": " << result.status();
        if (rank == 0) keep(*result);
      });
  CHECK(ran.ok()) << ran;
  return run;
}

// A resumed run (its steps the last ones of `reference`'s) against the
// uninterrupted one-rank run: each step's loss and norm as
// CompareWithinTiers, the final parameters in the DDP tiers.
DdpComparison CompareResumedWithinTiers(const Trained& resumed,
                                        const Trained& reference) {
  DdpComparison comparison;
  EXPECT_FALSE(resumed.steps.empty());
  for (const StepRecord& step : resumed.steps) {
    const StepRecord& expected = reference.steps.at(step.step() - 1);
    if (std::abs(step.loss() - expected.loss()) >
        kDdpLossRtol * std::abs(expected.loss())) {
      comparison.failures.push_back(
          {DdpCheck::kLoss, absl::StrCat("step ", step.step(), ": loss ",
                                         step.loss(), " vs ", expected.loss())});
    }
    if (std::abs(step.grad_norm() - expected.grad_norm()) >
        1e-5 * expected.grad_norm()) {
      comparison.failures.push_back(
          {DdpCheck::kGradNorm,
           absl::StrCat("step ", step.step(), ": norm ", step.grad_norm(),
                        " vs ", expected.grad_norm())});
    }
  }
  CompareParameters(resumed.parameters, reference.parameters,
                    reference.manifest, "resumed vs one rank", &comparison);
  return comparison;
}

std::string CheckpointDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/",
                      testing::UnitTest::GetInstance()->current_test_info()->name(),
                      "_", name);
}

TrainConfig Pipelined(TrainConfig config, int stages, int dp,
                      const std::string& schedule, int micro_batches,
                      const std::string& strategy = "ddp") {
  config.set_batch_size(config.batch_size() / dp);
  if (dp > 1) config.set_strategy(*StrategyFromName(strategy));
  config.set_pp(stages);
  config.set_pp_schedule(schedule);
  config.set_pp_microbatches(micro_batches);
  return config;
}

class PipelineTraining : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    at::set_num_threads(1);
    reference_ = new Trained(TrainOneRank(PipelineTestConfig()));
  }
  static void TearDownTestSuite() { delete reference_; }
  static Trained* reference_;
};
Trained* PipelineTraining::reference_ = nullptr;

void ExpectBitIdentical(const Trained& pipelined, const Trained& reference) {
  ASSERT_EQ(pipelined.steps.size(), reference.steps.size());
  bool clipped = false;
  for (size_t i = 0; i < reference.steps.size(); ++i) {
    EXPECT_EQ(pipelined.steps[i].loss_bits(), reference.steps[i].loss_bits())
        << "step " << i + 1 << ": " << pipelined.steps[i].loss() << " vs "
        << reference.steps[i].loss();
    const double norm = pipelined.steps[i].grad_norm();
    const double expected_norm = reference.steps[i].grad_norm();
    EXPECT_EQ(std::memcmp(&norm, &expected_norm, sizeof(double)), 0)
        << "step " << i + 1 << ": norm " << pipelined.steps[i].grad_norm()
        << " vs " << reference.steps[i].grad_norm();
    clipped = clipped || reference.steps[i].clipped();
  }
  EXPECT_TRUE(clipped) << "no step was clipped: the test lost its clipping";
  EXPECT_TRUE(at::equal(pipelined.parameters, reference.parameters));
}

DdpComparison CompareWithinTiers(const Trained& pipelined,
                                 const Trained& reference) {
  DdpComparison comparison;
  for (size_t i = 0; i < reference.steps.size(); ++i) {
    const double loss = pipelined.steps[i].loss();
    const double expected = reference.steps[i].loss();
    if (std::abs(loss - expected) > kDdpLossRtol * std::abs(expected)) {
      comparison.failures.push_back(
          {DdpCheck::kLoss, absl::StrCat("step ", i + 1, ": loss ", loss,
                                         " vs ", expected)});
    }
    const double norm = pipelined.steps[i].grad_norm();
    const double expected_norm = reference.steps[i].grad_norm();
    // As ddp_process_check.cc: norms at 1e-5 relative.
    if (std::abs(norm - expected_norm) > 1e-5 * expected_norm) {
      comparison.failures.push_back(
          {DdpCheck::kGradNorm, absl::StrCat("step ", i + 1, ": norm ", norm,
                                             " vs ", expected_norm)});
    }
  }
  CompareParameters(pipelined.parameters, reference.parameters,
                    reference.manifest, "pipelined vs one rank", &comparison);
  return comparison;
}

TEST_F(PipelineTraining, StagesInARowComputeTheForwardBitForBit) {
  const TrainConfig config = PipelineTestConfig();
  const GptModel model(ModelShapeOf(config), config.seed());
  const auto data = TensorData(MakeSyntheticSamples(config.seed(), config.vocab_size(),
                                      config.seq_len()));
  const Batch batch = data->Get(1, 0, config.batch_size());
  const ForwardOptions options = ForwardOptionsOf(config, 1, batch.sample_indices);
  at::NoGradGuard no_grad;
  const at::Tensor whole = model.Forward(batch.inputs, options);
  at::Tensor x = model.StageForward(batch.inputs, {0, 1, true, false}, options);
  x = model.StageForward(x, {1, 3, false, false}, options);
  x = model.StageForward(x, {3, 4, false, true}, options);
  EXPECT_TRUE(at::equal(x, whole));
  // A stage left out changes the logits.
  at::Tensor skipped =
      model.StageForward(batch.inputs, {0, 1, true, false}, options);
  skipped = model.StageForward(skipped, {3, 4, false, true}, options);
  EXPECT_FALSE(at::allclose(skipped, whole));
}

// At one micro-batch GPipe and 1F1B are the same actions (F0, B0 on every
// stage: schedule_test), so one schedule per size.
TEST_F(PipelineTraining, OneMicroBatchEqualsOneRankBitForBit) {
  for (const auto& [stages, schedule] :
       std::vector<std::pair<int, std::string>>{{2, "gpipe"}, {4, "1f1b"}}) {
    SCOPED_TRACE(testing::Message() << schedule << " pp=" << stages);
    const Schedule made =
        MakeSchedule(ScheduleKind::kGpipe, stages, /*micro_batches=*/1);
    EXPECT_EQ(made.actions,
              MakeSchedule(ScheduleKind::kOneForwardOneBackward, stages, 1)
                  .actions);
    ExpectBitIdentical(
        TrainPipelined(PipelineTestConfig(), stages, schedule, 1),
        *reference_);
  }
}

TEST_F(PipelineTraining, SeveralMicroBatchesEqualOneRankWithinTheDdpTiers) {
  for (const char* schedule : {"gpipe", "1f1b"}) {
    SCOPED_TRACE(schedule);
    const DdpComparison comparison = CompareWithinTiers(
        TrainPipelined(PipelineTestConfig(), 4, schedule, 4), *reference_);
    EXPECT_TRUE(comparison.ok()) << comparison.Describe();
  }
}

// pp 2 x dp 2 under 1F1B: each stage's gradient reduced over its two
// replicas by the strategy (ddp's all-reduce; zero2's reduce-scatter,
// sharded AdamW and all-gather), as over a whole model; rank 0's gathered
// model is compared. zero1 (GPipe) is APpTimesDpCheckpointResumes...'s
// saving run here and pp_process_test's process run.
TEST_F(PipelineTraining, TwoStagesTimesTwoReplicasEqualOneRankWithinTheDdpTiers) {
  for (const char* strategy : {"ddp", "zero2"}) {
    SCOPED_TRACE(strategy);
    const DdpComparison comparison = CompareWithinTiers(
        TrainPipelined(PipelineTestConfig(), 2, "1f1b", 2,
                       /*skip_tied_sum=*/false, /*dp=*/2, strategy),
        *reference_);
    EXPECT_TRUE(comparison.ok()) << comparison.Describe();
  }
}

// The negative: a stage reduction that sums instead of averaging (the
// strategies' own test fault) doubles every stage's gradient: the norm
// leaves its tier from step 1.
TEST_F(PipelineTraining, AStageReductionThatSumsFailsTheComparison) {
  SyncTestFault fault;
  fault.kind = SyncTestFault::Kind::kSumNotAverage;
  const DdpComparison comparison = CompareWithinTiers(
      TrainPipelined(PipelineTestConfig(), 2, "1f1b", 2,
                     /*skip_tied_sum=*/false, /*dp=*/2, "zero2", fault),
      *reference_);
  EXPECT_TRUE(comparison.Failed(DdpCheck::kGradNorm)) << comparison.Describe();
}

// Without the sum, stage 0 steps the token embedding on the lookup's
// gradient alone and the last stage on the head's: the gathered model (stage
// 0's embedding) leaves the tiers, and the norm is off from step 1.
TEST_F(PipelineTraining, UnsummedTiedEmbeddingFailsTheComparison) {
  const DdpComparison comparison = CompareWithinTiers(
      TrainPipelined(PipelineTestConfig(), 2, "1f1b", 1,
                     /*skip_tied_sum=*/true),
      *reference_);
  EXPECT_TRUE(comparison.Failed(DdpCheck::kGradNorm)) << comparison.Describe();
  EXPECT_TRUE(comparison.FailedParameter("wte")) << comparison.Describe();
}


// MFU under --pp: the peak as other runs take it, --peak_flops or the GEMMs
// measured on every rank (it read 0 when the pipelined loop set no peak).
TEST_F(PipelineTraining, MfuHasAPeakWithAndWithoutPeakFlops) {
  for (const double given : {1e12, 0.0}) {
    SCOPED_TRACE(testing::Message() << "--peak_flops=" << given);
    TrainConfig config = PipelineTestConfig();
    config.set_steps(2);
    config.set_peak_flops(given);
    config.set_pp(2);
    config.set_pp_schedule("1f1b");
    config.set_pp_microbatches(2);
    const auto data = TensorData(MakeSyntheticSamples(config.seed(), config.vocab_size(),
                                        config.seq_len()));
    TrainResult result;
    const absl::Status ran = collective::RunRanksAsThreads(
        2, [&](collective::Communicator& communicator) {
          absl::StatusOr<TrainResult> mine = RunPipelineTraining(
              config, RankInfo{communicator.rank(), 2}, &communicator, *data,
              RunHooks{});
          ASSERT_TRUE(mine.ok()) << mine.status();
          if (communicator.rank() == 0) result = *mine;
        });
    ASSERT_TRUE(ran.ok()) << ran;
    ASSERT_EQ(result.runs_size(), 1);
    const PeakFlops& peak = result.peak_flops();
    if (given > 0) {
      EXPECT_EQ(peak.source(), "--peak_flops");
      EXPECT_EQ(peak.job_flops_per_second(), 2 * given);
    } else {
      EXPECT_EQ(peak.source().rfind("measured: ", 0), 0u) << peak.source();
      EXPECT_GT(peak.job_flops_per_second(), 0);
    }
    EXPECT_GT(result.summary().mfu(), 0);
    EXPECT_DOUBLE_EQ(result.summary().mfu(),
                     result.summary().model_flops_per_second() /
                         peak.job_flops_per_second());
    for (const StepRecord& step : result.runs(0).steps()) {
      EXPECT_GT(step.mfu(), 0) << "step " << step.step();
    }
  }
}

// --init_from under --pp: the imported model goes into every stage's pieces
// (InitializeParameters over the stage's checkpoint state, pp 2 x dp 2 under
// zero1), and the last stage's tied embedding takes stage 0's values: every
// rank then holds the imported model bit for bit; the model it replaced
// (the seed's) does not equal it.
TEST_F(PipelineTraining, InitFromWritesEveryStagesParameters) {
  TrainConfig config = PipelineTestConfig();
  config.set_batch_size(config.batch_size() / 2);
  config.set_pp(2);
  config.set_pp_schedule("1f1b");
  config.set_pp_microbatches(1);
  config.set_strategy(TrainConfig::zero1);
  ASSERT_TRUE(ValidatePipelineConfig(config).ok())
      << ValidatePipelineConfig(config);
  TrainConfig other = config;
  other.set_seed(config.seed() + 1);
  const GptModel imported(ModelShapeOf(other), other.seed());
  hf::OurParameters parameters;
  for (const NamedParameter& parameter : imported.parameters()) {
    parameters.push_back({parameter.name, parameter.tensor.detach().clone()});
  }
  const at::Tensor expected = imported.store().flat_parameters().clone();
  const absl::Status ran = collective::RunRanksAsThreads(
      4, [&](collective::Communicator& communicator) {
        absl::StatusOr<std::unique_ptr<PipelineStage>> stage =
            PipelineStage::Create(config, &communicator);
        ASSERT_TRUE(stage.ok()) << stage.status();
        ASSERT_FALSE(
            at::equal((*stage)->model().store().flat_parameters(), expected));
        ASSERT_TRUE(
            InitializeParameters(parameters, (*stage)->checkpoint_state()).ok());
        // The last stage's head copy, before any gather.
        if ((*stage)->stage() == 1) {
          EXPECT_TRUE(at::equal((*stage)->model().parameters()[0].tensor,
                                parameters[0].second));
        }
        ASSERT_TRUE((*stage)->GatherFullParameters().ok());
        EXPECT_TRUE(
            at::equal((*stage)->model().store().flat_parameters(), expected))
            << "rank " << communicator.rank();
      });
  ASSERT_TRUE(ran.ok()) << ran;
}

// The checkpoint state under pp 2 x dp 2 (zero2): over all ranks the save
// pieces cover every element of every global tensor exactly once (the
// contract every strategy keeps, trainer/run/strategy.h), optimizer/step from
// stage 0 alone. The load lists, unfiltered, hold optimizer/step on every
// rank: listed for saving that way, the step would be written four times.
TEST_F(PipelineTraining, CheckpointPiecesCoverEveryTensorOnce) {
  TrainConfig config = PipelineTestConfig();
  config.set_batch_size(config.batch_size() / 2);
  config.set_pp(2);
  config.set_pp_schedule("1f1b");
  config.set_pp_microbatches(1);
  config.set_strategy(TrainConfig::zero2);
  ASSERT_TRUE(ValidatePipelineConfig(config).ok());
  std::mutex mutex;
  std::map<std::string, std::vector<int>> covered;  // name -> per element
  int steps_saved = 0, steps_loaded = 0;
  const absl::Status ran = collective::RunRanksAsThreads(
      4, [&](collective::Communicator& communicator) {
        absl::StatusOr<std::unique_ptr<PipelineStage>> stage =
            PipelineStage::Create(config, &communicator);
        ASSERT_TRUE(stage.ok()) << stage.status();
        Strategy& state = (*stage)->checkpoint_state();
        const std::vector<StatePiece> saved = state.CheckpointPiecesToSave();
        const std::vector<StatePiece> loaded = state.CheckpointPiecesToLoad();
        const std::lock_guard<std::mutex> lock(mutex);
        for (const StatePiece& piece : saved) {
          int64_t numel = 1;
          for (int64_t size : piece.global_shape) numel *= size;
          std::vector<int>& counts = covered[piece.name];
          counts.resize(numel, 0);
          for (int64_t i = 0; i < piece.values.numel(); ++i) {
            ++counts[piece.offset + i];
          }
          steps_saved += piece.name == "optimizer/step";
        }
        for (const StatePiece& piece : loaded) {
          steps_loaded += piece.name == "optimizer/step";
        }
      });
  ASSERT_TRUE(ran.ok()) << ran;
  const GptModel model(ModelShapeOf(config), config.seed());
  EXPECT_EQ(covered.size(), 3 * model.parameters().size() + 1);
  for (const NamedParameter& parameter : model.parameters()) {
    for (const std::string prefix :
         {"model/", "optimizer/exp_avg/", "optimizer/exp_avg_sq/"}) {
      const std::vector<int>& counts = covered[prefix + parameter.name];
      ASSERT_EQ(static_cast<int64_t>(counts.size()), parameter.tensor.numel())
          << prefix << parameter.name;
      EXPECT_EQ(std::count(counts.begin(), counts.end(), 1),
                parameter.tensor.numel())
          << prefix << parameter.name << " not covered exactly once";
    }
  }
  EXPECT_EQ(steps_saved, 1);
  EXPECT_EQ(steps_loaded, 4);
}

// A pp 2 x dp 2 checkpoint (zero1, GPipe), saved as the logical global
// tensors every strategy saves, resumed at pp 1 on one rank and at pp 4
// (1F1B, 4 micro-batches) on four: each continues, steps 3 and 4 and the
// final model, within the bound of the uninterrupted one-rank run.
TEST_F(PipelineTraining, APpTimesDpCheckpointResumesAtOneAndFourStages) {
  const TrainConfig base = PipelineTestConfig();
  const std::string dir = CheckpointDir("pp2_dp2");
  const Trained saved = TrainWithCheckpoints(
      Pipelined(base, 2, 2, "gpipe", 2, "zero1"), 4, dir, /*save_every=*/2);
  const DdpComparison whole = CompareWithinTiers(saved, *reference_);
  EXPECT_TRUE(whole.ok()) << whole.Describe();
  const std::string step2 = dir + "/step_00000002";
  {
    SCOPED_TRACE("resumed at pp 1");
    const Trained resumed =
        TrainWithCheckpoints(base, 1, CheckpointDir("pp1"), 0, step2);
    ASSERT_EQ(resumed.steps.size(), 2u);
    EXPECT_EQ(resumed.steps[0].step(), 3);
    const DdpComparison comparison =
        CompareResumedWithinTiers(resumed, *reference_);
    EXPECT_TRUE(comparison.ok()) << comparison.Describe();
    std::cout << "pp2 x dp2 checkpoint at pp 1:\n" << comparison.Describe() << "\n";
  }
  {
    SCOPED_TRACE("resumed at pp 4");
    const Trained resumed = TrainWithCheckpoints(
        Pipelined(base, 4, 1, "1f1b", 4), 4, CheckpointDir("pp4"), 0, step2);
    ASSERT_EQ(resumed.steps.size(), 2u);
    const DdpComparison comparison =
        CompareResumedWithinTiers(resumed, *reference_);
    EXPECT_TRUE(comparison.ok()) << comparison.Describe();
    std::cout << "pp2 x dp2 checkpoint at pp 4:\n" << comparison.Describe() << "\n";
  }
}

// At one micro-batch a pipelined run is one rank's bit for bit, and a resume
// at the same layout is exact: the resumed steps 3 and 4 and the final model
// are the uninterrupted one-rank run's bits. The negative: a resume that
// leaves AdamW's step count unloaded on the last stage (the checkpoint holds
// it once, from stage 0) has step 3's loss (computed before the first update
// after the resume) and differs from step 4 on. The restart after a killed
// stage (real processes) is //trainer:pp_process_test's.
TEST_F(PipelineTraining, ASameLayoutResumeIsBitForBitAndWithoutTheStepCountIsNot) {
  const TrainConfig config = Pipelined(PipelineTestConfig(), 2, 1, "1f1b", 1);
  const std::string dir = CheckpointDir("pp2");
  ExpectBitIdentical(TrainWithCheckpoints(config, 2, dir, 2), *reference_);
  const std::string step2 = dir + "/step_00000002";
  const Trained resumed =
      TrainWithCheckpoints(config, 2, CheckpointDir("resumed"), 0, step2);
  ASSERT_EQ(resumed.steps.size(), 2u);
  for (const StepRecord& step : resumed.steps) {
    EXPECT_EQ(step.loss_bits(), reference_->steps[step.step() - 1].loss_bits())
        << "step " << step.step();
  }
  EXPECT_TRUE(at::equal(resumed.parameters, reference_->parameters));

  const Trained broken = TrainWithCheckpoints(
      config, 2, CheckpointDir("without_step"), 0, step2,
      /*testonly_resume_without_step=*/true);
  ASSERT_EQ(broken.steps.size(), 2u);
  EXPECT_EQ(broken.steps[0].loss_bits(), reference_->steps[2].loss_bits())
      << "step 3's loss precedes the first update after the resume";
  EXPECT_NE(broken.steps[1].loss_bits(), reference_->steps[3].loss_bits())
      << "step 4";
  EXPECT_FALSE(at::equal(broken.parameters, reference_->parameters));
}

// pp 2 x tp 2 (sequence parallelism, 1F1B) with dropout, each tp rank
// drawing its part of one rank's counter-based masks (docs/tp.md
// "Dropout"): equal to one rank within the bound over the clipped steps
// (pp_tp_training_test's layouts run without dropout). Its step-2
// checkpoint, each tp rank's parts saved as the logical global tensors,
// resumed at pp 1 x tp 1 on one rank: steps 3 and 4 and the final model
// within the bound of the uninterrupted one-rank run.
TEST_F(PipelineTraining, PpTimesTpWithDropoutEqualsOneRankAndResumesOnOneRank) {
  const TrainConfig base = PipelineTestConfig();
  ASSERT_GT(base.dropout(), 0);
  TrainConfig pp_tp = Pipelined(base, 2, 1, "1f1b", 2);
  pp_tp.set_tp(2);
  pp_tp.set_sequence_parallel(true);
  const std::string dir = CheckpointDir("pp2_tp2");
  const DdpComparison whole = CompareWithinTiers(
      TrainWithCheckpoints(pp_tp, 4, dir, 2), *reference_);
  EXPECT_TRUE(whole.ok()) << whole.Describe();
  std::cout << "pp2 x tp2 (SP, dropout) vs one rank:\n" << whole.Describe() << "\n";
  const Trained resumed = TrainWithCheckpoints(
      base, 1, CheckpointDir("pp1_tp1"), 0, dir + "/step_00000002");
  ASSERT_EQ(resumed.steps.size(), 2u);
  const DdpComparison comparison = CompareResumedWithinTiers(resumed, *reference_);
  EXPECT_TRUE(comparison.ok()) << comparison.Describe();
  std::cout << "pp2 x tp2 checkpoint at pp 1 x tp 1:\n"
            << comparison.Describe() << "\n";
}

// --fault=nan on stage 0, which has no loss of its own (its NaN reaches the
// loss through the step's scalar all-reduce): every rank stops at step 2
// with the same verdict, before the update, naming the injected fault, as
// a deterministic failure (the launcher's exit 3: not restarted).
TEST_F(PipelineTraining, ANanOnAStageWithoutALossStopsEveryRank) {
  TrainConfig config = Pipelined(PipelineTestConfig(), 2, 1, "1f1b", 2);
  config.set_steps(3);
  const auto data = TensorData(MakeSyntheticSamples(
      config.seed(), config.vocab_size(), config.seq_len()));
  absl::StatusOr<std::vector<Fault>> faults =
      ParseFaults("nan:rank=0,step=2", TrainerFaultGrammar());
  ASSERT_TRUE(faults.ok()) << faults.status();
  std::vector<absl::Status> statuses(2);
  std::vector<int64_t> steps_done(2, 0);
  const absl::Status ran = collective::RunRanksAsThreads(
      2, [&](collective::Communicator& communicator) {
        const int rank = communicator.rank();
        RunHooks hooks;
        hooks.faults = *faults;
        hooks.after_step = [&, rank](int64_t step) {
          steps_done[rank] = step;
          return absl::OkStatus();
        };
        statuses[rank] = RunPipelineTraining(config, RankInfo{rank, 2},
                                             &communicator, *data, hooks)
                             .status();
      });
  ASSERT_TRUE(ran.ok()) << ran;
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(testing::Message() << "rank " << rank);
    EXPECT_EQ(statuses[rank].code(), absl::StatusCode::kAborted) << statuses[rank];
    EXPECT_EQ(ExitCodeFor(statuses[rank]), kExitDeterministicFailure);
    EXPECT_NE(statuses[rank].message().find("step 2"), std::string::npos)
        << statuses[rank];
    EXPECT_NE(statuses[rank].message().find(
                  "(injected by --fault=nan:rank=0,step=2)"),
              std::string::npos)
        << statuses[rank];
    EXPECT_EQ(steps_done[rank], 1);
  }
}

}  // namespace
}  // namespace mtb::pipeline
