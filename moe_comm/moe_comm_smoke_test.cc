// The moe_comm binary as users run it: the launcher starts real rank
// processes, rank 0 writes the JSON (parsed back through the proto) and its
// companions; --check passes, and fails (exit 1) with the packing bug hook;
// bad flags stop it before any rank starts (exit 2, one line).
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/launch/tool_run.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "gtest/gtest.h"
#include "moe_comm/moe_comm.pb.h"

namespace mtb::moe_comm {
namespace {

std::string TempDir() { return TestTempDir(); }

// A tiny sweep: the point is the path, not the numbers.
constexpr char kTiny[] =
    "--tokens_per_rank=32 --hidden=16 --iters=3 --warmup_iters=1 ";

ToolRun RunTool(const std::string& name, const std::string& args) {
  return RunToolOutsideRanks("moe_comm/moe_comm", name, args);
}

// --transport picks what the ranks' collectives run on (each rank logs it
// when it joins); an unknown value stops the launcher before any rank.
TEST(MoeCommBinary, TransportFlagPicksSharedMemoryOrTcp) {
  for (const char* transport : {"shm", "tcp"}) {
    const std::string json = absl::StrCat(TempDir(), "/", transport, ".json");
    const ToolRun run = RunTool(
        transport, absl::StrCat("--nproc=2 ", kTiny, "--transport=", transport, " --out=", json));
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

TEST(MoeCommBinary, TwoRanksBenchmarkWritesJsonMarkdownAndPlots) {
  const std::string json = TempDir() + "/n2.json";
  const ToolRun run = RunTool(
      "n2", absl::StrCat("--nproc=2 ", kTiny, "--skew=uniform,zipf:1 --out=", json));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  MoeCommResult result;
  ASSERT_TRUE(ReadJsonFile(json, &result).ok());
  EXPECT_EQ(result.schema_version(), 1);
  EXPECT_EQ(result.mode(), "benchmark");
  EXPECT_EQ(result.run_context().tool(), "moe_comm");
  EXPECT_EQ(result.run_context().world_size(), 2);
  EXPECT_FALSE(result.run_context().git_commit().empty());
  ASSERT_EQ(result.configs_size(), 2);
  for (const ConfigResult& row : result.configs()) {
    EXPECT_EQ(row.config().num_experts(), 4);  // 2 per rank by default
    EXPECT_EQ(row.dispatch_bytes_sent_size(), 2);
    EXPECT_EQ(row.expert_load_size(), 4);
    int64_t load = 0;
    for (int64_t l : row.expert_load()) load += l;
    EXPECT_EQ(load, 2 * 32 * 2);  // T x k assignments
    EXPECT_GT(row.dispatch().mean_ms(), 0);
  }
  // The skewed router loads expert 0 more than the uniform one does.
  EXPECT_GT(result.configs(1).imbalance(), result.configs(0).imbalance());
  for (const char* ext : {".md", ".time.svg", ".drops.svg"}) {
    EXPECT_TRUE(ReadFileToString(TempDir() + "/n2" + ext).ok()) << ext;
  }
  // Progress: one line per configuration with index/total and an ETA.
  EXPECT_NE(run.err.find("benchmark 1/2 "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("benchmark 2/2 "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("ETA 0.0 s"), std::string::npos) << run.err;
}

TEST(MoeCommBinary, FourRanksTopTwoZipfSkewExitsZeroWithJsonThatParsesBack) {
  const std::string json = TempDir() + "/n4.json";
  const ToolRun run = RunTool(
      "n4", absl::StrCat("--nproc=4 --top_k=2 --skew=zipf:1.2 ", kTiny,
                         "--out=", json));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  MoeCommResult result;
  ASSERT_TRUE(ReadJsonFile(json, &result).ok());
  EXPECT_EQ(result.run_context().world_size(), 4);
  ASSERT_EQ(result.configs_size(), 1);
  EXPECT_EQ(result.configs(0).config().skew(), "zipf:1.2");
  EXPECT_EQ(result.configs(0).dispatch_bytes_sent_size(), 4);
}

TEST(MoeCommBinary, CheckPassesAndThePackingBugExitsOneNamingTheOutput) {
  const std::string args = absl::StrCat("--nproc=2 --check --capacity_factor=1 "
                                        "--skew=zipf:1 ", kTiny);
  const ToolRun good = RunTool("check", args + "--out=" + TempDir() + "/c.json");
  ASSERT_EQ(good.exit_code, 0) << good.out << good.err;
  MoeCommResult result;
  ASSERT_TRUE(ReadJsonFile(TempDir() + "/c.json", &result).ok());
  EXPECT_EQ(result.mode(), "check");
  ASSERT_EQ(result.checks_size(), 1);
  EXPECT_TRUE(result.checks(0).check().pass());

  const ToolRun bad = RunTool(
      "bug", args + "--test_packing_bug --out=" + TempDir() + "/bug.json");
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  EXPECT_NE(bad.err.find("FAIL: out ("), std::string::npos) << bad.err;
}

void ExpectUsageError(const std::string& name, const std::string& args,
                      const std::string& message) {
  const std::string json = TempDir() + "/" + name + ".json";
  const ToolRun run = RunTool(name, args + " --out=" + json);
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find(message), std::string::npos) << run.err;
  const std::vector<std::string> lines =
      absl::StrSplit(run.err, '\n', absl::SkipEmpty());
  EXPECT_EQ(lines.size(), 1u) << run.err;
  EXPECT_EQ(run.err.find("launch:"), std::string::npos) << "ranks started";
  EXPECT_FALSE(ReadFileToString(json).ok());
}

TEST(MoeCommBinary, BadFlagsExitTwoWithOneLineBeforeAnyRank) {
  ExpectUsageError("experts", "--nproc=4 --num_experts=6",
                   "--num_experts=6 is not divisible by --nproc=4");
  ExpectUsageError("topk", "--nproc=1 --num_experts=1 --top_k=2",
                   "--top_k=2 exceeds --num_experts=1");
  ExpectUsageError("capacity", "--nproc=2 --capacity_factor=0",
                   "--capacity_factor=0 must be a finite number > 0");
  ExpectUsageError("skew", "--nproc=2 --skew=zipf:x", "--skew");
  ExpectUsageError("fault", "--nproc=2 --skew=uniform --fault=hang:rank=0,step=2",
                   "--fault=hang:rank=0,step=2: configuration 2 is after the last "
                   "configuration 1");
}

TEST(MoeCommBinary, AHangInCombineIsNamedByTheLaunchersHeartbeat) {
  // Two configurations; rank 1 hangs as configuration 2's combine starts,
  // outside any collective, while rank 0 waits in the combine all_to_allv.
  const std::string dir = TempDir() + "/hang";
  const ToolRun run = RunTool(
      "hang", absl::StrCat("--nproc=2 ", kTiny,
                           "--skew=uniform,zipf:1 --fault=hang:rank=1,step=2,phase=combine "
                           "--heartbeat_timeout=2s --collective_timeout=30s --log_dir=",
                           dir, " --out=", dir, "/moe.json"));
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_NE(run.err.find("--fault=hang:rank=1,step=2,phase=combine: this rank stops "
                         "making progress"),
            std::string::npos)
      << run.err;
  const std::vector<std::string> lines = absl::StrSplit(run.err, '\n', absl::SkipEmpty());
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(absl::StartsWith(lines.back(), "launch: heartbeat: no progress for ")) << run.err;
  EXPECT_NE(lines.back().find("rank 1 is in no collective (step 2, combine)"),
            std::string::npos)
      << lines.back();
  EXPECT_NE(lines.back().find("while rank 0 waits in all_to_allv #"), std::string::npos)
      << lines.back();
  EXPECT_NE(lines.back().find("(step 2, combine): the group waits for rank 1"),
            std::string::npos)
      << lines.back();
  EXPECT_EQ(ListDirectory(dir, "flight_", ".json")->size(), 2u);
}

}  // namespace
}  // namespace mtb::moe_comm
