// The trainer's checkpoints end to end on rank threads over Gloo (nothing
// process-global is involved: data and dropout masks are counter-based,
// keyed by seed, step and global sample; no allocator figure is checked).
// Real processes, SIGKILL and the flags are //trainer:trainer_checkpoint_test.
//
// Exact resume: for ddp, zero1, zero2 and fsdp at 2 ranks (dropout 0.1, cosine
// with warm-up, clipping active), 6 continuous steps equal 3 steps + a
// resume to 6 bit for bit: losses, learning rates and norms of steps 4..6,
// the final parameters, and every byte of the step-6 shard files (parameters,
// AdamW m, v and step). Through the trainer's resume: corrupt or missing
// newest checkpoints fall back (saying so) and still end equal; retention and
// ownership; the checkpoint spans in the trace.
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/sha256.h"
#include "common/collective/test_util.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpointer.h"
#include "trainer/checkpoint/plan.h"
#include "trainer/checkpoint/resume_test_util.h"
#include "trainer/data/data.h"
#include "trainer/run/strategy.h"
#include "trainer/strategy/ddp.h"
#include "trainer/strategy/fsdp.h"
#include "trainer/strategy/zero.h"
#include "trainer/tests/test_config.h"
#include "trainer/run/trainer.h"

namespace mtb::checkpoint {
namespace {

namespace fs = std::filesystem;

// Steps `first`.. of `resumed` equal those of `full`, bit for bit, and so do
// the final parameters.
void ExpectResumedEqualsContinuous(const RunOutput& resumed, const RunOutput& full,
                                   int first, const std::string& what) {
  ASSERT_TRUE(resumed.status.ok()) << what << ": " << resumed.status;
  const auto& tail = resumed.result.runs(0).steps();
  const auto& all = full.result.runs(0).steps();
  ASSERT_EQ(tail.size(), all.size() - (first - 1)) << what;
  for (int i = 0; i < tail.size(); ++i) {
    const StepRecord& expected = all[first - 1 + i];
    EXPECT_EQ(tail[i].step(), expected.step()) << what;
    EXPECT_EQ(tail[i].loss(), expected.loss()) << what << " step " << expected.step();
    EXPECT_EQ(tail[i].lr(), expected.lr()) << what << " step " << expected.step();
    EXPECT_EQ(tail[i].grad_norm(), expected.grad_norm()) << what << " step " << expected.step();
  }
  ASSERT_EQ(resumed.params.size(), full.params.size()) << what;
  for (size_t i = 0; i < full.params.size(); ++i) {
    EXPECT_TRUE(at::equal(resumed.params[i], full.params[i])) << what << " parameter " << i;
  }
}

class ExactResume : public ::testing::TestWithParam<const char*> {};

TEST_P(ExactResume, ThreeStepsAndAResumeToSixEqualSixContinuousStepsBitForBit) {
  const std::string strategy = GetParam();
  const std::string full_dir = TestDir("full");
  const std::string part_dir = TestDir("part");
  const RunOutput full = Train(ResumeConfig(strategy, 6), 2, Saving(full_dir, 6));
  ASSERT_TRUE(full.status.ok()) << full.status;
  bool clipped = false;
  for (const StepRecord& step : full.result.runs(0).steps()) clipped |= step.clipped();
  ASSERT_TRUE(clipped) << "clipping must be active for this test to mean something";

  const RunOutput part = Train(ResumeConfig(strategy, 3), 2, Saving(part_dir, 3));
  ASSERT_TRUE(part.status.ok()) << part.status;
  // --steps stays the run's total: resumed at 3 with --steps=6 trains 4..6.
  const RunOutput resumed = Train(ResumeConfig(strategy, 6), 2, Saving(part_dir, 3, "latest"));
  ExpectResumedEqualsContinuous(resumed, full, 4, strategy);
  EXPECT_EQ(resumed.result.checkpoint().resumed_step(), 3);
  EXPECT_EQ(resumed.result.checkpoint().run_id(), part.result.checkpoint().run_id())
      << "a resume inherits the run id";
  // The step-6 shard files hold the parameters and the AdamW m, v and step
  // each rank saved: byte-identical, so the optimizer state is too.
  for (const char* file : {"rank_00000.bin", "rank_00001.bin", "rank_00000.meta",
                           "rank_00001.meta"}) {
    EXPECT_EQ(FileBytes(full_dir + "/step_00000006/" + file),
              FileBytes(part_dir + "/step_00000006/" + file))
        << strategy << " " << file;
  }
  EXPECT_TRUE(Verify(part_dir + "/step_00000006").ok());
}

INSTANTIATE_TEST_SUITE_P(Strategies, ExactResume,
                         ::testing::Values("ddp", "zero1", "zero2", "fsdp"));

TEST(TrainerResume, KeepingTheSavedScheduleSaysSoAndDiffersFromTheLongerSchedule) {
  // The 3-step run's default decay end is step 3; resumed with --steps=6
  // and no --lr_decay_steps, the rate of the steps trained stays that
  // schedule's (decayed to --min_lr), so steps 4..6 differ from a 6-step run:
  // the comparison above can fail.
  TrainConfig short_run = ResumeConfig("single", 3);
  short_run.set_lr_decay_steps(3);
  const std::string dir = TestDir("short");
  ASSERT_TRUE(Train(short_run, 1, Saving(dir, 3)).status.ok());
  const RunOutput full = Train(ResumeConfig("single", 6), 1, Saving(TestDir("full"), 6));
  std::vector<std::string> notes;
  const RunOutput resumed = Train(ResumeConfig("single", 6), 1, Saving(dir, 3, "latest"),
                                /*given=*/{"lr_warmup_steps"}, nullptr, &notes);
  ASSERT_TRUE(resumed.status.ok()) << resumed.status;
  bool said = false;
  for (const std::string& note : notes) {
    said |= absl::StrContains(note, "the learning-rate schedule stays the checkpoint's "
                                    "(--lr_decay_steps=3 (not 6))");
  }
  EXPECT_TRUE(said) << absl::StrJoin(notes, "\n");
  EXPECT_EQ(resumed.result.runs(0).steps(0).lr(), short_run.min_lr());
  EXPECT_NE(resumed.result.runs(0).steps(0).lr(), full.result.runs(0).steps(3).lr());
  EXPECT_NE(resumed.result.runs(0).steps(1).loss(), full.result.runs(0).steps(4).loss());
}

TEST(TrainerResume, TheTimingWarmUpCountsThisProcesssSteps) {
  const std::string dir = TestDir("ckpt");
  TrainConfig config = ResumeConfig("single", 3);
  ASSERT_TRUE(Train(config, 1, Saving(dir, 3)).status.ok());
  config.set_steps(6);
  config.set_timing_warmup_steps(1);
  const RunOutput resumed = Train(config, 1, Saving(dir, 3, "latest"));
  ASSERT_TRUE(resumed.status.ok()) << resumed.status;
  const auto& steps = resumed.result.runs(0).steps();
  ASSERT_EQ(steps.size(), 3);
  EXPECT_FALSE(steps[0].timed()) << "step 4 is this process's first";
  EXPECT_TRUE(steps[1].timed());
}

// A checkpoint at 2 and 4 of a single-rank run (its schedule that of 6 steps).
class BrokenNewest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = TestDir("base");
    ASSERT_TRUE(Train(ResumeConfig("single", 4), 1, Saving(base_, 2)).status.ok());
    full_ = Train(ResumeConfig("single", 6), 1, Saving(TestDir("full"), 6));
    ASSERT_TRUE(full_.status.ok());
  }

  // Copies the base checkpoints, breaks them with `damage`, resumes with
  // --resume=latest: the fallback is said and the run still ends equal.
  void ExpectFallback(const std::string& name, const std::function<void(const std::string&)>& damage,
                      int expected_step, const std::string& expected_note) {
    const std::string dir = TestDir(name);
    fs::copy(base_, dir, fs::copy_options::recursive);
    damage(dir);
    std::vector<std::string> notes;
    const RunOutput resumed = Train(ResumeConfig("single", 6), 1, Saving(dir, 2, "latest"),
                                  {"lr_warmup_steps", "lr_decay_steps"}, nullptr, &notes);
    ASSERT_FALSE(notes.empty()) << name;
    EXPECT_TRUE(absl::StrContains(notes[0], expected_note)) << name << ": " << notes[0];
    EXPECT_EQ(resumed.result.checkpoint().resumed_step(), expected_step) << name;
    ExpectResumedEqualsContinuous(resumed, full_, expected_step + 1, name);
  }

  std::string base_;
  RunOutput full_;
};

TEST_F(BrokenNewest, ACorruptShardFallsBackToThePreviousCheckpointAndEndsEqual) {
  ExpectFallback("flipped", [](const std::string& dir) {
    std::string bytes = FileBytes(dir + "/step_00000004/rank_00000.bin");
    bytes[100] ^= 1;
    ASSERT_TRUE(WriteFileAtomically(dir + "/step_00000004/rank_00000.bin", bytes).ok());
  }, 2, "rank_00000.bin: corrupt: SHA-256 differs from the manifest's in tensor model/wte "
        "(bytes [24, +8192))): falling back to step_00000002");
}

TEST_F(BrokenNewest, ATruncatedShardFallsBack) {
  ExpectFallback("truncated", [](const std::string& dir) {
    fs::resize_file(dir + "/step_00000004/rank_00000.bin", 1000);
  }, 2, "(truncated)): falling back to step_00000002");
}

TEST_F(BrokenNewest, GarbageInLatestFallsBackToTheNewestThatVerifies) {
  ExpectFallback("garbage", [](const std::string& dir) {
    ASSERT_TRUE(WriteFileAtomically(dir + "/latest", "\x7f\x45garbage").ok());
  }, 4, "`latest` is garbage");
}

TEST_F(BrokenNewest, LatestNamingADeletedDirectoryFallsBack) {
  ExpectFallback("deleted", [](const std::string& dir) {
    fs::remove_all(dir + "/step_00000004");
  }, 2, "`latest` names step_00000004, which fails verification");
}

TEST(TrainerRetention, KeepLastTwoOverFiveSavesLeavesTheLastTwoAndNeverAnotherRuns) {
  const std::string dir = TestDir("ckpt");
  // Another run's checkpoint, at a step the new run never saves.
  TrainConfig other = ResumeConfig("single", 7);
  other.set_lr_decay_steps(7);
  ASSERT_TRUE(Train(other, 1, Saving(dir, 7)).status.ok());
  const auto before = HashTree(dir + "/step_00000007");

  // A fresh run there is refused; --overwrite_checkpoints starts one beside.
  const RunOutput refused = Train(ResumeConfig("single", 5), 1, Saving(dir, 1));
  EXPECT_EQ(refused.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status.message(), "holds READY checkpoints of another run"))
      << refused.status;
  CheckpointOptions overwrite = Saving(dir, 1);
  overwrite.overwrite = true;
  overwrite.keep_last = 2;
  trace::TraceRecorder trace(trace::TraceRunInfo{});
  const RunOutput run = Train(ResumeConfig("single", 5), 1, overwrite,
                            {"lr_warmup_steps", "lr_decay_steps"}, &trace);
  ASSERT_TRUE(run.status.ok()) << run.status;

  std::vector<std::string> left;
  for (const CheckpointListing& entry : ListCheckpoints(dir)) left.push_back(entry.name);
  EXPECT_EQ(left, (std::vector<std::string>{"step_00000007", "step_00000005", "step_00000004"}));
  EXPECT_EQ(HashTree(dir + "/step_00000007"), before) << "another run's checkpoint changed";
  EXPECT_EQ(FileBytes(dir + "/latest"), "step_00000005\n");
  EXPECT_NE(run.result.checkpoint().run_id(), ReadManifest(dir + "/step_00000007")->run_id());
  ASSERT_EQ(run.result.checkpoint().saves_size(), 5);
  EXPECT_EQ(run.result.checkpoint().saves(2).pruned(0), "step_00000001");

  // Each save is a write span and a publish span in the trace.
  int writes = 0, publishes = 0;
  const trace::TraceFile file = trace.Build();
  for (const trace::TraceEvent& event : file.traceevents()) {
    writes += event.name() == "checkpoint write";
    publishes += event.name() == "checkpoint publish";
  }
  EXPECT_EQ(writes, 5);
  EXPECT_EQ(publishes, 5);
}

}  // namespace
}  // namespace mtb::checkpoint
