// The mixture-of-experts layer's math, written functionally (parameters passed
// in) so the single-process reference below and moe_comm's expert-parallel
// layer run the same routing, capacity and loss code (docs/moe_comm.md).
//
// Vocabulary. N tokens of width D are routed among E experts. The *router* is
// a linear layer D -> E (plus a constant bias that moe_comm's benchmark uses
// to skew the loads); softmax over E gives each token's *router
// probabilities*; the k largest are the token's *assignments* (slot 0 the
// best), and their probabilities renormalised to sum to 1 over the k chosen
// are the *gates*. An expert takes at most *capacity* assignments from each
// *source* (a rank's slice of the batch): the assignments to an expert are
// ordered by router probability, highest first, ties by token index then slot,
// and those past the capacity are *dropped* (they contribute zero; the
// residual path around the layer is the caller's). Each expert is a 2-layer
// GELU MLP (nn::Mlp, D -> F -> D). The output of a token is the gate-weighted
// sum of its kept assignments' expert outputs.
//
// Losses from routing statistics over all T tokens of the batch (every source):
//   aux (Switch/GShard load balancing) = E * sum_e f_e * P_e, where
//     f_e = assignments routed to e (before capacity, all k slots) / (T * k)
//     P_e = mean over tokens of the router probability of e;
//   z (router z-loss, ST-MoE) = mean over tokens of logsumexp(logits)^2.
#ifndef MTB_COMMON_NN_MOE_H_
#define MTB_COMMON_NN_MOE_H_

#include <cstdint>
#include <vector>

#include "ATen/core/Tensor.h"

namespace mtb {
namespace nn {

// Experts stacked along dim 0 (torch.nn.Linear layout per expert). A rank of
// the expert-parallel layer holds its block of experts; the router is whole.
struct MoeParams {
  at::Tensor router_weight;  // (E, D)
  at::Tensor router_bias;    // (E) constant (not trained) or undefined
  at::Tensor fc_weight;      // (E_held, F, D)
  at::Tensor fc_bias;        // (E_held, F)
  at::Tensor proj_weight;    // (E_held, D, F)
  at::Tensor proj_bias;      // (E_held, D)
};

// ceil(capacity_factor * local_tokens * top_k / num_experts): assignments
// one expert takes from one source (Megatron's per-rank form), in exact
// integer arithmetic on the factor's shortest decimal (1.1 is 11/10) and at
// most local_tokens * top_k (all of them): a huge factor keeps every
// assignment instead of overflowing. capacity_factor finite and > 0.
int64_t ExpertCapacity(double capacity_factor, int64_t local_tokens, int top_k,
                       int num_experts);

struct Routing {
  at::Tensor logits;   // (N, E) float32
  at::Tensor probs;    // (N, E) softmax of logits
  at::Tensor experts;  // (N, k) int64, slot 0 the most probable
  at::Tensor scores;   // (N, k) router probability of each assignment
  at::Tensor gates;    // (N, k) scores renormalised over the k; differentiable
};

// Router, softmax, top-k and gates for x: (N, D).
Routing Route(const at::Tensor& x, const at::Tensor& router_weight,
              const at::Tensor& router_bias, int top_k);

// (N, k) bool: the assignments one source's expert capacity keeps, in the
// order documented above. experts, scores: (N, k) from Route on that source.
at::Tensor KeepWithinCapacity(const at::Tensor& experts,
                              const at::Tensor& scores, int num_experts,
                              int64_t capacity);

// The sums behind the losses, over some tokens: per-expert assignment counts
// (float32, before capacity), per-expert sums of router probabilities
// (differentiable), the sum of logsumexp(logits)^2 (differentiable).
struct RouterSums {
  at::Tensor counts;     // (E)
  at::Tensor prob_sums;  // (E)
  at::Tensor lse_square_sum;  // ()
};
RouterSums SumRouterStatistics(const Routing& routing, int num_experts);

// aux and z above from sums over all `tokens` tokens of the batch.
at::Tensor LoadBalancingLoss(const at::Tensor& counts,
                             const at::Tensor& prob_sums, int64_t tokens,
                             int top_k);
at::Tensor RouterZLoss(const at::Tensor& lse_square_sum, int64_t tokens);

// Expert `expert` of `params` (an index into its stacked block) on rows:
// (M, D) -> (M, D).
at::Tensor ExpertForward(const MoeParams& params, int64_t expert,
                         const at::Tensor& rows);

struct MoeOutput {
  at::Tensor out;       // (N, D)
  at::Tensor aux_loss;  // ()
  at::Tensor z_loss;    // ()
  at::Tensor kept;      // (N, k) bool
  Routing routing;
};

// The single-process reference: the whole layer (all E experts in `params`)
// on x: (sources * local_tokens, D), the concatenated batch of `sources`
// equal slices, capacity applied per slice as each source rank applies it.
MoeOutput ReferenceMoe(const MoeParams& params, const at::Tensor& x, int top_k,
                       double capacity_factor, int sources);

}  // namespace nn
}  // namespace mtb

#endif  // MTB_COMMON_NN_MOE_H_
