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
#include "trainer/data.h"
#include "trainer/strategy.h"
#include "trainer/strategy/ddp.h"
#include "trainer/strategy/fsdp.h"
#include "trainer/strategy/zero.h"
#include "trainer/test_config.h"
#include "trainer/trainer.h"

namespace mtb::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string TestDir(const std::string& name) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                       "/", name);
  fs::remove_all(dir);
  return dir;
}

// Tiny, with the numbers that make a resume hard: dropout, a cosine schedule
// with warm-up (its decay end given, so that a 3-step run has the 6-step
// run's schedule), clipping that is active, weight decay.
TrainConfig ResumeConfig(const std::string& strategy, int steps) {
  TrainConfig config = TinyConfig();
  config.set_strategy(strategy);
  config.set_grad_sync(strategy == "zero2" || strategy == "fsdp" ? "every"
                                                                 : "last");
  config.set_dropout(0.1);
  config.set_lr_schedule("cosine");
  config.set_lr(3e-3);
  config.set_min_lr(3e-4);
  config.set_lr_warmup_steps(2);
  config.set_lr_decay_steps(6);
  config.set_max_grad_norm(0.5);
  config.set_weight_decay(0.1);
  config.set_batch_size(2);
  config.set_steps(steps);
  return config;
}

std::unique_ptr<Strategy> MakeTestStrategy(const TrainConfig& config,
                                           collective::Communicator* communicator) {
  if (config.strategy() == "single") return std::make_unique<SingleStrategy>();
  if (config.strategy() == "ddp") {
    DdpOptions options = DdpOptionsFromConfig(config.bucket_cap_mb(), config.grad_sync());
    options.first_bucket_cap_bytes = 8 << 10;
    options.bucket_cap_bytes = 16 << 10;
    return std::make_unique<DdpStrategy>(communicator, options);
  }
  if (config.strategy() == "fsdp") {
    // A rank's shard of each unit spans parameters too; gathered per unit.
    return std::make_unique<FsdpStrategy>(
        communicator, FsdpOptionsFromConfig(true, false, config.grad_sync()));
  }
  // Several buckets: a rank's shard is a piece of each, spanning parameters.
  ZeroOptions options = ZeroOptionsFromConfig(config.strategy() == "zero1" ? 1 : 2,
                                              config.bucket_cap_mb(), config.grad_sync());
  options.first_bucket_cap_bytes = 8 << 10;
  options.bucket_cap_bytes = 16 << 10;
  return std::make_unique<ZeroStrategy>(communicator, options);
}

struct RunOutput {
  TrainResult result;               // rank 0's
  std::vector<at::Tensor> params;   // rank 0's final parameters
  absl::Status status;              // rank 0's
};

// Plans (as the binary's main does, before any rank) and runs `config` on
// `world_size` rank threads with checkpoints as `options` say.
RunOutput Train(TrainConfig config, int world_size, const CheckpointOptions& options,
              const std::set<std::string>& given = {"lr_warmup_steps", "lr_decay_steps"},
              trace::TraceRecorder* trace = nullptr,
              std::vector<std::string>* notes = nullptr) {
  at::set_num_threads(1);
  RunOutput out;
  absl::StatusOr<CheckpointPlan> plan = PlanCheckpoints(
      options, &config, world_size,
      [&](absl::string_view flag) { return given.count(std::string(flag)) > 0; });
  if (!plan.ok()) {
    out.status = plan.status();
    return out;
  }
  if (notes != nullptr) *notes = plan->notes;
  const auto data = MakeSyntheticData(config.seed(), config.vocab_size(), config.seq_len());
  auto body = [&](collective::Communicator* communicator, int rank) {
    std::unique_ptr<Strategy> strategy = MakeTestStrategy(config, communicator);
    Checkpointer checkpointer(*plan, config, rank, world_size, communicator);
    RunHooks hooks;
    hooks.checkpointer = &checkpointer;
    if (rank == 0) hooks.trace = trace;
    std::vector<at::Tensor> params;
    hooks.after_last_run = [&](const GptModel& model) {
      for (const NamedParameter& p : model.parameters()) params.push_back(p.tensor.detach().clone());
      return absl::OkStatus();
    };
    absl::StatusOr<TrainResult> result =
        RunTraining(config, RankInfo{rank, world_size}, *strategy, *data, hooks);
    if (rank != 0) {
      EXPECT_TRUE(result.ok()) << "rank " << rank << ": " << result.status();
      return;
    }
    out.status = result.status();
    if (result.ok()) out.result = *result;
    out.params = params;
  };
  if (world_size == 1) {
    body(nullptr, 0);
  } else {
    const absl::Status threads = collective::RunRanksAsThreads(
        world_size, [&](collective::Communicator& c) { body(&c, c.rank()); });
    EXPECT_TRUE(threads.ok()) << threads;
  }
  return out;
}

CheckpointOptions Saving(const std::string& dir, int save_every,
                         const std::string& resume = "") {
  CheckpointOptions options;
  options.dir = dir;
  options.save_every = save_every;
  options.resume = resume;
  return options;
}

std::string FileBytes(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

// Every file of a directory tree by relative path -> SHA-256.
std::map<std::string, std::string> HashTree(const std::string& dir) {
  std::map<std::string, std::string> tree;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) {
      tree[fs::relative(entry.path(), dir).string()] = Sha256Hex(FileBytes(entry.path().string()));
    }
  }
  return tree;
}

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
  }, 2, "rank_00000.bin: corrupt: SHA-256 differs from the manifest's): falling back to step_00000002");
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
