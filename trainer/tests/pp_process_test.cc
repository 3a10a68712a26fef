// Pipeline parallelism with real processes: the trainer launches ranks of
// itself that pass activations and gradients over Gloo, and each run is
// compared with one rank on the same global batch by CompareWithReference
// (trainer/tests/ddp_process_check.cc: every step's loss and norm, every
// rank's gathered model equal bit for bit, rank 0's parameters per tensor
// within the derived tiers), over five steps clipped from step 1 on.
//
// A rank launch costs about as much as the training here, so each property
// that needs processes gets one launch, sharing one one-rank reference (run
// as a world of one, without a launcher process):
//  - pp=4 under 1F1B (6 micro-batches), traced: the schedule's bound on the
//    micro-batches in flight per stage, its activation bytes, the spans;
//  - pp=2 x dp=2 under GPipe (zero1 over each stage's dp group, 2
//    micro-batches per pipeline), with --metrics_jsonl;
//  - pp=2 under 1F1B at one micro-batch, a stage killed and restarted by
//    --max_restarts: bit for bit with one rank.
// So GPipe (pp=2 x dp=2) and 1F1B (pp=4, and pp=2 at one micro-batch) and
// both sizes run as processes.
// Every pp x schedule x micro-batch combination, the bit-for-bit cases, the
// unsummed tied embedding (the negative) and a pp=2 x dp=2 checkpoint
// resumed at pp=1 and pp=4 are //trainer/pipeline:pipeline_training_test's
// (rank threads, the same code and tiers); pp x tp is on rank threads only
// (pp_tp_training_test, and pipeline_training_test with dropout).
// Bad --pp input is refused in one line, exit 2, before any rank starts: one
// launcher invocation per refusal, none starts a rank.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "trainer/tests/ddp_process_check.h"
#include "trainer/train_result.pb.h"

namespace mtb {
namespace {

// `dp` pipelines of `stages` stages; each pipeline takes the global batch
// over `dp`.
std::vector<std::string> PipelineFlags(int stages, int dp,
                                       const std::string& schedule,
                                       int micro_batches) {
  std::vector<std::string> flags = TinyDdpFlags();
  flags.push_back(absl::StrCat("--batch_size=", kTinyGlobalBatch / dp));
  // Clipped from step 1 on (the norms are ~1-2): the clipping coefficient,
  // computed from the pipelined norm, is part of what is compared.
  flags.push_back("--max_grad_norm=0.5");
  if (stages > 1) {
    flags.push_back(absl::StrCat("--pp=", stages));
    flags.push_back(absl::StrCat("--pp_schedule=", schedule));
    flags.push_back(absl::StrCat("--pp_microbatches=", micro_batches));
  }
  return flags;
}

// A port nothing listens on now (the kernel's pick for port 0).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  close(fd);
  return ntohs(address.sin_port);
}

// One rank on its own: the trainer binary started as the one worker of a
// world of one (RANK=0, WORLD_SIZE=1 and a free MASTER_PORT in the
// environment it inherits: docs/launch.md), with no launcher process in
// front of it. The same run as RunTrainer(name, 1, flags), bit for bit, at
// about half its cost.
TrainerLaunch RunOneRank(const std::string& name,
                         const std::vector<std::string>& flags) {
  const std::vector<std::pair<std::string, std::string>> environment = {
      {"RANK", "0"},
      {"WORLD_SIZE", "1"},
      {"MASTER_ADDR", "127.0.0.1"},
      {"MASTER_PORT", absl::StrCat(FreePort())},
      {"OMP_NUM_THREADS", "1"}};
  for (const auto& [variable, value] : environment) {
    setenv(variable.c_str(), value.c_str(), /*overwrite=*/1);
  }
  TrainerLaunch launch = RunTrainer(name, 1, flags);
  for (const auto& [variable, value] : environment) unsetenv(variable.c_str());
  return launch;
}

const TrainerLaunch& Reference() {
  static const TrainerLaunch* reference =
      new TrainerLaunch(RunOneRank("one_rank", PipelineFlags(1, 1, "", 1)));
  return *reference;
}

// Launches `stages` x `dp` x `tp` ranks and expects one rank's run within
// the tiers; returns the launch for further checks.
TrainerLaunch ExpectEqualsOneRank(int stages, int dp, int tp,
                                  const std::string& schedule,
                                  int micro_batches,
                                  const std::vector<std::string>& extra_flags) {
  const std::string name = absl::StrCat("pp", stages, "_dp", dp, "_tp", tp,
                                        "_", schedule, "_m", micro_batches);
  SCOPED_TRACE(name);
  const TrainerLaunch& one = Reference();
  EXPECT_EQ(one.exit_code, 0) << one.output;
  if (one.exit_code != 0) return {};
  int clipped = 0;
  for (const StepRecord& step : one.result.runs(0).steps()) clipped += step.clipped();
  EXPECT_GE(clipped, 3) << "the reference should clip most steps";
  std::vector<std::string> flags =
      PipelineFlags(stages, dp, schedule, micro_batches);
  if (tp > 1) flags.push_back(absl::StrCat("--tp=", tp));
  flags.insert(flags.end(), extra_flags.begin(), extra_flags.end());
  TrainerLaunch pipelined = RunTrainer(name, stages * dp * tp, flags);
  EXPECT_EQ(pipelined.exit_code, 0) << pipelined.output;
  if (pipelined.exit_code != 0) return pipelined;
  EXPECT_EQ(pipelined.result.run_context().world_size(), stages * dp * tp);
  EXPECT_EQ(pipelined.result.model().tokens_per_step(),
            one.result.model().tokens_per_step());
  const DdpComparison comparison = CompareWithReference(pipelined, one);
  EXPECT_TRUE(comparison.ok()) << comparison.Describe();
  std::cout << name << " vs 1 rank:\n" << comparison.Describe() << "\n";
  // Activations per stage (docs/pipeline.md "Memory"): the micro-batches in
  // flight are the schedule's bound (GPipe m, 1F1B min(p - s, m)), and with
  // one rank per process the bytes held at the peak are that many
  // micro-batches' (half a micro-batch either way for allocations of other
  // threads), which tells 1F1B's p on stage 0 from GPipe's m.
  EXPECT_EQ(pipelined.result.pipeline_stages_size(), stages);
  for (const PipelineStageMemory& stage : pipelined.result.pipeline_stages()) {
    SCOPED_TRACE(absl::StrCat("stage ", stage.stage()));
    EXPECT_EQ(stage.peak_in_flight(), schedule == "gpipe"
                                          ? stage.gpipe_bound()
                                          : stage.one_f_one_b_bound());
    EXPECT_EQ(stage.gpipe_bound(), micro_batches);
    EXPECT_EQ(stage.one_f_one_b_bound(),
              std::min(stages - stage.stage(), micro_batches));
    const double bytes = static_cast<double>(stage.micro_batch_activation_bytes());
    EXPECT_GT(bytes, 0) << "one rank per process: the allocator counts";
    EXPECT_NEAR(static_cast<double>(stage.peak_activation_bytes()),
                stage.peak_in_flight() * bytes, bytes / 2)
        << "one micro-batch holds " << bytes << " bytes";
    EXPECT_GT(stage.owned_parameters(), 0);
  }
  return pipelined;
}

// 1F1B at 4 stages with more micro-batches than stages: stage 0 holds 4 in
// flight, not GPipe's 6. Traced too: every stage's trace has its forward
// and backward spans per micro-batch, named by stage and micro-batch.
TEST(Pipeline, FourStagesUnder1f1bEqualOneRank) {
  const std::string traces = LaunchDirectory("pp4_traces");
  const TrainerLaunch pipelined =
      ExpectEqualsOneRank(4, 1, 1, "1f1b", 6, {"--trace_dir=" + traces});
  ASSERT_EQ(pipelined.exit_code, 0);
  for (int stage = 0; stage < 4; ++stage) {
    absl::StatusOr<std::string> trace =
        ReadFileToString(absl::StrCat(traces, "/rank_", stage, ".trace.json"));
    ASSERT_TRUE(trace.ok()) << trace.status();
    for (const std::string& expected :
         {std::string("ProfilerStep#5"), std::string("\"forward\""),
          std::string("\"backward\""), std::string("\"micro_batch\"")}) {
      EXPECT_NE(trace->find(expected), std::string::npos)
          << "stage " << stage << ": " << expected;
    }
    // Pretty-printed or compact JSON.
    EXPECT_TRUE(
        trace->find(absl::StrCat("\"stage\": \"", stage, "\"")) !=
            std::string::npos ||
        trace->find(absl::StrCat("\"stage\":\"", stage, "\"")) !=
            std::string::npos)
        << "stage " << stage;
  }
}

// pp=2 x dp=2: each stage's gradient reduced over its two replicas by zero1
// (reduce-scatter, sharded AdamW, all-gather over the stage's own
// parameters, as over a whole model), GPipe with 2 micro-batches per
// pipeline; --metrics_jsonl writes rank 0's line per step.
TEST(Pipeline, TwoStagesTimesTwoReplicasUnderGpipeEqualOneRank) {
  const std::string metrics = LaunchDirectory("pp2_dp2_metrics.jsonl");
  const TrainerLaunch pipelined = ExpectEqualsOneRank(
      2, 2, 1, "gpipe", 2, {"--strategy=zero1", "--metrics_jsonl=" + metrics});
  ASSERT_EQ(pipelined.exit_code, 0);
  absl::StatusOr<std::string> lines = ReadFileToString(metrics);
  ASSERT_TRUE(lines.ok()) << lines.status();
  EXPECT_EQ(std::count(lines->begin(), lines->end(), '\n'), 5) << *lines;
}

// Faults and restarts (docs/pipeline.md "Faults and restarts"): pp=2 at one
// micro-batch, where a pipelined run is one rank's bit for bit
// (trainer/pipeline/pipeline_training.h says why), saving every second
// step. Rank 1 (the last stage) SIGKILLed by --fault=kill in the backward of
// step 4 with --max_restarts=1: the launcher restarts both ranks with
// --resume=latest, the restart resumes from step 2, and the job's steps 3
// to 5 (loss bits, norms, rates) and both ranks' final models equal the
// one-rank run bit for bit: the same layout resumes exactly (so this is
// also the pp=2 process run equal to one rank). The restart history names
// the kill, the resume point and the step lost. The negative (a resume
// leaving the last stage's AdamW step count unloaded differs from step 4
// on) is //trainer/pipeline:pipeline_training_test's, on rank threads
// through the same Checkpointer; a hung stage is pp_restart_process_test's.
TEST(Pipeline, AKilledStageRestartsFromTheLatestCheckpointBitForBit) {
  const TrainerLaunch& one = Reference();
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string dir = LaunchDirectory("restarted_ckpt");
  std::vector<std::string> flags = PipelineFlags(2, 1, "1f1b", 1);
  flags.push_back("--checkpoint_dir=" + dir);
  flags.push_back("--save_every=2");
  flags.push_back("--max_restarts=1");
  flags.push_back("--fault=kill:rank=1,step=4,phase=backward");
  const TrainerLaunch restarted = RunTrainer("restarted", 2, flags);
  ASSERT_EQ(restarted.exit_code, 0) << restarted.output;
  for (const std::string& said :
       {std::string("--fault=kill:rank=1,step=4,phase=backward: killing this "
                    "rank"),
        std::string("launch: restarting all 2 ranks (restart 1 of 1) with "
                    "--resume=latest"),
        absl::StrCat("resumed from ", dir, "/step_00000002")}) {
    EXPECT_NE(restarted.output.find(said), std::string::npos)
        << said << "\n" << restarted.output;
  }
  // The final attempt trained steps 3 to 5.
  const TrainRun& ref = one.result.runs(0);
  const TrainRun& got = restarted.result.runs(0);
  ASSERT_EQ(ref.steps_size(), 5);
  ASSERT_EQ(got.steps_size(), 3);
  for (int i = 0; i < 3; ++i) {
    const StepRecord& expected = ref.steps(2 + i);
    const StepRecord& actual = got.steps(i);
    EXPECT_EQ(actual.step(), expected.step());
    EXPECT_EQ(actual.loss_bits(), expected.loss_bits()) << "step " << actual.step();
    EXPECT_EQ(actual.grad_norm(), expected.grad_norm()) << "step " << actual.step();
    EXPECT_EQ(actual.lr(), expected.lr()) << "step " << actual.step();
    EXPECT_TRUE(expected.clipped()) << "step " << expected.step();
  }
  ASSERT_EQ(restarted.rank_parameters.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(at::equal(restarted.rank_parameters[rank], one.rank_parameters[0]))
        << "rank " << rank << "'s gathered model vs one rank's";
  }
  const RestartHistory& history = restarted.result.restarts();
  EXPECT_EQ(history.restarts(), 1);
  EXPECT_EQ(history.max_restarts(), 1);
  ASSERT_EQ(history.attempts_size(), 2);
  EXPECT_NE(history.attempts(0).ended().find("was killed by SIGKILL"),
            std::string::npos)
      << history.attempts(0).ended();
  EXPECT_EQ(history.attempts(0).last_completed_step(), 3);
  EXPECT_EQ(history.attempts(1).resumed_step(), 2);
  EXPECT_EQ(history.steps_lost(), 1);
}

// Every refusal's wording is pipeline_config_test's; here each of the three
// bad inputs is refused by the launcher in one line, exit 2, before any rank
// starts (no launch: the launcher exits first).
TEST(Pipeline, BadInputIsRefusedInOneLineBeforeAnyRankStarts) {
  struct Case {
    std::string name;
    int nproc;
    std::vector<std::string> flags;
    std::string line;
  };
  const std::vector<Case> cases = {
      {"more_stages_than_layers", 5, {"--pp=5"},
       "--pp=5 must be between 1 and --n_layers=4"},
      {"micro_batches_not_dividing", 2, {"--pp=2", "--pp_microbatches=5"},
       "--pp_microbatches=5 must divide --batch_size=12"},
      {"split_not_summing", 2, {"--pp=2", "--pp_split=2,1"},
       "--pp_split=2,1 has 2 stage(s) summing to 3 blocks"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> flags = TinyDdpFlags();
    flags.push_back(absl::StrCat("--batch_size=", kTinyGlobalBatch));
    flags.insert(flags.end(), c.flags.begin(), c.flags.end());
    ExpectRefusedBeforeRanks(c.name, c.nproc, flags, c.line);
  }
}

}  // namespace
}  // namespace mtb
