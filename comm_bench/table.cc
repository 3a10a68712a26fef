#include "comm_bench/table.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/report/report.h"

namespace mtb::comm_bench {
namespace {

// nccl-tests' columns per placement: time, algbw, busbw, #wrong.
std::string NcclTestsColumns(const CommBenchRow* row) {
  if (row == nullptr) {
    return absl::StrFormat("  %7s  %6s  %6s  %6s", "-", "-", "-", "N/A");
  }
  std::string wrong = "N/A";
  if (row->checked()) wrong = absl::StrFormat("%6g", static_cast<double>(row->wrong()));
  return absl::StrFormat("  %7s  %6s  %6s  %6s", NcclTestsNumber(row->time_us(), 7),
                         NcclTestsNumber(row->algbw_gbps(), 6),
                         NcclTestsNumber(row->busbw_gbps(), 6), wrong);
}

std::string ExtraColumns(const CommBenchRow* row) {
  if (row == nullptr) return absl::StrFormat(" |%8s %7s %7s", "-", "-", "-");
  return absl::StrFormat(" |%8s %7s %7s", NcclTestsNumber(row->slowest_rank_time_us(), 7),
                         NcclTestsNumber(row->iteration_p50_us(), 7),
                         NcclTestsNumber(row->iteration_p99_us(), 7));
}

}  // namespace

std::string NcclTestsNumber(double value, int width) {
  for (const char* format : {"%*.2f", "%*.1f", "%*.0f"}) {
    char text[64];
    if (std::snprintf(text, sizeof(text), format, width, value) <= width) {
      return text;
    }
  }
  char text[64];
  std::snprintf(text, sizeof(text), width >= 7 ? "%*.1e" : "%*.0e", width, value);
  return text;
}

TablePrinter::TablePrinter(std::ostream& out, std::string backend_name)
    : out_(out), backend_name_(std::move(backend_name)) {}

void TablePrinter::OpStarted(const Collective& op, const SweepOptions& options,
                             int world_size, const Support& support) {
  min_busbw_ = options.min_busbw;
  check_ = options.check;
  out_ << "# comm_bench " << op.name() << ": " << backend_name_ << ", "
       << world_size << " ranks, " << DTypeName(options.dtype)
       << (support.emulated ? " (emulated)" : "") << ", iters " << options.iters
       << ", warmup " << options.warmup_iters << ", check "
       << (options.check ? "on" : "off") << "\n"
       << "# time: back-to-back loop of " << options.iters
       << " calls, mean per call, averaged across ranks (nccl-tests); "
          "t_max: the slowest rank's loop mean;\n"
       << "# i_p50/i_p99: per-iteration times (barrier before each call, "
          "slowest rank per iteration); GB/s = 1e9 B/s\n"
       << "#\n";
  // nccl-tests' own first header line, then the extra columns' labels.
  out_ << absl::StrFormat(
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                     "
      "  in-place           | out-of-place            | in-place\n",
      "", "", "", "", "");
  out_ << absl::StrFormat(
      "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s "
      "|%8s %7s %7s |%8s %7s %7s\n",
      "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
      "#wrong", "time", "algbw", "busbw", "#wrong", "t_max", "i_p50", "i_p99",
      "t_max", "i_p50", "i_p99");
  out_ << absl::StrFormat(
      "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s "
      "|%8s %7s %7s |%8s %7s %7s\n",
      "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
      "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(us)", "(us)", "(us)");
  out_.flush();
}

void TablePrinter::SizeFinished(const Collective& op,
                                const std::vector<CommBenchRow>& rows) {
  const CommBenchRow* out_of_place = nullptr;
  const CommBenchRow* in_place = nullptr;
  for (const CommBenchRow& row : rows) {
    (row.placement() == "in_place" ? in_place : out_of_place) = &row;
  }
  const CommBenchRow& first = rows.front();
  std::string line = absl::StrFormat(
      "%12d  %12d  %8s  %6s  %6d", first.bytes(), first.count(),
      first.dtype() == "float32" ? "float" : first.dtype(),
      first.redop().empty() ? "none" : first.redop(), first.root());
  line += NcclTestsColumns(out_of_place) + NcclTestsColumns(in_place);
  line += ExtraColumns(out_of_place) + ExtraColumns(in_place);
  if (first.ceiling_gbps() > 0) {
    // busbw as a share of the matching ceiling, out of place | in place.
    auto percent = [](const CommBenchRow* row) -> std::string {
      if (row == nullptr) return "-";
      return absl::StrFormat("%.0f%%", 100 * row->busbw_fraction_of_ceiling());
    };
    line += absl::StrFormat(" |%5s %5s of %s %.2f", percent(out_of_place),
                            percent(in_place), first.ceiling_shape(),
                            first.ceiling_gbps());
    if (first.ceiling_measurements() > 0) {
      // The best of k measurements; the slowest of them shows the spread.
      line += absl::StrFormat(" (best of %d measurements, slowest %.2f)",
                              first.ceiling_measurements(), first.ceiling_min_gbps());
    }
    if ((out_of_place != nullptr && out_of_place->ceiling_invalid()) ||
        (in_place != nullptr && in_place->ceiling_invalid())) {
      line += "  CEILING INVALID (beaten by >10%)";
    }
  }
  if (first.emulated()) line += "  emulated";
  if (first.bottleneck_rank() >= 0) {
    const int rank = first.bottleneck_rank();
    line += absl::StrCat("  bottleneck rank ", rank, " (sends ",
                         first.send_bytes_per_rank(rank), " B, receives ",
                         first.recv_bytes_per_rank(rank), " B)");
  }
  out_ << line << "\n";
  out_.flush();
}

void TablePrinter::Note(const std::string& note) {
  out_ << "# " << note << "\n";
  out_.flush();
}

void TablePrinter::OpFinished(const CommBenchOpSummary& summary) {
  const std::string bandwidth_verdict =
      min_busbw_ > 0 ? (summary.below_min_busbw() ? "FAILED" : "OK") : "";
  out_ << absl::StrFormat("# %-20s : %d %s\n", "Out of bounds values",
                          summary.rows_with_wrong(),
                          check_ ? (summary.rows_with_wrong() ? "FAILED" : "OK")
                                 : "(check off)");
  out_ << absl::StrFormat("# %-20s : %g %s\n", "Avg bus bandwidth",
                          summary.avg_busbw_gbps(), bandwidth_verdict);
  out_ << "#\n";
  out_.flush();
}

}  // namespace mtb::comm_bench
