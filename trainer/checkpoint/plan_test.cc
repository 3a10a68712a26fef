// The checkpoint plan (no LibTorch, no ranks): flag rules, the directory,
// ownership, the checkpoint a resume starts from, configuration mismatches
// listed field by field, the schedule kept, --steps as the run's total, and
// the checkpoint fault phases. Checkpoints are written with the on-disk
// library directly.
#include "trainer/checkpoint/plan.h"

#include <unistd.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "gtest/gtest.h"
#include "trainer/checkpoint/checkpoint.h"
#include "common/results/output_path.h"
#include "common/base/sha256.h"
#include "trainer/checkpoint/data_identity.h"
#include "trainer/memory/memory_estimate.h"
#include "trainer/data/token_file.h"
#include "trainer/tests/test_config.h"
#include "trainer/config/config_names.h"

namespace mtb::checkpoint {
namespace {

class PlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(CreateDirectories(root_).ok());
    config_ = TinyConfig();
    config_.set_strategy(TrainConfig::ddp);
    config_.set_steps(10);
  }

  // A published checkpoint of `config` at `step` by `world_size` ranks.
  void Save(int64_t step, const std::string& run_id, const TrainConfig& config,
            int world_size = 2) {
    const std::string staging = root_ + "/" + StagingDirName(step);
    std::vector<RankReport> reports;
    const std::string bytes(8, '\0');
    for (int rank = 0; rank < world_size; ++rank) {
      RankState state;
      state.set_step(step);
      absl::StatusOr<RankReport> report = WriteRankFiles(
          staging, rank, {{"model/w", "float32", {2 * world_size}, 2 * rank, 2, bytes}}, state);
      ASSERT_TRUE(report.ok()) << report.status();
      reports.push_back(*report);
    }
    CheckpointManifest manifest;
    manifest.set_run_id(run_id);
    manifest.set_step(step);
    manifest.set_strategy(ConfigName(config.strategy()));
    manifest.set_world_size(world_size);
    manifest.set_config_json(ToJson(config));
    absl::StatusOr<DataIdentity> data = IdentifyData(config, /*full=*/false);
    ASSERT_TRUE(data.ok()) << data.status();
    *manifest.mutable_data() = *data;
    ASSERT_TRUE(Publish(root_, manifest, reports).ok());
  }

  CheckpointOptions Options(int64_t save_every, const std::string& resume = "") const {
    CheckpointOptions options;
    options.dir = root_;
    options.save_every = save_every;
    options.resume = resume;
    return options;
  }

  absl::StatusOr<CheckpointPlan> Plan(const CheckpointOptions& options,
                                      const std::set<std::string>& given = {},
                                      int world_size = 2) {
    return PlanCheckpoints(options, &config_, world_size, [&](absl::string_view flag) {
      return given.count(std::string(flag)) > 0;
    });
  }

  std::string root_;
  TrainConfig config_;
};

void ExpectInvalid(const absl::Status& status, const std::string& substring) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), substring)) << status.message();
  EXPECT_FALSE(absl::StrContains(status.message(), "\n")) << "one line";
}

TEST_F(PlanTest, FlagRulesNameTheFlag) {
  CheckpointOptions options;
  options.resume = "latest";
  ExpectInvalid(ValidateCheckpointOptions(options, config_),
                "--resume=latest needs --checkpoint_dir");
  options = Options(-1);
  ExpectInvalid(ValidateCheckpointOptions(options, config_),
                "--save_every=-1 must be >= 0 (0: never save)");
  options = Options(2);
  options.keep_last = -1;
  ExpectInvalid(ValidateCheckpointOptions(options, config_),
                "--keep_last=-1 must be >= 0 (0: keep every checkpoint)");
  options = CheckpointOptions{};
  options.save_every = 5;
  ExpectInvalid(ValidateCheckpointOptions(options, config_), "--save_every=5 needs --checkpoint_dir");
  options = Options(2, "latest");
  options.overwrite = true;
  ExpectInvalid(ValidateCheckpointOptions(options, config_),
                "--overwrite_checkpoints starts a new run, --resume=latest continues one");
  TrainConfig repeated = config_;
  repeated.set_repeat(2);
  ExpectInvalid(ValidateCheckpointOptions(Options(2), repeated), "--repeat=2 cannot be used");
  options = CheckpointOptions{};
  options.async_save = true;
  ExpectInvalid(ValidateCheckpointOptions(options, config_),
                "--async_checkpoint needs --checkpoint_dir and --save_every");
  options = Options(0);
  options.async_save = true;
  ExpectInvalid(ValidateCheckpointOptions(options, config_),
                "--async_checkpoint needs --save_every > 0");
  options = Options(2);
  options.keep_last = 0;  // keeps every checkpoint
  EXPECT_TRUE(ValidateCheckpointOptions(options, config_).ok());
  // --keep_last on a run that never saves: refused; the default is not.
  options = CheckpointOptions{};
  options.keep_last = 2;
  EXPECT_TRUE(ValidateCheckpointOptions(options, config_).ok());
  options.keep_last_given = true;
  ExpectInvalid(ValidateCheckpointOptions(options, config_),
                "--keep_last=2 needs --checkpoint_dir: this run saves no checkpoint");
  // With --checkpoint_dir and no --save_every it prunes what a preemption
  // notice saves: it applies.
  options = Options(0);
  options.keep_last = 1;
  options.keep_last_given = true;
  EXPECT_TRUE(ValidateCheckpointOptions(options, config_).ok());
  // A directory saved into only on a preemption notice is a schedule of its
  // own: accepted, and the plan says so at start.
  options = Options(0);
  EXPECT_TRUE(ValidateCheckpointOptions(options, config_).ok());
  absl::StatusOr<CheckpointPlan> preempt_only = Plan(options);
  ASSERT_TRUE(preempt_only.ok()) << preempt_only.status();
  ASSERT_EQ(preempt_only->notes.size(), 1u);
  EXPECT_NE(preempt_only->notes[0].find(
                "without --save_every: a checkpoint is saved only on a preemption notice"),
            std::string::npos)
      << preempt_only->notes[0];
  options = Options(0, "latest");
  EXPECT_TRUE(ValidateCheckpointOptions(options, config_).ok());
}

TEST_F(PlanTest, AnUnwritableDirectoryIsRefused) {
  ASSERT_TRUE(WriteFileAtomically(root_ + "/file", "x").ok());
  CheckpointOptions options = Options(2);
  options.dir = root_ + "/file";
  ExpectInvalid(Plan(options).status(), "--checkpoint_dir=" + root_ + "/file: cannot write there");
  options.dir = root_ + "/file/below";
  ExpectInvalid(Plan(options).status(), "cannot write there");
}

TEST_F(PlanTest, AnotherRunsReadyCheckpointBlocksAFreshRunUnlessOverwrite) {
  Save(4, "run-old", config_);
  ExpectInvalid(Plan(Options(3)).status(),
                "holds READY checkpoints of another run (run run-old: step_00000004): pass "
                "--resume=latest");
  CheckpointOptions overwrite = Options(3);
  overwrite.overwrite = true;
  absl::StatusOr<CheckpointPlan> plan = Plan(overwrite);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->resuming());
  EXPECT_TRUE(plan->run_id.empty()) << "a new run id";
  // ... but never at a step it would have to replace.
  overwrite.save_every = 2;
  ExpectInvalid(Plan(overwrite).status(),
                "--overwrite_checkpoints: this run would save step_00000004");
  // A staging directory without READY blocks nothing.
  ASSERT_TRUE(CreateDirectories(root_ + "/other/.step_00000002.tmp").ok());
  CheckpointOptions elsewhere = Options(3);
  elsewhere.dir = root_ + "/other";
  EXPECT_TRUE(Plan(elsewhere).ok());
}

TEST_F(PlanTest, ResumeLatestWithNoCheckpointYetStartsFromStepZero) {
  absl::StatusOr<CheckpointPlan> plan = Plan(Options(2, "latest"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->resuming());
  ASSERT_EQ(plan->notes.size(), 1u);
  EXPECT_TRUE(absl::StrContains(plan->notes[0], "holds no checkpoint yet: this run starts "
                                                "from step 0"));
}

TEST_F(PlanTest, AResumeInheritsTheRunIdAndStep) {
  Save(4, "run-a", config_);
  absl::StatusOr<CheckpointPlan> plan = Plan(Options(2, "latest"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->resume_dir, root_ + "/step_00000004");
  EXPECT_EQ(plan->run_id, "run-a");
  EXPECT_EQ(plan->start_step, 4);
  EXPECT_TRUE(plan->SavesAt(6, 10));
  EXPECT_TRUE(plan->SavesAt(10, 10)) << "the last step is always saved";
  EXPECT_FALSE(plan->SavesAt(5, 10));
}

TEST_F(PlanTest, MismatchesAreListedFieldByField) {
  Save(4, "run-a", config_);
  config_.set_d_model(64);               // model shape
  config_.set_strategy(TrainConfig::zero1);         // strategy
  config_.set_precision(TrainConfig::bf16);         // precision
  config_.set_beta2(0.95);               // optimizer
  config_.set_lr_schedule(TrainConfig::cosine);     // schedule
  config_.set_seed(8);                   // seed
  const absl::Status status = Plan(Options(2, "latest"), {}, /*world_size=*/3).status();
  for (const char* line :
       {"does not fit this run: ", "--d_model: checkpoint 32, this run 64",
        "--precision: checkpoint fp32, this run bf16", "--beta2: checkpoint 0.999, this run 0.95",
        "--lr_schedule: checkpoint constant, this run cosine", "--seed: checkpoint 7, this run 8",
        "global batch (world size x --batch_size x --grad_accum): checkpoint 2 x 4 x 1 = 8, "
        "this run 3 x 4 x 1 = 12"}) {
    ExpectInvalid(status, line);
  }
  EXPECT_FALSE(absl::StrContains(status.message(), "--strategy:"))
      << "the strategy is part of the layout, which may change";
}

TEST_F(PlanTest, ALayoutChangeWithTheSameGlobalBatchIsAReshardThatIsNotExact) {
  Save(4, "run-a", config_);  // ddp, 2 ranks x 4
  config_.set_strategy(TrainConfig::zero2);
  config_.set_grad_sync("every");
  config_.set_batch_size(1);
  config_.set_grad_accum(2);
  absl::StatusOr<CheckpointPlan> plan = Plan(Options(2, "latest"), {}, /*world_size=*/4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->resharding());
  EXPECT_FALSE(plan->resume_exact);
  EXPECT_EQ(plan->saved_world_size, 2);
  EXPECT_EQ(plan->saved_config.strategy(), TrainConfig::ddp);
  EXPECT_EQ(plan->layout_changes,
            (std::vector<std::string>{"world size 2 -> 4", "--batch_size 4 -> 1",
                                      "--grad_accum 1 -> 2", "--strategy ddp -> zero2",
                                      "--grad_sync \"last\" -> \"every\""}));
  EXPECT_TRUE(absl::StrContains(plan->inexact_reason,
                                "resumed onto another layout (world size 2 -> 4, "))
      << plan->inexact_reason;
  EXPECT_TRUE(absl::StrContains(plan->inexact_reason, "gradients are summed in another order"));
  bool said = false;
  for (const std::string& note : plan->notes) said |= absl::StrContains(note, "not exact: ");
  EXPECT_TRUE(said);

  // One rank with the whole global batch is a reshard too; the same layout
  // is exact.
  config_.set_batch_size(8);
  config_.set_grad_accum(1);
  config_.set_strategy(TrainConfig::ddp);
  config_.set_grad_sync("last");
  plan = Plan(Options(2, "latest"), {}, /*world_size=*/1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->resume_exact);
  config_.set_batch_size(4);
  plan = Plan(Options(2, "latest"), {}, /*world_size=*/2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->resharding());
  EXPECT_TRUE(plan->resume_exact);
  EXPECT_TRUE(plan->inexact_reason.empty());
}

TEST_F(PlanTest, StepsLoggingAndThreadsMayChange) {
  Save(4, "run-a", config_);
  config_.set_steps(20);
  config_.set_log_every(5);
  config_.set_intra_op_threads(3);
  absl::StatusOr<CheckpointPlan> plan = Plan(Options(2, "latest"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(absl::StrContains(plan->notes.back(),
                                "the checkpoint's run had --steps=10; this run trains steps 5..20"))
      << plan->notes.back();
}

TEST_F(PlanTest, AnExactRunsReshardIsExact) {
  config_.set_reduction(TrainConfig::exact);
  config_.set_exact_chunk(1);
  Save(4, "run-a", config_);  // 2 ranks x 4
  config_.set_batch_size(2);
  absl::StatusOr<CheckpointPlan> plan = Plan(Options(2, "latest"), {}, /*world_size=*/4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->resharding());
  EXPECT_TRUE(plan->resume_exact);
  EXPECT_TRUE(plan->inexact_reason.empty());
  // Float mode: the same reshard is not exact (above); the mode itself may
  // not change on a resume.
  config_.set_reduction(TrainConfig::float_);
  ExpectInvalid(Plan(Options(2, "latest"), {}, 4).status(),
                "--reduction: checkpoint exact, this run float");
}

TEST_F(PlanTest, AnExactRunRefusesAnotherThreadCount) {
  config_.set_reduction(TrainConfig::exact);
  config_.set_exact_chunk(1);
  Save(4, "run-a", config_);
  config_.set_intra_op_threads(config_.intra_op_threads() + 1);
  ExpectInvalid(Plan(Options(2, "latest")).status(),
                absl::StrCat("--intra_op_threads: checkpoint ",
                             config_.intra_op_threads() - 1, ", this run ",
                             config_.intra_op_threads()));
}

TEST_F(PlanTest, ALargerStepsKeepsTheSavedScheduleOrRefusesAnotherGivenOne) {
  config_.set_lr_schedule(TrainConfig::cosine);
  config_.set_lr_decay_steps(10);  // resolved from --steps=10
  Save(4, "run-a", config_);
  config_.set_steps(20);
  config_.set_lr_decay_steps(20);  // what --steps=20 would resolve to
  absl::StatusOr<CheckpointPlan> plan = Plan(Options(2, "latest"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(config_.lr_decay_steps(), 10);
  bool said = false;
  for (const std::string& note : plan->notes) {
    said |= absl::StrContains(note, "the learning-rate schedule stays the checkpoint's "
                                    "(--lr_decay_steps=10 (not 20))");
  }
  EXPECT_TRUE(said);
  config_.set_lr_decay_steps(20);
  ExpectInvalid(Plan(Options(2, "latest"), {"lr_decay_steps"}).status(),
                "--lr_decay_steps: checkpoint 10, this run 20");
}

TEST_F(PlanTest, StepsIsTheRunsTotalAndTheTimingWarmUpFitsThisProcesssSteps) {
  Save(4, "run-a", config_);
  config_.set_steps(3);
  ExpectInvalid(Plan(Options(2, "latest")).status(),
                "is at step 4, beyond --steps=3, the run's total (give --steps=4 to load it "
                "and train nothing, or more to continue)");
  config_.set_steps(5);
  config_.set_timing_warmup_steps(2);
  ExpectInvalid(Plan(Options(2, "latest"), {"timing_warmup_steps"}).status(),
                "--timing_warmup_steps=2 must be < the 1 step(s) this process runs");
  absl::StatusOr<CheckpointPlan> plan = Plan(Options(2, "latest"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(config_.timing_warmup_steps(), 0);
}

TEST_F(PlanTest, StepsEqualToTheCheckpointsTrainsNothingAndNeverSavesOverIt) {
  Save(4, "run-a", config_);
  config_.set_steps(4);
  // Saving step 4 into the directory it loads from would replace it.
  ExpectInvalid(Plan(Options(1, "latest")).status(),
                "equals its step, so this run trains nothing and would save step_00000004 "
                "over the checkpoint it loads; give another --checkpoint_dir");
  ExpectInvalid(Plan(Options(1, root_ + "/step_00000004")).status(), "over the checkpoint it loads");
  // Loading only (no save) is fine; so is saving the copy elsewhere.
  absl::StatusOr<CheckpointPlan> plan = Plan(Options(0, "latest"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->trains_nothing(4));
  EXPECT_TRUE(absl::StrContains(plan->notes.back(), "this run trains nothing (give --save_every=1"))
      << plan->notes.back();
  CheckpointOptions elsewhere = Options(1, root_ + "/step_00000004");
  elsewhere.dir = root_ + "/resharded";
  plan = Plan(elsewhere, {}, /*world_size=*/1);
  ASSERT_FALSE(plan.ok()) << "the global batch must still match";
  config_.set_batch_size(8);
  plan = Plan(elsewhere, {}, /*world_size=*/1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->trains_nothing(4));
  EXPECT_TRUE(plan->SavesAt(4, 4));
  EXPECT_EQ(plan->run_id, "run-a");
  EXPECT_TRUE(absl::StrContains(plan->notes.back(), "and saves it at once in this run's layout under " +
                                                        root_ + "/resharded"))
      << plan->notes.back();
}

TEST_F(PlanTest, AnExplicitPathThatDoesNotVerifyIsRefusedWithoutFallback) {
  Save(2, "run-a", config_);
  Save(4, "run-a", config_);
  ASSERT_EQ(::unlink((root_ + "/step_00000004/READY").c_str()), 0);
  ExpectInvalid(Plan(Options(2, root_ + "/step_00000004")).status(),
                "step_00000004: no READY: the save never completed");
  // latest falls back, saying so.
  absl::StatusOr<CheckpointPlan> plan = Plan(Options(2, "latest"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->start_step, 2);
  EXPECT_TRUE(absl::StrContains(plan->notes[0], "falling back to step_00000002")) << plan->notes[0];
}

TEST_F(PlanTest, AResumePathThatIsMissingOrARootIsSaidSo) {
  Save(2, "run-a", config_);
  ExpectInvalid(Plan(Options(2, root_ + "/step_00000009")).status(),
                "--resume=" + root_ + "/step_00000009: not found (give a checkpoint directory "
                "ROOT/step_NNNNNNNN, or --resume=latest)");
  ExpectInvalid(Plan(Options(2, root_)).status(),
                "--resume=" + root_ + ": is a checkpoint root (it holds `latest` or "
                "step_NNNNNNNN directories), not one checkpoint: give --checkpoint_dir=" +
                    root_ + " --resume=latest, or --resume=" + root_ + "/step_NNNNNNNN");
  EXPECT_TRUE(Plan(Options(2, root_ + "/step_00000002")).ok());
}

TEST_F(PlanTest, RanksTrustTheLaunchersVerdictOnTheSameManifestOnly) {
  Save(2, "run-a", config_);
  ASSERT_EQ(::unsetenv("RANK"), 0);
  ASSERT_EQ(::unsetenv(kVerifiedCheckpointEnv), 0);
  // The launcher (no RANK) verifies in full and hands the digest down.
  absl::StatusOr<CheckpointPlan> launcher = Plan(Options(2, "latest"));
  ASSERT_TRUE(launcher.ok()) << launcher.status();
  ASSERT_NE(std::getenv(kVerifiedCheckpointEnv), nullptr);
  EXPECT_EQ(std::string(std::getenv(kVerifiedCheckpointEnv)), launcher->resume_manifest_sha256);
  // A payload byte flipped after that is what only hashing sees: a rank
  // with the launcher's digest does not hash again ...
  std::string bytes = *ReadFileToString(root_ + "/step_00000002/rank_00000.bin");
  bytes[30] ^= 1;
  ASSERT_TRUE(WriteFileAtomically(root_ + "/step_00000002/rank_00000.bin", bytes).ok());
  ASSERT_EQ(::setenv("RANK", "0", 1), 0);
  EXPECT_TRUE(Plan(Options(2, "latest")).ok());
  // ... a rank given another digest, or a process that is no rank, does.
  ASSERT_EQ(::setenv(kVerifiedCheckpointEnv, std::string(64, 'a').c_str(), 1), 0);
  ExpectInvalid(Plan(Options(2, root_ + "/step_00000002")).status(),
                "rank_00000.bin: corrupt: SHA-256 differs");
  ASSERT_EQ(::unsetenv("RANK"), 0);
  ASSERT_EQ(::setenv(kVerifiedCheckpointEnv, launcher->resume_manifest_sha256.c_str(), 1), 0);
  ExpectInvalid(Plan(Options(2, root_ + "/step_00000002")).status(),
                "rank_00000.bin: corrupt: SHA-256 differs");
  ASSERT_EQ(::unsetenv(kVerifiedCheckpointEnv), 0);
}

TEST_F(PlanTest, AnOutputOntoTheResumeCheckpointOrLatestIsRefused) {
  Save(2, "run-a", config_);
  absl::StatusOr<CheckpointPlan> plan = Plan(Options(2, "latest"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<NamedPath> outputs = CheckpointOutputs(*plan);
  outputs.push_back({"--out", root_ + "/./latest"});
  ExpectInvalid(CheckOutputsAgainstInputs(outputs, CheckpointInputs(*plan)),
                "--out=" + root_ + "/./latest and --checkpoint_dir's `latest`=" + root_ +
                    "/latest are the same file");
  outputs.back().path = root_ + "/step_00000002/../step_00000002/rank_00001.bin";
  ExpectInvalid(CheckOutputsAgainstInputs(outputs, CheckpointInputs(*plan)),
                "is the same file as the resume checkpoint " + root_ +
                    "/step_00000002's rank_00001.bin");
  // A run that does not save reads `latest` only.
  plan->options.save_every = 0;
  outputs = {{"--out", root_ + "/latest"}};
  ExpectInvalid(CheckOutputsAgainstInputs(outputs, CheckpointInputs(*plan)),
                "is the same file as --checkpoint_dir's `latest`");
  outputs = {{"--out", root_ + "/result.json"}};
  EXPECT_TRUE(CheckOutputsAgainstInputs(outputs, CheckpointInputs(*plan)).ok());
}

TEST_F(PlanTest, ADirectoryThatCannotHoldOneSaveIsRefusedNamingBothSizes) {
  absl::StatusOr<CheckpointPlan> plan = Plan(Options(2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int64_t save_bytes = 12 * GptParameterCount(config_);
  // 10 steps, a save every 2: 5 saves; --keep_last=3 holds 4 at once.
  EXPECT_TRUE(CheckCheckpointSpace(&*plan, config_, 4 * save_bytes).ok());
  EXPECT_TRUE(plan->notes.empty());
  EXPECT_TRUE(CheckCheckpointSpace(&*plan, config_, save_bytes).ok());
  ASSERT_EQ(plan->notes.size(), 1u);
  EXPECT_TRUE(absl::StrContains(plan->notes[0], "less than the 4 checkpoints of " +
                                                    Mebibytes(save_bytes) +
                                                    " this run keeps at once (--keep_last=3)"))
      << plan->notes[0];
  ExpectInvalid(CheckCheckpointSpace(&*plan, config_, save_bytes - 1),
                "--checkpoint_dir=" + root_ + ": not enough free space for one save: a "
                "checkpoint of this run takes " + Mebibytes(save_bytes) +
                    ", the file system has " + Mebibytes(save_bytes - 1) + " free");
  // A run that saves nothing needs no space.
  plan->options.save_every = 0;
  EXPECT_TRUE(CheckCheckpointSpace(&*plan, config_, 0).ok());
}

TEST_F(PlanTest, AResumeOnOtherDataIsRefusedNamingWhatDiffersUnlessAllowed) {
  const std::string data = root_ + "_data/tokens.bin";
  ASSERT_TRUE(WriteFileAtomically(data, EncodeTokenFile(std::vector<uint16_t>(300, 7))).ok());
  config_.set_data(data);
  Save(2, "run-a", config_);
  absl::StatusOr<CheckpointPlan> same = Plan(Options(2, "latest"));
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->data_identity.digest_kind(), "sha256");
  EXPECT_EQ(same->data_identity.tokens(), 300);
  EXPECT_TRUE(same->data_changes.empty());
  // The same path, other tokens of the same size: only the digest differs.
  ASSERT_TRUE(WriteFileAtomically(data, EncodeTokenFile(std::vector<uint16_t>(300, 8))).ok());
  ExpectInvalid(Plan(Options(2, "latest")).status(),
                "was trained on other data: token file sha256: checkpoint ");
  ExpectInvalid(Plan(Options(2, "latest")).status(), "give --allow_data_change");
  // More tokens: size and count are named.
  ASSERT_TRUE(WriteFileAtomically(data, EncodeTokenFile(std::vector<uint16_t>(400, 7))).ok());
  ExpectInvalid(Plan(Options(2, "latest")).status(),
                "token file size: checkpoint 1624 bytes, this run 1824 bytes; token count: "
                "checkpoint 300, this run 400");
  // Deliberately: allowed, said, and kept for the result.
  CheckpointOptions allowed = Options(2, "latest");
  allowed.allow_data_change = true;
  absl::StatusOr<CheckpointPlan> changed = Plan(allowed);
  ASSERT_TRUE(changed.ok()) << changed.status();
  ASSERT_EQ(changed->data_changes.size(), 3u);
  EXPECT_TRUE(absl::StrContains(changed->notes.back(), "--allow_data_change: continuing on "
                                                       "other data (token file size"))
      << changed->notes.back();
  // The same bytes at another path are the same data.
  ASSERT_TRUE(WriteFileAtomically(data, EncodeTokenFile(std::vector<uint16_t>(300, 7))).ok());
  const std::string moved = root_ + "_data/moved.bin";
  ASSERT_EQ(::rename(data.c_str(), moved.c_str()), 0);
  config_.set_data(moved);
  EXPECT_TRUE(Plan(Options(2, "latest")).ok());
  // Synthetic data after a token file is another kind.
  config_.set_data("synthetic");
  ExpectInvalid(Plan(Options(2, "latest")).status(),
                "data kind: checkpoint token_file, this run synthetic");
}

TEST(DataIdentity, LargeFilesAreFingerprintedUnlessFullIsAsked) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/large.bin";
  constexpr int64_t kThreshold = int64_t{4} << 20;
  std::string bytes(kThreshold + 1, 'x');
  ASSERT_TRUE(WriteFileAtomically(path, bytes).ok());
  TrainConfig config = TinyConfig();
  config.set_data(path);
  absl::StatusOr<DataIdentity> sampled = IdentifyData(config, /*full=*/false, kThreshold);
  ASSERT_TRUE(sampled.ok()) << sampled.status();
  EXPECT_EQ(sampled->digest_kind(), "sampled-sha256");
  EXPECT_EQ(sampled->size(), kThreshold + 1);
  // A byte inside a sampled block changes the fingerprint.
  bytes[bytes.size() - 1] = 'y';
  ASSERT_TRUE(WriteFileAtomically(path, bytes).ok());
  absl::StatusOr<DataIdentity> edited = IdentifyData(config, /*full=*/false, kThreshold);
  ASSERT_TRUE(edited.ok());
  EXPECT_NE(edited->digest(), sampled->digest());
  absl::StatusOr<DataIdentity> full = IdentifyData(config, /*full=*/true, kThreshold);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->digest_kind(), "sha256");
  EXPECT_EQ(full->digest(), Sha256Hex(bytes));
  ::unlink(path.c_str());
}

TEST_F(PlanTest, CheckpointFaultPhasesNeedASaveAtThatStep) {
  absl::StatusOr<std::vector<Fault>> faults =
      ParseFaults("kill:rank=1,step=4,phase=checkpoint_write", TrainerFaultGrammar());
  ASSERT_TRUE(faults.ok());
  CheckpointPlan none;
  ExpectInvalid(ValidateCheckpointFaults(*faults, none, 10),
                "the run saves no checkpoint (give --checkpoint_dir and --save_every)");
  absl::StatusOr<CheckpointPlan> plan = Plan(Options(3));
  ASSERT_TRUE(plan.ok());
  ExpectInvalid(ValidateCheckpointFaults(*faults, *plan, 10),
                "the run does not save after step 4 (it saves every --save_every=3 steps and "
                "after the last, 10)");
  plan->options.save_every = 2;
  EXPECT_TRUE(ValidateCheckpointFaults(*faults, *plan, 10).ok());
  faults = ParseFaults("kill:rank=1,step=4,phase=checkpoint_before_latest", TrainerFaultGrammar());
  ExpectInvalid(ValidateCheckpointFaults(*faults, *plan, 10),
                "only rank 0 publishes a checkpoint");
  // corrupt names the checkpoint of a step, which must be one the run saves.
  faults = ParseFaults("corrupt:rank=1,step=3", TrainerFaultGrammar());
  ExpectInvalid(ValidateCheckpointFaults(*faults, none, 10),
                "the run saves no checkpoint (give --checkpoint_dir and --save_every), so "
                "there is none to corrupt");
  ExpectInvalid(ValidateCheckpointFaults(*faults, *plan, 10),
                "the run does not save after step 3");
  faults = ParseFaults("corrupt:rank=1,step=4", TrainerFaultGrammar());
  EXPECT_TRUE(ValidateCheckpointFaults(*faults, *plan, 10).ok());
}

}  // namespace
}  // namespace mtb::checkpoint
