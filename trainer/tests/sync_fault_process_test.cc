// The process tests' comparison (CompareWithReference, the one
// //trainer:ddp_process_test and //trainer:sharded_process_test assert
// passes for ddp, zero1 and zero2) must fail when the gradient
// synchronisation is broken on purpose. Each case runs the same tiny model
// on 2 rank processes with one --testonly_sync_fault against one rank on the
// global batch (launched once for the suite), and asserts which check
// catches it:
//   ddp sum_not_average      the gradient norm, 2x from step 1. AdamW is
//                            invariant to a constant gradient scale, so the
//                            parameters move only through clipping (at most
//                            8.2e-5 here, inside the absolute bound).
//   ddp bucket_never_synced  ranks drift apart and parameters leave the tiers.
//   ddp parameter_unreduced  ranks drift apart and the per-tensor tier names
//                            the 96-element bias.
//   zero2 sum_not_average    (every rank's shards summed in its
//                            reduce-scatters) the gradient norm, 2x; the
//                            gathered parameters stay equal across ranks.
//   zero1 bucket_never_synced (each rank's shard of bucket 1 keeps its local
//                            gradient) the gradient norm and the parameters;
//                            the all-gather keeps the ranks equal, so only
//                            the comparison with one rank can see it.
// A last case shows the per-tensor tier alone catching one whole bias that a
// global allowance would hide.
#include <iostream>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/tests/ddp_process_check.h"
#include "trainer/train_result.pb.h"

namespace mtb {
namespace {

using Check = DdpComparison::Check;

// A bias in the middle of the model, in bucket 1 of 4.
constexpr char kUnreducedBias[] = "h.1.attn.c_proj.bias";

class SyncFault : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::vector<std::string> flags = TinyDdpFlags();
    flags.push_back(absl::StrCat("--batch_size=", kTinyGlobalBatch));
    reference_ = new TrainerLaunch(RunTrainer("reference", 1, flags));
  }
  static void TearDownTestSuite() {
    delete reference_;
    reference_ = nullptr;
  }

  // Two ranks of `strategy` with `fault`, compared with the one-rank
  // reference.
  static DdpComparison RunWithFault(const std::string& name,
                                    const std::string& fault,
                                    const std::string& strategy = "ddp") {
    EXPECT_EQ(reference_->exit_code, 0) << reference_->output;
    std::vector<std::string> flags = TinyDdpFlags();
    flags.push_back(absl::StrCat("--batch_size=", kTinyGlobalBatch / 2));
    flags.push_back("--strategy=" + strategy);
    flags.push_back("--testonly_sync_fault=" + fault);
    const TrainerLaunch launch = RunTrainer(name, 2, flags);
    EXPECT_EQ(launch.exit_code, 0) << launch.output;
    if (launch.exit_code != 0 || reference_->exit_code != 0) return {};
    EXPECT_NE(launch.result.strategy().description().find(
                  "TEST-ONLY FAULT " + fault),
              std::string::npos)
        << launch.result.strategy().description();
    DdpComparison comparison = CompareWithReference(launch, *reference_);
    std::cout << strategy << " " << fault << ":\n"
              << comparison.Describe() << "\n";
    return comparison;
  }

  static TrainerLaunch* reference_;
};

TrainerLaunch* SyncFault::reference_ = nullptr;

TEST_F(SyncFault, BucketsSummedInsteadOfAveragedFailOnTheGradientNorm) {
  const DdpComparison comparison = RunWithFault("sum", "sum_not_average");
  EXPECT_FALSE(comparison.ok());
  EXPECT_TRUE(comparison.Failed(Check::kGradNorm)) << comparison.Describe();
  // Every rank still applies the same (summed) gradients.
  EXPECT_FALSE(comparison.Failed(Check::kRanksEqual)) << comparison.Describe();
}

TEST_F(SyncFault, ABucketNeverSynchronisedFailsRanksAndParameters) {
  const DdpComparison comparison =
      RunWithFault("skip_bucket", "bucket_never_synced:1");
  EXPECT_FALSE(comparison.ok());
  EXPECT_TRUE(comparison.Failed(Check::kRanksEqual)) << comparison.Describe();
  EXPECT_TRUE(comparison.Failed(Check::kParameters)) << comparison.Describe();
}

TEST_F(SyncFault, OneUnreducedBiasIsNamedByTheParameterTier) {
  const DdpComparison comparison = RunWithFault(
      "unreduced", absl::StrCat("parameter_unreduced:", kUnreducedBias));
  EXPECT_FALSE(comparison.ok());
  EXPECT_TRUE(comparison.Failed(Check::kRanksEqual)) << comparison.Describe();
  EXPECT_TRUE(comparison.FailedParameter(kUnreducedBias))
      << comparison.Describe();
}

TEST_F(SyncFault, Zero2ShardsSummedInsteadOfAveragedFailOnTheGradientNorm) {
  const DdpComparison comparison =
      RunWithFault("zero2_sum", "sum_not_average", "zero2");
  EXPECT_FALSE(comparison.ok());
  EXPECT_TRUE(comparison.Failed(Check::kGradNorm)) << comparison.Describe();
  // The all-gather gives every rank the same (wrongly scaled) parameters.
  EXPECT_FALSE(comparison.Failed(Check::kRanksEqual)) << comparison.Describe();
}

TEST_F(SyncFault, Zero1BucketNeverReduceScatteredFailsNormAndParameters) {
  const DdpComparison comparison =
      RunWithFault("zero1_skip_bucket", "bucket_never_synced:1", "zero1");
  EXPECT_FALSE(comparison.ok());
  EXPECT_TRUE(comparison.Failed(Check::kGradNorm)) << comparison.Describe();
  EXPECT_TRUE(comparison.Failed(Check::kParameters)) << comparison.Describe();
  EXPECT_FALSE(comparison.Failed(Check::kRanksEqual)) << comparison.Describe();
}

// The per-tensor tier on its own: one whole 96-element bias moved by 5e-5
// (inside the 1e-4 absolute bound, beyond (1e-5, 1e-6) everywhere) fails,
// named. A global 0.1% allowance (455 of 455232 elements) would have let it
// through.
TEST_F(SyncFault, AWholeBiasInsideTheAbsoluteBoundFailsThePerTensorTier) {
  ASSERT_EQ(reference_->exit_code, 0) << reference_->output;
  const at::Tensor& expected = reference_->rank_parameters[0];
  at::Tensor perturbed = expected.clone();
  bool found = false;
  for (const DumpedParameter& p : reference_->manifest) {
    if (p.name != kUnreducedBias) continue;
    ASSERT_EQ(p.numel, 96);
    perturbed.narrow(0, p.offset, p.numel).add_(5e-5);
    found = true;
  }
  ASSERT_TRUE(found);
  DdpComparison comparison;
  CompareParameters(perturbed, expected, reference_->manifest,
                    "one bias moved", &comparison);
  EXPECT_TRUE(comparison.FailedParameter(kUnreducedBias))
      << comparison.Describe();
  ASSERT_EQ(comparison.failures.size(), 1u) << comparison.Describe();
  EXPECT_NE(comparison.failures[0].message.find("96 of 96 elements beyond"),
            std::string::npos)
      << comparison.Describe();
  // Unperturbed, the same comparison passes.
  DdpComparison same;
  CompareParameters(expected, expected, reference_->manifest, "itself", &same);
  EXPECT_TRUE(same.ok()) << same.Describe();
}

}  // namespace
}  // namespace mtb
