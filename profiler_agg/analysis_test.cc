#include "profiler_agg/analysis.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/trace/recorder.h"
#include "gtest/gtest.h"

namespace mtb::profiler_agg {
namespace {

const std::string kFixtures = "profiler_agg/testdata";

// The figures testdata/README.md computes by hand. Every input is a whole
// number of microseconds, so the results are exact in double.
TEST(ProfilerAgg, TheHandMadeTwoRankRunGivesTheHandComputedFigures) {
  absl::StatusOr<std::vector<RankTrace>> traces = ReadTraces(kFixtures + "/two_ranks");
  ASSERT_TRUE(traces.ok()) << traces.status();
  const ProfilerAggResult result = Analyze(*traces);
  EXPECT_EQ(result.world_size(), 2);
  EXPECT_EQ(result.steps(), 2);
  ASSERT_EQ(result.ranks_size(), 2);
  EXPECT_DOUBLE_EQ(result.ranks(0).in_flight_ms(), 0.080);
  EXPECT_DOUBLE_EQ(result.ranks(0).exposed_ms(), 0.020);
  EXPECT_DOUBLE_EQ(result.ranks(0).overlap_ratio(), 0.75);
  EXPECT_DOUBLE_EQ(result.ranks(1).in_flight_ms(), 0.065);
  EXPECT_DOUBLE_EQ(result.ranks(1).exposed_ms(), 0.015);
  EXPECT_DOUBLE_EQ(result.ranks(1).overlap_ratio(), 50.0 / 65.0);
  EXPECT_DOUBLE_EQ(result.in_flight_ms(), 0.145);
  EXPECT_DOUBLE_EQ(result.exposed_ms(), 0.035);
  EXPECT_DOUBLE_EQ(result.overlap_ratio(), 110.0 / 145.0);
  EXPECT_DOUBLE_EQ(result.ranks(1).clock_offset_us(), -500);

  // step, forward, its two block rows, backward, its block row, optimizer.
  ASSERT_EQ(result.phases_size(), 7);
  EXPECT_EQ(result.phases(0).name(), "step");
  EXPECT_DOUBLE_EQ(result.phases(0).min_ms(), 0.100);
  EXPECT_DOUBLE_EQ(result.phases(0).p50_ms(), 0.105);
  EXPECT_DOUBLE_EQ(result.phases(0).max_ms(), 0.110);
  EXPECT_EQ(result.phases(0).max_rank(), 1);
  EXPECT_DOUBLE_EQ(result.straggler_ratio(), 110.0 / 105.0);
  EXPECT_EQ(result.phases(1).name(), "forward");
  EXPECT_EQ(result.phases(1).parent(), "");
  EXPECT_DOUBLE_EQ(result.phases(1).max_ms(), 0.035);  // its blocks not added
  // Per-block rows, nested: rank 1's 20 us per block in 2 steps, rank 0 none.
  for (int i : {2, 3}) {
    EXPECT_EQ(result.phases(i).name(), i == 2 ? "forward h.0" : "forward h.1");
    EXPECT_EQ(result.phases(i).parent(), "forward");
    EXPECT_DOUBLE_EQ(result.phases(i).min_ms(), 0);
    EXPECT_DOUBLE_EQ(result.phases(i).p50_ms(), 0.005);
    EXPECT_DOUBLE_EQ(result.phases(i).max_ms(), 0.010);
    EXPECT_EQ(result.phases(i).max_rank(), 1);
  }
  EXPECT_EQ(result.phases(4).name(), "backward");
  EXPECT_DOUBLE_EQ(result.phases(4).min_ms(), 0.040);  // h.0 not counted twice
  EXPECT_DOUBLE_EQ(result.phases(4).max_ms(), 0.045);
  EXPECT_EQ(result.phases(5).name(), "backward h.0");
  EXPECT_EQ(result.phases(5).parent(), "backward");
  EXPECT_DOUBLE_EQ(result.phases(5).max_ms(), 0.010);
  EXPECT_EQ(result.phases(5).max_rank(), 0);
  EXPECT_EQ(result.phases(6).name(), "optimizer");
  EXPECT_EQ(result.phases(6).parent(), "");
  EXPECT_DOUBLE_EQ(result.phases(6).p50_ms(), 0.015);
  // The Markdown marks nested rows and says what they are.
  const std::string md = RenderMarkdown(result, "");
  EXPECT_NE(md.find("| ↳ backward h.0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("part of its time, not added to it"), std::string::npos) << md;

  ASSERT_EQ(result.arrivals_size(), 2);
  EXPECT_EQ(result.arrivals(0).last_rank(), 1);
  EXPECT_EQ(result.arrivals(0).op(), "all_reduce");
  EXPECT_DOUBLE_EQ(result.arrivals(0).max_wait_ms(), 0.020);
  EXPECT_EQ(result.arrivals(1).last_rank(), 1);
  EXPECT_DOUBLE_EQ(result.arrivals(1).max_wait_ms(), 0.010);
  ASSERT_EQ(result.last_arrivals_size(), 2);
  EXPECT_EQ(result.last_arrivals(0), 0);
  EXPECT_EQ(result.last_arrivals(1), 2);
}

// fsdp-like: an all-gather in forward before the gradient reduce-scatter in
// backward. Rank 0 is last at the all-gather (12 vs 10) but rank 1 at the
// gradient collective (50 vs 40): the straggler is rank 1, waited for 10 us.
TEST(ProfilerAgg, TheArrivalIsAtTheFirstGradientCollectiveNotAnEarlierGather) {
  absl::StatusOr<std::vector<RankTrace>> traces = ReadTraces(kFixtures + "/gather_first");
  ASSERT_TRUE(traces.ok()) << traces.status();
  const ProfilerAggResult result = Analyze(*traces);
  ASSERT_EQ(result.arrivals_size(), 1);
  EXPECT_EQ(result.arrivals(0).last_rank(), 1);
  EXPECT_EQ(result.arrivals(0).op(), "reduce_scatter");
  EXPECT_EQ(result.arrivals(0).seq(), 1);
  EXPECT_DOUBLE_EQ(result.arrivals(0).max_wait_ms(), 0.010);
  EXPECT_DOUBLE_EQ(result.arrivals(0).mean_wait_ms(), 0.010);
  // Without backward spans (comm_bench, moe_comm) the step's first
  // collective counts: there rank 0 is last, 2 us after rank 1.
  for (RankTrace& t : *traces) {
    for (trace::TraceEvent& e : *t.file.mutable_traceevents()) {
      if (e.name() == "backward") e.set_name("other");
    }
  }
  const ProfilerAggResult without = Analyze(*traces);
  ASSERT_EQ(without.arrivals_size(), 1);
  EXPECT_EQ(without.arrivals(0).last_rank(), 0);
  EXPECT_EQ(without.arrivals(0).op(), "all_gather");
  EXPECT_DOUBLE_EQ(without.arrivals(0).max_wait_ms(), 0.002);
}

// A tp run's trace (trainer --tp, common/collective/trace_collectives.h):
// the tp group's collectives, category tp_collective on the "tp comm" track,
// are a row of their own nested in the step, and leave the data-parallel
// figures (in flight, overlap, arrivals) as they were.
TEST(ProfilerAgg, TpCollectivesAreARowOfTheirOwnOutsideTheOverlap) {
  absl::StatusOr<std::vector<RankTrace>> traces = ReadTraces(kFixtures + "/two_ranks");
  ASSERT_TRUE(traces.ok()) << traces.status();
  const ProfilerAggResult before = Analyze(*traces);
  // Per rank and step: a 6 us all-reduce and a 4 us one (their times do
  // not enter the row: a rank's total over its steps).
  for (RankTrace& t : *traces) {
    for (double step_start : {0.0, 100.0}) {
      for (const auto& [at, dur] : {std::pair<double, double>{2, 6}, {32, 4}}) {
        trace::TraceEvent* e = t.file.add_traceevents();
        e->set_name("all_reduce");
        e->set_cat("tp_collective");
        e->set_ph("X");
        e->set_ts(step_start + at);
        e->set_dur(dur);
        e->set_pid(t.file.otherdata().rank());
        e->set_tid(trace::kTpCommTrack);
        (*e->mutable_args())["op"] = "all_reduce";
      }
    }
  }
  const ProfilerAggResult result = Analyze(*traces);
  const PhaseStats* tp = nullptr;
  for (const PhaseStats& phase : result.phases()) {
    if (phase.name() == "tp collectives") tp = &phase;
  }
  ASSERT_NE(tp, nullptr);
  EXPECT_EQ(tp->parent(), "step");
  EXPECT_DOUBLE_EQ(tp->min_ms(), 0.010);  // 6 + 4 us per step
  EXPECT_DOUBLE_EQ(tp->max_ms(), 0.010);
  EXPECT_EQ(result.phases_size(), before.phases_size() + 1);
  EXPECT_DOUBLE_EQ(result.in_flight_ms(), before.in_flight_ms());
  EXPECT_DOUBLE_EQ(result.exposed_ms(), before.exposed_ms());
  EXPECT_DOUBLE_EQ(result.overlap_ratio(), before.overlap_ratio());
  ASSERT_EQ(result.arrivals_size(), before.arrivals_size());
  for (int i = 0; i < result.arrivals_size(); ++i) {
    EXPECT_EQ(result.arrivals(i).op(), before.arrivals(i).op());
    EXPECT_DOUBLE_EQ(result.arrivals(i).max_wait_ms(), before.arrivals(i).max_wait_ms());
  }
}

TEST(ProfilerAgg, TheMergedTraceIsOnRankZerosClock) {
  absl::StatusOr<std::vector<RankTrace>> traces = ReadTraces(kFixtures + "/two_ranks");
  ASSERT_TRUE(traces.ok()) << traces.status();
  const trace::TraceFile merged = MergeTraces(*traces);
  bool found = false;
  for (const trace::TraceEvent& e : merged.traceevents()) {
    if (e.pid() == 1 && e.name() == "all_reduce" && e.args().at("seq") == "1") {
      // Raw 270 since its start, which is 300 us after rank 0's on its
      // clock, whose offset is -500: 270 + 300 - 500.
      EXPECT_DOUBLE_EQ(e.ts(), 70);
      found = true;
    }
  }
  EXPECT_TRUE(found);
  const std::string svg = RenderStepTimelineSvg(*traces, 1);
  EXPECT_NE(svg.find("class=\"comm\""), std::string::npos);
  EXPECT_NE(svg.find("rank 1 comm"), std::string::npos);
  EXPECT_EQ(RenderStepTimelineSvg(*traces, 99), "");
}

TEST(ProfilerAgg, OverlapIsNotApplicableWithoutCommunication) {
  absl::StatusOr<std::vector<RankTrace>> traces = ReadTraces(kFixtures + "/two_ranks");
  ASSERT_TRUE(traces.ok()) << traces.status();
  EXPECT_NE(RenderMarkdown(Analyze(*traces), "").find("| 75.0% |"), std::string::npos);
  // One rank, nothing communicated (a 1-rank run).
  std::vector<RankTrace> alone = {traces->front()};
  alone[0].file.mutable_otherdata()->set_world_size(1);
  auto* events = alone[0].file.mutable_traceevents();
  events->erase(std::remove_if(events->begin(), events->end(),
                               [](const trace::TraceEvent& e) {
                                 return e.cat() == "collective" || e.cat() == "wait";
                               }),
                events->end());
  const std::string md = RenderMarkdown(Analyze(alone), "");
  EXPECT_NE(md.find("| n/a (no communication) |"), std::string::npos) << md;
  EXPECT_NE(md.find("overlap n/a (no communication)."), std::string::npos) << md;
  EXPECT_EQ(md.find("0.0%"), std::string::npos) << md;
}

TEST(ProfilerAgg, NoTracesAnotherRunOrATruncatedFileIsOneLineNamingIt) {
  const absl::StatusOr<std::vector<RankTrace>> none = ReadTraces(kFixtures);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("no rank_<r>.trace.json files"), std::string::npos);
  const absl::StatusOr<std::vector<RankTrace>> mixed = ReadTraces(kFixtures + "/mixed_runs");
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(mixed.status().message().rfind(kFixtures + "/mixed_runs/rank_1.trace.json: trace of run another-run", 0), 0u)
      << mixed.status().message();
  const absl::StatusOr<std::vector<RankTrace>> cut = ReadTraces(kFixtures + "/truncated");
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(cut.status().message().rfind(kFixtures + "/truncated/rank_1.trace.json: ", 0), 0u)
      << cut.status().message();
  EXPECT_EQ(cut.status().message().find('\n'), std::string::npos);
}


// A synthetic pipelined run: per rank, one ProfilerStep#1 span and the
// stage's forward/backward spans at the given [begin, end) (us).
struct Span {
  bool forward;
  int micro_batch;
  double begin, end;
};

std::vector<RankTrace> PipelinedRun(const std::vector<std::vector<Span>>& ranks, int dp) {
  std::vector<RankTrace> traces;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    RankTrace t;
    t.path = absl::StrCat("rank_", r);
    trace::TraceRunInfo* info = t.file.mutable_otherdata();
    info->set_run_id("pipelined");
    info->set_rank(r);
    info->set_world_size(static_cast<int>(ranks.size()));
    trace::TraceEvent* step = t.file.add_traceevents();
    step->set_name("ProfilerStep#1");
    step->set_cat("step");
    step->set_ph("X");
    step->set_ts(0);
    step->set_dur(1000);
    for (const Span& span : ranks[r]) {
      trace::TraceEvent* e = t.file.add_traceevents();
      e->set_name(span.forward ? "forward" : "backward");
      e->set_cat("compute");
      e->set_ph("X");
      e->set_ts(span.begin);
      e->set_dur(span.end - span.begin);
      (*e->mutable_args())["stage"] = absl::StrCat(r / dp);
      (*e->mutable_args())["micro_batch"] = absl::StrCat(span.micro_batch);
    }
    traces.push_back(std::move(t));
  }
  return traces;
}

// GPipe at p stages, m micro-batches, forward f and backward b us with free
// messages: stage s runs forward j at (s + j) f and, once the last stage's
// forwards are done at (m + p - 1) f, backward j at that + (p - 1 - s + j) b.
std::vector<std::vector<Span>> GPipeTimes(int p, int m, double f, double b) {
  std::vector<std::vector<Span>> stages(p);
  const double backwards = (m + p - 1) * f;
  for (int s = 0; s < p; ++s) {
    for (int j = 0; j < m; ++j) stages[s].push_back({true, j, (s + j) * f, (s + j + 1) * f});
    for (int j = 0; j < m; ++j) {
      stages[s].push_back({false, j, backwards + (p - 1 - s + j) * b,
                           backwards + (p - s + j) * b});
    }
  }
  return stages;
}

// The closed form holds exactly for an ideal GPipe timeline: (p-1)/(m+p-1)
// idle of a window of (m+p-1)(f+b), at any f and b, and m micro-batches in
// flight on every stage. Whole microseconds: exact in double.
TEST(ProfilerAggPipeline, AnIdealGPipeTimelineMeasuresTheClosedFormBubble) {
  for (const auto& [p, m] : std::vector<std::pair<int, int>>{{2, 3}, {4, 1}, {4, 8}}) {
    SCOPED_TRACE(absl::StrCat("p=", p, " m=", m));
    const ProfilerAggResult result = Analyze(PipelinedRun(GPipeTimes(p, m, 10, 20), 1));
    EXPECT_EQ(result.pipeline_stages(), p);
    EXPECT_EQ(result.pipeline_micro_batches(), m);
    ASSERT_EQ(result.pipeline_size(), p);
    for (int s = 0; s < p; ++s) {
      const PipelineStageStats& stats = result.pipeline(s);
      EXPECT_EQ(stats.stage(), s);
      EXPECT_DOUBLE_EQ(stats.window_ms(), (m + p - 1) * 30 / 1000.0);
      EXPECT_DOUBLE_EQ(stats.idle_ms(), (p - 1) * 30 / 1000.0);
      EXPECT_DOUBLE_EQ(stats.measured_bubble_fraction(),
                       static_cast<double>(p - 1) / (m + p - 1));
      EXPECT_DOUBLE_EQ(stats.closed_form_bubble_fraction(),
                       static_cast<double>(p - 1) / (m + p - 1));
      EXPECT_EQ(stats.peak_in_flight(), m);
      EXPECT_EQ(stats.gpipe_bound(), m);
      EXPECT_EQ(stats.one_f_one_b_bound(), std::min(p - s, m));
    }
  }
}

// 1F1B at p=2, m=3, f=b=10 us, worked by hand: stage 0 F0 F1 B0 F2 B1 B2,
// stage 1 F0 B0 F1 B1 F2 B2, each waiting for its input. Window 0-80 =
// (m+p-1)(f+b); each stage idle 20 = 1/4 = (p-1)/(m+p-1). Stage 0 holds at
// most 2 = p micro-batches, stage 1 one.
std::vector<std::vector<Span>> OneFOneB() {
  return {{{true, 0, 0, 10}, {true, 1, 10, 20}, {false, 0, 30, 40},
           {true, 2, 40, 50}, {false, 1, 50, 60}, {false, 2, 70, 80}},
          {{true, 0, 10, 20}, {false, 0, 20, 30}, {true, 1, 30, 40},
           {false, 1, 40, 50}, {true, 2, 50, 60}, {false, 2, 60, 70}}};
}

TEST(ProfilerAggPipeline, OneFOneBHoldsAtMostPMicroBatchesAndTheSameBubble) {
  const ProfilerAggResult result = Analyze(PipelinedRun(OneFOneB(), 1));
  ASSERT_EQ(result.pipeline_size(), 2);
  for (int s = 0; s < 2; ++s) {
    EXPECT_DOUBLE_EQ(result.pipeline(s).window_ms(), 0.080);
    EXPECT_DOUBLE_EQ(result.pipeline(s).idle_ms(), 0.020);
    EXPECT_DOUBLE_EQ(result.pipeline(s).measured_bubble_fraction(), 0.25);
  }
  EXPECT_EQ(result.pipeline(0).peak_in_flight(), 2);
  EXPECT_EQ(result.pipeline(0).one_f_one_b_bound(), 2);
  EXPECT_EQ(result.pipeline(1).peak_in_flight(), 1);
  EXPECT_EQ(result.pipeline(1).one_f_one_b_bound(), 1);
  const std::string md = RenderMarkdown(result, "");
  EXPECT_NE(md.find("## Pipeline: 2 stages, 3 micro-batches"), std::string::npos) << md;
  EXPECT_NE(md.find("| 0 | 0 | 0.0800 | 0.0200 | 25.0% | 25.0% | 2 | 3 | 2 |"), std::string::npos)
      << md;

  // Negative: a slow message into stage 1's last forward (40 us late) is
  // bubble the closed form does not have: both stages measure more, stage
  // 0's window now 120 with 60 idle.
  std::vector<std::vector<Span>> late = OneFOneB();
  late[1][4] = {true, 2, 90, 100};
  late[1][5] = {false, 2, 100, 110};
  late[0][5] = {false, 2, 110, 120};
  const ProfilerAggResult slow = Analyze(PipelinedRun(late, 1));
  EXPECT_DOUBLE_EQ(slow.pipeline(0).measured_bubble_fraction(), 0.5);
  EXPECT_GT(slow.pipeline(1).measured_bubble_fraction(), 0.25);
  EXPECT_DOUBLE_EQ(slow.pipeline(1).closed_form_bubble_fraction(), 0.25);
  // Negative: GPipe's order on the same stages holds all 3 on stage 0,
  // above 1F1B's bound.
  EXPECT_EQ(Analyze(PipelinedRun(GPipeTimes(2, 3, 10, 10), 1)).pipeline(0).peak_in_flight(), 3);
}

// pp=2 x dp=2: ranks 0,1 run stage 0 and ranks 2,3 stage 1; pipeline d is
// ranks d and 2 + d. Replica 1 runs 100 us later: per-pipeline windows keep
// the bubble at the closed form (one window over all ranks would not).
TEST(ProfilerAggPipeline, EachDataParallelReplicaIsItsOwnPipeline) {
  std::vector<std::vector<Span>> gpipe = GPipeTimes(2, 3, 10, 20);
  std::vector<std::vector<Span>> ranks = {gpipe[0], gpipe[0], gpipe[1], gpipe[1]};
  for (int r : {1, 3}) {
    for (Span& span : ranks[r]) {
      span.begin += 100;
      span.end += 100;
    }
  }
  const ProfilerAggResult result = Analyze(PipelinedRun(ranks, 2));
  ASSERT_EQ(result.pipeline_size(), 2);
  EXPECT_EQ(result.pipeline(1).ranks_size(), 2);
  EXPECT_EQ(result.pipeline(1).ranks(0), 2);
  EXPECT_DOUBLE_EQ(result.pipeline(0).measured_bubble_fraction(), 0.25);
  EXPECT_DOUBLE_EQ(result.pipeline(1).measured_bubble_fraction(), 0.25);
}

TEST(ProfilerAggPipeline, NoStageSpansNoPipelineSectionAndAMismatchIsSaid) {
  absl::StatusOr<std::vector<RankTrace>> traces = ReadTraces(kFixtures + "/two_ranks");
  ASSERT_TRUE(traces.ok()) << traces.status();
  const ProfilerAggResult plain = Analyze(*traces);
  EXPECT_EQ(plain.pipeline_size(), 0);
  EXPECT_EQ(plain.pipeline_note(), "");
  EXPECT_EQ(RenderMarkdown(plain, "").find("Pipeline"), std::string::npos);
  // Three ranks with spans of two stages: not a pp x dp world.
  std::vector<std::vector<Span>> gpipe = GPipeTimes(2, 2, 10, 10);
  const ProfilerAggResult odd = Analyze(PipelinedRun({gpipe[0], gpipe[1], gpipe[1]}, 2));
  EXPECT_EQ(odd.pipeline_size(), 0);
  EXPECT_NE(odd.pipeline_note().find("do not divide the 3 ranks"), std::string::npos)
      << odd.pipeline_note();
  EXPECT_NE(RenderMarkdown(odd, "").find("no bubble figures"), std::string::npos);
}

}  // namespace
}  // namespace mtb::profiler_agg
