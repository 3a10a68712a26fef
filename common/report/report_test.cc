#include "common/report/report.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "common/report/svg_inspect.h"
#include "common/report/xml_check.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

// Regenerate with:
//   bazel test //common/report:report_test --test_env=UPDATE_GOLDEN=$PWD
// (writes common/testdata/report_table_golden.md in the checkout).
const char kGoldenPath[] = "common/testdata/report_table_golden.md";

MarkdownTable KnownTable() {
  MarkdownTable table;
  table.headers = {"op", "bytes", "busbw GB/s", "note"};
  table.align = {Align::kLeft, Align::kRight, Align::kRight, Align::kLeft};
  table.rows = {{"all_reduce", FormatBytes(1024), FormatSignificant(1.23456), ""},
                {"all_gather", FormatBytes(64 << 20), FormatSignificant(12.0),
                 "a|b"}};
  return table;
}

TEST(Report, MarkdownTableOfAKnownResultMatchesTheGoldenFile) {
  const std::string rendered = KnownTable().Render();
  if (const char* update = std::getenv("UPDATE_GOLDEN")) {
    ASSERT_TRUE(
        WriteFileAtomically(std::string(update) + "/" + kGoldenPath, rendered)
            .ok());
  }
  absl::StatusOr<std::string> golden = ReadFileToString(kGoldenPath);
  ASSERT_TRUE(golden.ok()) << golden.status();
  EXPECT_EQ(rendered, *golden);
}

TEST(Report, FormatsNumbersAndBytes) {
  EXPECT_EQ(FormatSignificant(1.23456), "1.23");
  EXPECT_EQ(FormatSignificant(123456), "123456");
  EXPECT_EQ(FormatSignificant(0.000123456), "0.000123");
  EXPECT_EQ(FormatSignificant(0), "0");
  EXPECT_EQ(FormatBytes(1024), "1K");
  EXPECT_EQ(FormatBytes(3 << 20), "3M");
  EXPECT_EQ(FormatBytes(1000), "1000");
  EXPECT_EQ(FormatBytes(1536), "1536");
  EXPECT_EQ(FormatByteAmount(812), "812 B");
  EXPECT_EQ(FormatByteAmount(4608), "4.5 KiB");
  EXPECT_EQ(FormatByteAmount(40054000), "38.2 MiB");
  EXPECT_EQ(FormatByteAmount(1.15e9), "1.07 GiB");
  EXPECT_EQ(FormatByteAmount(3.0 * (int64_t{1} << 40)), "3 TiB");
}

TEST(Report, SvgOfAKnownSeriesIsWellFormedAndCarriesItsPoints) {
  LinePlot plot;
  plot.title = "busbw vs size <all_reduce & friends>";
  plot.x_label = "bytes";
  plot.y_label = "busbw (GB/s)";
  plot.log_x = true;
  plot.x_format = TickFormat::kBytes;
  plot.series.push_back({"all_reduce", {{1024, 0.5}, {4096, 1.5}, {1 << 20, 3.25}}});
  plot.series.push_back({"all_gather", {{1024, 0.25}, {4096, 1.0}}});
  const std::string svg = RenderSvg(plot);
  std::string problem;
  EXPECT_TRUE(IsWellFormedXml(svg, &problem)) << problem << "\n" << svg;
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(svg.find("data-x=\"1048576\" data-y=\"3.25\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("data-x=\"4096\" data-y=\"1\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("data-name=\"all_gather\""), std::string::npos);
  EXPECT_NE(svg.find("&lt;all_reduce &amp; friends&gt;"), std::string::npos);
  // Byte-formatted log ticks.
  EXPECT_NE(svg.find(">1K</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">1M</text>"), std::string::npos) << svg;
  // Five points, five circles.
  size_t circles = 0;
  for (size_t at = svg.find("<circle"); at != std::string::npos; at = svg.find("<circle", at + 1)) ++circles;
  EXPECT_EQ(circles, 5u);
}

// A loss-like curve: falls from 5.6 to 2.4 over `steps` steps.
PlotSeries LossSeries(const std::string& name, int steps, double offset) {
  PlotSeries series{name, {}};
  for (int step = 1; step <= steps; ++step) {
    series.points.emplace_back(
        step, 2.4 + offset + 3.2 * (steps - step) / std::max(1, steps - 1));
  }
  return series;
}

std::vector<double> Numbers(const std::vector<std::string>& labels) {
  std::vector<double> numbers;
  for (const std::string& label : labels) {
    double number = 0;
    EXPECT_TRUE(absl::SimpleAtod(label, &number)) << label;
    numbers.push_back(number);
  }
  return numbers;
}

TEST(Report, EverySeriesHasItsOwnColourAndDashPattern) {
  LinePlot plot;
  for (int run = 0; run < 5; ++run) {
    plot.series.push_back(LossSeries("run " + std::to_string(run + 1), 4,
                                     0.01 * run));
  }
  const std::vector<SvgSeriesStyle> styles = SeriesStyles(RenderSvg(plot));
  ASSERT_EQ(styles.size(), 5u);
  std::set<std::string> colours, dashes;
  for (const SvgSeriesStyle& style : styles) {
    EXPECT_FALSE(style.stroke.empty()) << style.name;
    EXPECT_FALSE(style.dasharray.empty()) << style.name;
    colours.insert(style.stroke);
    dashes.insert(style.dasharray);
  }
  EXPECT_EQ(colours.size(), 5u) << "two series share a colour";
  EXPECT_EQ(dashes.size(), 5u) << "two series share a dash pattern";
}

TEST(Report, LegendSitsRightOfThePlotAreaInsideTheImage) {
  LinePlot plot;
  plot.series.push_back(LossSeries("all_reduce (out of place)", 5, 0));
  plot.series.push_back(LossSeries("all_reduce (in place)", 5, 0.1));
  const std::string svg = RenderSvg(plot);
  const SvgRect area = RectOfClass(svg, "plot-area");
  const SvgRect legend = RectOfClass(svg, "legend-box");
  ASSERT_TRUE(area.found && legend.found) << svg;
  EXPECT_GE(legend.x, area.x + area.width) << "the legend overlaps the curves";
  EXPECT_LE(legend.x + legend.width, plot.width) << "the legend is cut off";
  EXPECT_GE(legend.y, 0);
  EXPECT_LE(legend.y + legend.height, plot.height);
  EXPECT_GT(area.width, plot.width / 2.0) << "the legend crowds out the plot";
}

TEST(Report, YAxisIsFittedToDataAwayFromZero) {
  LinePlot plot;
  plot.series.push_back(LossSeries("run 1", 20, 0));  // y in [2.4, 5.6]
  const std::vector<double> ticks =
      Numbers(TextsOfClass(RenderSvg(plot), "y-tick"));
  ASSERT_GE(ticks.size(), 3u);
  // Ticks inside the data's range padded by 5% of it (0.16 each side).
  EXPECT_GE(ticks.front(), 2.4 - 0.16) << "the axis starts below the data";
  EXPECT_LE(ticks.back(), 5.6 + 0.16) << "the axis ends above the data";
  EXPECT_GT(ticks.front(), 0);
}

TEST(Report, YAxisStartsAtZeroWhenTheDataNearlyDoes) {
  LinePlot plot;
  plot.series.push_back({"busbw", {{1, 0.2}, {2, 1.5}, {3, 3.0}}});
  const std::vector<double> ticks =
      Numbers(TextsOfClass(RenderSvg(plot), "y-tick"));
  ASSERT_FALSE(ticks.empty());
  EXPECT_EQ(ticks.front(), 0);
}

TEST(Report, StepAxesHaveIntegerTicks) {
  for (int steps : {2, 3, 7, 200}) {
    LinePlot plot;
    plot.integer_x = true;
    plot.series.push_back(LossSeries("run 1", steps, 0));
    const std::vector<std::string> labels =
        TextsOfClass(RenderSvg(plot), "x-tick");
    ASSERT_FALSE(labels.empty()) << steps << " steps";
    int64_t previous = 0;  // steps count from 1
    for (const std::string& label : labels) {
      int64_t step = 0;
      EXPECT_TRUE(absl::SimpleAtoi(label, &step))
          << "tick '" << label << "' on a " << steps << "-step axis";
      // Strictly increasing: a tick at 1.5 labelled "2" would repeat a label.
      EXPECT_GT(step, previous) << steps << "-step axis";
      previous = step;
    }
  }
}

TEST(Report, EmptyPlotIsStillValidSvg) {
  LinePlot plot;
  plot.title = "nothing";
  plot.series.push_back({"empty", {}});
  std::string problem;
  const std::string svg = RenderSvg(plot);
  EXPECT_TRUE(IsWellFormedXml(svg, &problem)) << problem;
  EXPECT_NE(svg.find("no data"), std::string::npos);
}

TEST(ReportDeathTest, RowWidthMustMatchHeaders) {
  MarkdownTable table;
  table.headers = {"a", "b"};
  table.rows = {{"only one"}};
  EXPECT_DEATH(table.Render(), "row width");
}

}  // namespace
}  // namespace mtb
