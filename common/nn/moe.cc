#include "common/nn/moe.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <system_error>
#include <tuple>

#include "ATen/ATen.h"
#include "common/nn/layers.h"
#include "glog/logging.h"

namespace mtb {
namespace nn {

int64_t ExpertCapacity(double capacity_factor, int64_t local_tokens, int top_k,
                       int num_experts) {
  CHECK(capacity_factor > 0 && std::isfinite(capacity_factor)) << capacity_factor;
  CHECK_GT(num_experts, 0);
  CHECK_GE(local_tokens, 0);
  CHECK_GE(top_k, 1);
  const int64_t assignments = local_tokens * top_k;
  CHECK_LT(assignments, int64_t{1} << 40);
  if (assignments == 0) return 0;
  // cf * assignments / E >= assignments: the bound.
  if (capacity_factor >= num_experts) return assignments;
  // The factor as the decimal the user wrote (the shortest that round-trips:
  // 1.1 is 11 / 10, not the binary double just above it), so the ceiling is
  // exact: digits * 10^exponent.
  char text[64];
  const std::to_chars_result written =
      std::to_chars(text, text + sizeof(text), capacity_factor, std::chars_format::scientific);
  CHECK(written.ec == std::errc());
  const std::string scientific(text, written.ptr);  // "1.25e+00"
  const size_t e = scientific.find('e');
  std::string digits_text = scientific.substr(0, e);
  digits_text.erase(std::remove(digits_text.begin(), digits_text.end(), '.'), digits_text.end());
  const int exponent = std::stoi(scientific.substr(e + 1)) -
                       static_cast<int>(digits_text.size() - 1);
  const unsigned __int128 digits = std::stoull(digits_text);  // < 10^17
  unsigned __int128 numerator = digits * static_cast<unsigned __int128>(assignments);  // < 2^97
  unsigned __int128 denominator = static_cast<unsigned __int128>(num_experts);
  if (exponent >= 0) {
    // An integral factor below num_experts: small.
    for (int i = 0; i < exponent; ++i) numerator *= 10;
  } else {
    // 10^30 exceeds any numerator: the ceiling of a positive fraction < 1.
    if (-exponent >= 30) return 1;
    for (int i = 0; i < -exponent; ++i) denominator *= 10;  // < 2^31 * 10^29 < 2^128
  }
  const unsigned __int128 capacity = (numerator + denominator - 1) / denominator;
  return std::min(static_cast<int64_t>(std::min<unsigned __int128>(
                      capacity, static_cast<unsigned __int128>(assignments))),
                  assignments);
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
