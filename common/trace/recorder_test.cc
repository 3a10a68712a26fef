#include "common/trace/recorder.h"

#include <cstdlib>
#include <map>
#include <string>

#include "common/results/json_io.h"
#include "gtest/gtest.h"

namespace mtb::trace {
namespace {

TEST(TraceRecorder, SpansLandOnTheirTracksAndTheFileParsesBack) {
  TraceRunInfo info;
  info.set_run_id("run-1");
  info.set_rank(3);
  info.set_world_size(4);
  const absl::Time start = absl::FromUnixSeconds(1000);
  TraceRecorder recorder(info, start);
  recorder.AddSpan("ProfilerStep#1", "step", kComputeTrack, start,
                   start + absl::Milliseconds(10), {{"step", "1"}});
  recorder.AddSpan("all_reduce", "collective", kCommTrack,
                   start + absl::Milliseconds(2), start + absl::Milliseconds(5),
                   {{"seq", "0"}, {"bytes", "4096"}});
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/traces";
  ASSERT_TRUE(recorder.WriteTo(dir).ok());
  TraceFile back;
  ASSERT_TRUE(ReadJsonFile(dir + "/rank_3.trace.json", &back).ok());
  EXPECT_EQ(back.otherdata().run_id(), "run-1");
  ASSERT_EQ(back.traceevents_size(), 6);  // 4 names + 2 spans
  EXPECT_EQ(back.traceevents(0).name(), "process_name");
  EXPECT_EQ(back.traceevents(0).args().at("name"), "rank 3");
  const TraceEvent& step = back.traceevents(4);
  EXPECT_EQ(step.ph(), "X");
  EXPECT_EQ(step.pid(), 3);
  EXPECT_DOUBLE_EQ(step.ts(), 0);
  EXPECT_DOUBLE_EQ(step.dur(), 10000);
  const TraceEvent& collective = back.traceevents(5);
  EXPECT_EQ(collective.tid(), kCommTrack);
  EXPECT_DOUBLE_EQ(collective.ts(), 2000);
  EXPECT_DOUBLE_EQ(collective.dur(), 3000);
}

TEST(TraceRecorder, CollectivesInFlightAtOnceGetTheirOwnCommTracks) {
  TraceRunInfo info;
  const absl::Time t = absl::FromUnixSeconds(1000);
  TraceRecorder recorder(info, t);
  auto ms = [&](int v) { return t + absl::Milliseconds(v); };
  recorder.AddSpan("a", "collective", kCommTrack, ms(0), ms(10));
  recorder.AddSpan("b", "collective", kCommTrack, ms(5), ms(15));   // overlaps a
  recorder.AddSpan("c", "collective", kCommTrack, ms(12), ms(20));  // a's lane is free
  std::map<std::string, int> track;
  const TraceFile built = recorder.Build();
  for (const TraceEvent& e : built.traceevents()) {
    if (e.ph() == "X") track[e.name()] = e.tid();
  }
  EXPECT_EQ(track["a"], kCommTrack);
  EXPECT_EQ(track["b"], kExtraCommTrackBase + 1);
  EXPECT_EQ(track["c"], kCommTrack);
}

TEST(TraceRecorder, AScopedSpanOnNoRecorderDoesNothingAndOnOneRecordsItself) {
  { ScopedSpan nothing(nullptr, "forward", "compute"); }
  TraceRunInfo info;
  TraceRecorder recorder(info);
  { ScopedSpan forward(&recorder, "forward", "compute"); }
  const TraceFile file = recorder.Build();
  ASSERT_EQ(file.traceevents_size(), 5);
  EXPECT_EQ(file.traceevents(4).name(), "forward");
  EXPECT_GE(file.traceevents(4).dur(), 0);
}

}  // namespace
}  // namespace mtb::trace
