#include "profiler_agg/analysis.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/stats.h"
#include "common/report/report.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "common/trace/intervals.h"

namespace mtb::profiler_agg {
namespace {

using trace::Interval;
using trace::TraceEvent;

constexpr char kStepPrefix[] = "ProfilerStep#";

double Offset(const RankTrace& t) { return t.to_rank0_us; }

bool IsSpan(const TraceEvent& e) { return e.ph() == "X"; }

constexpr char kTpCollectivesRow[] = "tp collectives";

// Step number of a "ProfilerStep#N" span, or -1.
int StepOf(const TraceEvent& e) {
  int step = -1;
  if (IsSpan(e) && e.cat() == "step" && absl::StartsWith(e.name(), kStepPrefix) &&
      absl::SimpleAtoi(e.name().substr(sizeof(kStepPrefix) - 1), &step)) {
    return step;
  }
  return -1;
}

Interval Aligned(const TraceEvent& e, double offset) {
  return {e.ts() + offset, e.ts() + e.dur() + offset};
}

// A nested phase (args.parent): its parent, and its place among the
// parent's rows (args.block when numeric: blocks in layer order).
struct Nested {
  std::string parent;
  int64_t order = -1;
};

struct Collective {
  Interval at;  // aligned
  int64_t seq = -1;
  std::string op;
};

// Ops that synchronise gradients (ddp's buckets, zero's and fsdp's
// reduce-scatters); fsdp's all-gathers and the loop's scalar collectives are
// not.
bool IsGradientOp(const std::string& op) {
  return op == "all_reduce" || op == "reduce_scatter";
}

// A pipelined run's per-micro-batch span (trainer/pipeline: "forward" or
// "backward" with args stage and micro_batch).
struct StageSpan {
  Interval at;  // aligned
  int stage = -1;
  int micro_batch = -1;
  bool forward = true;
};

struct RankView {
  std::map<int, Interval> steps;                       // aligned
  std::map<std::string, double> phase_total_us;        // per phase name
  std::map<std::string, Nested> nested;                // nested phase names
  std::vector<Interval> compute, in_flight;            // aligned, raw
  std::vector<Collective> collectives;                 // by issue time
  std::vector<double> backward_begins;                 // aligned, sorted
  std::vector<StageSpan> stage_spans;                  // aligned
};

// The stage span `e` is, if it is one.
std::optional<StageSpan> StageSpanOf(const TraceEvent& e, const Interval& at) {
  if (e.cat() != "compute" || (e.name() != "forward" && e.name() != "backward")) {
    return std::nullopt;
  }
  auto stage = e.args().find("stage");
  auto micro_batch = e.args().find("micro_batch");
  StageSpan span;
  span.at = at;
  span.forward = e.name() == "forward";
  if (stage == e.args().end() || micro_batch == e.args().end() ||
      !absl::SimpleAtoi(stage->second, &span.stage) ||
      !absl::SimpleAtoi(micro_batch->second, &span.micro_batch) || span.stage < 0 ||
      span.micro_batch < 0) {
    return std::nullopt;
  }
  return span;
}

RankView ViewOf(const RankTrace& t) {
  RankView view;
  const double offset = Offset(t);
  for (const TraceEvent& e : t.file.traceevents()) {
    if (!IsSpan(e)) continue;
    const Interval at = Aligned(e, offset);
    if (const int step = StepOf(e); step >= 0) {
      view.steps[step] = at;
      view.phase_total_us["step"] += e.dur();
    } else if (e.cat() == "compute" || e.cat() == "data" || e.cat() == "checkpoint") {
      // Nested spans (the per-block spans) are rows of their own, marked
      // with their parent: their time is already in the parent's.
      view.phase_total_us[e.name()] += e.dur();
      if (auto parent = e.args().find("parent"); parent != e.args().end()) {
        Nested& nested = view.nested[e.name()];
        nested.parent = parent->second;
        auto block = e.args().find("block");
        if (block != e.args().end()) (void)absl::SimpleAtoi(block->second, &nested.order);
      }
      if (e.cat() == "compute") view.compute.push_back(at);
      if (e.cat() == "compute" && e.name() == "backward") view.backward_begins.push_back(at.begin);
      if (std::optional<StageSpan> span = StageSpanOf(e, at)) view.stage_spans.push_back(*span);
    } else if (e.cat() == "tp_collective") {
      // A tensor-parallel group's collective (common/collective/
      // trace_collectives.h): blocking, inside forward and backward. A row
      // of its own, nested in the step; not part of the data-parallel
      // overlap or arrival figures below.
      view.phase_total_us[kTpCollectivesRow] += e.dur();
      view.nested[kTpCollectivesRow].parent = "step";
    } else if (e.cat() == "collective") {
      view.in_flight.push_back(at);
      Collective c;
      c.at = at;
      auto found = e.args().find("seq");
      if (found != e.args().end()) (void)absl::SimpleAtoi(found->second, &c.seq);
      found = e.args().find("op");
      c.op = found != e.args().end() ? found->second : e.name();
      view.collectives.push_back(std::move(c));
    }
  }
  std::stable_sort(view.collectives.begin(), view.collectives.end(),
                   [](const Collective& a, const Collective& b) { return a.at.begin < b.at.begin; });
  std::sort(view.backward_begins.begin(), view.backward_begins.end());
  return view;
}

absl::Status Bad(const std::string& path, const std::string& why) {
  return absl::DataLossError(absl::StrCat(path, ": ", why));
}

// "37.5%"; with nothing in flight an overlap ratio means nothing.
std::string OverlapText(double in_flight_ms, double ratio) {
  if (in_flight_ms <= 0) return "n/a (no communication)";
  return absl::StrFormat("%.1f%%", 100 * ratio);
}


// The spans of `view` that begin inside its step `step` (none without it).
std::vector<StageSpan> SpansInStep(const RankView& view, int step) {
  std::vector<StageSpan> spans;
  auto own = view.steps.find(step);
  if (own == view.steps.end()) return spans;
  for (const StageSpan& span : view.stage_spans) {
    if (span.at.begin >= own->second.begin && span.at.begin <= own->second.end) {
      spans.push_back(span);
    }
  }
  return spans;
}

// Most micro-batches with a forward begun and a backward not yet ended at
// once (one rank's spans run one at a time).
int PeakInFlight(std::vector<StageSpan> spans) {
  std::sort(spans.begin(), spans.end(), [](const StageSpan& a, const StageSpan& b) {
    return a.at.begin < b.at.begin;
  });
  int live = 0, peak = 0;
  for (const StageSpan& span : spans) {
    if (span.forward) {
      peak = std::max(peak, ++live);
    } else {
      --live;
    }
  }
  return peak;
}

// Pipelined runs: rank r runs stage r / dp of pipeline r % dp
// (trainer/pipeline/pipeline_training.h), with p stages and m micro-batches
// read off the spans. Per traced step and pipeline, the window is from its
// stages' first span to their last; each stage's idle time is the window
// less the union of its own spans.
void AnalyzePipeline(const std::vector<RankView>& views, ProfilerAggResult* result) {
  const int n = static_cast<int>(views.size());
  int p = 0, m = 0;
  bool any = false;
  for (const RankView& v : views) {
    for (const StageSpan& span : v.stage_spans) {
      any = true;
      p = std::max(p, span.stage + 1);
      m = std::max(m, span.micro_batch + 1);
    }
  }
  if (!any) return;
  if (n % p != 0) {
    result->set_pipeline_note(absl::StrCat("spans name ", p, " stages, which do not divide the ",
                                           n, " ranks: no bubble figures"));
    return;
  }
  const int dp = n / p;
  for (int r = 0; r < n; ++r) {
    for (const StageSpan& span : views[r].stage_spans) {
      if (span.stage != r / dp) {
        result->set_pipeline_note(absl::StrCat(
            "rank ", r, " has spans of stage ", span.stage, ", not of stage ", r / dp,
            " (rank / dp with dp = ", dp, "): no bubble figures"));
        return;
      }
    }
  }
  result->set_pipeline_stages(p);
  result->set_pipeline_micro_batches(m);
  std::vector<double> idle_us(p, 0), window_us(p, 0);
  std::vector<int> windows(p, 0), peak(p, 0);
  for (const auto& [step, unused] : views.front().steps) {
    for (int d = 0; d < dp; ++d) {
      std::vector<std::vector<StageSpan>> spans(p);
      double begin = 0, end = 0;
      bool seen = false;
      for (int s = 0; s < p; ++s) {
        spans[s] = SpansInStep(views[s * dp + d], step);
        for (const StageSpan& span : spans[s]) {
          begin = seen ? std::min(begin, span.at.begin) : span.at.begin;
          end = seen ? std::max(end, span.at.end) : span.at.end;
          seen = true;
        }
      }
      if (!seen || end <= begin) continue;
      for (int s = 0; s < p; ++s) {
        std::vector<Interval> busy;
        for (const StageSpan& span : spans[s]) busy.push_back(span.at);
        idle_us[s] += (end - begin) - trace::Length(trace::Union(busy));
        window_us[s] += end - begin;
        ++windows[s];
        peak[s] = std::max(peak[s], PeakInFlight(spans[s]));
      }
    }
  }
  for (int s = 0; s < p; ++s) {
    PipelineStageStats* stats = result->add_pipeline();
    stats->set_stage(s);
    for (int d = 0; d < dp; ++d) stats->add_ranks(s * dp + d);
    if (windows[s] > 0) {
      stats->set_window_ms(window_us[s] / windows[s] / 1000.0);
      stats->set_idle_ms(idle_us[s] / windows[s] / 1000.0);
      stats->set_measured_bubble_fraction(window_us[s] > 0 ? idle_us[s] / window_us[s] : 0);
    }
    stats->set_closed_form_bubble_fraction(static_cast<double>(p - 1) / (m + p - 1));
    stats->set_peak_in_flight(peak[s]);
    stats->set_gpipe_bound(m);
    stats->set_one_f_one_b_bound(std::min(p - s, m));
  }
}

}  // namespace

absl::StatusOr<std::vector<RankTrace>> ReadTraces(const std::string& directory) {
  absl::StatusOr<std::vector<std::string>> names =
      ListDirectory(directory, "rank_", ".trace.json");
  if (!names.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(directory, ": not a directory of traces"));
  }
  std::vector<std::string> paths;
  for (const std::string& name : *names) paths.push_back(absl::StrCat(directory, "/", name));
  if (paths.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        directory, ": no rank_<r>.trace.json files (give the --trace_dir of a run)"));
  }
  std::vector<RankTrace> traces;
  std::set<int> ranks;
  for (const std::string& path : paths) {
    RankTrace t;
    t.path = path;
    if (absl::Status read = ReadJsonFile(path, &t.file); !read.ok()) {
      if (!absl::IsDataLoss(read)) return read;
      // The parser's own words ("Closing quote expected") name no cause.
      return Bad(path, absl::StrCat("not a complete trace: it does not parse as trace JSON, "
                                    "so it is truncated (a rank killed while writing it?) "
                                    "or not a trace (",
                                    read.message(), ")"));
    }
    const trace::TraceRunInfo& info = t.file.otherdata();
    if (info.run_id().empty() || info.world_size() < 1) {
      return Bad(path, "not one of our rank traces (no otherData.run_id)");
    }
    if (!traces.empty()) {
      const trace::TraceRunInfo& first = traces.front().file.otherdata();
      if (info.run_id() != first.run_id()) {
        return Bad(path, absl::StrCat("trace of run ", info.run_id(), ", not of ",
                                      first.run_id(), " (", traces.front().path,
                                      "): one run per directory"));
      }
      if (info.world_size() != first.world_size()) {
        return Bad(path, "world size differs from the other traces");
      }
    }
    if (!ranks.insert(info.rank()).second) {
      return Bad(path, absl::StrCat("a second trace of rank ", info.rank()));
    }
    traces.push_back(std::move(t));
  }
  const int world_size = traces.front().file.otherdata().world_size();
  if (static_cast<int>(ranks.size()) != world_size || *ranks.begin() != 0 ||
      *ranks.rbegin() != world_size - 1) {
    return Bad(directory, absl::StrCat("has traces of ", ranks.size(), " ranks of a world of ",
                                       world_size, ": every rank's trace is needed"));
  }
  std::sort(traces.begin(), traces.end(), [](const RankTrace& a, const RankTrace& b) {
    return a.file.otherdata().rank() < b.file.otherdata().rank();
  });
  // ts counts from each recorder's own start, and the offset is between
  // absolute clocks: the start puts ts on its rank's absolute clock first.
  const bool started = std::all_of(traces.begin(), traces.end(), [](const RankTrace& t) {
    return t.file.otherdata().start_unix_us() != 0;
  });
  const int64_t rank0_start = traces.front().file.otherdata().start_unix_us();
  for (RankTrace& t : traces) {
    const trace::TraceRunInfo& info = t.file.otherdata();
    t.to_rank0_us = info.clock_offset_us() +
                    (started ? static_cast<double>(info.start_unix_us() - rank0_start) : 0);
  }
  return traces;
}

ProfilerAggResult Analyze(const std::vector<RankTrace>& traces) {
  ProfilerAggResult result;
  result.set_schema_version(1);
  result.set_run_id(traces.front().file.otherdata().run_id());
  const int n = static_cast<int>(traces.size());
  result.set_world_size(n);
  std::vector<RankView> views;
  for (const RankTrace& t : traces) views.push_back(ViewOf(t));
  const int steps = static_cast<int>(views.front().steps.size());
  result.set_steps(steps);

  // Phases: each rank's mean per step, then across ranks. Top-level phases
  // in the loop's order (others by name), each followed by the rows nested
  // in it (by block, then name).
  std::set<std::string> names;
  std::map<std::string, Nested> nested;
  for (const RankView& v : views) {
    for (const auto& [name, total] : v.phase_total_us) names.insert(name);
    for (const auto& [name, n] : v.nested) nested.emplace(name, n);
  }
  std::vector<std::string> top = {"step", "data", "forward", "backward", "optimizer", "checkpoint"};
  for (const std::string& name : names) {
    if (!nested.count(name) && std::find(top.begin(), top.end(), name) == top.end()) {
      top.push_back(name);
    }
  }
  std::vector<std::pair<std::string, Nested>> children(nested.begin(), nested.end());
  std::stable_sort(children.begin(), children.end(), [](const auto& a, const auto& b) {
    return a.second.order < b.second.order;
  });
  std::vector<std::string> ordered;
  auto add_with_children = [&](const std::string& name) {
    ordered.push_back(name);
    for (const auto& [child, n] : children) {
      if (n.parent == name) ordered.push_back(child);
    }
  };
  for (const std::string& name : top) add_with_children(name);
  // Rows whose parent has no row of its own come last.
  for (const auto& [child, n] : children) {
    if (std::find(ordered.begin(), ordered.end(), child) == ordered.end()) {
      ordered.push_back(child);
    }
  }
  std::vector<double> step_means;
  for (const std::string& name : ordered) {
    if (!names.count(name)) continue;
    std::vector<double> means;
    for (const RankView& v : views) {
      auto found = v.phase_total_us.find(name);
      const double total = found == v.phase_total_us.end() ? 0 : found->second;
      means.push_back(total / std::max<size_t>(1, v.steps.size()) / 1000.0);
    }
    PhaseStats* phase = result.add_phases();
    phase->set_name(name);
    phase->set_min_ms(*std::min_element(means.begin(), means.end()));
    phase->set_p50_ms(Median(means));
    const auto max = std::max_element(means.begin(), means.end());
    phase->set_max_ms(*max);
    phase->set_max_rank(static_cast<int>(max - means.begin()));
    if (auto n = nested.find(name); n != nested.end()) phase->set_parent(n->second.parent);
    if (name == "step") step_means = means;
  }
  if (!step_means.empty() && Median(step_means) > 0) {
    result.set_straggler_ratio(*std::max_element(step_means.begin(), step_means.end()) /
                               Median(step_means));
  }

  // Arrival at each step's first gradient collective (aligned issue time):
  // the first all-reduce or reduce-scatter issued once the step's backward
  // has begun; a step without a backward span (comm_bench, moe_comm) or
  // without such a collective: its first collective.
  std::vector<int> last_counts(n, 0);
  for (const auto& [step, window] : views.front().steps) {
    std::vector<double> arrivals;
    std::vector<const Collective*> at_collective;
    for (const RankView& v : views) {
      auto own = v.steps.find(step);
      const Collective* first = nullptr;
      if (own != v.steps.end()) {
        const Interval& s = own->second;
        auto in_step = [&s](double t) { return t >= s.begin && t <= s.end; };
        double backward = -1;
        for (double b : v.backward_begins) {
          if (in_step(b)) {
            backward = b;
            break;
          }
        }
        const Collective* any = nullptr;
        for (const Collective& c : v.collectives) {
          if (!in_step(c.at.begin)) continue;
          if (any == nullptr) any = &c;
          if (backward >= 0 && c.at.begin >= backward && IsGradientOp(c.op)) {
            first = &c;
            break;
          }
        }
        if (first == nullptr) first = any;
      }
      arrivals.push_back(first != nullptr ? first->at.begin : -1);
      at_collective.push_back(first);
    }
    if (std::count(arrivals.begin(), arrivals.end(), -1.0) > 0) continue;
    const auto last = std::max_element(arrivals.begin(), arrivals.end());
    StepArrival* a = result.add_arrivals();
    a->set_step(step);
    a->set_last_rank(static_cast<int>(last - arrivals.begin()));
    a->set_op(at_collective[a->last_rank()]->op);
    a->set_seq(at_collective[a->last_rank()]->seq);
    double max_wait = 0, sum_wait = 0;
    for (int r = 0; r < n; ++r) {
      if (r == a->last_rank()) continue;
      const double wait = *last - arrivals[r];
      max_wait = std::max(max_wait, wait);
      sum_wait += wait;
    }
    a->set_max_wait_ms(max_wait / 1000.0);
    a->set_mean_wait_ms(n > 1 ? sum_wait / (n - 1) / 1000.0 : 0);
    ++last_counts[a->last_rank()];
  }
  for (int count : last_counts) result.add_last_arrivals(count);

  // Overlap: in flight vs compute on each rank's own timeline.
  double exposed = 0, in_flight = 0;
  for (int r = 0; r < n; ++r) {
    const std::vector<Interval> flight = trace::Union(views[r].in_flight);
    const std::vector<Interval> compute = trace::Union(views[r].compute);
    const double flight_us = trace::Length(flight);
    const double overlapped_us = trace::Length(trace::Intersect(flight, compute));
    RankOverlap* rank = result.add_ranks();
    rank->set_rank(r);
    rank->set_in_flight_ms(flight_us / 1000.0);
    rank->set_exposed_ms((flight_us - overlapped_us) / 1000.0);
    rank->set_overlap_ratio(flight_us > 0 ? overlapped_us / flight_us : 0);
    const trace::TraceRunInfo& info = traces[r].file.otherdata();
    rank->set_clock_offset_us(info.clock_offset_us());
    rank->set_clock_sync_rtt_us(info.clock_sync_rtt_us());
    rank->set_hostname(info.hostname());
    exposed += flight_us - overlapped_us;
    in_flight += flight_us;
  }
  result.set_exposed_ms(exposed / 1000.0);
  result.set_in_flight_ms(in_flight / 1000.0);
  result.set_overlap_ratio(in_flight > 0 ? (in_flight - exposed) / in_flight : 0);
  AnalyzePipeline(views, &result);
  return result;
}

trace::TraceFile MergeTraces(const std::vector<RankTrace>& traces) {
  trace::TraceFile merged;
  merged.set_displaytimeunit("ms");
  *merged.mutable_otherdata() = traces.front().file.otherdata();
  merged.mutable_otherdata()->set_rank(-1);
  merged.mutable_otherdata()->set_clock_offset_us(0);
  merged.mutable_otherdata()->set_tool(kMergedTool);
  for (const RankTrace& t : traces) {
    const double offset = Offset(t);
    for (TraceEvent e : t.file.traceevents()) {
      if (e.ph() == "X") e.set_ts(e.ts() + offset);
      e.set_pid(t.file.otherdata().rank());
      *merged.add_traceevents() = std::move(e);
    }
  }
  return merged;
}

std::string RenderStepTimelineSvg(const std::vector<RankTrace>& traces, int step) {
  std::vector<RankView> views;
  double begin = 0, end = 0;
  bool any = false;
  for (const RankTrace& t : traces) {
    views.push_back(ViewOf(t));
    auto found = views.back().steps.find(step);
    if (found == views.back().steps.end()) continue;
    begin = any ? std::min(begin, found->second.begin) : found->second.begin;
    end = any ? std::max(end, found->second.end) : found->second.end;
    any = true;
  }
  if (!any || end <= begin) return "";
  const int width = 900, left = 90, right = 20, row = 18, gap = 10;
  const int height = 50 + static_cast<int>(views.size()) * (2 * row + gap) + 30;
  const double scale = (width - left - right) / (end - begin);
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%d\" y=\"20\" font-size=\"14\">step %d on rank 0's clock: "
      "compute (blue) and collectives in flight (orange), %.3g ms</text>\n",
      width, height, left, step, (end - begin) / 1000.0);
  auto rects = [&](const std::vector<Interval>& spans, int y, const char* colour,
                   const char* cls) {
    for (const Interval& span : trace::Union(spans)) {
      const double a = std::max(span.begin, begin), b = std::min(span.end, end);
      if (b <= a) continue;
      absl::StrAppendFormat(&svg,
                            "<rect class=\"%s\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" "
                            "height=\"%d\" fill=\"%s\"/>\n",
                            cls, left + (a - begin) * scale, y,
                            std::max(0.5, (b - a) * scale), row - 2, colour);
    }
  };
  for (size_t r = 0; r < views.size(); ++r) {
    const int y = 40 + static_cast<int>(r) * (2 * row + gap);
    absl::StrAppendFormat(&svg,
                          "<text x=\"4\" y=\"%d\">rank %d compute</text>\n"
                          "<text x=\"4\" y=\"%d\">rank %d comm</text>\n",
                          y + 12, static_cast<int>(r), y + row + 12, static_cast<int>(r));
    rects(views[r].compute, y, "#1f77b4", "compute");
    rects(views[r].in_flight, y + row, "#ff7f0e", "comm");
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

std::string RenderMarkdown(const ProfilerAggResult& result,
                           const std::string& timeline_svg_name) {
  std::string md = absl::StrCat("# profiler_agg: run ", result.run_id(), "\n\n",
                                result.world_size(), " ranks, ", result.steps(),
                                " traced steps.\n\n## Phases (per step, across ranks)\n\n");
  MarkdownTable phases;
  phases.headers = {"phase", "min ms", "p50 ms", "max ms", "slowest rank"};
  phases.align = {Align::kLeft, Align::kRight, Align::kRight, Align::kRight, Align::kRight};
  bool any_nested = false;
  for (const PhaseStats& p : result.phases()) {
    any_nested = any_nested || !p.parent().empty();
    phases.rows.push_back({p.parent().empty() ? p.name() : absl::StrCat("↳ ", p.name()),
                           FormatSignificant(p.min_ms(), 3),
                           FormatSignificant(p.p50_ms(), 3),
                           FormatSignificant(p.max_ms(), 3), absl::StrCat(p.max_rank())});
  }
  absl::StrAppend(&md, phases.Render(),
                  any_nested ? "\n↳ rows are nested in the phase above them (per-block "
                               "spans): part of its time, not added to it.\n"
                             : "",
                  "\nStraggler ratio (max / median step time): ",
                  FormatSignificant(result.straggler_ratio(), 3), "\n\n");
  absl::StrAppend(&md, "## Arrival at each step's first gradient collective\n\n"
                       "(the first all_reduce or reduce_scatter issued once backward began; "
                       "without a backward span, the step's first collective)\n\n");
  MarkdownTable arrivals;
  arrivals.headers = {"rank", "steps it arrived last"};
  for (int r = 0; r < result.last_arrivals_size(); ++r) {
    arrivals.rows.push_back({absl::StrCat(r), absl::StrCat(result.last_arrivals(r), " of ",
                                                          result.arrivals_size())});
  }
  double max_wait = 0;
  for (const StepArrival& a : result.arrivals()) max_wait = std::max(max_wait, a.max_wait_ms());
  absl::StrAppend(&md, arrivals.Render(), "\nLongest wait for the last rank: ",
                  FormatSignificant(max_wait, 3), " ms\n\n## Communication overlap\n\n");
  MarkdownTable overlap;
  overlap.headers = {"rank", "host", "in flight ms", "exposed ms", "overlap", "clock offset us (RTT)"};
  overlap.align = {Align::kLeft, Align::kLeft, Align::kRight, Align::kRight, Align::kRight, Align::kRight};
  for (const RankOverlap& r : result.ranks()) {
    overlap.rows.push_back(
        {absl::StrCat(r.rank()), r.hostname(), FormatSignificant(r.in_flight_ms(), 3),
         FormatSignificant(r.exposed_ms(), 3), OverlapText(r.in_flight_ms(), r.overlap_ratio()),
         absl::StrCat(FormatSignificant(r.clock_offset_us(), 3), " (",
                      FormatSignificant(r.clock_sync_rtt_us(), 3), ")")});
  }
  absl::StrAppend(&md, overlap.Render(),
                  "\nAll ranks: ", FormatSignificant(result.in_flight_ms(), 3), " ms in flight, ",
                  FormatSignificant(result.exposed_ms(), 3), " ms exposed, overlap ",
                  OverlapText(result.in_flight_ms(), result.overlap_ratio()), ".\n");
  if (result.pipeline_size() > 0) {
    absl::StrAppend(
        &md, "\n## Pipeline: ", result.pipeline_stages(), " stages, ",
        result.pipeline_micro_batches(),
        " micro-batches\n\nBubble: each stage's idle share of the pipeline's window (its "
        "stages' first forward to their last backward, per step), next to the closed form "
        "(p-1)/(m+p-1), which assumes equal stages and free messages. In flight: most "
        "micro-batches holding activations at once (forward begun, backward not ended), "
        "next to GPipe's bound m and 1F1B's min(p-stage, m).\n\n");
    MarkdownTable stages;
    stages.headers = {"stage", "ranks", "window ms", "idle ms", "bubble measured",
                      "bubble (p-1)/(m+p-1)", "in flight (peak)", "GPipe bound",
                      "1F1B bound"};
    stages.align = {Align::kLeft,  Align::kLeft,  Align::kRight, Align::kRight, Align::kRight,
                    Align::kRight, Align::kRight, Align::kRight, Align::kRight};
    for (const PipelineStageStats& s : result.pipeline()) {
      stages.rows.push_back(
          {absl::StrCat(s.stage()), absl::StrJoin(s.ranks(), ","),
           FormatSignificant(s.window_ms(), 3), FormatSignificant(s.idle_ms(), 3),
           absl::StrFormat("%.1f%%", 100 * s.measured_bubble_fraction()),
           absl::StrFormat("%.1f%%", 100 * s.closed_form_bubble_fraction()),
           absl::StrCat(s.peak_in_flight()), absl::StrCat(s.gpipe_bound()),
           absl::StrCat(s.one_f_one_b_bound())});
    }
    absl::StrAppend(&md, stages.Render());
  } else if (!result.pipeline_note().empty()) {
    absl::StrAppend(&md, "\n## Pipeline\n\n", result.pipeline_note(), "\n");
  }
  if (!timeline_svg_name.empty()) {
    absl::StrAppend(&md, "\n![one step's timeline](", timeline_svg_name, ")\n");
  }
  return md;
}

}  // namespace mtb::profiler_agg
