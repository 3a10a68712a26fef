#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "gtest/gtest.h"
#include "report/render.h"
#include "report/results_set.h"

namespace mtb::report {
namespace {

const char kFixtures[] = "report/testdata";

std::string TempDir() { return std::getenv("TEST_TMPDIR"); }

// The fixtures are real result files of each tool (trainer ddp at 2 ranks
// and single at 1, comm_bench, tp_check, moe_comm benchmark and check,
// doctor), made by one build (moe_comm's by a later one, its provenance set
// to the others': testdata/README.md); the
// golden report was reviewed by hand against them (testdata/README.md).
TEST(Report, TheFixturesRenderTheGoldenReport) {
  absl::StatusOr<std::vector<ResultFile>> files = ReadResultFiles({kFixtures});
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 7u);
  EXPECT_TRUE(ProvenanceDifferences(*files).empty());
  const RenderedReport report = RenderReport(*files, {}, "report");
  absl::StatusOr<std::string> golden =
      ReadFileToString(std::string(kFixtures) + "/expected_report.md");
  ASSERT_TRUE(golden.ok()) << golden.status();
  EXPECT_EQ(report.markdown, *golden);
  ASSERT_EQ(report.svgs.size(), 1u);
  EXPECT_EQ(report.svgs[0].first, "report_loss.svg");
  // One loss series per trainer run.
  EXPECT_NE(report.svgs[0].second.find("trainer_ddp.json (ddp, 2 ranks)"),
            std::string::npos);
  EXPECT_NE(report.svgs[0].second.find("trainer_single.json (single, 1 ranks)"),
            std::string::npos);
}

TEST(Report, ProvenanceThatDiffersIsListedFieldByField) {
  TrainResult other;
  ASSERT_TRUE(ReadJsonFile(std::string(kFixtures) + "/trainer_ddp.json", &other).ok());
  other.mutable_run_context()->set_git_commit("0123456789abcdef");
  other.mutable_run_context()->set_build_mode("opt");
  const std::string path = TempDir() + "/other.json";
  ASSERT_TRUE(WriteJsonFile(other, path).ok());
  absl::StatusOr<std::vector<ResultFile>> files = ReadResultFiles(
      {std::string(kFixtures) + "/trainer_single.json", path});
  ASSERT_TRUE(files.ok()) << files.status();
  const std::vector<std::string> differences = ProvenanceDifferences(*files);
  ASSERT_EQ(differences.size(), 2u);
  EXPECT_EQ(differences[0].rfind("git_commit differs: ", 0), 0u) << differences[0];
  EXPECT_NE(differences[0].find(path + ": 0123456789abcdef"), std::string::npos)
      << differences[0];
  EXPECT_EQ(differences[1].rfind("build_mode differs: ", 0), 0u);
  EXPECT_NE(differences[1].find(path + ": opt"), std::string::npos);
  const RenderedReport report = RenderReport(*files, differences, "r");
  EXPECT_NE(report.markdown.find("**Mixed provenance (--allow_mixed):**"),
            std::string::npos);
  EXPECT_NE(report.markdown.find("- git_commit differs: "), std::string::npos);
}

TEST(Report, ResultsOfDifferentKindsFromOneBuildAreNotMixedProvenance) {
  // comm_bench links no LibTorch and records no BLAS: its empty fields are
  // not a difference from the trainer's.
  comm_bench::CommBenchResult bench;
  ASSERT_TRUE(ReadJsonFile(std::string(kFixtures) + "/comm_bench.json", &bench).ok());
  bench.mutable_context()->clear_libtorch_version();
  bench.mutable_context()->clear_blas_library();
  const std::string path = TempDir() + "/bench_without_torch.json";
  ASSERT_TRUE(WriteJsonFile(bench, path).ok());
  absl::StatusOr<std::vector<ResultFile>> files =
      ReadResultFiles({std::string(kFixtures) + "/trainer_single.json", path});
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_TRUE(ProvenanceDifferences(*files).empty());
  // The negative case: a recorded version that differs is a difference.
  bench.mutable_context()->set_libtorch_version("2.0.0");
  ASSERT_TRUE(WriteJsonFile(bench, path).ok());
  files = ReadResultFiles({std::string(kFixtures) + "/trainer_single.json", path});
  ASSERT_TRUE(files.ok()) << files.status();
  const std::vector<std::string> differences = ProvenanceDifferences(*files);
  ASSERT_EQ(differences.size(), 1u);
  EXPECT_EQ(differences[0].rfind("libtorch_version differs: ", 0), 0u) << differences[0];
}

TEST(Report, CorruptForeignAndUnknownFieldFilesAreRefusedNamingTheFile) {
  const std::string corrupt = TempDir() + "/corrupt.json";
  const std::string foreign = TempDir() + "/foreign.json";
  const std::string unknown = TempDir() + "/unknown.json";
  ASSERT_TRUE(WriteFileAtomically(corrupt, "{\"run_context\": ").ok());
  ASSERT_TRUE(WriteFileAtomically(foreign, "{\"name\": \"not ours\"}").ok());
  absl::StatusOr<std::string> ddp =
      ReadFileToString(std::string(kFixtures) + "/trainer_ddp.json");
  ASSERT_TRUE(ddp.ok());
  std::string with_unknown = *ddp;
  with_unknown.insert(with_unknown.find('{') + 1, "\"no_such_field\": 1,");
  ASSERT_TRUE(WriteFileAtomically(unknown, with_unknown).ok());
  for (const auto& [path, expected] :
       {std::pair<std::string, std::string>{corrupt, ": not a result file ("},
        {foreign, ": not a MiniTrainBench result (no run_context.tool)"},
        {unknown, ": not a valid mtb.TrainResult JSON"}}) {
    absl::StatusOr<std::vector<ResultFile>> files = ReadResultFiles({path});
    ASSERT_FALSE(files.ok()) << path;
    EXPECT_EQ(files.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(files.status().message().rfind(path + expected, 0), 0u)
        << files.status().message();
    EXPECT_EQ(files.status().message().find('\n'), std::string::npos);
  }
  EXPECT_EQ(ReadResultFiles({}).status().code(), absl::StatusCode::kInvalidArgument);
}

// A results directory after a failed run also holds the ranks' flight
// recorder dumps: reading the directory skips them (and lists them), while a
// file without provenance named on the command line is still refused.
TEST(Report, ADirectorysJsonFilesWithoutProvenanceAreSkippedAndListed) {
  const std::string dir = TempDir() + "/after_a_failure";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  absl::StatusOr<std::string> ddp =
      ReadFileToString(std::string(kFixtures) + "/trainer_ddp.json");
  ASSERT_TRUE(ddp.ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/trainer_ddp.json", *ddp).ok());
  const std::string dump = dir + "/flight_run1.attempt0.rank1.json";
  ASSERT_TRUE(WriteFileAtomically(dump, "{\"rank\": 1, \"entries\": []}").ok());
  std::vector<std::string> skipped;
  absl::StatusOr<std::vector<ResultFile>> files = ReadResultFiles({dir}, &skipped);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 1u);
  EXPECT_EQ((*files)[0].tool, "trainer");
  EXPECT_EQ(skipped, std::vector<std::string>{dump});
  // Named explicitly, it is refused.
  EXPECT_EQ(ReadResultFiles({dump}).status().code(), absl::StatusCode::kDataLoss);
  // A directory of nothing but non-results is nothing to read.
  ASSERT_EQ(std::remove((dir + "/trainer_ddp.json").c_str()), 0);
  EXPECT_EQ(ReadResultFiles({dir}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mtb::report
