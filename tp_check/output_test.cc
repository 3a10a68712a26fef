#include "tp_check/output.h"

#include <cstdlib>
#include <string>

#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "gtest/gtest.h"

namespace mtb::tp_check {
namespace {

TpCheckResult TwoChecks() {
  TpCheckResult result;
  result.set_schema_version(1);
  result.set_pass(false);
  result.mutable_run_context()->set_world_size(2);
  equivalence::CheckResult* mlp = result.add_checks();
  mlp->set_name("mlp");
  mlp->set_world_size(2);
  mlp->set_pass(true);
  equivalence::TensorCheck* out = mlp->add_tensors();
  out->set_name("out");
  out->set_ok(true);
  out->set_max_abs_error(4.7e-7);
  out->set_max_rel_error(2.1e-6);
  equivalence::CollectiveCheck* forward = mlp->add_collectives();
  forward->set_phase("forward");
  forward->set_op("all_reduce");
  forward->set_count(1);
  forward->set_expected_count(1);
  forward->set_bytes_sent(2048);
  forward->set_bytes_received(2048);
  forward->set_expected_bytes(2048);
  forward->set_ok(true);
  equivalence::CheckResult* rows = result.add_checks();
  rows->set_name("row_linear");
  rows->set_world_size(2);
  rows->set_pass(false);
  rows->set_perturbed("rank 1: grad_weight + 0.001");
  equivalence::TensorCheck* grad = rows->add_tensors();
  grad->set_name("grad_weight");
  grad->set_ok(false);
  grad->set_max_abs_error(1e-3);
  grad->set_message("rank 1: 1/4096 elements not close");
  return result;
}

TEST(RenderCheckTable, OneLinePerCheckWithErrorsCollectivesAndVerdict) {
  const std::string table = RenderCheckTable(TwoChecks());
  EXPECT_NE(table.find("| mlp | 2 | 1/1 | 4.7e-07 | 2.1e-06 | 1/1 calls, "
                       "2048/2048 B | PASS |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| row_linear | 2 | 0/1 | 0.001 | 0 | 0/0 calls, "
                       "0/0 B | FAIL |"),
            std::string::npos)
      << table;
}

TEST(RenderMarkdownReport, HasEveryTensorAndCollectiveRowAndTheHook) {
  const std::string report = RenderMarkdownReport(TwoChecks());
  EXPECT_NE(report.find("## row_linear: FAIL"), std::string::npos);
  EXPECT_NE(report.find("Perturbed by the test hook: rank 1: grad_weight"),
            std::string::npos);
  EXPECT_NE(report.find("| forward | all_reduce | 1 | 1 | 2048 | 2048 | 2048 "
                        "| yes |"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("rank 1: 1/4096 elements not close"),
            std::string::npos);
}

TEST(WriteOutputs, JsonParsesBackAndMarkdownSitsBesideIt) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  const std::string path = dir + "/results/tp_check.json";
  ASSERT_TRUE(WriteOutputs(TwoChecks(), path, /*markdown=*/true).ok());
  // A rerun with the same --out replaces its own report ...
  absl::StatusOr<std::string> again =
      WriteOutputs(TwoChecks(), path, /*markdown=*/true);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, "report: " + dir + "/results/tp_check.md");
  TpCheckResult back;
  ASSERT_TRUE(ReadJsonFile(path, &back).ok());
  EXPECT_EQ(back.checks_size(), 2);
  EXPECT_EQ(back.checks(1).tensors(0).message(),
            "rank 1: 1/4096 elements not close");
  EXPECT_TRUE(ReadFileToString(dir + "/results/tp_check.md").ok());
  // ... but never a Markdown file another result (or the user) wrote.
  const std::string other = dir + "/results/other.json";
  ASSERT_TRUE(WriteFileAtomically(dir + "/results/other.md", "my notes\n").ok());
  absl::StatusOr<std::string> kept =
      WriteOutputs(TwoChecks(), other, /*markdown=*/true);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(*kept, "kept " + dir + "/results/other.md: it exists and was not "
                   "written for " + other + " (remove it, or choose another --out)");
  EXPECT_EQ(*ReadFileToString(dir + "/results/other.md"), "my notes\n");
}

}  // namespace
}  // namespace mtb::tp_check
