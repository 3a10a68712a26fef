#include "common/nn/moe.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "ATen/ATen.h"
#include "common/nn/layers.h"
#include "glog/logging.h"

namespace mtb {
namespace nn {

int64_t ExpertCapacity(double capacity_factor, int64_t local_tokens, int top_k,
                       int num_experts) {
  CHECK_GT(capacity_factor, 0);
  CHECK_GT(num_experts, 0);
  return static_cast<int64_t>(std::ceil(
      capacity_factor * static_cast<double>(local_tokens * top_k) /
      num_experts));
}

Routing Route(const at::Tensor& x, const at::Tensor& router_weight,
              const at::Tensor& router_bias, int top_k) {
  CHECK(top_k >= 1 && top_k <= router_weight.size(0)) << "top_k " << top_k;
  Routing routing;
  routing.logits = at::linear(x, router_weight, router_bias);  // (N, E)
  routing.probs = at::softmax(routing.logits, -1);
  // topk is sorted, and among equal values it keeps the lower index first.
  std::tie(routing.scores, routing.experts) =
      at::topk(routing.probs, top_k, /*dim=*/-1, /*largest=*/true,
               /*sorted=*/true);
  routing.gates = routing.scores / routing.scores.sum(-1, /*keepdim=*/true);
  return routing;
}

at::Tensor KeepWithinCapacity(const at::Tensor& experts,
                              const at::Tensor& scores, int num_experts,
                              int64_t capacity) {
  CHECK_EQ(experts.dim(), 2);
  const int64_t tokens = experts.size(0), k = experts.size(1);
  const at::Tensor expert_of = experts.to(at::kLong).contiguous();
  const at::Tensor score_of = scores.detach().to(at::kFloat).contiguous();
  const int64_t* e = expert_of.data_ptr<int64_t>();
  const float* s = score_of.data_ptr<float>();
  // Per expert: (score, token, slot) of every assignment routed to it.
  std::vector<std::vector<std::tuple<float, int64_t, int64_t>>> queue(
      num_experts);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t slot = 0; slot < k; ++slot) {
      const int64_t expert = e[t * k + slot];
      CHECK(expert >= 0 && expert < num_experts) << expert;
      queue[expert].emplace_back(s[t * k + slot], t, slot);
    }
  }
  at::Tensor kept = at::zeros({tokens, k}, at::kBool);
  bool* keep = kept.data_ptr<bool>();
  for (auto& assignments : queue) {
    std::stable_sort(assignments.begin(), assignments.end(),
                     [](const auto& a, const auto& b) {
                       if (std::get<0>(a) != std::get<0>(b))
                         return std::get<0>(a) > std::get<0>(b);
                       if (std::get<1>(a) != std::get<1>(b))
                         return std::get<1>(a) < std::get<1>(b);
                       return std::get<2>(a) < std::get<2>(b);
                     });
    const int64_t keep_count =
        std::min<int64_t>(capacity, static_cast<int64_t>(assignments.size()));
    for (int64_t i = 0; i < keep_count; ++i) {
      keep[std::get<1>(assignments[i]) * k + std::get<2>(assignments[i])] = true;
    }
  }
  return kept;
}

RouterSums SumRouterStatistics(const Routing& routing, int num_experts) {
  RouterSums sums;
  sums.counts = at::bincount(routing.experts.reshape({-1}), /*weights=*/{},
                             num_experts)
                    .to(at::kFloat);
  sums.prob_sums = routing.probs.sum(0);
  sums.lse_square_sum = at::logsumexp(routing.logits, -1).pow(2).sum();
  return sums;
}

at::Tensor LoadBalancingLoss(const at::Tensor& counts,
                             const at::Tensor& prob_sums, int64_t tokens,
                             int top_k) {
  const int64_t num_experts = counts.size(0);
  const at::Tensor fraction = counts / static_cast<double>(tokens * top_k);
  const at::Tensor mean_prob = prob_sums / static_cast<double>(tokens);
  return (fraction * mean_prob).sum() * static_cast<double>(num_experts);
}

at::Tensor RouterZLoss(const at::Tensor& lse_square_sum, int64_t tokens) {
  return lse_square_sum / static_cast<double>(tokens);
}

at::Tensor ExpertForward(const MoeParams& params, int64_t expert,
                         const at::Tensor& rows) {
  MlpParams mlp;
  mlp.fc_weight = params.fc_weight[expert];
  mlp.fc_bias = params.fc_bias[expert];
  mlp.proj_weight = params.proj_weight[expert];
  mlp.proj_bias = params.proj_bias[expert];
  return Mlp(mlp, rows);
}

MoeOutput ReferenceMoe(const MoeParams& params, const at::Tensor& x, int top_k,
                       double capacity_factor, int sources) {
  const int64_t total = x.size(0);
  const int num_experts = static_cast<int>(params.router_weight.size(0));
  CHECK_EQ(params.fc_weight.size(0), num_experts);
  CHECK_EQ(total % sources, 0);
  const int64_t local_tokens = total / sources;
  const int64_t capacity =
      ExpertCapacity(capacity_factor, local_tokens, top_k, num_experts);

  MoeOutput result;
  result.routing = Route(x, params.router_weight, params.router_bias, top_k);
  const Routing& routing = result.routing;
  std::vector<at::Tensor> kept_slices;
  for (int source = 0; source < sources; ++source) {
    const int64_t begin = source * local_tokens;
    kept_slices.push_back(KeepWithinCapacity(
        routing.experts.slice(0, begin, begin + local_tokens),
        routing.scores.slice(0, begin, begin + local_tokens), num_experts,
        capacity));
  }
  result.kept = at::cat(kept_slices, 0);

  // Each expert's rows in (token, slot) order: the order in which the
  // expert-parallel layer's expert sees them (source rank, then token).
  const at::Tensor experts = routing.experts.reshape({-1});  // (N * k)
  const at::Tensor kept = result.kept.reshape({-1});
  const at::Tensor gates = routing.gates.reshape({-1, 1});  // (N * k, 1)
  at::Tensor out = at::zeros_like(x);
  for (int expert = 0; expert < num_experts; ++expert) {
    const at::Tensor assignment =
        at::nonzero(kept & (experts == expert)).reshape({-1});
    if (assignment.numel() == 0) continue;
    const at::Tensor token = at::floor_divide(assignment, top_k);
    const at::Tensor y = ExpertForward(params, expert, x.index_select(0, token));
    out = out.index_add(0, token, y * gates.index_select(0, assignment));
  }
  result.out = out;

  const RouterSums sums = SumRouterStatistics(routing, num_experts);
  result.aux_loss = LoadBalancingLoss(sums.counts, sums.prob_sums, total, top_k);
  result.z_loss = RouterZLoss(sums.lse_square_sum, total);
  return result;
}

}  // namespace nn
}  // namespace mtb
