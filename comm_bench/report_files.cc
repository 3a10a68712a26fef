#include "comm_bench/report_files.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "common/report/report.h"
#include "common/base/status.h"

namespace mtb::comm_bench {
namespace {

std::string Bytes(int64_t bytes) { return FormatBytes(static_cast<double>(bytes)); }

std::string Us(double value) { return FormatSignificant(value, 4); }

}  // namespace

std::string RenderMarkdown(const CommBenchResult& result) {
  const RunContext& context = result.context();
  const CommBenchOptions& options = result.options();
  std::string text = absl::StrCat(
      "# comm_bench: ", absl::StrJoin(options.ops(), ", "), "\n\n",
      "Backend **", options.backend(), "**, ", options.world_size(),
      " ranks, ", options.dtype(), ", iters ", options.iters(), ", warmup ",
      options.warmup_iters(), ", check ", options.check() ? "on" : "off",
      ". Commit `", context.git_commit(), context.git_dirty() ? " (dirty)" : "",
      "`, build ", context.build_mode(), ", host ", context.hostname(), ", ",
      context.start_time_utc(), ".\n\n",
      "Definitions as nccl-tests: size S in bytes (the total buffer for "
      "all_gather, reduce_scatter and all_to_all), time = mean of a "
      "back-to-back loop averaged across ranks, algbw = S / time, busbw = "
      "algbw x factor; GB/s = 1e9 B/s. *slowest* is the slowest rank's loop "
      "mean; p50/p99 are per-iteration times (barrier before each call, "
      "slowest rank per iteration). See docs/comm_bench.md.\n\n",
      "**Verdict: ", result.verdict(), "**\n");

  for (const CommBenchOpSummary& summary : result.summaries()) {
    MarkdownTable table;
    table.headers = {"size (B)", "count", "placement", "time (us)",
                     "slowest (us)", "p50 (us)", "p99 (us)", "algbw (GB/s)",
                     "busbw (GB/s)", "#wrong", "algorithm"};
    table.align = {Align::kRight, Align::kRight, Align::kLeft,  Align::kRight,
                   Align::kRight, Align::kRight, Align::kRight, Align::kRight,
                   Align::kRight, Align::kRight, Align::kLeft};
    bool alltoallv = false;
    bool emulated = false;
    const bool ceiling = result.has_ceiling();
    if (ceiling) {
      table.headers.push_back("busbw / ceiling");
      table.align.push_back(Align::kRight);
    }
    for (const CommBenchRow& row : result.rows()) {
      if (row.op() != summary.op()) continue;
      emulated |= row.emulated();
      std::vector<std::string> cells = {
          Bytes(row.bytes()),
          absl::StrCat(row.count()),
          row.placement() == "in_place" ? "in place" : "out of place",
          Us(row.time_us()),
          absl::StrCat(Us(row.slowest_rank_time_us()), " (rank ",
                       row.slowest_rank(), ")"),
          Us(row.iteration_p50_us()),
          Us(row.iteration_p99_us()),
          FormatSignificant(row.algbw_gbps()),
          FormatSignificant(row.busbw_gbps()),
          row.checked() ? absl::StrCat(row.wrong()) : "N/A",
          row.algorithm()};
      if (ceiling) {
        cells.push_back(
            row.ceiling_gbps() > 0
                ? absl::StrCat(
                      absl::StrFormat("%.0f%%",
                                      100 * row.busbw_fraction_of_ceiling()),
                      " of ", row.ceiling_shape(), " ",
                      FormatSignificant(row.ceiling_gbps()), " GB/s")
                : "-");
      }
      if (row.bottleneck_rank() >= 0) {
        alltoallv = true;
        const int rank = row.bottleneck_rank();
        cells.push_back(absl::StrCat("rank ", rank, ": sends ",
                                     Bytes(row.send_bytes_per_rank(rank)),
                                     ", receives ",
                                     Bytes(row.recv_bytes_per_rank(rank))));
      }
      table.rows.push_back(std::move(cells));
    }
    if (alltoallv) {
      table.headers.push_back("bottleneck");
      table.align.push_back(Align::kLeft);
    }
    absl::StrAppend(&text, "\n## ", summary.op(),
                    emulated ? " (bfloat16 emulated)" : "", "\n\n",
                    table.Render(), "\nAvg bus bandwidth: ",
                    FormatSignificant(summary.avg_busbw_gbps()), " GB/s",
                    summary.below_min_busbw() ? " (below --min_busbw)" : "",
                    "; rows with wrong elements: ", summary.rows_with_wrong(),
                    "\n");
  }
  if (!result.notes().empty()) {
    absl::StrAppend(&text, "\n## Notes\n\n");
    for (const std::string& note : result.notes()) {
      absl::StrAppend(&text, "- ", note, "\n");
    }
  }
  return text;
}

std::string RenderBusbwSvg(const CommBenchResult& result) {
  LinePlot plot;
  plot.title = absl::StrCat("comm_bench busbw, ", result.options().backend(),
                            ", ", result.options().world_size(), " ranks, ",
                            result.options().dtype());
  plot.x_label = "size S (bytes)";
  plot.y_label = "busbw (GB/s)";
  plot.log_x = true;
  plot.x_format = TickFormat::kBytes;
  // An op measured both ways gets two series, named by placement so the
  // legend tells them apart (RenderSvg gives each its own colour and dash).
  std::set<std::string> ops_in_place;
  for (const CommBenchRow& row : result.rows()) {
    if (row.placement() == "in_place") ops_in_place.insert(row.op());
  }
  std::map<std::string, int> series_index;
  for (const CommBenchRow& row : result.rows()) {
    std::string name = row.op();
    if (ops_in_place.count(row.op()) > 0) {
      absl::StrAppend(&name, row.placement() == "in_place" ? " (in place)"
                                                           : " (out of place)");
    }
    auto [it, inserted] = series_index.emplace(name, plot.series.size());
    if (inserted) plot.series.push_back({name, {}});
    plot.series[it->second].points.emplace_back(
        static_cast<double>(row.bytes()), row.busbw_gbps());
  }
  return RenderSvg(plot);
}

absl::Status WriteOutputs(const CommBenchResult& result,
                          const OutputPaths& paths) {
  RETURN_IF_ERROR(WriteJsonFile(result, paths.json));
  if (!paths.markdown.empty()) {
    RETURN_IF_ERROR(WriteFileAtomically(paths.markdown, RenderMarkdown(result)));
  }
  if (!paths.svg.empty()) {
    RETURN_IF_ERROR(WriteFileAtomically(paths.svg, RenderBusbwSvg(result)));
  }
  return absl::OkStatus();
}

}  // namespace mtb::comm_bench
