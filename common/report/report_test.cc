#include "common/report/report.h"

#include <cstdlib>
#include <string>

#include "common/results/atomic_file.h"
#include "common/report/xml_check.h"
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
