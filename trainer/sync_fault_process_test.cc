// The DDP process test's comparison (CompareWithReference, the one
// //trainer:ddp_process_test asserts passes for 2, 3 and 4 ranks) must fail
// when ddp's gradient synchronisation is broken on purpose. Each case runs
// the same tiny model on 2 rank processes with one --testonly_ddp_fault
// against one rank on the global batch (launched once for the suite), and
// asserts which check catches it:
//   sum_not_average      the gradient norm, 2x from step 1. AdamW is
//                        invariant to a constant gradient scale, so the
//                        parameters move only through clipping (at most
//                        8.2e-5 here, inside the absolute bound).
//   bucket_never_synced  ranks drift apart and parameters leave the tiers.
//   parameter_unreduced  ranks drift apart and the per-tensor tier names the
//                        96-element bias.
// A last case shows the per-tensor tier alone catching one whole bias that a
// global allowance would hide.
#include <iostream>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/ddp_process_check.h"
#include "trainer/train_result.pb.h"

namespace mtb {
namespace {

using Check = DdpComparison::Check;

// A bias in the middle of the model, in bucket 1 of 4.
constexpr char kUnreducedBias[] = "h.1.attn.c_proj.bias";

class DdpFault : public ::testing::Test {
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

  // Two ranks with `fault`, compared with the one-rank reference.
  static DdpComparison RunWithFault(const std::string& name,
                                    const std::string& fault) {
    EXPECT_EQ(reference_->exit_code, 0) << reference_->output;
    std::vector<std::string> flags = TinyDdpFlags();
    flags.push_back(absl::StrCat("--batch_size=", kTinyGlobalBatch / 2));
    flags.push_back("--testonly_ddp_fault=" + fault);
    const TrainerLaunch launch = RunTrainer(name, 2, flags);
    EXPECT_EQ(launch.exit_code, 0) << launch.output;
    if (launch.exit_code != 0 || reference_->exit_code != 0) return {};
    EXPECT_NE(launch.result.strategy().description().find(
                  "TEST-ONLY FAULT " + fault),
              std::string::npos)
        << launch.result.strategy().description();
    DdpComparison comparison = CompareWithReference(launch, *reference_);
    std::cout << fault << ":\n" << comparison.Describe() << "\n";
    return comparison;
  }

  static TrainerLaunch* reference_;
};

TrainerLaunch* DdpFault::reference_ = nullptr;

TEST_F(DdpFault, BucketsSummedInsteadOfAveragedFailOnTheGradientNorm) {
  const DdpComparison comparison = RunWithFault("sum", "sum_not_average");
  EXPECT_FALSE(comparison.ok());
  EXPECT_TRUE(comparison.Failed(Check::kGradNorm)) << comparison.Describe();
  // Every rank still applies the same (summed) gradients.
  EXPECT_FALSE(comparison.Failed(Check::kRanksEqual)) << comparison.Describe();
}

TEST_F(DdpFault, ABucketNeverSynchronisedFailsRanksAndParameters) {
  const DdpComparison comparison =
      RunWithFault("skip_bucket", "bucket_never_synced:1");
  EXPECT_FALSE(comparison.ok());
  EXPECT_TRUE(comparison.Failed(Check::kRanksEqual)) << comparison.Describe();
  EXPECT_TRUE(comparison.Failed(Check::kParameters)) << comparison.Describe();
}

TEST_F(DdpFault, OneUnreducedBiasIsNamedByTheParameterTier) {
  const DdpComparison comparison = RunWithFault(
      "unreduced", absl::StrCat("parameter_unreduced:", kUnreducedBias));
  EXPECT_FALSE(comparison.ok());
  EXPECT_TRUE(comparison.Failed(Check::kRanksEqual)) << comparison.Describe();
  EXPECT_TRUE(comparison.FailedParameter(kUnreducedBias))
      << comparison.Describe();
}

// The per-tensor tier on its own: one whole 96-element bias moved by 5e-5
// (inside the 1e-4 absolute bound, beyond (1e-5, 1e-6) everywhere) fails,
// named. A global 0.1% allowance (455 of 455232 elements) would have let it
// through.
TEST_F(DdpFault, AWholeBiasInsideTheAbsoluteBoundFailsThePerTensorTier) {
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
