#include "tp_check/options.h"

#include "gtest/gtest.h"
#include "tp_check/tp_check.pb.h"

namespace mtb::tp_check {
namespace {

TEST(Options, DivisibilityMessageCarriesTheArithmetic) {
  const absl::Status status =
      RequireDivisibleByWorld("hidden", 30, NprocWorld(4), "why");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "--hidden=30 is not divisible by --nproc=4 (why)");
  EXPECT_TRUE(RequireDivisibleByWorld("hidden", 32, NprocWorld(4), "").ok());
}

TEST(Options, NonPositiveSizesAndBadDropoutAreRejected) {
  CheckOptions options = DefaultCheckOptions();
  EXPECT_TRUE(ValidateSizes(options).ok());
  options.set_batch(0);
  EXPECT_EQ(ValidateSizes(options).message(), "--batch=0 must be >= 1");
  options = DefaultCheckOptions();
  options.set_dropout(1.0);
  EXPECT_EQ(ValidateSizes(options).message(), "--dropout=1 must be in [0, 1)");
}

}  // namespace
}  // namespace mtb::tp_check
