// The strategy matrix's rows, table and plot from hand-made runs (the
// benchmark itself is a manual command: it runs for many minutes).
#include "trainer/bench/strategy_matrix.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/report/svg_inspect.h"
#include "absl/strings/str_cat.h"
#include "trainer/strategy/registry.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

MatrixRun RunWith(double tokens_per_second, int64_t peak, double cpu_ms = 0) {
  MatrixRun run;
  run.tokens_per_second = tokens_per_second;
  run.cpu_ms = cpu_ms;
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
      {RunWith(100, 3 << 20, 30), RunWith(300, 1 << 20, 10),
       RunWith(200, 2 << 20, 50)},
      "pytorch_ddp", {100, 100, 400});
  EXPECT_EQ(row.tokens_per_second(), 200);
  EXPECT_EQ(row.cpu_ms_per_step(), 30);
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
      MatrixTrainerFlags(tiny, "fp32", 2, "zero2_exact", "blas");
  auto has = [&](const std::string& flag) {
    return std::find(flags.begin(), flags.end(), flag) != flags.end();
  };
  EXPECT_TRUE(has("--strategy=zero2"));
  EXPECT_TRUE(has("--reduction=exact"));
  EXPECT_TRUE(has(absl::StrCat("--exact_chunk=", kMatrixExactChunk)));
  EXPECT_TRUE(has("--gemm=blas"));
  const std::vector<std::string> float_flags =
      MatrixTrainerFlags(tiny, "fp32", 2, "zero2", "onednn");
  EXPECT_EQ(std::count(float_flags.begin(), float_flags.end(),
                       std::string("--gemm=onednn")),
            1);
  EXPECT_EQ(std::count(float_flags.begin(), float_flags.end(),
                       std::string("--reduction=exact")),
            0);
}

bool Has(const std::vector<std::string>& flags, const std::string& flag) {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

// Every strategy that runs on several ranks gets a tp row with and without
// SP, from the registry: --tp=2 over the dp group, on the global batch of
// the other rows, against the strategy alone; it runs where 2 divides the
// world (tp 2 x dp 1 at 2 ranks, tp 2 x dp 2 at 4).
TEST(StrategyMatrix, TpVariantsComeFromTheRegistryAndRunWhereTwoDividesTheWorld) {
  const StrategyMatrixModel& tiny = StrategyMatrixModels()[0];
  int multi_rank = 0;
  for (const StrategyEntry& entry : AllStrategyEntries()) {
    if (entry.max_world_size == 1) {
      EXPECT_EQ(FindMatrixVariant(absl::StrCat(kTpPrefix, entry.name)), nullptr);
      continue;
    }
    ++multi_rank;
    for (const std::string prefix : {kTpPrefix, kTpSpPrefix}) {
      const std::string name = absl::StrCat(prefix, entry.name);
      SCOPED_TRACE(name);
      const MatrixVariant* variant = FindMatrixVariant(name);
      ASSERT_NE(variant, nullptr);
      EXPECT_EQ(variant->tp, 2);
      EXPECT_EQ(variant->peer, entry.name);
      EXPECT_TRUE(variant->peer_is_ours);
      const std::vector<std::string> flags =
          MatrixTrainerFlags(tiny, "fp32", 4, name, "onednn");
      EXPECT_TRUE(Has(flags, absl::StrCat("--strategy=", entry.name)));
      EXPECT_TRUE(Has(flags, "--tp=2"));
      EXPECT_TRUE(Has(flags, "--nproc=4"));
      EXPECT_EQ(Has(flags, "--sequence_parallel"), prefix == kTpSpPrefix);
      // One replica of 2 ranks: 2 x 8 samples, as two ranks of dp.
      EXPECT_TRUE(Has(flags, absl::StrCat("--batch_size=",
                                          2 * kStrategyMatrixBatch)));
      EXPECT_EQ(std::count_if(flags.begin(), flags.end(),
                              [](const std::string& f) {
                                return f.rfind("--batch_size=", 0) == 0;
                              }),
                1);
      EXPECT_FALSE(MatrixVariantRunsAt(*variant, 1));
      EXPECT_TRUE(MatrixVariantRunsAt(*variant, 2));
      EXPECT_FALSE(MatrixVariantRunsAt(*variant, 3));
      EXPECT_TRUE(MatrixVariantRunsAt(*variant, 4));
    }
  }
  EXPECT_EQ(multi_rank, 4);
  // The rows without tp: batch 8, no --tp, every world.
  const std::vector<std::string> ddp =
      MatrixTrainerFlags(tiny, "fp32", 2, "ddp", "onednn");
  EXPECT_TRUE(Has(ddp, absl::StrCat("--batch_size=", kStrategyMatrixBatch)));
  EXPECT_EQ(std::count_if(ddp.begin(), ddp.end(),
                          [](const std::string& f) {
                            return f.rfind("--tp", 0) == 0;
                          }),
            0);
  EXPECT_TRUE(MatrixVariantRunsAt(*FindMatrixVariant("ddp"), 1));
  EXPECT_TRUE(MatrixVariantRunsAt(*FindMatrixVariant("ddp"), 3));
  // A cell keeps the order it was given, less what does not fit.
  const std::vector<std::string> given = {"ddp", "tp2_ddp", "fsdp",
                                          "tp2_sp_fsdp"};
  EXPECT_EQ(MatrixStrategiesAt(given, 1),
            (std::vector<std::string>{"ddp", "fsdp"}));
  EXPECT_EQ(MatrixStrategiesAt(given, 4), given);
}

TEST(StrategyMatrix, GemmsParseInTheirOrderAndABadOneNamesTheFlag) {
  EXPECT_EQ(*ParseMatrixGemms("onednn,blas"),
            (std::vector<std::string>{"onednn", "blas"}));
  EXPECT_EQ(*ParseMatrixGemms("blas"), std::vector<std::string>{"blas"});
  const absl::Status unknown = ParseMatrixGemms("onednn,mkl").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.message(), "--gemms: 'mkl' is not one of onednn, blas");
  const absl::Status twice = ParseMatrixGemms("blas,blas").status();
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(twice.message().find("'blas' is listed twice"), std::string::npos);
}

TEST(StrategyMatrix, ACellHasARowPerStrategyAndBackendEachAgainstItsOwnPeer) {
  MatrixCellRuns runs;
  // Two rounds. tokens/s: ddp onednn 300, 600; ddp blas 200, 200; the peer
  // 100, 200; ddp_exact onednn 150, 300 and blas 100, 100.
  runs.ours[{"ddp", "onednn"}] = {RunWith(300, 0, 20), RunWith(600, 0, 22)};
  runs.ours[{"ddp", "blas"}] = {RunWith(200, 0, 30), RunWith(200, 0, 34)};
  runs.ours[{"ddp_exact", "onednn"}] = {RunWith(150, 0), RunWith(300, 0)};
  runs.ours[{"ddp_exact", "blas"}] = {RunWith(100, 0), RunWith(100, 0)};
  runs.peers["pytorch_ddp"] = {RunWith(100, 0, 40), RunWith(200, 0, 44)};
  const std::vector<StrategyMatrixRow> rows =
      MatrixCellRows("tiny", "fp32", 2, {"ddp", "ddp_exact"}, {"onednn", "blas"},
                     {"pytorch_ddp"}, runs);
  ASSERT_EQ(rows.size(), 5u);
  auto key = [](const StrategyMatrixRow& row) {
    return absl::StrCat(row.strategy(), "/", row.gemm());
  };
  EXPECT_EQ(key(rows[0]), "ddp/onednn");
  EXPECT_EQ(key(rows[1]), "ddp/blas");
  EXPECT_EQ(key(rows[2]), "ddp_exact/onednn");
  EXPECT_EQ(key(rows[3]), "ddp_exact/blas");
  EXPECT_EQ(key(rows[4]), "pytorch_ddp/");
  // Each backend against the same rounds of PyTorch: 3 and 3; 2 and 1.
  EXPECT_EQ(rows[0].peer(), "pytorch_ddp");
  EXPECT_EQ(rows[0].peer_ratio(), 3.0);
  EXPECT_EQ(rows[1].peer_ratio(), 1.5);
  EXPECT_EQ(rows[1].peer_ratio_min(), 1.0);
  // An exact variant against float mode on its own backend: 0.5, not 0.25.
  EXPECT_EQ(rows[2].peer(), "ddp");
  EXPECT_EQ(rows[2].peer_ratio(), 0.5);
  EXPECT_EQ(rows[3].peer_ratio(), 0.5);
  // CPU ms per step beside tokens/s, medians over rounds, peers included.
  EXPECT_EQ(rows[0].cpu_ms_per_step(), 21);
  EXPECT_EQ(rows[1].cpu_ms_per_step(), 32);
  EXPECT_EQ(rows[4].cpu_ms_per_step(), 42);
  EXPECT_EQ(rows[4].peer(), "");
}

// A tp row against the strategy alone on the same ranks and rounds, with
// its tp bytes beside their closed form in the table.
TEST(StrategyMatrix, ATpRowIsComparedWithItsStrategyAloneAndShowsItsTpBytes) {
  MatrixCellRuns runs;
  runs.ours[{"fsdp", "onednn"}] = {RunWith(400, 8 << 20), RunWith(200, 8 << 20)};
  MatrixRun tp = RunWith(100, 6 << 20);
  tp.tp_bytes_per_step = 3 << 20;
  tp.expected_tp_bytes_per_step = 3 << 20;
  runs.ours[{"tp2_fsdp", "onednn"}] = {tp, tp};
  runs.ours[{"tp2_fsdp", "onednn"}][1].tokens_per_second = 150;
  const std::vector<StrategyMatrixRow> rows = MatrixCellRows(
      "tiny", "fp32", 4, {"fsdp", "tp2_fsdp"}, {"onednn"}, {}, runs);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].tp(), 1);
  EXPECT_EQ(rows[1].strategy(), "tp2_fsdp");
  EXPECT_EQ(rows[1].tp(), 2);
  EXPECT_EQ(rows[1].peer(), "fsdp");
  // Per round: 100 / 400 and 150 / 200.
  EXPECT_EQ(rows[1].peer_ratio_min(), 0.25);
  EXPECT_EQ(rows[1].peer_ratio_max(), 0.75);
  EXPECT_EQ(rows[1].tp_bytes_per_step(), 3 << 20);
  StrategyMatrixResult result;
  for (const StrategyMatrixRow& row : rows) *result.add_rows() = row;
  const std::string markdown = RenderStrategyMatrixMarkdown(result);
  EXPECT_NE(markdown.find("| 6.00 (2.00) | 1.00 (1.00) | 3.00 (3.00) | 0.50x fsdp"),
            std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("| 8.00 (2.00) | 1.00 (1.00) | - | -"),
            std::string::npos)
      << markdown;
  // From a result: the tp group's bytes, mean over the timed steps.
  TrainResult result_of_run;
  TrainRun* train_run = result_of_run.add_runs();
  for (int64_t bytes : {int64_t{100}, int64_t{300}}) {
    StepRecord* step = train_run->add_steps();
    step->set_timed(true);
    step->set_tp_bytes_sent(bytes);
    step->set_expected_tp_bytes(bytes + 1);
  }
  EXPECT_EQ(MatrixRunFromResult(result_of_run).tp_bytes_per_step, 200);
  EXPECT_EQ(MatrixRunFromResult(result_of_run).expected_tp_bytes_per_step, 201);
}

TEST(StrategyMatrix, ARunsCpuTimeIsTheMeanOverTimedStepsOnBothSides) {
  TrainResult result;
  TrainRun* train_run = result.add_runs();
  for (double cpu_ms : {100.0, 20.0, 30.0}) {
    StepRecord* step = train_run->add_steps();
    step->set_timed(cpu_ms < 100);  // the first step is a warm-up
    step->set_cpu_ms(cpu_ms);
  }
  EXPECT_EQ(MatrixRunFromResult(result).cpu_ms, 25);
  PeerRun peer;
  peer.set_tokens_per_second(1000);
  peer.set_cpu_ms_per_step(33);
  EXPECT_EQ(MatrixRunFromPeer(peer).cpu_ms, 33);
  EXPECT_EQ(MatrixRunFromPeer(peer).tokens_per_second, 1000);
}

TEST(StrategyMatrix, TheTableHasARowPerStrategyAndTheMemoryPlotALinePerOurs) {
  StrategyMatrixResult result;
  for (int world : {1, 2, 4}) {
    for (const std::string strategy : {"ddp", "fsdp"}) {
      for (const std::string gemm : {"onednn", "blas"}) {
        StrategyMatrixRow row = MatrixRow(
            "small", "fp32", world, strategy,
            {RunWith(1000, (strategy == "ddp" ? 64 : 64 / world) << 20,
                     gemm == "blas" ? 30 : 20)},
            "", {});
        row.set_gemm(gemm);
        *result.add_rows() = row;
      }
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
                "| fsdp | onednn | 4 | 1000 (1000–1000) | 20.0 | 1000 | 0 | - | "
                "16.0 (2.00) |"),
            std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("| fsdp | blas | 4 | 1000 (1000–1000) | 30.0 | 1000 |"),
            std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("| pytorch_ddp | - | 2 |"), std::string::npos)
      << markdown;
  const std::string svg = RenderPeakMemorySvg(result, "small", "fp32");
  const std::vector<SvgSeriesStyle> series = SeriesStyles(svg);
  // One line per strategy of ours (the first backend's rows; peers have no
  // counted memory).
  ASSERT_EQ(series.size(), 2u);
  EXPECT_NE(svg.find("gemm onednn"), std::string::npos);
  EXPECT_EQ(series[0].name, "ddp");
  EXPECT_EQ(series[1].name, "fsdp");
  EXPECT_NE(svg.find("data-x=\"4\" data-y=\"16\""), std::string::npos) << svg;
}

}  // namespace
}  // namespace mtb
