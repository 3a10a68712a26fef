// The tp_check binary as users run it: the launcher starts real rank
// processes, rank 0 writes the JSON, which parses back through the proto; bad
// sizes stop the launcher before any rank starts (exit 2); a perturbed shard
// fails the run (exit 1) naming the tensor.
#include <string>

#include "absl/strings/str_cat.h"
#include "common/launch/tool_run.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "gtest/gtest.h"
#include "tp_check/tp_check.pb.h"

namespace mtb::tp_check {
namespace {

std::string TempDir() { return TestTempDir(); }

// Runs tp_check with `args` outside any rank environment.
ToolRun RunTool(const std::string& name, const std::string& args) {
  return RunToolOutsideRanks("tp_check/tp_check", name, args);
}

void ExpectEveryCheckPasses(int nproc) {
  const std::string json = absl::StrCat(TempDir(), "/n", nproc, ".json");
  const ToolRun run =
      RunTool(absl::StrCat("n", nproc),
              absl::StrCat("--nproc=", nproc, " --out=", json, " --markdown"));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  TpCheckResult result;
  ASSERT_TRUE(ReadJsonFile(json, &result).ok());
  EXPECT_EQ(result.schema_version(), 1);
  EXPECT_TRUE(result.pass());
  EXPECT_EQ(result.run_context().tool(), "tp_check");
  EXPECT_EQ(result.run_context().world_size(), nproc);
  ASSERT_EQ(result.checks_size(), 6);
  for (const equivalence::CheckResult& check : result.checks()) {
    EXPECT_TRUE(check.pass()) << check.name();
    EXPECT_EQ(check.world_size(), nproc);
    EXPECT_FALSE(check.collectives().empty()) << check.name();
    EXPECT_NE(run.out.find(absl::StrCat("| ", check.name(), " | ", nproc)),
              std::string::npos)
        << run.out;
  }
  EXPECT_TRUE(
      ReadFileToString(absl::StrCat(TempDir(), "/n", nproc, ".md")).ok());
  // Progress: rank 0 logs each check's start and end with index/total, its
  // verdict and the elapsed time.
  const char* kNames[] = {"column_linear", "row_linear",        "mlp",
                          "attention",     "sequence_parallel", "vocab_parallel_ce"};
  for (int index = 0; index < 6; ++index) {
    const std::string label =
        absl::StrCat("check ", index + 1, "/6 ", kNames[index]);
    EXPECT_NE(run.err.find(absl::StrCat(label, " on ", nproc, " ranks")),
              std::string::npos)
        << run.err;
    EXPECT_NE(run.err.find(absl::StrCat(label, ": pass in ")), std::string::npos)
        << run.err;
  }
  EXPECT_NE(run.err.find(" s elapsed, 0 to go)"), std::string::npos) << run.err;
}

TEST(TpCheckBinary, TwoRankProcessesPassAndWriteJsonThatParsesBack) {
  ExpectEveryCheckPasses(2);
}

TEST(TpCheckBinary, FourRankProcessesPassAndWriteJsonThatParsesBack) {
  ExpectEveryCheckPasses(4);
}

// --transport picks what the ranks' collectives run on (each rank logs it
// when it joins); an unknown value stops the launcher before any rank.
TEST(TpCheckBinary, TransportFlagPicksSharedMemoryOrTcp) {
  for (const char* transport : {"shm", "tcp"}) {
    const std::string json = absl::StrCat(TempDir(), "/", transport, ".json");
    const ToolRun run = RunTool(transport, absl::StrCat("--nproc=2 --check=mlp --transport=",
                                                        transport, " --out=", json));
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
    const std::string expected = std::string(transport) == "shm"
                                     ? "rank 1: collectives over shm (2 ranks"
                                     : "rank 1: collectives over gloo (tcp)";
    EXPECT_NE(run.err.find(expected), std::string::npos) << run.err;
  }
  const ToolRun bad = RunTool("bad_transport", "--nproc=2 --transport=udp");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("transport"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.err.find("collectives over"), std::string::npos) << bad.err;
}

TEST(TpCheckBinary, OneRankRunsInThisProcess) {
  const std::string json = TempDir() + "/n1.json";
  const ToolRun run = RunTool("n1", "--nproc=1 --check=mlp --out=" + json);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err.find("launch:"), std::string::npos) << run.err;
  TpCheckResult result;
  ASSERT_TRUE(ReadJsonFile(json, &result).ok());
  EXPECT_EQ(result.run_context().world_size(), 1);
  EXPECT_TRUE(result.pass());
}

TEST(TpCheckBinary, IndivisibleSizeExitsTwoWithTheArithmeticBeforeAnyRank) {
  const ToolRun run =
      RunTool("bad", "--nproc=4 --seq_len=6 --out=" + TempDir() + "/bad.json");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--seq_len=6 is not divisible by --nproc=4"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("launch:"), std::string::npos) << "ranks started";
  EXPECT_FALSE(ReadFileToString(TempDir() + "/bad.json").ok());
}

TEST(TpCheckBinary, InconsistentTimeoutsExitTwoNamingTheFlags) {
  const ToolRun run = RunTool(
      "timeouts", "--nproc=2 --first_step_timeout=10s --collective_timeout=20s");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--first_step_timeout=10s must be >= "
                         "--collective_timeout=20s"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("launch:"), std::string::npos) << "ranks started";
}

TEST(TpCheckBinary, UnwritableOutputExitsTwoBeforeAnyRank) {
  const ToolRun run = RunTool("unwritable", "--nproc=2 --out=/proc/no_such_dir/r.json");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--out=/proc/no_such_dir/r.json: cannot write there"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("launch:"), std::string::npos) << "ranks started";
}

TEST(TpCheckBinary, PerturbedShardExitsOneAndTheResultNamesTheTensor) {
  const std::string json = TempDir() + "/perturbed.json";
  const ToolRun run =
      RunTool("perturbed",
              "--nproc=2 --check=row_linear,mlp --perturb_rank=1 "
              "--perturb_tensor=grad_weight --out=" +
                  json);
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_NE(run.out.find("| row_linear | 2 | 3/4 |"), std::string::npos)
      << run.out;
  EXPECT_NE(run.err.find("check 1/2 row_linear: FAIL in "), std::string::npos)
      << run.err;
  TpCheckResult result;
  ASSERT_TRUE(ReadJsonFile(json, &result).ok());
  EXPECT_FALSE(result.pass());
  ASSERT_EQ(result.checks_size(), 2);
  EXPECT_FALSE(result.checks(0).pass());
  EXPECT_TRUE(result.checks(1).pass());  // mlp has no grad_weight
  for (const equivalence::TensorCheck& tensor : result.checks(0).tensors()) {
    EXPECT_EQ(tensor.ok(), tensor.name() != "grad_weight") << tensor.name();
  }
}

}  // namespace
}  // namespace mtb::tp_check
