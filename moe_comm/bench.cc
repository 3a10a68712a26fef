#include "moe_comm/bench.h"

#include <algorithm>
#include <vector>

#include "ATen/ATen.h"
#include "absl/time/clock.h"
#include "common/base/stats.h"
#include "common/base/status.h"
#include "common/collective/traffic.h"
#include "common/libtorch/torch_status.h"
#include "moe_comm/layer.h"
#include "moe_comm/model.h"

namespace mtb::moe_comm {
namespace {

TimeSummary Times(const std::vector<std::vector<double>>& seconds_per_rank) {
  std::vector<double> all;
  double slowest = 0;
  for (const std::vector<double>& rank : seconds_per_rank) {
    all.insert(all.end(), rank.begin(), rank.end());
    slowest = std::max(slowest, Mean(rank));
  }
  TimeSummary summary;
  summary.set_mean_ms(1e3 * Mean(all));
  summary.set_p50_ms(1e3 * Percentile(all, 50));
  summary.set_p99_ms(1e3 * Percentile(all, 99));
  summary.set_slowest_rank_mean_ms(1e3 * slowest);
  return summary;
}

Bandwidth BandwidthOf(double mean_bytes, double bottleneck_bytes,
                      double mean_ms, int n) {
  Bandwidth bw;
  const double seconds = mean_ms / 1e3;
  if (seconds <= 0) return bw;
  const double factor =
      collective::BusBandwidthFactor(collective::CollectiveOp::kAllToAllV, n);
  bw.set_algbw_gbps(mean_bytes / seconds / 1e9);
  bw.set_busbw_gbps(bw.algbw_gbps() * factor);
  bw.set_bottleneck_algbw_gbps(bottleneck_bytes / seconds / 1e9);
  bw.set_bottleneck_busbw_gbps(bw.bottleneck_algbw_gbps() * factor);
  return bw;
}

}  // namespace

absl::StatusOr<ConfigResult> RunBenchmarkConfig(const MoeConfig& config,
                                                const MoeCommOptions& options,
                                                collective::Communicator& comm,
                                                const PhaseHook& before_phase) {
  const int n = comm.world_size(), rank = comm.rank();
  const absl::Time start = absl::Now();
  return CallGuarded("moe benchmark", [&]() -> absl::StatusOr<ConfigResult> {
    const MoeInstance instance = SeededInstance(config, options.seed(), n);
    const nn::MoeParams block = ExpertBlock(instance.whole, rank, n);
    const at::Tensor x = RankRows(instance.x, rank, n).contiguous();
    LayerOptions layer;
    layer.num_experts = config.num_experts();
    layer.top_k = config.top_k();
    layer.capacity_factor = config.capacity_factor();
    layer.before_phase = before_phase;

    at::NoGradGuard no_grad;
    std::vector<double> dispatch, combine, expert;
    LayerTrace trace;
    at::Tensor aux, z;
    for (int i = 0; i < options.warmup_iters() + options.iters(); ++i) {
      ASSIGN_OR_RETURN(LayerOutput output, ExpertParallelMoe(block, x, layer, comm));
      if (i >= options.warmup_iters()) {
        dispatch.push_back(output.trace.dispatch_seconds);
        combine.push_back(output.trace.combine_seconds);
        expert.push_back(output.trace.expert_seconds);
      }
      trace = std::move(output.trace);
      aux = output.aux_loss;
      z = output.z_loss;
    }

    // Per rank: [dispatch, combine, expert times, bytes sent, received, sent to
    // others, received from others], all-gathered.
    const int64_t row_bytes = int64_t{4} * config.hidden();
    int64_t sent = 0, received = 0;
    for (int p = 0; p < n; ++p) {
      sent += trace.send_counts[p] * row_bytes;
      received += trace.recv_counts[p] * row_bytes;
    }
    const collective::Traffic others = collective::AllToAllVTraffic(
        trace.send_counts, trace.recv_counts, row_bytes, rank);
    const int iters = options.iters();
    std::vector<double> mine(dispatch);
    mine.insert(mine.end(), combine.begin(), combine.end());
    mine.insert(mine.end(), expert.begin(), expert.end());
    for (int64_t v : {sent, received, others.sent, others.received}) {
      mine.push_back(static_cast<double>(v));
    }
    const at::Tensor local = at::tensor(mine, at::kDouble);
    at::Tensor gathered = at::empty({n * local.numel()}, at::kDouble);
    RETURN_IF_ERROR(comm.AllGather(local, gathered));
    const double* g = gathered.data_ptr<double>();
    const int64_t width = local.numel();

    ConfigResult result;
    *result.mutable_config() = config;
    result.set_capacity(trace.capacity);
    std::vector<std::vector<double>> dispatch_by_rank(n), combine_by_rank(n),
        expert_by_rank(n);
    double mean_bytes = 0, bottleneck_bytes = -1;
    for (int p = 0; p < n; ++p) {
      const double* row = g + p * width;
      dispatch_by_rank[p].assign(row, row + iters);
      combine_by_rank[p].assign(row + iters, row + 2 * iters);
      expert_by_rank[p].assign(row + 2 * iters, row + 3 * iters);
      const int64_t s = static_cast<int64_t>(row[3 * iters]);
      const int64_t r = static_cast<int64_t>(row[3 * iters + 1]);
      result.add_dispatch_bytes_sent(s);
      result.add_dispatch_bytes_received(r);
      result.add_dispatch_bytes_sent_to_others(static_cast<int64_t>(row[3 * iters + 2]));
      result.add_dispatch_bytes_received_from_others(
          static_cast<int64_t>(row[3 * iters + 3]));
      mean_bytes += static_cast<double>(s) / n;
      if (std::max(s, r) > bottleneck_bytes) {
        bottleneck_bytes = static_cast<double>(std::max(s, r));
        result.set_bottleneck_rank(p);
      }
    }
    *result.mutable_dispatch() = Times(dispatch_by_rank);
    *result.mutable_combine() = Times(combine_by_rank);
    *result.mutable_expert_compute() = Times(expert_by_rank);
    *result.mutable_dispatch_bandwidth() = BandwidthOf(
        mean_bytes, bottleneck_bytes, result.dispatch().mean_ms(), n);
    *result.mutable_combine_bandwidth() = BandwidthOf(
        mean_bytes, bottleneck_bytes, result.combine().mean_ms(), n);

    result.set_drop_rate(static_cast<double>(trace.global_dropped) /
                         static_cast<double>(trace.global_assignments));
    double max_load = 0, total_load = 0;
    for (int64_t e = 0; e < trace.global_counts.numel(); ++e) {
      const double load = trace.global_counts[e].item<double>();
      result.add_expert_load(std::llround(load));
      max_load = std::max(max_load, load);
      total_load += load;
    }
    const double mean_load = total_load / trace.global_counts.numel();
    result.set_imbalance(mean_load > 0 ? max_load / mean_load : 0);
    result.set_aux_loss(aux.item<double>());
    result.set_z_loss(z.item<double>());
    result.set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
    return result;
  });
}

}  // namespace mtb::moe_comm
