// The trainer's human-readable outputs: the summary table's labels and the
// loss curve a person reads (one style per run, integer step ticks, a y axis
// fitted to the losses).
#include "trainer/output/output.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "common/report/svg_inspect.h"
#include "common/report/xml_check.h"
#include "gtest/gtest.h"
#include "trainer/output/metrics.h"

namespace mtb {
namespace {

// Two runs of 7 steps whose loss falls from 5.6 to 2.4 (a drop of 0.571).
TrainResult TwoRunResult() {
  TrainResult result;
  result.mutable_config()->set_steps(7);
  result.mutable_config()->set_data("testdata/tiny.bin");
  for (int index = 0; index < 2; ++index) {
    TrainRun* run = result.add_runs();
    run->set_index(index);
    for (int step = 1; step <= 7; ++step) {
      StepRecord* record = run->add_steps();
      record->set_step(step);
      record->set_loss(5.6 - 3.2 * (step - 1) / 6.0 + 0.01 * index);
    }
    run->set_first_loss(5.6);
    run->set_final_loss(2.4);
    run->set_loss_drop_fraction(1 - 2.4 / 5.6);
  }
  result.mutable_summary()->mutable_loss_drop_fraction()->set_mean(1 - 2.4 / 5.6);
  result.mutable_summary()->mutable_loss_drop_fraction()->set_count(1);
  return result;
}

TEST(TrainOutput, SummaryLabelsTheLossDropAsRelative) {
  const std::string table = RenderSummaryTable(TwoRunResult());
  EXPECT_NE(table.find("| loss drop (relative) | 0.571 |"), std::string::npos)
      << table;
}

// A measured peak: the fastest GEMM (oneDNN, 400 GFLOP/s for the job) and
// the fastest BLAS one (200) for 160 model GFLOP/s.
TrainResult MeasuredPeakResult(double model_flops_per_second) {
  TrainResult result = TwoRunResult();
  PeakFlops* peak = result.mutable_peak_flops();
  peak->set_source("measured: fastest of 12 GEMMs (fp32): onednn fp32 512x384x128");
  peak->set_job_flops_per_second(400e9);
  peak->set_rank_flops_per_second(200e9);
  peak->set_blas_job_flops_per_second(200e9);
  peak->set_blas_rank_flops_per_second(100e9);
  TrainSummary* summary = result.mutable_summary();
  summary->set_model_flops_per_second(model_flops_per_second);
  summary->set_mfu(model_flops_per_second / 400e9);
  summary->set_blas_mfu(model_flops_per_second / 200e9);
  return result;
}

TEST(TrainOutput, SummaryGivesTheMfuOfTheFastestGemmWithTheBlasOnlyMfuBeside) {
  const std::string table = RenderSummaryTable(MeasuredPeakResult(160e9));
  EXPECT_NE(table.find("| MFU | 40.0% of 400 GFLOP/s (measured); BLAS-only "
                       "80.0% of 200 |"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("EXCEEDS"), std::string::npos) << table;
}

TEST(TrainOutput, AnMfuAboveTheMeasuredPeakIsCalledABugNotALowPeak) {
  const TrainResult result = MeasuredPeakResult(480e9);
  const std::string table = RenderSummaryTable(result);
  EXPECT_NE(table.find("120.0% of 400 GFLOP/s (measured) EXCEEDS 100% of the "
                       "measured peak: a bug of the probe"),
            std::string::npos)
      << table;
  const std::string warning =
      MfuAboveOneWarning(result.summary().mfu(), result.peak_flops());
  EXPECT_NE(warning.find("a bug of the probe"), std::string::npos) << warning;
  // With --peak_flops the peak is the user's, and too low.
  PeakFlops given = result.peak_flops();
  given.set_source("--peak_flops");
  EXPECT_NE(MfuAboveOneWarning(1.2, given).find("give the device's real peak"),
            std::string::npos);
}

TEST(TrainOutput, SummaryShowsEachRanksMemoryAtItsPeakNextToTheClosedForm) {
  TrainResult result = TwoRunResult();
  result.mutable_strategy()->set_name("zero2");
  MemoryEstimate* estimate = result.mutable_memory_estimate();
  estimate->set_parameters(4000);
  estimate->set_gradients(2000);
  estimate->set_optimizer_state(4000);
  estimate->set_collective_staging(1000);
  for (int rank : {0, 1}) {
    RankMemory* memory = result.add_memory();
    memory->set_rank(rank);
    memory->set_counted(true);
    memory->set_peak_bytes(11000 + rank);
    MemoryAtPeak* at = memory->mutable_at_peak();
    at->set_step(3);
    at->set_where("zero: reduce-scatter launched for bucket 1");
    at->set_peak_bytes(11000 + rank);
    at->set_parameter_bytes(4000);
    at->set_gradient_bytes(2048);
    at->set_optimizer_state_bytes(4000);
    at->set_collective_bytes(512);
    at->set_unattributed_bytes(440 + rank);
  }
  const std::string table = RenderSummaryTable(result);
  for (const char* expected :
       {"| memory at peak, rank 0 | ", "| memory at peak, rank 1 | ",
        "at 'zero: reduce-scatter launched for bucket 1' (step 3)",
        "| closed form / rank | zero2 4P + 12P/N + buckets in flight: "}) {
    EXPECT_NE(table.find(expected), std::string::npos) << expected << "\n"
                                                       << table;
  }
  // Not counted (ranks as threads): no breakdown rows.
  for (RankMemory& memory : *result.mutable_memory()) memory.set_counted(false);
  EXPECT_EQ(RenderSummaryTable(result).find("memory at peak"),
            std::string::npos);
}

TEST(TrainOutput, LossCurveIsReadable) {
  const std::string svg = RenderLossCurveSvg(TwoRunResult());
  std::string problem;
  ASSERT_TRUE(IsWellFormedXml(svg, &problem)) << problem;

  const std::vector<SvgSeriesStyle> styles = SeriesStyles(svg);
  ASSERT_EQ(styles.size(), 2u);
  EXPECT_NE(styles[0].stroke, styles[1].stroke);
  EXPECT_NE(styles[0].dasharray, styles[1].dasharray);

  for (const std::string& label : TextsOfClass(svg, "x-tick")) {
    int step = 0;
    EXPECT_TRUE(absl::SimpleAtoi(label, &step)) << "step tick '" << label << "'";
  }
  const std::vector<std::string> y_labels = TextsOfClass(svg, "y-tick");
  ASSERT_FALSE(y_labels.empty());
  double lowest = 0;
  ASSERT_TRUE(absl::SimpleAtod(y_labels.front(), &lowest));
  EXPECT_GT(lowest, 2.0) << "the loss axis should be fitted, not start at 0";

  const SvgRect area = RectOfClass(svg, "plot-area");
  const SvgRect legend = RectOfClass(svg, "legend-box");
  ASSERT_TRUE(area.found && legend.found);
  EXPECT_GE(legend.x, area.x + area.width);
}

}  // namespace
}  // namespace mtb
