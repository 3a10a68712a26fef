// Pipeline x tensor parallelism (docs/pipeline.md, "With tensor
// parallelism"), ranks as threads over Gloo: the world pp x dp x tp, each
// stage's blocks split over its tp group by the split tensor parallelism
// runs, activations sent tp rank to tp rank, the tied embedding's vocab
// shards summed between the end stages per tp rank, the norm counting
// every parameter once. Compared with one rank on the same global batch
// over 4 steps (clipped) by the comparison of the pp and tp tests (losses
// 1e-6 relative, norms 1e-5, parameters per tensor within the DDP tiers of
// trainer/tests/ddp_process_check.cc; docs/tp.md says why the tp
// reorderings fit that bound). Negatives: a row-parallel output left
// unreduced inside a stage, the tied embedding's sum dropped, replicated
// parameters counted on every tp rank.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <mutex>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "absl/strings/str_cat.h"
#include "common/collective/test_util.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "trainer/config/config_names.h"
#include "trainer/pipeline/pipeline_training.h"
#include "trainer/run/strategy.h"
#include "trainer/run/trainer.h"
#include "trainer/tests/ddp_process_check.h"
#include "trainer/tests/test_config.h"

namespace mtb::pipeline {
namespace {

struct Trained {
  std::vector<StepRecord> steps;
  at::Tensor parameters;  // the logical model's flat store
  std::vector<DumpedParameter> manifest;
  // Ranks whose logical model or loss bits differ from rank 0's.
  std::vector<std::string> disagreeing;
  // Steps whose tp bytes differ from the stage's closed form (or have
  // none), on any rank.
  std::vector<std::string> tp_bytes_mismatches;
};

// 4 layers (2 per stage), no dropout (refused with --tp > 1), clipping on
// (the norm crosses --max_grad_norm in these steps), 4 steps.
TrainConfig PpTpConfig() {
  TrainConfig config = TinyConfig();
  config.set_n_layers(4);
  config.set_max_grad_norm(0.5);
  config.set_lr(3e-3);
  config.set_weight_decay(0.1);
  config.set_steps(4);
  return config;
}

Trained TrainOneRank(const TrainConfig& config) {
  const auto data = TensorData(MakeSyntheticSamples(
      config.seed(), config.vocab_size(), config.seq_len()));
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

struct Layout {
  int pp = 2;
  int dp = 1;
  int tp = 2;
  std::string schedule = "1f1b";
  int micro_batches = 2;
  std::string strategy = "ddp";
  bool sequence_parallel = false;
  bool skip_tied_sum = false;
  tp::TestFault tp_fault = tp::TestFault::kNone;

  std::string Name() const {
    return absl::StrCat("pp", pp, "_dp", dp, "_tp", tp, "_", schedule, "_m",
                        micro_batches, dp > 1 ? "_" + strategy : "",
                        sequence_parallel ? "_sp" : "");
  }
};

TrainConfig ConfigOf(TrainConfig config, const Layout& layout) {
  config.set_batch_size(config.batch_size() / layout.dp);
  if (layout.dp > 1) config.set_strategy(*StrategyFromName(layout.strategy));
  config.set_pp(layout.pp);
  config.set_tp(layout.tp);
  config.set_sequence_parallel(layout.sequence_parallel);
  config.set_pp_schedule(layout.schedule);
  config.set_pp_microbatches(layout.micro_batches);
  config.set_testonly_pp_skip_tied_embedding_sum(layout.skip_tied_sum);
  CHECK(ValidatePipelineConfig(config).ok()) << ValidatePipelineConfig(config);
  return config;
}

// Rank 0's records and logical parameters, and the ranks whose logical
// model (the stages' gather, then the tp gather) or loss bits differ from
// rank 0's: every rank holds one model bit for bit unless something broke
// it (a replicated parameter's tp copies drifting apart, say).
Trained TrainPipelined(const TrainConfig& base, const Layout& layout) {
  const TrainConfig config = ConfigOf(base, layout);
  const auto data = TensorData(MakeSyntheticSamples(
      config.seed(), config.vocab_size(), config.seq_len()));
  const int world = layout.pp * layout.dp * layout.tp;
  std::vector<at::Tensor> flats(world);
  std::vector<std::vector<StepRecord>> records(world);
  const absl::Status ran = collective::RunRanksAsThreads(
      world, [&](collective::Communicator& communicator) {
        absl::StatusOr<std::unique_ptr<PipelineStage>> stage =
            PipelineStage::Create(config, &communicator, {}, layout.tp_fault);
        ASSERT_TRUE(stage.ok()) << stage.status();
        ASSERT_EQ((*stage)->tp_size(), layout.tp);
        for (int64_t step = 1; step <= config.steps(); ++step) {
          absl::StatusOr<StepRecord> record = (*stage)->Step(step, *data);
          ASSERT_TRUE(record.ok()) << record.status();
          records[communicator.rank()].push_back(*record);
        }
        absl::StatusOr<std::vector<NamedParameter>> global =
            (*stage)->GlobalParameters();
        ASSERT_TRUE(global.ok()) << global.status();
        const GptModel whole(ModelShapeOf(base), config.seed());
        at::NoGradGuard no_grad;
        ASSERT_EQ(global->size(), whole.parameters().size());
        for (size_t i = 0; i < global->size(); ++i) {
          ASSERT_EQ((*global)[i].name, whole.parameters()[i].name);
          whole.parameters()[i].tensor.detach().copy_((*global)[i].tensor);
        }
        flats[communicator.rank()] =
            whole.store().flat_parameters().detach().clone();
      });
  CHECK(ran.ok()) << ran;
  Trained run;
  for (int r = 1; r < world; ++r) {
    bool agrees = at::equal(flats[r], flats[0]);
    for (size_t i = 0; i < records[0].size(); ++i) {
      agrees = agrees && records[r][i].loss_bits() == records[0][i].loss_bits();
    }
    if (!agrees) run.disagreeing.push_back(absl::StrCat("rank ", r));
  }
  for (int r = 0; r < world; ++r) {
    for (const StepRecord& step : records[r]) {
      if (step.expected_tp_bytes() <= 0 ||
          step.tp_bytes_sent() != step.expected_tp_bytes()) {
        run.tp_bytes_mismatches.push_back(absl::StrCat(
            "rank ", r, " step ", step.step(), ": ", step.tp_bytes_sent(),
            " tp bytes sent, closed form ", step.expected_tp_bytes()));
      }
    }
  }
  run.steps = records[0];
  run.parameters = flats[0];
  return run;
}

DdpComparison CompareWithinTiers(const Trained& pipelined,
                                 const Trained& reference) {
  DdpComparison comparison;
  for (const std::string& rank : pipelined.disagreeing) {
    comparison.failures.push_back(
        {DdpCheck::kRanksEqual,
         absl::StrCat(rank, "'s logical model or loss differs from rank 0's")});
  }
  if (pipelined.steps.size() != reference.steps.size()) {
    comparison.failures.push_back({DdpCheck::kLoss, "steps differ"});
    return comparison;
  }
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
                    reference.manifest, "pp x tp vs one rank", &comparison);
  return comparison;
}

class PpTpTraining : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    at::set_num_threads(1);
    reference_ = new Trained(TrainOneRank(PpTpConfig()));
    bool clipped = false;
    for (const StepRecord& step : reference_->steps) {
      clipped = clipped || step.clipped();
    }
    CHECK(clipped) << "no step was clipped: the test lost its clipping";
  }
  static void TearDownTestSuite() { delete reference_; }
  static Trained* reference_;
};
Trained* PpTpTraining::reference_ = nullptr;

// pp 2 x tp 2 (dp 1) under both schedules: GPipe with sequence parallelism
// (the activations between stages are each rank's T/2 positions), 1F1B
// without (with the 8-rank cases below: each schedule with and without SP;
// pp_process_test's real processes run 1F1B with SP and dropout). Every
// rank's tp bytes each step equal its stage's closed form
// (tp::ExpectedStageTensorParallelStepBytes: the embedding's collectives on
// stage 0, the head's and the loss's on the last, the blocks' on each).
TEST_F(PpTpTraining, TwoStagesTimesTwoTpRanksEqualOneRank) {
  std::vector<Layout> layouts(2);
  layouts[0].schedule = "gpipe";
  layouts[0].sequence_parallel = true;
  layouts[1].schedule = "1f1b";
  for (const Layout& layout : layouts) {
    SCOPED_TRACE(layout.Name());
    const Trained pipelined = TrainPipelined(PpTpConfig(), layout);
    EXPECT_TRUE(pipelined.tp_bytes_mismatches.empty())
        << pipelined.tp_bytes_mismatches.size() << " mismatches, the first: "
        << pipelined.tp_bytes_mismatches.front();
    const DdpComparison comparison = CompareWithinTiers(pipelined, *reference_);
    EXPECT_TRUE(comparison.ok()) << comparison.Describe();
    std::cout << layout.Name() << " vs one rank:\n"
              << comparison.Describe() << "\n";
  }
}

// pp 2 x dp 2 x tp 2: zero1 over each (stage, tp) coordinate's dp group
// under GPipe, zero2 with sequence parallelism under 1F1B.
TEST_F(PpTpTraining, TwoStagesTwoReplicasTwoTpRanksEqualOneRank) {
  std::vector<Layout> layouts(2);
  layouts[0].dp = 2;
  layouts[0].schedule = "gpipe";
  layouts[0].strategy = "zero1";
  layouts[1].dp = 2;
  layouts[1].schedule = "1f1b";
  layouts[1].strategy = "zero2";
  layouts[1].sequence_parallel = true;
  for (const Layout& layout : layouts) {
    SCOPED_TRACE(layout.Name());
    const DdpComparison comparison =
        CompareWithinTiers(TrainPipelined(PpTpConfig(), layout), *reference_);
    EXPECT_TRUE(comparison.ok()) << comparison.Describe();
    std::cout << layout.Name() << " vs one rank:\n"
              << comparison.Describe() << "\n";
  }
}

// What the bound cannot absorb. A row-parallel output not summed over a
// stage's tp group: the loss differs from step 1. The tied embedding's sum
// dropped (each tp rank's shard): stage 0 steps wte on the lookup's gradient
// alone, the norm is off from step 1 and wte leaves the tiers. Replicated
// parameters counted on both tp ranks: the norm is too large.
TEST_F(PpTpTraining, PlantedFaultsFailTheComparison) {
  Layout unreduced;
  unreduced.tp_fault = tp::TestFault::kRowParallelUnreduced;
  const DdpComparison missing_all_reduce =
      CompareWithinTiers(TrainPipelined(PpTpConfig(), unreduced), *reference_);
  EXPECT_TRUE(missing_all_reduce.Failed(DdpCheck::kLoss))
      << missing_all_reduce.Describe();

  Layout untied;
  untied.skip_tied_sum = true;
  const DdpComparison no_tied_sum =
      CompareWithinTiers(TrainPipelined(PpTpConfig(), untied), *reference_);
  EXPECT_TRUE(no_tied_sum.Failed(DdpCheck::kGradNorm)) << no_tied_sum.Describe();
  EXPECT_TRUE(no_tied_sum.FailedParameter("wte")) << no_tied_sum.Describe();

  Layout double_counted;
  double_counted.tp_fault = tp::TestFault::kNormDoubleCounted;
  const DdpComparison too_large = CompareWithinTiers(
      TrainPipelined(PpTpConfig(), double_counted), *reference_);
  EXPECT_TRUE(too_large.Failed(DdpCheck::kGradNorm)) << too_large.Describe();
}

// The checkpoint state under pp 2 x dp 2 x tp 2 (zero2): over all ranks the
// save pieces cover every element of every logical global tensor exactly
// once (each tp rank's parts mapped to the global tensors, a replicated
// tensor from tp rank 0), optimizer/step from stage 0's tp rank 0 alone.
TEST_F(PpTpTraining, CheckpointPiecesCoverEveryGlobalTensorOnce) {
  Layout layout;
  layout.dp = 2;
  layout.strategy = "zero2";
  const TrainConfig config = ConfigOf(PpTpConfig(), layout);
  std::mutex mutex;
  std::map<std::string, std::vector<int>> covered;  // name -> per element
  int steps_saved = 0;
  const absl::Status ran = collective::RunRanksAsThreads(
      8, [&](collective::Communicator& communicator) {
        absl::StatusOr<std::unique_ptr<PipelineStage>> stage =
            PipelineStage::Create(config, &communicator);
        ASSERT_TRUE(stage.ok()) << stage.status();
        const std::vector<StatePiece> saved =
            (*stage)->checkpoint_state().CheckpointPiecesToSave();
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
      });
  ASSERT_TRUE(ran.ok()) << ran;
  const GptModel model(ModelShapeOf(PpTpConfig()), config.seed());
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
}

}  // namespace
}  // namespace mtb::pipeline
