#include "report/render.h"

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/report/report.h"
#include "common/results/atomic_file.h"
#include "trainer/config/config_names.h"

namespace mtb::report {
namespace {

std::string ShortCommit(const RunContext& c) {
  return absl::StrCat(c.git_commit().substr(0, 10), c.git_dirty() ? " (dirty)" : "");
}

std::string Provenance(const std::vector<ResultFile>& files) {
  MarkdownTable table;
  table.headers = {"file", "tool", "commit", "build", "host", "ranks",
                   "LibTorch", "started (UTC)"};
  for (const ResultFile& file : files) {
    const RunContext& c = file.context;
    table.rows.push_back({BaseName(file.path), file.tool, ShortCommit(c),
                          c.build_mode(), c.hostname(), absl::StrCat(c.world_size()),
                          c.libtorch_version().empty() ? "-" : c.libtorch_version(),
                          c.start_time_utc()});
  }
  return table.Render();
}

std::string TrainerSection(const std::vector<ResultFile>& files,
                           const std::string& loss_svg) {
  // Strategies x world sizes, in that order, then file.
  std::vector<std::tuple<std::string, int, std::string, const TrainResult*>> runs;
  for (const ResultFile& file : files) {
    for (const TrainResult& r : file.trainer) {
      runs.emplace_back(r.strategy().name(), r.run_context().world_size(),
                        BaseName(file.path), &r);
    }
  }
  if (runs.empty()) return "";
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a), std::get<2>(a)) <
           std::tie(std::get<0>(b), std::get<1>(b), std::get<2>(b));
  });
  MarkdownTable table;
  table.headers = {"strategy", "ranks", "file", "precision", "tokens/s",
                   "ms/step", "MFU", "peak memory (rank 0)", "estimate",
                   "grad bytes/step (closed form)", "final loss"};
  table.align = {Align::kLeft, Align::kRight, Align::kLeft, Align::kLeft,
                 Align::kRight, Align::kRight, Align::kRight, Align::kRight,
                 Align::kRight, Align::kRight, Align::kRight};
  for (const auto& [strategy, ranks, name, r] : runs) {
    const TrainSummary& s = r->summary();
    const std::string peak =
        r->memory_size() > 0 && r->memory(0).counted()
            ? FormatByteAmount(static_cast<double>(r->memory(0).peak_bytes()))
            : "-";
    const std::string estimate =
        r->memory_estimate().total() > 0
            ? FormatByteAmount(static_cast<double>(r->memory_estimate().total()))
            : "-";
    table.rows.push_back(
        {strategy, absl::StrCat(ranks), name, ConfigName(r->config().precision()),
         FormatSignificant(s.tokens_per_second().mean(), 3),
         FormatSignificant(s.step_ms().mean(), 3),
         s.mfu() > 0 ? absl::StrFormat("%.1f%%", 100 * s.mfu()) : "-", peak,
         estimate,
         absl::StrCat(FormatByteAmount(s.grad_bytes_sent_per_step()), " (",
                      FormatByteAmount(s.expected_grad_bytes_per_step()), ")"),
         FormatSignificant(s.final_loss().mean(), 4)});
  }
  std::string out = absl::StrCat("## trainer\n\n", table.Render(), "\n");
  if (!loss_svg.empty()) absl::StrAppend(&out, "![loss curves](", loss_svg, ")\n\n");
  return out;
}

std::string CommBenchSection(const std::vector<ResultFile>& files) {
  // (op, bytes, placement) -> file -> busbw.
  std::vector<std::string> names;
  std::map<std::tuple<std::string, int64_t, std::string>,
           std::map<std::string, double>>
      cells;
  for (const ResultFile& file : files) {
    for (const comm_bench::CommBenchResult& r : file.comm_bench) {
      const std::string name = absl::StrCat(
          BaseName(file.path), " (", r.options().backend(), ", ",
          r.options().world_size(), " ranks)");
      names.push_back(name);
      for (const comm_bench::CommBenchRow& row : r.rows()) {
        cells[{row.op(), row.bytes(), row.placement()}][name] = row.busbw_gbps();
      }
    }
  }
  if (names.empty()) return "";
  MarkdownTable table;
  table.headers = {"op", "size", "placement"};
  table.align = {Align::kLeft, Align::kRight, Align::kLeft};
  for (const std::string& name : names) {
    table.headers.push_back(absl::StrCat("busbw GB/s: ", name));
    table.align.push_back(Align::kRight);
  }
  for (const auto& [key, by_file] : cells) {
    std::vector<std::string> row = {std::get<0>(key), FormatBytes(std::get<1>(key)),
                                    std::get<2>(key)};
    for (const std::string& name : names) {
      auto found = by_file.find(name);
      row.push_back(found == by_file.end() ? "-" : FormatSignificant(found->second, 3));
    }
    table.rows.push_back(std::move(row));
  }
  return absl::StrCat("## comm_bench\n\n", table.Render(), "\n");
}

std::string TpCheckSection(const std::vector<ResultFile>& files) {
  MarkdownTable table;
  table.headers = {"file", "ranks", "checks", "verdict", "failed", "slowest check"};
  for (const ResultFile& file : files) {
    for (const tp_check::TpCheckResult& r : file.tp_check) {
      std::string failed, slowest = "-";
      double slowest_seconds = -1;
      for (const equivalence::CheckResult& check : r.checks()) {
        if (!check.pass()) absl::StrAppend(&failed, failed.empty() ? "" : ", ", check.name());
        if (check.seconds() > slowest_seconds) {
          slowest_seconds = check.seconds();
          slowest = absl::StrCat(check.name(), " ", FormatSignificant(check.seconds(), 3), " s");
        }
      }
      table.rows.push_back({BaseName(file.path), absl::StrCat(r.run_context().world_size()),
                            absl::StrCat(r.checks_size()), r.pass() ? "PASS" : "FAIL",
                            failed.empty() ? "-" : failed, slowest});
    }
  }
  if (table.rows.empty()) return "";
  return absl::StrCat("## tp_check\n\n", table.Render(), "\n");
}

std::string MoeCommSection(const std::vector<ResultFile>& files) {
  MarkdownTable table;
  table.headers = {"file", "ranks", "mode", "N", "D", "E", "k", "cf", "skew",
                   "dispatch ms", "combine ms", "busbw GB/s (dispatch)", "drop",
                   "imbalance", "verdict"};
  for (const ResultFile& file : files) {
    for (const moe_comm::MoeCommResult& r : file.moe_comm) {
      for (const moe_comm::ConfigResult& c : r.configs()) {
        const moe_comm::MoeConfig& m = c.config();
        table.rows.push_back(
            {BaseName(file.path), absl::StrCat(r.run_context().world_size()), r.mode(),
             absl::StrCat(m.tokens_per_rank()), absl::StrCat(m.hidden()),
             absl::StrCat(m.num_experts()), absl::StrCat(m.top_k()),
             FormatSignificant(m.capacity_factor(), 3), m.skew(),
             FormatSignificant(c.dispatch().mean_ms(), 3),
             FormatSignificant(c.combine().mean_ms(), 3),
             FormatSignificant(c.dispatch_bandwidth().busbw_gbps(), 3),
             absl::StrFormat("%.1f%%", 100 * c.drop_rate()),
             FormatSignificant(c.imbalance(), 3), "-"});
      }
      for (const moe_comm::ConfigCheck& c : r.checks()) {
        const moe_comm::MoeConfig& m = c.config();
        table.rows.push_back(
            {BaseName(file.path), absl::StrCat(r.run_context().world_size()), "check",
             absl::StrCat(m.tokens_per_rank()), absl::StrCat(m.hidden()),
             absl::StrCat(m.num_experts()), absl::StrCat(m.top_k()),
             FormatSignificant(m.capacity_factor(), 3), m.skew(), "-", "-", "-",
             c.assignments() > 0
                 ? absl::StrFormat("%.1f%%", 100.0 * c.dropped() / c.assignments())
                 : "-",
             "-", c.check().pass() ? "PASS" : "FAIL"});
      }
    }
  }
  if (table.rows.empty()) return "";
  return absl::StrCat("## moe_comm\n\n", table.Render(), "\n");
}

std::string OtherSection(const std::vector<ResultFile>& files) {
  MarkdownTable table;
  table.headers = {"file", "tool"};
  for (const ResultFile& file : files) {
    if (file.trainer.empty() && file.comm_bench.empty() && file.tp_check.empty() &&
        file.moe_comm.empty()) {
      table.rows.push_back({BaseName(file.path), file.tool});
    }
  }
  if (table.rows.empty()) return "";
  return absl::StrCat("## Other results (provenance only)\n\n", table.Render(), "\n");
}

std::string LossSvg(const std::vector<ResultFile>& files) {
  LinePlot plot;
  plot.title = "trainer: loss per step";
  plot.x_label = "optimizer step";
  plot.y_label = "training loss";
  plot.integer_x = true;
  for (const ResultFile& file : files) {
    for (const TrainResult& r : file.trainer) {
      if (r.runs_size() == 0) continue;
      PlotSeries series;
      series.name = absl::StrCat(BaseName(file.path), " (", r.strategy().name(), ", ",
                                 r.run_context().world_size(), " ranks)");
      for (const StepRecord& step : r.runs(0).steps()) {
        series.points.emplace_back(step.step(), step.loss());
      }
      plot.series.push_back(std::move(series));
    }
  }
  return plot.series.empty() ? "" : RenderSvg(plot);
}

}  // namespace

RenderedReport RenderReport(const std::vector<ResultFile>& files,
                            const std::vector<std::string>& differences,
                            const std::string& stem) {
  RenderedReport report;
  const std::string loss = LossSvg(files);
  const std::string loss_name = loss.empty() ? "" : absl::StrCat(stem, "_loss.svg");
  if (!loss.empty()) report.svgs.emplace_back(loss_name, loss);
  std::string& md = report.markdown;
  absl::StrAppend(&md, "# Results compared (", files.size(), " files)\n\n");
  absl::StrAppend(&md, "## Provenance\n\n", Provenance(files), "\n");
  if (!differences.empty()) {
    absl::StrAppend(&md, "**Mixed provenance (--allow_mixed):** the runs below "
                         "differ in\n\n");
    for (const std::string& difference : differences) {
      absl::StrAppend(&md, "- ", difference, "\n");
    }
    absl::StrAppend(&md, "\n");
  }
  absl::StrAppend(&md, TrainerSection(files, loss_name), CommBenchSection(files),
                  TpCheckSection(files), MoeCommSection(files), OtherSection(files));
  return report;
}

}  // namespace mtb::report
