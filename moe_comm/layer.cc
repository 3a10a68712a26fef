// Vocabulary: an *assignment* is (token, slot), flat index token * k + slot;
// its *destination* is the rank holding its expert; the *send buffer* holds
// the kept assignments' input rows in packing order; the *received buffer*
// holds, per source rank in rank order, that source's rows grouped by local
// expert.
#include "moe_comm/layer.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <tuple>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status.h"
#include "common/nn/expert_parallel.h"
#include "common/libtorch/torch_status.h"

namespace mtb::moe_comm {
namespace {

std::vector<int64_t> ToVector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(),
                              c.data_ptr<int64_t>() + c.numel());
}

}  // namespace

absl::StatusOr<LayerOutput> ExpertParallelMoe(const nn::MoeParams& params,
                                              const at::Tensor& x,
                                              const LayerOptions& options,
                                              collective::Communicator& comm) {
  const int n = comm.world_size(), rank = comm.rank();
  const int num_experts = options.num_experts, k = options.top_k;
  if (num_experts <= 0 || num_experts % n != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_experts ", num_experts, " is not divisible by world size ", n));
  }
  const int experts_per_rank = num_experts / n;
  if (params.router_weight.size(0) != num_experts ||
      params.fc_weight.size(0) != experts_per_rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank, " holds ", params.fc_weight.size(0), " experts and a ",
        params.router_weight.size(0), "-way router; expected ",
        experts_per_rank, " and ", num_experts));
  }
  try {
    const int64_t tokens = x.size(0);
    LayerOutput result;
    LayerTrace& trace = result.trace;
    const nn::Routing routing =
        nn::Route(x, params.router_weight, params.router_bias, k);
    trace.capacity =
        nn::ExpertCapacity(options.capacity_factor, tokens, k, num_experts);
    const at::Tensor kept = nn::KeepWithinCapacity(
        routing.experts, routing.scores, num_experts, trace.capacity);

    // Global routing statistics, one all-reduce: [counts (E), prob sums (E),
    // lse^2 sum, kept assignments, tokens]. The losses take the global sums
    // with only this rank's part differentiable, so each rank's backward
    // yields its own tokens' share of the router gradient.
    const nn::RouterSums sums = nn::SumRouterStatistics(routing, num_experts);
    at::Tensor global = at::cat(
        {sums.counts, sums.prob_sums.detach(),
         sums.lse_square_sum.detach().reshape({1}),
         kept.sum().to(at::kFloat).reshape({1}),
         at::full({1}, static_cast<double>(tokens), at::kFloat)});
    RETURN_IF_ERROR(comm.AllReduce(global, collective::ReduceOp::kSum));
    trace.global_counts = global.slice(0, 0, num_experts);
    const at::Tensor global_prob_sums =
        sums.prob_sums +
        (global.slice(0, num_experts, 2 * num_experts) -
         sums.prob_sums.detach());
    const at::Tensor global_lse_square_sum =
        sums.lse_square_sum +
        (global[2 * num_experts] - sums.lse_square_sum.detach());
    const int64_t global_tokens =
        std::llround(global[2 * num_experts + 2].item<double>());
    trace.global_assignments = global_tokens * k;
    trace.global_dropped =
        trace.global_assignments -
        std::llround(global[2 * num_experts + 1].item<double>());
    result.aux_loss = nn::LoadBalancingLoss(trace.global_counts,
                                            global_prob_sums, global_tokens, k);
    result.z_loss = nn::RouterZLoss(global_lse_square_sum, global_tokens);

    // Packing order of the kept assignments.
    const std::vector<int64_t> expert_of = ToVector(routing.experts.reshape({-1}));
    const at::Tensor kept_flat = kept.reshape({-1}).contiguous();
    const bool* keep = kept_flat.data_ptr<bool>();
    std::vector<std::tuple<int64_t, int64_t, int64_t>> keyed;  // (major, minor, a)
    std::vector<int64_t> counts_by_expert(num_experts, 0);
    for (int64_t a = 0; a < static_cast<int64_t>(expert_of.size()); ++a) {
      if (!keep[a]) continue;
      const int64_t expert = expert_of[a];
      const int64_t destination = expert / experts_per_rank;
      const int64_t local_expert = expert % experts_per_rank;
      ++counts_by_expert[expert];
      if (options.packing == PackingOrder::kDestinationThenExpert) {
        keyed.emplace_back(destination, local_expert, a);
      } else {
        keyed.emplace_back(local_expert, destination, a);
      }
    }
    std::sort(keyed.begin(), keyed.end());
    std::vector<int64_t> order;
    order.reserve(keyed.size());
    for (const auto& key : keyed) order.push_back(std::get<2>(key));
    const at::Tensor assignment = at::tensor(order, at::kLong);  // (A)
    const at::Tensor token = at::floor_divide(assignment, k);
    trace.send_counts.assign(n, 0);
    for (int e = 0; e < num_experts; ++e) {
      trace.send_counts[e / experts_per_rank] += counts_by_expert[e];
    }

    // Counts first: rank p gets this rank's counts for p's experts.
    const at::Tensor send_expert_counts = at::tensor(counts_by_expert, at::kLong);
    at::Tensor recv_expert_counts = at::empty({num_experts}, at::kLong);
    RETURN_IF_ERROR(comm.AllToAll(send_expert_counts, recv_expert_counts));
    trace.recv_counts_by_expert =
        recv_expert_counts.reshape({n, experts_per_rank});
    trace.recv_counts = ToVector(trace.recv_counts_by_expert.sum(1));

    const at::Tensor send_rows = x.index_select(0, token);  // (A, D)
    if (options.before_phase) options.before_phase("dispatch");
    absl::Time start = absl::Now();
    const at::Tensor dispatched = nn::AllToAllVWithGrad(
        send_rows, trace.send_counts, trace.recv_counts, &comm);
    trace.dispatch_seconds = absl::ToDoubleSeconds(absl::Now() - start);
    trace.dispatched = dispatched.detach();

    // Each local expert's rows, source by source; then back to received order.
    const std::vector<int64_t> received =
        ToVector(trace.recv_counts_by_expert.reshape({-1}));
    start = absl::Now();
    std::vector<at::Tensor> expert_rows, expert_outputs;
    for (int j = 0; j < experts_per_rank; ++j) {
      std::vector<int64_t> rows;
      int64_t offset = 0;
      for (int source = 0; source < n; ++source) {
        int64_t begin = offset;
        for (int i = 0; i < j; ++i) begin += received[source * experts_per_rank + i];
        for (int64_t r = 0; r < received[source * experts_per_rank + j]; ++r) {
          rows.push_back(begin + r);
        }
        for (int i = 0; i < experts_per_rank; ++i) {
          offset += received[source * experts_per_rank + i];
        }
      }
      const at::Tensor index = at::tensor(rows, at::kLong);
      expert_rows.push_back(index);
      expert_outputs.push_back(
          nn::ExpertForward(params, j, dispatched.index_select(0, index)));
    }
    const at::Tensor grouped = at::cat(expert_rows);  // received row per output
    at::Tensor inverse = at::empty_like(grouped);
    inverse.index_copy_(0, grouped, at::arange(grouped.numel(), at::kLong));
    const at::Tensor expert_out = at::cat(expert_outputs).index_select(0, inverse);

    trace.expert_seconds = absl::ToDoubleSeconds(absl::Now() - start);
    if (options.before_phase) options.before_phase("combine");
    start = absl::Now();
    const at::Tensor combined = nn::AllToAllVWithGrad(
        expert_out, trace.recv_counts, trace.send_counts, &comm);
    trace.combine_seconds = absl::ToDoubleSeconds(absl::Now() - start);

    const at::Tensor gates =
        routing.gates.reshape({-1}).index_select(0, assignment).unsqueeze(1);
    result.out = at::zeros_like(x).index_add(0, token, combined * gates);
    return result;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("moe layer on rank ", rank, ": ", e.what()));
  }
}

}  // namespace mtb::moe_comm
