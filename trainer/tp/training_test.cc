// Tensor-parallel training on rank threads over Gloo (no processes; nothing
// here reads a process-global figure): the same pieces the trainer's worker
// assembles (a rank mesh, the strategy over its dp group wrapped by
// tp::TensorParallelStrategy, tp::TensorParallelSplit) run by RunTraining.
//
//   - zero1 and zero2 over the dp group and tp=4 (with and without SP)
//     train as one rank does, within the bound of docs/tp.md.
//   - The bytes each rank sends on its tp group equal their closed form
//     (trainer/tp/bytes.h) every step, under fp32 and bf16, with and without
//     SP. Under bf16 with SP the closed form differs from fp32's (the
//     gradients of the row-parallel outputs are all-gathered as bf16), so a
//     closed form that ignored the precision fails here.
//   - The result's parameter digest is the logical model's (gathered over
//     the tp group), so it compares across layouts: with lr = 0 the seeded
//     tp run's digest is the one-rank model's, not rank 0's parts.
//   - Dropout follows Megatron's stream rule (docs/tp.md "Dropout"): with
//     --dropout > 0, tp=2 (and tp=2 x dp=2 fsdp with SP) trains as one rank
//     does within the bound (the same masks), the replicated parameters
//     stay bit-identical across the tp group; a replicated-region stream
//     drawn per tp rank makes them differ, and a sharded-region stream
//     shared by the tp ranks no longer equals one rank.
//   - --init_from under tp: the parameters written through the tp
//     strategy's checkpoint pieces are the file's logical tensors: with
//     lr = 0 the digest is the file's, at tp=2 x dp=1 (ddp) and tp=2 x dp=2
//     (fsdp, every part sharded again over the dp group), and differs from
//     the seeded start's.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/collective/mesh.h"
#include "common/collective/test_util.h"
#include "common/hf/gpt2_tensors.h"
#include "gtest/gtest.h"
#include "trainer/config/config_names.h"
#include "trainer/data/data.h"
#include "trainer/tests/ddp_process_check.h"
#include "trainer/exact/exact.h"
#include "trainer/model/model.h"
#include "trainer/model/model_shape.h"
#include "trainer/strategy/factory.h"
#include "trainer/tests/test_config.h"
#include "trainer/tp/bytes.h"
#include "trainer/tp/layout.h"
#include "trainer/tp/model_split.h"
#include "trainer/tp/strategy.h"
#include "trainer/run/trainer.h"

namespace mtb::tp {
namespace {

struct RankOutcome {
  absl::Status status;
  TrainResult result;
  // The logical global parameters at the end, flat, and their manifest.
  at::Tensor parameters;
  std::vector<DumpedParameter> manifest;
};

// RunHooks::after_last_run: `global` (the logical parameters) into `out`.
void Keep(const std::vector<NamedParameter>& global, RankOutcome* out) {
  std::vector<at::Tensor> flat;
  int64_t offset = 0;
  for (const NamedParameter& p : global) {
    flat.push_back(p.tensor.detach().reshape({-1}).clone());
    out->manifest.push_back({p.name, offset, p.tensor.numel()});
    offset += p.tensor.numel();
  }
  out->parameters = at::cat(flat);
}

// `config` (its --tp) trained on `world_size` rank threads; every rank's
// outcome. `init`: RunHooks::init_parameters (--init_from), or nullptr.
std::vector<RankOutcome> TrainOnThreads(const TrainConfig& config,
                                        int world_size,
                                        const hf::OurParameters* init = nullptr,
                                        TestFault fault = TestFault::kNone) {
  const int tp = TensorParallelSize(config);
  const auto data =
      TensorData(MakeSyntheticSamples(config.seed(), config.vocab_size(), config.seq_len()));
  std::vector<RankOutcome> outcomes(world_size);
  RunHooks hooks;
  hooks.init_parameters = init;
  if (world_size == 1) {
    absl::StatusOr<std::unique_ptr<Strategy>> strategy =
        MakeStrategy(config, nullptr);
    EXPECT_TRUE(strategy.ok()) << strategy.status();
    if (!strategy.ok()) return outcomes;
    hooks.after_last_run = [&](const GptModel& model) {
      Keep(model.parameters(), &outcomes[0]);
      return absl::OkStatus();
    };
    absl::StatusOr<TrainResult> result =
        RunTraining(config, RankInfo{0, 1}, **strategy, *data, hooks);
    outcomes[0].status = result.status();
    if (result.ok()) outcomes[0].result = *std::move(result);
    return outcomes;
  }
  const absl::Status threads = collective::RunRanksAsThreads(
      world_size, [&](collective::Communicator& world) {
        collective::MeshOptions options;
        options.tp = tp;
        options.communicator.gloo_hostname = "127.0.0.1";
        options.communicator.transport = collective::Transport::kTcp;
        options.identity.run_id = "tp_training_test";
        absl::StatusOr<std::unique_ptr<collective::RankMesh>> mesh =
            collective::RankMesh::Create(&world, options);
        ASSERT_TRUE(mesh.ok()) << mesh.status();
        absl::StatusOr<std::unique_ptr<Strategy>> inner =
            MakeStrategy(config, (*mesh)->dp());
        ASSERT_TRUE(inner.ok()) << inner.status();
        TensorParallelStrategy strategy(*std::move(inner), mesh->get(),
                                        ExpectedTensorParallelStepBytes(config));
        const TensorParallelSplit split((*mesh)->tp(),
                                        config.sequence_parallel(), fault);
        RunHooks rank_hooks = hooks;
        rank_hooks.model_split = &split;
        rank_hooks.after_last_run = [&](const GptModel& model) -> absl::Status {
          ASSIGN_OR_RETURN(const std::vector<NamedParameter> global,
                           split.GlobalParameters(model.parameters()));
          Keep(global, &outcomes[world.rank()]);
          return absl::OkStatus();
        };
        absl::StatusOr<TrainResult> result = RunTraining(
            config, RankInfo{world.rank(), world_size, tp}, strategy, *data,
            rank_hooks);
        RankOutcome& outcome = outcomes[world.rank()];
        outcome.status = result.status();
        if (result.ok()) outcome.result = *std::move(result);
      });
  EXPECT_TRUE(threads.ok()) << threads;
  return outcomes;
}

TrainConfig TpConfig(int tp, const std::string& strategy) {
  TrainConfig config = TinyConfig();
  config.set_tp(tp);
  config.set_strategy(*StrategyFromName(strategy));
  config.set_batch_size(2);
  config.set_steps(2);
  return config;
}

TEST(TpTraining, TpBytesEqualTheirClosedFormUnderFp32AndBf16) {
  at::set_num_threads(1);
  for (const std::string precision : {"fp32", "bf16"}) {
    for (const bool sequence_parallel : {false, true}) {
      TrainConfig config = TpConfig(2, "ddp");
      config.set_precision(*PrecisionFromName(precision));
      config.set_sequence_parallel(sequence_parallel);
      SCOPED_TRACE(absl::StrCat(precision, sequence_parallel ? " with SP" : ""));
      const int64_t expected = ExpectedTensorParallelStepBytes(config);
      ASSERT_GT(expected, 0);
      if (precision == "bf16") {
        TrainConfig fp32 = config;
        fp32.set_precision(TrainConfig::fp32);
        // Only SP moves a bf16 copy: there the two closed forms differ.
        EXPECT_EQ(expected < ExpectedTensorParallelStepBytes(fp32),
                  sequence_parallel);
      }
      for (const RankOutcome& rank : TrainOnThreads(config, 2)) {
        ASSERT_TRUE(rank.status.ok()) << rank.status;
        ASSERT_EQ(rank.result.runs(0).steps_size(), 2);
        for (const StepRecord& step : rank.result.runs(0).steps()) {
          EXPECT_EQ(step.expected_tp_bytes(), expected);
          EXPECT_EQ(step.tp_bytes_sent(), expected) << "step " << step.step();
        }
      }
    }
  }
}

// The outcome as the process tests' comparison reads a launch.
TrainerLaunch AsLaunch(const std::vector<RankOutcome>& ranks) {
  TrainerLaunch launch;
  launch.exit_code = 0;
  for (const RankOutcome& rank : ranks) {
    EXPECT_TRUE(rank.status.ok()) << rank.status;
    if (!rank.status.ok()) launch.exit_code = 1;
    launch.rank_parameters.push_back(rank.parameters);
  }
  launch.result = ranks[0].result;
  launch.manifest = ranks[0].manifest;
  return launch;
}

constexpr int kGlobalBatch = 4;

// `config` over `dp` replicas of the global batch, 3 clipped steps.
TrainConfig Clipped(TrainConfig config, int dp) {
  config.set_batch_size(kGlobalBatch / dp);
  config.set_steps(3);
  config.set_lr(3e-3);
  config.set_weight_decay(0.1);
  config.set_max_grad_norm(1.0);
  return config;
}

// zero1 and zero2 over the dp group and four tp ranks, against one rank on
// the same global batch, by the DDP process tests' comparison
// (trainer/tests/ddp_process_check.h; the bound in docs/tp.md): every step's loss
// and norm, every rank's logical parameters equal bit for bit, rank 0's
// against one rank's per tensor. 3 clipped steps.
TEST(TpTraining, Zero1Zero2AndFourTpRanksEqualOneRank) {
  at::set_num_threads(1);
  const TrainerLaunch one =
      AsLaunch(TrainOnThreads(Clipped(TpConfig(1, "single"), 1), 1));
  ASSERT_EQ(one.exit_code, 0);
  struct Layout {
    int tp;
    int dp;
    std::string strategy;
    bool sequence_parallel;
  };
  for (const Layout& layout :
       {Layout{2, 2, "zero1", false}, Layout{2, 2, "zero2", true},
        Layout{4, 1, "ddp", true}, Layout{4, 1, "zero2", false}}) {
    const std::string name =
        absl::StrCat("tp", layout.tp, "_dp", layout.dp, "_", layout.strategy,
                     layout.sequence_parallel ? "_sp" : "");
    SCOPED_TRACE(name);
    TrainConfig config = Clipped(TpConfig(layout.tp, layout.strategy), layout.dp);
    config.set_sequence_parallel(layout.sequence_parallel);
    const TrainerLaunch many =
        AsLaunch(TrainOnThreads(config, layout.tp * layout.dp));
    ASSERT_EQ(many.exit_code, 0);
    const DdpComparison comparison = CompareWithReference(many, one);
    EXPECT_TRUE(comparison.ok()) << comparison.Describe();
    std::cout << name << " vs one rank:\n" << comparison.Describe() << "\n";
  }
}

// The replicated parameters (layout.h) of tp rank `other` that are not bit
// for bit tp rank 0's, in the first tp group (world ranks 0 .. tp-1).
std::vector<std::string> ReplicatedDiffering(
    const std::vector<RankOutcome>& ranks, int other) {
  std::vector<std::string> differing;
  for (const DumpedParameter& p : ranks[0].manifest) {
    if (SplitOf(p.name) != Split::kReplicated) continue;
    if (!at::equal(ranks[0].parameters.narrow(0, p.offset, p.numel),
                   ranks[other].parameters.narrow(0, p.offset, p.numel))) {
      differing.push_back(p.name);
    }
  }
  return differing;
}

// Dropout under tp (docs/tp.md "Dropout"). The masks are counter-based and
// keyed by the global sample, and the tp ranks of a group train the same
// samples: the replicated region (the residual branches after g, without
// SP) draws the whole mask on every rank, the sharded region (this rank's
// heads' attention probabilities; with SP the residual branches on this
// rank's positions) its part of it. So the tp run draws one rank's masks
// and trains as one rank within the dropout-free bound, its replicated
// parameters bit-identical across the group. The negatives: a replicated
// stream per tp rank (Megatron's "same seed across tp" broken) makes the
// replicas differ; a sharded stream shared by the group (Megatron's
// model-parallel fork missing) keeps the replicas equal but not one rank's.
// 3 clipped steps at --dropout=0.1.
TEST(TpTraining, DropoutFollowsTheStreamRule) {
  at::set_num_threads(1);
  auto with_dropout = [](TrainConfig config, int dp) {
    config = Clipped(std::move(config), dp);
    config.set_dropout(0.1);
    return config;
  };
  const TrainerLaunch one =
      AsLaunch(TrainOnThreads(with_dropout(TpConfig(1, "single"), 1), 1));
  ASSERT_EQ(one.exit_code, 0);
  {  // The dropout bites: without it the run differs from the first step.
    const TrainerLaunch plain =
        AsLaunch(TrainOnThreads(Clipped(TpConfig(1, "single"), 1), 1));
    ASSERT_EQ(plain.exit_code, 0);
    ASSERT_NE(plain.result.runs(0).steps(0).loss(),
              one.result.runs(0).steps(0).loss());
  }
  struct Layout {
    int dp;
    std::string strategy;
    bool sequence_parallel;
    TestFault fault;
  };
  for (const Layout& layout :
       {Layout{1, "ddp", false, TestFault::kNone},
        Layout{2, "fsdp", true, TestFault::kNone},
        Layout{1, "ddp", false, TestFault::kReplicatedDropoutPerRank},
        Layout{1, "ddp", false, TestFault::kShardedDropoutShared},
        Layout{1, "ddp", true, TestFault::kShardedDropoutShared}}) {
    const std::string name = absl::StrCat(
        "tp2_dp", layout.dp, "_", layout.strategy,
        layout.sequence_parallel ? "_sp" : "",
        layout.fault == TestFault::kReplicatedDropoutPerRank
            ? " replicated_dropout_per_rank"
            : layout.fault == TestFault::kShardedDropoutShared
                  ? " sharded_dropout_shared"
                  : "");
    SCOPED_TRACE(name);
    TrainConfig config = with_dropout(TpConfig(2, layout.strategy), layout.dp);
    config.set_sequence_parallel(layout.sequence_parallel);
    const std::vector<RankOutcome> ranks =
        TrainOnThreads(config, 2 * layout.dp, nullptr, layout.fault);
    const TrainerLaunch many = AsLaunch(ranks);
    ASSERT_EQ(many.exit_code, 0);
    const std::vector<std::string> differing = ReplicatedDiffering(ranks, 1);
    const DdpComparison comparison = CompareWithReference(many, one);
    std::cout << name << " vs one rank:\n" << comparison.Describe() << "\n";
    switch (layout.fault) {
      case TestFault::kNone:
        EXPECT_TRUE(differing.empty())
            << "replicated parameters differ across the tp group: "
            << absl::StrJoin(differing, ", ");
        EXPECT_TRUE(comparison.ok()) << comparison.Describe();
        break;
      case TestFault::kReplicatedDropoutPerRank:
        // Every replicated tensor of the blocks and ln_f drifts.
        EXPECT_NE(std::find(differing.begin(), differing.end(),
                            "h.0.ln_1.weight"),
                  differing.end())
            << absl::StrJoin(differing, ", ");
        EXPECT_NE(std::find(differing.begin(), differing.end(),
                            "h.1.mlp.c_proj.bias"),
                  differing.end())
            << absl::StrJoin(differing, ", ");
        EXPECT_TRUE(comparison.Failed(DdpCheck::kRanksEqual))
            << comparison.Describe();
        break;
      default:
        // The shared masks are the same on every rank, so the replicas
        // agree, but they are not one rank's masks: step 1's loss differs.
        EXPECT_TRUE(differing.empty()) << absl::StrJoin(differing, ", ");
        EXPECT_TRUE(comparison.Failed(DdpCheck::kLoss)) << comparison.Describe();
        break;
    }
  }
}

// lr = 0 (and so no decay): the parameters stay what the run started from.
TrainConfig Frozen(TrainConfig config) {
  config.set_lr(0);
  config.set_min_lr(0);
  return config;
}

TEST(TpTraining, TheDigestIsTheLogicalModelsAndInitFromWritesIt) {
  at::set_num_threads(1);
  const TrainConfig one_rank = Frozen(TpConfig(1, "single"));
  const GptModel seeded(ModelShapeOf(one_rank), one_rank.seed());
  const GptModel other(ModelShapeOf(one_rank), one_rank.seed() + 1);
  const std::string seeded_digest = ParameterDigest(seeded.parameters());
  const std::string other_digest = ParameterDigest(other.parameters());
  ASSERT_NE(seeded_digest, other_digest);
  hf::OurParameters file;
  for (const NamedParameter& p : other.parameters()) {
    file.emplace_back(p.name, p.tensor.detach().clone());
  }

  // One rank: the digest of what it holds.
  {
    const std::vector<RankOutcome> seeded_run = TrainOnThreads(one_rank, 1);
    ASSERT_TRUE(seeded_run[0].status.ok()) << seeded_run[0].status;
    EXPECT_EQ(seeded_run[0].result.parameter_digest(), seeded_digest);
    const std::vector<RankOutcome> from_file = TrainOnThreads(one_rank, 1, &file);
    ASSERT_TRUE(from_file[0].status.ok()) << from_file[0].status;
    EXPECT_EQ(from_file[0].result.parameter_digest(), other_digest);
  }
  // tp=2 x dp=1 seeded: every rank reports the one-rank model's digest.
  for (const RankOutcome& rank : TrainOnThreads(Frozen(TpConfig(2, "ddp")), 2)) {
    ASSERT_TRUE(rank.status.ok()) << rank.status;
    EXPECT_EQ(rank.result.parameter_digest(), seeded_digest)
        << "the digest is not the logical model's";
  }
  // --init_from under tp, through the tp strategy's pieces.
  for (const auto& [strategy, world_size] :
       std::vector<std::pair<std::string, int>>{{"ddp", 2}, {"fsdp", 4}}) {
    SCOPED_TRACE(absl::StrCat(strategy, " on ", world_size, " ranks, tp=2"));
    for (const RankOutcome& rank :
         TrainOnThreads(Frozen(TpConfig(2, strategy)), world_size, &file)) {
      ASSERT_TRUE(rank.status.ok()) << rank.status;
      EXPECT_EQ(rank.result.parameter_digest(), other_digest)
          << "the model written by --init_from is not the file's";
    }
  }
}

}  // namespace
}  // namespace mtb::tp
