#include "planner/calibrate.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/results/json_io.h"
#include "planner/cluster.h"
#include "planner/cost_model.h"
#include "planner/predict.h"
#include "planner/strategy_traits.h"
#include "trainer/config/config_names.h"

namespace mtb::planner {
namespace {

std::string Provenance(const mtb::RunContext& context, const std::string& file) {
  return absl::StrCat("measured: ", file, " @ ",
                      context.git_commit().empty() ? "unknown commit" : context.git_commit(),
                      context.git_dirty() ? " (dirty)" : "", " on ", context.hostname(), " ",
                      context.start_time_utc());
}

bool ParseCollective(const std::string& name, Collective* op) {
  if (name == "all_reduce")
    *op = Collective::kAllReduce;
  else if (name == "all_gather")
    *op = Collective::kAllGather;
  else if (name == "reduce_scatter")
    *op = Collective::kReduceScatter;
  else
    return false;
  return true;
}

int RangeOf(int64_t bytes) {
  int range = 0;
  for (int64_t bound : kFitRangeBounds) {
    if (bytes >= bound) ++range;
  }
  return range;
}

}  // namespace

std::vector<CollectiveFit> FitCommBench(const comm_bench::CommBenchResult& result,
                                        const std::string& file, const std::string& scope) {
  const int n = result.options().world_size();
  const std::string transport = result.options().backend() == "nccl" ? "nccl" : "tcp";
  bool has_out_of_place = false;
  for (const auto& row : result.rows()) {
    has_out_of_place |= row.placement() == "out_of_place";
  }
  // (op, range) -> (wire bytes, microseconds, S) points.
  struct Point {
    double wire, time_us;
    int64_t bytes;
  };
  std::map<std::pair<std::string, int>, std::vector<Point>> points;
  for (const auto& row : result.rows()) {
    Collective op;
    if (!ParseCollective(row.op(), &op) || row.time_us() <= 0) continue;
    if (has_out_of_place && row.placement() != "out_of_place") continue;
    points[{row.op(), RangeOf(row.bytes())}].push_back(
        {static_cast<double>(WireBytes(op, row.bytes(), n)), row.time_us(), row.bytes()});
  }
  std::vector<CollectiveFit> fits;
  const int last_range = static_cast<int>(std::size(kFitRangeBounds));
  for (const auto& [key, series] : points) {
    const auto& [name, range] = key;
    std::set<int64_t> sizes;
    for (const Point& p : series) sizes.insert(p.bytes);
    if (sizes.size() < 2) continue;
    Collective op;
    ParseCollective(name, &op);
    double mw = 0, mt = 0;
    for (const Point& p : series) {
      mw += p.wire;
      mt += p.time_us;
    }
    mw /= series.size();
    mt /= series.size();
    double sww = 0, swt = 0;
    for (const Point& p : series) {
      sww += (p.wire - mw) * (p.wire - mw);
      swt += (p.wire - mw) * (p.time_us - mt);
    }
    double slope = sww > 0 ? swt / sww : 0;  // us per wire byte
    double intercept = mt - slope * mw;
    if (intercept < 0 || slope <= 0) {
      double w2 = 0, wt = 0;
      for (const Point& p : series) {
        w2 += p.wire * p.wire;
        wt += p.wire * p.time_us;
      }
      intercept = 0;
      slope = wt / w2;
    }
    CollectiveFit fit;
    fit.set_collective(name);
    fit.set_scope(scope);
    fit.set_transport(transport);
    fit.set_min_bytes(range == 0 ? 0 : kFitRangeBounds[range - 1]);
    fit.set_max_bytes(range == last_range ? 0 : kFitRangeBounds[range] - 1);
    fit.set_world_size(n);
    const std::string how =
        absl::StrFormat("%s (comm_bench %s, %d ranks, %s, %d sizes %d..%d bytes, least squares)",
                        Provenance(result.context(), file), name, n, result.options().backend(),
                        static_cast<int>(sizes.size()), *sizes.begin(), *sizes.rbegin());
    fit.mutable_latency_us()->set_value(intercept / AlgorithmSteps(op, n));
    fit.mutable_latency_us()->set_source(how);
    fit.mutable_bandwidth_gbps()->set_value(1e-3 / slope);
    fit.mutable_bandwidth_gbps()->set_source(how);
    fits.push_back(std::move(fit));
  }
  return fits;
}

namespace {

struct TimedSums {
  int steps = 0;
  double compute_ms = 0;
  double optimizer_ms = 0;
};

absl::StatusOr<TimedSums> TimedSteps(const TrainResult& result, const std::string& file) {
  const int world = result.run_context().world_size();
  const std::string strategy = ConfigName(result.config().strategy());
  if (world > 1 && !SyncsGradientsByAllReduce(strategy)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--trainer=", file, " ran ", strategy, " on ", world,
                     " ranks: calibrate compute from ddp runs (the other strategies "
                     "communicate inside forward and backward)"));
  }
  TimedSums sums;
  for (const TrainRun& run : result.runs()) {
    for (const StepRecord& step : run.steps()) {
      if (!step.timed()) continue;
      ++sums.steps;
      sums.compute_ms += step.step_ms() - step.optimizer_ms();
      sums.optimizer_ms += step.optimizer_ms();
    }
  }
  if (sums.steps == 0 || sums.compute_ms <= 0 || sums.optimizer_ms <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--trainer=", file, " has no timed steps to calibrate from"));
  }
  return sums;
}

}  // namespace

absl::StatusOr<ComputeRate> RateFromTrainResult(const TrainResult& result,
                                                const std::string& file) {
  ASSIGN_OR_RETURN(const TimedSums sums, TimedSteps(result, file));
  const int world = std::max(1, result.run_context().world_size());
  const double flops = result.model().flops_per_token() *
                       static_cast<double>(result.model().tokens_per_step()) / world * sums.steps;
  ComputeRate rate;
  rate.set_precision(ConfigName(result.config().precision()));
  rate.set_d_model(result.config().d_model());
  rate.set_ranks_per_node(world);
  rate.mutable_flops_per_second()->set_value(flops / (sums.compute_ms * 1e-3));
  rate.mutable_flops_per_second()->set_source(
      absl::StrCat(Provenance(result.run_context(), file), " (trainer, ",
                   ConfigName(result.config().strategy()), " on ", world, " rank(s), d_model ",
                   result.config().d_model(), ", batch ", result.config().batch_size(), ", ",
                   sums.steps, " timed steps: model FLOPs / (step_ms - optimizer_ms))"));
  return rate;
}

absl::StatusOr<Sourced> OptimizerBandwidthFromTrainResult(const TrainResult& result,
                                                          const std::string& file) {
  if (result.run_context().world_size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--trainer=", file,
                                                   ": the optimizer bandwidth comes from one-rank "
                                                   "runs (",
                                                   result.run_context().world_size(),
                                                   " ranks here)"));
  }
  ASSIGN_OR_RETURN(const TimedSums sums, TimedSteps(result, file));
  Sourced bandwidth;
  bandwidth.set_value(kOptimizerBytesPerParameter *
                      static_cast<double>(result.model().parameter_count()) * sums.steps /
                      (sums.optimizer_ms * 1e-3) / 1e9);
  bandwidth.set_source(
      absl::StrCat(Provenance(result.run_context(), file), " (", kOptimizerBytesPerParameter,
                   " bytes x ", result.model().parameter_count(),
                   " parameters / optimizer_ms over ", sums.steps, " timed steps)"));
  return bandwidth;
}

absl::StatusOr<Cluster> Calibrate(const CalibrateOptions& options) {
  if (options.comm_bench_files.empty() || options.trainer_files.empty()) {
    return absl::InvalidArgumentError(
        "calibrate needs --comm_bench=FILE[,FILE...] (comm_bench results) and "
        "--trainer=FILE[,FILE...] (one-rank trainer results)");
  }
  Cluster cluster;
  cluster.set_schema_version(kClusterSchemaVersion);
  cluster.set_name(options.name);
  cluster.set_oversubscribed_ranks_share_devices(true);
  for (const std::string& file : options.comm_bench_files) {
    comm_bench::CommBenchResult result;
    if (absl::Status read = ReadJsonFile(file, &result); !read.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--comm_bench=", file, ": ", read.message()));
    }
    for (CollectiveFit& fit : FitCommBench(result, file, options.scope)) {
      *cluster.add_collectives() = std::move(fit);
    }
  }
  double bandwidth_sum = 0;
  std::vector<std::string> bandwidth_sources;
  for (const std::string& file : options.trainer_files) {
    TrainResult result;
    if (absl::Status read = ReadJsonFile(file, &result); !read.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--trainer=", file, ": ", read.message()));
    }
    ASSIGN_OR_RETURN(ComputeRate rate, RateFromTrainResult(result, file));
    *cluster.add_compute() = rate;
    if (result.run_context().world_size() == 1) {
      ASSIGN_OR_RETURN(Sourced bandwidth, OptimizerBandwidthFromTrainResult(result, file));
      bandwidth_sum += bandwidth.value();
      bandwidth_sources.push_back(bandwidth.source());
    }
    if (result.peak_flops().rank_flops_per_second() > 0) {
      ComputeRate* peak = cluster.add_peak();
      peak->set_precision(ConfigName(result.config().precision()));
      peak->mutable_flops_per_second()->set_value(result.peak_flops().rank_flops_per_second());
      peak->mutable_flops_per_second()->set_source(absl::StrCat(
          Provenance(result.run_context(), file), " (", result.peak_flops().source(), ")"));
    }
    if (!cluster.has_devices_per_node()) {
      const int cores = std::max(1, result.run_context().cpu_cores());
      cluster.mutable_devices_per_node()->set_value(cores);
      cluster.mutable_devices_per_node()->set_source(absl::StrCat(
          Provenance(result.run_context(), file), " (run_context.cpu_cores: one rank per core)"));
      cluster.mutable_nodes()->set_value(1);
      cluster.mutable_nodes()->set_source(
          absl::StrCat("measured: one host, ", result.run_context().hostname()));
      cluster.mutable_device_memory_bytes()->set_value(
          static_cast<double>(options.host_memory_bytes) / cores);
      cluster.mutable_device_memory_bytes()->set_source(
          absl::StrCat("measured: ", options.host_memory_source, " / ", cores, " cores"));
    }
  }
  // Only one peak per precision: keep the first.
  std::set<std::string> seen;
  google::protobuf::RepeatedPtrField<ComputeRate> peaks;
  for (const ComputeRate& peak : cluster.peak()) {
    if (seen.insert(peak.precision()).second) *peaks.Add() = peak;
  }
  *cluster.mutable_peak() = peaks;
  if (bandwidth_sources.empty()) {
    return absl::InvalidArgumentError(
        "calibrate needs at least one one-rank --trainer result (the "
        "optimizer's bandwidth)");
  }
  cluster.mutable_memory_bandwidth_gbps()->set_value(bandwidth_sum / bandwidth_sources.size());
  cluster.mutable_memory_bandwidth_gbps()->set_source(
      absl::StrCat("mean of: ", absl::StrJoin(bandwidth_sources, "; ")));
  RETURN_IF_ERROR(ValidateCluster(cluster, "calibrated cluster"));
  return cluster;
}

}  // namespace mtb::planner
