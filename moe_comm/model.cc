#include "moe_comm/model.h"

#include <cmath>
#include <vector>

#include "ATen/ATen.h"
#include "common/base/skew.h"
#include "common/equivalence/equivalence.h"
#include "moe_comm/options.h"

namespace mtb::moe_comm {

// The seeded tensors' word (equivalence::SeededTensors' check key).
constexpr uint64_t kMoeKey = 16;

MoeInstance SeededInstance(const MoeConfig& config, uint64_t seed,
                           int world_size) {
  const int64_t e = config.num_experts(), d = config.hidden();
  const int64_t f = config.ffn_hidden();
  const int64_t tokens = int64_t{world_size} * config.tokens_per_rank();
  equivalence::SeededTensors seeded(seed, kMoeKey);
  MoeInstance instance;
  nn::MoeParams& p = instance.whole;
  // Unit-variance logits for unit-variance inputs.
  p.router_weight = seeded.Normal({e, d}, 1.0 / std::sqrt(d));
  const std::vector<double> weights =
      SkewWeights(SkewOf(config), static_cast<int>(e));
  std::vector<float> bias;
  for (double w : weights) bias.push_back(static_cast<float>(std::log(w)));
  p.router_bias = at::tensor(bias, at::kFloat);
  p.fc_weight = seeded.Normal({e, f, d}, 1.0 / std::sqrt(d));
  p.fc_bias = seeded.Normal({e, f}, 0.1);
  p.proj_weight = seeded.Normal({e, d, f}, 1.0 / std::sqrt(f));
  p.proj_bias = seeded.Normal({e, d}, 0.1);
  instance.x = seeded.Normal({tokens, d}, 1.0);
  instance.upstream = seeded.Normal({tokens, d}, 1.0);
  return instance;
}

nn::MoeParams ExpertBlock(const nn::MoeParams& whole, int rank,
                          int world_size) {
  const int64_t per_rank = whole.fc_weight.size(0) / world_size;
  const int64_t begin = rank * per_rank, end = begin + per_rank;
  nn::MoeParams block;
  block.router_weight = whole.router_weight;
  block.router_bias = whole.router_bias;
  block.fc_weight = whole.fc_weight.slice(0, begin, end);
  block.fc_bias = whole.fc_bias.slice(0, begin, end);
  block.proj_weight = whole.proj_weight.slice(0, begin, end);
  block.proj_bias = whole.proj_bias.slice(0, begin, end);
  return block;
}

at::Tensor RankRows(const at::Tensor& all, int rank, int world_size) {
  const int64_t per_rank = all.size(0) / world_size;
  return all.slice(0, rank * per_rank, (rank + 1) * per_rank);
}

}  // namespace mtb::moe_comm
