// Ranks agree on the run before step 1 (agreement.h): every difference is
// named with its ranks. The collective path runs in real processes in
// //trainer:trainer_cli_test (ranks started by hand).
#include "trainer/checkpoint/agreement.h"

#include <string>
#include <vector>

#include "common/results/json_io.h"
#include "gtest/gtest.h"
#include "trainer/tests/test_config.h"

namespace mtb::checkpoint {
namespace {

RunAgreement Of(const TrainConfig& config) { return AgreementOf(config, CheckpointPlan{}); }

TEST(RanksAgree, IdenticalRanksAgree) {
  const TrainConfig config = TinyConfig();
  EXPECT_TRUE(CheckRanksAgree({Of(config), Of(config), Of(config)}).ok());
  EXPECT_TRUE(CheckRanksAgree({Of(config)}).ok());
}

TEST(RanksAgree, EveryDifferingFlagIsNamedWithItsRanks) {
  const TrainConfig config = TinyConfig();
  TrainConfig other_lr = config;
  other_lr.set_lr(config.lr() * 2);
  TrainConfig other_steps = other_lr;
  other_steps.set_steps(config.steps() + 5);
  const absl::Status status =
      CheckRanksAgree({Of(config), Of(other_lr), Of(other_steps), Of(other_steps)});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(status.message());
  EXPECT_NE(message.find("ranks disagree before step 1"), std::string::npos) << message;
  EXPECT_NE(message.find("--lr: rank 0 "), std::string::npos) << message;
  EXPECT_NE(message.find(", ranks 1, 2, 3 "), std::string::npos) << message;
  EXPECT_NE(message.find("--steps: ranks 0, 1 "), std::string::npos) << message;
  EXPECT_EQ(message.find("--d_model"), std::string::npos) << "only what differs";
}

TEST(RanksAgree, DataAndResumePointAreCompared) {
  const TrainConfig config = TinyConfig();
  RunAgreement zero = Of(config), one = Of(config);
  one.set_resume_dir("/ckpt/step_00000004");
  one.set_start_step(4);
  one.set_resume_manifest_sha256("ab");
  one.mutable_data()->set_kind("token_file");
  const absl::Status status = CheckRanksAgree({zero, one});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(status.message());
  EXPECT_NE(message.find("resume checkpoint: rank 0 none (step 0), rank 1 /ckpt/step_00000004 "
                         "at step 4"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("data: rank 0 synthetic data ("), std::string::npos) << message;
  EXPECT_NE(message.find(", rank 1 token file "), std::string::npos) << message;
  // The same data at another path (another host's mount) agrees.
  RunAgreement moved = zero;
  TrainConfig elsewhere = config;
  elsewhere.set_data("/elsewhere/tokens.bin");
  moved.set_config_json(ToJson(elsewhere));
  EXPECT_TRUE(CheckRanksAgree({zero, moved}).ok());
}

}  // namespace
}  // namespace mtb::checkpoint
