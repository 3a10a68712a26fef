// The ceiling benchmark and how comm_bench matches rows to it.
#include "comm_bench/ceiling.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "comm_bench/report_files.h"
#include "comm_bench/shm_ceiling.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mtb::comm_bench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

CommBenchCeiling Figures() {
  CommBenchCeiling ceiling;
  ceiling.set_tcp_one_way_gbps(4);
  ceiling.set_tcp_both_ways_gbps(2);
  ceiling.set_tcp_peers_gbps(1);
  ceiling.set_peers_world_size(3);
  return ceiling;
}

CommBenchRow Row(const std::string& op, double busbw) {
  CommBenchRow row;
  row.set_op(op);
  row.set_busbw_gbps(busbw);
  row.set_bottleneck_rank(-1);  // not all_to_allv
  return row;
}

TEST(MatchingCeiling, TwoRanksBroadcastIsOneWayAndTheRestBothWays) {
  CommBenchRow broadcast = Row("broadcast", 1);
  SetMatchingCeiling(Figures(), 2, &broadcast);
  EXPECT_EQ(broadcast.ceiling_shape(), "tcp_one_way");
  EXPECT_EQ(broadcast.ceiling_gbps(), 4);
  EXPECT_EQ(broadcast.busbw_fraction_of_ceiling(), 0.25);
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter",
                         "all_to_all", "all_to_allv"}) {
    CommBenchRow row = Row(op, 1);
    SetMatchingCeiling(Figures(), 2, &row);
    EXPECT_EQ(row.ceiling_shape(), "tcp_both_ways") << op;
    EXPECT_EQ(row.busbw_fraction_of_ceiling(), 0.5) << op;
  }
}

TEST(MatchingCeiling, ThreeRanksArePeersAndOtherSizesSaySoAndOneRankHasNone) {
  CommBenchRow three = Row("broadcast", 0.5);
  SetMatchingCeiling(Figures(), 3, &three);
  EXPECT_EQ(three.ceiling_shape(), "tcp_2_peers");
  EXPECT_EQ(three.busbw_fraction_of_ceiling(), 0.5);
  CommBenchRow four = Row("all_reduce", 0.5);
  SetMatchingCeiling(Figures(), 4, &four);
  EXPECT_EQ(four.ceiling_shape(), "tcp_2_peers (measured at 3 processes)");
  CommBenchRow one = Row("all_reduce", 0.5);
  SetMatchingCeiling(Figures(), 1, &one);
  EXPECT_EQ(one.ceiling_gbps(), 0);
  EXPECT_EQ(one.ceiling_shape(), "");
}

TEST(MatchingCeiling, MarkdownHasTheFractionColumnOnlyWithACeiling) {
  CommBenchResult result;
  CommBenchRow row = Row("all_gather", 1);
  SetMatchingCeiling(Figures(), 2, &row);
  *result.add_rows() = row;
  result.add_summaries()->set_op("all_gather");
  EXPECT_THAT(RenderMarkdown(result), Not(HasSubstr("busbw / ceiling")));
  *result.mutable_ceiling() = Figures();
  const std::string markdown = RenderMarkdown(result);
  EXPECT_THAT(markdown, HasSubstr("busbw / ceiling"));
  EXPECT_THAT(markdown, HasSubstr("50% of tcp_both_ways 2.00 GB/s"));
}

TEST(Ceiling, MeasuresEveryShapeBetweenRealProcesses) {
  CeilingOptions options;
  options.bytes = 1 << 20;
  options.rounds = 2;
  absl::StatusOr<Ceiling> ceiling = MeasureCeiling(options);
  ASSERT_TRUE(ceiling.ok()) << ceiling.status();
  EXPECT_GT(ceiling->memcpy_bytes_per_second, 0);
  EXPECT_GT(ceiling->tcp_one_way, 0);
  EXPECT_GT(ceiling->tcp_both_ways, 0);
  EXPECT_GT(ceiling->tcp_peers, 0);
  EXPECT_LE(ceiling->tcp_peers_min, ceiling->tcp_peers);
  EXPECT_LE(ceiling->tcp_peers, ceiling->tcp_peers_max);
  EXPECT_EQ(ceiling->peers_world_size, 3);
  const CommBenchCeiling proto = CeilingProto(*ceiling, options);
  EXPECT_EQ(proto.bytes(), 1 << 20);
  EXPECT_DOUBLE_EQ(proto.tcp_both_ways_gbps(), ceiling->tcp_both_ways / 1e9);
}

TEST(MatchingCeiling, ShmRowsGetNoTcpCeilingAndBeatingBy10PercentIsInvalid) {
  // TCP figures do not bound shared memory: a shm row keeps what the sweep
  // measured (or nothing).
  CommBenchRow shm = Row("all_gather", 1);
  SetMatchingCeiling(Figures(), 2, &shm, "shm");
  EXPECT_EQ(shm.ceiling_gbps(), 0);
  CommBenchRow within = Row("all_to_allv", 10.9);
  SetCeiling(10, "shm all_to_all in this sweep", &within);
  EXPECT_EQ(within.ceiling_gbps(), 10);
  EXPECT_NEAR(within.busbw_fraction_of_ceiling(), 1.09, 1e-12);
  EXPECT_FALSE(within.ceiling_invalid());
  CommBenchRow beyond = Row("all_to_all", 11.1);
  SetCeiling(10, "shm all_to_all in this sweep", &beyond);
  EXPECT_TRUE(beyond.ceiling_invalid());
  // A TCP row beating the TCP ceiling is invalid too.
  CommBenchRow tcp = Row("all_gather", 2.3);
  SetMatchingCeiling(Figures(), 2, &tcp, "tcp");
  EXPECT_TRUE(tcp.ceiling_invalid());
}

CommBenchRow Measured(const std::string& op, int64_t bytes, double busbw, double ceiling) {
  CommBenchRow row = Row(op, busbw);
  row.set_bytes(bytes);
  row.set_placement("out_of_place");
  SetCeiling(ceiling, "shm " + op + " in this sweep", &row);
  return row;
}

TEST(CeilingReport, EveryRowWithinItsCeilingBoundsAndShowsItsPercent) {
  CommBenchResult result;
  *result.add_rows() = Measured("all_reduce", 1 << 20, 5, 10);
  *result.add_rows() = Measured("all_gather", 1 << 20, 10.5, 10);  // noise, within 10%
  bool invalid = true;
  int rows = 0;
  const std::string report = CeilingReport(result, &invalid, &rows);
  EXPECT_FALSE(invalid);
  EXPECT_EQ(rows, 2);
  EXPECT_THAT(report, HasSubstr("50%"));
  EXPECT_THAT(report, HasSubstr("105%"));
  EXPECT_THAT(report, HasSubstr("verdict: ceiling bounds every row"));
}

TEST(CeilingReport, APlantedRowOverItsCeilingMakesItInvalidAndIsNamed) {
  CommBenchResult result;
  *result.add_rows() = Measured("all_reduce", 1 << 20, 5, 10);
  *result.add_rows() = Measured("reduce_scatter", 16 << 20, 11.5, 10);  // planted: 115%
  bool invalid = false;
  int rows = 0;
  const std::string report = CeilingReport(result, &invalid, &rows);
  EXPECT_TRUE(invalid);
  EXPECT_THAT(report,
              HasSubstr("CEILING INVALID: reduce_scatter 16777216 B out_of_place (115%)"));
  EXPECT_THAT(report, Not(HasSubstr("ceiling bounds every row")));
}

TEST(CeilingReport, NoRowWithACeilingIsInvalid) {
  CommBenchResult result;
  *result.add_rows() = Row("all_reduce", 5);
  bool invalid = false;
  int rows = -1;
  EXPECT_THAT(CeilingReport(result, &invalid, &rows), HasSubstr("no row has a ceiling"));
  EXPECT_TRUE(invalid);
  EXPECT_EQ(rows, 0);
}

// A point's ceiling measured k times from a stub source, alternated with
// its rows: the order, and the best of k used.
TEST(AlternateCeilingAndRows, MeasuresBeforeBetweenAndAfterTheRowsAndKeepsEveryMeasurement) {
  std::string order;
  const std::vector<double> source = {30, 8, 31};
  int next = 0;
  absl::StatusOr<CeilingSamples> samples = AlternateCeilingAndRows(
      3, 2,
      [&]() -> absl::StatusOr<double> {
        order += "m";
        return source[next++];
      },
      [&](int row) {
        absl::StrAppend(&order, "r", row);
        return absl::OkStatus();
      });
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_EQ(order, "mr0mr1m");
  EXPECT_EQ(samples->gbps, source);
  EXPECT_EQ(samples->Best(), 31);
  EXPECT_EQ(samples->Slowest(), 8);

  // More measurements than gaps: the rest after the last row; fewer: rows
  // still all run.
  order.clear();
  next = 0;
  ASSERT_TRUE(AlternateCeilingAndRows(
                  3, 1, [&]() -> absl::StatusOr<double> { order += "m"; return source[next++]; },
                  [&](int row) { absl::StrAppend(&order, "r", row); return absl::OkStatus(); })
                  .ok());
  EXPECT_EQ(order, "mr0mm");
  order.clear();
  next = 0;
  ASSERT_TRUE(AlternateCeilingAndRows(
                  1, 2, [&]() -> absl::StatusOr<double> { order += "m"; return source[next++]; },
                  [&](int row) { absl::StrAppend(&order, "r", row); return absl::OkStatus(); })
                  .ok());
  EXPECT_EQ(order, "mr0r1");
}

TEST(AlternateCeilingAndRows, AnErrorOfAMeasurementOrARowStopsIt) {
  int rows_run = 0;
  absl::StatusOr<CeilingSamples> failed = AlternateCeilingAndRows(
      3, 2, []() -> absl::StatusOr<double> { return absl::InternalError("peer gone"); },
      [&](int) { ++rows_run; return absl::OkStatus(); });
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(rows_run, 0);
  int measured = 0;
  failed = AlternateCeilingAndRows(
      3, 2, [&]() -> absl::StatusOr<double> { return ++measured; },
      [](int) { return absl::DeadlineExceededError("row timed out"); });
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(measured, 1);
}

// One slow measurement (8 GB/s among 30 and 31) cannot make the ceiling
// invalid: the row at 32 GB/s is within 110% of the best, 31. Measured once,
// that slow reading alone would have flagged it (the failure this guards).
TEST(SetBestCeiling, OneSlowOutlierCannotMakeTheCeilingInvalid) {
  CeilingSamples samples;
  samples.gbps = {30, 8, 31};
  CommBenchRow row = Row("broadcast", 32);
  SetBestCeiling(samples, "shm broadcast in this sweep", &row);
  EXPECT_EQ(row.ceiling_gbps(), 31);
  EXPECT_EQ(row.ceiling_measurements(), 3);
  EXPECT_EQ(row.ceiling_min_gbps(), 8);
  EXPECT_NEAR(row.busbw_fraction_of_ceiling(), 32.0 / 31.0, 1e-12);
  EXPECT_FALSE(row.ceiling_invalid());

  CommBenchRow once = Row("broadcast", 32);
  SetCeiling(8, "shm broadcast in this sweep", &once);
  EXPECT_TRUE(once.ceiling_invalid());

  // The report shows the count and the slowest measurement.
  CommBenchResult result;
  row.set_bytes(1 << 20);
  row.set_placement("in_place");
  *result.add_rows() = row;
  bool invalid = true;
  int rows = 0;
  const std::string report = CeilingReport(result, &invalid, &rows);
  EXPECT_FALSE(invalid);
  EXPECT_THAT(report, HasSubstr("3: 8.00"));
  EXPECT_THAT(report, HasSubstr("verdict: ceiling bounds every row"));
}

// Negative case: an op faster than every one of the k measurements by more
// than 10% still makes the ceiling invalid (taking the best does not hide a
// ceiling that does not bound).
TEST(SetBestCeiling, AnOpBeatingEveryMeasurementByMoreThan10PercentIsStillInvalid) {
  CeilingSamples samples;
  samples.gbps = {20, 21, 22};
  CommBenchRow row = Row("all_gather", 24.3);  // 110.5% of the best, 22
  SetBestCeiling(samples, "shm all_gather in this sweep", &row);
  EXPECT_EQ(row.ceiling_gbps(), 22);
  EXPECT_TRUE(row.ceiling_invalid());
  CommBenchResult result;
  row.set_bytes(16 << 20);
  row.set_placement("out_of_place");
  *result.add_rows() = row;
  bool invalid = false;
  int rows = 0;
  EXPECT_THAT(CeilingReport(result, &invalid, &rows),
              HasSubstr("CEILING INVALID: all_gather 16777216 B out_of_place (110%)"));
  EXPECT_TRUE(invalid);

  // No samples: no ceiling at all (not a ceiling of 0).
  CommBenchRow none = Row("all_gather", 24.3);
  SetBestCeiling(CeilingSamples{}, "shm all_gather in this sweep", &none);
  EXPECT_EQ(none.ceiling_gbps(), 0);
  EXPECT_FALSE(none.ceiling_invalid());
}

// The ceiling's work skips what a rank keeps to itself: rank 0 of 2 never
// writes its own slice of an all-reduce's output nor its own block of an
// all-gather's, and writes every byte that comes from its peer.
TEST(ShmCeilingWork, MovesOnlyWhatComesFromThePeers) {
  constexpr int64_t kChunk = 4096;
  constexpr int64_t kBytes = 3 * kChunk;  // three chunks
  std::vector<char> shared(ShmCeilingSharedBytes(2, kChunk), 1);
  std::vector<char> in(kBytes, 0), out(kBytes, 7);
  ShmCeilingWork work;
  work.world_size = 2;
  work.rank = 0;
  work.chunk_bytes = kChunk;
  work.shared = shared.data();
  work.float_sum = false;
  ShmCeilingCall call;
  call.op = "all_reduce";
  call.bytes = kBytes;
  int64_t step = 0;
  RunShmCeilingWork(work, call, in.data(), out.data(), &step);
  EXPECT_EQ(step, 3);
  for (int64_t chunk = 0; chunk < 3; ++chunk) {
    // Own half of each chunk untouched (7), the peer's half copied out (1).
    EXPECT_EQ(out[chunk * kChunk], 7) << chunk;
    EXPECT_EQ(out[chunk * kChunk + kChunk / 2 - 1], 7) << chunk;
    EXPECT_EQ(out[chunk * kChunk + kChunk / 2], 1) << chunk;
    EXPECT_EQ(out[(chunk + 1) * kChunk - 1], 1) << chunk;
  }
  std::fill(out.begin(), out.end(), 7);
  call.op = "all_gather";
  RunShmCeilingWork(work, call, in.data(), out.data(), &step);
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out[kBytes / 2 - 1], 7);
  EXPECT_EQ(out[kBytes / 2], 1);
  EXPECT_EQ(out[kBytes - 1], 1);
}

// The broadcast ceiling does what the transport's pipelined broadcast does:
// every reader copies out exactly what the root copied in, piece by piece
// (a reader never copies a piece before the root has published it), through
// a ring of two chunks the root refills only after the readers are done with
// it. The readers start first and the root 20 ms later: the previous model
// (readers copying the root's chunks with no wait) finished before the root
// began and copied zeros, and fails here; the assertions do not depend on
// the delay. 5 chunks and a partial one, so the ring wraps twice.
TEST(ShmCeilingWork, BroadcastReadersCopyOnlyWhatTheRootHasCopiedIn) {
  constexpr int64_t kChunk = 4096;
  constexpr int64_t kBytes = 5 * kChunk + 100;
  EXPECT_EQ(ShmCeilingBroadcastPieceBytes(int64_t{1} << 20), int64_t{64} << 10);  // the op's
  EXPECT_EQ(ShmCeilingBroadcastPieceBytes(kChunk), 256);
  EXPECT_EQ(ShmCeilingBroadcastPieceBytes(512), 64);
  for (int n : {2, 3}) {
    for (int root : {0, n - 1}) {
      std::vector<char> shared(ShmCeilingSharedBytes(n, kChunk), 0);
      std::vector<int64_t> steps(n, 0);
      for (int call = 0; call < 2; ++call) {  // the step goes on across calls
        std::vector<std::vector<char>> in(n, std::vector<char>(kBytes));
        std::vector<std::vector<char>> out(n, std::vector<char>(kBytes, 0));
        for (int64_t i = 0; i < kBytes; ++i) {
          in[root][i] = static_cast<char>(1 + (i * 7 + call * 13) % 251);
        }
        const auto run = [&](int rank) {
          ShmCeilingWork work;
          work.world_size = n;
          work.rank = rank;
          work.chunk_bytes = kChunk;
          work.shared = shared.data();
          ShmCeilingCall broadcast;
          broadcast.op = "broadcast";
          broadcast.bytes = kBytes;
          broadcast.root = root;
          RunShmCeilingWork(work, broadcast, in[rank].data(), out[rank].data(), &steps[rank]);
        };
        std::vector<std::thread> readers;
        for (int rank = 0; rank < n; ++rank) {
          if (rank != root) readers.emplace_back(run, rank);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        run(root);
        for (std::thread& reader : readers) reader.join();  // the harness's barrier
        for (int rank = 0; rank < n; ++rank) {
          EXPECT_EQ(steps[rank], 6 * (call + 1)) << n << " ranks, rank " << rank;
          if (rank == root) continue;
          int64_t wrong = 0;
          for (int64_t i = 0; i < kBytes; ++i) wrong += out[rank][i] != in[root][i];
          EXPECT_EQ(wrong, 0) << n << " ranks, root " << root << ", reader " << rank
                              << ", call " << call;
        }
      }
    }
  }
}

// Stubbed measurements: a 16 MiB broadcast at 2 ranks whose root copies in
// at 20 GB/s and whose reader copies out at 25 GB/s. Overlapped as the op
// runs them, the reader takes max(copy in, copy out) plus one piece (its lag
// behind the root), and over a loop the root runs at the reader's pace: the
// op's busbw is 19.9 GB/s. The previous ceiling's serial reading, copy in
// then copy out (11.1 GB/s), is beaten by 179%, as the quiet A/B's 146-185%
// were. The overlapped ceiling's per-rank times are the root's copy in and
// the reader's max + a piece; the slower side (the reader) bounds, which the
// op does not beat; an op 12% faster than max(copy in, copy out) allows is
// still CEILING INVALID.
TEST(SetBestCeiling, TheOverlappedBroadcastCeilingBoundsAnOverlappedOpAndTheSerialOneDoesNot) {
  const double bytes = 16.0 * (1 << 20);
  const double piece = ShmCeilingBroadcastPieceBytes(int64_t{1} << 20);
  const double copy_in = bytes / 20e9, copy_out = bytes / 25e9;
  const auto gbps = [&](double seconds) { return bytes / seconds / 1e9; };
  const double reader = std::max(copy_in, copy_out) + piece / 20e9;
  const double op_seconds = reader;
  const std::string shape = "shm broadcast in this sweep: " + ShmCeilingShapeText("broadcast");
  EXPECT_THAT(shape, HasSubstr("overlapped"));

  CommBenchRow serial = Row("broadcast", gbps(op_seconds));
  serial.set_bytes(16 << 20);
  serial.set_placement("in_place");
  SetBestCeiling(CeilingSamples{{gbps(copy_in + copy_out)}}, "serial", &serial);
  EXPECT_TRUE(serial.ceiling_invalid());
  EXPECT_NEAR(serial.busbw_fraction_of_ceiling(), 1.79, 0.01);

  // The slower side bounds: broadcast's ceiling time is the slowest rank's,
  // every other op's the mean over ranks (as their rows).
  EXPECT_EQ(ShmCeilingSeconds("broadcast", {copy_in, reader}), reader);
  EXPECT_EQ(ShmCeilingSeconds("all_gather", {1, 3}), 2);
  EXPECT_EQ(ShmCeilingSeconds("all_to_allv", {1, 3}), 2);
  EXPECT_EQ(ShmCeilingSeconds("broadcast", {}), 0);
  const double ceiling_seconds = ShmCeilingSeconds("broadcast", {copy_in, reader});
  CommBenchRow overlapped = Row("broadcast", gbps(op_seconds));
  overlapped.set_bytes(16 << 20);
  overlapped.set_placement("in_place");
  SetBestCeiling(CeilingSamples{{gbps(ceiling_seconds)}}, shape, &overlapped);
  EXPECT_FALSE(overlapped.ceiling_invalid());
  EXPECT_NEAR(overlapped.busbw_fraction_of_ceiling(), 1.0, 1e-12);
  CommBenchResult result;
  *result.add_rows() = overlapped;
  bool invalid = true;
  int rows = 0;
  EXPECT_THAT(CeilingReport(result, &invalid, &rows), HasSubstr("overlapped"));
  EXPECT_FALSE(invalid);

  // Negative: an op 12% faster than the overlapped copies allow.
  CommBenchRow impossible = Row("broadcast", gbps(std::max(copy_in, copy_out)) * 1.12);
  SetBestCeiling(CeilingSamples{{gbps(ceiling_seconds)}}, shape, &impossible);
  EXPECT_TRUE(impossible.ceiling_invalid());
}

TEST(Ceiling, BadOptionsAreInvalidArgument) {
  CeilingOptions options;
  options.peers_world_size = 2;
  EXPECT_EQ(MeasureCeiling(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mtb::comm_bench
