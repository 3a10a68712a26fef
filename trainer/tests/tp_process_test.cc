// Tensor parallelism with real processes: the trainer binary launches
// tp x dp ranks of itself (--tp, --sequence_parallel; docs/tp.md) and each
// run is compared with one rank on the same global batch by the DDP process
// tests' comparison (trainer/tests/ddp_process_check.h: every step's loss and
// gradient norm, every rank's parameters equal bit for bit, rank 0's against
// the reference per tensor). The parameter dumps are the logical global
// tensors gathered over the tp group. The bound is derived in docs/tp.md.
//
// Negatives, each a --testonly_tp_fault that must fail the same comparison
// naming what differs: the MLP's row-parallel output left unreduced (the
// loss), the sequence-parallel LayerNorm gradients left unsummed (the
// LayerNorm parameters), the replicated parameters counted in the norm on
// every tp rank (the gradient norm). A tp=2 x dp=2 checkpoint resumes on
// one rank, at tp=1 x dp=4 and at tp=4 x dp=1. And a --tp that does not
// divide the heads is refused in one line, exit 2, before any rank starts.
//
// Layouts: tp=2 x dp=1 (ddp), tp=2 x dp=2 under ddp and fsdp, with and
// without SP. zero1, zero2 and tp=4 are compared with one rank on rank
// threads (//trainer:tp_training_test); the whole tp x dp x strategy x SP
// matrix is //trainer/bench:tp_matrix. The tests are ordered so that gtest's
// round-robin sharding spreads the launches (each shard launches its own
// one-rank reference).
#include <cmath>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/base/sha256.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "trainer/tests/ddp_process_check.h"
#include "trainer/train_result.pb.h"

namespace mtb {
namespace {

constexpr int kGlobalBatch = 4;

// One rank on the global batch, launched once per test process.
const TrainerLaunch& Reference() {
  static const TrainerLaunch* const reference = [] {
    std::vector<std::string> flags = TinyTpFlags();
    flags.push_back(absl::StrCat("--batch_size=", kGlobalBatch));
    return new TrainerLaunch(RunTrainer("one_rank", 1, flags));
  }();
  return *reference;
}

struct Layout {
  int tp = 2;
  int dp = 1;
  std::string strategy = "ddp";
  bool sequence_parallel = false;
  std::string fault;  // --testonly_tp_fault
  bool trace = false;  // --trace_dir: the tp group's collectives on their track
  std::string Name() const {
    return absl::StrCat("tp", tp, "_dp", dp, "_", strategy,
                        sequence_parallel ? "_sp" : "",
                        fault.empty() ? "" : "_", fault);
  }
};

Layout L(int tp, int dp, std::string strategy = "ddp",
         bool sequence_parallel = false, std::string fault = "") {
  Layout layout;
  layout.tp = tp;
  layout.dp = dp;
  layout.strategy = std::move(strategy);
  layout.sequence_parallel = sequence_parallel;
  layout.fault = std::move(fault);
  return layout;
}

TrainerLaunch Launch(const Layout& layout) {
  std::vector<std::string> flags = TinyTpFlags();
  flags.push_back(absl::StrCat("--batch_size=", kGlobalBatch / layout.dp));
  flags.push_back(absl::StrCat("--tp=", layout.tp));
  flags.push_back(absl::StrCat("--strategy=", layout.strategy));
  if (layout.sequence_parallel) flags.push_back("--sequence_parallel");
  if (!layout.fault.empty()) {
    flags.push_back(absl::StrCat("--testonly_tp_fault=", layout.fault));
  }
  if (layout.trace) {
    flags.push_back(
        absl::StrCat("--trace_dir=", LaunchDirectory(layout.Name()), "/traces"));
  }
  return RunTrainer(layout.Name(), layout.tp * layout.dp, flags);
}

// The parameter digest of rank 0's dump (trainer/exact/exact.h's digest: SHA-256
// of every parameter's fp32 bytes in order, as the dump holds them).
std::string DigestOfDump(const TrainerLaunch& launch) {
  if (launch.rank_parameters.empty()) return "no dump";
  const at::Tensor flat = launch.rank_parameters[0].contiguous();
  Sha256Hasher hasher;
  hasher.Update(absl::string_view(static_cast<const char*>(flat.data_ptr()),
                                  flat.numel() * sizeof(float)));
  return hasher.FinishHex();
}

// `layout` trains as one rank does.
void ExpectEqualsOneRank(const Layout& layout) {
  SCOPED_TRACE(layout.Name());
  const TrainerLaunch& one = Reference();
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const TrainerLaunch many = Launch(layout);
  ASSERT_EQ(many.exit_code, 0) << many.output;
  EXPECT_EQ(many.result.run_context().world_size(), layout.tp * layout.dp);
  EXPECT_EQ(many.result.model().tokens_per_step(),
            one.result.model().tokens_per_step());
  EXPECT_EQ(many.result.model().parameter_count(),
            one.result.model().parameter_count());
  EXPECT_NE(many.output.find(absl::StrCat("mesh: dp ", layout.dp, " x tp ",
                                          layout.tp)),
            std::string::npos)
      << many.output;
  // The tp group's bytes, counted by the collective layer, equal their
  // closed form every step (trainer/tp/bytes.h).
  for (const StepRecord& step : many.result.runs(0).steps()) {
    EXPECT_GT(step.expected_tp_bytes(), 0);
    EXPECT_EQ(step.tp_bytes_sent(), step.expected_tp_bytes())
        << "step " << step.step();
  }
  // The result's digest is the logical model's (gathered over the tp
  // group), so digests compare across layouts: the dump's global tensors.
  EXPECT_EQ(one.result.parameter_digest(), DigestOfDump(one));
  EXPECT_EQ(many.result.parameter_digest(), DigestOfDump(many));
  if (layout.trace) {
    // Every rank's trace: the dp group's collectives on the comm track
    // (category collective), the tp group's on the "tp comm" track
    // (category tp_collective, read by profiler_agg as a row of its own).
    for (int rank = 0; rank < layout.tp * layout.dp; ++rank) {
      const std::string trace =
          ReadFileToString(absl::StrCat(LaunchDirectory(layout.Name()),
                                        "/traces/rank_", rank, ".trace.json"))
              .value_or("");
      EXPECT_NE(trace.find("\"tp comm\""), std::string::npos) << rank;
      EXPECT_NE(trace.find("\"tp_collective\""), std::string::npos) << rank;
      EXPECT_NE(trace.find("\"collective\""), std::string::npos) << rank;
    }
  }
  const DdpComparison comparison = CompareWithReference(many, one);
  EXPECT_TRUE(comparison.ok()) << comparison.Describe();
  std::cout << layout.Name() << " vs one rank:\n"
            << comparison.Describe() << "\n";
}

// `layout` (a broken piece) fails the comparison; returns what it found.
DdpComparison ExpectFails(const Layout& layout) {
  const TrainerLaunch& one = Reference();
  EXPECT_EQ(one.exit_code, 0) << one.output;
  const TrainerLaunch broken = Launch(layout);
  EXPECT_EQ(broken.exit_code, 0) << broken.output;
  if (broken.exit_code != 0 || one.exit_code != 0) return {};
  const DdpComparison comparison = CompareWithReference(broken, one);
  EXPECT_FALSE(comparison.ok()) << layout.Name();
  std::cout << layout.Name() << " vs one rank:\n"
            << comparison.Describe() << "\n";
  return comparison;
}

TEST(TpProcess, DdpOverTheDpGroupEqualsOneRank) {
  ExpectEqualsOneRank(L(2, 1));
  Layout traced = L(2, 2);
  traced.trace = true;
  ExpectEqualsOneRank(traced);
}

TEST(TpProcess, BrokenPiecesFailNamingWhatDiffers) {
  {
    const DdpComparison c =
        ExpectFails(L(2, 1, "ddp", false, "row_parallel_unreduced"));
    EXPECT_TRUE(c.Failed(DdpCheck::kLoss)) << c.Describe();
  }
  {
    const DdpComparison c = ExpectFails(L(2, 1, "ddp", true, "layernorm_unsynced"));
    EXPECT_TRUE(c.FailedParameter("h.0.ln_1.weight") ||
                c.FailedParameter("h.0.ln_2.weight") ||
                c.FailedParameter("ln_f.weight"))
        << c.Describe();
  }
  {
    const DdpComparison c =
        ExpectFails(L(2, 1, "ddp", false, "norm_double_counted"));
    EXPECT_TRUE(c.Failed(DdpCheck::kGradNorm)) << c.Describe();
  }
}

// A tp=2 x dp=2 checkpoint holds the logical global tensors: one rank,
// tp=1 x dp=4 and tp=4 x dp=1 resume it and continue as the uninterrupted
// one-rank run does, within the same bound.
TEST(TpProcess, ATp2Dp2CheckpointResumesAtAnyTpAndDp) {
  const TrainerLaunch& one = Reference();
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string dir = LaunchDirectory("tp_checkpoints");
  std::vector<std::string> first = TinyTpFlags();
  for (std::string& flag : first) {
    if (flag == "--steps=4") flag = "--steps=2";
  }
  first.push_back(absl::StrCat("--batch_size=", kGlobalBatch / 2));
  first.push_back("--tp=2");
  first.push_back(absl::StrCat("--checkpoint_dir=", dir));
  first.push_back("--save_every=2");
  const TrainerLaunch saved = RunTrainer("tp2_dp2_saves", 4, first,
                                         /*dump_parameters=*/false);
  ASSERT_EQ(saved.exit_code, 0) << saved.output;

  struct Resume {
    int tp;
    int dp;
  };
  for (const Resume& at : {Resume{1, 1}, Resume{1, 4}, Resume{4, 1}}) {
    const std::string name = absl::StrCat("tp", at.tp, "_dp", at.dp, "_resumes");
    SCOPED_TRACE(name);
    std::vector<std::string> second = TinyTpFlags();
    second.push_back(absl::StrCat("--batch_size=", kGlobalBatch / at.dp));
    if (at.tp > 1) second.push_back(absl::StrCat("--tp=", at.tp));
    // The resumed runs save nothing (no --save_every): each reads step 2.
    second.push_back(absl::StrCat("--checkpoint_dir=", dir));
    second.push_back("--resume=latest");
    const TrainerLaunch resumed = RunTrainer(name, at.tp * at.dp, second);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    // Said as a layout change, an unset --tp as 1.
    EXPECT_NE(resumed.output.find(absl::StrCat("--tp 2 -> ", at.tp)),
              std::string::npos)
        << resumed.output;
    ASSERT_EQ(resumed.result.runs(0).steps_size(), 2);
    DdpComparison comparison;
    for (int s = 0; s < 2; ++s) {
      const StepRecord& step = resumed.result.runs(0).steps(s);
      const StepRecord& expected = one.result.runs(0).steps(s + 2);
      ASSERT_EQ(step.step(), expected.step());
      if (!(std::abs(step.loss() - expected.loss()) <=
            kDdpLossRtol * std::abs(expected.loss()))) {
        comparison.failures.push_back(
            {DdpCheck::kLoss, absl::StrCat("step ", step.step(), ": loss ",
                                           step.loss(), " vs one rank's ",
                                           expected.loss())});
      }
    }
    for (size_t r = 0; r < resumed.rank_parameters.size(); ++r) {
      CompareParameters(resumed.rank_parameters[r], one.rank_parameters[0],
                        one.manifest,
                        absl::StrCat(name, " rank ", r, " vs one rank"),
                        &comparison);
    }
    EXPECT_TRUE(comparison.ok()) << comparison.Describe();
    std::cout << name << ":\n" << comparison.Describe() << "\n";
  }
}

TEST(TpProcess, FsdpAndSequenceParallelEqualOneRank) {
  ExpectEqualsOneRank(L(2, 2, "fsdp"));
  ExpectEqualsOneRank(L(2, 2, "fsdp", /*sequence_parallel=*/true));
  ExpectEqualsOneRank(L(2, 2, "ddp", /*sequence_parallel=*/true));
}

TEST(TpProcess, ATpThatDoesNotDivideTheHeadsIsRefusedBeforeRanksStart) {
  std::vector<std::string> flags = TinyTpFlags();
  flags.push_back("--batch_size=4");
  flags.push_back("--tp=3");
  ExpectRefusedBeforeRanks("tp3", 3, flags, "--tp=3 must divide --n_heads (4)");
}

}  // namespace
}  // namespace mtb
