// The strategy matrix's rows, table and plot from hand-made runs (the
// benchmark itself is a manual command: it runs for many minutes).
#include "trainer/bench/strategy_matrix.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/report/svg_inspect.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

MatrixRun RunWith(double tokens_per_second, int64_t peak) {
  MatrixRun run;
  run.tokens_per_second = tokens_per_second;
  run.step_ms = 1000;
  run.peak_memory_bytes = peak;
  run.memory_estimate_bytes = 2 << 20;
  run.bytes_per_step = 1 << 20;
  run.expected_bytes_per_step = 1 << 20;
  run.parameters = 1000;
  return run;
}

TEST(StrategyMatrix, RowsAreMediansAndRatiosArePerRound) {
  const StrategyMatrixRow row = MatrixRow(
      "tiny", "fp32", 2, "ddp",
      {RunWith(100, 3 << 20), RunWith(300, 1 << 20), RunWith(200, 2 << 20)},
      "pytorch_ddp", {100, 100, 400});
  EXPECT_EQ(row.tokens_per_second(), 200);
  EXPECT_EQ(row.tokens_per_second_min(), 100);
  EXPECT_EQ(row.tokens_per_second_max(), 300);
  EXPECT_EQ(row.peak_memory_bytes(), 2 << 20);
  EXPECT_EQ(row.rounds(), 3);
  // Per round: 1.0, 3.0, 0.5 -> median 1.0 (not 200 / 100 = 2).
  EXPECT_EQ(row.peer(), "pytorch_ddp");
  EXPECT_EQ(row.peer_ratio(), 1.0);
  EXPECT_EQ(row.peer_ratio_min(), 0.5);
  EXPECT_EQ(row.peer_ratio_max(), 3.0);
}

TEST(StrategyMatrix, ExactVariantsRunTheStrategyWithTheExactReduction) {
  const StrategyMatrixModel& tiny = StrategyMatrixModels()[0];
  const std::vector<std::string> flags =
      MatrixTrainerFlags(tiny, "fp32", 2, "zero2_exact");
  auto has = [&](const std::string& flag) {
    return std::find(flags.begin(), flags.end(), flag) != flags.end();
  };
  EXPECT_TRUE(has("--strategy=zero2"));
  EXPECT_TRUE(has("--reduction=exact"));
  EXPECT_TRUE(has(absl::StrCat("--exact_chunk=", kMatrixExactChunk)));
  const std::vector<std::string> float_flags =
      MatrixTrainerFlags(tiny, "fp32", 2, "zero2");
  EXPECT_EQ(std::count(float_flags.begin(), float_flags.end(),
                       std::string("--reduction=exact")),
            0);
}

TEST(StrategyMatrix, TheTableHasARowPerStrategyAndTheMemoryPlotALinePerOurs) {
  StrategyMatrixResult result;
  for (int world : {1, 2, 4}) {
    for (const std::string strategy : {"ddp", "fsdp"}) {
      *result.add_rows() = MatrixRow(
          "small", "fp32", world, strategy,
          {RunWith(1000, (strategy == "ddp" ? 64 : 64 / world) << 20)}, "", {});
    }
    *result.add_rows() = MatrixRow("small", "fp32", world, "pytorch_ddp",
                                   {RunWith(900, 0)}, "", {});
  }
  result.set_notes("1 round.");
  const std::string markdown = RenderStrategyMatrixMarkdown(result);
  EXPECT_NE(markdown.find("## small (1000 parameters), fp32"),
            std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find(
                "| fsdp | 4 | 1000 (1000–1000) | 1000 | 0 | - | 16.0 (2.00) |"),
            std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("| pytorch_ddp | 2 |"), std::string::npos)
      << markdown;
  const std::string svg = RenderPeakMemorySvg(result, "small", "fp32");
  const std::vector<SvgSeriesStyle> series = SeriesStyles(svg);
  ASSERT_EQ(series.size(), 2u) << "peers have no counted memory";
  EXPECT_EQ(series[0].name, "ddp");
  EXPECT_EQ(series[1].name, "fsdp");
  EXPECT_NE(svg.find("data-x=\"4\" data-y=\"16\""), std::string::npos) << svg;
}

}  // namespace
}  // namespace mtb
