#include "tp_check/checks.h"

#include "gtest/gtest.h"
#include "tp_check/test_util.h"

namespace mtb::tp_check {
namespace {

TEST(SelectChecks, EmptyMeansAllSixInOrder) {
  absl::StatusOr<std::vector<const CheckSpec*>> selected =
      SelectChecks(DefaultCheckOptions());
  ASSERT_TRUE(selected.ok()) << selected.status();
  std::vector<std::string> names;
  for (const CheckSpec* spec : *selected) names.push_back(spec->name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "column_linear", "row_linear", "mlp", "attention",
                       "sequence_parallel", "vocab_parallel_ce"}));
}

TEST(SelectChecks, UnknownNameListsTheKnownOnes) {
  CheckOptions options = DefaultCheckOptions();
  options.add_checks("mlp");
  options.add_checks("moe");
  const absl::Status status = SelectChecks(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--check=moe is not a check; known: "
                                  "column_linear, row_linear"),
            absl::string_view::npos)
      << status;
}

TEST(SelectChecks, RepeatedNameIsRejected) {
  CheckOptions options = DefaultCheckOptions();
  options.add_checks("mlp");
  options.add_checks("mlp");
  EXPECT_EQ(SelectChecks(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ValidateOptions, OnlyTheSelectedChecksSizesMatter) {
  CheckOptions options = DefaultCheckOptions();
  options.set_vocab(50);  // only vocab_parallel_ce splits it
  EXPECT_FALSE(ValidateOptions(options, NprocWorld(4), {}).ok());
  options.add_checks("mlp");
  EXPECT_TRUE(ValidateOptions(options, NprocWorld(4), {}).ok());
}

TEST(ValidateOptions, MessageUsesTheWorldsLabel) {
  CheckOptions options = DefaultCheckOptions();
  options.set_seq_len(6);
  const absl::Status status =
      ValidateOptions(options, World{4, "WORLD_SIZE=4"}, {});
  EXPECT_NE(status.message().find("--seq_len=6 is not divisible by "
                                  "WORLD_SIZE=4"),
            absl::string_view::npos)
      << status;
}

TEST(ValidateOptions, PerturbationMustNameARankAndATensorOfTheSelection) {
  CheckOptions options = DefaultCheckOptions();
  options.add_checks("row_linear");
  CheckHooks hooks;
  hooks.perturb_rank = 2;
  hooks.perturb_tensor = "grad_bias";
  EXPECT_NE(ValidateOptions(options, NprocWorld(2), hooks)
                .message()
                .find("--perturb_rank=2 must be < --nproc=2"),
            absl::string_view::npos);
  hooks.perturb_rank = 1;
  EXPECT_TRUE(ValidateOptions(options, NprocWorld(2), hooks).ok());
  hooks.perturb_tensor = "grad_wte";
  EXPECT_NE(ValidateOptions(options, NprocWorld(2), hooks)
                .message()
                .find("they compare row_linear:out, row_linear:grad_input"),
            absl::string_view::npos);
}

// Two ranks at the defaults, three at the defaults rounded to multiples of 3
// (DefaultOptionsFor): the whole run, as the binary does it.
class EveryCheck : public ::testing::TestWithParam<int> {};

TEST_P(EveryCheck, PassesOnTheseRanks) {
  auto results = RunOnThreads(
      [](const CheckOptions& options, collective::Communicator& comm,
         const CheckHooks& hooks) -> absl::StatusOr<CheckResult> {
        absl::StatusOr<TpCheckResult> all = RunChecks(options, comm, hooks);
        if (!all.ok()) return all.status();
        EXPECT_EQ(all->schema_version(), kSchemaVersion);
        EXPECT_EQ(all->checks_size(), 6);
        EXPECT_TRUE(all->pass());
        for (const CheckResult& check : all->checks()) {
          EXPECT_TRUE(check.pass()) << check.name() << "\n"
                                    << DescribeFailures(check);
        }
        return all->checks(0);
      },
      GetParam(), DefaultOptionsFor(GetParam()));
  ASSERT_TRUE(results.ok()) << results.status();
  for (const auto& result : *results)
    EXPECT_TRUE(result.ok()) << result.status();
}

INSTANTIATE_TEST_SUITE_P(RunChecks, EveryCheck, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "Ranks";
                         });

TEST(RunChecks, AFailingCheckFailsTheRunButTheOthersStillRun) {
  CheckHooks hooks;
  hooks.perturb_rank = 0;
  hooks.perturb_tensor = "grad_proj_bias";  // mlp, attention, sequence_parallel
  auto results = RunOnThreads(
      [](const CheckOptions& options, collective::Communicator& comm,
         const CheckHooks& hooks) -> absl::StatusOr<CheckResult> {
        absl::StatusOr<TpCheckResult> all = RunChecks(options, comm, hooks);
        if (!all.ok()) return all.status();
        EXPECT_FALSE(all->pass());
        EXPECT_EQ(all->checks_size(), 6);
        for (const CheckResult& check : all->checks()) {
          const bool perturbed = FindTensor(check, "grad_proj_bias") != nullptr;
          EXPECT_EQ(check.pass(), !perturbed) << check.name();
        }
        return all->checks(0);
      },
      2, DefaultCheckOptions(), hooks);
  ASSERT_TRUE(results.ok()) << results.status();
}

TEST(RunChecks, OneRankIsBitIdenticalToTheReferenceButForTheCeFormula) {
  // On one rank every shard is the whole tensor and every collective the
  // identity, so the sharded code runs the reference's own kernels; only
  // vocab_parallel_ce computes the loss by another (Megatron's) formula.
  auto results = RunOnThreads(
      [](const CheckOptions& options, collective::Communicator& comm,
         const CheckHooks& hooks) -> absl::StatusOr<CheckResult> {
        absl::StatusOr<TpCheckResult> all = RunChecks(options, comm, hooks);
        if (!all.ok()) return all.status();
        for (const CheckResult& check : all->checks()) {
          if (check.name() == "vocab_parallel_ce") continue;
          for (const TensorCheck& tensor : check.tensors()) {
            EXPECT_EQ(tensor.max_abs_error(), 0)
                << check.name() << " " << tensor.name();
          }
        }
        return all->checks(0);
      },
      1, DefaultCheckOptions());
  ASSERT_TRUE(results.ok()) << results.status();
}

}  // namespace
}  // namespace mtb::tp_check
