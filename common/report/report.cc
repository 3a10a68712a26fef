#include "common/report/report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "glog/logging.h"

namespace mtb {
namespace {

// Colour-blind-safe palette (Okabe-Ito), cycled.
constexpr const char* kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                   "#E69F00", "#56B4E9", "#000000", "#F0E442"};
// Dash patterns, cycled independently of the colours: 8 and 5 are coprime, so
// the first 40 series each get a different (colour, dash) pair, and any two
// series within 5 of each other differ in both: readable in greyscale and by
// readers who cannot tell the colours apart.
constexpr const char* kDashes[] = {"none", "9 4", "2 3", "12 3 2 3", "5 5"};

std::string EscapeXml(const std::string& text) {
  return absl::StrReplaceAll(text, {{"&", "&amp;"},
                                    {"<", "&lt;"},
                                    {">", "&gt;"},
                                    {"\"", "&quot;"},
                                    {"'", "&apos;"}});
}

std::string EscapeCell(const std::string& text) {
  return absl::StrReplaceAll(text, {{"|", "\\|"}, {"\n", " "}});
}

// Linear ticks at 1, 2 or 5 times a power of ten, about `target` of them, at
// least `min_step` apart (1 for counts, so every tick is an integer).
std::vector<double> NiceTicks(double low, double high, int target,
                              double min_step = 0) {
  std::vector<double> ticks;
  if (!(high > low)) {
    ticks.push_back(low);
    return ticks;
  }
  const double raw_step = std::max((high - low) / target, min_step);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw_step)));
  double step = magnitude;
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    step = factor * magnitude;
    if (step >= raw_step) break;
  }
  for (double tick = std::ceil(low / step) * step; tick <= high + step * 1e-9;
       tick += step) {
    ticks.push_back(std::fabs(tick) < step * 1e-9 ? 0.0 : tick);
  }
  return ticks;
}

// Log ticks at powers of `base` inside [low, high] (both > 0), thinned to at
// most ~10 labels.
std::vector<double> LogTicks(double low, double high, double base) {
  std::vector<double> ticks;
  const int first = static_cast<int>(std::ceil(std::log(low) / std::log(base) - 1e-9));
  const int last = static_cast<int>(std::floor(std::log(high) / std::log(base) + 1e-9));
  const int stride = std::max(1, (last - first + 1 + 9) / 10);
  for (int exponent = first; exponent <= last; exponent += stride) {
    ticks.push_back(std::pow(base, exponent));
  }
  if (ticks.empty()) ticks.push_back(low);
  return ticks;
}

}  // namespace

std::string FormatSignificant(double value, int significant) {
  if (!std::isfinite(value)) return std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
  if (value == 0) return "0";
  const double magnitude = std::fabs(value);
  if (magnitude >= 1e9 || magnitude < 1e-3) {
    return absl::StrFormat("%.*g", significant, value);
  }
  const int digits_before_point =
      static_cast<int>(std::floor(std::log10(magnitude))) + 1;
  const int decimals = std::max(0, significant - digits_before_point);
  return absl::StrFormat("%.*f", decimals, value);
}

std::string FormatBytes(double bytes) {
  static constexpr const char* kSuffixes[] = {"", "K", "M", "G", "T"};
  double value = bytes;
  int suffix = 0;
  while (suffix < 4 && value >= 1024 && std::fmod(value, 1024) == 0) {
    value /= 1024;
    ++suffix;
  }
  return absl::StrCat(absl::StrFormat("%.6g", value), kSuffixes[suffix]);
}

std::string FormatByteAmount(double bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return absl::StrFormat("%.0f B", bytes);
  int unit = 0;
  double value = bytes / 1024;
  while (unit < 4 && value >= 1024) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.3g %s", value, kUnits[unit]);
}

std::string MarkdownTable::Render() const {
  CHECK(align.empty() || align.size() == headers.size())
      << "align has " << align.size() << " entries for " << headers.size()
      << " columns";
  std::string out = "|";
  for (const std::string& header : headers) {
    absl::StrAppend(&out, " ", EscapeCell(header), " |");
  }
  out += "\n|";
  for (size_t column = 0; column < headers.size(); ++column) {
    const bool right = !align.empty() && align[column] == Align::kRight;
    out += right ? " ---: |" : " --- |";
  }
  out += "\n";
  for (const auto& row : rows) {
    CHECK_EQ(row.size(), headers.size()) << "row width differs from header";
    out += "|";
    for (const std::string& cell : row) {
      absl::StrAppend(&out, " ", EscapeCell(cell), " |");
    }
    out += "\n";
  }
  return out;
}

std::string RenderSvg(const LinePlot& plot) {
  // The legend sits in its own column right of the plot area, so it never
  // hides a curve: as wide as the longest name (~7 px per character at 12 px
  // sans-serif) plus the line sample, at most 40% of the image.
  size_t longest_name = 0;
  for (const PlotSeries& series : plot.series) {
    longest_name = std::max(longest_name, series.name.size());
  }
  const double legend_width = std::min(
      52.0 + 7.0 * static_cast<double>(longest_name), 0.4 * plot.width);
  const double legend_gap = 14;
  const double left = 78, top = 44, bottom = 58;
  const double right = plot.series.empty() ? 24 : legend_gap + legend_width + 10;
  const double plot_width = plot.width - left - right;
  const double plot_height = plot.height - top - bottom;

  auto usable = [&](const std::pair<double, double>& point) {
    return std::isfinite(point.first) && std::isfinite(point.second) &&
           (!plot.log_x || point.first > 0);
  };
  double x_min = std::numeric_limits<double>::infinity();
  double x_max = -x_min, y_min = x_min, y_max = -x_min;
  for (const PlotSeries& series : plot.series) {
    for (const auto& point : series.points) {
      if (!usable(point)) continue;
      x_min = std::min(x_min, point.first);
      x_max = std::max(x_max, point.first);
      y_min = std::min(y_min, point.second);
      y_max = std::max(y_max, point.second);
    }
  }
  const bool empty = !std::isfinite(x_min);
  if (empty) {
    x_min = plot.log_x ? 1 : 0;
    x_max = plot.log_x ? 10 : 1;
    y_min = 0;
    y_max = 1;
  }
  // The y axis is fitted to the data. It reaches zero only when the data
  // nearly does (a bandwidth curve from small sizes): a loss falling from 5.6
  // to 2.4 drawn from 0 would squeeze its shape into the top half.
  const bool from_zero = y_min >= 0 && y_min <= 0.1 * y_max;
  const bool to_zero = y_max <= 0 && y_max >= 0.1 * y_min;
  double y_pad = (y_max - y_min) * 0.05;
  if (y_pad == 0) y_pad = y_max == 0 ? 0.5 : std::fabs(y_max) * 0.05;
  y_min = from_zero ? 0 : y_min - y_pad;
  y_max = to_zero ? 0 : y_max + y_pad;
  if (x_max <= x_min) {
    x_max = plot.log_x ? x_min * 2 : x_min + 1;
  }
  const std::vector<double> y_ticks = NiceTicks(y_min, y_max, 6);
  const std::vector<double> x_ticks =
      plot.log_x ? LogTicks(x_min, x_max,
                            plot.x_format == TickFormat::kBytes ? 2.0 : 10.0)
                 : NiceTicks(x_min, x_max, 8, plot.integer_x ? 1.0 : 0.0);

  auto to_x = [&](double x) {
    const double fraction =
        plot.log_x ? (std::log(x) - std::log(x_min)) /
                         (std::log(x_max) - std::log(x_min))
                   : (x - x_min) / (x_max - x_min);
    return left + fraction * plot_width;
  };
  auto to_y = [&](double y) {
    return top + plot_height - (y - y_min) / (y_max - y_min) * plot_height;
  };
  auto x_label = [&](double x) {
    if (plot.x_format == TickFormat::kBytes) return FormatBytes(x);
    if (plot.integer_x) return absl::StrCat(static_cast<int64_t>(std::llround(x)));
    return FormatSignificant(x, 3);
  };

  std::string svg = absl::StrFormat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
      plot.width, plot.height, plot.width, plot.height, plot.width,
      plot.height);
  absl::StrAppendFormat(
      &svg,
      "<text x=\"%.1f\" y=\"24\" text-anchor=\"middle\" font-size=\"15\" "
      "font-weight=\"bold\">%s</text>\n",
      plot.width / 2.0, EscapeXml(plot.title));
  // Grid and tick labels.
  for (double tick : y_ticks) {
    const double y = to_y(tick);
    absl::StrAppendFormat(
        &svg,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
        "stroke=\"#e0e0e0\"/>\n"
        "<text class=\"y-tick\" x=\"%.1f\" y=\"%.1f\" "
        "text-anchor=\"end\">%s</text>\n",
        left, y, left + plot_width, y, left - 6, y + 4,
        EscapeXml(FormatSignificant(tick, 3)));
  }
  for (double tick : x_ticks) {
    const double x = to_x(tick);
    absl::StrAppendFormat(
        &svg,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
        "stroke=\"#e0e0e0\"/>\n"
        "<text class=\"x-tick\" x=\"%.1f\" y=\"%.1f\" "
        "text-anchor=\"middle\">%s</text>\n",
        x, top, x, top + plot_height, x, top + plot_height + 18,
        EscapeXml(x_label(tick)));
  }
  // Axes and their labels.
  absl::StrAppendFormat(
      &svg,
      "<rect class=\"plot-area\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
      "height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n"
      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n"
      "<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 16 %.1f)\">%s</text>\n",
      left, top, plot_width, plot_height, left + plot_width / 2,
      plot.height - 14.0,
      EscapeXml(plot.x_label + (plot.log_x ? " (log scale)" : "")),
      top + plot_height / 2, top + plot_height / 2, EscapeXml(plot.y_label));
  if (empty) {
    absl::StrAppendFormat(&svg,
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                          "fill=\"#888\">no data</text>\n",
                          left + plot_width / 2, top + plot_height / 2);
  }
  // Series, each with its own colour and dash pattern.
  auto color_of = [](size_t index) {
    return kColors[index % (sizeof(kColors) / sizeof(kColors[0]))];
  };
  auto dash_of = [](size_t index) {
    return kDashes[index % (sizeof(kDashes) / sizeof(kDashes[0]))];
  };
  for (size_t index = 0; index < plot.series.size(); ++index) {
    const PlotSeries& series = plot.series[index];
    std::vector<std::pair<double, double>> points;
    for (const auto& point : series.points) {
      if (usable(point)) points.push_back(point);
    }
    std::sort(points.begin(), points.end());
    absl::StrAppendFormat(&svg, "<g class=\"series\" data-name=\"%s\">\n",
                          EscapeXml(series.name));
    std::string coordinates;
    for (const auto& point : points) {
      absl::StrAppendFormat(&coordinates, "%.2f,%.2f ", to_x(point.first),
                            to_y(point.second));
    }
    absl::StrAppendFormat(&svg,
                          "<polyline fill=\"none\" stroke=\"%s\" "
                          "stroke-width=\"2\" stroke-dasharray=\"%s\" "
                          "points=\"%s\"/>\n",
                          color_of(index), dash_of(index), coordinates);
    for (const auto& point : points) {
      absl::StrAppendFormat(
          &svg,
          "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\" "
          "data-x=\"%.17g\" data-y=\"%.17g\"/>\n",
          to_x(point.first), to_y(point.second), color_of(index), point.first,
          point.second);
    }
    svg += "</g>\n";
  }
  // The legend, in its column right of the plot area.
  if (!plot.series.empty()) {
    const double legend_x = left + plot_width + legend_gap;
    const double row_height = 18;
    absl::StrAppendFormat(
        &svg,
        "<g class=\"legend\">\n"
        "<rect class=\"legend-box\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
        "height=\"%.1f\" fill=\"white\" stroke=\"#999\"/>\n",
        legend_x, top, legend_width,
        row_height * static_cast<double>(plot.series.size()) + 8);
    for (size_t index = 0; index < plot.series.size(); ++index) {
      const double row_y = top + 17 + row_height * static_cast<double>(index);
      absl::StrAppendFormat(
          &svg,
          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
          "stroke=\"%s\" stroke-width=\"2\" stroke-dasharray=\"%s\"/>\n"
          "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
          legend_x + 8, row_y - 4, legend_x + 40, row_y - 4, color_of(index),
          dash_of(index), legend_x + 46, row_y,
          EscapeXml(plot.series[index].name));
    }
    svg += "</g>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace mtb
