// Exact mode with real processes: the trainer binary
// launches 1, 2 and 4 ranks of itself over Gloo, on one global batch of 16
// samples cut into chunks of 4 (--exact_chunk=4), with dropout 0.1 and
// clipping active, for 6 steps, under every strategy: every layout's
// per-step loss bits and final parameter digest must equal one ddp rank's,
// bit for bit. The negative case: the same comparison fails in float mode,
// whose sums follow the layout. Also: the digest is the SHA-256 of the
// parameters in model order (checked against the dump), an overflow of the
// grid is redone identically on every layout, a checkpoint of 2 ranks
// resumed on 2, 4 and 1 continues with the uninterrupted bits (reported
// exact), and a NaN stops the step.
// Every run uses the default GEMM backend (oneDNN) but one test, which
// repeats the hardest layouts under --gemm=blas and shows that the backend
// really changed the bits. One strategy per shard.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/sha256.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "trainer/tests/ddp_process_check.h"
#include "trainer/train_result.pb.h"

namespace mtb {
namespace {

constexpr int kGlobalBatch = 16;
constexpr int kSteps = 6;

std::vector<std::string> ExactFlags() {
  std::vector<std::string> flags = TinyDdpFlags();
  flags.push_back(absl::StrCat("--steps=", kSteps));
  flags.push_back("--lr_decay_steps=6");
  flags.push_back("--reduction=exact");
  flags.push_back("--exact_chunk=4");
  return flags;
}

struct Layout {
  int ranks;
  int batch;
  int grad_accum;
};
// 1 x 16, 2 x 8, 4 x 4 and 2 x (4 x grad_accum 2): 16 samples per step.
const Layout kLayouts[] = {{1, 16, 1}, {2, 8, 1}, {4, 4, 1}, {2, 4, 2}};

// `tag` names the launch directory of a run with `extra` flags.
std::string LaunchName(const std::string& strategy, const Layout& layout,
                       const std::string& tag) {
  return absl::StrCat(strategy, "_n", layout.ranks, "_b", layout.batch, "_k",
                      layout.grad_accum, tag);
}

TrainerLaunch Launch(const std::string& strategy, const Layout& layout,
                     const std::vector<std::string>& extra = {},
                     const std::string& tag = "",
                     bool dump_parameters = false) {
  std::vector<std::string> flags = ExactFlags();
  flags.push_back(absl::StrCat("--strategy=", strategy));
  flags.push_back(absl::StrCat("--batch_size=", layout.batch));
  flags.push_back(absl::StrCat("--grad_accum=", layout.grad_accum));
  flags.insert(flags.end(), extra.begin(), extra.end());
  // Float mode has no chunks: the trainer refuses --exact_chunk there.
  if (std::find(extra.begin(), extra.end(), "--reduction=float") != extra.end()) {
    flags.erase(std::remove(flags.begin(), flags.end(), "--exact_chunk=4"), flags.end());
  }
  return RunTrainer(LaunchName(strategy, layout, tag), layout.ranks, flags,
                    dump_parameters);
}

std::vector<std::string> LossBits(const TrainResult& result) {
  std::vector<std::string> bits;
  for (const StepRecord& step : result.runs(0).steps()) {
    bits.push_back(step.loss_bits());
  }
  return bits;
}

// Bit equality of everything the JSON says about the numbers.
void ExpectSameBits(const TrainerLaunch& actual, const TrainerLaunch& expected,
                    const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(actual.result.runs(0).steps_size(), kSteps);
  EXPECT_EQ(LossBits(actual.result), LossBits(expected.result));
  EXPECT_EQ(actual.result.parameter_digest(),
            expected.result.parameter_digest());
  for (int s = 0; s < kSteps; ++s) {
    const StepRecord& a = actual.result.runs(0).steps(s);
    const StepRecord& e = expected.result.runs(0).steps(s);
    EXPECT_EQ(a.loss(), e.loss()) << "step " << s + 1;
    EXPECT_EQ(a.grad_norm(), e.grad_norm()) << "step " << s + 1;
    EXPECT_EQ(a.clipped(), e.clipped()) << "step " << s + 1;
  }
}

// The one-rank ddp run every layout and strategy must equal; clipping must
// act on some step, or the exact norm's role in the update is untested.
TrainerLaunch Reference() {
  TrainerLaunch reference = Launch("ddp", kLayouts[0]);
  EXPECT_EQ(reference.exit_code, 0) << reference.output;
  if (reference.exit_code != 0) return reference;
  EXPECT_EQ(reference.result.parameter_digest().size(), 64u);
  bool clipped = false;
  for (const StepRecord& step : reference.result.runs(0).steps()) {
    clipped |= step.clipped();
    EXPECT_EQ(step.loss_bits().size(), 16u);
    EXPECT_EQ(step.exact_redos(), 0);
  }
  EXPECT_TRUE(clipped) << "no step was clipped at --max_grad_norm=1";
  return reference;
}

void ExpectLayoutsEqualReference(const std::string& strategy,
                                 const TrainerLaunch& reference) {
  for (const Layout& layout : kLayouts) {
    if (strategy == "ddp" && layout.ranks == 1) continue;  // the reference
    const std::string what =
        absl::StrCat(strategy, " on ", layout.ranks, " rank(s), batch ",
                     layout.batch, " x grad_accum ", layout.grad_accum);
    const TrainerLaunch launch = Launch(strategy, layout);
    ASSERT_EQ(launch.exit_code, 0) << what << "\n" << launch.output;
    ExpectSameBits(launch, reference, what);
    // The int64 reductions, counted by the collective layer, against the
    // layer's byte model of each piece (8 bytes per element).
    for (const StepRecord& step : launch.result.runs(0).steps()) {
      EXPECT_EQ(step.grad_bytes_sent(), step.expected_grad_bytes()) << what;
      EXPECT_EQ(step.grad_bytes_sent() > 0, layout.ranks > 1) << what;
    }
  }
}

// A checkpoint of 2 ranks saved after step 3, resumed on 2 ranks, on 4
// (a reshard) and on 1, continues with `reference`'s bits each time, and the
// reshards are reported exact: the grid carries no state from step to step
// and no sum follows the layout.
void ExpectResumesEqualReference(const std::string& strategy,
                                 const TrainerLaunch& reference) {
  const std::string dir =
      LaunchDirectory(LaunchName(strategy, kLayouts[1], "_checkpoints"));
  const TrainerLaunch first = Launch(
      strategy, kLayouts[1],
      {"--checkpoint_dir=" + dir, "--save_every=3", "--steps=3"}, "_first");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // 2 x 8 (the same layout), 4 x 4 and 1 x 16 (reshards); none saves, so
  // each resumes from step 3.
  for (const Layout& layout : {kLayouts[1], kLayouts[2], kLayouts[0]}) {
    const std::string what = absl::StrCat("resumed on ", layout.ranks,
                                          " rank(s) x ", layout.batch);
    const TrainerLaunch resumed =
        Launch(strategy, layout,
               {"--checkpoint_dir=" + dir, "--resume=latest", "--save_every=0"},
               "_resumed");
    ASSERT_EQ(resumed.exit_code, 0) << what << "\n" << resumed.output;
    EXPECT_TRUE(resumed.result.checkpoint().resume_exact())
        << what << ": " << resumed.result.checkpoint().resume_inexact_reason();
    ASSERT_EQ(resumed.result.runs(0).steps_size(), 3) << what;  // steps 4..6
    EXPECT_EQ(resumed.result.parameter_digest(),
              reference.result.parameter_digest())
        << what;
    for (int s = 0; s < 3; ++s) {
      EXPECT_EQ(resumed.result.runs(0).steps(s).loss_bits(),
                reference.result.runs(0).steps(s + 3).loss_bits())
          << what << ", step " << s + 4;
    }
  }
}

TEST(Exact, DdpOnEveryLayoutEqualsOneRankBitForBit) {
  const TrainerLaunch reference = Reference();
  ASSERT_EQ(reference.exit_code, 0);
  ExpectLayoutsEqualReference("ddp", reference);
}

TEST(Exact, Zero1EqualsDdpBitForBit) {
  const TrainerLaunch reference = Reference();
  ASSERT_EQ(reference.exit_code, 0);
  ExpectLayoutsEqualReference("zero1", reference);
}

TEST(Exact, Zero2EqualsDdpBitForBit) {
  const TrainerLaunch reference = Reference();
  ASSERT_EQ(reference.exit_code, 0);
  ExpectLayoutsEqualReference("zero2", reference);
}

TEST(Exact, AResumeOnAnotherWorldSizeContinuesBitForBitAndSaysSo) {
  const TrainerLaunch reference = Reference();
  ASSERT_EQ(reference.exit_code, 0);
  ExpectResumesEqualReference("zero2", reference);
}

TEST(Exact, FsdpEqualsDdpBitForBit) {
  const TrainerLaunch reference = Reference();
  ASSERT_EQ(reference.exit_code, 0);
  ExpectLayoutsEqualReference("fsdp", reference);
}

TEST(Exact, TheBlasBackendIsExactAcrossLayoutsTooAndDiffersFromOneDnn) {
  // One rank x 16 against fsdp's 2 x (4 x grad_accum 2) and zero1's 4 x 4.
  const std::vector<std::string> blas = {"--gemm=blas"};
  const TrainerLaunch one = Launch("ddp", kLayouts[0], blas, "_blas");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  for (const auto& [strategy, layout] :
       std::vector<std::pair<std::string, Layout>>{{"fsdp", kLayouts[3]},
                                                   {"zero1", kLayouts[2]}}) {
    const TrainerLaunch launch = Launch(strategy, layout, blas, "_blas");
    ASSERT_EQ(launch.exit_code, 0) << launch.output;
    ExpectSameBits(launch, one,
                   absl::StrCat(strategy, " on ", layout.ranks,
                                " ranks under --gemm=blas"));
  }
  const TrainerLaunch onednn = Reference();
  ASSERT_EQ(onednn.exit_code, 0);
  EXPECT_NE(one.result.parameter_digest(), onednn.result.parameter_digest())
      << "--gemm=blas and oneDNN gave the same bits: the flag changed nothing";
}

TEST(Exact, FloatModeDiffersAcrossLayoutsAndTheDigestIsTheDumpsSha256) {
  // The comparison above bites: float mode sums in the layout's order.
  const std::vector<std::string> float_mode = {"--reduction=float"};
  const TrainerLaunch one = Launch("ddp", kLayouts[0], float_mode, "_float",
                                   /*dump_parameters=*/true);
  const TrainerLaunch two = Launch("ddp", kLayouts[1], float_mode, "_float");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(one.result.parameter_digest(), two.result.parameter_digest());
  // The digest: the parameters in model order, fp32, unpadded (what
  // --dump_parameters writes, in the same order).
  const std::string dump =
      ReadFileToString(LaunchDirectory(LaunchName("ddp", kLayouts[0], "_float")) +
                       "/parameters/rank_0.f32")
          .value_or("");
  ASSERT_EQ(static_cast<int64_t>(dump.size()),
            one.result.model().parameter_count() * 4);
  EXPECT_EQ(Sha256Hex(dump), one.result.parameter_digest());
}

TEST(Exact, AnOverflowIsRedoneOnACoarserGridTheSameOnEveryLayout) {
  // 14 bits finer: the default grid holds chunk values below 2^-6, which
  // ordinary gradients exceed, so steps are redone.
  const std::vector<std::string> fine = {"--testonly_exact_grid_finer_bits=14"};
  const TrainerLaunch one = Launch("ddp", kLayouts[0], fine, "_fine");
  const TrainerLaunch fsdp = Launch("fsdp", kLayouts[3], fine, "_fine");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ASSERT_EQ(fsdp.exit_code, 0) << fsdp.output;
  int redone = 0;
  for (int s = 0; s < kSteps; ++s) {
    redone += one.result.runs(0).steps(s).exact_redos() > 0;
    EXPECT_EQ(one.result.runs(0).steps(s).exact_redos(),
              fsdp.result.runs(0).steps(s).exact_redos());
  }
  EXPECT_GT(redone, 0);
  EXPECT_NE(one.output.find("redoing the step on a coarser grid"),
            std::string::npos)
      << one.output;
  ExpectSameBits(fsdp, one, "fsdp 2 x (4 x 2) vs ddp 1 x 16, redone steps");
}

TEST(Exact, WhatCannotBeExactIsRefusedInOneLineBeforeAnyRankStarts) {
  const TrainerLaunch indivisible = Launch("ddp", {2, 6, 1}, {}, "_indivisible");
  EXPECT_EQ(indivisible.exit_code, 2);
  EXPECT_EQ(indivisible.output,
            "trainer: --reduction=exact: the micro-batch --batch_size=6 is not "
            "a multiple of --exact_chunk=4 (every chunk must hold the same "
            "samples on every layout)\n");
  const TrainerLaunch bf16 =
      Launch("fsdp", kLayouts[1], {"--precision=bf16"}, "_bf16");
  EXPECT_EQ(bf16.exit_code, 2);
  EXPECT_EQ(bf16.output,
            "trainer: --reduction=exact supports --precision=fp32 only, not "
            "bf16\n");
}

TEST(Exact, ANonFiniteChunkStopsTheStepOnEveryRank) {
  const TrainerLaunch launch =
      Launch("zero2", kLayouts[1], {"--fault=nan:rank=1,step=2"}, "_nan");
  EXPECT_NE(launch.exit_code, 0);
  // Decided collectively: rank 0 gives the job's verdict.
  EXPECT_NE(launch.output.find("[rank 0] trainer: step 2 of 6: the loss is not "
                               "finite on rank 1 (nan)"),
            std::string::npos)
      << launch.output;
}

}  // namespace
}  // namespace mtb
