// Human-readable outputs every tool writes beside its JSON: Markdown tables and
// SVG line plots. No plotting dependency: the SVG is written by hand,
// is valid XML, and has axes, ticks, labels and a legend.
#ifndef MTB_COMMON_REPORT_REPORT_H_
#define MTB_COMMON_REPORT_REPORT_H_

#include <string>
#include <utility>
#include <vector>

namespace mtb {

enum class Align { kLeft, kRight };

// A GitHub-flavoured Markdown table. Columns default to left-aligned; numbers
// read better right-aligned (set `align`). Cells are escaped ('|' -> '\|').
struct MarkdownTable {
  std::vector<std::string> headers;
  std::vector<Align> align;  // empty or one per header
  std::vector<std::vector<std::string>> rows;

  // Every row must have headers.size() cells (CHECK).
  std::string Render() const;
};

// Formats `value` with `significant` significant digits, without exponent for
// magnitudes in [1e-3, 1e9) (e.g. 0.000123, 12.3, 123457).
std::string FormatSignificant(double value, int significant = 3);

// Byte counts as nccl-tests and users write them: 1024 -> "1K", 3145728 ->
// "3M", 1000 -> "1000" (powers of 1024; exact multiples only).
std::string FormatBytes(double bytes);

// An amount for a person to read, three significant digits in the largest
// binary unit it reaches: "812 B", "4.5 KiB", "38.2 MiB", "1.07 GiB".
std::string FormatByteAmount(double bytes);

enum class TickFormat { kNumber, kBytes };

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), any order
};

struct LinePlot {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = false;
  // kBytes labels ticks 1K, 4M, ... and puts log ticks on powers of two.
  TickFormat x_format = TickFormat::kNumber;
  // x values are counts (optimizer steps): ticks and their labels only at
  // integers.
  bool integer_x = false;
  std::vector<PlotSeries> series;
  int width = 760;
  int height = 460;
};

// Renders the plot as a standalone SVG document. Points with non-finite
// coordinates (or x <= 0 on a log axis) are skipped. Each series becomes a
// <g class="series" data-name=...> holding a <polyline> with its own stroke
// colour and stroke-dasharray (the first five series differ in both) and one
// <circle> per point carrying data-x/data-y attributes (the exact values, so
// tests and scripts can read the data back). The y axis is fitted to the data
// (from 0 only when the data's minimum is within 10% of its maximum from
// zero). The legend (<g class="legend">, boxed by <rect class="legend-box">)
// sits right of the plot area (<rect class="plot-area">), never over a curve.
// Tick labels are <text class="x-tick"> / <text class="y-tick">.
std::string RenderSvg(const LinePlot& plot);

}  // namespace mtb

#endif  // MTB_COMMON_REPORT_REPORT_H_
