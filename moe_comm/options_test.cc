#include "moe_comm/options.h"

#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace mtb::moe_comm {
namespace {

void ExpectRejected(const MoeCommOptions& options, int world_size,
                    const std::string& substring) {
  const absl::Status status =
      ValidateOptions(options, world_size, "--nproc=" + std::to_string(world_size));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(substring), absl::string_view::npos) << status;
}

TEST(MoeOptions, DefaultsAreValidAtOneTwoAndFourRanks) {
  for (int n : {1, 2, 4}) EXPECT_TRUE(ValidateOptions(DefaultOptions(), n, "n").ok());
}

TEST(MoeOptions, ExpertsNotDivisibleByRanksAreRejectedWithTheArithmetic) {
  MoeCommOptions options = DefaultOptions();
  options.set_num_experts(0, 6);
  ExpectRejected(options, 4, "--num_experts=6 is not divisible by --nproc=4");
}

TEST(MoeOptions, TopKAboveTheExpertsOrAboveTwoIsRejected) {
  MoeCommOptions options = DefaultOptions();
  options.set_num_experts(0, 1);
  ExpectRejected(options, 1, "--top_k=2 exceeds --num_experts=1");
  options = DefaultOptions();
  options.set_top_k(0, 3);
  ExpectRejected(options, 2, "--top_k=3 must be 1 or 2");
}

TEST(MoeOptions, NonPositiveCapacityFactorIsRejected) {
  MoeCommOptions options = DefaultOptions();
  options.set_capacity_factor(0, 0);
  ExpectRejected(options, 2, "--capacity_factor=0 must be a finite number > 0");
  options.set_capacity_factor(0, std::numeric_limits<double>::infinity());
  ExpectRejected(options, 2, "--capacity_factor=inf must be a finite number > 0");
  // A huge finite factor is valid: the capacity is bounded (ExpertCapacity).
  options.set_capacity_factor(0, 1e30);
  EXPECT_TRUE(ValidateOptions(options, 2, "n").ok());
}

TEST(MoeOptions, MalformedSkewIsRejectedSuggestingOnlyWhatMoeCommTakes) {
  MoeCommOptions options = DefaultOptions();
  options.set_skew(1, "zipf:abc");
  ExpectRejected(options, 2, "--skew=zipf:abc: the Zipf exponent must be a finite number >= 0");
  for (const char* text : {"linear", "gaussian"}) {
    options.set_skew(1, text);
    const absl::Status status = ValidateOptions(options, 2, "n");
    EXPECT_EQ(status.message(),
              std::string("--skew=") + text +
                  ": expected uniform or zipf:S (S a finite number >= 0, e.g. zipf:1.2); "
                  "moe_comm draws routing from these two");
    // The suggestion is one moe_comm accepts.
    options.set_skew(1, "zipf:1.2");
    EXPECT_TRUE(ValidateOptions(options, 2, "n").ok());
  }
}

TEST(MoeOptions, ListFlagsParseAndNameTheBadValue) {
  EXPECT_EQ(*ParseIntList("hidden", "64,128"), (std::vector<int>{64, 128}));
  const auto bad = ParseIntList("hidden", "64,x");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--hidden=64,x"), absl::string_view::npos);
}

TEST(MoeOptions, SweepIsTheCartesianProductWithExpertsResolved) {
  MoeCommOptions options = DefaultOptions();
  options.add_top_k(1);
  const std::vector<MoeConfig> configs = ExpandSweep(options, 4);
  ASSERT_EQ(configs.size(), 10u);  // 2 top-k x 5 skews
  EXPECT_EQ(configs[0].num_experts(), 8);
  EXPECT_EQ(configs[0].ffn_hidden(), 512);
  EXPECT_EQ(configs[0].skew(), "uniform");
  EXPECT_EQ(configs[5].top_k(), 1);
}

// A slow fault is checked against the timeout it runs under, as the
// trainer's are: configuration 1 under --first_step_timeout, the others
// under --collective_timeout.
TEST(MoeOptions, ASlowFaultMustStayShorterThanTheTimeoutItRunsUnder) {
  const MoeCommOptions options = DefaultOptions();  // 5 configurations
  TimeoutOptions timeouts;
  timeouts.first_step_timeout = absl::Seconds(10);
  timeouts.collective_timeout = absl::Seconds(3);
  EXPECT_TRUE(ResolveFaults("slow:rank=1,ms=2999", options, 2, timeouts).ok());
  EXPECT_EQ(ResolveFaults("slow:rank=1,ms=3000", options, 2, timeouts).status().message(),
            "--fault=slow:rank=1,ms=3000: the delay 3s is not shorter than "
            "--collective_timeout=3s: the other ranks would time out waiting for rank 1 (a "
            "slow rank is not a hung one: hang: tests a timeout)");
  EXPECT_EQ(ResolveFaults("slow:rank=0,ms=4000,every=6", options, 2, timeouts)
                .status()
                .message(),
            "--fault=slow:rank=0,ms=4000,every=6: every=6 fires on none of the run's 5 "
            "configurations: it would do nothing");
  EXPECT_TRUE(ResolveFaults("slow:rank=1,ms=5000", options, 2, TimeoutOptions()).ok());
}

TEST(MoeOptions, FaultsCountConfigurationsAndTakeTheLayersPhases) {
  const MoeCommOptions options = DefaultOptions();  // 5 skews: 5 configurations
  absl::StatusOr<std::vector<Fault>> faults =
      ResolveFaults("kill:rank=1,step=5,phase=combine;hang:rank=0,step=2", options, 2, TimeoutOptions());
  ASSERT_TRUE(faults.ok()) << faults.status();
  EXPECT_EQ(faults->size(), 2u);
  EXPECT_EQ(ResolveFaults("hang:rank=0,step=6", options, 2, TimeoutOptions()).status().message(),
            "--fault=hang:rank=0,step=6: configuration 6 is after the last "
            "configuration 5");
  EXPECT_EQ(ResolveFaults("kill:rank=0,step=1,phase=forward", options, 2, TimeoutOptions()).status().message(),
            "--fault=kill:rank=0,step=1,phase=forward: 'forward' is not a phase "
            "(dispatch, combine)");
  EXPECT_EQ(ResolveFaults("nan:rank=0,step=1", options, 2, TimeoutOptions()).status().message(),
            "--fault=nan:rank=0,step=1: 'nan' is not a fault moe_comm injects "
            "(kill, hang, slow, exit): it has no loss to make NaN");
  EXPECT_EQ(ResolveFaults("exit:rank=2,step=1,code=3", options, 2, TimeoutOptions()).status().message(),
            "--fault=exit:rank=2,step=1,code=3: rank 2 is not a rank of the world size 2");
}

}  // namespace
}  // namespace mtb::moe_comm
