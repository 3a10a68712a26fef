// `planner calibrate`: a cluster file from this machine's own measurements
// (docs/planner.md, "Calibration"). comm_bench result files give each
// collective's latency and bus bandwidth per message-size range and
// transport; one-rank trainer results give the model FLOP/s of a step's
// forward and backward per precision and model width (a table by shape),
// the optimizer's memory bandwidth and the GEMM probe's peak. Every number
// names its file and the commit it was measured on.
#ifndef MTB_PLANNER_CALIBRATE_H_
#define MTB_PLANNER_CALIBRATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm_bench/comm_bench.pb.h"
#include "planner/cluster.pb.h"
#include "trainer/train_result.pb.h"

namespace mtb::planner {

// Message sizes (S, bytes) where one fit ends and the next begins: latency
// dominates below 64 KiB, bandwidth above 1 MiB.
inline constexpr int64_t kFitRangeBounds[] = {int64_t{64} << 10, int64_t{1} << 20};

// Least-squares fits t(S) = latency x steps + wire(S) / bandwidth of every
// all_reduce, all_gather and reduce_scatter row (out-of-place rows when the
// file has both placements) in each size range with at least two sizes; a
// negative intercept is clamped to 0 (the bandwidth then fits through the
// origin). `scope`: "intra" for one host. `file` names the source.
std::vector<CollectiveFit> FitCommBench(const comm_bench::CommBenchResult& result,
                                        const std::string& file, const std::string& scope);

// The forward + backward model FLOP/s of one rank of a trainer result (timed
// steps of every run: flops_per_token x tokens per rank / (step_ms -
// optimizer_ms)), with its precision, d_model and the ranks that shared the
// host (its world size: CPU ranks compete for cores). ddp's gradient
// all-reduces wait in optimizer_ms (AfterBackward), so its forward and
// backward hold no waiting; kInvalidArgument for a multi-rank result of
// another strategy (they communicate inside forward and backward), or one
// without timed steps.
absl::StatusOr<ComputeRate> RateFromTrainResult(const TrainResult& result, const std::string& file);
// AdamW's streaming bandwidth in GB/s: kOptimizerBytesPerParameter x P /
// optimizer_ms (the same steps) of a one-rank result (kInvalidArgument
// otherwise: its optimizer_ms would include the gradient all-reduces).
absl::StatusOr<Sourced> OptimizerBandwidthFromTrainResult(const TrainResult& result,
                                                          const std::string& file);

struct CalibrateOptions {
  std::string name;
  std::vector<std::string> comm_bench_files;
  std::vector<std::string> trainer_files;
  std::string scope = "intra";
  // This host's memory (common/base/host_memory.h) and where it was read.
  int64_t host_memory_bytes = 0;
  std::string host_memory_source;
};

// Reads every file (kInvalidArgument naming a file that does not parse, or
// when no comm_bench or no one-rank trainer file is given) and writes the
// cluster: the optimizer bandwidth the mean of the one-rank files';
// one node of cpu_cores devices that ranks share (the trainer's runs give
// the cores), the host's memory divided among them.
absl::StatusOr<Cluster> Calibrate(const CalibrateOptions& options);

}  // namespace mtb::planner

#endif  // MTB_PLANNER_CALIBRATE_H_
