// The host's ceiling for collective bandwidth: what two or
// more processes on this host can move over loopback TCP in the shapes a
// collective needs, and memcpy bandwidth. Plain sockets between forked
// processes: this measures the transport Gloo runs on, it is not a transport
// for the collectives (those go through //common/collective only).
#ifndef MTB_COMM_BENCH_CEILING_H_
#define MTB_COMM_BENCH_CEILING_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm_bench/comm_bench.pb.h"

namespace mtb::comm_bench {

struct CeilingOptions {
  int64_t bytes = int64_t{64} << 20;  // per peer and direction, per round
  int rounds = 5;
  int peers_world_size = 3;  // processes in the n-1-peers shape (>= 3)
};

// Bytes per second each process moves, median over rounds of the slowest
// process (the figure busbw is compared with: busbw assumes every rank
// moves its bytes at once).
struct Ceiling {
  double memcpy_bytes_per_second = 0;
  // Two processes, one sends, the other receives.
  double tcp_one_way = 0;
  // Two processes, each sends to and receives from the other at once.
  double tcp_both_ways = 0;
  // peers_world_size processes, each sending to and receiving from every
  // other at once; the figure is one process's sent bytes (all peers).
  double tcp_peers = 0;
  int peers_world_size = 0;
  // min..max over rounds of the same figures, for the noise.
  double tcp_one_way_min = 0, tcp_one_way_max = 0;
  double tcp_both_ways_min = 0, tcp_both_ways_max = 0;
  double tcp_peers_min = 0, tcp_peers_max = 0;
};

// Forks the processes it needs; call before starting threads.
absl::StatusOr<Ceiling> MeasureCeiling(const CeilingOptions& options);

// The result file's figures (GB/s); the caller fills context.
CommBenchCeiling CeilingProto(const Ceiling& ceiling,
                              const CeilingOptions& options);

// The ceiling a row of `op` at `world_size` ranks is compared with: at 2
// ranks broadcast moves one way (tcp one way) and every other collective
// sends and receives at once (tcp both ways); from 3 ranks every rank talks
// to n-1 peers at once (tcp peers, measured at ceiling.peers_world_size
// processes; the shape's name says so when that is not world_size). Sets
// the row's ceiling fields (SetCeiling); leaves them unset at 1 rank,
// without a figure, or when the transport is not "tcp" (shared-memory rows
// get the ceiling the sweep measures, shm_ceiling.h: TCP does not bound them).
void SetMatchingCeiling(const CommBenchCeiling& ceiling, int world_size,
                        CommBenchRow* row, const std::string& transport = "tcp");

// Sets the row's ceiling, its shape and busbw / ceiling; a busbw above 1.1 x
// the ceiling sets ceiling_invalid (the ceiling does not bound).
void SetCeiling(double ceiling_gbps, const std::string& shape, CommBenchRow* row);

// A point's shared-memory ceiling measured several times (GB/s, in the
// order measured).
struct CeilingSamples {
  std::vector<double> gbps;
  double Best() const;     // the fastest: what bounds
  double Slowest() const;  // with Best(), the spread
};

// Runs a point's `rows` rows (`run_row(0..rows-1)`) and `measurements`
// ceiling measurements (`measure()`) alternated: a measurement before the
// first row and after each row while any are left, the rest after the last
// row (3 and 2 rows: m r m r m). One slow measurement (the copies fell out
// of cache, a neighbour took the core) cannot pull the ceiling down: the
// best of them is used (SetBestCeiling). An error of either stops it.
absl::StatusOr<CeilingSamples> AlternateCeilingAndRows(
    int measurements, int rows, const std::function<absl::StatusOr<double>()>& measure,
    const std::function<absl::Status(int row)>& run_row);

// SetCeiling with the best of `samples`, and how many there were and the
// slowest (ceiling_measurements, ceiling_min_gbps). Nothing without samples.
void SetBestCeiling(const CeilingSamples& samples, const std::string& shape, CommBenchRow* row);

// //comm_bench:ceiling's report of a comm_bench result: one line per row
// with a ceiling (op, size, placement, busbw, ceiling, % of ceiling, shape),
// then a verdict line: "ceiling bounds every row" or "CEILING INVALID: ..."
// naming the rows that beat it. `*invalid` says which; `*rows_with_ceiling`
// how many rows had one (0 is a failure too: nothing was compared).
std::string CeilingReport(const CommBenchResult& result, bool* invalid, int* rows_with_ceiling);

}  // namespace mtb::comm_bench

#endif  // MTB_COMM_BENCH_CEILING_H_
