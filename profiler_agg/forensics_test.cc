#include "profiler_agg/forensics.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "gtest/gtest.h"

namespace mtb::profiler_agg {
namespace {

using collective::FlightEntry;
using collective::FlightRecorderDump;

constexpr int64_t kDumpTime = 1'000'000'000;  // us

// A rank's dump: `issued` collectives #0..#issued-1 (all_reduce, 4096 bytes),
// every one completed except those listed in `open` (state given).
FlightRecorderDump Dump(int rank, int world_size, int64_t issued,
                        std::vector<std::pair<int64_t, std::string>> open = {},
                        int attempt = 0) {
  FlightRecorderDump dump;
  dump.set_schema_version(1);
  dump.set_run_id("run1");
  dump.set_attempt(attempt);
  dump.set_rank(rank);
  dump.set_world_size(world_size);
  dump.set_dump_time_us(kDumpTime + attempt * 1'000'000 + rank);
  dump.set_issued(issued);
  dump.set_step(3);
  dump.set_phase("backward");
  dump.set_reason("SIGTERM (the launcher's teardown, or a kill)");
  int64_t last_completed = -1;
  for (int64_t s = 0; s < issued; ++s) {
    FlightEntry* entry = dump.add_entries();
    entry->set_sequence(s);
    entry->set_op("all_reduce");
    entry->set_dtype("float32");
    entry->set_size_bytes(4096);
    entry->set_peer(-1);
    entry->set_step(s < 40 ? 2 : 3);
    entry->set_phase("backward");
    entry->set_issue_time_us(kDumpTime - 2'000'000);
    entry->set_state("completed");
    for (const auto& [sequence, state] : open) {
      if (sequence != s) continue;
      entry->set_state(state);
      entry->set_waiting(state == "issued");
      if (state == "failed") {
        entry->set_error(absl::StrCat("all_reduce #", s, " (float32, 1024 elements) on rank ",
                                      rank, " of ", world_size, " failed after timeout 2s"));
      }
    }
    if (entry->state() == "completed") last_completed = s;
  }
  dump.set_last_completed(last_completed);
  return dump;
}

std::vector<FlightDumpFile> Files(std::vector<FlightRecorderDump> dumps) {
  std::vector<FlightDumpFile> files;
  for (FlightRecorderDump& dump : dumps) {
    files.push_back({absl::StrCat("/d/flight_run1.attempt", dump.attempt(), ".rank",
                                  dump.rank(), ".json"),
                     std::move(dump)});
  }
  return files;
}

TEST(Forensics, TheRankThatNeverIssuedTheCollectiveTheOthersWaitedInIsNamed) {
  FlightRecorderDump hung = Dump(1, 3, 41);
  hung.set_phase("forward");
  const ForensicsResult result = AnalyzeFlightDumps(
      Files({Dump(0, 3, 42, {{41, "failed"}}), hung, Dump(2, 3, 42, {{41, "issued"}})}));
  ASSERT_EQ(result.groups_size(), 1);
  const ForensicsGroup& group = result.groups(0);
  EXPECT_EQ(group.verdict(), "lagging");
  EXPECT_EQ(group.diverged_rank(), 1);
  EXPECT_EQ(group.diverged_sequence(), 41);
  EXPECT_EQ(group.diverged_op(), "all_reduce");
  EXPECT_EQ(group.missing_ranks_size(), 0);
  EXPECT_EQ(group.finding(),
            "Rank 1 last issued #40 (all_reduce, completed) and never issued #41 "
            "all_reduce (float32, 4096 bytes), issued at step 3, phase backward, "
            "which ranks 0, 2 did: rank 0 failed it (all_reduce #41 (float32, 1024 "
            "elements) on rank 0 of 3 failed after timeout 2s); rank 2 was "
            "waiting in it. Rank 1 was at step 3, phase forward when it dumped "
            "(SIGTERM (the launcher's teardown, or a kill)). The group waited for "
            "rank 1 at all_reduce #41.");
  EXPECT_EQ(group.ranks(2).in_flight(), "all_reduce #41 (waiting, 2.0 s since issued)");
  EXPECT_EQ(group.ranks(1).in_flight(), "");
}

TEST(Forensics, RanksThatIssuedDifferentCollectivesNameTheOddOneOut) {
  FlightRecorderDump odd = Dump(1, 3, 6, {{5, "issued"}});
  odd.mutable_entries(5)->set_op("broadcast");
  odd.mutable_entries(5)->set_peer(0);
  const ForensicsResult result = AnalyzeFlightDumps(
      Files({Dump(0, 3, 6, {{5, "issued"}}), odd, Dump(2, 3, 6, {{5, "issued"}})}));
  const ForensicsGroup& group = result.groups(0);
  EXPECT_EQ(group.verdict(), "mismatch");
  EXPECT_EQ(group.diverged_rank(), 1);
  EXPECT_EQ(group.diverged_sequence(), 5);
  EXPECT_EQ(group.diverged_op(), "broadcast");
  EXPECT_EQ(group.finding(),
            "The ranks' calls diverged at #5: ranks 0, 2 issued all_reduce "
            "(float32, 4096 bytes); rank 1 issued broadcast (float32, 4096 "
            "bytes, root 0). The odd one out is rank 1 (broadcast (float32, 4096 "
            "bytes, root 0)): every rank must issue the same collectives in the "
            "same order.");
}

// Rank r sends rows[r][j] to rank j at #3 (all_to_allv): sizes differ per rank.
void MakeAllToAllV(FlightRecorderDump& dump, const std::vector<std::vector<int64_t>>& rows) {
  FlightEntry* entry = dump.mutable_entries(3);
  entry->set_op("all_to_allv");
  const int rank = dump.rank();
  int64_t sent = 0;
  for (size_t peer = 0; peer < rows.size(); ++peer) {
    entry->add_send_counts(rows[rank][peer]);
    entry->add_recv_counts(rows[peer][rank]);
    sent += rows[rank][peer];
  }
  entry->set_size_bytes(sent * 256);
}

TEST(Forensics, AllToAllVRanksOfDifferentSizesWhoseSplitsAgreeAreNotAMismatch) {
  // moe_comm's dispatch: every rank sends a different number of tokens.
  const std::vector<std::vector<int64_t>> rows = {{1, 5, 2}, {4, 0, 3}, {2, 2, 9}};
  std::vector<FlightRecorderDump> dumps = {Dump(0, 3, 5, {{4, "issued"}}), Dump(1, 3, 4),
                                           Dump(2, 3, 5, {{4, "issued"}})};
  for (FlightRecorderDump& dump : dumps) MakeAllToAllV(dump, rows);
  const ForensicsGroup group = AnalyzeFlightDumps(Files(dumps)).groups(0);
  EXPECT_EQ(group.verdict(), "lagging") << group.finding();
  EXPECT_EQ(group.diverged_rank(), 1);
  EXPECT_EQ(group.diverged_sequence(), 4);

  // Rank 2 sends rank 0 three rows where rank 0 expects two.
  FlightRecorderDump wrong = dumps[2];
  wrong.mutable_entries(3)->set_send_counts(0, 3);
  dumps[2] = wrong;
  const ForensicsGroup split = AnalyzeFlightDumps(Files(dumps)).groups(0);
  EXPECT_EQ(split.verdict(), "mismatch");
  EXPECT_EQ(split.diverged_sequence(), 3);
  EXPECT_EQ(split.diverged_op(), "all_to_allv");
  EXPECT_EQ(split.diverged_rank(), 0);  // a pair: the lower rank
  EXPECT_EQ(split.finding(),
            "The ranks' splits of all_to_allv #3 disagree: rank 2 sends 3 rows to rank 0, "
            "which expects 2. Rank 0 is in most of the disagreements: every rank's send "
            "counts must match its peers' receive counts.");
}

TEST(Forensics, AllGatherVCountsMustBeTheSameOnEveryRank) {
  std::vector<FlightRecorderDump> dumps = {Dump(0, 3, 4), Dump(1, 3, 4), Dump(2, 3, 4)};
  for (FlightRecorderDump& dump : dumps) {
    FlightEntry* entry = dump.mutable_entries(2);
    entry->set_op("all_gather_v");
    entry->set_size_bytes(1000 + dump.rank());  // each rank's own input
    for (int64_t count : {3, 1, 2}) entry->add_recv_counts(count);
  }
  EXPECT_EQ(AnalyzeFlightDumps(Files(dumps)).groups(0).verdict(), "none");
  dumps[1].mutable_entries(2)->set_recv_counts(2, 5);
  const ForensicsGroup group = AnalyzeFlightDumps(Files(dumps)).groups(0);
  EXPECT_EQ(group.verdict(), "mismatch");
  EXPECT_EQ(group.diverged_rank(), 1);
  EXPECT_EQ(group.finding(),
            "The ranks' splits of all_gather_v #2 disagree: ranks 0, 2 gave counts [3, 1, 2]; "
            "rank 1 gave counts [3, 1, 5]. Rank 1 is in most of the disagreements: every "
            "rank must pass the same counts.");
}

TEST(Forensics, ARankWithoutADumpIsTheSuspectWhenNoDumpedRankLags) {
  // Rank 2 was SIGKILLed: its peers lost the connection in #7.
  const ForensicsResult result = AnalyzeFlightDumps(
      Files({Dump(0, 3, 8, {{7, "failed"}}), Dump(1, 3, 8, {{7, "failed"}})}));
  const ForensicsGroup& group = result.groups(0);
  EXPECT_EQ(group.verdict(), "missing");
  EXPECT_EQ(group.diverged_rank(), 2);
  EXPECT_EQ(group.diverged_sequence(), 7);
  ASSERT_EQ(group.missing_ranks_size(), 1);
  EXPECT_EQ(group.missing_ranks(0), 2);
  EXPECT_TRUE(absl::StrContains(group.finding(), "rank 2 left no dump (a rank killed by SIGKILL"))
      << group.finding();
  EXPECT_TRUE(absl::EndsWith(group.finding(), "The group lost rank 2.")) << group.finding();
  EXPECT_FALSE(group.ranks(2).dumped());
  // The negative: every rank dumped and all are in the same collective.
  const ForensicsGroup none = AnalyzeFlightDumps(
      Files({Dump(0, 2, 10, {{9, "issued"}}), Dump(1, 2, 10, {{9, "issued"}})})).groups(0);
  EXPECT_EQ(none.verdict(), "none");
  EXPECT_EQ(none.diverged_rank(), -1);
  EXPECT_EQ(none.diverged_sequence(), 9);
  EXPECT_TRUE(absl::StrContains(none.finding(), "the transport (or the network) is the suspect"))
      << none.finding();
}

TEST(Forensics, EachAttemptIsItsOwnGroupAndTheReportHasATableOfRanks) {
  ForensicsResult result = AnalyzeFlightDumps(Files(
      {Dump(0, 2, 5, {{4, "failed"}}, 0), Dump(0, 2, 3, {}, 1), Dump(1, 2, 2, {}, 1)}));
  ASSERT_EQ(result.groups_size(), 2);
  EXPECT_EQ(result.groups(0).attempt(), 0);
  EXPECT_EQ(result.groups(0).verdict(), "missing");
  EXPECT_EQ(result.groups(1).attempt(), 1);
  EXPECT_EQ(result.groups(1).verdict(), "lagging");
  result.set_directory("/d");
  const std::string text = RenderForensics(result);
  EXPECT_TRUE(absl::StrContains(text, "## run run1, attempt 1 (2 ranks)\n\n**lagging**: rank 1 at all_reduce #2. "))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "| 1 | none |")) << text;
}

TEST(Forensics, ReadingRefusesAFolderWithoutDumpsAndNamesACorruptOne) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/dumps");
  ASSERT_TRUE(CreateDirectories(dir).ok());
  EXPECT_EQ(ReadFlightDumps(dir).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(WriteJsonFile(Dump(0, 2, 3), dir + "/flight_run1.attempt0.rank0.json").ok());
  absl::StatusOr<std::vector<FlightDumpFile>> read = ReadFlightDumps(dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->size(), 1u);
  ASSERT_TRUE(WriteFileAtomically(dir + "/flight_run1.attempt0.rank1.json", "{\"rank\": ").ok());
  read = ReadFlightDumps(dir);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(read.status().message(), "flight_run1.attempt0.rank1.json"))
      << read.status();
}

}  // namespace
}  // namespace mtb::profiler_agg
