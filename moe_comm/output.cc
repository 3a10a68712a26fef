#include "moe_comm/output.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/skew.h"
#include "common/base/status.h"
#include "common/report/report.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"

namespace mtb::moe_comm {
namespace {

std::string F3(double v) { return FormatSignificant(v, 3); }

double SkewExponent(const std::string& text) {
  absl::StatusOr<Skew> skew = ParseSkew("skew", text);
  if (!skew.ok()) return -1;
  return skew->kind == Skew::Kind::kZipf ? skew->exponent : 0.0;
}

// The configuration without its skew: the series a plot point belongs to.
std::string SeriesKey(const MoeConfig& c) {
  return absl::StrCat("N=", c.tokens_per_rank(), " D=", c.hidden(), " E=",
                      c.num_experts(), " k=", c.top_k(), " cf=",
                      c.capacity_factor());
}

}  // namespace

std::string RenderTable(const MoeCommResult& result) {
  MarkdownTable table;
  if (result.mode() == "check") {
    table.headers = {"N", "D", "E", "k", "cf", "skew", "dropped", "tensors ok",
                     "collectives ok", "result"};
    for (const ConfigCheck& c : result.checks()) {
      int ok = 0, collectives_ok = 0;
      for (const auto& t : c.check().tensors()) ok += t.ok() ? 1 : 0;
      for (const auto& t : c.check().collectives()) collectives_ok += t.ok() ? 1 : 0;
      const MoeConfig& k = c.config();
      table.rows.push_back(
          {absl::StrCat(k.tokens_per_rank()), absl::StrCat(k.hidden()),
           absl::StrCat(k.num_experts()), absl::StrCat(k.top_k()),
           absl::StrCat(k.capacity_factor()), k.skew(),
           absl::StrCat(c.dropped(), "/", c.assignments()),
           absl::StrCat(ok, "/", c.check().tensors_size()),
           absl::StrCat(collectives_ok, "/", c.check().collectives_size()),
           c.check().pass() ? "PASS" : "FAIL"});
    }
    return table.Render();
  }
  table.headers = {"N",     "D",          "E",           "k",
                   "cf",    "skew",       "dispatch ms (mean/p50/p99/slowest)",
                   "combine ms (mean)",   "expert ms (mean/slowest rank)",
                   "dispatch busbw GB/s (mean/bottleneck)",
                   "max rank bytes",      "drop %", "imbalance", "aux loss"};
  table.align.assign(table.headers.size(), Align::kRight);
  table.align[5] = Align::kLeft;  // skew
  for (const ConfigResult& r : result.configs()) {
    const MoeConfig& k = r.config();
    int64_t max_bytes = 0;
    for (int p = 0; p < r.dispatch_bytes_sent_size(); ++p) {
      max_bytes = std::max({max_bytes, r.dispatch_bytes_sent(p),
                            r.dispatch_bytes_received(p)});
    }
    table.rows.push_back(
        {absl::StrCat(k.tokens_per_rank()), absl::StrCat(k.hidden()),
         absl::StrCat(k.num_experts()), absl::StrCat(k.top_k()),
         absl::StrCat(k.capacity_factor()), k.skew(),
         absl::StrCat(F3(r.dispatch().mean_ms()), "/", F3(r.dispatch().p50_ms()),
                      "/", F3(r.dispatch().p99_ms()), "/",
                      F3(r.dispatch().slowest_rank_mean_ms())),
         F3(r.combine().mean_ms()),
         absl::StrCat(F3(r.expert_compute().mean_ms()), "/",
                      F3(r.expert_compute().slowest_rank_mean_ms())),
         absl::StrCat(F3(r.dispatch_bandwidth().busbw_gbps()), "/",
                      F3(r.dispatch_bandwidth().bottleneck_busbw_gbps())),
         absl::StrCat(FormatByteAmount(max_bytes), " (rank ", r.bottleneck_rank(), ")"),
         F3(100 * r.drop_rate()), F3(r.imbalance()), F3(r.aux_loss())});
  }
  return table.Render();
}

std::string RenderMarkdownReport(const MoeCommResult& result) {
  const RunContext& context = result.run_context();
  std::string out = absl::StrCat(
      "# moe_comm ", result.mode(), ": expert-parallel MoE on ",
      context.world_size(), " ranks (", context.backend(), ")\n\n",
      result.pass() ? "PASS" : "FAIL", "; git ", context.git_commit(),
      context.git_dirty() ? " (dirty)" : "", ", ", context.build_mode(), ", ",
      context.cpu_model(), ", ", context.start_time_utc(),
      ". Definitions: docs/moe_comm.md.\n\n");
  const MoeCommOptions& o = result.options();
  absl::StrAppend(&out, "Timed iterations ", o.iters(), " after ",
                  o.warmup_iters(), " warm-ups; seed ", o.seed(), ".\n\n",
                  RenderTable(result));
  if (result.mode() == "check") {
    for (const ConfigCheck& c : result.checks()) {
      MarkdownTable tensors;
      tensors.headers = {"tensor", "max abs err", "max rel err", "ok", "detail"};
      for (const auto& t : c.check().tensors()) {
        tensors.rows.push_back({t.name(), F3(t.max_abs_error()),
                                F3(t.max_rel_error()), t.ok() ? "yes" : "NO",
                                t.message()});
      }
      MarkdownTable collectives;
      collectives.headers = {"phase", "op", "calls", "expected", "bytes sent",
                             "bytes received", "expected bytes", "ok"};
      for (const auto& k : c.check().collectives()) {
        collectives.rows.push_back(
            {k.phase(), k.op(), absl::StrCat(k.count()),
             absl::StrCat(k.expected_count()), absl::StrCat(k.bytes_sent()),
             absl::StrCat(k.bytes_received()), absl::StrCat(k.expected_bytes()),
             k.ok() ? "yes" : "NO"});
      }
      absl::StrAppend(&out, "\n## ", SeriesKey(c.config()), " skew=",
                      c.config().skew(), "\n\n", tensors.Render(), "\n",
                      collectives.Render());
    }
    return out;
  }
  absl::StrAppend(&out, "\n## Expert loads (assignments before capacity, all ranks)\n\n");
  MarkdownTable loads;
  loads.headers = {"configuration", "skew", "load per expert", "bytes sent per rank",
                   "bytes received per rank"};
  for (const ConfigResult& r : result.configs()) {
    loads.rows.push_back({SeriesKey(r.config()), r.config().skew(),
                          absl::StrJoin(r.expert_load(), " "),
                          absl::StrJoin(r.dispatch_bytes_sent(), " "),
                          absl::StrJoin(r.dispatch_bytes_received(), " ")});
  }
  absl::StrAppend(&out, loads.Render());
  return out;
}

std::string RenderSkewPlot(const MoeCommResult& result,
                           const std::string& metric) {
  if (result.configs().empty()) return "";
  LinePlot plot;
  plot.x_label = "routing skew (zipf exponent; uniform = 0)";
  const bool time = metric == "time";
  plot.title = time ? "moe_comm: dispatch and combine time vs skew"
                    : "moe_comm: drop rate vs skew";
  plot.y_label = time ? "mean time per call (ms)" : "dropped assignments (%)";
  std::map<std::string, std::vector<PlotSeries>> by_key;
  std::vector<std::string> order;
  for (const ConfigResult& r : result.configs()) {
    const std::string key = SeriesKey(r.config());
    auto [it, inserted] = by_key.try_emplace(key);
    if (inserted) {
      order.push_back(key);
      if (time) {
        it->second = {{"dispatch " + key, {}}, {"combine " + key, {}}};
      } else {
        it->second = {{"drop " + key, {}}};
      }
    }
    const double x = SkewExponent(r.config().skew());
    if (time) {
      it->second[0].points.emplace_back(x, r.dispatch().mean_ms());
      it->second[1].points.emplace_back(x, r.combine().mean_ms());
    } else {
      it->second[0].points.emplace_back(x, 100 * r.drop_rate());
    }
  }
  for (const std::string& key : order) {
    for (PlotSeries& s : by_key[key]) plot.series.push_back(std::move(s));
  }
  return RenderSvg(plot);
}

absl::StatusOr<std::vector<std::string>> WriteOutputs(
    const MoeCommResult& result, const std::string& json_path, bool markdown,
    bool plots) {
  RETURN_IF_ERROR(WriteJsonFile(result, json_path));
  std::vector<std::string> lines = {absl::StrCat("result: ", json_path)};
  auto companion = [&](const std::string& extension,
                       const std::string& content) -> absl::Status {
    if (content.empty()) return absl::OkStatus();
    const std::string path = ReplaceExtension(json_path, extension);
    ASSIGN_OR_RETURN(const std::string kept,
                     WriteCompanionFile(path, json_path, content));
    lines.push_back(kept.empty() ? absl::StrCat("companion: ", path) : kept);
    return absl::OkStatus();
  };
  if (markdown) RETURN_IF_ERROR(companion("md", RenderMarkdownReport(result)));
  if (plots) {
    RETURN_IF_ERROR(companion("time.svg", RenderSkewPlot(result, "time")));
    RETURN_IF_ERROR(companion("drops.svg", RenderSkewPlot(result, "drops")));
  }
  return lines;
}

}  // namespace mtb::moe_comm
