#include "comm_bench/harness.h"

#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "comm_bench/report_files.h"
#include "comm_bench/table.h"
#include "comm_bench/testing/thread_backend.h"
#include "common/report/svg_inspect.h"
#include "common/report/xml_check.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mtb::comm_bench {
namespace {

using ::testing::HasSubstr;
using testing::NewThreadGroup;
using testing::RunRanks;
using testing::ThreadBackend;
using testing::ThreadBackendOptions;

SweepOptions SmallSweep() {
  SweepOptions options;
  options.ops = CollectiveNames();
  options.min_bytes = 1024;
  options.max_bytes = 64 << 10;
  options.step_factor = 8;
  options.iters = 3;
  options.warmup_iters = 1;
  return options;
}

// Runs the sweep on `world_size` thread ranks; returns every rank's result.
std::vector<CommBenchResult> Sweep(int world_size, const SweepOptions& options,
                                   ThreadBackendOptions backend_options = {},
                                   std::ostream* table = nullptr) {
  auto group = NewThreadGroup(world_size);
  std::vector<CommBenchResult> results(world_size);
  std::vector<absl::Status> statuses = RunRanks(world_size, [&](int rank) {
    ThreadBackend backend(group, rank, backend_options);
    std::unique_ptr<TablePrinter> printer;
    if (rank == 0 && table != nullptr) {
      printer = std::make_unique<TablePrinter>(*table, "threads");
    }
    absl::StatusOr<CommBenchResult> result = RunSweep(backend, options, printer.get());
    if (!result.ok()) return result.status();
    results[rank] = *std::move(result);
    return absl::OkStatus();
  });
  for (const absl::Status& status : statuses) EXPECT_TRUE(status.ok()) << status;
  return results;
}

TEST(Sweep, PointsAreEachOpsSizesInOrderAsTheHookAndSweepPointOpsSayAlike) {
  SweepOptions options = SmallSweep();
  options.ops = {"all_reduce", "reduce_scatter"};
  // 4, 16, 64 B: reduce_scatter's 4 B and 16 B round to 0 at 3 ranks (each
  // rank's block is a multiple of 16 bytes: ShardedCount), so they are no
  // points.
  options.min_bytes = 4;
  options.max_bytes = 64;
  options.step_factor = 4;
  const absl::StatusOr<std::vector<std::string>> planned = SweepPointOps(options, 3);
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_EQ(*planned, (std::vector<std::string>{"all_reduce", "all_reduce", "all_reduce",
                                                "reduce_scatter"}));
  auto group = NewThreadGroup(3);
  std::vector<std::vector<std::string>> seen(3);
  std::vector<absl::Status> statuses = RunRanks(3, [&](int rank) {
    ThreadBackend backend(group, rank);
    SweepHooks hooks;
    hooks.before_point = [&, rank](int64_t point, const std::string& op) {
      EXPECT_EQ(point, static_cast<int64_t>(seen[rank].size()) + 1);
      seen[rank].push_back(op);
    };
    return RunSweep(backend, options, nullptr, hooks).status();
  });
  for (const absl::Status& status : statuses) EXPECT_TRUE(status.ok()) << status;
  for (int rank = 0; rank < 3; ++rank) EXPECT_EQ(seen[rank], *planned) << rank;
}

class EveryOp : public ::testing::TestWithParam<int> {};

TEST_P(EveryOp, CheckReportsZeroWrongInAndOutOfPlace) {
  const int world_size = GetParam();
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (RedOp redop : {RedOp::kSum, RedOp::kMax}) {
      SweepOptions options = SmallSweep();
      options.dtype = dtype;
      options.redop = redop;
      options.root = world_size - 1;
      std::vector<CommBenchResult> results = Sweep(world_size, options);
      const CommBenchResult& result = results[0];
      EXPECT_EQ(result.verdict(), "pass");
      EXPECT_EQ(VerdictExitCode(result), 0);
      // 1K, 8K, 64K; in place too except all_to_all(v): 4 x 2 + 2 x 1 rows.
      EXPECT_EQ(result.rows_size(), 3 * (4 * 2 + 2));
      for (const CommBenchRow& row : result.rows()) {
        EXPECT_TRUE(row.checked());
        EXPECT_EQ(row.wrong(), 0) << row.op() << " " << row.bytes() << " "
                                  << row.placement();
        EXPECT_GT(row.time_us(), 0);
        EXPECT_GE(row.slowest_rank_time_us(), row.time_us());
        EXPECT_GT(row.iteration_p99_us(), 0);
        EXPECT_GE(row.iteration_p99_us(), row.iteration_p50_us());
        EXPECT_DOUBLE_EQ(row.busbw_gbps(), row.algbw_gbps() * row.busbw_factor());
      }
      // Every rank agrees on the rows (they come from one exchange).
      for (const CommBenchResult& other : results) {
        ASSERT_EQ(other.rows_size(), result.rows_size());
        EXPECT_EQ(other.rows(5).time_us(), result.rows(5).time_us());
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TwoAndThreeRanks, EveryOp, ::testing::Values(2, 3));

TEST(RunSweep, CorruptedOutputIsCountedAsWrongAndFailsTheRun) {
  SweepOptions options = SmallSweep();
  options.corrupt_op = "all_gather";
  options.corrupt_rank = 1;
  const CommBenchResult result = Sweep(3, options)[0];
  EXPECT_EQ(VerdictExitCode(result), 1);
  EXPECT_THAT(result.verdict(), HasSubstr("all_gather: 6 wrong elements in 6 rows"));
  for (const CommBenchRow& row : result.rows()) {
    EXPECT_EQ(row.wrong(), row.op() == "all_gather" ? 1 : 0) << row.op();
  }
  for (const CommBenchOpSummary& summary : result.summaries()) {
    EXPECT_EQ(summary.rows_with_wrong(), summary.op() == "all_gather" ? 6 : 0);
  }
}

TEST(RunSweep, AMisroutingBackendIsCaughtByEveryCheck) {
  SweepOptions options = SmallSweep();
  options.ops = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"};
  ThreadBackendOptions broken;
  broken.misroute = true;
  const CommBenchResult result = Sweep(2, options, broken)[0];
  EXPECT_EQ(VerdictExitCode(result), 1);
  for (const CommBenchRow& row : result.rows()) {
    EXPECT_GT(row.wrong(), 0) << row.op() << " " << row.placement();
  }
}

// Broadcast delivering the wrong root's buffer and all_to_allv reading each
// block at the next peer's split offset, at 3 ranks with a non-zero root and
// both uniform and skewed splits: every row's check counts wrong elements.
TEST(RunSweep, MisroutedBroadcastAndAllToAllvAreCaught) {
  ThreadBackendOptions broken;
  broken.misroute = true;
  for (Skew::Kind skew : {Skew::Kind::kUniform, Skew::Kind::kLinear}) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      SweepOptions options = SmallSweep();
      options.ops = {"broadcast", "all_to_allv"};
      options.root = 1;
      options.dtype = dtype;
      options.all_to_allv.skew = {skew, 0};
      const CommBenchResult result = Sweep(3, options, broken)[0];
      EXPECT_EQ(VerdictExitCode(result), 1);
      // broadcast in and out of place, all_to_allv out of place; 3 sizes.
      EXPECT_EQ(result.rows_size(), 3 * 3);
      for (const CommBenchRow& row : result.rows()) {
        EXPECT_GT(row.wrong(), 0) << row.op() << " " << row.bytes() << " "
                                  << row.placement();
      }
      // The same sweep on a correct backend passes: the check, not the
      // sizes, is what fails above.
      EXPECT_EQ(Sweep(3, options)[0].verdict(), "pass");
    }
  }
}

TEST(RunSweep, CheckOffReportsNothingChecked) {
  SweepOptions options = SmallSweep();
  options.ops = {"all_reduce"};
  options.check = false;
  options.corrupt_op = "all_reduce";
  options.corrupt_rank = 0;
  const CommBenchResult result = Sweep(2, options)[0];
  EXPECT_EQ(result.verdict(), "pass");
  for (const CommBenchRow& row : result.rows()) EXPECT_FALSE(row.checked());
}

TEST(RunSweep, AverageBusbwBelowTheGateFailsAsNcclTests) {
  SweepOptions options = SmallSweep();
  options.ops = {"broadcast"};
  options.min_busbw = 1e9;  // no machine reaches an exabyte per second
  const CommBenchResult result = Sweep(2, options)[0];
  EXPECT_EQ(VerdictExitCode(result), 1);
  ASSERT_EQ(result.summaries_size(), 1);
  EXPECT_TRUE(result.summaries(0).below_min_busbw());
  EXPECT_THAT(result.verdict(), HasSubstr("< 0.9 x --min_busbw"));
  // The average is over every row of the op, as nccl-tests' footer.
  double sum = 0;
  for (const CommBenchRow& row : result.rows()) sum += row.busbw_gbps();
  EXPECT_DOUBLE_EQ(result.summaries(0).avg_busbw_gbps(), sum / result.rows_size());
}

TEST(RunSweep, SizesThatRoundToZeroAreSkippedWithANote) {
  SweepOptions options = SmallSweep();
  options.ops = {"all_gather", "all_reduce"};
  options.min_bytes = 16;
  options.max_bytes = 1024;
  options.step_factor = 4;  // 16, 64, 256, 1024
  const CommBenchResult result = Sweep(3, options)[0];
  // all_gather at 3 ranks needs 3 x 16 bytes: 16 rounds to 0; 64 gives 48.
  ASSERT_EQ(result.notes_size(), 1);
  EXPECT_THAT(result.notes(0), HasSubstr("all_gather: size 16 B rounds to 0"));
  EXPECT_EQ(result.summaries(0).rows(), 3 * 2);
  EXPECT_EQ(result.summaries(1).rows(), 4 * 2);
  EXPECT_EQ(result.verdict(), "pass");
}

TEST(RunSweep, SkewedAndMatrixAllToAllvCheckAndNameTheBottleneck) {
  SweepOptions options = SmallSweep();
  options.ops = {"all_to_allv"};
  options.all_to_allv.skew = {Skew::Kind::kZipf, 1.5};
  CommBenchResult result = Sweep(3, options)[0];
  EXPECT_EQ(result.verdict(), "pass");
  for (const CommBenchRow& row : result.rows()) {
    EXPECT_EQ(row.bottleneck_rank(), 0);  // zipf: rank 0 is the hot receiver
    EXPECT_EQ(row.send_bytes_per_rank_size(), 3);
    EXPECT_EQ(row.bottleneck_bytes(), row.recv_bytes_per_rank(0));
  }
  options.all_to_allv.matrix_bytes = SplitMatrix{{0, 400, 8}, {4, 4, 4}, {0, 0, 0}};
  result = Sweep(3, options)[0];
  EXPECT_EQ(result.verdict(), "pass");
  ASSERT_EQ(result.rows_size(), 1);
  EXPECT_EQ(result.rows(0).bytes(), 408);
  EXPECT_EQ(result.rows(0).bottleneck_rank(), 0);
}

// Over shared memory every row carries the ceiling its sweep measured for
// its op and size (the thread backend shares memory as the shm transport
// does); over TCP without --ceiling none does.
TEST(RunSweep, ShmTransportComparesEveryRowWithTheCeilingMeasuredInTheSweep) {
  SweepOptions options = SmallSweep();
  options.transport = "shm";
  options.shm_ceiling_chunk_bytes = 4096;  // several chunks per point
  const std::vector<CommBenchResult> results = Sweep(2, options);
  ASSERT_GT(results[0].rows_size(), 0);
  for (const CommBenchRow& row : results[0].rows()) {
    EXPECT_GT(row.ceiling_gbps(), 0) << row.op() << " " << row.bytes();
    EXPECT_THAT(row.ceiling_shape(), HasSubstr("in this sweep")) << row.op();
    EXPECT_DOUBLE_EQ(row.busbw_fraction_of_ceiling(), row.busbw_gbps() / row.ceiling_gbps());
    // Measured 3 times around the point's rows; the best is the ceiling.
    EXPECT_EQ(row.ceiling_measurements(), 3) << row.op();
    EXPECT_GT(row.ceiling_min_gbps(), 0) << row.op();
    EXPECT_LE(row.ceiling_min_gbps(), row.ceiling_gbps()) << row.op();
  }
  options.transport = "tcp";
  const std::vector<CommBenchResult> tcp = Sweep(2, options);
  for (const CommBenchRow& row : tcp[0].rows()) {
    EXPECT_EQ(row.ceiling_gbps(), 0) << row.op();
  }
}

TEST(CheckSupported, AnUnsupportedCombinationIsInvalidArgument) {
  auto group = NewThreadGroup(1);
  ThreadBackendOptions refusing;
  refusing.refuse_bfloat16 = true;
  ThreadBackend backend(group, 0, refusing);
  SweepOptions options = SmallSweep();
  EXPECT_TRUE(CheckSupported(backend, options).ok());
  options.dtype = DType::kBFloat16;
  EXPECT_EQ(CheckSupported(backend, options).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TablePrinter, PrintsNcclTestsColumnsRowsAndFooter) {
  SweepOptions options = SmallSweep();
  options.ops = {"all_reduce", "all_to_all"};
  std::ostringstream table;
  Sweep(2, options, {}, &table);
  const std::string text = table.str();
  EXPECT_THAT(text, HasSubstr("#       size         count      type   redop    root"
                              "     time   algbw   busbw  #wrong     time   algbw"
                              "   busbw  #wrong"));
  EXPECT_THAT(text, HasSubstr("# Out of bounds values : 0 OK"));
  EXPECT_THAT(text, HasSubstr("# Avg bus bandwidth    : "));
  // A row: size, count, type, redop, root as nccl-tests prints them.
  EXPECT_THAT(text, HasSubstr("        1024           256     float     sum      -1"));
  // all_to_all has no in-place run.
  EXPECT_THAT(text, HasSubstr("        1024           128     float    none      -1"));
  EXPECT_THAT(text, HasSubstr("      -       -       -     N/A |"));
}

TEST(NcclTestsNumber, UsesFewerDecimalsWhenTheColumnIsFull) {
  EXPECT_EQ(NcclTestsNumber(1.234, 6), "  1.23");
  EXPECT_EQ(NcclTestsNumber(1234.5, 6), "1234.5");
  EXPECT_EQ(NcclTestsNumber(123456.0, 6), "123456");
  EXPECT_EQ(NcclTestsNumber(12345678.0, 6), " 1e+07");
  EXPECT_EQ(NcclTestsNumber(25.5, 7), "  25.50");
}

TEST(ReportFiles, MarkdownAndSvgCarryEveryRow) {
  SweepOptions options = SmallSweep();
  options.ops = {"all_reduce", "all_to_allv"};
  options.all_to_allv.skew = {Skew::Kind::kLinear, 0};
  CommBenchResult result = Sweep(2, options)[0];
  result.mutable_options()->set_backend("threads");
  const std::string markdown = RenderMarkdown(result);
  EXPECT_THAT(markdown, HasSubstr("## all_reduce"));
  EXPECT_THAT(markdown, HasSubstr("| bottleneck |"));
  EXPECT_THAT(markdown, HasSubstr("Avg bus bandwidth: "));
  EXPECT_THAT(markdown, HasSubstr("**Verdict: pass**"));
  const std::string svg = RenderBusbwSvg(result);
  std::string problem;
  EXPECT_TRUE(IsWellFormedXml(svg, &problem)) << problem;
  // all_reduce runs both ways: two series that look different; all_to_allv
  // has no in-place run, so its one series is just the op.
  const std::vector<SvgSeriesStyle> styles = SeriesStyles(svg);
  std::map<std::string, SvgSeriesStyle> by_name;
  for (const SvgSeriesStyle& style : styles) by_name[style.name] = style;
  ASSERT_EQ(by_name.size(), 3u) << svg;
  ASSERT_EQ(by_name.count("all_reduce (out of place)"), 1u) << svg;
  ASSERT_EQ(by_name.count("all_reduce (in place)"), 1u) << svg;
  ASSERT_EQ(by_name.count("all_to_allv"), 1u) << svg;
  const SvgSeriesStyle& out_of_place = by_name["all_reduce (out of place)"];
  const SvgSeriesStyle& in_place = by_name["all_reduce (in place)"];
  EXPECT_NE(out_of_place.stroke, in_place.stroke);
  EXPECT_NE(out_of_place.dasharray, in_place.dasharray);
  const SvgRect area = RectOfClass(svg, "plot-area");
  const SvgRect legend = RectOfClass(svg, "legend-box");
  ASSERT_TRUE(area.found && legend.found);
  EXPECT_GE(legend.x, area.x + area.width) << "the legend covers the curves";
}

}  // namespace
}  // namespace mtb::comm_bench
